//! End-to-end: what `profile` makes of its request options (issue 14, points
//! 9 and 13): `--extra-inputs` cannot take over the protocol fields, `--url`
//! must hold a real port and may be a full endpoint URL, a connect error names
//! the URL once, and `-H Authorization` with an API key is refused.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::*;
use speedbench_sim::SimConfig;

/// `profile` of four fixture requests against `url`, plus `extra` arguments.
async fn profile(url: &str, out_dir: &Path, extra: &[&str]) -> Output {
    let fixture = fixture();
    let mut args = vec![
        "profile",
        "--url",
        url,
        "--input-file",
        fixture.to_str().unwrap(),
        "--request-count",
        "4",
        "--no-server-metrics",
        "--output-artifact-dir",
        out_dir.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    run(&args).await
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extra_inputs_cannot_override_what_speedbench_sends() {
    let server = sim(SimConfig::default()).await;
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&str, &str); 7] = [
        ("stream:true", "--streaming"),
        ("stream:false", "--streaming"),
        ("model:other", "--model"),
        (
            r#"messages:[{"role":"user","content":"x"}]"#,
            "--input-file",
        ),
        ("prompt:hello", "--input-file"),
        (
            r#"{"stream_options": {"include_usage": false}}"#,
            "--streaming",
        ),
        (":5", "the key is empty"),
    ];
    for (i, (item, named)) in cases.iter().enumerate() {
        let out_dir = dir.path().join(format!("run{i}"));
        let out = profile(&url, &out_dir, &["--streaming", "--extra-inputs", item]).await;
        let err = stderr(&out);
        assert!(!out.status.success(), "--extra-inputs {item} was accepted");
        assert!(
            err.contains("--extra-inputs") && err.contains(named),
            "{item}: {err}"
        );
        assert!(!out_dir.exists(), "{item}: nothing is written");
    }
    // A sampling field is still passed through (and recorded in run.json).
    let out_dir = dir.path().join("ok");
    let out = profile(
        &url,
        &out_dir,
        &[
            "--streaming",
            "--extra-inputs",
            "temperature:0",
            "top_p:0.5",
        ],
    )
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    let manifest = std::fs::read_to_string(out_dir.join("run.json")).unwrap();
    assert!(manifest.contains("\"top_p\": 0.5"), "{manifest}");
    assert_eq!(server.ground_truth().requests, 4, "only the last run sent");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_outside_the_tcp_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (url, port) in [("127.0.0.1:99999", "99999"), ("http://127.0.0.1:0/v1", "0")] {
        let out = profile(url, &dir.path().join("run"), &["-m", "m"]).await;
        let err = stderr(&out);
        assert!(!out.status.success(), "{url} was accepted");
        assert!(
            err.contains("--url") && err.contains(&format!("the port {port} is outside 1-65535")),
            "{err}"
        );
    }
    assert!(!dir.path().join("run").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_endpoint_url_is_understood_as_its_server() {
    let server = sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    for (endpoint, api) in [
        ("/v1/chat/completions", "chat"),
        ("/v1/completions", "completions"),
    ] {
        let out_dir = dir.path().join(api);
        let url = format!("{}{endpoint}", server.url());
        let out = profile(&url, &out_dir, &["--streaming", "--endpoint-type", api]).await;
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        assert!(
            err.contains(&format!("names the endpoint {endpoint}"))
                && err.contains(&format!("using the server {}", server.url())),
            "the note says how the URL was understood: {err}"
        );
        let file = read_run(&out_dir).unwrap();
        assert_eq!(file.records.len(), 4);
        assert!(
            file.records.iter().all(|r| r.is_success()),
            "{:?}",
            file.records.iter().find(|r| !r.is_success())
        );
        let manifest = std::fs::read_to_string(out_dir.join("run.json")).unwrap();
        assert!(
            manifest.contains(&format!("\"url\": \"{}\"", server.url())),
            "{manifest}"
        );
    }
    // An endpoint URL that contradicts the API in use is refused, not sent to.
    let before = server.ground_truth().requests;
    let url = format!("{}/v1/completions", server.url());
    let out = profile(&url, &dir.path().join("mismatch"), &[]).await;
    let err = stderr(&out);
    assert!(!out.status.success());
    assert!(err.contains("--endpoint-type completions"), "{err}");
    assert_eq!(server.ground_truth().requests, before);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_error_names_the_url_once() {
    let dir = tempfile::tempdir().unwrap();
    let base = format!("http://127.0.0.1:{}", closed_port());
    // No --model: the model list is asked for first, and cannot be.
    let fixture = fixture();
    let out = run(&[
        "profile",
        "--url",
        &base,
        "--input-file",
        fixture.to_str().unwrap(),
        "--output-artifact-dir",
        dir.path().join("run").to_str().unwrap(),
    ])
    .await;
    let err = stderr(&out);
    assert!(!out.status.success());
    let line = err
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line: {err}"));
    assert!(line.contains("refused"), "{line}");
    assert_eq!(
        line.matches(&format!("{base}/v1/models")).count(),
        1,
        "{line}"
    );
    assert_eq!(line.matches("127.0.0.1").count(), 1, "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authorization_header_and_an_api_key_are_refused_together() {
    let server = sim(SimConfig::default()).await;
    let url = server.url();
    let dir = tempfile::tempdir().unwrap();
    let header = "Authorization: Bearer header-token-1";
    let cases: [(&[&str], Option<&str>); 4] = [
        (&["-H", header, "--api-key", "flag-key-1", "-m", "m"], None),
        (
            &["-H", "authorization:Bearer x1234", "-m", "m"],
            Some("env-key-1"),
        ),
        // Model discovery, too, refuses before sending anything.
        (&["-H", header, "--api-key", "flag-key-1"], None),
        (&["-H", header], Some("env-key-1")),
    ];
    for (i, (extra, env_key)) in cases.iter().enumerate() {
        let out_dir = dir.path().join(format!("run{i}"));
        let fixture = fixture();
        let mut args = vec![
            "profile",
            "--url",
            &url,
            "--input-file",
            fixture.to_str().unwrap(),
            "--output-artifact-dir",
            out_dir.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        let mut cmd = bin();
        cmd.args(&args).env_remove("OPENAI_API_KEY");
        if let Some(k) = env_key {
            cmd.env("OPENAI_API_KEY", k);
        }
        let out = cmd.output().await.unwrap();
        let err = stderr(&out);
        assert!(!out.status.success(), "{extra:?} was accepted");
        assert!(
            err.to_lowercase().contains("-h authorization")
                && err.contains("--api-key (or OPENAI_API_KEY)"),
            "{extra:?}: {err}"
        );
        for secret in ["header-token-1", "flag-key-1", "env-key-1", "x1234"] {
            assert!(!err.contains(secret), "{secret} in {err}");
        }
        assert!(!out_dir.exists());
    }
    assert_eq!(server.ground_truth().requests, 0);
    server.shutdown().await;
    // Either one alone is fine (the header reaches the server: secrets_e2e).
}
