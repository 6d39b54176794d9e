//! [`execute`]: one run, end to end, from a checked spec and its rows to
//! the files it leaves and the figures read back from them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use speedbench_client::{
    ClientError, DatasetSampling, Engine, Load, ProfileRun, Progress, ReadBack, RunOutcome,
    RunStatus, RunSummary, StopHandle, Target, discover_model_with_headers, new_run_id,
    run_profile,
};
use speedbench_dataset::Dataset;
use speedbench_metrics::{
    RecordsDigest, RunMetrics, SpeedBenchPyConfig, SpeedBenchPyOutput, has_llamacpp_timings,
};
use speedbench_record::{RecordError, read_records_file};
use speedbench_report::write_speed_bench_py_json;

use crate::dataset::select_rows;
use crate::error::RunError;
use crate::finished::{RunReport, RunResults, ShownPaths};
use crate::observer::{EngineSource, Observer};
use crate::spec::{EngineChoice, RunSpec};
use crate::staging::{StagedRun, Uploaded};
use crate::valid_run::{RunDir, ValidOutputs};
use crate::validate::{ValidRun, hinted};

/// Loads, validates and runs `spec`: [`RunSpec::validate`],
/// [`RunSpec::load_dataset`], then [`execute`].
pub async fn run_spec(
    spec: &RunSpec,
    stop: StopHandle,
    observer: &mut dyn Observer,
) -> Result<RunReport, RunError> {
    let valid = spec.validate()?;
    let dataset = spec.load_dataset(observer).await?;
    execute(valid, dataset, stop, observer).await
}

/// Runs a checked spec over `dataset` (already loaded; narrowed here to
/// the spec's categories and limit): the served model asked for, the
/// store checked, the open-file limit checked, the engine found and the
/// preflight sent, then the run, the upload and the read-back. `stop`
/// ends the run early, keeping every finished request. Everything comes
/// from `valid`, resolved at validation; the spec is not read again.
pub async fn execute(
    valid: ValidRun,
    dataset: Dataset,
    stop: StopHandle,
    observer: &mut dyn Observer,
) -> Result<RunReport, RunError> {
    for warning in valid.warnings() {
        observer.warning(warning);
    }
    let fields = valid.target.shown_extra_body();
    let forced = valid.spec.forced_output(&fields);
    let own_lengths = (dataset.conversations.iter())
        .any(|c| c.max_output_tokens.is_some() || !c.reference_replies.is_empty());
    observer.sampling(&match forced {
        Some(output) => crate::text::forced_output_line(&output, &fields),
        None if own_lengths => crate::text::row_lengths_line(valid.target.max_tokens, &fields),
        None => crate::text::sampling_line(valid.target.max_tokens, &fields),
    });
    let mut valid = valid;
    // Rows asking for their replies' lengths, counted before `--limit`
    // keeps the first of those inside the limits.
    let counted_replies = (dataset.conversations.iter()).any(|c| !c.reference_replies.is_empty());
    let dataset = crate::replies::count_replies(&mut valid, dataset, observer).await?;
    let mut dataset = select_rows(valid.limit, &valid.categories, dataset, observer)?;
    // A trace: its window's rows, reshaped by a synthesis, then scheduled.
    if let Some(window) = &valid.trace_window {
        dataset = window.keep(dataset, observer)?;
    }
    if let Some(s) = &valid.synthesis {
        // Refuses a synthesis that leaves no row.
        crate::shaping::synthesize(s, valid.load.random_seed, &mut dataset, observer)?;
    }
    if let Some(window) = &valid.trace_window {
        let speedup = valid.synthesis.as_ref().map_or(1.0, |s| s.speedup_ratio);
        window.schedule(&dataset, &mut valid.load, speedup);
    }
    // A trace's rows given by length, built against this run's server.
    let (dataset, built) = (valid.spec)
        .trace_prompts(dataset, counted_replies, observer)
        .await?;
    if let Some(built) = built {
        valid.description.config["trace_prompts"] = built;
    }
    if let Some(line) = recycling(&valid.load, &dataset) {
        observer.warning(&line);
    }
    let prepared = prepare(valid, dataset, &stop, observer).await?;
    let progress = Arc::new(Progress::default());
    observer.run_started(progress.clone());
    let result = run_profile(prepared.run, stop, progress.clone()).await;
    observer.run_ended();
    let outcome = result.map_err(run_error)?;
    finish(outcome, prepared.finishing, progress, observer).await
}

