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

use std::path::Path;
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

/// The Python packages the pinned prepare step needs.
pub const PYTHON_PACKAGES: &str = "datasets pandas numpy tiktoken";

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
    let input: Vec<(Value, String)> = rows
        .rows
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
        .collect();
    check_sources(config, input.iter().map(|(q, s)| (q, s.as_str())))?;

    let (count, sources) = why.unwrap_or((0, String::new()));
    let python = options.python.display().to_string();
    let unavailable_because = |problem: String, source: Option<std::io::Error>| {
        DatasetError::from(ResolveError::PythonUnavailable {
            config: config.to_string(),
            problem,
            count,
            sources: sources.clone(),
            source,
        })
    };
    let unavailable = |problem: String| unavailable_because(problem, None);
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
    let redactor = Redactor::for_hub(hub);
    let spawn_failed = |e: std::io::Error| {
        let problem = if e.kind() == std::io::ErrorKind::NotFound {
            format!("the interpreter `{python}` was not found")
        } else {
            format!("the interpreter `{python}` could not be started: {e}")
        };
        unavailable_because(problem, Some(e))
    };

    // Is the interpreter usable at all? (Before any download.)
    let mut probe = python_command(&options.python, hub);
    probe.arg(&driver).arg("--probe");
    let out = run_child(probe, &redactor).await.map_err(spawn_failed)?;
    if out.status.code() == Some(EXIT_MISSING) {
        let module = out.missing.unwrap_or_else(|| "a package".into());
        return Err(unavailable(format!("`{python}` cannot import {module}")));
    }
    if !out.status.success() {
        return Err(unavailable(format!(
            "`{python}` could not run speedbench's driver ({}): {}",
            out.status,
            out.tail.join(" | ")
        )));
    }
    tracing::debug!(
        "prepare step: {python}: {}",
        out.first_stdout.as_deref().unwrap_or("ready")
    );

    let (script, by) = match &options.script {
        PrepareScript::Pinned(pin) => {
            let path =
                fetch_prepare_script(pin, &dataset_cache.join("upstream"), hub.offline).await?;
            let by = format!(
                "by the upstream prepare step ({}, sha256 {})",
                pin.url,
                pin.sha256.to_ascii_lowercase()
            );
            (path, by)
        }
        PrepareScript::Local(path) => {
            let sha = sha256_file(path)?;
            tracing::info!(
                script = %path.display(),
                sha256 = %sha,
                "prepare step: running a local prepare script as given (not checked against the pin)"
            );
            (
                path.clone(),
                format!(
                    "by the local prepare script {} (sha256 {sha})",
                    path.display()
                ),
            )
        }
    };

    let output = work.path().join(format!("{config}.jsonl"));
    let mut cmd = python_command(&options.python, hub);
    cmd.arg(&driver)
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
    let out = run_child(cmd, &redactor).await.map_err(spawn_failed)?;
    if out.status.code() == Some(EXIT_MISSING) && out.missing.is_some() {
        return Err(unavailable(format!(
            "`{python}` cannot import {} (needed by {})",
            out.missing.unwrap_or_default(),
            script.display()
        )));
    }
    if !out.status.success() {
        return Err(DatasetError::from(ResolveError::PrepareFailed {
            config: config.to_string(),
            script,
            status: out.status.to_string(),
            stderr_tail: out.tail.join("\n"),
        }));
    }
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
