//! `speedbench compare`: a baseline run against a speculative run.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use speedbench_report::{
    CompareHtml, CompareOptions, CompareRun, MAX_BOOTSTRAP_SAMPLES, RunCheck, check_runs_match,
    check_speed_bench_py_match, compare, compare_speed_bench_py, load_compare_run,
    render_compare_html,
};

use crate::{CliError, Context, Outcome, fail};

/// Output formats of a comparison.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub(crate) enum CompareFormat {
    /// A table on stdout.
    Console,
    /// JSON on stdout.
    Json,
    /// CSV written to `--output`.
    Csv,
    /// A Markdown table on stdout.
    Markdown,
    /// Console table and CSV.
    Both,
    /// A self-contained HTML page with SVG charts, written to `--html-output`.
    Html,
}

/// Options of `speedbench compare`.
#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
    /// Run directory of the baseline (speculation off), or a llama.cpp
    /// speed_bench.py --output .json file.
    #[arg(long)]
    pub baseline: PathBuf,
    /// Run directory of the speculative run (same dataset, categories and
    /// sampling), or a speed_bench.py --output .json file.
    #[arg(long)]
    pub speculative: PathBuf,
    /// Bootstrap resamples per confidence interval (0 turns them off; at most 1,000,000).
    #[arg(long, default_value_t = 1000)]
    pub bootstrap: usize,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95)]
    pub confidence: f64,
    /// Seed of the resampling.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output format.
    #[arg(long, value_enum, default_value = "console")]
    pub format: CompareFormat,
    /// CSV destination for `--format csv|both`.
    #[arg(long, default_value = "speed_bench_compare.csv")]
    pub output: PathBuf,
    /// HTML destination for `--format html`.
    #[arg(long, default_value = "speed_bench_compare.html")]
    pub html_output: PathBuf,
    /// Compare even when the runs differ in dataset, requests, categories,
    /// prompts, --osl or sampling fields (each difference is printed).
    #[arg(long)]
    pub force: bool,
}

/// Runs `speedbench compare`; a side given as a store URL is fetched first.
pub(crate) async fn run(mut args: CompareArgs) -> Result<Outcome, CliError> {
    let mut sides = [args.baseline.clone(), args.speculative.clone()];
    let fetched = speedbench_run::fetch::localize(&mut sides, "--baseline/--speculative").await?;
    for note in &fetched.notes {
        eprintln!("{note}");
    }
    [args.baseline, args.speculative] = sides;
    run_local(args)
}

/// `speedbench compare` over local paths.
fn run_local(args: CompareArgs) -> Result<Outcome, CliError> {
    if !(args.confidence > 0.0 && args.confidence < 1.0) {
        return Err(fail("--confidence", "must lie strictly between 0 and 1"));
    }
    if args.bootstrap > MAX_BOOTSTRAP_SAMPLES {
        return Err(fail(
            "--bootstrap",
            format!(
                "{} resamples asked for; at most 1,000,000 are allowed (10,000 is plenty for \
                 stable intervals)",
                args.bootstrap
            ),
        ));
    }
    let base = load_side(&args.baseline, "baseline", "--baseline")?;
    let spec = load_side(&args.speculative, "speculative", "--speculative")?;
    if base.is_speed_bench_py_file() || spec.is_speed_bench_py_file() {
        return speed_bench_py(&args, &base, &spec);
    }
    let check = check_runs_match(&base, &spec);
    refuse_mismatch(&args, &check)?;
    let options = CompareOptions {
        bootstrap_samples: args.bootstrap,
        confidence: args.confidence,
        seed: args.seed,
    };
    let comparison = compare(&base.records, &spec.records, &options).context("comparing")?;
    eprintln!(
        "Comparison: baseline={} speculative={}",
        args.baseline.display(),
        args.speculative.display()
    );
    match args.format {
        CompareFormat::Console => print!("{}", comparison.to_console()),
        CompareFormat::Json => println!(
            "{}",
            serde_json::to_string_pretty(&comparison.to_json()).unwrap_or_default()
        ),
        CompareFormat::Markdown => print!("{}", comparison.to_markdown()),
        CompareFormat::Csv | CompareFormat::Both => {
            if args.format == CompareFormat::Both {
                print!("{}", comparison.to_console());
            }
            write(&args.output, &comparison.to_csv(), "CSV")?;
        }
        CompareFormat::Html => {
            // The page repeats what stderr said about the runs.
            let warnings = check
                .warnings
                .iter()
                .cloned()
                .chain(
                    check
                        .mismatches
                        .iter()
                        .map(|m| format!("the runs differ (--force): {m}")),
                )
                .collect();
            let page = render_compare_html(&CompareHtml {
                title: "speedbench compare".into(),
                baseline: args.baseline.display().to_string(),
                speculative: args.speculative.display().to_string(),
                bootstrap_samples: args.bootstrap,
                seed: args.seed,
                warnings,
                comparison: &comparison,
            });
            write(&args.html_output, &page, "HTML")?;
        }
    }
    Ok(Outcome::Done)
}

