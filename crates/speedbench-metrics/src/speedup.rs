//! Baseline-against-speculative speedups, as llama.cpp's
//! `speed_bench_compare.py` computes them, with bootstrap intervals.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use speedbench_record::RequestRecord;

use crate::acceptance::AcceptanceTotals;
use crate::bootstrap::{Bootstrap, Interval, bootstrap_interval};
use crate::mean::{GroupMean, mean, mean_by};
use crate::request::RequestMetricsExt;
use crate::rng::SplitMix64;

/// `num / den` when both are present, `den > 0` and `num` is finite.
///
/// ```
/// use speedbench_metrics::ratio;
/// assert_eq!(ratio(Some(3.0), Some(2.0)), Some(1.5));
/// assert_eq!(ratio(Some(3.0), Some(0.0)), None);
/// ```
pub fn ratio(num: Option<f64>, den: Option<f64>) -> Option<f64> {
    match (num, den) {
        (Some(n), Some(d)) if d > 0.0 && n.is_finite() => Some(n / d),
        _ => None,
    }
}

/// `mean(num) / mean(den)` ([`mean`], [`ratio`]): a speedup of means, not a
/// mean of per-request speedups.
pub fn mean_ratio(num: &[f64], den: &[f64]) -> Option<f64> {
    ratio(mean(num.iter().copied()), mean(den.iter().copied()))
}

/// Which per-request decode speed a comparison or a matrix cell uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecodeSource {
    /// The server's own figure (llama.cpp `predicted_per_second`,
    /// [`RequestMetricsExt::decode_tokens_per_second`]).
    Server,
    /// The client's `(completion_tokens - 1) / (e2e - ttft)`
    /// ([`RequestMetricsExt::output_token_throughput_per_user`]; needs
    /// streaming).
    Client,
}

impl DecodeSource {
    /// The decode speed of `r` from this source, tokens/s.
    pub fn decode_tps(self, r: &RequestRecord) -> Option<f64> {
        match self {
            DecodeSource::Server => r.decode_tokens_per_second(),
            DecodeSource::Client => r.output_token_throughput_per_user(),
        }
    }

    /// The source of a comparison: [`DecodeSource::Server`] when `base` is
    /// not empty and every request of both sides has the server's figure
    /// (so both sides are measured alike), else [`DecodeSource::Client`].
    pub fn for_comparison(base: &[&RequestRecord], spec: &[&RequestRecord]) -> DecodeSource {
        let everywhere =
            |rs: &[&RequestRecord]| rs.iter().all(|r| r.decode_tokens_per_second().is_some());
        if !base.is_empty() && everywhere(base) && everywhere(spec) {
            DecodeSource::Server
        } else {
            DecodeSource::Client
        }
    }
}

/// Per group, the mean decode speed (tokens/s) of the measured records: the
/// server's figure where the group has one, else the client's (each group
/// chooses on its own; the mean is over the records that have the chosen
/// figure). The acceptance matrix's `decode_tps` cells.
pub fn decode_tps_by(
    records: &[RequestRecord],
    key: impl Fn(&RequestRecord) -> Option<String>,
) -> BTreeMap<String, GroupMean> {
    let server = mean_by(records, &key, |r| DecodeSource::Server.decode_tps(r));
    let mut groups = mean_by(records, &key, |r| DecodeSource::Client.decode_tps(r));
    for (k, group) in server {
        if group.mean.is_some() {
            groups.insert(k, group);
        }
    }
    groups
}

