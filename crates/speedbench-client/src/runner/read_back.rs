//! The closed records file read back for `summary.json` and the console:
//! read in passes, never held, so a run of a million requests ends in the
//! memory a run of ten thousand does.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::path::Path;

use speedbench_metrics::{
    FigureOptions, RecordPasses, RecordsDigest, RunMetrics, has_llamacpp_timing, is_measured,
};
use speedbench_record::{
    RecordError, RequestRecord, RunManifest, columns, read_records_file, visit_records,
};

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
    /// The manifest in the file's footer, once a pass read it.
    manifest: OnceCell<Option<RunManifest>>,
}

impl<'a> RecordsFilePasses<'a> {
    /// The records file at `path`, every column decoded.
    pub fn new(path: &'a (impl AsRef<Path> + ?Sized)) -> RecordsFilePasses<'a> {
        RecordsFilePasses {
            path: path.as_ref(),
            columns: None,
            manifest: OnceCell::new(),
        }
    }

    /// The manifest in the file's footer, once a pass has read the file
    /// (`None` before, or for a file without one).
    pub fn manifest(&self) -> Option<&RunManifest> {
        self.manifest.get().and_then(Option::as_ref)
    }

    /// The records file at `path`, decoding only what [`RunMetrics`]
    /// reads with `figures` (none of [`RunMetrics::UNREAD_COLUMNS`]; the
    /// HTTP phases only when [`FigureOptions::http_trace`] asks for them).
    pub fn for_metrics(
        path: &'a (impl AsRef<Path> + ?Sized),
        figures: &FigureOptions,
    ) -> RecordsFilePasses<'a> {
        let read = columns::ALL.iter().filter(|c| {
            !RunMetrics::UNREAD_COLUMNS.contains(c)
                && (figures.http_trace || !columns::HTTP_PHASES.contains(c))
        });
        RecordsFilePasses {
            columns: Some(read.copied().collect()),
            ..RecordsFilePasses::new(path)
        }
    }
}

impl RecordsFilePasses<'_> {
    /// One pass decoding `columns` (`None`: all), keeping the manifest.
    fn read(
        &self,
        columns: Option<&[&str]>,
        visit: &mut dyn FnMut(&RequestRecord),
    ) -> Result<(), RecordError> {
        let visited = visit_records(self.path, columns, visit)?;
        let _ = self.manifest.set(visited.manifest);
        Ok(())
    }
}

impl RecordPasses for RecordsFilePasses<'_> {
    type Error = RecordError;

    fn pass(&self, visit: &mut dyn FnMut(&RequestRecord)) -> Result<(), RecordError> {
        self.read(self.columns.as_deref(), visit)
    }

    fn pass_reading(
        &self,
        columns: &[&str],
        visit: &mut dyn FnMut(&RequestRecord),
    ) -> Result<(), RecordError> {
        self.read(Some(columns), visit)
    }

    fn held(&self) -> Result<Cow<'_, [RequestRecord]>, RecordError> {
        Ok(Cow::Owned(read_records_file(self.path)?.records))
    }
}

