//! [`RunSpec::validate`]: every check a run makes before its first
//! request, sending nothing.

use std::time::Duration;

use speedbench_client::{
    ApiKey, BaseUrl, ClientError, HttpClientKind, Load, ModelChoice, ModelStrategy, OwnedField,
    StartBarrier, Target, parse_extra_inputs, parse_header,
};
use speedbench_dataset::CategorySelection;
use speedbench_metrics::{FigureOptions, SteadyStateOptions};
use speedbench_record::RUN_FILE_NAMES;
use speedbench_report::{ReportError, check_output_free};

use crate::describe::describe;
use crate::error::RunError;
use crate::shaping::seconds;
use crate::spec::{RunSpec, ShardSpec};
use crate::staging::store_url;
pub use crate::valid_run::ValidRun;
use crate::valid_run::{Extensions, RunDir, ScrapePlan, ValidOutputs};

/// Where the checked run will run: its files are checked only here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Where {
    Here,
    Elsewhere,
}

/// The client's error, with the field that fixes it named (the client
/// knows no fields).
pub(crate) fn hinted(what: &str, e: ClientError) -> RunError {
    let hint = match &e {
        ClientError::OwnedField { field, .. } => Some(match field {
            OwnedField::Model => "set it with --model".to_string(),
            OwnedField::Messages | OwnedField::Prompt => {
                "it comes from --input-file or --public-dataset".to_string()
            }
            _ => "set it with --streaming".to_string(),
        }),
        ClientError::AuthorizationTwice { header } => Some(format!(
            "-H {header} and --api-key (or OPENAI_API_KEY) are both given"
        )),
        ClientError::EndpointMismatch { named, .. } => {
            Some(format!("pass --endpoint-type {}", named.name()))
        }
        ClientError::LocalAddr { .. } => Some("check --local-addr".to_string()),
        _ => None,
    };
    RunError::Client {
        context: match hint {
            Some(h) => format!("{what} ({h})"),
            None => what.to_string(),
        },
        source: e,
    }
}

impl RunSpec {
    /// Checks every field a run would refuse before its first request,
    /// sending nothing: values, request fields, CA files, the load shape,
    /// the shard and its run id, and that `--output` is free.
    pub fn validate(&self) -> Result<ValidRun, RunError> {
        self.check(Where::Here)
    }

    /// [`validate`](RunSpec::validate) for a run on another machine (a
    /// Kubernetes Pod): every check but those of this machine's files (the
    /// CA certificates are not read, `--output` is not looked for), and a
    /// load no Linux process there could hold in flight is refused (one
    /// open file per request, past the kernel's default ceiling).
    pub fn validate_portable(&self) -> Result<(), RunError> {
        self.check(Where::Elsewhere).map(|_| ())
    }

    fn check(&self, place: Where) -> Result<ValidRun, RunError> {
        self.check_pairs()?;
        self.synthetic_prompts()?;
        if self.repeat.num_profile_runs > 1 {
            return Err(RunError::invalid(
                "--num-profile-runs",
                "repeats a run of `speedbench profile` (speedbench_run::repeat::repetitions) or \
                 each run of `speedbench tune`; a sweep file's runs repeat as trials of the whole \
                 sweep: give it on the command line beside --config (or `multiRun` in an AIPerf \
                 config), not in the file",
            ));
        }
        let d = &self.dataset;
        let categories = CategorySelection::parse(&d.category).map_err(|e| RunError::Dataset {
            context: "--category".into(),
            source: Box::new(e),
            hint: None,
        })?;
        let target = self.valid_target(place)?;
        let load = self.load_config()?;
        if place == Where::Elsewhere {
            check_any_process_holds(&load)?;
        }
        check_run_id(self.outputs.run_id.as_deref(), &load)?;
        let scrape = self.scrape_plan()?;
        let figures = self.figure_options(&load)?;
        let outputs = self.valid_outputs()?;
        if place == Where::Here {
            self.check_output()?;
            self.check_not_a_parent()?;
        }
        let mut description = describe(self, &target);
        description.config[FigureOptions::CONFIG_KEY] =
            serde_json::to_value(&figures).unwrap_or_default();
        Ok(ValidRun {
            spec: self.clone(),
            categories,
            limit: d.limit,
            description,
            figures,
            gpu_telemetry: crate::valid_run::gpu_scrape(&self.scrape.gpu_telemetry),
            target,
            load,
            trace_window: crate::shaping::trace_window(&self.load)?,
            synthesis: crate::shaping::trace_synthesis(&self.dataset)?,
            max_error_rate: self.load.max_error_rate,
            engine: self.target.engine,
            preflight: self.target.preflight,
            scrape,
            outputs,
            warnings: (start_warnings(&self.shard, unix_now_s()).into_iter())
                .chain(crate::shaping::prefill_warnings(&self.load))
                .collect(),
            extensions: Extensions::default(),
        })
    }

