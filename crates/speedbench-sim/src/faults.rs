//! Deterministic fault injection: which requests fault, and how.
//!
//! A [`FaultPlan`] pairs a [`FaultKind`] with a selector. The selector is
//! either positional (`every_nth`: the n-th, 2n-th, … generation request in
//! arrival order, counting from 1) or hashed (`probability`: a draw seeded by
//! the server seed, the full prompt and the plan's index, so the same request
//! faults on every run regardless of arrival order or concurrency). Plans are
//! tried in order and the first match wins. [`FaultKind::CounterReset`] plans
//! select `/metrics` scrapes instead of requests.
//!
//! Every faulted request is listed in [`crate::GroundTruth::faults`]. Requests
//! that the fault makes fail ([`FaultKind::ResetMidStream`],
//! [`FaultKind::HttpStatus`], [`FaultKind::MalformedJson`],
//! [`FaultKind::NonUtf8`], [`FaultKind::Stall`]) are never counted as
//! completed; requests that only carry corrupted spec-decode fields
//! ([`FaultKind::SpecFieldsMissing`], [`FaultKind::SpecFieldsWrongType`]) are
//! counted as usual, as a real server would count them.

use serde::Deserialize;

use crate::SimError;
use crate::seed::{SplitMix64, stream_seed};

/// One kind of injected fault.
///
/// Config names: `"reset_mid_stream"` (or `{"reset_mid_stream": {"after_chunks": 3}}`),
/// `{"http_status": 429}`, `"malformed_json"`, `"non_utf8"`, `"stall"`,
/// `"spec_fields_missing"`, `"spec_fields_wrong_type"`, `"counter_reset"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(try_from = "serde_json::Value")]
pub enum FaultKind {
    /// Close the TCP connection abruptly after `after_chunks` SSE frames
    /// (the role chunk counts); a non-streaming response is cut after its
    /// first bytes. The client sees a broken connection.
    ResetMidStream {
        /// Frames sent before the reset (default 2).
        after_chunks: u32,
    },
    /// Answer with this HTTP status (400–599) and an OpenAI error body;
    /// 429 carries `Retry-After: 1`.
    HttpStatus(u16),
    /// A streamed chunk (or a non-streaming body) that is not valid JSON; a
    /// stream then goes on normally to `data: [DONE]`.
    MalformedJson,
    /// A streamed chunk (or a non-streaming body) whose content holds bytes
    /// that are not UTF-8; a stream then goes on normally to `data: [DONE]`.
    NonUtf8,
    /// Send the headers (and the role chunk of a chat stream), then nothing
    /// more until the client gives up or the server shuts down.
    Stall,
    /// The response is complete, but its per-request spec-decode statistics
    /// lack required fields (vLLM: `num_accepted_draft_tokens`,
    /// `num_spec_steps`; llama.cpp: `draft_n_accepted`).
    SpecFieldsMissing,
    /// The response is complete, but its per-request spec-decode counts are
    /// strings instead of integers.
    SpecFieldsWrongType,
    /// A selected `/metrics` scrape (counting scrapes from 1) and every later
    /// one report counters restarted from zero just after the previous
    /// scrape, as after a server restart: the selected scrape shows only the
    /// increase since the previous one. Selects scrapes, not requests.
    CounterReset,
}

fn default_after_chunks() -> u32 {
    2
}

/// The serde shape of [`FaultKind`]; the bare name `"reset_mid_stream"` is
/// accepted too (see [`FaultKind`]'s `TryFrom`).
#[derive(Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
enum FaultKindWire {
    ResetMidStream {
        #[serde(default = "default_after_chunks")]
        after_chunks: u32,
    },
    HttpStatus(u16),
    MalformedJson,
    NonUtf8,
    Stall,
    SpecFieldsMissing,
    SpecFieldsWrongType,
    CounterReset,
}

impl TryFrom<serde_json::Value> for FaultKind {
    type Error = String;

    fn try_from(v: serde_json::Value) -> Result<Self, String> {
        if v.as_str() == Some("reset_mid_stream") {
            return Ok(FaultKind::ResetMidStream {
                after_chunks: default_after_chunks(),
            });
        }
        let wire: FaultKindWire = serde_json::from_value(v).map_err(|e| e.to_string())?;
        Ok(match wire {
            FaultKindWire::ResetMidStream { after_chunks } => {
                FaultKind::ResetMidStream { after_chunks }
            }
            FaultKindWire::HttpStatus(code) => FaultKind::HttpStatus(code),
            FaultKindWire::MalformedJson => FaultKind::MalformedJson,
            FaultKindWire::NonUtf8 => FaultKind::NonUtf8,
            FaultKindWire::Stall => FaultKind::Stall,
            FaultKindWire::SpecFieldsMissing => FaultKind::SpecFieldsMissing,
            FaultKindWire::SpecFieldsWrongType => FaultKind::SpecFieldsWrongType,
            FaultKindWire::CounterReset => FaultKind::CounterReset,
        })
    }
}

