//! Running one phase (warmup or profiling): workers, arrivals, turns.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use speedbench_dataset::Message;
use speedbench_record::{ErrorKind, RequestRecord};

use super::Shared;

/// How long a stopped run still reads a response in flight: enough for the
/// bytes of one the server has finished to arrive (loopback or a LAN), far
/// below the stop's promptness a user notices.
const STOP_DRAIN: std::time::Duration = std::time::Duration::from_millis(50);
use super::record::{DatasetRow, base_record, cancelled_record, to_record};
use crate::export::RawResponse;
use crate::http_trace::HttpTraceLine;
use crate::pacing::RateCurve;
use crate::recorder::RecorderMsg;
use crate::schedule::ArrivalSchedule;
use crate::stop::StopHandle;
use crate::target::ConnectionReuse;

/// Hands out conversations and request slots to workers.
pub(super) struct Dispatcher {
    sessions: Option<u64>,
    requests: Option<u64>,
    next_session: AtomicU64,
    claimed: AtomicU64,
    /// No request is claimed at or after this instant.
    deadline: Option<Instant>,
}

impl Dispatcher {
    pub(super) fn new(
        sessions: Option<u64>,
        requests: Option<u64>,
        deadline: Option<Instant>,
    ) -> Self {
        Dispatcher {
            sessions,
            requests,
            next_session: AtomicU64::new(0),
            claimed: AtomicU64::new(0),
            deadline,
        }
    }

    /// The next conversation's session, for a worker free now or for an
    /// arrival `due` then; `None` once none can start.
    fn next_session(&self, due: Option<Instant>) -> Option<u64> {
        if self.closed_at(due.unwrap_or_else(Instant::now)) {
            return None;
        }
        let s = self.next_session.fetch_add(1, Ordering::Relaxed);
        self.sessions.is_none_or(|limit| s < limit).then_some(s)
    }

    /// Claims a request slot for a request sent now or, for an arrival's
    /// first turn, `due` then: an arrival scheduled inside the duration is
    /// sent however late the dispatcher woke for it (its lateness is
    /// reported), never dropped because a busy host woke it after the
    /// deadline.
    fn claim_request(&self, due: Option<Instant>) -> bool {
        if self.past_deadline(due.unwrap_or_else(Instant::now)) {
            return false;
        }
        let n = self.claimed.fetch_add(1, Ordering::Relaxed);
        self.requests.is_none_or(|limit| n < limit)
    }

    fn past_deadline(&self, at: Instant) -> bool {
        self.deadline.is_some_and(|d| at >= d)
    }

    /// True once no further conversation can start: no request can be
    /// claimed, or every session was handed out.
    fn done(&self) -> bool {
        self.closed()
            || self
                .sessions
                .is_some_and(|limit| self.next_session.load(Ordering::Relaxed) >= limit)
    }

    /// True once no further request can be claimed.
    fn closed(&self) -> bool {
        self.closed_at(Instant::now())
    }

    /// True once no further request can be claimed at `at`.
    fn closed_at(&self, at: Instant) -> bool {
        self.past_deadline(at)
            || self
                .requests
                .is_some_and(|limit| self.claimed.load(Ordering::Relaxed) >= limit)
    }
}

/// One phase (warmup or profiling) of a run.
pub(super) struct Phase {
    pub(super) dispatcher: Dispatcher,
    pub(super) warmup: bool,
    /// Closed-loop at this many requests in flight whatever the run's load
    /// shape (a warmup with its own concurrency); `None` follows the run's.
    pub(super) closed_loop_at: Option<usize>,
    /// After the dispatcher's deadline, how long requests in flight may
    /// still run; `None` waits for them all.
    pub(super) grace_period: Option<Duration>,
    /// `--prefill-concurrency`: the slots a request takes until its first
    /// output.
    pub(super) prefill: Option<super::prefill::PrefillGate>,
    /// Triggered when the grace period after the duration runs out.
    pub(super) cancel: StopHandle,
    /// User-centric pacing of this phase, in place of the run's shape.
    pub(super) users: Option<crate::users::UserCentric>,
}

