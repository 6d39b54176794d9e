//! A baseline run against a speculative run, as `speedbench compare`
//! makes it: each side fetched (a store URL), loaded (a directory of one
//! sharded run's shards merged), checked against the other (a mismatch is
//! refused unless forced), compared and rendered. What a reader should
//! know goes to a [`ReportObserver`], the rendered text to its
//! [`output`](ReportObserver::output).
//!
//! ```no_run
//! use speedbench_run::compare::{CompareSpec, compare_runs};
//! use speedbench_run::report::Lines;
//!
//! # async fn f() -> Result<(), speedbench_run::RunError> {
//! let spec = CompareSpec::new("runs/baseline".into(), "runs/eagle3".into());
//! let mut lines = Lines::default();
//! compare_runs(spec, &mut lines).await?;
//! print!("{}", lines.output);
//! # Ok(()) }
//! # let _ = f;
//! ```

use std::path::{Path, PathBuf};

use speedbench_metrics::{AcrossRuns, FigureOptions, GoodputComparison, Slos};

use speedbench_client::scrape::{EnergyComparison, GpuTelemetry};

use crate::repeat::RepeatedRuns;
use speedbench_report::{
    CompareHtml, CompareOptions, CompareRun, MAX_BOOTSTRAP_SAMPLES, RunCheck, check_runs_match,
    check_speed_bench_py_match, compare, compare_speed_bench_py, load_compare_run,
    render_compare_html, run_gpu_telemetry,
};
use speedbench_runs::RunStatus;

use crate::error::RunError;
use crate::fetch::localize;
use crate::report::ReportObserver;

/// How a comparison is rendered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CompareFormat {
    /// A table on the output.
    #[default]
    Console,
    /// JSON on the output.
    Json,
    /// CSV written to [`CompareSpec::output`].
    Csv,
    /// A Markdown table on the output.
    Markdown,
    /// The console table, and CSV.
    Both,
    /// A self-contained HTML page with SVG charts, written to
    /// [`CompareSpec::html_output`].
    Html,
}

impl CompareFormat {
    /// Every format by its name, as `--format` takes it.
    pub const NAMES: [&'static str; 6] = ["console", "json", "csv", "markdown", "both", "html"];
}

impl std::str::FromStr for CompareFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<CompareFormat, String> {
        let all = [
            CompareFormat::Console,
            CompareFormat::Json,
            CompareFormat::Csv,
            CompareFormat::Markdown,
            CompareFormat::Both,
            CompareFormat::Html,
        ];
        CompareFormat::NAMES
            .iter()
            .zip(all)
            .find(|(name, _)| **name == s)
            .map(|(_, f)| f)
            .ok_or_else(|| {
                format!(
                    "{s:?} is not a comparison format ({})",
                    CompareFormat::NAMES.join(", ")
                )
            })
    }
}

/// The two runs and how they are compared: `speedbench compare`'s flags.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CompareSpec {
    /// The baseline (speculation off): a run directory, a directory of one
    /// sharded run, a speed_bench.py `--output` file, or a store URL.
    pub baseline: PathBuf,
    /// The speculative run, likewise.
    pub speculative: PathBuf,
    /// Bootstrap resamples per interval (0: none; at most
    /// [`MAX_BOOTSTRAP_SAMPLES`]).
    pub bootstrap: usize,
    /// Confidence level of the intervals, strictly between 0 and 1.
    pub confidence: f64,
    /// Seed of the resampling.
    pub seed: u64,
    /// How the comparison is rendered.
    pub format: CompareFormat,
    /// The CSV file of [`CompareFormat::Csv`] and [`CompareFormat::Both`].
    pub output: PathBuf,
    /// The HTML file of [`CompareFormat::Html`].
    pub html_output: PathBuf,
    /// Compare runs that differ in dataset, requests, categories, prompts,
    /// `--osl` or sampling fields (each difference is told).
    pub force: bool,
    /// What a mean is taken over; `None` chooses ([`CompareUnit::choose`]).
    pub unit: Option<CompareUnit>,
    /// `--goodput`: hold both runs to these SLOs; when empty, to the SLOs
    /// the runs were made with (`run.json`), if any.
    pub goodput: speedbench_metrics::Slos,
}

