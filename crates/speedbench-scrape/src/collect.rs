//! Collecting scraped expositions into an export: the samples of each
//! endpoint over a run, then the reduction to counter deltas and gauge
//! statistics over the profiling window.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::export::{
    EndpointInfo, ExportSummary, Points, ServerMetricsExport, StoredSeries, Window, build_metrics,
};
use crate::parse::{Exposition, MetricType, Role};

type SeriesKey = (String, Role, Vec<(String, String)>);

/// The samples scraped from one endpoint during a run, and how its
/// fetches went.
///
/// Feed it every fetch ([`record`](EndpointSamples::record) or
/// [`record_failure`](EndpointSamples::record_failure)), then hand it to
/// [`ServerMetricsExport::from_samples`]. It does no I/O: the caller
/// fetches (speedbench's client does it over HTTP every 333 ms).
#[derive(Debug, Default)]
pub struct EndpointSamples {
    info: EndpointInfo,
    latency_ms_sum: f64,
    ok_fetches: u64,
    families: BTreeMap<String, (MetricType, Option<String>)>,
    series: HashMap<SeriesKey, Points>,
    /// When each successful scrape was taken, to tell a series that
    /// appeared mid-run from one that was there from the start.
    ok_times: Vec<i64>,
}

impl EndpointSamples {
    /// No fetch yet.
    pub fn new() -> EndpointSamples {
        EndpointSamples::default()
    }

    /// Records a successful fetch: `exposition` was received at `at_ns`
    /// (Unix nanoseconds) after a fetch that took `latency`.
    pub fn record(&mut self, exposition: &Exposition, at_ns: i64, latency: Duration) {
        self.info.total_fetches += 1;
        for sample in &exposition.samples {
            // NaN or infinity carries no amount: kept, it would turn every
            // statistic of its series into NaN (JSON null).
            if !sample.value.is_finite() {
                self.info.non_finite_samples += 1;
                continue;
            }
            let Some((family, role, help)) = exposition.classify(sample) else {
                continue;
            };
            let kind = match &role {
                Role::Counter => MetricType::Counter,
                Role::Gauge(k) => *k,
                _ => MetricType::Histogram,
            };
            self.families
                .entry(family.clone())
                .or_insert_with(|| (kind, help.map(str::to_string)));
            self.series
                .entry((family, role, sample.labels.clone()))
                .or_default()
                .push((at_ns, sample.value));
        }
        self.ok_times.push(at_ns);
        self.ok_fetches += 1;
        self.latency_ms_sum += latency.as_secs_f64() * 1e3;
        self.info.first_fetch_ns.get_or_insert(at_ns);
        self.info.last_fetch_ns = Some(at_ns);
    }

    /// Records a failed fetch (connection, status or parse error): counted
    /// in [`EndpointInfo::failed_fetches`], `message` kept as the last error.
    pub fn record_failure(&mut self, message: impl Into<String>) {
        self.info.total_fetches += 1;
        self.info.failed_fetches += 1;
        self.info.last_error = Some(message.into());
    }

    /// How the fetches have gone so far.
    pub fn info(&self) -> &EndpointInfo {
        &self.info
    }

    /// Every family seen: its type and help, by name.
    pub(crate) fn families(&self) -> &BTreeMap<String, (MetricType, Option<String>)> {
        &self.families
    }

    /// The series of `family` as scraped (no point added), by labels.
    pub(crate) fn series_of(&self, family: &str) -> Vec<ScrapedSeries<'_>> {
        let mut out: Vec<ScrapedSeries<'_>> = (self.series.iter())
            .filter(|((name, _, _), _)| name == family)
            .map(|((_, role, labels), points)| {
                let mut points = points.clone();
                points.sort_by_key(|p| p.0);
                ScrapedSeries {
                    role,
                    labels,
                    points,
                }
            })
            .collect();
        out.sort_by(|a, b| a.labels.cmp(b.labels));
        out
    }
}

/// One series of a family as scraped: its part, labels and samples in
/// time order.
pub(crate) struct ScrapedSeries<'a> {
    pub(crate) role: &'a Role,
    pub(crate) labels: &'a [(String, String)],
    pub(crate) points: Points,
}

/// A counter-like series (counter, histogram bucket, sum or count) absent
/// from an earlier successful scrape of its endpoint appeared during the
/// run: it counts from 0, not from its first value (llama.cpp publishes its
/// per-position acceptance counters only once it has drafted). A 0 sample is
/// put at the last successful scrape that did not have it, so the increase
/// up to its first value is counted wherever the window opens.
fn start_from_zero(points: &mut Points, ok_times: &[i64]) {
    let Some(&(first_ts, _)) = points.first() else {
        return;
    };
    let before = ok_times.partition_point(|&t| t < first_ts);
    if before > 0 {
        points.insert(0, (ok_times[before - 1], 0.0));
    }
}

