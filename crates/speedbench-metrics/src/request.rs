//! Values derived from one [`RequestRecord`].

use speedbench_record::RequestRecord;

const NS_PER_MS: f64 = 1e6;
const NS_PER_S: f64 = 1e9;

/// Per-request derived metrics, as methods on [`RequestRecord`].
///
/// Each method is a pure function of the record: it does not look at
/// `warmup` or `error_kind` (the aggregations in [`crate::RunMetrics`] do).
/// A method returns `None` when its inputs are missing or its denominator is
/// zero, never NaN or infinity.
pub trait RequestMetricsExt {
    /// Time to first token in milliseconds (`ttft_ns / 1e6`).
    fn ttft_ms(&self) -> Option<f64>;

    /// End-to-end request latency in milliseconds (`e2e_latency_ns / 1e6`).
    fn request_latency_ms(&self) -> f64;

    /// Inter-token latency in milliseconds, AIPerf's definition:
    /// `(e2e - ttft) / (completion_tokens - 1)`.
    ///
    /// `None` without a TTFT, with fewer than 2 completion tokens, or when
    /// `e2e < ttft` (an inconsistent record).
    fn inter_token_latency_ms(&self) -> Option<f64>;

    /// Output token throughput per user, tokens/s, AIPerf's definition:
    /// `1 / ITL` with ITL in seconds, i.e.
    /// `(completion_tokens - 1) / ((e2e - ttft) / 1e9)`.
    ///
    /// `None` when the ITL is `None` or zero.
    fn output_token_throughput_per_user(&self) -> Option<f64>;

    /// Acceptance length `1 + accepted / verify_steps` (includes the bonus
    /// token).
    ///
    /// `None` without spec stats, when `verify_steps` is `None`, or when it is
    /// 0 (a zero-step request has no acceptance length).
    fn acceptance_length(&self) -> Option<f64>;

    /// Draft acceptance rate in percent: `accepted / proposed * 100`.
    ///
    /// `None` without spec stats or when nothing was proposed.
    fn draft_acceptance_rate_pct(&self) -> Option<f64>;

    /// Accepted per verified `(accepted + steps) / (proposed + steps)`: the
    /// share of verified positions (drafts plus the bonus slot) that emitted
    /// a token.
    ///
    /// `None` without spec stats, when `verify_steps` is `None`, or when the
    /// denominator is 0.
    fn accepted_per_verified(&self) -> Option<f64>;

    /// llama.cpp's prefill speed `timings.prompt_per_second`, as reported.
    fn prompt_tokens_per_second(&self) -> Option<f64>;

    /// llama.cpp's decode speed `timings.predicted_per_second`, as reported.
    fn decode_tokens_per_second(&self) -> Option<f64>;
}

impl RequestMetricsExt for RequestRecord {
    fn ttft_ms(&self) -> Option<f64> {
        self.ttft_ns.map(|t| t as f64 / NS_PER_MS)
    }

    fn request_latency_ms(&self) -> f64 {
        self.e2e_latency_ns as f64 / NS_PER_MS
    }

    fn inter_token_latency_ms(&self) -> Option<f64> {
        decode_window_per_token_ns(self).map(|ns| ns / NS_PER_MS)
    }

    fn output_token_throughput_per_user(&self) -> Option<f64> {
        let itl_ns = decode_window_per_token_ns(self)?;
        (itl_ns > 0.0).then(|| NS_PER_S / itl_ns)
    }

    fn acceptance_length(&self) -> Option<f64> {
        let spec = self.spec.as_ref()?;
        let steps = spec.verify_steps.filter(|&s| s > 0)?;
        Some(1.0 + spec.accepted_draft_tokens as f64 / steps as f64)
    }

    fn draft_acceptance_rate_pct(&self) -> Option<f64> {
        let spec = self.spec.as_ref()?;
        (spec.proposed_draft_tokens > 0)
            .then(|| spec.accepted_draft_tokens as f64 / spec.proposed_draft_tokens as f64 * 100.0)
    }

    fn accepted_per_verified(&self) -> Option<f64> {
        let spec = self.spec.as_ref()?;
        let steps = spec.verify_steps?;
        let denominator = spec.proposed_draft_tokens + steps;
        (denominator > 0).then(|| (spec.accepted_draft_tokens + steps) as f64 / denominator as f64)
    }

    fn prompt_tokens_per_second(&self) -> Option<f64> {
        self.server_timings
            .as_ref()?
            .prompt_per_second
            .filter(|v| v.is_finite())
    }

    fn decode_tokens_per_second(&self) -> Option<f64> {
        self.server_timings
            .as_ref()?
            .predicted_per_second
            .filter(|v| v.is_finite())
    }
}

