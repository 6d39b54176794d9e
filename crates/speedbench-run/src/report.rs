//! A report over run directories, as `speedbench report` makes it: find
//! the runs (speedbench's, AIPerf's, speed_bench.py files; store URLs
//! fetched first), load them (an unreadable one is named and left out),
//! merge the shards of sharded runs, label the rows, build the matrix and
//! render it. What a reader should know goes to a [`ReportObserver`];
//! the rendered text comes back in [`ReportObserver::output`].
//!
//! ```
//! use speedbench_run::report::{Lines, ReportFormat, ReportSpec, report};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/aiperf");
//! let mut spec = ReportSpec::new(vec![fixture.into()]);
//! spec.format = ReportFormat::Markdown;
//! let mut lines = Lines::default();
//! report(spec, &mut lines).await?;
//! assert!(lines.output.contains("| Overall"), "{}", lines.output);
//! # Ok(()) }
//! ```

use std::path::{Path, PathBuf};

use speedbench_report::{
    AcceptanceMatrix, CompareOptions, HtmlReport, HtmlRun, MatrixMetric, ResolvedSource,
    SourceChoice, TuneReport, build_matrix, matrix_columns, render_html,
    render_speed_bench_py_records, render_speed_bench_py_summary, speed_bench_py_matrix_gap,
};
use speedbench_runs::{
    RecordsRead, RunData, RunFormat, ShardSet, assign_labels, find_run_dirs, load_run_with,
    merge_shards,
};

use crate::error::RunError;
use crate::error_message;
use crate::fetch::{Localized, localize};

/// How the matrix is rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ReportFormat {
    /// A table on the output.
    Console,
    /// CSV written to [`ReportSpec::output`].
    Csv,
    /// JSON on the output.
    Json,
    /// A Markdown table on the output.
    Markdown,
    /// The console table, and CSV.
    #[default]
    Both,
    /// A self-contained HTML page with SVG charts, written to
    /// [`ReportSpec::html_output`].
    Html,
    /// llama.cpp speed_bench.py's per-category summary of each run (per
    /// sample: a conversation's turns summed); metric and source do not
    /// apply.
    SpeedBenchPy,
}

impl ReportFormat {
    /// Every format by its name, as `--format` takes it.
    pub const NAMES: [&'static str; 7] = [
        "console",
        "csv",
        "json",
        "markdown",
        "both",
        "html",
        "speed-bench-py",
    ];
}

impl std::str::FromStr for ReportFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<ReportFormat, String> {
        Ok(match s {
            "console" => ReportFormat::Console,
            "csv" => ReportFormat::Csv,
            "json" => ReportFormat::Json,
            "markdown" => ReportFormat::Markdown,
            "both" => ReportFormat::Both,
            "html" => ReportFormat::Html,
            "speed-bench-py" | "llamacpp" => ReportFormat::SpeedBenchPy,
            other => {
                return Err(format!(
                    "{other:?} is not a report format ({})",
                    ReportFormat::NAMES.join(", ")
                ));
            }
        })
    }
}

/// What a report is over and how it is rendered: `speedbench report`'s
/// flags.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ReportSpec {
    /// Run directories, parents of run directories, speed_bench.py
    /// `--output` files, or store URLs of any of these.
    pub paths: Vec<PathBuf>,
    /// What fills the cells; `None`: `accept_length`, or `accept_rate`
    /// when every run is a speed_bench.py file (the figure those files
    /// hold).
    pub metric: Option<MatrixMetric>,
    /// Where the numbers come from.
    pub source: SourceChoice,
    /// How the matrix is rendered.
    pub format: ReportFormat,
    /// The CSV file of [`ReportFormat::Csv`] and [`ReportFormat::Both`].
    pub output: PathBuf,
    /// The HTML file of [`ReportFormat::Html`].
    pub html_output: PathBuf,
    /// Row labels of runs, as (directory, label).
    pub labels: Vec<(PathBuf, String)>,
}

impl ReportSpec {
    /// The metric of the cells: the one asked for, else `accept_length`.
    fn metric(&self) -> MatrixMetric {
        self.metric.unwrap_or(MatrixMetric::AcceptLength)
    }

    /// A report over `paths` with `speedbench report`'s defaults.
    pub fn new(paths: Vec<PathBuf>) -> ReportSpec {
        ReportSpec {
            paths,
            metric: None,
            source: SourceChoice::Auto,
            format: ReportFormat::Both,
            output: "speed_bench_report.csv".into(),
            html_output: "speed_bench_report.html".into(),
            labels: Vec::new(),
        }
    }
}

