//! Run directories given as store URLs (`s3://`, `gs://`, `az://`) to a
//! report or a comparison: fetched into one temporary directory first,
//! and named by their URL, never by the temporary copy, in what is shown.

use std::path::{Path, PathBuf};

use crate::error::RunError;
use crate::staging::{UploadReport, fetch_url, store_url, upload_totals};

/// Local copies of the store URLs among a command's run arguments; they
/// are removed when this is dropped.
#[derive(Debug, Default)]
pub struct Localized {
    /// Holds the copies until the command is done.
    _dir: Option<tempfile::TempDir>,
    /// Each URL given, with where its copy is.
    fetched: Vec<(String, PathBuf)>,
    /// One line per URL fetched (objects, bytes), for the user.
    pub notes: Vec<String>,
}

impl Localized {
    /// `path` inside a local copy as the URL it was fetched from: what the
    /// user gave, and not a temporary directory gone once the command ends.
    pub fn shown(&self, path: &Path) -> PathBuf {
        for (url, local) in &self.fetched {
            if let Ok(rest) = path.strip_prefix(local) {
                let url = url.trim_end_matches('/');
                return match rest.to_string_lossy().as_ref() {
                    "" => PathBuf::from(url),
                    rest => PathBuf::from(format!("{url}/{rest}")),
                };
            }
        }
        path.to_path_buf()
    }

    /// `text` with every local copy's path replaced by its URL.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (url, local) in &self.fetched {
            out = out.replace(&local.display().to_string(), url.trim_end_matches('/'));
        }
        out
    }
}

/// Fetches every store URL among `paths` into one temporary directory and
/// puts the local copy in its place; local paths stay as given. `flag`
/// names the argument in errors.
pub async fn localize(paths: &mut [PathBuf], flag: &str) -> Result<Localized, RunError> {
    let mut out = Localized::default();
    for (i, path) in paths.iter_mut().enumerate() {
        let Some(url) = store_url(path, flag)? else {
            continue;
        };
        if out._dir.is_none() {
            out._dir = Some(
                tempfile::Builder::new()
                    .prefix("speedbench-fetch-")
                    .tempdir()
                    .map_err(|source| RunError::Io {
                        context: "making a directory for the fetched runs".into(),
                        source,
                    })?,
            );
        }
        let into = out
            ._dir
            .as_ref()
            .map(|d| d.path().join(i.to_string()))
            .unwrap_or_default();
        let (objects, moved, root) = fetch_url(&url, &into).await?;
        out.notes.push(format!(
            "fetched {url}: {objects} objects, {} (a temporary copy, removed when the command ends)",
            bytes(moved),
        ));
        out.fetched
            .push((path.to_string_lossy().into_owned(), root.clone()));
        *path = root;
    }
    Ok(out)
}

/// What an upload moved, in one line.
pub fn uploaded_line(report: &UploadReport) -> String {
    let (objects, total, url, streamed, restarted) = upload_totals(report);
    let mut line = format!(
        "uploaded {objects} objects ({}) to {url}; {} of the records streamed while the run went",
        bytes(total),
        bytes(streamed)
    );
    if let Some(why) = restarted {
        line.push_str(&format!(" (then {why})"));
    }
    line
}

/// A byte count as B, KiB or MiB.
fn bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_local_copy_is_shown_and_scrubbed_as_its_url() {
        let l = Localized {
            _dir: None,
            fetched: vec![("s3://b/runs/".into(), PathBuf::from("/tmp/f/0"))],
            notes: Vec::new(),
        };
        assert_eq!(
            l.shown(Path::new("/tmp/f/0/r1")),
            Path::new("s3://b/runs/r1")
        );
        assert_eq!(l.shown(Path::new("/tmp/f/0")), Path::new("s3://b/runs"));
        assert_eq!(l.shown(Path::new("local")), Path::new("local"));
        assert_eq!(
            l.scrub("bad /tmp/f/0/r1/run.json"),
            "bad s3://b/runs/r1/run.json"
        );
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(3 << 20), "3.0 MiB");
    }
}
