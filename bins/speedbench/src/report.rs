//! `speedbench report`: a matrix over run directories (speedbench's or AIPerf's).

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use speedbench_report::{
    AcceptanceMatrix, HtmlReport, HtmlRun, MatrixMetric, ResolvedSource, SourceChoice,
    build_matrix, matrix_columns, render_html, render_speed_bench_py_records,
    render_speed_bench_py_summary, speed_bench_py_matrix_gap,
};
use speedbench_runs::{
    RunData, RunFormat, ShardSet, assign_labels, find_run_dirs, load_run_with, merge_shards,
};

use crate::remote::Localized;
use crate::{CliError, Context, Outcome, fail};

/// Output formats of the matrix.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub(crate) enum Format {
    /// A table on stdout.
    Console,
    /// CSV written to `--output`.
    Csv,
    /// JSON on stdout.
    Json,
    /// A Markdown table on stdout.
    Markdown,
    /// Console table and CSV.
    Both,
    /// A self-contained HTML page with SVG charts, written to `--html-output`.
    Html,
    /// llama.cpp speed_bench.py's per-category summary of each run (per
    /// sample: a conversation's turns summed) on stdout; `--metric` and
    /// `--source` do not apply.
    #[value(name = "speed-bench-py", alias = "llamacpp")]
    SpeedBenchPy,
}

/// Options of `speedbench report`.
#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// Run directories, llama.cpp speed_bench.py --output .json files, or
    /// directories whose immediate children are run directories
    /// (speedbench's records.parquet or AIPerf's profile_export_aiperf.json)
    /// or speed_bench.py files (.json with `summary` and `results`).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// What fills the cells: accept_length, accept_rate, throughput, decode_tps or latency.
    #[arg(long, default_value = "accept_length")]
    pub metric: MatrixMetric,
    /// Where numbers come from: auto (records, then summary, then server), records, summary or server.
    #[arg(long, default_value = "auto")]
    pub source: SourceChoice,
    /// Output format.
    #[arg(long, value_enum, default_value = "both")]
    pub format: Format,
    /// CSV destination for `--format csv|both`.
    #[arg(long, default_value = "speed_bench_report.csv")]
    pub output: PathBuf,
    /// HTML destination for `--format html`.
    #[arg(long, default_value = "speed_bench_report.html")]
    pub html_output: PathBuf,
    /// Row label of one run directory, as DIR=NAME (repeatable). Rows are
    /// labelled by model, and by model plus directory name where two runs
    /// share a model.
    #[arg(long = "label", value_name = "DIR=NAME", value_parser = parse_label)]
    pub labels: Vec<(PathBuf, String)>,
}

fn parse_label(s: &str) -> Result<(PathBuf, String), String> {
    match s.split_once('=') {
        Some((dir, name)) if !dir.is_empty() && !name.trim().is_empty() => {
            Ok((PathBuf::from(dir), name.to_string()))
        }
        _ => Err(format!(
            "{s:?} is not DIR=NAME (a run directory, '=', and a non-empty label)"
        )),
    }
}

/// Runs `speedbench report`; store URLs among the paths are fetched first.
pub(crate) async fn run(mut args: ReportArgs) -> Result<Outcome, CliError> {
    let fetched = crate::remote::localize(&mut args.paths, "a run path").await?;
    // Runs read from a store are named by their URL in every line and in
    // `--label URL=NAME`, never by the temporary copy.
    run_local(args, &fetched)
}

/// `speedbench report` over local paths.
fn run_local(args: ReportArgs, fetched: &Localized) -> Result<Outcome, CliError> {
    let dirs = find_run_dirs(&args.paths).context("finding runs")?;
    eprintln!("Found {} run directories.", dirs.len());
    let (mut runs, unreadable) = load_runs(&args, &dirs, fetched)?;
    for run in &mut runs {
        run.dir = fetched.shown(&run.dir);
    }
    let outcome = report_runs(&args, runs)?;
    // Every run the user gave is in the table or named here: the report
    // goes on without an unreadable run, and says so in its exit code.
    if !unreadable.is_empty() {
        return Err(fail(
            "the report",
            format!(
                "{} of {} runs could not be read and are not in it: {} (errors above)",
                unreadable.len(),
                dirs.len(),
                unreadable.join(", ")
            ),
        ));
    }
    Ok(outcome)
}

/// Loads every run directory, warning about incomplete ones. A run that
/// cannot be read is reported and left out (its name returned), unless no
/// run can be read at all.
fn load_runs(
    args: &ReportArgs,
    dirs: &[PathBuf],
    fetched: &Localized,
) -> Result<(Vec<RunData>, Vec<String>), CliError> {
    // HTML draws histograms and latencies from every record column.
    // So does speed_bench.py's summary (timings, turns, errors).
    let every_column = matches!(args.format, Format::Html | Format::SpeedBenchPy);
    let columns = (!every_column).then(|| matrix_columns(args.metric));
    let mut runs = Vec::new();
    let mut unreadable = Vec::new();
    let mut first_error = None;
    for dir in dirs {
        let shown = fetched.shown(dir);
        let loaded = load_run_with(dir, columns)
            .context(format!("loading {}", shown.display()))
            .map_err(|e| crate::plain(fetched.scrub(&e.to_string())));
        match loaded {
            Ok(run) => {
                warn_about(args, &shown, &run, fetched);
                runs.push(run);
            }
            Err(e) => {
                unreadable.push(shown.display().to_string());
                if first_error.is_none() {
                    first_error = Some(e);
                } else {
                    eprintln!("error: {e} (the report goes on without it)");
                }
            }
        }
    }
    match first_error {
        Some(e) if runs.is_empty() => Err(e),
        Some(e) => {
            eprintln!("error: {e} (the report goes on without it)");
            Ok((runs, unreadable))
        }
        None => Ok((runs, unreadable)),
    }
}

