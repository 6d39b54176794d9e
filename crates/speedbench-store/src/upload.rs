//! Uploading a run directory as the run goes and when it ends.
//!
//! The run writes into a local staging directory as it always does. While
//! it runs, the records file's flushed row groups stream to the store as the
//! parts of one multipart upload (whole [`PART_SIZE`] parts, polled every
//! [`POLL_INTERVAL`]). When it ends, the order is what makes an interrupted
//! upload safe to read:
//!
//! 1. `run.json` with outcome `running`: from here until step 4 a reader
//!    sees an unfinished run, never a complete one;
//! 2. `records.parquet`: the streamed upload completed with the file's last
//!    bytes (or, when the file changed under it, uploaded anew);
//! 3. every other file of the run (summary, server metrics, raw responses);
//! 4. the real `run.json`, last.
//!
//! A run killed before step 1 leaves only an uncompleted multipart upload,
//! which no reader lists (a bucket lifecycle rule reclaims its parts).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use object_store::{ObjectStore, ObjectStoreExt, PutPayload, WriteMultipart};
use ring::digest::{Context as Digest, SHA256};
use speedbench_record::{
    LOCK_FILE_NAME, PARTIAL_RECORDS_FILE_NAME, RECORDS_FILE_NAME, RunManifest, RunStatus,
};
use tokio::io::{AsyncReadExt, AsyncSeekExt};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::{StoreError, StoreUrl};

/// Size of every multipart part but the last (S3 asks at least 5 MiB).
pub const PART_SIZE: usize = 8 * 1024 * 1024;

/// How often the records file is checked for new whole parts.
pub const POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Parts uploading at once.
const PARTS_IN_FLIGHT: usize = 2;

/// The object a write check puts and deletes before the run.
const WRITE_CHECK: &str = ".speedbench-write-check";

/// One object the upload wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UploadedObject {
    /// Its URL.
    pub url: StoreUrl,
    /// Its size in bytes.
    pub bytes: u64,
}

/// What [`RunUpload::finish`] wrote.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct UploadReport {
    /// The run's URL.
    pub url: StoreUrl,
    /// Every object written, in upload order (`run.json` last).
    pub objects: Vec<UploadedObject>,
    /// Bytes of the records file that reached the store while the run was
    /// still going.
    pub streamed_bytes: u64,
    /// Why the streamed records upload was dropped and the file uploaded
    /// whole at the end, when it was.
    pub restarted: Option<String>,
}

/// The upload of one run directory: started before the run, finished after.
///
/// ```no_run
/// # #[allow(dead_code)]
/// # async fn demo(staging: &std::path::Path) -> Result<(), speedbench_store::StoreError> {
/// use speedbench_store::{RunUpload, StoreOptions, StoreUrl, open};
///
/// let url: StoreUrl = "s3://bench-runs/spec".parse()?;
/// let store = open(&url, &StoreOptions::default())?;
/// // Refuses a prefix that holds a run; checks the credentials may write.
/// let upload = RunUpload::begin(store, url, staging, false).await?;
/// // ... profile into `staging` ...
/// let report = upload.finish().await?;
/// println!("{} objects under {}", report.objects.len(), report.url);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RunUpload {
    store: Arc<dyn ObjectStore>,
    url: StoreUrl,
    staging: PathBuf,
    stop: watch::Sender<bool>,
    streamer: JoinHandle<Streamed>,
}

