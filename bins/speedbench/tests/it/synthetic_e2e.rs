//! Synthetic prompts of a known token length (`--isl/--osl`), counted by
//! the server's own `/tokenize` in each engine's shape, checked against
//! the simulator's own log: the prompts it was sent and the lengths it
//! counted and generated. A server without `/tokenize` is refused before
//! any request.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use speedbench_record::RequestRecord;
use speedbench_sim::{SimConfig, SpecFlavor};

/// Runs `profile --isl ...` against `server`; its output and directory.
async fn synthetic_profile(
    server: &speedbench_sim::SimServer,
    dir: &std::path::Path,
    extra: &[&str],
) -> (std::process::Output, std::path::PathBuf) {
    let out_dir = dir.join("run");
    let url = server.url();
    let mut args = vec![
        "profile",
        "--url",
        &url,
        "--model",
        "m",
        "--no-server-metrics",
        "--streaming",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    (run(&args).await, out_dir)
}

fn mean_and_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompts_and_outputs_have_their_drawn_lengths_by_the_servers_count() {
    for flavor in [SpecFlavor::Vllm, SpecFlavor::LlamaCpp, SpecFlavor::Sglang] {
        let server = sim(SimConfig::speed_bench_demo().with_flavor(flavor)).await;
        let dir = tempfile::tempdir().unwrap();
        let (out, run_dir) = synthetic_profile(
            &server,
            dir.path(),
            &[
                "--isl",
                "60",
                "--isl-stddev",
                "15",
                "--osl",
                "12",
                "--osl-stddev",
                "3",
                "--num-dataset-entries",
                "40",
                "--request-count",
                "80",
                "--concurrency",
                "4",
            ],
        )
        .await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{flavor:?}: {stderr}");
        assert!(
            stderr.contains("building 40 synthetic prompts of 60 tokens"),
            "{stderr}"
        );
        assert!(
            stderr.contains(
                "sampling: max_tokens per prompt, drawn around 12 (stddev 3; --osl, \
                 --osl-stddev), ignore_eos true (--isl with --osl"
            ),
            "{stderr}"
        );
        let records = read_run(&run_dir).unwrap().records;
        let truth = server.ground_truth();
        assert_eq!(records.len(), 80, "{flavor:?}");
        assert_eq!(truth.requests_log.len(), 80, "{flavor:?}");
        // Every prompt the server read counts, by its own count, what the
        // text holds; each of the 40 prompts was sent twice and asked for
        // the same output length both times, all of which were generated.
        let mut by_prompt: BTreeMap<&str, Vec<(u32, u32)>> = BTreeMap::new();
        for t in &truth.requests_log {
            assert_eq!(
                t.prompt_tokens as usize,
                t.conversation.split_whitespace().count()
            );
            assert!(
                t.truncated,
                "{flavor:?}: an output not forced to its length"
            );
            by_prompt
                .entry(&t.conversation)
                .or_default()
                .push((t.prompt_tokens, t.completion_tokens));
        }
        assert_eq!(by_prompt.len(), 40, "{flavor:?}");
        assert!(by_prompt.values().all(|v| v.len() == 2 && v[0] == v[1]));
        let inputs: Vec<f64> = by_prompt.values().map(|v| f64::from(v[0].0)).collect();
        let outputs: Vec<f64> = by_prompt.values().map(|v| f64::from(v[0].1)).collect();
        let (isl, isl_sd) = mean_and_sd(&inputs);
        let (osl, osl_sd) = mean_and_sd(&outputs);
        assert!(
            (isl - 60.0).abs() < 7.0 && (isl_sd - 15.0).abs() < 6.0,
            "{isl} ± {isl_sd}"
        );
        assert!(
            (osl - 12.0).abs() < 1.6 && (osl_sd - 3.0).abs() < 1.5,
            "{osl} ± {osl_sd}"
        );
        // The records carry the server's counts.
        let served: u64 = truth
            .requests_log
            .iter()
            .map(|t| u64::from(t.prompt_tokens))
            .sum();
        let recorded: u64 = records.iter().filter_map(|r| r.prompt_tokens).sum();
        assert_eq!(recorded, served, "{flavor:?}");
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run_dir.join("run.json")).unwrap()).unwrap();
        let synthetic = &manifest["config"]["synthetic"];
        assert_eq!(synthetic["isl"], 60);
        assert_eq!(synthetic["entries"], 40);
        assert_eq!(manifest["config"]["extra_inputs"]["ignore_eos"], true);
    }
}