/// A run ready to send its first request.
struct Prepared {
    run: ProfileRun,
    finishing: Finishing,
}

/// What the end of a run needs of its start.
struct Finishing {
    staged: Option<StagedRun>,
    py_config: SpeedBenchPyConfig,
    /// Where speed_bench.py's JSON goes, and whether it may replace a file.
    speed_bench_py: Option<PathBuf>,
    overwrite: bool,
    /// The served model's name.
    model: String,
}

async fn prepare(
    valid: ValidRun,
    dataset: Dataset,
    stop: &StopHandle,
    observer: &mut dyn Observer,
) -> Result<Prepared, RunError> {
    let ValidRun {
        mut target,
        load,
        max_error_rate,
        engine,
        preflight,
        scrape,
        outputs,
        description,
        figures,
        gpu_telemetry,
        extensions,
        ..
    } = valid;
    target.model = served_model(&target).await?;
    let run_id = outputs.run_id.clone().unwrap_or_else(new_run_id);
    let staged = stage(&outputs, observer).await?;
    let output_dir = run_dir(staged.as_ref(), &outputs, &dataset, &load, &run_id);
    let open_file_limit = check_open_files(&load, &dataset)?;
    // Before the scrape's first sample: the preflight's tokens stay out of
    // the run's counters; the engine decides what is scraped.
    let engine = know_engine(engine, preflight, &mut target, stop, observer).await?;
    let scrape = scrape.map(|plan| plan.config_for(&target));
    check_gpu_telemetry(gpu_telemetry.as_ref()).await?;
    if let Some(files) = &outputs.user_files {
        write_user_files(files, &output_dir, &target, observer)?;
    }
    let config = description.config(&target.model, engine);
    let py_config = description.speed_bench_py(&target.model, &dataset.name);
    let model = target.model.clone();
    let mut run = ProfileRun::new(dataset, target, &output_dir)
        .with_load(load)
        .with_run_id(run_id)
        .with_config(config)
        .with_overwrite(outputs.overwrite)
        .with_export_level(outputs.export_level)
        .with_http_trace(outputs.export_http_trace)
        .with_figures(figures);
    run.server_metrics = scrape;
    run.gpu_telemetry = gpu_telemetry;
    run.max_error_rate = max_error_rate;
    run.open_file_limit = open_file_limit;
    Ok(Prepared {
        run: extensions.attach(run),
        finishing: Finishing {
            staged,
            py_config,
            speed_bench_py: outputs.speed_bench_py,
            overwrite: outputs.overwrite,
            model,
        },
    })
}

/// Where the run writes: the staging directory of a store URL, else the
/// directory given, else `artifacts/<dataset>-<run id>` (a shard's id).
fn run_dir(
    staged: Option<&StagedRun>,
    outputs: &ValidOutputs,
    dataset: &Dataset,
    load: &speedbench_client::Load,
    run_id: &str,
) -> PathBuf {
    if let Some(staged) = staged {
        return staged.dir().to_path_buf();
    }
    let dir_id = load
        .shard
        .map_or_else(|| run_id.to_string(), |s| s.run_id(run_id));
    outputs
        .dir
        .local(&dataset.name, &dir_id)
        .expect("a run directory that is not a store URL is local")
}

/// The model named (validation put it on the target), or the one the
/// server serves.
pub(crate) async fn served_model(target: &Target) -> Result<String, RunError> {
    if !target.model.is_empty() {
        return Ok(target.model.clone());
    }
    discover_model_with_headers(
        &target.base_url,
        target.api_key.as_ref(),
        &target.headers,
        &target.extra_roots_pem,
    )
    .await
    .map_err(|e| hinted("finding the served model (give --model to skip this)", e))
}

