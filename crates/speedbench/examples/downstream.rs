//! A downstream benchmark written only on the `speedbench` facade, as
//! another Rust benchmark would use it: a run described in code, checked,
//! and given this program's own record sink, engine adapter and display;
//! then a two-point sweep built in code, whose outcome carries each run's
//! figures; then the acceptance matrix read back from the runs' files.
//! Everything runs against the simulated server, started here.
//!
//! `cargo run -p speedbench --example downstream` (also built and run from
//! a crate outside the repository by `cargo xtask downstream`)

use std::sync::Arc;

use speedbench::client::spec::{MalformedSpec, SpecAdapter, from_vllm};
use speedbench::client::{ChannelSink, Progress, StopHandle};
use speedbench::record::{SpecDecodeStats, SpecSource, read_records_file};
use speedbench::report::{AcceptanceMatrix, MatrixMetric};
use speedbench::run::sweep::{RunEnd, Sweep, SweepObserver, SweepRun};
use speedbench::run::{DatasetSource, Observer, RunReport, RunSpec};
use speedbench::serde_json::Value;
use speedbench::sim::{SimConfig, SimServer};

/// SPEED-Bench-shaped rows, made here: the program needs no file of the
/// repository.
const ROWS: &str = r#"{"question_id": "c1", "category": "coding", "turns": ["Write quicksort in Rust.", "Now make it generic."]}
{"question_id": "m1", "category": "math", "turns": ["What is 17 * 23?"]}
{"question_id": "w1", "category": "writing", "turns": ["A limerick about latency."]}"#;

/// This benchmark's own engine adapter: it reads vLLM's payload, as an
/// adapter for an engine speedbench does not know would read its own.
#[derive(Debug)]
struct HouseEngine;

impl SpecAdapter for HouseEngine {
    fn source(&self) -> SpecSource {
        SpecSource::named("house_engine").expect("a valid name")
    }
    fn find<'a>(&self, object: &'a Value) -> Option<&'a Value> {
        object.get("metrics")?.get("speculative_decoding")
    }
    fn parse(&self, payload: &Value) -> Result<SpecDecodeStats, MalformedSpec> {
        from_vllm(payload)
    }
}

/// This program's display: a line when a run starts and when it ends.
struct Lines;

impl Observer for Lines {
    fn run_started(&mut self, _progress: Arc<Progress>) {
        eprintln!("running");
    }
    fn finished(&mut self, report: &RunReport) {
        eprintln!(
            "{} records, {:?}",
            report.outcome.record_count, report.outcome.status
        );
    }
}

impl SweepObserver for Lines {
    fn sweep_run_ended(&mut self, run: &SweepRun, end: &RunEnd) {
        eprintln!("{}: {}", run.description, end.describe());
    }
}

#[speedbench::tokio::main(flavor = "current_thread", crate = "speedbench::tokio")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server =
        SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into()).await?;
    let out = std::env::temp_dir().join(format!("speedbench-downstream-{}", std::process::id()));
    std::fs::create_dir_all(&out)?;
    let rows = out.join("rows.jsonl");
    std::fs::write(&rows, ROWS)?;
    let mut base = RunSpec::default();
    base.target.url = server.url();
    base.target.streaming = true;
    base.dataset.source = Some(DatasetSource::InputFile(rows));
    base.load.num_conversations = Some(6);

    // One run, checked, with this program's sink and adapter: the same
    // path as `speedbench profile` (engine detection, preflight, files).
    let mut spec = base.clone();
    spec.outputs.output_artifact_dir = Some(out.join("one"));
    let (sink, mut live) = ChannelSink::new();
    let watcher = speedbench::tokio::spawn(async move {
        let mut seen = 0;
        while live.recv().await.is_some() {
            seen += 1;
        }
        seen
    });
    let valid = spec
        .validate()?
        .with_sink(sink)
        .with_spec_adapter(HouseEngine);
    let dataset = spec.load_dataset(&mut Lines).await?;
    let report = speedbench::run::execute(valid, dataset, StopHandle::new(), &mut Lines).await?;
    let records = read_records_file(&report.outcome.records_path)?.records;
    report.into_status()?;
    let streamed = watcher.await?;
    assert_eq!(streamed, records.len(), "the sink saw every record");
    assert!(records.iter().all(|r| {
        r.spec
            .as_ref()
            .is_some_and(|s| s.source.is_some_and(|src| src.as_str() == "house_engine"))
    }));

    // A sweep built in code: its outcome carries each run's figures.
    let sweep = Sweep::grid(&base, out.join("ladder"), &[("concurrency", &["1", "4"])])?;
    let outcome = sweep
        .check()
        .await?
        .run(&StopHandle::new(), &mut Lines)
        .await;
    let mut runs = Vec::new();
    for (run, end) in &outcome.runs {
        let metrics = end.metrics().ok_or("a run left no figures")?;
        println!(
            "{}: {:.1} requests/s, {} succeeded",
            run.description,
            metrics.request_throughput.unwrap_or(f64::NAN),
            metrics.counts.succeeded
        );
        let file = read_records_file(run.dir.join("records.parquet"))?;
        runs.push((run.description.clone(), file.records));
    }
    let labelled: Vec<(String, &[_])> = runs
        .iter()
        .map(|(l, r)| (l.clone(), r.as_slice()))
        .collect();
    print!(
        "{}",
        AcceptanceMatrix::from_runs(MatrixMetric::AcceptLength, &labelled).to_console()
    );
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&out);
    Ok(())
}