    /// The servers and what each request carries, checked.
    fn valid_target(&self, place: Where) -> Result<Target, RunError> {
        let mut urls = self.server_urls()?.into_iter();
        let base_url = urls.next().expect("server_urls gives at least one");
        let target = self
            .request_target(base_url, place)?
            .with_more_urls(urls.collect());
        self.check_traceable(&target)?;
        Ok(target)
    }

    /// Where the run's files go: a store URL parsed here, `--staging-dir`
    /// only with one.
    fn valid_outputs(&self) -> Result<ValidOutputs, RunError> {
        let o = &self.outputs;
        let dir = match &o.output_artifact_dir {
            None => RunDir::Default,
            Some(dir) => match store_url(dir, "--output-artifact-dir")? {
                Some(url) => RunDir::Store(url),
                None => RunDir::Local(dir.clone()),
            },
        };
        if o.staging_dir.is_some() && !matches!(dir, RunDir::Store(_)) {
            return Err(RunError::invalid(
                "--staging-dir",
                "only with a store URL (s3://, gs://, az://) as --output-artifact-dir",
            ));
        }
        Ok(ValidOutputs {
            run_id: o.run_id.clone(),
            dir,
            staging_dir: o.staging_dir.clone(),
            overwrite: o.overwrite,
            export_level: o.export_level,
            speed_bench_py: o.output.clone(),
            user_files: (o.user_files.as_deref())
                .map(crate::user_files::UserFiles::parse)
                .transpose()?,
            export_http_trace: o.export_http_trace,
        })
    }

    /// `--show-trace-timing` and `--export-http-trace` need requests the
    /// lean HTTP/1.1 client carries, the one that times HTTP phases:
    /// refused where no request would be.
    fn check_traceable(&self, target: &Target) -> Result<(), RunError> {
        let asked = [
            ("--show-trace-timing", self.figures.show_trace_timing),
            ("--export-http-trace", self.outputs.export_http_trace),
        ];
        let Some((flag, _)) = asked.into_iter().find(|(_, on)| *on) else {
            return Ok(());
        };
        let why = if target.http_client == HttpClientKind::Hyper {
            "--http-client hyper times no HTTP phases: leave the default lean client"
        } else if target.urls().all(BaseUrl::is_https) {
            "the lean HTTP/1.1 client, which times HTTP phases, speaks plain http:// only, and \
             every --url is https://"
        } else {
            return Ok(());
        };
        Err(RunError::invalid(flag, why))
    }

    /// `--url`: one server, or several comma-separated, each parsed; the
    /// same server twice is refused (its share would be counted twice).
    fn server_urls(&self) -> Result<Vec<BaseUrl>, RunError> {
        let mut urls: Vec<BaseUrl> = Vec::new();
        for text in self.target.url.split(',').map(str::trim) {
            let url = BaseUrl::parse(text).map_err(|e| RunError::Client {
                context: "--url".into(),
                source: e,
            })?;
            if urls.iter().any(|u| u.to_string() == url.to_string()) {
                return Err(RunError::invalid(
                    "--url",
                    format!("{url} is given twice: name each server once"),
                ));
            }
            urls.push(url);
        }
        Ok(urls)
    }

    /// `--header`s as `(name, value)`.
    fn headers(&self) -> Result<Vec<(String, String)>, RunError> {
        (self.target.headers.iter())
            .map(|h| {
                parse_header(h.expose()).map_err(|source| RunError::Client {
                    context: "--header".into(),
                    source,
                })
            })
            .collect()
    }

