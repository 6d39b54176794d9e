//! The load generator: conversations in, records out.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use speedbench_dataset::{Conversation, Dataset, Message};
use speedbench_metrics::RunMetrics;
use speedbench_record::{
    ErrorKind, PARTIAL_RECORDS_FILE_NAME, RECORDS_FILE_NAME, RequestRecord, RunDirLock,
    RunManifest, SUMMARY_FILE_NAME, outcome, read_records_file, redact_url,
};
use tokio::sync::watch;

use crate::error::ClientError;
use crate::exchange::{Exchange, HttpClient};
use crate::recorder::{Recorder, RecorderMsg};
use crate::schedule::{Arrival, ArrivalSchedule};
use crate::scrape::{SERVER_METRICS_FILE_NAME, ScrapeConfig, Scraper};
use crate::target::Target;

/// How much load to apply and for how long.
///
/// Two shapes: *fixed concurrency* (closed loop; the default), where
/// `concurrency` workers each run one conversation at a time, and *request
/// rate* (open loop, when [`LoadConfig::request_rate`] is set), where
/// conversations start on an [`ArrivalSchedule`] whatever the server's
/// speed, optionally capped by [`LoadConfig::max_concurrency`]. In both, a
/// conversation's turns run in order, each after the previous reply.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// Fixed-concurrency mode: requests in flight at once (each worker runs
    /// one conversation at a time). Unused in request-rate mode.
    pub concurrency: usize,
    /// Request-rate mode: conversation starts per second (for single-turn
    /// data, requests per second), as AIPerf's `--request-rate`.
    pub request_rate: Option<f64>,
    /// How arrivals are spaced in request-rate mode.
    pub arrival: Arrival,
    /// Seed of the arrival schedule (Poisson gaps).
    pub random_seed: u64,
    /// Request-rate mode: at most this many conversations in flight; an
    /// arrival that finds them all busy waits (and counts as late).
    pub max_concurrency: Option<usize>,
    /// Stop dispatching new requests this long after the profiling phase
    /// starts; in-flight requests may finish within `grace_period`. Without
    /// a request or conversation count, conversations recycle until then.
    pub benchmark_duration: Option<Duration>,
    /// After `benchmark_duration`, how long in-flight requests may still run
    /// before they are cancelled (recorded as cancelled).
    pub grace_period: Duration,
    /// Stop after this many profiled requests (turns), recycling
    /// conversations if the dataset is shorter.
    pub request_count: Option<u64>,
    /// Run exactly this many conversations, every turn of each, recycling
    /// the dataset if needed.
    pub num_conversations: Option<u64>,
    /// Requests sent first and recorded with `warmup = true` (in the same
    /// load shape, without the duration limit).
    pub warmup_request_count: u64,
}

impl Default for LoadConfig {
    /// One pass over the dataset at concurrency 1, no warmup, no duration
    /// limit, a 30 s grace period (AIPerf's default) and seed 0.
    fn default() -> Self {
        LoadConfig {
            concurrency: 1,
            request_rate: None,
            arrival: Arrival::default(),
            random_seed: 0,
            max_concurrency: None,
            benchmark_duration: None,
            grace_period: Duration::from_secs(30),
            request_count: None,
            num_conversations: None,
            warmup_request_count: 0,
        }
    }
}

impl LoadConfig {
    fn validate(&self) -> Result<(), ClientError> {
        let bad = |m: &str| Err(ClientError::InvalidLoad(m.into()));
        match self.request_rate {
            Some(r) if !(r.is_finite() && r > 0.0) => {
                return bad("the request rate must be a positive number");
            }
            None if self.concurrency == 0 => return bad("concurrency must be at least 1"),
            None if self.max_concurrency.is_some() => {
                return bad("a maximum concurrency needs a request rate");
            }
            _ => {}
        }
        if self.max_concurrency == Some(0) {
            return bad("the maximum concurrency must be at least 1");
        }
        if self.request_count == Some(0) || self.num_conversations == Some(0) {
            return bad("request and conversation counts must be at least 1");
        }
        if self.benchmark_duration == Some(Duration::ZERO) {
            return bad("the benchmark duration must be positive");
        }
        Ok(())
    }
}

