//! Downloading one file into the cache: redirects (credentials to the Hub's
//! own host only), size and checksum checks while streaming, and the rename
//! that makes a verified blob visible.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header::{CONTENT_LENGTH, LOCATION};
use speedbench_http::describe;

use crate::error::DatasetError;
use crate::error::{BoxedCause, ChecksumOf, FetchError, IntegrityError};
use crate::files::hex;

use super::HubClient;
use super::api::RepoFile;
use super::cache::{link_snapshot, verify_blob};
use super::paths::{is_hex, percent_encode};

impl HubClient {
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
        let (resp, linked) = self.follow_redirects(url).await?;
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
        if let (Some(want), Some(got)) = (&file.lfs_sha256, &linked.etag)
            && is_hex(got, 64)
            && want != got
        {
            return Err(DatasetError::from(IntegrityError::Checksum {
                path: url.to_string(),
                expected: want.clone(),
                actual: got.clone(),
                of: ChecksumOf::LinkedEtag,
            }));
        }
        let content_length = resp
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.parse::<u64>().ok());
        let expected = linked.size.unwrap_or(file.size);
        let sink = VerifiedFile::create(tmp, file, expected)?;
        let digest = self
            .copy_body(resp.into_body(), sink, url, expected, content_length)
            .await?;
        let want = file.etag().to_ascii_lowercase();
        if (is_hex(&want, 64) || is_hex(&want, 40)) && digest != want {
            return Err(DatasetError::from(IntegrityError::Checksum {
                path: url.to_string(),
                expected: want,
                actual: digest,
                of: ChecksumOf::Download,
            }));
        }
        Ok(())
    }

    /// GETs `url`, following redirects (credentials only to the Hub's own
    /// host, never to a CDN); the final response and what the Hub said of
    /// the linked LFS object on the way.
    async fn follow_redirects(
        &self,
        url: &str,
    ) -> Result<(hyper::Response<hyper::body::Incoming>, Linked), DatasetError> {
        let first: hyper::Uri = url.parse().map_err(|e| net_cause(url, Box::new(e)))?;
        let mut current = first.clone();
        let mut linked = Linked::default();
        let mut redirects = 0;
        loop {
            let mut req = Request::get(current.clone());
            if current.authority() == first.authority() {
                for (n, v) in self.auth_headers() {
                    req = req.header(n, v);
                }
            }
            let req = req
                .header("accept-encoding", "identity")
                .body(Full::new(Bytes::new()))
                .map_err(|e| net_cause(url, Box::new(e)))?;
            let resp = tokio::time::timeout(self.config.api_timeout, self.http.request(req))
                .await
                .map_err(|_| {
                    net(
                        url,
                        format!("no answer within {:?}", self.config.api_timeout),
                    )
                })?
                .map_err(|e| net_cause(&current.to_string(), Box::new(e)))?;
            linked.read(resp.headers());
            let location = resp
                .headers()
                .get(LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let Some(loc) = location.filter(|_| resp.status().is_redirection()) else {
                return Ok((resp, linked));
            };
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
            current = next.parse().map_err(|e| net_cause(&next, Box::new(e)))?;
        }
    }

    /// Streams `body` into `sink`, refusing a body longer or shorter than
    /// `expected`; the digest of what was written.
    async fn copy_body(
        &self,
        mut body: hyper::body::Incoming,
        mut sink: VerifiedFile,
        url: &str,
        expected: u64,
        content_length: Option<u64>,
    ) -> Result<String, DatasetError> {
        let truncated = |expected, got| {
            DatasetError::from(IntegrityError::Truncated {
                url: url.to_string(),
                expected,
                got,
            })
        };
        let announced = content_length.unwrap_or(expected).max(expected);
        loop {
            let frame = match tokio::time::timeout(self.config.read_timeout, body.frame()).await {
                Err(_) | Ok(Some(Err(_))) => return Err(truncated(announced, sink.written)),
                Ok(None) => break,
                Ok(Some(Ok(frame))) => frame,
            };
            if let Ok(data) = frame.into_data() {
                if sink.written + data.len() as u64 > expected {
                    return Err(truncated(expected, sink.written + data.len() as u64));
                }
                sink.write(&data)?;
            }
        }
        if sink.written != expected {
            return Err(truncated(expected, sink.written));
        }
        sink.finish()
    }
}

/// What the Hub says of the LFS object a file links to, from the first
/// response that says it (`x-linked-size`, `x-linked-etag`).
#[derive(Debug, Default)]
struct Linked {
    size: Option<u64>,
    etag: Option<String>,
}

impl Linked {
    fn read(&mut self, h: &hyper::HeaderMap) {
        let get = |n: &str| h.get(n).and_then(|v| v.to_str().ok()).map(str::to_string);
        if self.size.is_none() {
            self.size = get("x-linked-size").and_then(|s| s.parse().ok());
        }
        if self.etag.is_none() {
            self.etag = get("x-linked-etag").map(|s| {
                s.trim_start_matches("W/")
                    .trim_matches('"')
                    .to_ascii_lowercase()
            });
        }
    }
}

/// A download being written and hashed as it comes: SHA-256 for an LFS
/// file, git's blob SHA-1 (`blob SIZE\0` then the bytes) otherwise, the
/// digests the Hub names files by.
struct VerifiedFile {
    out: std::io::BufWriter<std::fs::File>,
    path: PathBuf,
    ctx: ring::digest::Context,
    written: u64,
}

impl VerifiedFile {
    fn create(path: &Path, file: &RepoFile, expected: u64) -> Result<VerifiedFile, DatasetError> {
        let io = |source| DatasetError::Io {
            path: path.to_path_buf(),
            source,
        };
        let out =
            std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path).map_err(io)?);
        let ctx = if file.lfs_sha256.is_some() {
            ring::digest::Context::new(&ring::digest::SHA256)
        } else {
            let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
            ctx.update(format!("blob {expected}\0").as_bytes());
            ctx
        };
        Ok(VerifiedFile {
            out,
            path: path.to_path_buf(),
            ctx,
            written: 0,
        })
    }

    fn write(&mut self, data: &[u8]) -> Result<(), DatasetError> {
        self.written += data.len() as u64;
        self.ctx.update(data);
        self.out.write_all(data).map_err(|source| DatasetError::Io {
            path: self.path.clone(),
            source,
        })
    }

    /// Flushes and syncs the file; the hex digest of what it holds.
    fn finish(self) -> Result<String, DatasetError> {
        let path = self.path;
        let file = self.out.into_inner().map_err(|e| DatasetError::Io {
            path: path.clone(),
            source: e.into_error(),
        })?;
        file.sync_all()
            .map_err(|source| DatasetError::Io { path, source })?;
        Ok(hex(self.ctx.finish().as_ref()))
    }
}

/// A network failure of `u` described in words.
fn net(u: &str, message: String) -> DatasetError {
    DatasetError::from(FetchError::Network {
        url: u.to_string(),
        message,
        source: None,
    })
}

/// A network failure of `u` with its cause.
fn net_cause(u: &str, cause: BoxedCause) -> DatasetError {
    DatasetError::from(FetchError::Network {
        url: u.to_string(),
        message: describe(cause.as_ref()),
        source: Some(cause),
    })
}
