//! End-to-end: `profile --bench CONFIG` (speed_bench.py's name for a whole
//! SPEED-Bench config), `--limit N` (the first N rows of each category, in
//! file order) and `--category all`, through the binary against the
//! simulated server. SPEED-Bench comes from a pre-staged bundle of the
//! fixture, as the `--public-dataset` tests read it, with the Hub offline
//! and at a dead address.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
use speedbench_record::{RequestRecord, RunManifest};
use speedbench_sim::SimConfig;

/// A bundle holding the fixture as SPEED-Bench's qualitative config (33
/// rows: three per category, each category's first row two turns long,
/// `reasoning-001` three).
fn qualitative_bundle(dir: &Path) -> PathBuf {
    let bundle = dir.join("bundle");
    let rows = std::fs::read_to_string(fixture()).unwrap();
    speedbench_dataset::bundle::stage_rows(
        &bundle,
        "speed_bench_qualitative",
        &rows,
        None,
        None,
        "test",
    )
    .unwrap();
    bundle
}

/// The fixture's rows as `(question_id, category, user turns)`, in file
/// order, read as plain JSON (not through the dataset crate).
fn fixture_rows() -> Vec<(String, String, usize)> {
    std::fs::read_to_string(fixture())
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["question_id"].as_str().unwrap().to_string(),
                v["category"].as_str().unwrap().to_string(),
                v["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|m| m["role"] == "user")
                    .count(),
            )
        })
        .collect()
}