/// Lengths from distributions (`--isl-distribution`, `--osl-distribution`,
/// AIPerf's forms): 300 prompts whose lengths at the simulator are only
/// the weighted points' values, in their weights' shares, each asking for
/// an output from a log-normal of mean 20 and median 16 that the simulator
/// generated exactly (the sample's mean and median near them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lengths_follow_aiperfs_distributions_by_the_servers_count() {
    let server = sim(SimConfig::speed_bench_demo()
        .with_ttft_ms(1.0)
        .with_step_ms(0.0))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let isl = r#"{"points": [{"value": 8, "weight": 1}, {"value": 24, "weight": 3}]}"#;
    let osl = r#"{"mean": 20, "median": 16, "max": 80}"#;
    let (out, run_dir) = synthetic_profile(
        &server,
        dir.path(),
        &[
            "--isl-distribution",
            isl,
            "--osl-distribution",
            osl,
            "--num-dataset-entries",
            "300",
            "--concurrency",
            "8",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("drawn from lognormal(mean 20, median 16) in [-, 80] (--osl-distribution)"),
        "{stderr}"
    );
    let truth = server.ground_truth();
    assert_eq!(truth.requests_log.len(), 300);
    let eights = truth
        .requests_log
        .iter()
        .filter(|t| t.prompt_tokens == 8)
        .count();
    assert!(
        truth
            .requests_log
            .iter()
            .all(|t| [8, 24].contains(&t.prompt_tokens))
    );
    assert!(
        (45..=105).contains(&eights),
        "{eights} of 300 at 8 tokens (want ~75)"
    );
    let mut outputs: Vec<f64> = truth
        .requests_log
        .iter()
        .map(|t| f64::from(t.completion_tokens))
        .collect();
    let (mean, _) = mean_and_sd(&outputs);
    outputs.sort_by(f64::total_cmp);
    let median = outputs[outputs.len() / 2];
    assert!((mean - 20.0).abs() < 2.5, "mean {mean}");
    assert!((median - 16.0).abs() < 2.5, "median {median}");
    assert!(outputs.iter().all(|&o| (1.0..=80.0).contains(&o)));
    // Each record asked for what the simulator gave.
    let records = read_run(&run_dir).unwrap().records;
    let server_sum: u64 = truth
        .requests_log
        .iter()
        .map(|t| u64::from(t.completion_tokens))
        .sum();
    assert_eq!(
        records
            .iter()
            .filter_map(|r| r.completion_tokens)
            .sum::<u64>(),
        server_sum
    );
    let config: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(
        config["config"]["synthetic"]["osl_distribution"]["median"],
        16
    );
}

