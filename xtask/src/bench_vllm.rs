//! `cargo xtask bench vllm`: AIPerf 0.13.0 and speedbench side by side on
//! the same prompts against the same real vLLM (the CPU build of
//! `.ci/vllm-install.sh`, n-gram speculation, per-request acceptance), and
//! every figure both print: request counts, the per-request averages
//! (acceptance length, draft acceptance rate, accepted per verified, steps),
//! the token-weighted figures, and acceptance by draft position from the
//! pooled histograms. Equal where the definitions are equal; a difference is
//! named.
//!
//! Options: `--concurrency C` (default 1), `--rounds N` (each tool sends the
//! 7 prompts N times, default 1).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The prompts: the first turn of each row of `fixtures/llama_e2e.jsonl`.
const PROMPTS: &str = "fixtures/llama_e2e.jsonl";

/// The served model name.
const MODEL: &str = "smollm2-135m";

/// Output tokens asked of every request.
const OUTPUT_TOKENS: u32 = 64;

struct Options {
    concurrency: usize,
    rounds: usize,
}

fn parse(args: &[String]) -> Result<Options, String> {
    let mut o = Options {
        concurrency: 1,
        rounds: 1,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut number = |name: &str| -> Result<usize, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{name} takes a whole number above 0"))
        };
        match a.as_str() {
            "--concurrency" => o.concurrency = number("--concurrency")?,
            "--rounds" => o.rounds = number("--rounds")?,
            other => return Err(format!("bench vllm: unknown option {other}")),
        }
    }
    Ok(o)
}

/// Runs the comparison.
pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let options = parse(args)?;
    let python = vllm_python(root)?;
    let aiperf = crate::bench::aiperf_bin(root)?;
    build_speedbench(root)?;
    let dir = root.join("target/bench-vllm");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let prompts = write_prompts(root, &dir, options.rounds)?;
    let server = VllmServer::start(root, &python, &dir.join("server.log"))?;
    let url = format!("127.0.0.1:{}", server.port);
    eprintln!("vLLM serving on {url}; speedbench first, then AIPerf, same prompts");
    let ours = run_speedbench(root, &url, &prompts.speedbench, &dir, options.concurrency)?;
    let theirs = run_aiperf(&aiperf, root, &url, &prompts, &dir, options.concurrency)?;
    drop(server);
    print_comparison(&ours, &theirs, prompts.count);
    Ok(())
}

