//! The Hub cache on disk: blob verification and snapshot links, laid out
//! as `huggingface_hub` lays them out.

use std::path::{Path, PathBuf};

use crate::error::DatasetError;
use crate::error::{ChecksumOf, IntegrityError};
use crate::files::digest_file;

use super::paths::is_hex;

/// Checks a cached blob against its name (sha256 or git sha1) and size.
pub(super) fn verify_blob(path: &Path, etag: &str, size: Option<u64>) -> Result<(), DatasetError> {
    let meta = std::fs::metadata(path).map_err(|source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if let Some(size) = size
        && meta.len() != size
    {
        return Err(DatasetError::from(IntegrityError::Checksum {
            path: path.display().to_string(),
            expected: format!("{size} bytes"),
            actual: format!("{} bytes", meta.len()),
            of: ChecksumOf::CachedBlob,
        }));
    }
    let actual = if is_hex(etag, 64) {
        digest_file(path, &ring::digest::SHA256, None)?
    } else if is_hex(etag, 40) {
        digest_file(
            path,
            &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
            Some(meta.len()),
        )?
    } else {
        return Ok(());
    };
    if actual != etag.to_ascii_lowercase() {
        return Err(DatasetError::from(IntegrityError::Checksum {
            path: path.display().to_string(),
            expected: etag.to_string(),
            actual,
            of: ChecksumOf::CachedBlob,
        }));
    }
    Ok(())
}

/// Verifies a snapshot file through the blob it links to, when the blob is
/// named by its checksum.
pub(super) fn verify_cached(snapshot_file: &Path) -> Result<(), DatasetError> {
    let target = std::fs::canonicalize(snapshot_file).map_err(|source| DatasetError::Io {
        path: snapshot_file.to_path_buf(),
        source,
    })?;
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    verify_blob(&target, &name, None)
}

pub(super) fn collect_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            collect_files(root, &p, out);
        } else if let Ok(rel) = p.strip_prefix(root) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// Makes `snapshot` a relative symlink to `blob` (a copy where symlinks fail).
pub(super) fn link_snapshot(
    blob: &Path,
    snapshot: &Path,
    repo_path: &str,
) -> Result<(), DatasetError> {
    let io = |source| DatasetError::Io {
        path: snapshot.to_path_buf(),
        source,
    };
    if let Some(dir) = snapshot.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    if snapshot.exists() || snapshot.symlink_metadata().is_ok() {
        let _ = std::fs::remove_file(snapshot);
    }
    let depth = repo_path.split('/').count() + 1;
    let mut rel = PathBuf::new();
    for _ in 0..depth {
        rel.push("..");
    }
    rel.push("blobs");
    rel.push(blob.file_name().unwrap_or_default());
    #[cfg(unix)]
    if std::os::unix::fs::symlink(&rel, snapshot).is_ok() {
        return Ok(());
    }
    let _ = rel;
    std::fs::copy(blob, snapshot).map_err(io)?;
    Ok(())
}
