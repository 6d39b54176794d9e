//! The three users of the credential check agree: what `redact_json` hides
//! from a run's record, `literal_credential` refuses in a manifest, and
//! what it finds by shape `redact_shapes` scrubs from server text.

use serde_json::json;
use speedbench_credentials::{
    REDACTED, credential_in_json, literal_credential, redact_json, redact_shapes,
};

/// Request fields as users give them to `--extra-inputs`.
const FIELDS: [&str; 6] = [
    r#"{"metadata":{"api_key":"k-1"}}"#,
    r#"{"hf_token":"v-2"}"#,
    r#"{"session":"sk-abcdefghijklmnopqrstuv"}"#,
    r#"{"user":"Bearer t-3"}"#,
    r#"{"temperature":0,"max_tokens":8}"#,
    r#"{"stop":["Human:"],"prompt_cache_key":"c-4"}"#,
];

#[test]
fn what_a_record_hides_a_manifest_refuses_and_the_rest_passes_both() {
    for text in FIELDS {
        let mut value: serde_json::Value = serde_json::from_str(text).unwrap();
        let refused = literal_credential(text).is_some();
        assert_eq!(refused, credential_in_json(&value).is_some(), "{text}");
        let hidden = redact_json(&mut value);
        assert_eq!(refused, !hidden.is_empty(), "{text}");
        let written = value.to_string();
        for secret in &hidden {
            assert!(!written.contains(secret.as_str()), "{text} -> {written}");
        }
        assert_eq!(refused, written.contains(REDACTED), "{text} -> {written}");
    }
}

#[test]
fn a_key_found_by_its_shape_in_a_field_is_scrubbed_from_an_echo() {
    let mut value = json!({"user": "id sk-abcdefghijklmnopqrstuv"});
    let hidden = redact_json(&mut value);
    let echo = format!("error: unknown user {}", hidden[0]);
    assert_eq!(
        redact_shapes(&echo),
        format!("error: unknown user {REDACTED}")
    );
}