/// How far behind its schedule the request-rate dispatcher ran.
///
/// Lateness is the time from an arrival's scheduled start to the moment its
/// first request was handed to the HTTP client, including any wait for a
/// free slot under [`LoadConfig::max_concurrency`] (vLLM's client queue time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScheduleStats {
    /// Conversations started on the schedule.
    pub arrivals: u64,
    /// Median lateness, nanoseconds.
    pub lateness_p50_ns: u64,
    /// 99th-percentile lateness, nanoseconds.
    pub lateness_p99_ns: u64,
    /// Largest lateness, nanoseconds.
    pub lateness_max_ns: u64,
}

impl ScheduleStats {
    fn from_lateness(mut ns: Vec<u64>) -> Option<ScheduleStats> {
        if ns.is_empty() {
            return None;
        }
        ns.sort_unstable();
        let at = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize];
        Some(ScheduleStats {
            arrivals: ns.len() as u64,
            lateness_p50_ns: at(0.5),
            lateness_p99_ns: at(0.99),
            lateness_max_ns: ns[ns.len() - 1],
        })
    }
}

/// Live counters of a run, for progress displays.
#[derive(Debug, Default)]
pub struct Progress {
    planned: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    skipped: AtomicU64,
    warmup_done: AtomicU64,
    /// Records handed to the recorder, warmup and skipped turns included.
    produced: AtomicU64,
    last_finished: std::sync::Mutex<Option<Instant>>,
}

impl Progress {
    /// Profiled requests the run plans to send (0 until known).
    pub fn planned(&self) -> u64 {
        self.planned.load(Ordering::Relaxed)
    }
    /// Profiled requests finished, successful or not.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }
    /// Profiled requests that failed.
    pub fn failed(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
    /// Profiled turns not sent because an earlier turn of their
    /// conversation failed.
    pub fn skipped(&self) -> u64 {
        self.skipped.load(Ordering::Relaxed)
    }
    /// Warmup requests finished.
    pub fn warmup_done(&self) -> u64 {
        self.warmup_done.load(Ordering::Relaxed)
    }
    /// When the latest request (warmup or profiled) finished: a rate over
    /// the run ends here, not after the server-metrics shutdown delay.
    pub fn last_finished(&self) -> Option<Instant> {
        *self
            .last_finished
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn finished_one(&self, warmup: bool, failed: bool) {
        let counter = if warmup {
            &self.warmup_done
        } else {
            &self.done
        };
        if failed && !warmup {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        counter.fetch_add(1, Ordering::Relaxed);
        let mut last = self
            .last_finished
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *last = Some(Instant::now());
    }
}

/// Asks a run to stop; in-flight requests are recorded as cancelled.
#[derive(Debug, Clone)]
pub struct StopHandle(Arc<watch::Sender<bool>>);

impl StopHandle {
    /// A new handle, not yet triggered.
    pub fn new() -> StopHandle {
        StopHandle(Arc::new(watch::channel(false).0))
    }

    /// Requests the stop. Idempotent.
    pub fn stop(&self) {
        self.0.send_replace(true);
    }

    /// True once [`Self::stop`] was called.
    pub fn is_stopped(&self) -> bool {
        *self.0.borrow()
    }

    pub(crate) async fn stopped(&self) {
        let mut rx = self.0.subscribe();
        // An Err means the sender is gone, which cannot happen while self lives.
        let _ = rx.wait_for(|s| *s).await;
    }
}

impl Default for StopHandle {
    fn default() -> Self {
        StopHandle::new()
    }
}

/// Everything one profile run needs.
#[derive(Debug, Clone)]
pub struct ProfileRun {
    /// Rows to send.
    pub dataset: Dataset,
    /// Server and request options.
    pub target: Target,
    /// Load shape.
    pub load: LoadConfig,
    /// Directory that receives `records.parquet` and `run.json`.
    pub output_dir: PathBuf,
    /// Identifier stamped on every record.
    pub run_id: String,
    /// Configuration to store in the manifest (must hold no secret).
    pub config: Value,
    /// Scrape these Prometheus endpoints during the run and write
    /// `server_metrics_export.json`; `None` disables it.
    pub server_metrics: Option<ScrapeConfig>,
    /// Replace the files of a run already in `output_dir`; without it such
    /// a directory is refused ([`speedbench_record::RecordError::RunDirOccupied`]).
    pub overwrite: bool,
    /// The run fails when a larger share of its profiled requests failed
    /// (0.0 to 1.0); `None` fails it only when no request succeeded.
    pub max_error_rate: Option<f64>,
}

/// How a run ended, as `run.json` and `summary.json` record it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunStatus {
    /// Every planned request was sent and enough of them succeeded.
    Completed,
    /// Stopped by [`StopHandle::stop`] before the planned work was done.
    Interrupted,
    /// No request succeeded, too many failed, or a file could not be
    /// written; the reason says which (and names the file).
    Failed(String),
}

impl RunStatus {
    /// The `outcome` string stored in `run.json` ([`speedbench_record::outcome`]).
    pub fn as_outcome(&self) -> &'static str {
        match self {
            RunStatus::Completed => outcome::COMPLETED,
            RunStatus::Interrupted => outcome::INTERRUPTED,
            RunStatus::Failed(_) => outcome::FAILED,
        }
    }
}

/// The profiled requests of a run, warmup excluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RequestTally {
    /// Requests sent and finished (successful or not).
    pub sent: u64,
    /// Of those, requests that failed.
    pub failed: u64,
    /// Turns never sent because an earlier turn of their conversation
    /// failed (recorded with [`ErrorKind::Skipped`]).
    pub skipped: u64,
}

