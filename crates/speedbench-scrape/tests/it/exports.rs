//! Real exports: AIPerf 0.13.0's `server_metrics_export.json` reads typed,
//! and a malformed file is named with its line and field.

use std::path::{Path, PathBuf};

use speedbench_scrape::{MetricType, ScrapeError, SeriesStats, ServerMetricsExport, Weighting};

fn aiperf_run3() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/aiperf/run3-speed_bench_coding/server_metrics_export.json")
}

#[test]
fn an_aiperf_export_reads_typed_and_gives_aiperfs_numbers() {
    let export = ServerMetricsExport::read(&aiperf_run3()).unwrap();
    assert_eq!(export.schema_version, "1.1");
    // AIPerf writes no `tool`, `start_ns`, gauge `count` or `aggregate`.
    assert_eq!(export.tool, "");
    assert_eq!(
        export.summary.endpoints_successful,
        ["http://127.0.0.1:8766/metrics"]
    );
    assert_eq!(
        export.summary.endpoint_info["http://127.0.0.1:8766/metrics"].total_fetches,
        14
    );
    let accepted = &export.metrics["vllm:spec_decode_num_accepted_tokens"];
    assert_eq!(accepted.kind, MetricType::Counter);
    assert!(accepted.aggregate.is_none());
    assert!(matches!(
        &accepted.series[0].stats,
        Some(SeriesStats::Counter(c)) if c.total == 241.0
    ));
    // 241 accepted over 143 drafts and 429 draft tokens: AIPerf's own
    // 2.685 (its speed_bench_report.csv prints 2.69).
    let length = export.acceptance_length().unwrap();
    assert_eq!(length.value, 1.0 + 241.0 / 143.0);
    assert_eq!(length.weighting, Weighting::TokenWeighted);
    assert_eq!(length.metric, "vllm:spec_decode_num_accepted_tokens");
    assert_eq!(export.acceptance_rate().unwrap().value, 241.0 / 429.0);
    // Every gauge and histogram of the file has its statistics.
    for (name, m) in &export.metrics {
        for s in &m.series {
            assert!(s.stats.is_some(), "{name}");
        }
    }
}

#[test]
fn a_malformed_export_names_the_file_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server_metrics_export.json");
    std::fs::write(
        &path,
        "{\n\"metrics\": {\"m\": {\"type\": \"counter\", \"series\": 3}}}",
    )
    .unwrap();
    let err = ServerMetricsExport::read(&path).unwrap_err();
    assert!(
        matches!(err, ScrapeError::Export { line: 2, .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("server_metrics_export.json:2: not a server-metrics export")
            && msg.contains("expected a sequence"),
        "{msg}"
    );
    let missing = ServerMetricsExport::read(&dir.path().join("none.json")).unwrap_err();
    assert!(matches!(missing, ScrapeError::Io { .. }), "{missing:?}");
}
