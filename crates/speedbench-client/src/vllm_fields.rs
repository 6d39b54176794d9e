//! vLLM's per-request `speculative_decoding` object, read straight from a
//! chunk for the fields the adapter reads ([`crate::spec::from_vllm`]).
//!
//! A vLLM server that reports per-request stats sends the object once per
//! request, in the last chunk; building a `serde_json::Value` of it (a
//! string and a tree node per key, nested histograms by draft length the
//! adapter never reads) was ~6% of the client's CPU per request against
//! the simulator. Its other keys are skipped unread.

use std::fmt;

use serde::de::{IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// The keys the vLLM adapter reads, in [`VllmFields`]' order.
const NAMES: [&str; 7] = [
    "num_accepted_draft_tokens",
    "num_draft_tokens",
    "num_spec_steps",
    "num_spec_tokens",
    "acceptance_histogram",
    "per_step_accepted",
    "per_step_drafted",
];

/// The fields of a vLLM `speculative_decoding` object the adapter reads,
/// each as sent (a key given twice: the last, as a JSON object keeps it).
/// Boxed: a response's state and every chunk's fold hold one, seldom
/// filled, and are moved whole.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct VllmFields(Box<[Option<Value>; 7]>);

impl VllmFields {
    /// The fields of `payload`, when it is an object.
    pub(crate) fn of(payload: Value) -> Option<VllmFields> {
        match payload {
            Value::Object(mut map) => {
                Some(VllmFields(Box::new(NAMES.map(|name| map.remove(name)))))
            }
            _ => None,
        }
    }

    /// Where the field called `name` (as bytes) is kept, when it is one
    /// the adapter reads.
    pub(crate) fn slot_of(name: &[u8]) -> Option<usize> {
        NAMES.iter().position(|n| n.as_bytes() == name)
    }

    /// Keeps `value` as the field at `slot` (of [`VllmFields::slot_of`]).
    pub(crate) fn set(&mut self, slot: usize, value: Value) {
        self.0[slot] = Some(value);
    }

    /// The field called `name`, when sent.
    pub(crate) fn get(&self, name: &str) -> Option<&Value> {
        let at = NAMES.iter().position(|n| *n == name)?;
        self.0[at].as_ref()
    }
}

/// A key of the object: one of [`NAMES`], in order, or another.
#[derive(Clone, Copy, Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum Key {
    NumAcceptedDraftTokens,
    NumDraftTokens,
    NumSpecSteps,
    NumSpecTokens,
    AcceptanceHistogram,
    PerStepAccepted,
    PerStepDrafted,
    #[serde(other)]
    Other,
}

impl<'de> Deserialize<'de> for VllmFields {
    /// An object only; any other value is an error (the chunk's general
    /// read decides it).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = VllmFields;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a speculative_decoding object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<VllmFields, A::Error> {
                let mut fields = VllmFields::default();
                while let Some(key) = map.next_key::<Key>()? {
                    match key {
                        Key::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                        key => fields.0[key as usize] = Some(map.next_value()?),
                    }
                }
                Ok(fields)
            }
        }
        d.deserialize_map(Fields)
    }
}

/// A key of `metrics`.
#[derive(Clone, Copy, Deserialize)]
#[serde(field_identifier, rename_all = "snake_case")]
enum MetricsKey {
    SpeculativeDecoding,
    #[serde(other)]
    Other,
}

/// A top-level `metrics` object: its `speculative_decoding` member, when an
/// object (the last, when given twice).
pub(crate) struct MetricsSummary(pub Option<VllmFields>);

impl<'de> Deserialize<'de> for MetricsSummary {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = MetricsSummary;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a metrics object")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MetricsSummary, A::Error> {
                let mut summary = None;
                while let Some(key) = map.next_key::<MetricsKey>()? {
                    match key {
                        MetricsKey::SpeculativeDecoding => summary = map.next_value()?,
                        MetricsKey::Other => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                }
                Ok(MetricsSummary(summary))
            }
        }
        d.deserialize_map(Members)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read straight from the text or taken from a `Value` of it: the same
    /// fields, the last of a key given twice, the others dropped.
    #[test]
    fn the_fields_read_from_text_are_the_object_s() {
        let text = r#"{"num_spec_steps":3,"acceptance_histogram_by_draft_length":{"3":[2,1,0,0]},
            "num_draft_tokens":9,"acceptance_histogram":[2,1,0,0],"num_draft_tokens":10,
            "draft_acceptance_rate":0.11,"num_accepted_draft_tokens":null,"per_step_drafted":[3,3,3]}"#;
        let read: VllmFields = serde_json::from_str(text).unwrap();
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(Some(read.clone()), VllmFields::of(value));
        assert_eq!(read.get("num_draft_tokens"), Some(&Value::from(10)));
        assert_eq!(read.get("num_accepted_draft_tokens"), Some(&Value::Null));
        assert_eq!(read.get("num_spec_tokens"), None);
        assert_eq!(read.get("draft_acceptance_rate"), None);
        assert_eq!(VllmFields::of(Value::from(5)), None);
        assert!(serde_json::from_str::<VllmFields>("[1]").is_err());
        let metrics: MetricsSummary = serde_json::from_str(&format!(
            r#"{{"other":{{"speculative_decoding":1}},"speculative_decoding":{text}}}"#
        ))
        .unwrap();
        assert_eq!(metrics.0, Some(read));
        let metrics: MetricsSummary =
            serde_json::from_str(r#"{"speculative_decoding":null}"#).unwrap();
        assert_eq!(metrics.0, None);
    }
}