/// Speedups of one group of a speculative run over the same group of its
/// baseline, following llama.cpp's `speed_bench_compare.py`:
/// `decode_speedup = mean spec decode tokens/s / mean base decode tokens/s`
/// and `latency_speedup = mean base latency / mean spec latency`, with
/// percentile-bootstrap intervals ([`bootstrap_interval`]) on both and on
/// the speculative run's token-weighted acceptance length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Speedups {
    /// Baseline requests of the group.
    pub base_requests: u64,
    /// Speculative requests of the group.
    pub spec_requests: u64,
    /// The decode speed used ([`DecodeSource::for_comparison`]); `None`
    /// when there is no decode speedup.
    pub decode_source: Option<DecodeSource>,
    /// Baseline mean decode tokens/s.
    pub base_decode_tps: Option<f64>,
    /// Speculative mean decode tokens/s.
    pub spec_decode_tps: Option<f64>,
    /// `spec_decode_tps / base_decode_tps`.
    pub decode_speedup: Option<f64>,
    /// Bootstrap interval of the decode speedup.
    pub decode_speedup_ci: Option<Interval>,
    /// Baseline mean end-to-end latency, seconds.
    pub base_latency_s: Option<f64>,
    /// Speculative mean end-to-end latency, seconds.
    pub spec_latency_s: Option<f64>,
    /// `base_latency_s / spec_latency_s`.
    pub latency_speedup: Option<f64>,
    /// Bootstrap interval of the latency speedup.
    pub latency_speedup_ci: Option<Interval>,
    /// Speculative run's `Σaccepted / Σproposed` over its requests with
    /// spec stats, a fraction.
    pub accept_rate: Option<f64>,
    /// Speculative run's token-weighted acceptance length
    /// `1 + Σaccepted / Σsteps` over its requests with verify steps.
    pub accept_length: Option<f64>,
    /// Bootstrap interval of the acceptance length (requests resampled).
    pub accept_length_ci: Option<Interval>,
}

impl Speedups {
    /// Computes the speedups of `spec` over `base`, both already measured
    /// records ([`crate::is_measured`]) of one group. `speculates` is
    /// [`crate::run_speculates`] of the whole speculative run: acceptance
    /// then counts the requests that drafted nothing exactly as the
    /// acceptance matrix does ([`AcceptanceTotals::add_record`]), so the two
    /// print the same acceptance length for the same requests.
    ///
    /// Intervals draw from `rng` in this order: decode speedup (only when
    /// there is one), latency speedup, acceptance length; so a comparison
    /// of several groups sharing one `rng` is reproducible from its seed.
    pub fn of(
        base: &[&RequestRecord],
        spec: &[&RequestRecord],
        speculates: bool,
        bootstrap: Bootstrap,
        rng: &mut SplitMix64,
    ) -> Speedups {
        let source = DecodeSource::for_comparison(base, spec);
        let base_tps: Vec<f64> = base.iter().filter_map(|r| source.decode_tps(r)).collect();
        let spec_tps: Vec<f64> = spec.iter().filter_map(|r| source.decode_tps(r)).collect();
        let base_lat: Vec<f64> = base.iter().map(|r| r.e2e_latency_ns as f64 / 1e9).collect();
        let spec_lat: Vec<f64> = spec.iter().map(|r| r.e2e_latency_ns as f64 / 1e9).collect();
        let mut totals = AcceptanceTotals::default();
        let mut acc_steps = Vec::new();
        for r in spec {
            totals.add_record(r, speculates);
            // The same rule, one request at a time, for the resamples.
            let mut one = AcceptanceTotals::default();
            one.add_record(r, speculates);
            if one.requests_with_steps == 1 {
                acc_steps.push((one.accepted_with_steps, one.steps));
            }
        }
        let decode_speedup = mean_ratio(&spec_tps, &base_tps);
        let base_latency_s = mean(base_lat.iter().copied());
        let spec_latency_s = mean(spec_lat.iter().copied());
        Speedups {
            base_requests: base.len() as u64,
            spec_requests: spec.len() as u64,
            decode_source: decode_speedup.map(|_| source),
            base_decode_tps: mean(base_tps.iter().copied()),
            spec_decode_tps: mean(spec_tps.iter().copied()),
            decode_speedup,
            decode_speedup_ci: decode_speedup
                .and_then(|_| bootstrap_interval(&spec_tps, &base_tps, bootstrap, rng, mean_ratio)),
            base_latency_s,
            spec_latency_s,
            latency_speedup: ratio(base_latency_s, spec_latency_s),
            latency_speedup_ci: bootstrap_interval(
                &base_lat, &spec_lat, bootstrap, rng, mean_ratio,
            ),
            accept_rate: totals.accept_rate(),
            accept_length: totals.accept_length(),
            accept_length_ci: bootstrap_interval(&acc_steps, &[], bootstrap, rng, accept_length_of),
        }
    }
}

