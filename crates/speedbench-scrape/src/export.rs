//! `server_metrics_export.json`: the types, and the statistics computed from
//! the scraped samples.
//!
//! The types read both speedbench's layout and AIPerf's (which has no
//! `tool`, `start_ns`/`end_ns`, gauge `count` or counter `aggregate`, and
//! keeps histogram buckets beside the stats): fields one of them lacks
//! default, and fields only AIPerf writes are ignored.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use speedbench_metrics::percentile_sorted;

use crate::error::ScrapeError;
use crate::parse::{MetricType, Role};

/// Everything scraped from the servers' Prometheus endpoints during a run.
///
/// The layout follows AIPerf's `server_metrics_export.json`: `metrics[name]`
/// holds `type`, `description` and one `series` entry per (endpoint, label
/// set), each with `stats`. Counters are named without `_total`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerMetricsExport {
    /// Version of this layout (`"1.0"`).
    #[serde(default)]
    pub schema_version: String,
    /// The tool that wrote it (`speedbench <version>`; empty in AIPerf's).
    #[serde(default)]
    pub tool: String,
    /// When and where the samples were taken.
    #[serde(default)]
    pub summary: ExportSummary,
    /// Per metric family, by name.
    pub metrics: BTreeMap<String, MetricExport>,
}

/// When and where the samples were taken.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExportSummary {
    /// Every endpoint asked for.
    pub endpoints_configured: Vec<String>,
    /// Endpoints that answered at least once with a parseable exposition.
    pub endpoints_successful: Vec<String>,
    /// First scrape started, Unix nanoseconds.
    pub start_ns: i64,
    /// Last scrape ended, Unix nanoseconds.
    pub end_ns: i64,
    /// Start of the profiling window (warmup excluded), Unix nanoseconds.
    pub profiling_start_ns: Option<i64>,
    /// End of the profiling window, Unix nanoseconds.
    pub profiling_end_ns: Option<i64>,
    /// The scrape interval, milliseconds.
    pub interval_ms: f64,
    /// Per endpoint: how the fetches went.
    pub endpoint_info: BTreeMap<String, EndpointInfo>,
}

/// How the fetches of one endpoint went.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct EndpointInfo {
    /// Fetches attempted.
    pub total_fetches: u64,
    /// Fetches that failed (connection, status, or parse error).
    pub failed_fetches: u64,
    /// First successful fetch, Unix nanoseconds.
    pub first_fetch_ns: Option<i64>,
    /// Last successful fetch, Unix nanoseconds.
    pub last_fetch_ns: Option<i64>,
    /// Mean duration of successful fetches, milliseconds.
    pub avg_fetch_latency_ms: Option<f64>,
    /// The last failure, if any.
    pub last_error: Option<String>,
    /// Samples whose value was NaN or infinite (vLLM V0 gauges read `NaN`
    /// before the first draft): skipped, so no statistic holds one.
    pub non_finite_samples: u64,
}

/// One metric family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricExport {
    /// The family's type ([`MetricType::Unknown`] when left out, as
    /// AIPerf's hand-written exports do).
    #[serde(rename = "type", default)]
    pub kind: MetricType,
    /// The `# HELP` text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// One entry per (endpoint, label set).
    #[serde(default)]
    pub series: Vec<SeriesExport>,
    /// Counters: the totals summed over every series (every engine, rank
    /// and endpoint), as `vllm bench serve` sums label sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<CounterAggregate>,
}

/// One series of a family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(from = "SeriesWire")]
pub struct SeriesExport {
    /// The endpoint scraped.
    #[serde(default)]
    pub endpoint_url: String,
    /// The series' labels (without `le` for histograms).
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Statistics over the window; `None` when no sample fell in it.
    #[serde(default)]
    pub stats: Option<SeriesStats>,
}