/// What a report tells the program making it. Every method has a default
/// that ignores it except [`output`](ReportObserver::output).
pub trait ReportObserver: Send {
    /// The rendered report (a table, JSON, Markdown), in pieces.
    fn output(&mut self, text: &str);
    /// What was done (runs found, where a row's numbers came from, a file
    /// written).
    fn info(&mut self, _line: &str) {}
    /// Something a reader of the numbers should know.
    fn note(&mut self, _line: &str) {}
    /// Something that may make the numbers wrong or incomplete.
    fn warning(&mut self, _line: &str) {}
    /// A run that could not be read (the report goes on without it).
    fn error(&mut self, _line: &str) {}
}

/// A [`ReportObserver`] that keeps the output and every line.
#[derive(Debug, Default)]
pub struct Lines {
    /// The rendered report.
    pub output: String,
    /// Every other line, prefixed `note: `, `warning: ` or `error: ` as
    /// the command line prints them.
    pub lines: Vec<String>,
}

impl ReportObserver for Lines {
    fn output(&mut self, text: &str) {
        self.output.push_str(text);
    }
    fn info(&mut self, line: &str) {
        self.lines.push(line.to_string());
    }
    fn note(&mut self, line: &str) {
        self.lines.push(format!("note: {line}"));
    }
    fn warning(&mut self, line: &str) {
        self.lines.push(format!("warning: {line}"));
    }
    fn error(&mut self, line: &str) {
        self.lines.push(format!("error: {line}"));
    }
}

/// Makes the report. Every run given is in it or named: an unreadable run
/// is left out and the report fails at the end naming it (after the
/// others are rendered).
pub async fn report(
    mut spec: ReportSpec,
    observer: &mut dyn ReportObserver,
) -> Result<(), RunError> {
    if is_tune_report(&spec) {
        return report_tune(&spec, &spec.paths[0], observer);
    }
    refuse_json_csv(&spec)?;
    // `DIR#ID` (as `compare` and `--label` take it): the sharded run `ID`
    // of the runs in `DIR`.
    let picked = pick_groups(&mut spec.paths);
    let fetched = localize(&mut spec.paths, "a run path").await?;
    for note in &fetched.notes {
        observer.info(note);
    }
    let dirs = find_run_dirs(&spec.paths).map_err(|source| RunError::Runs {
        context: "finding runs".into(),
        source,
    })?;
    observer.info(&match dirs.len() {
        1 => "Found 1 run directory.".to_string(),
        n => format!("Found {n} run directories."),
    });
    let (mut runs, unreadable) = load_runs(&spec, &dirs, &fetched, observer)?;
    for run in &mut runs {
        run.dir = fetched.shown(&run.dir);
    }
    let goodput = goodput_lines(&runs);
    report_runs(&spec, runs, &picked, observer)?;
    if matches!(
        spec.format,
        ReportFormat::Console | ReportFormat::Both | ReportFormat::Markdown
    ) && !goodput.is_empty()
    {
        observer.output(&format!("\n{}", goodput.join("")));
    }
    report_repeated(&spec, observer)?;
    if !unreadable.is_empty() {
        return Err(RunError::unreported(
            "the report",
            format!(
                "{} of {} runs could not be read and are not in it: {} (errors above)",
                unreadable.len(),
                dirs.len(),
                unreadable.join(", ")
            ),
        ));
    }
    Ok(())
}

/// For each run made with SLOs (`--goodput`), its goodput line as its
/// `summary.json` holds it, headed by the run's label.
fn goodput_lines(runs: &[RunData]) -> Vec<String> {
    runs.iter()
        .filter_map(|r| {
            let g: speedbench_metrics::Goodput =
                speedbench_report::summary_field(&r.dir, "goodput")?;
            let rate = g
                .goodput
                .map_or("-".into(), |v| format!("{v:.2} requests/s"));
            Some(format!(
                "{}: goodput {rate}; {}",
                r.label,
                speedbench_report::goodput_line(&g)
            ))
        })
        .collect()
}

