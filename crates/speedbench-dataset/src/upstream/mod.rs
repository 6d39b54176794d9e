//! The upstream prepare step: SPEED-Bench resolution by the prepare script
//! the dataset's consumers use, run by speedbench.
//!
//! Most SPEED-Bench sources cannot be rebuilt natively (see
//! [`crate::resolve::Support`]): their prompts come from templates, numpy
//! PCG64 and pandas sampling, Python's Mersenne Twister and o200k token
//! counts inside NeMo-Skills' `nemo_skills/dataset/speed-bench/prepare.py`.
//! Like AIPerf, which vendors that script and calls it, speedbench runs the
//! script itself, at a pinned commit and sha256, and consumes its output:
//!
//! 1. every row's `source` is screened: a URL must be on one of
//!    [`ALLOWED_SOURCE_HOSTS`] (the prepare step fetches it);
//! 2. the interpreter (`--python`, `SPEEDBENCH_PYTHON`, default `python3`)
//!    is probed for `datasets` and `numpy`;
//! 3. the script is downloaded from [`ScriptPin::url`] with speedbench's own
//!    HTTP stack and refused unless its sha256 is [`ScriptPin::sha256`]; it
//!    is cached as `<dataset cache>/upstream/prepare-<sha256 prefix>.py`,
//!    written atomically and re-verified on every reuse. A local script
//!    (`--prepare-script`, `SPEEDBENCH_PREPARE_SCRIPT`) is run as given;
//! 4. a short driver of ours (`driver.py`, written to a temporary
//!    directory) imports the script as a module, builds the config's
//!    `datasets.Dataset` from the Parquet files speedbench downloaded at
//!    [`SPEED_BENCH_REVISION`](crate::registry::SPEED_BENCH_REVISION),
//!    re-seeds `HLE_RNG`, calls `_resolve_external_data(dataset, config)` and
//!    writes `messages` rows as JSON lines;
//! 5. the output must have the config's rows, the same `question_id`s in the
//!    same order, and no placeholder left ([`validate_output`]) before it is
//!    cached; nothing partial or invalid is ever written.
//!
//! The child inherits the environment, with the Hub settings speedbench
//! uses (`HF_ENDPOINT`, `HF_TOKEN`, `HF_HOME`, `HF_HUB_CACHE`,
//! `HF_HUB_OFFLINE`) set in it, never on its command line. Its output is
//! relayed line by line as `info` logs, with any token redacted.

mod child;
mod options;
mod output;
mod redact;
mod script;
mod sources;

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde_json::Value;

use crate::DatasetError;
use crate::error::ResolveError;
use crate::files::sha256_file;
use crate::hub::HubConfig;
use crate::resolve::ConfigRows;

use child::{python_command, run_child};
use redact::Redactor;

pub use options::{
    DEFAULT_GITHUB_RAW_ENDPOINT, PREPARE_SCRIPT_COMMIT, PREPARE_SCRIPT_PATH, PREPARE_SCRIPT_REPO,
    PREPARE_SCRIPT_SHA256, PrepareScript, ScriptPin, UpstreamOptions,
};
pub use output::validate_output;
pub use script::fetch_prepare_script;
pub use sources::{ALLOWED_SOURCE_HOSTS, check_sources, untrusted_source};

pub use crate::pins::PYTHON_PACKAGES;

/// The driver, written next to nothing else in a temporary directory.
const DRIVER: &str = include_str!("driver.py");
/// The driver's exit status for a missing Python package.
const EXIT_MISSING: i32 = 3;
/// The driver's marker line for a missing Python package.
const MISSING_MARKER: &str = "speedbench-driver: missing module: ";

/// Resolves `config` by running the prepare step on its rows; returns the
/// validated JSONL and how it was made. `why` is the native resolver's
/// verdict in auto mode (rows and sources it cannot rebuild), quoted if
/// Python turns out to be missing.
pub(crate) async fn run_prepare_step(
    config: &str,
    rows: &ConfigRows,
    options: &UpstreamOptions,
    hub: &HubConfig,
    dataset_cache: &Path,
    why: Option<(usize, String)>,
) -> Result<(String, String), DatasetError> {
    let input = ids_and_sources(rows);
    check_sources(config, input.iter().map(|(q, s)| (q, s.as_str())))?;
    let step = PrepareStep::new(config, options, hub, why)?;
    // Is the interpreter usable at all? (Before any download.)
    step.probe().await?;
    let (script, by) = prepare_script(options, dataset_cache, hub).await?;
    let output = step.work.path().join(format!("{config}.jsonl"));
    let mut cmd = python_command(&options.python, hub);
    cmd.arg(&step.driver)
        .arg("--script")
        .arg(&script)
        .arg("--config")
        .arg(config)
        .arg("--output")
        .arg(&output)
        .args(&rows.paths);
    tracing::warn!(
        "resolving SPEED-Bench {config:?} with the upstream prepare step ({}): it downloads \
         prompt text from the source datasets, several GB and tens of minutes for a full \
         config, once; the result is cached in {}",
        script.display(),
        dataset_cache.display()
    );
    let started = Instant::now();
    let out = run_child(cmd, &step.redactor)
        .await
        .map_err(|e| step.spawn_failed(e))?;
    step.refuse_failure(config, &script, out)?;
    let jsonl = std::fs::read_to_string(&output).map_err(|source| DatasetError::Io {
        path: output.clone(),
        source,
    })?;
    let n = validate_output(config, &input, &jsonl)?;
    tracing::info!(
        rows = n,
        seconds = started.elapsed().as_secs(),
        "prepare step: resolved SPEED-Bench {config:?}"
    );
    Ok((jsonl, by))
}

