//! A sweep file read and run by the library with this program's own
//! display, against the simulator: `cargo run -p speedbench --example
//! sweep [SWEEP.toml]` (built and run outside the workspace by `cargo
//! xtask downstream` too).
use speedbench::client::StopHandle;
use speedbench::run::sweep::{RunEnd, Sweep, SweepObserver, SweepRun};
use speedbench::run::{Observer, RunSpec};
use speedbench::sim::{SimConfig, SimServer};

/// What varies: `examples/sweep.toml`, embedded.
const SWEEP: &str = include_str!("sweep.toml");

/// SPEED-Bench-shaped rows of two categories.
const ROWS: &str = r#"{"question_id": "c1", "category": "coding", "turns": ["Write a binary search."]}
{"question_id": "c2", "category": "coding", "turns": ["Reverse a linked list."]}
{"question_id": "m1", "category": "math", "turns": ["Sum the first hundred odd numbers."]}
"#;

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
    // The sweep file and the rows, made here unless a file is given: the
    // example needs no file of the repository.
    let out = std::env::temp_dir().join("speedbench-sweep-example");
    std::fs::create_dir_all(&out)?;
    let file = match std::env::args().nth(1) {
        Some(file) => file,
        None => {
            let file = out.join("sweep.toml");
            std::fs::write(&file, SWEEP)?;
            file.to_string_lossy().into_owned()
        }
    };
    let rows = out.join("rows.jsonl");
    std::fs::write(&rows, ROWS)?;
    let rows = rows.to_string_lossy().into_owned();
    let server =
        SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into()).await?;
    let base = RunSpec::default()
        .with("url", &server.url())?
        .with("input-file", &rows)?
        .with("output-artifact-dir", &out.join("runs").to_string_lossy())?;
    let given = ["url", "input-file"].map(String::from).into();
    let sweep = Sweep::read(file.as_ref(), &base, &given)?.check().await?;
    let outcome = sweep.run(&StopHandle::default(), &mut Lines).await;
    assert!(outcome.failed().is_empty(), "every run completes");
    Ok(())
}