fn write(path: &Path, text: &str, what: &str) -> Result<(), CliError> {
    std::fs::write(path, text).context(format!("writing {}", path.display()))?;
    eprintln!("{what} written to {}", path.display());
    Ok(())
}

/// Prints `check`'s warnings; refuses its mismatches unless `--force`.
fn refuse_mismatch(args: &CompareArgs, check: &RunCheck) -> Result<(), CliError> {
    for w in &check.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(first) = check.mismatches.first() {
        if !args.force {
            let more = match check.mismatches.len() {
                1 => String::new(),
                n => format!(" (and {} more difference(s))", n - 1),
            };
            return Err(fail(
                "the runs do not match",
                format!(
                    "{first}{more}; compare runs of the same dataset, categories, --osl and \
                     sampling settings, or pass --force to compare them anyway"
                ),
            ));
        }
        for m in &check.mismatches {
            eprintln!("warning: the runs differ (--force): {m}");
        }
    }
    Ok(())
}

/// A comparison where a side is a speed_bench.py file: speed_bench_compare.py's
/// table over both sides' speed_bench.py summaries (see
/// docs/speed-bench-py.md).
fn speed_bench_py(
    args: &CompareArgs,
    base: &CompareRun,
    spec: &CompareRun,
) -> Result<Outcome, CliError> {
    refuse_mismatch(args, &check_speed_bench_py_match(base, spec))?;
    let files: Vec<String> = [base, spec]
        .iter()
        .filter(|r| r.is_speed_bench_py_file())
        .map(|r| r.dir.display().to_string())
        .collect();
    let is = if files.len() == 1 {
        "is a speed_bench.py file"
    } else {
        "are speed_bench.py files"
    };
    eprintln!(
        "note: {} {is} (no per-request records): comparing as \
         speed_bench_compare.py does, per sample, from server-reported decode rates \
         (avg_pred_t/s) and client latency summed over each sample's turns; the byte-identical \
         check and the bootstrap intervals need two run directories",
        files.join(" and ")
    );
    let comparison = compare_speed_bench_py(base, spec);
    match args.format {
        CompareFormat::Console => print!("{}", comparison.to_console()),
        CompareFormat::Json => {
            eprintln!(
                "Comparison: baseline={} speculative={}",
                args.baseline.display(),
                args.speculative.display()
            );
            println!(
                "{}",
                serde_json::to_string_pretty(&comparison.to_json()).unwrap_or_default()
            )
        }
        #[allow(unreachable_patterns)]
        other => {
            return Err(fail(
                "--format",
                format!(
                    "{other:?} is not available when a side is a speed_bench.py file; use \
                     console or json"
                ),
            ));
        }
    }
    Ok(Outcome::Done)
}

/// One side: a run directory, or a directory of one sharded run's shards
/// merged into one run over their pooled records (docs/distributed.md;
/// a missing or failed shard is named on stderr).
fn load_side(dir: &std::path::Path, role: &str, flag: &str) -> Result<CompareRun, CliError> {
    let merged = speedbench_runs::load_shard_group(dir).context(flag)?;
    let Some(merged) = merged else {
        return load_compare_run(dir, role).context(flag);
    };
    let Some(set) = merged.shards else {
        return load_compare_run(dir, role).context(flag);
    };
    for w in &merged.run.warnings {
        eprintln!("warning: {w}");
    }
    if set.is_complete() {
        eprintln!("note: the {role} {}: {}", dir.display(), set.describe());
    } else {
        eprintln!(
            "warning: the {role} {} is an INCOMPLETE run: {}",
            dir.display(),
            set.describe()
        );
    }
    let run = merged.run;
    let records = run.records.ok_or_else(|| {
        fail(
            flag,
            format!("no shard of {} has readable records", dir.display()),
        )
    })?;
    Ok(CompareRun {
        dir: dir.to_path_buf(),
        records,
        live: run.status == speedbench_runs::RunStatus::Running,
        manifest: run.manifest,
        model: run.model,
        speed_bench_py: None,
    })
}
