//! Files speedbench writes and checks: atomic writes and streamed digests.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::error::DatasetError;

/// Lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The sha256 of a file, streamed.
pub fn sha256_file(path: &Path) -> Result<String, DatasetError> {
    digest_file(path, &ring::digest::SHA256, None)
}

pub(crate) fn digest_file(
    path: &Path,
    alg: &'static ring::digest::Algorithm,
    git_blob: Option<u64>,
) -> Result<String, DatasetError> {
    let io = |source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut ctx = ring::digest::Context::new(alg);
    if let Some(len) = git_blob {
        ctx.update(format!("blob {len}\0").as_bytes());
    }
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    Ok(hex(ctx.finish().as_ref()))
}

/// Writes `content` to `path` through a temporary file and a rename.
pub fn write_atomic(path: &Path, content: &[u8]) -> Result<(), DatasetError> {
    let io = |source| DatasetError::Io {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let tmp = tmp_path(path);
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map_err(io)
}

/// `<path>.<pid>.partial`, beside `path`.
fn tmp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.partial", std::process::id()));
    path.with_file_name(name)
}
