//! Keeping credentials out of everything the client stores or prints.
//!
//! A server or proxy may echo a request's headers back: in a 401 body, in a
//! stream's error object, even in the generated text. [`Secrets`] knows the
//! values the client sends (the API key, every `-H` header value, and the
//! `OPENAI_API_KEY` / `HF_TOKEN` environment values) and replaces them with
//! [`REDACTED`] before a string reaches a record, a log line or an error.
//!
//! A known value is found in every form a server may echo it in: as it is,
//! escaped inside a JSON string (once or twice, `/` as `\/`, every
//! character as `\uXXXX`) and percent-encoded (as `quote`, `quote_plus`
//! and `encodeURIComponent` write it, either case of hex digit, and twice).
//! One automaton holds them all, so every string that leaves the process
//! is read once, however many forms there are. Two strengths:
//! - [`Secrets::scrub`], for error messages, log lines and server-supplied
//!   metadata: every known value of at least [`MIN_SECRET_LEN`] characters,
//!   plus anything shaped like a credential, whoever it belongs to
//!   (`speedbench_credentials::shapes`: `Bearer <token>`, `sk-…`, `hf_…`
//!   and other well-known keys, AWS key ids, JWTs).
//! - [`Secrets::scrub_output`], for generated text: only known values of at
//!   least [`MIN_OUTPUT_SECRET_LEN`] characters, so ordinary text (and the
//!   byte-for-byte lossless comparison of two runs) is left alone.

use std::borrow::Cow;
use std::fmt;

use aho_corasick::{AhoCorasick, MatchKind};
use serde_json::Value;

use crate::target::{ApiKey, Target};

/// What a secret is replaced with (the one word for it wherever speedbench
/// hides a credential).
pub const REDACTED: &str = speedbench_credentials::REDACTED;

/// Shorter known values are not scrubbed from error messages and logs: they
/// would match ordinary words.
pub const MIN_SECRET_LEN: usize = 4;

/// Shorter known values are not scrubbed from generated text, which is
/// compared byte for byte between runs: `-H X-Priority: high` must not turn
/// every "high" a model writes into [`REDACTED`].
pub const MIN_OUTPUT_SECRET_LEN: usize = 8;

/// The credential values one run sends, and the scrubbing of them.
///
/// ```
/// use speedbench_client::Secrets;
/// let s = Secrets::new(["token-abc123".to_string()]);
/// assert_eq!(s.scrub("HTTP 401: bad key token-abc123"), "HTTP 401: bad key <redacted>");
/// assert_eq!(s.scrub("got Bearer eyJhbGciOi.x"), "got Bearer <redacted>");
/// assert_eq!(s.scrub_output("an echo: token-abc123"), "an echo: <redacted>");
/// assert_eq!(s.scrub_output("Bearer is a word here"), "Bearer is a word here");
/// ```
#[derive(Clone, Default)]
pub struct Secrets {
    /// Longest first, so a secret containing another is removed whole.
    values: Vec<String>,
    /// Every form of every value ([`encodings`]), for [`Secrets::scrub`].
    all_forms: Option<AhoCorasick>,
    /// Every form of the values of at least [`MIN_OUTPUT_SECRET_LEN`]
    /// characters, for [`Secrets::scrub_output`].
    output_forms: Option<AhoCorasick>,
}

impl fmt::Debug for Secrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Secrets({} values)", self.values.len())
    }
}

impl Target {
    /// The credential scrubber for everything this target's requests bring back.
    pub fn secrets(&self) -> Secrets {
        Secrets::for_target(self)
    }
}

