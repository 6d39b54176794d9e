//! `speedbench profile`: drive a server with a dataset and summarise the run.
//!
//! The flags are `speedbench_run::flags`' (the vocabulary sweep files use
//! too), turned into clap arguments here; what they give is a [`RunSpec`]
//! that `speedbench-run` validates and runs, and
//! [`crate::console::Console`] prints what happens.

use std::collections::BTreeSet;
use std::io::IsTerminal;
use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgGroup, ArgMatches, Args, Command, FromArgMatches};
use speedbench::process::{EXIT_SIGINT, SignalEvent, stop_on_signals};
use speedbench_client::{LiveSink, RunStatus, StopHandle};
use speedbench_dataset::Dataset;
use speedbench_run::flags::{self, Flag, FlagKind};
use speedbench_run::{RunSpec, ValidRun};

use crate::console::{Console, UiType};
use crate::{CliError, Outcome};

/// Options of `speedbench profile`: a run, or a sweep of runs.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProfileArgs {
    /// The run the flags describe.
    pub spec: RunSpec,
    /// The long names of the flags given on the command line (not by
    /// default or environment): a sweep's runs take these from there.
    pub given: BTreeSet<String>,
    /// `--config`: a sweep file.
    pub config: Option<PathBuf>,
    /// `--dry-run`: check a sweep, send nothing.
    pub dry_run: bool,
    /// `--ui-type`: how the run shows itself while it runs.
    pub ui: UiType,
}

/// One clap argument of a library flag.
pub(crate) fn arg(flag: &'static Flag, heading: Option<&'static str>) -> Arg {
    let mut arg = Arg::new(flag.long)
        .long(flag.long)
        .help(flag.help)
        .help_heading(heading)
        .visible_aliases(flag.aliases.iter().copied());
    arg = match flag.kind {
        FlagKind::Switch => arg.action(ArgAction::SetTrue),
        FlagKind::One => arg.action(ArgAction::Set),
        FlagKind::Many | FlagKind::List => arg.action(ArgAction::Append),
    };
    if flag.kind != FlagKind::Switch {
        arg = if flag.possible.is_empty() {
            arg.value_parser(move |v: &str| flag.check(v).map(|()| v.to_string()))
        } else {
            arg.value_parser(PossibleValuesParser::new(flag.possible))
        };
    }
    if let Some(name) = flag.value_name {
        arg = arg.value_name(name);
    }
    if let Some(c) = flag.short {
        arg = arg.short(c);
    }
    if let Some(d) = flag.default {
        arg = arg.default_value(d);
    }
    if let Some(env) = flag.env {
        arg = arg.env(env).hide_env_values(flag.long == "api-key");
    }
    // A comma list, or several values after one flag.
    match flag.long {
        "category" | "local-addr" => arg.value_delimiter(','),
        "extra-inputs" | "server-metrics" => arg.num_args(1..),
        _ => arg,
    }
}