/// `--sequence-distribution` (AIPerf's): input and output lengths drawn
/// together, so every request the simulator served is one of the pairs
/// (8 in and 4 out, or 24 in and 12 out), never a mix, in about their
/// shares.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lengths_drawn_in_pairs_stay_paired() {
    let server = sim(SimConfig::speed_bench_demo()
        .with_ttft_ms(1.0)
        .with_step_ms(0.0))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = synthetic_profile(
        &server,
        dir.path(),
        &[
            "--sequence-distribution",
            "8,4:25;24,12:75",
            "--num-dataset-entries",
            "200",
            "--concurrency",
            "8",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("lengths drawn in pairs (8,4:25;24,12:75)"),
        "{stderr}"
    );
    let truth = server.ground_truth();
    assert_eq!(truth.requests_log.len(), 200);
    let pairs: Vec<(u32, u32)> = truth
        .requests_log
        .iter()
        .map(|t| (t.prompt_tokens, t.completion_tokens))
        .collect();
    assert!(
        pairs.iter().all(|p| *p == (8, 4) || *p == (24, 12)),
        "{pairs:?}"
    );
    let short = pairs.iter().filter(|p| p.0 == 8).count();
    assert!(
        (25..=75).contains(&short),
        "{short} of 200 short (want ~50)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_tokenize_is_refused_before_any_request() {
    let server = sim(SimConfig::speed_bench_demo().with_flavor(SpecFlavor::TrtLlm)).await;
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = synthetic_profile(&server, dir.path(), &["--isl", "20", "--osl", "5"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("/tokenize"), "{stderr}");
    assert!(server.ground_truth().requests_log.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_synthetic_flags_are_refused_before_anything_is_sent() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 9] = [
        (&["--isl", "0"], "--isl"),
        (
            &["--isl", "10", "--isl-distribution", r#"{"mean": 9}"#],
            "cannot be used with",
        ),
        (
            &["--isl-distribution", r#"{"mean": 9, "median": 12}"#],
            "median <= mean",
        ),
        (&["--isl-distribution", "{peaks"], "is not JSON"),
        (&["--isl", "10", "--isl-stddev=-1"], "standard deviation"),
        (
            &["--isl", "10", "--osl-stddev", "4"],
            "--osl-stddev: needs --osl",
        ),
        (
            &["--isl", "10", "--num-dataset-entries", "0"],
            "at least one",
        ),
        (
            &["--isl", "10", "--num-prefix-prompts", "3"],
            "--num-prefix-prompts: needs --prefix-prompt-length",
        ),
        (
            &["--isl", "10", "--prefix-prompt-length", "30"],
            "--prefix-prompt-length: needs --num-prefix-prompts",
        ),
    ];
    for (flags, says) in cases {
        let (out, _) = synthetic_profile(&server, dir.path(), flags).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?}");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    let input = dir.path().join("rows.jsonl");
    std::fs::write(&input, "{\"question_id\": \"q\", \"turns\": [\"hi\"]}\n").unwrap();
    let (out, _) = synthetic_profile(
        &server,
        dir.path(),
        &["--input-file", input.to_str().unwrap(), "--isl-stddev", "3"],
    )
    .await;
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--isl-stddev: shapes synthetic prompts")
    );
    assert!(server.ground_truth().requests_log.is_empty());
}

/// A real engine's `--isl 48 --osl 16` run over completions (made by
/// `.ci/llama-server-e2e.sh` or `.ci/vllm-e2e.sh` into `dir`), checked by
/// the engine's own usage: 4 successes, every prompt counted the same, 48
/// tokens of text plus a BOS where the model adds one, every answer
/// exactly 16 (`ignore_eos`). Its records, for the engine's counters.
pub(crate) fn check_real_synthetic_run(dir: &std::path::Path) -> Vec<RequestRecord> {
    let records = read_run(dir).unwrap().records;
    assert_eq!(records.len(), 4);
    assert!(records.iter().all(RequestRecord::is_success));
    let prompts: Vec<u64> = records.iter().map(|r| r.prompt_tokens.unwrap()).collect();
    assert!(
        prompts
            .iter()
            .all(|&p| p == prompts[0] && (48..=49).contains(&p)),
        "{prompts:?}"
    );
    let outputs: Vec<Option<u64>> = records.iter().map(|r| r.completion_tokens).collect();
    assert!(outputs.iter().all(|&n| n == Some(16)), "{outputs:?}");
    records
}

/// A run directory's `run.json`.
pub(crate) fn run_json(dir: &std::path::Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(dir.join("run.json")).unwrap()).unwrap()
}

/// The tokenizer.json the fixtures generator trained (a small byte-level BPE).
fn fixture_tokenizer() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tokenizers/tiny-bpe")
}

/// `--tokenizer`: a server without `/tokenize` (TensorRT-LLM's shape) runs
/// synthetic prompts counted by a local tokenizer.json: every prompt the
/// simulator logged is exactly `--isl` tokens by that tokenizer (whose ids
/// the unit tests check against Hugging Face's own), every output `--osl`
/// of the simulator's, and the run's files say what counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_tokenizer_counts_prompts_for_a_server_without_tokenize() {
    use speedbench_client::synthetic::{LocalTokenizer, TokenCodec};
    let server = sim(SimConfig::speed_bench_demo().with_flavor(SpecFlavor::TrtLlm)).await;
    let dir = tempfile::tempdir().unwrap();
    let tokenizer = fixture_tokenizer();
    let (out, run_dir) = synthetic_profile(
        &server,
        dir.path(),
        &[
            "--tokenizer",
            tokenizer.to_str().unwrap(),
            "--isl",
            "48",
            "--osl",
            "6",
            "--num-dataset-entries",
            "12",
            "--request-count",
            "12",
        ],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("synthetic prompts of 48 tokens (stddev 0) with the tokenizer.json at"),
        "{stderr}"
    );
    let truth = server.ground_truth();
    assert_eq!(truth.requests_log.len(), 12);
    let local = LocalTokenizer::open(&tokenizer).unwrap();
    for t in &truth.requests_log {
        let tokens = local.encode(&t.conversation).await.unwrap();
        assert_eq!(tokens.len(), 48, "{:?}", t.conversation);
        assert_eq!(t.completion_tokens, 6);
    }
    let records = read_run(&run_dir).unwrap().records;
    assert_eq!(records.len(), 12);
    let config = &run_json(&run_dir)["config"];
    assert_eq!(
        config["synthetic"]["tokens_counted_by"],
        format!(
            "the local tokenizer.json of --tokenizer {}",
            tokenizer.display()
        )
    );
}

/// A Hub name given to `--tokenizer` is refused before any request where
/// prompts are built with it (nothing is downloaded), and is not read
/// where none are: the run goes on and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_name_as_tokenizer_is_refused_only_where_prompts_are_built() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let name = "meta-llama/Llama-3.1-8B-Instruct";
    let (out, _) =
        synthetic_profile(&server, dir.path(), &["--tokenizer", name, "--isl", "20"]).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains(&format!(
            "--tokenizer: tokenizer {name}: no such file or directory"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("downloads no tokenizer"), "{stderr}");
    assert!(server.ground_truth().requests_log.is_empty());

    let input = dir.path().join("rows.jsonl");
    std::fs::write(
        &input,
        "{\"question_id\": \"q\", \"turns\": [\"hi there\"]}\n",
    )
    .unwrap();
    let (out, _) = synthetic_profile(
        &server,
        dir.path(),
        &["--tokenizer", name, "--input-file", input.to_str().unwrap()],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("--tokenizer {name} is not read")),
        "{stderr}"
    );
    assert_eq!(server.ground_truth().requests_log.len(), 1);
}
