//! `speedbench tune`: start each speculative configuration's server (or
//! use a URL per configuration), run every load level against it and the
//! baseline, and say which configuration to deploy per category
//! (docs/tune.md). The tune is `speedbench_run::tune`'s; this module
//! parses its flags and prints what happens.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};
use speedbench::process::{EXIT_SIGINT, stop_on_signals};
use speedbench_client::StopHandle;
use speedbench_run::RunSpec;
use speedbench_run::flags;
use speedbench_run::report::{ReportSpec, report};
use speedbench_run::tune::{
    TuneEvent, TuneFile, TuneLoad, TuneObserver, TuneOptions, TunePlan, parse_assignments,
    parse_param,
};

use crate::console::Console;
use crate::profile::{apply_matches, arg};
use crate::{CliError, Outcome, fail};

/// Where a tune goes without `--output-artifact-dir`.
const DEFAULT_DIR: &str = "artifacts/tune";

/// Options of `speedbench tune`.
#[derive(Debug, Clone, Default)]
pub(crate) struct TuneArgs {
    /// Every run's options (the `profile` flags).
    spec: RunSpec,
    /// The long names of the `profile` flags given on the command line.
    given: BTreeSet<String>,
    /// The tune's own flags.
    options: TuneOptions,
    /// `--config`: a tune file.
    config: Option<PathBuf>,
    /// `--dry-run`.
    dry_run: bool,
}

/// The tune's own flags: (name, value name, help).
const TUNE_FLAGS: [(&str, &str, &str); 11] = [
    (
        "server-cmd",
        "CMD",
        "The server's command (run by sh -c), with {port} and a {NAME} per --param; the tune starts one server per configuration.",
    ),
    (
        "param",
        "NAME=V1,V2",
        "A parameter of the command and its values (repeat for a grid).",
    ),
    (
        "baseline",
        "NAME=V,...",
        "The baseline's values of the parameters (k=0): the command without speculation.",
    ),
    (
        "baseline-cmd",
        "CMD",
        "The baseline's own command (with {port}), instead of --baseline.",
    ),
    (
        "baseline-url",
        "URL",
        "A baseline server someone else runs (with --config-url instead of --server-cmd).",
    ),
    (
        "config-url",
        "NAME=URL",
        "A speculative configuration someone else runs (repeatable).",
    ),
    (
        "port",
        "PORT",
        "The port every started server gets [default: a free one].",
    ),
    (
        "server-host",
        "IP",
        "The address started servers listen on ({host}) [default: 127.0.0.1].",
    ),
    (
        "ready-timeout",
        "SECS",
        "How long a started server has to become ready [default: 600].",
    ),
    (
        "stop-grace",
        "SECS",
        "How long a server has after SIGTERM before its group is killed [default: 30].",
    ),
    (
        "config",
        "FILE",
        "A tune file (TOML or YAML, docs/tune.md); flags given beside it win.",
    ),
];

