//! [`execute`]: one run, end to end, from a checked spec and its rows to
//! the files it leaves and the figures read back from them.

use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use speedbench_client::{
    ClientError, Engine, LoadConfig, ProfileRun, Progress, RunOutcome, RunStatus, RunSummary,
    StopHandle, Target, discover_model_with_headers, new_run_id, run_profile,
};
use speedbench_dataset::Dataset;
use speedbench_metrics::{RunMetrics, SpeedBenchPyConfig, SpeedBenchPyOutput};
use speedbench_record::{RecordError, RunManifest, read_records_file};
use speedbench_report::write_speed_bench_py_json;

use crate::dataset::select_rows;
use crate::error::RunError;
use crate::finished::{RunReport, RunResults, ShownPaths};
use crate::observer::{EngineSource, Observer};
use crate::spec::{DatasetSource, EngineChoice, RunSpec};
use crate::staging::{StagedRun, Uploaded, store_url};
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
/// ends the run early, keeping every finished request.
pub async fn execute(
    valid: ValidRun,
    dataset: Dataset,
    stop: StopHandle,
    observer: &mut dyn Observer,
) -> Result<RunReport, RunError> {
    let spec = valid.spec.clone();
    for warning in valid.warnings() {
        observer.warning(warning);
    }
    observer.sampling(&crate::text::sampling_line(
        valid.target.max_tokens,
        &valid.target.shown_extra_body(),
    ));
    let dataset = select_rows(&spec.dataset, &valid.categories, dataset, observer)?;
    if let Some(line) = recycling(&valid.load, &dataset) {
        observer.warning(&line);
    }
    let prepared = prepare(valid, dataset, &stop, observer).await?;
    let progress = Arc::new(Progress::default());
    observer.run_started(progress.clone());
    let result = run_profile(prepared.run, stop, progress.clone()).await;
    observer.run_ended();
    let outcome = result.map_err(run_error)?;
    let prepared = Finishing {
        staged: prepared.staged,
        py_config: prepared.py_config,
        model: prepared.model,
    };
    finish(&spec, outcome, prepared, progress, observer).await
}

/// A run ready to send its first request.
struct Prepared {
    run: ProfileRun,
    staged: Option<StagedRun>,
    py_config: SpeedBenchPyConfig,
    model: String,
}

/// What the end of a run needs of its start.
struct Finishing {
    staged: Option<StagedRun>,
    py_config: SpeedBenchPyConfig,
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
        spec,
        mut target,
        load,
        scrape,
        extensions,
        ..
    } = valid;
    target.model = served_model(&spec, &target).await?;
    let run_id = spec.outputs.run_id.clone().unwrap_or_else(new_run_id);
    let staged = stage(&spec, observer).await?;
    let output_dir = match (&staged, &spec.outputs.output_artifact_dir) {
        (Some(staged), _) => staged.dir().to_path_buf(),
        (None, Some(dir)) => dir.clone(),
        (None, None) => Path::new("artifacts").join(format!(
            "{}-{}",
            dataset.name,
            load.shard
                .map_or_else(|| run_id.clone(), |s| s.run_id(&run_id))
        )),
    };
    let open_file_limit = check_open_files(&load, &dataset)?;
    // Before the scrape's first sample: the preflight's tokens stay out of
    // the run's counters; the engine decides what is scraped.
    let engine = know_engine(&spec, &mut target, stop, observer).await?;
    let scrape = match scrape {
        Some(_) => spec.scrape_config(&target)?,
        None => None,
    };
    let config = run_config(&spec, &target, engine);
    let py_config = speed_bench_py_config(&spec, &dataset, &target);
    let model = target.model.clone();
    let mut run = ProfileRun::new(dataset, target, &output_dir)
        .with_load(load)
        .with_run_id(run_id)
        .with_config(config)
        .with_overwrite(spec.outputs.overwrite)
        .with_export_level(spec.outputs.export_level);
    run.server_metrics = scrape;
    run.max_error_rate = spec.load.max_error_rate;
    run.open_file_limit = open_file_limit;
    for sink in extensions.sinks {
        run = run.with_sink(sink);
    }
    for annotator in extensions.annotators {
        run = run.with_annotator(annotator);
    }
    Ok(Prepared {
        run,
        staged,
        py_config,
        model,
    })
}

