//! The upstream prepare step: SPEED-Bench resolution by the prepare script
//! the dataset's consumers use, run by speedbench.
//!
//! Most SPEED-Bench sources cannot be rebuilt natively (see
//! [`crate::resolve::Support`]): their prompts come from templates, numpy
//! PCG64 and pandas sampling, Python's Mersenne Twister and o200k token
//! counts inside NeMo-Skills' `nemo_skills/dataset/speed-bench/prepare.py`.
//! Like AIPerf, which vendors that script and calls it, speedbench runs the
//! script itself, at a pinned commit and sha256, and consumes its output:
//!
//! 1. every row's `source` is screened: a URL must be on one of
//!    [`ALLOWED_SOURCE_HOSTS`] (the prepare step fetches it);
//! 2. the interpreter (`--python`, `SPEEDBENCH_PYTHON`, default `python3`)
//!    is probed for `datasets` and `numpy`;
//! 3. the script is downloaded from [`ScriptPin::url`] with speedbench's own
//!    HTTP stack and refused unless its sha256 is [`ScriptPin::sha256`]; it
//!    is cached as `<dataset cache>/upstream/prepare-<sha256 prefix>.py`,
//!    written atomically and re-verified on every reuse. A local script
//!    (`--prepare-script`, `SPEEDBENCH_PREPARE_SCRIPT`) is run as given;
//! 4. a short driver of ours (`upstream_driver.py`, written to a temporary
//!    directory) imports the script as a module, builds the config's
//!    `datasets.Dataset` from the Parquet files speedbench downloaded at
//!    [`SPEED_BENCH_REVISION`](crate::registry::SPEED_BENCH_REVISION),
//!    re-seeds `HLE_RNG`, calls `_resolve_external_data(dataset, config)` and
//!    writes `messages` rows as JSON lines;
//! 5. the output must have the config's rows, the same `question_id`s in the
//!    same order, and no placeholder left ([`validate_output`]) before it is
//!    cached; nothing partial or invalid is ever written.
//!
//! The child inherits the environment, with the Hub settings speedbench
//! uses (`HF_ENDPOINT`, `HF_TOKEN`, `HF_HOME`, `HF_HUB_CACHE`,
//! `HF_HUB_OFFLINE`) set in it, never on its command line. Its output is
//! relayed line by line as `info` logs, with any token redacted.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};

use crate::hub::{HubConfig, hex, sha256_file, write_atomic};
use crate::resolve::ConfigRows;
use crate::{DatasetError, PLACEHOLDER};

/// The repository of the pinned prepare script.
pub const PREPARE_SCRIPT_REPO: &str = "NVIDIA-NeMo/Skills";
/// The pinned commit of the prepare script (the one AIPerf vendors).
pub const PREPARE_SCRIPT_COMMIT: &str = "5ac8609a56ac941540b10c92e68d556e6343cd4c";
/// The script's path in [`PREPARE_SCRIPT_REPO`].
pub const PREPARE_SCRIPT_PATH: &str = "nemo_skills/dataset/speed-bench/prepare.py";
/// The sha256 the script at [`PREPARE_SCRIPT_COMMIT`] must have.
pub const PREPARE_SCRIPT_SHA256: &str =
    "a551be4df541474e54e21b480022b0cbb66c2da068fda61b2a64bd3223bbbed2";
/// Where raw GitHub files are downloaded from, unless
/// `SPEEDBENCH_GITHUB_RAW_ENDPOINT` names a mirror.
pub const DEFAULT_GITHUB_RAW_ENDPOINT: &str = "https://raw.githubusercontent.com";
/// The Python packages the pinned prepare step needs.
pub const PYTHON_PACKAGES: &str = "datasets pandas numpy tiktoken";
/// The hosts a row's URL `source` may name (AIPerf's list, enumerated from
/// every config at the pinned SPEED-Bench revision).
pub const ALLOWED_SOURCE_HOSTS: [&str; 5] = [
    "huggingface.co",
    "raw.githubusercontent.com",
    "github.com",
    "opencompass.openxlab.space",
    "www.gutenberg.org",
];

/// The driver, written next to nothing else in a temporary directory.
const DRIVER: &str = include_str!("upstream_driver.py");
/// The driver's exit status for a missing Python package.
const EXIT_MISSING: i32 = 3;
/// The driver's marker line for a missing Python package.
const MISSING_MARKER: &str = "speedbench-driver: missing module: ";
/// Lines of the child's stderr quoted when it fails.
const TAIL_LINES: usize = 20;
/// Longest line kept from the child (a longer one is cut).
const MAX_LINE: usize = 8 * 1024;
/// Progress-bar updates (`\r`-terminated) relayed at most this often.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// A prepare script pinned by URL and sha256: nothing else is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptPin {
    /// Where to download it.
    pub url: String,
    /// Its sha256, lowercase hex.
    pub sha256: String,
}

