//! Adapters from each engine's wire format to [`SpecDecodeStats`].
//!
//! Each adapter reads one engine's payload and checks its invariants; a
//! payload that breaks them is reported as malformed rather than recorded,
//! because a wrong acceptance number is worse than a missing one.

use serde_json::Value;
use speedbench_record::{SpecDecodeStats, SpecSource};

use crate::vllm_fields::VllmFields;

/// A payload that claims to be spec-decode stats but breaks its own rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MalformedSpec {
    /// The engine whose format was expected.
    pub source: SpecSource,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for MalformedSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "malformed {} spec-decode payload: {}",
            self.source.as_str(),
            self.message
        )
    }
}

/// Where an adapter reads a payload's fields: a JSON object, or the
/// fields of one read straight from a chunk ([`VllmFields`]).
trait PayloadFields {
    /// The field called `name`, when sent.
    fn field(&self, name: &str) -> Option<&Value>;
}

impl PayloadFields for Value {
    fn field(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }
}

impl PayloadFields for VllmFields {
    fn field(&self, name: &str) -> Option<&Value> {
        self.get(name)
    }
}

fn u64_field(
    obj: &(impl PayloadFields + ?Sized),
    name: &str,
    source: SpecSource,
) -> Result<u64, MalformedSpec> {
    obj.field(name)
        .and_then(Value::as_u64)
        .ok_or_else(|| MalformedSpec {
            source,
            message: format!("field `{name}` missing or not a non-negative integer"),
        })
}

fn opt_u64(obj: &(impl PayloadFields + ?Sized), name: &str) -> Option<u64> {
    obj.field(name).and_then(Value::as_u64)
}

fn u32_list(
    obj: &(impl PayloadFields + ?Sized),
    name: &str,
    source: SpecSource,
) -> Result<Option<Vec<u32>>, MalformedSpec> {
    match obj.field(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_u64().and_then(|n| u32::try_from(n).ok()))
            .collect::<Option<Vec<u32>>>()
            .map(Some)
            .ok_or_else(|| MalformedSpec {
                source,
                message: format!("field `{name}` must be a list of non-negative integers"),
            }),
        Some(_) => Err(MalformedSpec {
            source,
            message: format!("field `{name}` must be a list"),
        }),
    }
}

/// Reads a dense histogram list, or an early vLLM draft's sparse `{"j": n}` map.
fn histogram(
    obj: &(impl PayloadFields + ?Sized),
    name: &str,
    source: SpecSource,
) -> Result<Vec<u64>, MalformedSpec> {
    let bad = |message: String| MalformedSpec { source, message };
    match obj.field(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(Value::as_u64)
            .collect::<Option<Vec<u64>>>()
            .ok_or_else(|| bad(format!("`{name}` must hold non-negative integers"))),
        Some(Value::Object(map)) => {
            let mut dense = Vec::new();
            for (k, v) in map {
                let j: usize = k
                    .parse()
                    .map_err(|_| bad(format!("`{name}` key {k:?} is not an integer")))?;
                let n = v
                    .as_u64()
                    .ok_or_else(|| bad(format!("`{name}[{k}]` is not a non-negative integer")))?;
                if dense.len() <= j {
                    dense.resize(j + 1, 0);
                }
                dense[j] = n;
            }
            Ok(dense)
        }
        Some(_) => Err(bad(format!("`{name}` must be a list"))),
    }
}

/// Checks the invariants every adapter's output must satisfy.
fn validate(stats: SpecDecodeStats) -> Result<SpecDecodeStats, MalformedSpec> {
    let source = stats.source.unwrap_or(SpecSource::Vllm);
    let bad = |message: String| Err(MalformedSpec { source, message });
    if stats.accepted_draft_tokens > stats.proposed_draft_tokens {
        return bad(format!(
            "accepted draft tokens ({}) exceed proposed draft tokens ({})",
            stats.accepted_draft_tokens, stats.proposed_draft_tokens
        ));
    }
    // Tokens over no step would inflate the token-weighted acceptance length
    // without bound (AIPerf drops these payloads too).
    if stats.verify_steps == Some(0)
        && (stats.accepted_draft_tokens > 0 || stats.proposed_draft_tokens > 0)
    {
        return bad(format!(
            "zero verify steps with {} drafted and {} accepted tokens",
            stats.proposed_draft_tokens, stats.accepted_draft_tokens
        ));
    }
    if let Err(message) = check_histogram(&stats).and_then(|()| check_per_step(&stats)) {
        return bad(message);
    }
    Ok(stats)
}