/// After the matrix, in the console and Markdown formats: the figures
/// across runs of each path that is a repeated run (`aggregate.json`).
fn report_repeated(spec: &ReportSpec, observer: &mut dyn ReportObserver) -> Result<(), RunError> {
    if !matches!(
        spec.format,
        ReportFormat::Console | ReportFormat::Both | ReportFormat::Markdown
    ) {
        return Ok(());
    }
    for path in &spec.paths {
        let read = crate::repeat::RepeatedRuns::read(path).map_err(|source| RunError::Runs {
            context: "reading a repeated run's aggregate".into(),
            source,
        })?;
        if let Some(runs) = read {
            observer.output(&format!("\n{}:\n", path.display()));
            observer.output(&speedbench_report::render_repeated(&runs.metrics));
            for l in &runs.left_out {
                observer.output(&format!("left out of the figures: {}: {}\n", l.run, l.why));
            }
        }
    }
    Ok(())
}

/// Loads every run directory, warning about incomplete ones. A run that
/// cannot be read is reported and left out (its name returned), unless no
/// run can be read at all.
fn load_runs(
    spec: &ReportSpec,
    dirs: &[PathBuf],
    fetched: &Localized,
    observer: &mut dyn ReportObserver,
) -> Result<(Vec<RunData>, Vec<String>), RunError> {
    // HTML draws histograms and latencies from every record column.
    // So does speed_bench.py's summary (timings, turns, errors). An
    // acceptance matrix needs only each run's digest, folded as its file
    // is read; the other matrices their columns of every record.
    let every_column = matches!(spec.format, ReportFormat::Html | ReportFormat::SpeedBenchPy);
    let read = match matrix_columns(spec.metric()) {
        _ if every_column => RecordsRead::All,
        columns if spec.metric().is_acceptance() => RecordsRead::Digest(columns),
        columns => RecordsRead::Columns(columns),
    };
    let mut runs = Vec::new();
    let mut unreadable = Vec::new();
    let mut first_error = None;
    for dir in dirs {
        let shown = fetched.shown(dir);
        let loaded = load_run_with(dir, read).map_err(|e| {
            RunError::unreported(
                format!("loading {}", shown.display()),
                fetched.scrub(&error_message(&e)),
            )
        });
        match loaded {
            Ok(run) => {
                warn_about(spec, &shown, &run, fetched, observer);
                runs.push(run);
            }
            Err(e) => {
                unreadable.push(shown.display().to_string());
                if first_error.is_none() {
                    first_error = Some(e);
                } else {
                    observer.error(&format!("{e} (the report goes on without it)"));
                }
            }
        }
    }
    match first_error {
        Some(e) if runs.is_empty() => Err(e),
        Some(e) => {
            observer.error(&format!("{e} (the report goes on without it)"));
            Ok((runs, unreadable))
        }
        None => Ok((runs, unreadable)),
    }
}

/// What a reader of the report should know about one run.
fn warn_about(
    spec: &ReportSpec,
    dir: &Path,
    run: &RunData,
    fetched: &Localized,
    observer: &mut dyn ReportObserver,
) {
    for warning in &run.warnings {
        observer.warning(&fetched.scrub(warning));
    }
    if !run.status.is_complete() {
        observer.warning(&format!(
            "{} is an INCOMPLETE run ({}): {}; its cells cover only the requests that finished",
            dir.display(),
            run.status,
            run.status_reason
                .as_deref()
                .unwrap_or("no outcome recorded")
        ));
    }
    if spec.metric() == MatrixMetric::Throughput && run.category_count() > 1 {
        observer.info(&format!(
            "{}: throughput is a rate over the whole run, so it is not split across its {} categories; \
             the run gives one column (run one category per run for per-category throughput)",
            dir.display(),
            run.category_count()
        ));
    }
}

/// The report over loaded runs: merged shards, labels, the matrix in the
/// asked format.
fn report_runs(
    spec: &ReportSpec,
    runs: Vec<RunData>,
    picked: &[(PathBuf, String)],
    observer: &mut dyn ReportObserver,
) -> Result<(), RunError> {
    let (runs, shard_sets) = merge_shard_runs(runs, observer)?;
    let (mut runs, shard_sets) = keep_picked(runs, shard_sets, picked)?;
    let chosen;
    let spec = match what_they_hold(spec, &runs) {
        Some(metric) => {
            observer.info(&format!(
                "every run is a speed_bench.py file: the matrix is {metric}, the figure they \
                 hold (--metric chooses another)"
            ));
            chosen = ReportSpec {
                metric: Some(metric),
                ..spec.clone()
            };
            &chosen
        }
        None => spec,
    };
    assign_labels(&mut runs, &spec.labels).map_err(|source| RunError::Runs {
        context: "labelling the runs (--label DIR=NAME)".into(),
        source,
    })?;
    if spec.format == ReportFormat::SpeedBenchPy {
        return speed_bench_py_tables(&runs, observer);
    }
    let (matrix, sources) = build_matrix(spec.metric(), spec.source, &runs);
    for (run, source) in runs.iter().zip(&sources) {
        tell_source(spec, run, *source, observer);
    }
    row_notes(&matrix, observer);
    if matrix
        .rows
        .iter()
        .all(|r| r.cells.iter().all(Option::is_none))
    {
        return Err(no_value(spec.metric()));
    }
    render(spec, matrix, &runs, &shard_sets, observer)
}

