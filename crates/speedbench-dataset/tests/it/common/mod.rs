//! A loopback Hugging Face Hub for tests: the revision, tree (paginated),
//! auth-check and resolve endpoints, LFS-style redirects to a "CDN" on
//! another host name (`localhost`), gated repositories, and a truncation
//! switch. It serves the generated fixtures under `fixtures/hub/`.

#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use speedbench_dataset::hub::{HubConfig, HubToken, hex};
use speedbench_dataset::registry::SPEED_BENCH_REVISION;
use speedbench_dataset::resolve::{CODE_CONTESTS_REVISION, HLE_REVISION, LIVECODEBENCH_REVISION};

/// The token that may read gated repositories.
pub(crate) const GOOD_TOKEN: &str = "hf_good_tokenSECRET123";
/// A valid token whose account has not accepted the terms.
pub(crate) const NOACCESS_TOKEN: &str = "hf_noaccess_tokenSECRET456";
/// A token the Hub rejects.
pub(crate) const BAD_TOKEN: &str = "hf_bad_tokenSECRET789";

/// The commit `main` of SPEED-Bench points to (not the pinned one).
pub(crate) const SPEED_BENCH_MAIN: &str = "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

#[derive(Default)]
struct Repo {
    refs: HashMap<String, String>,
    commits: HashMap<String, Vec<(String, Bytes)>>,
    gated: bool,
}

/// One request the server saw.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    /// Request path and query.
    pub path: String,
    /// `Host` header.
    pub host: String,
    /// Whether an `Authorization` header came with it.
    pub authorized: bool,
}

#[derive(Default)]
struct State {
    repos: HashMap<String, Repo>,
    blobs: HashMap<String, Bytes>,
    seen: Mutex<Vec<Seen>>,
    truncate: AtomicBool,
    port: Mutex<u16>,
    /// Files of the raw GitHub endpoint (`/raw/<path>`), by path.
    raw: Mutex<HashMap<String, Bytes>>,
}

/// The running server.
pub(crate) struct FakeHub {
    /// `http://127.0.0.1:PORT`
    pub url: String,
    state: Arc<State>,
}

pub(crate) fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn sha_of(s: &str) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, s.as_bytes()).as_ref())[..40].to_string()
}

