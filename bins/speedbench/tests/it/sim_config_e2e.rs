//! `speedbench sim --config FILE` serves exactly what the same configuration
//! built in code with `SimConfig`'s builders serves: every field of the JSON
//! file keeps its meaning, and the builders cover every field.

use crate::common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::process::Stdio;

use serde_json::{Value, json};
use speedbench_sim::{
    AcceptanceProfile, Chunking, FaultKind, FaultPlan, SimConfig, SimServer, SpecFlavor,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStderr};

/// Every field set to something other than its default.
const CONFIG_JSON: &str = r#"{
    "seed": 5,
    "ttft_ms": 1.0,
    "step_ms": 0.25,
    "default_spec": {"num_spec_tokens": 3, "p_full": 0.3, "p_token": 0.7, "p_draft": 0.8},
    "categories": {"coding": {"num_spec_tokens": 6, "p_full": 0.9, "p_token": 0.2}},
    "output_tokens_min": 10,
    "output_tokens_max": 30,
    "flavor": "both",
    "detailed": true,
    "model": "from-the-file",
    "chunking": "per_token",
    "faults": [{"kind": {"http_status": 503}, "every_nth": 4},
               {"kind": "spec_fields_wrong_type", "every_nth": 3}]
}"#;

fn built() -> SimConfig {
    SimConfig::default()
        .with_seed(5)
        .with_ttft_ms(1.0)
        .with_step_ms(0.25)
        .with_default_spec(AcceptanceProfile::new(3, 0.3, 0.7).with_p_draft(0.8))
        .with_category("coding", AcceptanceProfile::new(6, 0.9, 0.2))
        .with_output_tokens(10, 30)
        .with_flavor(SpecFlavor::Both)
        .with_detailed(true)
        .with_model("from-the-file")
        .with_chunking(Chunking::PerToken)
        .with_fault(FaultPlan::every_nth(FaultKind::HttpStatus(503), 4))
        .with_fault(FaultPlan::every_nth(FaultKind::SpecFieldsWrongType, 3))
}

/// One request on a fresh connection: the status and the decoded body.
fn exchange(addr: SocketAddr, path: &str, body: &str) -> (u16, Vec<u8>) {
    let mut tcp = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        tcp,
        "POST {path} HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("write");
    let mut raw = Vec::new();
    tcp.read_to_end(&mut raw).expect("read");
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("response head")
        + 4;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status = head[9..12].parse().expect("status code");
    let mut rest = &raw[split..];
    if !head.contains("transfer-encoding: chunked") {
        return (status, rest.to_vec());
    }
    let mut body = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n").expect("chunk");
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).unwrap().trim(), 16)
            .expect("chunk size");
        if size == 0 {
            return (status, body);
        }
        body.extend_from_slice(&rest[eol + 2..eol + 2 + size]);
        rest = &rest[eol + 2 + size + 2..];
    }
}

/// The body's JSON documents (one, or one per SSE event) without the
/// wall-clock `created`.
fn documents(body: &[u8]) -> Vec<Value> {
    let text = std::str::from_utf8(body).expect("UTF-8 body");
    let docs: Vec<&str> = if text.starts_with("data: ") {
        text.split("\n\n")
            .filter_map(|e| e.strip_prefix("data: "))
            .filter(|d| *d != "[DONE]")
            .collect()
    } else {
        vec![text]
    };
    docs.into_iter()
        .map(|d| {
            let mut v: Value = serde_json::from_str(d).expect("JSON");
            if let Value::Object(m) = &mut v {
                m.remove("created");
            }
            v
        })
        .collect()
}

