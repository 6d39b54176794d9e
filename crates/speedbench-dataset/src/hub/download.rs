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
        let net = |u: &str, message: String| {
            DatasetError::from(FetchError::Network {
                url: u.to_string(),
                message,
                source: None,
            })
        };
        let net_cause = |u: &str, cause: BoxedCause| {
            DatasetError::from(FetchError::Network {
                url: u.to_string(),
                message: describe(cause.as_ref()),
                source: Some(cause),
            })
        };
        let first: hyper::Uri = url.parse().map_err(|e| net_cause(url, Box::new(e)))?;
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
                current = next.parse().map_err(|e| net_cause(&next, Box::new(e)))?;
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
        let truncated = |got| {
            DatasetError::from(IntegrityError::Truncated {
                url: url.to_string(),
                expected: content_length.unwrap_or(expected).max(expected),
                got,
            })
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
                    return Err(DatasetError::from(IntegrityError::Truncated {
                        url: url.to_string(),
                        expected,
                        got,
                    }));
                }
                ctx.update(&data);
                out.write_all(&data).map_err(|source| DatasetError::Io {
                    path: tmp.to_path_buf(),
                    source,
                })?;
            }
        }
        if got != expected {
            return Err(DatasetError::from(IntegrityError::Truncated {
                url: url.to_string(),
                expected,
                got,
            }));
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
            return Err(DatasetError::from(IntegrityError::Checksum {
                path: url.to_string(),
                expected: want,
                actual,
                of: ChecksumOf::Download,
            }));
        }
        Ok(())
    }
}
