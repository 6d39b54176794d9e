//! Store URLs (`s3://`, `gs://`, `az://`) where the commands take run
//! directories: `profile --output-artifact-dir` uploads, `report` and
//! `compare` fetch. The work is speedbench-store's; this module gives it
//! the command line's words.

use std::path::{Path, PathBuf};

use speedbench_store::{StoreOptions, StoreUrl, UploadReport, fetch, open};

use crate::{CliError, Context};

/// The store URL `path` is, if it is one.
pub(crate) fn store_url(path: &Path, flag: &str) -> Result<Option<StoreUrl>, CliError> {
    StoreUrl::from_path(path)
        .transpose()
        .context(flag.to_string())
}

/// Local copies of the store URLs among a command's run arguments.
pub(crate) struct Localized {
    /// Holds the copies until the command is done.
    _dir: Option<tempfile::TempDir>,
    /// Each URL given, with where its copy is.
    pub(crate) fetched: Vec<(String, PathBuf)>,
}

impl Localized {
    /// `path` inside a local copy as the URL it was fetched from: what the
    /// user gave, and not a temporary directory gone once the command ends.
    pub(crate) fn shown(&self, path: &Path) -> PathBuf {
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
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (url, local) in &self.fetched {
            out = out.replace(&local.display().to_string(), url.trim_end_matches('/'));
        }
        out
    }
}

/// Fetches every store URL among `paths` into one temporary directory and
/// puts the local copy in its place; local paths stay as given.
pub(crate) async fn localize(paths: &mut [PathBuf], flag: &str) -> Result<Localized, CliError> {
    let mut dir = None;
    let mut fetched = Vec::new();
    for (i, path) in paths.iter_mut().enumerate() {
        let Some(url) = store_url(path, flag)? else {
            continue;
        };
        if dir.is_none() {
            dir = Some(
                tempfile::Builder::new()
                    .prefix("speedbench-fetch-")
                    .tempdir()
                    .context("making a directory for the fetched runs")?,
            );
        }
        let into = dir
            .as_ref()
            .map(|d| d.path().join(i.to_string()))
            .unwrap_or_default();
        let store = open(&url, &StoreOptions::default()).context(format!("opening {url}"))?;
        let got = fetch(&store, &url, &into)
            .await
            .context(format!("fetching {url}"))?;
        eprintln!(
            "fetched {url}: {} objects, {} (a temporary copy, removed when the command ends)",
            got.objects,
            bytes(got.bytes),
        );
        fetched.push((path.to_string_lossy().into_owned(), got.root.clone()));
        *path = got.root;
    }
    Ok(Localized { _dir: dir, fetched })
}

pub(crate) fn uploaded_line(report: &UploadReport) -> String {
    let total: u64 = report.objects.iter().map(|o| o.bytes).sum();
    let mut line = format!(
        "uploaded {} objects ({}) to {}; {} of the records streamed while the run went",
        report.objects.len(),
        bytes(total),
        report.url,
        bytes(report.streamed_bytes)
    );
    if let Some(why) = &report.restarted {
        line.push_str(&format!(" (then {why})"));
    }
    line
}

fn bytes(n: u64) -> String {
    if n >= 1 << 20 {
        format!("{:.1} MiB", n as f64 / (1u64 << 20) as f64)
    } else if n >= 1 << 10 {
        format!("{:.1} KiB", n as f64 / 1024.0)
    } else {
        format!("{n} B")
    }
}