/// The acceptance histogram, when there is one: `num_spec_tokens + 1`
/// buckets summing to the verify steps, j-weighted to the accepted tokens.
fn check_histogram(stats: &SpecDecodeStats) -> Result<(), String> {
    let hist = &stats.acceptance_histogram;
    if hist.is_empty() {
        return Ok(());
    }
    if let Some(k) = stats.num_spec_tokens
        && hist.len() != k as usize + 1
    {
        return Err(format!(
            "acceptance_histogram has {} buckets, expected num_spec_tokens + 1 = {}",
            hist.len(),
            u64::from(k) + 1
        ));
    }
    // Wide sums: a hostile payload must not overflow (a panic in debug
    // builds, a wrapped sum that passes the check in release builds).
    let steps: u128 = hist.iter().map(|&n| u128::from(n)).sum();
    let weighted: u128 = hist
        .iter()
        .enumerate()
        .map(|(j, &n)| j as u128 * u128::from(n))
        .sum();
    if Some(steps) != stats.verify_steps.map(u128::from) {
        return Err(format!(
            "acceptance_histogram counts sum to {steps}, but verify steps are {:?}",
            stats.verify_steps
        ));
    }
    if weighted != u128::from(stats.accepted_draft_tokens) {
        return Err(format!(
            "acceptance_histogram j-weighted sum is {weighted}, but accepted draft tokens are {}",
            stats.accepted_draft_tokens
        ));
    }
    Ok(())
}

/// The per-step arrays, when both are there: one entry per verify step,
/// summing to the totals, no step accepting more than it drafted.
fn check_per_step(stats: &SpecDecodeStats) -> Result<(), String> {
    let (Some(acc), Some(drafted)) = (&stats.per_step_accepted, &stats.per_step_drafted) else {
        return Ok(());
    };
    let steps = stats.verify_steps.unwrap_or(0) as usize;
    if acc.len() != steps || drafted.len() != steps {
        return Err(format!(
            "per-step arrays have {} and {} entries for {steps} verify steps",
            acc.len(),
            drafted.len()
        ));
    }
    if acc.iter().map(|&a| a as u64).sum::<u64>() != stats.accepted_draft_tokens
        || drafted.iter().map(|&d| d as u64).sum::<u64>() != stats.proposed_draft_tokens
    {
        return Err("per-step arrays do not sum to the totals".into());
    }
    if let Some(i) = acc.iter().zip(drafted).position(|(a, d)| a > d) {
        return Err(format!("step {i} accepted more drafts than it proposed"));
    }
    Ok(())
}

/// vLLM's per-request `metrics.speculative_decoding` object (the merged shape,
/// dense histogram) or an early draft's per-choice `speculative_decoding_stats`.
pub fn from_vllm(payload: &Value) -> Result<SpecDecodeStats, MalformedSpec> {
    vllm_stats(payload)
}

/// [`from_vllm`] of the fields read straight from a chunk.
pub(crate) fn from_vllm_fields(fields: &VllmFields) -> Result<SpecDecodeStats, MalformedSpec> {
    vllm_stats(fields)
}

fn vllm_stats(payload: &(impl PayloadFields + ?Sized)) -> Result<SpecDecodeStats, MalformedSpec> {
    let s = SpecSource::Vllm;
    validate(SpecDecodeStats {
        source: Some(s),
        accepted_draft_tokens: u64_field(payload, "num_accepted_draft_tokens", s)?,
        proposed_draft_tokens: u64_field(payload, "num_draft_tokens", s)?,
        verify_steps: Some(u64_field(payload, "num_spec_steps", s)?),
        num_spec_tokens: opt_u64(payload, "num_spec_tokens").and_then(|k| u32::try_from(k).ok()),
        acceptance_histogram: histogram(payload, "acceptance_histogram", s)?,
        per_step_accepted: u32_list(payload, "per_step_accepted", s)?,
        per_step_drafted: u32_list(payload, "per_step_drafted", s)?,
    })
}

