//! Runs in object storage end to end: `profile --output-artifact-dir
//! s3://...` against the simulator with credentials from the standard AWS
//! environment variables, `report` and `compare` over the same URLs, a
//! wrong secret, a run killed mid-run, a run interrupted by Ctrl-C and a
//! store that goes away mid-run; the S3 server is moto on 127.0.0.1,
//! checking every request's signature.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::*;
use speedbench_sim::SimConfig;
use speedbench_store::{StoreOptions, StoreUrl, fetch, open};
use speedbench_test_support::s3::S3Server;

/// `speedbench ARGS` with the store's environment (and `secret` as the
/// secret key), output captured.
async fn run_with<S: AsRef<str> + std::fmt::Debug>(
    server: &S3Server,
    secret: &str,
    args: &[S],
) -> Output {
    let mut cmd = bin();
    for (k, v) in server.env() {
        cmd.env(k, v);
    }
    cmd.env("AWS_SECRET_ACCESS_KEY", secret);
    let out = cmd
        .args(args.iter().map(AsRef::as_ref))
        .output()
        .await
        .expect("the binary runs");
    eprintln!(
        "stderr of {args:?}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn profile_args(url: &str, out: &str, staging: &str) -> Vec<String> {
    [
        "profile",
        "--url",
        url,
        "--model",
        "m",
        "--input-file",
        fixture().to_str().unwrap(),
        "--streaming",
        "--concurrency",
        "4",
        "--server-metrics-shutdown-delay",
        "0",
        "--output-artifact-dir",
        out,
        "--staging-dir",
        staging,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Every file under `dir`, recursively, holds no `needle`.
fn assert_nowhere(dir: &Path, needle: &str) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            assert_nowhere(&path, needle);
        } else {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
                "{} holds the secret",
                path.display()
            );
        }
    }
}