/// A series as either tool writes it: AIPerf keeps a histogram's bucket
/// deltas beside its `stats`, speedbench inside them.
#[derive(Deserialize)]
struct SeriesWire {
    #[serde(default)]
    endpoint_url: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    stats: Option<SeriesStats>,
    #[serde(default)]
    buckets: Option<BTreeMap<String, f64>>,
}

impl From<SeriesWire> for SeriesExport {
    fn from(wire: SeriesWire) -> SeriesExport {
        let mut stats = wire.stats;
        if let (Some(SeriesStats::Histogram(h)), Some(buckets)) = (&mut stats, wire.buckets)
            && h.buckets.is_empty()
        {
            h.buckets = buckets;
        }
        SeriesExport {
            endpoint_url: wire.endpoint_url,
            labels: wire.labels,
            stats,
        }
    }
}

/// The statistics of one series, by family type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SeriesStats {
    /// Histogram deltas.
    Histogram(HistogramStats),
    /// Counter delta and rate.
    Counter(CounterStats),
    /// Gauge (and untyped) sample statistics. Any statistic may be left
    /// out (NaN): AIPerf writes a series that saw nothing in the window as
    /// `{"count": 0}` alone, and its hand-written exports a gauge's `avg`.
    Gauge(GaugeStats),
}

/// A counter's change over the profiling window.
///
/// The reference is the last sample taken strictly before the window opened
/// (so warmup is excluded), else the first sample. The total runs from it to
/// the last sample taken, including the samples of the shutdown delay after
/// the window (servers publish some counters after the last response).
/// Decreases are resets: the increase after a reset is counted from zero,
/// as Prometheus' `increase()` does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterStats {
    /// The increase.
    #[serde(deserialize_with = "nan_if_null")]
    pub total: f64,
    /// `total` divided by the seconds between the reference and last sample.
    pub rate: Option<f64>,
    /// Decreases seen (counter resets, e.g. a server restart).
    #[serde(default)]
    pub resets: u32,
    /// With time slices: the rate's spread over the window's complete
    /// slices (AIPerf's `rate_avg` .. `rate_std`); `None` without slices.
    #[serde(flatten)]
    pub slice_rates: SliceRates,
}

/// A counter's rate in each complete time slice of the window, summarised
/// as AIPerf does (`aiperf/server_metrics/export_stats.py`): the window
/// `[start, end]` is cut into slices of the slice duration from its start
/// (the last one partial when it does not divide); a slice's increase runs
/// from the last sample at or before its start to the last at or before its
/// end (a decrease counts as none), over its length; the partial slice is
/// left out of these figures. Each is `None` where there are no slices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SliceRates {
    /// Mean of the slices' rates, per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_avg: Option<f64>,
    /// Smallest slice rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_min: Option<f64>,
    /// Largest slice rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_max: Option<f64>,
    /// Sample standard deviation of the slice rates (ddof 1; 0 for one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_std: Option<f64>,
}

/// Statistics of a gauge's samples inside the profiling window.
///
/// `std` is the sample standard deviation (0 for one sample); percentiles
/// interpolate linearly between closest ranks (numpy's default). `avg` is a
/// plain mean over time: an idle interval counts as much as a busy one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GaugeStats {
    /// Samples in the window (0 when read from an AIPerf export, which
    /// does not write it).
    #[serde(default)]
    pub count: usize,
    /// Mean of the samples.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub avg: f64,
    /// Smallest sample.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub min: f64,
    /// Largest sample.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub max: f64,
    /// Sample standard deviation (ddof 1).
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub std: f64,
    /// 1st percentile.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub p1: f64,
    /// 5th percentile.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub p5: f64,
    /// 10th percentile.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub p10: f64,
    /// 25th percentile.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub p25: f64,
    /// Median.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub p50: f64,
    /// 75th percentile.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub p75: f64,
    /// 90th percentile.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub p90: f64,
    /// 95th percentile.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub p95: f64,
    /// 99th percentile.
    #[serde(default = "nan", deserialize_with = "nan_if_null")]
    pub p99: f64,
}

