//! `server_metrics_export.json`: the types, and the statistics computed from
//! the scraped samples.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use speedbench_metrics::percentile_sorted;

use super::parse::{MetricType, Role};

/// The file name of the export in a run directory.
pub use speedbench_record::SERVER_METRICS_FILE_NAME;

/// Everything scraped from the servers' Prometheus endpoints during a run.
///
/// The layout follows AIPerf's `server_metrics_export.json`: `metrics[name]`
/// holds `type`, `description` and one `series` entry per (endpoint, label
/// set), each with `stats`. Counters are named without `_total`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerMetricsExport {
    /// Version of this layout (`"1.0"`).
    pub schema_version: String,
    /// The tool that wrote it (`speedbench <version>`).
    pub tool: String,
    /// When and where the samples were taken.
    pub summary: ExportSummary,
    /// Per metric family, by name.
    pub metrics: BTreeMap<String, MetricExport>,
}

/// When and where the samples were taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
}

/// One metric family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricExport {
    /// The family's type.
    #[serde(rename = "type")]
    pub kind: MetricType,
    /// The `# HELP` text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// One entry per (endpoint, label set).
    pub series: Vec<SeriesExport>,
    /// Counters: the totals summed over every series (every engine, rank
    /// and endpoint), as `vllm bench serve` sums label sets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<CounterAggregate>,
}

/// One series of a family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesExport {
    /// The endpoint scraped.
    pub endpoint_url: String,
    /// The series' labels (without `le` for histograms).
    pub labels: BTreeMap<String, String>,
    /// Statistics over the window; `None` when no sample fell in it.
    pub stats: Option<SeriesStats>,
}

/// The statistics of one series, by family type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SeriesStats {
    /// Histogram deltas.
    Histogram(HistogramStats),
    /// Counter delta and rate.
    Counter(CounterStats),
    /// Gauge (and untyped) sample statistics.
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
    pub total: f64,
    /// `total` divided by the seconds between the reference and last sample.
    pub rate: Option<f64>,
    /// Decreases seen (counter resets, e.g. a server restart).
    #[serde(default)]
    pub resets: u32,
}

/// Statistics of a gauge's samples inside the profiling window.
///
/// `std` is the sample standard deviation (0 for one sample); percentiles
/// interpolate linearly between closest ranks (numpy's default). `avg` is a
/// plain mean over time: an idle interval counts as much as a busy one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct GaugeStats {
    /// Samples in the window.
    pub count: usize,
    pub avg: f64,
    pub min: f64,
    pub max: f64,
    pub std: f64,
    pub p1: f64,
    pub p5: f64,
    pub p10: f64,
    pub p25: f64,
    pub p50: f64,
    pub p75: f64,
    pub p90: f64,
    pub p95: f64,
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
    /// Cumulative observations per bucket upper bound (`le`).
    pub buckets: BTreeMap<String, f64>,
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

/// Acceptance derived from one engine's server metrics.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpecDecodeSummary {
    /// `vllm`, `llamacpp`, `trtllm` or `sglang`.
    pub engine: String,
    /// True when computed from counter deltas (token-weighted, comparable
    /// with per-request records); false for time-averaged gauges.
    pub from_counters: bool,
    /// Steps that drafted (`…num_drafts`), when the engine counts them.
    pub drafts: Option<f64>,
    /// Target verify steps, counting those that drafted nothing: the
    /// denominator of `acceptance_length`. vLLM and TensorRT-LLM draft on
    /// every step, so it is `drafts`; llama.cpp drafts only when its
    /// drafter has a candidate, so it is `Δtokens_predicted - Δaccepted`
    /// (every pass emits one token plus the drafts it accepted), as its
    /// per-request `predicted_n - draft_n_accepted`.
    #[serde(default)]
    pub steps: Option<f64>,
    /// Proposed draft tokens.
    pub draft_tokens: Option<f64>,
    /// Accepted draft tokens.
    pub accepted_tokens: Option<f64>,
    /// Mean tokens per verify step, bonus token included.
    pub acceptance_length: Option<f64>,
    /// Accepted / proposed draft tokens, a fraction.
    pub acceptance_rate: Option<f64>,
    /// Acceptance per draft position (accepted at i / drafts).
    pub per_position: Vec<f64>,
}

