//! `speedbench profile --config SWEEP.toml`: one run per variation of a
//! sweep file, each in its own directory under one parent, then one
//! report over them (docs/sweeps/README.md).
//!
//! The sweep is `speedbench_run::sweep`'s (expansion, the checks of every
//! run before the first request, the runs); this module gives it the
//! command line's flags and prints what happens.

use std::path::{Path, PathBuf};

use clap::Parser;
use speedbench::process::{EXIT_SIGINT, stop_on_signals};
use speedbench_client::StopHandle;
use speedbench_report::render_repeated;
use speedbench_run::repeat::{repeated_runs, repetitions, trial_aggregates};
use speedbench_run::sweep::{
    PLOTS_DIR, RunEnd, Sweep, SweepObserver, SweepOutcome, SweepPlots, SweepRun,
};
use speedbench_run::{RunError, RunSpec};

use crate::console::Console;
use crate::profile::ProfileArgs;
use crate::report::ReportArgs;
use crate::{CliError, Outcome, fail};

/// The report's flags, parsed as `speedbench report` parses them.
#[derive(Parser)]
#[command(name = "report", no_binary_name = true)]
pub(crate) struct ReportCli {
    #[command(flatten)]
    pub(crate) report: ReportArgs,
}

/// A clap error without its usage lines.
pub(crate) fn clap_message(e: &clap::Error) -> String {
    e.to_string()
        .lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("For more information"))
        .map(|l| l.trim_start_matches("error: "))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What an AIPerf config's `multiRun` of more than one trial makes of its
/// sweep.
enum Trials {
    /// No `multiRun` (or of one trial): each run once.
    None,
    /// A config of one run: that run repeated, in its own directory, as
    /// `--num-profile-runs N`.
    OneRun(Box<RunSpec>),
    /// A sweep of several runs: the sweep in N trials, then each run's
    /// figures across its trials under `parent`.
    Sweep {
        variations: usize,
        trials: speedbench_run::RepeatSpec,
        parent: PathBuf,
    },
}

impl Trials {
    fn of(sweep: &Sweep) -> Trials {
        match (sweep.runs(), sweep.trials()) {
            ([run], Some(trials)) => run.spec().map_or(Trials::None, |spec| {
                let mut spec = spec.clone();
                spec.repeat = trials.clone();
                spec.outputs.output_artifact_dir = Some(run.dir.clone());
                Trials::OneRun(Box::new(spec))
            }),
            (runs, Some(trials)) if runs.len() > 1 => Trials::Sweep {
                variations: runs.len(),
                trials: trials.clone(),
                parent: sweep.parent().to_path_buf(),
            },
            _ => Trials::None,
        }
    }

    /// What a dry run says of the repetition.
    fn plan_line(&self) -> Option<String> {
        match self {
            Trials::None => None,
            Trials::OneRun(spec) => Some(format!(
                "the run repeats {} times (multiRun or --num-profile-runs), into profile_runs/ under its directory",
                spec.repeat.num_profile_runs
            )),
            Trials::Sweep {
                variations,
                trials,
                parent,
            } => Some(format!(
                "the {variations} runs of the sweep run in {} trials (multiRun or --num-profile-runs), trials outer; each run's figures across its trials go to aggregate/<run>/ under {}",
                trials.num_profile_runs,
                parent.display()
            )),
        }
    }
}

