//! The load generator: conversations in, records out.

mod bodies;
mod control;
mod load;
mod outcome;
mod phase;
mod prefill;
mod read_back;
mod record;
mod shard_plan;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

use serde_json::Value;
use speedbench_dataset::Dataset;
use speedbench_metrics::FigureOptions;
use speedbench_record::{
    HTTP_TRACE_FILE_NAME, JOURNAL_FILE_NAME, MeasuredStart, PARTIAL_RECORDS_FILE_NAME,
    RAW_RESPONSES_FILE_NAME, RECORDS_FILE_NAME, RunDirLock, RunManifest, RunShard,
    SUMMARY_FILE_NAME, redact_url,
};
use speedbench_scrape::{GpuTelemetry, ServerMetricsExport};

pub use crate::stop::StopHandle;
pub use control::Progress;
pub use load::{Cancellation, FixedSchedule, Load, PrefillLimit, TurnDelay};
pub use outcome::{ReadBack, RequestTally, RunOutcome, RunSummary};
pub use read_back::RecordsFilePasses;
pub use speedbench_record::RunStatus;

use crate::RecordAnnotator;
use crate::error::ClientError;
use crate::exchange::HttpClient;
use crate::export::{ExportLevel, JsonLinesWriter};
use crate::recorder::ExportWriters;
use crate::recorder::{Recorder, RecorderMsg};
use crate::schedule::ScheduleStats;
use crate::scrape::{
    SERVER_METRICS_CSV_FILE_NAME, SERVER_METRICS_FILE_NAME, SERVER_METRICS_PARQUET_FILE_NAME,
    Scrape, Scraper,
};
use crate::sink::{RecordSink, Sinks};
use crate::target::Target;
use outcome::judge;
use phase::{Dispatcher, Phase, run_phase, worker_count};
use record::Clock;
use speedbench_record::GPU_TELEMETRY_FILE_NAME;

/// Everything one profile run needs.
///
/// Built with [`ProfileRun::new`] and the `with_*` methods; the fields stay
/// readable.
#[non_exhaustive]
pub struct ProfileRun {
    /// Rows to send.
    pub dataset: Dataset,
    /// Server and request options.
    pub target: Target,
    /// Load shape.
    pub load: Load,
    /// Directory that receives `records.parquet` and `run.json`.
    pub output_dir: PathBuf,
    /// Identifier stamped on every record.
    pub run_id: String,
    /// Configuration to store in the manifest (must hold no secret).
    pub config: Value,
    /// Scrape these Prometheus endpoints during the run and write
    /// `server_metrics_export.json`; `None` disables it.
    pub server_metrics: Option<Scrape>,
    /// Scrape these DCGM exporters during the run, write
    /// `gpu_telemetry_export.json` and put the GPU figures in
    /// `summary.json` (see [`ProfileRun::with_gpu_telemetry`]).
    pub gpu_telemetry: Option<Scrape>,
    /// Replace the files of a run already in `output_dir`; without it such
    /// a directory is refused ([`speedbench_record::RecordError::RunDirOccupied`]).
    pub overwrite: bool,
    /// The run fails when a larger share of its profiled requests failed
    /// (0.0 to 1.0); `None` fails it only when no request succeeded.
    pub max_error_rate: Option<f64>,
    /// Which files the run keeps (see [`ProfileRun::with_export_level`]).
    pub export_level: ExportLevel,
    /// Write each request's HTTP trace to `http_trace.jsonl` (see
    /// [`ProfileRun::with_http_trace`]).
    pub export_http_trace: bool,
    /// The figures of `summary.json` beyond the records' own (see
    /// [`ProfileRun::with_figures`]).
    pub figures: FigureOptions,
    /// Where every record goes besides `records.parquet` (see
    /// [`ProfileRun::with_sink`]); behind a mutex only so the run's shared
    /// state stays `Sync` while sinks need only be `Send`.
    sinks: std::sync::Mutex<Vec<Box<dyn RecordSink>>>,
    /// Fill caller-defined columns (see [`ProfileRun::with_annotator`]);
    /// behind a mutex for the same reason as `sinks`.
    annotators: std::sync::Mutex<Vec<Box<dyn RecordAnnotator>>>,
    /// The process's open-file limit, when known
    /// ([`ProfileRun::with_open_file_limit`]).
    pub open_file_limit: Option<u64>,
}

/// Checks, before anything is sent, that a run of `dataset` under `load`
/// (a shard's share, for a shard) fits the open-file `limit` as
/// [`ProfileRun::with_open_file_limit`] will: for a caller that sends
/// something of its own first (a preflight request).
pub fn check_open_files(
    load: &Load,
    dataset: &speedbench_dataset::Dataset,
    limit: u64,
) -> Result<(), ClientError> {
    let (rows, mut load) = match load.shard {
        Some(shard) => {
            let (dataset, load) = shard.plan(dataset, load)?;
            (dataset.conversations.len(), load)
        }
        None => (dataset.conversations.len(), load.clone()),
    };
    // A check on a copy: the run's own fit says the cap it sets, once.
    fit_open_files(&mut load, rows, limit, false)
}

