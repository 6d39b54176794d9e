//! `speedbench profile --config SWEEP.toml`: one run per variation of a
//! sweep file, each in its own directory under one parent, then one
//! report over them (docs/sweeps/README.md).
//!
//! Every variation's flags go through the same clap definition as the
//! command line, and every variation is checked (flags, request options,
//! input files, registered dataset names, run directories) before the
//! first request of the first run. Runs go one after another; a failed run
//! does not stop the sweep, the first Ctrl-C does (the current run keeps
//! what it measured, later ones are not started).

mod file;

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::{CommandFactory, Parser, parser::ValueSource};
use speedbench::process::{EXIT_SIGINT, stop_on_signals};
use speedbench_client::StopHandle;
use speedbench_dataset::Dataset;
use speedbench_record::{RUN_FILE_NAMES, run_is_live};
use speedbench_run::{DatasetSource, RunSpec, ValidRun};

use crate::console::Console;
use crate::profile::ProfileArgs;
use crate::report::ReportArgs;
use crate::{CliError, Context, Outcome, fail};
use file::{Source, Variation};

/// One run's flags, parsed as `speedbench profile` parses them.
#[derive(Parser)]
#[command(name = "profile", no_binary_name = true)]
struct ProfileCli {
    #[command(flatten)]
    profile: ProfileArgs,
}

/// The report's flags, parsed as `speedbench report` parses them.
#[derive(Parser)]
#[command(name = "report", no_binary_name = true)]
struct ReportCli {
    #[command(flatten)]
    report: ReportArgs,
}

/// Flags of the command line that belong to the sweep, not to its runs.
const SWEEP_FLAGS: [(&str, bool); 3] = [
    ("config", true),
    ("dry-run", false),
    ("output-artifact-dir", true),
];

/// The `speedbench profile` arguments of this process, after `profile`.
fn command_line() -> Result<Vec<OsString>, CliError> {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(s) if s == "profile" => Ok(args.collect()),
        _ => Err(fail(
            "--config",
            "a sweep runs from the command line as `speedbench profile --config FILE`",
        )),
    }
}

/// `tokens` without the flags of [`SWEEP_FLAGS`] (and their values).
fn run_tokens(tokens: &[OsString]) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut skip_value = false;
    for t in tokens {
        if std::mem::take(&mut skip_value) {
            continue;
        }
        let text = t.to_string_lossy();
        let sweep = SWEEP_FLAGS.iter().find(|(long, _)| {
            let flag = format!("--{long}");
            text == flag || text.starts_with(&format!("{flag}="))
        });
        match sweep {
            Some((long, takes_value)) => {
                skip_value = *takes_value && text == format!("--{long}");
            }
            None => out.push(t.clone()),
        }
    }
    out
}

/// The ids of the profile flags `tokens` give.
fn given_ids(tokens: &[OsString]) -> Result<BTreeSet<String>, CliError> {
    let command =
        ProfileCli::command().mut_group("dataset_source", |g| g.required(false).multiple(true));
    let matches = command
        .clone()
        .try_get_matches_from(tokens)
        .map_err(|e| fail("the command line", clap_message(&e)))?;
    let mut ids: BTreeSet<String> = command
        .get_arguments()
        .map(|a| a.get_id().to_string())
        .filter(|id| matches.value_source(id) == Some(ValueSource::CommandLine))
        .collect();
    for id in ["config", "dry_run", "output_artifact_dir"] {
        ids.remove(id);
    }
    if ids.contains("run_id") {
        return Err(fail(
            "--run-id",
            "each run of a sweep gets its own id; set run_id in a [[variation]]",
        ));
    }
    Ok(ids)
}