/// Token-weighted acceptance length of `(accepted, steps)` pairs.
fn accept_length_of(spec: &[(u64, u64)], _: &[(u64, u64)]) -> Option<f64> {
    let (acc, steps) = spec.iter().fold((0, 0), |(a, s), &(x, y)| (a + x, s + y));
    (steps > 0).then(|| 1.0 + acc as f64 / steps as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::{ServerTimings, SpecDecodeStats};

    fn rec(server_tps: Option<f64>, e2e_s: f64, spec: Option<(u64, u64, u64)>) -> RequestRecord {
        RequestRecord {
            category: Some("qa".into()),
            e2e_latency_ns: (e2e_s * 1e9) as u64,
            // Client decode: (11 - 1) tokens over e2e - 0.5 s.
            ttft_ns: Some(500_000_000),
            completion_tokens: Some(11),
            server_timings: server_tps.map(|t| ServerTimings {
                predicted_per_second: Some(t),
                ..Default::default()
            }),
            spec: spec.map(|(acc, prop, steps)| SpecDecodeStats {
                accepted_draft_tokens: acc,
                proposed_draft_tokens: prop,
                verify_steps: Some(steps),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    const NO_CI: Bootstrap = Bootstrap {
        resamples: 0,
        confidence: 0.95,
    };

    #[test]
    fn ratios() {
        assert_eq!(ratio(Some(6.0), Some(4.0)), Some(1.5));
        assert_eq!(ratio(None, Some(4.0)), None);
        assert_eq!(ratio(Some(1.0), Some(-1.0)), None);
        assert_eq!(ratio(Some(f64::INFINITY), Some(1.0)), None);
        // (2 + 4) / 2 = 3 over (1 + 2) / 2 = 1.5 -> 2.
        assert_eq!(mean_ratio(&[2.0, 4.0], &[1.0, 2.0]), Some(2.0));
        assert_eq!(mean_ratio(&[], &[1.0]), None);
    }

    #[test]
    fn speedups_by_hand() {
        let base = [rec(Some(50.0), 2.0, None), rec(Some(70.0), 4.0, None)];
        let spec = [
            rec(Some(120.0), 1.0, Some((30, 40, 10))),
            rec(Some(120.0), 1.0, Some((10, 40, 10))),
        ];
        let (b, s): (Vec<&RequestRecord>, Vec<&RequestRecord>) =
            (base.iter().collect(), spec.iter().collect());
        let x = Speedups::of(&b, &s, true, NO_CI, &mut SplitMix64::new(0));
        // decode: 120 / ((50 + 70) / 2) = 2; latency (2 + 4) / 2 = 3 s over 1 s = 3.
        assert_eq!(x.decode_source, Some(DecodeSource::Server));
        assert_eq!(
            (x.base_decode_tps, x.spec_decode_tps, x.decode_speedup),
            (Some(60.0), Some(120.0), Some(2.0))
        );
        assert_eq!(
            (x.base_latency_s, x.latency_speedup),
            (Some(3.0), Some(3.0))
        );
        // rate (30 + 10) / 80 = 0.5; AL 1 + 40 / 20 = 3.
        assert_eq!((x.accept_rate, x.accept_length), (Some(0.5), Some(3.0)));
        assert_eq!((x.base_requests, x.spec_requests), (2, 2));
        assert_eq!(x.decode_speedup_ci, None);
    }

    #[test]
    fn client_speed_when_one_request_lacks_the_servers() {
        // The baseline's second request has no server figure: both sides use
        // the client's (11 - 1) / (e2e - 0.5): base 10/1.5 and 10/3.5, spec 10/0.5.
        let base = [rec(Some(50.0), 2.0, None), rec(None, 4.0, None)];
        let spec = [rec(Some(99.0), 1.0, None)];
        let (b, s): (Vec<&RequestRecord>, Vec<&RequestRecord>) =
            (base.iter().collect(), spec.iter().collect());
        assert_eq!(DecodeSource::for_comparison(&b, &s), DecodeSource::Client);
        let x = Speedups::of(&b, &s, true, NO_CI, &mut SplitMix64::new(0));
        let base_mean = (10.0 / 1.5 + 10.0 / 3.5) / 2.0;
        assert!((x.base_decode_tps.unwrap() - base_mean).abs() < 1e-9);
        assert!((x.decode_speedup.unwrap() - 20.0 / base_mean).abs() < 1e-9);
        // An empty baseline: no decode speedup, so no source either.
        let none = Speedups::of(&[], &s, true, NO_CI, &mut SplitMix64::new(0));
        assert_eq!((none.decode_speedup, none.decode_source), (None, None));
    }

    #[test]
    fn intervals_come_from_the_seed() {
        let base: Vec<RequestRecord> = (0..20)
            .map(|i| rec(Some(50.0 + i as f64), 2.0, None))
            .collect();
        let spec: Vec<RequestRecord> = (0..20)
            .map(|i| rec(Some(100.0 + (i % 3) as f64), 1.0, Some((i % 4, 6, 3))))
            .collect();
        let (b, s): (Vec<&RequestRecord>, Vec<&RequestRecord>) =
            (base.iter().collect(), spec.iter().collect());
        let on = Bootstrap {
            resamples: 200,
            confidence: 0.9,
        };
        let x = Speedups::of(&b, &s, true, on, &mut SplitMix64::new(3));
        assert_eq!(x, Speedups::of(&b, &s, true, on, &mut SplitMix64::new(3)));
        let ci = x.decode_speedup_ci.unwrap();
        assert!(ci.low < x.decode_speedup.unwrap() && x.decode_speedup.unwrap() < ci.high);
        // Every latency is 2 s against 1 s: a point interval at 2.
        assert_eq!(
            x.latency_speedup_ci,
            Some(Interval {
                low: 2.0,
                high: 2.0
            })
        );
        let al = x.accept_length_ci.unwrap();
        assert!(al.low < al.high, "{al:?}");
    }

    #[test]
    fn decode_speed_cells_prefer_the_servers_figure_per_group() {
        let mut coding = rec(None, 1.5, None);
        coding.category = Some("coding".into());
        let records = [rec(Some(40.0), 2.0, None), rec(None, 2.0, None), coding];
        let by = decode_tps_by(&records, |r| r.category.clone());
        // qa: the server's figure exists, its mean over the 1 request with it.
        assert_eq!(
            by["qa"],
            GroupMean {
                mean: Some(40.0),
                count: 1
            }
        );
        // coding: the client's (11 - 1) / (1.5 - 0.5) = 10.
        assert_eq!(
            by["coding"],
            GroupMean {
                mean: Some(10.0),
                count: 1
            }
        );
    }

    #[test]
    fn acceptance_counts_undrafted_requests_as_the_matrix_does() {
        // One request drafted (4 accepted over 2 steps); one llama.cpp request
        // drafted nothing over 6 target passes. Both: 1 + 4 / (2 + 6) = 1.5.
        let drafted = RequestRecord {
            category: Some("qa".into()),
            spec: Some(SpecDecodeStats {
                accepted_draft_tokens: 4,
                proposed_draft_tokens: 8,
                verify_steps: Some(2),
                ..Default::default()
            }),
            ..Default::default()
        };
        let undrafted = RequestRecord {
            category: Some("qa".into()),
            server_timings: Some(ServerTimings {
                predicted_n: Some(6),
                ..Default::default()
            }),
            ..Default::default()
        };
        let run = [drafted, undrafted];
        let matrix = crate::acceptance_by(&run, |r| r.category.clone())["qa"].accept_length();
        let refs: Vec<&RequestRecord> = run.iter().collect();
        let x = Speedups::of(
            &refs,
            &refs,
            crate::run_speculates(&run),
            NO_CI,
            &mut SplitMix64::new(0),
        );
        assert_eq!((matrix, x.accept_length), (Some(1.5), Some(1.5)));
    }
}
