//! The answer of a tune (`speedbench tune`, `speedbench report TUNE_DIR`):
//! every configuration compared with the baseline at every load level by
//! [`compare`], per category and overall; the break-even load of each
//! configuration; and the configuration to deploy per category, chosen by
//! [`speedbench_metrics::choose`] from the latency speedups and their
//! bootstrap intervals (docs/tune.md says why latency).

mod predict;
mod render;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;
use speedbench_metrics::{
    Candidate, Choice, FigureOptions, GoodputComparison, Interval, OVERALL, Slos, break_even,
    choose,
};
use speedbench_record::{RequestRecord, RunManifest, TuneConfiguration, TuneManifest, TuneRun};
use speedbench_scrape::EnergyComparison;

pub use predict::{PredictedBudget, TunePrediction};

use crate::error::ReportError;
use crate::{CategoryComparison, CompareOptions, Comparison, compare, load_compare_run};

/// A tune's answer.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct TuneReport {
    /// The tune's directory.
    pub dir: PathBuf,
    /// The flag the load levels set (`concurrency`, `request-rate`).
    pub load_flag: String,
    /// The load levels, in increasing order of the run.
    pub load_levels: Vec<String>,
    /// The temperature every run sent (`None`: the server's default).
    pub temperature: Option<String>,
    /// The intervals' confidence level.
    pub confidence: f64,
    /// The SLOs the runs were made with (`--goodput`): each level's
    /// comparison holds both sides' goodput against them.
    #[serde(skip_serializing_if = "Slos::is_empty")]
    pub slos: Slos,
    /// Every speculative configuration against the baseline.
    pub configurations: Vec<TunedConfiguration>,
    /// Per category (`overall` last): what to deploy.
    pub categories: Vec<CategoryAnswer>,
    /// What each configuration's runs predict for smaller draft budgets,
    /// per load level and category, beside what the tune measured.
    pub predictions: Vec<TunePrediction>,
    /// What a reader should know: runs missing, caches not emptied,
    /// servers that failed.
    pub notes: Vec<String>,
}

/// One configuration against the baseline.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct TunedConfiguration {
    /// Its name (`k=2`).
    pub name: String,
    /// Its parameters' values.
    pub params: BTreeMap<String, String>,
    /// Per load level, the comparison (none where a side has no records).
    pub levels: Vec<LevelComparison>,
    /// All its load levels pooled (each side's records of the levels both
    /// ran): the figures its overall choice rests on.
    pub pooled: Option<Comparison>,
}

/// A configuration against the baseline at one load level.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct LevelComparison {
    /// The load level.
    pub load: String,
    /// The comparison, when both runs left records.
    pub comparison: Option<Comparison>,
    /// Why there is none.
    pub missing: Option<String>,
}

/// What to deploy for one category.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct CategoryAnswer {
    /// The category, or `overall`.
    pub category: String,
    /// The choice over every load level pooled.
    pub choice: Choice,
    /// The chosen configuration's parameters (`{"k": "3"}`), when one is
    /// chosen.
    pub recommended: Option<BTreeMap<String, String>>,
    /// The choice at each load level.
    pub by_load: Vec<LoadChoice>,
    /// Each configuration's break-even load, in the configurations' order.
    pub break_even: Vec<BreakEven>,
}

/// A configuration's break-even load: the highest level up to which its
/// latency speedup's interval stays above 1.
#[derive(Debug, Clone, Serialize)]
pub struct BreakEven {
    /// The configuration.
    pub configuration: String,
    /// The load level; `None` when it does not pay even at the lowest.
    pub load: Option<String>,
}

/// The choice at one load level.
#[derive(Debug, Clone, Serialize)]
pub struct LoadChoice {
    /// The load level.
    pub load: String,
    /// What to deploy at it.
    pub choice: Choice,
}

