//! Where a run's records go besides its run directory.
//!
//! Every run writes `records.parquet`; a [`RecordSink`] receives the same
//! records as they finish, so a downstream benchmark can keep them in
//! memory ([`VecSink`]), stream them to its own task ([`ChannelSink`]), or
//! write them anywhere else, without forking the client.

use std::sync::{Arc, Mutex, PoisonError};

use speedbench_metrics::{LiveFigures, LiveSnapshot};
use speedbench_record::{RequestRecord, RunManifest};

/// Receives every record of a run, in the order requests finished.
///
/// Sinks are called from the thread that writes the records file, never
/// from a request's task, so a slow sink cannot skew a measurement (it only
/// delays the records file). An `Err` detaches the sink for the rest of the
/// run and is reported in [`crate::RunOutcome::write_errors`]; the run and
/// its records file go on.
pub trait RecordSink: Send {
    /// A short name for error messages (`"vec"`, `"channel"`, a file name).
    fn name(&self) -> String;

    /// One finished record (warmup and skipped turns included; see
    /// [`RequestRecord::warmup`] and [`speedbench_record::ErrorKind::Skipped`]).
    fn record(&mut self, record: &RequestRecord) -> Result<(), String>;

    /// Called when the records file cuts a row group (at least once a second
    /// while records arrive): a sink that buffers makes its records durable.
    fn flush(&mut self) -> Result<(), String> {
        Ok(())
    }

    /// The run ended; `manifest` holds its final outcome and record count.
    fn finish(&mut self, manifest: &RunManifest) -> Result<(), String> {
        let _ = manifest;
        Ok(())
    }
}

/// A boxed sink is a sink: a caller that gathers sinks of several types
/// (a run's extensions) hands them on as they are.
impl<S: RecordSink + ?Sized> RecordSink for Box<S> {
    fn name(&self) -> String {
        (**self).name()
    }
    fn record(&mut self, record: &RequestRecord) -> Result<(), String> {
        (**self).record(record)
    }
    fn flush(&mut self) -> Result<(), String> {
        (**self).flush()
    }
    fn finish(&mut self, manifest: &RunManifest) -> Result<(), String> {
        (**self).finish(manifest)
    }
}

/// Keeps [`LiveFigures`] up to date as records arrive, for a live view of
/// a long run: clone it, give one clone to the run and read
/// [`LiveSink::snapshot`] from the other. Its memory does not grow with
/// the run.
///
/// ```
/// use speedbench_client::{LiveSink, RecordSink};
/// use speedbench_record::RequestRecord;
/// let live = LiveSink::default();
/// let mut fed = live.clone();
/// fed.record(&RequestRecord { end_unix_ns: 5_000_000_000, ..Default::default() }).unwrap();
/// assert_eq!(live.snapshot(6_000_000_000).succeeded, 1);
/// ```
#[derive(Debug, Clone, Default)]
pub struct LiveSink(Arc<Mutex<LiveFigures>>);

impl LiveSink {
    /// The figures at `now_unix_ns` (see [`LiveFigures::snapshot`]).
    pub fn snapshot(&self, now_unix_ns: i64) -> LiveSnapshot {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .snapshot(now_unix_ns)
    }
}

impl RecordSink for LiveSink {
    fn name(&self) -> String {
        "live view".into()
    }

    fn record(&mut self, record: &RequestRecord) -> Result<(), String> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .add(record);
        Ok(())
    }
}

/// Keeps every record in memory; read them through the [`RecordsHandle`]
/// from [`VecSink::new`].
///
/// ```
/// use speedbench_client::{RecordSink, VecSink};
/// use speedbench_record::RequestRecord;
///
/// let (mut sink, records) = VecSink::new();
/// sink.record(&RequestRecord { request_index: 7, ..Default::default() }).unwrap();
/// assert_eq!(records.take()[0].request_index, 7);
/// ```
#[derive(Debug)]
pub struct VecSink {
    records: RecordsHandle,
}

impl VecSink {
    /// A sink and the handle that reads what it collected.
    pub fn new() -> (VecSink, RecordsHandle) {
        let handle = RecordsHandle::default();
        (
            VecSink {
                records: handle.clone(),
            },
            handle,
        )
    }
}