/// `speedbench profile ARGS --url URL --osl 16 --output-artifact-dir DIR`,
/// with the Hub offline and unreachable.
async fn profile(url: &str, out_dir: &Path, args: &[&str]) -> Output {
    let out = bin()
        .arg("profile")
        .args(args)
        .args([
            "--url",
            url,
            "--osl",
            "16",
            "--output-artifact-dir",
            out_dir.to_str().unwrap(),
        ])
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .output()
        .await
        .unwrap();
    eprintln!(
        "stderr of {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Every profiled request as `(conversation, turn) -> prompt_sha256`.
fn prompts(records: &[RequestRecord]) -> BTreeMap<(String, u32), String> {
    let mut out = BTreeMap::new();
    for r in records.iter().filter(|r| !r.warmup) {
        let hash = r
            .prompt_sha256
            .clone()
            .expect("a prompt hash on every record");
        let old = out.insert((r.conversation_id.clone(), r.turn_index), hash);
        assert!(
            old.is_none(),
            "{} turn {} sent twice",
            r.conversation_id,
            r.turn_index
        );
    }
    out
}

fn run_json(dir: &Path) -> RunManifest {
    serde_json::from_str(&std::fs::read_to_string(dir.join(RunManifest::FILE_NAME)).unwrap())
        .unwrap()
}

fn assert_fails_naming(out: &Output, code: i32, needles: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} not in stderr:\n{err}");
    }
    assert!(!err.contains("panicked"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_with_a_limit_sends_the_first_rows_of_each_category_the_same_on_every_run() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = qualitative_bundle(dir.path());
    let server = sim(SimConfig::speed_bench_demo()).await;
    let args = |concurrency: &'static str| {
        [
            "--bench",
            "qualitative",
            "--dataset-cache",
            bundle.to_str().unwrap(),
            "--limit",
            "2",
            "--concurrency",
            concurrency,
        ]
        .map(String::from)
    };
    let (first, second) = (dir.path().join("first"), dir.path().join("second"));
    let a = args("1");
    let out = profile(&server.url(), &first, &a.each_ref().map(String::as_str)).await;
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--limit 2: 22 of 33 rows kept"), "{stderr}");
    // Another run, at another concurrency.
    let b = args("4");
    let out = profile(&server.url(), &second, &b.each_ref().map(String::as_str)).await;
    assert!(out.status.success());
    server.shutdown().await;

    // The expected rows, from the fixture file itself: the first two of
    // each category in file order.
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut expected_rows = BTreeSet::new();
    let mut expected_turns = 0;
    for (id, category, turns) in fixture_rows() {
        let n = seen.entry(category).or_default();
        *n += 1;
        if *n <= 2 {
            expected_rows.insert(id);
            expected_turns += turns;
        }
    }
    assert_eq!(expected_rows.len(), 22);
    assert!(expected_rows.contains("coding-001") && !expected_rows.contains("coding-002"));

    let records = read_run(&first).unwrap().records;
    assert!(records.iter().all(|r| r.is_success()));
    let ids: BTreeSet<String> = records.iter().map(|r| r.conversation_id.clone()).collect();
    assert_eq!(ids, expected_rows);
    // Every turn of every kept row, once: multi-turn rows stay whole.
    assert_eq!(records.len(), expected_turns);
    assert_eq!(prompts(&records).len(), expected_turns);
    assert!(
        records
            .iter()
            .any(|r| r.conversation_id == "reasoning-001" && r.turn_index == 2)
    );
    assert!(
        records
            .iter()
            .all(|r| r.dataset == "speed_bench_qualitative")
    );

    // The second run asked exactly the same things.
    let again = read_run(&second).unwrap().records;
    assert_eq!(prompts(&again), prompts(&records));

    // run.json says the run was limited, and what --bench stood for.
    let m = run_json(&first);
    assert_eq!(m.limit_per_category(), Some(2));
    assert_eq!(m.dataset, "speed_bench_qualitative");
    assert_eq!(m.config["bench"], "qualitative");
    assert_eq!(m.config["public_dataset"], "speed_bench_qualitative");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn category_all_is_no_category_filter() {
    let dir = tempfile::tempdir().unwrap();
    let server = sim(SimConfig::speed_bench_demo()).await;
    let input = fixture();
    let input = input.to_str().unwrap();
    let (all, none) = (dir.path().join("all"), dir.path().join("none"));
    let out = profile(
        &server.url(),
        &all,
        &["--input-file", input, "--category", "all"],
    )
    .await;
    assert!(out.status.success());
    let out = profile(&server.url(), &none, &["--input-file", input]).await;
    assert!(out.status.success());
    server.shutdown().await;
    let (a, n) = (
        read_run(&all).unwrap().records,
        read_run(&none).unwrap().records,
    );
    // Every row of the fixture, every turn.
    let total: usize = fixture_rows().iter().map(|r| r.2).sum();
    assert_eq!(prompts(&a).len(), total);
    assert_eq!(prompts(&a), prompts(&n));
    // Not limited: run.json records no limit.
    assert_eq!(run_json(&all).limit_per_category(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_applies_to_input_files_and_uncategorised_rows_before_the_run_is_sized() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mixed.jsonl");
    std::fs::write(
        &file,
        concat!(
            r#"{"question_id":"n1","turns":["no category one"]}"#,
            "\n",
            r#"{"question_id":"m1","category":"math","turns":["math one","math one again"]}"#,
            "\n",
            r#"{"question_id":"n2","turns":["no category two"]}"#,
            "\n",
            r#"{"question_id":"m2","category":"math","turns":["math two"]}"#,
            "\n",
            r#"{"question_id":"q1","category":"qa","turns":["qa one"]}"#,
            "\n",
        ),
    )
    .unwrap();
    let server = sim(SimConfig::speed_bench_demo()).await;
    let run_dir = dir.path().join("run");
    // Five conversations over the three rows kept (n1, m1, q1): the limit
    // cuts the dataset first, then --num-conversations recycles what is left.
    let out = profile(
        &server.url(),
        &run_dir,
        &[
            "--input-file",
            file.to_str().unwrap(),
            "--limit",
            "1",
            "--num-conversations",
            "5",
        ],
    )
    .await;
    server.shutdown().await;
    assert!(out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--limit 1: 3 of 5 rows kept"), "{stderr}");
    let records = read_run(&run_dir).unwrap().records;
    let ids: BTreeSet<&str> = records.iter().map(|r| r.conversation_id.as_str()).collect();
    assert_eq!(ids, BTreeSet::from(["n1", "m1", "q1"]));
    // n1, m1 (2 turns), q1, n1, m1 (2 turns).
    assert_eq!(records.len(), 7);
    assert_eq!(run_json(&run_dir).limit_per_category(), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_bench_limit_and_category_values_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture();
    let input = input.to_str().unwrap();
    let out_dir = dir.path().join("never");
    // Nothing here reaches a server: the address is dead.
    let url = "http://127.0.0.1:9";

    let out = profile(url, &out_dir, &["--input-file", input, "--limit", "0"]).await;
    assert_fails_naming(&out, 2, &["'0'", "--limit", "at least 1"]);
    let out = profile(url, &out_dir, &["--input-file", input, "--limit", "two"]).await;
    assert_fails_naming(&out, 2, &["'two'", "--limit", "not a whole number"]);

    let out = profile(url, &out_dir, &["--bench", "throughput_4k"]).await;
    let mut needles = vec!["'throughput_4k'", "--bench"];
    needles.extend(speedbench_dataset::registry::SPEED_BENCH_CONFIGS);
    assert_fails_naming(&out, 2, &needles);

    for other in [
        ["--public-dataset", "speed_bench_qualitative"],
        ["--input-file", input],
    ] {
        let mut args = vec!["--bench", "qualitative"];
        args.extend(other);
        let out = profile(url, &out_dir, &args).await;
        assert_fails_naming(&out, 2, &["--bench", other[0], "cannot be used with"]);
    }

    let out = profile(
        url,
        &out_dir,
        &["--input-file", input, "--category", "all,coding"],
    )
    .await;
    assert_fails_naming(&out, 1, &["--category", "\"all\"", "\"coding\""]);
    assert!(
        !out_dir.exists(),
        "a refused run wrote {}",
        out_dir.display()
    );
}

/// `--bench` speaks speed_bench.py's vocabulary, so it takes speed_bench.py's
/// sampling defaults (`{"temperature":0}`; `--osl` given here); without it
/// AIPerf's hold (nothing sent). Every run says what it sends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_takes_speed_bench_pys_sampling_defaults_and_every_run_says_its_sampling() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = qualitative_bundle(dir.path());
    let bundle = bundle.to_str().unwrap();
    let server = sim(SimConfig::speed_bench_demo()).await;
    let bench = [
        "--bench",
        "qualitative",
        "--dataset-cache",
        bundle,
        "--limit",
        "1",
    ];
    let out = profile(&server.url(), &dir.path().join("bench"), &bench).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("sampling: max_tokens 16 (--osl), temperature 0 (--extra-inputs)\n"),
        "{stderr}"
    );
    assert_eq!(
        run_json(&dir.path().join("bench")).config["extra_inputs"],
        serde_json::json!({"temperature": 0})
    );
    // An --extra-inputs given replaces speed_bench.py's default, as there.
    let mut top_p = bench.to_vec();
    top_p.extend(["--extra-inputs", "top_p:0.5"]);
    let out = profile(&server.url(), &dir.path().join("top_p"), &top_p).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("top_p 0.5 (--extra-inputs), temperature not sent"),
        "{stderr}"
    );
    // Without --bench: AIPerf's defaults, said as such.
    let input = fixture();
    let file = [
        "--input-file",
        input.to_str().unwrap(),
        "--request-count",
        "2",
    ];
    let out = profile(&server.url(), &dir.path().join("file"), &file).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("sampling: max_tokens 16 (--osl), temperature not sent"),
        "{stderr}"
    );
    assert_eq!(
        run_json(&dir.path().join("file")).config["extra_inputs"],
        serde_json::json!({})
    );
    server.shutdown().await;
}
