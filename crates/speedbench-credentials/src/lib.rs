//! What a credential looks like, in one place.
//!
//! speedbench keeps credentials out of everything it writes: the client
//! scrubs them from what a server sends back, a run's `run.json` hides the
//! request fields that hold one, and `speedbench kube manifest` refuses a
//! literal one (it must come from a Kubernetes Secret). All three ask this
//! crate, so a value one of them treats as a credential is one for all:
//!
//! - [`is_credential_name`]: an environment variable or header *named* like
//!   one (`HF_TKN`, `DB_PWD`, `X-Api-Key`), read word by word;
//! - [`is_credential_field`]: a request field or URL query parameter named
//!   like one (`api_key`, `hf_token`; not `max_tokens`);
//! - [`shapes`]: a value *shaped* like one wherever it appears: `Bearer`
//!   and `Basic` tokens, well-known key prefixes (`sk-`, `hf_`, `ghp_`,
//!   `nvapi-`, ...), AWS access key ids and JWTs;
//! - [`literal_credential`]: any of these inside one free-form value (a
//!   flag, an environment value, a header, a URL, `name:value` or a JSON
//!   object of request fields, at any depth), said without the value;
//! - [`redact_json`]: request fields with their credentials replaced by
//!   [`REDACTED`], and the values taken out (for the scrubber to know).
//!
//! ```
//! use speedbench_credentials::{literal_credential, redact_shapes, is_credential_name};
//!
//! assert!(is_credential_name("HF_TKN") && !is_credential_name("TOKENIZERS_PARALLELISM"));
//! let said = literal_credential(r#"{"metadata":{"api_key":"x1"}}"#).unwrap();
//! assert_eq!(said, "the request field metadata.api_key");
//! assert_eq!(redact_shapes("401: Bearer abc.def"), "401: Bearer <redacted>");
//! ```

mod fields;
mod literal;
mod names;
mod shapes;

pub use fields::{credential_in_json, redact_fields, redact_json};
pub use literal::{header_credential, literal_credential, url_credential};
pub use names::{is_credential_field, is_credential_name};
pub use shapes::{has_shape, redact_shapes, shapes};

/// What a credential is replaced with wherever speedbench hides one.
pub const REDACTED: &str = "<redacted>";
