//! The scrape's raw samples in AIPerf 0.13.0's normalized layout (its
//! `server_metrics_export.parquet`): a row per series per scrape in the
//! profiling window, a histogram's buckets a row each; gauges as read,
//! counters and histograms as their increase since the window opened.

use std::collections::{BTreeMap, BTreeSet};

use crate::collect::{EndpointSamples, ScrapedSeries};
use crate::export::Window;
use crate::parse::{MetricType, Role};
use crate::units::infer_unit;

/// Column names a label may not take (AIPerf's reserved names): such a
/// label is left out of the label columns.
pub const RESERVED_COLUMNS: [&str; 11] = [
    "endpoint_url",
    "metric_name",
    "metric_type",
    "unit",
    "description",
    "timestamp_ns",
    "value",
    "sum",
    "count",
    "bucket_le",
    "bucket_count",
];

/// One row of the raw export.
#[derive(Debug, Clone, PartialEq)]
pub struct RawRow {
    /// The endpoint scraped.
    pub endpoint_url: String,
    /// The family's name (a counter's without `_total`).
    pub metric_name: String,
    /// `gauge`, `counter`, `histogram` or `unknown`.
    pub metric_type: &'static str,
    /// The unit inferred from the name and help, as the CSV names it.
    pub unit: Option<&'static str>,
    /// The family's help text.
    pub description: Option<String>,
    /// When the scrape was received, Unix nanoseconds.
    pub timestamp_ns: i64,
    /// The series' labels (`le` apart), by name.
    pub labels: BTreeMap<String, String>,
    /// A gauge's value, or a counter's increase since the window opened.
    pub value: Option<f64>,
    /// A histogram's `_sum` increase.
    pub sum: Option<f64>,
    /// A histogram's `_count` increase.
    pub count: Option<f64>,
    /// The bucket's upper bound, as the server wrote it (`0.1`, `+Inf`).
    pub bucket_le: Option<String>,
    /// The bucket's (cumulative) count increase.
    pub bucket_count: Option<f64>,
}

/// The raw export of a run: each series' values over the window, kept
/// compact (a row is made only as it is written), and the label columns
/// the rows need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawServerMetrics {
    /// Every label name any row has, sorted, reserved names left out.
    pub label_keys: Vec<String>,
    /// The profiling window the rows lie in.
    pub window: Window,
    /// By endpoint (in the order given), family and labels.
    series: Vec<RawSeries>,
}

/// One series (a histogram's label set, its parts together): what every
/// row of it repeats, and its values in time order.
#[derive(Debug, Clone, PartialEq)]
struct RawSeries {
    endpoint_url: String,
    metric_name: String,
    metric_type: &'static str,
    unit: Option<&'static str>,
    description: Option<String>,
    labels: BTreeMap<String, String>,
    values: RawValues,
}

#[derive(Debug, Clone, PartialEq)]
enum RawValues {
    /// A gauge's values, or a counter's increases, by time.
    Scalar(Points),
    /// A histogram's increases: per time, the sum and count, and a count
    /// per bucket (in `les` order).
    Histogram {
        les: Vec<String>,
        at: Vec<(i64, Option<f64>, f64)>,
        buckets: Vec<Vec<Option<f64>>>,
    },
}

/// A series' samples in time order.
type Points = Vec<(i64, f64)>;