impl Args for ProfileArgs {
    fn augment_args(mut cmd: Command) -> Command {
        for (heading, group) in flags::GROUPS {
            cmd = cmd.args(group.iter().map(|f| arg(f, Some(heading))));
        }
        cmd.arg(
            Arg::new("config")
                .long("config")
                .value_name("FILE")
                .value_parser(clap::value_parser!(PathBuf))
                .help_heading("Sweeps")
                .help(
                    "A sweep file (TOML or YAML; docs/sweeps/README.md), or an AIPerf 0.13.0 \
                     config file (YAML, schemaVersion \"2.0\"): every variation is one run, \
                     each in its own directory, then one report over them. Flags given beside \
                     it apply to every variation and win over the file.",
                ),
        )
        .arg(
            Arg::new("dry-run")
                .long("dry-run")
                .action(ArgAction::SetTrue)
                .requires("config")
                .help_heading("Sweeps")
                .help("With --config: check every variation and print the plan; send nothing."),
        )
        .arg(
            Arg::new("ui-type")
                .long("ui-type")
                .value_name("UI")
                .value_parser(PossibleValuesParser::new(UiType::NAMES))
                .default_value("dashboard")
                .help(
                    "How the run shows itself while it runs (stderr; stdout keeps only the \
                     results): `dashboard`, a live view on a terminal (requests in flight, rate, \
                     TTFT/ITL percentiles, acceptance per category, errors by kind; the plain \
                     progress elsewhere); `simple`, the progress bar (a line every 5 s off a \
                     terminal); `none`.",
                ),
        )
        .group(
            ArgGroup::new("dataset_source")
                .args([
                    "input-file",
                    "input-rows",
                    "public-dataset",
                    "bench",
                    "isl",
                    "isl-distribution",
                    "sequence-distribution",
                    "config",
                ])
                .required(true)
                .multiple(false),
        )
        .mut_arg("max-concurrency", |a| a.requires("request-rate"))
        .mut_arg("shard-index", |a| a.requires("shard-count"))
        .mut_arg("no-server-metrics", |a| a.conflicts_with("server-metrics"))
        .mut_arg("start-at", |a| a.conflicts_with("start-after-barrier"))
        .mut_arg("staging-dir", |a| a.conflicts_with("config"))
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// Sets in `spec` what the matches give each of `flags` (its default
/// included).
pub(crate) fn apply_matches(
    spec: &mut RunSpec,
    m: &ArgMatches,
    flags: impl Iterator<Item = &'static Flag>,
) -> Result<(), clap::Error> {
    for flag in flags {
        let values: Vec<String> = match flag.kind {
            FlagKind::Switch => vec![m.get_flag(flag.long).to_string()],
            // A repeated list flag is one value of them all.
            FlagKind::List => m
                .get_many::<String>(flag.long)
                .map(|v| vec![v.cloned().collect::<Vec<_>>().join(",")])
                .unwrap_or_default(),
            _ => m
                .get_many::<String>(flag.long)
                .map(|v| v.cloned().collect())
                .unwrap_or_default(),
        };
        for value in values {
            flag.apply(spec, &value).map_err(|e| {
                clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n"))
            })?;
        }
    }
    Ok(())
}

impl FromArgMatches for ProfileArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut args = ProfileArgs {
            config: m.get_one::<PathBuf>("config").cloned(),
            dry_run: m.get_flag("dry-run"),
            ui: m
                .get_one::<String>("ui-type")
                .map_or(UiType::default(), |u| UiType::parse(u)),
            ..ProfileArgs::default()
        };
        apply_matches(&mut args.spec, m, flags::all())?;
        args.given = flags::all()
            .filter(|f| m.value_source(f.long) == Some(ValueSource::CommandLine))
            .map(|f| f.long.to_string())
            .collect();
        // With `--bench` (speed_bench.py's vocabulary), its defaults.
        args.spec.apply_speed_bench_py_defaults(&args.given);
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// Runs `speedbench profile` of one run (`main` sends `--config` to the
/// sweep instead, and `--num-profile-runs` to the repeated runs).
pub(crate) async fn run(args: ProfileArgs) -> Result<Outcome, CliError> {
    let spec = args.spec;
    // The dataset first, as before the spec existed: a missing file is
    // named before any flag it would have run with.
    let dataset = spec.load_dataset(&mut Console::default()).await?;
    execute(spec.validate()?, dataset, args.ui).await
}

/// Profiles an already loaded dataset (shared with `speedbench demo`); the
/// first Ctrl-C (or SIGTERM) stops the run, a second exits at once.
pub(crate) async fn execute(
    valid: ValidRun,
    dataset: Dataset,
    ui: UiType,
) -> Result<Outcome, CliError> {
    let stop = StopHandle::new();
    let signals = stop_on_signals(stop.clone(), notify_signal);
    // The live view's figures come from the run's records as they are
    // written; only a terminal shows it.
    let live = (ui == UiType::Dashboard && std::io::stderr().is_terminal()).then(LiveSink::default);
    let valid = match &live {
        Some(live) => valid.with_sink(live.clone()),
        None => valid,
    };
    let mut console = Console::showing(ui, live);
    let report = match speedbench_run::execute(valid, dataset, stop, &mut console).await {
        // Stopped before the first request: said as a stop, exit as one.
        Err(e @ speedbench_run::RunError::Stopped { .. }) => {
            eprintln!("{e}");
            return Ok(Outcome::Interrupted(
                signals.exit_code().unwrap_or(EXIT_SIGINT),
            ));
        }
        other => other?,
    };
    match report.into_status()? {
        RunStatus::Interrupted => Ok(Outcome::Interrupted(
            signals.exit_code().unwrap_or(EXIT_SIGINT),
        )),
        _ => Ok(Outcome::Done),
    }
}

/// What the terminal is told when a signal comes.
pub(crate) fn notify_signal(event: SignalEvent) {
    match event {
        SignalEvent::Stopping { .. } => {
            eprintln!("\nstopping: saving every finished request (press Ctrl-C again to abort)")
        }
        _ => eprintln!("aborted"),
    }
}
