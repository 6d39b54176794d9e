//! Load shapes against the simulated server: request rate (constant and
//! Poisson), the concurrency cap, the benchmark duration and its grace period.

use crate::common;

use std::time::Duration;

use common::*;
use speedbench_client::{Arrival, Load, RunOutcome, RunStatus};
use speedbench_dataset::{Conversation, Dataset};
use speedbench_record::{ErrorKind, RequestRecord};
use speedbench_sim::{SimConfig, SimServer};

async fn sim(ttft_ms: f64, step_ms: f64) -> SimServer {
    let config = SimConfig::default()
        .with_ttft_ms(ttft_ms)
        .with_step_ms(step_ms)
        .with_output_tokens(8, 16);
    start_sim(config).await
}

async fn run(server: &SimServer, dataset: Dataset, load: Load) -> (RunOutcome, Vec<RequestRecord>) {
    let dir = tempfile::tempdir().unwrap();
    profile_outcome(dir.path(), dataset, target(&server.url()), load).await
}

fn sorted_starts(records: &[RequestRecord]) -> Vec<i64> {
    let mut s: Vec<i64> = records.iter().map(|r| r.start_unix_ns).collect();
    s.sort_unstable();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn constant_rate_starts_requests_on_schedule_never_early() {
    let server = sim(0.0, 0.0).await;
    let load = Load::request_rate(50.0)
        .with_arrival(Arrival::Constant)
        .with_request_count(15);
    // The phase starts after this instant, so arrival i cannot be sent
    // before it plus i * 20 ms: a hard bound however loaded the machine.
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64;
    let (outcome, records) = run(&server, single_turns(4), load).await;
    assert_eq!(records.len(), 15);
    assert!(records.iter().all(|r| r.is_success()));
    let starts = sorted_starts(&records);
    for (i, s) in starts.iter().enumerate() {
        let offset = s - before;
        assert!(offset >= i as i64 * 20_000_000, "{i}: {offset}");
    }
    // Lateness does not accumulate: absolute deadlines. 0.5 s of headroom
    // for a loaded CI box; a scheduler that slept gap after gap from the
    // previous dispatch would still pass, the lower bounds are the point.
    let span = starts[14] - starts[0];
    assert!(span < 280_000_000 + 500_000_000, "span {span} ns");
    let sched = outcome.schedule.expect("rate mode reports lateness");
    assert_eq!(sched.arrivals, 15);
    assert!(sched.lateness_p50_ns <= sched.lateness_max_ns);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn poisson_with_a_concurrency_cap_never_exceeds_the_cap() {
    let server = sim(30.0, 1.0).await;
    let load = Load::request_rate(500.0)
        .with_arrival(Arrival::Poisson)
        .with_random_seed(7)
        .with_max_concurrency(2)
        .with_request_count(8);
    let (outcome, records) = run(&server, single_turns(8), load).await;
    assert_eq!(records.len(), 8);
    assert!(records.iter().all(|r| r.is_success()));
    // In flight at the moment each request started (itself included).
    for r in &records {
        let in_flight = records
            .iter()
            .filter(|o| o.start_unix_ns <= r.start_unix_ns && r.start_unix_ns < o.end_unix_ns)
            .count();
        assert!(in_flight <= 2, "{in_flight} requests in flight at once");
    }
    // 500/s offered against 2 slots of 30+ ms each: arrivals queue for slots.
    let sched = outcome.schedule.unwrap();
    assert!(sched.lateness_max_ns > 30_000_000, "{sched:?}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_mode_runs_the_turns_of_a_conversation_in_order() {
    let server = sim(0.0, 0.0).await;
    let dataset = Dataset {
        name: "mt".into(),
        conversations: (0..3)
            .map(|i| Conversation {
                id: format!("c{i}"),
                category: None,
                preamble: vec![],
                turns: vec![format!("[c{i}] one"), "two".into(), "three".into()],
                ..Default::default()
            })
            .collect(),
    };
    let load = Load::request_rate(200.0);
    let (outcome, records) = run(&server, dataset, load).await;
    assert_eq!(records.len(), 9);
    assert_eq!(
        outcome.schedule.unwrap().arrivals,
        3,
        "rate counts conversation starts"
    );
    for c in ["c0", "c1", "c2"] {
        let turns: Vec<_> = records.iter().filter(|r| r.conversation_id == c).collect();
        assert_eq!(
            turns.iter().map(|r| r.turn_index).collect::<Vec<_>>(),
            [0, 1, 2]
        );
        assert!(
            turns
                .windows(2)
                .all(|w| w[0].end_unix_ns <= w[1].start_unix_ns)
        );
    }
    assert_eq!(server.ground_truth().requests, 9);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_duration_stops_dispatch_and_in_flight_requests_finish() {
    let server = sim(0.0, 2.0).await;
    let load = Load::closed_loop(2).with_benchmark_duration(Duration::from_millis(300));
    let (outcome, records) = run(&server, single_turns(3), load).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    // The dataset recycles until time is up: more requests than rows.
    assert!(records.len() > 3, "{}", records.len());
    assert!(records.iter().all(|r| r.is_success()));
    // No request starts after the duration: a start is its first write,
    // which follows its dispatch (before the deadline) by the time a
    // worker takes to write it; the first start comes that long after the
    // phase began. 25 ms covers that on a busy 2-core machine; a dispatch
    // that went on past the deadline shows as whole requests (tens of ms).
    let starts = sorted_starts(&records);
    assert!(starts[starts.len() - 1] - starts[0] < 325_000_000);
    assert_eq!(server.ground_truth().requests, records.len() as u64);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_outliving_the_grace_period_are_cancelled_rows() {
    let server = sim(2_000.0, 0.0).await;
    let load = Load::request_rate(100.0)
        .with_arrival(Arrival::Constant)
        .with_benchmark_duration(Duration::from_millis(50))
        .with_grace_period(Duration::from_millis(100));
    let started = std::time::Instant::now();
    let (outcome, records) = run(&server, single_turns(2), load).await;
    // Without the grace-period cancel the run would last the server's 2 s TTFT.
    assert!(started.elapsed() < Duration::from_millis(1_500));
    // Nothing succeeded: the run failed (it was not interrupted).
    assert_eq!(
        (outcome.status, outcome.failure.as_deref()),
        (
            RunStatus::Failed,
            Some("no request succeeded (5 of 5 failed)")
        )
    );
    assert_eq!(records.len(), 5, "arrivals at 0, 10, .., 40 ms");
    for r in &records {
        assert_eq!(r.error_kind, Some(ErrorKind::Cancelled));
        assert!(r.error_message.as_deref().unwrap().contains("grace period"));
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arrivals_queued_past_the_grace_period_are_rows_never_sent() {
    // One slot: the arrival at 0 ms holds it through the server's 2 s TTFT
    // until the grace period cancels it at 150 ms; the four arrivals due at
    // 10..40 ms, inside the duration, get the slot only then. Each is a row
    // saying it was not sent, not a silent gap.
    let server = sim(2_000.0, 0.0).await;
    let load = Load::request_rate(100.0)
        .with_arrival(Arrival::Constant)
        .with_max_concurrency(1)
        .with_benchmark_duration(Duration::from_millis(50))
        .with_grace_period(Duration::from_millis(100));
    let (outcome, records) = run(&server, single_turns(5), load).await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(records.len(), 5, "arrivals at 0, 10, .., 40 ms");
    let not_sent = |r: &&RequestRecord| {
        r.error_message
            .as_deref()
            .is_some_and(|m| m.starts_with("not sent: due inside the duration"))
    };
    assert_eq!(records.iter().filter(not_sent).count(), 4);
    for r in &records {
        assert_eq!(r.error_kind, Some(ErrorKind::Cancelled));
        assert!(r.error_message.as_deref().unwrap().contains("grace period"));
    }
    // Only the first reached the server (which counts answers it
    // finished: none).
    assert_eq!(server.ground_truth().arrivals.len(), 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whitespace_only_turns_are_skipped_with_the_rest_of_their_conversation() {
    let server = sim(0.0, 0.0).await;
    let conv = |id: &str, turns: &[&str]| Conversation {
        id: id.into(),
        category: Some("qa".into()),
        preamble: Vec::new(),
        turns: turns.iter().map(|t| t.to_string()).collect(),
        ..Default::default()
    };
    let dataset = Dataset {
        name: "blank".into(),
        conversations: vec![
            conv("a", &["Hello there", "And more"]),
            conv("b", &["  \n\t", "Never sent"]),
            conv("c", &["First", " "]),
        ],
    };
    let (_, mut records) = run(&server, dataset, Load::closed_loop(1)).await;
    records.sort_by_key(|r| (r.conversation_id.clone(), r.turn_index));
    // Every turn the user gave is a row; only the four real turns were sent.
    assert_eq!(records.len(), 6);
    assert_eq!(server.ground_truth().requests, 3);
    let skipped: Vec<(&str, u32, &str)> = records
        .iter()
        .filter(|r| r.error_kind == Some(ErrorKind::Skipped))
        .map(|r| {
            (
                r.conversation_id.as_str(),
                r.turn_index,
                r.error_message.as_deref().unwrap(),
            )
        })
        .collect();
    let blank =
        |n: u32| format!("not sent: turn {n} of this conversation is empty or whitespace only");
    assert_eq!(
        skipped,
        [
            ("b", 0, blank(1).as_str()),
            ("b", 1, blank(1).as_str()),
            ("c", 1, blank(2).as_str()),
        ]
    );
    server.shutdown().await;
}

/// The most requests in flight at once among `records`.
fn most_in_flight(records: &[&RequestRecord]) -> usize {
    records
        .iter()
        .map(|r| {
            records
                .iter()
                .filter(|o| o.start_unix_ns <= r.start_unix_ns && o.end_unix_ns > r.start_unix_ns)
                .count()
        })
        .max()
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warmup_concurrency_warms_up_closed_loop_whatever_the_measured_rate() {
    // A measured rate of one request every 2 s: a warmup in that shape
    // would have one request in flight at a time (each takes ~100 ms).
    let server = sim(100.0, 1.0).await;
    let load = Load::request_rate(0.5)
        .with_arrival(Arrival::Constant)
        .with_request_count(1)
        .with_warmup_requests(6)
        .with_warmup_concurrency(3);
    let (outcome, records) = run(&server, single_turns(6), load).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let warmup: Vec<&RequestRecord> = records.iter().filter(|r| r.warmup).collect();
    assert_eq!((warmup.len(), records.len()), (6, 7));
    assert!(warmup.iter().all(|r| r.is_success()));
    // Closed loop at 3: never more than 3 at once, and 3 at once at some
    // moment (the three workers start together and each request takes
    // 100 ms, far longer than starting three tasks).
    assert_eq!(most_in_flight(&warmup), 3);
    // The measured phase keeps its own shape: its arrival schedule.
    assert_eq!(outcome.schedule.expect("rate mode").arrivals, 1);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_summary_level_keeps_the_statistics_and_lets_the_records_go() {
    let server = sim(0.0, 0.0).await;
    let dir = tempfile::tempdir().unwrap();
    let run =
        speedbench_client::ProfileRun::new(single_turns(3), target(&server.url()), dir.path())
            .with_load(Load::closed_loop(2).with_request_count(6))
            .with_export_level(speedbench_client::ExportLevel::Summary);
    let outcome = speedbench_client::run_profile(
        run,
        speedbench_client::StopHandle::new(),
        std::sync::Arc::new(speedbench_client::Progress::default()),
    )
    .await
    .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    assert!(outcome.records_removed && !outcome.records_path.exists());
    // Statistics only, as asked: the records are not held in memory either.
    assert!(outcome.read_back.is_none());
    let summary: speedbench_client::RunSummary =
        serde_json::from_str(&std::fs::read_to_string(outcome.summary_path.unwrap()).unwrap())
            .unwrap();
    assert_eq!(summary.metrics.counts.total, 6);
}
