//! The load generator: conversations in, records out.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use speedbench_dataset::{Conversation, Dataset, Message};
use speedbench_record::{ErrorKind, RECORDS_FILE_NAME, RequestRecord, RunManifest, redact_url};
use tokio::sync::watch;

use crate::error::ClientError;
use crate::exchange::{Exchange, HttpClient};
use crate::recorder::{Recorder, RecorderMsg};
use crate::target::Target;

/// How much load to apply and for how long.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadConfig {
    /// Requests in flight at once (each worker runs one conversation at a time).
    pub concurrency: usize,
    /// Stop after this many profiled requests (turns), recycling
    /// conversations if the dataset is shorter.
    pub request_count: Option<u64>,
    /// Run exactly this many conversations, every turn of each, recycling
    /// the dataset if needed.
    pub num_conversations: Option<u64>,
    /// Requests sent first and recorded with `warmup = true`.
    pub warmup_request_count: u64,
}

impl Default for LoadConfig {
    /// One pass over the dataset at concurrency 1, no warmup.
    fn default() -> Self {
        LoadConfig {
            concurrency: 1,
            request_count: None,
            num_conversations: None,
            warmup_request_count: 0,
        }
    }
}

/// Live counters of a run, for progress displays.
#[derive(Debug, Default)]
pub struct Progress {
    planned: AtomicU64,
    done: AtomicU64,
    failed: AtomicU64,
    warmup_done: AtomicU64,
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
    /// Warmup requests finished.
    pub fn warmup_done(&self) -> u64 {
        self.warmup_done.load(Ordering::Relaxed)
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

    async fn stopped(&self) {
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
}

/// What a finished (or interrupted) run left behind.
#[derive(Debug, Clone, PartialEq)]
pub struct RunOutcome {
    /// The records file.
    pub records_path: PathBuf,
    /// The manifest file beside it.
    pub manifest_path: PathBuf,
    /// Records written, warmup included.
    pub record_count: u64,
    /// True if the run was stopped before it finished.
    pub interrupted: bool,
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
}

impl Dispatcher {
    fn next_session(&self) -> Option<u64> {
        let s = self.next_session.fetch_add(1, Ordering::Relaxed);
        self.sessions.is_none_or(|limit| s < limit).then_some(s)
    }

    fn claim_request(&self) -> bool {
        let n = self.claimed.fetch_add(1, Ordering::Relaxed);
        self.requests.is_none_or(|limit| n < limit)
    }
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
        (None, None) => (Some(n), turns_of(n)),
    }
}

/// Runs a whole profile: warmup, then the measured phase, recording every
/// request to `output_dir/records.parquet`.
///
/// Returns when every planned request finished or `stop` was triggered; in
/// both cases the records file is closed and readable. Requests that fail
/// are recorded with their error kind; they never abort the run.
pub async fn run_profile(
    run: ProfileRun,
    stop: StopHandle,
    progress: Arc<Progress>,
) -> Result<RunOutcome, ClientError> {
    if run.dataset.conversations.is_empty() {
        return Err(ClientError::EmptyDataset(run.dataset.name.clone()));
    }
    if run.load.concurrency == 0 {
        return Err(ClientError::InvalidLoad(
            "concurrency must be at least 1".into(),
        ));
    }
    if run.load.request_count == Some(0) || run.load.num_conversations == Some(0) {
        return Err(ClientError::InvalidLoad(
            "request and conversation counts must be at least 1".into(),
        ));
    }
    std::fs::create_dir_all(&run.output_dir).map_err(|source| ClientError::Io {
        path: run.output_dir.clone(),
        source,
    })?;
    let records_path = run.output_dir.join(RECORDS_FILE_NAME);
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
        outcome: "running".into(),
        record_count: 0,
        config: run.config.clone(),
    };
    write_manifest(&manifest_path, &manifest)?;
    let recorder = Recorder::start(&records_path)?;
    let client = HttpClient::new(&run.target, run.load.concurrency)?;
    let (sessions, planned) = planned_requests(&run.dataset, &run.load);
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
        let warmup = Dispatcher {
            sessions: None,
            requests: Some(shared.run.load.warmup_request_count),
            next_session: AtomicU64::new(0),
            claimed: AtomicU64::new(0),
        };
        run_phase(&shared, Arc::new(warmup), true).await;
    }
    if !stop.is_stopped() {
        let profile = Dispatcher {
            sessions,
            requests: shared.run.load.request_count,
            next_session: AtomicU64::new(0),
            claimed: AtomicU64::new(0),
        };
        run_phase(&shared, Arc::new(profile), false).await;
    }

    let interrupted = stop.is_stopped();
    manifest.ended_unix_ns = clock.unix_ns(Instant::now());
    manifest.outcome = if interrupted {
        "interrupted"
    } else {
        "completed"
    }
    .into();
    let shared = Arc::try_unwrap(shared).unwrap_or_else(|_| unreachable!("all workers joined"));
    drop(shared.sink);
    let record_count = recorder.finish(manifest.clone())?;
    manifest.record_count = record_count;
    write_manifest(&manifest_path, &manifest)?;
    Ok(RunOutcome {
        records_path,
        manifest_path,
        record_count,
        interrupted,
    })
}

