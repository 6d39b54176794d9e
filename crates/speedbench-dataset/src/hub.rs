//! A small Hugging Face Hub client: revisions, file lists, downloads into the
//! standard Hub cache, offline mode and gated-repository checks.
//!
//! It speaks HTTP(S) through [`speedbench_http`] (hyper + rustls) and writes
//! the cache layout `huggingface_hub` writes, so either tool reuses the
//! other's downloads:
//!
//! ```text
//! $HF_HUB_CACHE/datasets--{org}--{name}/
//!     blobs/{sha256 or git-sha1}
//!     refs/{branch}                       (holds the commit sha)
//!     snapshots/{commit}/{path}           (relative symlink to ../../blobs/..)
//! ```
//!
//! Downloads stream into `blobs/{etag}.{pid}.incomplete`, are checked for
//! size (`X-Linked-Size`, the tree size or `Content-Length`) and checksum
//! (sha256 for LFS files, the git blob sha1 otherwise) and only then renamed
//! into place: a truncated or corrupt download is never cached. Cached blobs
//! are re-checked before use.
//!
//! Tokens are read from `HF_TOKEN`, then `HF_TOKEN_PATH`, then
//! `$HF_HOME/token`; they are sent only to the Hub endpoint's own host (never
//! to a CDN it redirects to) and never appear in logs or errors.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{AUTHORIZATION, CONTENT_LENGTH, HeaderName, HeaderValue, LOCATION};
use hyper::{Request, StatusCode};
use serde::Deserialize;
use speedbench_http::{ClientOptions, HttpClient, describe};

use crate::error::{DatasetError, GateReason};

/// The default Hub endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// The only gated source of SPEED-Bench's 14 upstream sources.
pub const HLE_REPO: &str = "cais/hle";

/// A Hub access token. Its `Debug` output is redacted, and it has no
/// `Display`: it cannot end up in a log line or an error by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct HubToken(String);

impl HubToken {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> HubToken {
        HubToken(token.into())
    }

    /// The token text, for the prepare step's environment and for redaction
    /// only; never formatted into a message.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    fn header(&self) -> Option<HeaderValue> {
        let mut v = HeaderValue::from_str(&format!("Bearer {}", self.0)).ok()?;
        v.set_sensitive(true);
        Some(v)
    }
}

impl std::fmt::Debug for HubToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HubToken(<redacted>)")
    }
}

/// How to reach the Hub and where its cache lives.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// Base URL (`HF_ENDPOINT`), without a trailing `/`.
    pub endpoint: String,
    /// The token, if one was found.
    pub token: Option<HubToken>,
    /// Where the token was looked for, for messages (`$HF_TOKEN`, then the file).
    pub token_search: String,
    /// `HF_HOME` (default `$XDG_CACHE_HOME/huggingface` or
    /// `~/.cache/huggingface`), passed on to the upstream prepare step.
    pub home: PathBuf,
    /// The Hub cache (`HF_HUB_CACHE`, else `$HF_HOME/hub`).
    pub cache_dir: PathBuf,
    /// `HF_HUB_OFFLINE`: never touch the network, use the cache only.
    pub offline: bool,
    /// Deadline of one API call (revision, tree).
    pub api_timeout: Duration,
    /// Deadline of the gated-access preflight.
    pub gate_timeout: Duration,
    /// Longest silence tolerated in the middle of a download.
    pub read_timeout: Duration,
}

/// `1/ON/YES/TRUE`, case-insensitive, as `huggingface_hub` reads booleans.
fn truthy(v: Option<String>) -> bool {
    v.is_some_and(|v| {
        matches!(
            v.trim().to_ascii_uppercase().as_str(),
            "1" | "ON" | "YES" | "TRUE"
        )
    })
}

impl HubConfig {
    /// Reads the process environment.
    pub fn from_env() -> HubConfig {
        HubConfig::from_vars(|k| std::env::var(k).ok())
    }

