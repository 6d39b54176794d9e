//! llama.cpp `speed_bench.py`'s per-category table, its `--output` JSON
//! file written safely, `speed_bench_compare.py`'s comparison table, and
//! what such a file gives a matrix.

use std::io::Write;
use std::path::{Path, PathBuf};

use speedbench_metrics::{
    OVERALL, SpeedBenchPyComparisonRow, SpeedBenchPyOutput, SpeedBenchPyRow,
    speed_bench_py_elapsed_s, speed_bench_py_rows,
};
use speedbench_record::RequestRecord;

use crate::ReportError;
use crate::matrix::{Cell, MatrixMetric, RunCells};

/// The columns of [`render_category_table`]: speed_bench.py's six, then
/// speedbench's cache-correct prefill rate.
pub const SPEED_BENCH_PY_COLUMNS: [&str; 7] = [
    "category",
    "samples",
    "avg_prompt_t/s",
    "avg_pred_t/s",
    "avg_latency",
    "accept_rate",
    "avg_uncached_prompt_t/s",
];

/// What each column of [`render_category_table`] is, printed under it by
/// [`render_speed_bench_py_summary`].
pub const SPEED_BENCH_PY_LEGEND: &str = "\
samples: successful samples (a sample is one dataset row, every turn of it; it fails when any turn failed)
avg_prompt_t/s, avg_pred_t/s: server-reported (llama.cpp timings), speed_bench.py's formula: mean over samples of timings.prompt_per_second / predicted_per_second; for a multi-turn sample Σprompt_tokens/Σprompt_ms and Σcompletion_tokens/Σpredicted_ms over its turns (usage counts, cached history tokens included, so the prompt rate is inflated when the prompt cache hits)
avg_uncached_prompt_t/s: server-reported, cache-correct: mean over samples of Σtimings.prompt_n/Σprompt_ms (tokens actually prefilled)
avg_latency: client-measured end-to-end seconds per sample (a multi-turn sample's turns summed); speedbench's own tables are per request
accept_rate: Σdraft_n_accepted/Σdraft_n over the samples; n/a when nothing was drafted
overall: every sample pooled (not a mean of the category rows)
";

/// Renders `rows` as llama.cpp's `speed_bench.py` prints its summary, with
/// one more column, `avg_uncached_prompt_t/s`, after its six.
///
/// Columns [`SPEED_BENCH_PY_COLUMNS`]; speeds `%.2f`, latency `%.3fs`
/// (seconds), rate `%.4f` (a fraction), `n/a` for a missing value. Every
/// cell, the last included, is left-justified to its column's width;
/// cells are joined by two spaces and the header is underlined with
/// dashes. Ends with a newline.
pub fn render_category_table(rows: &[SpeedBenchPyRow]) -> String {
    let or_na = |v: Option<String>| v.unwrap_or_else(|| "n/a".to_string());
    let speed = |v: Option<f64>| or_na(v.map(|v| format!("{v:.2}")));
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.category.clone(),
                r.requests.to_string(),
                speed(r.avg_prompt_t_s),
                speed(r.avg_pred_t_s),
                or_na(r.avg_latency.map(|v| format!("{v:.3}s"))),
                or_na(r.accept_rate.map(|v| format!("{v:.4}"))),
                speed(r.avg_uncached_prompt_t_s),
            ]
        })
        .collect();
    left_table(
        &SPEED_BENCH_PY_COLUMNS,
        cells.into_iter().map(Vec::from).collect(),
    )
}

/// speed_bench.py's `print_rows`: every cell left-justified to its column's
/// width (the header's included), cells joined by two spaces, the header
/// underlined with dashes, each line ending in a newline.
fn left_table(headers: &[&str], cells: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |row: &[String]| -> String {
        let padded: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, &w)| format!("{cell:<w$}"))
            .collect();
        padded.join("  ") + "\n"
    };
    let mut out = line(&headers.iter().map(|h| h.to_string()).collect::<Vec<_>>());
    out.push_str(&line(
        &widths.iter().map(|&w| "-".repeat(w)).collect::<Vec<_>>(),
    ));
    for row in &cells {
        out.push_str(&line(row));
    }
    out
}