impl Secrets {
    /// Secrets from explicit values; each value's token after an auth scheme
    /// (`Bearer X`, `Basic X`, `Token X`) counts too, since servers often
    /// quote only the token. Values shorter than [`MIN_SECRET_LEN`] are ignored.
    pub fn new(values: impl IntoIterator<Item = String>) -> Secrets {
        let mut out: Vec<String> = Vec::new();
        for v in values {
            let v = v.trim().to_string();
            if let Some((scheme, token)) = v.split_once(' ')
                && !scheme.is_empty()
                && scheme.chars().all(|c| c.is_ascii_alphabetic())
            {
                out.push(token.trim().to_string());
            }
            out.push(v);
        }
        out.retain(|v| v.chars().count() >= MIN_SECRET_LEN);
        out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        out.dedup();
        let automaton = |min_len: usize| {
            let forms: Vec<String> = out
                .iter()
                .filter(|v| v.chars().count() >= min_len)
                .flat_map(|v| std::iter::once(v.clone()).chain(encodings(v)))
                .collect();
            // Leftmost-longest: a secret holding another goes whole.
            (!forms.is_empty()).then(|| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&forms)
                    .expect("literal patterns of bounded size build")
            })
        };
        Secrets {
            all_forms: automaton(MIN_SECRET_LEN),
            output_forms: automaton(MIN_OUTPUT_SECRET_LEN),
            values: out,
        }
    }

    /// The target's API key, every `-H` header value and every credential
    /// among its request fields (`speedbench_credentials::redact_fields`:
    /// `api_key`, `hf_token`, key-shaped values, at any depth), plus the
    /// `OPENAI_API_KEY` and `HF_TOKEN` environment values when set (they may
    /// be credentials for this server even when not the one sent).
    pub fn for_target(target: &Target) -> Secrets {
        let in_fields = speedbench_credentials::redact_fields(&mut target.extra_body.clone());
        Secrets::from_sources(target.api_key.as_ref(), &target.headers, in_fields)
    }

    /// As [`Secrets::for_target`], from the key and headers themselves (for
    /// requests that carry no request fields: the model list, a scrape).
    pub(crate) fn for_credentials(
        api_key: Option<&ApiKey>,
        headers: &[(String, String)],
    ) -> Secrets {
        Secrets::from_sources(api_key, headers, Vec::new())
    }

    fn from_sources(
        api_key: Option<&ApiKey>,
        headers: &[(String, String)],
        others: Vec<String>,
    ) -> Secrets {
        let key = api_key.map(|k| k.expose().to_string());
        let headers = headers.iter().map(|(_, v)| v.clone());
        let env = ["OPENAI_API_KEY", "HF_TOKEN"]
            .into_iter()
            .filter_map(|name| std::env::var(name).ok());
        Secrets::new(key.into_iter().chain(headers).chain(env).chain(others))
    }

    /// True when no value is known (token shapes are still scrubbed).
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `text` with every known value and every credential-shaped string
    /// replaced by [`REDACTED`]: for error messages, logs and metadata.
    pub fn scrub<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let known = replace_forms(self.all_forms.as_ref(), text);
        match speedbench_credentials::redact_shapes(&known) {
            Cow::Borrowed(_) => known,
            Cow::Owned(s) => Cow::Owned(s),
        }
    }

    /// `text` with only the known values of at least
    /// [`MIN_OUTPUT_SECRET_LEN`] characters replaced: for generated text.
    pub fn scrub_output<'a>(&self, text: &'a str) -> Cow<'a, str> {
        replace_forms(self.output_forms.as_ref(), text)
    }

    /// Scrubs (as [`Secrets::scrub`]) every string in a JSON value, keys included.
    pub fn scrub_json(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                if let Cow::Owned(clean) = self.scrub(s) {
                    *s = clean;
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.scrub_json(v)),
            Value::Object(map) => {
                let dirty: Vec<String> = map
                    .keys()
                    .filter(|k| matches!(self.scrub(k), Cow::Owned(_)))
                    .cloned()
                    .collect();
                for k in dirty {
                    if let Some(v) = map.remove(&k) {
                        map.insert(self.scrub(&k).into_owned(), v);
                    }
                }
                map.values_mut().for_each(|v| self.scrub_json(v));
            }
            _ => {}
        }
    }

    /// `text` scrubbed as [`Secrets::scrub`] does, which finds each known
    /// value in every form a server may echo it in (`encodings`): kept for
    /// raw response bodies, which are JSON or SSE lines of JSON.
    ///
    /// ```
    /// use speedbench_client::Secrets;
    /// let s = Secrets::new(["tok\"quoted\"1".to_string()]);
    /// let body = r#"{"echo": "tok\"quoted\"1"}"#;
    /// assert_eq!(s.scrub_raw(body), r#"{"echo": "<redacted>"}"#);
    /// ```
    pub fn scrub_raw<'a>(&self, text: &'a str) -> Cow<'a, str> {
        self.scrub(text)
    }

    /// Scrubs a string in place (as [`Secrets::scrub`]).
    pub fn scrub_in_place(&self, text: &mut String) {
        if let Cow::Owned(clean) = self.scrub(text) {
            *text = clean;
        }
    }
}