impl FaultKind {
    /// A short stable name (`"http_status_429"`, `"stall"`, …) for logs and tests.
    pub fn name(&self) -> String {
        match self {
            FaultKind::ResetMidStream { .. } => "reset_mid_stream".into(),
            FaultKind::HttpStatus(code) => format!("http_status_{code}"),
            FaultKind::MalformedJson => "malformed_json".into(),
            FaultKind::NonUtf8 => "non_utf8".into(),
            FaultKind::Stall => "stall".into(),
            FaultKind::SpecFieldsMissing => "spec_fields_missing".into(),
            FaultKind::SpecFieldsWrongType => "spec_fields_wrong_type".into(),
            FaultKind::CounterReset => "counter_reset".into(),
        }
    }

    /// True when the request fails (is not counted as completed); false for
    /// the spec-field faults, whose responses are otherwise complete.
    pub fn fails_request(&self) -> bool {
        !matches!(
            self,
            FaultKind::SpecFieldsMissing | FaultKind::SpecFieldsWrongType | FaultKind::CounterReset
        )
    }
}

/// A fault and the requests (or scrapes) it hits.
///
/// Exactly one of `every_nth` and `probability` must be set: build one with
/// [`FaultPlan::every_nth`] or [`FaultPlan::probability`] (the struct is
/// `#[non_exhaustive]`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct FaultPlan {
    /// What goes wrong.
    pub kind: FaultKind,
    /// Hit request (or scrape) number `n` when `n % every_nth == 0`, counting
    /// from 1 in arrival order. Exact with concurrency 1.
    #[serde(default)]
    pub every_nth: Option<u64>,
    /// Hit each request with this probability, drawn deterministically from
    /// the seed, the full prompt and the plan's index (order-independent).
    /// Not allowed for [`FaultKind::CounterReset`].
    #[serde(default)]
    pub probability: Option<f64>,
}

impl FaultPlan {
    /// A plan hitting every `n`-th request (or scrape).
    pub fn every_nth(kind: FaultKind, n: u64) -> Self {
        Self {
            kind,
            every_nth: Some(n),
            probability: None,
        }
    }

    /// A plan hitting each request with probability `p` (hashed from the prompt).
    pub fn probability(kind: FaultKind, p: f64) -> Self {
        Self {
            kind,
            every_nth: None,
            probability: Some(p),
        }
    }

    pub(crate) fn validate(&self, index: usize) -> Result<(), SimError> {
        let bad = |msg: String| Err(SimError::InvalidConfig(format!("faults[{index}]: {msg}")));
        match (self.every_nth, self.probability) {
            (Some(0), _) => return bad("every_nth must be at least 1".into()),
            (Some(_), None) => {}
            (None, Some(p)) if (0.0..=1.0).contains(&p) => {}
            (None, Some(p)) => return bad(format!("probability must be in [0, 1], got {p}")),
            _ => return bad("set exactly one of every_nth and probability".into()),
        }
        if let FaultKind::HttpStatus(code) = self.kind
            && !(400..=599).contains(&code)
        {
            return bad(format!("http_status must be 400..=599, got {code}"));
        }
        if self.kind == FaultKind::CounterReset && self.probability.is_some() {
            return bad("counter_reset selects scrapes and needs every_nth".into());
        }
        Ok(())
    }

    fn hits(&self, index: usize, ordinal: u64, seed: u64, prompt_key: &str) -> bool {
        match (self.every_nth, self.probability) {
            (Some(n), _) => n > 0 && ordinal.is_multiple_of(n),
            (None, Some(p)) => {
                let mut rng =
                    SplitMix64::new(stream_seed(seed, prompt_key, &format!("fault{index}")));
                rng.next_f64() < p
            }
            (None, None) => false,
        }
    }
}

/// The fault (if any) for request number `ordinal` (from 1) with `prompt_key`.
pub(crate) fn request_fault(
    plans: &[FaultPlan],
    ordinal: u64,
    seed: u64,
    prompt_key: &str,
) -> Option<FaultKind> {
    plans
        .iter()
        .enumerate()
        .filter(|(_, p)| p.kind != FaultKind::CounterReset)
        .find(|(i, p)| p.hits(*i, ordinal, seed, prompt_key))
        .map(|(_, p)| p.kind)
}

