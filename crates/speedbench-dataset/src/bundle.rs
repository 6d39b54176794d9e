//! Pre-staged bundles: resolved rows plus a manifest, made on a connected
//! machine and imported on an air-gapped one.
//!
//! A bundle is a directory laid out like a dataset cache, so it can be used
//! directly with `--dataset-cache DIR`:
//!
//! ```text
//! DIR/manifest.json
//! DIR/speed-bench/<config>.jsonl      (SPEED-Bench, resolved, `messages` rows)
//! DIR/public/<name>.jsonl             (literature datasets)
//! ```
//!
//! The manifest records, per file, the dataset name, the Hub repository and
//! commit, the row count, the byte size and the sha256. Import and load
//! verify all three before trusting a file.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{ChecksumOf, IntegrityError};
use crate::hub::{hex, write_atomic};
use crate::registry::lookup;
use crate::{Dataset, DatasetError};

/// The manifest's file name inside a bundle or cache.
pub const MANIFEST_FILE: &str = "manifest.json";

/// The manifest format identifier.
pub const BUNDLE_FORMAT: &str = "speedbench-dataset-bundle/1";

/// A bundle's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleManifest {
    /// Always [`BUNDLE_FORMAT`].
    pub format: String,
    /// The files, one per dataset cache file.
    pub files: Vec<BundleEntry>,
}

/// One file of a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleEntry {
    /// The registry name it was staged for.
    pub dataset: String,
    /// Its path relative to the bundle, `/`-separated.
    pub file: String,
    /// Non-blank JSONL lines.
    pub rows: usize,
    /// Size in bytes.
    pub bytes: u64,
    /// sha256 of the content, hex.
    pub sha256: String,
    /// The Hub repository read, if any.
    pub repo: Option<String>,
    /// The commit read, if known.
    pub revision: Option<String>,
    /// How the rows were obtained.
    pub origin: String,
}

fn bundle_err(path: &Path, message: impl Into<String>) -> DatasetError {
    DatasetError::from(IntegrityError::Bundle {
        path: path.to_path_buf(),
        message: message.into(),
    })
}

/// Reads `dir/manifest.json`, if there is one.
pub fn read_manifest(dir: &Path) -> Result<Option<BundleManifest>, DatasetError> {
    let path = dir.join(MANIFEST_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(DatasetError::Io { path, source }),
    };
    let m: BundleManifest = serde_json::from_str(&text)
        .map_err(|e| bundle_err(&path, format!("invalid manifest: {e}")))?;
    if m.format != BUNDLE_FORMAT {
        return Err(bundle_err(
            &path,
            format!("format {:?}, expected {BUNDLE_FORMAT:?}", m.format),
        ));
    }
    for e in &m.files {
        safe_rel(&path, &e.file)?;
    }
    Ok(Some(m))
}

/// A manifest path must stay inside the bundle.
fn safe_rel(manifest: &Path, rel: &str) -> Result<PathBuf, DatasetError> {
    let p = PathBuf::from(rel);
    if rel.is_empty() || p.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Err(bundle_err(
            manifest,
            format!("file path {rel:?} must be relative and stay inside the bundle"),
        ));
    }
    Ok(p)
}

fn count_rows(text: &str) -> usize {
    text.lines().filter(|l| !l.trim().is_empty()).count()
}

/// Verifies one manifest entry against the file in `dir` (size, sha256 and
/// row count, from a single read) and returns the file's text.
pub fn verify_entry(dir: &Path, entry: &BundleEntry) -> Result<String, DatasetError> {
    let path = dir.join(&entry.file);
    let bytes = std::fs::read(&path).map_err(|source| DatasetError::Io {
        path: path.clone(),
        source,
    })?;
    let of = ChecksumOf::BundleFile {
        manifest: dir.join(MANIFEST_FILE),
    };
    if bytes.len() as u64 != entry.bytes {
        return Err(DatasetError::from(IntegrityError::Checksum {
            path: path.display().to_string(),
            expected: format!("{} bytes", entry.bytes),
            actual: format!("{} bytes", bytes.len()),
            of: of.clone(),
        }));
    }
    let actual = hex(ring::digest::digest(&ring::digest::SHA256, &bytes).as_ref());
    if actual != entry.sha256 {
        return Err(DatasetError::from(IntegrityError::Checksum {
            path: path.display().to_string(),
            expected: entry.sha256.clone(),
            actual,
            of,
        }));
    }
    let text =
        String::from_utf8(bytes).map_err(|e| bundle_err(&path, format!("not UTF-8: {e}")))?;
    let rows = count_rows(&text);
    if rows != entry.rows {
        return Err(bundle_err(
            &path,
            format!("{rows} rows, the manifest says {}", entry.rows),
        ));
    }
    Ok(text)
}