/// Runs `speedbench profile --config FILE`.
pub(crate) async fn run(path: &Path, args: &ProfileArgs) -> Result<Outcome, CliError> {
    // The parent is the sweep's; every other flag given applies to each run.
    let mut given = args.given.clone();
    given.remove("output-artifact-dir");
    let sweep = Sweep::read(path, &args.spec, &given)?;
    let trials = Trials::of(&sweep);
    if let Trials::OneRun(spec) = &trials
        && !args.dry_run
    {
        if let Some(note) = repeated_run_plot_note(sweep.plots()) {
            eprintln!("{note}");
        }
        return run_repeated(spec).await;
    }
    ReportCli::try_parse_from(sweep.report_args(&[sweep.parent().to_path_buf()]))
        .map_err(|e| fail("[report]", clap_message(&e)))?;
    let sweep = match &trials {
        Trials::Sweep { trials, .. } => sweep.in_trials(trials)?,
        _ => sweep,
    };
    let sweep = sweep.check().await.map_err(refused)?;
    sweep
        .plan_lines(args.dry_run)
        .iter()
        .for_each(|l| println!("{l}"));
    let plots = sweep.plots().clone();
    let parent = sweep.parent().to_path_buf();
    if args.dry_run {
        trials.plan_line().iter().for_each(|l| println!("{l}"));
        match &trials {
            // A repeated run draws none of them (said as it does).
            Trials::OneRun(_) => repeated_run_plot_note(&plots)
                .iter()
                .for_each(|n| println!("{n}")),
            _ => plot_plan(&plots, &parent),
        }
        println!("every variation checked; nothing was sent (--dry-run)");
        return Ok(Outcome::Done);
    }
    if let Some(note) = sweep.other_runs_note() {
        eprintln!("{note}");
    }
    // One stop handle for the whole sweep: the first Ctrl-C stops the
    // current run and starts no other; a second exits at once.
    let stop = StopHandle::new();
    let signals = stop_on_signals(stop.clone(), crate::profile::notify_signal);
    let outcome = sweep.run(&stop, &mut Console::default()).await;
    let report_failed = after_the_runs(&outcome, &trials, &plots, &parent).await;
    summarize(
        path,
        &outcome,
        report_failed,
        stop.is_stopped()
            .then(|| signals.exit_code().unwrap_or(EXIT_SIGINT)),
    )
}

/// Runs `speedbench profile --num-profile-runs N`: the runs, then their
/// figures across runs, printed and in `aggregate.json`.
pub(crate) async fn run_repeated(spec: &RunSpec) -> Result<Outcome, CliError> {
    let sweep = repetitions(spec)?;
    let parent = sweep.parent().to_path_buf();
    let sweep = sweep.check().await.map_err(refused)?;
    let stop = StopHandle::new();
    let signals = stop_on_signals(stop.clone(), crate::profile::notify_signal);
    let outcome = sweep.run(&stop, &mut Console::default()).await;
    let runs = repeated_runs(&outcome, &parent, spec.repeat.confidence_level);
    let written = runs.write(&parent).map_err(|source| RunError::Runs {
        context: "writing the figures across runs".into(),
        source,
    });
    println!("\n{}", render_repeated(&runs.metrics));
    for l in &runs.left_out {
        println!("left out of the figures: {}: {}", l.run, l.why);
    }
    match &written {
        Ok(path) => println!(
            "figures of {} of {} runs in {}",
            runs.num_successful_runs,
            runs.num_runs,
            path.display()
        ),
        Err(e) => eprintln!("error: {}", speedbench_run::error_message(e)),
    }
    let interrupted = stop
        .is_stopped()
        .then(|| signals.exit_code().unwrap_or(EXIT_SIGINT));
    let outcome = summarize(&parent, &outcome, None, interrupted)?;
    written?;
    Ok(outcome)
}

/// Each refused run on a line of its own, then the count.
fn refused(e: RunError) -> CliError {
    match e {
        RunError::Refused {
            what,
            total,
            refusals,
        } => {
            for r in &refusals {
                eprintln!("error: {r}");
            }
            fail(
                &what,
                format!(
                    "{} of {total} variations refused (above); nothing was sent",
                    refusals.len().min(total)
                ),
            )
        }
        e => e.into(),
    }
}

impl SweepObserver for Console {
    fn sweep_run_started(&mut self, run: &SweepRun, total: usize) {
        eprintln!(
            "\n=== sweep run {} of {total}: {} ({}) into {} ===",
            run.index,
            run.dir_name,
            run.description,
            run.dir.display()
        );
    }

    fn sweep_run_ended(&mut self, _run: &SweepRun, end: &RunEnd) {
        if let RunEnd::Failed(e) = end {
            eprintln!("error: {}", speedbench_run::error_message(e));
        }
    }
}

