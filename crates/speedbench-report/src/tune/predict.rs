//! The prediction of a tune: from each speculative configuration's run at
//! its draft budget `K`, the decode speedup at every smaller budget
//! ([`speedbench_metrics::predict_budgets`]), beside the speedup measured
//! where the tune also ran that budget (a configuration whose parameters
//! differ from this one's in one value, drafting `k` a step).

use serde::Serialize;
use speedbench_metrics::{
    BudgetPrediction, MeasuredPasses, OVERALL, PooledHistogram, decode_speedup, is_measured,
    predict_budgets,
};
use speedbench_record::{RequestRecord, TuneConfiguration};

use crate::matrix::category_key;

/// One configuration's run at one load level, for one category: what it
/// predicts for each smaller budget.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct TunePrediction {
    /// The configuration the prediction comes from.
    pub configuration: String,
    /// Its draft budget `K` (from its steps' acceptance histograms).
    pub budget: u32,
    /// The load level.
    pub load: String,
    /// The category, or `overall`.
    pub category: String,
    /// The baseline's milliseconds per target pass.
    pub base_pass_ms: f64,
    /// This run's milliseconds per pass.
    pub spec_pass_ms: f64,
    /// Per budget `k = 1..=K`.
    pub budgets: Vec<PredictedBudget>,
}

/// The prediction for one budget, and the measurement where there is one.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct PredictedBudget {
    /// What the run predicts.
    #[serde(flatten)]
    pub predicted: BudgetPrediction,
    /// The configuration that ran budget `k` (this one at `k = K`).
    pub measured_by: Option<String>,
    /// Its measured decode speedup ([`decode_speedup`]).
    pub measured: Option<f64>,
    /// `predicted / measured - 1`.
    pub error: Option<f64>,
}

/// A configuration with its records per load level.
pub(super) type Side<'a> = (&'a TuneConfiguration, Vec<Option<Vec<RequestRecord>>>);

/// The draft budget of a run: its acceptance histograms' last bucket.
fn budget_of(records: &[&RequestRecord]) -> Option<u32> {
    let k = records
        .iter()
        .filter_map(|r| r.spec.as_ref())
        .map(|s| s.acceptance_histogram.len())
        .max()?;
    u32::try_from(k.checked_sub(1)?).ok().filter(|&k| k > 0)
}

/// The measured records of `category` (every one for `overall`).
fn of_category<'a>(records: &'a [RequestRecord], category: &str) -> Vec<&'a RequestRecord> {
    records
        .iter()
        .filter(|r| is_measured(r))
        .filter(|r| category == OVERALL || category_key(r).as_deref() == Some(category))
        .collect()
}

/// Whether two configurations' parameters differ in exactly one value.
fn one_apart(a: &TuneConfiguration, b: &TuneConfiguration) -> bool {
    a.params.len() == b.params.len()
        && a.params
            .iter()
            .filter(|(k, v)| b.params.get(*k) != Some(v))
            .count()
            == 1
}

/// Every prediction of the tune, over `categories` at each load level.
pub(super) fn predictions(
    baseline: &[Option<Vec<RequestRecord>>],
    sides: &[Side<'_>],
    loads: &[String],
    categories: &[String],
) -> Vec<TunePrediction> {
    let mut out = Vec::new();
    for (level, load) in loads.iter().enumerate() {
        let Some(Some(base)) = baseline.get(level) else {
            continue;
        };
        for category in categories {
            let base = of_category(base, category);
            for (c, records) in sides {
                let Some(Some(spec)) = records.get(level) else {
                    continue;
                };
                let spec = of_category(spec, category);
                let at = Place {
                    level,
                    load,
                    category,
                };
                out.extend(predict_one(c, &base, &spec, sides, &at));
            }
        }
    }
    out
}

/// Where a prediction is made: a load level and a category.
struct Place<'a> {
    level: usize,
    load: &'a str,
    category: &'a str,
}

/// What `c`'s run predicts at one place, with the measured speedups of the
/// configurations one value apart that ran each smaller budget.
fn predict_one(
    c: &TuneConfiguration,
    base: &[&RequestRecord],
    spec: &[&RequestRecord],
    sides: &[Side<'_>],
    at: &Place<'_>,
) -> Option<TunePrediction> {
    let budget = budget_of(spec)?;
    let mut histogram = PooledHistogram::default();
    for s in spec.iter().filter_map(|r| r.spec.as_ref()) {
        histogram.add(&s.acceptance_histogram);
    }
    let measured = MeasuredPasses::of(base, spec)?;
    let budgets = predict_budgets(&histogram.counts, measured)
        .into_iter()
        .map(|predicted| {
            let measured_run = sides.iter().find_map(|(other, records)| {
                let same = std::ptr::eq(*other, c);
                if !same && !one_apart(c, other) {
                    return None;
                }
                let run = of_category(records.get(at.level)?.as_ref()?, at.category);
                (budget_of(&run)? == predicted.k).then(|| (other.name.clone(), run))
            });
            let (measured_by, measured) = match measured_run {
                Some((name, run)) => (Some(name), decode_speedup(base, &run)),
                None => (None, None),
            };
            PredictedBudget {
                error: measured.map(|m| predicted.decode_speedup / m - 1.0),
                predicted,
                measured_by,
                measured,
            }
        })
        .collect();
    Some(TunePrediction {
        configuration: c.name.clone(),
        budget,
        load: at.load.to_string(),
        category: at.category.to_string(),
        base_pass_ms: measured.base_pass_ms,
        spec_pass_ms: measured.spec_pass_ms,
        budgets,
    })
}