/// The spec's model, or the one the server serves.
async fn served_model(spec: &RunSpec, target: &Target) -> Result<String, RunError> {
    match &spec.target.model {
        Some(m) => Ok(m.clone()),
        None => discover_model_with_headers(
            &target.base_url,
            target.api_key.as_ref(),
            &target.headers,
            &target.extra_roots_pem,
        )
        .await
        .map_err(|e| hinted("finding the served model (give --model to skip this)", e)),
    }
}

/// Before anything is sent: a store that refuses the credentials or
/// already holds a run stops the run here.
async fn stage(spec: &RunSpec, observer: &mut dyn Observer) -> Result<Option<StagedRun>, RunError> {
    let o = &spec.outputs;
    let url = match &o.output_artifact_dir {
        Some(dir) => store_url(dir, "--output-artifact-dir")?,
        None => None,
    };
    let Some(url) = url else {
        if o.staging_dir.is_some() {
            return Err(RunError::invalid(
                "--staging-dir",
                "only with a store URL (s3://, gs://, az://) as --output-artifact-dir",
            ));
        }
        return Ok(None);
    };
    let staged = StagedRun::begin(url, o.staging_dir.clone(), o.overwrite).await?;
    observer.staging(staged.url(), staged.dir());
    Ok(Some(staged))
}

/// What a load that asks for more than the rows hold repeats, in words:
/// recycled rows send their prompts again (a server's prompt cache may
/// answer them faster), which a user should know rather than find.
fn recycling(load: &LoadConfig, dataset: &Dataset) -> Option<String> {
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
    (held > 0).then(|| {
        format!(
            "{flag} {asked} is more than the {held} {what} the selected rows hold: rows are sent \
             again, in order (about {:.1} times each), repeating their prompts",
            asked as f64 / held as f64
        )
    })
}

