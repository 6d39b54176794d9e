//! A sweep: one file of runs (docs/sweeps/README.md), expanded into one
//! [`RunSpec`] per run, every run checked before the first request, then
//! run one after another under one parent directory.
//!
//! ```
//! use std::collections::BTreeSet;
//! use std::path::Path;
//! use speedbench_run::{RunSpec, sweep::Sweep};
//!
//! let text = "[profile]\nstreaming = true\n[matrix]\nconcurrency = [1, 8]\n";
//! let mut base = RunSpec::default();
//! base.target.url = "127.0.0.1:8000".into();
//! let sweep = Sweep::parse(Path::new("ladder.toml"), text, &base, &BTreeSet::new())?;
//! let dirs: Vec<&str> = sweep.runs().iter().map(|r| r.dir_name.as_str()).collect();
//! assert_eq!(dirs, ["01-concurrency-1", "02-concurrency-8"]);
//! let second = sweep.runs()[1].spec().expect("its options make a run");
//! assert_eq!((second.load.concurrency, second.target.streaming), (8, true));
//! // Then `sweep.check().await?.run(&stop, &mut observer).await` runs them
//! // (crates/speedbench/examples/sweep.rs).
//! # Ok::<(), speedbench_run::RunError>(())
//! ```

mod aiperf;
mod code;
pub(crate) mod file;
mod plots;

pub use plots::{PLOTS_DIR, PlotAxis, PlotRequest, SweepPlots};

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use speedbench_client::{RunStatus, StopHandle};
use speedbench_dataset::Dataset;
use speedbench_metrics::RunMetrics;
use speedbench_record::{RUN_FILE_NAMES, run_is_live};

use crate::dataset::dataset_error;
use crate::error::RunError;
use crate::execute::execute;
use crate::observer::Observer;
use crate::spec::{DatasetSource, RunSpec};
use crate::validate::ValidRun;
use file::{Source, Variation};

pub use file::MAX_VARIATIONS;

/// One run of a sweep.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SweepRun {
    /// Its place in the sweep, from 1.
    pub index: usize,
    /// Its directory's name under the parent: `<index>-<description>`.
    pub dir_name: String,
    /// What sets it apart from the other runs (`concurrency=4`), or its
    /// `name`.
    pub description: String,
    /// Where the file describes it (`[[variation]] 2 at sweep.toml:8`).
    pub origin: String,
    /// Its run directory (or store URL): the parent joined with `dir_name`.
    pub dir: PathBuf,
    /// The flags the file gives it, secrets hidden (for showing a plan).
    pub file_flags: Vec<String>,
    /// The run, or why no run can be made of it (refused by
    /// [`Sweep::check`]).
    spec: Result<RunSpec, String>,
}

impl SweepRun {
    /// The run's specification, if its options make one.
    pub fn spec(&self) -> Option<&RunSpec> {
        self.spec.as_ref().ok()
    }
}

/// A sweep: its runs, from a file ([`Sweep::read`]) or built in code
/// ([`Sweep::from_runs`], [`Sweep::grid`]).
#[derive(Debug)]
pub struct Sweep {
    /// The sweep file; `None` for a sweep built in code.
    path: Option<PathBuf>,
    parent: PathBuf,
    runs: Vec<SweepRun>,
    report_tokens: Vec<String>,
    /// A pause before every run but the first ([`Sweep::with_cooldown`]),
    /// or only before every `cooldown_every`-th (the first run of each
    /// trial, [`Sweep::in_trials`]).
    cooldown: std::time::Duration,
    cooldown_every: usize,
    /// An AIPerf config's `multiRun`: its one run, repeated ([`Sweep::trials`]).
    trials: Option<crate::RepeatSpec>,
    /// An AIPerf config's `plot:` ([`Sweep::plots`]).
    plots: SweepPlots,
}