impl RunUpload {
    /// Checks the store before the run (a run already under `url` is
    /// refused unless `overwrite`; an object is put and deleted so that bad
    /// credentials fail now, not after the run) and starts streaming the
    /// records file that will appear in `staging`.
    pub async fn begin(
        store: Arc<dyn ObjectStore>,
        url: StoreUrl,
        staging: &Path,
        overwrite: bool,
    ) -> Result<RunUpload, StoreError> {
        if !overwrite {
            check_vacant(&store, &url).await?;
        }
        let check = url.join(WRITE_CHECK);
        store
            .put(
                check.prefix(),
                PutPayload::from_static(b"speedbench write check\n"),
            )
            .await
            .map_err(|e| request_error(&check, "writing a test object", e))?;
        store
            .delete(check.prefix())
            .await
            .map_err(|e| request_error(&check, "deleting the test object", e))?;

        let (stop, stopped) = watch::channel(false);
        let streamer = tokio::spawn(stream_records(
            store.clone(),
            url.join(RECORDS_FILE_NAME),
            staging.join(PARTIAL_RECORDS_FILE_NAME),
            stopped,
        ));
        Ok(RunUpload {
            store,
            url,
            staging: staging.to_path_buf(),
            stop,
            streamer,
        })
    }

    /// The run's URL.
    pub fn url(&self) -> &StoreUrl {
        &self.url
    }

    /// Uploads the finished run in the order the module docs give.
    pub async fn finish(mut self) -> Result<UploadReport, StoreError> {
        let mut streamed = self.stop_streaming().await;
        let mut objects = Vec::new();
        let manifest_path = self.staging.join(RunManifest::FILE_NAME);
        let manifest = match tokio::fs::read(&manifest_path).await {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => {
                return Err(StoreError::Io {
                    path: manifest_path,
                    source: e,
                });
            }
        };
        if let Some(bytes) = &manifest {
            let placeholder = running_placeholder(bytes);
            self.put_bytes(RunManifest::FILE_NAME, placeholder).await?;
        }

        let records = self.staging.join(RECORDS_FILE_NAME);
        let streamed_bytes = streamed.sent;
        let mut restarted = streamed.restart.take();
        if records.is_file() {
            let (bytes, why) = self.finish_records(&records, streamed).await?;
            restarted = restarted.or(why);
            objects.push(UploadedObject {
                url: self.url.join(RECORDS_FILE_NAME),
                bytes,
            });
        } else if let Some(upload) = streamed.upload.take() {
            // No closed records file (the run kept only its summary): the
            // streamed parts are not a file of the run.
            let _ = upload.abort().await;
        }

        for name in other_files(&self.staging).await? {
            objects.push(self.upload_file(&name).await?);
        }
        if let Some(bytes) = manifest {
            objects.push(self.put_bytes(RunManifest::FILE_NAME, bytes).await?);
        }
        Ok(UploadReport {
            url: self.url,
            objects,
            streamed_bytes,
            restarted,
        })
    }

    /// Stops streaming and drops what was streamed (the run never
    /// produced files worth keeping).
    pub async fn abort(mut self) {
        let streamed = self.stop_streaming().await;
        if let Some(upload) = streamed.upload {
            let _ = upload.abort().await;
        }
    }

    async fn stop_streaming(&mut self) -> Streamed {
        let _ = self.stop.send(true);
        match (&mut self.streamer).await {
            Ok(streamed) => streamed,
            // A panicked streamer leaves nothing usable; the file goes whole.
            Err(e) => Streamed {
                restart: Some(format!("the records stream stopped: {e}")),
                ..Streamed::default()
            },
        }
    }

