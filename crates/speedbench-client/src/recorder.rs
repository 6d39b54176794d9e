//! The thread that owns the records file.
//!
//! Request tasks never touch the disk: they send finished records here over
//! a channel, and this thread appends them and cuts a row group at least once
//! a second, so a crash loses at most the last second of records and the
//! timing path never waits on I/O. When a write fails (a full disk), the
//! thread closes the file with every row group that reached it and stops;
//! the run sees the channel close and stops too.

use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::RecordAnnotator;
use crate::export::{RawResponse, RawWriter};
use crate::sink::Sinks;
use speedbench_record::{
    ClosedRecords, JOURNAL_FILE_NAME, RecordError, RecordWriter, RequestRecord, RunManifest,
    RunStatus,
};

const FLUSH_INTERVAL: Duration = Duration::from_secs(1);
const FLUSH_ROWS: usize = 1024;
/// How long the recorder lets records gather once it has emptied its queue
/// during a burst, before it waits to be woken: at thousands of records a
/// second, being woken for each one (a futex wake by the sender and a
/// context switch) cost about as much CPU as writing it.
const GATHER_PAUSE: Duration = Duration::from_millis(1);

pub(crate) enum RecorderMsg {
    Record(Box<RequestRecord>),
    /// A raw response body (`--export-level raw`), written as it arrives
    /// and dropped: the bodies never pile up in memory.
    Raw(Box<RawResponse>),
    Finish(Box<RunManifest>),
}

pub(crate) struct Recorder {
    pub tx: Sender<RecorderMsg>,
    handle: JoinHandle<(ClosedRecords, Vec<String>)>,
}

impl Recorder {
    /// Creates the records file; `manifest` goes into its footer should a
    /// write fail before the run ends. `raw` receives the raw response
    /// bodies, when they are kept.
    pub(crate) fn start(
        path: &Path,
        manifest: RunManifest,
        sinks: Sinks,
        annotators: Vec<Box<dyn RecordAnnotator>>,
        raw: Option<RawWriter>,
    ) -> Result<Recorder, RecordError> {
        let columns: Vec<_> = annotators.iter().flat_map(|a| a.columns()).collect();
        // The crash journal beside it: a killed process leaves every
        // flushed record readable (`read_journal`, `speedbench recover`).
        let writer = RecordWriter::create_with_columns(path, &columns)?
            .with_journal(path.with_file_name(JOURNAL_FILE_NAME))?;
        let (tx, rx) = channel();
        let handle = std::thread::Builder::new()
            .name("speedbench-recorder".into())
            .spawn(move || record_loop(writer, rx, manifest, sinks, annotators, raw))
            .map_err(|source| RecordError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        Ok(Recorder { tx, handle })
    }

    /// Closes the file with `manifest`; returns how, and the errors of the
    /// extra sinks and of the raw responses file.
    pub(crate) fn finish(self, manifest: RunManifest) -> (ClosedRecords, Vec<String>) {
        // If the thread already stopped, its result comes out of join below.
        let _ = self.tx.send(RecorderMsg::Finish(Box::new(manifest)));
        drop(self.tx);
        self.handle.join().unwrap_or_else(|_| {
            let closed = ClosedRecords {
                rows: 0,
                error: Some(RecordError::Metadata {
                    path: Default::default(),
                    message: "the recorder thread panicked".into(),
                }),
                readable: false,
                close_error: None,
            };
            (closed, Vec::new())
        })
    }
}

fn record_loop(
    mut writer: RecordWriter,
    rx: Receiver<RecorderMsg>,
    mut manifest: RunManifest,
    mut sinks: Sinks,
    mut annotators: Vec<Box<dyn RecordAnnotator>>,
    mut raw: Option<RawWriter>,
) -> (ClosedRecords, Vec<String>) {
    let mut annotate = |r: &mut RequestRecord| {
        for a in &mut annotators {
            a.annotate(r);
        }
    };
    let mut last_flush = Instant::now();
    let mut journal_warned = false;
    let mut in_burst = false;
    let closed = loop {
        let wait = FLUSH_INTERVAL.saturating_sub(last_flush.elapsed());
        let received = match rx.try_recv() {
            Ok(msg) => Ok(msg),
            Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
            // Emptied during a burst: let the next records gather.
            Err(TryRecvError::Empty) if in_burst => {
                std::thread::sleep(GATHER_PAUSE.min(wait));
                Err(RecvTimeoutError::Timeout)
            }
            Err(TryRecvError::Empty) => rx.recv_timeout(wait),
        };
        in_burst = received.is_ok();
        match received {
            Ok(RecorderMsg::Record(mut r)) => {
                annotate(&mut r);
                if let Err(e) = writer.append(&r) {
                    break writer.close_after_error(&manifest, e);
                }
                sinks.record(&r);
            }
            Ok(RecorderMsg::Raw(body)) => {
                if let Some(w) = &mut raw {
                    w.append(&body);
                }
            }
            Ok(RecorderMsg::Finish(m)) => {
                manifest = *m;
                // Records sent before Finish are already queued ahead of it.
                let mut refused = None;
                while let Ok(msg) = rx.try_recv() {
                    let mut r = match msg {
                        RecorderMsg::Record(r) => r,
                        RecorderMsg::Raw(body) => {
                            if let Some(w) = &mut raw {
                                w.append(&body);
                            }
                            continue;
                        }
                        RecorderMsg::Finish(_) => break,
                    };
                    annotate(&mut r);
                    if let Err(e) = writer.append(&r) {
                        refused = Some(e);
                        break;
                    }
                    sinks.record(&r);
                }
                break match refused {
                    Some(e) => writer.close_after_error(&manifest, e),
                    None => writer.close_or_salvage(&manifest),
                };
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                manifest.status = RunStatus::Failed;
                break writer.close_or_salvage(&manifest);
            }
        }
        if writer.buffered() >= FLUSH_ROWS || last_flush.elapsed() >= FLUSH_INTERVAL {
            if let Err(e) = writer.flush() {
                break writer.close_after_error(&manifest, e);
            }
            if let Some(e) = writer.journal_error().filter(|_| !journal_warned) {
                tracing::warn!("{e}; the crash journal is no longer written");
                journal_warned = true;
            }
            sinks.flush();
            if let Some(w) = &mut raw {
                w.flush();
            }
            last_flush = Instant::now();
        }
    };
    manifest.record_count = closed.rows;
    let mut errors = sinks.finish(&manifest);
    errors.extend(raw.and_then(RawWriter::finish));
    (closed, errors)
}
