//! speedbench's HTTP Trace Timing statistics of an AIPerf run, computed from
//! AIPerf's own per-request `http_req_*` values, against AIPerf's own
//! statistics of them (fixtures/aiperf-http-trace, made by its
//! `generate.sh`: AIPerf 0.13.0 against the simulator, 12 requests).
//!
//! speedbench reads the six phases, the reuse and the counts of each
//! record and derives `duration`, `connection_overhead` and `total` itself:
//! AIPerf's figures of those three check speedbench's sums, and every other
//! row its statistics (numpy's percentiles, the population std).

use std::path::Path;

use serde_json::Value;
use speedbench_metrics::{HttpTraceMetrics, Summary};
use speedbench_runs::load_run;

fn run_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aiperf-http-trace")
}

#[test]
fn http_trace_figures_of_aiperf_records_are_aiperfs_own() {
    let run = load_run(&run_dir()).unwrap();
    let records = run.records.expect("the records of profile_export.jsonl");
    assert_eq!(records.len(), 12);
    assert!(records.iter().all(|r| r.http_phases.is_some()));
    let m = HttpTraceMetrics::from_records(&records).unwrap();
    assert_eq!((m.requests, m.without_phases), (12, 0));
    let text = std::fs::read_to_string(run_dir().join("profile_export_aiperf.json")).unwrap();
    let aiperf: Value = serde_json::from_str(&text).unwrap();
    let rows = [
        ("http_req_blocked", m.blocked_ms),
        ("http_req_dns_lookup", m.dns_lookup_ms),
        ("http_req_connecting", m.connecting_ms),
        ("http_req_sending", m.sending_ms),
        ("http_req_waiting", m.waiting_ms),
        ("http_req_receiving", m.receiving_ms),
        ("http_req_connection_reused", m.connection_reused),
        ("http_req_data_sent", m.data_sent_kb),
        ("http_req_chunks_sent", m.chunks_sent),
        ("http_req_data_received", m.data_received_kb),
        ("http_req_chunks_received", m.chunks_received),
        ("http_req_connection_overhead", m.connection_overhead_ms),
        ("http_req_duration", m.duration_ms),
        ("http_req_total", m.total_ms),
    ];
    for (tag, ours) in rows {
        let ours: Summary = ours.unwrap_or_else(|| panic!("{tag}: no figure"));
        let theirs = &aiperf[tag];
        assert_eq!(Some(ours.count as u64), theirs["count"].as_u64(), "{tag}");
        let stats = [
            ("avg", ours.avg),
            ("min", ours.min),
            ("max", ours.max),
            ("p50", ours.p50),
            ("p90", ours.p90),
            ("p99", ours.p99),
            ("std", ours.std),
        ];
        for (stat, value) in stats {
            let want = theirs[stat].as_f64().unwrap();
            // AIPerf's values are ms read to the nanosecond (1e-6 ms).
            assert!(
                (value - want).abs() <= 2e-6 * want.abs().max(1.0),
                "{tag} {stat}: speedbench {value}, AIPerf {want}"
            );
        }
    }
}