    /// Completes the streamed upload of `records` with its remaining bytes
    /// when the streamed bytes are still the file's first bytes; uploads
    /// it anew otherwise. Returns its size and why it was uploaded anew.
    async fn finish_records(
        &self,
        records: &Path,
        streamed: Streamed,
    ) -> Result<(u64, Option<String>), StoreError> {
        let url = self.url.join(RECORDS_FILE_NAME);
        let io = StoreError::io(records);
        let mut file = tokio::fs::File::open(records).await.map_err(io)?;
        let len = file
            .metadata()
            .await
            .map_err(StoreError::io(records))?
            .len();
        let sent = streamed.sent;
        let (resume, why) = resumable(&mut file, len, streamed, records).await?;
        let (mut upload, from) = match resume {
            Some(upload) => (upload, sent),
            None => {
                let upload = self
                    .store
                    .put_multipart(url.prefix())
                    .await
                    .map_err(|e| request_error(&url, "starting the records upload", e))?;
                (WriteMultipart::new_with_chunk_size(upload, PART_SIZE), 0)
            }
        };
        file.seek(std::io::SeekFrom::Start(from))
            .await
            .map_err(StoreError::io(records))?;
        let mut buf = vec![0; PART_SIZE];
        loop {
            let n = read_full(&mut file, &mut buf, records).await?;
            if n == 0 {
                break;
            }
            upload.write(&buf[..n]);
            upload
                .wait_for_capacity(PARTS_IN_FLIGHT)
                .await
                .map_err(|e| request_error(&url, "uploading a part of the records", e))?;
        }
        upload
            .finish()
            .await
            .map_err(|e| request_error(&url, "completing the records upload", e))?;
        Ok((len, why))
    }

    /// Uploads the staged file `name` (multipart when it is large).
    async fn upload_file(&self, name: &str) -> Result<UploadedObject, StoreError> {
        let path = self.staging.join(name);
        let len = tokio::fs::metadata(&path)
            .await
            .map_err(StoreError::io(&path))?
            .len();
        if len <= PART_SIZE as u64 {
            let bytes = tokio::fs::read(&path)
                .await
                .map_err(StoreError::io(&path))?;
            return self.put_bytes(name, bytes).await;
        }
        let url = self.url.join(name);
        let upload = self
            .store
            .put_multipart(url.prefix())
            .await
            .map_err(|e| request_error(&url, "starting an upload", e))?;
        let mut upload = WriteMultipart::new_with_chunk_size(upload, PART_SIZE);
        let mut file = tokio::fs::File::open(&path)
            .await
            .map_err(StoreError::io(&path))?;
        let mut buf = vec![0; PART_SIZE];
        loop {
            let n = read_full(&mut file, &mut buf, &path).await?;
            if n == 0 {
                break;
            }
            upload.write(&buf[..n]);
            upload
                .wait_for_capacity(PARTS_IN_FLIGHT)
                .await
                .map_err(|e| request_error(&url, "uploading a part", e))?;
        }
        upload
            .finish()
            .await
            .map_err(|e| request_error(&url, "completing an upload", e))?;
        Ok(UploadedObject { url, bytes: len })
    }

    async fn put_bytes(&self, name: &str, bytes: Vec<u8>) -> Result<UploadedObject, StoreError> {
        let url = self.url.join(name);
        let len = bytes.len() as u64;
        self.store
            .put(url.prefix(), PutPayload::from(bytes))
            .await
            .map_err(|e| request_error(&url, "uploading", e))?;
        Ok(UploadedObject { url, bytes: len })
    }
}

/// Refuses a `url` that already holds a run (its `run.json` exists), as
/// [`RunUpload::begin`] does without `overwrite`: for a caller that checks
/// several URLs before starting any run (a sweep). Being a request to the
/// store, it also fails on credentials the store refuses.
pub async fn check_vacant(store: &Arc<dyn ObjectStore>, url: &StoreUrl) -> Result<(), StoreError> {
    let manifest = url.join(RunManifest::FILE_NAME);
    match store.head(manifest.prefix()).await {
        Ok(_) => Err(StoreError::Occupied {
            url: url.to_string(),
            file: RunManifest::FILE_NAME.to_string(),
        }),
        Err(object_store::Error::NotFound { .. }) => Ok(()),
        Err(e) => Err(request_error(&manifest, "looking for a run", e)),
    }
}