/// What the comparison's means are taken over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareUnit {
    /// Each request (a multi-turn conversation's turns each one): the
    /// bootstrap intervals and the byte-identical check come with it.
    Request,
    /// Each sample, a multi-turn sample's turns summed, from
    /// server-reported decode rates: speed_bench_compare.py's figures.
    Sample,
}

impl CompareUnit {
    /// The names `--unit` takes.
    pub const NAMES: [&str; 2] = ["request", "sample"];

    /// The unit a comparison uses when none is asked for: per sample when
    /// a side is a speed_bench.py file (it holds nothing else) or both
    /// runs were made in speed_bench.py's vocabulary (`--bench`), so a
    /// speed_bench.py user gets the numbers speed_bench_compare.py gives;
    /// per request otherwise.
    pub fn choose(base: &CompareRun, spec: &CompareRun) -> CompareUnit {
        let bench = |r: &CompareRun| {
            r.manifest
                .as_ref()
                .and_then(|m| m.config.get("bench"))
                .is_some_and(|b| !b.is_null())
        };
        let file = base.is_speed_bench_py_file() || spec.is_speed_bench_py_file();
        if file || (bench(base) && bench(spec)) {
            CompareUnit::Sample
        } else {
            CompareUnit::Request
        }
    }
}

impl std::str::FromStr for CompareUnit {
    type Err = String;

    fn from_str(s: &str) -> Result<CompareUnit, String> {
        match s {
            "request" => Ok(CompareUnit::Request),
            "sample" => Ok(CompareUnit::Sample),
            other => Err(format!("unknown unit {other:?}: request or sample")),
        }
    }
}

impl CompareSpec {
    /// `baseline` against `speculative` with `speedbench compare`'s
    /// defaults.
    pub fn new(baseline: PathBuf, speculative: PathBuf) -> CompareSpec {
        CompareSpec {
            baseline,
            speculative,
            bootstrap: 1000,
            confidence: 0.95,
            seed: 0,
            format: CompareFormat::Console,
            output: "speed_bench_compare.csv".into(),
            html_output: "speed_bench_compare.html".into(),
            force: false,
            unit: None,
            goodput: Default::default(),
        }
    }

    /// The interval options, or the field that cannot be used.
    fn options(&self) -> Result<CompareOptions, RunError> {
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(RunError::invalid(
                "--confidence",
                "must lie strictly between 0 and 1",
            ));
        }
        if self.bootstrap > MAX_BOOTSTRAP_SAMPLES {
            return Err(RunError::invalid(
                "--bootstrap",
                format!(
                    "{} resamples asked for; at most 1,000,000 are allowed (10,000 is plenty for \
                     stable intervals)",
                    self.bootstrap
                ),
            ));
        }
        Ok(CompareOptions {
            bootstrap_samples: self.bootstrap,
            confidence: self.confidence,
            seed: self.seed,
        })
    }
}

/// Compares the two runs of `spec`.
pub async fn compare_runs(
    mut spec: CompareSpec,
    observer: &mut dyn ReportObserver,
) -> Result<(), RunError> {
    let mut sides = [spec.baseline.clone(), spec.speculative.clone()];
    // Holds the fetched copies until the comparison is done.
    let fetched = localize(&mut sides, "--baseline/--speculative").await?;
    for note in &fetched.notes {
        observer.info(note);
    }
    [spec.baseline, spec.speculative] = sides;
    let options = spec.options()?;
    let base = load_side(&spec.baseline, "baseline", "--baseline", observer)?;
    let spec_run = load_side(&spec.speculative, "speculative", "--speculative", observer)?;
    tell_repetitions(&base, "baseline", observer);
    tell_repetitions(&spec_run, "speculative", observer);
    let file_side = base.is_speed_bench_py_file() || spec_run.is_speed_bench_py_file();
    match spec.unit {
        Some(CompareUnit::Request) if file_side => {
            return Err(RunError::invalid(
                "--unit request",
                "a speed_bench.py file holds per-sample figures only; compare per sample (the \
                 default with a file) or give two run directories",
            ));
        }
        Some(CompareUnit::Sample) => return speed_bench_py(&spec, &base, &spec_run, observer),
        Some(CompareUnit::Request) => {}
        None if CompareUnit::choose(&base, &spec_run) == CompareUnit::Sample => {
            return speed_bench_py(&spec, &base, &spec_run, observer);
        }
        None => {}
    }
    observer.note(
        "means per request (each turn of a conversation one request); --unit sample gives \
         speed_bench_compare.py's per-sample means",
    );
    let check = check_runs_match(&base, &spec_run);
    refuse_mismatch(&spec, &check, observer)?;
    warn_unresolved_timings(&[("baseline", &base), ("speculative", &spec_run)], observer);
    let mut comparison =
        compare(&base.records, &spec_run.records, &options).map_err(|source| RunError::Report {
            context: "comparing".into(),
            source,
        })?;
    add_run_figures(&spec, (&base, &spec_run), &mut comparison, observer);
    observer.info(&format!(
        "Comparison: baseline={} speculative={}",
        spec.baseline.display(),
        spec.speculative.display()
    ));
    emit(&spec, &comparison, &check, observer)
}

