//! Downloading and verifying the pinned prepare script.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::DatasetError;
use crate::error::{BoxedCause, ChecksumOf, FetchError, IntegrityError};
use crate::files::{hex, sha256_file, write_atomic};

use super::options::ScriptPin;

/// Downloads the pinned prepare script into `dir` (unless a copy with the
/// pinned sha256 is there) and returns its path.
///
/// The download follows redirects; its sha256 must equal the pin, else it is
/// refused with [`IntegrityError::Checksum`] naming both digests and nothing is
/// cached. A cached copy is re-hashed on every use and downloaded again if it
/// changed. With `offline`, a missing copy is an error and no request is made.
pub async fn fetch_prepare_script(
    pin: &ScriptPin,
    dir: &Path,
    offline: bool,
) -> Result<PathBuf, DatasetError> {
    let expected = pin.sha256.to_ascii_lowercase();
    let path = dir.join(pin.cache_file_name());
    if cached_copy_holds(&path, &expected)? {
        return Ok(path);
    }
    if offline {
        return Err(DatasetError::from(FetchError::Offline {
            what: format!(
                "the prepare script {} (expected at {})",
                pin.url,
                path.display()
            ),
            cache: dir.to_path_buf(),
        }));
    }
    let download = |message: String, source: Option<BoxedCause>| {
        DatasetError::from(FetchError::Download {
            url: pin.url.clone(),
            message,
            source,
        })
    };
    let http = speedbench_http::new_client(&speedbench_http::ClientOptions {
        max_idle_per_host: 1,
        ..Default::default()
    })
    .map_err(|e| download(speedbench_http::describe(&e), Some(Box::new(e))))?;
    tracing::info!(url = %pin.url, "downloading the prepare script");
    let resp = speedbench_http::get(&http, &pin.url, &[], Duration::from_secs(60))
        .await
        .map_err(|e| download(speedbench_http::describe(&e), Some(Box::new(e))))?;
    if !resp.status.is_success() {
        return Err(download(format!("HTTP {}", resp.status), None));
    }
    let actual = hex(ring::digest::digest(&ring::digest::SHA256, &resp.body).as_ref());
    if actual != expected {
        return Err(DatasetError::from(IntegrityError::Checksum {
            path: pin.url.clone(),
            expected,
            actual,
            of: ChecksumOf::PrepareScript,
        }));
    }
    write_atomic(&path, &resp.body)?;
    tracing::info!(script = %path.display(), sha256 = %actual, "prepare script: downloaded and verified");
    Ok(path)
}

/// Whether the cached copy at `path` is there with the pinned digest; a
/// copy that changed is removed (and downloaded again by the caller).
fn cached_copy_holds(path: &Path, expected: &str) -> Result<bool, DatasetError> {
    if !path.is_file() {
        return Ok(false);
    }
    let actual = sha256_file(path)?;
    if actual == expected {
        tracing::info!(script = %path.display(), sha256 = %actual, "prepare script: cached copy verified");
        return Ok(true);
    }
    tracing::warn!(
        "{}: sha256 {actual}, expected {expected}: the cached prepare script changed; \
         downloading it again",
        path.display()
    );
    let _ = std::fs::remove_file(path);
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::PREPARE_SCRIPT_SHA256;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_wrong_digest_is_refused_before_anything_is_cached() {
        // A loopback server that serves a script whose digest is not the pin.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = [0u8; 4096];
                let _ = s.read(&mut buf).await;
                let body = b"print('not the pinned script')\n";
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = s.write_all(head.as_bytes()).await;
                let _ = s.write_all(body).await;
            }
        });
        let dir = tempfile::tempdir().unwrap();
        let pin = ScriptPin::nemo_skills(&format!("http://127.0.0.1:{port}"));
        let err = fetch_prepare_script(&pin, dir.path(), false)
            .await
            .unwrap_err();
        let msg = err.to_string();
        let actual = hex(ring::digest::digest(
            &ring::digest::SHA256,
            b"print('not the pinned script')\n",
        )
        .as_ref());
        assert!(
            matches!(
                err,
                DatasetError::Integrity(IntegrityError::Checksum {
                    of: ChecksumOf::PrepareScript,
                    ..
                })
            ),
            "{msg}"
        );
        assert!(
            msg.contains(PREPARE_SCRIPT_SHA256) && msg.contains(&actual),
            "names both digests: {msg}"
        );
        // How to run another script, in this library's terms: the binary adds
        // its flag when it reports the error.
        assert!(msg.contains("SPEEDBENCH_PREPARE_SCRIPT"), "{msg}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // Offline, nothing is requested and the error says what is missing.
        let err = fetch_prepare_script(&pin, dir.path(), true)
            .await
            .unwrap_err();
        assert!(
            matches!(err, DatasetError::Fetch(FetchError::Offline { .. })),
            "{err}"
        );
    }
}
