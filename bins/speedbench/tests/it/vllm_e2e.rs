//! Checks on runs against a real vLLM (CPU build, n-gram speculation,
//! `--per-request-spec-decode-metrics summary`), made by `.ci/vllm-e2e.sh`.
//!
//! The script sets `SPEEDBENCH_VLLM_E2E` to a directory holding, for each
//! run `NAME`, the run directory `NAME/`, its stdout and stderr
//! (`NAME.stdout`, `NAME.stderr`) and the server's `/metrics` text just
//! before and after it (`NAME.before.prom`, `NAME.after.prom`), fetched by
//! the script, not by speedbench. Every figure is checked against vLLM's own
//! counters: drafting steps, drafted and accepted tokens, accepted tokens by
//! position, successful requests. Without the variable (a plain `cargo
//! test`) there is nothing to check and the test says so.

use crate::common;

use std::path::{Path, PathBuf};

use common::read_run;
use speedbench_record::RequestRecord;

/// The speculative runs: (name, whether the preflight ran inside it).
const SPEC_RUNS: [(&str, bool); 4] = [
    ("chat-stream-c1", true),
    ("chat-c4", false),
    ("completions-stream-c4", false),
    ("completions-c1", false),
];

/// `fixtures/llama_e2e.jsonl`: 7 rows, 2 of them two-turn.
const REQUESTS: usize = 9;

/// vLLM's n-gram drafter was started with `num_speculative_tokens: 4`.
const K: usize = 4;

fn runs() -> Option<PathBuf> {
    std::env::var_os("SPEEDBENCH_VLLM_E2E").map(PathBuf::from)
}

/// The sum of every sample of counter `name` in a Prometheus text whose
/// labels include each of `labels` (`key="value"`).
fn counter(text: &str, name: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labelset, value) = match rest.strip_prefix('{') {
                Some(r) => r.split_once('}')?,
                None if rest.starts_with(' ') => ("", rest),
                None => return None,
            };
            labels
                .iter()
                .all(|want| labelset.split(',').any(|l| l.trim() == *want))
                .then(|| value.split_whitespace().next()?.parse::<f64>().ok())?
        })
        .sum()
}

/// What vLLM's counters moved by over one run.
struct CounterDelta {
    drafting_steps: u64,
    drafted: u64,
    accepted: u64,
    accepted_by_position: Vec<u64>,
    successes: u64,
    generated_tokens: u64,
    prompt_tokens: u64,
}

impl CounterDelta {
    fn of(dir: &Path, name: &str) -> CounterDelta {
        let read = |which: &str| {
            std::fs::read_to_string(dir.join(format!("{name}.{which}.prom")))
                .unwrap_or_else(|e| panic!("{name}.{which}.prom: {e}"))
        };
        let (before, after) = (read("before"), read("after"));
        let delta = |metric: &str, labels: &[&str]| {
            let d = counter(&after, metric, labels) - counter(&before, metric, labels);
            assert!(d >= 0.0 && d.fract() == 0.0, "{metric}: {d}");
            d as u64
        };
        let positions: Vec<String> = (0..K).map(|p| format!("position=\"{p}\"")).collect();
        CounterDelta {
            drafting_steps: delta("vllm:spec_decode_num_drafts_total", &[]),
            drafted: delta("vllm:spec_decode_num_draft_tokens_total", &[]),
            accepted: delta("vllm:spec_decode_num_accepted_tokens_total", &[]),
            accepted_by_position: positions
                .iter()
                .map(|p| delta("vllm:spec_decode_num_accepted_tokens_per_pos_total", &[p]))
                .collect(),
            successes: delta("vllm:request_success_total", &[]),
            generated_tokens: delta("vllm:generation_tokens_total", &[]),
            prompt_tokens: delta("vllm:prompt_tokens_total", &[]),
        }
    }
}