impl Sweep {
    /// Reads and expands the sweep file at `path` over `base` (the options
    /// every run shares, as from the command line). `given` are the long
    /// names (`request-rate`) of the options the caller set in `base` on
    /// purpose: they win over the file's `[profile]`, and a `[matrix]` or
    /// variation key among them is refused (the runs would be alike).
    /// `base`'s `output_artifact_dir` is the parent when set.
    pub fn read(path: &Path, base: &RunSpec, given: &BTreeSet<String>) -> Result<Sweep, RunError> {
        let text = std::fs::read_to_string(path).map_err(|source| RunError::Io {
            context: format!("reading the sweep file {}", path.display()),
            source,
        })?;
        Sweep::parse(path, &text, base, given)
    }

    /// [`Sweep::read`] over the file's text.
    pub fn parse(
        path: &Path,
        text: &str,
        base: &RunSpec,
        given: &BTreeSet<String>,
    ) -> Result<Sweep, RunError> {
        if given.contains("run-id") {
            return Err(RunError::invalid(
                "--run-id",
                "each run of a sweep gets its own id; set run_id in a [[variation]]",
            ));
        }
        let expanded = file::expand(&Source { path, text }, given)?;
        let parent = base
            .outputs
            .output_artifact_dir
            .clone()
            .or(expanded.parent)
            .unwrap_or_else(|| default_parent(path));
        let env_values = expanded.env_values;
        let trials = given_repeat(expanded.trials, &base.repeat, given);
        // Repetition is the sweep's (its trials), never a run's own: a
        // variation that asks for one is still refused by name.
        let mut base = base.clone();
        base.repeat = crate::RepeatSpec::default();
        let runs = expanded
            .variations
            .into_iter()
            .map(|v| sweep_run(v, &base, given, &parent, &env_values))
            .collect();
        Ok(Sweep {
            path: Some(path.to_path_buf()),
            parent,
            runs,
            report_tokens: expanded.report_tokens,
            cooldown: std::time::Duration::ZERO,
            cooldown_every: 1,
            trials,
            plots: expanded.plots,
        })
    }

    /// An AIPerf config's `multiRun` of more than one trial (`numRuns`,
    /// `cooldownSeconds`, `confidenceLevel`, `disableWarmupAfterFirst`):
    /// the sweep's one run is to be repeated so (see
    /// [`crate::repeat::repetitions`]), or, with a `sweep` of several runs,
    /// the whole sweep run in as many trials ([`Sweep::in_trials`]). `None`
    /// for every other sweep, whose runs each run once.
    pub fn trials(&self) -> Option<&crate::RepeatSpec> {
        self.trials.as_ref()
    }

    /// The plots an AIPerf config's `plot:` asks for, drawn over the
    /// sweep's runs once they ended ([`SweepPlots::write`]); none for any
    /// other sweep.
    pub fn plots(&self) -> &SweepPlots {
        &self.plots
    }

    /// The sweep file; `None` for a sweep built in code.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The sweep as messages name it: its file, or where its runs go.
    fn name(&self) -> String {
        match &self.path {
            Some(path) => path.display().to_string(),
            None => format!("built in code ({})", self.parent.display()),
        }
    }

    /// The directory the runs go under.
    pub fn parent(&self) -> &Path {
        &self.parent
    }

    /// Every run, in order.
    pub fn runs(&self) -> &[SweepRun] {
        &self.runs
    }

    /// Every run, in order, taken out of the sweep.
    pub fn into_runs(self) -> Vec<SweepRun> {
        self.runs
    }

    /// The `speedbench report` flags of the file's `[report]`
    /// (`--metric=accept_rate`), for a report over the sweep's runs.
    pub fn report_flags(&self) -> &[String] {
        &self.report_tokens
    }

    /// The `speedbench report` arguments of a report over `dirs`: the
    /// file's `[report]` flags, the console format unless they name one.
    pub fn report_args(&self, dirs: &[PathBuf]) -> Vec<String> {
        report_args(&self.report_tokens, dirs)
    }

