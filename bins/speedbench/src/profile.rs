//! `speedbench profile`: drive a server with a dataset and summarise the run.
//!
//! The flags become a [`RunSpec`]; `speedbench-run` validates and runs it,
//! and [`crate::console::Console`] prints what happens.

use std::num::NonZeroUsize;
use std::path::PathBuf;

use clap::Args;
use clap::builder::PossibleValuesParser;
use speedbench::process::{EXIT_SIGINT, SignalEvent, stop_on_signals};
use speedbench_client::{ApiKind, Arrival, ExportLevel, HttpClientKind, RunStatus, StopHandle};
use speedbench_dataset::Dataset;
use speedbench_dataset::registry::SPEED_BENCH_CONFIGS;
use speedbench_run::{DatasetSource, EngineChoice, RunSpec, Secret, ValidRun};

use crate::console::Console;
use crate::{CliError, Outcome};

mod shard;
use shard::ShardArgs;

/// Options of `speedbench profile`.
#[derive(Args, Debug, Clone)]
#[command(group = clap::ArgGroup::new("dataset_source").required(true).multiple(false))]
pub(crate) struct ProfileArgs {
    /// Server URL: `host:port` or `http://host:port`, with or without `/v1`.
    #[arg(long, default_value = "localhost:8000")]
    pub url: String,
    /// Model name to send; asked of `GET /v1/models` when omitted.
    #[arg(long, short = 'm')]
    pub model: Option<String>,
    /// API to call: `chat` (/v1/chat/completions) or `completions` (/v1/completions).
    #[arg(long, default_value = "chat")]
    pub endpoint_type: ApiKind,
    /// Ask for streamed (SSE) responses; needed for TTFT and inter-token latency.
    #[arg(long)]
    pub streaming: bool,
    /// SPEED-Bench-shaped JSONL rows (`question_id`, `category`, `messages` or `turns`).
    #[arg(long, group = "dataset_source")]
    pub input_file: Option<PathBuf>,
    /// `--public-dataset` and `--dataset-cache`.
    #[command(flatten)]
    pub public: Box<crate::datasets::PublicDatasetArgs>,
    /// A whole SPEED-Bench config, as llama.cpp's speed_bench.py names it:
    /// shorthand for `--public-dataset speed_bench_CONFIG` (the same cache,
    /// resolution and `--dataset-cache`).
    #[arg(long, value_name = "CONFIG", group = "dataset_source",
          value_parser = PossibleValuesParser::new(SPEED_BENCH_CONFIGS))]
    pub bench: Option<String>,
    /// Keep only rows of these categories (repeat or separate with commas);
    /// `all` (alone) keeps every row, as when it is omitted.
    #[arg(long, value_delimiter = ',')]
    pub category: Vec<String>,
    /// At most N rows (samples) of each category: the first N in file
    /// order, after resolution and --category; rows without a category
    /// count as one group, multi-turn rows are kept whole. The run is then
    /// sized over the kept rows (--num-conversations, --request-count).
    #[arg(long, value_name = "N", value_parser = speedbench_run::flags::parse_limit)]
    pub limit: Option<NonZeroUsize>,
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
    /// Directory for `records.parquet`, `run.json` and `summary.json`, or a
    /// store URL (`s3://bucket/prefix`, `gs://...`, `az://...`; credentials
    /// from the store's standard environment variables): the run is staged
    /// locally, its records stream up as it goes and the rest follows at
    /// the end (docs/distributed.md).
    #[arg(long)]
    pub output_artifact_dir: Option<PathBuf>,
    /// With a store URL as --output-artifact-dir: the local directory the
    /// run is staged in (kept); by default a new temporary directory,
    /// removed once the upload succeeded.
    #[arg(long, value_name = "DIR", conflicts_with = "config")]
    pub staging_dir: Option<PathBuf>,
    /// Also write llama.cpp speed_bench.py's `--output` JSON (config,
    /// per-category summary, per-sample results; docs/speed-bench-py.md)
    /// to this file, atomically; an existing file is refused unless
    /// --overwrite.
    #[arg(long, value_name = "FILE.json")]
    pub output: Option<PathBuf>,
    /// API key sent as a bearer token (never logged or stored).
    #[arg(long, env = "OPENAI_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// Extra HTTP header `Name:value` (repeatable; values are never stored).
    #[arg(long = "header", short = 'H')]
    pub headers: Vec<String>,
    /// Run identifier; generated when omitted.
    #[arg(long)]
    pub run_id: Option<String>,
    /// Replace a run already in --output-artifact-dir (refused otherwise).
    #[arg(long)]
    pub overwrite: bool,
    /// Fail the run (exit 1, outcome `failed`) when more than this share of
    /// its requests failed, 0.0-1.0; by default only when none succeeded.
    #[arg(long, value_name = "RATE")]
    pub max_error_rate: Option<f64>,
    /// Load shape, TLS and server-metrics options.
    #[command(flatten)]
    pub client: Box<ClientArgs>,
    /// A sweep file (TOML; docs/sweeps/README.md): every variation it lists
    /// is one run, each in its own directory under --output-artifact-dir,
    /// then one report over them. Flags given beside it apply to every
    /// variation and win over the file.
    #[arg(long, value_name = "SWEEP.toml", group = "dataset_source")]
    pub config: Option<PathBuf>,
    /// With --config: check every variation and print the plan; send nothing.
    #[arg(long, requires = "config")]
    pub dry_run: bool,
}

