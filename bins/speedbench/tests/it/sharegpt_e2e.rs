//! End-to-end: `--public-dataset sharegpt` from a Hub cache laid out as
//! `huggingface_hub` lays it out, offline, against the simulator. Each turn
//! asks for its reply's token count by the server's `/tokenize`, the
//! conversations outside AIPerf's limits are never sent, and both are
//! checked against the simulator's own log and against the turns AIPerf
//! 0.13.0's own ShareGPT loader makes of the same file
//! (`fixtures/aiperf/sharegpt_turns.json`, from `sharegpt_turns.py`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::aiperf_config_e2e::run_template;
use crate::common::*;

const REPO_FOLDER: &str = "datasets--anon8231489123--ShareGPT_Vicuna_unfiltered";
const FILE: &str = "ShareGPT_V3_unfiltered_cleaned_split.json";

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// A Hub cache in `home` holding ShareGPT's miniature file at `main`.
fn hub_cache(home: &Path) {
    let commit = "5".repeat(40);
    let repo = home.join("hub").join(REPO_FOLDER);
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), &commit).unwrap();
    let snapshot = repo.join("snapshots").join(&commit);
    std::fs::create_dir_all(&snapshot).unwrap();
    let source = fixtures()
        .join("hub/anon8231489123/ShareGPT_Vicuna_unfiltered")
        .join(FILE);
    std::fs::copy(source, snapshot.join(FILE)).unwrap();
}

/// AIPerf's turns: each kept conversation's first prompt, and its turns'
/// `max_tokens` in order.
fn aiperf_turns() -> BTreeMap<String, Vec<u32>> {
    aiperf_turns_in("sharegpt_turns.json")
}

/// [`aiperf_turns`] as `fixtures/aiperf/<file>` holds them.
fn aiperf_turns_in(file: &str) -> BTreeMap<String, Vec<u32>> {
    let text = std::fs::read_to_string(fixtures().join("aiperf").join(file)).unwrap();
    let kept: serde_json::Value = serde_json::from_str(&text).unwrap();
    (kept.as_array().unwrap().iter())
        .map(|c| {
            let turns = c["turns"].as_array().unwrap();
            let first = turns[0]["prompt"].as_str().unwrap().to_string();
            let lengths = turns
                .iter()
                .map(|t| t["max_tokens"].as_u64().unwrap() as u32);
            (first, lengths.collect())
        })
        .collect()
}

/// What a ShareGPT run left: the simulator's turns (each conversation's
/// first prompt, and what each of its turns was cut at, in order), the
/// run's `config.reply_lengths`, and its stderr.
struct ShareGptRun {
    sent: BTreeMap<String, Vec<u32>>,
    replies: serde_json::Value,
    stderr: String,
    records: usize,
}

/// `profile --public-dataset sharegpt` at concurrency 1, offline, from a
/// Hub cache of the miniature file, with `extra` flags; it must succeed.
/// Every answer was cut at its `max_tokens` (the simulator's outputs are
/// longer), and every turn came in order.
async fn sharegpt_run(extra: &[&str]) -> ShareGptRun {
    let dir = tempfile::tempdir().unwrap();
    hub_cache(dir.path());
    let server = sim(speedbench_sim::SimConfig::speed_bench_demo()).await;
    let out_dir = dir.path().join("run");
    let mut cmd = bin();
    cmd.env("HF_HOME", dir.path())
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .args(["profile", "--url", &server.url(), "--model", "m"])
        .args(["--public-dataset", "sharegpt", "--concurrency", "1"])
        .args(["--no-server-metrics", "--dataset-cache"])
        .arg(dir.path().join("datasets"))
        .arg("--output-artifact-dir")
        .arg(&out_dir)
        .args(extra);
    let out = cmd.output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let mut sent: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for t in server.ground_truth().requests_log {
        assert!(t.truncated, "{t:?}");
        let turns = sent.entry(t.conversation.clone()).or_default();
        assert_eq!(turns.len() + 1, t.turns as usize, "{t:?}");
        turns.push(t.completion_tokens);
    }
    let manifest = run_json(&out_dir);
    ShareGptRun {
        sent,
        replies: manifest["config"]["reply_lengths"].clone(),
        stderr,
        records: read_run(&out_dir).unwrap().records.len(),
    }
}