    /// Checks every run before anything is sent: its options, its request
    /// options and load, its dataset where that is cheap (an input file is
    /// loaded, a registered name looked up), its run directory (free, or
    /// `overwrite`; a store URL is asked) and its `--output` file. Any
    /// refusal refuses the whole sweep, naming each run refused.
    pub async fn check(self) -> Result<CheckedSweep, RunError> {
        let mut files = HashMap::new();
        let mut prepared = Vec::new();
        let mut refused = Vec::new();
        for run in &self.runs {
            match prepare(run, &mut files) {
                Ok(p) => prepared.push(p),
                Err(e) => refused.push(format!("{}: {e}", run_name(run))),
            }
        }
        refused.extend(refuse_occupied_stores(&self.runs, &prepared).await);
        refused.extend(refuse_shared_outputs(&self.runs, &prepared));
        if !refused.is_empty() {
            return Err(RunError::Refused {
                what: format!("sweep {}", self.name()),
                total: self.runs.len(),
                refusals: refused,
            });
        }
        Ok(CheckedSweep {
            sweep: self,
            prepared,
        })
    }
}

/// `[report]`'s flags over `dirs`, the console format unless they name one.
/// A config's `multiRun` with the repetition flags given on the command
/// line in its place, as every other flag given wins over the config's:
/// `--num-profile-runs 1` runs each run once, and `--num-profile-runs N`
/// beside a file without `multiRun` runs its runs in N trials.
fn given_repeat(
    trials: Option<crate::RepeatSpec>,
    flags: &crate::RepeatSpec,
    given: &BTreeSet<String>,
) -> Option<crate::RepeatSpec> {
    let mut trials = match trials {
        Some(trials) => trials,
        None if given.contains("num-profile-runs") => flags.clone(),
        None => return None,
    };
    if given.contains("num-profile-runs") {
        trials.num_profile_runs = flags.num_profile_runs;
    }
    if given.contains("profile-run-cooldown-seconds") {
        trials.cooldown_s = flags.cooldown_s;
    }
    if given.contains("confidence-level") {
        trials.confidence_level = flags.confidence_level;
    }
    if given.contains("no-profile-run-disable-warmup-after-first") {
        trials.warmup_every_run = flags.warmup_every_run;
    }
    (trials.num_profile_runs > 1).then_some(trials)
}

fn report_args(flags: &[String], dirs: &[PathBuf]) -> Vec<String> {
    let mut args = Vec::new();
    if !flags.iter().any(|t| t.starts_with("--format=")) {
        args.push("--format=console".to_string());
    }
    args.extend(flags.iter().cloned());
    args.extend(dirs.iter().map(|d| d.display().to_string()));
    args
}

/// `artifacts/<file stem>`.
fn default_parent(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or("sweep".into(), |s| s.to_string_lossy().into_owned());
    Path::new("artifacts").join(stem)
}

/// `variation 3 (03-concurrency-many; [[variation]] 3 at s.toml:9)`.
fn run_name(run: &SweepRun) -> String {
    format!("variation {} ({}; {})", run.index, run.dir_name, run.origin)
}

/// A variation over `base`, in its directory under `parent`; a `bench`
/// run takes speed_bench.py's defaults for what neither the command line
/// (`given`) nor the file sets.
fn sweep_run(
    v: Variation,
    base: &RunSpec,
    given: &BTreeSet<String>,
    parent: &Path,
    env_values: &[(String, String)],
) -> SweepRun {
    // An AIPerf config without a sweep writes its one run into the parent.
    let dir = if v.dir_name.is_empty() {
        parent.to_path_buf()
    } else {
        parent.join(&v.dir_name)
    };
    let mut spec = base.clone();
    let mut set: BTreeSet<String> = given.clone();
    set.extend(v.settings.iter().map(|s| s.flag.long.to_string()));
    let built = v
        .settings
        .iter()
        .try_for_each(|s| s.apply(&mut spec))
        .map(|()| {
            spec.apply_speed_bench_py_defaults(&set);
            spec.outputs.output_artifact_dir = Some(dir.clone());
            spec
        })
        .map_err(|e| named_not_valued(&e.to_string(), env_values));
    let file_flags = v
        .settings
        .iter()
        .flat_map(|s| s.tokens())
        .map(|t| named_not_valued(&shown(&t), env_values))
        .collect();
    SweepRun {
        index: v.index,
        dir_name: v.dir_name,
        description: v.description,
        origin: v.origin,
        dir,
        file_flags,
        spec: built,
    }
}