    /// Reads configuration through `var` (the environment, or a test's map).
    ///
    /// `HF_ENDPOINT`, `HF_HOME` (default `$XDG_CACHE_HOME/huggingface` or
    /// `~/.cache/huggingface`), `HF_HUB_CACHE` (legacy
    /// `HUGGINGFACE_HUB_CACHE`), `HF_TOKEN`, `HF_TOKEN_PATH`,
    /// `HF_HUB_DISABLE_IMPLICIT_TOKEN`, `HF_HUB_OFFLINE` (or
    /// `TRANSFORMERS_OFFLINE`).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> HubConfig {
        let nonempty = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let endpoint = nonempty("HF_ENDPOINT")
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
            .trim_end_matches('/')
            .to_string();
        let hf_home = nonempty("HF_HOME").map(PathBuf::from).unwrap_or_else(|| {
            let base = nonempty("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| nonempty("HOME").map(|h| Path::new(&h).join(".cache")))
                .unwrap_or_else(|| PathBuf::from(".cache"));
            base.join("huggingface")
        });
        let cache_dir = nonempty("HF_HUB_CACHE")
            .or_else(|| nonempty("HUGGINGFACE_HUB_CACHE"))
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home.join("hub"));
        let token_path = nonempty("HF_TOKEN_PATH")
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home.join("token"));
        let token = if let Some(t) = nonempty("HF_TOKEN") {
            Some(HubToken::new(t.trim()))
        } else if truthy(var("HF_HUB_DISABLE_IMPLICIT_TOKEN")) {
            None
        } else {
            std::fs::read_to_string(&token_path)
                .ok()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .map(HubToken::new)
        };
        HubConfig {
            endpoint,
            token,
            token_search: format!("$HF_TOKEN, then the token file {}", token_path.display()),
            home: hf_home,
            cache_dir,
            offline: truthy(var("HF_HUB_OFFLINE")) || truthy(var("TRANSFORMERS_OFFLINE")),
            api_timeout: Duration::from_secs(30),
            gate_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(60),
        }
    }
}

/// One file of a repository revision, as the tree API lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoFile {
    /// Path inside the repository.
    pub path: String,
    /// Size in bytes.
    pub size: u64,
    /// The git blob sha1.
    pub oid: String,
    /// For LFS files, the sha256 of the content.
    pub lfs_sha256: Option<String>,
}

impl RepoFile {
    /// The blob name in the cache: the sha256 for LFS files, else the git sha1.
    pub fn etag(&self) -> &str {
        self.lfs_sha256.as_deref().unwrap_or(&self.oid)
    }
}

/// Files of one config and split, downloaded or found in the cache.
#[derive(Debug, Clone)]
pub struct SplitFiles {
    /// The commit the revision resolved to.
    pub commit: String,
    /// Local paths (snapshot paths), in repository path order.
    pub paths: Vec<PathBuf>,
}

#[derive(Deserialize)]
struct TreeEntry {
    #[serde(rename = "type")]
    kind: String,
    path: String,
    #[serde(default)]
    size: u64,
    #[serde(default)]
    oid: String,
    lfs: Option<TreeLfs>,
}

#[derive(Deserialize)]
struct TreeLfs {
    oid: String,
    size: u64,
}

/// Percent-encodes everything but unreserved characters (and `/` if asked).
pub fn percent_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'.' | b'_' | b'~')
            || (keep_slash && b == b'/')
        {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// True for a full 40-hex commit sha.
pub fn is_commit(revision: &str) -> bool {
    is_hex(revision, 40)
}

/// Picks the Parquet files of `config`/`split` from a repository's paths.
///
/// Understands the layouts the Hub uses: `{config}/{split}-NNNNN-of-NNNNN.parquet`,
/// `data/{split}-*.parquet` (the `default` config), and the Parquet
/// conversion branch's `{config}/{split}/NNNN.parquet` and
/// `{config}/partial-{split}/NNNN.parquet`.
pub fn select_split_files<'a>(
    paths: impl IntoIterator<Item = &'a str>,
    config: &str,
    split: &str,
) -> Vec<String> {
    let partial = format!("partial-{split}");
    let mut out: Vec<String> = paths
        .into_iter()
        .filter(|p| p.ends_with(".parquet"))
        .filter(|p| {
            let comps: Vec<&str> = p.split('/').collect();
            let (file, dirs) = comps.split_last().expect("split yields one item");
            let config_ok = dirs.contains(&config) || config == "default";
            let split_ok = dirs.last() == Some(&split)
                || dirs.last() == Some(&partial.as_str())
                || *file == format!("{split}.parquet")
                || file.starts_with(&format!("{split}-"))
                || file.starts_with(&format!("{split}_"));
            config_ok && split_ok
        })
        .map(String::from)
        .collect();
    out.sort();
    out
}

/// The cache folder name of a dataset repository: `datasets--org--name`.
pub fn repo_folder(repo: &str) -> String {
    format!("datasets--{}", repo.replace('/', "--"))
}

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 of a file, streamed.
pub fn sha256_file(path: &Path) -> Result<String, DatasetError> {
    digest_file(path, &ring::digest::SHA256, None)
}

