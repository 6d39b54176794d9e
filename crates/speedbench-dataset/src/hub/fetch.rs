//! Fetching a config's split, or one file, at a revision: from the cache
//! (offline) or listed and downloaded.

use std::path::PathBuf;

use crate::error::DatasetError;
use crate::error::FetchError;

use super::HubClient;
use super::cache::{collect_files, verify_cached};
use super::paths::select_split_files;

/// Files of one config and split, downloaded or found in the cache.
#[derive(Debug, Clone)]
pub struct SplitFiles {
    /// The commit the revision resolved to.
    pub commit: String,
    /// Local paths (snapshot paths), in repository path order.
    pub paths: Vec<PathBuf>,
}

impl HubClient {
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
                return Err(DatasetError::from(FetchError::Offline {
                    what: format!(
                        "the {config:?}/{split:?} Parquet files of {repo}@{commit} (looked in {})",
                        snapshot.display()
                    ),
                    cache: self.config.cache_dir.clone(),
                }));
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
            return Err(DatasetError::from(FetchError::NoParquetFiles {
                repo: repo.to_string(),
                revision: commit,
                config: config.to_string(),
                split: split.to_string(),
                seen: if seen.is_empty() {
                    "none".into()
                } else {
                    seen.join(", ")
                },
            }));
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
                return Err(DatasetError::from(FetchError::Offline {
                    what: format!("{repo}@{commit}/{path}"),
                    cache: self.config.cache_dir.clone(),
                }));
            }
            verify_cached(&local)?;
            return Ok((commit, local));
        }
        let files = self.list_files(repo, &commit).await?;
        let file = files.iter().find(|f| f.path == path).ok_or_else(|| {
            DatasetError::from(FetchError::Status {
                url: format!(
                    "{}/datasets/{repo}/resolve/{commit}/{path}",
                    self.config.endpoint
                ),
                status: 404,
                message: format!("{path} is not in {repo}@{commit}"),
            })
        })?;
        let local = self.download(repo, &commit, file).await?;
        Ok((commit, local))
    }
}