/// What a reader of the report should know about one run.
fn warn_about(args: &ReportArgs, dir: &Path, run: &RunData, fetched: &Localized) {
    for warning in &run.warnings {
        eprintln!("warning: {}", fetched.scrub(warning));
    }
    if !run.status.is_complete() {
        eprintln!(
            "warning: {} is an INCOMPLETE run ({}): {}; its cells cover only the requests that finished",
            dir.display(),
            run.status,
            run.status_reason
                .as_deref()
                .unwrap_or("no outcome recorded")
        );
    }
    if args.metric == MatrixMetric::Throughput && run.category_count() > 1 {
        eprintln!(
            "{}: throughput is a rate over the whole run, so it is not split across its {} categories; \
             the run gives one column (run one category per run for per-category throughput)",
            dir.display(),
            run.category_count()
        );
    }
}

/// The report over loaded runs: merged shards, labels, the matrix in the
/// asked format.
fn report_runs(args: &ReportArgs, runs: Vec<RunData>) -> Result<Outcome, CliError> {
    let (mut runs, shard_sets) = merge_shard_runs(runs)?;
    assign_labels(&mut runs, &args.labels).context("labelling the runs (--label DIR=NAME)")?;
    if args.format == Format::SpeedBenchPy {
        return speed_bench_py_tables(&runs);
    }
    let (matrix, sources) = build_matrix(args.metric, args.source, &runs);
    for (run, source) in runs.iter().zip(&sources) {
        if *source == ResolvedSource::None {
            let why = if run.format == RunFormat::SpeedBenchPy {
                match speed_bench_py_matrix_gap(args.metric) {
                    Some(gap) => format!(" ({gap})"),
                    None => " (a speed_bench.py file gives accept_rate from its summary rows \
                              only, and none of them drafted)"
                        .to_string(),
                }
            } else if args.source == SourceChoice::Server && !args.metric.is_acceptance() {
                " (the server scrape gives acceptance only)".to_string()
            } else {
                String::new()
            };
            eprintln!(
                "warning: {} (row {:?}) has no {} value in {}{why}",
                run.dir.display(),
                run.label,
                args.metric,
                args.source
            );
        } else {
            eprintln!(
                "{} (row {:?}): {} from {source}",
                run.dir.display(),
                run.label,
                args.metric
            );
        }
    }
    print_row_notes(&matrix);
    if matrix
        .rows
        .iter()
        .all(|r| r.cells.iter().all(Option::is_none))
    {
        let hint = if args.metric.is_acceptance() {
            " (was speculation on, and does the server report acceptance per request or on /metrics?)"
        } else {
            ""
        };
        return Err(fail(
            "building the matrix",
            format!(
                "no run gave {} {} value{hint}",
                article(args.metric.as_str()),
                args.metric
            ),
        ));
    }
    match args.format {
        Format::Html => {
            let html = html_page(args, matrix, &runs);
            std::fs::write(&args.html_output, html)
                .context(format!("writing {}", args.html_output.display()))?;
            eprintln!("HTML written to {}", args.html_output.display());
        }
        // Printed above, without a matrix.
        Format::SpeedBenchPy => return speed_bench_py_tables(&runs),
        Format::Console => print!("{}", matrix.to_console()),
        Format::Json => {
            let mut json = matrix.to_json();
            add_shard_sets(&mut json, &runs, &shard_sets);
            println!(
                "{}",
                serde_json::to_string_pretty(&json).unwrap_or_default()
            );
        }
        Format::Markdown => print!("{}", matrix.to_markdown()),
        Format::Csv | Format::Both => {
            if args.format == Format::Both {
                print!("{}", matrix.to_console());
            }
            std::fs::write(&args.output, matrix.to_csv())
                .context(format!("writing {}", args.output.display()))?;
            eprintln!("CSV written to {}", args.output.display());
        }
    }
    Ok(Outcome::Done)
}