/// `(e2e - ttft) / (completion_tokens - 1)` in nanoseconds.
fn decode_window_per_token_ns(r: &RequestRecord) -> Option<f64> {
    let ttft = r.ttft_ns?;
    let tokens = r.completion_tokens.filter(|&n| n >= 2)?;
    let window = r.e2e_latency_ns.checked_sub(ttft)?;
    Some(window as f64 / (tokens - 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::{ServerTimings, SpecDecodeStats};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn timed(ttft_ns: Option<u64>, e2e_ns: u64, completion: Option<u64>) -> RequestRecord {
        RequestRecord {
            ttft_ns,
            e2e_latency_ns: e2e_ns,
            completion_tokens: completion,
            ..Default::default()
        }
    }

    fn with_spec(accepted: u64, proposed: u64, steps: Option<u64>) -> RequestRecord {
        RequestRecord {
            spec: Some(SpecDecodeStats {
                accepted_draft_tokens: accepted,
                proposed_draft_tokens: proposed,
                verify_steps: steps,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn latencies() {
        // ttft 50 ms, e2e 1050 ms, 11 tokens:
        // ITL = (1050 - 50) / (11 - 1) = 100 ms; per user = 1 / 0.1 s = 10 tok/s.
        let r = timed(Some(50_000_000), 1_050_000_000, Some(11));
        assert_eq!(r.ttft_ms(), Some(50.0));
        assert_eq!(r.request_latency_ms(), 1050.0);
        assert!(close(r.inter_token_latency_ms().unwrap(), 100.0));
        assert!(close(r.output_token_throughput_per_user().unwrap(), 10.0));
    }

    #[test]
    fn itl_needs_two_tokens_and_a_ttft() {
        assert_eq!(timed(Some(1), 10, Some(1)).inter_token_latency_ms(), None);
        assert_eq!(timed(Some(1), 10, None).inter_token_latency_ms(), None);
        assert_eq!(timed(None, 10, Some(5)).inter_token_latency_ms(), None);
        // e2e < ttft is inconsistent: no value rather than a negative one.
        assert_eq!(timed(Some(20), 10, Some(5)).inter_token_latency_ms(), None);
        // e2e == ttft: ITL 0 ms, per-user throughput undefined.
        let r = timed(Some(10), 10, Some(5));
        assert_eq!(r.inter_token_latency_ms(), Some(0.0));
        assert_eq!(r.output_token_throughput_per_user(), None);
    }

    #[test]
    fn spec_ratios_vllm_summary_payload() {
        // AIPerf's SUMMARY test payload: accepted 10, steps 43, proposed 129.
        // AL = 1 + 10/43 = 1.2325581395348837
        // rate = 10/129*100 = 7.751937984496124 %
        // accepted/verified = (10+43)/(129+43) = 53/172 = 0.3081395348837209
        let r = with_spec(10, 129, Some(43));
        assert!(close(r.acceptance_length().unwrap(), 1.2325581395348837));
        assert!(close(
            r.draft_acceptance_rate_pct().unwrap(),
            7.751937984496124
        ));
        assert!(close(r.accepted_per_verified().unwrap(), 53.0 / 172.0));
    }

    #[test]
    fn spec_ratios_edge_cases() {
        // No spec stats at all.
        let plain = RequestRecord::default();
        assert_eq!(plain.acceptance_length(), None);
        assert_eq!(plain.draft_acceptance_rate_pct(), None);
        assert_eq!(plain.accepted_per_verified(), None);
        // Zero-step request: no AL, no rate, 0/0 accepted-per-verified.
        let zero = with_spec(0, 0, Some(0));
        assert_eq!(zero.acceptance_length(), None);
        assert_eq!(zero.draft_acceptance_rate_pct(), None);
        assert_eq!(zero.accepted_per_verified(), None);
        // Unknown steps: rate only. 3/4*100 = 75 %.
        let unknown = with_spec(3, 4, None);
        assert_eq!(unknown.acceptance_length(), None);
        assert!(close(unknown.draft_acceptance_rate_pct().unwrap(), 75.0));
        assert_eq!(unknown.accepted_per_verified(), None);
    }

    #[test]
    fn server_timings_pass_through() {
        let r = RequestRecord {
            server_timings: Some(ServerTimings {
                prompt_per_second: Some(120.5),
                predicted_per_second: Some(f64::NAN),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(r.prompt_tokens_per_second(), Some(120.5));
        assert_eq!(r.decode_tokens_per_second(), None);
        assert_eq!(RequestRecord::default().prompt_tokens_per_second(), None);
    }
}