/// `text` with every match of `forms` replaced by [`REDACTED`], borrowed
/// when nothing matched (the common case: one pass, no allocation).
fn replace_forms<'a>(forms: Option<&AhoCorasick>, text: &'a str) -> Cow<'a, str> {
    let Some(forms) = forms else {
        return Cow::Borrowed(text);
    };
    if !forms.is_match(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    forms.replace_all_with(text, &mut out, |_, _, dst| {
        dst.push_str(REDACTED);
        true
    });
    Cow::Owned(out)
}

/// The forms a secret takes when a server echoes it other than as it is:
/// JSON-escaped (serde's), with `/` escaped too, every character as
/// `\uXXXX`, escaped twice; percent-encoded as RFC 3986 (`-._~` kept),
/// Python's `quote` (`/` kept too), `quote_plus` (space as `+`) and
/// JavaScript's `encodeURIComponent` (`!'()*` kept) write it, each with
/// upper- and lowercase hex digits, and each encoded twice (`%252F`).
/// Forms equal to the secret itself are left out (plain scrubbing has it).
pub(crate) fn encodings(secret: &str) -> Vec<String> {
    let json = |s: &str| {
        let quoted = serde_json::to_string(s).unwrap_or_default();
        quoted[1..quoted.len().saturating_sub(1).max(1)].to_string()
    };
    let escaped = json(secret);
    let unicode: String = secret
        .encode_utf16()
        .map(|u| format!("\\u{u:04x}"))
        .collect();
    let mut forms = vec![
        escaped.replace('/', "\\/"),
        json(&escaped),
        json(&escaped.replace('/', "\\/")),
        unicode.clone(),
        unicode.to_uppercase().replace("\\U", "\\u"),
        escaped,
    ];
    let unreserved = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    let percent_forms = [
        percent_encode(secret, unreserved, false),
        percent_encode(secret, |b| unreserved(b) || b == b'/', false),
        percent_encode(secret, unreserved, true),
        percent_encode(secret, |b| unreserved(b) || b"!'()*".contains(&b), false),
    ];
    for percent in percent_forms {
        let twice = percent_encode(&percent, unreserved, false);
        forms.extend([
            lowercase_hex(&twice),
            twice,
            lowercase_hex(&percent),
            percent,
        ]);
    }
    forms.sort();
    forms.dedup();
    forms.retain(|f| f != secret && !f.is_empty());
    // Longest first: a form inside another is replaced after it.
    forms.sort_by_key(|f| std::cmp::Reverse(f.len()));
    forms
}