/// A histogram's change over the window (counter rules for every part).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistogramStats {
    /// Observations.
    pub count: f64,
    /// Sum of the observations.
    pub sum: f64,
    /// `sum / count`, when there were observations.
    pub avg: Option<f64>,
    /// `count` per second between the reference and last sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count_rate: Option<f64>,
    /// `sum` per second between the reference and last sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sum_rate: Option<f64>,
    /// Cumulative observations per bucket upper bound (`le`; empty when
    /// read from an AIPerf export, which keeps them beside the stats).
    #[serde(default)]
    pub buckets: BTreeMap<String, f64>,
}

/// A statistic left out: NaN, as a `null` one (AIPerf's hand-written
/// exports give a gauge's `avg` alone).
fn nan() -> f64 {
    f64::NAN
}

/// A statistic written as `null`: NaN. JSON has no NaN, so a writer that
/// met one (an older speedbench on vLLM V0's `NaN` gauges, or AIPerf) wrote
/// `null`; the file still reads, and every reader skips non-finite values.
fn nan_if_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// A counter family's totals summed over its series.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterAggregate {
    /// Sum of the series' totals.
    pub total: f64,
    /// Sum of the series' rates.
    pub rate: Option<f64>,
    /// For per-position families (a `position` label): the total per
    /// position, summed over the other labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub by_position: BTreeMap<String, f64>,
}

impl ServerMetricsExport {
    /// Parses an export (speedbench's layout or AIPerf's) from JSON text.
    pub fn from_json(text: &str) -> Result<ServerMetricsExport, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Reads an export file (`server_metrics_export.json`, by either tool).
    /// Errors name the file, and for malformed content the line and field.
    pub fn read(path: &Path) -> Result<ServerMetricsExport, ScrapeError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScrapeError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        ServerMetricsExport::from_json(&text).map_err(|source| ScrapeError::Export {
            path: path.to_path_buf(),
            line: source.line(),
            source,
        })
    }
}

/// The time-ordered samples of one series.
pub(crate) type Points = Vec<(i64, f64)>;

/// The profiling window the statistics cover, Unix nanoseconds.
///
/// Counter deltas start at the last sample strictly before `start` (so
/// warmup is excluded) and run to the last sample taken; gauge statistics
/// cover the samples from `start` to `end`. `None` leaves that side open.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Window {
    /// When the profiling window opened (after warmup).
    pub start: Option<i64>,
    /// When it closed.
    pub end: Option<i64>,
}

pub(crate) fn counter_stats(points: &[(i64, f64)], window: Window) -> Option<CounterStats> {
    let first_in = match window.start {
        Some(start) => points.iter().position(|(t, _)| *t >= start)?,
        None => 0,
    };
    // The last sample strictly before the window, else the first in it.
    let reference = first_in.saturating_sub(1);
    let tail = points.get(reference..)?;
    let (t0, mut prev) = *tail.first()?;
    let mut total = 0.0;
    let mut resets = 0;
    for &(_, v) in &tail[1..] {
        if v >= prev {
            total += v - prev;
        } else {
            resets += 1;
            total += v;
        }
        prev = v;
    }
    let t1 = tail.last().map_or(t0, |p| p.0);
    let secs = (t1 - t0) as f64 / 1e9;
    Some(CounterStats {
        total,
        rate: (secs > 0.0).then(|| total / secs),
        resets,
        slice_rates: SliceRates::default(),
    })
}

/// The window's slice boundaries, AIPerf's way: `(start, end, complete)`
/// from the window's start every `slice_ns`, the last one cut at the
/// window's end (and then not complete).
fn slice_bounds(start: i64, end: i64, slice_ns: i64) -> Vec<(i64, i64, bool)> {
    let mut out = Vec::new();
    let mut from = start;
    while from < end {
        let to = from.saturating_add(slice_ns);
        out.push((from, to.min(end), to <= end));
        from = to;
    }
    out
}

