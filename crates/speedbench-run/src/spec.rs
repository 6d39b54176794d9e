//! [`RunSpec`]: one run, as a value. The command line, a sweep file's
//! variation and a Kubernetes Pod's arguments all become this type.

use std::net::IpAddr;
use std::num::NonZeroUsize;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use speedbench_client::{
    ApiKind, Arrival, ConnectionReuse, DatasetSampling, Engine, ExportLevel, HttpClientKind,
    RampShape, Shard,
};
use speedbench_dataset::Resolver;

use crate::words::by_name;

/// Everything one run needs: where to send, what to send, how hard, and
/// where its results go.
///
/// The field names are those of `speedbench profile`'s flags (`timeout_s`
/// is `--timeout`, and so on; each field says its flag), so a sweep file
/// and the command line speak the same vocabulary and an error names the
/// flag a user would change. The defaults are the flags' defaults.
/// Secrets (`api_key`, header values) are never serialized and print as
/// `(hidden)`.
///
/// ```
/// use speedbench_run::{DatasetSource, RunSpec};
///
/// let mut spec = RunSpec::default();
/// spec.target.url = "127.0.0.1:8000".into();
/// spec.dataset.source = Some(DatasetSource::InputFile("rows.jsonl".into()));
/// spec.load.concurrency = 4;
/// let valid = spec.validate().expect("every field is usable");
/// assert_eq!(valid.load().concurrency, 4);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RunSpec {
    /// The server and how each request is made.
    pub target: TargetSpec,
    /// The rows sent.
    pub dataset: DatasetSpec,
    /// How many requests, at what concurrency or rate.
    pub load: LoadSpec,
    /// Fields added to each request's body.
    pub sampling: SamplingSpec,
    /// Where the run's files go.
    pub outputs: OutputSpec,
    /// This process's part of a sharded run, and when it starts.
    pub shard: ShardSpec,
    /// The server-metrics scrape.
    pub scrape: ScrapeSpec,
    /// The figures asked of the run beyond the records' own.
    pub figures: FigureSpec,
    /// The measured phase repeated, for run-to-run variance.
    pub repeat: RepeatSpec,
}

/// A secret (an API key, a header's value): kept in memory for the
/// requests, never serialized, printed as `(hidden)`.
#[derive(Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value, for the request that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("(hidden)")
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str("(hidden)")
    }
}

/// `--engine`: found from what the server answers, or named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EngineChoice {
    /// Detect it (`auto`).
    #[default]
    Auto,
    /// This engine.
    Named(Engine),
}

impl EngineChoice {
    /// `auto`, or the engine's name.
    pub fn name(self) -> &'static str {
        match self {
            EngineChoice::Auto => "auto",
            EngineChoice::Named(e) => e.as_str(),
        }
    }
}

impl crate::words::Word for EngineChoice {
    fn word(&self) -> String {
        self.name().into()
    }
}

impl std::str::FromStr for EngineChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<EngineChoice, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(EngineChoice::Auto);
        }
        s.parse().map(EngineChoice::Named)
    }
}

/// The server and how each request is made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct TargetSpec {
    /// `--url`: `host:port` or `http://host:port`, with or without `/v1`;
    /// several, comma-separated, share out the conversations.
    pub url: String,
    /// `--url-strategy`: how several `--url`s share the conversations
    /// (`round_robin`, the only one).
    pub url_strategy: String,
    /// `--model`: asked of `GET /v1/models` when `None`; several,
    /// comma-separated, share out the rows (LoRA adapters).
    pub model: Option<String>,
    /// `--model-selection-strategy`: how rows share out several models,
    /// `round_robin` or `random`.
    pub model_selection_strategy: String,
    /// `--endpoint-type`: chat or completions.
    #[serde(with = "by_name")]
    pub endpoint_type: ApiKind,
    /// `--streaming`: SSE responses (needed for TTFT and ITL).
    pub streaming: bool,
    /// `--timeout`: per-request timeout, seconds.
    pub timeout_s: f64,
    /// `--api-key`: sent as a bearer token.
    #[serde(skip_serializing)]
    pub api_key: Option<Secret>,
    /// `--header`: extra headers as `Name:value` (values are secrets).
    #[serde(skip_serializing)]
    pub headers: Vec<Secret>,
    /// `--ca-cert`: extra PEM roots for HTTPS.
    pub ca_cert: Vec<PathBuf>,
    /// `--local-addr`: source addresses, taken in turn.
    pub local_addr: Vec<IpAddr>,
    /// `--http-client`: the client of plain http:// requests.
    #[serde(with = "by_name")]
    pub http_client: HttpClientKind,
    /// `--connection-reuse-strategy`: pooled, never or sticky-user-sessions.
    #[serde(with = "by_name")]
    pub connection_reuse: ConnectionReuse,
    /// `--max-response-bytes`: the most bytes kept of a body or an SSE line.
    pub max_response_bytes: usize,
    /// `--engine`.
    #[serde(with = "by_name")]
    pub engine: EngineChoice,
    /// `--no-preflight` when false: one small request before the run.
    pub preflight: bool,
}