fn digest_file(
    path: &Path,
    alg: &'static ring::digest::Algorithm,
    git_blob: Option<u64>,
) -> Result<String, DatasetError> {
    let io = |source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut ctx = ring::digest::Context::new(alg);
    if let Some(len) = git_blob {
        ctx.update(format!("blob {len}\0").as_bytes());
    }
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    Ok(hex(ctx.finish().as_ref()))
}

/// Checks a cached blob against its name (sha256 or git sha1) and size.
fn verify_blob(path: &Path, etag: &str, size: Option<u64>) -> Result<(), DatasetError> {
    let meta = std::fs::metadata(path).map_err(|source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let hint =
        "; the cached file is corrupt: delete it and run again with network access".to_string();
    if let Some(size) = size
        && meta.len() != size
    {
        return Err(DatasetError::Checksum {
            path: path.display().to_string(),
            expected: format!("{size} bytes"),
            actual: format!("{} bytes", meta.len()),
            hint,
        });
    }
    let actual = if is_hex(etag, 64) {
        digest_file(path, &ring::digest::SHA256, None)?
    } else if is_hex(etag, 40) {
        digest_file(
            path,
            &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
            Some(meta.len()),
        )?
    } else {
        return Ok(());
    };
    if actual != etag.to_ascii_lowercase() {
        return Err(DatasetError::Checksum {
            path: path.display().to_string(),
            expected: etag.to_string(),
            actual,
            hint,
        });
    }
    Ok(())
}

/// Writes `content` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, content: &[u8]) -> Result<(), DatasetError> {
    let io = |source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = tmp_path(path);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}

/// `<path>.<pid>.partial`, beside `path`.
pub(crate) fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.partial", std::process::id()));
    path.with_file_name(name)
}

/// The actionable message for a gated repository.
pub fn gate_message(repo: &str, reason: GateReason, endpoint: &str, token_search: &str) -> String {
    let page = format!("{endpoint}/datasets/{repo}");
    let head = match reason {
        GateReason::NoCredentials => format!(
            "SPEED-Bench needs '{repo}', which is gated on Hugging Face, and no Hugging Face \
             credentials were found (searched {token_search})."
        ),
        GateReason::NotAuthorized => format!(
            "SPEED-Bench needs '{repo}', which is gated on Hugging Face. You are authenticated, \
             but this account has not been granted access."
        ),
        GateReason::Rejected => format!(
            "SPEED-Bench needs '{repo}', which is gated on Hugging Face, and Hugging Face rejected \
             the credentials found on this machine ({token_search}). The token is most likely \
             expired, revoked, or lacks read scope."
        ),
    };
    format!(
        "{head}\n  1. Open {page} and accept the terms. Approval is automatic: no reviewer, no \
         waiting period.\n  2. Authenticate: run `hf auth login`, or set HF_TOKEN (in CI, the \
         token of a service account onboarded once by a human).\nAccess is granted to individual \
         users, not organizations. '{repo}' is the only gated source of the 14 and appears in \
         every SPEED-Bench config. On a host without access, import a bundle pre-staged on a \
         connected machine instead: `speedbench datasets import DIR`."
    )
}

/// The Hub client.
#[derive(Debug, Clone)]
pub struct HubClient {
    config: HubConfig,
    http: HttpClient,
}

impl HubClient {
    /// Builds a client (HTTPS through rustls, roots as [`speedbench_http`]
    /// chooses them).
    pub fn new(config: HubConfig) -> Result<HubClient, DatasetError> {
        let http = speedbench_http::new_client(&ClientOptions {
            max_idle_per_host: 4,
            ..Default::default()
        })
        .map_err(|e| DatasetError::Network {
            url: config.endpoint.clone(),
            message: describe(&e),
        })?;
        Ok(HubClient { config, http })
    }

    /// The configuration in use.
    pub fn config(&self) -> &HubConfig {
        &self.config
    }

    /// The cache folder of a dataset repository.
    pub fn repo_dir(&self, repo: &str) -> PathBuf {
        self.config.cache_dir.join(repo_folder(repo))
    }