/// Each run's figures across its trials, in `parent/aggregate/<run>/`;
/// why one could not be written, if one could not.
fn write_trial_aggregates(
    outcome: &SweepOutcome,
    parent: &Path,
    variations: usize,
    trials: &speedbench_run::RepeatSpec,
) -> Option<String> {
    let mut failed = None;
    println!();
    for (dir, runs) in trial_aggregates(outcome, parent, variations, trials.confidence_level) {
        for l in &runs.left_out {
            println!("left out of the figures: {}: {}", l.run, l.why);
        }
        match runs.write(&dir) {
            Ok(path) => println!(
                "figures of {} of {} trials in {}",
                runs.num_successful_runs,
                runs.num_runs,
                path.display()
            ),
            Err(e) => failed = Some(format!("writing {}: {e}", dir.display())),
        }
    }
    failed
}

/// What follows a sweep's runs: each run's figures across its trials,
/// the config's plots, the report over the runs; why one of them failed,
/// if one did.
async fn after_the_runs(
    outcome: &SweepOutcome,
    trials: &Trials,
    plots: &SweepPlots,
    parent: &Path,
) -> Option<String> {
    let (aggregates_failed, variations) = match trials {
        Trials::Sweep {
            variations,
            trials,
            parent,
        } => (
            write_trial_aggregates(outcome, parent, *variations, trials),
            *variations,
        ),
        _ => (None, outcome.runs.len()),
    };
    let plots_failed = write_plots(plots, outcome, variations, parent);
    report_over(outcome)
        .await
        .or(aggregates_failed)
        .or(plots_failed)
}

/// Why a config of one repeated run (`multiRun`) draws none of the sweep
/// plots it asks for; `None` when it asks for none.
fn repeated_run_plot_note(plots: &SweepPlots) -> Option<&'static str> {
    (!plots.draw.is_empty()).then_some(
        "note: plot: not drawn: the config's one run is repeated (multiRun), and a sweep plot draws a point per run of a sweep; its figures across runs are in aggregate/",
    )
}

/// What a dry run says of the config's `plot:`.
fn plot_plan(plots: &SweepPlots, parent: &Path) {
    if !plots.draw.is_empty() {
        let names: Vec<&str> = plots.draw.iter().map(|p| p.name.as_str()).collect();
        println!(
            "plots drawn once the sweep ends, into {}: {}",
            parent.join(PLOTS_DIR).display(),
            names.join(", ")
        );
    }
    plots.notes.iter().for_each(|n| println!("note: {n}"));
}

/// The config's plots over the sweep's runs; why they could not be
/// written, if they could not.
fn write_plots(
    plots: &SweepPlots,
    outcome: &SweepOutcome,
    variations: usize,
    parent: &Path,
) -> Option<String> {
    plots.notes.iter().for_each(|n| eprintln!("note: {n}"));
    match plots.write(outcome, variations, parent) {
        Ok(written) => {
            written
                .iter()
                .for_each(|p| println!("plot: {}", p.display()));
            None
        }
        Err(e) => Some(speedbench_run::error_message(&e)),
    }
}

