//! `speedbench`: benchmark speculative decoding on OpenAI-compatible servers.
//!
//! A thin command-line shell over the speedbench crates; every measurement
//! and formula lives in those crates.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod compare;
mod console;
mod dashboard;
mod datasets;
mod demo;
mod kube;
mod logging;
mod profile;
mod progress;
mod recover;
mod report;
mod sim;
mod sweep;
mod tune;

/// Benchmark speculative decoding on OpenAI-compatible inference servers.
#[derive(Parser)]
#[command(name = "speedbench", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run a dataset against a server and record every request.
    Profile(Box<profile::ProfileArgs>),
    /// Start the simulated server in-process and profile the bundled fixture.
    Demo(demo::DemoArgs),
    /// Serve the simulated OpenAI-compatible server until Ctrl-C.
    Sim(sim::SimArgs),
    /// List the registered datasets; resolve them into the cache; import pre-staged bundles.
    Datasets(datasets::DatasetsArgs),
    /// Build the acceptance matrix from one or more run directories.
    Report(report::ReportArgs),
    /// Compare a baseline run with a speculative run: speedups, lossless check, intervals.
    Compare(compare::CompareArgs),
    /// Kubernetes: print the Indexed Job of a sharded run (docs/distributed.md).
    Kube(kube::KubeArgs),
    /// Recover a killed run: its crash journal becomes records.parquet, marked interrupted.
    Recover(recover::RecoverArgs),
    /// Find the speculative configuration to deploy: start each one's server, run every load level, compare with the baseline per category (docs/tune.md).
    Tune(Box<tune::TuneArgs>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    logging::init();
    // One socket per in-flight request (and per connection for `sim`).
    let open_files_needed = match &cli.command {
        Command::Profile(args) => args.spec.load.concurrency as u64 + 256,
        Command::Sim(_) => u64::MAX,
        _ => 0,
    };
    speedbench::process::raise_open_files(open_files_needed);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Profile(args) => match args.config.clone() {
                Some(file) => sweep::run(&file, &args).await,
                None if args.spec.repeat.num_profile_runs > 1 => {
                    sweep::run_repeated(&args.spec).await
                }
                None => profile::run(*args).await,
            },
            Command::Demo(args) => demo::run(args).await,
            Command::Sim(args) => sim::run(args).await,
            Command::Report(args) => report::run(args).await,
            Command::Datasets(args) => datasets::run(args).await,
            Command::Compare(args) => compare::run(args).await,
            Command::Kube(args) => kube::run(args),
            Command::Recover(args) => recover::run(args),
            Command::Tune(args) => tune::run(*args).await,
        }
    });
    match result {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::Interrupted(code)) => ExitCode::from(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// How a command ended when it did not fail.
pub enum Outcome {
    /// Finished normally.
    Done,
    /// Stopped by a signal after saving what was measured; the exit code
    /// it calls for (130 for SIGINT, 143 for SIGTERM).
    Interrupted(u8),
}

/// An error with the context of what the command was doing.
pub struct CliError {
    /// What was being done; `None` when the error says it itself (the
    /// run library's errors do).
    context: Option<String>,
    source: Box<dyn std::error::Error>,
}

impl From<speedbench_run::RunError> for CliError {
    fn from(e: speedbench_run::RunError) -> CliError {
        CliError {
            context: None,
            source: Box::new(e),
        }
    }
}

impl std::fmt::Display for CliError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Many errors already quote their cause in their own message.
        let message = speedbench_run::error_message(self.source.as_ref());
        match &self.context {
            Some(context) => write!(f, "{context}: {message}"),
            None => f.write_str(&message),
        }
    }
}

/// Adds context to any error, for `?` in the commands.
pub trait Context<T> {
    /// Wraps the error with what was being done.
    fn context(self, what: impl Into<String>) -> Result<T, CliError>;
}

impl<T, E: std::error::Error + 'static> Context<T> for Result<T, E> {
    fn context(self, what: impl Into<String>) -> Result<T, CliError> {
        self.map_err(|e| CliError {
            context: Some(what.into()),
            source: Box::new(e),
        })
    }
}

/// A plain-message error.
#[derive(Debug)]
pub struct Message(pub String);

impl std::fmt::Display for Message {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

/// Builds a [`CliError`] from a context and a message.
pub fn fail(context: &str, message: impl Into<String>) -> CliError {
    CliError {
        context: Some(context.into()),
        source: Box::new(Message(message.into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Outer(Message);

    impl std::fmt::Display for Outer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "outer failed: {}", self.0)
        }
    }

    impl std::error::Error for Outer {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_cause_already_quoted_is_not_printed_twice() {
        let quoted: Result<(), Outer> = Err(Outer(Message("disk full".into())));
        let err = quoted.context("writing").unwrap_err();
        assert_eq!(err.to_string(), "writing: outer failed: disk full");
        let plain: Result<(), Message> = Err(Message("no such file".into()));
        assert_eq!(
            plain.context("reading").unwrap_err().to_string(),
            "reading: no such file"
        );
    }
}