/// A counter's rate per complete slice of `window`, summarised (see
/// [`SliceRates`]); all `None` without a closed window, or with fewer than
/// two samples from the reference on.
pub(crate) fn slice_rates(points: &[(i64, f64)], window: Window, slice_ns: i64) -> SliceRates {
    let (Some(start), Some(end)) = (window.start, window.end) else {
        return SliceRates::default();
    };
    let first_in = points.partition_point(|(t, _)| *t < start);
    let last_in = points.partition_point(|(t, _)| *t <= end);
    if first_in == last_in || slice_ns <= 0 {
        return SliceRates::default();
    }
    let from = first_in.saturating_sub(1);
    let series = &points[from..last_in];
    if series.len() < 2 {
        return SliceRates::default();
    }
    // The last sample at or before `t` (the first one when none is).
    let value_at = |t: i64| series[series.partition_point(|(s, _)| *s <= t).max(1) - 1].1;
    let rates: Vec<f64> = slice_bounds(start, end, slice_ns)
        .into_iter()
        .filter(|(_, _, complete)| *complete)
        .map(|(a, b, _)| (value_at(b) - value_at(a)).max(0.0) / ((b - a) as f64 / 1e9))
        .collect();
    if rates.is_empty() {
        return SliceRates::default();
    }
    let n = rates.len() as f64;
    let avg = rates.iter().sum::<f64>() / n;
    let std = if rates.len() > 1 {
        (rates.iter().map(|r| (r - avg).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    SliceRates {
        rate_avg: Some(avg),
        rate_min: rates.iter().copied().reduce(f64::min),
        rate_max: rates.iter().copied().reduce(f64::max),
        rate_std: Some(std),
    }
}

/// Statistics of a gauge's samples inside `window`. A run shorter than one
/// scrape interval has none there: then the final scrape, the first sample
/// after the window closed (taken once the last response was in), stands
/// for it, rather than leaving the figure empty.
pub(crate) fn gauge_stats(points: &[(i64, f64)], window: Window) -> Option<GaugeStats> {
    let mut v: Vec<f64> = points
        .iter()
        .filter(|(t, _)| window.start.is_none_or(|s| *t >= s) && window.end.is_none_or(|e| *t <= e))
        .map(|(_, v)| *v)
        .collect();
    if v.is_empty()
        && let Some(end) = window.end
    {
        v.extend(points.iter().find(|(t, _)| *t > end).map(|(_, v)| *v));
    }
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len() as f64;
    let avg = v.iter().sum::<f64>() / n;
    let std = if v.len() > 1 {
        (v.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let p = |q| percentile_sorted(&v, q);
    Some(GaugeStats {
        count: v.len(),
        avg,
        min: v[0],
        max: v[v.len() - 1],
        std,
        p1: p(1.0),
        p5: p(5.0),
        p10: p(10.0),
        p25: p(25.0),
        p50: p(50.0),
        p75: p(75.0),
        p90: p(90.0),
        p95: p(95.0),
        p99: p(99.0),
    })
}

/// One stored series: its family, role and points.
pub(crate) struct StoredSeries<'a> {
    pub endpoint: &'a str,
    pub family: &'a str,
    pub role: &'a Role,
    pub labels: &'a [(String, String)],
    pub points: &'a [(i64, f64)],
}

/// Histograms gather their parts first: (endpoint, family, labels
/// without `le`) -> stats.
type HistogramParts = BTreeMap<(String, String, Vec<(String, String)>), HistogramStats>;

/// Builds the `metrics` map from every stored series.
pub(crate) fn build_metrics<'a>(
    series: impl Iterator<Item = StoredSeries<'a>>,
    families: &BTreeMap<String, (MetricType, Option<String>)>,
    window: Window,
    slice: Option<Duration>,
) -> BTreeMap<String, MetricExport> {
    let slice_ns = slice.map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    let mut hists = HistogramParts::new();
    let mut out: BTreeMap<String, MetricExport> = BTreeMap::new();
    for s in series {
        let export = |stats: Option<SeriesStats>| SeriesExport {
            endpoint_url: s.endpoint.to_string(),
            labels: s.labels.iter().cloned().collect(),
            stats,
        };
        match s.role {
            Role::Counter => {
                let stats = counter_series_stats(s.points, window, slice_ns);
                let series = export(stats.map(SeriesStats::Counter));
                push_series(&mut out, families, s.family, MetricType::Counter, series);
            }
            Role::Gauge(kind) => {
                let kind = match kind {
                    MetricType::Unknown => {
                        families.get(s.family).map_or(MetricType::Unknown, |f| f.0)
                    }
                    k => *k,
                };
                let stats = gauge_stats(s.points, window).map(SeriesStats::Gauge);
                push_series(&mut out, families, s.family, kind, export(stats));
            }
            Role::Bucket(_) | Role::HistSum | Role::HistCount => {
                add_histogram_part(&mut hists, &s, window);
            }
        }
    }
    for ((endpoint, family, labels), mut h) in hists {
        h.avg = (h.count > 0.0).then(|| h.sum / h.count);
        let series = SeriesExport {
            endpoint_url: endpoint,
            labels: labels.into_iter().collect(),
            stats: Some(SeriesStats::Histogram(h)),
        };
        push_series(&mut out, families, &family, MetricType::Histogram, series);
    }
    for m in out.values_mut() {
        if m.kind == MetricType::Counter {
            m.aggregate = Some(counter_aggregate(&m.series));
        }
    }
    out
}

/// A counter's change over `window`, and with `slice_ns` its rate per
/// slice.
fn counter_series_stats(
    points: &[(i64, f64)],
    window: Window,
    slice_ns: Option<i64>,
) -> Option<CounterStats> {
    let mut stats = counter_stats(points, window)?;
    if let Some(ns) = slice_ns {
        stats.slice_rates = slice_rates(points, window, ns);
    }
    Some(stats)
}

/// Adds `series` to its family's export, made on first use (of `kind`,
/// with the family's `# HELP`).
fn push_series(
    out: &mut BTreeMap<String, MetricExport>,
    families: &BTreeMap<String, (MetricType, Option<String>)>,
    family: &str,
    kind: MetricType,
    series: SeriesExport,
) {
    out.entry(family.to_string())
        .or_insert_with(|| MetricExport {
            kind,
            description: families.get(family).and_then(|f| f.1.clone()),
            series: Vec::new(),
            aggregate: None,
        })
        .series
        .push(series);
}

/// One bucket, sum or count series of a histogram: its delta over the
/// window, in its histogram's parts.
fn add_histogram_part(hists: &mut HistogramParts, s: &StoredSeries<'_>, window: Window) {
    let base: Vec<(String, String)> = s
        .labels
        .iter()
        .filter(|(k, _)| k != "le")
        .cloned()
        .collect();
    let key = (s.endpoint.to_string(), s.family.to_string(), base);
    let h = hists.entry(key).or_insert_with(|| HistogramStats {
        count: 0.0,
        sum: 0.0,
        avg: None,
        count_rate: None,
        sum_rate: None,
        buckets: BTreeMap::new(),
    });
    let change = counter_stats(s.points, window);
    let delta = change.as_ref().map_or(0.0, |c| c.total);
    let rate = change.and_then(|c| c.rate);
    match s.role {
        Role::Bucket(le) => {
            h.buckets.insert(le.clone(), delta);
        }
        Role::HistSum => (h.sum, h.sum_rate) = (delta, rate),
        _ => (h.count, h.count_rate) = (delta, rate),
    }
}

/// A counter family's aggregate: the deltas summed over its series (and
/// per draft position where a series has a `position` label), the rates
/// summed where there are any.
fn counter_aggregate(series: &[SeriesExport]) -> CounterAggregate {
    let mut agg = CounterAggregate {
        total: 0.0,
        rate: None,
        by_position: BTreeMap::new(),
    };
    for s in series {
        if let Some(SeriesStats::Counter(c)) = &s.stats {
            agg.total += c.total;
            if let Some(r) = c.rate {
                agg.rate = Some(agg.rate.unwrap_or(0.0) + r);
            }
            if let Some(pos) = s.labels.get("position") {
                *agg.by_position.entry(pos.clone()).or_insert(0.0) += c.total;
            }
        }
    }
    agg
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn counter_delta_starts_at_the_last_sample_before_the_window() {
        let points = [
            (0, 5.0),
            (S, 8.0),
            (2 * S, 10.0),
            (3 * S, 15.0),
            (4 * S, 16.0),
        ];
        let w = Window {
            start: Some(S + 1),
            end: Some(3 * S),
        };
        // Reference is t=1 s (8.0); the total runs to the last sample (16.0).
        let c = counter_stats(&points, w).unwrap();
        assert_eq!(c.total, 8.0);
        assert_eq!(c.rate, Some(8.0 / 3.0));
        assert_eq!(c.resets, 0);
        // No sample before the window: the first sample is the reference.
        let c = counter_stats(
            &points,
            Window {
                start: Some(-5),
                end: None,
            },
        )
        .unwrap();
        assert_eq!(c.total, 11.0);
        // No sample at or after the window start: nothing to say.
        assert!(
            counter_stats(
                &points,
                Window {
                    start: Some(9 * S),
                    end: None
                }
            )
            .is_none()
        );
    }

    #[test]
    fn counter_resets_count_the_increase_after_the_reset() {
        let points = [(0, 100.0), (S, 110.0), (2 * S, 3.0), (3 * S, 7.0)];
        let c = counter_stats(
            &points,
            Window {
                start: None,
                end: None,
            },
        )
        .unwrap();
        assert_eq!((c.total, c.resets), (10.0 + 3.0 + 4.0, 1));
        let flat = counter_stats(
            &[(0, 4.0), (S, 4.0)],
            Window {
                start: None,
                end: None,
            },
        );
        assert_eq!(flat.unwrap().total, 0.0);
    }

    #[test]
    fn slice_rates_by_hand() {
        // Window 1.5 s .. 7.5 s in 2 s slices: [1.5, 3.5), [3.5, 5.5),
        // [5.5, 7.5), no partial one. Samples every second; the reference
        // is the one at 1 s (10). A slice's increase runs between the last
        // samples at or before its bounds: 1.5 -> 10, 3.5 -> 14, 5.5 -> 14
        // (after a reset to 2 at 4 s and 14 again at 5 s: a decrease is
        // none), 7.5 -> 20.
        let points = [
            (0, 4.0),
            (S, 10.0),
            (2 * S, 12.0),
            (3 * S, 14.0),
            (4 * S, 2.0),
            (5 * S, 14.0),
            (6 * S, 17.0),
            (7 * S, 20.0),
            (8 * S, 30.0),
        ];
        let w = Window {
            start: Some(S + S / 2),
            end: Some(7 * S + S / 2),
        };
        let r = slice_rates(&points, w, 2 * S);
        // Rates 4/2, 0/2, 6/2 per second.
        assert_eq!(r.rate_avg, Some(5.0 / 3.0));
        assert_eq!((r.rate_min, r.rate_max), (Some(0.0), Some(3.0)));
        let std =
            ((2.0f64 - 5.0 / 3.0).powi(2) + (5.0f64 / 3.0).powi(2) + (3.0f64 - 5.0 / 3.0).powi(2))
                / 2.0;
        assert!((r.rate_std.unwrap() - std.sqrt()).abs() < 1e-12);
        // A window of 7 s in 2 s slices ends with a partial one, left out:
        // [1, 3), [3, 5), [5, 7) (10 -> 14 -> 14 -> 20) but not [7, 8).
        let w = Window {
            start: Some(S),
            end: Some(8 * S),
        };
        assert_eq!(
            slice_bounds(S, 8 * S, 2 * S).last(),
            Some(&(7 * S, 8 * S, false))
        );
        let r = slice_rates(&points, w, 2 * S);
        assert_eq!((r.rate_avg, r.rate_max), (Some(5.0 / 3.0), Some(3.0)));
        // No closed window, or a slice longer than it: nothing.
        let open = Window {
            start: Some(S),
            end: None,
        };
        assert_eq!(slice_rates(&points, open, 2 * S), SliceRates::default());
        assert_eq!(slice_rates(&points, w, 60 * S), SliceRates::default());
    }

    #[test]
    fn a_run_shorter_than_one_interval_takes_the_final_scrape() {
        // Scrapes at 0, 333 and (final) 700; the window is 100..400 with the
        // 333 sample in it, or 100..300 with none.
        let points = [(0, 9.0), (333, 2.5), (700, 3.5)];
        let in_window = Window {
            start: Some(100),
            end: Some(400),
        };
        assert_eq!(gauge_stats(&points, in_window).unwrap().avg, 2.5);
        let short = Window {
            start: Some(100),
            end: Some(300),
        };
        let final_scrape = gauge_stats(&points, short).unwrap();
        assert_eq!((final_scrape.count, final_scrape.avg), (1, 2.5));
        let none_after = Window {
            start: Some(800),
            end: Some(900),
        };
        assert!(gauge_stats(&points, none_after).is_none());
    }

    #[test]
    fn gauge_stats_match_numpy() {
        // np.percentile([1,2,3,4,10], q) and np.std(ddof=1).
        let points: Vec<(i64, f64)> = [3.0, 1.0, 10.0, 2.0, 4.0, 99.0]
            .iter()
            .enumerate()
            .map(|(i, v)| (i as i64 * S, *v))
            .collect();
        let w = Window {
            start: Some(0),
            end: Some(4 * S),
        };
        let g = gauge_stats(&points, w).unwrap();
        assert_eq!((g.count, g.avg, g.min, g.max), (5, 4.0, 1.0, 10.0));
        assert!((g.std - 3.535_533_905_932_737_6).abs() < 1e-12);
        assert_eq!((g.p50, g.p25, g.p75), (3.0, 2.0, 4.0));
        assert!((g.p90 - 7.6).abs() < 1e-12);
        assert!((g.p99 - 9.76).abs() < 1e-12);
        let one = gauge_stats(
            &points[..1],
            Window {
                start: None,
                end: None,
            },
        )
        .unwrap();
        assert_eq!((one.std, one.p99), (0.0, 3.0));
        assert!(
            gauge_stats(
                &points,
                Window {
                    start: Some(10 * S),
                    end: None
                }
            )
            .is_none()
        );
    }

    #[test]
    fn stats_round_trip_through_json_by_shape() {
        for stats in [
            SeriesStats::Counter(CounterStats {
                total: 1.0,
                rate: Some(2.0),
                resets: 0,
                slice_rates: SliceRates::default(),
            }),
            SeriesStats::Counter(CounterStats {
                total: 1.0,
                rate: Some(2.0),
                resets: 0,
                slice_rates: SliceRates {
                    rate_avg: Some(1.5),
                    rate_min: Some(1.0),
                    rate_max: Some(2.0),
                    rate_std: Some(0.5),
                },
            }),
            SeriesStats::Gauge(
                gauge_stats(
                    &[(0, 1.0)],
                    Window {
                        start: None,
                        end: None,
                    },
                )
                .unwrap(),
            ),
            SeriesStats::Histogram(HistogramStats {
                count: 2.0,
                sum: 3.0,
                avg: Some(1.5),
                count_rate: Some(0.5),
                sum_rate: None,
                buckets: [("+Inf".to_string(), 2.0)].into_iter().collect(),
            }),
        ] {
            let json = serde_json::to_string(&stats).unwrap();
            assert_eq!(
                serde_json::from_str::<SeriesStats>(&json).unwrap(),
                stats,
                "{json}"
            );
        }
    }
}