/// The staged files besides the lock, the records and `run.json`, by name
/// in order: they go up after the records and before `run.json`.
async fn other_files(staging: &Path) -> Result<Vec<String>, StoreError> {
    let mut rest = Vec::new();
    let mut entries = tokio::fs::read_dir(staging)
        .await
        .map_err(StoreError::io(staging))?;
    while let Some(entry) = entries
        .next_entry()
        .await
        .map_err(StoreError::io(staging))?
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let skip = [LOCK_FILE_NAME, RECORDS_FILE_NAME, RunManifest::FILE_NAME];
        if entry.path().is_file() && !skip.contains(&name.as_str()) {
            rest.push(name);
        }
    }
    rest.sort();
    Ok(rest)
}

/// The streamed upload to go on with, when the file still begins with
/// the bytes streamed; else it is aborted, and why is said.
async fn resumable(
    file: &mut tokio::fs::File,
    len: u64,
    streamed: Streamed,
    records: &Path,
) -> Result<(Option<WriteMultipart>, Option<String>), StoreError> {
    let Some(upload) = streamed.upload else {
        return Ok((None, None));
    };
    let same = len >= streamed.sent
        && prefix_digest(file, streamed.sent, records).await?.as_ref()
            == streamed.digest.finish().as_ref();
    if same {
        return Ok((Some(upload), None));
    }
    let _ = upload.abort().await;
    let why = format!(
        "{RECORDS_FILE_NAME} changed after {} bytes were streamed (cut back after a write error); uploaded whole",
        streamed.sent
    );
    Ok((None, Some(why)))
}

/// What the records stream left when it stopped.
#[derive(Default)]
struct Streamed {
    /// The multipart upload holding the streamed parts, if one began.
    upload: Option<WriteMultipart>,
    /// Bytes handed to it: always whole parts.
    sent: u64,
    /// SHA-256 of those bytes.
    digest: DigestState,
    /// Why streaming stopped early, if it did.
    restart: Option<String>,
}

/// A SHA-256 context (ring's has no `Default`).
struct DigestState(Digest);

impl Default for DigestState {
    fn default() -> Self {
        DigestState(Digest::new(&SHA256))
    }
}

impl DigestState {
    fn finish(self) -> ring::digest::Digest {
        self.0.finish()
    }
}

impl std::fmt::Debug for Streamed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Streamed")
            .field("sent", &self.sent)
            .field("restart", &self.restart)
            .finish_non_exhaustive()
    }
}

/// Streams whole parts of `partial` into a multipart upload of `url`
/// until told to stop; a failure stops streaming (the file then goes whole
/// at the end) instead of failing the run.
async fn stream_records(
    store: Arc<dyn ObjectStore>,
    url: StoreUrl,
    partial: PathBuf,
    mut stop: watch::Receiver<bool>,
) -> Streamed {
    let mut streamed = Streamed::default();
    let mut buf = Vec::new();
    loop {
        let stopping = tokio::select! {
            _ = tokio::time::sleep(POLL_INTERVAL) => false,
            _ = stop.changed() => true,
        };
        if let Err(e) = pump(&store, &url, &partial, &mut streamed, &mut buf).await {
            tracing::warn!("streaming {url}: {e}; the file will be uploaded whole at the end");
            if let Some(upload) = streamed.upload.take() {
                let _ = upload.abort().await;
            }
            return Streamed {
                restart: Some(format!("streaming stopped: {e}")),
                ..Streamed::default()
            };
        }
        if stopping || *stop.borrow() {
            return streamed;
        }
    }
}

