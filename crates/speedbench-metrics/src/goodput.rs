//! Goodput: the requests that met every service-level objective (SLO), as
//! AIPerf's `--goodput` counts them.
//!
//! A request is *good* when it succeeded and each SLO's metric has a value
//! for it that meets the threshold (at most the threshold for a latency, at
//! least it for a throughput). A request without the value (no TTFT on an
//! unstreamed response, no inter-token latency with one output token) is
//! not good, as in AIPerf; `vllm bench serve` counts a one-token request's
//! TPOT as 0 instead, so it meets any TPOT SLO there.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use speedbench_record::RequestRecord;

use crate::measured::{benchmark_duration_s, is_measured, is_sent};
use crate::request::RequestMetricsExt;

/// A per-request metric an SLO can bound, by AIPerf's metric tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SloMetric {
    /// `time_to_first_token` (vLLM's `ttft`), ms; streamed responses only.
    TimeToFirstToken,
    /// `inter_token_latency` (vLLM's `tpot`), ms: `(e2e - ttft) / (tokens - 1)`.
    InterTokenLatency,
    /// `request_latency` (vLLM's `e2el`), ms.
    RequestLatency,
    /// `output_token_throughput_per_user`, tokens/s: `1 / ITL`; larger is better.
    OutputTokenThroughputPerUser,
}

impl SloMetric {
    /// Every metric, in the order they are printed.
    pub const ALL: [SloMetric; 4] = [
        SloMetric::TimeToFirstToken,
        SloMetric::InterTokenLatency,
        SloMetric::RequestLatency,
        SloMetric::OutputTokenThroughputPerUser,
    ];

    /// AIPerf's tag.
    pub fn tag(self) -> &'static str {
        match self {
            SloMetric::TimeToFirstToken => "time_to_first_token",
            SloMetric::InterTokenLatency => "inter_token_latency",
            SloMetric::RequestLatency => "request_latency",
            SloMetric::OutputTokenThroughputPerUser => "output_token_throughput_per_user",
        }
    }

    /// `vllm bench serve`'s name for it, where it has one.
    fn vllm_name(self) -> Option<&'static str> {
        match self {
            SloMetric::TimeToFirstToken => Some("ttft"),
            SloMetric::InterTokenLatency => Some("tpot"),
            SloMetric::RequestLatency => Some("e2el"),
            SloMetric::OutputTokenThroughputPerUser => None,
        }
    }

    /// The threshold's unit.
    pub fn unit(self) -> &'static str {
        match self {
            SloMetric::OutputTokenThroughputPerUser => "tokens/s/user",
            _ => "ms",
        }
    }

    /// Whether a value meets the SLO by being at least the threshold.
    pub fn larger_is_better(self) -> bool {
        self == SloMetric::OutputTokenThroughputPerUser
    }

    /// Whether it needs streamed responses (a TTFT) to have a value.
    pub fn needs_streaming(self) -> bool {
        self != SloMetric::RequestLatency
    }

    /// The request's value, in [`SloMetric::unit`]; `None` when it has none.
    pub fn value(self, r: &RequestRecord) -> Option<f64> {
        match self {
            SloMetric::TimeToFirstToken => r.ttft_ms(),
            SloMetric::InterTokenLatency => r.inter_token_latency_ms(),
            SloMetric::RequestLatency => Some(r.request_latency_ms()),
            SloMetric::OutputTokenThroughputPerUser => r.output_token_throughput_per_user(),
        }
    }
}

impl fmt::Display for SloMetric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.tag())
    }
}

impl FromStr for SloMetric {
    type Err = String;
    fn from_str(s: &str) -> Result<SloMetric, String> {
        let name = s.trim();
        SloMetric::ALL
            .into_iter()
            .find(|m| m.tag() == name || m.vllm_name() == Some(name))
            .ok_or_else(|| {
                format!(
                    "unknown metric `{name}` (an SLO bounds one of: time_to_first_token or ttft, \
                     inter_token_latency or tpot, request_latency or e2el, \
                     output_token_throughput_per_user)"
                )
            })
    }
}

/// One SLO: a metric and its threshold, in the metric's unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// The metric bounded.
    pub metric: SloMetric,
    /// The bound: a maximum, or a minimum where
    /// [`SloMetric::larger_is_better`].
    pub threshold: f64,
}

impl Slo {
    /// Whether the request has a value that meets this SLO.
    pub fn is_met(&self, r: &RequestRecord) -> bool {
        match self.metric.value(r) {
            Some(v) if self.metric.larger_is_better() => v >= self.threshold,
            Some(v) => v <= self.threshold,
            None => false,
        }
    }
}

/// The SLOs of a run, as `--goodput` gives them: `METRIC:VALUE` pairs
/// separated by spaces (or commas), each metric once.
///
/// ```
/// use speedbench_metrics::{SloMetric, Slos};
///
/// let slos: Slos = "ttft:200 inter_token_latency:50".parse()?;
/// assert_eq!(slos.0[0].metric, SloMetric::TimeToFirstToken);
/// assert_eq!(slos.to_string(), "time_to_first_token:200 inter_token_latency:50");
/// assert!("ttft:-1".parse::<Slos>().is_err());
/// # Ok::<(), String>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Slos(pub Vec<Slo>);