impl Default for TargetSpec {
    fn default() -> TargetSpec {
        TargetSpec {
            url: "localhost:8000".into(),
            url_strategy: "round_robin".into(),
            model: None,
            model_selection_strategy: "round_robin".into(),
            endpoint_type: ApiKind::Chat,
            streaming: false,
            timeout_s: 600.0,
            api_key: None,
            headers: Vec::new(),
            ca_cert: Vec::new(),
            local_addr: Vec::new(),
            http_client: HttpClientKind::default(),
            connection_reuse: ConnectionReuse::default(),
            max_response_bytes: speedbench_client::DEFAULT_MAX_RESPONSE_BYTES,
            engine: EngineChoice::Auto,
            preflight: true,
        }
    }
}

/// Where the rows come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DatasetSource {
    /// `--input-file`: SPEED-Bench-shaped JSONL rows.
    InputFile(PathBuf),
    /// `--public-dataset`: a registered name.
    PublicDataset(String),
    /// `--bench`: a SPEED-Bench config (`--public-dataset speed_bench_CONFIG`).
    Bench(String),
    /// `--isl`: prompts built to a token length ([`DatasetSpec::synthetic`]).
    Synthetic,
    /// `--input-rows`: the rows themselves, a JSON array of the objects an
    /// input file holds one per line (an AIPerf config's inline `records`).
    InputRows(String),
}

/// `--isl` and its company: prompts of a known token length, counted by
/// the server's own tokenizer or a local `tokenizer.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct SyntheticSpec {
    /// `--isl`: the prompts' mean length, tokens.
    pub isl: Option<u32>,
    /// `--isl-stddev`: its standard deviation, tokens.
    pub isl_stddev: f64,
    /// `--osl-stddev`: the output lengths' standard deviation around
    /// `--osl`, tokens.
    pub osl_stddev: f64,
    /// `--isl-distribution`: the prompts' lengths as a distribution in
    /// AIPerf's forms (JSON: `{mean, median}`, `{peaks: [...]}`,
    /// `{points: [...]}`, with `min`/`max`), instead of `--isl`'s normal.
    pub isl_distribution: Option<String>,
    /// `--osl-distribution`: the output lengths so, instead of `--osl`'s.
    pub osl_distribution: Option<String>,
    /// `--sequence-distribution`: input and output lengths drawn together
    /// (AIPerf's `256,128:40;512|20,256|10:60` and its other forms).
    pub sequence_distribution: Option<String>,
    /// `--num-dataset-entries`: how many prompts (conversations).
    pub entries: usize,
    /// `--conversation-turn-mean`: user turns per synthetic conversation.
    pub turn_mean: u32,
    /// `--conversation-turn-stddev`: their standard deviation.
    pub turn_stddev: f64,
    /// `--isl-block-size`: tokens per `hash_ids` block of a trace's
    /// prompts given by length.
    pub block_size: u32,
    /// `--num-prefix-prompts`: distinct shared prefixes, one before each
    /// conversation's first prompt (0: none).
    pub prefix_prompts: usize,
    /// `--prefix-prompt-length`: each prefix's length, tokens.
    pub prefix_length: u32,
    /// `--tokenizer`: a Hugging Face `tokenizer.json` (or the directory
    /// holding one) that counts the prompts' tokens instead of the
    /// server's `/tokenize`.
    pub tokenizer: Option<PathBuf>,
}