/// What the two runs add to the per-request comparison: goodput against
/// the same SLOs, energy per output token, and with repeated runs the
/// intervals across runs (a warning when only one side repeated).
fn add_run_figures(
    spec: &CompareSpec,
    (base, spec_run): (&CompareRun, &CompareRun),
    comparison: &mut speedbench_report::Comparison,
    observer: &mut dyn ReportObserver,
) {
    let slos = comparison_slos(spec, base, spec_run, observer);
    comparison.goodput = GoodputComparison::of(&base.records, &spec_run.records, &slos);
    comparison.energy = EnergyComparison::of(&gpu_of(base), &gpu_of(spec_run));
    let (base_runs, spec_runs) = (runs_of(base), runs_of(spec_run));
    comparison.across_runs = AcrossRuns::of(&base_runs, &spec_runs, &slos, spec.confidence);
    comparison.add_latency_across_runs(&base_runs, &spec_runs);
    if comparison.across_runs.is_none() && base_runs.len().max(spec_runs.len()) > 1 {
        observer.warning(&format!(
            "only one side has repeated runs (baseline {}, speculative {}): the intervals are \
             over requests, blind to run-to-run variation; repeat both (--num-profile-runs)",
            base_runs.len(),
            spec_runs.len()
        ));
    }
}

/// The SLOs both runs are held to: `--goodput`'s, else those the runs
/// were made with (the baseline's when the two differ, said).
fn comparison_slos(
    spec: &CompareSpec,
    base: &CompareRun,
    spec_run: &CompareRun,
    observer: &mut dyn ReportObserver,
) -> Slos {
    if !spec.goodput.is_empty() {
        return spec.goodput.clone();
    }
    let made_with = |r: &CompareRun| r.manifest.as_ref().map(|m| FigureOptions::of_run(m).slos);
    match (
        made_with(base).unwrap_or_default(),
        made_with(spec_run).unwrap_or_default(),
    ) {
        (b, s) if b.is_empty() => s,
        (b, s) if s.is_empty() || b == s => b,
        (b, s) => {
            observer.warning(&format!(
                "the runs were made with different SLOs (baseline: {b}; speculative: {s}): \
                 both are held to the baseline's (--goodput chooses)"
            ));
            b
        }
    }
}

/// The comparison in the format asked for: on the observer's output, or
/// written to `--output` / `--html-output`.
fn emit(
    spec: &CompareSpec,
    comparison: &speedbench_report::Comparison,
    check: &RunCheck,
    observer: &mut dyn ReportObserver,
) -> Result<(), RunError> {
    let json = || serde_json::to_string_pretty(&comparison.to_json()).unwrap_or_default();
    match spec.format {
        CompareFormat::Console => observer.output(&comparison.to_console()),
        CompareFormat::Json => observer.output(&format!("{}\n", json())),
        CompareFormat::Markdown => observer.output(&comparison.to_markdown()),
        CompareFormat::Csv | CompareFormat::Both => {
            if spec.format == CompareFormat::Both {
                observer.output(&comparison.to_console());
            }
            write(&spec.output, &comparison.to_csv(), "CSV", observer)?;
        }
        CompareFormat::Html => {
            let page = render_compare_html(&CompareHtml {
                title: "speedbench compare".into(),
                baseline: spec.baseline.display().to_string(),
                speculative: spec.speculative.display().to_string(),
                bootstrap_samples: spec.bootstrap,
                seed: spec.seed,
                warnings: page_warnings(check),
                comparison,
            });
            write(&spec.html_output, &page, "HTML", observer)?;
        }
    }
    Ok(())
}