impl RequestTally {
    /// Requests that succeeded.
    pub fn succeeded(&self) -> u64 {
        self.sent - self.failed
    }
}

/// The `summary.json` a run leaves: its statistics and how it ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunSummary {
    /// `run.json`'s outcome: `completed`, `interrupted` or `failed`.
    pub outcome: String,
    /// Every run-level statistic, computed from the records file.
    #[serde(flatten)]
    pub metrics: RunMetrics,
}

/// What a finished (or interrupted) run left behind.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The records file.
    pub records_path: PathBuf,
    /// The manifest file beside it.
    pub manifest_path: PathBuf,
    /// `summary.json`, when the records could be read back and it written.
    pub summary_path: Option<PathBuf>,
    /// Records written, warmup and skipped turns included.
    pub record_count: u64,
    /// Finished requests whose records could not be saved (a write failed).
    pub unsaved: u64,
    /// How the run ended.
    pub status: RunStatus,
    /// The profiled requests.
    pub requests: RequestTally,
    /// Every file that could not be written, first failure first; each
    /// message names its file.
    pub write_errors: Vec<String>,
    /// Request-rate mode: how late the profiling phase's arrivals started.
    pub schedule: Option<ScheduleStats>,
    /// The server-metrics export, when scraping was enabled.
    pub server_metrics_path: Option<PathBuf>,
}

/// Maps monotonic instants onto wall-clock nanoseconds consistently.
#[derive(Clone, Copy)]
struct Clock {
    instant: Instant,
    unix_ns: i64,
}

impl Clock {
    fn now() -> Clock {
        let unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        Clock {
            instant: Instant::now(),
            unix_ns,
        }
    }

    fn unix_ns(&self, at: Instant) -> i64 {
        self.unix_ns + at.saturating_duration_since(self.instant).as_nanos() as i64
    }
}

/// Hands out conversations and request slots to workers.
struct Dispatcher {
    sessions: Option<u64>,
    requests: Option<u64>,
    next_session: AtomicU64,
    claimed: AtomicU64,
    /// No request is claimed at or after this instant.
    deadline: Option<Instant>,
}

impl Dispatcher {
    fn new(sessions: Option<u64>, requests: Option<u64>, deadline: Option<Instant>) -> Self {
        Dispatcher {
            sessions,
            requests,
            next_session: AtomicU64::new(0),
            claimed: AtomicU64::new(0),
            deadline,
        }
    }

    fn next_session(&self) -> Option<u64> {
        if self.closed() {
            return None;
        }
        let s = self.next_session.fetch_add(1, Ordering::Relaxed);
        self.sessions.is_none_or(|limit| s < limit).then_some(s)
    }

    fn claim_request(&self) -> bool {
        if self.deadline.is_some_and(|d| Instant::now() >= d) {
            return false;
        }
        let n = self.claimed.fetch_add(1, Ordering::Relaxed);
        self.requests.is_none_or(|limit| n < limit)
    }

    /// True once no further request can be claimed.
    fn closed(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
            || self
                .requests
                .is_some_and(|limit| self.claimed.load(Ordering::Relaxed) >= limit)
    }
}

