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

mod api;
mod cache;
mod config;
mod download;
mod fetch;
mod gate;
mod paths;
mod status;

use std::path::PathBuf;

use hyper::header::{AUTHORIZATION, HeaderName, HeaderValue};
use speedbench_http::{ClientOptions, HttpClient, describe};

use crate::error::DatasetError;
use crate::error::FetchError;

pub use crate::files::{hex, sha256_file, write_atomic};
pub use api::RepoFile;
pub use config::{DEFAULT_ENDPOINT, HubConfig, HubToken};
pub use fetch::SplitFiles;
pub use gate::{HLE_REPO, gate_message};
pub use paths::{is_commit, percent_encode, repo_folder, select_split_files};

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
        .map_err(|e| {
            DatasetError::from(FetchError::Network {
                url: config.endpoint.clone(),
                message: describe(&e),
                source: Some(Box::new(e)),
            })
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
            return Err(DatasetError::from(FetchError::Offline {
                what: what.to_string(),
                cache: self.config.cache_dir.clone(),
            }));
        }
        Ok(())
    }
}
