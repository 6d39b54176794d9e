//! `speedbench profile`: drive a server with a dataset and summarise the run.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use clap::builder::PossibleValuesParser;
use serde_json::json;
use speedbench::process::{EXIT_SIGINT, SignalEvent, SignalWatch, stop_on_signals};
use speedbench_client::{
    ApiKey, ApiKind, Arrival, BaseUrl, ClientError, Engine, ExportLevel, HttpClientKind,
    LoadConfig, OwnedField, ProfileRun, Progress, RunStatus, RunSummary, StopHandle, Target,
    discover_model_with_headers, new_run_id, parse_extra_inputs, parse_header, run_profile,
    scrape::{Acceptance, ScrapeConfig, ServerMetricsExport},
};
use speedbench_dataset::registry::SPEED_BENCH_CONFIGS;
use speedbench_dataset::{CategorySelection, Dataset, bench_dataset};
use speedbench_metrics::{
    RunMetrics, SpeedBenchPyConfig, SpeedBenchPyOutput, has_llamacpp_timings,
};
use speedbench_record::{RecordError, RunManifest, read_records_file};
use speedbench_report::{
    AcceptanceMatrix, MatrixMetric, ReportError, check_output_free, render_run_summary,
    render_speed_bench_py_records, write_speed_bench_py_json,
};

use crate::{CliError, Context, Outcome, fail};

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
    #[arg(long, value_name = "N", value_parser = parse_limit)]
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
    pub engine: EngineArg,
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

/// `--engine`: `auto`, or an engine's name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum EngineArg {
    /// Detect it.
    #[default]
    Auto,
    /// This one.
    Named(Engine),
}

impl std::str::FromStr for EngineArg {
    type Err = String;
    fn from_str(s: &str) -> Result<EngineArg, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(EngineArg::Auto);
        }
        s.parse().map(EngineArg::Named)
    }
}

impl EngineArg {
    fn name(self) -> &'static str {
        match self {
            EngineArg::Auto => "auto",
            EngineArg::Named(e) => e.as_str(),
        }
    }
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
            engine: EngineArg::Auto,
            no_preflight: false,
            max_response_bytes: speedbench_client::DEFAULT_MAX_RESPONSE_BYTES,
        }
    }
}

/// `--limit N`: a whole number of rows, at least 1.
fn parse_limit(s: &str) -> Result<NonZeroUsize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err(
            "must be at least 1: it is the number of rows kept of each category \
                      (omit --limit to keep every row)"
                .to_string(),
        ),
        Ok(n) => Ok(NonZeroUsize::new(n).expect("not zero")),
        Err(e) => Err(format!("not a whole number of rows ({e})")),
    }
}

fn seconds(flag: &str, v: f64) -> Result<Duration, CliError> {
    Duration::try_from_secs_f64(v)
        .ok()
        .filter(|_| v.is_finite())
        .ok_or_else(|| fail(flag, "must be a non-negative number of seconds"))
}

impl ClientArgs {
    fn load(&self, mut load: LoadConfig) -> Result<LoadConfig, CliError> {
        load.request_rate = self.request_rate;
        load.arrival = self.arrival;
        load.random_seed = self.random_seed;
        load.max_concurrency = self.max_concurrency;
        load.benchmark_duration = self
            .benchmark_duration
            .map(|d| seconds("--benchmark-duration", d))
            .transpose()?;
        load.grace_period = seconds("--benchmark-grace-period", self.benchmark_grace_period)?;
        self.shard.apply(&mut load)?;
        Ok(load)
    }

    fn scrape(&self, target: &Target) -> Result<Option<ScrapeConfig>, CliError> {
        if self.no_server_metrics {
            return Ok(None);
        }
        let mut config = ScrapeConfig::for_target(target, &self.server_metrics);
        config.shutdown_delay = seconds(
            "--server-metrics-shutdown-delay",
            self.server_metrics_shutdown_delay,
        )?;
        Ok(Some(config))
    }

    fn config(&self) -> serde_json::Value {
        json!({
            "ca_cert": self.ca_cert.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "local_addr": self.local_addr.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
            "http_client": self.http_client.name(),
            "request_rate": self.request_rate,
            "arrival": self.arrival.name(),
            "random_seed": self.random_seed,
            "max_concurrency": self.max_concurrency,
            "benchmark_duration_s": self.benchmark_duration,
            "benchmark_grace_period_s": self.benchmark_grace_period,
            "server_metrics": self.server_metrics,
            "no_server_metrics": self.no_server_metrics,
            "engine": self.engine.name(),
            "no_preflight": self.no_preflight,
            "max_response_bytes": self.max_response_bytes,
        })
    }

