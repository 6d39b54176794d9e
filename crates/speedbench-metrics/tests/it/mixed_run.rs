//! A small mixed run through the public API: vLLM and llama.cpp records,
//! three categories, warmup and failures.

use speedbench_metrics::{
    OVERALL, RunMetrics, SpeedBenchPySample, acceptance_by, macro_average, speed_bench_py_summary,
};
use speedbench_record::{ErrorKind, RequestRecord, ServerTimings, SpecDecodeStats, SpecSource};

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

/// A successful streamed request; times in ms from t = 0 s.
fn base(index: u64, category: &str, start_ms: i64, ttft_ms: u64, e2e_ms: u64) -> RequestRecord {
    RequestRecord {
        run_id: "run".into(),
        request_index: index,
        conversation_id: format!("q{index}"),
        category: Some(category.into()),
        start_unix_ns: start_ms * 1_000_000,
        end_unix_ns: (start_ms + e2e_ms as i64) * 1_000_000,
        ttft_ns: Some(ttft_ms * 1_000_000),
        e2e_latency_ns: e2e_ms * 1_000_000,
        prompt_tokens: Some(64),
        completion_tokens: Some(32),
        ..Default::default()
    }
}

fn vllm(mut r: RequestRecord, accepted: u64, proposed: u64, hist: &[u64]) -> RequestRecord {
    r.spec = Some(SpecDecodeStats {
        source: Some(SpecSource::Vllm),
        accepted_draft_tokens: accepted,
        proposed_draft_tokens: proposed,
        verify_steps: Some(hist.iter().sum()),
        num_spec_tokens: Some(3),
        acceptance_histogram: hist.to_vec(),
        ..Default::default()
    });
    r
}

fn llamacpp(mut r: RequestRecord, accepted: u64, drafted: u64, predicted: u64) -> RequestRecord {
    r.spec = Some(SpecDecodeStats {
        source: Some(SpecSource::LlamaCpp),
        accepted_draft_tokens: accepted,
        proposed_draft_tokens: drafted,
        verify_steps: Some(predicted - accepted),
        ..Default::default()
    });
    r.server_timings = Some(ServerTimings {
        predicted_n: Some(predicted),
        prompt_per_second: Some(500.0),
        predicted_per_second: Some(40.0),
        ..Default::default()
    });
    r
}

fn records() -> Vec<RequestRecord> {
    let mut warm = vllm(base(0, "coding", -5_000, 10, 100), 30, 30, &[0, 0, 0, 10]);
    warm.warmup = true;
    let mut timeout = base(5, "math", 500, 0, 4_000);
    timeout.ttft_ns = None;
    timeout.error_kind = Some(ErrorKind::Timeout);
    let mut refused = base(6, "qa", 0, 0, 0);
    refused.ttft_ns = None;
    refused.error_kind = Some(ErrorKind::Connection);
    vec![
        warm,
        // coding: acc 10 steps 43 prop 129 | acc 4 steps 4 prop 12
        vllm(base(1, "coding", 0, 100, 1_000), 10, 129, &[39, 1, 0, 3]),
        vllm(base(2, "coding", 200, 100, 1_000), 4, 12, &[2, 1, 0, 1]),
        // math: acc 6 steps 2 prop 6 (hist [0, 0, 0, 2])
        vllm(base(3, "math", 300, 100, 1_000), 6, 6, &[0, 0, 0, 2]),
        // qa (llama.cpp): accepted 12, drafted 20, predicted 40 -> steps 28
        llamacpp(base(4, "qa", 400, 100, 2_000), 12, 20, 40),
        timeout,
        refused,
    ]
}