/// `text` with every value an environment variable gave the file (of 4
/// characters or more: shorter ones would match ordinary text) replaced by
/// its `${VAR}`, longest first.
pub(crate) fn named_not_valued(text: &str, env_values: &[(String, String)]) -> String {
    let mut values: Vec<&(String, String)> =
        env_values.iter().filter(|(v, _)| v.len() >= 4).collect();
    values.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
    let mut out = text.to_string();
    for (value, reference) in values {
        out = out.replace(value.as_str(), reference);
    }
    out
}

/// `--api-key=...`, header values and any other flag holding a credential
/// (`speedbench_credentials::literal_credential`: `--extra-inputs
/// hf_token:...`, a URL's password) hidden, for printing a run's flags.
fn shown(token: &str) -> String {
    if token.starts_with("--api-key=") {
        return "--api-key=(hidden)".into();
    }
    if let Some(h) = token.strip_prefix("--header=") {
        let name = h.split(':').next().unwrap_or_default();
        return format!("--header={name}:(hidden)");
    }
    if let Some((flag, _)) = token.split_once('=')
        && speedbench_credentials::literal_credential(token).is_some()
    {
        return format!("{flag}=(hidden)");
    }
    if token.contains(' ') {
        format!("'{token}'")
    } else {
        token.to_string()
    }
}

/// A run checked and ready to go.
struct Prepared {
    index: usize,
    valid: ValidRun,
    /// The loaded `--input-file`; a public dataset is loaded when its run
    /// starts.
    dataset: Option<Arc<Dataset>>,
}

/// Refuses a run directory that a run of this sweep may not use: one
/// another run is writing to, or (without `overwrite`) one holding a run.
/// The run checks again when it locks the directory.
fn check_run_dir(dir: &Path, overwrite: bool) -> Result<(), String> {
    if dir.exists() && !dir.is_dir() {
        return Err(format!("{}: exists and is not a directory", dir.display()));
    }
    if run_is_live(dir) {
        return Err(format!(
            "{}: another speedbench run is writing to this directory",
            dir.display()
        ));
    }
    if !overwrite && let Some(found) = RUN_FILE_NAMES.iter().find(|n| dir.join(n).exists()) {
        return Err(format!(
            "{}: already holds a run ({found} exists); its results are kept (give --overwrite \
             to replace the sweep's runs)",
            dir.display()
        ));
    }
    Ok(())
}

/// Checks one run (see [`Sweep::check`]).
fn prepare(
    run: &SweepRun,
    files: &mut HashMap<PathBuf, Arc<Dataset>>,
) -> Result<Prepared, RunError> {
    let spec = run
        .spec
        .as_ref()
        .map_err(|e| RunError::invalid("the flags", e.clone()))?;
    let public_name = spec.dataset.public_name()?;
    let valid = spec.validate()?;
    let dataset = match (&spec.dataset.source, public_name) {
        (Some(DatasetSource::InputFile(path)), _) => {
            let dataset = match files.get(path) {
                Some(d) => d.clone(),
                None => {
                    let d = Arc::new(
                        Dataset::from_jsonl_file(path)
                            .map_err(|e| dataset_error("loading the input file", e))?,
                    );
                    files.insert(path.clone(), d.clone());
                    d
                }
            };
            // Categories that select nothing are refused now, not mid-sweep.
            let selected = dataset
                .select_categories(valid.categories())
                .map_err(|e| dataset_error("filtering categories", e))?;
            // So is a load past the open-file limit: a later run's must not
            // let the earlier ones send first.
            crate::execute::check_open_files(&valid.load, &selected)?;
            Some(dataset)
        }
        (_, Some(name)) => {
            speedbench_dataset::registry::lookup(&name)
                .map_err(|e| dataset_error(format!("--public-dataset {name}"), e))?;
            None
        }
        (_, None) => None,
    };
    check_run_dir(&run.dir, spec.outputs.overwrite)
        .map_err(|e| RunError::invalid("the run directory", e))?;
    Ok(Prepared {
        index: run.index,
        valid,
        dataset,
    })
}

