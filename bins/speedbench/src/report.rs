//! `speedbench report`: the acceptance matrix over run directories.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use speedbench_record::{RECORDS_FILE_NAME, RequestRecord, read_records_file};
use speedbench_report::{AcceptanceMatrix, MatrixMetric};

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
    /// Run directories, or directories whose immediate children are run directories.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Which acceptance number fills the cells.
    #[arg(long, default_value = "accept_length")]
    pub metric: MatrixMetric,
    /// Output format.
    #[arg(long, value_enum, default_value = "both")]
    pub format: Format,
    /// CSV destination for `--format csv|both`.
    #[arg(long, default_value = "speed_bench_report.csv")]
    pub output: PathBuf,
}

/// Run directories among `paths`: a directory holding a records file, or the
/// immediate children (in name order) of one that does not.
fn find_run_dirs(paths: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    let mut dirs = Vec::new();
    for path in paths {
        if !path.is_dir() {
            return Err(fail(
                "finding runs",
                format!("{} is not a directory", path.display()),
            ));
        }
        if path.join(RECORDS_FILE_NAME).is_file() {
            dirs.push(path.clone());
            continue;
        }
        let mut children: Vec<PathBuf> = std::fs::read_dir(path)
            .context(format!("listing {}", path.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.join(RECORDS_FILE_NAME).is_file())
            .collect();
        children.sort();
        if children.is_empty() {
            return Err(fail(
                "finding runs",
                format!(
                    "{} holds no {RECORDS_FILE_NAME}, nor do its subdirectories",
                    path.display()
                ),
            ));
        }
        dirs.extend(children);
    }
    Ok(dirs)
}

fn load_run(dir: &Path) -> Result<(String, Vec<RequestRecord>), CliError> {
    let path = dir.join(RECORDS_FILE_NAME);
    let file = read_records_file(&path).context("reading records")?;
    let label = file
        .manifest
        .map(|m| m.model)
        .filter(|m| !m.is_empty())
        .or_else(|| file.records.first().map(|r| r.model.clone()))
        .unwrap_or_else(|| dir.display().to_string());
    Ok((label, file.records))
}

/// Runs `speedbench report`.
pub fn run(args: ReportArgs) -> Result<Outcome, CliError> {
    let dirs = find_run_dirs(&args.paths)?;
    eprintln!("Found {} run directories.", dirs.len());
    let runs = dirs
        .iter()
        .map(|d| load_run(d))
        .collect::<Result<Vec<_>, _>>()?;
    let views: Vec<(String, &[RequestRecord])> = runs
        .iter()
        .map(|(l, r)| (l.clone(), r.as_slice()))
        .collect();
    let matrix = AcceptanceMatrix::from_runs(args.metric, &views);
    if matrix
        .rows
        .iter()
        .all(|r| r.cells.iter().all(Option::is_none))
    {
        return Err(fail(
            "building the matrix",
            "no run holds speculative-decoding statistics (was speculation on, and does the server report them?)",
        ));
    }
    if matches!(args.format, Format::Console | Format::Both) {
        print!("{}", matrix.to_console());
    }
    if matches!(args.format, Format::Csv | Format::Both) {
        std::fs::write(&args.output, matrix.to_csv())
            .context(format!("writing {}", args.output.display()))?;
        eprintln!("CSV written to {}", args.output.display());
    }
    if args.format == Format::Json {
        println!(
            "{}",
            serde_json::to_string_pretty(&matrix.to_json()).unwrap_or_default()
        );
    }
    if args.format == Format::Markdown {
        print!("{}", matrix.to_markdown());
    }
    Ok(Outcome::Done)
}
