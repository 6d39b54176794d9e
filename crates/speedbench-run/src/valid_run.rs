//! [`ValidRun`]: what [`RunSpec::validate`](crate::RunSpec::validate)
//! returns, holding everything [`execute`](crate::execute) needs, resolved
//! and checked (the target, the load, the scrape, the run directory or
//! store URL, the engine choice, the row limit, what `run.json` and
//! speed_bench.py's JSON will say), and the extensions a downstream
//! program adds. The executor reads the spec no more: nothing it acts on
//! can fail a check after validation.

use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};
use std::time::Duration;

use speedbench_client::ExportLevel;
use speedbench_client::scrape::Scrape;
use speedbench_client::spec::SpecAdapter;
use speedbench_client::{Engine, Load, RecordAnnotator, RecordSink, Target};
use speedbench_dataset::CategorySelection;
use speedbench_metrics::{FigureOptions, SpeedBenchPyConfig};

use crate::spec::{EngineChoice, RunSpec};
use crate::store_types::StoreUrl;

/// A [`RunSpec`] whose every field was checked: what a run needs but the
/// dataset and the served model's name, and what a downstream program
/// adds to it (its own record sinks, annotators and engine adapters),
/// which [`execute`](crate::execute) honours beside the validation, the
/// engine detection, the preflight and the upload it does for every run.
#[derive(Debug)]
pub struct ValidRun {
    /// The spec as given, for [`ValidRun::spec`]; the executor reads the
    /// resolved fields below instead.
    pub(crate) spec: RunSpec,
    pub(crate) categories: CategorySelection,
    /// `--limit`: rows kept per category.
    pub(crate) limit: Option<NonZeroUsize>,
    /// The request target; its `model` is the spec's, or empty until asked
    /// of the server. Spec adapters added to the run sit here.
    pub(crate) target: Target,
    pub(crate) load: Load,
    /// `--fixed-schedule`: the trace's window, applied to the rows.
    pub(crate) trace_window: Option<crate::shaping::TraceWindow>,
    /// `--synthesis-*`: the trace reshaped after its window.
    pub(crate) synthesis: Option<speedbench_client::synthetic::TraceSynthesis>,
    pub(crate) max_error_rate: Option<f64>,
    pub(crate) engine: EngineChoice,
    pub(crate) preflight: bool,
    pub(crate) scrape: Option<ScrapePlan>,
    pub(crate) outputs: ValidOutputs,
    pub(crate) description: RunDescription,
    /// The figures of `summary.json` beyond the records' own.
    pub(crate) figures: FigureOptions,
    /// `--gpu-telemetry`: the DCGM exporters.
    pub(crate) gpu_telemetry: Option<speedbench_client::scrape::Scrape>,
    pub(crate) warnings: Vec<String>,
    pub(crate) extensions: Extensions,
}

/// The server scrape, checked: scraped from the engine's endpoints once
/// the engine is known ([`ScrapePlan::config_for`]).
#[derive(Debug, Clone)]
pub(crate) struct ScrapePlan {
    /// `--server-metrics`: endpoints besides the target's own.
    pub(crate) endpoints: Vec<String>,
    pub(crate) shutdown_delay: Duration,
    /// `--slice-duration`: counters' rates per slice too.
    pub(crate) slice: Option<Duration>,
    /// `--server-metrics-formats csv`.
    pub(crate) csv: bool,
    /// `--server-metrics-formats parquet`.
    pub(crate) parquet: bool,
}

/// `--gpu-telemetry`: the DCGM exporters, scraped during the run.
pub(crate) fn gpu_scrape(urls: &[String]) -> Option<speedbench_client::scrape::Scrape> {
    (!urls.is_empty()).then(|| speedbench_client::scrape::Scrape::new(urls.to_vec()))
}

impl ScrapePlan {
    /// The scrape of `target` (with its engine, once known).
    pub(crate) fn config_for(&self, target: &Target) -> Scrape {
        let mut config = Scrape::for_target(target, &self.endpoints);
        config.shutdown_delay = self.shutdown_delay;
        config.slice = self.slice;
        config.csv = self.csv;
        config.parquet = self.parquet;
        config
    }
}

/// Where the run's files go, checked.
#[derive(Debug)]
pub(crate) struct ValidOutputs {
    /// `--run-id`; a fresh one when `None`.
    pub(crate) run_id: Option<String>,
    pub(crate) dir: RunDir,
    /// `--staging-dir`, only with a store URL.
    pub(crate) staging_dir: Option<PathBuf>,
    pub(crate) overwrite: bool,
    pub(crate) export_level: ExportLevel,
    /// `--output`: speed_bench.py's JSON, checked free.
    pub(crate) speed_bench_py: Option<PathBuf>,
    /// `--user-files`, checked.
    pub(crate) user_files: Option<crate::user_files::UserFiles>,
    /// `--export-http-trace`.
    pub(crate) export_http_trace: bool,
}

