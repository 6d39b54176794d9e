//! Values shaped like credentials, whoever they belong to: found by their
//! form alone, in any text.

use std::borrow::Cow;
use std::ops::Range;

use crate::REDACTED;

/// Shortest body after a well-known key prefix: `sk-short` is a word.
const MIN_KEY_BODY: usize = 16;

/// Prefixes of well-known key formats: OpenAI and compatible servers,
/// Hugging Face, GitHub (classic, OAuth, app, refresh, fine-grained),
/// GitLab, Slack, NVIDIA NGC. Matched in either case.
const KEY_PREFIXES: [&str; 13] = [
    "sk-",
    "hf_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "nvapi-",
];

/// Where in `text` a credential-shaped value sits, in order, without
/// overlap: the token after `Bearer ` (any case), the user:password after
/// `Basic `, keys with a well-known prefix and at least 16 characters
/// after it, AWS access key ids (`AKIA`/`ASIA` and 16 more) and JWTs
/// (three base64url parts, the first `eyJ`).
///
/// ```
/// use speedbench_credentials::shapes;
/// let text = "Bearer abc and sk-0123456789abcdefXYZ";
/// let found: Vec<&str> = shapes(text).into_iter().map(|r| &text[r]).collect();
/// assert_eq!(found, ["abc", "sk-0123456789abcdefXYZ"]);
/// ```
pub fn shapes(text: &str) -> Vec<Range<usize>> {
    let bytes = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let boundary = i == 0 || !bytes[i - 1].is_ascii_alphanumeric();
        if let Some(range) = boundary.then(|| shape_at(bytes, i)).flatten() {
            i = range.end.max(i + 1);
            found.push(range);
        } else {
            i += 1;
        }
    }
    found
}

/// Whether `text` holds anything [`shapes`] finds.
pub fn has_shape(text: &str) -> bool {
    !shapes(text).is_empty()
}

/// `text` with everything [`shapes`] finds replaced by [`REDACTED`];
/// borrowed when nothing was. Redacting twice changes nothing.
pub fn redact_shapes(text: &str) -> Cow<'_, str> {
    let found = shapes(text);
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for range in found {
        out.push_str(&text[last..range.start]);
        out.push_str(REDACTED);
        last = range.end;
    }
    out.push_str(&text[last..]);
    Cow::Owned(out)
}

/// The credential starting at `i` (a word boundary), if one does.
fn shape_at(bytes: &[u8], i: usize) -> Option<Range<usize>> {
    let starts = |prefix: &[u8]| {
        bytes
            .get(i..i + prefix.len())
            .is_some_and(|b| b.eq_ignore_ascii_case(prefix))
    };
    match bytes[i] {
        b'b' | b'B' if starts(b"bearer ") => scheme_token(bytes, i + 7, |t| !t.is_empty()),
        b'b' | b'B' if starts(b"basic ") => scheme_token(bytes, i + 6, is_basic_credentials),
        b'A' if starts(b"AKIA") || starts(b"ASIA") => aws_key_id(bytes, i),
        b'e' if bytes[i..].starts_with(b"eyJ") => jwt(bytes, i),
        // The first byte rules out most prefixes before a slice is
        // compared (this runs at every word of every text scrubbed).
        first => KEY_PREFIXES
            .iter()
            .find(|p| p.as_bytes()[0] == first.to_ascii_lowercase() && starts(p.as_bytes()))
            .and_then(|p| prefixed_key(bytes, i, p.len())),
    }
}

/// Characters of a bearer token (RFC 6750 `b64token`).
fn is_token_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'=')
}

/// The token after an auth scheme's name (spaces skipped), when `accept`
/// takes it. `<redacted>` is not a token: scrubbing twice is a no-op.
fn scheme_token(bytes: &[u8], after: usize, accept: fn(&[u8]) -> bool) -> Option<Range<usize>> {
    let start = after + bytes[after..].iter().take_while(|&&b| b == b' ').count();
    let len = bytes[start..]
        .iter()
        .take_while(|&&b| is_token_char(b))
        .count();
    accept(&bytes[start..start + len]).then_some(start..start + len)
}

/// `Basic` credentials: base64 of `user:password` (so "Basic
/// authentication failed" keeps its words).
fn is_basic_credentials(token: &[u8]) -> bool {
    token.len() >= 8
        && token.len().is_multiple_of(4)
        && base64_decode(token).is_some_and(|d| d.contains(&b':'))
}

