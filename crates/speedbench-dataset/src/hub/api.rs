//! The Hub's JSON API: revisions and recursive file listings.

use std::time::Duration;

use serde::Deserialize;
use speedbench_http::describe;

use crate::error::DatasetError;
use crate::error::FetchError;
use crate::files::write_atomic;

use super::HubClient;
use super::paths::{is_commit, next_link, percent_encode};

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

impl HubClient {
    pub(super) async fn api_get(
        &self,
        url: &str,
        repo: &str,
        timeout: Duration,
    ) -> Result<speedbench_http::Buffered, DatasetError> {
        self.offline_guard(url)?;
        tracing::debug!(url, "hub GET");
        let resp = speedbench_http::get(&self.http, url, &self.auth_headers(), timeout)
            .await
            .map_err(|e| {
                DatasetError::from(FetchError::Network {
                    url: url.to_string(),
                    message: describe(&e),
                    source: Some(Box::new(e)),
                })
            })?;
        if !resp.status.is_success() {
            return Err(self.status_error(url, repo, resp.status, &resp.headers, &resp.body));
        }
        Ok(resp)
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
                .map_err(|_| {
                    DatasetError::from(FetchError::Offline {
                        what: format!("{repo}@{revision} (no {})", ref_file.display()),
                        cache: self.config.cache_dir.clone(),
                    })
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
            .ok_or_else(|| {
                DatasetError::from(FetchError::BadAnswer {
                    url: url.clone(),
                    message: "no 40-hex `sha` field".into(),
                })
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
            let entries: Vec<TreeEntry> = serde_json::from_slice(&resp.body).map_err(|e| {
                DatasetError::from(FetchError::BadAnswer {
                    url: u.clone(),
                    message: format!("tree listing: {e}"),
                })
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
}