impl Args for TuneArgs {
    fn augment_args(mut cmd: Command) -> Command {
        for (heading, group) in flags::GROUPS {
            let shown = group.iter().filter(|f| f.long != "url");
            cmd = cmd.args(shown.map(|f| arg(f, Some(heading))));
        }
        cmd = cmd
            .mut_arg("concurrency", |a| {
                a.action(ArgAction::Append)
                    .value_delimiter(',')
                    .default_value(None::<&str>)
                    .help("Load levels: closed-loop concurrencies (1,4,16)")
            })
            .mut_arg("request-rate", |a| {
                a.action(ArgAction::Append)
                    .value_delimiter(',')
                    .conflicts_with("concurrency")
                    .help("Load levels: open-loop request rates, requests/s (2,8)")
            });
        for (name, value, help) in TUNE_FLAGS {
            let many = matches!(name, "param" | "config-url");
            cmd = cmd.arg(
                Arg::new(name)
                    .long(name)
                    .value_name(value)
                    .help(help)
                    .help_heading("Tune")
                    .action(if many {
                        ArgAction::Append
                    } else {
                        ArgAction::Set
                    }),
            );
        }
        cmd.arg(
            Arg::new("dry-run")
                .long("dry-run")
                .action(ArgAction::SetTrue)
                .help_heading("Tune")
                .help("Check the tune and print its plan; start nothing."),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

/// A clap value error.
fn value_error(e: impl std::fmt::Display) -> clap::Error {
    clap::Error::raw(clap::error::ErrorKind::ValueValidation, format!("{e}\n"))
}

fn one(m: &ArgMatches, name: &str) -> Option<String> {
    m.get_one::<String>(name).cloned()
}

fn many(m: &ArgMatches, name: &str) -> Vec<String> {
    m.get_many::<String>(name)
        .map(|v| v.cloned().collect())
        .unwrap_or_default()
}

fn seconds(m: &ArgMatches, name: &str) -> Result<Option<Duration>, clap::Error> {
    one(m, name)
        .map(|s| {
            s.parse::<f64>()
                .ok()
                .and_then(|v| Duration::try_from_secs_f64(v).ok())
                .ok_or_else(|| value_error(format!("--{name} {s:?}: a number of seconds")))
        })
        .transpose()
}

/// The tune's own flags as options.
fn tune_options(m: &ArgMatches) -> Result<TuneOptions, clap::Error> {
    let mut o = TuneOptions::default();
    o.server_cmd = one(m, "server-cmd");
    o.params = many(m, "param")
        .iter()
        .map(|p| parse_param(p).map_err(value_error))
        .collect::<Result<_, _>>()?;
    o.baseline = one(m, "baseline")
        .map(|b| parse_assignments(&b).map_err(value_error))
        .transpose()?;
    o.baseline_cmd = one(m, "baseline-cmd");
    o.baseline_url = one(m, "baseline-url");
    o.config_urls = many(m, "config-url")
        .iter()
        .map(|c| {
            c.split_once('=')
                .map(|(n, u)| (n.to_string(), u.to_string()))
                .ok_or_else(|| value_error(format!("--config-url {c:?}: NAME=URL")))
        })
        .collect::<Result<_, _>>()?;
    for flag in ["concurrency", "request-rate"] {
        let levels = many(m, flag);
        if !levels.is_empty() {
            o.load = Some(TuneLoad {
                flag: flag.into(),
                levels,
            });
        }
    }
    o.port = one(m, "port")
        .map(|p| {
            p.parse::<u16>()
                .map_err(|e| value_error(format!("--port {p:?}: {e}")))
        })
        .transpose()?;
    o.host = one(m, "server-host")
        .map(|h| {
            h.parse::<IpAddr>()
                .map_err(|e| value_error(format!("--server-host {h:?}: {e}")))
        })
        .transpose()?;
    o.ready_timeout = seconds(m, "ready-timeout")?;
    o.stop_grace = seconds(m, "stop-grace")?;
    Ok(o)
}

impl FromArgMatches for TuneArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut args = TuneArgs {
            options: tune_options(m)?,
            config: one(m, "config").map(PathBuf::from),
            dry_run: m.get_flag("dry-run"),
            ..TuneArgs::default()
        };
        let run_flags =
            flags::all().filter(|f| !matches!(f.long, "url" | "concurrency" | "request-rate"));
        apply_matches(&mut args.spec, m, run_flags)?;
        args.given = flags::all()
            .filter(|f| f.long != "url")
            .filter(|f| m.value_source(f.long) == Some(ValueSource::CommandLine))
            .map(|f| f.long.to_string())
            .collect();
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl TuneObserver for Console {
    fn tune_event(&mut self, event: &TuneEvent<'_>) {
        eprintln!("tune: {event}");
    }
}

/// The plan: every configuration with its server, and the runs.
fn print_plan(plan: &TunePlan) {
    let m = &plan.manifest;
    println!(
        "tune {}: {} configurations x {} {} levels ({}); temperature {}; {} warmup request(s) \
         before every run",
        plan.dir.display(),
        plan.configurations.len(),
        m.load_levels.len(),
        m.load_flag,
        m.load_levels.join(", "),
        m.temperature.as_deref().unwrap_or("the server's default"),
        m.warmup_requests,
    );
    for c in &m.configurations {
        match &c.command {
            Some(command) => println!("  {:<20} {command}  ({})", c.name, c.url),
            None => println!("  {:<20} {}", c.name, c.url),
        }
    }
}

/// The tune's spec: the file's options under the flags', its `[profile]`
/// under the flags given.
fn build(args: TuneArgs) -> Result<TunePlan, CliError> {
    let file = match &args.config {
        Some(path) => TuneFile::read(path)?,
        None => TuneFile::default(),
    };
    let mut spec = args.spec;
    let mut set = args.given.clone();
    for (flag, value) in &file.profile {
        if !args.given.contains(flag) {
            spec = spec.with(flag, value)?;
            set.insert(flag.clone());
        }
    }
    spec.apply_speed_bench_py_defaults(&set);
    let dir = spec
        .outputs
        .output_artifact_dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(DEFAULT_DIR));
    let options = args.options.over(file.options);
    let mut tune = options.into_spec(spec, dir)?;
    // Warmup as the user set it (0 included), else the tune's default.
    if set.contains("warmup-request-count") {
        tune.warmup = Some(tune.base.load.warmup_request_count);
    }
    Ok(tune.plan()?)
}

/// Runs `speedbench tune`.
pub(crate) async fn run(args: TuneArgs) -> Result<Outcome, CliError> {
    let dry_run = args.dry_run;
    let plan = build(args)?;
    print_plan(&plan);
    if dry_run {
        println!("every configuration and run checked; nothing was started (--dry-run)");
        return Ok(Outcome::Done);
    }
    let dir = plan.dir.clone();
    let stop = StopHandle::new();
    let signals = stop_on_signals(stop.clone(), crate::profile::notify_signal);
    let outcome = plan.run(&stop, &mut Console::default()).await?;
    println!("\n=== the tune's answer ({}) ===", dir.display());
    let mut spec = ReportSpec::new(vec![dir.clone()]);
    spec.format = speedbench_run::report::ReportFormat::Console;
    let answered = report(spec, &mut crate::report::Terminal).await;
    if let Some(why) = &outcome.abandoned {
        return Err(fail("the tune", why.clone()));
    }
    if outcome.stopped {
        return Ok(Outcome::Interrupted(
            signals.exit_code().unwrap_or(EXIT_SIGINT),
        ));
    }
    answered?;
    let problems = outcome.problems();
    if !problems.is_empty() {
        for p in &problems {
            eprintln!("error: {p}");
        }
        return Err(fail(
            "the tune",
            format!(
                "{} run(s) did not complete (above; tune.json keeps each); running the same \
                 command again runs only those",
                problems.len()
            ),
        ));
    }
    Ok(Outcome::Done)
}
