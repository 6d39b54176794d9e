//! A run's records read more than once instead of held: the passes a
//! figure needs over a slice in memory or a records file read again.

use std::borrow::Cow;
use std::convert::Infallible;

use speedbench_record::RequestRecord;

/// A run's records, read from the start as often as a computation asks: a
/// slice in memory, or a records file read again (the client's
/// `RecordsFilePasses`), so a million-request run's figures need not hold
/// a million records.
///
/// ```
/// use speedbench_metrics::{FigureOptions, RecordPasses, RunMetrics};
/// use speedbench_record::RequestRecord;
///
/// let records = [RequestRecord { e2e_latency_ns: 2_000_000, ..Default::default() }];
/// let mut seen = 0;
/// records[..].pass(&mut |_| seen += 1).unwrap();
/// assert_eq!(seen, 1);
/// let m = RunMetrics::from_passes(&records[..], &FigureOptions::default()).unwrap();
/// assert_eq!(m.request_latency_ms.unwrap().avg, 2.0);
/// ```
pub trait RecordPasses {
    /// Why a pass could not read the records.
    type Error;

    /// Calls `visit` with every record of the run, in record order.
    fn pass(&self, visit: &mut dyn FnMut(&RequestRecord)) -> Result<(), Self::Error>;

    /// [`Self::pass`] for a computation that reads only `columns` (names
    /// from `speedbench_record::columns`): a source that can leave the
    /// others undecoded (a records file) does, and the records it shows
    /// hold their defaults there. By default, a whole pass.
    fn pass_reading(
        &self,
        columns: &[&str],
        visit: &mut dyn FnMut(&RequestRecord),
    ) -> Result<(), Self::Error> {
        let _ = columns;
        self.pass(visit)
    }

    /// Every record at once, for the figures that need them together (the
    /// time slices of [`crate::FigureOptions::slice_duration_s`]).
    fn held(&self) -> Result<Cow<'_, [RequestRecord]>, Self::Error>;
}

impl RecordPasses for [RequestRecord] {
    type Error = Infallible;

    fn pass(&self, visit: &mut dyn FnMut(&RequestRecord)) -> Result<(), Infallible> {
        self.iter().for_each(visit);
        Ok(())
    }

    fn held(&self) -> Result<Cow<'_, [RequestRecord]>, Infallible> {
        Ok(Cow::Borrowed(self))
    }
}

/// A computation over records read in passes: every pass sees the same
/// records in the same order.
pub(crate) trait PassFold {
    /// The next record of pass `pass` (counted from 0).
    fn add(&mut self, pass: u32, r: &RequestRecord);
    /// The pass is over; true when the fold needs another.
    fn end_pass(&mut self) -> bool;
}

/// Reads `source` until `fold` needs no more passes, showing every record
/// of the first to `first` as well.
pub(crate) fn run_passes<S: RecordPasses + ?Sized>(
    source: &S,
    fold: &mut impl PassFold,
    first: &mut dyn FnMut(&RequestRecord),
) -> Result<(), S::Error> {
    let mut pass = 0;
    loop {
        source.pass(&mut |r| {
            fold.add(pass, r);
            if pass == 0 {
                first(r);
            }
        })?;
        if !fold.end_pass() {
            return Ok(());
        }
        pass += 1;
    }
}