/// Hands every whole part that `partial` holds past what was sent to the
/// upload (started on the first part).
async fn pump(
    store: &Arc<dyn ObjectStore>,
    url: &StoreUrl,
    partial: &Path,
    streamed: &mut Streamed,
    buf: &mut Vec<u8>,
) -> Result<(), StoreError> {
    let mut file = match tokio::fs::File::open(partial).await {
        Ok(file) => file,
        // Not made yet, or renamed at the run's end: nothing new to send.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(StoreError::Io {
                path: partial.to_path_buf(),
                source: e,
            });
        }
    };
    let len = file
        .metadata()
        .await
        .map_err(StoreError::io(partial))?
        .len();
    if len < streamed.sent + PART_SIZE as u64 {
        return Ok(());
    }
    file.seek(std::io::SeekFrom::Start(streamed.sent))
        .await
        .map_err(StoreError::io(partial))?;
    buf.resize(PART_SIZE, 0);
    while len >= streamed.sent + PART_SIZE as u64 {
        let n = read_full(&mut file, buf, partial).await?;
        if n < PART_SIZE {
            break;
        }
        let upload = match &mut streamed.upload {
            Some(upload) => upload,
            None => {
                let upload = store
                    .put_multipart(url.prefix())
                    .await
                    .map_err(|e| request_error(url, "starting the records upload", e))?;
                streamed
                    .upload
                    .insert(WriteMultipart::new_with_chunk_size(upload, PART_SIZE))
            }
        };
        upload.write(buf);
        streamed.digest.0.update(buf);
        streamed.sent += PART_SIZE as u64;
        upload
            .wait_for_capacity(PARTS_IN_FLIGHT)
            .await
            .map_err(|e| request_error(url, "uploading a part of the records", e))?;
    }
    Ok(())
}

/// Reads until `buf` is full or the file ends; the count read.
async fn read_full(
    file: &mut tokio::fs::File,
    buf: &mut [u8],
    path: &Path,
) -> Result<usize, StoreError> {
    let mut filled = 0;
    while filled < buf.len() {
        let n = file
            .read(&mut buf[filled..])
            .await
            .map_err(StoreError::io(path))?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    Ok(filled)
}

/// SHA-256 of the first `len` bytes of `file`.
async fn prefix_digest(
    file: &mut tokio::fs::File,
    len: u64,
    path: &Path,
) -> Result<ring::digest::Digest, StoreError> {
    file.seek(std::io::SeekFrom::Start(0))
        .await
        .map_err(StoreError::io(path))?;
    let mut digest = Digest::new(&SHA256);
    let mut buf = vec![0; 1 << 20];
    let mut left = len;
    while left > 0 {
        let want = left.min(buf.len() as u64) as usize;
        let n = read_full(file, &mut buf[..want], path).await?;
        if n == 0 {
            break;
        }
        digest.update(&buf[..n]);
        left -= n as u64;
    }
    Ok(digest.finish())
}

/// `run.json` with its outcome set to `running`: what a reader finds while
/// the upload is incomplete. Text that is not a JSON object goes as it is.
fn running_placeholder(manifest: &[u8]) -> Vec<u8> {
    match serde_json::from_slice::<serde_json::Value>(manifest) {
        Ok(serde_json::Value::Object(mut fields)) => {
            fields.insert("outcome".into(), RunStatus::Running.as_str().into());
            serde_json::to_vec_pretty(&fields).unwrap_or_else(|_| manifest.to_vec())
        }
        _ => manifest.to_vec(),
    }
}

/// A store error about `url`, a refusal told apart.
pub(crate) fn request_error(url: &StoreUrl, what: &str, source: object_store::Error) -> StoreError {
    match source {
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => StoreError::Denied {
            url: url.to_string(),
            what: what.to_string(),
            env: url.scheme().credential_env(),
            source: Box::new(source),
        },
        source => StoreError::Request {
            url: url.to_string(),
            what: what.to_string(),
            source: Box::new(source),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_placeholder_says_running_and_keeps_every_other_field() {
        let text = br#"{"run_id":"r1","outcome":"completed","model":"m"}"#;
        let v: serde_json::Value = serde_json::from_slice(&running_placeholder(text)).unwrap();
        assert_eq!(v["outcome"], "running");
        assert_eq!(
            (v["run_id"].as_str(), v["model"].as_str()),
            (Some("r1"), Some("m"))
        );
        assert_eq!(running_placeholder(b"not json"), b"not json");
    }
}