/// Every conversation AIPerf keeps is sent whole, each turn asking for its
/// reply's length (the simulator cut each output there: its own count of
/// what it generated, `finish_reason: length`), and none it leaves out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharegpt_turns_ask_for_their_replies_length_and_the_rest_are_said() {
    let run = sharegpt_run(&["--num-conversations", "4"]).await;
    let want = aiperf_turns();
    assert_eq!(want.len(), 4);
    assert_eq!(run.sent, want);
    assert_eq!(run.records, 7);
    let replies = &run.replies;
    assert_eq!(
        (replies["rows"].as_u64(), replies["kept"].as_u64()),
        (Some(7), Some(4)),
        "{replies}"
    );
    assert_eq!(
        replies["left_out"].as_array().unwrap().len(),
        3,
        "{replies}"
    );
    let counted_by = replies["tokens_counted_by"].as_str().unwrap();
    assert!(counted_by.contains("/tokenize"), "{replies}");
    let stderr = &run.stderr;
    assert!(
        stderr.contains("3 of 7 counted rows are left out"),
        "{stderr}"
    );
    // The conversation with nothing to pair was left out when the file
    // became rows, and said then.
    assert!(
        stderr.contains("7 of 8 conversations kept")
            && stderr.contains("1 without a human->gpt pair"),
        "{stderr}"
    );
}

/// With `--osl` (an output length given), AIPerf checks no reply's
/// minimum: the conversation whose reply is one word is sent too, asking
/// for that one token, as `sharegpt_turns_osl.json` (AIPerf's own) has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_length_given_checks_no_replys_minimum() {
    let run = sharegpt_run(&["--osl", "64", "--num-conversations", "5"]).await;
    let want = aiperf_turns_in("sharegpt_turns_osl.json");
    assert_eq!(want.len(), 5);
    assert_eq!(run.sent, want);
}

/// `--limit N` (an AIPerf config's `entries`) keeps the first N
/// conversations inside the limits, in file order, and counts no further.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_keeps_the_first_conversations_inside_the_limits() {
    let run = sharegpt_run(&["--limit", "2", "--num-conversations", "2"]).await;
    // sg-multi and sg-system: the first two AIPerf keeps, in file order.
    let want: BTreeMap<String, Vec<u32>> = (aiperf_turns().into_iter())
        .filter(|(first, _)| first.starts_with("[qa 0] Please") || first.starts_with("[coding 0]"))
        .collect();
    assert_eq!(want.len(), 2);
    assert_eq!(run.sent, want);
    assert_eq!(
        run.replies["not_counted_past_limit"].as_u64(),
        Some(4),
        "{}",
        run.replies
    );
    assert_eq!(run.replies["kept"].as_u64(), Some(2), "{}", run.replies);
}

/// AIPerf's `public_dataset` template, unchanged (ShareGPT, `entries:
/// 1000`, shuffled, 1,000 requests at concurrency 32 after a warmup of 50
/// at 8), against the simulator named by `--url`, from the Hub cache:
/// every request the simulator read is a turn of a conversation AIPerf
/// keeps, at its turn, asking for its reply's length, and each of them
/// is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aiperfs_public_dataset_template_runs_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    hub_cache(dir.path());
    let dir_text = dir.path().display().to_string();
    let env = [
        ("HF_HOME", dir_text),
        ("HF_HUB_OFFLINE", "1".to_string()),
        ("HF_ENDPOINT", "http://127.0.0.1:9".to_string()),
    ];
    let server = run_template("public_dataset", dir.path(), &env, &["--url", "{url}"]).await;
    let want = aiperf_turns();
    let log = server.ground_truth().requests_log;
    assert_eq!(log.len(), 1050);
    let mut seen = std::collections::BTreeSet::new();
    for t in &log {
        let lengths = &want[&t.conversation];
        assert_eq!(t.completion_tokens, lengths[t.turns as usize - 1], "{t:?}");
        seen.insert(t.conversation.clone());
    }
    assert_eq!(seen.len(), want.len());
    let run_dir = dir.path().join("artifacts/public_dataset");
    let records = read_run(&run_dir).unwrap().records;
    assert_eq!(records.iter().filter(|r| !r.warmup).count(), 1000);
    let manifest = run_json(&run_dir);
    let config = &manifest["config"];
    assert_eq!(config["reply_lengths"]["kept"], 4);
    assert_eq!(config["client"]["dataset_sampling_strategy"], "shuffle");
    assert_eq!(config["limit_per_category"], 1000);
}