/// Before anything is sent: a store that refuses the credentials or
/// already holds a run stops the run here.
// Without the `store` feature no store URL exists: what follows `begin`
// cannot run, and the compiler says so.
#[cfg_attr(not(feature = "store"), allow(unused_variables))]
async fn stage(
    outputs: &ValidOutputs,
    observer: &mut dyn Observer,
) -> Result<Option<StagedRun>, RunError> {
    let RunDir::Store(url) = &outputs.dir else {
        return Ok(None);
    };
    let staged =
        StagedRun::begin(url.clone(), outputs.staging_dir.clone(), outputs.overwrite).await?;
    observer.staging(staged.url(), staged.dir());
    Ok(Some(staged))
}

/// What a load that asks for more than the rows hold repeats, in words:
/// recycled rows send their prompts again (a server's prompt cache may
/// answer them faster), which a user should know rather than find.
fn recycling(load: &Load, dataset: &Dataset) -> Option<String> {
    let rows = dataset.conversations.len() as u64;
    let turns: u64 = dataset
        .conversations
        .iter()
        .map(|c| c.turns.len() as u64)
        .sum();
    let (asked, held, what, flag) = match (load.num_conversations, load.request_count) {
        (Some(n), _) if n > rows => (n, rows, "conversations", "--num-conversations"),
        (None, Some(n)) if n > turns => (n, turns, "requests", "--request-count"),
        _ => return None,
    };
    let again = match load.sampling {
        DatasetSampling::Sequential => "sent again, in order",
        DatasetSampling::Shuffle => "sent again, each pass in a fresh order",
        _ => "drawn with replacement",
    };
    (held > 0).then(|| {
        format!(
            "{flag} {asked} is more than the {held} {what} the selected rows hold: rows are \
             {again} (about {:.1} times each), repeating their prompts",
            asked as f64 / held as f64
        )
    })
}

/// The open-file limit (raised as far as it goes), after checking before
/// anything is sent that the load fits it.
pub(crate) fn check_open_files(load: &Load, dataset: &Dataset) -> Result<Option<u64>, RunError> {
    let limit = crate::process::raise_open_files(0);
    if let Some(limit) = limit {
        speedbench_client::check_open_files(load, dataset, limit).map_err(run_error)?;
    }
    Ok(limit)
}

/// The client's error from a run, with what to change where a field does.
fn run_error(e: ClientError) -> RunError {
    let context = match &e {
        // The library names the directory and what it found; the way out
        // is the overwrite field.
        ClientError::Record(RecordError::RunDirOccupied { .. }) => {
            "not overwriting a run (give --overwrite to replace it)".to_string()
        }
        ClientError::OpenFileLimit { allowed, .. } => format!(
            "refused before the first request (lower --concurrency or --max-concurrency to at \
             most {allowed}, raise the hard limit with `ulimit -Hn`, or run the load as shards, \
             --shard I/N, in several processes: docs/distributed.md)"
        ),
        _ => "running the profile".to_string(),
    };
    match e {
        ClientError::Record(source @ RecordError::RunDirOccupied { .. }) => {
            RunError::Record { context, source }
        }
        source => RunError::Client { context, source },
    }
}

/// Finds the engine (named, else from what the server answers), sets it
/// on the target, and unless the preflight is off sends one small request
/// to see whether per-request acceptance comes back. A failed preflight
/// is reported, not fatal: the run records its own failures.
async fn know_engine(
    choice: EngineChoice,
    preflight: bool,
    target: &mut Target,
    stop: &StopHandle,
    observer: &mut dyn Observer,
) -> Result<Engine, RunError> {
    let engine = match choice {
        EngineChoice::Named(engine) => {
            observer.engine(engine, &EngineSource::Named);
            engine
        }
        EngineChoice::Auto => {
            observer.waiting(&format!(
                "finding the engine: asking {} at once, at most {} s (--engine NAME skips this)",
                speedbench_client::PROBE_PATHS.join(", "),
                speedbench_client::PROBE_BUDGET.as_secs()
            ));
            let detected = speedbench_client::detect_engine(target);
            let guess = until_stopped(stop, "finding the engine", detected)
                .await?
                .map_err(|e| hinted("finding the engine (give --engine to skip this)", e))?;
            observer.engine(
                guess.engine,
                &EngineSource::Detected(guess.evidence.clone()),
            );
            guess.engine
        }
    };
    target.engine = Some(engine);
    if preflight {
        let timeout = target.timeout.min(speedbench_client::PREFLIGHT_TIMEOUT);
        observer.waiting(&format!(
            "preflight: one small request to see whether acceptance comes back per request, at \
             most {} s (--no-preflight skips it)",
            timeout.as_secs()
        ));
        let sent = speedbench_client::preflight(target, engine);
        let check = until_stopped(stop, "sending the preflight", sent)
            .await?
            .map_err(|e| hinted("the preflight request (give --no-preflight to skip it)", e))?;
        observer.preflight(&check);
    }
    Ok(engine)
}