impl Default for SyntheticSpec {
    fn default() -> SyntheticSpec {
        SyntheticSpec {
            isl: None,
            isl_stddev: 0.0,
            osl_stddev: 0.0,
            isl_distribution: None,
            osl_distribution: None,
            sequence_distribution: None,
            entries: 100,
            turn_mean: 1,
            turn_stddev: 0.0,
            block_size: 512,
            prefix_prompts: 0,
            prefix_length: 0,
            tokenizer: None,
        }
    }
}

/// The rows sent, and how they are narrowed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct DatasetSpec {
    /// The one source; `None` is refused by [`RunSpec::validate`].
    pub source: Option<DatasetSource>,
    /// `--dataset-cache`: where public datasets are cached.
    pub dataset_cache: Option<PathBuf>,
    /// `--resolver`.
    #[serde(with = "by_name")]
    pub resolver: Resolver,
    /// `--python`: the prepare step's interpreter.
    pub python: Option<PathBuf>,
    /// `--prepare-script`: another prepare script than the pinned one.
    pub prepare_script: Option<PathBuf>,
    /// `--category`: categories kept (`all` or empty keeps every row).
    pub category: Vec<String>,
    /// `--limit`: at most N rows of each category.
    pub limit: Option<NonZeroUsize>,
    /// `--isl` and its company.
    pub synthetic: SyntheticSpec,
    /// `--synthesis-*`: a trace reshaped before it is replayed.
    pub synthesis: SynthesisSpec,
}

/// `--synthesis-*` (AIPerf's): a trace reshaped before it is replayed
/// (`speedbench_client::synthetic::TraceSynthesis`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct SynthesisSpec {
    /// `--synthesis-speedup-ratio`: timestamps divided by it.
    pub speedup_ratio: f64,
    /// `--synthesis-prefix-len-multiplier`: shared prefixes' lengths.
    pub prefix_len_multiplier: f64,
    /// `--synthesis-prefix-root-multiplier`: copies of the prefix trees.
    pub prefix_root_multiplier: u32,
    /// `--synthesis-prompt-len-multiplier`: rows' own lengths.
    pub prompt_len_multiplier: f64,
    /// `--synthesis-output-len-multiplier`: output lengths.
    pub output_len_multiplier: f64,
    /// `--synthesis-max-isl`: rows longer are dropped.
    pub max_isl: Option<u32>,
    /// `--synthesis-max-osl`: output lengths capped.
    pub max_osl: Option<u32>,
}

impl Default for SynthesisSpec {
    fn default() -> SynthesisSpec {
        SynthesisSpec {
            speedup_ratio: 1.0,
            prefix_len_multiplier: 1.0,
            prefix_root_multiplier: 1,
            prompt_len_multiplier: 1.0,
            output_len_multiplier: 1.0,
            max_isl: None,
            max_osl: None,
        }
    }
}

