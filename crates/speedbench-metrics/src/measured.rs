//! Which records the statistics use.

use speedbench_record::{ErrorKind, RequestRecord};

/// True for a record every statistic uses: not warmup, and finished without
/// error ([`RequestRecord::is_success`]).
///
/// This is the one definition of a "measured request": every mean,
/// percentile, ratio, speedup and interval speedbench prints is computed
/// over the records it accepts. Failed requests are counted apart
/// ([`crate::RequestCounts`]), never measured.
///
/// ```
/// use speedbench_metrics::is_measured;
/// use speedbench_record::{ErrorKind, RequestRecord};
///
/// assert!(is_measured(&RequestRecord::default()));
/// let warmup = RequestRecord { warmup: true, ..Default::default() };
/// let failed = RequestRecord { error_kind: Some(ErrorKind::Timeout), ..Default::default() };
/// assert!(!is_measured(&warmup) && !is_measured(&failed));
/// ```
pub fn is_measured(r: &RequestRecord) -> bool {
    !r.warmup && r.is_success()
}

/// True for a request sent outside the warmup, whatever became of it: the
/// requests a run's window spans and its attempts count (a skipped turn
/// was never sent).
pub(crate) fn is_sent(r: &RequestRecord) -> bool {
    !r.warmup && r.error_kind != Some(ErrorKind::Skipped)
}

/// From the earliest start to the latest end of the non-warmup records
/// (failed ones included: they occupied the window; skipped turns, never
/// sent, left out), in seconds: the duration every rate of a run divides by.
pub(crate) fn benchmark_duration_s(records: &[RequestRecord]) -> Option<f64> {
    let mut window = BenchmarkWindow::default();
    records.iter().for_each(|r| window.add(r));
    window.duration_s()
}

/// [`benchmark_duration_s`] folded one record at a time.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct BenchmarkWindow {
    /// The earliest start and the latest end so far.
    span: Option<(i64, i64)>,
}

impl BenchmarkWindow {
    pub(crate) fn add(&mut self, r: &RequestRecord) {
        // A skipped turn was never sent: it occupied no part of the window.
        if !is_sent(r) {
            return;
        }
        let (start, end) = self.span.unwrap_or((r.start_unix_ns, r.end_unix_ns));
        self.span = Some((start.min(r.start_unix_ns), end.max(r.end_unix_ns)));
    }

    pub(crate) fn duration_s(&self) -> Option<f64> {
        let (start, end) = self.span?;
        (end > start).then(|| (end - start) as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::ErrorKind;

    #[test]
    fn warmup_and_every_failure_kind_are_not_measured() {
        let ok = RequestRecord::default();
        assert!(is_measured(&ok));
        let warm_ok = RequestRecord {
            warmup: true,
            ..Default::default()
        };
        assert!(!is_measured(&warm_ok));
        for kind in ErrorKind::ALL {
            let failed = RequestRecord {
                error_kind: Some(kind),
                ..Default::default()
            };
            assert!(!is_measured(&failed), "{kind:?}");
        }
    }
}