/// `work`'s result, or [`RunError::Stopped`] once `stop` is pressed while
/// it is under way (`during` says what was being done).
async fn until_stopped<T>(
    stop: &StopHandle,
    during: &str,
    work: impl std::future::Future<Output = T>,
) -> Result<T, RunError> {
    tokio::select! {
        biased;
        _ = stop.stopped() => Err(RunError::Stopped { during: during.to_string() }),
        done = work => Ok(done),
    }
}

/// After the last request: every finished run goes up to its store,
/// whatever its outcome; the records are read back once for the summary
/// and speed_bench.py's JSON; the observer sees the whole report.
async fn finish(
    mut outcome: RunOutcome,
    start: Finishing,
    progress: Arc<Progress>,
    observer: &mut dyn Observer,
) -> Result<RunReport, RunError> {
    let Finishing {
        staged,
        py_config,
        speed_bench_py: py_path,
        overwrite,
        model,
    } = start;
    // The store's URLs once the upload succeeded; the local files, which
    // hold the run, when it did not.
    let mut shown = shown_paths(&outcome, staged.as_ref());
    let mut failure = None;
    let mut uploaded: Option<Uploaded> = None;
    if let Some(staged) = staged {
        match staged.finish().await {
            Ok((report, done)) => {
                observer.uploaded(&report);
                uploaded = Some(done);
            }
            Err(e) => {
                shown = shown_paths(&outcome, None);
                failure = Some(e);
            }
        }
    }
    let (results, model) = read_back(&mut outcome, model, py_path.is_some())?;
    let mut speed_bench_py = None;
    match write_output(py_path, py_config, &results, overwrite) {
        Some(Ok(path)) => speed_bench_py = Some(path),
        // The output error comes first; the upload's after it.
        Some(Err(e)) => failure = Some(e),
        None => {}
    }
    let report = RunReport {
        outcome,
        model,
        progress,
        results,
        speed_bench_py,
        shown,
        failure,
    };
    observer.finished(&report);
    // The staging directory goes only when nothing failed after the run
    // (a failed --output keeps it) and nothing reads it any more.
    if report.failure.is_none()
        && let Some(done) = uploaded
        && let Some(warning) = done.clean_up()
    {
        observer.warning(&warning);
    }
    Ok(report)
}

/// `--output` (speed_bench.py's JSON) at `path`, when asked for and the
/// records were read back for it.
fn write_output(
    path: Option<PathBuf>,
    config: SpeedBenchPyConfig,
    results: &RunResults,
    overwrite: bool,
) -> Option<Result<PathBuf, RunError>> {
    match (path, results) {
        (
            Some(path),
            RunResults::Records {
                held: Some(records),
                ..
            },
        ) => Some(write_speed_bench_py(path, config, records, overwrite)),
        _ => None,
    }
}

/// speed_bench.py's `--output` JSON of the run's records, at `path`.
fn write_speed_bench_py(
    path: PathBuf,
    config: SpeedBenchPyConfig,
    records: &[speedbench_record::RequestRecord],
    overwrite: bool,
) -> Result<PathBuf, RunError> {
    let json = SpeedBenchPyOutput::from_records(config, records);
    write_speed_bench_py_json(&path, &json, overwrite).map_err(|source| RunError::Report {
        context: "writing --output".into(),
        source,
    })?;
    Ok(path)
}