/// The run directory.
#[derive(Debug)]
pub(crate) enum RunDir {
    /// `artifacts/<dataset>-<run id>`, named once the dataset is loaded.
    Default,
    /// A local directory.
    Local(PathBuf),
    /// A store URL: the run is staged locally and uploaded.
    Store(StoreUrl),
}

impl RunDir {
    /// The local directory of a run that is not staged.
    pub(crate) fn local(&self, dataset: &str, run_id: &str) -> Option<PathBuf> {
        match self {
            RunDir::Default => Some(Path::new("artifacts").join(format!("{dataset}-{run_id}"))),
            RunDir::Local(dir) => Some(dir.clone()),
            RunDir::Store(_) => None,
        }
    }
}

/// What `run.json`'s `config` and speed_bench.py's `config` say of the
/// run, built from the spec at validation; the served model, the engine
/// and the dataset's name are filled in when known.
#[derive(Debug, Clone)]
pub(crate) struct RunDescription {
    /// `run.json`'s `config`, less `model` and `engine`.
    pub(crate) config: serde_json::Value,
    /// speed_bench.py's `config`, less `model` (and `bench` unless
    /// `--bench` named one).
    pub(crate) speed_bench_py: SpeedBenchPyConfig,
}

impl RunDescription {
    /// `run.json`'s `config` of a run of `model` on `engine`.
    pub(crate) fn config(&self, model: &str, engine: Engine) -> serde_json::Value {
        let mut config = self.config.clone();
        config["model"] = model.into();
        config["engine"] = engine.as_str().into();
        config
    }

    /// speed_bench.py's `config` of a run of `model` over `dataset`.
    pub(crate) fn speed_bench_py(&self, model: &str, dataset: &str) -> SpeedBenchPyConfig {
        let mut config = self.speed_bench_py.clone();
        config.model = Some(model.to_string());
        config.bench.get_or_insert_with(|| dataset.to_string());
        config
    }
}

/// The sinks and annotators a downstream program adds to a run.
#[derive(Default)]
pub(crate) struct Extensions {
    pub(crate) sinks: Vec<Box<dyn RecordSink>>,
    pub(crate) annotators: Vec<Box<dyn RecordAnnotator>>,
}

impl Extensions {
    /// `run` with every sink and annotator added.
    pub(crate) fn attach(
        self,
        mut run: speedbench_client::ProfileRun,
    ) -> speedbench_client::ProfileRun {
        for sink in self.sinks {
            run = run.with_sink(sink);
        }
        for annotator in self.annotators {
            run = run.with_annotator(annotator);
        }
        run
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<String> = self.sinks.iter().map(|s| s.name()).collect();
        f.debug_struct("Extensions")
            .field("sinks", &names)
            .field("annotators", &self.annotators.len())
            .finish()
    }
}

impl ValidRun {
    /// Sends every record to `sink` too, as it finishes (see
    /// [`RecordSink`]); `records.parquet` is written as always.
    pub fn with_sink(mut self, sink: impl RecordSink + 'static) -> Self {
        self.extensions.sinks.push(Box::new(sink));
        self
    }

    /// Adds `annotator`'s columns to `records.parquet` and lets it fill them
    /// in every record before the sinks see it (see [`RecordAnnotator`]).
    pub fn with_annotator(mut self, annotator: impl RecordAnnotator + 'static) -> Self {
        self.extensions.annotators.push(Box::new(annotator));
        self
    }

    /// Reads per-request acceptance with `adapter` too, asked before the
    /// built-in ones: an engine speedbench does not know, with the same
    /// validation, preflight and records as any other (see [`SpecAdapter`]).
    pub fn with_spec_adapter(mut self, adapter: impl SpecAdapter + 'static) -> Self {
        self.target = self.target.with_spec_adapter(adapter);
        self
    }

    /// The spec that was checked.
    pub fn spec(&self) -> &RunSpec {
        &self.spec
    }

    /// The load the run will have (before a shard takes its share).
    pub fn load(&self) -> &Load {
        &self.load
    }

    /// The categories the run keeps.
    pub fn categories(&self) -> &CategorySelection {
        &self.categories
    }

    /// What is allowed but likely a mistake (a start already past or days
    /// away, a barrier file in a directory that does not exist); the
    /// executor tells its observer before anything is sent.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
}