/// The page: the requested matrix, the two acceptance matrices from the
/// same sources when they differ from it, and each run's charts.
fn html_page(args: &ReportArgs, matrix: AcceptanceMatrix, runs: &[RunData]) -> String {
    let mut matrices = vec![matrix];
    for metric in [MatrixMetric::AcceptLength, MatrixMetric::AcceptRate] {
        if metric != args.metric {
            let (m, _) = build_matrix(metric, args.source, runs);
            if m.rows.iter().any(|r| r.overall.is_some()) {
                matrices.push(m);
            }
        }
    }
    let html_runs = runs
        .iter()
        .map(|r| HtmlRun {
            label: r.label.clone(),
            dir: r.dir.display().to_string(),
            status: r.status,
            status_reason: r.status_reason.clone(),
            counts: r.counts(),
            records: r.records.as_deref(),
        })
        .collect();
    render_html(&HtmlReport {
        title: "speedbench report".into(),
        matrices,
        runs: html_runs,
    })
}

/// `--format speed-bench-py`: each run's speed_bench.py summary, headed by
/// its label and directory (a speed_bench.py file's summary rows as
/// written); runs without per-request records are named and passed over.
fn speed_bench_py_tables(runs: &[RunData]) -> Result<Outcome, CliError> {
    let mut printed = 0;
    for run in runs {
        if let Some(file) = &run.speed_bench_py {
            if printed > 0 {
                println!();
            }
            println!("{} ({})", run.label, run.dir.display());
            print!("{}", render_speed_bench_py_summary(&file.summary, None));
            printed += 1;
            continue;
        }
        let Some(records) = run.records.as_deref() else {
            eprintln!(
                "warning: {} (row {:?}) has no per-request records, so no speed_bench.py summary",
                run.dir.display(),
                run.label
            );
            continue;
        };
        if printed > 0 {
            println!();
        }
        println!("{} ({})", run.label, run.dir.display());
        print!("{}", render_speed_bench_py_records(records));
        printed += 1;
    }
    if printed == 0 {
        return Err(fail(
            "--format speed-bench-py",
            "no run has per-request records (speedbench's records.parquet or AIPerf's \
             profile_export.jsonl) or is a speed_bench.py file",
        ));
    }
    Ok(Outcome::Done)
}

/// The shards of each sharded run merged into one run (docs/distributed.md),
/// each merge named on stderr: `merged N shards`, or the shards missing or
/// at fault; the sets line up with the runs.
fn merge_shard_runs(runs: Vec<RunData>) -> Result<(Vec<RunData>, Vec<Option<ShardSet>>), CliError> {
    let merged = merge_shards(runs).context("merging the shards of a sharded run")?;
    let mut out = (Vec::new(), Vec::new());
    for m in merged {
        if let Some(set) = &m.shards {
            for note in &set.notes {
                eprintln!("warning: {note}");
            }
            if set.is_complete() {
                eprintln!("note: {}: {}", m.run.dir.display(), set.describe());
            } else {
                eprintln!(
                    "warning: {} is an INCOMPLETE run ({}): {}; its cells cover only the shards and requests that finished",
                    m.run.dir.display(),
                    m.run.status,
                    set.describe()
                );
            }
            if let Some(spread) = set.start_spread_ns() {
                eprintln!(
                    "note: {}: the shards' measured phases started within {:.3} ms of each other",
                    m.run.dir.display(),
                    spread as f64 / 1e6
                );
            }
        }
        out.0.push(m.run);
        out.1.push(m.shards);
    }
    Ok(out)
}

/// Adds `shards` (see [`ShardSet::to_json`]) to the JSON row of each
/// merged run.
fn add_shard_sets(json: &mut serde_json::Value, runs: &[RunData], sets: &[Option<ShardSet>]) {
    let Some(rows) = json.get_mut("rows").and_then(|r| r.as_array_mut()) else {
        return;
    };
    for row in rows {
        let label = row
            .get("label")
            .and_then(|l| l.as_str())
            .map(str::to_string);
        let set = runs
            .iter()
            .zip(sets)
            .find(|(r, _)| Some(&r.label) == label.as_ref())
            .and_then(|(_, s)| s.as_ref());
        if let (Some(set), Some(obj)) = (set, row.as_object_mut()) {
            obj.insert("shards".into(), set.to_json());
        }
    }
}

/// What stderr says of the matrix's rows: runs folded into one, and rows
/// without an `Overall`.
fn print_row_notes(matrix: &AcceptanceMatrix) {
    for row in &matrix.rows {
        if !row.folded.is_empty() {
            let dirs: Vec<String> = row.folded.iter().map(|d| d.display().to_string()).collect();
            eprintln!(
                "note: row {:?} folds {} runs of one model whose columns do not overlap \
                 (AIPerf's rule): {}",
                row.label,
                row.folded.len(),
                dirs.join(", ")
            );
        }
        if let Some(why) = row.run.as_ref().and_then(|r| r.overall_excluded.as_ref()) {
            eprintln!("note: row {:?} has no Overall: {why}", row.label);
        }
    }
}

/// `an` before a vowel sound's letter, else `a` ("an accept_length value").
fn article(word: &str) -> &'static str {
    match word.chars().next() {
        Some('a' | 'e' | 'i' | 'o' | 'u') => "an",
        _ => "a",
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn metric_names_take_their_article() {
        assert_eq!(super::article("accept_length"), "an");
        assert_eq!(super::article("accept_rate"), "an");
        assert_eq!(super::article("latency"), "a");
        assert_eq!(super::article("throughput"), "a");
    }
}