    fn extra_roots(&self) -> Result<Vec<Vec<u8>>, CliError> {
        self.ca_cert
            .iter()
            .map(|p| std::fs::read(p).context(format!("--ca-cert {}", p.display())))
            .collect()
    }
}

/// The library error, with the flag that fixes it named (the library
/// knows no flags).
fn hinted(what: &str, e: ClientError) -> CliError {
    let hint = match &e {
        ClientError::OwnedField { field, .. } => Some(match field {
            OwnedField::Model => "set it with --model".to_string(),
            OwnedField::Messages | OwnedField::Prompt => {
                "it comes from --input-file or --public-dataset".to_string()
            }
            _ => "set it with --streaming".to_string(),
        }),
        ClientError::AuthorizationTwice { header } => Some(format!(
            "-H {header} and --api-key (or OPENAI_API_KEY) are both given"
        )),
        ClientError::EndpointMismatch { named, .. } => {
            Some(format!("pass --endpoint-type {}", named.name()))
        }
        ClientError::LocalAddr { .. } => Some("check --local-addr".to_string()),
        _ => None,
    };
    let what = match hint {
        Some(h) => format!("{what} ({h})"),
        None => what.to_string(),
    };
    Err::<(), _>(e).context(what).unwrap_err()
}

/// Runs `speedbench profile` (a sweep with `--config`).
pub(crate) async fn run(mut args: ProfileArgs) -> Result<Outcome, CliError> {
    if let Some(file) = args.config.clone() {
        return crate::sweep::run(&file, &args).await;
    }
    let dataset = load_dataset(&mut args).await?;
    execute(args, dataset).await
}

/// `--bench CONFIG` as `--public-dataset speed_bench_CONFIG`, and is
/// recorded as such (with `bench` beside it).
pub(crate) fn apply_bench(args: &mut ProfileArgs) -> Result<(), CliError> {
    if let Some(config) = &args.bench {
        let spec = bench_dataset(config).context(format!("--bench {config}"))?;
        args.public.public_dataset = Some(spec.name);
    }
    Ok(())
}

/// Loads the dataset `--input-file`, `--public-dataset` or `--bench` names.
pub(crate) async fn load_dataset(args: &mut ProfileArgs) -> Result<Dataset, CliError> {
    apply_bench(args)?;
    match (&args.input_file, &args.public.public_dataset) {
        (Some(path), None) => Dataset::from_jsonl_file(path).context("loading the input file"),
        (None, Some(name)) => crate::datasets::load_public(name, &args.public).await,
        _ => Err(fail(
            "profile",
            "give exactly one of --input-file, --public-dataset and --bench",
        )),
    }
}

/// What [`check`] made of the options: everything a run needs but the
/// dataset and the served model's name.
pub(crate) struct Checked {
    pub(crate) categories: CategorySelection,
    base_url: BaseUrl,
    /// The request target; its `model` is `--model`, or empty until asked
    /// of the server.
    target: Target,
    load: LoadConfig,
    server_metrics: Option<ScrapeConfig>,
}