/// The store as the test process sees it.
fn store_of(
    server: &S3Server,
    url: &StoreUrl,
) -> std::sync::Arc<dyn speedbench_store::object_store::ObjectStore> {
    let mut options = StoreOptions::default();
    for (k, v) in server.env() {
        let key = match k {
            "AWS_ENDPOINT_URL" => "aws_endpoint",
            other => &other.to_ascii_lowercase(),
        };
        options = options.with_config(key, &v);
    }
    open(url, &options).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_s3_reports_and_compares_as_the_same_run_on_disk() {
    let Some(s3) = S3Server::start("runs") else {
        return;
    };
    let server = sim(SimConfig::default()).await;
    let tmp = tempfile::tempdir().unwrap();
    let staging = tmp.path().join("staged");
    let out = run_with(
        &s3,
        &s3.secret_access_key,
        &profile_args(
            &server.url(),
            "s3://runs/bench/spec",
            staging.to_str().unwrap(),
        ),
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("records in s3://runs/bench/spec/records.parquet (manifest s3://runs/bench/spec/run.json, summary s3://runs/bench/spec/summary.json)"),
        "{stderr}"
    );
    assert!(stderr.contains("uploaded 4 objects"), "{stderr}");
    assert!(!text(&out).contains(&s3.secret_access_key));
    assert_nowhere(&staging, &s3.secret_access_key);

    // The staged run is a normal run: every record keeps the invariants and
    // matches the server's own log.
    let file = read_run(&staging).unwrap();
    let dataset = speedbench_dataset::Dataset::from_jsonl_file(fixture()).unwrap();
    assert_matches_truth(&dataset, &file.records, &server.ground_truth());
    assert_eq!(
        file.records.iter().filter(|r| !r.warmup).count() as u64,
        server.ground_truth().requests
    );

    // What the store holds is the staged run, byte for byte.
    let url: StoreUrl = "s3://runs/bench/spec".parse().unwrap();
    let fetched_dir = tempfile::tempdir().unwrap();
    let fetched = fetch(&store_of(&s3, &url), &url, fetched_dir.path())
        .await
        .unwrap();
    for name in [
        "records.parquet",
        "run.json",
        "summary.json",
        "server_metrics_export.json",
    ] {
        assert!(
            std::fs::read(fetched.root.join(name)).unwrap()
                == std::fs::read(staging.join(name)).unwrap(),
            "{name} differs"
        );
    }
    assert_eq!(fetched.objects, 4, "no lock file, no write check left");

    // report over the parent URL prints what report over the local copy prints.
    let remote_csv = tmp.path().join("remote.csv");
    let local_csv = tmp.path().join("local.csv");
    for (path, csv) in [
        ("s3://runs/bench", &remote_csv),
        (staging.to_str().unwrap(), &local_csv),
    ] {
        let out = run_with(
            &s3,
            &s3.secret_access_key,
            &[
                "report",
                path,
                "--format",
                "csv",
                "--output",
                csv.to_str().unwrap(),
            ],
        )
        .await;
        assert!(out.status.success(), "{}", text(&out));
    }
    let remote = std::fs::read_to_string(&remote_csv).unwrap();
    assert_eq!(remote, std::fs::read_to_string(&local_csv).unwrap());
    assert!(
        remote.lines().count() == 2,
        "one row for the one run: {remote}"
    );

    // compare takes a URL as either side.
    let out = run_with(
        &s3,
        &s3.secret_access_key,
        &[
            "compare",
            "--baseline",
            "s3://runs/bench/spec",
            "--speculative",
            staging.to_str().unwrap(),
            "--format",
            "json",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let overall = json["rows"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(overall["category"], "overall");
    assert_eq!(overall["identical"], overall["paired"], "{json}");
    assert_eq!(json["diverging"], 0);

    // The same URL again is refused: a run is never replaced silently.
    let again = tmp.path().join("again");
    let out = run_with(
        &s3,
        &s3.secret_access_key,
        &profile_args(
            &server.url(),
            "s3://runs/bench/spec",
            again.to_str().unwrap(),
        ),
    )
    .await;
    assert!(!out.status.success());
    assert!(
        text(&out).contains("s3://runs/bench/spec already holds a run (run.json exists)")
            && text(&out).contains("--overwrite"),
        "{}",
        text(&out)
    );

    // --overwrite replaces it; with no --staging-dir the run is staged in a
    // temporary directory that goes once the store holds the run.
    let mut args = profile_args(&server.url(), "s3://runs/bench/spec", "");
    args.truncate(args.len() - 2);
    args.push("--overwrite".into());
    let out = run_with(&s3, &s3.secret_access_key, &args).await;
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    let staged = stderr
        .split_once("(the run is staged in ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(dir, _)| std::path::PathBuf::from(dir))
        .expect("the staging directory is named");
    assert!(!staged.exists(), "{} is left behind", staged.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_fails_before_any_request_and_is_never_printed() {
    let Some(s3) = S3Server::start("runs") else {
        return;
    };
    let server = sim(SimConfig::default()).await;
    let tmp = tempfile::tempdir().unwrap();
    let staging = tmp.path().join("staged");
    let wrong = "not-the-secret-4f1a9c0b7e2d5f8a3b6c9d0e1f2a3b4c";
    let out = run_with(
        &s3,
        wrong,
        &profile_args(&server.url(), "s3://runs/denied", staging.to_str().unwrap()),
    )
    .await;
    assert_eq!(out.status.code(), Some(1));
    let all = text(&out);
    assert!(
        all.contains("checking --output-artifact-dir s3://runs/denied before the run")
            && all.contains("the object store refused access")
            && all.contains("AWS_SECRET_ACCESS_KEY"),
        "{all}"
    );
    assert!(!all.contains(wrong), "the secret was printed: {all}");
    assert_eq!(server.ground_truth().requests, 0, "nothing may be sent");

    // Without --staging-dir the run would stage in a temporary directory:
    // a refused run leaves none behind.
    let tmpdir = tmp.path().join("tmpdir");
    std::fs::create_dir_all(&tmpdir).unwrap();
    let mut args = profile_args(&server.url(), "s3://runs/denied", "");
    args.truncate(args.len() - 2);
    let mut cmd = bin();
    for (k, v) in s3.env() {
        cmd.env(k, v);
    }
    let out = cmd
        .env("AWS_SECRET_ACCESS_KEY", wrong)
        .env("TMPDIR", &tmpdir)
        .args(&args)
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let left: Vec<_> = std::fs::read_dir(&tmpdir).unwrap().collect();
    assert!(left.is_empty(), "a refused run left {left:?}");

    // report with the wrong secret names the URL too.
    let out = run_with(&s3, wrong, &["report", "s3://runs"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out).contains("fetching s3://runs"), "{}", text(&out));
    assert!(!text(&out).contains(wrong));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_run_never_reads_as_a_complete_one() {
    let Some(mut s3) = S3Server::start("runs") else {
        return;
    };
    // Slow answers, so each run is still going when it is stopped.
    let server = sim(SimConfig::default().with_ttft_ms(150.0).with_step_ms(10.0)).await;
    let tmp = tempfile::tempdir().unwrap();
    let spawn = |out: &str, staging: &Path, s3: &S3Server| {
        let mut cmd = bin();
        for (k, v) in s3.env() {
            cmd.env(k, v);
        }
        cmd.args(profile_args(&server.url(), out, staging.to_str().unwrap()))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };

    // Killed outright: the store holds nothing a reader lists.
    let killed = tmp.path().join("killed");
    let child = spawn("s3://runs/killed", &killed, &s3);
    wait_for_requests(&server, 3).await;
    unsafe { libc::kill(child.id().unwrap() as libc::pid_t, libc::SIGKILL) };
    let out = child.wait_with_output().await.unwrap();
    assert!(!out.status.success());
    let out = run_with(&s3, &s3.secret_access_key, &["report", "s3://runs/killed"]).await;
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out).contains("s3://runs/killed: no object is stored under this URL"),
        "{}",
        text(&out)
    );

    // Ctrl-C: the finished requests go up, marked interrupted.
    let before = server.ground_truth().requests;
    let stopped = tmp.path().join("stopped");
    let child = spawn("s3://runs/stopped", &stopped, &s3);
    wait_for_requests(&server, before + 3).await;
    unsafe { libc::kill(child.id().unwrap() as libc::pid_t, libc::SIGINT) };
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(text(&out).contains("uploaded 4 objects"), "{}", text(&out));
    let records = read_run(&stopped).unwrap().records;
    let out = run_with(
        &s3,
        &s3.secret_access_key,
        &["report", "s3://runs/stopped", "--format", "json"],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is an INCOMPLETE run (interrupted)"),
        "{}",
        text(&out)
    );
    // The run is named by its URL, never by the temporary copy the report
    // read and removed.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("s3://runs/stopped is an INCOMPLETE run")
            && err.contains("s3://runs/stopped (row")
            && !err.contains("speedbench-fetch-"),
        "{err}"
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["rows"][0]["status"], "interrupted", "{json}");
    assert!(!records.is_empty());
    assert_eq!(json["rows"][0]["complete"], false);

    // The store goes away mid-run: the run finishes locally, the upload
    // fails loudly, the staged files stay and read.
    let before = server.ground_truth().requests;
    let lost = tmp.path().join("lost");
    let child = spawn("s3://runs/lost", &lost, &s3);
    wait_for_requests(&server, before + 3).await;
    s3.stop();
    let out = child.wait_with_output().await.unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains("uploading the run to s3://runs/lost")
            && all.contains(&format!("every file is kept in {}", lost.display())),
        "{all}"
    );
    // The console names where the records are: the staging directory, not
    // the store that never got them.
    assert!(
        all.contains(&format!(
            "records in {}",
            lost.join("records.parquet").display()
        )) && !all.contains("records in s3://runs/lost"),
        "{all}"
    );
    let file = read_run(&lost).unwrap();
    assert!(file.records.iter().filter(|r| r.is_success()).count() >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_into_a_store_uploads_every_run_and_an_occupied_one_is_refused_up_front() {
    let Some(s3) = S3Server::start("runs") else {
        return;
    };
    let server = sim(SimConfig::default()).await;
    let tmp = tempfile::tempdir().unwrap();
    let sweep = tmp.path().join("ladder.toml");
    let write = |levels: &str| {
        std::fs::write(
            &sweep,
            format!(
                "[profile]\nstreaming = true\nserver_metrics_shutdown_delay = 0\n\
                 input_file = {:?}\nrequest_count = 4\n\n[matrix]\nconcurrency = [{levels}]\n",
                fixture().to_str().unwrap()
            ),
        )
        .unwrap()
    };
    write("1, 2");
    let sweep_args = |parent: &str| {
        vec![
            "profile".to_string(),
            "--config".into(),
            sweep.to_str().unwrap().into(),
            "--url".into(),
            server.url(),
            "-m".into(),
            "m".into(),
            "--output-artifact-dir".into(),
            parent.into(),
        ]
    };
    let out = run_with(&s3, &s3.secret_access_key, &sweep_args("s3://runs/ladder")).await;
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for run in ["01-concurrency-1", "02-concurrency-2"] {
        assert!(
            stdout.contains(&format!("s3://runs/ladder/{run}  completed")),
            "{stdout}"
        );
    }
    assert_eq!(server.ground_truth().requests, 8);

    // The store holds both runs: one report row each, every request there.
    let out = run_with(
        &s3,
        &s3.secret_access_key,
        &["report", "s3://runs/ladder", "--format", "json"],
    )
    .await;
    assert!(out.status.success(), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{json}");
    assert!(rows.iter().all(|r| r["succeeded"] == 4), "{json}");

    // A wider ladder over the same parent: the two runs there are refused
    // before anything is sent, and so is a wrong secret.
    write("1, 2, 3");
    let out = run_with(&s3, &s3.secret_access_key, &sweep_args("s3://runs/ladder")).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains("s3://runs/ladder/01-concurrency-1 already holds a run (run.json exists)")
            && all.contains("s3://runs/ladder/02-concurrency-2 already holds a run")
            && all.contains("2 of 3 variations refused (above); nothing was sent"),
        "{all}"
    );
    let wrong = "not-the-secret-0a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d";
    let out = run_with(&s3, wrong, &sweep_args("s3://runs/other")).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("the object store refused access") && !text(&out).contains(wrong),
        "{}",
        text(&out)
    );
    assert_eq!(server.ground_truth().requests, 8, "nothing more was sent");
}
