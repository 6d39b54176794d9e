//! `speedbench compare`: a baseline run against a speculative run.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use speedbench_report::{
    CompareOptions, MAX_BOOTSTRAP_SAMPLES, check_runs_match, compare, load_compare_run,
};

use crate::{CliError, Context, Outcome, fail};

/// Output formats of a comparison.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub(crate) enum CompareFormat {
    /// A table on stdout.
    Console,
    /// JSON on stdout.
    Json,
}

/// Options of `speedbench compare`.
#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
    /// Run directory of the baseline (speculation off).
    #[arg(long)]
    pub baseline: PathBuf,
    /// Run directory of the speculative run (same dataset, categories and sampling).
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
    /// Compare even when the runs differ in dataset, requests, categories,
    /// prompts, --osl or sampling fields (each difference is printed).
    #[arg(long)]
    pub force: bool,
}

/// Runs `speedbench compare`.
pub(crate) fn run(args: CompareArgs) -> Result<Outcome, CliError> {
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
    let base = load_compare_run(&args.baseline, "baseline").context("--baseline")?;
    let spec = load_compare_run(&args.speculative, "speculative").context("--speculative")?;
    let check = check_runs_match(&base, &spec);
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
    }
    Ok(Outcome::Done)
}