/// Verifies every file of a bundle; returns its manifest.
pub fn verify_bundle(dir: &Path) -> Result<BundleManifest, DatasetError> {
    let m = read_manifest(dir)?
        .ok_or_else(|| bundle_err(dir, format!("no {MANIFEST_FILE}: not a speedbench bundle")))?;
    if m.files.is_empty() {
        return Err(bundle_err(dir, "the manifest lists no file"));
    }
    for e in &m.files {
        verify_entry(dir, e)?;
    }
    Ok(m)
}

/// Adds (or replaces, by file) entries in `dir/manifest.json`, atomically.
fn merge_manifest(dir: &Path, entries: &[BundleEntry]) -> Result<BundleManifest, DatasetError> {
    let mut m = read_manifest(dir)?.unwrap_or(BundleManifest {
        format: BUNDLE_FORMAT.to_string(),
        files: Vec::new(),
    });
    for e in entries {
        m.files.retain(|x| x.file != e.file);
        m.files.push(e.clone());
    }
    m.files.sort_by(|a, b| a.file.cmp(&b.file));
    let json = serde_json::to_vec_pretty(&m).expect("manifest serializes");
    write_atomic(&dir.join(MANIFEST_FILE), &json)?;
    Ok(m)
}

/// Writes already materialized rows for the registered dataset `name` into
/// the bundle `out` and records them in its manifest.
///
/// The rows are validated (parseable, no placeholder left) first.
pub fn stage_rows(
    out: &Path,
    name: &str,
    jsonl: &str,
    repo: Option<String>,
    revision: Option<String>,
    origin: &str,
) -> Result<BundleEntry, DatasetError> {
    let spec = lookup(name)?;
    Dataset::from_jsonl_str(name, jsonl)?;
    let rel = spec.cache_file();
    write_atomic(&out.join(&rel), jsonl.as_bytes())?;
    let digest = ring::digest::digest(&ring::digest::SHA256, jsonl.as_bytes());
    let entry = BundleEntry {
        dataset: spec.name.clone(),
        file: rel,
        rows: count_rows(jsonl),
        bytes: jsonl.len() as u64,
        sha256: hex(digest.as_ref()),
        repo,
        revision,
        origin: origin.to_string(),
    };
    merge_manifest(out, std::slice::from_ref(&entry))?;
    Ok(entry)
}

/// Verifies a bundle and copies its files into `dataset_cache` (each
/// written atomically), merging its manifest entries into the cache's
/// manifest so later loads verify them too.
pub fn import_bundle(bundle: &Path, dataset_cache: &Path) -> Result<BundleManifest, DatasetError> {
    let m = verify_bundle(bundle)?;
    for e in &m.files {
        let from = bundle.join(&e.file);
        let content = std::fs::read(&from).map_err(|source| DatasetError::Io {
            path: from.clone(),
            source,
        })?;
        let digest = hex(ring::digest::digest(&ring::digest::SHA256, &content).as_ref());
        if digest != e.sha256 {
            return Err(DatasetError::from(IntegrityError::Checksum {
                path: from.display().to_string(),
                expected: e.sha256.clone(),
                actual: digest,
                of: ChecksumOf::Import,
            }));
        }
        write_atomic(&dataset_cache.join(&e.file), &content)?;
    }
    merge_manifest(dataset_cache, &m.files)?;
    Ok(m)
}