/// A clap error without its usage lines.
fn clap_message(e: &clap::Error) -> String {
    e.to_string()
        .lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .map(|l| l.trim_start_matches("error: "))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A variation checked and ready to run.
struct Prepared {
    variation: Variation,
    spec: RunSpec,
    valid: ValidRun,
    dir: PathBuf,
    /// The loaded `--input-file`; a public dataset is loaded when its run
    /// starts.
    dataset: Option<Arc<Dataset>>,
}

/// How a variation ended.
enum RunEnd {
    Completed,
    Interrupted,
    Failed(String),
    NotStarted,
}

impl RunEnd {
    fn describe(&self) -> String {
        match self {
            RunEnd::Completed => "completed".into(),
            RunEnd::Interrupted => "interrupted (its finished requests are kept)".into(),
            RunEnd::Failed(why) => format!("failed: {why}"),
            RunEnd::NotStarted => "not started (the sweep was stopped)".into(),
        }
    }
}

/// Refuses a run directory that a run of this sweep may not use: one
/// another run is writing to, or (without `--overwrite`) one holding a
/// run. The run checks again when it locks the directory.
fn check_run_dir(dir: &Path, overwrite: bool) -> Result<(), String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!("{}: exists and is not a directory", dir.display()));
    }
    if run_is_live(dir) {
        return Err(format!(
            "{}: another speedbench run is writing to this directory",
            dir.display()
        ));
    }
    if !overwrite && let Some(found) = RUN_FILE_NAMES.iter().find(|n| dir.join(n).exists()) {
        return Err(format!(
            "{}: already holds a run ({found} exists); its results are kept (give --overwrite \
             to replace the sweep's runs)",
            dir.display()
        ));
    }
    Ok(())
}

/// Checks one variation: its flags through clap, its request options, its
/// dataset where that is cheap (an input file is loaded, a registered name
/// looked up), its run directory and `--output` file.
fn prepare(
    variation: &Variation,
    parent: &Path,
    cli_tokens: &[OsString],
    files: &mut HashMap<PathBuf, Arc<Dataset>>,
) -> Result<Prepared, CliError> {
    let dir = parent.join(&variation.dir_name);
    let mut dir_flag = OsString::from("--output-artifact-dir=");
    dir_flag.push(dir.as_os_str());
    let tokens: Vec<OsString> = variation
        .tokens
        .iter()
        .chain(cli_tokens)
        .cloned()
        .chain([dir_flag])
        .collect();
    let args = ProfileCli::try_parse_from(&tokens)
        .map_err(|e| fail("the flags", clap_message(&e)))?
        .profile;
    let spec = args.to_spec();
    let public_name = spec.dataset.public_name()?;
    let valid = spec.validate()?;
    let dataset = match (&spec.dataset.source, public_name) {
        (Some(DatasetSource::InputFile(path)), _) => {
            let dataset = match files.get(path) {
                Some(d) => d.clone(),
                None => {
                    let d =
                        Arc::new(Dataset::from_jsonl_file(path).context("loading the input file")?);
                    files.insert(path.clone(), d.clone());
                    d
                }
            };
            // Categories that select nothing are refused now, not mid-sweep.
            dataset
                .select_categories(valid.categories())
                .context("filtering categories")?;
            Some(dataset)
        }
        (_, Some(name)) => {
            speedbench_dataset::registry::lookup(&name).map_err(|e| {
                speedbench_run::dataset_error(format!("--public-dataset {name}"), e)
            })?;
            None
        }
        (_, None) => None,
    };
    check_run_dir(&dir, spec.outputs.overwrite).map_err(|e| fail("the run directory", e))?;
    Ok(Prepared {
        variation: variation.clone(),
        spec,
        valid,
        dir,
        dataset,
    })
}

/// `--api-key=...` and header values hidden, for printing a run's flags.
fn shown(token: &OsString) -> String {
    let t = token.to_string_lossy();
    if t.starts_with("--api-key=") {
        return "--api-key=(hidden)".into();
    }
    if let Some(h) = t.strip_prefix("--header=") {
        let name = h.split(':').next().unwrap_or_default();
        return format!("--header={name}:(hidden)");
    }
    if t.contains(' ') {
        format!("'{t}'")
    } else {
        t.into_owned()
    }
}

/// A sweep checked whole and ready to run.
struct Plan {
    /// Every variation, checked.
    prepared: Vec<Prepared>,
    /// The directory the runs go under.
    parent: PathBuf,
    /// The `speedbench report` flags of `[report]`.
    report_tokens: Vec<OsString>,
}