/// The client's connection, load-shape and server-scrape options.
#[derive(Args, Debug, Clone)]
pub(crate) struct ClientArgs {
    /// Extra CA certificate(s) to trust for HTTPS, as a PEM file (repeatable);
    /// `SSL_CERT_FILE` works too.
    #[arg(long = "ca-cert", value_name = "FILE")]
    pub ca_cert: Vec<PathBuf>,
    /// Source address(es) for the connections, taken in turn (repeatable or
    /// a comma list, e.g. `127.0.0.2,127.0.0.3`): one client can then hold
    /// more connections to one server than one address has ephemeral ports.
    #[arg(long = "local-addr", value_name = "ADDR", value_delimiter = ',')]
    pub local_addr: Vec<std::net::IpAddr>,
    /// The HTTP client of requests to a plain http:// server: `lean`
    /// (speedbench's HTTP/1.1 client, a few KiB per request in flight) or
    /// `hyper` (about 21 KiB more per connection). https:// always uses
    /// hyper.
    #[arg(long, value_name = "CLIENT", default_value = "lean")]
    pub http_client: HttpClientKind,
    /// Open-loop load: conversation starts per second (requests per second
    /// for single-turn rows); `--concurrency` is then unused.
    #[arg(long)]
    pub request_rate: Option<f64>,
    /// How request-rate arrivals are spaced: `poisson` (exponential gaps) or
    /// `constant` (equal gaps of 1/rate).
    #[arg(long, default_value = "poisson", alias = "request-rate-mode")]
    pub arrival: Arrival,
    /// Seed of the arrival schedule.
    #[arg(long, default_value_t = 0)]
    pub random_seed: u64,
    /// With --request-rate: at most this many conversations in flight.
    #[arg(long, requires = "request_rate")]
    pub max_concurrency: Option<usize>,
    /// Stop sending new requests after this many seconds of profiling.
    #[arg(long, value_name = "SECONDS")]
    pub benchmark_duration: Option<f64>,
    /// After --benchmark-duration, seconds in-flight requests may still run.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub benchmark_grace_period: f64,
    /// Prometheus endpoints to scrape besides `{url}/metrics` (NIM:
    /// `http://host:8000/v1/metrics`); written to server_metrics_export.json.
    #[arg(long, num_args = 1.., value_name = "URL")]
    pub server_metrics: Vec<String>,
    /// Do not scrape server metrics.
    #[arg(long, conflicts_with = "server_metrics")]
    pub no_server_metrics: bool,
    /// At most this many seconds of scraping after the last request, for late
    /// counter updates; it stops once two scrapes in a row show no change.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    pub server_metrics_shutdown_delay: f64,
    /// `--shard`, `--start-at`, `--start-after-barrier` (docs/distributed.md).
    #[command(flatten)]
    pub shard: ShardArgs,
    /// Files kept, as AIPerf's --export-level: `summary` (run.json,
    /// summary.json and the scrape; no records.parquet), `records`
    /// (also records.parquet) or `raw` (also raw_responses.jsonl: every
    /// response body, credentials scrubbed).
    #[arg(long, value_name = "LEVEL", default_value = "records")]
    pub export_level: ExportLevel,
    /// The engine behind the server: `auto` (found from what it answers:
    /// `/v1/models`, `/get_server_info`, `/props`, the metric names), or
    /// `vllm`, `sglang`, `trtllm`, `llamacpp`, `nim`, `openai`. It decides
    /// what each request asks for (SGLang's per-request acceptance) and
    /// which metrics endpoints are scraped (docs/engines.md).
    #[arg(long, value_name = "ENGINE", default_value = "auto")]
    pub engine: EngineChoice,
    /// The most bytes kept of one non-streamed response body, and of one
    /// line or event of a stream (default 32 MiB); a response past it is a
    /// failed request naming the cap.
    #[arg(long, value_name = "BYTES", default_value_t = speedbench_client::DEFAULT_MAX_RESPONSE_BYTES)]
    pub max_response_bytes: usize,
    /// Skip the preflight: one small request before the run, to check that
    /// the server reports acceptance per request and say what to change
    /// when it does not (`SPEEDBENCH_NO_PREFLIGHT=true` too, e.g. for every
    /// run of a script).
    #[arg(long, env = "SPEEDBENCH_NO_PREFLIGHT")]
    pub no_preflight: bool,
}

