//! `speedbench demo`: the whole pipeline against the simulated server.

use std::path::PathBuf;

use clap::Args;
use speedbench_dataset::Dataset;
use speedbench_sim::{SimConfig, SimServer};

use crate::profile::ProfileArgs;
use crate::{Context, Outcome};

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
    let args = ProfileArgs {
        url: server.url(),
        model: None,
        endpoint_type: speedbench_client::ApiKind::Chat,
        streaming: true,
        input_file: Some(PathBuf::from("(bundled) fixtures/speed_bench_mini.jsonl")),
        public: Default::default(),
        bench: None,
        category: Vec::new(),
        limit: None,
        concurrency: args.concurrency,
        request_count: None,
        num_conversations: None,
        warmup_request_count: 0,
        osl: Some(256),
        extra_inputs: vec!["temperature:0".into()],
        timeout: 60.0,
        output_artifact_dir: Some(args.output_artifact_dir),
        staging_dir: None,
        output: None,
        api_key: None,
        headers: Vec::new(),
        run_id: None,
        // The demo's directory is its own scratch space.
        overwrite: true,
        max_error_rate: None,
        // The simulator updates its counters synchronously: no need to wait.
        client: Box::new(crate::profile::ClientArgs {
            server_metrics_shutdown_delay: 0.0,
            ..Default::default()
        }),
        config: None,
        dry_run: false,
    };
    let outcome = crate::profile::execute(args, dataset).await;
    server.shutdown().await;
    outcome
}