/// Checks every option `execute` would refuse before its first request,
/// sending nothing: flag values, request fields, CA files, and `--output`.
pub(crate) fn check(args: &ProfileArgs) -> Result<Checked, CliError> {
    let categories = CategorySelection::parse(&args.category).context("--category")?;
    let base_url = BaseUrl::parse(&args.url).context("--url")?;
    let api_key = args
        .api_key
        .clone()
        .filter(|k| !k.is_empty())
        .map(ApiKey::new);
    let extra_roots = args.client.extra_roots()?;
    let headers: Vec<(String, String)> = args
        .headers
        .iter()
        .map(|h| parse_header(h).context("--header"))
        .collect::<Result<_, _>>()?;
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        return Err(fail("--timeout", "must be a positive number of seconds"));
    }
    let mut target = Target::new(base_url.clone(), args.model.clone().unwrap_or_default());
    target.api = args.endpoint_type;
    target.streaming = args.streaming;
    target.max_tokens = args.osl;
    target.extra_body =
        parse_extra_inputs(&args.extra_inputs).map_err(|e| hinted("--extra-inputs", e))?;
    target.api_key = api_key;
    target.headers = headers;
    target.timeout = Duration::from_secs_f64(args.timeout);
    target.extra_roots_pem = extra_roots;
    target.local_addrs = args.client.local_addr.clone();
    target.http_client = args.client.http_client;
    if args.client.max_response_bytes == 0 {
        return Err(fail("--max-response-bytes", "must be at least 1"));
    }
    target.max_response_bytes = args.client.max_response_bytes;
    target
        .validate()
        .map_err(|e| hinted("checking the request options", e))?;
    let mut load = LoadConfig::closed_loop(args.concurrency);
    load.request_count = args.request_count;
    load.num_conversations = args.num_conversations;
    load.warmup_request_count = args.warmup_request_count;
    let load = args.client.load(load)?;
    let server_metrics = args.client.scrape(&target)?;
    if args.output.is_some() && !args.client.export_level.keeps_records() {
        return Err(fail(
            "--output",
            "speed_bench.py's JSON is built from the per-request records, which \
             --export-level summary does not keep (use --export-level records)",
        ));
    }
    // Refused before the run, not after it (the write checks again).
    if let Some(path) = &args.output {
        check_output_free(path, args.overwrite).map_err(|e| {
            let exists = matches!(&e, ReportError::Write { source, .. }
                if source.kind() == std::io::ErrorKind::AlreadyExists);
            let what = if exists {
                "--output (give --overwrite to replace it)"
            } else {
                "--output"
            };
            Err::<(), _>(e).context(what).unwrap_err()
        })?;
    }
    Ok(Checked {
        categories,
        base_url,
        target,
        load,
        server_metrics,
    })
}

/// Narrows `dataset` to `--category` and `--limit`.
pub(crate) fn select_rows(
    args: &ProfileArgs,
    categories: &CategorySelection,
    dataset: Dataset,
) -> Result<Dataset, CliError> {
    let mut dataset = dataset
        .select_categories(categories)
        .context("filtering categories")?;
    if let Some(limit) = args.limit {
        let before = dataset.conversations.len();
        dataset = dataset.limit_per_category(limit);
        eprintln!(
            "--limit {limit}: {} of {before} rows kept (the first {limit} of each category)",
            dataset.conversations.len()
        );
    }
    Ok(dataset)
}

