//! `cargo xtask fuzz [--seconds N] [--target NAME]`: run every cargo-fuzz
//! target under `fuzz/` for N seconds each (default 60).
//!
//! cargo-fuzz needs nightly-only flags (`-Zsanitizer=address`); on the
//! stable toolchain they are enabled with `RUSTC_BOOTSTRAP=1`, which this
//! task sets. It needs `cargo-fuzz` (`cargo install cargo-fuzz --locked`)
//! and a C++ compiler for libFuzzer. Seed inputs are written to
//! `fuzz/corpus/<target>/` on first use; crashes land in `fuzz/artifacts/`.
//! The targets build into `target/fuzz/` from `fuzz/Cargo.lock`, the
//! workspace's lockfile plus libFuzzer's crates.

use std::path::Path;
use std::process::Command;

/// Seed inputs per target: realistic shapes the fuzzer mutates from.
fn seeds(root: &Path, target: &str) -> Vec<Vec<u8>> {
    match target {
        "sse_parser" => vec![
            b"\x03data: {\"choices\":[{\"delta\":{\"content\":\" hi\"}}]}\n\n: keep-alive\n\ndata: [DONE]\n\n".to_vec(),
            b"\x01event: sglext_ids\r\ndata: a\r\ndata: b\r\n\r\ndata: caf\xc3\xa9\r\r".to_vec(),
        ],
        "jsonl_rows" => {
            let fixture = root.join("fixtures").join("speed_bench_mini.jsonl");
            let mut v = vec![
                br#"{"question_id":"a","category":"coding","turns":["hi","more"]}"#.to_vec(),
                br#"{"question_id":"b","messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]}"#.to_vec(),
            ];
            if let Ok(text) = std::fs::read(fixture) {
                v.push(text);
            }
            v
        }
        "spec_adapters" => vec![
            br#"{"acceptance_histogram":[2,1,0,1],"num_spec_steps":4,"num_accepted_draft_tokens":4,"num_draft_tokens":12,"num_spec_tokens":3,"per_step_accepted":[0,1,3,0],"per_step_drafted":[3,3,3,3]}"#.to_vec(),
            br#"{"predicted_n":64,"draft_n":47,"draft_n_accepted":40}"#.to_vec(),
            br#"{"spec_num_correct_drafts":6,"spec_num_proposed_drafts":12,"spec_verify_ct":4,"spec_correct_drafts_histogram":[1,1,1,1]}"#.to_vec(),
            br#"{"total_accepted_draft_tokens":5,"total_draft_tokens":9,"num_spec_steps":3,"acceptance_histogram":[1,0,1,1]}"#.to_vec(),
        ],
        "prometheus" => vec![
            b"# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.\n# TYPE vllm:spec_decode_num_drafts_total counter\nvllm:spec_decode_num_drafts_total{model_name=\"m\\\"x\",engine=\"0\"} 43.0\nvllm:spec_decode_num_drafts_created{engine=\"0\"} 1.7e9\n".to_vec(),
            b"# TYPE h histogram\nh_bucket{le=\"+Inf\"} 3 1700000000000\nh_sum 1.5e+06\nh_count NaN\nllamacpp:x_total -Inf\n# EOF\n".to_vec(),
        ],
        _ => Vec::new(),
    }
}

/// Runs the fuzz targets.
pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let mut seconds: u64 = 60;
    let mut only: Option<String> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--seconds" => {
                seconds = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|&s| s > 0)
                    .ok_or("--seconds needs a positive integer")?
            }
            "--target" => only = Some(it.next().ok_or("--target needs a name")?.clone()),
            other => return Err(format!("fuzz: unknown option {other:?}")),
        }
    }
    let cargo = env!("CARGO");
    let probe = Command::new(cargo).args(["fuzz", "--version"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        return Err("cargo-fuzz is not installed: cargo install cargo-fuzz --locked".into());
    }
    let list = Command::new(cargo)
        .args(["fuzz", "list"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("cargo fuzz list: {e}"))?;
    let targets: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .filter(|t| only.as_deref().is_none_or(|o| o == *t))
        .map(str::to_owned)
        .collect();
    if targets.is_empty() {
        return Err("no fuzz target to run (see fuzz/Cargo.toml)".into());
    }
    for target in &targets {
        let corpus = root.join("fuzz").join("corpus").join(target);
        std::fs::create_dir_all(&corpus).map_err(|e| format!("{}: {e}", corpus.display()))?;
        for (i, seed) in seeds(root, target).iter().enumerate() {
            let path = corpus.join(format!("seed-{i}"));
            if !path.exists() {
                std::fs::write(&path, seed).map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
        println!("== fuzz {target} for {seconds} s");
        // Built under the workspace's target/ (its own directory: the
        // sanitizer flags make every artifact different), from the
        // committed fuzz/Cargo.lock.
        let status = Command::new(cargo)
            .args(["fuzz", "run", target, "--target-dir"])
            .arg(root.join("target").join("fuzz"))
            .arg("--")
            .arg(format!("-max_total_time={seconds}"))
            .env("RUSTC_BOOTSTRAP", "1")
            .current_dir(root)
            .status()
            .map_err(|e| format!("cargo fuzz run {target}: {e}"))?;
        if !status.success() {
            return Err(format!(
                "fuzz target {target} failed ({status}); the input is under fuzz/artifacts/{target}/"
            ));
        }
    }
    println!(
        "fuzz: {} target(s) ran {seconds} s each without a failure",
        targets.len()
    );
    Ok(())
}