/// Run directories in a store: a run already there is refused now, as a
/// local one is (and credentials the store refuses fail here).
async fn refuse_occupied_stores(runs: &[SweepRun], prepared: &[Prepared]) -> Vec<String> {
    let mut refused = Vec::new();
    for p in prepared {
        let run = &runs[p.index - 1];
        if p.valid.spec().outputs.overwrite {
            continue;
        }
        if let Err(e) = crate::staging::check_vacant(&run.dir).await {
            refused.push(format!("{}: {e}", run_name(run)));
        }
    }
    refused
}

/// Two runs writing one `--output` file.
fn refuse_shared_outputs(runs: &[SweepRun], prepared: &[Prepared]) -> Vec<String> {
    let mut refused = Vec::new();
    let mut outputs: HashMap<&Path, usize> = HashMap::new();
    for p in prepared {
        let run = &runs[p.index - 1];
        if let Some(out) = &p.valid.spec().outputs.output
            && let Some(first) = outputs.insert(out.as_path(), p.index)
        {
            refused.push(format!(
                "variation {} ({}): --output {} is also variation {first}'s; give each run its own",
                p.index,
                run.dir_name,
                out.display()
            ));
        }
    }
    refused
}

/// A sweep whose every run passed [`Sweep::check`].
pub struct CheckedSweep {
    sweep: Sweep,
    prepared: Vec<Prepared>,
}

impl std::ops::Deref for CheckedSweep {
    type Target = Sweep;
    fn deref(&self) -> &Sweep {
        &self.sweep
    }
}

impl CheckedSweep {
    /// The plan, one line per run after a heading (with `flags`, the
    /// options each run takes from the file, secrets hidden).
    pub fn plan_lines(&self, flags: bool) -> Vec<String> {
        let sweep = &self.sweep;
        let runs = match sweep.runs.len() {
            1 => "1 run".to_string(),
            n => format!("{n} runs"),
        };
        let mut out = vec![format!(
            "sweep {}: {runs} under {}",
            sweep.name(),
            sweep.parent.display()
        )];
        for run in &sweep.runs {
            out.push(format!(
                "  {}  {}  ({})",
                run.dir_name, run.description, run.origin
            ));
            if flags {
                out.push(format!(
                    "      flags from the file: {}",
                    run.file_flags.join(" ")
                ));
            }
        }
        out
    }

    /// A note naming the runs in the parent that are not this sweep's (a
    /// report over the sweep's runs leaves them out), when there are any.
    pub fn other_runs_note(&self) -> Option<String> {
        let others = self.other_runs();
        let parent = self.sweep.parent.display();
        (!others.is_empty()).then(|| {
            format!(
                "note: {parent} also holds {} run(s) not of this sweep ({}); the sweep's report \
                 leaves them out, `speedbench report {parent}` would not",
                others.len(),
                others.join(", "),
            )
        })
    }

    /// Run directories in the parent that are not this sweep's (a report
    /// over the sweep's runs leaves them out; one over the parent would
    /// not).
    pub fn other_runs(&self) -> Vec<String> {
        let Ok(entries) = std::fs::read_dir(&self.sweep.parent) else {
            return Vec::new();
        };
        let ours: BTreeSet<&str> = self
            .sweep
            .runs
            .iter()
            .map(|r| r.dir_name.as_str())
            .collect();
        let mut others: Vec<String> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !ours.contains(n.as_str()))
            .filter(|n| {
                RUN_FILE_NAMES
                    .iter()
                    .any(|f| self.sweep.parent.join(n).join(f).exists())
            })
            .collect();
        others.sort();
        others
    }

    /// Runs every run in turn. A failed run does not stop the sweep; a
    /// stop does (the current run keeps what it measured, later ones are
    /// not started).
    pub async fn run<O: SweepObserver>(
        mut self,
        stop: &StopHandle,
        observer: &mut O,
    ) -> SweepOutcome {
        let total = self.prepared.len();
        let mut runs = Vec::with_capacity(total);
        let mut sweep_runs = std::mem::take(&mut self.sweep.runs).into_iter();
        for (i, p) in self.prepared.into_iter().enumerate() {
            let run = sweep_runs.next().expect("one prepared per run");
            let cools = i > 0 && i % self.sweep.cooldown_every.max(1) == 0;
            if cools && !self.sweep.cooldown.is_zero() && !stop.is_stopped() {
                observer.waiting(&format!(
                    "cooling down {:?} before run {} of {total}",
                    self.sweep.cooldown, run.index
                ));
                tokio::select! {
                    () = tokio::time::sleep(self.sweep.cooldown) => {}
                    () = stop.stopped() => {}
                }
            }
            let end = if stop.is_stopped() {
                RunEnd::NotStarted
            } else {
                observer.sweep_run_started(&run, total);
                let end = run_one(p, stop, observer).await;
                observer.sweep_run_ended(&run, &end);
                end
            };
            runs.push((run, end));
        }
        SweepOutcome {
            runs,
            report_flags: self.sweep.report_tokens,
        }
    }
}

