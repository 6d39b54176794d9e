//! A comparison as speed_bench_compare.py makes it, from both sides'
//! speed_bench.py summary rows, and what the two files say they ran.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;
use speedbench_metrics::{
    OVERALL, SpeedBenchPyComparisonRow, SpeedBenchPyRow, SpeedBenchPySample,
    speed_bench_py_compare, speed_bench_py_rows,
};

use super::check::check_extra_inputs;
use super::{CompareRun, RunCheck};

/// What one side of a speed_bench.py comparison says it ran; `None` where
/// it does not say.
#[derive(Debug, Default)]
struct Settings {
    dataset: Option<String>,
    /// `Some(None)`: known to have sent no cap.
    osl: Option<Option<u64>>,
    limit: Option<u64>,
    extra_inputs: Option<serde_json::Map<String, Value>>,
}

/// Checks that two sides of a speed_bench.py comparison (either one a
/// speed_bench.py file, either one a run directory) ran the same thing.
///
/// Mismatches: a different dataset (a file's `bench` against a run's
/// dataset, `speed_bench_` prefix aside), `osl`, `limit` (when both
/// sides record it), a differing [`SAMPLING_FIELDS`](super::SAMPLING_FIELDS) entry of
/// `extra_inputs`, a category only one side has, and different samples
/// (each category's sample ids, as often). A run directory that did not
/// complete turns the category and sample differences into warnings. A
/// differing model, a differing non-sampling extra input, and settings
/// only one side records are warnings.
pub fn check_speed_bench_py_match(base: &CompareRun, spec: &CompareRun) -> RunCheck {
    let mut check = RunCheck::default();
    let mut incomplete = false;
    for (role, run) in [("baseline", base), ("speculative", spec)] {
        if let Some(why) = run.incomplete() {
            incomplete = true;
            check.warnings.push(format!(
                "the {role} run {} {why}: only the samples it finished are summarized",
                run.dir.display()
            ));
        }
    }
    let (bs, ss) = (
        base.speed_bench_py_settings(),
        spec.speed_bench_py_settings(),
    );
    if let (Some(x), Some(y)) = (&bs.dataset, &ss.dataset)
        && x != y
    {
        check.mismatches.push(format!(
            "dataset (bench): baseline {x:?}, speculative {y:?}"
        ));
    }
    if let (Some(x), Some(y)) = (bs.osl, ss.osl)
        && x != y
    {
        let show = |v: Option<u64>| v.map_or("not set".to_string(), |v| v.to_string());
        check.mismatches.push(format!(
            "osl (max_tokens): baseline {}, speculative {}",
            show(x),
            show(y)
        ));
    }
    match (bs.limit, ss.limit) {
        (Some(x), Some(y)) if x != y => check.mismatches.push(format!(
            "limit (samples per category): baseline {x}, speculative {y}"
        )),
        _ => {}
    }
    if let (Some(be), Some(se)) = (&bs.extra_inputs, &ss.extra_inputs) {
        check_extra_inputs(be, se, &mut check);
    }
    if !base.model.is_empty() && !spec.model.is_empty() && base.model != spec.model {
        check.warnings.push(format!(
            "models: baseline {:?}, speculative {:?}",
            base.model, spec.model
        ));
    }
    let differences = speed_bench_py_differences(base, spec);
    if incomplete {
        check.warnings.extend(differences);
    } else {
        check.mismatches.extend(differences);
    }
    check
}

/// Where two speed_bench.py sides ran different categories or samples.
fn speed_bench_py_differences(base: &CompareRun, spec: &CompareRun) -> Vec<String> {
    let categories = |rows: Vec<SpeedBenchPyRow>| -> BTreeSet<String> {
        rows.into_iter()
            .map(|r| r.category)
            .filter(|c| c != OVERALL)
            .collect()
    };
    let (bcat, scat) = (
        categories(base.speed_bench_py_rows()),
        categories(spec.speed_bench_py_rows()),
    );
    let mut differences = Vec::new();
    for (cat, only_in) in bcat
        .difference(&scat)
        .map(|c| (c, "baseline"))
        .chain(scat.difference(&bcat).map(|c| (c, "speculative")))
    {
        differences.push(format!(
            "category {cat:?} is only in the {only_in} {} (speed_bench_compare.py skips it)",
            if only_in == "baseline" {
                base.describe()
            } else {
                spec.describe()
            }
        ));
    }
    if let Some(line) = sample_differences(base, spec) {
        differences.push(line);
    }
    differences
}

