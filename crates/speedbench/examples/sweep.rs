//! A sweep file read and run by the library with this program's own
//! display, against the simulator: `cargo run -p speedbench --example
//! sweep [SWEEP.toml]` (built and run outside the workspace by `cargo
//! xtask downstream` too).
use speedbench::client::StopHandle;
use speedbench::run::sweep::{RunEnd, Sweep, SweepObserver, SweepRun};
use speedbench::run::{Observer, RunSpec};
use speedbench::sim::{SimConfig, SimServer};

/// One line per run.
struct Lines;
impl Observer for Lines {}
impl SweepObserver for Lines {
    fn sweep_run_ended(&mut self, run: &SweepRun, end: &RunEnd) {
        println!("{} {}: {}", run.index, run.description, end.describe());
    }
}

#[speedbench::tokio::main(flavor = "current_thread", crate = "speedbench::tokio")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let default = format!("{repo}/crates/speedbench/examples/sweep.toml");
    let file = std::env::args().nth(1).unwrap_or(default);
    let server =
        SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into()).await?;
    let rows = format!("{repo}/fixtures/speed_bench_mini.jsonl");
    let out = std::env::temp_dir().join("speedbench-sweep-example");
    let base = RunSpec::default()
        .with("url", &server.url())?
        .with("input-file", &rows)?
        .with("output-artifact-dir", &out.to_string_lossy())?;
    let given = ["url", "input-file"].map(String::from).into();
    let sweep = Sweep::read(file.as_ref(), &base, &given)?.check().await?;
    let outcome = sweep.run(&StopHandle::default(), &mut Lines).await;
    assert!(outcome.failed().is_empty(), "every run completes");
    Ok(())
}
