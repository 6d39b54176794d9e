//! One run described as a value and run by the library, with this
//! program's own display: what `speedbench profile` does, in 30 lines.
//! `cargo run -p speedbench --example run_spec` (also built and run from a
//! crate outside the workspace by `cargo xtask downstream`)
use std::sync::Arc;

use speedbench::client::{Progress, StopHandle};
use speedbench::run::{DatasetSource, Observer, RunReport, RunSpec};
use speedbench::sim::{SimConfig, SimServer};

/// This program's display: one line when the run starts, one when it ends.
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

#[speedbench::tokio::main(flavor = "current_thread", crate = "speedbench::tokio")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server =
        SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into()).await?;
    let rows = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/speed_bench_mini.jsonl"
    );
    let mut spec = RunSpec::default();
    spec.target.url = server.url();
    spec.target.streaming = true;
    spec.dataset.source = Some(DatasetSource::InputFile(rows.into()));
    spec.load.concurrency = 4;
    spec.outputs.output_artifact_dir = Some(std::env::temp_dir().join("speedbench-run-spec"));
    spec.outputs.overwrite = true;
    let report = speedbench::run::run_spec(&spec, StopHandle::new(), &mut Lines).await?;
    report.into_status()?;
    server.shutdown().await;
    Ok(())
}