/// The columns of [`render_speed_bench_py_comparison`], speed_bench_compare.py's.
pub const SPEED_BENCH_PY_COMPARE_COLUMNS: [&str; 8] = [
    "category",
    "base_avg_pred_t/s",
    "spec_avg_pred_t/s",
    "decode_speedup",
    "base_avg_latency",
    "spec_avg_latency",
    "latency_speedup",
    "accept_rate",
];

/// What [`render_speed_bench_py_comparison`] prints when no category is in
/// both runs (speed_bench_compare.py's words).
pub const NO_OVERLAP: &str = "No overlapping categories found for comparison.";

/// `rows` (from [`speedbench_metrics::speed_bench_py_compare`]) as
/// speed_bench_compare.py prints them: columns
/// [`SPEED_BENCH_PY_COMPARE_COLUMNS`], speeds `%.2f`, speedups `%.2fx`,
/// latencies `%.3fs`, the rate `%.4f`, `n/a` for a missing value, laid out
/// as speed_bench.py's table; [`NO_OVERLAP`] when `rows` is empty. Ends
/// with a newline.
pub fn render_speed_bench_py_comparison(rows: &[SpeedBenchPyComparisonRow]) -> String {
    if rows.is_empty() {
        return format!("{NO_OVERLAP}\n");
    }
    let or_na = |v: Option<String>| v.unwrap_or_else(|| "n/a".to_string());
    let speed = |v: Option<f64>| or_na(v.map(|v| format!("{v:.2}")));
    let speedup = |v: Option<f64>| or_na(v.map(|v| format!("{v:.2}x")));
    let seconds = |v: Option<f64>| or_na(v.map(|v| format!("{v:.3}s")));
    let cells = rows
        .iter()
        .map(|r| {
            vec![
                r.category.clone(),
                speed(r.base_avg_pred_t_s),
                speed(r.spec_avg_pred_t_s),
                speedup(r.decode_speedup),
                seconds(r.base_avg_latency),
                seconds(r.spec_avg_latency),
                speedup(r.latency_speedup),
                or_na(r.accept_rate.map(|v| format!("{v:.4}"))),
            ]
        })
        .collect();
    left_table(&SPEED_BENCH_PY_COMPARE_COLUMNS, cells)
}

/// The matrix cells a speed_bench.py `--output` file gives for `metric`:
/// for `accept_rate`, each category row's `accepted / draft_n` (a column
/// with no value where nothing was drafted; `requests` its successful
/// samples), the `overall` row left out (the matrix makes its own
/// `Overall`); for any other metric, none ([`speed_bench_py_matrix_gap`]
/// says why).
pub fn speed_bench_py_cells(output: &SpeedBenchPyOutput, metric: MatrixMetric) -> RunCells {
    if metric != MatrixMetric::AcceptRate {
        return RunCells::new();
    }
    output
        .summary
        .iter()
        .filter(|r| r.category != OVERALL)
        .map(|r| {
            (
                r.category.clone(),
                Cell {
                    value: r.accept_rate,
                    requests: r.requests,
                    time_averaged: false,
                },
            )
        })
        .collect()
}

/// Why a speed_bench.py `--output` file gives no `metric` cells
/// ([`speed_bench_py_cells`]); `None` for `accept_rate`, which it gives.
pub fn speed_bench_py_matrix_gap(metric: MatrixMetric) -> Option<&'static str> {
    match metric {
        MatrixMetric::AcceptRate => None,
        MatrixMetric::AcceptLength => Some(
            "a speed_bench.py file counts drafted and accepted tokens but not verify steps, so it \
             gives no acceptance length (accept_rate it gives)",
        ),
        MatrixMetric::Throughput => Some(
            "a speed_bench.py file records no run duration, so it gives no output-token throughput",
        ),
        MatrixMetric::DecodeTps => Some(
            "a speed_bench.py file holds per-sample means (a multi-turn sample's turns summed), \
             not the per-request decode speeds this matrix averages; see its avg_pred_t/s with \
             --format speed-bench-py",
        ),
        MatrixMetric::Latency => Some(
            "a speed_bench.py file holds per-sample latencies in seconds (a multi-turn sample's \
             turns summed), not the per-request latencies this matrix averages; see its \
             avg_latency with --format speed-bench-py",
        ),
    }
}

