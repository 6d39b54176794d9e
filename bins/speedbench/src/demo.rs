//! `speedbench demo`: the whole pipeline against the simulated server.

use std::path::PathBuf;

use clap::Args;
use speedbench_dataset::Dataset;
use speedbench_sim::{SimConfig, SimServer};

use crate::{Context, Outcome};
use speedbench_run::{DatasetSource, RunSpec};

/// The bundled SPEED-Bench-shaped fixture: 11 categories, some multi-turn rows.
const FIXTURE: &str = include_str!("../../../fixtures/speed_bench_mini.jsonl");

/// Options of `speedbench demo`.
#[derive(Args, Debug)]
pub(crate) struct DemoArgs {
    /// Directory for the run's artifacts (a previous run there is replaced).
    #[arg(long, default_value = "artifacts/demo")]
    pub output_artifact_dir: PathBuf,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    /// Simulated time to first token, milliseconds.
    #[arg(long, default_value_t = 15.0)]
    pub ttft_ms: f64,
    /// Simulated time per verify step, milliseconds.
    #[arg(long, default_value_t = 2.0)]
    pub step_ms: f64,
}

/// Runs `speedbench demo`.
pub(crate) async fn run(args: DemoArgs) -> Result<Outcome, crate::CliError> {
    let config = SimConfig::speed_bench_demo()
        .with_ttft_ms(args.ttft_ms)
        .with_step_ms(args.step_ms);
    let server = SimServer::start(config, ([127, 0, 0, 1], 0).into())
        .await
        .context("starting the simulated server")?;
    eprintln!("simulated server listening on {}", server.url());
    let dataset = Dataset::from_jsonl_str("speed_bench_mini", FIXTURE)
        .context("loading the bundled fixture")?;
    let mut spec = RunSpec::default();
    spec.target.url = server.url();
    spec.target.streaming = true;
    spec.dataset.source = Some(DatasetSource::InputFile(PathBuf::from(
        "(bundled) fixtures/speed_bench_mini.jsonl",
    )));
    spec.load.concurrency = args.concurrency;
    spec.sampling.osl = Some(256);
    spec.sampling.extra_inputs = vec!["temperature:0".into()];
    spec.target.timeout_s = 60.0;
    spec.outputs.output_artifact_dir = Some(args.output_artifact_dir);
    // The demo's directory is its own scratch space.
    spec.outputs.overwrite = true;
    // The simulator updates its counters synchronously: no need to wait.
    spec.scrape.shutdown_delay_s = 0.0;
    let outcome = match spec.validate() {
        Ok(valid) => {
            crate::profile::execute(valid, dataset, crate::console::UiType::default()).await
        }
        Err(e) => Err(e.into()),
    };
    server.shutdown().await;
    outcome
}