/// The warmup's closed-loop workers: its own concurrency, else the
/// run's (none when the warmup follows a request rate or sends nothing).
fn warmup_workers(load: &Load) -> usize {
    let concurrency = match (load.warmup_concurrency, load.request_rate) {
        (Some(c), _) => c,
        (None, None) => load.concurrency,
        (None, Some(_)) => return 0,
    };
    // A warmup by time alone keeps every worker busy until it ends.
    let count = (load.warmup_request_count > 0).then_some(load.warmup_request_count);
    match (count, load.warmup_sessions, load.warmup_duration) {
        (None, None, None) => 0,
        (count, sessions, _) => worker_count(concurrency, sessions, count),
    }
}

/// Checks that the requests `load` holds in flight fit the open-file
/// `limit` beside [`RESERVED_OPEN_FILES`]; an open-loop load without a cap
/// gets one. `rows` bounds a closed loop with neither a count nor a
/// duration (every row once).
fn fit_open_files(load: &mut Load, rows: usize, limit: u64, say: bool) -> Result<(), ClientError> {
    let allowed = limit.saturating_sub(RESERVED_OPEN_FILES);
    let in_flight = match (load.request_rate, load.max_concurrency) {
        (Some(_), Some(cap)) => cap as u64,
        (Some(_), None) => {
            if say {
                tracing::warn!(
                    "open-loop load without a concurrency cap: at most {allowed} requests in \
                     flight (the open-file limit is {limit})"
                );
            }
            load.max_concurrency = Some(usize::try_from(allowed.max(1)).unwrap_or(usize::MAX));
            return Ok(());
        }
        (None, _) => {
            let bounded = load.benchmark_duration.is_none() && load.request_count.is_none();
            let sessions = load.num_conversations.or((bounded).then_some(rows as u64));
            phase::worker_count(load.concurrency, sessions, load.request_count) as u64
        }
    };
    let in_flight = in_flight.max(warmup_workers(load) as u64);
    if in_flight > allowed {
        return Err(ClientError::OpenFileLimit {
            in_flight,
            needed: in_flight + RESERVED_OPEN_FILES,
            reserved: RESERVED_OPEN_FILES,
            limit,
            allowed,
        });
    }
    Ok(())
}

/// Open files a run keeps back from its requests' sockets: its records,
/// partial and raw files, the lock, `run.json` and `summary.json` written
/// at the end, the scrape's and control connections, the runtime's own
/// descriptors and stdio. A run that ran into the limit lost everything
/// when it could not close its records file.
pub const RESERVED_OPEN_FILES: u64 = 64;

impl ProfileRun {
    /// A run of `dataset` against `target` into `output_dir`: one pass at
    /// concurrency 1 ([`Load::default`]), a fresh [`new_run_id`], no
    /// server scrape, an occupied directory refused, failing only when no
    /// request succeeded.
    pub fn new(dataset: Dataset, target: Target, output_dir: impl Into<PathBuf>) -> ProfileRun {
        ProfileRun {
            dataset,
            target,
            load: Load::default(),
            output_dir: output_dir.into(),
            run_id: new_run_id(),
            config: Value::Object(Default::default()),
            server_metrics: None,
            gpu_telemetry: None,
            overwrite: false,
            max_error_rate: None,
            export_level: ExportLevel::default(),
            export_http_trace: false,
            figures: FigureOptions::default(),
            sinks: Default::default(),
            annotators: Default::default(),
            open_file_limit: None,
        }
    }

    /// The process's open-file limit (`RLIMIT_NOFILE`'s soft limit, once
    /// raised as far as it goes). Before the first request the run then
    /// refuses a load that would hold more requests in flight than fit
    /// beside [`RESERVED_OPEN_FILES`] ([`ClientError::OpenFileLimit`]), and
    /// an open-loop load without a concurrency cap is capped there.
    pub fn with_open_file_limit(mut self, limit: u64) -> Self {
        self.open_file_limit = Some(limit);
        self
    }

    /// Sets the load shape.
    pub fn with_load(mut self, load: Load) -> Self {
        self.load = load;
        self
    }