impl EndpointSamples {
    /// Every series in time order, counters and histogram parts from zero
    /// where they appeared after the first scrape.
    fn order_points(&mut self) {
        self.ok_times.sort_unstable();
        for ((_, role, _), points) in self.series.iter_mut() {
            points.sort_by_key(|p| p.0);
            if !matches!(role, Role::Gauge(_)) {
                start_from_zero(points, &self.ok_times);
            }
        }
    }
}

impl ServerMetricsExport {
    /// The export of a run: every endpoint's samples (by its URL, in the
    /// order configured) reduced over `window`, counters to their deltas
    /// (warmup excluded, resets counted from zero) and gauges to their
    /// in-window statistics. `interval` is the time between scrapes and
    /// `tool` the writer's name and version.
    ///
    /// ```
    /// use std::time::Duration;
    /// use speedbench_scrape::{EndpointSamples, ServerMetricsExport, Window, parse_exposition};
    ///
    /// let mut samples = EndpointSamples::new();
    /// for (at_ns, drafts) in [(1_000, 5), (2_000, 9), (3_000, 12)] {
    ///     let text = format!("# TYPE vllm:spec_decode_num_drafts counter\n\
    ///                         vllm:spec_decode_num_drafts_total {drafts}\n");
    ///     samples.record(&parse_exposition(&text)?, at_ns, Duration::from_millis(2));
    /// }
    /// // The window opens after the first scrape (warmup before it).
    /// let window = Window { start: Some(1_500), end: Some(3_000) };
    /// let export = ServerMetricsExport::from_samples(
    ///     vec![("http://127.0.0.1:8000/metrics".into(), samples)],
    ///     window,
    ///     Duration::from_millis(333),
    ///     "my-bench 1.0",
    /// );
    /// assert_eq!(export.counter_total("vllm:spec_decode_num_drafts"), Some(7.0));
    /// # Ok::<(), speedbench_scrape::ScrapeError>(())
    /// ```
    pub fn from_samples(
        endpoints: Vec<(String, EndpointSamples)>,
        window: Window,
        interval: Duration,
        tool: impl Into<String>,
    ) -> ServerMetricsExport {
        ServerMetricsExport::from_samples_in_slices(endpoints, window, interval, tool, None)
    }