/// What the page repeats of what the observer was told about the runs.
fn page_warnings(check: &RunCheck) -> Vec<String> {
    check
        .warnings
        .iter()
        .cloned()
        .chain(
            check
                .mismatches
                .iter()
                .map(|m| format!("the runs differ (--force): {m}")),
        )
        .collect()
}

/// Writes a rendered file and says so.
fn write(
    path: &Path,
    text: &str,
    what: &str,
    observer: &mut dyn ReportObserver,
) -> Result<(), RunError> {
    std::fs::write(path, text).map_err(|source| RunError::Io {
        context: format!("writing {}", path.display()),
        source,
    })?;
    observer.info(&format!("{what} written to {}", path.display()));
    Ok(())
}

/// Tells `check`'s warnings; refuses its mismatches unless forced.
fn refuse_mismatch(
    spec: &CompareSpec,
    check: &RunCheck,
    observer: &mut dyn ReportObserver,
) -> Result<(), RunError> {
    for w in &check.warnings {
        observer.warning(w);
    }
    let Some(first) = check.mismatches.first() else {
        return Ok(());
    };
    if !spec.force {
        let more = match check.mismatches.len() {
            1 => String::new(),
            n => format!(" (and {} more difference(s))", n - 1),
        };
        return Err(RunError::unreported(
            "the runs do not match",
            format!(
                "{first}{more}; compare runs of the same dataset, categories, --osl and \
                 sampling settings, or pass --force to compare them anyway"
            ),
        ));
    }
    for m in &check.mismatches {
        observer.warning(&format!("the runs differ (--force): {m}"));
    }
    Ok(())
}

/// The timing warnings `profile` gave each run (decode windows or a whole
/// run shorter than the client can time), said again: a speedup over
/// such figures measures the clock, not the server.
fn warn_unresolved_timings(sides: &[(&str, &CompareRun)], observer: &mut dyn ReportObserver) {
    for (role, run) in sides {
        for warning in speedbench_metrics::RunMetrics::timing_warnings_of(&run.records) {
            observer.warning(&format!(
                "the {role} run {}: {warning}; speedups over these figures are not the server's",
                run.dir.display()
            ));
        }
    }
}

/// A comparison where a side is a speed_bench.py file: speed_bench_compare.py's
/// table over both sides' speed_bench.py summaries (see
/// docs/speed-bench-py.md).
fn speed_bench_py(
    spec: &CompareSpec,
    base: &CompareRun,
    spec_run: &CompareRun,
    observer: &mut dyn ReportObserver,
) -> Result<(), RunError> {
    refuse_mismatch(spec, &check_speed_bench_py_match(base, spec_run), observer)?;
    warn_unresolved_timings(&[("baseline", base), ("speculative", spec_run)], observer);
    let files: Vec<String> = [base, spec_run]
        .iter()
        .filter(|r| r.is_speed_bench_py_file())
        .map(|r| r.dir.display().to_string())
        .collect();
    let why = match files.len() {
        0 if spec.unit == Some(CompareUnit::Sample) => "--unit sample".to_string(),
        0 => "both runs used --bench, speed_bench.py's vocabulary".to_string(),
        1 => format!(
            "{} is a speed_bench.py file, no per-request records",
            files[0]
        ),
        _ => format!(
            "{} are speed_bench.py files, no per-request records",
            files.join(" and ")
        ),
    };
    let request_instead = if files.is_empty() {
        "--unit request gives per-request means with the byte-identical check and bootstrap \
         intervals"
    } else {
        "the byte-identical check and the bootstrap intervals need two run directories"
    };
    observer.note(&format!(
        "means per sample ({why}): comparing as speed_bench_compare.py does, from \
         server-reported decode rates (avg_pred_t/s) and client latency summed over each \
         sample's turns; {request_instead}"
    ));
    let comparison = compare_speed_bench_py(base, spec_run);
    match spec.format {
        CompareFormat::Console => observer.output(&comparison.to_console()),
        CompareFormat::Json => {
            observer.info(&format!(
                "Comparison: baseline={} speculative={}",
                spec.baseline.display(),
                spec.speculative.display()
            ));
            let json = serde_json::to_string_pretty(&comparison.to_json()).unwrap_or_default();
            observer.output(&format!("{json}\n"));
        }
        other => {
            return Err(RunError::invalid(
                "--format",
                format!(
                    "{other:?} is not available when a side is a speed_bench.py file; use \
                     console or json"
                ),
            ));
        }
    }
    Ok(())
}