    /// Several comma-separated `--model`s and how rows share them out;
    /// `None` for one model.
    fn model_choice(&self) -> Result<Option<ModelChoice>, RunError> {
        let t = &self.target;
        let Some(names) = t.model.as_deref().filter(|m| m.contains(',')) else {
            return Ok(None);
        };
        let names: Vec<String> = names.split(',').map(|n| n.trim().to_string()).collect();
        if names.iter().any(String::is_empty) {
            return Err(RunError::invalid(
                "--model",
                "several models are comma-separated names, none empty",
            ));
        }
        let strategy = match t.model_selection_strategy.as_str() {
            "round_robin" => ModelStrategy::RoundRobin,
            "random" => ModelStrategy::Random {
                seed: self.load.random_seed,
            },
            other => {
                return Err(RunError::invalid(
                    "--model-selection-strategy",
                    format!("{other:?}: round_robin or random"),
                ));
            }
        };
        Ok(Some(ModelChoice::new(names, strategy)))
    }

    /// `--extra-inputs`, with `ignore_eos` where synthetic prompts force
    /// their output length.
    fn extra_body(&self) -> Result<serde_json::Map<String, serde_json::Value>, RunError> {
        let mut body = parse_extra_inputs(&self.sampling.extra_inputs)
            .map_err(|e| hinted("--extra-inputs", e))?;
        if self.forces_output_length(&body) {
            body.insert("ignore_eos".into(), true.into());
        }
        Ok(body)
    }