#[test]
fn run_level_numbers() {
    let m = RunMetrics::from_records(&records());
    let c = &m.counts;
    assert_eq!((c.total, c.warmup, c.succeeded, c.failed), (7, 1, 4, 2));
    assert_eq!(c.failed_of(ErrorKind::Timeout), 1);
    assert_eq!(c.failed_of(ErrorKind::Connection), 1);

    // Window: earliest start 0 ms, latest end 500 + 4000 = 4500 ms (the
    // timeout) -> 4.5 s. 4 successes / 4.5 s; 4 * 32 tokens / 4.5 s.
    assert_eq!(m.benchmark_duration_s, Some(4.5));
    assert!(close(m.request_throughput.unwrap(), 4.0 / 4.5));
    assert!(close(m.output_token_throughput.unwrap(), 128.0 / 4.5));

    // ITL: (1000 - 100) / 31 ms for three requests, (2000 - 100) / 31 for one.
    let itl = m.inter_token_latency_ms.unwrap();
    assert_eq!(itl.count, 4);
    assert!(close(itl.avg, (3.0 * 900.0 + 1900.0) / 4.0 / 31.0));

    // Spec decode: Σacc = 10+4+6+12 = 32, Σsteps = 43+4+2+28 = 77,
    // Σprop = 129+12+6+20 = 167.
    // Token-weighted AL = 1 + 32/77 = 1.4155844156; overall rate 32/167*100.
    let s = &m.spec_decode;
    assert_eq!(s.totals.requests, 4);
    assert!(close(
        s.token_weighted_acceptance_length().unwrap(),
        1.0 + 32.0 / 77.0
    ));
    assert!(close(
        s.overall_draft_acceptance_rate_pct().unwrap(),
        3200.0 / 167.0
    ));
    // Per-request AL: 1+10/43, 2, 4, 1+12/28 -> equal-weight mean.
    let al = s.acceptance_length.unwrap();
    let expected = (1.0 + 10.0 / 43.0 + 2.0 + 4.0 + 1.0 + 12.0 / 28.0) / 4.0;
    assert!(close(al.avg, expected));
    assert!(close(al.max, 4.0));
    // Pooled histogram: vLLM requests only, [41, 2, 0, 6] = 49 steps.
    assert_eq!(s.histogram.requests, 3);
    assert_eq!(s.histogram.counts, vec![41, 2, 0, 6]);
    let pct = s.histogram.percentages();
    assert!(close(pct.iter().sum::<f64>(), 100.0));
    assert!(close(pct[3], 600.0 / 49.0));

    // Server timings: one llama.cpp request.
    assert_eq!(m.server_timings.requests, 1);
    assert_eq!(m.server_timings.mean_decode_tps(), Some(40.0));
}

#[test]
fn acceptance_matrix_row() {
    let by = acceptance_by(&records(), |r| r.category.clone());
    // coding 1 + 14/47; math 1 + 6/2 = 4; qa 1 + 12/28.
    let cells: Vec<Option<f64>> = ["coding", "humanities", "math", "qa"]
        .iter()
        .map(|c| by.get(*c).and_then(|t| t.accept_length()))
        .collect();
    assert!(close(cells[0].unwrap(), 1.0 + 14.0 / 47.0));
    assert_eq!(cells[1], None);
    assert!(close(cells[2].unwrap(), 4.0));
    assert!(close(cells[3].unwrap(), 1.0 + 12.0 / 28.0));
    // Overall = mean of the three present cells, humanities skipped.
    let overall = macro_average(&cells).unwrap();
    assert!(close(
        overall,
        (1.0 + 14.0 / 47.0 + 4.0 + 1.0 + 12.0 / 28.0) / 3.0
    ));
    // Rates are fractions: qa 12/20 = 0.6.
    assert!(close(by["qa"].accept_rate().unwrap(), 0.6));
}

#[test]
fn llamacpp_style_table() {
    // Every conversation is single-turn here, so each request is a sample.
    let rows = speed_bench_py_summary(&SpeedBenchPySample::from_records_in_dispatch_order(
        &records(),
    ));
    let names: Vec<&str> = rows.iter().map(|r| r.category.as_str()).collect();
    assert_eq!(names, ["coding", "math", "qa", OVERALL]);
    let math = &rows[1];
    assert_eq!((math.requests, math.failed), (1, 1));
    let qa = &rows[2];
    assert_eq!((qa.requests, qa.failed), (1, 1));
    assert_eq!(qa.avg_pred_t_s, Some(40.0));
    assert!(close(qa.accept_rate.unwrap(), 0.6));
    let overall = &rows[3];
    assert_eq!((overall.requests, overall.failed), (4, 2));
    // (1 + 1 + 1 + 2) / 4 = 1.25 s.
    assert!(close(overall.avg_latency.unwrap(), 1.25));
    // drafted 167, accepted 32.
    assert_eq!((overall.draft_n, overall.accepted), (167, 32));
}
