//! The closed records file read back for `summary.json` and the console:
//! read in passes, never held, so a run of a million requests ends in the
//! memory a run of ten thousand does.

use std::borrow::Cow;
use std::path::Path;

use speedbench_metrics::{FigureOptions, RecordPasses, RecordsDigest, RunMetrics, is_measured};
use speedbench_record::{RecordError, RequestRecord, columns, read_records_file, visit_records};

use super::outcome::ReadBack;

/// A closed records file, read from the start for each pass a figure
/// needs ([`RecordPasses`]).
///
/// ```no_run
/// use speedbench_client::RecordsFilePasses;
/// use speedbench_metrics::{FigureOptions, RunMetrics};
///
/// let passes = RecordsFilePasses::new("run/records.parquet");
/// let metrics = RunMetrics::from_passes(&passes, &FigureOptions::default())?;
/// println!("{:?}", metrics.ttft_ms);
/// # Ok::<(), speedbench_record::RecordError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RecordsFilePasses<'a> {
    path: &'a Path,
    /// The columns each pass decodes; `None`: all.
    columns: Option<Vec<&'static str>>,
}

/// Columns no run-level figure reads: a pass leaves them undecoded.
const UNUSED_BY_METRICS: [&str; 2] = [columns::OUTPUT_TEXT, columns::PROMPT_SHA256];

impl<'a> RecordsFilePasses<'a> {
    /// The records file at `path`, every column decoded.
    pub fn new(path: &'a (impl AsRef<Path> + ?Sized)) -> RecordsFilePasses<'a> {
        RecordsFilePasses {
            path: path.as_ref(),
            columns: None,
        }
    }

    /// The records file at `path`, decoding only what [`RunMetrics`]
    /// reads (not the output text or the prompt's hash).
    pub fn for_metrics(path: &'a (impl AsRef<Path> + ?Sized)) -> RecordsFilePasses<'a> {
        let read = columns::ALL
            .iter()
            .filter(|c| !UNUSED_BY_METRICS.contains(c));
        RecordsFilePasses {
            columns: Some(read.copied().collect()),
            ..RecordsFilePasses::new(path)
        }
    }
}

impl RecordPasses for RecordsFilePasses<'_> {
    type Error = RecordError;

    fn pass(&self, visit: &mut dyn FnMut(&RequestRecord)) -> Result<(), RecordError> {
        visit_records(self.path, self.columns.as_deref(), visit).map(|_| ())
    }

    fn held(&self) -> Result<Cow<'_, [RequestRecord]>, RecordError> {
        Ok(Cow::Owned(read_records_file(self.path)?.records))
    }
}

/// The figures of `summary.json` (with the `figures` asked for), the
/// digest the console's matrices read, the manifest, and the measured
/// output tokens (for the GPU figures), from the records file at `path`.
pub(super) fn read_back(
    path: &Path,
    figures: &FigureOptions,
) -> Result<(ReadBack, u64), RecordError> {
    let metrics = RunMetrics::from_passes(&RecordsFilePasses::for_metrics(path), figures)?;
    let mut digest = RecordsDigest::default();
    let (mut llamacpp_timings, mut output_tokens) = (false, 0);
    // The digest's columns hold llama.cpp's `timings_predicted_n`.
    let visited = visit_records(path, Some(&RecordsDigest::COLUMNS), |r| {
        digest.add(r);
        llamacpp_timings |= !r.warmup && r.server_timings.is_some();
        if is_measured(r) {
            output_tokens += r.completion_tokens.unwrap_or(0);
        }
    })?;
    let back = ReadBack {
        manifest: visited.manifest,
        metrics,
        digest,
        llamacpp_timings,
    };
    Ok((back, output_tokens))
}