impl Slos {
    /// Whether no SLO was given.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Adds one SLO; a metric given twice is refused.
    pub fn push(&mut self, slo: Slo) -> Result<(), String> {
        if !(slo.threshold.is_finite() && slo.threshold >= 0.0) {
            return Err(format!(
                "`{}`: the threshold must be a number at least 0, not {}",
                slo.metric, slo.threshold
            ));
        }
        if self.0.iter().any(|s| s.metric == slo.metric) {
            return Err(format!("`{}` is given twice", slo.metric));
        }
        self.0.push(slo);
        Ok(())
    }

    /// Whether the request succeeded and meets every SLO.
    pub fn is_good(&self, r: &RequestRecord) -> bool {
        r.is_success() && self.0.iter().all(|s| s.is_met(r))
    }
}

impl FromStr for Slos {
    type Err = String;
    fn from_str(s: &str) -> Result<Slos, String> {
        let mut slos = Slos::default();
        for pair in s.split([' ', ',']).filter(|p| !p.trim().is_empty()) {
            let (name, value) = pair.split_once([':', '=']).ok_or_else(|| {
                format!("`{pair}`: an SLO is METRIC:VALUE (`time_to_first_token:200`)")
            })?;
            let metric: SloMetric = name.parse()?;
            let threshold = value
                .trim()
                .parse::<f64>()
                .map_err(|_| format!("`{pair}`: `{value}` is not a number"))?;
            slos.push(Slo { metric, threshold })?;
        }
        if slos.is_empty() {
            return Err("no SLO given (`time_to_first_token:200 request_latency:5000`)".into());
        }
        Ok(slos)
    }
}

impl fmt::Display for Slos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, slo) in self.0.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            write!(f, "{sep}{}:{}", slo.metric, slo.threshold)?;
        }
        Ok(())
    }
}

/// How many requests met one SLO.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SloAttainment {
    /// The SLO.
    #[serde(flatten)]
    pub slo: Slo,
    /// Successful requests that met it.
    pub met: u64,
}

/// Goodput of a run against its SLOs (AIPerf's `good_request_count`,
/// `goodput` and `good_request_fraction`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Goodput {
    /// Each SLO, with the requests that met it alone.
    pub slos: Vec<SloAttainment>,
    /// Successful, non-warmup requests that met every SLO.
    pub good_requests: u64,
    /// Requests sent, outside the warmup: the successful and the failed
    /// ones (a turn never sent is not counted).
    pub attempted: u64,
    /// `good_requests / attempted`: a failed request counts against it, so
    /// a server that drops traffic does not look good by its survivors;
    /// `None` when nothing was attempted.
    pub good_request_fraction: Option<f64>,
    /// `good_requests / benchmark duration` (requests/s), over the same
    /// duration as the request throughput.
    pub goodput: Option<f64>,
}

impl Goodput {
    /// Goodput of `records` against `slos`; `None` without SLOs.
    pub fn of(records: &[RequestRecord], slos: &Slos) -> Option<Goodput> {
        let mut fold = GoodputFold::new(slos)?;
        records.iter().for_each(|r| fold.add(r));
        Some(fold.finish(benchmark_duration_s(records)))
    }
}

/// [`Goodput::of`] folded one record at a time.
#[derive(Debug, Clone)]
pub(crate) struct GoodputFold {
    slos: Slos,
    attainment: Vec<SloAttainment>,
    good: u64,
    attempted: u64,
}

impl GoodputFold {
    /// `None` without SLOs.
    pub(crate) fn new(slos: &Slos) -> Option<GoodputFold> {
        (!slos.is_empty()).then(|| GoodputFold {
            slos: slos.clone(),
            attainment: (slos.0.iter())
                .map(|&slo| SloAttainment { slo, met: 0 })
                .collect(),
            good: 0,
            attempted: 0,
        })
    }

    pub(crate) fn add(&mut self, r: &RequestRecord) {
        if !is_sent(r) {
            return;
        }
        self.attempted += 1;
        if !is_measured(r) {
            return;
        }
        for a in &mut self.attainment {
            a.met += u64::from(a.slo.is_met(r));
        }
        self.good += u64::from(self.slos.is_good(r));
    }

    /// The goodput over a run of `duration_s` seconds.
    pub(crate) fn finish(self, duration_s: Option<f64>) -> Goodput {
        let (good, attempted) = (self.good, self.attempted);
        Goodput {
            slos: self.attainment,
            good_requests: good,
            attempted,
            good_request_fraction: (attempted > 0).then(|| good as f64 / attempted as f64),
            goodput: duration_s.map(|d| good as f64 / d),
        }
    }
}

/// Goodput with and without speculation, against the same SLOs:
/// speculation trades throughput for latency, and goodput is where the
/// trade shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoodputComparison {
    /// The SLOs both sides were held to.
    pub slos: Slos,
    /// The baseline's goodput.
    pub baseline: Goodput,
    /// The speculative run's goodput.
    pub speculative: Goodput,
    /// `speculative.goodput / baseline.goodput`; `None` when the baseline
    /// had no good request.
    pub goodput_ratio: Option<f64>,
}

