//! A run whose output directory is a store URL (`s3://`, `gs://`,
//! `az://`): staged in a local directory, its records streamed up as it
//! goes, the rest uploaded at the end; and store URLs fetched for reading.
//! The crate's one door to `speedbench-store` (its `store` feature;
//! `no_store.rs` stands in without it).

use std::path::{Path, PathBuf};

use speedbench_store::{RunUpload, StoreOptions, fetch, open};

pub use crate::store_types::{StoreError, StoreUrl, UploadReport};

use crate::error::RunError;

/// The store URL a path names, or `None` for a local path.
pub fn store_url(path: &Path, field: &str) -> Result<Option<StoreUrl>, RunError> {
    StoreUrl::from_path(path)
        .transpose()
        .map_err(|source| RunError::Store {
            context: field.to_string(),
            source,
        })
}

/// When `dir` is a store URL: refuses it if it already holds a run (a
/// sweep checks every run's URL before its first request). A local path
/// passes.
pub(crate) async fn check_vacant(dir: &Path) -> Result<(), RunError> {
    let Some(url) = store_url(dir, "the run directory")? else {
        return Ok(());
    };
    let store = open(&url, &StoreOptions::default()).map_err(|source| RunError::Store {
        context: format!("opening {url}"),
        source,
    })?;
    match speedbench_store::check_vacant(&store, &url).await {
        Ok(()) => Ok(()),
        Err(e @ StoreError::Occupied { .. }) => Err(RunError::invalid(
            e.to_string(),
            "its results are kept (give --overwrite to replace the sweep's runs)",
        )),
        Err(source) => Err(RunError::Store {
            context: format!("checking {url} before the sweep"),
            source,
        }),
    }
}

/// Fetches the run directory (or directories) at `url` into `into`:
/// the objects and bytes moved and the local root.
pub(crate) async fn fetch_url(
    url: &StoreUrl,
    into: &Path,
) -> Result<(u64, u64, PathBuf), RunError> {
    let store_error = |context: String| {
        move |source| RunError::Store {
            context: context.clone(),
            source,
        }
    };
    let store =
        open(url, &StoreOptions::default()).map_err(store_error(format!("opening {url}")))?;
    let got = fetch(&store, url, into)
        .await
        .map_err(store_error(format!("fetching {url}")))?;
    Ok((got.objects as u64, got.bytes, got.root))
}

/// What an upload moved: objects, bytes, where, what streamed, whether it
/// restarted.
pub(crate) fn upload_totals(report: &UploadReport) -> (usize, u64, String, u64, Option<String>) {
    (
        report.objects.len(),
        report.objects.iter().map(|o| o.bytes).sum(),
        report.url.to_string(),
        report.streamed_bytes,
        report.restarted.clone(),
    )
}

/// A run being staged for upload.
pub(crate) struct StagedRun {
    url: StoreUrl,
    /// The local directory the run writes.
    dir: PathBuf,
    /// Made by us (removed after a good upload) rather than given.
    temporary: bool,
    upload: RunUpload,
}

impl StagedRun {
    /// Opens the store and checks, before anything is sent, that it takes
    /// the credentials and (without `overwrite`) holds no run at `url`.
    pub(crate) async fn begin(
        url: StoreUrl,
        staging: Option<PathBuf>,
        overwrite: bool,
    ) -> Result<StagedRun, RunError> {
        let store = open(&url, &StoreOptions::default()).map_err(|source| RunError::Store {
            context: format!("opening {url}"),
            source,
        })?;
        let (dir, temporary) = match staging {
            Some(dir) => (dir, false),
            None => {
                let dir = tempfile::Builder::new()
                    .prefix("speedbench-staging-")
                    .tempdir()
                    .map_err(|source| RunError::Io {
                        context: "making a staging directory for the upload".into(),
                        source,
                    })?;
                (dir.keep(), true)
            }
        };
        let upload = match RunUpload::begin(store, url.clone(), &dir, overwrite).await {
            Ok(upload) => upload,
            Err(e) => {
                // A refused run leaves no empty directory of ours behind.
                if temporary {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                let context = match &e {
                    StoreError::Occupied { .. } => {
                        "not overwriting a run (give --overwrite to replace it)".to_string()
                    }
                    _ => format!("checking --output-artifact-dir {url} before the run"),
                };
                return Err(RunError::Store { context, source: e });
            }
        };
        Ok(StagedRun {
            url,
            dir,
            temporary,
            upload,
        })
    }

    /// The store URL.
    pub(crate) fn url(&self) -> &StoreUrl {
        &self.url
    }

    /// The local directory the run writes.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// `path` in the staging directory as the URL it is uploaded to.
    pub(crate) fn shown(&self, path: &Path) -> String {
        match path.strip_prefix(&self.dir) {
            Ok(rel) => self.url.join(&rel.to_string_lossy()).to_string(),
            Err(_) => path.display().to_string(),
        }
    }

    /// Uploads what the run left and waits for the store to have it.
    pub(crate) async fn finish(self) -> Result<(UploadReport, Uploaded), RunError> {
        let (url, dir, temporary) = (self.url.clone(), self.dir.clone(), self.temporary);
        match self.upload.finish().await {
            Ok(report) => Ok((report, Uploaded { dir, temporary })),
            Err(source) => Err(RunError::Store {
                context: format!(
                    "uploading the run to {url} (every file is kept in {})",
                    dir.display()
                ),
                source,
            }),
        }
    }
}

/// A run the store holds; its staging directory goes once the run's
/// files are no longer read.
pub(crate) struct Uploaded {
    dir: PathBuf,
    temporary: bool,
}

impl Uploaded {
    /// Removes a temporary staging directory; the warning when it cannot.
    pub(crate) fn clean_up(self) -> Option<String> {
        if !self.temporary {
            return None;
        }
        std::fs::remove_dir_all(&self.dir).err().map(|e| {
            format!(
                "the staging directory {} could not be removed: {e}",
                self.dir.display()
            )
        })
    }
}