impl Default for ClientArgs {
    fn default() -> Self {
        ClientArgs {
            ca_cert: Vec::new(),
            local_addr: Vec::new(),
            http_client: HttpClientKind::default(),
            request_rate: None,
            arrival: Arrival::Poisson,
            random_seed: 0,
            max_concurrency: None,
            benchmark_duration: None,
            benchmark_grace_period: 30.0,
            server_metrics: Vec::new(),
            no_server_metrics: false,
            server_metrics_shutdown_delay: 2.0,
            shard: ShardArgs::default(),
            export_level: ExportLevel::default(),
            engine: EngineChoice::Auto,
            no_preflight: false,
            max_response_bytes: speedbench_client::DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// Runs `speedbench profile` (a sweep with `--config`).
pub(crate) async fn run(args: ProfileArgs) -> Result<Outcome, CliError> {
    if let Some(file) = args.config.clone() {
        return crate::sweep::run(&file, &args).await;
    }
    let spec = args.to_spec();
    // The dataset first, as before the spec existed: a missing file is
    // named before any flag it would have run with.
    let dataset = spec.load_dataset(&mut Console::default()).await?;
    execute(spec.validate()?, dataset).await
}

impl ProfileArgs {
    /// The run these flags ask for.
    pub(crate) fn to_spec(&self) -> RunSpec {
        let mut spec = RunSpec::default();
        let t = &mut spec.target;
        t.url = self.url.clone();
        t.model = self.model.clone();
        t.endpoint_type = self.endpoint_type;
        t.streaming = self.streaming;
        t.timeout_s = self.timeout;
        t.api_key = self.api_key.clone().map(Secret::new);
        t.headers = self.headers.iter().cloned().map(Secret::new).collect();
        self.client.target_into(&mut spec);
        let d = &mut spec.dataset;
        d.source = match (&self.input_file, &self.public.public_dataset, &self.bench) {
            (Some(path), _, _) => Some(DatasetSource::InputFile(path.clone())),
            (None, Some(name), _) => Some(DatasetSource::PublicDataset(name.clone())),
            (None, None, Some(config)) => Some(DatasetSource::Bench(config.clone())),
            (None, None, None) => None,
        };
        d.dataset_cache = self.public.dataset_cache.clone();
        d.resolver = self.public.resolve.resolver;
        d.python = self.public.resolve.python.clone();
        d.prepare_script = self.public.resolve.prepare_script.clone();
        d.category = self.category.clone();
        d.limit = self.limit;
        let l = &mut spec.load;
        l.concurrency = self.concurrency;
        l.request_count = self.request_count;
        l.num_conversations = self.num_conversations;
        l.warmup_request_count = self.warmup_request_count;
        l.max_error_rate = self.max_error_rate;
        spec.sampling.osl = self.osl;
        spec.sampling.extra_inputs = self.extra_inputs.clone();
        let o = &mut spec.outputs;
        o.output_artifact_dir = self.output_artifact_dir.clone();
        o.staging_dir = self.staging_dir.clone();
        o.output = self.output.clone();
        o.overwrite = self.overwrite;
        o.export_level = self.client.export_level;
        o.run_id = self.run_id.clone();
        spec
    }
}

impl ClientArgs {
    /// The connection, load-shape, shard and scrape options into `spec`.
    fn target_into(&self, spec: &mut RunSpec) {
        let t = &mut spec.target;
        t.ca_cert = self.ca_cert.clone();
        t.local_addr = self.local_addr.clone();
        t.http_client = self.http_client;
        t.max_response_bytes = self.max_response_bytes;
        t.engine = self.engine;
        t.preflight = !self.no_preflight;
        let l = &mut spec.load;
        l.request_rate = self.request_rate;
        l.arrival = self.arrival;
        l.random_seed = self.random_seed;
        l.max_concurrency = self.max_concurrency;
        l.benchmark_duration_s = self.benchmark_duration;
        l.benchmark_grace_period_s = self.benchmark_grace_period;
        spec.shard = self.shard.to_spec();
        spec.scrape.enabled = !self.no_server_metrics;
        spec.scrape.server_metrics = self.server_metrics.clone();
        spec.scrape.shutdown_delay_s = self.server_metrics_shutdown_delay;
    }
}

/// Profiles an already loaded dataset (shared with `speedbench demo`); the
/// first Ctrl-C (or SIGTERM) stops the run, a second exits at once.
pub(crate) async fn execute(valid: ValidRun, dataset: Dataset) -> Result<Outcome, CliError> {
    let stop = StopHandle::new();
    let signals = stop_on_signals(stop.clone(), notify_signal);
    let mut console = Console::default();
    let report = speedbench_run::execute(valid, dataset, stop, &mut console).await?;
    match report.into_status()? {
        RunStatus::Interrupted => Ok(Outcome::Interrupted(
            signals.exit_code().unwrap_or(EXIT_SIGINT),
        )),
        _ => Ok(Outcome::Done),
    }
}

/// What the terminal is told when a signal comes.
pub(crate) fn notify_signal(event: SignalEvent) {
    match event {
        SignalEvent::Stopping { .. } => {
            eprintln!("\nstopping: saving every finished request (press Ctrl-C again to abort)")
        }
        _ => eprintln!("aborted"),
    }
}