/// The samples the two sides ran differently (by category and id, counted),
/// in one line naming the first.
fn sample_differences(base: &CompareRun, spec: &CompareRun) -> Option<String> {
    let ids = |samples: Vec<SpeedBenchPySample>| -> BTreeMap<(String, String), usize> {
        let mut counts = BTreeMap::new();
        for s in samples {
            *counts
                .entry((s.category.unwrap_or_default(), s.id))
                .or_default() += 1;
        }
        counts
    };
    let (bi, si) = (
        ids(base.speed_bench_py_samples()),
        ids(spec.speed_bench_py_samples()),
    );
    let keys: BTreeSet<&(String, String)> = bi.keys().chain(si.keys()).collect();
    let sample_lines: Vec<String> = keys
        .into_iter()
        .filter_map(|key| {
            let (x, y) = (
                bi.get(key).copied().unwrap_or(0),
                si.get(key).copied().unwrap_or(0),
            );
            (x != y).then(|| {
                format!(
                    "sample {:?} (category {:?}): {x} in the baseline, {y} in the speculative side",
                    key.1, key.0
                )
            })
        })
        .collect();
    let first = sample_lines.first()?;
    Some(format!(
        "the sides ran different samples ({} sample id(s) differ); first: {first}",
        sample_lines.len()
    ))
}

/// speed_bench_compare.py's comparison of a baseline and a speculative
/// side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpeedBenchPyComparison {
    /// The baseline's path (run directory or speed_bench.py file).
    pub baseline: PathBuf,
    /// The speculative side's path.
    pub speculative: PathBuf,
    /// The baseline's model, in full; `None` when its file names none.
    pub baseline_model: Option<String>,
    /// The speculative side's model, in full; `None` likewise.
    pub speculative_model: Option<String>,
    /// [`speed_bench_py_compare`]'s rows: the speculative side's categories
    /// in its order that the baseline has too, `overall` last.
    pub rows: Vec<SpeedBenchPyComparisonRow>,
}

/// speed_bench_compare.py over two sides, each a speed_bench.py file or a
/// run directory (whose summary rows come from its records, see
/// [`CompareRun::speed_bench_py_rows`]): one code path for both.
pub fn compare_speed_bench_py(base: &CompareRun, spec: &CompareRun) -> SpeedBenchPyComparison {
    SpeedBenchPyComparison {
        baseline: base.dir.clone(),
        speculative: spec.dir.clone(),
        baseline_model: (!base.model.is_empty()).then(|| base.model.clone()),
        speculative_model: (!spec.model.is_empty()).then(|| spec.model.clone()),
        rows: speed_bench_py_compare(&base.speed_bench_py_rows(), &spec.speed_bench_py_rows()),
    }
}

impl SpeedBenchPyComparison {
    /// What speed_bench_compare.py prints: `Comparison: baseline=PATH
    /// speculative=PATH`, then its table
    /// ([`crate::render_speed_bench_py_comparison`]).
    pub fn to_console(&self) -> String {
        format!(
            "Comparison: baseline={} speculative={}\n{}",
            self.baseline.display(),
            self.speculative.display(),
            crate::render_speed_bench_py_comparison(&self.rows)
        )
    }

    /// The comparison as JSON, at full precision (`null` for n/a).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

impl CompareRun {
    /// True when this side is a speed_bench.py `--output` file.
    pub fn is_speed_bench_py_file(&self) -> bool {
        self.speed_bench_py.is_some()
    }

    /// This side's speed_bench.py summary rows: a file's as written, a run
    /// directory's computed from its records
    /// ([`speedbench_metrics::speed_bench_py_rows`], as `report --format
    /// speed-bench-py` prints them).
    pub fn speed_bench_py_rows(&self) -> Vec<SpeedBenchPyRow> {
        match &self.speed_bench_py {
            Some(file) => file.summary.clone(),
            None => speed_bench_py_rows(&self.records),
        }
    }

    /// This side's samples (`results` of a file; joined from the records
    /// of a run directory).
    fn speed_bench_py_samples(&self) -> Vec<SpeedBenchPySample> {
        match &self.speed_bench_py {
            Some(file) => file.results.clone(),
            None => SpeedBenchPySample::from_records_in_dispatch_order(&self.records),
        }
    }

    /// What the side says it ran: its dataset (a file's `bench`) without a
    /// `speed_bench_` prefix, `--osl`, `--limit` and `--extra-inputs`.
    fn speed_bench_py_settings(&self) -> Settings {
        let strip = |d: &str| d.strip_prefix("speed_bench_").unwrap_or(d).to_string();
        match (&self.speed_bench_py, &self.manifest) {
            (Some(file), _) => Settings {
                dataset: file.config.bench.as_deref().map(strip),
                osl: Some(file.config.osl),
                limit: file.config.limit,
                extra_inputs: Some(file.config.extra_inputs.clone()),
            },
            (None, Some(m)) => Settings {
                dataset: (!m.dataset.is_empty()).then(|| strip(&m.dataset)),
                osl: Some(m.config.get("osl").and_then(Value::as_u64)),
                limit: m.limit_per_category(),
                extra_inputs: m
                    .config
                    .get("extra_inputs")
                    .and_then(Value::as_object)
                    .cloned(),
            },
            (None, None) => Settings::default(),
        }
    }

    fn describe(&self) -> &'static str {
        if self.is_speed_bench_py_file() {
            "speed_bench.py file"
        } else {
            "run"
        }
    }
}