/// Profiles an already loaded dataset (shared with `speedbench demo`); the
/// first Ctrl-C (or SIGTERM) stops the run, a second exits at once.
pub(crate) async fn execute(args: ProfileArgs, dataset: Dataset) -> Result<Outcome, CliError> {
    let stop = StopHandle::new();
    let signals = stop_on_signals(stop.clone(), notify_signal);
    execute_with(args, dataset, stop, &signals).await
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

/// [`execute`] with the caller's stop handle and signal watch (a sweep
/// keeps one of each for all its runs).
pub(crate) async fn execute_with(
    args: ProfileArgs,
    dataset: Dataset,
    stop: StopHandle,
    signals: &SignalWatch,
) -> Result<Outcome, CliError> {
    let Checked {
        categories,
        base_url,
        mut target,
        load,
        server_metrics,
    } = check(&args)?;
    let dataset = select_rows(&args, &categories, dataset)?;
    let model = match &args.model {
        Some(m) => m.clone(),
        None => discover_model_with_headers(
            &base_url,
            target.api_key.as_ref(),
            &target.headers,
            &target.extra_roots_pem,
        )
        .await
        .map_err(|e| hinted("finding the served model (give --model to skip this)", e))?,
    };
    target.model = model.clone();
    shard::check_run_id(args.run_id.as_deref(), &load)?;
    let run_id = args.run_id.clone().unwrap_or_else(new_run_id);
    let remote_url = match &args.output_artifact_dir {
        Some(dir) => crate::remote::store_url(dir, "--output-artifact-dir")?,
        None => None,
    };
    if remote_url.is_none() && args.staging_dir.is_some() {
        return Err(fail(
            "--staging-dir",
            "only with a store URL (s3://, gs://, az://) as --output-artifact-dir",
        ));
    }
    // Before anything is sent: a store that refuses the credentials or
    // already holds a run stops the run here.
    let staged = match remote_url {
        Some(url) => Some(
            crate::remote::StagedRun::begin(url, args.staging_dir.clone(), args.overwrite).await?,
        ),
        None => None,
    };
    let output_dir = match (&staged, &args.output_artifact_dir) {
        (Some(staged), _) => staged.dir.clone(),
        (None, Some(dir)) => dir.clone(),
        (None, None) => Path::new("artifacts").join(format!(
            "{}-{}",
            dataset.name,
            shard::dir_id(&run_id, &load)
        )),
    };
    let open_file_limit = check_open_files(&load, &dataset)?;
    // Before the scrape's first sample: the preflight's tokens stay out of
    // the run's counters; the engine decides what is scraped.
    let engine = know_engine(&args.client, &mut target).await?;
    let server_metrics = server_metrics.and(args.client.scrape(&target)?);

    // What was asked for, minus anything secret: header names only, no key.
    let config = json!({
        "url": base_url.to_string(),
        "model": model,
        "endpoint_type": args.endpoint_type.name(),
        "streaming": args.streaming,
        "input_file": args.input_file.as_ref().map(|p| p.display().to_string()),
        "public_dataset": args.public.public_dataset,
        "bench": args.bench,
        "categories": args.category,
        RunManifest::LIMIT_PER_CATEGORY_KEY: args.limit,
        "concurrency": args.concurrency,
        "request_count": args.request_count,
        "num_conversations": args.num_conversations,
        "warmup_request_count": args.warmup_request_count,
        "osl": args.osl,
        "extra_inputs": target.extra_body,
        "timeout_s": args.timeout,
        "header_names": target.headers.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        "api_key_set": target.api_key.is_some(),
        "engine": engine.as_str(),
        "client": args.client.config(),
    });
    let speed_bench_config = speed_bench_py_config(&args, &dataset, &model, &target);
    let mut run = ProfileRun::new(dataset, target, &output_dir)
        .with_load(load)
        .with_run_id(run_id)
        .with_config(config)
        .with_overwrite(args.overwrite)
        .with_export_level(args.client.export_level);
    run.server_metrics = server_metrics;
    run.max_error_rate = args.max_error_rate;
    run.open_file_limit = open_file_limit;

    let progress = Arc::new(Progress::default());
    let display = crate::progress::spawn(progress.clone());
    let result = run_profile(run, stop, progress.clone()).await;
    crate::progress::finish(display);
    let outcome = match result {
        // The library names the directory and what it found; the way out is
        // a flag of this command.
        Err(ClientError::Record(e @ RecordError::RunDirOccupied { .. })) => {
            return Err(e).context("not overwriting a run (give --overwrite to replace it)");
        }
        Err(e @ ClientError::OpenFileLimit { .. }) => return Err(open_files_refused(e)),
        other => other.context("running the profile")?,
    };
    // Every finished run goes up, whatever its outcome; a failed upload is
    // reported after the run's own summary.
    let shown = |path: &Path| match &staged {
        Some(staged) => staged.shown(path),
        None => path.display().to_string(),
    };
    let records_shown = shown(&outcome.records_path);
    let manifest_shown = shown(&outcome.manifest_path);
    let summary_shown = outcome.summary_path.as_deref().map(shown);
    let raw_shown = outcome.raw_responses_path.as_deref().map(shown);
    let upload = match staged {
        Some(staged) => Some(staged.finish().await),
        None => None,
    };
    shard::print_start(&outcome);
    if let Some(s) = &outcome.schedule {
        eprintln!(
            "schedule: {} arrivals, lateness p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
            s.arrivals,
            s.lateness_p50_ns as f64 / 1e6,
            s.lateness_p99_ns as f64 / 1e6,
            s.lateness_max_ns as f64 / 1e6
        );
    }

    if let Some(path) = &outcome.server_metrics_path {
        server_metrics_line(path);
    }

    for e in &outcome.write_errors {
        eprintln!("error: {e}");
    }
    let mut request_throughput = None;
    let mut output_error = None;
    match (!outcome.records_removed).then(|| read_records_file(&outcome.records_path)) {
        None => request_throughput = summary_only(&outcome)?,
        Some(Ok(file)) => {
            let metrics = RunMetrics::from_records(&file.records);
            request_throughput = metrics.request_throughput;
            for warning in &metrics.timing_warnings {
                eprintln!("warning: {warning}");
            }
            print!("{}", render_run_summary(&metrics));
            // A GGUF path (llama-server's model id) shows as its file stem.
            let label = speedbench_runs::display_model(
                &file.manifest.as_ref().map_or(model, |m| m.model.clone()),
            );
            for metric in [MatrixMetric::AcceptLength, MatrixMetric::AcceptRate] {
                let matrix = AcceptanceMatrix::from_runs(
                    metric,
                    &[(label.clone(), file.records.as_slice())],
                );
                if matrix.rows.iter().any(|r| r.overall.is_some()) {
                    print!("{}", matrix.to_console());
                }
            }
            if has_llamacpp_timings(&file.records) {
                print!("{}", render_speed_bench_py_records(&file.records));
            }
            if let Some(path) = &args.output {
                let json = SpeedBenchPyOutput::from_records(speed_bench_config, &file.records);
                match write_speed_bench_py_json(path, &json, args.overwrite) {
                    Ok(()) => eprintln!("speed_bench.py JSON written to {}", path.display()),
                    Err(e) => output_error = Some(e),
                }
            }
        }
        // The failure is already reported; the summary cannot be printed.
        Some(Err(e)) if matches!(outcome.status, RunStatus::Failed(_)) => {
            eprintln!("error: reading the records back: {e}");
        }
        Some(Err(e)) => return Err(e).context("reading the records back"),
    }
    eprintln!(
        "{}",
        crate::progress::final_line(&progress, request_throughput)
    );
    if outcome.unsaved > 0 {
        eprintln!(
            "{} finished requests could not be saved (the records file failed)",
            outcome.unsaved
        );
    }
    if let Some(path) = raw_shown {
        eprintln!("raw response bodies in {path}");
    }
    let kept = if outcome.records_removed {
        "summarised, not kept (--export-level summary), from"
    } else {
        "in"
    };
    eprintln!(
        "{} records {kept} {records_shown} (manifest {manifest_shown}{})",
        outcome.record_count,
        summary_shown.map_or(String::new(), |p| format!(", summary {p}"))
    );
    if let Some(e) = output_error {
        return Err(e).context("writing --output");
    }
    match upload {
        Some(Ok(uploaded)) => uploaded.clean_up(),
        Some(Err(e)) => return Err(e),
        None => {}
    }
    match outcome.status {
        RunStatus::Completed => Ok(Outcome::Done),
        RunStatus::Interrupted => Ok(Outcome::Interrupted(
            signals.exit_code().unwrap_or(EXIT_SIGINT),
        )),
        RunStatus::Failed(reason) => Err(fail("the run failed", reason)),
    }
}

/// The open-file limit (raised by `main` as far as it goes), after checking
/// before anything is sent that the load fits it.
fn check_open_files(load: &LoadConfig, dataset: &Dataset) -> Result<Option<u64>, CliError> {
    let limit = speedbench::process::raise_open_files(0);
    if let Some(limit) = limit {
        speedbench_client::check_open_files(load, dataset, limit).map_err(open_files_refused)?;
    }
    Ok(limit)
}

/// A load the open-file limit cannot hold, with the flags that fix it.
fn open_files_refused(e: ClientError) -> CliError {
    let allowed = match &e {
        ClientError::OpenFileLimit { allowed, .. } => *allowed,
        // Another load error (a shard with nothing to run): as the run
        // itself would report it.
        _ => return Err::<(), _>(e).context("running the profile").unwrap_err(),
    };
    Err::<(), _>(e)
        .context(format!(
            "refused before the first request (lower --concurrency or --max-concurrency to at \
             most {allowed}, raise the hard limit with `ulimit -Hn`, or run the load as shards, \
             --shard I/N, in several processes: docs/distributed.md)"
        ))
        .unwrap_err()
}

/// Finds the engine (`--engine`, else from what the server answers), sets it
/// on the target, prints it, and unless `--no-preflight` sends one small
/// request and says whether per-request acceptance comes back, and what to
/// change when it does not. A failed preflight is reported, not fatal: the
/// run records its own failures.
async fn know_engine(client: &ClientArgs, target: &mut Target) -> Result<Engine, CliError> {
    let engine = match client.engine {
        EngineArg::Named(engine) => {
            eprintln!("engine: {engine} (--engine)");
            engine
        }
        EngineArg::Auto => {
            let guess = speedbench_client::detect_engine(target)
                .await
                .map_err(|e| hinted("finding the engine (give --engine to skip this)", e))?;
            eprintln!("engine: {} ({})", guess.engine, guess.evidence);
            guess.engine
        }
    };
    target.engine = Some(engine);
    if client.no_preflight {
        return Ok(engine);
    }
    let check = speedbench_client::preflight(target, engine)
        .await
        .map_err(|e| hinted("the preflight request (give --no-preflight to skip it)", e))?;
    match (&check.error, &check.acceptance) {
        (Some(error), _) => eprintln!("preflight: the request failed: {error}"),
        (None, Some(acceptance)) => eprintln!("preflight: per-request acceptance: {acceptance}"),
        (None, None) => {
            if let Some(dropped) = &check.dropped {
                eprintln!("preflight: the acceptance payload cannot be right: {dropped}");
            }
            eprintln!(
                "preflight: no per-request acceptance came back from {engine}: {}. The server \
                 scrape may still give run-level figures; --engine names another engine, \
                 --no-preflight skips this check",
                check.advice().unwrap_or_default()
            );
        }
    }
    Ok(engine)
}

/// The end-of-run summary of a run whose records were not kept: from
/// `summary.json`. Returns the request throughput.
fn summary_only(outcome: &speedbench_client::RunOutcome) -> Result<Option<f64>, CliError> {
    let Some(path) = &outcome.summary_path else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path).context(format!("reading {}", path.display()))?;
    let summary: RunSummary = serde_json::from_str(&text)
        .map_err(|e| fail(&format!("reading {}", path.display()), e.to_string()))?;
    print!("{}", render_run_summary(&summary.metrics));
    eprintln!(
        "note: --export-level summary: the per-category matrices need the per-request \
         records, which were not kept; `speedbench report` shows the run-level figures \
         of {} and the server scrape",
        path.display()
    );
    Ok(summary.metrics.request_throughput)
}