fn files_under(root: &Path) -> Vec<(String, Bytes)> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<(String, Bytes)>) {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                let rel = p
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.push((rel, Bytes::from(std::fs::read(&p).unwrap())));
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

impl FakeHub {
    /// Starts the server with every fixture repository.
    pub(crate) async fn start() -> FakeHub {
        let hub = fixtures().join("hub");
        let mut state = State::default();
        let mut add = |repo: &str, branch: Option<&str>, commit: &str, gated: bool| {
            let files = files_under(&hub.join(repo));
            for (_, b) in &files {
                let sha = hex(ring::digest::digest(&ring::digest::SHA256, b).as_ref());
                state.blobs.insert(sha, b.clone());
            }
            let r = state.repos.entry(repo.to_string()).or_default();
            r.gated = gated;
            if let Some(b) = branch {
                r.refs.insert(b.to_string(), commit.to_string());
            }
            r.commits.insert(commit.to_string(), files);
        };
        for repo in [
            "openai/gsm8k",
            "HuggingFaceH4/MATH-500",
            "openai/openai_humaneval",
            "google-research-datasets/mbpp",
            "HuggingFaceH4/mt_bench_prompts",
        ] {
            add(repo, Some("refs/convert/parquet"), &sha_of(repo), false);
        }
        add("nvidia/SPEED-Bench", None, SPEED_BENCH_REVISION, false);
        add("abisee/cnn_dailymail", Some("main"), &sha_of("cnn"), false);
        add(
            "anon8231489123/ShareGPT_Vicuna_unfiltered",
            Some("main"),
            &sha_of("sharegpt"),
            false,
        );
        add("cais/hle", None, HLE_REVISION, true);
        add(
            "livecodebench/code_generation_lite",
            None,
            LIVECODEBENCH_REVISION,
            false,
        );
        add(
            "deepmind/code_contests",
            None,
            CODE_CONTESTS_REVISION,
            false,
        );
        // `main` of SPEED-Bench moved on: its qualitative file is different.
        let newer =
            std::fs::read(hub.join("nvidia/SPEED-Bench/throughput_2k/test-00000-of-00001.parquet"))
                .unwrap();
        let sb = state.repos.get_mut("nvidia/SPEED-Bench").unwrap();
        sb.refs.insert("main".into(), SPEED_BENCH_MAIN.into());
        sb.commits.insert(
            SPEED_BENCH_MAIN.into(),
            vec![(
                "qualitative/test-00000-of-00001.parquet".into(),
                Bytes::from(newer),
            )],
        );
        let state = Arc::new(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr: SocketAddr = listener.local_addr().unwrap();
        *state.port.lock().unwrap() = addr.port();
        let st = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let st = st.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| {
                        let st = st.clone();
                        async move { Ok::<_, Infallible>(handle(&st, req)) }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        FakeHub {
            url: format!("http://127.0.0.1:{}", addr.port()),
            state,
        }
    }

    /// Every request seen so far.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// Forgets the requests seen so far.
    pub(crate) fn clear_seen(&self) {
        self.state.seen.lock().unwrap().clear();
    }

    /// Paths seen that contain `needle`.
    pub(crate) fn count(&self, needle: &str) -> usize {
        self.seen()
            .iter()
            .filter(|s| s.path.contains(needle))
            .count()
    }

    /// Serves `body` at `{raw_endpoint}/{path}`, the raw GitHub endpoint: a
    /// request there is redirected to another host name (`localhost`), like
    /// GitHub's own redirects, which serves the bytes.
    pub(crate) fn serve_raw(&self, path: &str, body: impl Into<Bytes>) {
        self.state
            .raw
            .lock()
            .unwrap()
            .insert(path.trim_start_matches('/').to_string(), body.into());
    }

    /// The base URL standing in for `https://raw.githubusercontent.com`.
    pub(crate) fn raw_endpoint(&self) -> String {
        format!("{}/raw", self.url)
    }

    /// Serves half of every file from now on (with full `X-Linked-Size`).
    pub(crate) fn set_truncate(&self, on: bool) {
        self.state.truncate.store(on, Ordering::SeqCst);
    }

    /// A configuration pointing at this server, with its own Hub cache.
    pub(crate) fn config(&self, cache: &Path, token: Option<&str>) -> HubConfig {
        let mut c = HubConfig::from_vars(|k| match k {
            "HF_HOME" => Some(cache.join("hf-home").display().to_string()),
            "HF_ENDPOINT" => Some(self.url.clone()),
            _ => None,
        });
        c.token = token.map(HubToken::new);
        c.gate_timeout = std::time::Duration::from_secs(2);
        c.api_timeout = std::time::Duration::from_secs(5);
        c.read_timeout = std::time::Duration::from_secs(5);
        c
    }
}

fn respond(
    status: StatusCode,
    headers: &[(&str, String)],
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::builder().status(status);
    for (k, v) in headers {
        r = r.header(*k, v);
    }
    r.body(Full::new(body.into())).unwrap()
}

fn json(v: serde_json::Value) -> Response<Full<Bytes>> {
    respond(
        StatusCode::OK,
        &[("content-type", "application/json".into())],
        v.to_string(),
    )
}

fn hub_error(status: StatusCode, code: &str, message: &str) -> Response<Full<Bytes>> {
    respond(
        status,
        &[
            ("x-error-code", code.into()),
            ("x-error-message", message.into()),
        ],
        serde_json::json!({ "error": message }).to_string(),
    )
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// The gate of a gated repository, by token.
fn gate(repo: &str, auth: Option<&str>) -> Option<Response<Full<Bytes>>> {
    match auth {
        Some(a) if a == format!("Bearer {GOOD_TOKEN}") => None,
        Some(a) if a == format!("Bearer {NOACCESS_TOKEN}") => Some(hub_error(
            StatusCode::FORBIDDEN,
            "GatedRepo",
            &format!(
                "Access to dataset {repo} is restricted and you are not in the authorized list. Visit https://huggingface.co/datasets/{repo} to ask for access."
            ),
        )),
        Some(_) => Some(respond(
            StatusCode::UNAUTHORIZED,
            &[(
                "x-error-message",
                "Invalid credentials in Authorization header".into(),
            )],
            "{\"error\":\"Invalid credentials in Authorization header\"}",
        )),
        None => Some(hub_error(
            StatusCode::UNAUTHORIZED,
            "GatedRepo",
            &format!(
                "Access to dataset {repo} is restricted. You must have access to it and be authenticated to access it. Please log in."
            ),
        )),
    }
}

fn handle(st: &State, req: Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let host = req
        .headers()
        .get("host")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let auth = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    st.seen.lock().unwrap().push(Seen {
        path: if query.is_empty() {
            path.clone()
        } else {
            format!("{path}?{query}")
        },
        host,
        authorized: auth.is_some(),
    });
    // A bad token is rejected everywhere, as the Hub does.
    if auth.as_deref() == Some(&format!("Bearer {BAD_TOKEN}")) {
        return gate("", auth.as_deref()).unwrap();
    }
    if let Some(rest) = path.strip_prefix("/raw/") {
        if !st.raw.lock().unwrap().contains_key(rest) {
            return respond(StatusCode::NOT_FOUND, &[], "404: Not Found");
        }
        let port = *st.port.lock().unwrap();
        return respond(
            StatusCode::FOUND,
            &[("location", format!("http://localhost:{port}/rawcdn/{rest}"))],
            Bytes::new(),
        );
    }
    if let Some(rest) = path.strip_prefix("/rawcdn/") {
        return match st.raw.lock().unwrap().get(rest) {
            Some(b) => respond(StatusCode::OK, &[], b.clone()),
            None => respond(StatusCode::NOT_FOUND, &[], "404: Not Found"),
        };
    }
    let seg: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if seg.first() == Some(&"cdn") && seg.len() == 2 {
        let Some(b) = st.blobs.get(seg[1]) else {
            return hub_error(StatusCode::NOT_FOUND, "EntryNotFound", "no such blob");
        };
        let b = if st.truncate.load(Ordering::SeqCst) {
            b.slice(..b.len() / 2)
        } else {
            b.clone()
        };
        return respond(StatusCode::OK, &[], b);
    }
    let (api, rest) = match seg.as_slice() {
        ["api", "datasets", rest @ ..] => (true, rest),
        ["datasets", rest @ ..] => (false, rest),
        _ => return hub_error(StatusCode::NOT_FOUND, "", "not found"),
    };
    if rest.len() < 3 {
        return hub_error(StatusCode::NOT_FOUND, "", "not found");
    }
    let repo_id = format!("{}/{}", rest[0], rest[1]);
    let Some(repo) = st.repos.get(&repo_id) else {
        return hub_error(
            StatusCode::UNAUTHORIZED,
            "RepoNotFound",
            "Repository not found",
        );
    };
    let op = rest[2];
    if repo.gated
        && let Some(denied) = gate(&repo_id, auth.as_deref())
    {
        return denied;
    }
    let commit_of = |rev: &str| -> Option<String> {
        let rev = decode(rev);
        if repo.commits.contains_key(&rev) {
            Some(rev)
        } else {
            repo.refs.get(&rev).cloned()
        }
    };
    match (api, op) {
        (true, "auth-check") => json(serde_json::json!({})),
        (true, "revision") => match rest.get(3).and_then(|r| commit_of(r)) {
            Some(sha) => json(serde_json::json!({ "id": repo_id, "sha": sha })),
            None => hub_error(StatusCode::NOT_FOUND, "RevisionNotFound", "Invalid rev id"),
        },
        (true, "tree") => {
            let Some(sha) = rest.get(3).and_then(|r| commit_of(r)) else {
                return hub_error(StatusCode::NOT_FOUND, "RevisionNotFound", "Invalid rev id");
            };
            let files = &repo.commits[&sha];
            let start: usize = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("cursor="))
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            const PAGE: usize = 2;
            let entries: Vec<_> = files
                .iter()
                .skip(start)
                .take(PAGE)
                .map(|(p, b)| {
                    let sha256 = hex(ring::digest::digest(&ring::digest::SHA256, b).as_ref());
                    serde_json::json!({
                        "type": "file", "path": p, "size": b.len(), "oid": sha_of(p),
                        "lfs": {"oid": sha256, "size": b.len(), "pointerSize": 134}
                    })
                })
                .collect();
            let mut headers = vec![("content-type", "application/json".to_string())];
            if start + PAGE < files.len() {
                let port = *st.port.lock().unwrap();
                headers.push((
                    "link",
                    format!(
                        "<http://127.0.0.1:{port}{path}?recursive=true&cursor={}>; rel=\"next\"",
                        start + PAGE
                    ),
                ));
            }
            respond(
                StatusCode::OK,
                &headers,
                serde_json::Value::Array(entries).to_string(),
            )
        }
        (false, "resolve") => {
            let Some(sha) = rest.get(3).and_then(|r| commit_of(r)) else {
                return hub_error(StatusCode::NOT_FOUND, "RevisionNotFound", "Invalid rev id");
            };
            let file_path = decode(&rest[4..].join("/"));
            let Some((_, b)) = repo.commits[&sha].iter().find(|(p, _)| *p == file_path) else {
                return hub_error(StatusCode::NOT_FOUND, "EntryNotFound", "Entry not found");
            };
            let sha256 = hex(ring::digest::digest(&ring::digest::SHA256, b).as_ref());
            let port = *st.port.lock().unwrap();
            respond(
                StatusCode::FOUND,
                &[
                    ("location", format!("http://localhost:{port}/cdn/{sha256}")),
                    ("x-repo-commit", sha.clone()),
                    ("x-linked-etag", format!("\"{sha256}\"")),
                    ("x-linked-size", b.len().to_string()),
                ],
                Bytes::new(),
            )
        }
        _ => hub_error(StatusCode::NOT_FOUND, "", "not found"),
    }
}

/// Log output captured in memory.
#[derive(Clone, Default)]
pub(crate) struct Logs(pub(crate) std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    /// Everything logged so far.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Every log line of this test binary, from one process-wide subscriber.
///
/// A per-test `set_default` subscriber is not reliable while tests run in
/// parallel: tracing caches each call site's interest process-wide, so a
/// test's events can be dropped when another thread registered the call site
/// first. One global subscriber sees everything (of the hub and the
/// upstream tests alike, which share this binary), and the secret checks
/// then cover every test's logs, not just one's.
pub(crate) fn capture_logs() -> Logs {
    static LOGS: std::sync::OnceLock<Logs> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = Logs::default();
        let writer = logs.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_global_default(subscriber).expect("the only global subscriber");
        logs
    })
    .clone()
}
