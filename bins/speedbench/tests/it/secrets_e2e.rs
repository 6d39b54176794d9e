//! Secrets never leave the process: a run given an API key (flag and
//! environment), an `HF_TOKEN` and a custom credential header, with debug
//! logging and some failing requests, must not write any of them to stdout,
//! stderr, or any file of its artifact directory (Parquet bytes included).

use crate::common;

use std::path::Path;
use std::process::Output;

use common::*;
use speedbench_sim::{FaultKind, FaultPlan, SimConfig};

const SECRETS: [&str; 6] = [
    "sk-test-SECRET123",
    "sk-env-SECRET124",
    "hf_SECRET456",
    "zzSECRET789",
    // Request fields (--extra-inputs) named like credentials.
    "field-SECRET321",
    "tok-SECRET654",
];

/// Also catches a secret split by escaping or encoding: its distinctive core.
const CORES: [&str; 6] = [
    "SECRET123",
    "SECRET124",
    "SECRET456",
    "SECRET789",
    "SECRET321",
    "SECRET654",
];

async fn run_with_secrets(args: &[&str]) -> Output {
    let out = bin()
        .args(args)
        .env("OPENAI_API_KEY", SECRETS[1])
        .env("HF_TOKEN", SECRETS[2])
        .env("RUST_LOG", "debug")
        .output()
        .await
        .expect("the binary runs");
    eprintln!(
        "stderr of {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn assert_clean(what: &str, bytes: &[u8]) {
    for core in CORES {
        assert!(
            !bytes.windows(core.len()).any(|w| w == core.as_bytes()),
            "{core} leaked into {what}"
        );
    }
}

fn assert_dir_clean(dir: &Path) -> usize {
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files += assert_dir_clean(&path);
        } else {
            assert_clean(&path.display().to_string(), &std::fs::read(&path).unwrap());
            files += 1;
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_in_any_artifact_log_or_error() {
    // Some requests fail, so error messages are written too.
    let config = SimConfig::speed_bench_demo()
        .with_faults(vec![
            FaultPlan::every_nth(FaultKind::HttpStatus(500), 7),
            FaultPlan::every_nth(FaultKind::ResetMidStream { after_chunks: 1 }, 5),
            FaultPlan::every_nth(FaultKind::SpecFieldsWrongType, 4),
        ])
        .with_output_tokens(8, 24);
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("run");
    let url = server.url();
    let fixture = fixture();
    // No --model: model discovery runs with the key too.
    let out = run_with_secrets(&[
        "profile",
        "--url",
        &url,
        "--input-file",
        fixture.to_str().unwrap(),
        "--streaming",
        "--concurrency",
        "4",
        // No 2 s wait for late /metrics counters after the run.
        "--server-metrics-shutdown-delay",
        "0",
        "--api-key",
        SECRETS[0],
        "-H",
        &format!("Authorization2: Bearer {}", SECRETS[3]),
        "--extra-inputs",
        &format!(r#"{{"metadata":{{"api_key":"{}"}}}}"#, SECRETS[4]),
        "--extra-inputs",
        &format!("hf_token:{}", SECRETS[5]),
        "--extra-inputs",
        "temperature:0",
        "--output",
        dir.path().join("speed_bench.json").to_str().unwrap(),
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success(), "exit {:?}", out.status);
    assert_clean(
        "speed_bench.py JSON",
        &std::fs::read(dir.path().join("speed_bench.json")).unwrap(),
    );
    let truth = server.ground_truth();
    server.shutdown().await;
    assert!(!truth.faults.is_empty());
    assert_clean("stdout", &out.stdout);
    assert_clean("stderr", &out.stderr);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("DEBUG"),
        "debug logging was on"
    );
    let files = assert_dir_clean(&out_dir);
    assert!(files >= 3, "records, run.json and summary.json checked");

    // Decoded, too: compression could hide a secret from a byte grep.
    let file = read_run(&out_dir).unwrap();
    assert!(file.records.iter().any(|r| !r.is_success()));
    let decoded = format!("{:?}{:?}", file.records, file.manifest);
    assert_clean("decoded records and manifest", decoded.as_bytes());
    let manifest = std::fs::read_to_string(out_dir.join("run.json")).unwrap();
    assert!(manifest.contains("Authorization2"), "header names are kept");
    assert!(manifest.contains("\"api_key_set\": true"));
    // Request fields holding credentials are shown hidden, the rest as given.
    let run: serde_json::Value = serde_json::from_str(&manifest).unwrap();
    let fields = &run["config"]["extra_inputs"];
    assert_eq!(fields["metadata"]["api_key"], "<redacted>", "{fields}");
    assert_eq!(fields["hf_token"], "<redacted>", "{fields}");
    assert_eq!(fields["temperature"], 0, "{fields}");

    // The report over the run does not surface them either.
    let csv = dir.path().join("report.csv");
    let out = run_with_secrets(&[
        "report",
        out_dir.to_str().unwrap(),
        "--output",
        csv.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success());
    assert_clean("report stdout", &out.stdout);
    assert_clean("report stderr", &out.stderr);
    assert_clean("report csv", &std::fs::read(&csv).unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_secret_arguments_are_not_echoed() {
    let dir = tempfile::tempdir().unwrap();
    let fixture = fixture();
    // A header without a colon, a key a header cannot carry, a header value
    // with a newline: each fails before any request, without the secret.
    let key_with_newline = format!("{}\n", SECRETS[0]);
    let value_with_newline = format!("X-Key: {}\nx", SECRETS[3]);
    let cases: [&[&str]; 3] = [
        &[
            "-H",
            &format!("Authorization Bearer {}", SECRETS[3]),
            "-m",
            "m",
        ],
        &["--api-key", &key_with_newline, "-m", "m"],
        &["-H", &value_with_newline, "-m", "m"],
    ];
    for extra in cases {
        let mut args = vec![
            "profile",
            "--url",
            "127.0.0.1:9",
            "--input-file",
            fixture.to_str().unwrap(),
            "--output-artifact-dir",
            dir.path().to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let out = run_with_secrets(&args).await;
        assert!(!out.status.success(), "{extra:?} should fail");
        assert_clean("stdout", &out.stdout);
        assert_clean("stderr", &out.stderr);
    }
    assert_dir_clean(dir.path());
}

/// The Python for the upstream prepare step (see
/// crates/speedbench-dataset/tests/it/upstream.rs), or `None` when opted out.
#[track_caller]
fn test_python() -> Option<std::path::PathBuf> {
    speedbench_test_support::test_python()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prepare_steps_output_never_shows_the_token() {
    let Some(python) = test_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    // An offline Hub cache holding the fixture config at the pinned revision.
    let hf_home = dir.path().join("hf");
    let snapshot = hf_home
        .join("hub/datasets--nvidia--SPEED-Bench/snapshots")
        .join(speedbench_dataset::registry::SPEED_BENCH_REVISION)
        .join("throughput_1k");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::copy(
        fixtures.join("hub/nvidia/SPEED-Bench/throughput_1k/test-00000-of-00001.parquet"),
        snapshot.join("test-00000-of-00001.parquet"),
    )
    .unwrap();
    let fake = std::fs::read_to_string(fixtures.join("upstream/fake_prepare.py")).unwrap();
    let cache = dir.path().join("cache");
    let resolve = |mode: &str| {
        let script = dir.path().join(format!("fake_{mode}.py"));
        std::fs::write(
            &script,
            fake.replace("MODE = \"resolve\"", &format!("MODE = {mode:?}")),
        )
        .unwrap();
        let mut cmd = bin();
        cmd.args([
            "datasets",
            "resolve",
            "speed_bench_throughput_1k",
            "--resolver",
            "upstream",
        ])
        .arg("--dataset-cache")
        .arg(&cache)
        .arg("--python")
        .arg(&python)
        .arg("--prepare-script")
        .arg(&script)
        .env("HF_TOKEN", SECRETS[2])
        .env("HF_HOME", &hf_home)
        .env("HF_HUB_OFFLINE", "1")
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .env("RUST_LOG", "debug");
        cmd
    };

    // The child raises, quoting HF_TOKEN: the relayed lines and the error's
    // quoted tail are redacted.
    let out = resolve("fail").output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert!(!out.status.success());
    assert!(
        stderr.contains("Unauthorized for token <redacted>") && stderr.contains("exit status: 1"),
        "{stderr}"
    );
    assert_clean("stdout", &out.stdout);
    assert_clean("stderr", &out.stderr);
    assert!(!cache.join("speed-bench/throughput_1k.jsonl").exists());

    // It succeeds: the token reached the child through its environment only.
    let out = resolve("resolve").output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("token=set"), "{stderr}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("speed_bench_throughput_1k: 4 conversations"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_clean("stdout", &out.stdout);
    assert_clean("stderr", &out.stderr);
    assert!(assert_dir_clean(dir.path()) >= 4);
    assert!(cache.join("speed-bench/throughput_1k.jsonl").is_file());
}

/// An HTTP response whose JSON body is `body`.
fn response_of(status: &str, body: &serde_json::Value) -> Vec<u8> {
    json_response(status, &body.to_string()).into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echoed_key_leaves_in_no_encoding() {
    // A key with the characters encodings change; its core is what the
    // checks look for, and every encoding keeps it.
    let key = "sk-ab/cd+ef=SECRET123 gh";
    let percent = |keep_slash: bool, plus: bool| -> String {
        key.bytes()
            .map(|b| match b {
                b'/' if keep_slash => "/".to_string(),
                b' ' if plus => "+".to_string(),
                b if b.is_ascii_alphanumeric() || b"-._~".contains(&b) => (b as char).to_string(),
                b => format!("%{b:02X}"),
            })
            .collect()
    };
    let echoes = [
        percent(false, false), // RFC 3986
        percent(false, false)
            .to_lowercase()
            .replace("secret123", "SECRET123"), // lowercase hex
        percent(true, false),  // Python's quote
        percent(false, true),  // quote_plus
        percent(false, false).replace('%', "%25"), // percent-encoded twice
        serde_json::to_string(&serde_json::to_string(key).unwrap()).unwrap(), // JSON twice
    ];
    let text = format!("echo: {}", echoes.join(" | "));
    let ok = response_of(
        "200 OK",
        &serde_json::json!({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}),
    );
    let denied = response_of(
        "401 Unauthorized",
        &serde_json::json!({"error": {"message": format!("bad key {text}"), "type": "auth"}}),
    );
    let url = rotating_server(vec![denied, ok]);
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("rows.jsonl");
    let rows: String = (0..4)
        .map(|i| format!("{{\"question_id\": \"q{i}\", \"turns\": [\"question {i}\"]}}\n"))
        .collect();
    std::fs::write(&input, rows).unwrap();
    let run_dir = dir.path().join("run");
    let out = run_with_secrets(&[
        "profile",
        "--url",
        &url,
        "--model",
        "m",
        "--input-file",
        input.to_str().unwrap(),
        "--concurrency",
        "1",
        "--api-key",
        key,
        "--no-server-metrics",
        "--max-error-rate",
        "0.9",
        "--output-artifact-dir",
        run_dir.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("First error: HTTP 401"), "{stdout}");
    assert_clean("stdout", &out.stdout);
    assert_clean("stderr", &out.stderr);
    assert_dir_clean(&run_dir);
    let records = read_run(&run_dir).unwrap().records;
    assert_eq!(records.len(), 4);
    for r in &records {
        let seen = format!("{:?} {}", r.error_message, r.output_text);
        assert_clean("a decoded record", seen.as_bytes());
        assert!(seen.contains("<redacted>"), "{seen}");
    }
    let summary = std::fs::read_to_string(run_dir.join("summary.json")).unwrap();
    assert!(summary.contains("\"first_error\""), "{summary}");
}