/// Without a metric asked for, over speed_bench.py files only: the one
/// they hold (their summary rows' acceptance rate).
fn what_they_hold(spec: &ReportSpec, runs: &[RunData]) -> Option<MatrixMetric> {
    let all_files = !runs.is_empty() && runs.iter().all(|r| r.format == RunFormat::SpeedBenchPy);
    (spec.metric.is_none() && all_files).then_some(MatrixMetric::AcceptRate)
}

/// Where one run's numbers came from, or why it has none.
fn tell_source(
    spec: &ReportSpec,
    run: &RunData,
    source: ResolvedSource,
    observer: &mut dyn ReportObserver,
) {
    if source != ResolvedSource::None {
        observer.info(&format!(
            "{} (row {:?}): {} from {source}",
            run.dir.display(),
            run.label,
            spec.metric()
        ));
        return;
    }
    let why = if run.format == RunFormat::SpeedBenchPy {
        match speed_bench_py_matrix_gap(spec.metric()) {
            Some(gap) => format!(" ({gap})"),
            None => " (a speed_bench.py file gives accept_rate from its summary rows \
                      only, and none of them drafted)"
                .to_string(),
        }
    } else if spec.source == SourceChoice::Server && !spec.metric().is_acceptance() {
        " (the server scrape gives acceptance only)".to_string()
    } else {
        String::new()
    };
    observer.warning(&format!(
        "{} (row {:?}) has no {} value in {}{why}",
        run.dir.display(),
        run.label,
        spec.metric(),
        spec.source
    ));
}

/// The error of a matrix without a single value.
fn no_value(metric: MatrixMetric) -> RunError {
    let hint = if metric.is_acceptance() {
        " (was speculation on, and does the server report acceptance per request or on /metrics?)"
    } else {
        ""
    };
    RunError::unreported(
        "building the matrix",
        format!(
            "no run gave {} {metric} value{hint}",
            article(metric.as_str())
        ),
    )
}

/// The matrix in the asked format: on the output, or in a file.
fn render(
    spec: &ReportSpec,
    matrix: AcceptanceMatrix,
    runs: &[RunData],
    shard_sets: &[Option<ShardSet>],
    observer: &mut dyn ReportObserver,
) -> Result<(), RunError> {
    let write = |path: &Path, text: String| {
        std::fs::write(path, text).map_err(|source| RunError::Io {
            context: format!("writing {}", path.display()),
            source,
        })
    };
    match spec.format {
        ReportFormat::Html => {
            write(&spec.html_output, html_page(spec, matrix, runs))?;
            observer.info(&format!("HTML written to {}", spec.html_output.display()));
        }
        // Rendered before the matrix is built.
        ReportFormat::SpeedBenchPy => return speed_bench_py_tables(runs, observer),
        ReportFormat::Console => observer.output(&matrix.to_console()),
        ReportFormat::Json => {
            let mut json = matrix.to_json();
            add_shard_sets(&mut json, runs, shard_sets);
            let text = serde_json::to_string_pretty(&json).unwrap_or_default();
            observer.output(&format!("{text}\n"));
        }
        ReportFormat::Markdown => observer.output(&matrix.to_markdown()),
        ReportFormat::Csv | ReportFormat::Both => {
            if spec.format == ReportFormat::Both {
                observer.output(&matrix.to_console());
            }
            write(&spec.output, matrix.to_csv())?;
            observer.info(&written_line(&spec.output));
        }
    }
    Ok(())
}

/// `--output` is AIPerf's CSV here and speed_bench.py's JSON in
/// `profile`: a `.json` name for the CSV is the other one, refused before
/// it is overwritten with CSV.
fn refuse_json_csv(spec: &ReportSpec) -> Result<(), RunError> {
    let writes_csv = matches!(spec.format, ReportFormat::Csv | ReportFormat::Both);
    let json_name = spec
        .output
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"));
    if writes_csv && json_name {
        return Err(RunError::invalid(
            "--output",
            format!(
                "{}: report's --output is the CSV matrix (AIPerf's speed_bench_report.csv); for \
                 JSON use --format json (on stdout), for speed_bench.py's JSON `profile --output`",
                spec.output.display()
            ),
        ));
    }
    Ok(())
}