/// `text` percent-encoded (uppercase hex), the bytes `keep` accepts left as
/// they are, a space as `+` when `plus`.
fn percent_encode(text: &str, keep: impl Fn(u8) -> bool, plus: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if keep(b) {
            out.push(b as char);
        } else if plus && b == b' ' {
            out.push('+');
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `text` with the hex digits of its `%XX` escapes in lowercase.
fn lowercase_hex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('%') {
        out.push_str(&rest[..i]);
        let end = (i + 3).min(rest.len());
        out.push_str(&rest[i..end].to_lowercase());
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::target::BaseUrl;
    use serde_json::json;

    #[test]
    fn raw_bodies_lose_the_key_in_every_encoding() {
        let key = r#"sk-ab/cd"ef\gh+ij=kl"#;
        let s = Secrets::new([key.to_string()]);
        let bodies = [
            // serde's escaping, and `/` escaped as some servers do.
            r#"{"echo": "sk-ab/cd\"ef\\gh+ij=kl"}"#.to_string(),
            r#"{"echo": "sk-ab\/cd\"ef\\gh+ij=kl"}"#.to_string(),
            // JSON inside a JSON string.
            r#"{"echo": "{\"k\": \"sk-ab/cd\\\"ef\\\\gh+ij=kl\"}"}"#.to_string(),
            // Percent-encoded, either case of hex digit.
            "GET /?api-key=sk-ab%2Fcd%22ef%5Cgh%2Bij%3Dkl".to_string(),
            "GET /?api-key=sk-ab%2fcd%22ef%5cgh%2bij%3dkl".to_string(),
            // Every character as \uXXXX.
            format!(
                r#"{{"echo": "{}"}}"#,
                key.encode_utf16()
                    .map(|u| format!("\\u{u:04x}"))
                    .collect::<String>()
            ),
        ];
        for body in bodies {
            let clean = s.scrub_raw(&body);
            assert!(clean.contains(REDACTED), "{body} -> {clean}");
            for needle in ["ab/cd", "ab\\/cd", "ab%2", "\\u0061\\u0062"] {
                assert!(!clean.contains(needle), "{body} -> {clean}");
            }
        }
    }

    #[test]
    fn every_strength_finds_every_encoding() {
        let key = "sk-ab/cd+ef=gh ij";
        let s = Secrets::new([key.to_string()]);
        let echoes = [
            "sk-ab%2Fcd%2Bef%3Dgh%20ij",         // RFC 3986
            "sk-ab%2fcd%2bef%3dgh%20ij",         // lowercase hex
            "sk-ab/cd%2Bef%3Dgh%20ij",           // Python's quote
            "sk-ab%2Fcd%2Bef%3Dgh+ij",           // quote_plus
            "sk-ab%252Fcd%252Bef%253Dgh%2520ij", // encoded twice
            r#"sk-ab\/cd+ef=gh ij"#,             // `/` escaped
        ];
        for echo in echoes {
            let text = format!("said {echo} here");
            assert_eq!(s.scrub(&text), "said <redacted> here", "{echo}");
            assert_eq!(s.scrub_output(&text), "said <redacted> here", "{echo}");
            assert_eq!(s.scrub_raw(&text), "said <redacted> here", "{echo}");
        }
        // Nothing known: borrowed, whatever the text.
        assert!(matches!(
            Secrets::default().scrub_output("sk-ab%2F"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn known_values_and_their_tokens_are_replaced() {
        let s = Secrets::new([
            "sk-local-1".to_string(),
            "Bearer zzSECRET789".to_string(),
            "abc".to_string(),
        ]);
        assert_eq!(
            s.scrub("key sk-local-1, header Bearer zzSECRET789, token zzSECRET789"),
            "key <redacted>, header <redacted>, token <redacted>"
        );
        // Too short to be told from words.
        assert_eq!(s.scrub("abc"), "abc");
        assert!(matches!(s.scrub("nothing here"), Cow::Borrowed(_)));
    }

    #[test]
    fn a_secret_holding_another_is_removed_whole() {
        let s = Secrets::new(["abcd".to_string(), "abcdefgh-long".to_string()]);
        assert_eq!(
            s.scrub("x abcdefgh-long y abcd"),
            "x <redacted> y <redacted>"
        );
    }

    #[test]
    fn credential_shapes_go_even_when_unknown() {
        let s = Secrets::default();
        assert_eq!(
            s.scrub(r#"{"auth":"Bearer eyJ0eXAi.OiJKV1Q-_~+/="} BEARER x"#),
            r#"{"auth":"Bearer <redacted>"} BEARER <redacted>"#
        );
        assert_eq!(
            s.scrub("key sk-proj-0123456789abcdef and hf_0123456789abcdefXYZ"),
            "key <redacted> and <redacted>"
        );
        // Any case of the prefixes, and a key at the very end.
        assert_eq!(
            s.scrub("SK-PROJ-0123456789ABCDEF, Hf_0123456789abcdefXYZ"),
            "<redacted>, <redacted>"
        );
        // Short look-alikes and words that merely contain the prefixes stay.
        assert_eq!(
            s.scrub("sk-learn, task-0123456789abcdefgh, hf_hub"),
            "sk-learn, task-0123456789abcdefgh, hf_hub"
        );
        assert_eq!(s.scrub("Bearer "), "Bearer ");
        // Scrubbing is idempotent.
        let once = s.scrub("Bearer abc").into_owned();
        assert_eq!(s.scrub(&once), once);
    }

    #[test]
    fn generated_text_loses_only_long_known_values() {
        let s = Secrets::new(["high".to_string(), "token-abc123".to_string()]);
        assert_eq!(
            s.scrub_output("high hopes, Bearer words, sk-0123456789abcdefgh, token-abc123"),
            "high hopes, Bearer words, sk-0123456789abcdefgh, <redacted>"
        );
        assert_eq!(s.scrub("high"), "<redacted>");
    }

    #[test]
    fn json_strings_and_keys_are_scrubbed() {
        let s = Secrets::new(["token-abc123".to_string()]);
        let mut v = json!({"a": ["x token-abc123", 1], "token-abc123": {"b": "Bearer q"}});
        s.scrub_json(&mut v);
        assert_eq!(
            v,
            json!({"a": ["x <redacted>", 1], "<redacted>": {"b": "Bearer <redacted>"}})
        );
    }

    #[test]
    fn a_target_knows_its_key_and_header_values() {
        let mut t = Target::new(BaseUrl::parse("h:1").unwrap(), "m");
        t.api_key = Some(ApiKey::new("key-from-flag"));
        t.headers = vec![("X-Token".into(), "hdr-value-1".into())];
        let s = Secrets::for_target(&t);
        assert_eq!(
            s.scrub("key-from-flag hdr-value-1"),
            "<redacted> <redacted>"
        );
        assert!(format!("{s:?}").starts_with("Secrets("));
        assert!(!format!("{s:?}").contains("key-from-flag"));
    }

    #[test]
    fn a_target_knows_the_credentials_among_its_request_fields() {
        let mut t = Target::new(BaseUrl::parse("h:1").unwrap(), "m");
        t.extra_body = json!({
            "metadata": {"api_key": "field/key-42"},
            "hf_token": "hub-t-7",
            "temperature": 0,
            "user": "plain-user",
        })
        .as_object()
        .unwrap()
        .clone();
        let s = Secrets::for_target(&t);
        assert_eq!(
            s.scrub("echo field/key-42 hub-t-7 plain-user"),
            "echo <redacted> <redacted> plain-user"
        );
        // Percent-encoded echoes too (every form of a known value).
        assert_eq!(s.scrub("q=field%2Fkey-42"), "q=<redacted>");
        assert_eq!(
            s.scrub_output("the model said hub-t-7"),
            "the model said hub-t-7",
            "under 8 characters"
        );
        assert_eq!(
            s.scrub_output("the model said field/key-42"),
            "the model said <redacted>"
        );
    }

    #[test]
    fn aws_key_ids_and_jwts_go_by_their_shape() {
        let s = Secrets::default();
        assert_eq!(
            s.scrub("id AKIAIOSFODNN7EXAMPLE jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln"),
            "id <redacted> jwt <redacted>"
        );
    }
}
