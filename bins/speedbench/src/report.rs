//! `speedbench report`: a matrix over run directories (speedbench's or AIPerf's).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use speedbench_report::{
    AcceptanceMatrix, MatrixMetric, ResolvedSource, SourceChoice, find_run_dirs, load_run,
};

use crate::{CliError, Context, Outcome, fail};

/// Output formats of the matrix.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Format {
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
}

/// Options of `speedbench report`.
#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Run directories, or directories whose immediate children are run
    /// directories (speedbench's records.parquet or AIPerf's profile_export_aiperf.json).
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
}

/// Runs `speedbench report`.
pub fn run(args: ReportArgs) -> Result<Outcome, CliError> {
    let dirs = find_run_dirs(&args.paths).context("finding runs")?;
    eprintln!("Found {} run directories.", dirs.len());
    let mut rows = Vec::new();
    for dir in &dirs {
        let run = load_run(dir).context(format!("loading {}", dir.display()))?;
        for warning in &run.warnings {
            eprintln!("warning: {warning}");
        }
        if args.metric == MatrixMetric::Throughput && run.category_count() > 1 {
            eprintln!(
                "{}: throughput is a rate over the whole run, so it is not split across its {} categories; \
                 the run gives one column (run one category per run for per-category throughput)",
                dir.display(),
                run.category_count()
            );
        }
        let (cells, source) = run.cells(args.metric, args.source);
        eprintln!("{}: {} from {source}", dir.display(), args.metric);
        if source == ResolvedSource::None {
            eprintln!(
                "warning: {} has no {} data from source {:?}",
                dir.display(),
                args.metric,
                args.source
            );
        }
        rows.push((run.label.clone(), cells));
    }
    let matrix = AcceptanceMatrix::from_cells(args.metric, rows);
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
            format!("no run gave a {} value{hint}", args.metric),
        ));
    }
    match args.format {
        Format::Console => print!("{}", matrix.to_console()),
        Format::Json => println!(
            "{}",
            serde_json::to_string_pretty(&matrix.to_json()).unwrap_or_default()
        ),
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
