//! The thread that owns the records file.
//!
//! Request tasks never touch the disk: they send finished records here over
//! a channel, and this thread appends them and cuts a row group at least once
//! a second, so a crash loses at most the last second of records and the
//! timing path never waits on I/O.

use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use speedbench_record::{RecordError, RecordWriter, RequestRecord, RunManifest};

const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
const FLUSH_ROWS: usize = 1024;

pub(crate) enum RecorderMsg {
    Record(Box<RequestRecord>),
    Finish(Box<RunManifest>),
}

pub(crate) struct Recorder {
    pub tx: Sender<RecorderMsg>,
    handle: JoinHandle<Result<u64, RecordError>>,
}

impl Recorder {
    pub fn start(path: &Path) -> Result<Recorder, RecordError> {
        let writer = RecordWriter::create(path)?;
        let (tx, rx) = channel();
        let handle = std::thread::Builder::new()
            .name("speedbench-recorder".into())
            .spawn(move || record_loop(writer, rx))
            .map_err(|source| RecordError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Recorder { tx, handle })
    }

    /// Closes the file with `manifest` and returns the number of records.
    pub fn finish(self, manifest: RunManifest) -> Result<u64, RecordError> {
        // If the thread already died its error comes out of join below.
        let _ = self.tx.send(RecorderMsg::Finish(Box::new(manifest)));
        drop(self.tx);
        self.handle.join().unwrap_or_else(|_| {
            Err(RecordError::Metadata {
                path: Default::default(),
                message: "the recorder thread panicked".into(),
            })
        })
    }
}

fn record_loop(mut writer: RecordWriter, rx: Receiver<RecorderMsg>) -> Result<u64, RecordError> {
    let mut last_flush = Instant::now();
    let mut manifest = RunManifest::default();
    loop {
        let wait = FLUSH_INTERVAL.saturating_sub(last_flush.elapsed());
        match rx.recv_timeout(wait) {
            Ok(RecorderMsg::Record(r)) => writer.append(&r),
            Ok(RecorderMsg::Finish(m)) => {
                manifest = *m;
                break;
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                manifest.outcome = "failed".into();
                break;
            }
        }
        if writer.buffered() >= FLUSH_ROWS || last_flush.elapsed() >= FLUSH_INTERVAL {
            writer.flush()?;
            last_flush = Instant::now();
        }
    }
    // Records sent before Finish are already queued ahead of it.
    while let Ok(RecorderMsg::Record(r)) = rx.try_recv() {
        writer.append(&r);
    }
    writer.close(&manifest)
}
