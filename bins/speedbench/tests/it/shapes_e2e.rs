//! Load shapes over time, each checked against the simulator's own log of
//! when requests arrived and which answers were abandoned: AIPerf's rate
//! ramp and rate series, vLLM's ramp over the requests, gamma (bursty)
//! arrivals, the concurrency ramp and cancellations on purpose; and bad
//! shapes refused before anything is sent.

use crate::common;

use std::path::Path;

use common::*;
use speedbench_client::{Arrival, ArrivalSchedule, RateCurve, RatePoint};
use speedbench_record::ErrorKind;
use speedbench_sim::{GroundTruth, SimConfig};

/// A dataset of `n` single-turn rows, `q{i}` asking `question {i}`.
fn rows(dir: &Path, n: usize) -> std::path::PathBuf {
    let path = dir.join("rows.jsonl");
    let text: String = (0..n)
        .map(|i| format!("{{\"question_id\": \"q{i}\", \"turns\": [\"question {i}\"]}}\n"))
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs `profile` against `server` over `n` rows with `extra` flags; the
/// run's directory.
async fn profile(
    server: &speedbench_sim::SimServer,
    dir: &Path,
    n: usize,
    extra: &[&str],
) -> (std::process::Output, std::path::PathBuf) {
    profile_file(server, dir, &rows(dir, n), extra).await
}

/// [`profile`] over the rows of `input`.
async fn profile_file(
    server: &speedbench_sim::SimServer,
    dir: &Path,
    input: &Path,
    extra: &[&str],
) -> (std::process::Output, std::path::PathBuf) {
    let out_dir = dir.join("run");
    let url = server.url();
    let mut args = vec![
        "profile",
        "--url",
        &url,
        "--model",
        "m",
        "--input-file",
        input.to_str().unwrap(),
        "--no-server-metrics",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = run(&args).await;
    (out, out_dir)
}

/// The simulator's arrival times in time order, seconds from the first.
/// (Its log is in the order it handled them: two requests arriving within
/// microseconds of each other, as bursty arrivals do, may be logged the
/// other way round.)
fn arrival_offsets(truth: &GroundTruth) -> Vec<f64> {
    let mut at: Vec<u64> = truth.arrivals.iter().map(|a| a.at_unix_ns).collect();
    at.sort_unstable();
    let first = at.first().copied().unwrap_or(0);
    at.iter().map(|t| (t - first) as f64 / 1e9).collect()
}

/// Each arrival within `tolerance_s` of its scheduled offset; on a loaded
/// host one or two may come later, by no more than the lateness the run
/// itself reported (`schedule: ... max X ms` in `out`'s stderr): a late
/// send is said, never hidden.
fn assert_on_schedule(got: &[f64], want: &[f64], tolerance_s: f64, out: &std::process::Output) {
    assert_eq!(got.len(), want.len());
    let stderr = String::from_utf8_lossy(&out.stderr);
    let reported_late_s = stderr
        .lines()
        .find_map(|l| l.strip_prefix("schedule: ")?.split("max ").nth(1))
        .and_then(|v| v.trim_end_matches(" ms").parse::<f64>().ok())
        .map_or(0.0, |ms| ms / 1e3);
    let mut said_late = 0;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let on_time = (g - w).abs() < tolerance_s;
        let reported = *g > *w && g - w < reported_late_s + tolerance_s;
        said_late += usize::from(!on_time && reported);
        assert!(
            on_time || reported,
            "arrival {i} at {g:.4} s, scheduled at {w:.4} s (reported late by at most {reported_late_s:.4} s)\ngot {got:?}\nwant {want:?}"
        );
    }
    assert!(
        said_late <= 2,
        "{said_late} arrivals late\ngot {got:?}\nwant {want:?}"
    );
}

/// A fast simulator: every answer within a few milliseconds.
fn quick() -> SimConfig {
    SimConfig::speed_bench_demo().with_output_tokens(2, 4)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_ramp_and_a_vllm_ramp_send_each_request_at_its_time() {
    // AIPerf's ramp: 40/s reached over 1 s from 40 × 0.1 / 1 = 4/s;
    // constant spacing, so arrival i is where the curve expects i.
    let server = sim(quick()).await;
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = profile(
        &server,
        dir.path(),
        60,
        &[
            "--request-rate",
            "40",
            "--request-rate-ramp-duration",
            "1",
            "--arrival",
            "constant",
        ],
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    let want: Vec<f64> =
        ArrivalSchedule::following(RateCurve::ramped(40.0, 1.0), Arrival::Constant, 0)
            .take(60)
            .map(|d| d.as_secs_f64())
            .collect();
    // By hand: the ramp's expected count at 1 s is (4 + 40) / 2 = 22; the
    // 23rd arrival (index 22) is at 1 s, then every 25 ms.
    assert!((want[22] - 1.0).abs() < 1e-9 && (want[23] - 1.025).abs() < 1e-9);
    let truth = server.ground_truth();
    assert_on_schedule(&arrival_offsets(&truth), &want, 0.02, &out);
    assert_eq!(truth.requests_log.len(), 60);

    // vLLM's linear ramp from 10/s to 50/s over 21 requests: gap i at
    // 10 + 40 × i / 20 per second.
    let server = sim(quick()).await;
    let dir = tempfile::tempdir().unwrap();
    let (out, run_dir) = profile(
        &server,
        dir.path(),
        21,
        &[
            "--ramp-up-strategy",
            "linear",
            "--ramp-up-start-rps",
            "10",
            "--ramp-up-end-rps",
            "50",
            "--arrival",
            "constant",
        ],
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    let mut want = vec![0.0];
    for i in 1..21 {
        let rate = 10.0 + 40.0 * f64::from(i) / 20.0;
        want.push(want[want.len() - 1] + 1.0 / rate);
    }
    assert_on_schedule(&arrival_offsets(&server.ground_truth()), &want, 0.02, &out);
    // The run says what it ran.
    let run_json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("run.json")).unwrap()).unwrap();
    let client = run_json.pointer("/config/client").unwrap();
    assert_eq!(client["ramp_up_strategy"], "linear");
    assert_eq!(client["request_rate"], serde_json::Value::Null, "{client}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_series_steps_the_rate() {
    // 10/s for a second, then 40/s: constant spacing gives 10 arrivals in
    // the first second and 40 in the next, each at its time.
    let server = sim(quick()).await;
    let dir = tempfile::tempdir().unwrap();
    let series = dir.path().join("series.json");
    std::fs::write(
        &series,
        r#"{"points": [{"time_s": 0, "qps": 10}, {"time_s": 1, "qps": 10}, {"time_s": 1.000001, "qps": 40}]}"#,
    )
    .unwrap();
    let (out, _) = profile(
        &server,
        dir.path(),
        50,
        &[
            "--request-rate-series",
            series.to_str().unwrap(),
            "--arrival",
            "constant",
        ],
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    let mut want: Vec<f64> = (0..10).map(|i| f64::from(i) / 10.0).collect();
    want.extend((0..40).map(|i| 1.0 + f64::from(i) / 40.0));
    // The schedule's own curve agrees with the hand-made one.
    let curve = RateCurve::new(vec![
        RatePoint {
            time_s: 0.0,
            rate: 10.0,
        },
        RatePoint {
            time_s: 1.0,
            rate: 10.0,
        },
        RatePoint {
            time_s: 1.000001,
            rate: 40.0,
        },
    ])
    .unwrap();
    for (i, w) in want.iter().enumerate() {
        assert!((curve.time_of(i as f64) - w).abs() < 1e-4, "{i}");
    }
    assert_on_schedule(&arrival_offsets(&server.ground_truth()), &want, 0.02, &out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gamma_arrivals_are_as_bursty_as_asked() {
    // Gamma gaps of shape k have a coefficient of variation of 1/sqrt(k):
    // 2 at k = 0.25, 0.5 at k = 4; the mean rate holds either way. The
    // run follows the seeded schedule arrival by arrival (late only by what
    // it reports), so a busy host's late sends, which bunch arrivals up,
    // cannot pass for burstiness or hide the lack of it.
    for (smoothness, cv) in [(0.25, 2.0), (4.0, 0.5)] {
        let server = sim(quick()).await;
        let dir = tempfile::tempdir().unwrap();
        let k = smoothness.to_string();
        let (out, _) = profile(
            &server,
            dir.path(),
            300,
            &[
                "--request-rate",
                "150",
                "--vllm-burstiness",
                &k,
                "--random-seed",
                "3",
            ],
        )
        .await;
        assert!(out.status.success(), "{out:?}");
        let schedule: Vec<f64> = ArrivalSchedule::new(150.0, Arrival::Gamma { smoothness }, 3)
            .take(300)
            .map(|d| d.as_secs_f64())
            .collect();
        let want: Vec<f64> = schedule.iter().map(|t| t - schedule[0]).collect();
        let gaps: Vec<f64> = want.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd =
            (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (gaps.len() - 1) as f64).sqrt();
        assert!((mean * 150.0 - 1.0).abs() < 0.25, "k={k}: mean gap {mean}");
        let got = sd / mean;
        assert!((got / cv - 1.0).abs() < 0.3, "k={k}: cv {got}, want {cv}");
        let at = arrival_offsets(&server.ground_truth());
        assert_on_schedule(&at, &want, 0.02, &out);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_concurrency_ramp_opens_one_worker_at_a_time() {
    // Each request takes about 100 ms; 4 workers open at 0, 0.4, 0.8 and
    // 1.2 s. In the first 0.35 s one worker sends about 4 requests; after
    // the ramp, four send about 40 a second.
    let config = quick().with_ttft_ms(100.0).with_step_ms(0.0);
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let (out, _) = profile(
        &server,
        dir.path(),
        80,
        &["--concurrency", "4", "--concurrency-ramp-duration", "1.2"],
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    let at = arrival_offsets(&server.ground_truth());
    let early = at.iter().filter(|t| **t < 0.35).count();
    let late = at.iter().filter(|t| (1.3..1.8).contains(*t)).count();
    assert!(
        early <= 5,
        "one worker at first: {early} requests in 0.35 s\n{at:?}"
    );
    assert!(
        late >= 14,
        "four workers after the ramp: {late} requests in 0.5 s\n{at:?}"
    );
    // No more than one new in-flight request per worker opened: at any
    // arrival, the arrivals in the 90 ms before it are at most the workers
    // open then.
    for (i, t) in at.iter().enumerate() {
        let open = 1 + ((t + 0.02) / 0.4).floor().min(3.0) as usize;
        let recent = at[..i].iter().filter(|u| t - *u < 0.09).count();
        assert!(
            recent < open,
            "at {t:.3} s: {recent} requests in flight, {open} workers open"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelled_requests_are_counted_apart_and_the_server_saw_them_abandoned() {
    // Streams take ~300 ms; half the requests are dropped 50 ms after
    // sending.
    let config = quick().with_ttft_ms(300.0);
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let (out, run_dir) = profile(
        &server,
        dir.path(),
        24,
        &[
            "--streaming",
            "--concurrency",
            "8",
            "--request-cancellation-rate",
            "50",
            "--request-cancellation-delay",
            "0.05",
        ],
    )
    .await;
    assert!(
        out.status.success(),
        "cancellations are no failure: {out:?}"
    );
    let records = read_run(&run_dir).unwrap().records;
    assert_eq!(records.len(), 24);
    let cancelled: Vec<&str> = records
        .iter()
        .filter(|r| r.error_kind == Some(ErrorKind::ClientCancelled))
        .map(|r| r.conversation_id.as_str())
        .collect();
    assert!((4..=20).contains(&cancelled.len()), "{}", cancelled.len());
    for r in &records {
        assert!(
            r.is_success() || r.error_kind == Some(ErrorKind::ClientCancelled),
            "{r:?}"
        );
        if r.error_kind == Some(ErrorKind::ClientCancelled) {
            // Dropped 50 ms after sending, long before the answer.
            assert!(
                (50_000_000..250_000_000).contains(&r.e2e_latency_ns),
                "{}",
                r.e2e_latency_ns
            );
            assert!(r.ttft_ns.is_none());
        } else {
            assert!(r.ttft_ns.is_some_and(|t| t <= r.e2e_latency_ns));
        }
    }
    // The server saw every request arrive, finished the others and had the
    // cancelled ones abandoned: the same requests, by their question.
    let truth = server.ground_truth();
    assert_eq!(truth.arrivals.len(), 24);
    let mut abandoned: Vec<String> = truth.abandoned.clone();
    abandoned.sort();
    let mut want: Vec<String> = cancelled
        .iter()
        .map(|id| format!("question {}", &id[1..]))
        .collect();
    want.sort();
    assert_eq!(abandoned, want);
    assert_eq!(truth.requests_log.len(), 24 - cancelled.len());
    // Counted apart: not failed, out of the latency figures.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        summary
            .pointer("/counts/client_cancelled")
            .and_then(|v| v.as_u64()),
        Some(cancelled.len() as u64)
    );
    assert_eq!(
        summary.pointer("/counts/failed").and_then(|v| v.as_u64()),
        Some(0)
    );
    assert_eq!(
        summary
            .pointer("/counts/succeeded")
            .and_then(|v| v.as_u64()),
        Some(24 - cancelled.len() as u64)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!(
            "Cancelled on purpose: {} request",
            cancelled.len()
        )),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_shapes_are_refused_before_anything_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let backwards = dir.path().join("backwards.json");
    std::fs::write(
        &backwards,
        r#"[{"time_s": 0, "qps": 2}, {"time_s": 5, "qps": 3}, {"time_s": 4, "qps": 1}]"#,
    )
    .unwrap();
    let backwards = backwards.to_str().unwrap().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--request-rate", "5", "--arrival-smoothness", "0"],
            "--arrival-smoothness",
        ),
        (
            vec![
                "--request-rate",
                "5",
                "--request-rate-ramp-duration",
                "20",
                "--benchmark-duration",
                "10",
            ],
            "longer than the benchmark duration",
        ),
        (
            vec!["--request-rate-series", &backwards],
            "point 2: time_s 4 is not after",
        ),
        (
            vec![
                "--ramp-up-strategy",
                "exponential",
                "--ramp-up-start-rps",
                "0",
                "--ramp-up-end-rps",
                "5",
                "--request-count",
                "9",
            ],
            "cannot start at 0",
        ),
        (
            vec![
                "--ramp-up-strategy",
                "linear",
                "--ramp-up-start-rps",
                "1",
                "--ramp-up-end-rps",
                "5",
                "--benchmark-duration",
                "5",
            ],
            "needs to know how many there are",
        ),
        (
            vec![
                "--ramp-up-strategy",
                "linear",
                "--ramp-up-start-rps",
                "1",
                "--ramp-up-end-rps",
                "5",
                "--request-rate",
                "3",
                "--request-count",
                "5",
            ],
            "leave --request-rate out",
        ),
        (
            vec!["--request-cancellation-rate", "120"],
            "--request-cancellation-rate",
        ),
        (
            vec!["--request-cancellation-delay", "1"],
            "needs --request-cancellation-rate",
        ),
        (
            vec!["--request-rate", "5", "--concurrency-ramp-duration", "3"],
            "needs a maximum concurrency",
        ),
    ];
    let server = sim(quick()).await;
    for (extra, message) in cases {
        let case_dir = tempfile::tempdir().unwrap();
        let (out, _) = profile(&server, case_dir.path(), 4, &extra).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{extra:?}");
        assert!(stderr.contains(message), "{extra:?}: {stderr}");
    }
    assert!(
        server.ground_truth().arrivals.is_empty(),
        "nothing was sent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn think_time_comes_between_a_reply_and_the_next_turn_only() {
    // Four two-turn conversations, one at a time, 200 ms of think time
    // (400 ms × the 0.5 ratio): each second turn reaches the server at
    // least 200 ms after its first; each new conversation starts at once.
    let server = sim(quick()).await;
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("talks.jsonl");
    let text: String = (0..4)
        .map(|i| {
            format!("{{\"question_id\": \"c{i}\", \"turns\": [\"talk {i}\", \"and then {i}\"]}}\n")
        })
        .collect();
    std::fs::write(&input, text).unwrap();
    let extra = [
        "--session-turn-delay-mean",
        "400",
        "--session-delay-ratio",
        "0.5",
    ];
    let (out, out_dir) = profile_file(&server, dir.path(), &input, &extra).await;
    assert!(out.status.success(), "{out:?}");
    let truth = server.ground_truth();
    assert_eq!(truth.arrivals.len(), 8);
    for pair in truth.arrivals.windows(2) {
        let gap_ms = (pair[1].at_unix_ns - pair[0].at_unix_ns) as f64 / 1e6;
        if pair[0].conversation == pair[1].conversation {
            assert!(
                gap_ms >= 200.0,
                "{}: second turn {gap_ms:.1} ms after the first",
                pair[0].conversation
            );
        } else {
            assert!(gap_ms < 150.0, "a new conversation waited {gap_ms:.1} ms");
        }
    }
    let records = read_run(&out_dir).unwrap().records;
    assert!(records.iter().all(|r| r.is_success()));
    assert_eq!(records.len(), 8);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_is_replayed_at_its_own_times() {
    // AIPerf's trace rows with text, out of order in the file, one past
    // the end offset; times from the first row (auto offset).
    let server = sim(quick()).await;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let rows = [
        (1_300.0, "third", 1),
        (1_000.0, "first", 3),
        (1_050.5, "second", 2),
        (1_700.0, "fourth", 1),
        (2_600.0, "too late", 1),
    ];
    let text: String = rows
        .iter()
        .map(|(t, prompt, out)| {
            format!("{{\"timestamp\": {t}, \"text_input\": \"{prompt}\", \"output_length\": {out}, \"hash_ids\": [1, 2]}}\n")
        })
        .collect();
    std::fs::write(&trace, text).unwrap();
    let extra = [
        "--fixed-schedule",
        "--fixed-schedule-auto-offset",
        "--fixed-schedule-end-offset",
        "2000",
    ];
    let (out, out_dir) = profile_file(&server, dir.path(), &trace, &extra).await;
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("1 of 5 rows lie outside the offsets' window"),
        "{stderr}"
    );
    let truth = server.ground_truth();
    let order: Vec<&str> = truth
        .arrivals
        .iter()
        .map(|a| a.conversation.as_str())
        .collect();
    assert_eq!(order, ["first", "second", "third", "fourth"]);
    assert_on_schedule(
        &arrival_offsets(&truth),
        &[0.0, 0.0505, 0.3, 0.7],
        0.02,
        &out,
    );
    // Each row's output length is its max_tokens: the server cut at it.
    for r in &truth.requests_log {
        let want = rows
            .iter()
            .find(|(_, p, _)| *p == r.conversation)
            .unwrap()
            .2;
        assert!(r.completion_tokens <= want, "{r:?}");
    }
    let records = read_run(&out_dir).unwrap().records;
    assert_eq!(records.len(), 4);
    assert!(records.iter().all(|r| r.is_success()));
    // How late each send was is said.
    let said = format!("{}{stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(
        said.contains("schedule: 4 arrivals, lateness p50"),
        "{said}"
    );
    // And kept in summary.json, in order.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out_dir.join("summary.json")).unwrap()).unwrap();
    let schedule = &summary["schedule"];
    assert_eq!(schedule["arrivals"], 4, "{summary}");
    let ns = |k: &str| schedule[k].as_u64().unwrap();
    assert!(ns("lateness_p50_ns") <= ns("lateness_p99_ns"));
    assert!(ns("lateness_p99_ns") <= ns("lateness_max_ns"));
    assert!(
        ns("lateness_max_ns") < 20_000_000,
        "within 20 ms: {schedule}"
    );

    // Rows that cannot be replayed are refused before anything is sent.
    let server = sim(quick()).await;
    for (row, message) in [
        (r#"{"text_input": "no time"}"#, "has no `timestamp`"),
        (
            r#"{"timestamp": 5, "input_length": 0, "hash_ids": [7]}"#,
            "`input_length` must be 1 to",
        ),
    ] {
        std::fs::write(&trace, format!("{row}\n")).unwrap();
        let refused = tempfile::tempdir().unwrap();
        let (out, _) = profile_file(&server, refused.path(), &trace, &["--fixed-schedule"]).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(message),
            "{row}: {stderr}"
        );
    }
    assert!(server.ground_truth().arrivals.is_empty());
}

/// AIPerf's `mooncake_trace` rows given by length (`input_length`,
/// `hash_ids`, no text): each prompt built to its length by the server's
/// `/tokenize`, rows naming the same block ids sharing those blocks' text
/// (blocks of `--isl-block-size` 16 here), every row sent at its time, each
/// asking for its `output_length`; all checked at the simulator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_given_by_length_is_built_with_its_shared_blocks() {
    let server = sim(quick()).await;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("mooncake.jsonl");
    let rows: [(u32, usize, &[u64], u32); 4] = [
        (0, 40, &[1, 2, 3], 4),
        (100, 35, &[1, 2, 4], 5),
        (200, 20, &[5], 3),
        (300, 50, &[1, 6], 2),
    ];
    let text: String = rows
        .iter()
        .map(|(t, len, ids, out)| {
            format!("{{\"timestamp\": {t}, \"input_length\": {len}, \"output_length\": {out}, \"hash_ids\": {ids:?}}}\n")
        })
        .collect();
    std::fs::write(&trace, text).unwrap();
    let extra = ["--fixed-schedule", "--isl-block-size", "16"];
    let (out, out_dir) = profile_file(&server, dir.path(), &trace, &extra).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("building the prompts of 4 trace rows given by `input_length`"),
        "{stderr}"
    );
    let truth = server.ground_truth();
    assert_on_schedule(&arrival_offsets(&truth), &[0.0, 0.1, 0.2, 0.3], 0.02, &out);
    // Each row's prompt, found by its length (all differ), as the server
    // read it.
    let prompt = |len: usize| -> Vec<&str> {
        let t = (truth.requests_log.iter())
            .find(|t| t.prompt_tokens as usize == len)
            .unwrap_or_else(|| panic!("no prompt of {len} tokens"));
        assert!(t.completion_tokens <= rows.iter().find(|r| r.1 == len).unwrap().3);
        t.conversation.split_whitespace().collect()
    };
    let (a, b, c, d) = (prompt(40), prompt(35), prompt(20), prompt(50));
    assert_eq!((a.len(), b.len(), c.len(), d.len()), (40, 35, 20, 50));
    assert_eq!(a[..32], b[..32], "blocks 1 and 2 are shared");
    assert_ne!(a[32..35], b[32..35], "blocks 3 and 4 differ");
    assert_eq!(a[..16], d[..16], "block 1 is shared");
    assert_ne!(a[..16], c[..16], "block 5 is not block 1");
    let records = read_run(&out_dir).unwrap().records;
    assert_eq!(records.len(), 4);
    assert!(records.iter().all(|r| r.is_success()));
}

/// A warmup by time (`--warmup-duration`, AIPerf's): closed-loop at its
/// concurrency until it ends, the rows recycling; the simulator's log holds
/// no warmup request that arrived after it; the ones in flight then finish
/// and are recorded before the measured phase starts. With
/// `--warmup-grace-period 0` those are cancelled instead: recorded as
/// cancelled warmup requests, and abandoned by the simulator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_warmup_by_time_sends_until_it_ends() {
    for grace in [None, Some("0")] {
        // About 0.2 s per answer: two workers in 1 s send some ten.
        let server = sim(SimConfig::speed_bench_demo()
            .with_ttft_ms(30.0)
            .with_step_ms(10.0))
        .await;
        let dir = tempfile::tempdir().unwrap();
        let mut flags = vec!["--warmup-duration", "1", "--warmup-concurrency", "2"];
        flags.extend(["--request-count", "3", "--concurrency", "1"]);
        if let Some(g) = grace {
            flags.extend(["--warmup-grace-period", g]);
        }
        let (out, run_dir) = profile(&server, dir.path(), 4, &flags).await;
        assert!(out.status.success(), "{out:?}");
        let records = read_run(&run_dir).unwrap().records;
        let (warmup, measured): (Vec<_>, Vec<_>) = records.iter().partition(|r| r.warmup);
        assert_eq!(measured.len(), 3);
        assert!(warmup.len() >= 4, "{} warmup requests", warmup.len());
        let first = warmup.iter().map(|r| r.start_unix_ns).min().unwrap();
        let deadline = first + 1_000_000_000;
        // Sent before the end (the first send may lag the phase's start).
        assert!(
            warmup
                .iter()
                .all(|r| r.start_unix_ns < deadline + 50_000_000)
        );
        let truth = server.ground_truth();
        assert_eq!(truth.arrivals.len(), records.len(), "each sent once");
        let measured_start = measured.iter().map(|r| r.start_unix_ns).min().unwrap();
        let warmup_end = warmup.iter().map(|r| r.end_unix_ns).max().unwrap();
        assert!(measured_start >= warmup_end, "the warmup drained first");
        let cancelled: Vec<_> = warmup
            .iter()
            .filter(|r| r.error_kind == Some(ErrorKind::Cancelled))
            .collect();
        match grace {
            None => assert!(warmup.iter().all(|r| r.is_success()), "waited for"),
            Some(_) => {
                // Both workers were mid-answer at the end.
                assert!(!cancelled.is_empty());
                assert!(
                    cancelled
                        .iter()
                        .all(|r| r.end_unix_ns < deadline + 300_000_000)
                );
                assert_eq!(truth.abandoned.len(), cancelled.len());
            }
        }
        for r in records.iter().filter(|r| r.is_success()) {
            assert!(r.ttft_ns.is_none_or(|t| t <= r.e2e_latency_ns));
        }
    }
}

/// `--prefill-concurrency 2` (AIPerf's) at concurrency 8 against a
/// simulator that takes 150 ms to the first token: by the simulator's own
/// clock (each request's arrival to its first content's write), never more
/// than two requests are before their first output at once; without the
/// limit all eight are. The wait for a slot is not in a request's TTFT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefill_concurrency_caps_requests_before_their_first_output() {
    for limit in [Some("2"), None] {
        let server = sim(SimConfig::speed_bench_demo()
            .with_ttft_ms(150.0)
            .with_step_ms(1.0))
        .await;
        let dir = tempfile::tempdir().unwrap();
        let mut flags = vec!["--concurrency", "8", "--streaming", "--request-count", "16"];
        if let Some(n) = limit {
            flags.extend(["--prefill-concurrency", n]);
        }
        let (out, run_dir) = profile(&server, dir.path(), 16, &flags).await;
        assert!(out.status.success(), "{out:?}");
        let truth = server.ground_truth();
        assert_eq!(truth.requests_log.len(), 16);
        let most = most_before_first_output(&truth);
        match limit {
            Some(_) => assert!(most <= 2, "{most} before their first output at once"),
            None => assert!(most >= 6, "{most} without a limit"),
        }
        for r in read_run(&run_dir).unwrap().records {
            assert!(r.is_success());
            let ttft = r.ttft_ns.unwrap();
            assert!(ttft <= r.e2e_latency_ns);
            assert!(ttft < 400_000_000, "TTFT {ttft} ns holds a wait for a slot");
        }
    }
}

/// The most requests the simulator had between arrival and its first
/// content's write at any instant.
fn most_before_first_output(truth: &GroundTruth) -> usize {
    let mut events: Vec<(u64, i32)> = Vec::new();
    for t in &truth.requests_log {
        let arrival = truth
            .arrivals
            .iter()
            .find(|a| a.conversation == t.conversation)
            .expect("its arrival")
            .at_unix_ns;
        let first = arrival + t.first_content_sent_ns.expect("streamed");
        events.extend([(arrival, 1), (first, -1)]);
    }
    // Ends before starts at the same instant.
    events.sort();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in events {
        now += d;
        most = most.max(now);
    }
    most as usize
}

/// The warmup's own concurrency ramp (`--warmup-concurrency-ramp-duration`,
/// AIPerf's warmup `concurrencyRamp`): against a simulator taking about
/// 0.5 s per request, the warmup's four workers open at 0, 0.1, 0.2 and
/// 0.3 s, so its four requests arrive that far apart; the measured phase,
/// without a ramp of its own, opens its four at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_warmup_ramps_its_own_concurrency() {
    let server = sim(quick().with_ttft_ms(500.0).with_step_ms(0.0)).await;
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--warmup-request-count",
        "4",
        "--warmup-concurrency",
        "4",
        "--warmup-concurrency-ramp-duration",
        "0.3",
        "--concurrency",
        "4",
    ];
    let (out, run_dir) = profile(&server, dir.path(), 4, &flags).await;
    assert!(out.status.success(), "{out:?}");
    let truth = server.ground_truth();
    let at = arrival_offsets(&truth);
    assert_eq!(at.len(), 8);
    assert_on_schedule(&at[..4], &[0.0, 0.1, 0.2, 0.3], 0.05, &out);
    // The measured four arrive together, after the warmup drained.
    let measured = &at[4..];
    assert!(
        measured.iter().all(|t| (t - measured[0]).abs() < 0.05),
        "{at:?}"
    );
    assert!(measured[0] > 0.75, "{at:?}");
    let records = read_run(&run_dir).unwrap().records;
    assert_eq!(records.iter().filter(|r| r.warmup).count(), 4);
}
