//! The live view in a real terminal: the binary runs inside tmux against
//! the simulator, the test reads the pane (the dashboard's counts,
//! percentiles and acceptance per category), sends Ctrl-C as keys, and
//! checks that the run stopped as a stop does, gave the terminal back and
//! left stdout with the results only; `--ui-type simple` shows the plain
//! progress instead.

use crate::common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use speedbench_sim::SimConfig;

/// Whether tmux is here; CI installs it (.ci/run) and fails without it.
fn tmux_present(test: &str) -> bool {
    if Command::new("tmux").arg("-V").output().is_ok() {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI must provide tmux for this test (apt-get install tmux)"
    );
    speedbench_test_support::announce(&format!(
        "SKIPPED {test}: no tmux on PATH, so the live view was not run in a terminal \
         (apt-get install tmux; with CI=true this fails instead)"
    ));
    false
}

/// A tmux server of its own (its own socket, `tmux -L`) holding one
/// session, killed when dropped. Tests run in parallel: two `tmux
/// new-session` calls racing to start the one default server can fail
/// ("server exited unexpectedly"), so no two tests share a server.
struct Session(String);

impl Session {
    /// Runs `command` (a shell line) in a new 120×40 pane.
    fn start(name: &str, command: &str) -> Session {
        let session = Session(name.to_string());
        // Starting tmux is the harness, not the product: a start that
        // fails is tried again (three times in all), each failure kept.
        let mut failures = Vec::new();
        for _ in 0..3 {
            let out = session
                .tmux()
                .args(["new-session", "-d", "-s", name, "-x", "120", "-y", "40"])
                .arg(command)
                .output()
                .unwrap();
            if out.status.success() {
                return session;
            }
            failures.push(format!(
                "{}: {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            std::thread::sleep(Duration::from_millis(300));
        }
        panic!("tmux new-session failed: {failures:?}");
    }

    /// A tmux command on this session's own server.
    fn tmux(&self) -> Command {
        let mut tmux = Command::new("tmux");
        tmux.args(["-L", &self.0]);
        tmux
    }

    fn pane(&self) -> String {
        let out = self
            .tmux()
            .args(["capture-pane", "-p", "-t", &self.0])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Waits (at most 30 s) for the pane to hold every one of `texts`.
    async fn wait_for(&self, texts: &[&str]) -> String {
        let start = Instant::now();
        loop {
            let pane = self.pane();
            if texts.iter().all(|t| pane.contains(t)) {
                return pane;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "never showed {texts:?}:\n{pane}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn keys(&self, keys: &str) {
        self.tmux()
            .args(["send-keys", "-t", &self.0, keys])
            .status()
            .unwrap();
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").status();
    }
}

/// The shell line running `profile` with `extra`, stdout into `out`,
/// its exit status appended, then held open so the pane stays readable.
fn profile_line(url: &str, dir: &Path, out: &Path, extra: &str) -> String {
    format!(
        "SPEEDBENCH_NO_PREFLIGHT=true {} profile --url {url} --model m --input-file {} \
         --streaming --no-server-metrics --concurrency 4 --request-count 4000 \
         --output-artifact-dir {} {extra} > {}; echo EXIT=$? >> {}; sleep 60",
        env!("CARGO_BIN_EXE_speedbench"),
        fixture().display(),
        dir.join("run").display(),
        out.display(),
        out.display(),
    )
}

async fn exit_status(out: &Path) -> String {
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        if let Some(line) = text.lines().find(|l| l.starts_with("EXIT=")) {
            return line.to_string();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the run never ended"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_runs_in_a_terminal_and_ctrl_c_gives_it_back() {
    if !tmux_present("the_dashboard_runs_in_a_terminal_and_ctrl_c_gives_it_back") {
        return;
    }
    let config = SimConfig::speed_bench_demo()
        .with_ttft_ms(40.0)
        .with_step_ms(5.0);
    let most_drafts = (config.categories.values())
        .chain([&config.default_spec])
        .map(|p| p.num_spec_tokens)
        .max()
        .unwrap();
    let server = sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stdout.txt");
    let name = format!("speedbench-live-{}", std::process::id());
    let session = Session::start(&name, &profile_line(&server.url(), dir.path(), &out, ""));
    let pane = session
        .wait_for(&[
            "speedbench: live",
            "in flight",
            "TTFT ms",
            "acceptance length",
            "coding",
        ])
        .await;
    // A category's acceptance length so far: between 1 and 1 + k.
    let coding = pane.lines().find(|l| l.contains("coding")).unwrap();
    let length: f64 = coding
        .trim_matches(|c| c == '│' || c == ' ')
        .split_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no acceptance length in {coding:?}"));
    assert!(
        (1.0..=1.0 + f64::from(most_drafts)).contains(&length),
        "{coding}"
    );
    assert!(
        pane.contains("4 in flight") || pane.contains("3 in flight"),
        "{pane}"
    );

    // Ctrl-C as a user types it: the run stops as a stop does (130), the
    // terminal is given back, stdout holds results only.
    session.keys("C-c");
    assert_eq!(exit_status(&out).await, "EXIT=130");
    let pane = session.pane();
    assert!(
        !pane.contains("speedbench: live"),
        "the live view stayed:\n{pane}"
    );
    let stdout = std::fs::read(&out).unwrap();
    assert!(!stdout.contains(&0x1b), "an escape code reached stdout");
    let records = read_run(&dir.path().join("run")).unwrap().records;
    assert!(!records.is_empty());
    assert!(
        records
            .iter()
            .all(|r| r.ttft_ns.is_none_or(|t| t <= r.e2e_latency_ns))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_type_simple_keeps_the_progress_bar() {
    if !tmux_present("ui_type_simple_keeps_the_progress_bar") {
        return;
    }
    let server = sim(SimConfig::speed_bench_demo().with_ttft_ms(40.0)).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("stdout.txt");
    let name = format!("speedbench-simple-{}", std::process::id());
    let line = profile_line(&server.url(), dir.path(), &out, "--ui-type simple");
    let session = Session::start(&name, &line);
    let pane = session.wait_for(&["profiling", "requests"]).await;
    assert!(!pane.contains("speedbench: live"), "{pane}");
    session.keys("C-c");
    assert_eq!(exit_status(&out).await, "EXIT=130");
}