impl TuneReport {
    /// Reads the tune in `dir` (its `tune.json` and every run that left
    /// records) and works out the answer.
    pub fn from_dir(dir: &Path, options: &CompareOptions) -> Result<TuneReport, ReportError> {
        let manifest = TuneManifest::read(dir)
            .map_err(|e| ReportError::Compare(e.to_string()))?
            .ok_or_else(|| {
                ReportError::Compare(format!(
                    "{}: no tune.json (not a tune's directory)",
                    dir.display()
                ))
            })?;
        let baseline = manifest.baseline().ok_or_else(|| {
            ReportError::Compare(format!("{}: tune.json names no baseline", dir.display()))
        })?;
        let mut notes = run_notes(&manifest);
        let base_records = load_side(dir, baseline, &mut notes);
        let sides: Vec<predict::Side<'_>> = manifest
            .configurations
            .iter()
            .filter(|c| !c.baseline)
            .map(|c| (c, load_side(dir, c, &mut notes)))
            .collect();
        let slos = tune_slos(dir, baseline);
        let configurations: Vec<TunedConfiguration> = sides
            .iter()
            .map(|(c, records)| {
                let loads = &manifest.load_levels;
                tuned(c, (&base_records, records), loads, options, &slos)
            })
            .collect();
        let mut configurations = configurations;
        add_level_figures(dir, baseline, &manifest.configurations, &mut configurations);
        let categories = answers(&configurations, &manifest.load_levels);
        let names: Vec<String> = categories.iter().map(|a| a.category.clone()).collect();
        let predictions =
            predict::predictions(&base_records, &sides, &manifest.load_levels, &names);
        Ok(TuneReport {
            dir: dir.to_path_buf(),
            load_flag: manifest.load_flag.clone(),
            load_levels: manifest.load_levels.clone(),
            temperature: manifest.temperature.clone(),
            confidence: options.confidence,
            slos,
            configurations,
            categories,
            predictions,
            notes,
        })
    }

    /// The recommendation for `category` (or `overall`).
    pub fn answer(&self, category: &str) -> Option<&CategoryAnswer> {
        self.categories.iter().find(|a| a.category == category)
    }
}

/// Notes on the manifest: servers that failed, runs that did not complete,
/// caches not emptied.
fn run_notes(manifest: &TuneManifest) -> Vec<String> {
    let mut notes = Vec::new();
    for c in &manifest.configurations {
        if let Some(problem) = &c.problem {
            let first = problem.lines().next().unwrap_or(problem);
            notes.push(format!("{}: its server failed: {first}", c.name));
        }
        for r in &c.runs {
            if r.status != "completed" {
                let why = r.problem.as_deref().unwrap_or("");
                notes.push(format!(
                    "{} at {}={}: {}{}{why}",
                    c.name,
                    manifest.load_flag,
                    r.load,
                    r.status,
                    if why.is_empty() { "" } else { ": " }
                ));
            }
            if let Some(cache) = r.cache.as_deref().filter(|c| c.starts_with("not emptied")) {
                notes.push(format!(
                    "{} at {}={}: prefix cache {cache}; earlier runs on the same server may \
                     have warmed it",
                    c.name, manifest.load_flag, r.load
                ));
            }
        }
    }
    notes
}

/// A configuration's records per load level (`None` where its run left
/// none), noting what could not be read.
fn load_side(
    dir: &Path,
    c: &TuneConfiguration,
    notes: &mut Vec<String>,
) -> Vec<Option<Vec<RequestRecord>>> {
    c.runs
        .iter()
        .map(|r: &TuneRun| {
            if r.status == "pending" || r.status == "not started" {
                return None;
            }
            match load_compare_run(&dir.join(&r.dir), &c.name) {
                Ok(run) => Some(run.records),
                Err(e) => {
                    if r.status == "completed" || r.status == "interrupted" {
                        notes.push(format!("{}: {e}", r.dir));
                    }
                    None
                }
            }
        })
        .collect()
}