impl ServerMetricsExport {
    fn counter_total(&self, name: &str) -> Option<f64> {
        self.metrics.get(name)?.aggregate.as_ref().map(|a| a.total)
    }

    fn gauge_avg(&self, name: &str) -> Option<f64> {
        let m = self.metrics.get(name)?;
        let avgs: Vec<f64> = m
            .series
            .iter()
            .filter_map(|s| match &s.stats {
                Some(SeriesStats::Gauge(g)) if g.avg.is_finite() => Some(g.avg),
                _ => None,
            })
            .collect();
        (!avgs.is_empty()).then(|| avgs.iter().sum::<f64>() / avgs.len() as f64)
    }

    /// Acceptance per engine found in the export, computed as `vllm bench
    /// serve` does for counters (AL = 1 + Δaccepted/Δsteps, AR =
    /// Δaccepted/Δdraft_tokens, only when Δdraft_tokens > 0; see
    /// [`SpecDecodeSummary::steps`] for llama.cpp, whose steps are not its
    /// drafts) and as AIPerf does for gauges (the mean of the scraped
    /// samples).
    ///
    /// ```
    /// use speedbench_client::scrape::ServerMetricsExport;
    /// let json = r#"{"schema_version":"1.0","tool":"t","summary":{"endpoints_configured":[],
    ///   "endpoints_successful":[],"start_ns":0,"end_ns":0,"profiling_start_ns":null,
    ///   "profiling_end_ns":null,"interval_ms":333.0,"endpoint_info":{}},
    ///   "metrics":{
    ///     "vllm:spec_decode_num_drafts":{"type":"counter","series":[],"aggregate":{"total":10.0,"rate":null}},
    ///     "vllm:spec_decode_num_draft_tokens":{"type":"counter","series":[],"aggregate":{"total":40.0,"rate":null}},
    ///     "vllm:spec_decode_num_accepted_tokens":{"type":"counter","series":[],"aggregate":{"total":25.0,"rate":null}}}}"#;
    /// let export: ServerMetricsExport = serde_json::from_str(json)?;
    /// let s = &export.spec_decode()[0];
    /// assert_eq!((s.engine.as_str(), s.acceptance_length, s.acceptance_rate), ("vllm", Some(3.5), Some(0.625)));
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn spec_decode(&self) -> Vec<SpecDecodeSummary> {
        let mut out = Vec::new();
        for (engine, prefix) in [
            ("vllm", "vllm:spec_decode_"),
            ("llamacpp", "llamacpp:spec_decode_"),
            ("trtllm", "trtllm_spec_decode_"),
        ] {
            let c = |n: &str| self.counter_total(&format!("{prefix}{n}"));
            let (drafts, draft_tokens, accepted) = (
                c("num_drafts"),
                c("num_draft_tokens"),
                c("num_accepted_tokens"),
            );
            if draft_tokens.is_none() && accepted.is_none() {
                continue;
            }
            let counted = draft_tokens.is_some_and(|d| d > 0.0);
            let per_pos = self
                .metrics
                .get(&format!("{prefix}num_accepted_tokens_per_pos"))
                .and_then(|m| m.aggregate.as_ref());
            let mut per_position = Vec::new();
            if let (Some(d), Some(p)) = (drafts.filter(|d| *d > 0.0), per_pos) {
                let mut by: Vec<(u64, f64)> = p
                    .by_position
                    .iter()
                    .filter_map(|(k, v)| Some((k.parse().ok()?, *v / d)))
                    .collect();
                by.sort_by_key(|(k, _)| *k);
                per_position = by.into_iter().map(|(_, v)| v).collect();
            }
            let steps = if engine == "llamacpp" {
                match (self.counter_total("llamacpp:tokens_predicted"), accepted) {
                    (Some(p), Some(a)) if p >= a => Some(p - a),
                    _ => None,
                }
            } else {
                drafts
            };
            let length = match (steps, accepted) {
                (Some(s), Some(a)) if s > 0.0 && counted => Some(1.0 + a / s),
                _ => self.gauge_avg(&format!("{prefix}acceptance_length")),
            };
            out.push(SpecDecodeSummary {
                engine: engine.into(),
                from_counters: counted,
                drafts,
                steps,
                draft_tokens,
                accepted_tokens: accepted,
                acceptance_length: length,
                acceptance_rate: match (accepted, draft_tokens) {
                    (Some(a), Some(d)) if d > 0.0 => Some(a / d),
                    _ => None,
                },
                per_position,
            });
        }
        let length = self.gauge_avg("sglang:spec_accept_length");
        let rate = self.gauge_avg("sglang:spec_accept_rate");
        if length.is_some() || rate.is_some() {
            out.push(SpecDecodeSummary {
                engine: "sglang".into(),
                from_counters: false,
                drafts: None,
                steps: None,
                draft_tokens: None,
                accepted_tokens: None,
                acceptance_length: length,
                acceptance_rate: rate,
                per_position: Vec::new(),
            });
        }
        out
    }
}