/// Runs one checked run.
async fn run_one<O: SweepObserver>(p: Prepared, stop: &StopHandle, observer: &mut O) -> RunEnd {
    let spec = p.valid.spec().clone();
    crate::process::raise_open_files(spec.load.concurrency as u64 + 256);
    let dataset = match p.dataset {
        // A file shared by the sweep's runs: its trace prompts, if any,
        // are built against this run's server when it starts.
        Some(d) => Arc::unwrap_or_clone(d),
        None => match spec.load_dataset(observer).await {
            Ok(d) => d,
            Err(e) => return RunEnd::Failed(e),
        },
    };
    run_valid(p.valid, dataset, stop, observer).await
}

/// Runs a validated run over its loaded dataset and says how it ended (a
/// stop before it starts starts nothing).
pub(crate) async fn run_valid(
    valid: ValidRun,
    dataset: Dataset,
    stop: &StopHandle,
    observer: &mut dyn Observer,
) -> RunEnd {
    // A stop while the dataset loaded starts nothing.
    if stop.is_stopped() {
        return RunEnd::NotStarted;
    }
    let report = match execute(valid, dataset, stop.clone(), observer).await {
        Ok(report) => report,
        Err(e) => return RunEnd::Failed(e),
    };
    let figures = report.metrics().cloned().map(Box::new);
    match report.into_status() {
        Ok(RunStatus::Interrupted) => RunEnd::Interrupted(figures),
        Ok(_) => RunEnd::Completed(figures),
        Err(e) => RunEnd::Failed(e),
    }
}

/// How one run of a sweep ended.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunEnd {
    /// It ran to the end; its figures, as read back from its files (none
    /// when it kept neither records nor a summary).
    Completed(Option<Box<RunMetrics>>),
    /// It was stopped; its finished requests are kept, and their figures.
    Interrupted(Option<Box<RunMetrics>>),
    /// It failed (its records, if any, are kept).
    Failed(RunError),
    /// The sweep was stopped before it started.
    NotStarted,
}

impl RunEnd {
    /// `completed`, `failed: WHY`, ... as a sweep's summary prints it.
    pub fn describe(&self) -> String {
        match self {
            RunEnd::Completed(_) => "completed".into(),
            RunEnd::Interrupted(_) => "interrupted (its finished requests are kept)".into(),
            RunEnd::Failed(why) => format!("failed: {}", crate::error_message(why)),
            RunEnd::NotStarted => "not started (the sweep was stopped)".into(),
        }
    }

    /// Whether it left records to report on.
    pub fn kept_records(&self) -> bool {
        matches!(self, RunEnd::Completed(_) | RunEnd::Interrupted(_))
    }

    /// The run's figures (every run-level statistic), when it left any: a
    /// sweep's caller reads them here, not from the run's files again.
    pub fn metrics(&self) -> Option<&RunMetrics> {
        match self {
            RunEnd::Completed(m) | RunEnd::Interrupted(m) => m.as_deref(),
            RunEnd::Failed(_) | RunEnd::NotStarted => None,
        }
    }
}