/// `CSV written to PATH`, the absolute path too when PATH is relative
/// (AIPerf's default, `speed_bench_report.csv`, lands in the working
/// directory, which a user may not expect).
fn written_line(path: &Path) -> String {
    match std::path::absolute(path) {
        Ok(full) if path.is_relative() => format!(
            "CSV written to {} ({}; --output FILE.csv puts it elsewhere)",
            path.display(),
            full.display()
        ),
        _ => format!("CSV written to {}", path.display()),
    }
}

/// The page: the requested matrix, the two acceptance matrices from the
/// same sources when they differ from it, and each run's charts.
fn html_page(spec: &ReportSpec, matrix: AcceptanceMatrix, runs: &[RunData]) -> String {
    let mut matrices = vec![matrix];
    for metric in [MatrixMetric::AcceptLength, MatrixMetric::AcceptRate] {
        if metric != spec.metric() {
            let (m, _) = build_matrix(metric, spec.source, runs);
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
            time_slices: run_slices(r),
        })
        .collect();
    render_html(&HtmlReport {
        title: "speedbench report".into(),
        matrices,
        runs: html_runs,
    })
}

/// The time slices of a run made with `--slice-duration`, from its records.
fn run_slices(run: &RunData) -> Vec<speedbench_metrics::TimeSlice> {
    let duration = run
        .manifest
        .as_ref()
        .and_then(|m| speedbench_metrics::FigureOptions::of_run(m).slice_duration_s);
    match (duration, run.records.as_deref()) {
        (Some(d), Some(records)) => speedbench_metrics::time_slices(records, d),
        _ => Vec::new(),
    }
}

/// speed_bench.py's summary of each run, headed by its label and
/// directory (a speed_bench.py file's summary rows as written); runs
/// without per-request records are named and passed over.
fn speed_bench_py_tables(
    runs: &[RunData],
    observer: &mut dyn ReportObserver,
) -> Result<(), RunError> {
    let mut printed = 0;
    for run in runs {
        let table = match (&run.speed_bench_py, run.records.as_deref()) {
            (Some(file), _) => render_speed_bench_py_summary(&file.summary, None),
            (None, Some(records)) => render_speed_bench_py_records(records),
            (None, None) => {
                observer.warning(&format!(
                    "{} (row {:?}) has no per-request records, so no speed_bench.py summary",
                    run.dir.display(),
                    run.label
                ));
                continue;
            }
        };
        if printed > 0 {
            observer.output("\n");
        }
        observer.output(&format!("{} ({})\n{table}", run.label, run.dir.display()));
        printed += 1;
    }
    if printed == 0 {
        return Err(RunError::unreported(
            "--format speed-bench-py",
            "no run has per-request records (speedbench's records.parquet or AIPerf's \
             profile_export.jsonl) or is a speed_bench.py file",
        ));
    }
    Ok(())
}

/// The shards of each sharded run merged into one run (docs/distributed.md),
/// each merge told: `merged N shards`, or the shards missing or at fault;
/// the sets line up with the runs.
/// Each path written `DIR#ID` becomes `DIR` (once, however many ids it
/// is given with); the `(DIR, ID)` pairs.
fn pick_groups(paths: &mut Vec<PathBuf>) -> Vec<(PathBuf, String)> {
    let mut picked = Vec::new();
    let mut kept: Vec<PathBuf> = Vec::new();
    for path in paths.drain(..) {
        let (dir, id) = speedbench_runs::split_group(&path);
        if let Some(id) = id {
            picked.push((dir.clone(), id));
        }
        if !kept.contains(&dir) {
            kept.push(dir);
        }
    }
    *paths = kept;
    picked
}