    fn auth_headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        self.config
            .token
            .as_ref()
            .and_then(HubToken::header)
            .map(|v| vec![(AUTHORIZATION, v)])
            .unwrap_or_default()
    }

    fn offline_guard(&self, what: &str) -> Result<(), DatasetError> {
        if self.config.offline {
            return Err(DatasetError::Offline {
                what: what.to_string(),
                cache: self.config.cache_dir.clone(),
            });
        }
        Ok(())
    }

    async fn api_get(
        &self,
        url: &str,
        repo: &str,
        timeout: Duration,
    ) -> Result<speedbench_http::Buffered, DatasetError> {
        self.offline_guard(url)?;
        tracing::debug!(url, "hub GET");
        let resp = speedbench_http::get(&self.http, url, &self.auth_headers(), timeout)
            .await
            .map_err(|e| DatasetError::Network {
                url: url.to_string(),
                message: describe(&e),
            })?;
        if !resp.status.is_success() {
            return Err(self.status_error(url, repo, resp.status, &resp.headers, &resp.body));
        }
        Ok(resp)
    }

    /// Maps an error status to an actionable error.
    fn status_error(
        &self,
        url: &str,
        repo: &str,
        status: StatusCode,
        headers: &hyper::HeaderMap,
        body: &[u8],
    ) -> DatasetError {
        let header = |n: &str| {
            headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        let code = header("x-error-code").unwrap_or_default();
        let hub_message = header("x-error-message")
            .or_else(|| {
                serde_json::from_slice::<serde_json::Value>(body)
                    .ok()
                    .and_then(|v| v.get("error")?.as_str().map(str::to_string))
            })
            .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
        let has_token = self.config.token.is_some();
        let rejected = hub_message.contains("Invalid credentials")
            || (status == StatusCode::UNAUTHORIZED && has_token && code != "GatedRepo");
        if code == "GatedRepo" || (rejected && repo == HLE_REPO) {
            let reason = if rejected {
                GateReason::Rejected
            } else if status == StatusCode::FORBIDDEN {
                GateReason::NotAuthorized
            } else if has_token {
                GateReason::Rejected
            } else {
                GateReason::NoCredentials
            };
            return DatasetError::Gated {
                repo: repo.to_string(),
                reason,
                message: gate_message(
                    repo,
                    reason,
                    &self.config.endpoint,
                    &self.config.token_search,
                ),
            };
        }
        let advice = if rejected {
            format!(
                "the Hub rejected the token found on this machine ({}): it is expired, revoked or \
                 lacks read scope; run `hf auth login` or set HF_TOKEN",
                self.config.token_search
            )
        } else {
            match (status.as_u16(), code.as_str()) {
                (401 | 404, "RepoNotFound") | (404, "") => format!(
                    "repository {repo} not found (or private: a private repository needs a token \
                     with access; searched {})",
                    self.config.token_search
                ),
                (_, "RevisionNotFound") => format!("revision not found in {repo}"),
                (_, "EntryNotFound") => format!("file not found in {repo}"),
                (429, _) => "rate limited by the Hub; wait and retry".to_string(),
                _ => String::new(),
            }
        };
        let message = match (advice.is_empty(), hub_message.is_empty()) {
            (true, _) => hub_message,
            (false, true) => advice,
            (false, false) => format!("{hub_message} ({advice})"),
        };
        DatasetError::HubStatus {
            url: url.to_string(),
            status: status.as_u16(),
            message,
        }
    }

    /// Checks, with a short deadline and before any large download, that the
    /// credentials here can read a gated repository.
    ///
    /// Without a token this fails at once, without touching the network. In
    /// offline mode it does nothing.
    pub async fn check_gated_access(&self, repo: &str) -> Result<(), DatasetError> {
        if self.config.offline {
            return Ok(());
        }
        if self.config.token.is_none() {
            return Err(DatasetError::Gated {
                repo: repo.to_string(),
                reason: GateReason::NoCredentials,
                message: gate_message(
                    repo,
                    GateReason::NoCredentials,
                    &self.config.endpoint,
                    &self.config.token_search,
                ),
            });
        }
        let url = format!("{}/api/datasets/{repo}/auth-check", self.config.endpoint);
        match self.api_get(&url, repo, self.config.gate_timeout).await {
            Ok(_) => Ok(()),
            Err(e @ DatasetError::Gated { .. }) => Err(e),
            Err(DatasetError::HubStatus { status: 401, .. }) => Err(DatasetError::Gated {
                repo: repo.to_string(),
                reason: GateReason::Rejected,
                message: gate_message(
                    repo,
                    GateReason::Rejected,
                    &self.config.endpoint,
                    &self.config.token_search,
                ),
            }),
            Err(e) => Err(e),
        }
    }

    /// Resolves a branch or tag to a commit sha (a sha resolves to itself
    /// without a request), recording it under `refs/`. Offline, reads `refs/`.
    pub async fn resolve_revision(
        &self,
        repo: &str,
        revision: &str,
    ) -> Result<String, DatasetError> {
        if is_commit(revision) {
            return Ok(revision.to_ascii_lowercase());
        }
        let ref_file = self.repo_dir(repo).join("refs").join(revision);
        if self.config.offline {
            return std::fs::read_to_string(&ref_file)
                .map(|s| s.trim().to_string())
                .map_err(|_| DatasetError::Offline {
                    what: format!("{repo}@{revision} (no {})", ref_file.display()),
                    cache: self.config.cache_dir.clone(),
                });
        }
        let url = format!(
            "{}/api/datasets/{repo}/revision/{}",
            self.config.endpoint,
            percent_encode(revision, false)
        );
        let resp = self.api_get(&url, repo, self.config.api_timeout).await?;
        let sha = serde_json::from_slice::<serde_json::Value>(&resp.body)
            .ok()
            .and_then(|v| v.get("sha")?.as_str().map(str::to_string))
            .filter(|s| is_commit(s))
            .ok_or_else(|| DatasetError::BadHubAnswer {
                url: url.clone(),
                message: "no 40-hex `sha` field".into(),
            })?;
        write_atomic(&ref_file, sha.as_bytes())?;
        Ok(sha)
    }

    /// Lists every file of a commit (the tree API, recursive, following
    /// `Link: rel="next"` pages).
    pub async fn list_files(
        &self,
        repo: &str,
        commit: &str,
    ) -> Result<Vec<RepoFile>, DatasetError> {
        let mut url = Some(format!(
            "{}/api/datasets/{repo}/tree/{}?recursive=true",
            self.config.endpoint,
            percent_encode(commit, false)
        ));
        let mut files = Vec::new();
        while let Some(u) = url.take() {
            let resp = self.api_get(&u, repo, self.config.api_timeout).await?;
            let entries: Vec<TreeEntry> =
                serde_json::from_slice(&resp.body).map_err(|e| DatasetError::BadHubAnswer {
                    url: u.clone(),
                    message: format!("tree listing: {e}"),
                })?;
            for e in entries.into_iter().filter(|e| e.kind == "file") {
                let (size, lfs_sha256) = match e.lfs {
                    Some(l) => (l.size, Some(l.oid.to_ascii_lowercase())),
                    None => (e.size, None),
                };
                files.push(RepoFile {
                    path: e.path,
                    size,
                    oid: e.oid,
                    lfs_sha256,
                });
            }
            url = resp
                .headers
                .get("link")
                .and_then(|v| v.to_str().ok())
                .and_then(next_link);
        }
        Ok(files)
    }

    /// The Parquet files of one config and split at `revision`, downloaded
    /// into the cache if missing (or corrupt), verified, in path order.
    pub async fn fetch_split(
        &self,
        repo: &str,
        revision: &str,
        config: &str,
        split: &str,
    ) -> Result<SplitFiles, DatasetError> {
        let commit = self.resolve_revision(repo, revision).await?;
        let snapshot = self.repo_dir(repo).join("snapshots").join(&commit);
        if self.config.offline {
            let mut rel = Vec::new();
            collect_files(&snapshot, &snapshot, &mut rel);
            let chosen = select_split_files(rel.iter().map(String::as_str), config, split);
            if chosen.is_empty() {
                return Err(DatasetError::Offline {
                    what: format!(
                        "the {config:?}/{split:?} Parquet files of {repo}@{commit} (looked in {})",
                        snapshot.display()
                    ),
                    cache: self.config.cache_dir.clone(),
                });
            }
            let mut paths = Vec::new();
            for p in chosen {
                let local = snapshot.join(&p);
                verify_cached(&local)?;
                paths.push(local);
            }
            return Ok(SplitFiles { commit, paths });
        }
        let files = self.list_files(repo, &commit).await?;
        let chosen = select_split_files(files.iter().map(|f| f.path.as_str()), config, split);
        if chosen.is_empty() {
            let seen: Vec<&str> = files.iter().take(8).map(|f| f.path.as_str()).collect();
            return Err(DatasetError::NoParquetFiles {
                repo: repo.to_string(),
                revision: commit,
                config: config.to_string(),
                split: split.to_string(),
                seen: if seen.is_empty() {
                    "none".into()
                } else {
                    seen.join(", ")
                },
            });
        }
        let mut paths = Vec::new();
        for p in chosen {
            let file = files
                .iter()
                .find(|f| f.path == p)
                .expect("chosen from files");
            paths.push(self.download(repo, &commit, file).await?);
        }
        Ok(SplitFiles { commit, paths })
    }

    /// One file of a repository at `revision` (e.g. a JSONL source), from the
    /// cache or downloaded. Returns the commit and the local path.
    pub async fn fetch_file(
        &self,
        repo: &str,
        revision: &str,
        path: &str,
    ) -> Result<(String, PathBuf), DatasetError> {
        let commit = self.resolve_revision(repo, revision).await?;
        let local = self
            .repo_dir(repo)
            .join("snapshots")
            .join(&commit)
            .join(path);
        if self.config.offline {
            if !local.exists() {
                return Err(DatasetError::Offline {
                    what: format!("{repo}@{commit}/{path}"),
                    cache: self.config.cache_dir.clone(),
                });
            }
            verify_cached(&local)?;
            return Ok((commit, local));
        }
        let files = self.list_files(repo, &commit).await?;
        let file =
            files
                .iter()
                .find(|f| f.path == path)
                .ok_or_else(|| DatasetError::HubStatus {
                    url: format!(
                        "{}/datasets/{repo}/resolve/{commit}/{path}",
                        self.config.endpoint
                    ),
                    status: 404,
                    message: format!("{path} is not in {repo}@{commit}"),
                })?;
        let local = self.download(repo, &commit, file).await?;
        Ok((commit, local))
    }

    /// Downloads one file into the cache (unless a verified copy is there)
    /// and links it into the snapshot. Returns the snapshot path.
    pub async fn download(
        &self,
        repo: &str,
        commit: &str,
        file: &RepoFile,
    ) -> Result<PathBuf, DatasetError> {
        let repo_dir = self.repo_dir(repo);
        let etag = file.etag().to_string();
        let blob = repo_dir.join("blobs").join(&etag);
        let snapshot = repo_dir.join("snapshots").join(commit).join(&file.path);
        if blob.exists() {
            match verify_blob(&blob, &etag, Some(file.size)) {
                Ok(()) => {
                    link_snapshot(&blob, &snapshot, &file.path)?;
                    return Ok(snapshot);
                }
                Err(e) => {
                    tracing::warn!("{e}: downloading it again");
                    let _ = std::fs::remove_file(&blob);
                }
            }
        }
        self.offline_guard(&format!("{repo}@{commit}/{}", file.path))?;
        let url = format!(
            "{}/datasets/{repo}/resolve/{commit}/{}",
            self.config.endpoint,
            percent_encode(&file.path, true)
        );
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| DatasetError::Io { path, source }
        };
        std::fs::create_dir_all(blob.parent().expect("blob has a parent")).map_err(io(&blob))?;
        let mut tmp_name = blob.file_name().unwrap_or_default().to_os_string();
        tmp_name.push(format!(".{}.incomplete", std::process::id()));
        let tmp = blob.with_file_name(tmp_name);
        let result = self.stream_to(&url, repo, file, &tmp).await;
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        std::fs::rename(&tmp, &blob).map_err(io(&blob))?;
        link_snapshot(&blob, &snapshot, &file.path)?;
        tracing::info!(url, bytes = file.size, "downloaded");
        Ok(snapshot)
    }

    /// Streams `url` into `tmp`, checking size and checksum.
    async fn stream_to(
        &self,
        url: &str,
        repo: &str,
        file: &RepoFile,
        tmp: &Path,
    ) -> Result<(), DatasetError> {
        let net = |u: &str, message: String| DatasetError::Network {
            url: u.to_string(),
            message,
        };
        let first: hyper::Uri = url.parse().map_err(|e| net(url, format!("{e}")))?;
        let mut current = first.clone();
        let mut linked_size: Option<u64> = None;
        let mut linked_etag: Option<String> = None;
        let mut redirects = 0;
        let resp = loop {
            let mut req = Request::get(current.clone());
            // Credentials go to the Hub's own host only, never to a CDN.
            if current.authority() == first.authority() {
                for (n, v) in self.auth_headers() {
                    req = req.header(n, v);
                }
            }
            let req = req
                .header("accept-encoding", "identity")
                .body(Full::new(Bytes::new()))
                .map_err(|e| net(url, e.to_string()))?;
            let resp = tokio::time::timeout(self.config.api_timeout, self.http.request(req))
                .await
                .map_err(|_| {
                    net(
                        url,
                        format!("no answer within {:?}", self.config.api_timeout),
                    )
                })?
                .map_err(|e| net(&current.to_string(), describe(&e)))?;
            let h = resp.headers();
            let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
            if linked_size.is_none() {
                linked_size = get("x-linked-size").and_then(|s| s.parse().ok());
            }
            if linked_etag.is_none() {
                linked_etag = get("x-linked-etag").map(|s| {
                    s.trim_start_matches("W/")
                        .trim_matches('"')
                        .to_ascii_lowercase()
                });
            }
            if resp.status().is_redirection()
                && let Some(loc) = get(LOCATION.as_str())
            {
                redirects += 1;
                if redirects > speedbench_http::MAX_REDIRECTS {
                    return Err(net(url, "too many redirects".into()));
                }
                let next = if loc.contains("://") {
                    loc
                } else {
                    format!(
                        "{}://{}{}",
                        current.scheme_str().unwrap_or("http"),
                        current.authority().map(|a| a.as_str()).unwrap_or(""),
                        loc
                    )
                };
                current = next.parse().map_err(|e| net(&next, format!("{e}")))?;
                continue;
            }
            break resp;
        };
        let status = resp.status();
        if !status.is_success() {
            let headers = resp.headers().clone();
            let body = tokio::time::timeout(Duration::from_secs(5), resp.into_body().collect())
                .await
                .ok()
                .and_then(Result::ok)
                .map(|b| b.to_bytes())
                .unwrap_or_default();
            return Err(self.status_error(url, repo, status, &headers, &body));
        }
        if let (Some(want), Some(got)) = (&file.lfs_sha256, &linked_etag)
            && is_hex(got, 64)
            && want != got
        {
            return Err(DatasetError::Checksum {
                path: url.to_string(),
                expected: want.clone(),
                actual: got.clone(),
                hint: " (X-Linked-Etag disagrees with the tree listing; the revision changed?)"
                    .into(),
            });
        }
        let content_length = resp
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.parse::<u64>().ok());
        let expected = linked_size.unwrap_or(file.size);
        let mut out = std::io::BufWriter::with_capacity(
            1 << 20,
            std::fs::File::create(tmp).map_err(|source| DatasetError::Io {
                path: tmp.to_path_buf(),
                source,
            })?,
        );
        let (alg, prefix): (&'static ring::digest::Algorithm, Option<String>) =
            if file.lfs_sha256.is_some() {
                (&ring::digest::SHA256, None)
            } else {
                (
                    &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
                    Some(format!("blob {expected}\0")),
                )
            };
        let mut ctx = ring::digest::Context::new(alg);
        if let Some(p) = prefix {
            ctx.update(p.as_bytes());
        }
        let mut got: u64 = 0;
        let mut body = resp.into_body();
        let truncated = |got| DatasetError::Truncated {
            url: url.to_string(),
            expected: content_length.unwrap_or(expected).max(expected),
            got,
        };
        loop {
            let frame = match tokio::time::timeout(self.config.read_timeout, body.frame()).await {
                Err(_) => return Err(truncated(got)),
                Ok(None) => break,
                Ok(Some(Err(_))) => return Err(truncated(got)),
                Ok(Some(Ok(frame))) => frame,
            };
            if let Ok(data) = frame.into_data() {
                got += data.len() as u64;
                if got > expected {
                    return Err(DatasetError::Truncated {
                        url: url.to_string(),
                        expected,
                        got,
                    });
                }
                ctx.update(&data);
                out.write_all(&data).map_err(|source| DatasetError::Io {
                    path: tmp.to_path_buf(),
                    source,
                })?;
            }
        }
        if got != expected {
            return Err(DatasetError::Truncated {
                url: url.to_string(),
                expected,
                got,
            });
        }
        let file_out = out.into_inner().map_err(|e| DatasetError::Io {
            path: tmp.to_path_buf(),
            source: e.into_error(),
        })?;
        file_out.sync_all().map_err(|source| DatasetError::Io {
            path: tmp.to_path_buf(),
            source,
        })?;
        let actual = hex(ctx.finish().as_ref());
        let want = file.etag().to_ascii_lowercase();
        if (is_hex(&want, 64) || is_hex(&want, 40)) && actual != want {
            return Err(DatasetError::Checksum {
                path: url.to_string(),
                expected: want,
                actual,
                hint: "; nothing was cached, retry".into(),
            });
        }
        Ok(())
    }
}

