//! End-to-end: the dataset library's errors name no command-line flag; the
//! binary adds what to do in terms of its own flags and commands. Every case
//! runs without a network (a dead endpoint, an offline Hub cache, or a check
//! that fails before any request).

use crate::common;

use std::path::Path;
use std::process::Output;

use common::*;

/// `speedbench datasets resolve NAME ARGS...` with a Hub at a dead address,
/// no token, and the Hub home in `home`.
async fn resolve(home: &Path, name: &str, args: &[&str], offline: bool) -> Output {
    let mut cmd = bin();
    cmd.args(["datasets", "resolve", name])
        .args(args)
        .env("HF_HOME", home)
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .env_remove("HF_TOKEN")
        .env_remove("HF_TOKEN_PATH")
        .env_remove("HF_HUB_CACHE")
        .env_remove("HUGGINGFACE_HUB_CACHE")
        .env_remove("SPEEDBENCH_PYTHON")
        .env_remove("SPEEDBENCH_PREPARE_SCRIPT")
        .env_remove("TRANSFORMERS_OFFLINE");
    if offline {
        cmd.env("HF_HUB_OFFLINE", "1");
    } else {
        cmd.env_remove("HF_HUB_OFFLINE");
    }
    cmd.output().await.unwrap()
}

fn assert_fails_with(out: &Output, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in stderr:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

/// An offline Hub cache holding SPEED-Bench's `throughput_1k` fixture at the
/// pinned revision: three of its placeholder rows need the prepare step.
fn offline_speed_bench(home: &Path) {
    let snapshot = home
        .join("hub/datasets--nvidia--SPEED-Bench/snapshots")
        .join(speedbench_dataset::registry::SPEED_BENCH_REVISION)
        .join("throughput_1k");
    std::fs::create_dir_all(&snapshot).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    std::fs::copy(
        fixtures.join("hub/nvidia/SPEED-Bench/throughput_1k/test-00000-of-00001.parquet"),
        snapshot.join("test-00000-of-00001.parquet"),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_name_points_at_the_list() {
    let dir = tempfile::tempdir().unwrap();
    let out = resolve(dir.path(), "spec_al_gsm9k", &[], true).await;
    assert_fails_with(
        &out,
        &[
            "did you mean \"spec_al_gsm8k\"",
            "hint: `speedbench datasets` lists every name",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spec_bench_says_where_to_put_the_file_and_which_flag_reads_it() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let out = resolve(
        dir.path(),
        "spec_bench",
        &["--dataset-cache", cache.to_str().unwrap()],
        true,
    )
    .await;
    let place = format!(
        "place it at {}",
        cache.join("spec-bench/question.jsonl").display()
    );
    assert_fails_with(
        &out,
        &[
            "question.jsonl",
            &place,
            "hint: or pass the downloaded file with --input-file",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_without_the_files_points_at_bundles() {
    let dir = tempfile::tempdir().unwrap();
    let out = resolve(dir.path(), "spec_al_gsm8k", &[], true).await;
    assert_fails_with(
        &out,
        &[
            "HF_HUB_OFFLINE is set",
            "openai/gsm8k",
            // A pip user's way, then a checkout's.
            "`speedbench datasets resolve NAME --dataset-cache DIR` fills a cache to copy here",
            "cargo xtask prestage --dataset NAME --out DIR",
            "speedbench datasets import DIR",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_source_without_credentials_points_at_bundles() {
    let dir = tempfile::tempdir().unwrap();
    // No token: refused before any request (the endpoint is dead anyway).
    let out = resolve(dir.path(), "speed_bench_qualitative", &[], false).await;
    assert_fails_with(
        &out,
        &[
            "'cais/hle', which is gated",
            "hf auth login",
            "speedbench datasets import DIR",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_python_names_the_flag_that_chooses_one() {
    let dir = tempfile::tempdir().unwrap();
    offline_speed_bench(dir.path());
    let python = dir.path().join("no-such-python");
    let out = resolve(
        dir.path(),
        "speed_bench_throughput_1k",
        &[
            "--resolver",
            "upstream",
            "--python",
            python.to_str().unwrap(),
            "--dataset-cache",
            dir.path().join("cache").to_str().unwrap(),
        ],
        true,
    )
    .await;
    assert_fails_with(
        &out,
        &[
            "no-such-python` was not found",
            "pip install datasets pandas numpy tiktoken",
            "--python venv/bin/python",
            "cargo xtask prestage",
            "speedbench datasets import DIR",
        ],
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn native_only_names_the_resolvers_that_run_the_prepare_step() {
    let dir = tempfile::tempdir().unwrap();
    offline_speed_bench(dir.path());
    let out = resolve(
        dir.path(),
        "speed_bench_throughput_1k",
        &[
            "--resolver",
            "native",
            "--dataset-cache",
            dir.path().join("cache").to_str().unwrap(),
        ],
        true,
    )
    .await;
    assert_fails_with(
        &out,
        &[
            "cannot rebuild natively",
            "`--resolver auto` or `--resolver upstream`",
            "speedbench datasets import DIR",
        ],
    );
}
