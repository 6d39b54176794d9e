//! One run described as a value and run by the library, with this
//! program's own display: what `speedbench profile` does, in 30 lines.
//! `cargo run -p speedbench --example run_spec` (also built and run from a
//! crate outside the workspace by `cargo xtask downstream`)
use std::sync::Arc;

use speedbench::client::{Progress, StopHandle};
use speedbench::run::{DatasetSource, Observer, RunReport, RunSpec};
use speedbench::sim::{SimConfig, SimServer};

/// SPEED-Bench-shaped rows: two categories, one conversation of two turns.
const ROWS: &str = r#"{"question_id": "c1", "category": "coding", "turns": ["Write a binary search.", "Now in C."]}
{"question_id": "c2", "category": "coding", "turns": ["Reverse a linked list."]}
{"question_id": "m1", "category": "math", "turns": ["Sum the first hundred odd numbers."]}
{"question_id": "m2", "category": "math", "turns": ["Is 91 prime?"]}
"#;

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
    // The rows, made here: the example needs no file of the repository.
    let scratch = std::env::temp_dir().join("speedbench-run-spec");
    std::fs::create_dir_all(&scratch)?;
    let rows = scratch.join("rows.jsonl");
    std::fs::write(&rows, ROWS)?;
    let mut spec = RunSpec::default();
    spec.target.url = server.url();
    spec.target.streaming = true;
    spec.dataset.source = Some(DatasetSource::InputFile(rows));
    spec.load.concurrency = 4;
    spec.outputs.output_artifact_dir = Some(scratch.join("run"));
    spec.outputs.overwrite = true;
    let report = speedbench::run::run_spec(&spec, StopHandle::new(), &mut Lines).await?;
    report.into_status()?;
    server.shutdown().await;
    Ok(())
}