/// The runs, less those under a `DIR#ID` directory that are none of the
/// sharded runs picked there; an `ID` no run there has is an error naming
/// it.
fn keep_picked(
    runs: Vec<RunData>,
    shard_sets: Vec<Option<ShardSet>>,
    picked: &[(PathBuf, String)],
) -> Result<(Vec<RunData>, Vec<Option<ShardSet>>), RunError> {
    for (dir, id) in picked {
        let found = runs
            .iter()
            .any(|r| r.dir.starts_with(dir) && r.run_group.as_ref() == Some(id));
        if !found {
            return Err(RunError::invalid(
                format!("{}#{id}", dir.display()),
                format!("no sharded run {id:?} among the runs in {}", dir.display()),
            ));
        }
    }
    let kept = |run: &RunData| {
        let mut under = picked
            .iter()
            .filter(|(dir, _)| run.dir.starts_with(dir))
            .peekable();
        under.peek().is_none() || under.any(|(_, id)| run.run_group.as_ref() == Some(id))
    };
    Ok(runs
        .into_iter()
        .zip(shard_sets)
        .filter(|(run, _)| kept(run))
        .unzip())
}

fn merge_shard_runs(
    runs: Vec<RunData>,
    observer: &mut dyn ReportObserver,
) -> Result<(Vec<RunData>, Vec<Option<ShardSet>>), RunError> {
    let merged = merge_shards(runs).map_err(|source| RunError::Runs {
        context: "merging the shards of a sharded run".into(),
        source,
    })?;
    let mut out = (Vec::new(), Vec::new());
    for m in merged {
        if let Some(set) = &m.shards {
            tell_shards(&m.run, set, observer);
        }
        out.0.push(m.run);
        out.1.push(m.shards);
    }
    Ok(out)
}

/// What a merge of shards found.
fn tell_shards(run: &RunData, set: &ShardSet, observer: &mut dyn ReportObserver) {
    for note in &set.notes {
        observer.warning(note);
    }
    if set.is_complete() {
        observer.note(&format!("{}: {}", run.dir.display(), set.describe()));
    } else {
        observer.warning(&format!(
            "{} is an INCOMPLETE run ({}): {}; its cells cover only the shards and requests that finished",
            run.dir.display(),
            run.status,
            set.describe()
        ));
    }
    if let Some(spread) = set.start_spread_ns() {
        observer.note(&format!(
            "{}: the shards' measured phases started within {:.3} ms of each other",
            run.dir.display(),
            spread as f64 / 1e6
        ));
    }
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

/// What the matrix's rows call for: runs folded into one, and rows
/// without an `Overall`.
fn row_notes(matrix: &AcceptanceMatrix, observer: &mut dyn ReportObserver) {
    for row in &matrix.rows {
        if !row.folded.is_empty() {
            let dirs: Vec<String> = row.folded.iter().map(|d| d.display().to_string()).collect();
            observer.note(&format!(
                "row {:?} folds {} runs of one model whose columns do not overlap \
                 (AIPerf's rule): {}",
                row.label,
                row.folded.len(),
                dirs.join(", ")
            ));
        }
        if let Some(why) = row.run.as_ref().and_then(|r| r.overall_excluded.as_ref()) {
            observer.note(&format!("row {:?} has no Overall: {why}", row.label));
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

/// Whether `spec` is a report over one tune's directory.
fn is_tune_report(spec: &ReportSpec) -> bool {
    matches!(spec.paths.as_slice(), [dir] if dir.join(speedbench_record::TuneManifest::FILE_NAME).is_file())
}

/// Renders the answer of the tune in `dir` as `spec.format` asks: console
/// (`both` too: a tune has no CSV), Markdown, JSON, or HTML to
/// `spec.html_output`.
fn report_tune(
    spec: &ReportSpec,
    dir: &Path,
    observer: &mut dyn ReportObserver,
) -> Result<(), RunError> {
    let report = TuneReport::from_dir(dir, &CompareOptions::default()).map_err(|source| {
        RunError::Report {
            context: format!("the tune in {}", dir.display()),
            source,
        }
    })?;
    match spec.format {
        ReportFormat::Console | ReportFormat::Both => observer.output(&report.to_console()),
        ReportFormat::Markdown => observer.output(&report.to_markdown()),
        ReportFormat::Json => {
            let text = serde_json::to_string_pretty(&report.to_json()).unwrap_or_default();
            observer.output(&format!("{text}\n"));
        }
        ReportFormat::Html => {
            std::fs::write(&spec.html_output, report.to_html()).map_err(|source| RunError::Io {
                context: format!("writing {}", spec.html_output.display()),
                source,
            })?;
            observer.info(&format!("HTML written to {}", spec.html_output.display()));
        }
        ReportFormat::Csv | ReportFormat::SpeedBenchPy => {
            return Err(RunError::invalid(
                "--format",
                "a tune's report is console, markdown, json or html",
            ));
        }
    }
    Ok(())
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