impl ScriptPin {
    /// NeMo-Skills' `prepare.py` at [`PREPARE_SCRIPT_COMMIT`], from a raw
    /// GitHub endpoint (e.g. [`DEFAULT_GITHUB_RAW_ENDPOINT`] or a mirror).
    pub fn nemo_skills(raw_endpoint: &str) -> ScriptPin {
        ScriptPin {
            url: format!(
                "{}/{PREPARE_SCRIPT_REPO}/{PREPARE_SCRIPT_COMMIT}/{PREPARE_SCRIPT_PATH}",
                raw_endpoint.trim_end_matches('/')
            ),
            sha256: PREPARE_SCRIPT_SHA256.to_string(),
        }
    }

    /// The cached copy's file name: `prepare-<first 16 hex of sha256>.py`.
    pub fn cache_file_name(&self) -> String {
        let sha = self.sha256.to_ascii_lowercase();
        format!("prepare-{}.py", &sha[..sha.len().min(16)])
    }
}

/// Which prepare script runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrepareScript {
    /// Downloaded, verified against the pin, cached.
    Pinned(ScriptPin),
    /// A local file, run as given (its sha256 is logged).
    Local(PathBuf),
}

/// How to run the upstream prepare step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamOptions {
    /// The script.
    pub script: PrepareScript,
    /// The Python interpreter (`--python`, `SPEEDBENCH_PYTHON`, default
    /// `python3`, looked up on `PATH`).
    pub python: PathBuf,
}

impl Default for UpstreamOptions {
    /// The pinned script from GitHub, run by `python3`.
    fn default() -> UpstreamOptions {
        UpstreamOptions::from_vars(|_| None)
    }
}

impl UpstreamOptions {
    /// Options from the process environment.
    pub fn from_env() -> UpstreamOptions {
        UpstreamOptions::from_vars(|k| std::env::var(k).ok())
    }

    /// Options through `var`: `SPEEDBENCH_PREPARE_SCRIPT` (a local script),
    /// else the pinned script from `SPEEDBENCH_GITHUB_RAW_ENDPOINT` (default
    /// [`DEFAULT_GITHUB_RAW_ENDPOINT`]); `SPEEDBENCH_PYTHON` (default
    /// `python3`).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> UpstreamOptions {
        let nonempty = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let script = match nonempty("SPEEDBENCH_PREPARE_SCRIPT") {
            Some(path) => PrepareScript::Local(PathBuf::from(path)),
            None => PrepareScript::Pinned(ScriptPin::nemo_skills(
                &nonempty("SPEEDBENCH_GITHUB_RAW_ENDPOINT")
                    .unwrap_or_else(|| DEFAULT_GITHUB_RAW_ENDPOINT.to_string()),
            )),
        };
        UpstreamOptions {
            script,
            python: PathBuf::from(
                nonempty("SPEEDBENCH_PYTHON").unwrap_or_else(|| "python3".into()),
            ),
        }
    }
}

/// Why a row's `source` is refused, or `None` if the prepare step may use
/// it: a bare `org/name` has no host and passes; a URL must be `http(s)` on
/// one of [`ALLOWED_SOURCE_HOSTS`].
///
/// The host is read as Python's `urlparse(...).netloc` reads it (what
/// follows `//`, without user info and port), compared case-insensitively.
/// Unlike AIPerf, a URL with another scheme (`file:`, `ftp:`) is refused even
/// without a host.
pub fn untrusted_source(source: &str) -> Option<String> {
    let source = source.trim();
    let (scheme, rest) = match source.split_once(':') {
        Some((s, rest))
            if s.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')) =>
        {
            (Some(s.to_ascii_lowercase()), rest)
        }
        _ => (None, source),
    };
    let host = rest.strip_prefix("//").map(|after| {
        let netloc = after.split(['/', '?', '#']).next().unwrap_or("");
        let netloc = netloc.rsplit('@').next().unwrap_or("");
        let host = if netloc.starts_with('[') {
            netloc
                .split(']')
                .next()
                .unwrap_or("")
                .trim_start_matches('[')
        } else {
            netloc.split(':').next().unwrap_or("")
        };
        host.to_ascii_lowercase()
    });
    match (scheme.as_deref(), host) {
        (None, None) => None,
        (Some("http" | "https") | None, Some(h)) if ALLOWED_SOURCE_HOSTS.contains(&h.as_str()) => {
            None
        }
        (Some("http" | "https") | None, Some(h)) if !h.is_empty() => Some(format!("on host {h:?}")),
        (Some(s), _) if s != "http" && s != "https" => Some(format!("a {s:?} URL")),
        _ => Some("a URL without a host".to_string()),
    }
}

