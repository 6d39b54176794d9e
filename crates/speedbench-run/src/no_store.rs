//! Stands in for `staging.rs` when the crate is built without its `store`
//! feature (no object-store clients: about 57 packages fewer). A local run
//! directory works as always; a store URL given anywhere is refused with
//! what to change. The store types are empty: no value of them exists.

use std::path::{Path, PathBuf};

use crate::error::RunError;
pub use crate::store_types::{StoreError, StoreUrl, UploadReport};

/// The schemes `speedbench-store` reads, refused here by name.
const SCHEMES: [&str; 6] = ["s3://", "gs://", "gcs://", "az://", "azure://", "abfs://"];

/// `None` for a local path; a store URL is refused: this build has no
/// object-store clients.
pub fn store_url(path: &Path, field: &str) -> Result<Option<StoreUrl>, RunError> {
    let text = path.to_string_lossy();
    if SCHEMES.iter().any(|s| text.starts_with(s)) {
        return Err(RunError::invalid(
            field,
            format!(
                "{text} is a store URL, and this build of speedbench-run has no object stores \
                 (its `store` feature, or the `speedbench` facade's, brings them)"
            ),
        ));
    }
    Ok(None)
}

pub(crate) async fn check_vacant(dir: &Path) -> Result<(), RunError> {
    store_url(dir, "the run directory").map(|_| ())
}

pub(crate) async fn fetch_url(
    url: &StoreUrl,
    _into: &Path,
) -> Result<(u64, u64, PathBuf), RunError> {
    match *url {}
}

pub(crate) fn upload_totals(report: &UploadReport) -> (usize, u64, String, u64, Option<String>) {
    match *report {}
}

/// A staged run; none exists without stores.
pub(crate) enum StagedRun {}

impl StagedRun {
    pub(crate) async fn begin(
        url: StoreUrl,
        _staging: Option<PathBuf>,
        _overwrite: bool,
    ) -> Result<StagedRun, RunError> {
        match url {}
    }

    pub(crate) fn url(&self) -> &StoreUrl {
        match *self {}
    }

    pub(crate) fn dir(&self) -> &Path {
        match *self {}
    }

    pub(crate) fn shown(&self, _path: &Path) -> String {
        match *self {}
    }

    pub(crate) async fn finish(self) -> Result<(UploadReport, Uploaded), RunError> {
        match self {}
    }
}

/// An uploaded run; none exists without stores.
pub(crate) enum Uploaded {}

impl Uploaded {
    pub(crate) fn clean_up(self) -> Option<String> {
        match self {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_url_is_refused_by_name_and_a_local_path_passes() {
        let e = store_url(Path::new("s3://b/runs"), "--output-artifact-dir").unwrap_err();
        assert!(e.to_string().contains("`store` feature"), "{e}");
        assert!(
            store_url(Path::new("runs/r1"), "--output-artifact-dir")
                .unwrap()
                .is_none()
        );
    }
}
