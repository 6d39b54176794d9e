//! `speedbench compare`: a baseline run against a speculative run.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use speedbench_report::{CompareOptions, compare, load_run};

use crate::{CliError, Context, Outcome, fail};

/// Output formats of a comparison.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum CompareFormat {
    /// A table on stdout.
    Console,
    /// JSON on stdout.
    Json,
}

/// Options of `speedbench compare`.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Run directory of the baseline (speculation off).
    #[arg(long)]
    pub baseline: PathBuf,
    /// Run directory of the speculative run (same dataset, categories and sampling).
    #[arg(long)]
    pub speculative: PathBuf,
    /// Bootstrap resamples per confidence interval (0 turns them off).
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
}

/// Runs `speedbench compare`.
pub fn run(args: CompareArgs) -> Result<Outcome, CliError> {
    if !(args.confidence > 0.0 && args.confidence < 1.0) {
        return Err(fail("--confidence", "must lie strictly between 0 and 1"));
    }
    let load =
        |dir: &PathBuf, what: &str| -> Result<Vec<speedbench_record::RequestRecord>, CliError> {
            let run = load_run(dir).context(format!("loading the {what} run {}", dir.display()))?;
            run.records.ok_or_else(|| {
                fail(
                    &format!("loading the {what} run {}", dir.display()),
                    "it has no per-request records (AIPerf runs need profile_export.jsonl)",
                )
            })
        };
    let base = load(&args.baseline, "baseline")?;
    let spec = load(&args.speculative, "speculative")?;
    let options = CompareOptions {
        bootstrap_samples: args.bootstrap,
        confidence: args.confidence,
        seed: args.seed,
    };
    let comparison = compare(&base, &spec, &options).context("comparing")?;
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