/// Whether scrape number `ordinal` (from 1) resets the exposed counters.
pub(crate) fn scrape_resets(plans: &[FaultPlan], ordinal: u64) -> bool {
    plans
        .iter()
        .enumerate()
        .filter(|(_, p)| p.kind == FaultKind::CounterReset)
        .any(|(i, p)| p.hits(i, ordinal, 0, ""))
}

/// One faulted request, as logged in [`crate::GroundTruth::faults`].
#[derive(Debug, Clone, PartialEq)]
pub struct FaultTruth {
    /// Arrival number of the request among generation requests, from 1.
    pub ordinal: u64,
    /// The request's first user message (the prompt for `/v1/completions`),
    /// as in [`crate::RequestTruth::conversation`].
    pub conversation: String,
    /// Number of user messages in the request.
    pub turns: u32,
    /// The injected fault.
    pub kind: FaultKind,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names_parse() {
        let plans: Vec<FaultPlan> = serde_json::from_str(
            r#"[{"kind": "reset_mid_stream", "every_nth": 3},
                {"kind": {"reset_mid_stream": {"after_chunks": 5}}, "every_nth": 3},
                {"kind": {"http_status": 429}, "probability": 0.5},
                {"kind": "malformed_json", "every_nth": 1},
                {"kind": "non_utf8", "every_nth": 1},
                {"kind": "stall", "every_nth": 1},
                {"kind": "spec_fields_missing", "every_nth": 1},
                {"kind": "spec_fields_wrong_type", "every_nth": 1},
                {"kind": "counter_reset", "every_nth": 2}]"#,
        )
        .expect("parse");
        assert_eq!(plans[0].kind, FaultKind::ResetMidStream { after_chunks: 2 });
        assert_eq!(plans[1].kind, FaultKind::ResetMidStream { after_chunks: 5 });
        assert_eq!(plans[2].kind, FaultKind::HttpStatus(429));
        for (i, p) in plans.iter().enumerate() {
            p.validate(i).expect("valid");
        }
        assert!(
            serde_json::from_str::<FaultPlan>(r#"{"kind":"stall","every_nth":1,"x":1}"#).is_err()
        );
        assert!(serde_json::from_str::<FaultPlan>(r#"{"kind":"nonsense","every_nth":1}"#).is_err());
    }

    #[test]
    fn validation() {
        let ok = FaultPlan::every_nth(FaultKind::Stall, 2);
        assert!(ok.validate(0).is_ok());
        for bad in [
            FaultPlan::every_nth(FaultKind::Stall, 0),
            FaultPlan::probability(FaultKind::Stall, 1.5),
            FaultPlan {
                kind: FaultKind::Stall,
                every_nth: Some(1),
                probability: Some(0.5),
            },
            FaultPlan {
                kind: FaultKind::Stall,
                every_nth: None,
                probability: None,
            },
            FaultPlan::every_nth(FaultKind::HttpStatus(200), 1),
            FaultPlan::probability(FaultKind::CounterReset, 0.5),
        ] {
            assert!(bad.validate(0).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn selection_is_deterministic_and_ordered() {
        let plans = vec![
            FaultPlan::every_nth(FaultKind::HttpStatus(503), 4),
            FaultPlan::every_nth(FaultKind::Stall, 2),
            FaultPlan::every_nth(FaultKind::CounterReset, 1),
        ];
        let hits: Vec<_> = (1..=8).map(|n| request_fault(&plans, n, 0, "p")).collect();
        assert_eq!(
            hits,
            vec![
                None,
                Some(FaultKind::Stall),
                None,
                Some(FaultKind::HttpStatus(503)),
                None,
                Some(FaultKind::Stall),
                None,
                Some(FaultKind::HttpStatus(503)),
            ]
        );
        assert!(scrape_resets(&plans, 1));
        let p = [FaultPlan::probability(FaultKind::NonUtf8, 0.3)];
        let keys: Vec<String> = (0..2000).map(|i| format!("prompt {i}")).collect();
        let a: Vec<_> = keys.iter().map(|k| request_fault(&p, 1, 7, k)).collect();
        let b: Vec<_> = keys.iter().map(|k| request_fault(&p, 99, 7, k)).collect();
        assert_eq!(a, b, "hashed selection ignores arrival order");
        let rate = a.iter().filter(|f| f.is_some()).count() as f64 / 2000.0;
        assert!((0.25..0.35).contains(&rate), "{rate}");
    }
}