/// The whole summary: a title line (`elapsed_s`, when known, as
/// speed_bench.py's `Summary (elapsed=…s)`), [`render_category_table`],
/// the failed-sample count when some failed, and [`SPEED_BENCH_PY_LEGEND`].
pub fn render_speed_bench_py_summary(rows: &[SpeedBenchPyRow], elapsed_s: Option<f64>) -> String {
    let mut out = match elapsed_s {
        Some(e) => format!("speed_bench.py summary, per sample (elapsed={e:.2}s)\n"),
        None => "speed_bench.py summary, per sample\n".to_string(),
    };
    out.push_str(&render_category_table(rows));
    if let Some(overall) = rows.last().filter(|r| r.failed > 0) {
        out.push_str(&format!(
            "{} of {} samples failed (their turns are left out of every column)\n",
            overall.failed,
            overall.failed + overall.requests
        ));
    }
    out.push_str(SPEED_BENCH_PY_LEGEND);
    out
}

/// [`render_speed_bench_py_summary`] of a run's records (samples joined
/// from its turns, categories in dispatch order, elapsed from its first
/// send to its last end).
pub fn render_speed_bench_py_records(records: &[RequestRecord]) -> String {
    render_speed_bench_py_summary(
        &speed_bench_py_rows(records),
        speed_bench_py_elapsed_s(records),
    )
}

/// Fails with [`ReportError::Write`] (kind `AlreadyExists`) when `path`
/// exists and `overwrite` is false, or (kind `NotFound`) when its
/// directory does not exist: the check to make before a run that will end
/// in [`write_speed_bench_py_json`].
pub fn check_output_free(path: &Path, overwrite: bool) -> Result<(), ReportError> {
    if !overwrite && std::fs::symlink_metadata(path).is_ok() {
        return Err(already_exists(path));
    }
    let parent = path.parent().filter(|p| !p.as_os_str().is_empty());
    if parent.is_some_and(|p| !p.is_dir()) {
        return Err(ReportError::Write {
            path: path.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "its directory does not exist",
            ),
        });
    }
    Ok(())
}

fn already_exists(path: &Path) -> ReportError {
    ReportError::Write {
        path: path.to_path_buf(),
        source: std::io::Error::new(
            std::io::ErrorKind::AlreadyExists,
            "the file already exists; not replacing it",
        ),
    }
}