/// How many requests, at what concurrency or rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct LoadSpec {
    /// `--concurrency`: requests in flight at once.
    pub concurrency: usize,
    /// `--request-count`: profiled requests (turns).
    pub request_count: Option<u64>,
    /// `--num-conversations`.
    pub num_conversations: Option<u64>,
    /// `--warmup-request-count`.
    pub warmup_request_count: u64,
    /// `--warmup-concurrency`: warm up closed-loop at this many requests in
    /// flight, whatever the measured load; `None` warms up in its shape.
    pub warmup_concurrency: Option<usize>,
    /// `--warmup-duration`, seconds: warm up for at most this long.
    pub warmup_duration_s: Option<f64>,
    /// `--num-warmup-sessions`: warm up with this many conversations.
    pub warmup_sessions: Option<u64>,
    /// `--warmup-grace-period`, seconds: how long warmup requests in flight
    /// at the end of `--warmup-duration` may still run; `None` waits for them.
    pub warmup_grace_period_s: Option<f64>,
    /// `--request-rate`: open-loop arrivals per second.
    pub request_rate: Option<f64>,
    /// `--arrival`: poisson or constant gaps.
    #[serde(with = "by_name")]
    pub arrival: Arrival,
    /// `--random-seed` of the arrival schedule (and of the sampling).
    pub random_seed: u64,
    /// `--dataset-sampling-strategy`: which conversation each session sends.
    pub dataset_sampling: DatasetSampling,
    /// `--max-concurrency` with a request rate.
    pub max_concurrency: Option<usize>,
    /// `--benchmark-duration`, seconds.
    pub benchmark_duration_s: Option<f64>,
    /// `--benchmark-grace-period`, seconds.
    pub benchmark_grace_period_s: f64,
    /// `--max-error-rate`: fail the run past this share of failures.
    pub max_error_rate: Option<f64>,
    /// `--arrival-smoothness` (`--vllm-burstiness`): gamma arrivals of this
    /// shape.
    pub arrival_smoothness: Option<f64>,
    /// `--request-rate-ramp-duration`, seconds.
    pub request_rate_ramp_duration_s: Option<f64>,
    /// `--request-rate-series`: a JSON file of `{time_s, qps}` points.
    pub request_rate_series: Option<PathBuf>,
    /// `--ramp-up-strategy` (vLLM's ramp over the requests).
    #[serde(with = "by_name::option")]
    pub ramp_up_strategy: Option<RampShape>,
    /// `--ramp-up-start-rps`.
    pub ramp_up_start_rps: Option<f64>,
    /// `--ramp-up-end-rps`.
    pub ramp_up_end_rps: Option<f64>,
    /// `--concurrency-ramp-duration`, seconds.
    pub concurrency_ramp_duration_s: Option<f64>,
    /// `--warmup-concurrency-ramp-duration`, seconds: the warmup's own.
    pub warmup_concurrency_ramp_duration_s: Option<f64>,
    /// `--prefill-concurrency`: requests waiting for their first output
    /// at once, at most.
    pub prefill_concurrency: Option<usize>,
    /// `--prefill-concurrency-ramp-duration`, seconds.
    pub prefill_concurrency_ramp_duration_s: Option<f64>,
    /// `--warmup-prefill-concurrency`: the warmup's own.
    pub warmup_prefill_concurrency: Option<usize>,
    /// `--warmup-prefill-concurrency-ramp-duration`, seconds.
    pub warmup_prefill_concurrency_ramp_duration_s: Option<f64>,
    /// `--request-cancellation-rate`: the percentage of requests cancelled.
    pub request_cancellation_rate: Option<f64>,
    /// `--request-cancellation-delay`, seconds after sending.
    pub request_cancellation_delay_s: f64,
    /// `--session-turn-delay-mean`, milliseconds of think time between
    /// turns.
    pub session_turn_delay_mean_ms: f64,
    /// `--session-turn-delay-stddev`, milliseconds.
    pub session_turn_delay_stddev_ms: f64,
    /// `--session-delay-ratio`: both scaled by it.
    pub session_delay_ratio: f64,
    /// `--fixed-schedule`: replay the input's rows at their timestamps.
    pub fixed_schedule: bool,
    /// `--fixed-schedule-auto-offset`: the first row's timestamp is the
    /// start.
    pub fixed_schedule_auto_offset: bool,
    /// `--fixed-schedule-start-offset`, milliseconds of trace time: rows
    /// before it are not sent, and it is the start.
    pub fixed_schedule_start_offset_ms: Option<u64>,
    /// `--fixed-schedule-end-offset`, milliseconds: rows after it are not
    /// sent.
    pub fixed_schedule_end_offset_ms: Option<u64>,
    /// `--user-centric-rate`: requests per second over `--num-users` users
    /// holding multi-turn conversations, each a fixed gap between turns.
    pub user_centric_rate: Option<f64>,
    /// `--num-users`: the users of `--user-centric-rate`.
    pub num_users: Option<usize>,
    /// `--warmup-user-centric-rate`: the warmup's own user-centric rate.
    pub warmup_user_centric_rate: Option<f64>,
    /// `--warmup-num-users`: the warmup's own users.
    pub warmup_num_users: Option<usize>,
}