    /// Sets the run identifier stamped on every record.
    pub fn with_run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = run_id.into();
        self
    }

    /// Sets the configuration stored in the manifest (it must hold no secret).
    pub fn with_config(mut self, config: Value) -> Self {
        self.config = config;
        self
    }

    /// Scrapes Prometheus endpoints during the run.
    pub fn with_server_metrics(mut self, scrape: Scrape) -> Self {
        self.server_metrics = Some(scrape);
        self
    }

    /// Scrapes NVIDIA DCGM exporters (`http://gpu-host:9400/metrics`)
    /// during the run like the server's metrics, with no wait after it:
    /// their export goes to `gpu_telemetry_export.json`, and each GPU's
    /// power, utilisation, memory and energy, with the energy per output
    /// token, to `summary.json` ([`speedbench_scrape::GpuTelemetry`]).
    pub fn with_gpu_telemetry(mut self, scrape: Scrape) -> Self {
        self.gpu_telemetry = Some(scrape);
        self
    }

    /// Replaces a run already in the output directory instead of refusing it.
    pub fn with_overwrite(mut self, overwrite: bool) -> Self {
        self.overwrite = overwrite;
        self
    }

    /// Fails the run when more than `rate` (0.0 to 1.0) of its requests failed.
    pub fn with_max_error_rate(mut self, rate: f64) -> Self {
        self.max_error_rate = Some(rate);
        self
    }

    /// Sets which files the run keeps, as AIPerf's `--export-level` does:
    /// [`ExportLevel::Summary`] removes `records.parquet` once
    /// `summary.json` is written, [`ExportLevel::Records`] (the default)
    /// keeps it, [`ExportLevel::Raw`] also writes every response body,
    /// scrubbed of the target's credentials, to `raw_responses.jsonl` (one
    /// [`crate::RawResponse`] per line, written as requests finish). The
    /// level is stored in `run.json` as `config.export_level`.
    pub fn with_export_level(mut self, level: ExportLevel) -> Self {
        self.export_level = level;
        self
    }

    /// Writes each request's HTTP trace, as AIPerf's `--export-http-trace`
    /// does: one [`crate::HttpTraceLine`] per request the lean HTTP/1.1
    /// client carried as far as a response head, in `http_trace.jsonl`
    /// (written as requests finish): its connection's phases and addresses,
    /// the moments of its send and receive on the wall clock, the
    /// response's headers (scrubbed of the target's credentials) and each
    /// body read. `run.json` stores it as `config.export_http_trace`.
    pub fn with_http_trace(mut self, on: bool) -> Self {
        self.export_http_trace = on;
        self
    }

    /// Adds the figures `options` asks for to `summary.json` and the
    /// read-back statistics: goodput against SLOs, the steady state, time
    /// slices ([`speedbench_metrics::RunMetrics::with_figures`]).
    pub fn with_figures(mut self, options: FigureOptions) -> Self {
        self.figures = options;
        self
    }

    /// Sends every record to `sink` too (see [`RecordSink`]).
    pub fn with_sink(mut self, sink: impl RecordSink + 'static) -> Self {
        self.sinks_mut().push(Box::new(sink));
        self
    }

    /// Adds `annotator`'s custom columns to `records.parquet` and lets it
    /// fill them in every record (see [`RecordAnnotator`]); the sinks get
    /// the annotated records.
    pub fn with_annotator(mut self, annotator: impl RecordAnnotator + 'static) -> Self {
        self.annotators
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Box::new(annotator));
        self
    }

    fn sinks_mut(&mut self) -> &mut Vec<Box<dyn RecordSink>> {
        self.sinks
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl std::fmt::Debug for ProfileRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sinks: Vec<String> = match self.sinks.lock() {
            Ok(sinks) => sinks.iter().map(|s| s.name()).collect(),
            Err(_) => vec!["(poisoned)".into()],
        };
        f.debug_struct("ProfileRun")
            .field("dataset", &self.dataset.name)
            .field("target", &self.target)
            .field("load", &self.load)
            .field("output_dir", &self.output_dir)
            .field("run_id", &self.run_id)
            .field("config", &self.config)
            .field("server_metrics", &self.server_metrics)
            .field("overwrite", &self.overwrite)
            .field("max_error_rate", &self.max_error_rate)
            .field("export_level", &self.export_level)
            .field("export_http_trace", &self.export_http_trace)
            .field("sinks", &sinks)
            .finish()
    }
}

