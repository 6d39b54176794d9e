//! `speedbench profile`: drive a server with a dataset and summarise the run.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde_json::json;
use speedbench_client::{
    ApiKey, ApiKind, BaseUrl, LoadConfig, ProfileRun, Progress, StopHandle, Target,
    discover_model_with_roots, parse_extra_inputs, run_profile,
};
use speedbench_dataset::Dataset;
use speedbench_metrics::RunMetrics;
use speedbench_record::read_records_file;
use speedbench_report::{AcceptanceMatrix, MatrixMetric, render_run_summary};

use crate::{CliError, Context, Outcome, fail};

/// Which OpenAI-compatible API to call.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum EndpointType {
    /// `/v1/chat/completions`
    Chat,
    /// `/v1/completions`
    Completions,
}

/// Options of `speedbench profile`.
#[derive(Args, Debug, Clone)]
pub struct ProfileArgs {
    /// Server URL: `host:port` or `http://host:port`, with or without `/v1`.
    #[arg(long, default_value = "localhost:8000")]
    pub url: String,
    /// Model name to send; asked of `GET /v1/models` when omitted.
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// API to call.
    #[arg(long, value_enum, default_value = "chat")]
    pub endpoint_type: EndpointType,
    /// Ask for streamed (SSE) responses; needed for TTFT and inter-token latency.
    #[arg(long)]
    pub streaming: bool,
    /// SPEED-Bench-shaped JSONL rows (`question_id`, `category`, `messages` or `turns`).
    #[arg(long)]
    pub input_file: PathBuf,
    /// Keep only rows of these categories (repeat or separate with commas).
    #[arg(long, value_delimiter = ',')]
    pub category: Vec<String>,
    /// Requests in flight at once.
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Profiled requests (turns) to send; conversations recycle to reach it.
    #[arg(long)]
    pub request_count: Option<u64>,
    /// Conversations to run, every turn each; default: every row once.
    #[arg(long)]
    pub num_conversations: Option<u64>,
    /// Requests sent first and excluded from every statistic.
    #[arg(long, default_value_t = 0)]
    pub warmup_request_count: u64,
    /// Output length cap, sent as `max_tokens`.
    #[arg(long)]
    pub osl: Option<u32>,
    /// Extra request fields: `key:value` pairs or JSON objects (e.g. `temperature:0`).
    #[arg(long, num_args = 1..)]
    pub extra_inputs: Vec<String>,
    /// Per-request timeout in seconds.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// Directory for `records.parquet`, `run.json` and `summary.json`.
    #[arg(long)]
    pub output_artifact_dir: Option<PathBuf>,
    /// API key sent as a bearer token (never logged or stored).
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Extra HTTP header `Name:value` (repeatable; values are never stored).
    #[arg(long = "header", short = 'H')]
    pub headers: Vec<String>,
    /// Run identifier; generated when omitted.
    #[arg(long)]
    pub run_id: Option<String>,
    /// Load shape, TLS and server-metrics options.
    #[command(flatten)]
    pub client: Box<ClientArgs>,
}

/// The client's connection, load-shape and server-scrape options.
#[derive(Args, Debug, Clone, Default)]
pub struct ClientArgs {
    /// Extra CA certificate(s) to trust for HTTPS, as a PEM file (repeatable);
    /// `SSL_CERT_FILE` works too.
    #[arg(long = "ca-cert", value_name = "FILE")]
    pub ca_cert: Vec<PathBuf>,
}

impl ClientArgs {
    fn extra_roots(&self) -> Result<Vec<Vec<u8>>, CliError> {
        self.ca_cert
            .iter()
            .map(|p| std::fs::read(p).context(format!("--ca-cert {}", p.display())))
            .collect()
    }
}

fn new_run_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "run-{:x}-{:x}",
        nanos / 1_000_000_000,
        (nanos % 1_000_000_000) ^ std::process::id() as u128
    )
}

fn parse_header(h: &str) -> Result<(String, String), CliError> {
    h.split_once(':')
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .ok_or_else(|| {
            fail(
                "--header",
                format!(
                    "expected Name:value, got {:?}",
                    h.split(':').next().unwrap_or("")
                ),
            )
        })
}