/// What each level adds to its comparison from the runs' directories:
/// energy per output token where both sides scraped their GPUs (their
/// `summary.json`), and with repeated runs (`--num-profile-runs`) each
/// row's latency speedup across runs, which the choices then use; pooled
/// over the levels, repetition `k` of the tune is every level's run `k`.
fn add_level_figures(
    dir: &Path,
    baseline: &TuneConfiguration,
    planned: &[TuneConfiguration],
    configurations: &mut [TunedConfiguration],
) {
    let level_dir = |runs: &[TuneRun], i: usize| runs.get(i).map(|r| dir.join(&r.dir));
    for tuned in configurations {
        let Some(plan) = planned.iter().find(|c| c.name == tuned.name) else {
            continue;
        };
        let mut repeated: Vec<Option<(RunsOfLevel, RunsOfLevel)>> = Vec::new();
        for (i, level) in tuned.levels.iter_mut().enumerate() {
            let (Some(cmp), Some(b), Some(s)) = (
                &mut level.comparison,
                level_dir(&baseline.runs, i),
                level_dir(&plan.runs, i),
            ) else {
                repeated.push(None);
                continue;
            };
            cmp.energy = EnergyComparison::of(&gpu_of(&b), &gpu_of(&s));
            let runs = repeated_runs(&b).zip(repeated_runs(&s));
            if let Some((b, s)) = &runs {
                cmp.add_latency_across_runs(&slices(b), &slices(s));
            }
            repeated.push(runs);
        }
        if let (Some(pooled), Some((b, s))) = (&mut tuned.pooled, pool_repetitions(repeated)) {
            pooled.add_latency_across_runs(&slices(&b), &slices(&s));
        }
    }
}

/// A level's repeated runs' records, run by run.
type RunsOfLevel = Vec<Vec<RequestRecord>>;

/// The GPU figures of a level's run, or of each of its repeated runs;
/// empty when any lacks them.
fn gpu_of(dir: &Path) -> Vec<speedbench_scrape::GpuTelemetry> {
    speedbench_runs::runs_of(dir)
        .iter()
        .map(|d| crate::run_gpu_telemetry(d))
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default()
}

/// A level's repeated runs' records (read again, run by run); `None` for
/// a level run once.
fn repeated_runs(dir: &Path) -> Option<RunsOfLevel> {
    let dirs = speedbench_runs::runs_of(dir);
    (dirs.len() > 1).then_some(())?;
    dirs.iter()
        .map(|d| load_compare_run(d, "run").ok().map(|r| r.records))
        .collect()
}

/// Repetition `k` of the whole tune: every level's run `k`, for each side;
/// `None` unless every level was repeated as often on both sides.
fn pool_repetitions(
    levels: Vec<Option<(RunsOfLevel, RunsOfLevel)>>,
) -> Option<(RunsOfLevel, RunsOfLevel)> {
    let levels: Vec<(RunsOfLevel, RunsOfLevel)> = levels.into_iter().collect::<Option<_>>()?;
    let n = levels.first()?.0.len();
    if levels.iter().any(|(b, s)| b.len() != n || s.len() != n) {
        return None;
    }
    let mut pooled = (vec![Vec::new(); n], vec![Vec::new(); n]);
    for (b, s) in levels {
        for (k, (b, s)) in b.into_iter().zip(s).enumerate() {
            pooled.0[k].extend(b);
            pooled.1[k].extend(s);
        }
    }
    Some(pooled)
}

fn slices(runs: &[Vec<RequestRecord>]) -> Vec<&[RequestRecord]> {
    runs.iter().map(Vec::as_slice).collect()
}

/// The SLOs the tune's runs were made with: those in the `run.json` of the
/// baseline's first run that has one (every run of a tune has the same).
fn tune_slos(dir: &Path, baseline: &TuneConfiguration) -> Slos {
    baseline
        .runs
        .iter()
        .flat_map(|r| speedbench_runs::runs_of(&dir.join(&r.dir)))
        .find_map(|run| {
            let text = std::fs::read(run.join(RunManifest::FILE_NAME)).ok()?;
            let manifest: RunManifest = serde_json::from_slice(&text).ok()?;
            Some(FigureOptions::of_run(&manifest).slos)
        })
        .unwrap_or_default()
}

/// A run's records at one load level (`None` where it left none).
type LevelRecords = Option<Vec<RequestRecord>>;