/// Writes `output` to `path` as speed_bench.py does
/// (`json.dump(indent=2, sort_keys=True)`: keys sorted, two-space indent),
/// plus a final newline.
///
/// Atomic: the JSON goes to a temporary file beside `path`, which is then
/// renamed over it (`overwrite`) or hard-linked to it, failing if `path`
/// exists (otherwise). A reader never sees a half-written file, an existing
/// file is never replaced without `overwrite`, and the temporary file is
/// removed on every path.
pub fn write_speed_bench_py_json(
    path: &Path,
    output: &SpeedBenchPyOutput,
    overwrite: bool,
) -> Result<(), ReportError> {
    let io = |source| ReportError::Write {
        path: path.to_path_buf(),
        source,
    };
    // Without serde_json's `preserve_order` a Value's maps are sorted.
    let value = serde_json::to_value(output).map_err(|e| io(e.into()))?;
    let mut text = serde_json::to_string_pretty(&value).map_err(|e| io(e.into()))?;
    text.push('\n');
    let tmp = temp_path(path);
    let written = std::fs::File::create_new(&tmp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
        .map_err(|source| ReportError::Write {
            path: tmp.clone(),
            source,
        })
        .and_then(|()| {
            if overwrite {
                std::fs::rename(&tmp, path).map_err(io)
            } else {
                std::fs::hard_link(&tmp, path).map_err(|e| match e.kind() {
                    std::io::ErrorKind::AlreadyExists => already_exists(path),
                    _ => io(e),
                })
            }
        });
    // After a rename it is gone already; after a link or a failure it goes.
    let _ = std::fs::remove_file(&tmp);
    written
}

/// `DIR/.NAME.tmp-PID` beside `path`.
fn temp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "output".into(), |n| n.to_string_lossy().into_owned());
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_metrics::{SpeedBenchPyConfig, SpeedBenchPySample};

    #[allow(clippy::too_many_arguments)]
    fn row(
        category: &str,
        requests: u64,
        prompt: Option<f64>,
        decode: Option<f64>,
        latency: Option<f64>,
        rate: Option<f64>,
        uncached: Option<f64>,
        failed: u64,
    ) -> SpeedBenchPyRow {
        SpeedBenchPyRow {
            category: category.into(),
            requests,
            turns: requests,
            failed,
            avg_prompt_t_s: prompt,
            avg_pred_t_s: decode,
            avg_latency: latency,
            draft_n: 0,
            accepted: 0,
            accept_rate: rate,
            avg_uncached_prompt_t_s: uncached,
        }
    }

    #[test]
    fn llama_cpp_layout_exact() {
        // math: prompt/s mean (100+200)/2 = 150, pred/s (10+30)/2 = 20,
        //       latency (1+3)/2 = 2 s, rate 20/40 = 0.5, uncached 75.
        // coding: 400, 50, 2 s, nothing drafted -> n/a.
        // overall: (100+200+400)/3 = 233.333 -> 233.33, (10+30+50)/3 = 30,
        //          latency 2 s, rate 0.5.
        // A long name widens its column; every cell is padded, the last too.
        let rows = [
            row(
                "math",
                2,
                Some(150.0),
                Some(20.0),
                Some(2.0),
                Some(0.5),
                Some(75.0),
                0,
            ),
            row(
                "coding",
                1,
                Some(400.0),
                Some(50.0),
                Some(2.0),
                None,
                Some(400.0),
                0,
            ),
            row("summarization", 0, None, None, None, None, None, 0),
            row(
                "overall",
                3,
                Some(700.0 / 3.0),
                Some(30.0),
                Some(2.0),
                Some(0.5),
                Some(550.0 / 3.0),
                0,
            ),
        ];
        let expected = "\
category       samples  avg_prompt_t/s  avg_pred_t/s  avg_latency  accept_rate  avg_uncached_prompt_t/s
-------------  -------  --------------  ------------  -----------  -----------  -----------------------
math           2        150.00          20.00         2.000s       0.5000       75.00                  
coding         1        400.00          50.00         2.000s       n/a          400.00                 
summarization  0        n/a             n/a           n/a          n/a          n/a                    
overall        3        233.33          30.00         2.000s       0.5000       183.33                 
";
        assert_eq!(render_category_table(&rows), expected);
    }

    #[test]
    fn wide_values_widen_columns() {
        // 12345.678 -> "12345.68" (no thousands separator, as Python %.2f);
        // 0.12345 s -> "0.123s"; 2/3 -> "0.6667"; the samples column
        // widens to 9 digits.
        let rows = [row(
            "qa",
            123_456_789,
            Some(12_345.678),
            Some(1.0),
            Some(0.12345),
            Some(2.0 / 3.0),
            None,
            0,
        )];
        let out = render_category_table(&rows);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            "category  samples    avg_prompt_t/s  avg_pred_t/s  avg_latency  accept_rate  avg_uncached_prompt_t/s"
        );
        assert_eq!(
            lines[2],
            "qa        123456789  12345.68        1.00          0.123s       0.6667       n/a                    "
        );
        assert_eq!(render_category_table(&[]).lines().count(), 2);
    }

    #[test]
    fn summary_has_title_failures_and_legend() {
        let rows = [row("overall", 3, None, None, Some(1.0), None, None, 2)];
        let out = render_speed_bench_py_summary(&rows, Some(12.345));
        assert!(out.starts_with("speed_bench.py summary, per sample (elapsed=12.35s)\n"));
        assert!(out.contains("2 of 5 samples failed"));
        assert!(out.ends_with(SPEED_BENCH_PY_LEGEND));
        let ok = [row("overall", 3, None, None, Some(1.0), None, None, 0)];
        let out = render_speed_bench_py_summary(&ok, None);
        assert!(out.starts_with("speed_bench.py summary, per sample\n"));
        assert!(!out.contains("failed ("));
    }

    fn output() -> SpeedBenchPyOutput {
        let config = SpeedBenchPyConfig {
            url: "localhost:8080".into(),
            model: Some("m".into()),
            bench: None,
            category: "all".into(),
            osl: None,
            concurrency: 2,
            extra_inputs: serde_json::from_str(r#"{"z":1,"a":2}"#).unwrap(),
            limit: None,
            timeout: Some(5.0),
            streaming: Some(false),
        };
        SpeedBenchPyOutput::from_samples(config, Vec::<SpeedBenchPySample>::new())
    }

    #[test]
    fn json_sorted_refused_over_a_file_unless_overwrite() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.json");
        check_output_free(&path, false).unwrap();
        write_speed_bench_py_json(&path, &output(), false).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        // Keys sorted at every level, two-space indent.
        assert!(
            text.starts_with(
                "{\n  \"completed_samples\": 0,\n  \"config\": {\n    \"bench\": null,"
            )
        );
        assert!(text.contains("\"extra_inputs\": {\n      \"a\": 2,\n      \"z\": 1\n    },"));
        let back: SpeedBenchPyOutput = serde_json::from_str(&text).unwrap();
        assert_eq!(back, output());

        // An existing file: refused by the check and by the write, untouched.
        std::fs::write(&path, "keep").unwrap();
        let err = check_output_free(&path, false).unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        let err = write_speed_bench_py_json(&path, &output(), false).unwrap_err();
        assert!(err.to_string().contains("out.json"), "{err}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "keep");
        // With overwrite it is replaced; no temporary file is left.
        check_output_free(&path, true).unwrap();
        write_speed_bench_py_json(&path, &output(), true).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["out.json"]);
        // A missing directory is refused by the check; the write names the
        // temporary file it could not create.
        let missing = dir.path().join("no/out.json");
        let err = check_output_free(&missing, true).unwrap_err();
        assert!(
            err.to_string().contains("directory does not exist"),
            "{err}"
        );
        check_output_free(Path::new("bare-name.json"), false).unwrap();
        let err = write_speed_bench_py_json(&missing, &output(), false).unwrap_err();
        assert!(err.to_string().contains(".out.json.tmp-"), "{err}");
    }

    #[test]
    fn comparison_layout_exact_and_no_overlap() {
        let rows = [
            SpeedBenchPyComparisonRow {
                category: "coding".into(),
                base_avg_pred_t_s: Some(40.0),
                spec_avg_pred_t_s: Some(100.0),
                decode_speedup: Some(2.5),
                base_avg_latency: Some(3.0),
                spec_avg_latency: Some(1.5),
                latency_speedup: Some(2.0),
                accept_rate: Some(0.75),
            },
            SpeedBenchPyComparisonRow {
                category: OVERALL.into(),
                base_avg_pred_t_s: None,
                spec_avg_pred_t_s: Some(1234.567),
                decode_speedup: None,
                base_avg_latency: Some(0.25),
                spec_avg_latency: Some(0.5),
                latency_speedup: Some(0.5),
                accept_rate: None,
            },
        ];
        let want = "\
category  base_avg_pred_t/s  spec_avg_pred_t/s  decode_speedup  base_avg_latency  spec_avg_latency  latency_speedup  accept_rate
--------  -----------------  -----------------  --------------  ----------------  ----------------  ---------------  -----------
coding    40.00              100.00             2.50x           3.000s            1.500s            2.00x            0.7500     
overall   n/a                1234.57            n/a             0.250s            0.500s            0.50x            n/a        
";
        assert_eq!(render_speed_bench_py_comparison(&rows), want);
        assert_eq!(
            render_speed_bench_py_comparison(&[]),
            "No overlapping categories found for comparison.\n"
        );
    }

    #[test]
    fn a_file_gives_accept_rate_cells_per_category_and_says_why_not_the_rest() {
        let mut math = row("math", 2, None, None, None, Some(0.5), None, 0);
        math.draft_n = 10;
        let qa = row("qa", 1, None, None, None, None, None, 1);
        let overall = row(OVERALL, 3, None, None, None, Some(0.5), None, 1);
        let mut out = output();
        out.summary = vec![math, qa, overall];
        let cells = speed_bench_py_cells(&out, MatrixMetric::AcceptRate);
        assert_eq!(cells.keys().collect::<Vec<_>>(), ["math", "qa"]);
        assert_eq!(
            (cells["math"].value, cells["math"].requests),
            (Some(0.5), 2)
        );
        assert_eq!(cells["qa"].value, None);
        assert_eq!(speed_bench_py_matrix_gap(MatrixMetric::AcceptRate), None);
        for metric in [
            MatrixMetric::AcceptLength,
            MatrixMetric::Throughput,
            MatrixMetric::DecodeTps,
            MatrixMetric::Latency,
        ] {
            assert!(speed_bench_py_cells(&out, metric).is_empty());
            assert!(speed_bench_py_matrix_gap(metric).is_some());
        }
    }
}