/// Refuses a config whose rows name an untrusted source (see
/// [`untrusted_source`]), naming the first such row.
pub fn check_sources<'a>(
    config: &str,
    rows: impl IntoIterator<Item = (&'a Value, &'a str)>,
) -> Result<(), DatasetError> {
    let mut first: Option<(String, String, String)> = None;
    let mut others = 0;
    for (question_id, source) in rows {
        if let Some(what) = untrusted_source(source) {
            if first.is_none() {
                first = Some((id_text(question_id), source.to_string(), what));
            } else {
                others += 1;
            }
        }
    }
    match first {
        None => Ok(()),
        Some((question_id, source_url, what)) => Err(DatasetError::UntrustedSource {
            config: config.to_string(),
            question_id,
            source_url,
            what,
            others,
        }),
    }
}

fn id_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Downloads the pinned prepare script into `dir` (unless a copy with the
/// pinned sha256 is there) and returns its path.
///
/// The download follows redirects; its sha256 must equal the pin, else it is
/// refused with [`DatasetError::Checksum`] naming both digests and nothing is
/// cached. A cached copy is re-hashed on every use and downloaded again if it
/// changed. With `offline`, a missing copy is an error and no request is made.
pub async fn fetch_prepare_script(
    pin: &ScriptPin,
    dir: &Path,
    offline: bool,
) -> Result<PathBuf, DatasetError> {
    let expected = pin.sha256.to_ascii_lowercase();
    let path = dir.join(pin.cache_file_name());
    if path.is_file() {
        let actual = sha256_file(&path)?;
        if actual == expected {
            tracing::info!(script = %path.display(), sha256 = %actual, "prepare script: cached copy verified");
            return Ok(path);
        }
        tracing::warn!(
            "{}: sha256 {actual}, expected {expected}: the cached prepare script changed; \
             downloading it again",
            path.display()
        );
        let _ = std::fs::remove_file(&path);
    }
    if offline {
        return Err(DatasetError::Offline {
            what: format!(
                "the prepare script {} (expected at {})",
                pin.url,
                path.display()
            ),
            cache: dir.to_path_buf(),
        });
    }
    let download = |message: String| DatasetError::Download {
        url: pin.url.clone(),
        message,
    };
    let http = speedbench_http::new_client(&speedbench_http::ClientOptions {
        max_idle_per_host: 1,
        ..Default::default()
    })
    .map_err(|e| download(speedbench_http::describe(&e)))?;
    tracing::info!(url = %pin.url, "downloading the prepare script");
    let resp = speedbench_http::get(&http, &pin.url, &[], Duration::from_secs(60))
        .await
        .map_err(|e| download(speedbench_http::describe(&e)))?;
    if !resp.status.is_success() {
        return Err(download(format!("HTTP {}", resp.status)));
    }
    let actual = hex(ring::digest::digest(&ring::digest::SHA256, &resp.body).as_ref());
    if actual != expected {
        return Err(DatasetError::Checksum {
            path: pin.url.clone(),
            expected,
            actual,
            hint: format!(
                "; speedbench runs only the pinned prepare script ({PREPARE_SCRIPT_REPO}@\
                 {PREPARE_SCRIPT_COMMIT} {PREPARE_SCRIPT_PATH}) and cached nothing. To run \
                 another script deliberately, pass it with --prepare-script PATH \
                 (SPEEDBENCH_PREPARE_SCRIPT)"
            ),
        });
    }
    write_atomic(&path, &resp.body)?;
    tracing::info!(script = %path.display(), sha256 = %actual, "prepare script: downloaded and verified");
    Ok(path)
}

/// Removes secrets from the child's output before it is logged or quoted.
#[derive(Clone)]
pub(crate) struct Redactor {
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// Redacts the given values, and anything shaped like a Hub token
    /// (`hf_` and 30 or more letters and digits).
    pub(crate) fn new(secrets: impl IntoIterator<Item = String>) -> Redactor {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .map(|s| s.trim().to_string())
            .filter(|s| s.len() >= 4)
            .collect();
        // Longest first, so a secret containing another is removed whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    /// The token speedbench uses and the one in `HF_TOKEN`.
    fn for_hub(hub: &HubConfig) -> Redactor {
        Redactor::new(
            hub.token
                .iter()
                .map(|t| t.expose().to_string())
                .chain(std::env::var("HF_TOKEN").ok()),
        )
    }

    /// `line` with every secret replaced by `<redacted>`.
    pub(crate) fn redact(&self, line: &str) -> String {
        let mut out = line.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "<redacted>");
            }
        }
        redact_token_shapes(&out)
    }
}