/// The vLLM venv's python, installed by `.ci/vllm-install.sh` if needed.
fn vllm_python(root: &Path) -> Result<PathBuf, String> {
    let out = Command::new("bash")
        .arg(root.join(".ci/vllm-install.sh"))
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| format!(".ci/vllm-install.sh: {e}"))?;
    if !out.status.success() {
        return Err(".ci/vllm-install.sh failed (see above)".into());
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

fn build_speedbench(root: &Path) -> Result<(), String> {
    let status = Command::new(env!("CARGO"))
        .args(["build", "--release", "-q", "-p", "speedbench-cli"])
        .current_dir(root)
        .status()
        .map_err(|e| e.to_string())?;
    status
        .success()
        .then_some(())
        .ok_or_else(|| "building speedbench failed".into())
}

/// The same prompts in each tool's input format.
struct Prompts {
    /// SPEED-Bench-shaped rows for `speedbench profile --input-file`.
    speedbench: PathBuf,
    /// `{"text": ...}` rows for AIPerf's `single_turn` dataset type.
    aiperf: PathBuf,
    /// Requests each tool sends.
    count: usize,
}

fn write_prompts(root: &Path, dir: &Path, rounds: usize) -> Result<Prompts, String> {
    let text = std::fs::read_to_string(root.join(PROMPTS)).map_err(|e| e.to_string())?;
    let (mut ours, mut theirs, mut count) = (String::new(), String::new(), 0);
    for round in 0..rounds {
        for (i, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
            let row: Value = serde_json::from_str(line).map_err(|e| e.to_string())?;
            let prompt = row["messages"][0]["content"]
                .as_str()
                .ok_or_else(|| format!("{PROMPTS} row {i}: no first message"))?;
            let id = format!("{}-{round}", row["question_id"].as_str().unwrap_or("q"));
            let category = row["category"].as_str().unwrap_or("");
            ours.push_str(
                &serde_json::json!({"question_id": id, "category": category, "turns": [prompt]})
                    .to_string(),
            );
            ours.push('\n');
            theirs.push_str(&serde_json::json!({ "text": prompt }).to_string());
            theirs.push('\n');
            count += 1;
        }
    }
    let prompts = Prompts {
        speedbench: dir.join("prompts-speedbench.jsonl"),
        aiperf: dir.join("prompts-aiperf.jsonl"),
        count,
    };
    std::fs::write(&prompts.speedbench, ours).map_err(|e| e.to_string())?;
    std::fs::write(&prompts.aiperf, theirs).map_err(|e| e.to_string())?;
    Ok(prompts)
}

/// A `vllm serve` child on a free loopback port, stopped on drop.
struct VllmServer {
    child: Child,
    port: u16,
}

impl VllmServer {
    fn start(root: &Path, python: &Path, log: &Path) -> Result<VllmServer, String> {
        let venv = python
            .parent()
            .and_then(Path::parent)
            .ok_or("the vLLM python is not in a venv")?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let log_file = std::fs::File::create(log).map_err(|e| e.to_string())?;
        let child = Command::new(venv.join("bin/vllm"))
            .arg("serve")
            .arg(root.join("target/vllm-model/smollm2-135m"))
            .args(["--served-model-name", MODEL, "--host", "127.0.0.1"])
            .args(["--port", &port.to_string(), "--dtype", "bfloat16"])
            .args(["--max-model-len", "2048", "--max-num-seqs", "4", "--enforce-eager"])
            .args(["--speculative-config", r#"{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}"#])
            .args(["--per-request-spec-decode-metrics", "summary"])
            .envs(vllm_env(venv))
            .stdout(log_file.try_clone().map_err(|e| e.to_string())?)
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("vllm serve: {e}"))?;
        let mut server = VllmServer { child, port };
        server.wait_healthy(log)?;
        Ok(server)
    }

    fn wait_healthy(&mut self, log: &Path) -> Result<(), String> {
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(300) {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "vllm serve exited ({status}); see {}",
                    log.display()
                ));
            }
            let health = Command::new("curl")
                .args(["-sf", &format!("http://127.0.0.1:{}/health", self.port)])
                .output();
            if health.is_ok_and(|o| o.status.success()) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        Err(format!(
            "vllm serve not healthy in 300 s; see {}",
            log.display()
        ))
    }
}