impl LoadSpec {
    /// Whether requests arrive on a schedule (a request rate, a rate
    /// series, vLLM's ramp, a trace's times or users' turns) rather than in a closed
    /// loop.
    pub fn open_loop(&self) -> bool {
        self.fixed_schedule
            || self.user_centric_rate.is_some()
            || self.request_rate.is_some()
            || self.request_rate_series.is_some()
            || self.ramp_up_strategy.is_some()
    }

    /// No warmup of any kind (by requests, by time, by conversations) and
    /// none of its shaping: a repeated run after the first, unless each
    /// warms up.
    pub fn without_warmup(&mut self) {
        self.warmup_request_count = 0;
        self.warmup_duration_s = None;
        self.warmup_sessions = None;
        self.warmup_grace_period_s = None;
        self.warmup_concurrency = None;
        self.warmup_concurrency_ramp_duration_s = None;
        self.warmup_prefill_concurrency = None;
        self.warmup_prefill_concurrency_ramp_duration_s = None;
        self.warmup_user_centric_rate = None;
        self.warmup_num_users = None;
    }
}

impl Default for LoadSpec {
    fn default() -> LoadSpec {
        LoadSpec {
            concurrency: 1,
            request_count: None,
            num_conversations: None,
            warmup_request_count: 0,
            warmup_concurrency: None,
            warmup_duration_s: None,
            warmup_sessions: None,
            warmup_grace_period_s: None,
            request_rate: None,
            arrival: Arrival::Poisson,
            random_seed: 0,
            dataset_sampling: DatasetSampling::Sequential,
            max_concurrency: None,
            benchmark_duration_s: None,
            benchmark_grace_period_s: 30.0,
            max_error_rate: None,
            arrival_smoothness: None,
            request_rate_ramp_duration_s: None,
            request_rate_series: None,
            ramp_up_strategy: None,
            ramp_up_start_rps: None,
            ramp_up_end_rps: None,
            concurrency_ramp_duration_s: None,
            warmup_concurrency_ramp_duration_s: None,
            prefill_concurrency: None,
            prefill_concurrency_ramp_duration_s: None,
            warmup_prefill_concurrency: None,
            warmup_prefill_concurrency_ramp_duration_s: None,
            request_cancellation_rate: None,
            request_cancellation_delay_s: 0.0,
            session_turn_delay_mean_ms: 0.0,
            session_turn_delay_stddev_ms: 0.0,
            session_delay_ratio: 1.0,
            fixed_schedule: false,
            fixed_schedule_auto_offset: false,
            fixed_schedule_start_offset_ms: None,
            fixed_schedule_end_offset_ms: None,
            user_centric_rate: None,
            num_users: None,
            warmup_user_centric_rate: None,
            warmup_num_users: None,
        }
    }
}

/// Fields added to each request's body.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct SamplingSpec {
    /// `--osl`: `max_tokens`.
    pub osl: Option<u32>,
    /// `--extra-inputs`: `key:value` pairs or JSON objects.
    pub extra_inputs: Vec<String>,
    /// `--force-min-tokens`: each row's own output length also sent as
    /// `min_tokens`.
    pub force_min_tokens: bool,
}

/// Where the run's files go.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct OutputSpec {
    /// `--output-artifact-dir`: a directory or a store URL; by default
    /// `artifacts/<dataset>-<run id>`.
    pub output_artifact_dir: Option<PathBuf>,
    /// `--staging-dir` with a store URL.
    pub staging_dir: Option<PathBuf>,
    /// `--output`: speed_bench.py's JSON.
    pub output: Option<PathBuf>,
    /// `--overwrite`: replace a run already there.
    pub overwrite: bool,
    /// `--export-level`.
    #[serde(with = "by_name")]
    pub export_level: ExportLevel,
    /// `--export-http-trace`: each request's HTTP trace in
    /// `http_trace.jsonl`.
    pub export_http_trace: bool,
    /// `--run-id`; generated when `None`.
    pub run_id: Option<String>,
    /// `--user-files`: files rendered into the run directory before the
    /// first request (AIPerf's `artifacts.user_files`), as JSON.
    pub user_files: Option<String>,
}