/// The report over every run that left records; why it failed, if it did.
async fn report_over(outcome: &SweepOutcome) -> Option<String> {
    let kept = outcome.kept_dirs();
    if kept.is_empty() {
        return Some("no run finished, so there is nothing to report".to_string());
    }
    println!("\n=== report over {} run(s) of the sweep ===", kept.len());
    let report = ReportCli::try_parse_from(outcome.report_args())
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
    outcome: &SweepOutcome,
    report_failed: Option<String>,
    interrupted: Option<u8>,
) -> Result<Outcome, CliError> {
    for line in outcome.summary_lines(path) {
        println!("{line}");
    }
    if let Some(e) = &report_failed {
        eprintln!("error: the report: {e}");
    }
    if let Some(code) = interrupted {
        return Ok(Outcome::Interrupted(code));
    }
    let failed = outcome.failed();
    if !failed.is_empty() {
        return Err(fail(
            &format!("sweep {}", path.display()),
            format!(
                "{} of {} runs failed: {}",
                failed.len(),
                outcome.runs.len(),
                failed.join(", ")
            ),
        ));
    }
    match report_failed {
        Some(e) => Err(fail("the sweep's report", e)),
        None => Ok(Outcome::Done),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One run's flags, parsed as `speedbench profile` parses them.
    #[derive(Parser)]
    #[command(name = "profile", no_binary_name = true)]
    struct ProfileCli {
        #[command(flatten)]
        profile: ProfileArgs,
    }
    use speedbench_run::RunSpec;
    use speedbench_run::flags;

    #[test]
    fn the_command_line_flags_are_known_by_long_name() {
        let cli = ProfileCli::try_parse_from([
            "--config",
            "s.toml",
            "--url",
            "h:1",
            "-m",
            "x",
            "--overwrite",
            "-H",
            "A:b",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            cli.profile.given.into_iter().collect::<Vec<_>>(),
            ["header", "model", "overwrite", "url"]
        );
    }

    #[test]
    fn bench_takes_speed_bench_pys_defaults_and_the_rest_aiperfs() {
        let bench = ProfileCli::try_parse_from(["--bench", "qualitative"]).unwrap();
        let s = &bench.profile.spec;
        assert_eq!(s.target.url, "localhost:8080");
        assert_eq!(s.sampling.osl, Some(4096));
        assert_eq!(s.sampling.extra_inputs, [r#"{"temperature":0}"#]);
        assert_eq!(s.target.timeout_s, 600.0);
        let given = ProfileCli::try_parse_from(["--bench", "qualitative", "--osl", "64"]).unwrap();
        assert_eq!(given.profile.spec.sampling.osl, Some(64));
        let file = ProfileCli::try_parse_from(["--input-file", "rows.jsonl"]).unwrap();
        let s = &file.profile.spec;
        assert_eq!(
            (s.target.url.as_str(), s.sampling.osl),
            ("localhost:8000", None)
        );
        assert!(s.sampling.extra_inputs.is_empty());
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

    /// Splits `--name=value` (a switch: `--name`).
    fn set_all(argv: &[&str]) -> RunSpec {
        let mut spec = RunSpec::default();
        for token in argv {
            let token = token.trim_start_matches("--");
            let (name, value) = token.split_once('=').unwrap_or((token, "true"));
            flags::set(&mut spec, name, value).unwrap_or_else(|e| panic!("{e}"));
        }
        spec
    }

    #[test]
    fn the_library_sets_what_clap_parses() {
        let every = [
            "--url=h:9",
            "--model=m",
            "--endpoint-type=completions",
            "--streaming",
            "--bench=qualitative",
            "--dataset-cache=c",
            "--resolver=native",
            "--python=py",
            "--prepare-script=p.py",
            "--category=coding,math",
            "--category=rag",
            "--limit=3",
            "--concurrency=7",
            "--request-count=9",
            "--num-conversations=4",
            "--warmup-request-count=2",
            "--osl=64",
            "--extra-inputs=temperature:0",
            "--extra-inputs={\"top_p\":1}",
            "--timeout=30.5",
            "--output-artifact-dir=o",
            "--staging-dir=s",
            "--output=o.json",
            "--api-key=k",
            "--header=A:b",
            "--run-id=r",
            "--overwrite",
            "--max-error-rate=0.5",
            "--ca-cert=ca.pem",
            "--local-addr=127.0.0.2,127.0.0.3",
            "--http-client=hyper",
            "--request-rate=2.5",
            "--request-rate-mode=constant",
            "--random-seed=11",
            "--max-concurrency=5",
            "--benchmark-duration=12",
            "--benchmark-grace-period=3",
            "--server-metrics=http://h:1/metrics",
            "--server-metrics-shutdown-delay=0.5",
            "--shard=1/4",
            "--shard-count=4",
            "--shard-index=1",
            "--start-at=1700000000.5",
            "--export-level=raw",
            "--engine=vllm",
            "--max-response-bytes=1000",
            "--no-preflight",
        ];
        let other = [
            "--input-file=rows.jsonl",
            "--no-server-metrics",
            "--start-after-barrier=b",
            "--shard-count=2",
        ];
        for argv in [&every[..], &other[..]] {
            let clap = ProfileCli::try_parse_from(argv).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(clap.profile.spec, set_all(argv), "{argv:?}");
        }
    }
}