/// One configuration against the baseline, level by level (with both
/// sides' goodput against `slos`) and pooled.
fn tuned<'a>(
    c: &TuneConfiguration,
    (base, spec): (&'a [LevelRecords], &'a [LevelRecords]),
    loads: &[String],
    options: &CompareOptions,
    slos: &Slos,
) -> TunedConfiguration {
    let mut pooled_base = Vec::new();
    let mut pooled_spec = Vec::new();
    let levels = loads
        .iter()
        .enumerate()
        .map(|(i, load)| {
            let side = |runs: &'a [LevelRecords]| runs.get(i)?.as_deref();
            let (comparison, missing) = match (side(base), side(spec)) {
                (Some(b), Some(s)) => match compare(b, s, options) {
                    Ok(mut cmp) => {
                        cmp.goodput = GoodputComparison::of(b, s, slos);
                        pooled_base.extend_from_slice(b);
                        pooled_spec.extend_from_slice(s);
                        (Some(cmp), None)
                    }
                    Err(e) => (None, Some(e.to_string())),
                },
                (None, _) => (None, Some("the baseline's run left no records".into())),
                (_, None) => (None, Some("its run left no records".into())),
            };
            LevelComparison {
                load: load.clone(),
                comparison,
                missing,
            }
        })
        .collect();
    let pooled = (!pooled_base.is_empty())
        .then(|| compare(&pooled_base, &pooled_spec, options).ok())
        .flatten();
    TunedConfiguration {
        name: c.name.clone(),
        params: c.params.clone(),
        levels,
        pooled,
    }
}

/// `category`'s row of a comparison.
pub(crate) fn row<'a>(c: Option<&'a Comparison>, category: &str) -> Option<&'a CategoryComparison> {
    c?.rows.iter().find(|r| r.category == category)
}

/// The latency speedup and its interval of a row.
/// A row's latency speedup and its interval: across runs where the level
/// was repeated (run-to-run variation counted), else the bootstrap over
/// requests.
fn latency(row: Option<&CategoryComparison>) -> (Option<f64>, Option<Interval>) {
    row.map_or((None, None), |r| match r.latency_across_runs {
        Some(a) => (
            Some(a.ratio),
            Some(Interval {
                low: a.low,
                high: a.high,
            }),
        ),
        None => (r.speedups.latency_speedup, r.speedups.latency_speedup_ci),
    })
}

/// Every category any comparison has, in its order, `overall` last.
fn category_names(configurations: &[TunedConfiguration]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let all = configurations.iter().flat_map(|c| {
        c.pooled
            .iter()
            .chain(c.levels.iter().filter_map(|l| l.comparison.as_ref()))
    });
    for cmp in all {
        for r in &cmp.rows {
            if r.category != OVERALL && !names.contains(&r.category) {
                names.push(r.category.clone());
            }
        }
    }
    names.push(OVERALL.to_string());
    names
}

/// The choice among the configurations given one comparison of each.
fn choice_over<'a>(
    configurations: &'a [TunedConfiguration],
    category: &str,
    pick: impl Fn(&'a TunedConfiguration) -> Option<&'a Comparison>,
) -> Choice {
    let candidates: Vec<Candidate<'_>> = configurations
        .iter()
        .filter_map(|c| {
            let (speedup, interval) = latency(row(pick(c), category));
            Some(Candidate {
                name: &c.name,
                speedup: speedup?,
                interval,
            })
        })
        .collect();
    choose(&candidates)
}

/// Per category: the choice pooled and per level, and the break-even loads.
fn answers(configurations: &[TunedConfiguration], loads: &[String]) -> Vec<CategoryAnswer> {
    category_names(configurations)
        .into_iter()
        .map(|category| {
            let choice = choice_over(configurations, &category, |c| c.pooled.as_ref());
            let recommended = match &choice {
                Choice::Configuration { name } => configurations
                    .iter()
                    .find(|c| &c.name == name)
                    .map(|c| c.params.clone()),
                _ => None,
            };
            let by_load = loads
                .iter()
                .enumerate()
                .map(|(i, load)| LoadChoice {
                    load: load.clone(),
                    choice: choice_over(configurations, &category, |c| {
                        c.levels.get(i).and_then(|l| l.comparison.as_ref())
                    }),
                })
                .collect();
            let break_even = configurations
                .iter()
                .map(|c| {
                    let intervals: Vec<Option<Interval>> = c
                        .levels
                        .iter()
                        .map(|l| latency(row(l.comparison.as_ref(), &category)).1)
                        .collect();
                    BreakEven {
                        configuration: c.name.clone(),
                        load: break_even(&intervals).map(|i| loads[i].clone()),
                    }
                })
                .collect();
            CategoryAnswer {
                category,
                choice,
                recommended,
                by_load,
                break_even,
            }
        })
        .collect()
}