/// What starts conversations in an open-loop phase.
enum Arrivals {
    /// A rate's schedule: each arrival starts the next conversation.
    Rate(ArrivalSchedule),
    /// User-centric pacing: each start a user with its turns.
    Users(crate::users::UserSchedule),
}

/// An arrival due: when, and under user-centric pacing how many turns
/// its user sends.
#[derive(Clone, Copy)]
struct Due {
    at: Instant,
    turns: Option<usize>,
}

/// A user's pacing through its conversation: each turn `gap` after the
/// last one's planned send, or at its reply if that came later; at most
/// `turns` turns.
struct UserPace {
    next_send: Instant,
    gap: Duration,
    turns: usize,
}

/// Closed-loop workers: never more than the work can keep busy, so a huge
/// concurrency with a small request count costs no more than the count.
pub(super) fn worker_count(
    concurrency: usize,
    sessions: Option<u64>,
    requests: Option<u64>,
) -> usize {
    let work = match (sessions, requests) {
        (Some(s), Some(r)) => Some(s.min(r)),
        (Some(n), None) | (None, Some(n)) => Some(n),
        (None, None) => None,
    };
    work.map_or(concurrency, |n| {
        concurrency.min(usize::try_from(n).unwrap_or(usize::MAX))
    })
}

/// Runs one phase to its end and returns the arrivals' lateness (request-rate
/// mode; empty otherwise).
pub(super) async fn run_phase(shared: &Arc<Shared>, phase: Arc<Phase>) -> Vec<u64> {
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut lateness = Vec::new();
    // The grace period starts when dispatching stops at the deadline.
    let cancel_at = (phase.dispatcher.deadline)
        .zip(phase.grace_period)
        .map(|(d, grace)| tokio::time::Instant::from_std(d + grace));
    let (mut arrivals, slots, mut ramp) = start_phase(shared, &phase, &mut tasks, start);
    // Arrivals at or after the deadline never happen.
    let deadline = phase.dispatcher.deadline;
    let mut upcoming = move || next_due(arrivals.as_mut()?, start, deadline);
    let mut next_at = upcoming();
    loop {
        // The next worker or slot to open, while any conversation is left.
        let ramp_at = ramp
            .as_ref()
            .and_then(ConcurrencyRamp::next_at)
            .filter(|_| !phase.dispatcher.done());
        let arrival = arrival_with_slot(next_at.map(|due| due.at), slots.as_ref());
        tokio::select! {
            biased;
            _ = sleep_until_opt(cancel_at),
                if cancel_at.is_some() && !tasks.is_empty() && !phase.cancel.is_stopped() => {
                phase.cancel.stop();
            }
            _ = shared.stop.stopped(), if next_at.is_some() || ramp_at.is_some() => {
                next_at = None;
                ramp = None;
            }
            _ = sleep_until_opt(ramp_at), if ramp_at.is_some() => {
                if let Some(r) = ramp.as_mut() {
                    r.open_one(shared, &phase, slots.as_ref(), &mut tasks);
                }
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
            Some((at, permit)) = arrival, if next_at.is_some() => {
                let pace = next_at.and_then(|due| user_pace(&phase, due));
                let Some(late) = start_arrival(shared, &phase, (at, permit, pace), &mut tasks) else {
                    next_at = None;
                    continue;
                };
                if !phase.warmup {
                    lateness.push(late.saturating_duration_since(at).as_nanos() as u64);
                }
                next_at = upcoming();
            }
            else => break,
        }
    }
    lateness
}

/// The next arrival of a phase that started at `start`; none at or after
/// the deadline.
fn next_due(arrivals: &mut Arrivals, start: Instant, deadline: Option<Instant>) -> Option<Due> {
    let due = match arrivals {
        Arrivals::Rate(schedule) => schedule.next().map(|o| Due {
            at: start + o,
            turns: None,
        }),
        Arrivals::Users(users) => users.next().map(|u| Due {
            at: start + u.at,
            turns: Some(u.turns),
        }),
    };
    due.filter(|due| deadline.is_none_or(|d| due.at < d))
}

/// A user's pacing from its start `due`, under user-centric pacing.
fn user_pace(phase: &Phase, due: Due) -> Option<UserPace> {
    Some(UserPace {
        next_send: due.at,
        gap: phase.users?.turn_gap(),
        turns: due.turns?,
    })
}

/// Waits for the arrival at `at` and, under a concurrency cap, for a free
/// slot; `None` when there is no arrival or the slots are gone.
async fn arrival_with_slot(
    at: Option<Instant>,
    slots: Option<&Arc<tokio::sync::Semaphore>>,
) -> Option<(Instant, Option<tokio::sync::OwnedSemaphorePermit>)> {
    let at = at?;
    tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
    let permit = match slots {
        Some(s) => Some(s.clone().acquire_owned().await.ok()?),
        None => None,
    };
    Some((at, permit))
}

/// Starts a phase: a closed loop's workers (no arrivals), or an open
/// loop's arrival schedule and its concurrency cap's slots; and the ramp
/// that opens the rest of the workers or slots over time, if there is one.
fn start_phase(
    shared: &Arc<Shared>,
    phase: &Arc<Phase>,
    tasks: &mut tokio::task::JoinSet<()>,
    start: Instant,
) -> (
    Option<Arrivals>,
    Option<Arc<tokio::sync::Semaphore>>,
    Option<ConcurrencyRamp>,
) {
    let load = &shared.run.load;
    if let Some(users) = phase.users {
        return (
            Some(Arrivals::Users(user_schedule(shared, users))),
            None,
            None,
        );
    }
    let (rate, concurrency, max_concurrency) = match phase.closed_loop_at {
        Some(c) => (None, c, None),
        None => (load.request_rate, load.concurrency, load.max_concurrency),
    };
    let d = &phase.dispatcher;
    let (width, ramping) = match rate {
        None => (worker_count(concurrency, d.sessions, d.requests), true),
        Some(_) => (max_concurrency.unwrap_or(0), max_concurrency.is_some()),
    };
    let over = match phase.warmup {
        true => load.warmup_concurrency_ramp.or(load.concurrency_ramp),
        false => load.concurrency_ramp,
    };
    let ramp = over
        .filter(|_| ramping && width > 1)
        .map(|over| ConcurrencyRamp::new(start, over, width));
    let opened = if ramp.is_some() { 1 } else { width };
    let slots = max_concurrency.map(|_| Arc::new(tokio::sync::Semaphore::new(opened)));
    let arrivals = match rate {
        None => {
            for _ in 0..opened {
                spawn_worker(shared, phase, tasks);
            }
            None
        }
        Some(_) => Some(Arrivals::Rate(arrival_schedule(shared, d, phase.warmup))),
    };
    (arrivals, slots, ramp)
}

/// The users' starts: the `k`-th takes session `k`'s conversation.
fn user_schedule(
    shared: &Arc<Shared>,
    users: crate::users::UserCentric,
) -> crate::users::UserSchedule {
    let dataset = &shared.run.dataset.conversations;
    let mean_turns =
        dataset.iter().map(|c| c.turns.len()).sum::<usize>() as f64 / dataset.len().max(1) as f64;
    let shared = shared.clone();
    let turns_of = move |session: u64| {
        DatasetRow::of_session(&shared.run.dataset, &shared.run.load, session)
            .turns
            .len()
    };
    users.schedule(Box::new(turns_of), mean_turns)
}

fn spawn_worker(shared: &Arc<Shared>, phase: &Arc<Phase>, tasks: &mut tokio::task::JoinSet<()>) {
    let shared = shared.clone();
    let phase = phase.clone();
    tasks.spawn(async move { worker(&shared, &phase).await });
}

/// AIPerf's concurrency ramp: the `k`-th of `width` workers (closed loop)
/// or slots (request rate with a maximum concurrency) opens at
/// `over × k / (width − 1)`, so the concurrency climbs from 1 to the
/// target evenly over `over`.
pub(super) struct ConcurrencyRamp {
    start: Instant,
    over: std::time::Duration,
    width: usize,
    opened: usize,
}

impl ConcurrencyRamp {
    fn new(start: Instant, over: std::time::Duration, width: usize) -> ConcurrencyRamp {
        ConcurrencyRamp {
            start,
            over,
            width,
            opened: 1,
        }
    }

    /// When the next worker or slot opens; `None` once all are open.
    fn next_at(&self) -> Option<tokio::time::Instant> {
        (self.opened < self.width).then(|| {
            let share = self.opened as f64 / (self.width - 1) as f64;
            tokio::time::Instant::from_std(self.start + self.over.mul_f64(share))
        })
    }

    /// Opens the next worker (closed loop) or slot (request rate).
    fn open_one(
        &mut self,
        shared: &Arc<Shared>,
        phase: &Arc<Phase>,
        slots: Option<&Arc<tokio::sync::Semaphore>>,
        tasks: &mut tokio::task::JoinSet<()>,
    ) {
        self.opened += 1;
        match slots {
            Some(slots) => slots.add_permits(1),
            None => spawn_worker(shared, phase, tasks),
        }
    }
}

/// The phase's arrivals: warmup and profiling draw different (but seeded)
/// schedules; a shard keeps its own arrivals of the shared schedule. vLLM's
/// ramp over the requests shapes the measured phase only.
fn arrival_schedule(shared: &Shared, d: &Dispatcher, warmup: bool) -> ArrivalSchedule {
    let load = &shared.run.load;
    let seed = load.random_seed ^ u64::from(warmup);
    // Arrivals start conversations: at most the sessions, and the requests.
    let total = match (d.sessions, d.requests) {
        (Some(s), Some(r)) => Some(s.min(r)),
        (s, r) => s.or(r),
    };
    let schedule = match (load.request_ramp, total, warmup) {
        _ if !warmup && load.fixed_schedule.is_some() => {
            ArrivalSchedule::at_times(trace_times(&shared.run.dataset, load))
        }
        (Some(ramp), Some(total), false) => {
            ArrivalSchedule::ramping_over_requests(ramp, total, load.arrival, seed)
        }
        _ => ArrivalSchedule::following(
            load.rate_curve(warmup)
                .unwrap_or_else(|| RateCurve::constant(1.0)),
            load.arrival,
            seed,
        ),
    };
    // A shard's rows of a trace keep their own times: nothing to thin.
    match load
        .shard
        .filter(|_| warmup || load.fixed_schedule.is_none())
    {
        Some(shard) => schedule.with_shard(shard),
        None => schedule,
    }
}

/// A fixed schedule's send times: each row's timestamp less the zero (a
/// row before the zero at once), rows in order, each once.
fn trace_times(
    dataset: &speedbench_dataset::Dataset,
    load: &crate::Load,
) -> Vec<std::time::Duration> {
    let zero = load.fixed_schedule.map_or(0, |f| f.zero_us);
    dataset
        .conversations
        .iter()
        .map(|c| std::time::Duration::from_micros(c.timestamp_us.unwrap_or(0).saturating_sub(zero)))
        .collect()
}

/// Starts the conversation of the next session at an arrival due at
/// `due`; when it started (for its lateness), or `None` when the run
/// stopped or no session is left.
fn start_arrival(
    shared: &Arc<Shared>,
    phase: &Arc<Phase>,
    (due, permit, pace): (
        Instant,
        Option<tokio::sync::OwnedSemaphorePermit>,
        Option<UserPace>,
    ),
    tasks: &mut tokio::task::JoinSet<()>,
) -> Option<Instant> {
    if shared.stop.is_stopped() {
        return None;
    }
    let session = phase.dispatcher.next_session(Some(due))?;
    let now = Instant::now();
    let shared = shared.clone();
    let phase = phase.clone();
    tasks.spawn(async move {
        let _permit = permit;
        let conv = DatasetRow::of_session(&shared.run.dataset, &shared.run.load, session);
        run_conversation(&shared, &phase, (conv, Some(due)), pace).await;
    });
    Some(now)
}

async fn sleep_until_opt(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn worker(shared: &Shared, phase: &Phase) {
    let dataset = &shared.run.dataset;
    while let Some(session) = phase.dispatcher.next_session(None) {
        let conv = DatasetRow::of_session(dataset, &shared.run.load, session);
        if !run_conversation(shared, phase, (conv, None), None).await {
            return;
        }
    }
}

/// Runs one conversation's turns in order (a user's share of them, at its
/// pace, under user-centric pacing), the first of an open loop's arrival
/// `due` then; false when the worker must stop.
async fn run_conversation(
    shared: &Shared,
    phase: &Phase,
    (conv, due): (DatasetRow<'_>, Option<Instant>),
    mut pace: Option<UserPace>,
) -> bool {
    let warmup = phase.warmup;
    // `sticky-user-sessions`: the conversation's own connection, dropped
    // (closed) when it ends.
    let own = (shared.run.target.connection_reuse == ConnectionReuse::StickyUserSessions)
        .then(|| shared.client_of(conv).for_one_session());
    let client = own.as_ref().unwrap_or_else(|| shared.client_of(conv));
    let mut history: Vec<Message> = conv.preamble.clone();
    for (turn_index, turn) in conv.turns.iter().enumerate() {
        if let Some(why) = past_the_users_turns(pace.as_ref(), turn_index) {
            skip_turns(shared, conv, turn_index, warmup, &why);
            return true;
        }
        if turn_index > 0 && !think(shared, phase, (conv, turn_index), pace.as_mut()).await {
            return false;
        }
        let due = due.filter(|_| turn_index == 0);
        if shared.stop.is_stopped() || !phase.dispatcher.claim_request(due) {
            return false;
        }
        if phase.cancel.is_stopped() {
            if due.is_some() {
                arrival_after_the_grace_period(shared, phase, conv);
            }
            return false;
        }
        // AIPerf skips whitespace-only prompts; a blank turn is recorded as
        // skipped, and so is the rest of its conversation (its history
        // would hold a turn the user never gave).
        if turn.trim().is_empty() {
            let why = format!(
                "not sent: turn {} of this conversation is empty or whitespace only",
                turn_index + 1
            );
            skip_turns(shared, conv, turn_index, warmup, &why);
            return true;
        }
        history.push(Message {
            role: "user".into(),
            content: turn.clone(),
        });
        let record = send_turn(shared, phase, client, (conv, turn_index), &history).await;
        let Some(reply) = recorded_reply(shared, (conv, turn_index), warmup, record) else {
            return true;
        };
        history.push(Message {
            role: "assistant".into(),
            content: reply,
        });
    }
    true
}

/// A sent turn's record handed on; its reply, or `None` when the
/// conversation ends at this turn (it failed: the rest is recorded as
/// skipped; or it was cancelled by a stop or the grace period).
fn recorded_reply(
    shared: &Shared,
    (conv, turn_index): (DatasetRow<'_>, usize),
    warmup: bool,
    record: RequestRecord,
) -> Option<String> {
    let failed = !record.is_success();
    let reply = record.output_text.clone();
    shared.progress.finished_one(warmup, failed);
    // A turn cancelled by a stop or the grace period ends the
    // conversation with the run; any other failure skips the rest.
    let cancelled = record.error_kind == Some(ErrorKind::Cancelled);
    let failure = (failed && !cancelled).then(|| why_the_rest_is_skipped(&record, turn_index));
    send_record(shared, record);
    if let Some(why) = failure {
        // Without the reply there is no honest history for the next
        // turn: the rest of the conversation is recorded as skipped.
        skip_turns(shared, conv, turn_index + 1, warmup, &why);
    }
    (!failed).then_some(reply)
}

/// The record of an arrival due inside the duration that the dispatcher,
/// on a host too busy to keep up, woke for only after the grace period
/// had ended: claimed, never sent.
fn arrival_after_the_grace_period(shared: &Shared, phase: &Phase, conv: DatasetRow<'_>) {
    let request_index = shared.request_index.fetch_add(1, Ordering::Relaxed);
    let why = "not sent: due inside the duration, but dispatched only after the grace period \
               had ended (the client's host fell behind its schedule)";
    let at = (ErrorKind::Cancelled, why);
    let record = cancelled_record(
        shared,
        conv,
        0,
        request_index,
        phase.warmup,
        Instant::now(),
        at,
    );
    recorded_reply(shared, (conv, 0), phase.warmup, record);
}

/// Why the turns after a failed turn `turn_index` are not sent.
fn why_the_rest_is_skipped(record: &RequestRecord, turn_index: usize) -> String {
    match record.error_kind {
        Some(ErrorKind::ClientCancelled) => format!(
            "not sent: turn {} of this conversation was cancelled on purpose (--request-cancellation-rate)",
            turn_index + 1
        ),
        kind => format!(
            "not sent: turn {} of this conversation failed ({})",
            turn_index + 1,
            kind.map_or("error", ErrorKind::as_str)
        ),
    }
}

/// Why turn `turn_index` is not sent under user-centric pacing: its user
/// joined the run's opening steady state with fewer turns left.
fn past_the_users_turns(pace: Option<&UserPace>, turn_index: usize) -> Option<String> {
    let left = pace?.turns;
    (turn_index >= left).then(|| {
        format!(
            "not sent: this conversation's user was mid-session when the phase began, with {left} \
             turn(s) left (--user-centric-rate's opening steady state)"
        )
    })
}

/// The wait before a later turn: the user's gap under user-centric
/// pacing (its last turn's planned send plus the gap, or now if that
/// passed), else the think time (`Load::turn_delay`); false when the run
/// stopped or the grace period ended meanwhile.
async fn think(
    shared: &Shared,
    phase: &Phase,
    (conv, turn_index): (DatasetRow<'_>, usize),
    pace: Option<&mut UserPace>,
) -> bool {
    let load = &shared.run.load;
    let until = match (pace, load.turn_delay) {
        (Some(pace), _) => {
            pace.next_send = (pace.next_send + pace.gap).max(Instant::now());
            pace.next_send
        }
        (None, Some(delay)) => {
            Instant::now() + delay.before(load.random_seed, conv.index, turn_index)
        }
        (None, None) => return true,
    };
    tokio::select! {
        _ = tokio::time::sleep_until(tokio::time::Instant::from_std(until)) => true,
        _ = shared.stop.stopped() => false,
        _ = phase.cancel.stopped() => false,
    }
}

/// One turn sent and recorded: the record of its exchange (its raw body
/// exported as it came), or of its cancellation by a stop or the grace
/// period.
async fn send_turn(
    shared: &Shared,
    phase: &Phase,
    client: &crate::exchange::HttpClient,
    (conv, turn_index): (DatasetRow<'_>, usize),
    history: &[Message],
) -> RequestRecord {
    let warmup = phase.warmup;
    let request_index = shared.request_index.fetch_add(1, Ordering::Relaxed);
    let started = Instant::now();
    let body = shared
        .first_turn_bodies
        .body(&shared.run.target, conv, turn_index, history);
    let load = &shared.run.load;
    let cancel_after = load
        .cancellation
        .filter(|c| !warmup && c.chooses(load.random_seed, request_index))
        .map(|c| c.delay);
    let slot = match &phase.prefill {
        Some(gate) => match prefill_slot(shared, phase, gate).await {
            Some(slot) => Some(slot),
            None => {
                let at = (conv, turn_index, request_index, warmup, started);
                return not_sent_for_a_slot(shared, at);
            }
        },
        None => None,
    };
    // The wait for a slot is the client's, not the request's.
    let started = if slot.is_some() {
        Instant::now()
    } else {
        started
    };
    shared.progress.sending_one();
    let exchanged = exchange_or_stop(shared, client, phase, (body, slot), cancel_after).await;
    shared.progress.answered_one();
    match exchanged {
        Ok(mut ex) => {
            export_raw(shared, &mut ex, (conv, turn_index, request_index, warmup));
            export_http_trace(shared, &mut ex, (conv, turn_index, request_index, warmup));
            to_record(shared, conv, turn_index, request_index, warmup, ex)
        }
        Err((kind, why)) => cancelled_record(
            shared,
            conv,
            turn_index,
            request_index,
            warmup,
            started,
            (kind, &why),
        ),
    }
}

/// Sends one request and waits for its response, unless the run stops,
/// the grace period ends or the request's chosen cancellation comes first:
/// then `Err` says which. `biased`: a response that is complete wins over a
/// stop that came in the same wake-up; and a stop lets the response's bytes
/// already here (or arriving within [`STOP_DRAIN`]) finish it: a request
/// the server answered before the stop is a success, not `cancelled`. A
/// cancellation on purpose drops the connection at once, as a user
/// closing the tab would.
async fn exchange_or_stop(
    shared: &Shared,
    client: &crate::exchange::HttpClient,
    phase: &Phase,
    (body, slot): (bytes::Bytes, Option<tokio::sync::OwnedSemaphorePermit>),
    cancel_after: Option<std::time::Duration>,
) -> Result<crate::exchange::Exchange, (ErrorKind, String)> {
    let exchange = client.exchange_holding(&shared.run.target, body, slot);
    tokio::pin!(exchange);
    let stopped = |why: &str| (ErrorKind::Cancelled, why.to_string());
    tokio::select! {
        biased;
        ex = &mut exchange => Ok(ex),
        _ = shared.stop.stopped() => {
            tokio::time::timeout(STOP_DRAIN, &mut exchange)
                .await
                .map_err(|_| stopped("the run was stopped while this request was in flight"))
        }
        _ = phase.cancel.stopped() => {
            tokio::time::timeout(STOP_DRAIN, &mut exchange).await.map_err(|_| {
                stopped(if phase.warmup {
                    "still in flight when the grace period after the warmup duration ended"
                } else {
                    "still in flight when the grace period after the benchmark duration ended"
                })
            })
        }
        _ = sleep_until_opt(cancel_after.map(|d| tokio::time::Instant::now() + d)), if cancel_after.is_some() => {
            let after = cancel_after.unwrap_or_default().as_secs_f64();
            Err((
                ErrorKind::ClientCancelled,
                format!("cancelled on purpose {after:.3} s after it was sent (--request-cancellation-rate)"),
            ))
        }
    }
}

/// The exchange's raw body (`--export-level raw`), exported as it came.
fn export_raw(
    shared: &Shared,
    ex: &mut crate::exchange::Exchange,
    (conv, turn_index, request_index, warmup): (DatasetRow<'_>, usize, u64, bool),
) {
    if let Some(body) = ex.raw.take() {
        send_raw(
            shared,
            RawResponse {
                run_id: shared.run.run_id.clone(),
                request_index,
                conversation_id: conv.id.clone(),
                turn_index: turn_index as u32,
                warmup,
                http_status: ex.status,
                content_type: ex.content_type.take(),
                body,
            },
        );
    }
}

/// The exchange's HTTP trace (`--export-http-trace`), where the lean
/// client carried it as far as a response head.
fn export_http_trace(
    shared: &Shared,
    ex: &mut crate::exchange::Exchange,
    (conv, turn_index, request_index, warmup): (DatasetRow<'_>, usize, u64, bool),
) {
    if !shared.run.export_http_trace {
        return;
    }
    let Some(wire) = &ex.wire else { return };
    let key = crate::http_trace::TraceKey {
        run_id: &shared.run.run_id,
        request_index,
        conversation_id: &conv.id,
        turn_index: turn_index as u32,
        warmup,
    };
    let unix = |at: Instant| shared.clock.unix_ns(at);
    let line = HttpTraceLine::of(key, wire, ex.wire_detail.take(), ex.status, &unix);
    let _ = shared.sink.send(RecorderMsg::HttpTrace(Box::new(line)));
}

/// The record of a turn the run stopped while it waited for a prefill
/// slot: claimed, never sent.
fn not_sent_for_a_slot(
    shared: &Shared,
    (conv, turn_index, request_index, warmup, started): (DatasetRow<'_>, usize, u64, bool, Instant),
) -> RequestRecord {
    let why = "the run stopped before a prefill slot was free (--prefill-concurrency): not sent";
    let kind = (ErrorKind::Cancelled, why);
    cancelled_record(
        shared,
        conv,
        turn_index,
        request_index,
        warmup,
        started,
        kind,
    )
}

/// A prefill slot of `gate`; `None` when the run stops or the grace period
/// ends first.
async fn prefill_slot(
    shared: &Shared,
    phase: &Phase,
    gate: &super::prefill::PrefillGate,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    tokio::select! {
        slot = gate.enter() => Some(slot),
        _ = shared.stop.stopped() => None,
        _ = phase.cancel.stopped() => None,
    }
}

/// Records turns `from..` of `conv` as skipped (never sent), saying `why`.
fn skip_turns(shared: &Shared, conv: DatasetRow<'_>, from: usize, warmup: bool, why: &str) {
    for later in from..conv.turns.len() {
        let request_index = shared.request_index.fetch_add(1, Ordering::Relaxed);
        let now = shared.clock.unix_ns(Instant::now());
        let skipped = RequestRecord {
            start_unix_ns: now,
            end_unix_ns: now,
            error_kind: Some(ErrorKind::Skipped),
            error_message: Some(why.to_string()),
            ..base_record(shared, conv, later, request_index, warmup)
        };
        if !warmup {
            shared.progress.skipped.fetch_add(1, Ordering::Relaxed);
        }
        send_record(shared, skipped);
    }
}

/// Hands a raw response body to the recorder (which writes and drops it).
/// If the recorder is gone the records file failed: [`send_record`] stops
/// the run.
fn send_raw(shared: &Shared, raw: RawResponse) {
    let _ = shared.sink.send(RecorderMsg::Raw(Box::new(raw)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_arrival_due_inside_the_duration_is_claimed_however_late_it_is_woken() {
        let now = Instant::now();
        let deadline = now - Duration::from_millis(5);
        let d = Dispatcher::new(None, None, Some(deadline));
        // A worker free now, after the deadline: nothing to claim.
        assert_eq!(d.next_session(None), None);
        assert!(!d.claim_request(None));
        // An arrival due 1 ms before the deadline, woken after it: sent.
        let due = deadline - Duration::from_millis(1);
        assert_eq!(d.next_session(Some(due)), Some(0));
        assert!(d.claim_request(Some(due)));
        // Due at the deadline: never.
        assert_eq!(d.next_session(Some(deadline)), None);
        assert!(!d.claim_request(Some(deadline)));
    }

    #[test]
    fn the_request_limit_holds_for_late_arrivals_too() {
        let deadline = Instant::now() + Duration::from_secs(60);
        let d = Dispatcher::new(Some(3), Some(2), Some(deadline));
        let due = Some(Instant::now());
        assert!(d.claim_request(due) && d.claim_request(due));
        assert!(!d.claim_request(due));
        assert!(d.closed());
    }
}