impl Drop for VllmServer {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The environment vLLM's CPU build wants (see `.ci/vllm-e2e.sh`).
fn vllm_env(venv: &Path) -> Vec<(String, String)> {
    let find = |cmd: &str| {
        Command::new("bash")
            .args(["-c", cmd])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    };
    let iomp = find(&format!(
        "find {} -name libiomp5.so -print -quit",
        venv.display()
    ));
    let tcmalloc =
        find("ldconfig -p | awk '!lib && /libtcmalloc_minimal.so.4 /{lib=$NF} END{print lib}'");
    [
        ("VLLM_CPU_KVCACHE_SPACE", "1".to_string()),
        ("VLLM_CPU_OMP_THREADS_BIND", "auto".to_string()),
        ("HF_HUB_OFFLINE", "1".to_string()),
        ("VLLM_NO_USAGE_STATS", "1".to_string()),
        ("LD_PRELOAD", format!("{tcmalloc}:{iomp}")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// speedbench's `summary.json` for the prompts.
fn run_speedbench(
    root: &Path,
    url: &str,
    prompts: &Path,
    dir: &Path,
    concurrency: usize,
) -> Result<Value, String> {
    let run_dir = dir.join("speedbench");
    let out = Command::new(root.join("target/release/speedbench"))
        .args(["profile", "--url", url, "--model", MODEL, "--input-file"])
        .arg(prompts)
        .args(["--streaming", "--osl", &OUTPUT_TOKENS.to_string()])
        .args(["--extra-inputs", "temperature:0", "--no-preflight"])
        .args(["--concurrency", &concurrency.to_string()])
        .arg("--output-artifact-dir")
        .arg(&run_dir)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "speedbench profile failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    read_json(&run_dir.join("summary.json"))
}

/// AIPerf's `profile_export_aiperf.json` for the same prompts.
fn run_aiperf(
    aiperf: &Path,
    root: &Path,
    url: &str,
    prompts: &Prompts,
    dir: &Path,
    concurrency: usize,
) -> Result<Value, String> {
    let run_dir = dir.join("aiperf");
    let out = Command::new(aiperf)
        .args([
            "profile",
            "--model",
            MODEL,
            "--url",
            url,
            "--endpoint-type",
            "chat",
        ])
        .arg("--streaming")
        .arg("--tokenizer")
        .arg(root.join("target/vllm-model/smollm2-135m"))
        .args(["--custom-dataset-type", "single_turn", "--input-file"])
        .arg(&prompts.aiperf)
        .args(["--output-tokens-mean", &OUTPUT_TOKENS.to_string()])
        .args(["--extra-inputs", "temperature:0"])
        .args(["--concurrency", &concurrency.to_string()])
        .args(["--request-count", &prompts.count.to_string()])
        .args(["--ui-type", "none", "--output-artifact-dir"])
        .arg(&run_dir)
        // AIPerf 0.13 refuses a local tokenizer path in offline mode.
        .env_remove("HF_HUB_OFFLINE")
        .env_remove("TRANSFORMERS_OFFLINE")
        .output()
        .map_err(|e| e.to_string())?;
    read_json(&run_dir.join("profile_export_aiperf.json")).map_err(|e| {
        format!(
            "{e} (aiperf: {})",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        )
    })
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// One figure as both tools give it.
struct Row {
    name: &'static str,
    aiperf: Option<f64>,
    speedbench: Option<f64>,
    /// Why the two differ by definition, where they may.
    differs_by_definition: Option<&'static str>,
}

fn rows(ours: &Value, theirs: &Value) -> Vec<Row> {
    let a = |key: &str| {
        theirs
            .pointer(&format!("/{key}/avg"))
            .and_then(Value::as_f64)
    };
    let s = |path: &str| ours.pointer(path).and_then(Value::as_f64);
    let totals = |key: &str| s(&format!("/spec_decode/totals/{key}"));
    let ratio = |n: Option<f64>, d: Option<f64>| match (n, d) {
        (Some(n), Some(d)) if d > 0.0 => Some(n / d),
        _ => None,
    };
    let row = |name, aiperf, speedbench| Row {
        name,
        aiperf,
        speedbench,
        differs_by_definition: None,
    };
    vec![
        row(
            "requests completed",
            a("completed_request_count").or(a("request_count")),
            s("/counts/succeeded"),
        ),
        row(
            "acceptance length, per-request avg",
            a("spec_decode_acceptance_length"),
            s("/spec_decode/acceptance_length/avg"),
        ),
        row(
            "draft acceptance rate %, per-request avg",
            a("spec_decode_draft_acceptance_rate"),
            s("/spec_decode/draft_acceptance_rate_pct/avg"),
        ),
        row(
            "accepted per verified, per-request avg",
            a("spec_decode_accepted_per_verified"),
            s("/spec_decode/accepted_per_verified/avg"),
        ),
        row(
            "spec decode steps, per-request avg",
            a("spec_decode_steps"),
            s("/spec_decode/spec_decode_steps/avg"),
        ),
        row(
            "acceptance length, token-weighted",
            a("spec_decode_token_weighted_acceptance_length"),
            ratio(totals("accepted_with_steps"), totals("steps")).map(|r| 1.0 + r),
        ),
        row(
            "draft acceptance rate %, overall",
            a("spec_decode_overall_draft_acceptance_rate"),
            ratio(totals("accepted"), totals("proposed")).map(|r| r * 100.0),
        ),
        Row {
            differs_by_definition: Some(
                "AIPerf counts output tokens with the model's tokenizer over the text; speedbench takes the server's usage.completion_tokens (the EOS token included)",
            ),
            ..row(
                "output sequence length, avg",
                a("output_sequence_length"),
                s("/output_sequence_length/avg"),
            )
        },
    ]
}

/// Acceptance at draft position i (share of steps that accepted at least
/// i drafts), from a pooled histogram's counts by accepted drafts.
fn positions(counts: &[f64]) -> Vec<f64> {
    let steps: f64 = counts.iter().sum();
    (1..counts.len())
        .map(|i| counts[i..].iter().sum::<f64>() / steps)
        .collect()
}

fn histograms(ours: &Value, theirs: &Value) -> (Vec<f64>, Vec<f64>) {
    let ours = ours
        .pointer("/spec_decode/histogram/counts")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();
    let theirs_map = theirs
        .pointer("/pooled_spec_decode_acceptance_histogram")
        .and_then(Value::as_object);
    let mut theirs = Vec::new();
    for (k, v) in theirs_map.into_iter().flatten() {
        let (Ok(j), Some(n)) = (k.parse::<usize>(), v.as_f64()) else {
            continue;
        };
        if theirs.len() <= j {
            theirs.resize(j + 1, 0.0);
        }
        theirs[j] = n;
    }
    (ours, theirs)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn print_comparison(ours: &Value, theirs: &Value, sent: usize) {
    println!(
        "\nAIPerf 0.13.0 and speedbench, same {sent} prompts, same vLLM (CPU build, n-gram, k=4)"
    );
    println!(
        "{:<44} {:>14} {:>14}  verdict",
        "figure", "AIPerf", "speedbench"
    );
    let shown = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.6}"));
    for r in rows(ours, theirs) {
        let verdict = match (r.aiperf, r.speedbench, r.differs_by_definition) {
            (Some(a), Some(s), _) if close(a, s) => "equal".to_string(),
            (_, _, Some(why)) => format!("differs by definition: {why}"),
            _ => "DIFFERS (not explained)".to_string(),
        };
        println!(
            "{:<44} {:>14} {:>14}  {verdict}",
            r.name,
            shown(r.aiperf),
            shown(r.speedbench)
        );
    }
    let (ours_h, theirs_h) = histograms(ours, theirs);
    let (ours_p, theirs_p) = (positions(&ours_h), positions(&theirs_h));
    for i in 0..ours_p.len().max(theirs_p.len()) {
        let (a, s) = (theirs_p.get(i).copied(), ours_p.get(i).copied());
        let verdict = match (a, s) {
            (Some(a), Some(s)) if close(a, s) => "equal",
            _ => "DIFFERS (not explained)",
        };
        let name = format!("acceptance at draft position {}", i + 1);
        println!("{name:<44} {:>14} {:>14}  {verdict}", shown(a), shown(s));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_rates_from_a_pooled_histogram() {
        // 30 steps accepted nothing, 11 one draft, 4 two, 5 three, 6 four:
        // 26/56 reached position 1, 15/56 position 2, 11/56 and 6/56 after.
        let p = positions(&[30.0, 11.0, 4.0, 5.0, 6.0]);
        let want = [26.0 / 56.0, 15.0 / 56.0, 11.0 / 56.0, 6.0 / 56.0];
        assert!(p.iter().zip(want).all(|(a, b)| close(*a, b)), "{p:?}");
    }

    #[test]
    fn both_exports_are_read_the_same_way() {
        // AIPerf writes its pooled histogram sparse, by accepted count.
        let theirs = serde_json::json!({"pooled_spec_decode_acceptance_histogram": {"0": 3, "2": 1},
            "spec_decode_token_weighted_acceptance_length": {"avg": 1.5}});
        let ours = serde_json::json!({"spec_decode": {"histogram": {"counts": [3, 0, 1]},
            "totals": {"accepted_with_steps": 2, "steps": 4, "accepted": 2, "proposed": 8}}});
        let (o, t) = histograms(&ours, &theirs);
        assert_eq!(o, t);
        let token_weighted = rows(&ours, &theirs)
            .into_iter()
            .find(|r| r.name == "acceptance length, token-weighted")
            .unwrap();
        assert_eq!(
            (token_weighted.aiperf, token_weighted.speedbench),
            (Some(1.5), Some(1.5))
        );
    }
}