fn redact_token_shapes(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut last = 0;
    let mut i = 0;
    while let Some(pos) = line[i..].find("hf_") {
        let start = i + pos;
        let body = start + 3;
        let end = body
            + bytes[body..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric())
                .count();
        let boundary = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        if boundary && end - body >= 30 {
            out.push_str(&line[last..start]);
            out.push_str("hf_<redacted>");
            last = end;
        }
        i = end.max(body);
    }
    out.push_str(&line[last..]);
    out
}

/// What a child process left behind.
struct ChildOutput {
    status: ExitStatus,
    /// The last [`TAIL_LINES`] lines of stderr, redacted.
    tail: Vec<String>,
    /// The first line of stdout, redacted.
    first_stdout: Option<String>,
    /// The module named by the driver's missing-package marker.
    missing: Option<String>,
}

/// Reads `reader` to its end, relaying each line (split at `\n` or `\r`,
/// redacted) as an `info` log and keeping the last [`TAIL_LINES`].
/// Progress-bar updates (`\r`-terminated) are relayed at most every
/// [`PROGRESS_EVERY`] and replace each other in the tail.
async fn relay<R: AsyncRead + Unpin>(
    mut reader: R,
    stream: &'static str,
    redactor: &Redactor,
) -> (VecDeque<String>, Option<String>, Option<String>) {
    let mut tail: VecDeque<(String, bool)> = VecDeque::new();
    let mut first = None;
    let mut missing = None;
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut last_progress: Option<Instant> = None;
    let mut emit = |segment: &[u8], progress: bool| {
        let raw = String::from_utf8_lossy(segment);
        let raw = raw.trim_end();
        if raw.trim().is_empty() {
            return;
        }
        if let Some(m) = raw.strip_prefix(MISSING_MARKER) {
            missing = Some(m.to_string());
        }
        let line = redactor.redact(raw);
        if first.is_none() {
            first = Some(line.clone());
        }
        // A progress update is overwritten on a terminal by whatever follows.
        if tail.back().is_some_and(|(_, p)| *p) {
            tail.pop_back();
        }
        if progress {
            if last_progress.is_none_or(|t| t.elapsed() >= PROGRESS_EVERY) {
                last_progress = Some(Instant::now());
                tracing::info!("prepare step {stream}: {line}");
            }
        } else {
            tracing::info!("prepare step {stream}: {line}");
        }
        tail.push_back((line, progress));
        while tail.len() > TAIL_LINES {
            tail.pop_front();
        }
    };
    loop {
        let n = match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' || b == b'\r' {
                emit(&pending, b == b'\r');
                pending.clear();
            } else if pending.len() < MAX_LINE {
                pending.push(b);
            }
        }
    }
    emit(&pending, false);
    (tail.into_iter().map(|(l, _)| l).collect(), first, missing)
}

/// Runs `cmd` to completion, relaying its output.
async fn run_child(
    mut cmd: tokio::process::Command,
    redactor: &Redactor,
) -> std::io::Result<ChildOutput> {
    let mut child = cmd.spawn()?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    let ((_, first_stdout, _), (tail, _, missing), status) = tokio::join!(
        relay(stdout, "stdout", redactor),
        relay(stderr, "stderr", redactor),
        child.wait()
    );
    Ok(ChildOutput {
        status: status?,
        tail: tail.into_iter().collect(),
        first_stdout,
        missing,
    })
}

/// The interpreter with the Hub settings in its environment.
fn python_command(python: &Path, hub: &HubConfig) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(python);
    cmd.env("HF_ENDPOINT", &hub.endpoint)
        .env("HF_HOME", &hub.home)
        .env("HF_HUB_CACHE", &hub.cache_dir)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PYTHONIOENCODING", "utf-8")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if hub.offline {
        cmd.env("HF_HUB_OFFLINE", "1");
    }
    // The environment, never the command line: /proc/PID/cmdline is public.
    if let Some(token) = &hub.token {
        cmd.env("HF_TOKEN", token.expose());
    }
    cmd
}