/// A run identifier unique on this host: `run-<unix seconds>-<nanos ^ pid>`,
/// both in hex.
pub fn new_run_id() -> String {
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

/// What every task of a run shares.
struct Shared {
    run: ProfileRun,
    /// One client per server ([`Target::urls`], in order).
    clients: Vec<HttpClient>,
    clock: Clock,
    stop: StopHandle,
    progress: Arc<Progress>,
    request_index: AtomicU64,
    sink: std::sync::mpsc::Sender<RecorderMsg>,
    sink_broken: AtomicBool,
    /// Each dataset turn's prompt hash, once it was sent.
    prompt_hashes: record::PromptHashes,
    /// Each conversation's first-turn request body, once it was sent.
    first_turn_bodies: bodies::FirstTurnBodies,
}

impl Shared {
    /// Which server a conversation goes to, with several: its session's
    /// turn (round robin, AIPerf's `--url-strategy round_robin`); `None`
    /// with one.
    fn server_of(&self, conv: record::DatasetRow<'_>) -> Option<usize> {
        let n = self.clients.len();
        (n > 1).then(|| (conv.session % n as u64) as usize)
    }

    /// The client of a conversation's server.
    fn client_of(&self, conv: record::DatasetRow<'_>) -> &HttpClient {
        &self.clients[self.server_of(conv).unwrap_or(0)]
    }
}

pub(crate) fn planned_requests(dataset: &Dataset, load: &Load) -> (Option<u64>, u64) {
    let n = dataset.conversations.len() as u64;
    let turns_of = |sessions: u64| -> u64 {
        (0..sessions)
            .map(|s| record::DatasetRow::of_session(dataset, load, s).turns.len() as u64)
            .sum()
    };
    match (load.num_conversations, load.request_count) {
        (Some(c), Some(r)) => (Some(c), turns_of(c).min(r)),
        (Some(c), None) => (Some(c), turns_of(c)),
        (None, Some(r)) => (None, r),
        // A duration alone recycles the dataset until time is up.
        (None, None) if load.benchmark_duration.is_some() => (None, 0),
        (None, None) => (Some(n), turns_of(n)),
    }
}

/// Runs a whole profile: warmup, then the measured phase, recording every
/// request to `output_dir/records.parquet`.
///
/// The run holds an exclusive lock on `output_dir` for its whole life and
/// refuses a directory that already holds a run unless
/// [`ProfileRun::overwrite`] is set. Records go to
/// `records.parquet.partial` while the run lasts (a row group at least once
/// a second) and are renamed to `records.parquet` once the file is closed.
///
/// Returns when every planned request finished, the benchmark duration (plus
/// grace period) ran out, `stop` was triggered, or a file could not be
/// written; in every case the records file is closed and readable with every
/// record that reached the disk, and `run.json` and `summary.json` say how
/// the run ended ([`RunOutcome::status`]). Requests that fail are recorded
/// with their error kind; they never abort the run. An `Err` means the run
/// could not start (nothing was sent).
pub async fn run_profile(
    run: ProfileRun,
    stop: StopHandle,
    progress: Arc<Progress>,
) -> Result<RunOutcome, ClientError> {
    let (run, shard_info) = plan_run(run)?;
    let mut opened = open_run(run, shard_info, stop.clone(), progress)?;
    let schedule = run_phases(&mut opened, &stop).await;
    close_run(opened, schedule, &stop).await
}

/// A fixed schedule's rows: each with a timestamp, in time order, each
/// sent once (no more conversations than rows, no request count cutting a
/// trace short by surprise).
fn check_trace(dataset: &Dataset, load: &Load) -> Result<(), ClientError> {
    let bad = |m: String| Err(ClientError::InvalidLoad(m));
    let mut last = 0;
    for c in &dataset.conversations {
        let Some(t) = c.timestamp_us else {
            return bad(format!(
                "a fixed schedule replays each row at its timestamp: row {:?} has none",
                c.id
            ));
        };
        if t < last {
            return bad(format!(
                "a fixed schedule's rows must be in time order: row {:?} ({} ms) comes after a later one",
                c.id,
                t as f64 / 1e3
            ));
        }
        last = t;
    }
    let rows = dataset.conversations.len() as u64;
    if load.num_conversations.is_some_and(|n| n > rows) {
        return bad(format!(
            "a fixed schedule sends each of its {rows} rows once: it cannot run {} conversations",
            load.num_conversations.unwrap_or_default()
        ));
    }
    Ok(())
}

/// Checks the run and takes its part: a shard runs its own rows, counts
/// and concurrency under its own run id within the group the caller's id
/// names; the load is fitted to the open-file limit.
fn plan_run(run: ProfileRun) -> Result<(ProfileRun, Option<RunShard>), ClientError> {
    if run.dataset.conversations.is_empty() {
        return Err(ClientError::EmptyDataset(run.dataset.name.clone()));
    }
    if let Some(row) = run
        .dataset
        .conversations
        .iter()
        .find(|c| c.turns.is_empty())
    {
        let why = match &row.prompt_to_build {
            Some(p) => format!(
                "asks for a prompt of {} tokens that was never built \
                 (speedbench_client::synthetic::TracePrompts builds it)",
                p.tokens
            ),
            None => "has no turn to send".into(),
        };
        return Err(ClientError::Synthesis(format!("row {}: {why}", row.id)));
    }
    run.load.validate()?;
    if run.load.fixed_schedule.is_some() {
        check_trace(&run.dataset, &run.load)?;
    }
    if let Some(rate) = run.max_error_rate
        && !(0.0..=1.0).contains(&rate)
    {
        return Err(ClientError::InvalidLoad(format!(
            "the maximum error rate must be between 0 and 1, got {rate}"
        )));
    }
    let mut run = run;
    let mut shard_info = None;
    if let Some(shard) = run.load.shard {
        let dataset_sha256 = Some(record::dataset_sha256(&run.dataset));
        let (dataset, load) = shard.plan(&run.dataset, &run.load)?;
        load.validate()?;
        run.dataset = dataset;
        run.load = load;
        let group = std::mem::take(&mut run.run_id);
        run.run_id = shard.run_id(&group);
        shard_info = Some(RunShard {
            group,
            index: shard.index(),
            count: shard.count(),
            dataset_sha256,
        });
    }
    if let Some(limit) = run.open_file_limit {
        fit_open_files(&mut run.load, run.dataset.conversations.len(), limit, true)?;
    }
    Ok((run, shard_info))
}

/// A run whose directory is locked and whose files are open, with its
/// client, scraper and workers' shared state ready.
struct OpenedRun {
    shared: Arc<Shared>,
    scrapers: Scrapers,
    recorder: Recorder,
    manifest: RunManifest,
    /// Held until every file is written.
    lock: RunDirLock,
    paths: RunPaths,
    sessions: Option<u64>,
}

/// The server's scrape and the DCGM exporters'.
struct Scrapers {
    server: Option<Scraper>,
    gpu: Option<Scraper>,
}

impl Scrapers {
    /// Those that run.
    fn iter(&self) -> impl Iterator<Item = &Scraper> {
        self.server.iter().chain(&self.gpu)
    }
}

/// Where a run's files go.
struct RunPaths {
    partial: PathBuf,
    manifest: PathBuf,
    raw: PathBuf,
    http_trace: PathBuf,
}

impl RunPaths {
    fn of(dir: &Path) -> RunPaths {
        RunPaths {
            partial: dir.join(PARTIAL_RECORDS_FILE_NAME),
            manifest: dir.join(RunManifest::FILE_NAME),
            raw: dir.join(RAW_RESPONSES_FILE_NAME),
            http_trace: dir.join(HTTP_TRACE_FILE_NAME),
        }
    }

    /// The raw responses' and the HTTP traces' files, each where `run`
    /// asks for it.
    fn export_writers(&self, run: &ProfileRun) -> Result<ExportWriters, ClientError> {
        Ok(ExportWriters {
            raw: (run.export_level.keeps_raw_responses())
                .then(|| JsonLinesWriter::create(&self.raw, "raw responses"))
                .transpose()?,
            http_trace: (run.export_http_trace)
                .then(|| JsonLinesWriter::create(&self.http_trace, "HTTP traces"))
                .transpose()?,
        })
    }
}

/// Locks the run directory, writes `run.json` (outcome `running`), opens
/// the records (and raw responses), and starts the HTTP client and the
/// scraper.
fn open_run(
    mut run: ProfileRun,
    shard_info: Option<RunShard>,
    stop: StopHandle,
    progress: Arc<Progress>,
) -> Result<OpenedRun, ClientError> {
    let sinks = Sinks::new(std::mem::take(run.sinks_mut()));
    let annotators = std::mem::take(
        run.annotators
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    let lock = RunDirLock::acquire(&run.output_dir, run.overwrite)?;
    let paths = RunPaths::of(&run.output_dir);
    let clock = Clock::now();
    let manifest = first_manifest(&run, &clock, shard_info);
    write_json(&paths.manifest, &manifest)?;
    let exports = paths.export_writers(&run)?;
    let recorder = Recorder::start(&paths.partial, manifest.clone(), sinks, annotators, exports)?;
    let (sessions, planned) = planned_requests(&run.dataset, &run.load);
    let pool = connection_pool(&run.load, sessions);
    let capture = (
        run.export_level.keeps_raw_responses(),
        run.export_http_trace,
    );
    let clients = server_clients(&run.target, pool, capture)?;
    let scrapers = Scrapers {
        server: start_scraper(&run.server_metrics)?,
        gpu: start_scraper(&run.gpu_telemetry)?,
    };
    progress.planned.store(planned, Ordering::Relaxed);
    let shared = Arc::new(Shared {
        clients,
        clock,
        stop,
        progress,
        request_index: AtomicU64::new(0),
        sink: recorder.tx.clone(),
        sink_broken: AtomicBool::new(false),
        prompt_hashes: record::PromptHashes::new(&run.dataset),
        first_turn_bodies: bodies::FirstTurnBodies::new(&run.dataset),
        run,
    });
    Ok(OpenedRun {
        shared,
        scrapers,
        recorder,
        manifest,
        lock,
        paths,
        sessions,
    })
}

/// One client per server of `target`, each holding up to `pool`
/// connections, keeping each response's body and its HTTP trace detail as
/// `(raw, http_trace)` ask.
fn server_clients(
    target: &Target,
    pool: usize,
    (raw, http_trace): (bool, bool),
) -> Result<Vec<HttpClient>, ClientError> {
    (0..target.urls().count())
        .map(|i| {
            HttpClient::new(&target.for_server(i), pool)
                .and_then(|c| c.with_raw_capture(raw).with_http_trace(http_trace))
        })
        .collect()
}

/// A scraper of `scrape`'s endpoints, started; none without endpoints.
fn start_scraper(scrape: &Option<Scrape>) -> Result<Option<Scraper>, ClientError> {
    scrape
        .clone()
        .filter(|c| !c.endpoints.is_empty())
        .map(Scraper::start)
        .transpose()
}

/// Connections the client keeps: one per request the load may hold in
/// flight (an open loop's cap, else its workers), the warmup's included.
fn connection_pool(load: &Load, sessions: Option<u64>) -> usize {
    match load.request_rate {
        Some(_) => load.max_concurrency.unwrap_or(1024),
        None => worker_count(load.concurrency, sessions, load.request_count),
    }
    .max(warmup_workers(load))
}

/// `run.json` as the run starts: outcome `running`, the export level in
/// its config.
fn first_manifest(run: &ProfileRun, clock: &Clock, shard: Option<RunShard>) -> RunManifest {
    let mut manifest = RunManifest {
        run_id: run.run_id.clone(),
        schema_version: speedbench_record::SCHEMA_VERSION.into(),
        tool: format!("speedbench {}", env!("CARGO_PKG_VERSION")),
        server_url: redact_url(&run.target.base_url.to_string()),
        model: run.target.model.clone(),
        dataset: run.dataset.name.clone(),
        started_unix_ns: clock.unix_ns,
        ended_unix_ns: 0,
        status: RunStatus::Running,
        record_count: 0,
        config: run.config.clone(),
        shard,
        start: None,
    };
    if let Value::Object(config) = &mut manifest.config {
        config.insert("export_level".into(), run.export_level.as_str().into());
        if run.export_http_trace {
            config.insert("export_http_trace".into(), true.into());
        }
    }
    manifest
}

/// The warmup, the wait for a shared start, and the measured phase (none
/// of it after a stop). Returns the arrival schedule's lateness; the
/// measured start goes into the manifest.
async fn run_phases(opened: &mut OpenedRun, stop: &StopHandle) -> Option<ScheduleStats> {
    let shared = opened.shared.clone();
    let shared = &shared;
    let load = &shared.run.load;
    let warmup_count = (load.warmup_request_count > 0).then_some(load.warmup_request_count);
    if warmup_count.is_some() || load.warmup_sessions.is_some() || load.warmup_duration.is_some() {
        let deadline = load.warmup_duration.map(|d| Instant::now() + d);
        let warmup = Phase {
            dispatcher: Dispatcher::new(load.warmup_sessions, warmup_count, deadline),
            warmup: true,
            closed_loop_at: load.warmup_concurrency,
            grace_period: load.warmup_grace_period,
            prefill: (load.warmup_prefill.or(load.prefill))
                .map(|p| prefill::PrefillGate::new(p.limit, p.ramp)),
            cancel: StopHandle::new(),
            users: match load.warmup_concurrency {
                Some(_) => None,
                None => load.warmup_user_centric.or(load.user_centric),
            },
        };
        run_phase(shared, Arc::new(warmup)).await;
    }
    opened.manifest.start = wait_for_start(shared, stop).await;
    if stop.is_stopped() {
        return None;
    }
    for s in opened.scrapers.iter() {
        s.mark_profiling_start().await;
    }
    let deadline = shared
        .run
        .load
        .benchmark_duration
        .map(|d| Instant::now() + d);
    let profile = Phase {
        dispatcher: Dispatcher::new(opened.sessions, shared.run.load.request_count, deadline),
        warmup: false,
        closed_loop_at: None,
        grace_period: Some(shared.run.load.grace_period),
        prefill: (shared.run.load.prefill).map(|p| prefill::PrefillGate::new(p.limit, p.ramp)),
        cancel: StopHandle::new(),
        users: shared.run.load.user_centric,
    };
    let schedule = ScheduleStats::from_lateness(run_phase(shared, Arc::new(profile)).await);
    for s in opened.scrapers.iter() {
        s.mark_profiling_end();
    }
    schedule
}

/// After the last request: the scrape's export, the run judged, the
/// records closed and renamed, `summary.json` and the final `run.json`
/// written (every promised file, or a message naming the one missing).
async fn close_run(
    opened: OpenedRun,
    schedule: Option<ScheduleStats>,
    stop: &StopHandle,
) -> Result<RunOutcome, ClientError> {
    let OpenedRun {
        shared,
        scrapers,
        recorder,
        mut manifest,
        lock,
        paths,
        ..
    } = opened;
    // A broken records file stops the run through `stop` too; it is a
    // failure, not an interruption.
    let interrupted = stop.is_stopped() && !shared.sink_broken.load(Ordering::Relaxed);
    let mut errors = Vec::new();
    let output_dir = &shared.run.output_dir;
    let (server_metrics_path, gpu) =
        write_scrapes(scrapers, interrupted, output_dir, &mut errors).await;
    let requests = shared.progress.tally();
    let produced = shared.progress.produced.load(Ordering::Relaxed);
    let max_error_rate = shared.run.max_error_rate;
    manifest.ended_unix_ns = shared.clock.unix_ns(Instant::now());
    let judged = |errors: &[String]| judge(interrupted, &requests, max_error_rate, errors);
    manifest.status = judged(&errors).0;
    let shared = Arc::try_unwrap(shared).unwrap_or_else(|_| unreachable!("all workers joined"));
    drop(shared.sink);
    let (level, http_trace) = (shared.run.export_level, shared.run.export_http_trace);
    let gpu_export = gpu.as_ref().map(|(_, export)| export);
    let ran = (&shared.run, gpu_export, schedule);
    let files = close_files(recorder, &mut manifest, &paths, ran, &judged, &mut errors);
    drop(lock);
    Ok(RunOutcome {
        records_path: files.records_path,
        manifest_path: paths.manifest,
        summary_path: files.summary_path,
        read_back: files.read_back,
        record_count: files.rows,
        unsaved: produced.saturating_sub(files.rows),
        status: judged(&errors).0,
        failure: judged(&errors).1,
        requests,
        write_errors: errors,
        schedule,
        server_metrics_path,
        gpu_telemetry_path: gpu.map(|(path, _)| path),
        gpu_telemetry: files.gpu_telemetry,
        export_level: level,
        records_removed: files.records_removed,
        raw_responses_path: level.keeps_raw_responses().then_some(paths.raw),
        http_trace_path: http_trace.then_some(paths.http_trace),
        start: manifest.start,
    })
}

/// What a run's files came to once closed.
struct ClosedFiles {
    records_path: PathBuf,
    summary_path: Option<PathBuf>,
    /// The GPU figures of `summary.json`.
    gpu_telemetry: Option<speedbench_scrape::GpuTelemetry>,
    read_back: Option<ReadBack>,
    /// Records the file holds.
    rows: u64,
    /// `--export-level summary`: the records file went once the summary
    /// held their statistics.
    records_removed: bool,
}

/// Closes the records file (salvaging what it can) and keeps it under its
/// name, writes `summary.json` and the final `run.json`, and at the
/// summary level removes the records: each step's failure named in
/// `write_errors`, the run judged again after each (every promised file,
/// or a message naming the one missing).
fn close_files(
    recorder: Recorder,
    manifest: &mut RunManifest,
    paths: &RunPaths,
    (run, gpu, schedule): (
        &ProfileRun,
        Option<&ServerMetricsExport>,
        Option<ScheduleStats>,
    ),
    judged: &dyn Fn(&[String]) -> outcome::Verdict,
    write_errors: &mut Vec<String>,
) -> ClosedFiles {
    let (output_dir, level) = (run.output_dir.as_path(), run.export_level);
    let (closed, sink_errors) = recorder.finish(manifest.clone());
    if let Some(e) = &closed.error {
        // The records file failed first: it is what the run is for.
        write_errors.insert(0, format!("{e} ({})", records_kept(&closed)));
    }
    // A sink the caller asked for lost records: the run is not complete.
    write_errors.extend(sink_errors);
    let records_path = keep_records(closed.readable, &paths.partial, output_dir, write_errors);
    let outcome_now = judged(write_errors).0;
    let inputs = SummaryInputs {
        output_dir,
        figures: &run.figures,
        gpu,
        schedule,
    };
    let (summary_path, mut read_back, gpu_telemetry) = write_summary(
        closed.readable,
        &records_path,
        inputs,
        outcome_now,
        write_errors,
    );
    manifest.status = judged(write_errors).0;
    manifest.record_count = closed.rows;
    if let Err(e) = write_json(&paths.manifest, &*manifest) {
        write_errors.push(e.to_string());
    }
    // At the summary level the records go once summary.json holds their
    // statistics; without a summary they are all the run has, and stay.
    let records_removed = !level.keeps_records()
        && summary_path.is_some()
        && remove_records(&records_path, write_errors);
    if records_removed {
        // The level asked for statistics only: the records go from memory too.
        read_back = None;
    }
    ClosedFiles {
        records_path,
        summary_path,
        gpu_telemetry,
        read_back,
        rows: closed.rows,
        records_removed,
    }
}

/// Removes the records file (`--export-level summary`); false, with the
/// error among the run's write errors, when it cannot be.
fn remove_records(records_path: &Path, write_errors: &mut Vec<String>) -> bool {
    match std::fs::remove_file(records_path) {
        Ok(()) => true,
        Err(e) => {
            write_errors.push(format!(
                "{}: cannot remove (--export-level summary): {e}",
                records_path.display()
            ));
            false
        }
    }
}

/// Both scrapes' exports written: the server's (waiting for late counters
/// unless interrupted: the user wants out) and the GPUs' (no wait: their
/// counters are live); the server's path, and the GPUs' with the export.
async fn write_scrapes(
    Scrapers { server, gpu }: Scrapers,
    interrupted: bool,
    output_dir: &Path,
    errors: &mut Vec<String>,
) -> (Option<PathBuf>, Option<(PathBuf, ServerMetricsExport)>) {
    let server_path = match server {
        Some(s) => {
            let path = output_dir.join(SERVER_METRICS_FILE_NAME);
            let written = write_scrape(s, !interrupted, path, errors).await;
            written.map(|(path, _)| path)
        }
        None => None,
    };
    let gpu = match gpu {
        Some(s) => write_scrape(s, false, output_dir.join(GPU_TELEMETRY_FILE_NAME), errors).await,
        None => None,
    };
    (server_path, gpu)
}

/// A scrape's export written to `path` once the scrape finished (waiting
/// for late counters with `wait`); the path and the export, or the error
/// among the run's write errors.
async fn write_scrape(
    s: Scraper,
    wait: bool,
    path: PathBuf,
    write_errors: &mut Vec<String>,
) -> Option<(PathBuf, ServerMetricsExport)> {
    let csv = s.writes_csv();
    let (export, raw) = s.finish_keeping_samples(wait).await;
    if csv {
        let csv_path = path.with_file_name(SERVER_METRICS_CSV_FILE_NAME);
        if let Err(e) = write_atomically(&csv_path, export.to_csv().as_bytes()) {
            write_errors.push(e.to_string());
        }
    }
    if let Some(raw) = raw {
        let parquet_path = path.with_file_name(SERVER_METRICS_PARQUET_FILE_NAME);
        if let Err(e) = raw.write_parquet(&parquet_path) {
            write_errors.push(e.to_string());
        }
    }
    match write_json(&path, &export) {
        Ok(()) => Some((path, export)),
        Err(e) => {
            write_errors.push(e.to_string());
            None
        }
    }
}

/// What became of the records written before the records file failed.
fn records_kept(closed: &speedbench_record::ClosedRecords) -> String {
    let journal = closed.journal_rows.map_or(String::new(), |rows| {
        format!(
            "; the crash journal ({JOURNAL_FILE_NAME}) beside it holds all {rows} flushed \
             records: once there is room, `speedbench recover` on the run's directory makes \
             them its records"
        )
    });
    if closed.readable {
        return format!(
            "the {} records written before it are kept{journal}",
            closed.rows
        );
    }
    let why = closed
        .close_error
        .as_ref()
        .map_or(String::new(), |e| format!(": {e}"));
    format!("the records file could not be closed and cannot be read{why}{journal}")
}

/// A readable records file renamed from `.partial` to its final name; the
/// path the records are at.
fn keep_records(
    readable: bool,
    partial: &Path,
    output_dir: &Path,
    write_errors: &mut Vec<String>,
) -> PathBuf {
    if !readable {
        return partial.to_path_buf();
    }
    let records_path = output_dir.join(RECORDS_FILE_NAME);
    match std::fs::rename(partial, &records_path) {
        Ok(()) => records_path,
        Err(e) => {
            write_errors.push(format!(
                "{}: cannot rename to {RECORDS_FILE_NAME}: {e}",
                partial.display()
            ));
            partial.to_path_buf()
        }
    }
}

/// Waits for the run's start barrier, if it has one; when it opened and
/// when the measured phase began.
async fn wait_for_start(shared: &Shared, stop: &StopHandle) -> Option<MeasuredStart> {
    let barrier = shared.run.load.start_barrier.clone()?;
    if stop.is_stopped() {
        return None;
    }
    shared.progress.set_waiting_for_start(true);
    let start = tokio::select! {
        planned = barrier.wait() => {
            let measured = shared.clock.unix_ns(Instant::now());
            Some(MeasuredStart {
                barrier: barrier.describe(),
                planned_unix_ns: planned,
                measured_unix_ns: measured,
                offset_ns: measured - planned,
            })
        }
        _ = stop.stopped() => None,
    };
    shared.progress.set_waiting_for_start(false);
    start
}

/// `summary.json` written from the closed records file (when it is
/// `readable`), read in passes; what was read back, or each failure among
/// the run's write errors.
fn write_summary(
    readable: bool,
    records_path: &Path,
    inputs: SummaryInputs<'_>,
    outcome: RunStatus,
    write_errors: &mut Vec<String>,
) -> (Option<PathBuf>, Option<ReadBack>, Option<GpuTelemetry>) {
    if !readable {
        return (None, None, None);
    }
    let (read_back, output_tokens) = match read_back::read_back(records_path, inputs.figures) {
        Ok(read) => read,
        Err(e) => {
            write_errors.push(format!(
                "{SUMMARY_FILE_NAME} not written: reading the records back failed: {e}"
            ));
            return (None, None, None);
        }
    };
    let summary = RunSummary {
        status: outcome,
        metrics: read_back.metrics.clone(),
        gpu_telemetry: inputs
            .gpu
            .and_then(|e| GpuTelemetry::from_export(e, output_tokens)),
        schedule: inputs.schedule,
    };
    let path = inputs.output_dir.join(SUMMARY_FILE_NAME);
    let written = match write_json(&path, &summary) {
        Ok(()) => Some(path),
        Err(e) => {
            write_errors.push(e.to_string());
            None
        }
    };
    (written, Some(read_back), summary.gpu_telemetry)
}

/// What `summary.json` is computed from besides the records.
struct SummaryInputs<'a> {
    output_dir: &'a Path,
    /// The figures asked for ([`ProfileRun::with_figures`]).
    figures: &'a FigureOptions,
    /// The DCGM exporters' scrape, for the GPU figures.
    gpu: Option<&'a ServerMetricsExport>,
    /// How late the arrival schedule's sends were.
    schedule: Option<ScheduleStats>,
}

/// Writes `value` as pretty JSON through a temporary file and a rename, so
/// readers never see a half-written file; the temporary file never stays.
fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), ClientError> {
    let json = serde_json::to_vec_pretty(value).map_err(|e| ClientError::Io {
        path: path.to_path_buf(),
        source: e.into(),
    })?;
    write_atomically(path, &json)
}