/// One stderr line with the acceptance the server scrape gives: the
/// figures `speedbench report --source server` prints for the run.
fn server_metrics_line(path: &Path) {
    let export = match ServerMetricsExport::read(path) {
        Ok(export) => export,
        Err(e) => {
            eprintln!("server metrics: {e}");
            return;
        }
    };
    if export.summary.endpoints_successful.is_empty() {
        eprintln!(
            "server metrics: no endpoint answered (see {})",
            path.display()
        );
        return;
    }
    let (length, rate) = (export.acceptance_length(), export.acceptance_rate());
    if length.is_none() && rate.is_none() {
        return;
    }
    let f = |a: &Option<Acceptance>| {
        a.as_ref().map_or("-".to_string(), |a| {
            format!("{:.3} ({}, {})", a.value, a.metric, a.weighting)
        })
    };
    eprintln!(
        "server metrics: acceptance length {}, acceptance rate {}",
        f(&length),
        f(&rate)
    );
    // llama-server's own log divides by drafting steps only; speedbench's
    // figure counts every target pass (docs/engines.md): both, labelled.
    if let Some(llama) = export
        .spec_decode()
        .into_iter()
        .find(|e| e.engine == "llamacpp")
        && let (Some(accepted), Some(drafts)) = (llama.accepted_tokens, llama.drafts)
        && drafts > 0.0
    {
        eprintln!(
            "server metrics: llama.cpp's own acceptance length (its log's, per drafting step: \
             1 + accepted / drafting steps) {:.3}; speedbench's counts every target pass",
            1.0 + accepted / drafts
        );
    }
    if let Some(engine) = export
        .spec_decode()
        .into_iter()
        .find(|e| !e.per_position.is_empty())
    {
        let shares: Vec<String> = engine
            .per_position
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{}: {p:.3}", i + 1))
            .collect();
        eprintln!(
            "server metrics: acceptance by draft position ({} counters, accepted at position / drafts): {}",
            engine.engine,
            shares.join(", ")
        );
    }
}

/// speed_bench.py's `config` for `--output`: its options, as this run set
/// them (`bench`: `--bench`, else the dataset's name).
fn speed_bench_py_config(
    args: &ProfileArgs,
    dataset: &Dataset,
    model: &str,
    target: &Target,
) -> SpeedBenchPyConfig {
    let asked: Vec<&str> = args.category.iter().map(|c| c.trim()).collect();
    let category = if asked.is_empty() || asked == ["all"] {
        "all".to_string()
    } else {
        asked.join(",")
    };
    SpeedBenchPyConfig {
        url: args.url.clone(),
        model: Some(model.to_string()),
        bench: Some(args.bench.clone().unwrap_or_else(|| dataset.name.clone())),
        category,
        osl: args.osl.map(u64::from),
        concurrency: args.concurrency as u64,
        extra_inputs: target.extra_body.clone(),
        limit: args.limit.map(|n| n.get() as u64),
        timeout: Some(args.timeout),
        streaming: Some(args.streaming),
    }
}