/// TensorRT-LLM's per-choice `speculative_decoding` object.
pub fn from_trtllm(payload: &Value) -> Result<SpecDecodeStats, MalformedSpec> {
    let s = SpecSource::TensorRtLlm;
    validate(SpecDecodeStats {
        source: Some(s),
        accepted_draft_tokens: u64_field(payload, "total_accepted_draft_tokens", s)?,
        proposed_draft_tokens: u64_field(payload, "total_draft_tokens", s)?,
        verify_steps: Some(u64_field(payload, "num_spec_steps", s)?),
        num_spec_tokens: opt_u64(payload, "num_spec_tokens").and_then(|k| u32::try_from(k).ok()),
        acceptance_histogram: histogram(payload, "acceptance_histogram", s)?,
        per_step_accepted: None,
        per_step_drafted: None,
    })
}

/// SGLang's `sglext.spec_tokens_details` object (OpenAI API, n == 1).
pub fn from_sglang(payload: &Value) -> Result<SpecDecodeStats, MalformedSpec> {
    let s = SpecSource::Sglang;
    validate(SpecDecodeStats {
        source: Some(s),
        accepted_draft_tokens: u64_field(payload, "spec_num_correct_drafts", s)?,
        proposed_draft_tokens: u64_field(payload, "spec_num_proposed_drafts", s)?,
        verify_steps: Some(u64_field(payload, "spec_verify_ct", s)?),
        num_spec_tokens: None,
        acceptance_histogram: histogram(payload, "spec_correct_drafts_histogram", s)?,
        per_step_accepted: None,
        per_step_drafted: None,
    })
}

/// llama.cpp's `timings` object, when it carries `draft_n`.
///
/// llama.cpp reports no verify-step count. Each target decode step emits one
/// token plus the drafts it accepted, so `predicted_n - draft_n_accepted` is
/// the number of target decode steps, counting steps that had no draft; the
/// acceptance length computed from it is tokens per target forward pass.
/// Where the engine gives the exact count (mlx-vlm's `draft_rounds`), that
/// is used instead. No histogram is reported, and none is invented. Returns
/// `Ok(None)` when the object has no draft fields (llama.cpp omits them when
/// nothing was drafted); an `Err` when `predicted_n` is missing or smaller
/// than the accepted drafts (negative steps), or the steps come to zero
/// with drafts: such payloads cannot be right, and AIPerf drops them too.
pub fn from_llamacpp(timings: &Value) -> Result<Option<SpecDecodeStats>, MalformedSpec> {
    let s = SpecSource::LlamaCpp;
    if timings.get("draft_n").is_none() {
        return Ok(None);
    }
    let drafted = u64_field(timings, "draft_n", s)?;
    // llama.cpp always sends both; a missing or non-integer count would
    // otherwise read as "nothing accepted", a wrong number.
    let accepted = u64_field(timings, "draft_n_accepted", s)?;
    let steps = match opt_u64(timings, "draft_rounds") {
        Some(rounds) => {
            // Every round emits one token plus the drafts it accepted: more
            // than the response carries is drafts accepted past its end
            // (mlx-vlm counts them on a one-word reply).
            if let Some(predicted) = opt_u64(timings, "predicted_n")
                && u128::from(accepted) + u128::from(rounds) > u128::from(predicted)
            {
                return Err(MalformedSpec {
                    source: s,
                    message: format!(
                        "draft_n_accepted ({accepted}) plus draft_rounds ({rounds}) exceed predicted_n ({predicted}): more accepted drafts than the response carries"
                    ),
                });
            }
            rounds
        }
        None => {
            let predicted = u64_field(timings, "predicted_n", s)?;
            predicted.checked_sub(accepted).ok_or_else(|| MalformedSpec {
                source: s,
                message: format!(
                    "draft_n_accepted ({accepted}) exceeds predicted_n ({predicted}): negative verify steps"
                ),
            })?
        }
    };
    validate(SpecDecodeStats {
        source: Some(s),
        accepted_draft_tokens: accepted,
        proposed_draft_tokens: drafted,
        verify_steps: Some(steps),
        ..Default::default()
    })
    .map(Some)
}

