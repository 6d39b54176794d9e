//! `speedbench report`: a matrix over run directories (speedbench's or AIPerf's).
//!
//! The report is `speedbench_run::report`'s; this module holds its flags
//! and prints what it tells.

use std::path::PathBuf;

use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use speedbench_report::{MatrixMetric, SourceChoice};
use speedbench_run::report::{ReportFormat, ReportObserver, ReportSpec, report};

use crate::{CliError, Outcome};

/// Options of `speedbench report`.
#[derive(Args, Debug)]
pub(crate) struct ReportArgs {
    /// Run directories, llama.cpp speed_bench.py --output .json files, or
    /// directories whose immediate children are run directories
    /// (speedbench's records.parquet or AIPerf's profile_export_aiperf.json)
    /// or speed_bench.py files (.json with `summary` and `results`).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// What fills the cells: accept_length, accept_rate, throughput,
    /// decode_tps or latency [default: accept_length; accept_rate when
    /// every path is a speed_bench.py file, the figure those hold].
    #[arg(long)]
    pub metric: Option<MatrixMetric>,
    /// Where numbers come from: auto (records, then summary, then server), records, summary or server.
    #[arg(long, default_value = "auto")]
    pub source: SourceChoice,
    /// Output format: console, csv (to --output), json, markdown, both
    /// (console and csv), html (to --html-output), or speed-bench-py
    /// (llama.cpp speed_bench.py's per-category summary of each run;
    /// --metric and --source do not apply).
    #[arg(long, default_value = "both", value_parser = format_parser())]
    pub format: ReportFormat,
    /// CSV destination for `--format csv|both` (AIPerf's name, in the
    /// working directory by default; not profile's speed_bench.py JSON: a
    /// .json name is refused).
    #[arg(
        long,
        visible_alias = "csv-output",
        default_value = "speed_bench_report.csv"
    )]
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

/// `--format`'s names (`llamacpp` too, for `speed-bench-py`).
fn format_parser() -> impl TypedValueParser<Value = ReportFormat> {
    let names = ReportFormat::NAMES.map(|name| match name {
        "speed-bench-py" => PossibleValue::new(name).alias("llamacpp"),
        _ => PossibleValue::new(name),
    });
    PossibleValuesParser::new(names).map(|s| s.parse::<ReportFormat>().expect("a possible value"))
}

/// Runs `speedbench report`; store URLs among the paths are fetched first.
pub(crate) async fn run(args: ReportArgs) -> Result<Outcome, CliError> {
    report(args.to_spec(), &mut Terminal).await?;
    Ok(Outcome::Done)
}

impl ReportArgs {
    /// The report these flags ask for.
    fn to_spec(&self) -> ReportSpec {
        let mut spec = ReportSpec::new(self.paths.clone());
        spec.metric = self.metric;
        spec.source = self.source;
        spec.format = self.format;
        spec.output = self.output.clone();
        spec.html_output = self.html_output.clone();
        spec.labels = self.labels.clone();
        spec
    }
}

/// The report on the terminal: the matrix on stdout, the rest on stderr.
pub(crate) struct Terminal;

impl ReportObserver for Terminal {
    fn output(&mut self, text: &str) {
        print!("{text}");
    }
    fn info(&mut self, line: &str) {
        eprintln!("{line}");
    }
    fn note(&mut self, line: &str) {
        eprintln!("note: {line}");
    }
    fn warning(&mut self, line: &str) {
        eprintln!("warning: {line}");
    }
    fn error(&mut self, line: &str) {
        eprintln!("error: {line}");
    }
}