/// The time-ordered samples of one series.
pub(crate) type Points = Vec<(i64, f64)>;

/// The window the statistics cover.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    pub start: Option<i64>,
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
    })
}

pub(crate) fn gauge_stats(points: &[(i64, f64)], window: Window) -> Option<GaugeStats> {
    let mut v: Vec<f64> = points
        .iter()
        .filter(|(t, _)| window.start.is_none_or(|s| *t >= s) && window.end.is_none_or(|e| *t <= e))
        .map(|(_, v)| *v)
        .collect();
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

/// Builds the `metrics` map from every stored series.
pub(crate) fn build_metrics<'a>(
    series: impl Iterator<Item = StoredSeries<'a>>,
    families: &BTreeMap<String, (MetricType, Option<String>)>,
    window: Window,
) -> BTreeMap<String, MetricExport> {
    // Histograms gather their parts first: (endpoint, family, labels) -> stats.
    type HistKey = (String, String, Vec<(String, String)>);
    let mut hists: BTreeMap<HistKey, HistogramStats> = BTreeMap::new();
    let mut out: BTreeMap<String, MetricExport> = BTreeMap::new();
    let entry = |out: &mut BTreeMap<String, MetricExport>, family: &str, kind: MetricType| {
        out.entry(family.to_string())
            .or_insert_with(|| MetricExport {
                kind,
                description: families.get(family).and_then(|f| f.1.clone()),
                series: Vec::new(),
                aggregate: None,
            })
            .series
            .len()
    };
    for s in series {
        let labels: BTreeMap<String, String> = s.labels.iter().cloned().collect();
        match s.role {
            Role::Counter => {
                entry(&mut out, s.family, MetricType::Counter);
                let stats = counter_stats(s.points, window);
                if let Some(m) = out.get_mut(s.family) {
                    m.series.push(SeriesExport {
                        endpoint_url: s.endpoint.to_string(),
                        labels,
                        stats: stats.map(SeriesStats::Counter),
                    });
                }
            }
            Role::Gauge(kind) => {
                let kind = match kind {
                    MetricType::Unknown => {
                        families.get(s.family).map_or(MetricType::Unknown, |f| f.0)
                    }
                    k => *k,
                };
                entry(&mut out, s.family, kind);
                let stats = gauge_stats(s.points, window);
                if let Some(m) = out.get_mut(s.family) {
                    m.series.push(SeriesExport {
                        endpoint_url: s.endpoint.to_string(),
                        labels,
                        stats: stats.map(SeriesStats::Gauge),
                    });
                }
            }
            Role::Bucket(_) | Role::HistSum | Role::HistCount => {
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
                    buckets: BTreeMap::new(),
                });
                let delta = counter_stats(s.points, window).map_or(0.0, |c| c.total);
                match s.role {
                    Role::Bucket(le) => {
                        h.buckets.insert(le.clone(), delta);
                    }
                    Role::HistSum => h.sum = delta,
                    _ => h.count = delta,
                }
            }
        }
    }
    for ((endpoint, family, labels), mut h) in hists {
        h.avg = (h.count > 0.0).then(|| h.sum / h.count);
        entry(&mut out, &family, MetricType::Histogram);
        if let Some(m) = out.get_mut(&family) {
            m.series.push(SeriesExport {
                endpoint_url: endpoint,
                labels: labels.into_iter().collect(),
                stats: Some(SeriesStats::Histogram(h)),
            });
        }
    }
    for m in out.values_mut() {
        if m.kind != MetricType::Counter {
            continue;
        }
        let mut agg = CounterAggregate {
            total: 0.0,
            rate: None,
            by_position: BTreeMap::new(),
        };
        for s in &m.series {
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
        m.aggregate = Some(agg);
    }
    out
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

    fn counter(total: f64) -> MetricExport {
        MetricExport {
            kind: MetricType::Counter,
            description: None,
            series: Vec::new(),
            aggregate: Some(CounterAggregate {
                total,
                rate: None,
                by_position: BTreeMap::new(),
            }),
        }
    }

    fn export(metrics: &[(&str, f64)]) -> ServerMetricsExport {
        ServerMetricsExport {
            schema_version: "1.0".into(),
            tool: "t".into(),
            summary: ExportSummary {
                endpoints_configured: Vec::new(),
                endpoints_successful: Vec::new(),
                start_ns: 0,
                end_ns: 0,
                profiling_start_ns: None,
                profiling_end_ns: None,
                interval_ms: 333.0,
                endpoint_info: BTreeMap::new(),
            },
            metrics: metrics
                .iter()
                .map(|(n, v)| (n.to_string(), counter(*v)))
                .collect(),
        }
    }

    #[test]
    fn llamacpp_acceptance_length_counts_steps_that_drafted_nothing() {
        // 357 tokens predicted, 294 of them accepted drafts, over 12 drafts:
        // 63 target passes, so AL = 1 + 294/63 = 5.666666666666667
        // (1 + 294/12 = 25.5 per drafting step); rate 294/300 = 0.98.
        let e = export(&[
            ("llamacpp:spec_decode_num_drafts", 12.0),
            ("llamacpp:spec_decode_num_draft_tokens", 300.0),
            ("llamacpp:spec_decode_num_accepted_tokens", 294.0),
            ("llamacpp:tokens_predicted", 357.0),
        ]);
        let s = &e.spec_decode()[0];
        assert_eq!((s.drafts, s.steps), (Some(12.0), Some(63.0)));
        assert_eq!(s.acceptance_length, Some(1.0 + 294.0 / 63.0));
        assert_eq!(s.acceptance_rate, Some(0.98));
        // Without the predicted-tokens counter the steps are unknown: no
        // length rather than the per-draft figure.
        let e = export(&[
            ("llamacpp:spec_decode_num_drafts", 12.0),
            ("llamacpp:spec_decode_num_draft_tokens", 300.0),
            ("llamacpp:spec_decode_num_accepted_tokens", 294.0),
        ]);
        let s = &e.spec_decode()[0];
        assert_eq!((s.steps, s.acceptance_length), (None, None));
        // vLLM drafts every step: steps are its drafts.
        let e = export(&[
            ("vllm:spec_decode_num_drafts", 10.0),
            ("vllm:spec_decode_num_draft_tokens", 40.0),
            ("vllm:spec_decode_num_accepted_tokens", 25.0),
        ]);
        assert_eq!(e.spec_decode()[0].steps, Some(10.0));
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