impl Plan {
    /// The report's arguments over `dirs`: `[report]`'s flags, console
    /// output unless they name a format.
    fn report_args(&self, dirs: &[PathBuf]) -> Vec<OsString> {
        let mut t: Vec<OsString> = Vec::new();
        if !self
            .report_tokens
            .iter()
            .any(|t| t.to_string_lossy().starts_with("--format="))
        {
            t.push("--format=console".into());
        }
        t.extend(self.report_tokens.iter().cloned());
        t.extend(dirs.iter().map(|d| d.clone().into_os_string()));
        t
    }
}

/// Runs `speedbench profile --config FILE`.
pub(crate) async fn run(path: &Path, args: &ProfileArgs) -> Result<Outcome, CliError> {
    let mut plan = plan(path, args).await?;
    let total = plan.prepared.len();
    println!(
        "sweep {}: {total} runs under {}",
        path.display(),
        plan.parent.display()
    );
    for p in &plan.prepared {
        let v = &p.variation;
        println!("  {}  {}  ({})", v.dir_name, v.description, v.origin);
        if args.dry_run {
            let flags: Vec<String> = v.tokens.iter().map(shown).collect();
            println!("      flags from the file: {}", flags.join(" "));
        }
    }
    if args.dry_run {
        println!("every variation checked; nothing was sent (--dry-run)");
        return Ok(Outcome::Done);
    }
    note_other_runs(&plan);
    // One stop handle for the whole sweep: the first Ctrl-C stops the
    // current run and starts no other; a second exits at once.
    let stop = StopHandle::new();
    let signals = stop_on_signals(stop.clone(), crate::profile::notify_signal);
    let ends = run_all(std::mem::take(&mut plan.prepared), &stop, &signals).await;
    let report_failed = report_over(&plan, &ends).await;
    summarize(
        path,
        &ends,
        report_failed,
        stop.is_stopped()
            .then(|| signals.exit_code().unwrap_or(EXIT_SIGINT)),
    )
}

/// Reads, expands and checks the sweep: every variation is checked before
/// anything is sent, and any refusal refuses the whole sweep.
async fn plan(path: &Path, args: &ProfileArgs) -> Result<Plan, CliError> {
    let text = std::fs::read_to_string(path)
        .context(format!("reading the sweep file {}", path.display()))?;
    let command_line = command_line()?;
    let cli_ids = given_ids(&command_line)?;
    let cli_tokens = run_tokens(&command_line);
    let source = Source { path, text: &text };
    let expanded = file::expand(
        &source,
        &ProfileCli::command(),
        &ReportCli::command(),
        &cli_ids,
    )?;
    let parent = args
        .output_artifact_dir
        .clone()
        .or(expanded.parent.clone())
        .unwrap_or_else(|| {
            let stem = path
                .file_stem()
                .map_or("sweep".into(), |s| s.to_string_lossy().into_owned());
            Path::new("artifacts").join(stem)
        });
    let total = expanded.variations.len();
    let mut files = HashMap::new();
    let mut prepared = Vec::new();
    let mut refused = Vec::new();
    for v in &expanded.variations {
        match prepare(v, &parent, &cli_tokens, &mut files) {
            Ok(p) => prepared.push(p),
            Err(e) => refused.push(format!(
                "variation {} ({}; {}): {e}",
                v.index, v.dir_name, v.origin
            )),
        }
    }
    refused.extend(refuse_occupied_stores(&prepared).await);
    refused.extend(refuse_shared_outputs(&prepared));
    let plan = Plan {
        prepared,
        parent,
        report_tokens: expanded.report_tokens,
    };
    if let Err(e) = ReportCli::try_parse_from(plan.report_args(std::slice::from_ref(&plan.parent)))
    {
        refused.push(format!("[report]: {}", clap_message(&e)));
    }
    if refused.is_empty() {
        return Ok(plan);
    }
    for r in &refused {
        eprintln!("error: {r}");
    }
    Err(fail(
        &format!("sweep {}", path.display()),
        format!(
            "{} of {total} variations refused (above); nothing was sent",
            refused.len().min(total)
        ),
    ))
}

