//! Run directories of both tools, and source selection, on real artifacts.

use std::path::{Path, PathBuf};

use speedbench_report::{
    AcceptanceMatrix, MatrixMetric, ResolvedSource, SourceChoice, Weighting, run_cells, run_column,
};
use speedbench_runs::{RunFormat, find_run_dirs, load_run};

fn peer_run3() -> PathBuf {
    // Real AIPerf 0.13.0 artifacts from a loopback run, shipped with the
    // project's shared references; copied into fixtures/ so CI has them.
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aiperf/run3-speed_bench_coding")
}

#[test]
fn an_aiperf_run_directory_reads_from_every_source() {
    let run = load_run(&peer_run3()).unwrap();
    assert_eq!(run.format, RunFormat::Aiperf);
    assert_eq!(run.label, "stub-model");
    assert_eq!(run.dataset, "speed_bench_coding");
    assert_eq!(run_column(&run).as_deref(), Some("coding"));

    // Records: the fixture keeps three records (one warmup, two profiling);
    // the cell is 1 + Σaccepted / Σsteps over the profiling ones.
    let records = run.records.as_ref().unwrap();
    let measured: Vec<_> = records.iter().filter(|r| !r.warmup).collect();
    let acc: u64 = measured
        .iter()
        .map(|r| r.spec.as_ref().unwrap().accepted_draft_tokens)
        .sum();
    let steps: u64 = measured
        .iter()
        .map(|r| r.spec.as_ref().unwrap().verify_steps.unwrap())
        .sum();
    let (cells, source) = run_cells(&run, MatrixMetric::AcceptLength, SourceChoice::Records);
    assert_eq!(source, ResolvedSource::Records);
    let expected = 1.0 + acc as f64 / steps as f64;
    assert!((cells["coding"].value.unwrap() - expected).abs() < 1e-12);

    // Summary: AIPerf's own token-weighted figure, 2.6853146853146854.
    let (cells, source) = run_cells(&run, MatrixMetric::AcceptLength, SourceChoice::Summary);
    assert_eq!(source, ResolvedSource::Summary);
    assert_eq!(cells["coding"].value, Some(2.6853146853146854));
    // ... and its rate, stored as a percentage: 56.177...% -> 0.56177...
    let (cells, _) = run_cells(&run, MatrixMetric::AcceptRate, SourceChoice::Summary);
    assert!((cells["coding"].value.unwrap() - 0.5617715617715617).abs() < 1e-12);

    // Server: vLLM counters 241 accepted over 143 drafts -> 1 + 241/143,
    // the same 2.685 as the summary, by an independent route.
    let (cells, source) = run_cells(&run, MatrixMetric::AcceptLength, SourceChoice::Server);
    assert_eq!(source, ResolvedSource::Server(Weighting::TokenWeighted));
    assert!((cells["coding"].value.unwrap() - (1.0 + 241.0 / 143.0)).abs() < 1e-12);

    // Throughput from the summary: 5000.853988426931 tokens/s.
    let (cells, _) = run_cells(&run, MatrixMetric::Throughput, SourceChoice::Summary);
    assert_eq!(cells["coding"].value, Some(5000.853988426931));
}

#[test]
fn auto_falls_through_to_the_first_source_with_a_value() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("scrape-only");
    std::fs::create_dir(&run_dir).unwrap();
    std::fs::copy(
        peer_run3().join("profile_export_aiperf.json"),
        run_dir.join("profile_export_aiperf.json"),
    )
    .unwrap();
    std::fs::copy(
        peer_run3().join("server_metrics_export.json"),
        run_dir.join("server_metrics_export.json"),
    )
    .unwrap();
    let run = load_run(&run_dir).unwrap();
    assert!(run.records.is_none());
    // No records: auto takes the summary.
    let (_, source) = run_cells(&run, MatrixMetric::AcceptLength, SourceChoice::Auto);
    assert_eq!(source, ResolvedSource::Summary);
    // Pinned to records, there is no value: the run's column stays, empty
    // (as AIPerf keeps a category whose run has no value).
    let (cells, source) = run_cells(&run, MatrixMetric::AcceptLength, SourceChoice::Records);
    assert_eq!(cells.keys().collect::<Vec<_>>(), ["coding"]);
    assert_eq!(cells["coding"].value, None);
    assert_eq!(source, ResolvedSource::None);

    let dirs = find_run_dirs(&[dir.path().to_path_buf()]).unwrap();
    assert_eq!(dirs, vec![run_dir.clone()]);
    let runs: Vec<_> = dirs.iter().map(|d| load_run(d).unwrap()).collect();
    let matrix = AcceptanceMatrix::from_cells(
        MatrixMetric::AcceptLength,
        runs.iter()
            .map(|r| {
                (
                    r.label.clone(),
                    run_cells(r, MatrixMetric::AcceptLength, SourceChoice::Server).0,
                )
            })
            .collect(),
    );
    // 1 + 241/143 = 2.685 -> 2.69, as AIPerf's own speed_bench_report.csv says.
    assert_eq!(
        matrix.to_csv(),
        "Model,coding,Overall\r\nstub-model,2.69,2.69\r\n"
    );
}