/// The preflight's acceptance, from its line: `preflight: per-request
/// acceptance: vllm: A of D drafted tokens accepted over S verify steps`.
fn preflight_counts(text: &str) -> (u64, u64, u64) {
    let line = text
        .lines()
        .find(|l| l.contains("preflight: per-request acceptance: vllm: "))
        .unwrap_or_else(|| panic!("no preflight acceptance line in:\n{text}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |w: &str| -> u64 {
        let at = words.iter().position(|x| *x == w).unwrap();
        words[at + 1].parse().unwrap()
    };
    let accepted: u64 = words[words.iter().position(|x| *x == "of").unwrap() - 1]
        .parse()
        .unwrap();
    (accepted, after("of"), after("over"))
}

/// Accepted drafts at each draft position, from the records' per-request
/// histograms (`hist[j]`: steps that accepted j drafts, so position p was
/// accepted by every step that accepted more than p).
fn accepted_by_position(records: &[RequestRecord]) -> Vec<u64> {
    let mut out = vec![0u64; K];
    for s in records.iter().filter_map(|r| r.spec.as_ref()) {
        for (j, steps) in s.acceptance_histogram.iter().enumerate() {
            for slot in out.iter_mut().take(j) {
                *slot += steps;
            }
        }
    }
    out
}

fn check_spec_run(root: &Path, name: &str, with_preflight: bool) {
    let dir = root.join(name);
    let records = read_run(&dir).unwrap().records;
    let stderr = std::fs::read_to_string(root.join(format!("{name}.stderr"))).unwrap();
    let stdout = std::fs::read_to_string(root.join(format!("{name}.stdout"))).unwrap();
    let said = format!("{stdout}{stderr}");
    assert!(
        said.contains("engine: vllm (GET /v1/models"),
        "{name}: {said}"
    );
    assert_eq!(records.len(), REQUESTS, "{name}");
    for r in &records {
        assert!(r.is_success(), "{name}: {:?}", r.error_message);
        assert!(r.ttft_ns.is_none_or(|t| t <= r.e2e_latency_ns), "{name}");
        assert_eq!(r.resends, 0, "{name}");
    }
    let server = CounterDelta::of(root, name);
    // The preflight is one more request, inside the run's counter window.
    let (pre_accepted, pre_drafted, pre_steps) = if with_preflight {
        preflight_counts(&said)
    } else {
        assert!(!said.contains("preflight:"), "{name}: {said}");
        (0, 0, 0)
    };
    let preflight_requests = u64::from(with_preflight);
    assert_eq!(
        server.successes,
        records.len() as u64 + preflight_requests,
        "{name}: vllm:request_success_total"
    );
    let spec: Vec<_> = records.iter().filter_map(|r| r.spec.as_ref()).collect();
    let sum = |f: &dyn Fn(&speedbench_record::SpecDecodeStats) -> u64| -> u64 {
        spec.iter().map(|s| f(s)).sum()
    };
    assert_eq!(
        sum(&|s| s.verify_steps.unwrap()) + pre_steps,
        server.drafting_steps,
        "{name}: drafting steps"
    );
    assert_eq!(
        sum(&|s| s.proposed_draft_tokens) + pre_drafted,
        server.drafted,
        "{name}: drafted tokens"
    );
    assert_eq!(
        sum(&|s| s.accepted_draft_tokens) + pre_accepted,
        server.accepted,
        "{name}: accepted tokens"
    );
    assert!(server.drafting_steps > 0, "{name}: n-gram never drafted");
    if !with_preflight {
        assert_eq!(
            accepted_by_position(&records),
            server.accepted_by_position,
            "{name}: accepted by position"
        );
        assert_eq!(
            server.accepted_by_position.iter().sum::<u64>(),
            server.accepted,
            "{name}"
        );
        check_per_pass_and_budget(&dir, name, &server);
    }
}

/// The per-pass figure's tokens are vLLM's generated-token counter's, and
/// the full-budget length from the pooled histogram is the run's
/// token-weighted acceptance length (one denominator).
fn check_per_pass_and_budget(dir: &Path, name: &str, server: &CounterDelta) {
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    let spec = &summary["spec_decode"];
    assert_eq!(
        spec["per_pass"]["tokens"].as_u64(),
        Some(server.generated_tokens),
        "{name}: vllm:generation_tokens"
    );
    assert_eq!(spec["per_pass"]["accepted"].as_u64(), Some(server.accepted));
    let counts: Vec<f64> = spec["histogram"]["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_f64().unwrap())
        .collect();
    let steps: f64 = counts.iter().sum();
    let full_budget = 1.0
        + (1..counts.len())
            .map(|i| counts[i..].iter().sum::<f64>() / steps)
            .sum::<f64>();
    let token_weighted = 1.0 + server.accepted as f64 / server.drafting_steps as f64;
    assert!(
        (full_budget - token_weighted).abs() < 1e-9,
        "{name}: {full_budget} vs {token_weighted}"
    );
}

#[test]
fn vllm_runs_check_out_against_its_counters() {
    let Some(root) = runs() else {
        eprintln!("skipped: SPEEDBENCH_VLLM_E2E is not set (run .ci/vllm-e2e.sh)");
        return;
    };
    for (name, with_preflight) in SPEC_RUNS {
        check_spec_run(&root, name, with_preflight);
    }
    // Without speculation: no payload, no drafting, every request counted.
    let base = read_run(&root.join("base-chat-stream-c1")).unwrap().records;
    assert_eq!(base.len(), REQUESTS);
    assert!(base.iter().all(|r| r.is_success() && r.spec.is_none()));
    let server = CounterDelta::of(&root, "base-chat-stream-c1");
    assert_eq!(server.drafting_steps, 0);
    // The preflight reads a baseline as one, from the server's own metrics.
    let said = std::fs::read_to_string(root.join("base-chat-stream-c1.stderr")).unwrap();
    assert!(
        said.contains(
            "preflight: no per-request acceptance came back from vllm: the server does not \
             speculate (GET /metrics: no vllm:spec_decode_ metrics): right for a baseline run"
        ),
        "{said}"
    );
    assert_eq!(server.successes, REQUESTS as u64 + 1, "the preflight too");
    let compare = std::fs::read_to_string(root.join("compare.stdout")).unwrap();
    assert!(compare.to_lowercase().contains("speedup"), "{compare}");
    // The lossless share, and where outputs differ, where.
    assert!(compare.contains("Byte-identical outputs:"), "{compare}");
    let differing = compare
        .lines()
        .find_map(|l| l.strip_prefix("Byte-identical outputs: "))
        .and_then(|l| l.split("); ").nth(1))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or_else(|| panic!("no count of differing outputs: {compare}"));
    if differing > 0 {
        assert!(compare.contains("first difference at byte"), "{compare}");
    }
}

/// `--isl 48 --osl 16` over completions: vLLM's own count of every prompt
/// is the 48 tokens its `/tokenize` counted plus the same special tokens on
/// each (a BOS where its tokenizer adds one), and it generated 16 tokens
/// for each, by its counters as by its usage.
#[test]
fn synthetic_prompts_have_their_length_by_vllms_own_count() {
    let Some(root) = runs() else {
        eprintln!("skipped: SPEEDBENCH_VLLM_E2E is not set (run .ci/vllm-e2e.sh)");
        return;
    };
    let records = crate::synthetic_e2e::check_real_synthetic_run(&root.join("synthetic"));
    let prompts: u64 = records.iter().filter_map(|r| r.prompt_tokens).sum();
    let server = CounterDelta::of(&root, "synthetic");
    assert_eq!(server.prompt_tokens, prompts);
    assert_eq!(server.generated_tokens, 4 * 16);
    assert_eq!(server.successes, 4);
}

/// The same run with `--tokenizer` the model's directory: its own
/// tokenizer.json, read by speedbench, builds prompts vLLM counts at the
/// same length, by its counters as by its usage, and the run says which
/// tokenizer counted.
#[test]
fn prompts_counted_by_the_models_tokenizer_json_have_vllms_length() {
    let Some(root) = runs() else {
        eprintln!("skipped: SPEEDBENCH_VLLM_E2E is not set (run .ci/vllm-e2e.sh)");
        return;
    };
    let dir = root.join("synthetic-local");
    let records = crate::synthetic_e2e::check_real_synthetic_run(&dir);
    let prompts: u64 = records.iter().filter_map(|r| r.prompt_tokens).sum();
    let server = CounterDelta::of(&root, "synthetic-local");
    assert_eq!(server.prompt_tokens, prompts);
    assert_eq!(server.generated_tokens, 4 * 16);
    assert_eq!(server.successes, 4);
    // vLLM's count of the prompts is the one its /tokenize gave.
    let by_server = crate::synthetic_e2e::check_real_synthetic_run(&root.join("synthetic"));
    assert_eq!(records[0].prompt_tokens, by_server[0].prompt_tokens);
    let config = &crate::synthetic_e2e::run_json(&dir)["config"]["synthetic"];
    let counted_by = config["tokens_counted_by"].as_str().unwrap();
    assert!(
        counted_by.starts_with("the local tokenizer.json of --tokenizer "),
        "{counted_by}"
    );
}

#[test]
fn counters_are_read_by_name_and_label() {
    let text = "# HELP x\n\
        vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} 7.0\n\
        vllm:spec_decode_num_drafts_created{engine=\"0\"} 1.7e9\n\
        vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",position=\"0\"} 5.0\n\
        vllm:spec_decode_num_accepted_tokens_per_pos_total{engine=\"0\",position=\"1\"} 3.0\n\
        vllm:request_success_total{finished_reason=\"stop\"} 2.0\n\
        vllm:request_success_total{finished_reason=\"length\"} 4.0\n\
        plain_total 9\n";
    assert_eq!(counter(text, "vllm:spec_decode_num_drafts_total", &[]), 7.0);
    assert_eq!(
        counter(
            text,
            "vllm:spec_decode_num_accepted_tokens_per_pos_total",
            &["position=\"1\""]
        ),
        3.0
    );
    assert_eq!(counter(text, "vllm:request_success_total", &[]), 6.0);
    assert_eq!(counter(text, "plain_total", &[]), 9.0);
    assert_eq!(
        preflight_counts(
            "x\npreflight: per-request acceptance: vllm: 14 of 16 drafted tokens accepted over 4 verify steps\n"
        ),
        (14, 16, 4)
    );
    let r = |hist: Vec<u64>| RequestRecord {
        spec: Some(speedbench_record::SpecDecodeStats {
            acceptance_histogram: hist,
            ..Default::default()
        }),
        ..Default::default()
    };
    // Steps accepting 0, 1, 4 and 2 drafts: position 0 by three steps,
    // position 1 by two, positions 2 and 3 by one.
    assert_eq!(
        accepted_by_position(&[r(vec![1, 1, 0, 0, 1]), r(vec![0, 0, 1])]),
        vec![3, 2, 1, 1]
    );
}

/// The tune of the real vLLM (`.ci/vllm-e2e.sh`): what every real tune
/// shows ([`crate::tune_e2e::check_real_tune`]), the prefix cache emptied
/// before every run on a server that served one, and the prediction from
/// the larger budget: exact at its own budget, and printed beside the
/// smaller budget the tune measured.
#[test]
fn a_tune_of_the_real_vllm_checks_out() {
    let Some(root) = runs() else {
        eprintln!("skipped: SPEEDBENCH_VLLM_E2E is not set (run .ci/vllm-e2e.sh)");
        return;
    };
    let dir = root.join("tune");
    crate::tune_e2e::check_real_tune(&dir);
    let m = crate::tune_e2e::manifest(&dir);
    for c in &m.configurations {
        assert_eq!(c.runs[0].cache.as_deref(), Some("a fresh server"));
        assert_eq!(
            c.runs[1].cache.as_deref(),
            Some("emptied (POST /reset_prefix_cache)"),
            "{}",
            c.name
        );
    }
    let report = crate::tune_e2e::report_json(&dir);
    for load in ["1", "2"] {
        let p = report["predictions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| {
                p["configuration"] == "k=4" && p["category"] == "overall" && p["load"] == load
            })
            .expect("k=4's run predicts");
        let budgets = p["budgets"].as_array().unwrap();
        assert_eq!(budgets.len(), 4);
        let own = &budgets[3];
        assert!(
            (own["decode_speedup"].as_f64().unwrap() / own["measured"].as_f64().unwrap() - 1.0)
                .abs()
                < 1e-9
        );
        assert_eq!(budgets[1]["measured_by"], "k=2");
        eprintln!(
            "vLLM, concurrency {load}: k=2 predicted {:.3} from k=4, measured {:.3} ({:+.1}%)",
            budgets[1]["decode_speedup"].as_f64().unwrap(),
            budgets[1]["measured"].as_f64().unwrap(),
            budgets[1]["error"].as_f64().unwrap() * 100.0
        );
    }
}