/// `bytes` written to a temporary file beside `path`, then renamed over
/// it: a reader never sees half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ClientError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(|source| ClientError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use speedbench_dataset::Conversation;

    use super::*;

    fn dataset(turns: &[usize]) -> Dataset {
        Dataset {
            name: "d".into(),
            conversations: turns
                .iter()
                .enumerate()
                .map(|(i, &n)| Conversation {
                    id: i.to_string(),
                    category: None,
                    preamble: vec![],
                    turns: vec!["t".into(); n],
                    ..Default::default()
                })
                .collect(),
        }
    }

    #[test]
    fn planned_requests_follow_the_sizing_options() {
        let d = dataset(&[2, 1, 3]);
        let load = |c, r| Load {
            num_conversations: c,
            request_count: r,
            ..Default::default()
        };
        assert_eq!(planned_requests(&d, &load(None, None)), (Some(3), 6));
        // Five conversations recycle the three rows: 2+1+3+2+1.
        assert_eq!(planned_requests(&d, &load(Some(5), None)), (Some(5), 9));
        assert_eq!(planned_requests(&d, &load(Some(5), Some(4))), (Some(5), 4));
        assert_eq!(planned_requests(&d, &load(None, Some(100))), (None, 100));
        let timed = Load {
            benchmark_duration: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        assert_eq!(planned_requests(&d, &timed), (None, 0));
    }
}