impl RecordSink for VecSink {
    fn name(&self) -> String {
        "in-memory records".into()
    }

    fn record(&mut self, record: &RequestRecord) -> Result<(), String> {
        self.records.lock().push(record.clone());
        Ok(())
    }
}

/// The records a [`VecSink`] collected, shared with the sink.
#[derive(Debug, Clone, Default)]
pub struct RecordsHandle(Arc<Mutex<Vec<RequestRecord>>>);

impl RecordsHandle {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<RequestRecord>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many records were collected so far.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True before the first record.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Takes the records collected so far, leaving the handle empty.
    pub fn take(&self) -> Vec<RequestRecord> {
        std::mem::take(&mut *self.lock())
    }
}

/// Sends every record to an async task as it finishes.
///
/// ```
/// use speedbench_client::{ChannelSink, RecordSink};
/// use speedbench_record::RequestRecord;
///
/// let (mut sink, mut rx) = ChannelSink::new();
/// sink.record(&RequestRecord::default()).unwrap();
/// assert!(rx.try_recv().is_ok());
/// drop(rx);
/// // A receiver that went away detaches the sink, with a reason.
/// assert!(sink.record(&RequestRecord::default()).is_err());
/// ```
#[derive(Debug)]
pub struct ChannelSink {
    tx: tokio::sync::mpsc::UnboundedSender<RequestRecord>,
}

impl ChannelSink {
    /// A sink and the receiving end; the channel closes when the run ends.
    pub fn new() -> (
        ChannelSink,
        tokio::sync::mpsc::UnboundedReceiver<RequestRecord>,
    ) {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        (ChannelSink { tx }, rx)
    }
}

impl RecordSink for ChannelSink {
    fn name(&self) -> String {
        "record channel".into()
    }

    fn record(&mut self, record: &RequestRecord) -> Result<(), String> {
        self.tx
            .send(record.clone())
            .map_err(|_| "the receiver was dropped".to_string())
    }
}

/// The sinks of one run, each detached at its first error.
pub(crate) struct Sinks {
    live: Vec<Box<dyn RecordSink>>,
    errors: Vec<String>,
}

impl Sinks {
    pub(crate) fn new(sinks: Vec<Box<dyn RecordSink>>) -> Sinks {
        Sinks {
            live: sinks,
            errors: Vec::new(),
        }
    }

    fn each(&mut self, mut f: impl FnMut(&mut dyn RecordSink) -> Result<(), String>) {
        let errors = &mut self.errors;
        self.live.retain_mut(|sink| match f(sink.as_mut()) {
            Ok(()) => true,
            Err(e) => {
                errors.push(format!("record sink {}: {e} (detached)", sink.name()));
                false
            }
        });
    }

    pub(crate) fn record(&mut self, record: &RequestRecord) {
        self.each(|s| s.record(record));
    }

    pub(crate) fn flush(&mut self) {
        self.each(|s| s.flush());
    }

    /// Finishes every sink; returns the errors of the whole run.
    pub(crate) fn finish(mut self, manifest: &RunManifest) -> Vec<String> {
        self.each(|s| s.finish(manifest));
        self.errors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Failing(u32);

    impl RecordSink for Failing {
        fn name(&self) -> String {
            "failing".into()
        }
        fn record(&mut self, _: &RequestRecord) -> Result<(), String> {
            self.0 += 1;
            if self.0 == 2 {
                Err("disk gone".into())
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn a_failing_sink_is_detached_and_reported_while_others_go_on() {
        let (vec, records) = VecSink::new();
        let mut sinks = Sinks::new(vec![Box::new(Failing(0)), Box::new(vec)]);
        for i in 0..3 {
            sinks.record(&RequestRecord {
                request_index: i,
                ..Default::default()
            });
        }
        sinks.flush();
        let errors = sinks.finish(&RunManifest::default());
        assert_eq!(errors, ["record sink failing: disk gone (detached)"]);
        let got: Vec<u64> = records.take().iter().map(|r| r.request_index).collect();
        assert_eq!(got, [0, 1, 2]);
        assert!(records.is_empty());
    }
}