    /// [`from_samples`](ServerMetricsExport::from_samples), and with
    /// `slice` (a run's `--slice-duration`) each counter's rate over the
    /// window's complete slices as well ([`SliceRates`](crate::SliceRates): AIPerf's
    /// `rate_avg`, `rate_min`, `rate_max`, `rate_std`).
    pub fn from_samples_in_slices(
        endpoints: Vec<(String, EndpointSamples)>,
        window: Window,
        interval: Duration,
        tool: impl Into<String>,
        slice: Option<Duration>,
    ) -> ServerMetricsExport {
        let mut endpoints = endpoints;
        let mut families = BTreeMap::new();
        let mut endpoint_info = BTreeMap::new();
        let mut successful = Vec::new();
        let (mut start_ns, mut end_ns) = (i64::MAX, i64::MIN);
        for (url, store) in &mut endpoints {
            for (k, v) in &store.families {
                families.entry(k.clone()).or_insert_with(|| v.clone());
            }
            store.order_points();
            if store.ok_fetches > 0 {
                successful.push(url.clone());
                store.info.avg_fetch_latency_ms =
                    Some(store.latency_ms_sum / store.ok_fetches as f64);
            }
            start_ns = start_ns.min(store.info.first_fetch_ns.unwrap_or(i64::MAX));
            end_ns = end_ns.max(store.info.last_fetch_ns.unwrap_or(i64::MIN));
            endpoint_info.insert(url.clone(), store.info.clone());
        }
        let series = endpoints.iter().flat_map(|(url, store)| {
            store
                .series
                .iter()
                .map(move |((family, role, labels), points)| StoredSeries {
                    endpoint: url,
                    family,
                    role,
                    labels,
                    points,
                })
        });
        let metrics = build_metrics(series, &families, window, slice);
        ServerMetricsExport {
            schema_version: "1.0".into(),
            tool: tool.into(),
            summary: ExportSummary {
                endpoints_configured: endpoints.iter().map(|(url, _)| url.clone()).collect(),
                endpoints_successful: successful,
                start_ns: if start_ns == i64::MAX { 0 } else { start_ns },
                end_ns: if end_ns == i64::MIN { 0 } else { end_ns },
                profiling_start_ns: window.start,
                profiling_end_ns: window.end,
                interval_ms: interval.as_secs_f64() * 1e3,
                endpoint_info,
            },
            metrics,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_exposition;

    #[test]
    fn a_series_absent_from_an_earlier_scrape_starts_at_zero() {
        // Scrapes at 1, 2, 3 s; the series first shows at 2 s with 21.
        let ok = [1, 2, 3];
        let mut late = vec![(2, 21.0), (3, 30.0)];
        start_from_zero(&mut late, &ok);
        assert_eq!(late, vec![(1, 0.0), (2, 21.0), (3, 30.0)]);
        // Present from the first scrape: measured from its first value.
        let mut early = vec![(1, 5.0), (3, 9.0)];
        start_from_zero(&mut early, &ok);
        assert_eq!(early, vec![(1, 5.0), (3, 9.0)]);
    }

    #[test]
    fn fetches_are_counted_and_failures_kept() {
        let mut s = EndpointSamples::new();
        s.record_failure("HTTP 503");
        let e = parse_exposition("# TYPE g gauge\ng 4\n").unwrap();
        s.record(&e, 10, Duration::from_millis(4));
        s.record(&e, 20, Duration::from_millis(2));
        let info = s.info().clone();
        assert_eq!((info.total_fetches, info.failed_fetches), (3, 1));
        assert_eq!(info.last_error.as_deref(), Some("HTTP 503"));
        assert_eq!(
            (info.first_fetch_ns, info.last_fetch_ns),
            (Some(10), Some(20))
        );
        let export = ServerMetricsExport::from_samples(
            vec![("u".into(), s), ("down".into(), EndpointSamples::new())],
            Window::default(),
            Duration::from_millis(333),
            "t",
        );
        assert_eq!(export.summary.endpoints_configured, ["u", "down"]);
        assert_eq!(export.summary.endpoints_successful, ["u"]);
        assert_eq!(
            export.summary.endpoint_info["u"].avg_fetch_latency_ms,
            Some(3.0)
        );
        assert_eq!((export.summary.start_ns, export.summary.end_ns), (10, 20));
        assert_eq!(export.metrics["g"].kind, MetricType::Gauge);
    }

    #[test]
    fn nan_gauges_are_skipped_counted_and_the_export_reads_back() {
        // vLLM V0 before its first draft, then a real value.
        let mut s = EndpointSamples::new();
        let nan = parse_exposition(
            "# TYPE vllm:spec_decode_draft_acceptance_rate gauge\n\
             vllm:spec_decode_draft_acceptance_rate NaN\n",
        )
        .unwrap();
        let real = parse_exposition(
            "# TYPE vllm:spec_decode_draft_acceptance_rate gauge\n\
             vllm:spec_decode_draft_acceptance_rate 0.5\n",
        )
        .unwrap();
        s.record(&nan, 10, Duration::from_millis(1));
        s.record(&real, 20, Duration::from_millis(1));
        s.record(&nan, 30, Duration::from_millis(1));
        assert_eq!(s.info().non_finite_samples, 2);
        let export = ServerMetricsExport::from_samples(
            vec![("u".into(), s)],
            Window::default(),
            Duration::from_millis(333),
            "t",
        );
        assert_eq!(
            export.gauge_avg("vllm:spec_decode_draft_acceptance_rate"),
            Some(0.5)
        );
        let text = serde_json::to_string(&export).unwrap();
        let back = ServerMetricsExport::from_json(&text).unwrap();
        assert_eq!(back.summary.endpoint_info["u"].non_finite_samples, 2);
        // Only NaN: no statistic at all, and still a readable file.
        let mut only_nan = EndpointSamples::new();
        only_nan.record(&nan, 10, Duration::from_millis(1));
        let export = ServerMetricsExport::from_samples(
            vec![("u".into(), only_nan)],
            Window::default(),
            Duration::from_millis(333),
            "t",
        );
        let text = serde_json::to_string(&export).unwrap();
        assert!(ServerMetricsExport::from_json(&text).is_ok(), "{text}");
    }

    #[test]
    fn an_export_an_older_writer_left_with_null_statistics_reads() {
        let text = r#"{"metrics":{"vllm:spec_decode_draft_acceptance_rate":{"type":"gauge",
            "series":[{"stats":{"count":2,"avg":null,"min":null,"max":null,"std":null,"p1":null,
            "p5":null,"p10":null,"p25":null,"p50":null,"p75":null,"p90":null,"p95":null,"p99":null}}]}}}"#;
        let export = ServerMetricsExport::from_json(text).unwrap();
        assert_eq!(
            export.gauge_avg("vllm:spec_decode_draft_acceptance_rate"),
            None
        );
    }
}