/// Every run of a sweep and how it ended, in order.
#[derive(Debug)]
#[non_exhaustive]
pub struct SweepOutcome {
    /// Each run with its end.
    pub runs: Vec<(SweepRun, RunEnd)>,
    /// The file's `[report]` flags.
    report_flags: Vec<String>,
}

impl SweepOutcome {
    /// Each run of a sweep run in trials (`variations` runs per trial,
    /// trials in order) with its end in every trial, in the sweep's order.
    pub(crate) fn runs_by_variation(&self, variations: usize) -> Vec<Vec<&(SweepRun, RunEnd)>> {
        (0..variations.min(self.runs.len()))
            .map(|v| self.runs.iter().skip(v).step_by(variations).collect())
            .collect()
    }

    /// The outcome of runs run one by one (a tune's repeated level).
    pub(crate) fn from_ends(runs: Vec<(SweepRun, RunEnd)>) -> SweepOutcome {
        SweepOutcome {
            runs,
            report_flags: Vec::new(),
        }
    }

    /// The directories of the runs that left records.
    pub fn kept_dirs(&self) -> Vec<PathBuf> {
        self.runs
            .iter()
            .filter(|(_, e)| e.kept_records())
            .map(|(r, _)| r.dir.clone())
            .collect()
    }

    /// The summary: a heading naming `path`, then each run's directory and
    /// how it ended.
    pub fn summary_lines(&self, path: &Path) -> Vec<String> {
        let width = self
            .runs
            .iter()
            .map(|(r, _)| r.dir.display().to_string().len())
            .max()
            .unwrap_or(0);
        let mut out = vec![format!("\nsweep summary ({}):", path.display())];
        for (run, end) in &self.runs {
            out.push(format!(
                "  {:>2}  {:<width$}  {}",
                run.index,
                run.dir.display().to_string(),
                end.describe()
            ));
        }
        out
    }

    /// The `speedbench report` arguments of the report over the runs that
    /// left records (see [`Sweep::report_args`]).
    pub fn report_args(&self) -> Vec<String> {
        report_args(&self.report_flags, &self.kept_dirs())
    }

    /// The directory names of the runs that failed.
    pub fn failed(&self) -> Vec<&str> {
        self.runs
            .iter()
            .filter(|(_, e)| matches!(e, RunEnd::Failed(_)))
            .map(|(r, _)| r.dir_name.as_str())
            .collect()
    }
}

/// An [`Observer`] of every run of a sweep, told too when each starts and
/// ends.
pub trait SweepObserver: Observer {
    /// Run `run.index` of `total` is about to start.
    fn sweep_run_started(&mut self, _run: &SweepRun, _total: usize) {}

    /// A run ended.
    fn sweep_run_ended(&mut self, _run: &SweepRun, _end: &RunEnd) {}
}

impl SweepObserver for crate::observer::Silent {}

#[cfg(test)]
mod tests {

    /// The command line's repetition flags win over a config's `multiRun`;
    /// `--num-profile-runs 1` leaves one run each.
    #[test]
    fn given_repetition_flags_replace_multi_runs() {
        let config = crate::RepeatSpec {
            num_profile_runs: 3,
            cooldown_s: 15.0,
            ..Default::default()
        };
        let flags = crate::RepeatSpec {
            num_profile_runs: 2,
            cooldown_s: 0.0,
            confidence_level: 0.9,
            ..Default::default()
        };
        let given = |names: &[&str]| names.iter().map(|n| n.to_string()).collect();
        let kept = given_repeat(Some(config.clone()), &flags, &given(&[])).unwrap();
        assert_eq!(kept, config);
        let set = given_repeat(
            Some(config.clone()),
            &flags,
            &given(&["num-profile-runs", "profile-run-cooldown-seconds"]),
        )
        .unwrap();
        assert_eq!((set.num_profile_runs, set.cooldown_s), (2, 0.0));
        assert_eq!(set.confidence_level, config.confidence_level);
        let once = crate::RepeatSpec {
            num_profile_runs: 1,
            ..flags
        };
        assert!(given_repeat(Some(config), &once, &given(&["num-profile-runs"])).is_none());
        assert!(given_repeat(None, &once, &given(&["num-profile-runs"])).is_none());
        // Beside a file without `multiRun`: the command line's trials.
        let asked = given_repeat(None, &flags, &given(&["num-profile-runs"])).unwrap();
        assert_eq!(asked, flags);
        assert!(given_repeat(None, &flags, &given(&[])).is_none());
    }