/// Resolves `config` by running the prepare step on its rows; returns the
/// validated JSONL and how it was made. `why` is the native resolver's
/// verdict in auto mode (rows and sources it cannot rebuild), quoted if
/// Python turns out to be missing.
pub(crate) async fn run_prepare_step(
    config: &str,
    rows: &ConfigRows,
    options: &UpstreamOptions,
    hub: &HubConfig,
    dataset_cache: &Path,
    why: Option<(usize, String)>,
) -> Result<(String, String), DatasetError> {
    let input: Vec<(Value, String)> = rows
        .rows
        .iter()
        .map(|(_, _, r)| {
            (
                r.get("question_id").cloned().unwrap_or(Value::Null),
                r.get("source")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect();
    check_sources(config, input.iter().map(|(q, s)| (q, s.as_str())))?;

    let (count, sources) = why.unwrap_or((0, String::new()));
    let python = options.python.display().to_string();
    let unavailable = |problem: String| DatasetError::PythonUnavailable {
        config: config.to_string(),
        problem,
        count,
        sources: sources.clone(),
    };
    let work = tempfile::Builder::new()
        .prefix("speedbench-prepare-")
        .tempdir()
        .map_err(|source| DatasetError::Io {
            path: std::env::temp_dir(),
            source,
        })?;
    let driver = work.path().join("speedbench_prepare_driver.py");
    std::fs::write(&driver, DRIVER).map_err(|source| DatasetError::Io {
        path: driver.clone(),
        source,
    })?;
    let redactor = Redactor::for_hub(hub);
    let spawn_failed = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::NotFound {
            unavailable(format!("the interpreter `{python}` was not found"))
        } else {
            unavailable(format!(
                "the interpreter `{python}` could not be started: {e}"
            ))
        }
    };

    // Is the interpreter usable at all? (Before any download.)
    let mut probe = python_command(&options.python, hub);
    probe.arg(&driver).arg("--probe");
    let out = run_child(probe, &redactor).await.map_err(spawn_failed)?;
    if out.status.code() == Some(EXIT_MISSING) {
        let module = out.missing.unwrap_or_else(|| "a package".into());
        return Err(unavailable(format!("`{python}` cannot import {module}")));
    }
    if !out.status.success() {
        return Err(unavailable(format!(
            "`{python}` could not run speedbench's driver ({}): {}",
            out.status,
            out.tail.join(" | ")
        )));
    }
    tracing::debug!(
        "prepare step: {python}: {}",
        out.first_stdout.as_deref().unwrap_or("ready")
    );

    let (script, by) = match &options.script {
        PrepareScript::Pinned(pin) => {
            let path =
                fetch_prepare_script(pin, &dataset_cache.join("upstream"), hub.offline).await?;
            let by = format!(
                "by the upstream prepare step ({}, sha256 {})",
                pin.url,
                pin.sha256.to_ascii_lowercase()
            );
            (path, by)
        }
        PrepareScript::Local(path) => {
            let sha = sha256_file(path)?;
            tracing::info!(
                script = %path.display(),
                sha256 = %sha,
                "prepare step: running a local prepare script as given (not checked against the pin)"
            );
            (
                path.clone(),
                format!(
                    "by the local prepare script {} (sha256 {sha})",
                    path.display()
                ),
            )
        }
    };

    let output = work.path().join(format!("{config}.jsonl"));
    let mut cmd = python_command(&options.python, hub);
    cmd.arg(&driver)
        .arg("--script")
        .arg(&script)
        .arg("--config")
        .arg(config)
        .arg("--output")
        .arg(&output)
        .args(&rows.paths);
    tracing::warn!(
        "resolving SPEED-Bench {config:?} with the upstream prepare step ({}): it downloads \
         prompt text from the source datasets, several GB and tens of minutes for a full \
         config, once; the result is cached in {}",
        script.display(),
        dataset_cache.display()
    );
    let started = Instant::now();
    let out = run_child(cmd, &redactor).await.map_err(spawn_failed)?;
    if out.status.code() == Some(EXIT_MISSING) && out.missing.is_some() {
        return Err(unavailable(format!(
            "`{python}` cannot import {} (needed by {})",
            out.missing.unwrap_or_default(),
            script.display()
        )));
    }
    if !out.status.success() {
        return Err(DatasetError::PrepareFailed {
            config: config.to_string(),
            script,
            status: out.status.to_string(),
            stderr_tail: out.tail.join("\n"),
        });
    }
    let jsonl = std::fs::read_to_string(&output).map_err(|source| DatasetError::Io {
        path: output.clone(),
        source,
    })?;
    let n = validate_output(config, &input, &jsonl)?;
    tracing::info!(
        rows = n,
        seconds = started.elapsed().as_secs(),
        "prepare step: resolved SPEED-Bench {config:?}"
    );
    Ok((jsonl, by))
}

#[derive(Deserialize)]
struct OutRow {
    question_id: Option<Value>,
    messages: Option<Vec<OutMessage>>,
}

#[derive(Deserialize)]
struct OutMessage {
    content: Option<Value>,
}

/// Checks the prepare step's output against the config it was given, as
/// AIPerf does: one row per input row (`input`: `question_id` and `source`
/// in upstream order), the same `question_id`s in the same order, and no
/// message content starting with [`PLACEHOLDER`]. Returns the row count.
///
/// The upstream dispatch has no terminal `else`: a source it does not know
/// (or cannot reach) leaves the placeholder and still exits 0, so the rows,
/// not the exit status, are the evidence.
pub fn validate_output(
    config: &str,
    input: &[(Value, String)],
    jsonl: &str,
) -> Result<usize, DatasetError> {
    let mismatch = |message: String| DatasetError::PrepareOutput {
        config: config.to_string(),
        message,
    };
    let lines: Vec<&str> = jsonl.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() != input.len() {
        return Err(mismatch(format!(
            "{} rows came out for the {} rows that went in",
            lines.len(),
            input.len()
        )));
    }
    let mut unresolved = Vec::new();
    for (n, (line, (want_id, source))) in lines.iter().zip(input).enumerate() {
        let row: OutRow = serde_json::from_str(line)
            .map_err(|e| mismatch(format!("row {} is not a JSON row ({e})", n + 1)))?;
        let got_id = row.question_id.unwrap_or(Value::Null);
        if &got_id != want_id {
            return Err(mismatch(format!(
                "row {} has question_id {}, expected {}: rows were reordered, dropped or \
                 duplicated",
                n + 1,
                got_id,
                want_id
            )));
        }
        let messages = row.messages.ok_or_else(|| {
            mismatch(format!(
                "row {} ({}) has no `messages`",
                n + 1,
                id_text(want_id)
            ))
        })?;
        if messages.iter().any(|m| {
            m.content
                .as_ref()
                .and_then(Value::as_str)
                .is_some_and(|c| c.starts_with(PLACEHOLDER))
        }) {
            unresolved.push(format!("{} ({source})", id_text(want_id)));
        }
    }
    if !unresolved.is_empty() {
        const SHOWN: usize = 5;
        let mut rows = unresolved
            .iter()
            .take(SHOWN)
            .cloned()
            .collect::<Vec<_>>()
            .join(", ");
        if unresolved.len() > SHOWN {
            rows.push_str(&format!(", and {} more", unresolved.len() - SHOWN));
        }
        return Err(DatasetError::Unresolved {
            config: config.to_string(),
            unresolved: unresolved.len(),
            total: input.len(),
            rows,
        });
    }
    Ok(lines.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_known_hosts_and_bare_ids_pass() {
        for ok in [
            "cais/hle",
            "TIGER-Lab/MMLU-Pro",
            "https://huggingface.co/datasets/RUCAIBox/BAMBOO/resolve/main/senhallu_16k.jsonl",
            "https://raw.githubusercontent.com/mtbench101/mt-bench-101/main/x.jsonl",
            "http://HuggingFace.co/datasets/x",
            "https://user@github.com:443/ZenMoore/RoleBench/tree/main",
            "https://www.gutenberg.org/ebooks/1",
            "https://opencompass.openxlab.space/utils/AdaLEval/stackselect_16k.json",
            "",
        ] {
            assert_eq!(untrusted_source(ok), None, "{ok}");
        }
        for (bad, what) in [
            ("https://evil.example/x.jsonl", "on host \"evil.example\""),
            (
                "https://huggingface.co.evil.example/datasets/x",
                "on host \"huggingface.co.evil.example\"",
            ),
            (
                "https://huggingface.co@evil.example/x",
                "on host \"evil.example\"",
            ),
            ("//evil.example/x", "on host \"evil.example\""),
            ("file:///etc/passwd", "a \"file\" URL"),
            ("ftp://huggingface.co/x", "a \"ftp\" URL"),
        ] {
            assert_eq!(untrusted_source(bad).as_deref(), Some(what), "{bad}");
        }
    }

    #[test]
    fn an_untrusted_source_names_its_row() {
        let rows = [
            (Value::String("q1".into()), "cais/hle".to_string()),
            (
                Value::String("q2".into()),
                "https://evil.example/a.json".to_string(),
            ),
            (
                Value::String("q3".into()),
                "https://evil.example/b.json".to_string(),
            ),
        ];
        let err =
            check_sources("throughput_1k", rows.iter().map(|(q, s)| (q, s.as_str()))).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(err, DatasetError::UntrustedSource { others: 1, .. }),
            "{msg}"
        );
        assert!(
            msg.contains("row q2")
                && msg.contains("https://evil.example/a.json")
                && msg.contains("huggingface.co, raw.githubusercontent.com")
                && msg.contains("1 more row"),
            "{msg}"
        );
    }

    #[test]
    fn the_pin_names_the_commit_and_the_cache_file_the_digest() {
        let pin = ScriptPin::nemo_skills("https://mirror.example/raw/");
        assert_eq!(
            pin.url,
            "https://mirror.example/raw/NVIDIA-NeMo/Skills/5ac8609a56ac941540b10c92e68d556e6343cd4c/nemo_skills/dataset/speed-bench/prepare.py"
        );
        assert_eq!(pin.cache_file_name(), "prepare-a551be4df541474e.py");
        let o = UpstreamOptions::from_vars(|k| match k {
            "SPEEDBENCH_PYTHON" => Some("/venv/bin/python".into()),
            _ => None,
        });
        assert_eq!(o.python, PathBuf::from("/venv/bin/python"));
        assert!(
            matches!(&o.script, PrepareScript::Pinned(p) if p.url.starts_with(DEFAULT_GITHUB_RAW_ENDPOINT))
        );
        let o = UpstreamOptions::from_vars(|k| match k {
            "SPEEDBENCH_PREPARE_SCRIPT" => Some("/tmp/prepare.py".into()),
            _ => None,
        });
        assert_eq!(o.script, PrepareScript::Local("/tmp/prepare.py".into()));
        assert_eq!(o.python, PathBuf::from("python3"));
    }

    #[tokio::test]
    async fn a_wrong_digest_is_refused_before_anything_is_cached() {
        // A loopback server that serves a script whose digest is not the pin.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let body = b"print('not the pinned script')\n";
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body).await;
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let pin = ScriptPin::nemo_skills(&format!("http://127.0.0.1:{port}"));
        let err = fetch_prepare_script(&pin, dir.path(), false)
            .await
            .unwrap_err();
        let msg = err.to_string();
        let actual = hex(ring::digest::digest(
            &ring::digest::SHA256,
            b"print('not the pinned script')\n",
        )
        .as_ref());
        assert!(matches!(err, DatasetError::Checksum { .. }), "{msg}");
        assert!(
            msg.contains(PREPARE_SCRIPT_SHA256) && msg.contains(&actual),
            "names both digests: {msg}"
        );
        assert!(msg.contains("--prepare-script"), "{msg}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // Offline, nothing is requested and the error says what is missing.
        let err = fetch_prepare_script(&pin, dir.path(), true)
            .await
            .unwrap_err();
        assert!(matches!(err, DatasetError::Offline { .. }), "{err}");
    }

    fn input(ids: &[&str]) -> Vec<(Value, String)> {
        ids.iter()
            .map(|id| (Value::String(id.to_string()), format!("src/{id}")))
            .collect()
    }

    fn out_row(id: &str, content: &str) -> String {
        format!(
            "{}\n",
            serde_json::json!({"question_id": id, "category": "qa", "messages": [{"role": "user", "content": content}]})
        )
    }

    #[test]
    fn output_must_match_the_config_row_for_row() {
        let ids = input(&["a", "b", "c"]);
        let good = out_row("a", "x") + &out_row("b", "y") + &out_row("c", "z");
        assert_eq!(validate_output("qualitative", &ids, &good).unwrap(), 3);

        // A row missing.
        let short = out_row("a", "x") + &out_row("b", "y");
        let err = validate_output("qualitative", &ids, &short).unwrap_err();
        assert!(matches!(err, DatasetError::PrepareOutput { .. }), "{err}");
        assert!(
            err.to_string().contains("2 rows came out for the 3 rows"),
            "{err}"
        );

        // Reordered.
        let swapped = out_row("a", "x") + &out_row("c", "z") + &out_row("b", "y");
        let err = validate_output("qualitative", &ids, &swapped).unwrap_err();
        assert!(
            err.to_string()
                .contains("row 2 has question_id \"c\", expected \"b\""),
            "{err}"
        );

        // A placeholder left (bare, and with its template).
        let left = out_row("a", PLACEHOLDER)
            + &out_row("b", "y")
            + &out_row("c", &format!("{PLACEHOLDER}\n\n{{question}}"));
        let err = validate_output("throughput_1k", &ids, &left).unwrap_err();
        let msg = err.to_string();
        assert!(
            matches!(
                err,
                DatasetError::Unresolved {
                    unresolved: 2,
                    total: 3,
                    ..
                }
            ),
            "{msg}"
        );
        assert!(
            msg.starts_with("SPEED-Bench 'throughput_1k': 2 of 3 rows were left unresolved by the prepare step, which reports success even when a source is unreachable"),
            "{msg}"
        );
        assert!(msg.contains("a (src/a), c (src/c)"), "{msg}");

        // Not JSON, or no messages.
        let err = validate_output("qualitative", &input(&["a"]), "{nope\n").unwrap_err();
        assert!(err.to_string().contains("row 1 is not a JSON row"), "{err}");
        let err = validate_output("qualitative", &input(&["a"]), "{\"question_id\":\"a\"}\n")
            .unwrap_err();
        assert!(err.to_string().contains("no `messages`"), "{err}");
    }

    #[test]
    fn many_unresolved_rows_are_summarised() {
        let names: Vec<String> = (0..8).map(|i| format!("q{i}")).collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let text: String = refs.iter().map(|id| out_row(id, PLACEHOLDER)).collect();
        let msg = validate_output("qualitative", &input(&refs), &text)
            .unwrap_err()
            .to_string();
        assert!(msg.contains("8 of 8 rows"), "{msg}");
        assert!(msg.contains("q4 (src/q4), and 3 more"), "{msg}");
    }

    #[test]
    fn tokens_are_redacted() {
        let r = Redactor::new(["hf_good_tokenSECRET123".to_string(), "".to_string()]);
        assert_eq!(
            r.redact("401 for token hf_good_tokenSECRET123 at https://x"),
            "401 for token <redacted> at https://x"
        );
        let real_shape = format!("hf_{}", "AbCdEfGhIjKlMnOpQrStUvWxYz01234567");
        assert_eq!(
            r.redact(&format!("Authorization: Bearer {real_shape}.")),
            "Authorization: Bearer hf_<redacted>."
        );
        // Ordinary identifiers stay.
        assert_eq!(
            r.redact("huggingface_hub.hf_hub_download(hf_token=None)"),
            "huggingface_hub.hf_hub_download(hf_token=None)"
        );
    }

    #[tokio::test]
    async fn relayed_child_output_is_redacted_and_its_tail_kept() {
        let (logs, _guard) = capture_logs();
        let r = Redactor::new(["hf_relay_tokenSECRET42".to_string()]);
        let mut text = String::new();
        for i in 0..30 {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str(
            "Map:  10%|#  | 1/10\rMap:  50%|#####  | 5/10\rMap: 100%|##########| 10/10\n",
        );
        text.push_str("Traceback: token hf_relay_tokenSECRET42 was refused\n");
        text.push_str(&format!(
            "{MISSING_MARKER}tiktoken (No module named 'tiktoken')"
        ));
        let (tail, first, missing) = relay(text.as_bytes(), "stderr", &r).await;
        assert_eq!(first.as_deref(), Some("line 0"));
        assert_eq!(
            missing.as_deref(),
            Some("tiktoken (No module named 'tiktoken')")
        );
        assert_eq!(tail.len(), TAIL_LINES);
        let tail: Vec<String> = tail.into_iter().collect();
        assert!(tail.contains(&"Traceback: token <redacted> was refused".to_string()));
        // Progress updates replace each other in the tail.
        assert_eq!(tail.iter().filter(|l| l.starts_with("Map:")).count(), 1);
        assert!(!tail.join("\n").contains("SECRET42"));
        let logs = String::from_utf8(logs.lock().unwrap().clone()).unwrap();
        assert!(
            logs.contains("prepare step stderr: Traceback: token <redacted>"),
            "{logs}"
        );
        assert!(!logs.contains("SECRET42"), "{logs}");
    }

    type Captured = std::sync::Arc<std::sync::Mutex<Vec<u8>>>;

    fn capture_logs() -> (Captured, tracing::subscriber::DefaultGuard) {
        #[derive(Clone)]
        struct W(Captured);
        impl std::io::Write for W {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Captured::default();
        let w = W(buf.clone());
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || w.clone())
            .finish();
        (buf, tracing::subscriber::set_default(subscriber))
    }
}
