//! The thread that owns the records file.
//!
//! Request tasks never touch the disk: they send finished records here over
//! a channel, and this thread appends them and flushes them at least once a
//! second (to the crash journal, or as a row group once the journal is
//! gone), so a crash loses at most the last second of records and the
//! timing path never waits on I/O. When a write fails (a full disk), the
//! thread closes the file with every row group that reached it (the journal
//! stays when it holds more) and stops; the run sees the channel close and
//! stops too.

use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::RecordAnnotator;
use crate::export::{JsonLinesWriter, RawResponse};
use crate::http_trace::HttpTraceLine;
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
    /// A request's HTTP trace (`--export-http-trace`), likewise.
    HttpTrace(Box<HttpTraceLine>),
    Finish(Box<RunManifest>),
}

/// The JSON-lines files beside the records, each when asked for.
pub(crate) struct ExportWriters {
    /// `raw_responses.jsonl`.
    pub raw: Option<JsonLinesWriter>,
    /// `http_trace.jsonl`.
    pub http_trace: Option<JsonLinesWriter>,
}

impl ExportWriters {
    fn flush(&mut self) {
        (self.raw.iter_mut())
            .chain(&mut self.http_trace)
            .for_each(JsonLinesWriter::flush);
    }

    /// Closes both; their first write errors.
    fn finish(self) -> impl Iterator<Item = String> {
        [self.raw, self.http_trace]
            .into_iter()
            .flatten()
            .filter_map(JsonLinesWriter::finish)
    }
}

pub(crate) struct Recorder {
    pub tx: Sender<RecorderMsg>,
    handle: JoinHandle<(ClosedRecords, Vec<String>)>,
}

impl Recorder {
    /// Creates the records file; `manifest` goes into its footer should a
    /// write fail before the run ends. `exports` receive the raw response
    /// bodies and the HTTP traces, when they are kept.
    pub(crate) fn start(
        path: &Path,
        manifest: RunManifest,
        sinks: Sinks,
        annotators: Vec<Box<dyn RecordAnnotator>>,
        exports: ExportWriters,
    ) -> Result<Recorder, RecordError> {
        let columns: Vec<_> = annotators.iter().flat_map(|a| a.columns()).collect();
        // The crash journal beside it: a killed process leaves every
        // flushed record readable (`read_journal`, `speedbench recover`).
        let writer = RecordWriter::create_with_columns(path, &columns)?
            .with_journal(path.with_file_name(JOURNAL_FILE_NAME))?;
        let (tx, rx) = channel();
        let handle = std::thread::Builder::new()
            .name("speedbench-recorder".into())
            .spawn(move || record_loop(writer, rx, manifest, sinks, annotators, exports))
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
                journal_rows: None,
            };
            (closed, Vec::new())
        })
    }
}

fn record_loop(
    writer: RecordWriter,
    rx: Receiver<RecorderMsg>,
    mut manifest: RunManifest,
    sinks: Sinks,
    annotators: Vec<Box<dyn RecordAnnotator>>,
    exports: ExportWriters,
) -> (ClosedRecords, Vec<String>) {
    let mut out = Outputs {
        writer,
        sinks,
        annotators,
        exports,
        journal_warned: false,
        last_flush: Instant::now(),
    };
    let mut in_burst = false;
    let closed = loop {
        let received = receive(&rx, in_burst, out.until_flush());
        in_burst = received.is_ok();
        let refused = match received {
            Ok(RecorderMsg::Record(r)) => out.record(r).err(),
            Ok(RecorderMsg::Raw(body)) => {
                out.raw(&body);
                None
            }
            Ok(RecorderMsg::HttpTrace(line)) => {
                out.http_trace(&line);
                None
            }
            Ok(RecorderMsg::Finish(m)) => {
                manifest = *m;
                // Records sent before Finish are already queued ahead of it.
                break match out.drain(&rx) {
                    Some(e) => out.writer.close_after_error(&manifest, e),
                    None => out.writer.close_or_salvage(&manifest),
                };
            }
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => {
                manifest.status = RunStatus::Failed;
                break out.writer.close_or_salvage(&manifest);
            }
        };
        if let Some(e) = refused.or_else(|| out.flush_when_due().err()) {
            break out.writer.close_after_error(&manifest, e);
        }
    };
    manifest.record_count = closed.rows;
    let mut errors = out.sinks.finish(&manifest);
    errors.extend(out.exports.finish());
    (closed, errors)
}

/// The next message: at once when one waits; after a short pause when a
/// burst just emptied the queue (let the next records gather); else by
/// the next flush.
fn receive(
    rx: &Receiver<RecorderMsg>,
    in_burst: bool,
    wait: Duration,
) -> Result<RecorderMsg, RecvTimeoutError> {
    match rx.try_recv() {
        Ok(msg) => Ok(msg),
        Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
        Err(TryRecvError::Empty) if in_burst => {
            std::thread::sleep(GATHER_PAUSE.min(wait));
            Err(RecvTimeoutError::Timeout)
        }
        Err(TryRecvError::Empty) => rx.recv_timeout(wait),
    }
}

/// Where the recorder thread puts what it receives.
struct Outputs {
    writer: RecordWriter,
    sinks: Sinks,
    annotators: Vec<Box<dyn RecordAnnotator>>,
    exports: ExportWriters,
    journal_warned: bool,
    last_flush: Instant,
}

impl Outputs {
    /// Time left until the next flush is due.
    fn until_flush(&self) -> Duration {
        FLUSH_INTERVAL.saturating_sub(self.last_flush.elapsed())
    }

    /// One record: annotated, written, then given to the sinks.
    fn record(&mut self, mut r: Box<RequestRecord>) -> Result<(), RecordError> {
        for a in &mut self.annotators {
            a.annotate(&mut r);
        }
        self.writer.append(&r)?;
        self.sinks.record(&r);
        Ok(())
    }

    fn raw(&mut self, body: &RawResponse) {
        if let Some(w) = &mut self.exports.raw {
            w.append(body);
        }
    }

    fn http_trace(&mut self, line: &HttpTraceLine) {
        if let Some(w) = &mut self.exports.http_trace {
            w.append(line);
        }
    }

    /// Everything queued after the end was announced; the error of the
    /// record the file refused, if one was.
    fn drain(&mut self, rx: &Receiver<RecorderMsg>) -> Option<RecordError> {
        while let Ok(msg) = rx.try_recv() {
            match msg {
                RecorderMsg::Record(r) => {
                    if let Err(e) = self.record(r) {
                        return Some(e);
                    }
                }
                RecorderMsg::Raw(body) => self.raw(&body),
                RecorderMsg::HttpTrace(line) => self.http_trace(&line),
                RecorderMsg::Finish(_) => break,
            }
        }
        None
    }

    /// Flushes the file, the sinks and the raw export once enough rows
    /// wait or the interval passed (saying once when the crash journal
    /// stopped being written).
    fn flush_when_due(&mut self) -> Result<(), RecordError> {
        if self.writer.buffered() < FLUSH_ROWS && self.last_flush.elapsed() < FLUSH_INTERVAL {
            return Ok(());
        }
        self.writer.flush()?;
        if let Some(e) = self.writer.journal_error().filter(|_| !self.journal_warned) {
            tracing::warn!("{e}; the crash journal is no longer written");
            self.journal_warned = true;
        }
        self.sinks.flush();
        self.exports.flush();
        self.last_flush = Instant::now();
        Ok(())
    }
}