impl RawServerMetrics {
    /// The rows of `endpoints`' samples inside `window` (both ends
    /// included). A counter's or histogram's increase is counted from its
    /// last sample before the window (else its first inside it), never
    /// below 0 (a reset). Summaries and uptimes are left out, as AIPerf
    /// leaves them.
    ///
    /// ```
    /// use speedbench_scrape::{EndpointSamples, RawServerMetrics, Window, parse_exposition};
    /// use std::time::Duration;
    /// let mut samples = EndpointSamples::new();
    /// for (at, n) in [(10, 5), (20, 7), (30, 12)] {
    ///     let text = format!("# TYPE req counter\nreq_total{{model=\"m\"}} {n}\n");
    ///     samples.record(&parse_exposition(&text)?, at, Duration::ZERO);
    /// }
    /// let window = Window { start: Some(15), end: Some(30) };
    /// let raw = RawServerMetrics::of(&[("u".into(), samples)], window);
    /// let increases: Vec<_> = raw.rows().map(|r| (r.timestamp_ns, r.value)).collect();
    /// assert_eq!(increases, [(20, Some(2.0)), (30, Some(7.0))]);
    /// assert_eq!(raw.label_keys, ["model"]);
    /// # Ok::<(), speedbench_scrape::ScrapeError>(())
    /// ```
    pub fn of(endpoints: &[(String, EndpointSamples)], window: Window) -> RawServerMetrics {
        let mut series = Vec::new();
        for (url, samples) in endpoints {
            let families = samples.families();
            // A summary's `_sum` and `_count` parse as counters of their own.
            let of_summary = |name: &str| {
                [name.strip_suffix("_sum"), name.strip_suffix("_count")]
                    .into_iter()
                    .flatten()
                    .any(|base| matches!(families.get(base), Some((MetricType::Summary, _))))
            };
            for (family, (kind, help)) in families {
                // AIPerf keeps no uptime (a timestamp, not a measurement).
                let uptime = family.ends_with("_uptime") || family.contains("_uptime_");
                if of_summary(family) || uptime {
                    continue;
                }
                let scraped = samples.series_of(family);
                let at = Family {
                    url,
                    name: family,
                    help: help.as_deref(),
                };
                match kind {
                    MetricType::Histogram => histogram_series(&at, &scraped, window, &mut series),
                    MetricType::Summary => {}
                    kind => scalar_series(&at, *kind, &scraped, window, &mut series),
                }
            }
        }
        let label_keys: BTreeSet<&String> = series.iter().flat_map(|s| s.labels.keys()).collect();
        let label_keys = label_keys
            .into_iter()
            .filter(|k| !RESERVED_COLUMNS.contains(&k.as_str()))
            .cloned()
            .collect();
        RawServerMetrics {
            label_keys,
            window,
            series,
        }
    }

    /// Every row, in order: each series' scrapes in time order, a
    /// histogram's buckets in bound order at each.
    pub fn rows(&self) -> impl Iterator<Item = RawRow> + '_ {
        self.series.iter().flat_map(RawSeries::rows)
    }

    /// How many rows [`rows`](RawServerMetrics::rows) yields.
    pub fn row_count(&self) -> usize {
        (self.series.iter())
            .map(|s| match &s.values {
                RawValues::Scalar(points) => points.len(),
                RawValues::Histogram { les, at, .. } => les.len() * at.len(),
            })
            .sum()
    }
}

impl RawSeries {
    fn row(&self, timestamp_ns: i64) -> RawRow {
        RawRow {
            endpoint_url: self.endpoint_url.clone(),
            metric_name: self.metric_name.clone(),
            metric_type: self.metric_type,
            unit: self.unit,
            description: self.description.clone(),
            timestamp_ns,
            labels: self.labels.clone(),
            value: None,
            sum: None,
            count: None,
            bucket_le: None,
            bucket_count: None,
        }
    }

    fn rows(&self) -> Box<dyn Iterator<Item = RawRow> + '_> {
        match &self.values {
            RawValues::Scalar(points) => Box::new(points.iter().map(|&(t, v)| RawRow {
                value: Some(v),
                ..self.row(t)
            })),
            RawValues::Histogram { les, at, buckets } => Box::new(at.iter().zip(buckets).flat_map(
                move |(&(t, sum, count), counts)| {
                    les.iter().zip(counts).map(move |(le, &n)| RawRow {
                        sum,
                        count: Some(count),
                        bucket_le: Some(le.clone()),
                        bucket_count: n,
                        ..self.row(t)
                    })
                },
            )),
        }
    }
}

/// The family rows are written for.
struct Family<'a> {
    url: &'a str,
    name: &'a str,
    help: Option<&'a str>,
}

impl Family<'_> {
    fn series(
        &self,
        kind: &'static str,
        labels: &[(String, String)],
        values: RawValues,
    ) -> RawSeries {
        RawSeries {
            endpoint_url: self.url.to_string(),
            metric_name: self.name.to_string(),
            metric_type: kind,
            unit: infer_unit(self.name, self.help),
            description: self.help.map(str::to_string),
            labels: labels.iter().filter(|(k, _)| k != "le").cloned().collect(),
            values,
        }
    }
}