fn write_manifest(path: &Path, manifest: &RunManifest) -> Result<(), ClientError> {
    let io = |source| ClientError::Io {
        path: path.to_path_buf(),
        source,
    };
    let json = serde_json::to_vec_pretty(manifest).map_err(|e| io(e.into()))?;
    // Write then rename, so readers never see a half-written manifest.
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, json).map_err(io)?;
    std::fs::rename(&tmp, path).map_err(io)
}

async fn run_phase(shared: &Arc<Shared>, dispatcher: Arc<Dispatcher>, warmup: bool) {
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..shared.run.load.concurrency {
        let shared = shared.clone();
        let dispatcher = dispatcher.clone();
        workers.spawn(async move { worker(&shared, &dispatcher, warmup).await });
    }
    while workers.join_next().await.is_some() {}
}

async fn worker(shared: &Shared, dispatcher: &Dispatcher, warmup: bool) {
    let dataset = &shared.run.dataset;
    while let Some(session) = dispatcher.next_session() {
        let conv = &dataset.conversations[(session % dataset.conversations.len() as u64) as usize];
        if !run_conversation(shared, dispatcher, conv, warmup).await {
            return;
        }
    }
}

/// Runs one conversation's turns in order; false when the worker must stop.
async fn run_conversation(
    shared: &Shared,
    dispatcher: &Dispatcher,
    conv: &Conversation,
    warmup: bool,
) -> bool {
    let mut history: Vec<Message> = conv.preamble.clone();
    for (turn_index, turn) in conv.turns.iter().enumerate() {
        if shared.stop.is_stopped() || !dispatcher.claim_request() {
            return false;
        }
        history.push(Message {
            role: "user".into(),
            content: turn.clone(),
        });
        let request_index = shared.request_index.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let exchange = tokio::select! {
            ex = shared.client.exchange(&shared.run.target, &history) => Some(ex),
            _ = shared.stop.stopped() => None,
        };
        let record = match exchange {
            Some(ex) => to_record(shared, conv, turn_index, request_index, warmup, ex),
            None => cancelled_record(shared, conv, turn_index, request_index, warmup, started),
        };
        let failed = !record.is_success();
        let reply = record.output_text.clone();
        let counter = if warmup {
            &shared.progress.warmup_done
        } else {
            &shared.progress.done
        };
        if failed && !warmup {
            shared.progress.failed.fetch_add(1, Ordering::Relaxed);
        }
        counter.fetch_add(1, Ordering::Relaxed);
        if shared
            .sink
            .send(RecorderMsg::Record(Box::new(record)))
            .is_err()
            && !shared.sink_broken.swap(true, Ordering::Relaxed)
        {
            tracing::error!("the records file can no longer be written; stopping the run");
            shared.stop.stop();
        }
        if failed {
            // Without the reply there is no honest history for the next turn.
            return true;
        }
        history.push(Message {
            role: "assistant".into(),
            content: reply,
        });
    }
    true
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
) -> RequestRecord {
    let now = Instant::now();
    RequestRecord {
        start_unix_ns: shared.clock.unix_ns(started),
        end_unix_ns: shared.clock.unix_ns(now),
        e2e_latency_ns: now.duration_since(started).as_nanos() as u64,
        error_kind: Some(ErrorKind::Cancelled),
        error_message: Some("the run was stopped while this request was in flight".into()),
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
    RequestRecord {
        start_unix_ns: shared.clock.unix_ns(ex.sent_at),
        end_unix_ns: shared.clock.unix_ns(ex.ended_at),
        ttft_ns: state
            .first_output
            .map(|t| t.duration_since(ex.sent_at).as_nanos() as u64),
        e2e_latency_ns: ex.ended_at.duration_since(ex.sent_at).as_nanos() as u64,
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
    }
}