impl GoodputComparison {
    /// Both runs' goodput against `slos`; `None` without SLOs.
    pub fn of(
        baseline: &[RequestRecord],
        speculative: &[RequestRecord],
        slos: &Slos,
    ) -> Option<GoodputComparison> {
        let (b, s) = (
            Goodput::of(baseline, slos)?,
            Goodput::of(speculative, slos)?,
        );
        Some(GoodputComparison {
            slos: slos.clone(),
            goodput_ratio: crate::speedup::ratio(s.goodput, b.goodput),
            baseline: b,
            speculative: s,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::ErrorKind;

    /// A streamed request: TTFT, e2e (ms) and output tokens.
    fn req(ttft_ms: u64, e2e_ms: u64, tokens: u64, start_s: u64) -> RequestRecord {
        let start = start_s as i64 * 1_000_000_000;
        RequestRecord {
            ttft_ns: Some(ttft_ms * 1_000_000),
            e2e_latency_ns: e2e_ms * 1_000_000,
            completion_tokens: Some(tokens),
            start_unix_ns: start,
            end_unix_ns: start + e2e_ms as i64 * 1_000_000,
            ..Default::default()
        }
    }

    #[test]
    fn parses_aiperf_tags_and_vllm_names_and_refuses_the_rest() {
        let slos: Slos = "time_to_first_token:200 tpot:50,e2el=5000".parse().unwrap();
        let got: Vec<(SloMetric, f64)> = slos.0.iter().map(|s| (s.metric, s.threshold)).collect();
        assert_eq!(
            got,
            [
                (SloMetric::TimeToFirstToken, 200.0),
                (SloMetric::InterTokenLatency, 50.0),
                (SloMetric::RequestLatency, 5000.0)
            ]
        );
        for (bad, says) in [
            ("goodness:3", "unknown metric `goodness`"),
            ("ttft", "METRIC:VALUE"),
            ("ttft:fast", "not a number"),
            ("ttft:1 time_to_first_token:2", "given twice"),
            ("e2el:-5", "at least 0"),
            ("  ", "no SLO given"),
        ] {
            let err = bad.parse::<Slos>().unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn counts_good_requests_by_hand() {
        // ITL = (e2e - ttft) / (tokens - 1); per-user throughput = 1000 / ITL.
        let records = vec![
            req(100, 1_100, 11, 0), // ITL 100, 10 tok/s: good for ttft, e2e; not itl<=50
            req(100, 600, 11, 1),   // ITL 50, 20 tok/s: good on every SLO
            req(300, 800, 11, 2),   // ITL 50, but ttft 300 > 200
            req(100, 100, 1, 3),    // one token: no ITL, so not good
            RequestRecord {
                error_kind: Some(ErrorKind::Timeout),
                start_unix_ns: 4_000_000_000,
                end_unix_ns: 10_000_000_000, // the run spans 0..10 s
                ..Default::default()
            },
            RequestRecord {
                error_kind: Some(ErrorKind::Skipped),
                ..Default::default()
            },
            RequestRecord {
                warmup: true,
                ..req(1, 2, 11, 0)
            },
        ];
        let slos: Slos = "ttft:200 inter_token_latency:50 request_latency:1000"
            .parse()
            .unwrap();
        let g = Goodput::of(&records, &slos).unwrap();
        assert_eq!(g.good_requests, 1);
        assert_eq!(
            g.attempted, 5,
            "4 successes and the timeout; not the skip or warmup"
        );
        assert_eq!(g.good_request_fraction, Some(0.2));
        assert_eq!(g.goodput, Some(0.1), "1 good request over 10 s");
        let met: Vec<u64> = g.slos.iter().map(|a| a.met).collect();
        assert_eq!(
            met,
            [3, 2, 3],
            "ttft<=200: 0, 1, 3; itl<=50: 1, 2; e2e<=1000: 1, 2, 3"
        );

        let per_user: Slos = "output_token_throughput_per_user:20".parse().unwrap();
        let g = Goodput::of(&records, &per_user).unwrap();
        assert_eq!(
            g.good_requests, 2,
            "the two at 20 tok/s meet a minimum of 20"
        );
        assert!(Goodput::of(&records, &Slos::default()).is_none());
    }

    #[test]
    fn the_comparison_divides_the_two_goodputs() {
        // Baseline: 1 good of 2 over 0..2 s; speculative: 2 good of 2 over 0..1 s.
        let base = [req(100, 900, 5, 0), req(100, 2_000, 5, 1)];
        let spec = [req(100, 500, 5, 0), req(100, 900, 5, 0)];
        let slos: Slos = "request_latency:1000".parse().unwrap();
        let c = GoodputComparison::of(&base, &spec, &slos).unwrap();
        assert_eq!(
            c.baseline.goodput,
            Some(1.0 / 3.0),
            "the base run spans 0..3 s"
        );
        assert_eq!(c.speculative.goodput, Some(2.0 / 0.9));
        assert_eq!(c.goodput_ratio, Some((2.0 / 0.9) / (1.0 / 3.0)));
    }
}