/// Run directories in a store: a run already there is refused now, as a
/// local one is (and credentials the store refuses fail here).
async fn refuse_occupied_stores(prepared: &[Prepared]) -> Vec<String> {
    let mut refused = Vec::new();
    for p in prepared {
        if p.spec.outputs.overwrite {
            continue;
        }
        if let Err(e) = crate::remote::check_vacant(&p.dir).await {
            refused.push(format!(
                "variation {} ({}; {}): {e}",
                p.variation.index, p.variation.dir_name, p.variation.origin
            ));
        }
    }
    refused
}

/// Two runs writing one `--output` file.
fn refuse_shared_outputs(prepared: &[Prepared]) -> Vec<String> {
    let mut refused = Vec::new();
    let mut outputs: HashMap<&Path, usize> = HashMap::new();
    for p in prepared {
        if let Some(out) = &p.spec.outputs.output
            && let Some(first) = outputs.insert(out.as_path(), p.variation.index)
        {
            refused.push(format!(
                "variation {} ({}): --output {} is also variation {first}'s; give each run its own",
                p.variation.index,
                p.variation.dir_name,
                out.display()
            ));
        }
    }
    refused
}

/// Says which runs in the parent are not this sweep's (the sweep's
/// report leaves them out).
fn note_other_runs(plan: &Plan) {
    let others = other_runs(&plan.parent, &plan.prepared);
    if !others.is_empty() {
        eprintln!(
            "note: {} also holds {} run(s) not of this sweep ({}); the sweep's report leaves \
             them out, `speedbench report {}` would not",
            plan.parent.display(),
            others.len(),
            others.join(", "),
            plan.parent.display()
        );
    }
}

/// Runs every variation in turn; after a stop, the rest are not started.
async fn run_all(
    prepared: Vec<Prepared>,
    stop: &StopHandle,
    signals: &speedbench::process::SignalWatch,
) -> Vec<(Variation, PathBuf, RunEnd)> {
    let total = prepared.len();
    let mut ends = Vec::with_capacity(total);
    for p in prepared {
        if stop.is_stopped() {
            ends.push((p.variation, p.dir, RunEnd::NotStarted));
            continue;
        }
        eprintln!(
            "\n=== sweep run {} of {total}: {} ({}) into {} ===",
            p.variation.index,
            p.variation.dir_name,
            p.variation.description,
            p.dir.display()
        );
        let end = run_one(p.spec, p.valid, p.dataset, stop, signals).await;
        ends.push((p.variation, p.dir, end));
    }
    ends
}

/// The report over every run that left records; why it failed, if it did.
async fn report_over(plan: &Plan, ends: &[(Variation, PathBuf, RunEnd)]) -> Option<String> {
    let kept: Vec<PathBuf> = ends
        .iter()
        .filter(|(_, _, e)| matches!(e, RunEnd::Completed | RunEnd::Interrupted))
        .map(|(_, d, _)| d.clone())
        .collect();
    if kept.is_empty() {
        return Some("no run finished, so there is nothing to report".to_string());
    }
    println!("\n=== report over {} run(s) of the sweep ===", kept.len());
    let report = ReportCli::try_parse_from(plan.report_args(&kept))
        .map_err(|e| fail("[report]", clap_message(&e)))
        .map(|r| r.report);
    let result = match report {
        Ok(report) => crate::report::run(report).await,
        Err(e) => Err(e),
    };
    result.err().map(|e| e.to_string())
}

/// The sweep's summary, and how it ends: interrupted (with the signal's
/// exit code), failed runs named, a failed report, or done.
fn summarize(
    path: &Path,
    ends: &[(Variation, PathBuf, RunEnd)],
    report_failed: Option<String>,
    interrupted: Option<u8>,
) -> Result<Outcome, CliError> {
    println!("\nsweep summary ({}):", path.display());
    let width = ends
        .iter()
        .map(|(_, d, _)| d.display().to_string().len())
        .max()
        .unwrap_or(0);
    for (v, dir, end) in ends {
        println!(
            "  {:>2}  {:<width$}  {}",
            v.index,
            dir.display().to_string(),
            end.describe()
        );
    }
    if let Some(e) = &report_failed {
        eprintln!("error: the report: {e}");
    }
    if let Some(code) = interrupted {
        return Ok(Outcome::Interrupted(code));
    }
    let failed: Vec<&str> = ends
        .iter()
        .filter(|(_, _, e)| matches!(e, RunEnd::Failed(_)))
        .map(|(v, _, _)| v.dir_name.as_str())
        .collect();
    if !failed.is_empty() {
        return Err(fail(
            &format!("sweep {}", path.display()),
            format!(
                "{} of {} runs failed: {}",
                failed.len(),
                ends.len(),
                failed.join(", ")
            ),
        ));
    }
    if let Some(e) = report_failed {
        return Err(fail("the sweep's report", e));
    }
    Ok(Outcome::Done)
}