/// Verifies a snapshot file through the blob it links to, when the blob is
/// named by its checksum.
fn verify_cached(snapshot_file: &Path) -> Result<(), DatasetError> {
    let target = std::fs::canonicalize(snapshot_file).map_err(|source| DatasetError::Io {
        path: snapshot_file.to_path_buf(),
        source,
    })?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    verify_blob(&target, &name, None)
}

fn collect_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_files(root, &p, out);
        } else if let Ok(rel) = p.strip_prefix(root) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// Makes `snapshot` a relative symlink to `blob` (a copy where symlinks fail).
fn link_snapshot(blob: &Path, snapshot: &Path, repo_path: &str) -> Result<(), DatasetError> {
    let io = |source| DatasetError::Io {
        path: snapshot.to_path_buf(),
        source,
    };
    if let Some(dir) = snapshot.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    if snapshot.exists() || snapshot.symlink_metadata().is_ok() {
        let _ = std::fs::remove_file(snapshot);
    }
    let depth = repo_path.split('/').count() + 1;
    let mut rel = PathBuf::new();
    for _ in 0..depth {
        rel.push("..");
    }
    rel.push("blobs");
    rel.push(blob.file_name().unwrap_or_default());
    #[cfg(unix)]
    if std::os::unix::fs::symlink(&rel, snapshot).is_ok() {
        return Ok(());
    }
    let _ = rel;
    std::fs::copy(blob, snapshot).map_err(io)?;
    Ok(())
}