    use super::*;

    #[test]
    fn a_bench_run_takes_speed_bench_pys_defaults_for_what_nobody_set() {
        let text = "[profile]\nosl = 64\n[[variation]]\nbench = \"qualitative\"\n\
                    [[variation]]\ninput_file = \"rows.jsonl\"\n";
        let given: BTreeSet<String> = ["url".to_string()].into();
        let mut base = RunSpec::default();
        base.target.url = "h:1".into();
        let sweep = Sweep::parse(Path::new("s.toml"), text, &base, &given).unwrap();
        let bench = sweep.runs()[0].spec().unwrap();
        assert_eq!(bench.target.url, "h:1", "given on the command line");
        assert_eq!(bench.sampling.osl, Some(64), "set by the file");
        assert_eq!(bench.sampling.extra_inputs, [r#"{"temperature":0}"#]);
        let file = sweep.runs()[1].spec().unwrap();
        assert!(file.sampling.extra_inputs.is_empty());
    }

    #[test]
    fn secrets_are_not_shown_with_a_runs_flags() {
        assert_eq!(shown("--api-key=sk-1"), "--api-key=(hidden)");
        assert_eq!(
            shown("--header=Authorization:Bearer x"),
            "--header=Authorization:(hidden)"
        );
        assert_eq!(shown("--concurrency=4"), "--concurrency=4");
        assert_eq!(
            shown(r#"--extra-inputs={"metadata":{"api_key":"k"}}"#),
            "--extra-inputs=(hidden)"
        );
        assert_eq!(
            shown("--extra-inputs=hf_token:v"),
            "--extra-inputs=(hidden)"
        );
        assert_eq!(shown("--url=http://u:p@h:1"), "--url=(hidden)");
        assert_eq!(
            shown("--extra-inputs=temperature:0"),
            "--extra-inputs=temperature:0"
        );
    }

    #[test]
    fn each_run_is_the_base_with_the_files_options_in_its_own_directory() {
        let mut base = RunSpec::default();
        base.target.url = "h:1".into();
        base.target.api_key = Some(crate::Secret::new("sk-1"));
        let given: BTreeSet<String> = ["url".to_string()].into();
        let text = "[profile]\nurl = \"x:2\"\nconcurrency = 3\n[matrix]\nrequest_count = [5, 6]\n\
                    [report]\nmetric = \"accept_rate\"\n";
        let sweep = Sweep::parse(Path::new("lad.toml"), text, &base, &given).unwrap();
        assert_eq!(sweep.parent(), Path::new("artifacts/lad"));
        assert_eq!(sweep.report_flags(), ["--metric=accept_rate"]);
        assert_eq!(
            sweep.report_args(&["d".into()]),
            ["--format=console", "--metric=accept_rate", "d"]
        );
        let specs: Vec<&RunSpec> = sweep.runs().iter().filter_map(SweepRun::spec).collect();
        assert_eq!(specs.len(), 2);
        for (spec, count) in specs.iter().zip([5, 6]) {
            assert_eq!(spec.target.url, "h:1", "the given option wins");
            assert_eq!(spec.load.concurrency, 3);
            assert_eq!(spec.load.request_count, Some(count));
            assert_eq!(spec.target.api_key, base.target.api_key);
        }
        assert_eq!(
            specs[1].outputs.output_artifact_dir.as_deref(),
            Some(Path::new("artifacts/lad/02-request_count-6"))
        );
        let given: BTreeSet<String> = ["run-id".to_string()].into();
        let e = Sweep::parse(Path::new("s.toml"), "", &base, &given).unwrap_err();
        assert!(e.to_string().contains("its own id"), "{e}");
    }
}