/// Stops the run on the first Ctrl-C (or SIGTERM); exits at once on the second.
fn install_stop_signal(stop: StopHandle) {
    tokio::spawn(async move {
        wait_for_signal().await;
        eprintln!("\nstopping: saving every finished request (press Ctrl-C again to abort)");
        stop.stop();
        wait_for_signal().await;
        eprintln!("aborted");
        std::process::exit(i32::from(crate::EXIT_INTERRUPTED));
    });
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => tokio::select! {
                _ = tokio::signal::ctrl_c() => {},
                _ = term.recv() => {},
            },
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Runs `speedbench profile`.
pub async fn run(args: ProfileArgs) -> Result<Outcome, CliError> {
    let dataset = Dataset::from_jsonl_file(&args.input_file).context("loading the input file")?;
    execute(args, dataset).await
}

/// Profiles an already loaded dataset (shared with `speedbench demo`).
pub async fn execute(args: ProfileArgs, dataset: Dataset) -> Result<Outcome, CliError> {
    let dataset = dataset
        .filter_categories(&args.category)
        .context("filtering categories")?;
    let base_url = BaseUrl::parse(&args.url).context("--url")?;
    let api_key = args
        .api_key
        .clone()
        .filter(|k| !k.is_empty())
        .map(ApiKey::new);
    let extra_roots = args.client.extra_roots()?;
    let model = match &args.model {
        Some(m) => m.clone(),
        None => discover_model_with_roots(&base_url, api_key.as_ref(), &extra_roots)
            .await
            .context("finding the served model")?,
    };
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(fail("--timeout", "must be a positive number of seconds"));
    }
    let mut target = Target::new(base_url.clone(), model.clone());
    target.api = match args.endpoint_type {
        EndpointType::Chat => ApiKind::Chat,
        EndpointType::Completions => ApiKind::Completions,
    };
    target.streaming = args.streaming;
    target.max_tokens = args.osl;
    target.extra_body = parse_extra_inputs(&args.extra_inputs).context("--extra-inputs")?;
    target.api_key = api_key;
    target.headers = args
        .headers
        .iter()
        .map(|h| parse_header(h))
        .collect::<Result<_, _>>()?;
    target.timeout = Duration::from_secs_f64(args.timeout);
    target.extra_roots_pem = extra_roots;

    let run_id = args.run_id.clone().unwrap_or_else(new_run_id);
    let output_dir = args
        .output_artifact_dir
        .clone()
        .unwrap_or_else(|| Path::new("artifacts").join(format!("{}-{run_id}", dataset.name)));
    let load = LoadConfig {
        concurrency: args.concurrency,
        request_count: args.request_count,
        num_conversations: args.num_conversations,
        warmup_request_count: args.warmup_request_count,
    };
    // What was asked for, minus anything secret: header names only, no key.
    let config = json!({
        "url": base_url.to_string(),
        "model": model,
        "endpoint_type": format!("{:?}", args.endpoint_type).to_lowercase(),
        "streaming": args.streaming,
        "input_file": args.input_file.display().to_string(),
        "categories": args.category,
        "concurrency": args.concurrency,
        "request_count": args.request_count,
        "num_conversations": args.num_conversations,
        "warmup_request_count": args.warmup_request_count,
        "osl": args.osl,
        "extra_inputs": target.extra_body,
        "timeout_s": args.timeout,
        "header_names": target.headers.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        "api_key_set": target.api_key.is_some(),
        "ca_cert": args.client.ca_cert.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
    });
    let run = ProfileRun {
        dataset,
        target,
        load,
        output_dir: output_dir.clone(),
        run_id,
        config,
    };

    let stop = StopHandle::new();
    install_stop_signal(stop.clone());
    let progress = Arc::new(Progress::default());
    let started = Instant::now();
    let display = crate::progress::spawn(progress.clone());
    let result = run_profile(run, stop, progress.clone()).await;
    crate::progress::finish(display, &progress, started.elapsed());
    let outcome = result.context("running the profile")?;

    let file = read_records_file(&outcome.records_path).context("reading the records back")?;
    let metrics = RunMetrics::from_records(&file.records);
    let summary_path = output_dir.join("summary.json");
    let summary_json = serde_json::to_vec_pretty(&metrics).unwrap_or_default();
    std::fs::write(&summary_path, summary_json)
        .context(format!("writing {}", summary_path.display()))?;
    print!("{}", render_run_summary(&metrics));
    let label = file.manifest.as_ref().map_or(model, |m| m.model.clone());
    for metric in [MatrixMetric::AcceptLength, MatrixMetric::AcceptRate] {
        let matrix =
            AcceptanceMatrix::from_runs(metric, &[(label.clone(), file.records.as_slice())]);
        if matrix.rows.iter().any(|r| r.overall.is_some()) {
            print!("{}", matrix.to_console());
        }
    }
    eprintln!(
        "{} records written to {} (manifest {}, summary {})",
        outcome.record_count,
        outcome.records_path.display(),
        outcome.manifest_path.display(),
        summary_path.display()
    );
    Ok(if outcome.interrupted {
        Outcome::Interrupted
    } else {
        Outcome::Done
    })
}