fn requests() -> Vec<(&'static str, Value)> {
    let chat = |content: &str, extra: Value| {
        let mut v = json!({"messages": [{"role": "user", "content": content}]});
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    let usage = json!({"stream": true, "stream_options": {"include_usage": true}});
    vec![
        (
            "/v1/chat/completions",
            chat("[coding 0] sort a list", json!({})),
        ),
        (
            "/v1/chat/completions",
            chat("[coding 1] parse a file", usage.clone()),
        ),
        (
            "/v1/chat/completions",
            chat("[qa 2] why is the sky blue", json!({})),
        ),
        ("/v1/chat/completions", chat("[qa 3] what", json!({}))),
        ("/v1/chat/completions", chat("plain words", usage.clone())),
        (
            "/v1/completions",
            json!({"prompt": "[coding 5] a", "max_tokens": 12}),
        ),
        ("/v1/completions", {
            let mut v = json!({"prompt": "[math 6] b"});
            v.as_object_mut()
                .unwrap()
                .extend(usage.as_object().unwrap().clone());
            v
        }),
    ]
}

/// `speedbench sim --port 0 ARGS`: the process (killed when dropped), the
/// address its URL line names, and its stderr.
async fn start_sim(args: &[&std::ffi::OsStr]) -> (Child, SocketAddr, BufReader<ChildStderr>) {
    let mut child = common::bin()
        .args(["sim", "--port", "0"])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the binary starts");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut url = String::new();
    stdout.read_line(&mut url).await.expect("the URL line");
    let addr: SocketAddr = url
        .trim()
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("a URL on stdout, got {url:?}"))
        .parse()
        .expect("host:port");
    let stderr = BufReader::new(child.stderr.take().unwrap());
    (child, addr, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_serves_what_the_builders_build() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sim.json");
    std::fs::write(&path, CONFIG_JSON).unwrap();
    let (mut child, from_file, mut child_stderr) =
        start_sim(&["--config".as_ref(), path.as_os_str()]).await;
    let in_process = SimServer::start(built(), ([127, 0, 0, 1], 0).into())
        .await
        .expect("the built config is valid");
    let to_code = in_process.local_addr();

    let (mut statuses, mut spec_kinds, mut streamed) = (Vec::new(), Vec::new(), Vec::new());
    for (i, (path, body)) in requests().into_iter().enumerate() {
        let body = body.to_string();
        let (a, b) = tokio::task::spawn_blocking(move || {
            (
                exchange(from_file, path, &body),
                exchange(to_code, path, &body),
            )
        })
        .await
        .unwrap();
        assert_eq!(a.0, b.0, "status of {path}");
        let (docs_a, docs_b) = (documents(&a.1), documents(&b.1));
        assert_eq!(docs_a, docs_b, "the responses to {path} differ");
        statuses.push(a.0);
        if i == 4 {
            streamed = docs_a.clone();
        }
        let last = docs_a.last().expect("a document");
        if let Some(spec) = last.get("metrics") {
            spec_kinds.push(spec["speculative_decoding"]["num_spec_steps"].is_string());
        }
    }
    // The file's settings are in effect (not the defaults): its model name,
    // its fault plans, per-token chunking and the detailed vLLM stats.
    assert_eq!(statuses, [200, 200, 200, 503, 200, 200, 200]);
    assert_eq!(spec_kinds, [false, false, true, false, true, false]);
    // A chat stream with usage: the role chunk, one chunk per token, the
    // finish chunk, the usage chunk.
    let chunks = &streamed;
    assert_eq!(chunks[0]["model"], "from-the-file");
    assert!(chunks.len() > 4);
    assert!(
        chunks[1..chunks.len() - 2].iter().all(|c| {
            c["choices"][0]["delta"]["content"]
                .as_str()
                .is_some_and(|t| t.split_whitespace().count() == 1)
        }),
        "one token per chunk: {chunks:?}"
    );
    let spec = &chunks[chunks.len() - 1]["metrics"]["speculative_decoding"];
    assert!(spec["per_step_accepted"].is_array(), "detailed: {spec}");

    // SAFETY: kill sends a signal to the child we spawned.
    assert_eq!(
        unsafe { libc::kill(child.id().unwrap() as libc::pid_t, libc::SIGINT) },
        0
    );
    let status = child.wait().await.unwrap();
    let mut stderr = String::new();
    child_stderr.read_to_string(&mut stderr).await.unwrap();
    assert!(status.success(), "{stderr}");
    // The 503 is not a served request.
    assert!(stderr.contains("served 6 requests"), "{stderr}");
    in_process.shutdown().await;
}

/// `speedbench sim` on a first try serves like a real server (30 ms to the
/// first token, 10 ms a verify step) and says so, instead of answering in
/// no time at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_sim_has_realistic_delays_and_prints_them() {
    let (_child, addr, mut stderr) = start_sim(&[]).await;
    let mut said = String::new();
    stderr.read_line(&mut said).await.expect("the delays line");
    assert_eq!(
        said.trim(),
        "simulated delays: 30 ms to the first token, 10 ms per verify step (--ttft-ms, --step-ms)"
    );
    let body = json!({"model": "m", "max_tokens": 4,
        "messages": [{"role": "user", "content": "hi"}]})
    .to_string();
    let started = std::time::Instant::now();
    let (status, _) =
        tokio::task::spawn_blocking(move || exchange(addr, "/v1/chat/completions", &body))
            .await
            .unwrap();
    assert_eq!(status, 200);
    // At least the first token's 30 ms (the steps add more).
    assert!(started.elapsed() >= std::time::Duration::from_millis(30));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sim_takes_a_model_name_without_a_config_file() {
    let (_child, addr, _stderr) = start_sim(&["--model".as_ref(), "my-model".as_ref()]).await;
    let body = r#"{"model":"my-model","messages":[{"role":"user","content":"hi"}],"max_tokens":4}"#;
    let (status, answer) =
        tokio::task::spawn_blocking(move || exchange(addr, "/v1/chat/completions", body))
            .await
            .unwrap();
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(v["model"], "my-model");
}