/// This process's part of a sharded run, and when it starts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ShardSpec {
    /// `--shard I/N`.
    #[serde(with = "by_name::option")]
    pub shard: Option<Shard>,
    /// `--shard-count` (with `shard_index`).
    pub shard_count: Option<u32>,
    /// `--shard-index` (`JOB_COMPLETION_INDEX`).
    pub shard_index: Option<u32>,
    /// `--start-at`: Unix time, seconds.
    pub start_at: Option<f64>,
    /// `--start-after-barrier`: a file every shard sees.
    pub start_after_barrier: Option<PathBuf>,
}

/// The server-metrics scrape.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct ScrapeSpec {
    /// `--no-server-metrics` when false.
    pub enabled: bool,
    /// `--server-metrics`: endpoints besides the engine's own.
    pub server_metrics: Vec<String>,
    /// `--server-metrics-shutdown-delay`, seconds.
    pub shutdown_delay_s: f64,
    /// `--gpu-telemetry`: NVIDIA DCGM exporters scraped during the run.
    pub gpu_telemetry: Vec<String>,
    /// `--server-metrics-formats` with `csv`: the export in AIPerf's CSV
    /// layout too (`server_metrics_export.csv`; the JSON is always written).
    pub csv: bool,
    /// `--server-metrics-formats` with `parquet`: the raw samples too, in
    /// AIPerf's Parquet layout (`server_metrics_export.parquet`).
    pub parquet: bool,
}

impl Default for ScrapeSpec {
    fn default() -> ScrapeSpec {
        ScrapeSpec {
            enabled: true,
            server_metrics: Vec::new(),
            shutdown_delay_s: 2.0,
            gpu_telemetry: Vec::new(),
            csv: false,
            parquet: false,
        }
    }
}

/// The figures asked of the run beyond the records' own: goodput against
/// SLOs, time slices, the steady state of a closed loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct FigureSpec {
    /// `--goodput`: the SLOs a good request meets.
    pub goodput: speedbench_metrics::Slos,
    /// `--slice-duration`, seconds.
    pub slice_duration_s: Option<f64>,
    /// `--steady-state-threshold`: the share of the concurrency in flight
    /// that makes a closed loop's steady state.
    pub steady_state_threshold: f64,
    /// `--steady-state-min-window`, seconds.
    pub steady_state_min_window_s: f64,
    /// `--show-trace-timing`: the requests' HTTP phases in the summary.
    pub show_trace_timing: bool,
}

impl Default for FigureSpec {
    fn default() -> FigureSpec {
        use speedbench_metrics::SteadyStateOptions as Steady;
        FigureSpec {
            goodput: Default::default(),
            slice_duration_s: None,
            steady_state_threshold: Steady::DEFAULT_THRESHOLD,
            steady_state_min_window_s: Steady::DEFAULT_MIN_WINDOW_S,
            show_trace_timing: false,
        }
    }
}

/// The measured phase repeated over the same prompts, in the same order,
/// for run-to-run variance (AIPerf's multi-run confidence reporting).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct RepeatSpec {
    /// `--num-profile-runs`: 1 to [`RepeatSpec::MAX_RUNS`].
    pub num_profile_runs: usize,
    /// `--profile-run-cooldown-seconds`: a pause between two runs.
    pub cooldown_s: f64,
    /// `--confidence-level` of the across-run intervals.
    pub confidence_level: f64,
    /// `--no-profile-run-disable-warmup-after-first`: every run warms up,
    /// not only the first.
    pub warmup_every_run: bool,
}

impl RepeatSpec {
    /// The most runs one command repeats (AIPerf's bound).
    pub const MAX_RUNS: usize = 10;
}

impl Default for RepeatSpec {
    fn default() -> RepeatSpec {
        RepeatSpec {
            num_profile_runs: 1,
            cooldown_s: 0.0,
            confidence_level: 0.95,
            warmup_every_run: false,
        }
    }
}
