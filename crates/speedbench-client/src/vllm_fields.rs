//! vLLM's per-request `speculative_decoding` object: the fields the adapter
//! reads ([`crate::spec::from_vllm`]), read straight from a chunk
//! ([`crate::chunk_scan`]) or taken from a `Value`.
//!
//! A vLLM server that reports per-request stats sends the object once per
//! request, in the last chunk; building a `serde_json::Value` of it (a
//! string and a tree node per key, nested histograms by draft length the
//! adapter never reads) was ~6% of the client's CPU per request against
//! the simulator. Its other keys are skipped unread.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fields_are_the_object_s_that_the_adapter_reads() {
        let value: Value = serde_json::from_str(
            r#"{"num_spec_steps":3,"num_draft_tokens":9,"num_draft_tokens":10,
            "draft_acceptance_rate":0.11,"num_accepted_draft_tokens":null}"#,
        )
        .unwrap();
        let fields = VllmFields::of(value).unwrap();
        assert_eq!(fields.get("num_draft_tokens"), Some(&Value::from(10)));
        assert_eq!(fields.get("num_accepted_draft_tokens"), Some(&Value::Null));
        assert_eq!(fields.get("num_spec_tokens"), None);
        assert_eq!(fields.get("draft_acceptance_rate"), None);
        assert_eq!(VllmFields::of(Value::from(5)), None);
        let mut set = VllmFields::default();
        set.set(
            VllmFields::slot_of(b"num_spec_steps").unwrap(),
            Value::from(3),
        );
        assert_eq!(set.get("num_spec_steps"), Some(&Value::from(3)));
        assert_eq!(VllmFields::slot_of(b"draft_acceptance_rate"), None);
    }
}