/// The open-file limit (raised as far as it goes), after checking before
/// anything is sent that the load fits it.
pub(crate) fn check_open_files(
    load: &LoadConfig,
    dataset: &Dataset,
) -> Result<Option<u64>, RunError> {
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
    spec: &RunSpec,
    target: &mut Target,
    stop: &StopHandle,
    observer: &mut dyn Observer,
) -> Result<Engine, RunError> {
    let engine = match spec.target.engine {
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
    if spec.target.preflight {
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

/// What was asked for, minus anything secret (header names only, no
/// key): `run.json`'s `config`.
fn run_config(spec: &RunSpec, target: &Target, engine: Engine) -> serde_json::Value {
    let (t, d, l) = (&spec.target, &spec.dataset, &spec.load);
    let input_file = match &d.source {
        Some(DatasetSource::InputFile(p)) => Some(p.display().to_string()),
        _ => None,
    };
    let bench = match &d.source {
        Some(DatasetSource::Bench(b)) => Some(b.clone()),
        _ => None,
    };
    json!({
        "url": target.base_url.to_string(),
        "model": target.model,
        "endpoint_type": t.endpoint_type.name(),
        "streaming": t.streaming,
        "input_file": input_file,
        "public_dataset": d.public_name().ok().flatten(),
        "bench": bench,
        "categories": d.category,
        RunManifest::LIMIT_PER_CATEGORY_KEY: d.limit,
        "concurrency": l.concurrency,
        "request_count": l.request_count,
        "num_conversations": l.num_conversations,
        "warmup_request_count": l.warmup_request_count,
        "warmup_concurrency": l.warmup_concurrency,
        "osl": spec.sampling.osl,
        "extra_inputs": target.shown_extra_body(),
        "timeout_s": t.timeout_s,
        "header_names": target.headers.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>(),
        "api_key_set": target.api_key.is_some(),
        "engine": engine.as_str(),
        "client": client_config(spec),
    })
}

/// `run.json`'s `config.client`: the connection, load-shape and scrape
/// options.
fn client_config(spec: &RunSpec) -> serde_json::Value {
    let (t, l, s) = (&spec.target, &spec.load, &spec.scrape);
    json!({
        "ca_cert": t.ca_cert.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
        "local_addr": t.local_addr.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        "http_client": t.http_client.name(),
        "request_rate": l.request_rate,
        "arrival": l.arrival.name(),
        "random_seed": l.random_seed,
        "max_concurrency": l.max_concurrency,
        "benchmark_duration_s": l.benchmark_duration_s,
        "benchmark_grace_period_s": l.benchmark_grace_period_s,
        "server_metrics": s.server_metrics,
        "no_server_metrics": !s.enabled,
        "engine": t.engine.name(),
        "no_preflight": !t.preflight,
        "max_response_bytes": t.max_response_bytes,
    })
}

/// speed_bench.py's `config` for `--output`: its options, as this run set
/// them (`bench`: `--bench`, else the dataset's name).
fn speed_bench_py_config(spec: &RunSpec, dataset: &Dataset, target: &Target) -> SpeedBenchPyConfig {
    let asked: Vec<&str> = spec.dataset.category.iter().map(|c| c.trim()).collect();
    let category = if asked.is_empty() || asked == ["all"] {
        "all".to_string()
    } else {
        asked.join(",")
    };
    let bench = match &spec.dataset.source {
        Some(DatasetSource::Bench(b)) => b.clone(),
        _ => dataset.name.clone(),
    };
    SpeedBenchPyConfig {
        url: spec.target.url.clone(),
        model: Some(target.model.clone()),
        bench: Some(bench),
        category,
        osl: spec.sampling.osl.map(u64::from),
        concurrency: spec.load.concurrency as u64,
        extra_inputs: target.shown_extra_body(),
        limit: spec.dataset.limit.map(|n| n.get() as u64),
        timeout: Some(spec.target.timeout_s),
        streaming: Some(spec.target.streaming),
    }
}

/// After the last request: every finished run goes up to its store,
/// whatever its outcome; the records are read back once for the summary
/// and speed_bench.py's JSON; the observer sees the whole report.
async fn finish(
    spec: &RunSpec,
    mut outcome: RunOutcome,
    start: Finishing,
    progress: Arc<Progress>,
    observer: &mut dyn Observer,
) -> Result<RunReport, RunError> {
    let Finishing {
        staged,
        py_config,
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
    let (results, model) = read_back(&mut outcome, model)?;
    let mut speed_bench_py = None;
    if let (Some(path), RunResults::Records { records, .. }) = (&spec.outputs.output, &results) {
        let json = SpeedBenchPyOutput::from_records(py_config, records);
        match write_speed_bench_py_json(path, &json, spec.outputs.overwrite) {
            Ok(()) => speed_bench_py = Some(path.clone()),
            Err(source) => {
                let e = RunError::Report {
                    context: "writing --output".into(),
                    source,
                };
                // The output error comes first; the upload's after it.
                failure = Some(e);
            }
        }
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
    }
}

/// The records (or, when they were not kept, `summary.json`) as the client
/// read them back, taken from the outcome; the file is decoded again only
/// when the client could not read it, for the error. The model's name as
/// the records' manifest gives it.
fn read_back(outcome: &mut RunOutcome, model: String) -> Result<(RunResults, String), RunError> {
    if outcome.records_removed {
        return Ok((summary_only(outcome)?, model));
    }
    let (file, metrics) = match outcome.read_back.take() {
        Some(back) => (back.file, back.metrics),
        None => match read_records_file(&outcome.records_path) {
            Ok(file) => {
                let metrics = RunMetrics::from_records(&file.records);
                (file, metrics)
            }
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
    let served = file.manifest.as_ref().map_or(model, |m| m.model.clone());
    let label = speedbench_runs::display_model(&served);
    let results = RunResults::Records {
        metrics,
        label,
        records: file.records,
    };
    Ok((results, served))
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
