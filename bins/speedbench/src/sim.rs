//! `speedbench sim`: serve the simulated server until Ctrl-C.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use clap::{Args, ValueEnum};
use speedbench_sim::{SimConfig, SimServer, SpecFlavor};

use crate::{CliError, Context, Outcome};

/// Which engine's per-request statistics to imitate.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Flavor {
    /// vLLM `metrics.speculative_decoding`.
    Vllm,
    /// llama.cpp `timings`.
    Llamacpp,
    /// Both of the above.
    Both,
    /// No per-request statistics (only `/metrics`).
    None,
    /// SGLang `sglext.spec_tokens_details` (when the request asks), its
    /// `/get_server_info` and per-`engine_type` gauges.
    Sglang,
    /// TensorRT-LLM per-choice `avg_decoded_tokens_per_iter`, JSON
    /// iteration statistics at `/metrics`, Prometheus text at
    /// `/prometheus/metrics`.
    Trtllm,
}

/// Options of `speedbench sim`.
#[derive(Args, Debug)]
pub(crate) struct SimArgs {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port to bind; 0 picks a free one (the URL is printed on stdout).
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
    /// Bind with SO_REUSEPORT, so that several `speedbench sim` processes
    /// share the port (the kernel spreads connections over them): more
    /// connections than one process's open-file limit allows.
    #[arg(long)]
    pub reuse_port: bool,
    /// JSON configuration file: `SimConfig`'s fields (the speedbench-sim
    /// crate's docs; faults: docs/reliability.md#server-faults-simulated);
    /// flags override it.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The model name the server lists and answers as [default:
    /// speedbench-sim, or the --config file's].
    #[arg(long)]
    pub model: Option<String>,
    /// Start from the demo profile: distinct acceptance per SPEED-Bench category.
    #[arg(long)]
    pub demo_profiles: bool,
    /// Seed of every pseudo-random draw.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Time to first token, milliseconds [default: 30, or the --config
    /// file's].
    #[arg(long)]
    pub ttft_ms: Option<f64>,
    /// Time per verify step (one target pass: a token plus the drafts it
    /// accepts), milliseconds [default: 10, or the --config file's].
    #[arg(long)]
    pub step_ms: Option<f64>,
    /// What drafting costs: milliseconds added to a step per drafted token
    /// [default: 0, or the --config file's].
    #[arg(long)]
    pub draft_ms_per_token: Option<f64>,
    /// What verifying costs under load: milliseconds added to a step per
    /// token the batch verifies (each request in flight verifies 1 + k a
    /// step), so that more drafts and more load stop paying [default: 0,
    /// or the --config file's].
    #[arg(long)]
    pub verify_ms_per_token: Option<f64>,
    /// Draft budget k of the default profile; 0 turns speculation off.
    #[arg(long)]
    pub num_spec_tokens: Option<u32>,
    /// Per-request statistics format.
    #[arg(long, value_enum)]
    pub flavor: Option<Flavor>,
}

/// The configuration: a file, the demo's or the default, then the flags.
fn load_config(args: &SimArgs) -> Result<SimConfig, CliError> {
    let mut config = match &args.config {
        Some(path) => SimConfig::from_json_file(path).context("--config")?,
        None if args.demo_profiles => SimConfig::speed_bench_demo().with_typical_delays(),
        None => SimConfig::default().with_typical_delays(),
    };
    if let Some(model) = &args.model {
        config = config.with_model(model.clone());
    }
    config.seed = args.seed.unwrap_or(config.seed);
    config.ttft_ms = args.ttft_ms.unwrap_or(config.ttft_ms);
    config.step_ms = args.step_ms.unwrap_or(config.step_ms);
    config.draft_ms_per_token = args.draft_ms_per_token.unwrap_or(config.draft_ms_per_token);
    config.verify_ms_per_token = args
        .verify_ms_per_token
        .unwrap_or(config.verify_ms_per_token);
    if let Some(k) = args.num_spec_tokens {
        config = config.with_num_spec_tokens(k);
    }
    if let Some(f) = args.flavor {
        config.flavor = match f {
            Flavor::Vllm => SpecFlavor::Vllm,
            Flavor::Llamacpp => SpecFlavor::LlamaCpp,
            Flavor::Both => SpecFlavor::Both,
            Flavor::None => SpecFlavor::None,
            Flavor::Sglang => SpecFlavor::Sglang,
            Flavor::Trtllm => SpecFlavor::TrtLlm,
        };
    }
    Ok(config)
}

/// Waits for Ctrl-C or SIGTERM (a tune stops its servers with SIGTERM):
/// either ends the server with its totals printed.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Runs `speedbench sim`.
pub(crate) async fn run(args: SimArgs) -> Result<Outcome, CliError> {
    let config = load_config(&args)?;
    let config_delays = (config.ttft_ms, config.step_ms);
    let addr = SocketAddr::new(args.host, args.port);
    let server = if args.reuse_port {
        SimServer::start_shared_port(config, addr).await
    } else {
        SimServer::start(config, addr).await
    }
    .context(format!("starting the simulated server on {addr}"))?;
    // The URL goes to stdout, alone on its line, so scripts can read it.
    println!("{}", server.url());
    eprintln!(
        "simulated delays: {} ms to the first token, {} ms per verify step (--ttft-ms, --step-ms)",
        config_delays.0, config_delays.1
    );
    shutdown_signal().await;
    let truth = server.ground_truth();
    server.shutdown().await;
    eprintln!(
        "served {} requests: {} verify steps, {} of {} drafts accepted",
        truth.requests, truth.steps, truth.accepted, truth.proposed
    );
    Ok(Outcome::Done)
}