/// Each row's `question_id` and `source`, as the prepare step's output
/// must give them back.
fn ids_and_sources(rows: &ConfigRows) -> Vec<(Value, String)> {
    rows.rows
        .iter()
        .map(|(_, _, r)| {
            (
                r.get("question_id").cloned().unwrap_or(Value::Null),
                r.get("source")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            )
        })
        .collect()
}

/// One run of the prepare step: its scratch directory with speedbench's
/// driver in it, the interpreter, and what a failure to start it says.
struct PrepareStep<'a> {
    config: &'a str,
    python: String,
    /// How many rows need the step and from which sources (for the error).
    count: usize,
    sources: String,
    work: tempfile::TempDir,
    driver: PathBuf,
    redactor: Redactor,
    options: &'a UpstreamOptions,
    hub: &'a HubConfig,
}

impl<'a> PrepareStep<'a> {
    fn new(
        config: &'a str,
        options: &'a UpstreamOptions,
        hub: &'a HubConfig,
        why: Option<(usize, String)>,
    ) -> Result<PrepareStep<'a>, DatasetError> {
        let (count, sources) = why.unwrap_or((0, String::new()));
        let work = tempfile::Builder::new()
            .prefix("speedbench-prepare-")
            .tempdir()
            .map_err(|source| DatasetError::Io {
                path: std::env::temp_dir(),
                source,
            })?;
        let driver = work.path().join("speedbench_prepare_driver.py");
        std::fs::write(&driver, DRIVER).map_err(|source| DatasetError::Io {
            path: driver.clone(),
            source,
        })?;
        Ok(PrepareStep {
            config,
            python: options.python.display().to_string(),
            count,
            sources,
            work,
            driver,
            redactor: Redactor::for_hub(hub),
            options,
            hub,
        })
    }

    /// The interpreter cannot run the step: why, with the rows that need it.
    /// The step's failure: an interpreter that cannot import what the
    /// script needs, or the script's own exit with its stderr's tail.
    fn refuse_failure(
        &self,
        config: &str,
        script: &Path,
        out: child::ChildOutput,
    ) -> Result<(), DatasetError> {
        if out.status.code() == Some(EXIT_MISSING) && out.missing.is_some() {
            return Err(self.unavailable(
                format!(
                    "`{}` cannot import {} (needed by {})",
                    self.python,
                    out.missing.unwrap_or_default(),
                    script.display()
                ),
                None,
            ));
        }
        if !out.status.success() {
            return Err(DatasetError::from(ResolveError::PrepareFailed {
                config: config.to_string(),
                script: script.to_path_buf(),
                status: out.status.to_string(),
                stderr_tail: out.tail.join("\n"),
            }));
        }
        Ok(())
    }

    fn unavailable(&self, problem: String, source: Option<std::io::Error>) -> DatasetError {
        DatasetError::from(ResolveError::PythonUnavailable {
            config: self.config.to_string(),
            problem,
            count: self.count,
            sources: self.sources.clone(),
            source,
        })
    }

    /// The interpreter could not be started.
    fn spawn_failed(&self, e: std::io::Error) -> DatasetError {
        let python = &self.python;
        let problem = if e.kind() == std::io::ErrorKind::NotFound {
            format!("the interpreter `{python}` was not found")
        } else {
            format!("the interpreter `{python}` could not be started: {e}")
        };
        self.unavailable(problem, Some(e))
    }

    /// Runs the driver's `--probe`: the interpreter starts and imports
    /// what the step needs.
    async fn probe(&self) -> Result<(), DatasetError> {
        let python = &self.python;
        let mut probe = python_command(&self.options.python, self.hub);
        probe.arg(&self.driver).arg("--probe");
        let out = run_child(probe, &self.redactor)
            .await
            .map_err(|e| self.spawn_failed(e))?;
        if out.status.code() == Some(EXIT_MISSING) {
            let module = out.missing.unwrap_or_else(|| "a package".into());
            return Err(self.unavailable(format!("`{python}` cannot import {module}"), None));
        }
        if !out.status.success() {
            return Err(self.unavailable(
                format!(
                    "`{python}` could not run speedbench's driver ({}): {}",
                    out.status,
                    out.tail.join(" | ")
                ),
                None,
            ));
        }
        tracing::debug!(
            "prepare step: {python}: {}",
            out.first_stdout.as_deref().unwrap_or("ready")
        );
        Ok(())
    }
}

/// The prepare script to run (the pinned one, fetched and checked, or a
/// local one as given) and how the resolved rows say they were made.
async fn prepare_script(
    options: &UpstreamOptions,
    dataset_cache: &Path,
    hub: &HubConfig,
) -> Result<(PathBuf, String), DatasetError> {
    match &options.script {
        PrepareScript::Pinned(pin) => {
            let path =
                fetch_prepare_script(pin, &dataset_cache.join("upstream"), hub.offline).await?;
            let by = format!(
                "by the upstream prepare step ({}, sha256 {})",
                pin.url,
                pin.sha256.to_ascii_lowercase()
            );
            Ok((path, by))
        }
        PrepareScript::Local(path) => {
            let sha = sha256_file(path)?;
            tracing::info!(
                script = %path.display(),
                sha256 = %sha,
                "prepare step: running a local prepare script as given (not checked against the pin)"
            );
            Ok((
                path.clone(),
                format!(
                    "by the local prepare script {} (sha256 {sha})",
                    path.display()
                ),
            ))
        }
    }
}