/// Standard base64 (with padding), or `None` when `text` is not that.
fn base64_decode(text: &[u8]) -> Option<Vec<u8>> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    for chunk in text.chunks(4) {
        let pad = chunk.iter().rev().take_while(|&&c| c == b'=').count();
        if chunk.len() != 4 || pad > 2 {
            return None;
        }
        let mut n: u32 = 0;
        for &c in &chunk[..4 - pad] {
            n = (n << 6) | u32::from(value(c)?);
        }
        n <<= 6 * pad as u32;
        out.extend_from_slice(&n.to_be_bytes()[1..4 - pad]);
    }
    Some(out)
}

/// A key with a well-known prefix: at least [`MIN_KEY_BODY`] characters of
/// `[A-Za-z0-9_-]` after it.
fn prefixed_key(bytes: &[u8], i: usize, prefix: usize) -> Option<Range<usize>> {
    let body = i + prefix;
    let len = bytes[body..]
        .iter()
        .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        .count();
    (len >= MIN_KEY_BODY).then_some(i..body + len)
}

/// An AWS access key id: `AKIA` or `ASIA` and 16 uppercase letters or
/// digits, then no more.
fn aws_key_id(bytes: &[u8], i: usize) -> Option<Range<usize>> {
    let end = i + 20;
    let id = bytes.get(i + 4..end)?;
    let whole = id
        .iter()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    let ends = bytes.get(end).is_none_or(|b| !b.is_ascii_alphanumeric());
    (whole && ends).then_some(i..end)
}

/// A JWT: `eyJ...` (a base64url JSON header), a dot, a payload, a dot and
/// a signature (empty for an unsigned token), 20 characters at least.
fn jwt(bytes: &[u8], i: usize) -> Option<Range<usize>> {
    let part = |from: usize| {
        bytes[from.min(bytes.len())..]
            .iter()
            .take_while(|&&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            .count()
    };
    let header = part(i);
    let dot1 = i + header;
    if bytes.get(dot1) != Some(&b'.') {
        return None;
    }
    let payload = part(dot1 + 1);
    let dot2 = dot1 + 1 + payload;
    if payload == 0 || bytes.get(dot2) != Some(&b'.') {
        return None;
    }
    let end = dot2 + 1 + part(dot2 + 1);
    (end - i >= 20).then_some(i..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<&str> {
        shapes(text).into_iter().map(|r| &text[r]).collect()
    }

    #[test]
    fn bearer_and_basic_tokens_but_not_the_words() {
        assert_eq!(found("got BEARER   eyJ.x and bearer y"), ["eyJ.x", "y"]);
        assert_eq!(found("Basic dXNlcjpwYXNz"), ["dXNlcjpwYXNz"]);
        assert!(found("Basic authentication failed; Basic realm").is_empty());
        assert!(found("Bearer <redacted>").is_empty());
        assert!(found("a Bearer").is_empty());
    }

    #[test]
    fn keys_by_their_prefixes_and_at_word_starts_only() {
        let keys = [
            "sk-proj-0123456789abcdefgh",
            "SK-0123456789abcdefgh",
            "hf_ABCDEFGHIJKLMNOPQRSTUV",
            "ghp_0123456789abcdefghij",
            "github_pat_11ABCDEFG0123456789",
            "nvapi-0123456789abcdefghij",
            "AKIAIOSFODNN7EXAMPLE",
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc-_def",
        ];
        for key in keys {
            assert_eq!(found(&format!("({key})")), [key]);
        }
        // Every prefix, in either case.
        for prefix in KEY_PREFIXES {
            for prefix in [prefix.to_string(), prefix.to_ascii_uppercase()] {
                let key = format!("{prefix}0123456789abcdefgh");
                assert_eq!(found(&key), [key.as_str()]);
            }
        }
        for text in [
            "task-0123456789abcdefgh",
            "sk-short",
            "AKIAIOSFODNN7EXAMPLEX",
            "eyJhbGciOiJIUzI1NiJ9",
            "eyJ.x",
            "us-east-1",
        ] {
            assert!(found(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn redacting_replaces_each_shape_once_and_borrows_clean_text() {
        assert_eq!(
            redact_shapes("k=sk-0123456789abcdefgh; Bearer t"),
            "k=<redacted>; Bearer <redacted>"
        );
        let clean = redact_shapes("nothing here");
        assert!(matches!(clean, Cow::Borrowed(_)));
        let twice = redact_shapes(&redact_shapes("Bearer t")).into_owned();
        assert_eq!(twice, "Bearer <redacted>");
    }

    #[test]
    fn base64_decodes_what_basic_sends() {
        assert_eq!(base64_decode(b"dXNlcjpwYXNz").unwrap(), b"user:pass");
        assert_eq!(base64_decode(b"YTpi").unwrap(), b"a:b");
        assert_eq!(base64_decode(b"YQ==").unwrap(), b"a");
        assert!(base64_decode(b"a#bc").is_none());
        assert!(base64_decode(b"====").is_none());
        assert!(base64_decode(b"abc").is_none());
    }
}