/// Runs one prepared variation.
async fn run_one(
    spec: RunSpec,
    valid: ValidRun,
    dataset: Option<Arc<Dataset>>,
    stop: &StopHandle,
    signals: &speedbench::process::SignalWatch,
) -> RunEnd {
    speedbench::process::raise_open_files(spec.load.concurrency as u64 + 256);
    let dataset = match dataset {
        Some(d) => Arc::unwrap_or_clone(d),
        None => match spec.load_dataset(&mut Console::default()).await {
            Ok(d) => d,
            Err(e) => return RunEnd::Failed(CliError::from(e).to_string()),
        },
    };
    // A Ctrl-C while the dataset loaded starts nothing.
    if stop.is_stopped() {
        return RunEnd::NotStarted;
    }
    match crate::profile::execute_with(valid, dataset, stop.clone(), signals).await {
        Ok(Outcome::Done) => RunEnd::Completed,
        Ok(Outcome::Interrupted(_)) => RunEnd::Interrupted,
        Err(e) => {
            eprintln!("error: {e}");
            RunEnd::Failed(e.to_string())
        }
    }
}

/// Run directories in `parent` that are not this sweep's.
fn other_runs(parent: &Path, prepared: &[Prepared]) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let ours: BTreeSet<&str> = prepared
        .iter()
        .map(|p| p.variation.dir_name.as_str())
        .collect();
    let mut others: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !ours.contains(n.as_str()))
        .filter(|n| {
            RUN_FILE_NAMES
                .iter()
                .any(|f| parent.join(n).join(f).exists())
        })
        .collect();
    others.sort();
    others
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn the_sweep_flags_are_taken_off_the_runs_flags() {
        let tokens = os(&[
            "--config",
            "s.toml",
            "--url",
            "h:1",
            "--dry-run",
            "--output-artifact-dir=out",
            "--overwrite",
            "--config=x.toml",
            "--output-artifact-dir",
            "p",
            "-m",
            "model",
        ]);
        assert_eq!(
            run_tokens(&tokens),
            os(&["--url", "h:1", "--overwrite", "-m", "model"])
        );
    }

    #[test]
    fn the_command_line_flags_are_known_by_id() {
        let ids = given_ids(&os(&[
            "--config",
            "s.toml",
            "--url",
            "h:1",
            "-m",
            "x",
            "--overwrite",
        ]))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            ids.into_iter().collect::<Vec<_>>(),
            ["model", "overwrite", "url"]
        );
        let Err(e) = given_ids(&os(&["--config", "s.toml", "--run-id", "r"])) else {
            panic!("--run-id beside --config is refused")
        };
        assert!(e.to_string().contains("its own id"), "{e}");
    }

    #[test]
    fn a_clap_error_keeps_its_message_and_drops_the_usage() {
        let e = ProfileCli::try_parse_from(["--input-file=f", "--concurrency=x"])
            .err()
            .unwrap();
        let m = clap_message(&e);
        assert!(m.contains("invalid value 'x' for '--concurrency"), "{m}");
        assert!(!m.contains("Usage"), "{m}");
    }

    #[test]
    fn secrets_are_not_printed_with_a_runs_flags() {
        assert_eq!(shown(&"--api-key=sk-1".into()), "--api-key=(hidden)");
        assert_eq!(
            shown(&"--header=Authorization:Bearer x".into()),
            "--header=Authorization:(hidden)"
        );
        assert_eq!(shown(&"--concurrency=4".into()), "--concurrency=4");
    }
}
