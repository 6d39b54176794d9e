//! The simulator's responses for fixed seeds, byte for byte.
//!
//! Each case sends a few requests in order to a fresh server and hashes what
//! came back: the status, the content headers and the decoded body, with
//! the one non-deterministic field (`"created"`, the wall-clock second)
//! replaced by 0. The digests were recorded before `server.rs`'s request
//! handling was split into small functions; a refactor that changes any
//! response byte (a field, its order, a chunk boundary, a fault's bytes)
//! changes a digest. Frame timing is not part of it (see the unit tests of
//! the frame schedule).

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Value, json};
use speedbench_sim::{
    AcceptanceProfile, Chunking, FaultKind, FaultPlan, SimConfig, SimServer, SpecFlavor,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CHAT: &str = "/v1/chat/completions";
const COMPLETIONS: &str = "/v1/completions";

/// FNV-1a, 64 bits.
fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(h, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

const FNV_OFFSET: u64 = 0xCBF2_9CE4_8422_2325;

/// Sends one request with `Connection: close`; reads until EOF, a read
/// error (an injected reset) or 300 ms of silence (an injected stall).
async fn exchange(server: &SimServer, path: &str, body: &str) -> Vec<u8> {
    let mut tcp = TcpStream::connect(server.local_addr()).await.unwrap();
    let req = format!(
        "POST {path} HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match tokio::time::timeout(Duration::from_millis(300), tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) | Err(_) => return out,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The status line, the content headers and the decoded body (complete
/// chunks only), with `"created":<digits>` set to 0.
fn canonical(raw: &[u8]) -> Vec<u8> {
    let Some(split) = find(raw, b"\r\n\r\n").map(|i| i + 4) else {
        // A stalled non-streaming request sends nothing at all.
        return [b"<no head>".as_slice(), raw].concat();
    };
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let mut out = lines.next().unwrap_or_default().as_bytes().to_vec();
    out.push(b'\n');
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let name = name.trim().to_ascii_lowercase();
        if name == "transfer-encoding" {
            chunked = value.trim().eq_ignore_ascii_case("chunked");
        }
        if ["content-type", "cache-control", "retry-after"].contains(&name.as_str()) {
            out.extend_from_slice(format!("{name}: {}\n", value.trim()).as_bytes());
        }
    }
    let rest = &raw[split..];
    let body = if chunked {
        let mut body = Vec::new();
        let mut at = 0;
        while let Some(eol) = find(&rest[at..], b"\r\n") {
            let size = std::str::from_utf8(&rest[at..at + eol])
                .ok()
                .and_then(|s| usize::from_str_radix(s.trim(), 16).ok())
                .expect("chunk size");
            let start = at + eol + 2;
            if size == 0 || rest.len() < start + size + 2 {
                break;
            }
            // Each chunk's boundary is part of the record.
            body.extend_from_slice(format!("<{size}>").as_bytes());
            body.extend_from_slice(&rest[start..start + size]);
            at = start + size + 2;
        }
        body
    } else {
        rest.to_vec()
    };
    out.extend_from_slice(&zero_created(&body));
    out
}

fn zero_created(body: &[u8]) -> Vec<u8> {
    const KEY: &[u8] = b"\"created\":";
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        if body[i..].starts_with(KEY) {
            out.extend_from_slice(KEY);
            out.push(b'0');
            i += KEY.len();
            while i < body.len() && body[i].is_ascii_digit() {
                i += 1;
            }
        } else {
            out.push(body[i]);
            i += 1;
        }
    }
    out
}

fn chat(content: &str, extra: Value) -> (&'static str, String) {
    let mut v = json!({"model": "m", "messages": [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": content},
    ]});
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    (CHAT, v.to_string())
}

fn completion(prompt: Value, extra: Value) -> (&'static str, String) {
    let mut v = json!({"model": "m", "prompt": prompt});
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    (COMPLETIONS, v.to_string())
}

/// Every request shape: both endpoints, streamed or not, with and without
/// usage, capped, forced with `ignore_eos`, a known and an unknown category.
fn requests() -> Vec<(&'static str, String)> {
    let usage = json!({"stream": true, "stream_options": {"include_usage": true}});
    vec![
        chat("[coding 0] write a sort", json!({})),
        chat("[math 1] add two numbers", json!({"stream": true})),
        chat("[roleplay 2] be a pirate", usage.clone()),
        chat("[unknown 3] anything", json!({"max_tokens": 7})),
        chat(
            "[qa 4] why",
            json!({"stream": true, "max_completion_tokens": 5,
                   "stream_options": {"include_usage": true}}),
        ),
        chat(
            "[writing 5] a poem",
            json!({"ignore_eos": true, "max_tokens": 200, "stream": true}),
        ),
        completion(json!("[stem 6] explain"), json!({})),
        completion(json!(["[rag 7] a", "b c"]), usage),
        completion(
            json!("plain prompt"),
            json!({"stream": true, "max_tokens": 3}),
        ),
    ]
}

fn with_timing(mut c: SimConfig) -> SimConfig {
    // Non-zero, so llama.cpp's `timings` carry non-trivial values.
    c.ttft_ms = 1.5;
    c.step_ms = 0.25;
    c.seed = 11;
    c
}

fn configs() -> Vec<(&'static str, SimConfig)> {
    let mut vllm_detailed = with_timing(SimConfig::speed_bench_demo());
    vllm_detailed.detailed = true;
    vllm_detailed.model = "golden-model".to_owned();

    let mut both_per_token = with_timing(SimConfig::speed_bench_demo());
    both_per_token.flavor = SpecFlavor::Both;
    both_per_token.chunking = Chunking::PerToken;

    let mut llamacpp_partial = with_timing(SimConfig::default());
    llamacpp_partial.flavor = SpecFlavor::LlamaCpp;
    llamacpp_partial.default_spec.p_draft = 0.5;
    let mut never = AcceptanceProfile::default();
    never.p_draft = 0.0;
    llamacpp_partial.categories = BTreeMap::from([("qa".to_owned(), never)]);

    let mut baseline_none = with_timing(SimConfig::default());
    baseline_none.default_spec = AcceptanceProfile::baseline();
    baseline_none.flavor = SpecFlavor::None;
    baseline_none.output_tokens_min = 3;
    baseline_none.output_tokens_max = 9;

    let mut out = vec![
        ("default", SimConfig::default()),
        ("vllm_detailed", vllm_detailed),
        ("both_per_token", both_per_token),
        ("llamacpp_partial", llamacpp_partial),
        ("baseline_none", baseline_none),
    ];
    // Each fault on every other request, so a faulted and a clean response
    // of the same server are both recorded.
    for (name, kind) in [
        ("fault_malformed", FaultKind::MalformedJson),
        ("fault_non_utf8", FaultKind::NonUtf8),
        ("fault_missing", FaultKind::SpecFieldsMissing),
        ("fault_wrong_type", FaultKind::SpecFieldsWrongType),
        ("fault_429", FaultKind::HttpStatus(429)),
        ("fault_503", FaultKind::HttpStatus(503)),
        ("fault_reset", FaultKind::ResetMidStream { after_chunks: 2 }),
        ("fault_stall", FaultKind::Stall),
    ] {
        let mut c = SimConfig::default();
        c.flavor = SpecFlavor::Both;
        c.output_tokens_min = 4;
        c.output_tokens_max = 12;
        c.faults = vec![FaultPlan::every_nth(kind, 2)];
        out.push((name, c));
    }
    out
}

/// The recorded digest of each case (config name, request index).
const EXPECTED: &[(&str, [u64; 9])] = &[
    (
        "default",
        [
            0x25c61cfa32f84459,
            0x1165c074c0b60958,
            0xef6b1d49ec653d9f,
            0xaff48f85894a5066,
            0x1017a708f7e1b00a,
            0xd00effc8ae41df7b,
            0xbd41f0f6a95c8699,
            0x28cf56b4f7847f6b,
            0xf5eb86b629b31918,
        ],
    ),
    (
        "vllm_detailed",
        [
            0x56c7b34611b37ee2,
            0x253738c5b637fae6,
            0x9c0d6ab71a591cc7,
            0xc05eeb317431eec4,
            0x78398d79917789aa,
            0xe61a330eb792cb18,
            0xa7a58d3a35747a36,
            0xa3fef0036770caa9,
            0x32026d7c0bef6c66,
        ],
    ),
    (
        "both_per_token",
        [
            0xf824275b16d8f2d7,
            0x697039aecdfd3f8b,
            0x1fe1cd76d70e2b46,
            0xe476a21e39b18db3,
            0x441553f2287aaf22,
            0xc70817dcca98065a,
            0x38cd96dea814f03d,
            0x9f4b379e6ce6de9b,
            0x7b7c8478632d9a8d,
        ],
    ),
    (
        "llamacpp_partial",
        [
            0x7be0cb4c2601c6dd,
            0x47b18929c087e91f,
            0x06972b4293beb615,
            0xedbcf69dc530d7eb,
            0x1a59890dacb89eb0,
            0x628452988801150b,
            0x7be2f48103e04bcc,
            0x244a27c38223b63b,
            0x5373ce18ec75ab83,
        ],
    ),
    (
        "baseline_none",
        [
            0xb2c8a86b3504382c,
            0x59c691f8d409830a,
            0xe5b2bb60285c93b1,
            0xa255a3e96ca26fbe,
            0x831ef52148e3e75b,
            0x95dc18ba50cff352,
            0xe468baa60db07923,
            0xe1afd1bbb00fb5f5,
            0x9f3b9f5da94a365e,
        ],
    ),
    (
        "fault_malformed",
        [
            0x1d2de6a5ee85061e,
            0x277eb2824277dbc6,
            0xba27f60773444928,
            0x6ccc27930a7b6e54,
            0xe8ff0875528d5687,
            0xb2dcfb2f256ad072,
            0x7d20b7f84090a314,
            0x1e248390f4bba2e4,
            0x57a7e5a7253d362c,
        ],
    ),
    (
        "fault_non_utf8",
        [
            0x1d2de6a5ee85061e,
            0xc6ee7e84f31d1e6f,
            0xba27f60773444928,
            0xaacea039d0861761,
            0xe8ff0875528d5687,
            0xb51ae792244f3c39,
            0x7d20b7f84090a314,
            0xc3472242bc61133f,
            0x57a7e5a7253d362c,
        ],
    ),
    (
        "fault_missing",
        [
            0x1d2de6a5ee85061e,
            0xe8510f0f1b690b36,
            0xba27f60773444928,
            0x7c299fdaa030a6a9,
            0xe8ff0875528d5687,
            0xc52b641157a59a84,
            0x7d20b7f84090a314,
            0x384a99b8e37b94cc,
            0x57a7e5a7253d362c,
        ],
    ),
    (
        "fault_wrong_type",
        [
            0x1d2de6a5ee85061e,
            0x57ee5b92367a0a4c,
            0xba27f60773444928,
            0x3370e0078b90e2a4,
            0xe8ff0875528d5687,
            0x9071319ed1905d2e,
            0x7d20b7f84090a314,
            0x5f658bbad9722f35,
            0x57a7e5a7253d362c,
        ],
    ),
    (
        "fault_429",
        [
            0x1d2de6a5ee85061e,
            0x24631bae7f3f69a4,
            0xba27f60773444928,
            0x24631bae7f3f69a4,
            0xe8ff0875528d5687,
            0x24631bae7f3f69a4,
            0x7d20b7f84090a314,
            0x24631bae7f3f69a4,
            0x57a7e5a7253d362c,
        ],
    ),
    (
        "fault_503",
        [
            0x1d2de6a5ee85061e,
            0x81a54a6646cd18bb,
            0xba27f60773444928,
            0x81a54a6646cd18bb,
            0xe8ff0875528d5687,
            0x81a54a6646cd18bb,
            0x7d20b7f84090a314,
            0x81a54a6646cd18bb,
            0x57a7e5a7253d362c,
        ],
    ),
    (
        "fault_reset",
        [
            0x1d2de6a5ee85061e,
            0x27ec0bc06114fa2a,
            0xba27f60773444928,
            0x9d958a2972fbfd39,
            0xe8ff0875528d5687,
            0xaf810f17f4178753,
            0x7d20b7f84090a314,
            0x0c7282d2670f7f53,
            0x57a7e5a7253d362c,
        ],
    ),
    (
        "fault_stall",
        [
            0x1d2de6a5ee85061e,
            0x7e655848e6d2e1bb,
            0xba27f60773444928,
            0x79947f8d130ac554,
            0xe8ff0875528d5687,
            0x10072840aed233f7,
            0x7d20b7f84090a314,
            0x9afbb3c19ead63c5,
            0x57a7e5a7253d362c,
        ],
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_for_fixed_seeds_are_unchanged() {
    let mut got = Vec::new();
    for (name, config) in configs() {
        let server = SimServer::start(config, ([127, 0, 0, 1], 0).into())
            .await
            .expect("start");
        let mut digests = Vec::new();
        for (path, body) in requests() {
            let raw = exchange(&server, path, &body).await;
            digests.push(fnv(FNV_OFFSET, &canonical(&raw)));
        }
        server.shutdown().await;
        got.push((name, digests));
    }
    let table: String = got
        .iter()
        .map(|(name, d)| {
            let list: Vec<String> = d.iter().map(|h| format!("0x{h:016x}")).collect();
            format!("    (\"{name}\", [{}]),\n", list.join(", "))
        })
        .collect();
    let mismatches: Vec<String> = got
        .iter()
        .flat_map(|(name, d)| {
            let want = EXPECTED.iter().find(|(n, _)| n == name).map(|(_, w)| w);
            d.iter()
                .enumerate()
                .filter(move |&(i, h)| want.map(|w| w[i]) != Some(*h))
                .map(move |(i, _)| format!("{name} request {i}"))
        })
        .collect();
    assert!(
        mismatches.is_empty(),
        "responses changed: {mismatches:?}\ndigests now:\n{table}"
    );
}
