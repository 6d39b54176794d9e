//! End-to-end: a baseline run and a speculative run of the same prompts,
//! then `speedbench compare`.

use crate::common;

use std::process::Output;

use common::*;
use speedbench_record::{RecordWriter, RequestRecord, RunManifest, SpecDecodeStats};
use speedbench_sim::{AcceptanceProfile, SimConfig, SpecFlavor};

async fn profile_against(config: SimConfig, out: &std::path::Path) {
    let server = sim(config).await;
    let status = run(&[
        "profile",
        "--url",
        &server.url(),
        "--input-file",
        fixture().to_str().unwrap(),
        "--category",
        "math,roleplay",
        "--streaming",
        "--concurrency",
        "2",
        "--extra-inputs",
        "temperature:0",
        "--output-artifact-dir",
        out.to_str().unwrap(),
    ])
    .await
    .status;
    assert!(status.success());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_reports_speedup_and_a_lossless_check() {
    let dir = tempfile::tempdir().unwrap();
    let (base, spec) = (dir.path().join("base"), dir.path().join("spec"));
    let demo = SimConfig::speed_bench_demo()
        .with_step_ms(2.0)
        .with_flavor(SpecFlavor::Both);
    // The same server with speculation off: every step emits one token.
    let mut baseline = demo.clone();
    baseline.default_spec = AcceptanceProfile::baseline();
    baseline.categories.clear();
    profile_against(baseline, &base).await;
    profile_against(demo, &spec).await;

    let out = run(&[
        "compare",
        "--baseline",
        base.to_str().unwrap(),
        "--speculative",
        spec.to_str().unwrap(),
        "--format",
        "json",
        "--bootstrap",
        "200",
    ])
    .await;
    assert!(out.status.success());
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["category"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["math", "roleplay", "overall"]);
    let overall = &rows[2];
    // The simulator's text does not depend on speculation, so every paired
    // output is byte-identical: 6 rows of math+roleplay, 2 of them two-turn.
    assert_eq!(overall["paired"], 8);
    assert_eq!(overall["identical"], 8);
    assert_eq!(json["diverging"], 0);
    // Each verify step takes the same 2 ms with or without drafts, and the
    // server's own (llama.cpp-shaped) timings say so, so the speculative run
    // decodes faster, by about the acceptance length.
    for row in rows {
        assert_eq!(row["decode_source"], "server");
        let speedup = row["decode_speedup"].as_f64().unwrap();
        let al = row["accept_length"].as_f64().unwrap();
        assert!(speedup > 1.0 && (speedup / al - 1.0).abs() < 0.25, "{row}");
        let ci = &row["accept_length_ci"];
        assert!(ci["low"].as_f64().unwrap() <= row["accept_length"].as_f64().unwrap());
    }
    // math accepts more than roleplay in the demo profiles.
    assert!(
        rows[0]["accept_length"].as_f64().unwrap() > rows[1]["accept_length"].as_f64().unwrap()
    );

    let out = run(&[
        "compare",
        "--baseline",
        base.to_str().unwrap(),
        "--speculative",
        spec.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success());
    // Same options on both runs: nothing to warn about but sampling.
    assert!(!stderr(&out).contains("do not match"), "{}", stderr(&out));
    let console = String::from_utf8(out.stdout).unwrap();
    assert!(
        console.contains("Byte-identical outputs: 8 of 8 paired requests (100.0%); 0 differ."),
        "{console}"
    );
    // Said for what it is: identity, not a verdict on losslessness.
    assert!(
        console.contains("some engines are not bit-exact under speculation"),
        "{console}"
    );
    assert!(!console.contains("Lossless check"), "{console}");
    assert!(!console.contains("meaningful"), "{console}");

    // Roles swapped (a speculating baseline): refused, naming it; --force
    // compares anyway and says it again.
    let swapped = compare_dirs(&spec, &base, &[]).await;
    assert_eq!(swapped.status.code(), Some(1), "{}", stderr(&swapped));
    assert!(
        stderr(&swapped).contains("were --baseline and --speculative swapped?"),
        "{}",
        stderr(&swapped)
    );
    let forced = compare_dirs(&spec, &base, &["--force"]).await;
    assert!(forced.status.success(), "{}", stderr(&forced));
    assert!(
        stderr(&forced).contains("the runs differ (--force): roles: the baseline run"),
        "{}",
        stderr(&forced)
    );
}

/// A run directory written directly: `records`, and a `run.json` with
/// `outcome` and `config` (no simulator needed for the checks below).
fn synth_run(
    dir: &std::path::Path,
    records: &[RequestRecord],
    outcome: &str,
    config: serde_json::Value,
) -> std::path::PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let manifest = RunManifest {
        run_id: "r".into(),
        model: "m".into(),
        dataset: "mini".into(),
        status: outcome.parse().expect("a run status"),
        config,
        ..Default::default()
    };
    let mut w = RecordWriter::create(dir.join("records.parquet")).unwrap();
    for r in records {
        w.append(r).unwrap();
    }
    w.close(&manifest).unwrap();
    std::fs::write(
        dir.join("run.json"),
        serde_json::to_string(&manifest).unwrap(),
    )
    .unwrap();
    dir.to_path_buf()
}

fn rec(index: u64, id: &str, turn: u32, category: &str, text: &str) -> RequestRecord {
    RequestRecord {
        run_id: "r".into(),
        request_index: index,
        conversation_id: id.into(),
        turn_index: turn,
        dataset: "mini".into(),
        category: Some(category.into()),
        model: "m".into(),
        e2e_latency_ns: 1_000_000_000,
        ttft_ns: Some(100_000_000),
        prompt_tokens: Some(20 + index),
        completion_tokens: Some(11),
        output_text: text.into(),
        spec: Some(SpecDecodeStats {
            accepted_draft_tokens: 4,
            proposed_draft_tokens: 8,
            verify_steps: Some(6),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn greedy() -> serde_json::Value {
    serde_json::json!({"osl": 64, "endpoint_type": "chat", "streaming": true,
        "extra_inputs": {"temperature": 0}})
}

fn four() -> Vec<RequestRecord> {
    vec![
        rec(0, "a", 0, "math", "one"),
        rec(1, "a", 1, "math", "two"),
        rec(2, "b", 0, "qa", "three"),
        rec(3, "c", 0, "qa", "four"),
    ]
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_do_not_match_are_refused_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let base = synth_run(&tmp.path().join("base"), &four(), "completed", greedy());
    // The same run compares cleanly, with no warning.
    let out = compare_dirs(&base, &base, &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));

    let mut other_osl = greedy();
    other_osl["osl"] = 128.into();
    let mut hot = greedy();
    hot["extra_inputs"]["temperature"] = 0.7.into();
    let mut chat_vs_text = greedy();
    chat_vs_text["endpoint_type"] = "completions".into();
    let mut fewer = four();
    fewer.pop();
    let mut recategorized = four();
    recategorized[2].category = Some("math".into());
    let mut other_prompt = four();
    other_prompt[3].prompt_tokens = Some(99);
    let cases: Vec<(&str, Vec<RequestRecord>, serde_json::Value, &str)> = vec![
        (
            "osl",
            four(),
            other_osl,
            "osl (max_tokens): baseline 64, speculative 128",
        ),
        (
            "temperature",
            four(),
            hot,
            "sampling field extra input temperature: baseline 0, speculative 0.7",
        ),
        (
            "endpoint",
            four(),
            chat_vs_text,
            "endpoint_type: baseline \"chat\", speculative \"completions\"",
        ),
        (
            "fewer",
            fewer,
            greedy(),
            "request \"c\" turn 0: 1 in the baseline, 0 in the speculative run",
        ),
        (
            "recategorized",
            recategorized,
            greedy(),
            "request \"b\" is in category \"qa\" in the baseline, \"math\" in the speculative run",
        ),
        (
            "prompt",
            other_prompt,
            greedy(),
            "request \"c\" turn 0: a prompt of 23 tokens in the baseline, 99 in the speculative run",
        ),
    ];
    for (name, records, config, needle) in cases {
        let spec = synth_run(&tmp.path().join(name), &records, "completed", config);
        let out = compare_dirs(&base, &spec, &[]).await;
        assert_eq!(out.status.code(), Some(1), "{name}: refused");
        let err = stderr(&out);
        assert!(err.contains("the runs do not match"), "{name}: {err}");
        assert!(err.contains(needle), "{name}: {needle:?} not in {err}");
        assert!(err.contains("--force"), "{err}");
        let out = compare_dirs(&base, &spec, &["--force"]).await;
        assert!(
            out.status.success(),
            "{name} with --force: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("warning: the runs differ (--force): "),
            "{}",
            stderr(&out)
        );
        assert!(stderr(&out).contains(needle), "{}", stderr(&out));
    }

    // Another dataset under the same ids.
    let dir = tmp.path().join("dataset");
    let spec = synth_run(&dir, &four(), "completed", greedy());
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("run.json")).unwrap()).unwrap();
    m["dataset"] = "another".into();
    std::fs::write(dir.join("run.json"), m.to_string()).unwrap();
    let out = compare_dirs(&base, &spec, &[]).await;
    assert!(
        stderr(&out).contains("dataset: baseline \"mini\", speculative \"another\""),
        "{}",
        stderr(&out)
    );
    assert!(!out.status.success());

    // A request option that does not change sampling only warns.
    let mut tagged = greedy();
    tagged["extra_inputs"]["user"] = "bench".into();
    let spec = synth_run(&tmp.path().join("tagged"), &four(), "completed", tagged);
    let out = compare_dirs(&base, &spec, &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("warning: extra input user: baseline not set, speculative \"bench\" (not a sampling field)"),
        "{}",
        stderr(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn incomplete_runs_are_compared_with_a_warning() {
    let tmp = tempfile::tempdir().unwrap();
    let base = synth_run(&tmp.path().join("base"), &four(), "completed", greedy());
    let mut part = four();
    part.truncate(2);
    for (outcome, needle) in [
        ("interrupted", "was interrupted before it finished"),
        ("running", "was killed before it finished"),
    ] {
        let spec = synth_run(&tmp.path().join(outcome), &part, outcome, greedy());
        let out = compare_dirs(&base, &spec, &["--format", "json"]).await;
        assert!(out.status.success(), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "warning: the speculative run {} {needle}",
                spec.display()
            )),
            "{err}"
        );
        assert!(err.contains("holds 2 record(s)"), "{err}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            json["rows"].as_array().unwrap().last().unwrap()["paired"],
            2
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_where_every_request_failed_is_named_as_such() {
    let tmp = tempfile::tempdir().unwrap();
    let base = synth_run(&tmp.path().join("base"), &four(), "completed", greedy());
    let failed: Vec<_> = four()
        .into_iter()
        .map(|mut r| {
            r.error_kind = Some(speedbench_record::ErrorKind::HttpStatus);
            r.error_message = Some("HTTP 404: The model m does not exist".into());
            r
        })
        .collect();
    let spec = synth_run(&tmp.path().join("down"), &failed, "failed", greedy());
    let out = compare_dirs(&base, &spec, &[]).await;
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(
            "the speculative run has no successful request (4 records: 4 failed, 0 warmup)"
        ),
        "{err}"
    );
    assert!(!err.contains("share no category"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_ids_pair_by_occurrence() {
    // One row run twice (as --num-conversations above the row count does,
    // or a dataset with a repeated id recorded before such ids were refused)
    // with different outputs each time: comparing the run with itself must
    // pair first with first and second with second.
    let tmp = tempfile::tempdir().unwrap();
    let records = vec![
        rec(0, "a", 0, "math", "first answer"),
        rec(1, "b", 0, "math", "other"),
        rec(2, "a", 0, "math", "second answer"),
    ];
    let dir = synth_run(&tmp.path().join("run"), &records, "completed", greedy());
    let out = compare_dirs(&dir, &dir, &["--format", "json"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let overall = json["rows"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (overall["paired"].as_u64(), overall["identical"].as_u64()),
        (Some(3), Some(3))
    );
    assert_eq!(json["diverging"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_directories_and_huge_bootstraps_are_named() {
    let tmp = tempfile::tempdir().unwrap();
    let base = synth_run(&tmp.path().join("base"), &four(), "completed", greedy());
    let missing = tmp.path().join("no_such_run");
    for (b, s) in [(&missing, &base), (&base, &missing)] {
        let out = compare_dirs(b, s, &[]).await;
        assert_eq!(out.status.code(), Some(1));
        let err = stderr(&out);
        assert!(
            err.contains(&format!(
                "run directory {} does not exist",
                missing.display()
            )),
            "{err}"
        );
        assert!(!err.contains("profile_export_aiperf.json"), "{err}");
    }
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = compare_dirs(&base, &empty, &[]).await;
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "the speculative run directory {}: it holds no run",
            empty.display()
        )),
        "{err}"
    );

    // A run killed mid-write: only records.parquet.partial, without a footer.
    let killed = tmp.path().join("killed");
    std::fs::create_dir_all(&killed).unwrap();
    let bytes = std::fs::read(base.join("records.parquet")).unwrap();
    std::fs::write(
        killed.join("records.parquet.partial"),
        &bytes[..bytes.len() / 2],
    )
    .unwrap();
    let out = compare_dirs(&base, &killed, &[]).await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("records.parquet.partial without a Parquet footer"),
        "{err}"
    );
    assert!(!err.contains("profile_export_aiperf.json"), "{err}");
    // One whose rename never happened: its closed .partial file is compared,
    // with a warning that the run died.
    let unrenamed = tmp.path().join("unrenamed");
    std::fs::create_dir_all(&unrenamed).unwrap();
    std::fs::write(unrenamed.join("records.parquet.partial"), &bytes).unwrap();
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(base.join("run.json")).unwrap()).unwrap();
    m["outcome"] = "running".into();
    std::fs::write(unrenamed.join("run.json"), m.to_string()).unwrap();
    let out = compare_dirs(&base, &unrenamed, &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("was killed before it finished"),
        "{}",
        stderr(&out)
    );

    let out = run(&[
        "compare",
        "--baseline",
        base.to_str().unwrap(),
        "--speculative",
        base.to_str().unwrap(),
        "--bootstrap",
        "1000001",
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("--bootstrap: 1000001 resamples asked for; at most 1,000,000"),
        "{err}"
    );
    // The cap itself is accepted (small runs: fast).
    let out = run(&[
        "compare",
        "--baseline",
        base.to_str().unwrap(),
        "--speculative",
        base.to_str().unwrap(),
        "--bootstrap",
        "10000",
        "--format",
        "json",
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Two runs of input files that differ only in the text of one later turn
/// (same ids, categories and first-turn lengths): the prompt hashes every
/// record carries tell them apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_of_different_prompts_are_refused_by_their_hashes() {
    let dir = tempfile::tempdir().unwrap();
    let rows = |second: &str| {
        format!(
            "{{\"question_id\": \"q1\", \"category\": \"math\", \"turns\": [\"What is 2+2?\", \"{second}\"]}}\n\
             {{\"question_id\": \"q2\", \"category\": \"math\", \"turns\": [\"What is 3+3?\"]}}\n"
        )
    };
    // One file name, so both runs are of dataset "rows".
    let (a, b) = (
        dir.path().join("a/rows.jsonl"),
        dir.path().join("b/rows.jsonl"),
    );
    std::fs::create_dir_all(a.parent().unwrap()).unwrap();
    std::fs::create_dir_all(b.parent().unwrap()).unwrap();
    std::fs::write(&a, rows("And times 3?")).unwrap();
    std::fs::write(&b, rows("And times 4?")).unwrap();
    let server = sim(SimConfig::speed_bench_demo()).await;
    let url = server.url();
    for (input, out) in [(&a, "base"), (&a, "spec"), (&b, "other")] {
        let out_dir = dir.path().join(out);
        let status = run(&[
            "profile",
            "--url",
            &url,
            "--input-file",
            input.to_str().unwrap(),
            "--output-artifact-dir",
            out_dir.to_str().unwrap(),
        ])
        .await
        .status;
        assert!(status.success());
        let records = read_run(&out_dir).unwrap().records;
        assert!(
            records
                .iter()
                .all(|r| r.prompt_sha256.as_ref().is_some_and(|h| h.len() == 64))
        );
    }
    server.shutdown().await;
    let same = compare_dirs(&dir.path().join("base"), &dir.path().join("spec"), &[]).await;
    assert!(same.status.success(), "{}", stderr(&same));
    let other = compare_dirs(&dir.path().join("base"), &dir.path().join("other"), &[]).await;
    assert_eq!(other.status.code(), Some(1));
    let err = stderr(&other);
    assert!(
        err.contains("not the same prompts (1 request(s) differ); first: request \"q1\" turn 1"),
        "{err}"
    );
}

/// A request of the format checks below: `e2e_s` and `ttft_s` set the
/// client decode speed `(tokens - 1) / (e2e - ttft)`.
fn timed(
    index: u64,
    id: &str,
    category: &str,
    (e2e_s, ttft_s, tokens): (f64, f64, u64),
    text: &str,
    spec: Option<(u64, u64, u64)>,
) -> RequestRecord {
    RequestRecord {
        e2e_latency_ns: (e2e_s * 1e9).round() as u64,
        ttft_ns: Some((ttft_s * 1e9).round() as u64),
        completion_tokens: Some(tokens),
        spec: spec.map(|(accepted, proposed, steps)| SpecDecodeStats {
            accepted_draft_tokens: accepted,
            proposed_draft_tokens: proposed,
            verify_steps: Some(steps),
            ..Default::default()
        }),
        ..rec(index, id, 0, category, text)
    }
}

/// The comparison's CSV, JSON and Markdown, each worked out by hand from
/// the records.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_formats_carry_the_numbers_worked_by_hand() {
    let tmp = tempfile::tempdir().unwrap();
    // Baseline: every request decodes at 10 tokens/s (18/1.8, 36/3.6, 9/0.9).
    let base = vec![
        timed(0, "a", "math", (2.0, 0.2, 19), "same", None),
        timed(1, "b", "math", (4.0, 0.4, 37), "p q", None),
        timed(2, "c", "qa", (1.0, 0.1, 10), "same too", None),
    ];
    // Speculative: a 18/0.6 = 30, b 36/1.8 = 20, c 9/0.45 = 20 tokens/s.
    let spec = vec![
        timed(0, "a", "math", (1.0, 0.4, 19), "same", Some((30, 40, 10))),
        timed(1, "b", "math", (2.0, 0.2, 37), "p r", Some((10, 40, 10))),
        timed(2, "c", "qa", (0.5, 0.05, 10), "same too", Some((5, 10, 5))),
    ];
    let base = synth_run(&tmp.path().join("base"), &base, "completed", greedy());
    let spec = synth_run(&tmp.path().join("spec"), &spec, "completed", greedy());

    let csv_path = tmp.path().join("compare.csv");
    let out = compare_dirs(
        &base,
        &spec,
        &["--format", "csv", "--output", csv_path.to_str().unwrap()],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(out.stdout.is_empty(), "csv goes to --output only");
    assert!(stderr(&out).contains(&format!("CSV written to {}", csv_path.display())));
    // math: decode (30+20)/2 = 25 over 10 = 2.50x; latency (2+4)/2 = 3 s
    // over (1+2)/2 = 1.5 s = 2.00x; acceptance 40/80 = 0.5, 1 + 40/20 = 3.
    // qa: 20/10 = 2.00x, 1/0.5 = 2.00x; 5/10 = 0.5, 1 + 5/5 = 2.
    // overall: 23.33/10 = 2.33x; 2.333/1.167 = 2.00x; 45/90, 1 + 45/25 = 2.8.
    // Outputs: b differs at "q"/"r": 1 of 2 in math, 2 of 3 overall.
    // --bootstrap 0: no interval columns.
    let expected = "category,base_requests,spec_requests,base_decode_tps,spec_decode_tps,\
        decode_speedup,decode_speedup_low,decode_speedup_high,base_latency_s,spec_latency_s,\
        latency_speedup,latency_speedup_low,latency_speedup_high,accept_rate,accept_length,\
        accept_length_low,accept_length_high,paired,identical,identical_share,decode_source\r\n\
        math,2,2,10.00,25.00,2.50,,,3.000,1.500,2.00,,,0.5000,3.00,,,2,1,0.5000,client\r\n\
        qa,1,1,10.00,20.00,2.00,,,1.000,0.500,2.00,,,0.5000,2.00,,,1,1,1.0000,client\r\n\
        overall,3,3,10.00,23.33,2.33,,,2.333,1.167,2.00,,,0.5000,2.80,,,3,2,0.6667,client\r\n";
    assert_eq!(std::fs::read_to_string(&csv_path).unwrap(), expected);

    // JSON: the same numbers at full precision.
    let out = compare_dirs(&base, &spec, &["--format", "json"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json["rows"].as_array().unwrap();
    let close = |v: &serde_json::Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
    for (row, (cat, decode, latency, al)) in rows.iter().zip([
        ("math", 2.5, 2.0, 3.0),
        ("qa", 2.0, 2.0, 2.0),
        ("overall", 70.0 / 30.0, 2.0, 2.8),
    ]) {
        assert_eq!(row["category"], cat);
        assert!(close(&row["decode_speedup"], decode), "{row}");
        assert!(close(&row["latency_speedup"], latency), "{row}");
        assert!(close(&row["accept_length"], al), "{row}");
        assert!(close(&row["accept_rate"], 0.5), "{row}");
        assert_eq!(row["decode_speedup_ci"], serde_json::Value::Null);
    }
    assert_eq!(
        (rows[2]["paired"].as_u64(), rows[2]["identical"].as_u64()),
        (Some(3), Some(2))
    );
    assert_eq!(json["diverging"], 1);

    // Markdown: the console's columns, intervals (none here) in brackets.
    let out = compare_dirs(&base, &spec, &["--format", "markdown"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let md = String::from_utf8(out.stdout).unwrap();
    let mut lines = md.lines();
    assert_eq!(
        lines.next(),
        Some(
            "| category | base_decode_t/s | spec_decode_t/s | decode_speedup | base_latency | \
             spec_latency | latency_speedup | accept_rate | accept_length | byte_identical |"
        )
    );
    assert_eq!(
        lines.next(),
        Some("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    );
    assert_eq!(
        lines.next(),
        Some(
            "| math | 10.00 | 25.00 | 2.50x | 3.000s | 1.500s | 2.00x | 0.5000 | 3.00 | 1/2 (50%) |"
        )
    );
    assert_eq!(
        lines.next(),
        Some(
            "| qa | 10.00 | 20.00 | 2.00x | 1.000s | 0.500s | 2.00x | 0.5000 | 2.00 | 1/1 (100%) |"
        )
    );
    assert_eq!(
        lines.next(),
        Some(
            "| overall | 10.00 | 23.33 | 2.33x | 2.333s | 1.167s | 2.00x | 0.5000 | 2.80 | 2/3 (67%) |"
        )
    );
    assert!(
        md.contains("Byte-identical outputs: 2 of 3 paired requests (66.7%); 1 differ."),
        "{md}"
    );
    assert!(
        md.contains("- `b` turn 0: first difference at byte 2: base \"q\" vs spec \"r\""),
        "{md}"
    );

    // both: the console table on stdout and the CSV beside it.
    let both = tmp.path().join("both.csv");
    let out = compare_dirs(
        &base,
        &spec,
        &["--format", "both", "--output", both.to_str().unwrap()],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("2.50x"));
    assert_eq!(std::fs::read_to_string(&both).unwrap(), expected);
}

/// Runs against a server with no delays leave decode windows below the
/// client's timer: `compare` says so for each side, as `profile` did,
/// instead of printing a 300x speedup as if it were the server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_carries_the_warning_of_runs_too_fast_to_time() {
    let dir = tempfile::tempdir().unwrap();
    let (base, spec) = (dir.path().join("base"), dir.path().join("spec"));
    let instant = SimConfig::speed_bench_demo()
        .with_ttft_ms(0.0)
        .with_step_ms(0.0)
        .with_flavor(SpecFlavor::Both);
    let mut baseline = instant.clone();
    baseline.default_spec = AcceptanceProfile::baseline();
    baseline.categories.clear();
    profile_against(baseline, &base).await;
    profile_against(instant, &spec).await;
    let out = compare_dirs(&base, &spec, &[]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    for role in ["baseline", "speculative"] {
        let line = said
            .lines()
            .find(|l| l.contains(&format!("the {role} run ")))
            .unwrap_or_else(|| panic!("no warning for the {role} run: {said}"));
        assert!(line.contains("below what the client can time"), "{line}");
        assert!(
            line.contains("speedups over these figures are not the server's"),
            "{line}"
        );
    }
}

/// Runs at different loads, or one primed by a preflight and one not, are
/// compared with a warning naming the difference, not a silent speedup.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn different_loads_and_preflights_are_warned() {
    let dir = tempfile::tempdir().unwrap();
    let with = |concurrency: u64, no_preflight: bool| {
        let mut c = greedy();
        c["concurrency"] = serde_json::json!(concurrency);
        c["client"] = serde_json::json!({ "no_preflight": no_preflight });
        c
    };
    let base = synth_run(
        &dir.path().join("base"),
        &four(),
        "completed",
        with(1, false),
    );
    let spec = synth_run(
        &dir.path().join("spec"),
        &four(),
        "completed",
        with(2, true),
    );
    let out = compare_dirs(&base, &spec, &[]).await;
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(
            "concurrency: baseline 1, speculative 2: latency and throughput depend on the load"
        ),
        "{err}"
    );
    assert!(
        err.contains(
            "preflight: the baseline run sent one and the speculative run did not (--no-preflight)"
        ),
        "{err}"
    );
    // The same settings: neither warning.
    let same = synth_run(
        &dir.path().join("same"),
        &four(),
        "completed",
        with(1, false),
    );
    let err = stderr(&compare_dirs(&base, &same, &[]).await);
    assert!(
        !err.contains("concurrency:") && !err.contains("preflight:"),
        "{err}"
    );
}