/// The row shape is open to any input file: `"output_length": "reply"`
/// rows ask for their replies' lengths, and over rows of several
/// categories `--limit` keeps the first of each inside the limits (every
/// row counted, since the first N counted are not N of each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_rows_of_an_input_file_keep_the_first_of_each_category() {
    let dir = tempfile::tempdir().unwrap();
    let words = |lead: &str, n: usize| {
        let rest: Vec<String> = (lead.split_whitespace().count()..n)
            .map(|i| format!("w{i}"))
            .collect();
        format!("{lead} {}", rest.join(" ")).trim().to_string()
    };
    let row = |id: &str, category: &str, prompt: String, reply: String| {
        serde_json::json!({
            "question_id": id,
            "category": category,
            "messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}],
            "output_length": "reply",
        })
    };
    let rows = [
        row("a1", "x", "[x] short".into(), words("r", 5)),
        row("a2", "x", words("[x] a2 asks", 5), words("r", 6)),
        row("b1", "y", words("[y] b1 asks", 5), words("r", 7)),
        row("a3", "x", words("[x] a3 asks", 5), words("r", 8)),
    ];
    let file = dir.path().join("replies.jsonl");
    let text: String = rows.iter().map(|r| format!("{r}\n")).collect();
    std::fs::write(&file, text).unwrap();
    let server = sim(speedbench_sim::SimConfig::speed_bench_demo()).await;
    let out_dir = dir.path().join("run");
    let out = run(&[
        "profile",
        "--url",
        &server.url(),
        "--model",
        "m",
        "--input-file",
        file.to_str().unwrap(),
        "--limit",
        "1",
        "--no-server-metrics",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ])
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut sent: Vec<(String, u32)> = (server.ground_truth().requests_log.iter())
        .map(|t| {
            (
                t.conversation
                    .split_whitespace()
                    .nth(1)
                    .unwrap()
                    .to_string(),
                t.completion_tokens,
            )
        })
        .collect();
    sent.sort();
    assert_eq!(sent, [("a2".to_string(), 6), ("b1".to_string(), 7)]);
    let manifest = run_json(&out_dir);
    let replies = &manifest["config"]["reply_lengths"];
    assert_eq!(
        (replies["rows"].as_u64(), replies["kept"].as_u64()),
        (Some(4), Some(3)),
        "{replies}"
    );
    assert_eq!(
        replies["not_counted_past_limit"].as_u64(),
        Some(0),
        "{replies}"
    );
}

/// `--tokenizer` counts the replies where it is given (and is not said to
/// be unread): `run.json` names the file that counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_tokenizer_counts_the_replies() {
    let dir = tempfile::tempdir().unwrap();
    hub_cache(dir.path());
    let server = sim(speedbench_sim::SimConfig::speed_bench_demo()).await;
    let out_dir = dir.path().join("run");
    let tokenizer = fixtures().join("tokenizers/tiny-bpe");
    let out = bin()
        .env("HF_HOME", dir.path())
        .env("HF_HUB_OFFLINE", "1")
        .args(["profile", "--url", &server.url(), "--model", "m"])
        .args(["--public-dataset", "sharegpt", "--no-server-metrics"])
        .arg("--tokenizer")
        .arg(&tokenizer)
        .arg("--dataset-cache")
        .arg(dir.path().join("datasets"))
        .arg("--output-artifact-dir")
        .arg(&out_dir)
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("is not read"), "{stderr}");
    let manifest = run_json(&out_dir);
    let replies = &manifest["config"]["reply_lengths"];
    let counted_by = replies["tokens_counted_by"].as_str().unwrap();
    assert!(counted_by.contains("tiny-bpe/tokenizer.json"), "{replies}");
    assert_eq!(replies["rows"], 7, "{replies}");
    assert!(!server.ground_truth().requests_log.is_empty());
}