/// The `rel="next"` URL of a `Link` header.
fn next_link(link: &str) -> Option<String> {
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params.contains("rel=\"next\"").then(|| {
            url.trim()
                .trim_start_matches('<')
                .trim_end_matches('>')
                .to_string()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn environment_is_read_like_huggingface_hub() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "hf_fromfile\n").unwrap();
        let home = dir.path().display().to_string();
        let c = HubConfig::from_vars(vars(&[
            ("HF_HOME", &home),
            ("HF_ENDPOINT", "http://127.0.0.1:1/"),
            ("HF_HUB_OFFLINE", "yes"),
        ]));
        assert_eq!(c.endpoint, "http://127.0.0.1:1");
        assert_eq!(c.cache_dir, dir.path().join("hub"));
        assert_eq!(c.token, Some(HubToken::new("hf_fromfile")));
        assert!(c.offline);
        assert!(!format!("{c:?}").contains("hf_fromfile"));
        let c = HubConfig::from_vars(vars(&[
            ("HF_HOME", &home),
            ("HF_TOKEN", "hf_env"),
            ("HF_HUB_CACHE", "/x/hub"),
        ]));
        assert_eq!(c.token, Some(HubToken::new("hf_env")));
        assert_eq!(c.cache_dir, PathBuf::from("/x/hub"));
        assert_eq!(c.endpoint, DEFAULT_ENDPOINT);
        assert!(!c.offline);
        let c = HubConfig::from_vars(vars(&[
            ("HF_HOME", &home),
            ("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"),
        ]));
        assert_eq!(c.token, None);
        let c = HubConfig::from_vars(vars(&[("HOME", "/h")]));
        assert_eq!(c.cache_dir, PathBuf::from("/h/.cache/huggingface/hub"));
    }

    #[test]
    fn split_files_follow_the_hub_layouts() {
        let paths = [
            "README.md",
            "qualitative/test-00000-of-00001.parquet",
            "throughput_16k/test-00000-of-00001.parquet",
            "throughput_1k/test-00000-of-00002.parquet",
            "throughput_1k/test-00001-of-00002.parquet",
            "main/test/0000.parquet",
            "main/train/0000.parquet",
            "data/test-00000-of-00001.parquet",
        ];
        let p = paths.iter().copied();
        assert_eq!(
            select_split_files(p.clone(), "throughput_1k", "test"),
            vec![
                "throughput_1k/test-00000-of-00002.parquet",
                "throughput_1k/test-00001-of-00002.parquet"
            ]
        );
        assert_eq!(
            select_split_files(p.clone(), "main", "test"),
            vec!["main/test/0000.parquet"]
        );
        assert!(
            select_split_files(p.clone(), "default", "test")
                .contains(&"data/test-00000-of-00001.parquet".to_string())
        );
        assert!(select_split_files(p, "nope", "test").is_empty());
    }

    #[test]
    fn encoding_links_and_folders() {
        assert_eq!(
            percent_encode("refs/convert/parquet", false),
            "refs%2Fconvert%2Fparquet"
        );
        assert_eq!(percent_encode("a b/c.parquet", true), "a%20b/c.parquet");
        assert_eq!(
            repo_folder("nvidia/SPEED-Bench"),
            "datasets--nvidia--SPEED-Bench"
        );
        assert_eq!(
            next_link("<http://h/api?cursor=2>; rel=\"next\""),
            Some("http://h/api?cursor=2".into())
        );
        assert_eq!(next_link("<http://h/a>; rel=\"prev\""), None);
    }

    #[test]
    fn the_gate_message_says_what_to_do() {
        let m = gate_message(
            HLE_REPO,
            GateReason::NoCredentials,
            DEFAULT_ENDPOINT,
            "$HF_TOKEN",
        );
        assert!(m.contains("https://huggingface.co/datasets/cais/hle"));
        assert!(m.contains("hf auth login") && m.contains("HF_TOKEN"));
    }
}