/// The figures of `summary.json` (with the `figures` asked for), the
/// digest the console's matrices read, the manifest, and the measured
/// output tokens (for the GPU figures), from the records file at `path`,
/// read in passes: none of its records is held, so a run's memory does
/// not grow with its length. (Holding a short run's records instead saved
/// no CPU worth their memory: 16,384 records held, 0.56-0.60 s of user
/// CPU and 47 MiB peak for the whole run; 16,385 read in passes,
/// 0.56-0.64 s and 31 MiB.)
pub(super) fn read_back(
    path: &Path,
    figures: &FigureOptions,
) -> Result<(ReadBack, u64), RecordError> {
    let passes = RecordsFilePasses::for_metrics(path, figures);
    // The console's digest and the two sums are folded in the figures'
    // first pass.
    let mut digest = RecordsDigest::default();
    let (mut llamacpp_timings, mut output_tokens) = (false, 0);
    let metrics = RunMetrics::from_passes_visiting(&passes, figures, &mut |r| {
        digest.add(r);
        llamacpp_timings |= has_llamacpp_timing(r);
        if is_measured(r) {
            output_tokens += r.completion_tokens.unwrap_or(0);
        }
    })?;
    let back = ReadBack {
        manifest: passes.manifest().cloned(),
        metrics,
        digest,
        llamacpp_timings,
    };
    Ok((back, output_tokens))
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_metrics::{RunMetrics, SteadyStateOptions, has_llamacpp_timings};
    use speedbench_record::{
        ErrorKind, HttpPhases, RecordWriter, ServerTimings, SpecDecodeStats, SpecSource,
    };

    /// A run of `n` records of every kind: two models, warmup, failures,
    /// skipped turns, vLLM spec stats, llama.cpp timings, overlapping in
    /// time so the steady state has a window.
    fn records(n: u64) -> Vec<RequestRecord> {
        let ms = 1_000_000i64;
        (0..n)
            .map(|i| {
                let start = 1_000_000_000_000 + (i as i64 / 8) * 3 * ms + (i as i64 % 8) * ms / 4;
                let e2e = (4 + i % 7) * ms as u64;
                let mut r = RequestRecord {
                    request_index: i,
                    model: ["a", "b"][(i % 2) as usize].into(),
                    category: Some(["qa", "math", "coding"][(i % 3) as usize].into()),
                    warmup: i < 20,
                    start_unix_ns: start,
                    end_unix_ns: start + e2e as i64,
                    e2e_latency_ns: e2e,
                    ttft_ns: Some(ms as u64 + (i * 7919) % 1_000_000),
                    inter_chunk_latencies_ns: vec![100_000 + i % 50_000, 90_000],
                    prompt_tokens: Some(100 + i % 13),
                    completion_tokens: Some(16 + i % 5),
                    output_text: "text".into(),
                    // Every third request over a new connection, one in
                    // five without phases (hyper's client).
                    http_phases: (i % 5 != 4).then(|| HttpPhases {
                        blocked_ns: 1_000 + i % 97,
                        connecting_ns: if i % 3 == 0 { 50_000 + i } else { 0 },
                        sending_ns: 2_000 + i % 13,
                        waiting_ns: ms as u64 / 2 + (i * 7919) % 1_000_000,
                        receiving_ns: e2e - ms as u64,
                        connection_reused: i % 3 != 0,
                        bytes_sent: 300 + i % 41,
                        bytes_received: 2_000 + i % 800,
                        chunks_sent: 1,
                        chunks_received: 3 + i % 17,
                        ..Default::default()
                    }),
                    ..Default::default()
                };
                match i % 11 {
                    0 => r.error_kind = Some(ErrorKind::Timeout),
                    // Never sent: in no window, wherever its time lies.
                    1 => {
                        r.error_kind = Some(ErrorKind::Skipped);
                        r.start_unix_ns += 3_600_000 * ms;
                        r.end_unix_ns = r.start_unix_ns;
                    }
                    2 => {
                        r.server_timings = Some(ServerTimings {
                            predicted_n: Some(16),
                            predicted_per_second: Some(50.0 + (i % 9) as f64),
                            ..Default::default()
                        })
                    }
                    _ => {
                        r.spec = Some(SpecDecodeStats {
                            source: Some(SpecSource::Vllm),
                            accepted_draft_tokens: i % 9,
                            proposed_draft_tokens: 9,
                            verify_steps: Some(3 + i % 4),
                            acceptance_histogram: vec![1, i % 3, 1],
                            ..Default::default()
                        })
                    }
                }
                r
            })
            .collect()
    }

    /// A run is read back in passes over its file, holding none of it, to
    /// exactly the figures, digest and manifest of its records held in
    /// memory: a short run, and one whose figures take several passes
    /// (more than 4,096 samples each).
    #[test]
    fn passes_over_the_file_give_what_the_records_held_give() {
        let dir = tempfile::tempdir().unwrap();
        let figures = FigureOptions {
            slos: "ttft:2".parse().unwrap(),
            steady_state: Some(SteadyStateOptions {
                concurrency: 8,
                threshold: SteadyStateOptions::DEFAULT_THRESHOLD,
                min_window_s: 0.01,
            }),
            slice_duration_s: Some(5.0),
            http_trace: true,
        };
        for n in [300, 12_000] {
            let all = records(n);
            let path = dir.path().join(format!("records-{n}.parquet"));
            let mut writer = RecordWriter::create(&path).unwrap();
            for chunk in all.chunks(1000) {
                chunk.iter().for_each(|r| writer.append(r).unwrap());
                writer.flush().unwrap();
            }
            let manifest = RunManifest {
                model: "a".into(),
                ..Default::default()
            };
            writer.close(&manifest).unwrap();
            let held = read_records_file(&path).unwrap();
            let (back, output_tokens) = read_back(&path, &figures).unwrap();
            let expected = RunMetrics::with_figures(&held.records, &figures);
            assert_eq!(back.metrics, expected, "{n} records");
            assert!(expected.steady_state.unwrap().window.is_some());
            assert_eq!(expected.by_model.len(), 2);
            let http = expected.http_trace.unwrap();
            assert!(http.requests > 0 && http.without_phases > 0);
            // Without the HTTP phases asked for, their columns go unread.
            let plain = FigureOptions {
                http_trace: false,
                ..figures.clone()
            };
            let (back_plain, _) = read_back(&path, &plain).unwrap();
            assert_eq!(
                back_plain.metrics,
                RunMetrics::with_figures(&held.records, &plain)
            );
            assert_eq!(back_plain.metrics.http_trace, None);
            assert_eq!(back.digest, RecordsDigest::of(&held.records));
            assert!(back.llamacpp_timings && has_llamacpp_timings(&held.records));
            assert_eq!(back.manifest, held.manifest);
            let by_hand: u64 = (held.records.iter())
                .filter(|r| is_measured(r))
                .filter_map(|r| r.completion_tokens)
                .sum();
            assert_eq!(output_tokens, by_hand);
        }
    }
}