/// The indices of `points` inside `window`, and the reference sample's
/// index: the last before the window, else the first inside.
fn in_window(points: &Points, window: Window) -> Option<(usize, usize, usize)> {
    let first = window
        .start
        .map_or(0, |s| points.partition_point(|p| p.0 < s));
    let end = window
        .end
        .map_or(points.len(), |e| points.partition_point(|p| p.0 <= e));
    (first < end).then(|| (first, end, first.saturating_sub(1)))
}

/// A gauge's (or untyped value's) or a counter's series.
fn scalar_series(
    at: &Family<'_>,
    kind: MetricType,
    scraped: &[ScrapedSeries<'_>],
    window: Window,
    out: &mut Vec<RawSeries>,
) {
    let name = match kind {
        MetricType::Counter => "counter",
        MetricType::Gauge => "gauge",
        _ => "unknown",
    };
    for ScrapedSeries { labels, points, .. } in scraped {
        let Some((first, end, reference)) = in_window(points, window) else {
            continue;
        };
        let base = points[reference].1;
        let values = (points[first..end].iter())
            .map(|&(t, v)| match kind {
                MetricType::Counter => (t, (v - base).max(0.0)),
                _ => (t, v),
            })
            .collect();
        out.push(at.series(name, labels, RawValues::Scalar(values)));
    }
}

/// A histogram's series: per label set, per scrape in the window, the
/// sum's and count's increases and each bucket's.
fn histogram_series(
    at: &Family<'_>,
    scraped: &[ScrapedSeries<'_>],
    window: Window,
    out: &mut Vec<RawSeries>,
) {
    // The parts of each label set (`le` apart): its count's times lead.
    let mut sets: BTreeMap<Vec<(String, String)>, HistogramParts> = BTreeMap::new();
    for ScrapedSeries {
        role,
        labels,
        points,
    } in scraped
    {
        let key: Vec<(String, String)> =
            labels.iter().filter(|(k, _)| k != "le").cloned().collect();
        let parts = sets.entry(key).or_default();
        let by_time = || points.iter().copied().collect::<BTreeMap<i64, f64>>();
        match role {
            Role::HistCount => parts.count = points.clone(),
            Role::HistSum => parts.sum = by_time(),
            Role::Bucket(le) => {
                parts.buckets.push((le.clone(), by_time()));
            }
            _ => {}
        }
    }
    for (labels, mut parts) in sets {
        parts
            .buckets
            .sort_by(|a, b| le_order(&a.0).total_cmp(&le_order(&b.0)));
        let Some((first, end, reference)) = in_window(&parts.count, window) else {
            continue;
        };
        let (t0, n0) = parts.count[reference];
        let increase = |m: &BTreeMap<i64, f64>, t: i64| {
            let base = m.get(&t0).copied().unwrap_or(0.0);
            m.get(&t).map(|v| (v - base).max(0.0))
        };
        let scrapes = &parts.count[first..end];
        let values = RawValues::Histogram {
            les: parts.buckets.iter().map(|b| b.0.clone()).collect(),
            at: (scrapes.iter())
                .map(|&(t, n)| (t, increase(&parts.sum, t), (n - n0).max(0.0)))
                .collect(),
            buckets: (scrapes.iter())
                .map(|&(t, _)| parts.buckets.iter().map(|b| increase(&b.1, t)).collect())
                .collect(),
        };
        out.push(at.series("histogram", &labels, values));
    }
}

/// A histogram's parts for one label set.
#[derive(Default)]
struct HistogramParts {
    count: Points,
    sum: BTreeMap<i64, f64>,
    buckets: Vec<(String, BTreeMap<i64, f64>)>,
}

/// A bucket bound as a number to order by (`+Inf` last).
fn le_order(le: &str) -> f64 {
    match le {
        "+Inf" | "Inf" | "inf" => f64::INFINITY,
        other => other.parse().unwrap_or(f64::INFINITY),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::parse_exposition;

    fn samples(texts: &[(i64, &str)]) -> EndpointSamples {
        let mut s = EndpointSamples::new();
        for (at, text) in texts {
            s.record(&parse_exposition(text).unwrap(), *at, Duration::ZERO);
        }
        s
    }

    const HIST: &str = "# HELP lat Request latency in seconds.\n# TYPE lat histogram\n";

    /// Three scrapes of a histogram, the window opening after the first:
    /// the increases since it, a row per bucket per scrape, by hand.
    #[test]
    fn histogram_buckets_are_a_row_each_as_increases() {
        let scrape = |b1: u32, b2: u32, sum: f64| {
            format!(
                "{HIST}lat_bucket{{le=\"0.5\",m=\"x\"}} {b1}\nlat_bucket{{le=\"+Inf\",m=\"x\"}} {b2}\nlat_sum{{m=\"x\"}} {sum}\nlat_count{{m=\"x\"}} {b2}\n"
            )
        };
        let (a, b, c) = (scrape(1, 2, 0.7), scrape(3, 5, 2.2), scrape(4, 8, 4.0));
        let s = samples(&[(100, &a), (200, &b), (300, &c)]);
        let window = Window {
            start: Some(150),
            end: Some(300),
        };
        let raw = RawServerMetrics::of(&[("u".into(), s)], window);
        let got: Vec<_> = raw
            .rows()
            .map(|r| {
                (
                    r.timestamp_ns,
                    r.bucket_le.clone().unwrap(),
                    r.bucket_count,
                    r.count,
                    r.sum,
                )
            })
            .collect();
        let close = |x: Option<f64>, y: f64| (x.unwrap() - y).abs() < 1e-9;
        assert_eq!(got.len(), 4);
        let want = [
            (200, "0.5", 2.0, 3.0, 1.5),
            (200, "+Inf", 3.0, 3.0, 1.5),
            (300, "0.5", 3.0, 6.0, 3.3),
            (300, "+Inf", 6.0, 6.0, 3.3),
        ];
        for (g, w) in got.iter().zip(want) {
            assert_eq!((g.0, g.1.as_str()), (w.0, w.1));
            assert!(
                close(g.2, w.2) && close(g.3, w.3) && close(g.4, w.4),
                "{g:?} vs {w:?}"
            );
        }
        let r = &raw.rows().next().unwrap();
        assert_eq!((r.metric_type, r.unit), ("histogram", Some("seconds")));
        assert_eq!(r.labels.get("m").map(String::as_str), Some("x"));
        assert!(!r.labels.contains_key("le") && r.value.is_none());
        assert_eq!(raw.label_keys, ["m"]);
    }

    /// Gauges as read inside the window (both ends), counters from the
    /// window's first sample when none came before, a reset never below 0;
    /// summaries and uptimes left out.
    #[test]
    fn gauges_as_read_and_counters_from_their_reference() {
        let text = |g: f64, c: u32| {
            format!(
                "# TYPE kv gauge\nkv {g}\n# TYPE done counter\ndone_total {c}\n# TYPE q summary\nq{{quantile=\"0.5\"}} 1\nq_sum 1\nq_count 1\n# TYPE process_uptime_seconds gauge\nprocess_uptime_seconds 9\n"
            )
        };
        let s = samples(&[
            (10, &text(0.1, 9)),
            (20, &text(0.4, 11)),
            (30, &text(0.2, 3)),
        ]);
        let window = Window {
            start: Some(5),
            end: Some(20),
        };
        let raw = RawServerMetrics::of(&[("u".into(), s)], window);
        let got: Vec<_> = raw
            .rows()
            .map(|r| {
                (
                    r.metric_name.clone(),
                    r.metric_type,
                    r.timestamp_ns,
                    r.value,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("done".to_string(), "counter", 10, Some(0.0)),
                ("done".to_string(), "counter", 20, Some(2.0)),
                ("kv".to_string(), "gauge", 10, Some(0.1)),
                ("kv".to_string(), "gauge", 20, Some(0.4)),
            ]
        );
        // The whole run: the reset (11 -> 3) is 0, not negative.
        let s = samples(&[
            (10, &text(0.1, 9)),
            (20, &text(0.4, 11)),
            (30, &text(0.2, 3)),
        ]);
        let raw = RawServerMetrics::of(&[("u".into(), s)], Window::default());
        let last = raw
            .rows()
            .find(|r| r.metric_name == "done" && r.timestamp_ns == 30);
        assert_eq!(last.unwrap().value, Some(0.0));
    }
}