fn shown_paths(outcome: &RunOutcome, staged: Option<&StagedRun>) -> ShownPaths {
    let shown = |path: &Path| match staged {
        Some(staged) => staged.shown(path),
        None => path.display().to_string(),
    };
    ShownPaths {
        records: shown(&outcome.records_path),
        manifest: shown(&outcome.manifest_path),
        summary: outcome.summary_path.as_deref().map(shown),
        raw_responses: outcome.raw_responses_path.as_deref().map(shown),
        http_trace: outcome.http_trace_path.as_deref().map(shown),
    }
}

/// The figures and matrices' digest (or, when the records were not kept,
/// `summary.json`) as the client read them back, taken from the outcome;
/// the file is read again where the client could not read it (for the
/// error), and for the records themselves where a table needs each one
/// (llama.cpp's timings, or `--output` when `output` is asked). The
/// model's name as the records' manifest gives it.
fn read_back(
    outcome: &mut RunOutcome,
    model: String,
    output: bool,
) -> Result<(RunResults, String), RunError> {
    if outcome.records_removed {
        return Ok((summary_only(outcome)?, model));
    }
    let back = match outcome.read_back.take() {
        Some(back) => back,
        None => match read_back_again(&outcome.records_path) {
            Ok(back) => back,
            // The failure is already reported; the summary cannot be shown.
            Err(e) if outcome.status == RunStatus::Failed => {
                return Ok((RunResults::Unreadable(e.to_string()), model));
            }
            Err(source) => {
                return Err(RunError::Record {
                    context: "reading the records back".into(),
                    source,
                });
            }
        },
    };
    let held = match back.llamacpp_timings || output {
        true => Some(
            read_records_file(&outcome.records_path)
                .map_err(|source| RunError::Record {
                    context: "reading the records back".into(),
                    source,
                })?
                .records,
        ),
        false => None,
    };
    let served = back.manifest.as_ref().map_or(model, |m| m.model.clone());
    let label = speedbench_runs::display_model(&served);
    let results = RunResults::Records {
        metrics: back.metrics,
        label,
        digest: Box::new(back.digest),
        held,
    };
    Ok((results, served))
}

/// What the client reads back of a records file it could not read when
/// the run closed (the figures without the run's options).
fn read_back_again(path: &Path) -> Result<ReadBack, speedbench_record::RecordError> {
    let records = read_records_file(path)?;
    Ok(ReadBack {
        metrics: RunMetrics::from_records(&records.records),
        digest: RecordsDigest::of(&records.records),
        llamacpp_timings: has_llamacpp_timings(&records.records),
        manifest: records.manifest,
    })
}

/// The figures of `summary.json`, for a run whose records were not kept.
fn summary_only(outcome: &RunOutcome) -> Result<RunResults, RunError> {
    let Some(path) = &outcome.summary_path else {
        return Ok(RunResults::Nothing);
    };
    let text = std::fs::read_to_string(path).map_err(|source| RunError::Io {
        context: format!("reading {}", path.display()),
        source,
    })?;
    let summary: RunSummary = serde_json::from_str(&text)
        .map_err(|e| RunError::invalid(format!("reading {}", path.display()), e.to_string()))?;
    Ok(RunResults::SummaryOnly {
        metrics: summary.metrics,
        path: path.clone(),
    })
}

/// `--user-files` rendered into the run directory, each said.
fn write_user_files(
    files: &crate::user_files::UserFiles,
    dir: &std::path::Path,
    target: &Target,
    observer: &mut dyn Observer,
) -> Result<(), RunError> {
    let epoch_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let run = crate::user_files::RunContext {
        dir,
        model: &target.model,
        endpoint_url: &target.base_url.to_string(),
        epoch_s,
    };
    for path in files.write(&run)? {
        observer.waiting(&format!("wrote {} (--user-files)", path.display()));
    }
    Ok(())
}

/// `--gpu-telemetry`: each exporter answers as DCGM's does.
async fn check_gpu_telemetry(
    gpu: Option<&speedbench_client::scrape::Scrape>,
) -> Result<(), RunError> {
    match gpu {
        Some(gpu) => speedbench_client::scrape::check_dcgm(gpu)
            .await
            .map_err(|why| RunError::invalid("--gpu-telemetry", why)),
        None => Ok(()),
    }
}
