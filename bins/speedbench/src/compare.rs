//! `speedbench compare`: a baseline run against a speculative run.

//!
//! The comparison is `speedbench_run::compare`'s; this module holds its
//! flags.

use std::path::PathBuf;

use clap::Args;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use speedbench_run::compare::{CompareFormat, CompareSpec, CompareUnit, compare_runs};

use crate::report::Terminal;
use crate::{CliError, Outcome};

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
    /// Output format: console, json, csv (to --output), markdown, both
    /// (console and csv) or html (to --html-output).
    #[arg(long, default_value = "console", value_parser = PossibleValuesParser::new(CompareFormat::NAMES)
        .map(|s| s.parse::<CompareFormat>().expect("a possible value")))]
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
    /// What the means are taken over: `request` (each turn one request;
    /// with the byte-identical check and the intervals) or `sample`
    /// (speed_bench_compare.py's per-sample means). Default: `sample` when
    /// a side is a speed_bench.py file or both runs used --bench, else
    /// `request`.
    #[arg(long, value_parser = PossibleValuesParser::new(CompareUnit::NAMES)
        .map(|s| s.parse::<CompareUnit>().expect("a possible value")))]
    pub unit: Option<CompareUnit>,
    /// Hold both runs to these SLOs and compare their goodput (AIPerf's
    /// metric tags, ms: `time_to_first_token:200 request_latency:5000`);
    /// by default, the SLOs the runs were made with (--goodput of profile).
    #[arg(long, value_name = "METRIC:VALUE ...", value_parser = |s: &str| s.parse::<speedbench_metrics::Slos>())]
    pub goodput: Option<speedbench_metrics::Slos>,
}

/// Runs `speedbench compare`; a side given as a store URL is fetched first.
pub(crate) async fn run(args: CompareArgs) -> Result<Outcome, CliError> {
    compare_runs(args.to_spec(), &mut Terminal).await?;
    Ok(Outcome::Done)
}

impl CompareArgs {
    /// The comparison these flags ask for.
    fn to_spec(&self) -> CompareSpec {
        let mut spec = CompareSpec::new(self.baseline.clone(), self.speculative.clone());
        spec.bootstrap = self.bootstrap;
        spec.confidence = self.confidence;
        spec.seed = self.seed;
        spec.format = self.format;
        spec.output = self.output.clone();
        spec.html_output = self.html_output.clone();
        spec.force = self.force;
        spec.unit = self.unit;
        spec.goodput = self.goodput.clone().unwrap_or_default();
        spec
    }
}