/// TensorRT-LLM's per-choice `avg_decoded_tokens_per_iter` (released
/// `trtllm-serve`): tokens decoded per iteration of the request. It is
/// recorded as it is ([`speedbench_record::RequestRecord::tokens_per_iteration`]);
/// `Err` when it is not a finite number of at least 1 (no iteration decodes
/// less than one token).
pub fn tokens_per_iteration(value: &Value) -> Result<f64, MalformedSpec> {
    match value.as_f64() {
        Some(v) if v.is_finite() && v >= 1.0 => Ok(v),
        _ => Err(MalformedSpec {
            source: SpecSource::TensorRtLlm,
            message: format!("avg_decoded_tokens_per_iter {value} is not a number of at least 1"),
        }),
    }
}

/// Reads one engine's speculative-decoding statistics from its responses:
/// how a downstream crate adds an engine without forking the client.
///
/// Register it on the target ([`crate::Target::with_spec_adapter`]). For every
/// JSON object of a response (the whole body, or each stream chunk),
/// [`SpecAdapter::find`] picks out the engine's payload, if present; the
/// last one found is handed to [`SpecAdapter::parse`] when the response
/// ends. Registered adapters are asked before the built-in formats, in the
/// order they were registered.
///
/// ```
/// use serde_json::{Value, json};
/// use speedbench_client::spec::{MalformedSpec, SpecAdapter};
/// use speedbench_record::{SpecDecodeStats, SpecSource};
///
/// /// A made-up engine that reports `{"my_spec": {"accepted": a, "drafted": d}}`.
/// #[derive(Debug)]
/// struct MyEngine;
///
/// impl SpecAdapter for MyEngine {
///     fn source(&self) -> SpecSource {
///         SpecSource::named("my_engine").unwrap()
///     }
///     fn find<'a>(&self, object: &'a Value) -> Option<&'a Value> {
///         object.get("my_spec")
///     }
///     fn parse(&self, payload: &Value) -> Result<SpecDecodeStats, MalformedSpec> {
///         let field = |name: &str| {
///             payload.get(name).and_then(Value::as_u64).ok_or_else(|| MalformedSpec {
///                 source: self.source(),
///                 message: format!("`{name}` is missing or not a count"),
///             })
///         };
///         Ok(SpecDecodeStats {
///             accepted_draft_tokens: field("accepted")?,
///             proposed_draft_tokens: field("drafted")?,
///             ..Default::default()
///         })
///     }
/// }
///
/// let chunk = json!({"choices": [], "my_spec": {"accepted": 3, "drafted": 4}});
/// let stats = MyEngine.parse(MyEngine.find(&chunk).unwrap()).unwrap();
/// assert_eq!(stats.accepted_draft_tokens, 3);
/// ```
pub trait SpecAdapter: Send + Sync + std::fmt::Debug {
    /// The name recorded in `spec_source` (usually [`SpecSource::named`]).
    fn source(&self) -> SpecSource;

    /// This engine's payload inside one JSON object of a response, if there.
    fn find<'a>(&self, object: &'a Value) -> Option<&'a Value>;

    /// The statistics in a payload [`SpecAdapter::find`] returned; an `Err`
    /// when it breaks the engine's own rules (it is then not recorded).
    /// The record's `source` is set to [`SpecAdapter::source`] and the
    /// usual invariants (accepted within proposed, histogram sums) checked.
    fn parse(&self, payload: &Value) -> Result<SpecDecodeStats, MalformedSpec>;
}