/// One side: a run directory, or a directory of one sharded run's shards
/// merged into one run over their pooled records (docs/distributed.md;
/// a missing or failed shard is told).
fn load_side(
    dir: &Path,
    role: &str,
    flag: &str,
    observer: &mut dyn ReportObserver,
) -> Result<CompareRun, RunError> {
    let report_error = |source| RunError::Report {
        context: flag.to_string(),
        source,
    };
    let merged = speedbench_runs::load_shard_group(dir).map_err(|source| RunError::Runs {
        context: flag.to_string(),
        source,
    })?;
    let Some((run, set)) = merged.and_then(|m| Some((m.run, m.shards?))) else {
        return load_compare_run(dir, role).map_err(report_error);
    };
    for w in &run.warnings {
        observer.warning(w);
    }
    if set.is_complete() {
        observer.note(&format!("the {role} {}: {}", dir.display(), set.describe()));
    } else {
        observer.warning(&format!(
            "the {role} {} is an INCOMPLETE run: {}",
            dir.display(),
            set.describe()
        ));
    }
    let records = run.records.ok_or_else(|| {
        RunError::unreported(
            flag,
            format!("no shard of {} has readable records", dir.display()),
        )
    })?;
    Ok(CompareRun {
        dir: dir.to_path_buf(),
        records,
        live: run.status == RunStatus::Running,
        manifest: run.manifest,
        model: run.model,
        speed_bench_py: None,
        repetitions: Vec::new(),
    })
}

/// Says how many repeated runs a side pooled, and which were left out.
fn tell_repetitions(side: &CompareRun, role: &str, observer: &mut dyn ReportObserver) {
    if side.repetitions.is_empty() {
        return;
    }
    let left_out = match RepeatedRuns::read(&side.dir) {
        Ok(Some(r)) if !r.left_out.is_empty() => format!(
            " ({} left out: {})",
            r.left_out.len(),
            r.left_out
                .iter()
                .map(|l| format!("{}: {}", l.run, l.why))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        _ => String::new(),
    };
    observer.note(&format!(
        "the {role} {}: {} repeated runs pooled{left_out}",
        side.dir.display(),
        side.repetitions.len()
    ));
}

/// The GPU figures of a side's run, or of each of its repeated runs;
/// empty when any lacks them.
fn gpu_of(side: &CompareRun) -> Vec<GpuTelemetry> {
    speedbench_runs::runs_of(&side.dir)
        .iter()
        .map(|d| run_gpu_telemetry(d))
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default()
}

/// Each repeated run's records, or the one run's.
fn runs_of(side: &CompareRun) -> Vec<&[speedbench_record::RequestRecord]> {
    if side.repetitions.is_empty() {
        return vec![&side.records];
    }
    side.repetitions
        .iter()
        .map(|r| &side.records[r.clone()])
        .collect()
}

#[cfg(test)]
mod unit_tests {
    use super::*;
    use speedbench_record::RunManifest;

    fn run(bench: Option<&str>) -> CompareRun {
        CompareRun {
            dir: "d".into(),
            records: Vec::new(),
            manifest: Some(RunManifest {
                config: serde_json::json!({ "bench": bench }),
                ..Default::default()
            }),
            live: false,
            model: "m".into(),
            speed_bench_py: None,
            repetitions: Vec::new(),
        }
    }

    #[test]
    fn speed_bench_py_users_get_its_unit_and_everyone_else_per_request() {
        let (bench, plain) = (run(Some("qualitative")), run(None));
        assert_eq!(CompareUnit::choose(&bench, &bench), CompareUnit::Sample);
        assert_eq!(CompareUnit::choose(&bench, &plain), CompareUnit::Request);
        assert_eq!(CompareUnit::choose(&plain, &plain), CompareUnit::Request);
    }
}
