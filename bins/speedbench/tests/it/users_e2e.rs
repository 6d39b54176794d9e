//! User-centric pacing (`--user-centric-rate` with `--num-users`), checked
//! against the simulator's own log of when each conversation's turns
//! arrived: the opening steady state (users mid-session, staggered), each
//! user's turns a gap apart, users joining as others leave; the turns a
//! mid-session user no longer has recorded as skipped, saying why; bad
//! flags refused before anything is sent.

use crate::common;

use std::collections::BTreeMap;

use common::*;
use speedbench_record::ErrorKind;
use speedbench_sim::SimConfig;

/// `n` conversations of three turns, conversation `i`'s first turn `c{i}
/// opens` (the simulator's key for it).
fn conversations(dir: &std::path::Path, n: usize) -> std::path::PathBuf {
    let path = dir.join("talks.jsonl");
    let text: String = (0..n)
        .map(|i| {
            format!(
                "{{\"question_id\": \"c{i}\", \"turns\": [\"c{i} opens\", \"c{i} goes on\", \"c{i} ends\"]}}\n"
            )
        })
        .collect();
    std::fs::write(&path, text).unwrap();
    path
}

/// 4 users at 20 requests/s over 8 three-turn conversations: a stagger of
/// 50 ms, a gap of 4 / 20 = 200 ms between a user's turns. With 3 turns
/// the users' lifetime is 2 gaps; 4 and 2 share a factor, so AIPerf's
/// coprime step 3 places them: user 1 has none left, users 2, 3 and 4
/// have 1, 1 and 2 turns left and start 50, 100 and 150 ms in, a new user
/// with all 3 turns at 0. Each start books a successor turns × gap later:
/// at 250 (50 + 200), 300, 550 (150 + 400) and 600 ms (0 + 600).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_send_their_turns_a_gap_apart_from_a_steady_state() {
    let server = sim(SimConfig::speed_bench_demo()
        .with_ttft_ms(1.0)
        .with_step_ms(0.0)
        .with_output_tokens(2, 4))
    .await;
    let dir = tempfile::tempdir().unwrap();
    let input = conversations(dir.path(), 8);
    let out_dir = dir.path().join("run");
    let url = server.url();
    let out = run(&[
        "profile",
        "--url",
        &url,
        "--model",
        "m",
        "--input-file",
        input.to_str().unwrap(),
        "--no-server-metrics",
        "--user-centric-rate",
        "20",
        "--num-users",
        "4",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ])
    .await;
    assert!(out.status.success(), "{out:?}");
    // Conversation i's turns as the simulator saw them, seconds from the
    // first arrival of the run.
    let truth = server.ground_truth();
    let first = truth.arrivals.iter().map(|a| a.at_unix_ns).min().unwrap();
    let mut seen: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for a in &truth.arrivals {
        let s = (a.at_unix_ns - first) as f64 / 1e9;
        seen.entry(a.conversation.clone()).or_default().push(s);
    }
    let want: [(usize, &[f64]); 8] = [
        (0, &[0.0, 0.2, 0.4]),
        (1, &[0.05]),
        (2, &[0.1]),
        (3, &[0.15, 0.35]),
        (4, &[0.25, 0.45, 0.65]),
        (5, &[0.3, 0.5, 0.7]),
        (6, &[0.55, 0.75, 0.95]),
        (7, &[0.6, 0.8, 1.0]),
    ];
    assert_eq!(seen.len(), 8, "{seen:?}");
    for (i, times) in want {
        let mut got = seen[&format!("c{i} opens")].clone();
        got.sort_by(f64::total_cmp);
        assert_eq!(got.len(), times.len(), "c{i}: {got:?}");
        for (g, w) in got.iter().zip(times) {
            assert!((g - w).abs() < 0.04, "c{i}: at {got:?}, planned {times:?}");
        }
    }
    // Every turn in the records: 19 sent and answered, 5 skipped (the
    // turns mid-session users no longer had), each saying why.
    let records = read_run(&out_dir).unwrap().records;
    assert_eq!(records.len(), 24);
    let skipped: Vec<_> = records
        .iter()
        .filter(|r| r.error_kind == Some(ErrorKind::Skipped))
        .map(|r| (r.conversation_id.clone(), r.turn_index))
        .collect();
    let mut skipped_sorted = skipped.clone();
    skipped_sorted.sort();
    let expected: Vec<(String, u32)> = [("c1", 1), ("c1", 2), ("c2", 1), ("c2", 2), ("c3", 2)]
        .iter()
        .map(|(c, t)| (c.to_string(), *t))
        .collect();
    assert_eq!(skipped_sorted, expected);
    assert!(records.iter().filter(|r| r.error_kind.is_some()).all(|r| {
        r.error_kind == Some(ErrorKind::Skipped)
            && r.error_message
                .as_deref()
                .unwrap()
                .contains("--user-centric-rate")
    }));
    assert_eq!(records.iter().filter(|r| r.is_success()).count(), 19);
    assert_eq!(truth.requests_log.len(), 19);
    let run_json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("run.json")).unwrap()).unwrap();
    assert_eq!(run_json["config"]["client"]["num_users"], 4);
    assert_eq!(run_json["config"]["client"]["user_centric_rate"], 20.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_user_centric_flags_are_refused_before_anything_is_sent() {
    let server = sim(SimConfig::speed_bench_demo()).await;
    let dir = tempfile::tempdir().unwrap();
    let input = conversations(dir.path(), 2);
    let url = server.url();
    let cases: [(&[&str], &str); 6] = [
        (&["--user-centric-rate", "2"], "--num-users"),
        (&["--num-users", "3"], "--user-centric-rate"),
        (&["--user-centric-rate", "0", "--num-users", "3"], "above 0"),
        (
            &["--user-centric-rate", "2", "--num-users", "0"],
            "at least one user",
        ),
        (
            &[
                "--user-centric-rate",
                "2",
                "--num-users",
                "3",
                "--request-rate",
                "5",
            ],
            "--request-rate",
        ),
        (
            &[
                "--user-centric-rate",
                "2",
                "--num-users",
                "3",
                "--concurrency",
                "4",
            ],
            "--concurrency",
        ),
    ];
    for (flags, says) in cases {
        let mut args = vec![
            "profile",
            "--url",
            &url,
            "--model",
            "m",
            "--input-file",
            input.to_str().unwrap(),
            "--no-server-metrics",
            "--no-preflight",
            "--output-artifact-dir",
        ];
        let out_dir = dir.path().join("run");
        args.push(out_dir.to_str().unwrap());
        args.extend_from_slice(flags);
        let out = run(&args).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flags:?} ran");
        assert!(stderr.contains(says), "{flags:?}: {stderr}");
    }
    assert_eq!(server.ground_truth().arrivals.len(), 0);
}