/// One phase (warmup or profiling) of a run.
struct Phase {
    dispatcher: Dispatcher,
    warmup: bool,
    /// Triggered when the grace period after the duration runs out.
    cancel: StopHandle,
}

struct Shared {
    run: ProfileRun,
    client: HttpClient,
    clock: Clock,
    stop: StopHandle,
    progress: Arc<Progress>,
    request_index: AtomicU64,
    sink: std::sync::mpsc::Sender<RecorderMsg>,
    sink_broken: AtomicBool,
}

fn planned_requests(dataset: &Dataset, load: &LoadConfig) -> (Option<u64>, u64) {
    let n = dataset.conversations.len() as u64;
    let turns_of = |sessions: u64| -> u64 {
        (0..sessions)
            .map(|s| dataset.conversations[(s % n) as usize].turns.len() as u64)
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
    if run.dataset.conversations.is_empty() {
        return Err(ClientError::EmptyDataset(run.dataset.name.clone()));
    }
    run.load.validate()?;
    if let Some(rate) = run.max_error_rate
        && !(0.0..=1.0).contains(&rate)
    {
        return Err(ClientError::InvalidLoad(format!(
            "the maximum error rate must be between 0 and 1, got {rate}"
        )));
    }
    let lock = RunDirLock::acquire(&run.output_dir, run.overwrite)?;
    let partial_path = run.output_dir.join(PARTIAL_RECORDS_FILE_NAME);
    let manifest_path = run.output_dir.join(RunManifest::FILE_NAME);
    let clock = Clock::now();
    let mut manifest = RunManifest {
        run_id: run.run_id.clone(),
        schema_version: speedbench_record::SCHEMA_VERSION.into(),
        tool: format!("speedbench {}", env!("CARGO_PKG_VERSION")),
        server_url: redact_url(&run.target.base_url.to_string()),
        model: run.target.model.clone(),
        dataset: run.dataset.name.clone(),
        started_unix_ns: clock.unix_ns,
        ended_unix_ns: 0,
        outcome: outcome::RUNNING.into(),
        record_count: 0,
        config: run.config.clone(),
    };
    write_json(&manifest_path, &manifest)?;
    let recorder = Recorder::start(&partial_path, manifest.clone())?;
    let (sessions, planned) = planned_requests(&run.dataset, &run.load);
    let pool = match run.load.request_rate {
        Some(_) => run.load.max_concurrency.unwrap_or(1024),
        None => {
            worker_count(run.load.concurrency, sessions, run.load.request_count).max(worker_count(
                run.load.concurrency,
                None,
                Some(run.load.warmup_request_count),
            ))
        }
    };
    let client = HttpClient::new(&run.target, pool)?;
    let scraper = run
        .server_metrics
        .clone()
        .filter(|c| !c.endpoints.is_empty())
        .map(Scraper::start)
        .transpose()?;
    progress.planned.store(planned, Ordering::Relaxed);
    let shared = Arc::new(Shared {
        client,
        clock,
        stop: stop.clone(),
        progress,
        request_index: AtomicU64::new(0),
        sink: recorder.tx.clone(),
        sink_broken: AtomicBool::new(false),
        run,
    });

    if shared.run.load.warmup_request_count > 0 {
        let warmup = Phase {
            dispatcher: Dispatcher::new(None, Some(shared.run.load.warmup_request_count), None),
            warmup: true,
            cancel: StopHandle::new(),
        };
        run_phase(&shared, Arc::new(warmup)).await;
    }
    let mut schedule = None;
    if !stop.is_stopped() {
        if let Some(s) = &scraper {
            s.mark_profiling_start().await;
        }
        let deadline = shared
            .run
            .load
            .benchmark_duration
            .map(|d| Instant::now() + d);
        let profile = Phase {
            dispatcher: Dispatcher::new(sessions, shared.run.load.request_count, deadline),
            warmup: false,
            cancel: StopHandle::new(),
        };
        schedule = ScheduleStats::from_lateness(run_phase(&shared, Arc::new(profile)).await);
        if let Some(s) = &scraper {
            s.mark_profiling_end();
        }
    }

    // A broken records file stops the run through `stop` too; it is a
    // failure, not an interruption.
    let interrupted = stop.is_stopped() && !shared.sink_broken.load(Ordering::Relaxed);
    let mut write_errors = Vec::new();
    let mut server_metrics_path = None;
    if let Some(s) = scraper {
        // An interrupted run skips the shutdown delay: the user wants out.
        let export = s.finish(!interrupted).await;
        let path = shared.run.output_dir.join(SERVER_METRICS_FILE_NAME);
        match write_json(&path, &export) {
            Ok(()) => server_metrics_path = Some(path),
            Err(e) => write_errors.push(e.to_string()),
        }
    }
    let p = &shared.progress;
    let requests = RequestTally {
        sent: p.done(),
        failed: p.failed(),
        skipped: p.skipped(),
    };
    let produced = p.produced.load(Ordering::Relaxed);
    let max_error_rate = shared.run.max_error_rate;
    let output_dir = shared.run.output_dir.clone();
    manifest.ended_unix_ns = clock.unix_ns(Instant::now());
    let status = judge(interrupted, &requests, max_error_rate, &write_errors);
    manifest.outcome = status.as_outcome().into();
    let shared = Arc::try_unwrap(shared).unwrap_or_else(|_| unreachable!("all workers joined"));
    drop(shared.sink);
    let closed = recorder.finish(manifest.clone());
    if let Some(e) = &closed.error {
        let kept = if closed.readable {
            format!("the {} records written before it are kept", closed.rows)
        } else {
            let why = closed
                .close_error
                .as_ref()
                .map_or(String::new(), |e| format!(": {e}"));
            format!("the records file could not be closed and cannot be read{why}")
        };
        // The records file failed first: it is what the run is for.
        write_errors.insert(0, format!("{e} ({kept})"));
    }
    let records_path = output_dir.join(RECORDS_FILE_NAME);
    let records_path = if closed.readable {
        match std::fs::rename(&partial_path, &records_path) {
            Ok(()) => records_path,
            Err(e) => {
                write_errors.push(format!(
                    "{}: cannot rename to {RECORDS_FILE_NAME}: {e}",
                    partial_path.display()
                ));
                partial_path
            }
        }
    } else {
        partial_path
    };
    let mut status = judge(interrupted, &requests, max_error_rate, &write_errors);
    let summary_path = output_dir.join(SUMMARY_FILE_NAME);
    let summary = closed
        .readable
        .then(|| read_records_file(&records_path).ok())
        .flatten()
        .map(|file| RunSummary {
            outcome: status.as_outcome().into(),
            metrics: RunMetrics::from_records(&file.records),
        });
    let summary_path = match summary.map(|s| write_json(&summary_path, &s)) {
        Some(Ok(())) => Some(summary_path),
        Some(Err(e)) => {
            write_errors.push(e.to_string());
            status = judge(interrupted, &requests, max_error_rate, &write_errors);
            None
        }
        None => None,
    };
    manifest.outcome = status.as_outcome().into();
    manifest.record_count = closed.rows;
    if let Err(e) = write_json(&manifest_path, &manifest) {
        write_errors.push(e.to_string());
        status = judge(interrupted, &requests, max_error_rate, &write_errors);
    }
    drop(lock);
    Ok(RunOutcome {
        records_path,
        manifest_path,
        summary_path,
        record_count: closed.rows,
        unsaved: produced.saturating_sub(closed.rows),
        status,
        requests,
        write_errors,
        schedule,
        server_metrics_path,
    })
}

/// How the run ended, from what it measured and what it could write.
fn judge(
    interrupted: bool,
    requests: &RequestTally,
    max_error_rate: Option<f64>,
    write_errors: &[String],
) -> RunStatus {
    if let Some(first) = write_errors.first() {
        return RunStatus::Failed(first.clone());
    }
    if interrupted {
        return RunStatus::Interrupted;
    }
    let (sent, failed) = (requests.sent, requests.failed);
    if sent == 0 {
        return RunStatus::Failed("no request was sent".into());
    }
    if failed == sent {
        return RunStatus::Failed(format!("no request succeeded ({failed} of {sent} failed)"));
    }
    let rate = failed as f64 / sent as f64;
    match max_error_rate {
        Some(max) if rate > max => RunStatus::Failed(format!(
            "{failed} of {sent} requests failed ({:.1}%), more than the {:.1}% allowed",
            rate * 100.0,
            max * 100.0
        )),
        _ => RunStatus::Completed,
    }
}

/// Closed-loop workers: never more than the work can keep busy, so a huge
/// concurrency with a small request count costs no more than the count.
fn worker_count(concurrency: usize, sessions: Option<u64>, requests: Option<u64>) -> usize {
    let work = match (sessions, requests) {
        (Some(s), Some(r)) => Some(s.min(r)),
        (Some(n), None) | (None, Some(n)) => Some(n),
        (None, None) => None,
    };
    work.map_or(concurrency, |n| {
        concurrency.min(usize::try_from(n).unwrap_or(usize::MAX))
    })
}

/// Writes `value` as pretty JSON through a temporary file and a rename, so
/// readers never see a half-written file; the temporary file never stays.
fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<(), ClientError> {
    let io = |source| ClientError::Io {
        path: path.to_path_buf(),
        source,
    };
    let json = serde_json::to_vec_pretty(value).map_err(|e| io(e.into()))?;
    let tmp = path.with_extension("json.tmp");
    let written = std::fs::write(&tmp, json).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written.map_err(io)
}

/// Runs one phase to its end and returns the arrivals' lateness (request-rate
/// mode; empty otherwise).
async fn run_phase(shared: &Arc<Shared>, phase: Arc<Phase>) -> Vec<u64> {
    let load = &shared.run.load;
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut lateness = Vec::new();
    // The grace period starts when dispatching stops at the deadline.
    let cancel_at = phase
        .dispatcher
        .deadline
        .map(|d| tokio::time::Instant::from_std(d + load.grace_period));
    let mut arrivals = None;
    let slots = load
        .max_concurrency
        .map(|n| Arc::new(tokio::sync::Semaphore::new(n)));
    match load.request_rate {
        None => {
            let d = &phase.dispatcher;
            for _ in 0..worker_count(load.concurrency, d.sessions, d.requests) {
                let shared = shared.clone();
                let phase = phase.clone();
                tasks.spawn(async move { worker(&shared, &phase).await });
            }
        }
        Some(rate) => {
            // Warmup and profiling draw different (but seeded) schedules.
            let seed = load.random_seed ^ u64::from(phase.warmup);
            arrivals = Some(ArrivalSchedule::new(rate, load.arrival, seed));
        }
    }
    // Arrivals at or after the deadline never happen.
    let deadline = phase.dispatcher.deadline;
    let mut upcoming = move || {
        arrivals
            .as_mut()
            .and_then(Iterator::next)
            .map(|o| start + o)
            .filter(|at| deadline.is_none_or(|d| *at < d))
    };
    let mut next_at = upcoming();
    loop {
        let arrival = async {
            let at = next_at?;
            tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
            let permit = match &slots {
                Some(s) => Some(s.clone().acquire_owned().await.ok()?),
                None => None,
            };
            Some((at, permit))
        };
        tokio::select! {
            biased;
            _ = sleep_until_opt(cancel_at),
                if cancel_at.is_some() && !tasks.is_empty() && !phase.cancel.is_stopped() => {
                phase.cancel.stop();
            }
            _ = shared.stop.stopped(), if next_at.is_some() => next_at = None,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            Some((at, permit)) = arrival, if next_at.is_some() => {
                let session = if shared.stop.is_stopped() {
                    None
                } else {
                    phase.dispatcher.next_session()
                };
                let Some(session) = session else {
                    next_at = None;
                    continue;
                };
                let late = Instant::now().saturating_duration_since(at);
                if !phase.warmup {
                    lateness.push(late.as_nanos() as u64);
                }
                let shared = shared.clone();
                let phase2 = phase.clone();
                tasks.spawn(async move {
                    let _permit = permit;
                    let dataset = &shared.run.dataset;
                    let conv = &dataset.conversations
                        [(session % dataset.conversations.len() as u64) as usize];
                    run_conversation(&shared, &phase2, conv).await;
                });
                next_at = upcoming();
            }
            else => break,
        }
    }
    lateness
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn worker(shared: &Shared, phase: &Phase) {
    let dataset = &shared.run.dataset;
    while let Some(session) = phase.dispatcher.next_session() {
        let conv = &dataset.conversations[(session % dataset.conversations.len() as u64) as usize];
        if !run_conversation(shared, phase, conv).await {
            return;
        }
    }
}

/// Runs one conversation's turns in order; false when the worker must stop.
async fn run_conversation(shared: &Shared, phase: &Phase, conv: &Conversation) -> bool {
    let warmup = phase.warmup;
    let mut history: Vec<Message> = conv.preamble.clone();
    for (turn_index, turn) in conv.turns.iter().enumerate() {
        if shared.stop.is_stopped()
            || phase.cancel.is_stopped()
            || !phase.dispatcher.claim_request()
        {
            return false;
        }
        history.push(Message {
            role: "user".into(),
            content: turn.clone(),
        });
        let request_index = shared.request_index.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let exchange = tokio::select! {
            ex = shared.client.exchange(&shared.run.target, &history) => Ok(ex),
            _ = shared.stop.stopped() => Err("the run was stopped while this request was in flight"),
            _ = phase.cancel.stopped() => Err("still in flight when the grace period after the benchmark duration ended"),
        };
        let record = match exchange {
            Ok(ex) => to_record(shared, conv, turn_index, request_index, warmup, ex),
            Err(why) => cancelled_record(
                shared,
                conv,
                turn_index,
                request_index,
                warmup,
                started,
                why,
            ),
        };
        let failed = !record.is_success();
        let reply = record.output_text.clone();
        shared.progress.finished_one(warmup, failed);
        // A turn cancelled by a stop or the grace period ends the
        // conversation with the run; any other failure skips the rest.
        let cancelled = record.error_kind == Some(ErrorKind::Cancelled);
        let failure = (failed && !cancelled).then(|| {
            let kind = record.error_kind.map_or("error", ErrorKind::as_str);
            format!(
                "not sent: turn {} of this conversation failed ({kind})",
                turn_index + 1
            )
        });
        send_record(shared, record);
        if let Some(why) = failure {
            // Without the reply there is no honest history for the next
            // turn: the rest of the conversation is recorded as skipped.
            for later in turn_index + 1..conv.turns.len() {
                let request_index = shared.request_index.fetch_add(1, Ordering::Relaxed);
                let now = shared.clock.unix_ns(Instant::now());
                let skipped = RequestRecord {
                    start_unix_ns: now,
                    end_unix_ns: now,
                    error_kind: Some(ErrorKind::Skipped),
                    error_message: Some(why.clone()),
                    ..base_record(shared, conv, later, request_index, warmup)
                };
                if !warmup {
                    shared.progress.skipped.fetch_add(1, Ordering::Relaxed);
                }
                send_record(shared, skipped);
            }
            return true;
        }
        if failed {
            return true;
        }
        history.push(Message {
            role: "assistant".into(),
            content: reply,
        });
    }
    true
}

/// Hands a record to the recorder; if the records file is gone, stops the
/// run (once).
fn send_record(shared: &Shared, record: RequestRecord) {
    shared.progress.produced.fetch_add(1, Ordering::Relaxed);
    if shared
        .sink
        .send(RecorderMsg::Record(Box::new(record)))
        .is_err()
        && !shared.sink_broken.swap(true, Ordering::Relaxed)
    {
        tracing::error!("the records file can no longer be written; stopping the run");
        shared.stop.stop();
    }
}

fn base_record(
    shared: &Shared,
    conv: &Conversation,
    turn_index: usize,
    request_index: u64,
    warmup: bool,
) -> RequestRecord {
    RequestRecord {
        run_id: shared.run.run_id.clone(),
        request_index,
        conversation_id: conv.id.clone(),
        turn_index: turn_index as u32,
        dataset: shared.run.dataset.name.clone(),
        category: conv.category.clone(),
        model: shared.run.target.model.clone(),
        warmup,
        ..Default::default()
    }
}

fn cancelled_record(
    shared: &Shared,
    conv: &Conversation,
    turn_index: usize,
    request_index: u64,
    warmup: bool,
    started: Instant,
    why: &str,
) -> RequestRecord {
    let now = Instant::now();
    RequestRecord {
        start_unix_ns: shared.clock.unix_ns(started),
        end_unix_ns: shared.clock.unix_ns(now),
        e2e_latency_ns: now.duration_since(started).as_nanos() as u64,
        error_kind: Some(ErrorKind::Cancelled),
        error_message: Some(why.into()),
        ..base_record(shared, conv, turn_index, request_index, warmup)
    }
}

fn to_record(
    shared: &Shared,
    conv: &Conversation,
    turn_index: usize,
    request_index: u64,
    warmup: bool,
    ex: Exchange,
) -> RequestRecord {
    let mut error = ex.error;
    let spec = match ex.state.spec() {
        Ok(s) => s,
        Err(malformed) => {
            tracing::warn!(request_index, "{malformed}; recording no spec-decode stats");
            None
        }
    };
    if error.is_none() && ex.state.first_output.is_none() && ex.state.completion_tokens() != Some(0)
    {
        error = Some((ErrorKind::Protocol, "the response carried no output".into()));
    }
    let state = ex.state;
    // A response cannot end before its first content arrived; the two are
    // stamped on different paths, a few hundred ns apart when one read
    // brought the whole body.
    let ended_at = state
        .first_output
        .map_or(ex.ended_at, |first| ex.ended_at.max(first));
    // Without streaming the first content comes with the whole body: there
    // is no time to first token to measure.
    let ttft_ns = state
        .first_output
        .filter(|_| shared.run.target.streaming)
        .map(|t| t.duration_since(ex.sent_at).as_nanos() as u64);
    RequestRecord {
        start_unix_ns: shared.clock.unix_ns(ex.sent_at),
        end_unix_ns: shared.clock.unix_ns(ended_at),
        ttft_ns,
        e2e_latency_ns: ended_at.duration_since(ex.sent_at).as_nanos() as u64,
        prompt_tokens: state.prompt_tokens,
        completion_tokens: state.completion_tokens(),
        output_chunks: state.chunks,
        finish_reason: state.finish_reason.clone(),
        http_status: ex.status,
        error_kind: error.as_ref().map(|e| e.0),
        error_message: error.map(|e| e.1),
        spec,
        server_timings: state.server_timings(),
        inter_chunk_latencies_ns: state.gaps_ns,
        output_text: state.text,
        ..base_record(shared, conv, turn_index, request_index, warmup)
    }
}

#[cfg(test)]
mod tests {
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
                })
                .collect(),
        }
    }

    #[test]
    fn planned_requests_follow_the_sizing_options() {
        let d = dataset(&[2, 1, 3]);
        let load = |c, r| LoadConfig {
            num_conversations: c,
            request_count: r,
            ..Default::default()
        };
        assert_eq!(planned_requests(&d, &load(None, None)), (Some(3), 6));
        // Five conversations recycle the three rows: 2+1+3+2+1.
        assert_eq!(planned_requests(&d, &load(Some(5), None)), (Some(5), 9));
        assert_eq!(planned_requests(&d, &load(Some(5), Some(4))), (Some(5), 4));
        assert_eq!(planned_requests(&d, &load(None, Some(100))), (None, 100));
        let timed = LoadConfig {
            benchmark_duration: Some(Duration::from_secs(1)),
            ..Default::default()
        };
        assert_eq!(planned_requests(&d, &timed), (None, 0));
    }

    #[test]
    fn inconsistent_load_shapes_are_refused() {
        let bad = |l: LoadConfig| l.validate().unwrap_err().to_string();
        let rate = |r| LoadConfig {
            request_rate: Some(r),
            ..Default::default()
        };
        assert!(bad(rate(0.0)).contains("rate"));
        assert!(bad(rate(f64::NAN)).contains("rate"));
        assert!(
            bad(LoadConfig {
                max_concurrency: Some(4),
                ..Default::default()
            })
            .contains("needs a request rate")
        );
        assert!(
            bad(LoadConfig {
                max_concurrency: Some(0),
                ..rate(1.0)
            })
            .contains("at least 1")
        );
        assert!(
            bad(LoadConfig {
                concurrency: 0,
                ..Default::default()
            })
            .contains("concurrency")
        );
        // Concurrency is unused in request-rate mode.
        assert!(
            LoadConfig {
                concurrency: 0,
                ..rate(1.0)
            }
            .validate()
            .is_ok()
        );
    }

    #[test]
    fn lateness_percentiles() {
        assert_eq!(ScheduleStats::from_lateness(vec![]), None);
        let s = ScheduleStats::from_lateness((1..=100).rev().collect()).unwrap();
        assert_eq!(
            (
                s.arrivals,
                s.lateness_p50_ns,
                s.lateness_p99_ns,
                s.lateness_max_ns
            ),
            (100, 51, 99, 100)
        );
    }
}