/// Runs a registered adapter on its payload: stamps the source and checks
/// the invariants every record keeps.
pub(crate) fn from_adapter(
    adapter: &dyn SpecAdapter,
    payload: &Value,
) -> Result<SpecDecodeStats, MalformedSpec> {
    let mut stats = adapter.parse(payload)?;
    stats.source = Some(adapter.source());
    validate(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn vllm_summary_payload() {
        let p = json!({"mean_acceptance_length": 1.2325581395348837, "draft_acceptance_rate": 0.0775,
            "acceptance_histogram": [39, 1, 0, 3], "num_spec_steps": 43, "num_accepted_draft_tokens": 10,
            "num_draft_tokens": 129, "num_spec_tokens": 3});
        let s = from_vllm(&p).unwrap();
        assert_eq!(
            (
                s.accepted_draft_tokens,
                s.proposed_draft_tokens,
                s.verify_steps
            ),
            (10, 129, Some(43))
        );
        assert_eq!(s.acceptance_histogram, vec![39, 1, 0, 3]);
        assert_eq!(s.num_spec_tokens, Some(3));
    }

    #[test]
    fn vllm_detailed_payload_and_its_checks() {
        let mut p = json!({"acceptance_histogram": [2, 1, 0, 1], "num_spec_steps": 4,
            "num_accepted_draft_tokens": 4, "num_draft_tokens": 12, "num_spec_tokens": 3,
            "per_step_accepted": [0, 1, 3, 0], "per_step_drafted": [3, 3, 3, 3]});
        assert_eq!(
            from_vllm(&p).unwrap().per_step_accepted,
            Some(vec![0, 1, 3, 0])
        );
        p["per_step_accepted"] = json!([0, 1, 3]);
        assert!(
            from_vllm(&p)
                .unwrap_err()
                .message
                .contains("per-step arrays")
        );
        p["per_step_accepted"] = json!([3, 3, 2, 4]);
        p["per_step_drafted"] = json!([3, 3, 3, 3]);
        p["num_accepted_draft_tokens"] = json!(12);
        p["acceptance_histogram"] = json!([0, 0, 1, 3]);
        // histogram j-weighted: 2 + 9 = 11 != 12
        assert!(from_vllm(&p).is_err());
    }

    #[test]
    fn vllm_rejects_broken_invariants() {
        let base = json!({"acceptance_histogram": [39, 1, 0, 3], "num_spec_steps": 43,
            "num_accepted_draft_tokens": 10, "num_draft_tokens": 129, "num_spec_tokens": 3});
        let cases = [
            ("num_spec_steps", json!(99), "counts sum to 43"),
            (
                "num_accepted_draft_tokens",
                json!(11),
                "j-weighted sum is 10",
            ),
            ("num_draft_tokens", json!(5), "exceed proposed"),
            ("acceptance_histogram", json!([0, 0, 0, 0, 1]), "5 buckets"),
            (
                "acceptance_histogram",
                json!([39, -1, 0, 3]),
                "non-negative",
            ),
            ("acceptance_histogram", json!("303"), "must be a list"),
            ("num_spec_steps", json!("43"), "`num_spec_steps`"),
        ];
        for (field, value, needle) in cases {
            let mut p = base.clone();
            p[field] = value;
            let err = from_vllm(&p).unwrap_err().to_string();
            assert!(err.contains(needle), "{field}: {err}");
        }
    }

    #[test]
    fn early_vllm_sparse_histogram_is_accepted() {
        let p = json!({"acceptance_histogram": {"0": 39, "1": 1, "3": 3}, "num_spec_steps": 43,
            "num_accepted_draft_tokens": 10, "num_draft_tokens": 129});
        assert_eq!(
            from_vllm(&p).unwrap().acceptance_histogram,
            vec![39, 1, 0, 3]
        );
    }

    #[test]
    fn zero_step_payload_is_valid() {
        let p = json!({"acceptance_histogram": [0, 0, 0, 0], "num_spec_steps": 0,
            "num_accepted_draft_tokens": 0, "num_draft_tokens": 0, "num_spec_tokens": 3});
        assert_eq!(from_vllm(&p).unwrap().verify_steps, Some(0));
    }

    #[test]
    fn huge_histograms_do_not_overflow() {
        let p = json!({"acceptance_histogram": [u64::MAX, 1], "num_spec_steps": 0,
            "num_accepted_draft_tokens": 1, "num_draft_tokens": 1, "num_spec_tokens": u32::MAX});
        assert!(from_vllm(&p).is_err());
        let mut p = p;
        p["num_spec_tokens"] = json!(1);
        assert!(from_vllm(&p).is_err(), "the counts sum past u64::MAX");
    }

    #[test]
    fn llamacpp_timings() {
        let t = json!({"predicted_n": 64, "draft_n": 47, "draft_n_accepted": 47});
        let s = from_llamacpp(&t).unwrap().unwrap();
        // 64 tokens, 47 of them accepted drafts: 17 target decode steps.
        assert_eq!(
            (
                s.accepted_draft_tokens,
                s.proposed_draft_tokens,
                s.verify_steps
            ),
            (47, 47, Some(17))
        );
        assert!(s.acceptance_histogram.is_empty());
        assert_eq!(from_llamacpp(&json!({"predicted_n": 64})).unwrap(), None);
        assert!(
            from_llamacpp(&json!({"predicted_n": 64, "draft_n": 3, "draft_n_accepted": 9}))
                .is_err()
        );
        // A missing or string count is malformed, not "0 accepted".
        assert!(from_llamacpp(&json!({"predicted_n": 64, "draft_n": 3})).is_err());
        // AIPerf drops what cannot be right: no predicted_n, negative or
        // zero derived steps with drafts.
        for bad in [
            json!({"draft_n": 3, "draft_n_accepted": 2}),
            json!({"predicted_n": 5, "draft_n": 9, "draft_n_accepted": 6}),
            json!({"predicted_n": 6, "draft_n": 9, "draft_n_accepted": 6}),
        ] {
            assert!(from_llamacpp(&bad).is_err(), "{bad}");
        }
        assert!(
            from_llamacpp(&json!({"predicted_n": 64, "draft_n": 3, "draft_n_accepted": "2"}))
                .is_err()
        );
    }

    #[test]
    fn mlx_vlm_draft_rounds_are_the_exact_steps() {
        // mlx-vlm PR #1788: 30 rounds, 90 drafted, 81 accepted, 111 tokens.
        let t = json!({"predicted_n": 111, "draft_kind": "mtp", "draft_rounds": 30,
            "draft_n": 90, "draft_n_accepted": 81});
        let s = from_llamacpp(&t).unwrap().unwrap();
        assert_eq!(s.verify_steps, Some(30));
        // Without predicted_n the rounds still give the steps.
        let t = json!({"draft_rounds": 30, "draft_n": 90, "draft_n_accepted": 81});
        assert_eq!(from_llamacpp(&t).unwrap().unwrap().verify_steps, Some(30));
    }

    #[test]
    fn zero_steps_with_drafts_are_malformed() {
        let p =
            json!({"total_accepted_draft_tokens": 2, "total_draft_tokens": 6, "num_spec_steps": 0});
        let err = from_trtllm(&p).unwrap_err().to_string();
        assert!(err.contains("zero verify steps"), "{err}");
        assert!(tokens_per_iteration(&json!(0.5)).is_err());
        assert!(tokens_per_iteration(&json!("2")).is_err());
        assert_eq!(tokens_per_iteration(&json!(2.5)).unwrap(), 2.5);
    }

    #[test]
    fn sglang_and_trtllm() {
        let sg = json!({"spec_num_correct_drafts": 6, "spec_num_proposed_drafts": 12, "spec_verify_ct": 4,
            "spec_correct_drafts_histogram": [1, 1, 1, 1], "spec_accept_length": 2.5});
        let s = from_sglang(&sg).unwrap();
        assert_eq!((s.accepted_draft_tokens, s.verify_steps), (6, Some(4)));
        let trt = json!({"total_accepted_draft_tokens": 5, "total_draft_tokens": 9, "num_spec_steps": 3,
            "acceptance_histogram": [1, 0, 1, 1], "num_spec_tokens": 3, "acceptance_rate": 0.55});
        assert_eq!(from_trtllm(&trt).unwrap().proposed_draft_tokens, 9);
    }
}