    fn request_target(&self, base_url: BaseUrl, place: Where) -> Result<Target, RunError> {
        let t = &self.target;
        let ca_files = match place {
            Where::Here => t.ca_cert.as_slice(),
            Where::Elsewhere => &[],
        };
        let extra_roots = ca_files
            .iter()
            .map(|p| {
                std::fs::read(p).map_err(|source| RunError::Io {
                    context: format!("--ca-cert {}", p.display()),
                    source,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let headers = self.headers()?;
        if !(t.timeout_s.is_finite() && t.timeout_s > 0.0) {
            return Err(RunError::invalid(
                "--timeout",
                "must be a positive number of seconds",
            ));
        }
        let mut target = Target::new(base_url, t.model.clone().unwrap_or_default());
        if let Some(choice) = self.model_choice()? {
            target = target.with_models(choice);
        }
        target.api = t.endpoint_type;
        target.streaming = t.streaming;
        target.max_tokens = self.sampling.osl;
        target.force_min_tokens = self.sampling.force_min_tokens;
        target.extra_body = self.extra_body()?;
        target.api_key = t
            .api_key
            .as_ref()
            .filter(|k| !k.expose().is_empty())
            .map(|k| ApiKey::new(k.expose().to_string()));
        target.headers = headers;
        target.timeout = Duration::from_secs_f64(t.timeout_s);
        target.extra_roots_pem = extra_roots;
        target.local_addrs = t.local_addr.clone();
        target.http_client = t.http_client;
        target.connection_reuse = t.connection_reuse;
        if t.max_response_bytes == 0 {
            return Err(RunError::invalid(
                "--max-response-bytes",
                "must be at least 1",
            ));
        }
        target.max_response_bytes = t.max_response_bytes;
        target
            .validate()
            .map_err(|e| hinted("checking the request options", e))?;
        Ok(target)
    }

    /// Flags that need another or exclude one (the command line's parser
    /// checks these too; a sweep file's run or a library's spec meets them
    /// here).
    fn check_pairs(&self) -> Result<(), RunError> {
        let needs = [
            (
                self.load.max_concurrency.is_some() && !self.load.open_loop(),
                "--max-concurrency",
                "needs --request-rate (a closed loop's --concurrency already caps it)",
            ),
            (
                self.shard.shard_index.is_some() && self.shard.shard_count.is_none(),
                "--shard-index",
                "needs --shard-count",
            ),
            (
                !self.scrape.enabled && !self.scrape.server_metrics.is_empty(),
                "--no-server-metrics",
                "cannot be used with --server-metrics",
            ),
            (
                self.load.warmup_grace_period_s.is_some() && self.load.warmup_duration_s.is_none(),
                "--warmup-grace-period",
                "needs --warmup-duration (a warmup counted in requests waits for every one)",
            ),
            (
                self.shard.start_at.is_some() && self.shard.start_after_barrier.is_some(),
                "--start-at",
                "cannot be used with --start-after-barrier (one shared start)",
            ),
        ];
        match needs.into_iter().find(|(broken, _, _)| *broken) {
            Some((_, field, message)) => Err(RunError::invalid(field, message)),
            None => Ok(()),
        }
    }

    /// The load shape, the shard and its start, checked as a run checks
    /// them (so a sweep refuses a zero concurrency before its first run).
    fn load_config(&self) -> Result<Load, RunError> {
        let l = &self.load;
        let mut load = Load::closed_loop(l.concurrency);
        load.request_count = l.request_count;
        load.num_conversations = l.num_conversations;
        load.warmup_request_count = l.warmup_request_count;
        load.warmup_concurrency = l.warmup_concurrency;
        load.warmup_duration = (l.warmup_duration_s)
            .map(|d| crate::shaping::seconds("--warmup-duration", d))
            .transpose()?;
        load.warmup_sessions = match l.warmup_sessions {
            Some(0) => {
                return Err(RunError::invalid(
                    "--num-warmup-sessions",
                    "must be at least 1",
                ));
            }
            n => n,
        };
        load.warmup_grace_period = (l.warmup_grace_period_s)
            .map(|d| crate::shaping::seconds("--warmup-grace-period", d))
            .transpose()?;
        load.request_rate = l.request_rate;
        load.arrival = l.arrival;
        load.random_seed = l.random_seed;
        load.sampling = l.dataset_sampling;
        load.max_concurrency = l.max_concurrency;
        load.benchmark_duration = l
            .benchmark_duration_s
            .map(|d| seconds("--benchmark-duration", d))
            .transpose()?;
        load.grace_period = seconds("--benchmark-grace-period", l.benchmark_grace_period_s)?;
        crate::shaping::apply(l, &mut load)?;
        apply_shard(&self.shard, &mut load)?;
        // A fixed schedule's rate is the trace's, known once its rows are
        // read: its load is checked as the open loop it will be (a
        // `--max-concurrency` ceiling allowed), and again when it runs.
        let mut checked = load.clone();
        if l.fixed_schedule {
            checked.request_rate = checked.request_rate.or(Some(1.0));
        }
        checked.validate().map_err(|source| RunError::Client {
            context: "running the profile".into(),
            source,
        })?;
        if let Some(rate) = l.max_error_rate
            && !(0.0..=1.0).contains(&rate)
        {
            return Err(RunError::Client {
                context: "running the profile".into(),
                source: ClientError::InvalidLoad(format!(
                    "the maximum error rate must be between 0 and 1, got {rate}"
                )),
            });
        }
        Ok(load)
    }

    /// The figures asked for, checked against the run: an SLO on a figure
    /// only streamed responses have needs `--streaming`, a slice must fit
    /// in a run of fixed duration; a closed loop above concurrency 1 gets
    /// its steady state at its (shard's) concurrency.
    fn figure_options(&self, load: &Load) -> Result<FigureOptions, RunError> {
        let f = &self.figures;
        if !self.target.streaming
            && let Some(slo) = f.goodput.0.iter().find(|s| s.metric.needs_streaming())
        {
            return Err(RunError::invalid(
                "--goodput",
                format!(
                    "`{}` needs streamed responses (--streaming): without them no request has \
                     a time to first token, and none could be good",
                    slo.metric
                ),
            ));
        }
        if let (Some(slice), Some(run)) = (f.slice_duration_s, self.load.benchmark_duration_s)
            && slice > run
        {
            return Err(RunError::invalid(
                "--slice-duration",
                format!(
                    "{slice} s is longer than the run's --benchmark-duration of {run} s: \
                     the run would be one incomplete slice"
                ),
            ));
        }
        // At concurrency 1 the steady state is the whole run.
        let closed = load.request_rate.is_none() && load.concurrency > 1;
        let steady_state = closed.then_some(SteadyStateOptions {
            concurrency: load.concurrency,
            threshold: f.steady_state_threshold,
            min_window_s: f.steady_state_min_window_s,
        });
        Ok(FigureOptions {
            slos: f.goodput.clone(),
            slice_duration_s: f.slice_duration_s,
            steady_state,
            http_trace: f.show_trace_timing,
        })
    }

    /// The scrape of `target` (its engine decides the endpoints), or
    /// `None` with `--no-server-metrics`.
    fn scrape_plan(&self) -> Result<Option<ScrapePlan>, RunError> {
        if !self.scrape.enabled {
            if self.scrape.csv || self.scrape.parquet {
                return Err(RunError::invalid(
                    "--server-metrics-formats",
                    "csv or parquet with --no-server-metrics: nothing is scraped to write",
                ));
            }
            return Ok(None);
        }
        let slice = match self.figures.slice_duration_s {
            Some(s) => Some(seconds("--slice-duration", s)?),
            None => None,
        };
        Ok(Some(ScrapePlan {
            endpoints: self.scrape.server_metrics.clone(),
            shutdown_delay: seconds(
                "--server-metrics-shutdown-delay",
                self.scrape.shutdown_delay_s,
            )?,
            slice,
            csv: self.scrape.csv,
            parquet: self.scrape.parquet,
        }))
    }

    /// A run written into a directory whose subdirectories are runs would
    /// hide them: `speedbench report DIR` reports DIR as the one run it is.
    fn check_not_a_parent(&self) -> Result<(), RunError> {
        let Some(dir) = &self.outputs.output_artifact_dir else {
            return Ok(());
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(());
        };
        let mut runs: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| {
                let path = e.path();
                path.is_dir() && RUN_FILE_NAMES.iter().any(|f| path.join(f).is_file())
            })
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if runs.is_empty() {
            return Ok(());
        }
        runs.sort();
        let shown: Vec<&str> = runs.iter().take(3).map(String::as_str).collect();
        let more = if runs.len() > 3 { ", ..." } else { "" };
        Err(RunError::invalid(
            "--output-artifact-dir",
            format!(
                "{} holds {} run(s) in its subdirectories ({}{more}); a run written there would \
                 hide them from `speedbench report {}`: give this run a directory of its own \
                 (e.g. {})",
                dir.display(),
                runs.len(),
                shown.join(", "),
                dir.display(),
                dir.join("NAME").display()
            ),
        ))
    }

    /// `--output` needs the records and a free path (the write checks
    /// again; this refuses it before the run rather than after).
    fn check_output(&self) -> Result<(), RunError> {
        let Some(path) = &self.outputs.output else {
            return Ok(());
        };
        // `--output` is speed_bench.py's (a JSON file) here and AIPerf's
        // report CSV in `report`: a CSV name means the user meant the other.
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
        {
            return Err(RunError::invalid(
                "--output",
                format!(
                    "{}: profile's --output writes llama.cpp speed_bench.py's JSON (a .json file); \
                     the CSV matrix is `speedbench report RUN_DIR --format csv --output FILE.csv`",
                    path.display()
                ),
            ));
        }
        if !self.outputs.export_level.keeps_records() {
            return Err(RunError::invalid(
                "--output",
                "speed_bench.py's JSON is built from the per-request records, which \
                 --export-level summary does not keep (use --export-level records)",
            ));
        }
        check_output_free(path, self.outputs.overwrite).map_err(|e| {
            let exists = matches!(&e, ReportError::Write { source, .. }
                if source.kind() == std::io::ErrorKind::AlreadyExists);
            RunError::Report {
                context: if exists {
                    "--output (give --overwrite to replace it)".into()
                } else {
                    "--output".into()
                },
                source: e,
            }
        })
    }
}

/// `--shard`, `--shard-count`/`--shard-index`, `--start-at` and
/// `--start-after-barrier` into the load.
fn apply_shard(s: &ShardSpec, load: &mut Load) -> Result<(), RunError> {
    load.shard = match (s.shard, s.shard_count, s.shard_index) {
        (Some(shard), _, _) => Some(shard),
        (None, Some(count), Some(index)) => Some(
            speedbench_client::Shard::new(index, count)
                .map_err(|e| RunError::invalid("--shard-count/--shard-index", e.to_string()))?,
        ),
        (None, Some(count), None) => {
            return Err(RunError::invalid(
                "--shard-count",
                format!(
                    "{count} shards, but which is this one? Give --shard-index I (or set \
                     JOB_COMPLETION_INDEX), or --shard I/{count}"
                ),
            ));
        }
        (None, None, _) => None,
    };
    load.start_barrier = match (&s.start_at, &s.start_after_barrier) {
        (Some(at), _) => Some(
            StartBarrier::at_unix_seconds(*at)
                .map_err(|e| RunError::invalid("--start-at", e.to_string()))?,
        ),
        (None, Some(path)) => {
            let text = path.to_string_lossy();
            if text.starts_with("http://") || text.starts_with("https://") {
                return Err(RunError::invalid(
                    "--start-after-barrier",
                    "a URL barrier is not supported; give a file on a filesystem every \
                     shard sees, or --start-at UNIX_TIME",
                ));
            }
            Some(StartBarrier::File(path.clone()))
        }
        (None, None) => None,
    };
    Ok(())
}

fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// A day: a start further away than this is more likely a wrong number
/// than a plan.
const FAR_START_S: f64 = 86_400.0;

/// Starts that are allowed but likely wrong, each with what will happen.
fn start_warnings(s: &ShardSpec, now: f64) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(at) = s.start_at {
        if at < now - 1.0 {
            out.push(format!(
                "--start-at {at} is {:.0} s in the past: the measured phase starts at once, \
                 not together with other shards that were given a later time",
                now - at
            ));
        } else if at > now + FAR_START_S {
            out.push(format!(
                "--start-at {at} is {:.1} h from now: the run waits until then before its \
                 first request",
                (at - now) / 3600.0
            ));
        }
    }
    if let Some(barrier) = &s.start_after_barrier {
        let dir = barrier
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        if !dir.is_dir() {
            out.push(format!(
                "--start-after-barrier {}: the directory {} does not exist (yet): the run waits \
                 until the file appears there",
                barrier.display(),
                dir.display()
            ));
        }
    }
    out
}

/// A shard needs the run id every shard shares; an empty id is refused.
fn check_run_id(run_id: Option<&str>, load: &Load) -> Result<(), RunError> {
    if let Some(id) = run_id
        && id.trim().is_empty()
    {
        return Err(RunError::invalid(
            "--run-id",
            "is empty: give the id the run's records carry (omit the flag for a fresh one)",
        ));
    }
    match (load.shard, run_id) {
        (Some(shard), None) => Err(RunError::invalid(
            "--shard",
            format!(
                "shard {shard} needs --run-id ID, the same on every shard of the run: each \
                 records as ID-shard{}of{} and `speedbench report` merges them by ID",
                shard.index(),
                shard.count()
            ),
        )),
        _ => Ok(()),
    }
}

/// Open files one Linux process may hold at most unless its host raised
/// `fs.nr_open` (the kernel's default, and so a container's).
const LINUX_MAX_OPEN_FILES: u64 = 1 << 20;

/// Refuses, for a run on another machine (a Pod's), a load that no process
/// there can hold in flight: one socket per request, past the kernel's
/// default ceiling. Only loads no dataset can make smaller are judged: a
/// duration, not a count or the rows, ends them.
fn check_any_process_holds(load: &Load) -> Result<(), RunError> {
    if load.benchmark_duration.is_none()
        || load.request_count.is_some()
        || load.num_conversations.is_some()
    {
        return Ok(());
    }
    let share = |n: usize| load.shard.map_or(n as u64, |s| s.share(n as u64));
    let in_flight = match (load.request_rate, load.max_concurrency) {
        (None, _) => share(load.concurrency),
        (Some(_), Some(cap)) => share(cap),
        // An uncapped open loop is capped by the run itself.
        (Some(_), None) => return Ok(()),
    };
    let allowed = LINUX_MAX_OPEN_FILES - speedbench_client::RESERVED_OPEN_FILES;
    if in_flight <= allowed {
        return Ok(());
    }
    Err(RunError::Client {
        context: "refused before the first request".into(),
        source: ClientError::InvalidLoad(format!(
            "{in_flight} requests in flight per process need as many open files, past the \
             {LINUX_MAX_OPEN_FILES} a Linux process may open unless its host raised fs.nr_open; \
             at most {allowed} per process (lower --concurrency or --max-concurrency, or use \
             more shards)"
        )),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DatasetSource;
    use std::path::Path;

    fn spec() -> RunSpec {
        let mut spec = RunSpec::default();
        spec.dataset.source = Some(DatasetSource::InputFile("rows.jsonl".into()));
        spec
    }

    fn refused(spec: &RunSpec) -> String {
        spec.validate().unwrap_err().to_string()
    }

    /// The HTTP trace flags need a request the lean client carries.
    #[test]
    fn http_traces_are_refused_where_no_request_would_be_traced() {
        for (flag, set) in [
            (
                "--show-trace-timing",
                (|s: &mut RunSpec| s.figures.show_trace_timing = true) as fn(&mut RunSpec),
            ),
            ("--export-http-trace", |s: &mut RunSpec| {
                s.outputs.export_http_trace = true
            }),
        ] {
            let mut s = spec();
            set(&mut s);
            s.target.http_client = HttpClientKind::Hyper;
            let err = refused(&s);
            assert!(
                err.contains(flag) && err.contains("--http-client hyper"),
                "{err}"
            );
            let mut s = spec();
            set(&mut s);
            s.target.url = "https://127.0.0.1:9".into();
            let err = refused(&s);
            assert!(err.contains(flag) && err.contains("plain http://"), "{err}");
            // One plain server among them is enough.
            s.target.url = "https://127.0.0.1:9,http://127.0.0.1:10".into();
            assert!(s.validate().is_ok(), "{flag}");
        }
    }

    #[test]
    fn a_load_no_run_can_have_is_refused_before_any_run() {
        let mut s = spec();
        s.load.concurrency = 0;
        assert!(
            refused(&s).contains("concurrency must be at least 1"),
            "{}",
            refused(&s)
        );
        let mut s = spec();
        s.load.request_rate = Some(f64::NAN);
        assert!(refused(&s).contains("rate must be a positive number"));
        let mut s = spec();
        s.load.request_count = Some(0);
        assert!(refused(&s).contains("counts must be at least 1"));
        let mut s = spec();
        s.load.benchmark_duration_s = Some(0.0);
        assert!(refused(&s).contains("duration must be positive"));
        let mut s = spec();
        s.load.max_error_rate = Some(1.5);
        assert!(refused(&s).contains("between 0 and 1, got 1.5"));
    }

    #[test]
    fn what_execute_acts_on_is_resolved_and_refused_at_validation() {
        // --staging-dir with a local run directory: refused here, not
        // after the model was asked and the engine probed.
        let mut s = spec();
        s.target.url = "h:1".into();
        s.outputs.output_artifact_dir = Some("runs/r1".into());
        s.outputs.staging_dir = Some("/tmp/stage".into());
        assert!(refused(&s).contains("--staging-dir"), "{}", refused(&s));
        // A valid run holds the resolved pieces the executor reads.
        s.outputs.staging_dir = None;
        s.scrape.shutdown_delay_s = 1.5;
        s.target.preflight = false;
        let valid = s.validate().unwrap();
        assert!(matches!(&valid.outputs.dir, RunDir::Local(d) if d == Path::new("runs/r1")));
        let plan = valid.scrape.as_ref().unwrap();
        assert_eq!(plan.shutdown_delay, Duration::from_millis(1500));
        assert!(!valid.preflight);
        let config = valid
            .description
            .config("m", speedbench_client::Engine::Vllm);
        assert_eq!(
            (config["model"].as_str(), config["engine"].as_str()),
            (Some("m"), Some("vllm"))
        );
        let py = valid.description.speed_bench_py("m", "rows");
        assert_eq!(
            (py.model.as_deref(), py.bench.as_deref()),
            (Some("m"), Some("rows"))
        );
    }

    #[test]
    fn a_load_no_process_elsewhere_can_hold_is_refused_there() {
        let mut s = spec();
        s.target.url = "h:1".into();
        s.load.concurrency = 100_000_000;
        s.load.benchmark_duration_s = Some(3.0);
        s.shard.shard_count = Some(2);
        s.shard.shard_index = Some(0);
        s.outputs.run_id = Some("r".into());
        let e = s.validate_portable().unwrap_err().to_string();
        assert!(e.contains("50000000 requests in flight per process"), "{e}");
        // Split over enough shards, each holds its share.
        s.shard.shard_count = Some(200);
        s.validate_portable().unwrap();
        // A request count may end the run before the workers start.
        s.shard.shard_count = Some(2);
        s.load.request_count = Some(10);
        s.validate_portable().unwrap();
    }

    #[test]
    fn each_refused_field_is_named_as_its_flag() {
        let mut s = spec();
        s.target.timeout_s = 0.0;
        assert_eq!(
            refused(&s),
            "--timeout: must be a positive number of seconds"
        );
        let mut s = spec();
        s.shard.shard = Some("1/2".parse().unwrap());
        assert!(
            refused(&s).starts_with("--shard: shard 1/2 needs --run-id"),
            "{}",
            refused(&s)
        );
        let mut s = spec();
        s.outputs.run_id = Some(" ".into());
        assert!(refused(&s).starts_with("--run-id: is empty"));
        let mut s = spec();
        s.target.url = "htp://x".into();
        assert!(refused(&s).starts_with("--url: "), "{}", refused(&s));
        let mut s = spec();
        s.target.max_response_bytes = 0;
        assert_eq!(refused(&s), "--max-response-bytes: must be at least 1");
    }

    #[test]
    fn flags_that_need_or_exclude_another_are_refused_in_pairs() {
        let mut s = spec();
        s.load.max_concurrency = Some(4);
        assert!(refused(&s).starts_with("--max-concurrency: needs --request-rate"));
        s.load.request_rate = Some(2.0);
        assert!(s.validate().is_ok());
        let mut s = spec();
        s.shard.shard_index = Some(1);
        assert_eq!(refused(&s), "--shard-index: needs --shard-count");
        let mut s = spec();
        s.scrape.enabled = false;
        s.scrape.server_metrics = vec!["http://h:1/metrics".into()];
        assert!(refused(&s).starts_with("--no-server-metrics: cannot be used"));
        let mut s = spec();
        s.shard.start_at = Some(2e9);
        s.shard.start_after_barrier = Some("b".into());
        assert!(refused(&s).starts_with("--start-at: cannot be used"));
    }

    #[test]
    fn a_start_past_far_away_or_behind_a_missing_directory_is_warned_about() {
        let mut s = ShardSpec {
            start_at: Some(1_000.0),
            ..Default::default()
        };
        let w = start_warnings(&s, 1_100.0);
        assert!(w[0].contains("100 s in the past"), "{w:?}");
        s.start_at = Some(1_000.0 + 2.0 * 86_400.0);
        let w = start_warnings(&s, 1_000.0);
        assert!(w[0].contains("48.0 h from now"), "{w:?}");
        s.start_at = Some(1_010.0);
        assert!(start_warnings(&s, 1_000.0).is_empty());
        s.start_at = None;
        s.start_after_barrier = Some("/no/such/dir/go".into());
        let w = start_warnings(&s, 1_000.0);
        assert!(w[0].contains("/no/such/dir does not exist"), "{w:?}");
        s.start_after_barrier = Some(std::env::temp_dir().join("go"));
        assert!(start_warnings(&s, 1_000.0).is_empty());
    }

    #[test]
    fn a_valid_spec_gives_its_load_and_target() {
        let mut s = spec();
        s.load.concurrency = 3;
        s.load.request_count = Some(9);
        s.sampling.osl = Some(16);
        let valid = s.validate().unwrap();
        assert_eq!(
            (valid.load().concurrency, valid.load().request_count),
            (3, Some(9))
        );
        assert_eq!(valid.target.max_tokens, Some(16));
    }
}
