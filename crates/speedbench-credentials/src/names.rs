//! Names that hold credentials: environment variables and headers (broad,
//! word by word) and request fields (narrow: `max_tokens` is not a token).

/// Words that make an environment variable or header name a credential's
/// wherever they stand in it (`AWS_CREDS`, `HF_TKN`, `DB_PWD`, `PASS`).
const WORDS: [&str; 22] = [
    "TOKEN",
    "TKN",
    "KEY",
    "APIKEY",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASS",
    "PWD",
    "PW",
    "AUTH",
    "AUTHORIZATION",
    "AUTHN",
    "CRED",
    "CREDS",
    "CREDENTIAL",
    "CREDENTIALS",
    "COOKIE",
    "SESSION",
    "SIG",
    "SIGNATURE",
];

/// Endings that make a compound word a credential's (`HFTOKEN`,
/// `OPENAIKEY`, `OAUTH`, `DBPASSWORD`).
const ENDINGS: [&str; 6] = ["TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "AUTH"];

/// Whether an environment variable or header name holds a credential: one
/// of its words (split at `_`, `-`, `.`, and lower-to-upper case changes)
/// is a credential word or ends like one. `TOKENIZERS_PARALLELISM` and
/// `MAX_TOKENS` are not; `HF_TKN`, `AWS_CREDS`, `X-Api-Key` are.
///
/// ```
/// use speedbench_credentials::is_credential_name;
/// for name in ["OPENAI_API_KEY", "HF_TKN", "DB_PWD", "PASS", "Authorization", "xAuthToken"] {
///     assert!(is_credential_name(name), "{name}");
/// }
/// for name in ["MAX_TOKENS", "TOKENIZERS_PARALLELISM", "Content-Type", "BYPASS_PROXY"] {
///     assert!(!is_credential_name(name), "{name}");
/// }
/// ```
pub fn is_credential_name(name: &str) -> bool {
    words(name).iter().any(|w| {
        WORDS.contains(&w.as_str()) || ENDINGS.iter().any(|e| w.ends_with(e) && w.len() > e.len())
    })
}

/// `name` split into uppercase words at separators and at each lowercase
/// letter followed by an uppercase one (`xAuthToken` is `X AUTH TOKEN`).
fn words(name: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphanumeric() {
            out.extend((!word.is_empty()).then(|| std::mem::take(&mut word)));
            previous_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && previous_lower {
            out.push(std::mem::take(&mut word));
        }
        previous_lower = c.is_ascii_lowercase();
        word.push(c.to_ascii_uppercase());
    }
    out.extend((!word.is_empty()).then_some(word));
    out
}

/// Request fields and URL query parameters that are credentials, as they are.
const FIELDS: [&str; 25] = [
    "key",
    "apikey",
    "api_key",
    "token",
    "access_token",
    "auth_token",
    "id_token",
    "refresh_token",
    "hf_token",
    "bearer",
    "secret",
    "client_secret",
    "password",
    "passwd",
    "authorization",
    "auth",
    "sig",
    "signature",
    "x_amz_signature",
    "x_amz_security_token",
    "x_api_key",
    "access_key",
    "secret_key",
    "private_key",
    "credentials",
];

/// Endings of request fields that are credentials (`openai_api_key`,
/// `github_token`). `_token` spares the tokenizer's special tokens, which
/// some servers take as request fields.
const FIELD_ENDINGS: [&str; 8] = [
    "_api_key",
    "_apikey",
    "_secret",
    "_password",
    "_token",
    "_access_key",
    "_secret_key",
    "_credentials",
];

/// A tokenizer's special tokens: request fields ending in `_token` that
/// name a piece of text, not a credential.
const SPECIAL_TOKENS: [&str; 7] = [
    "bos_token",
    "eos_token",
    "pad_token",
    "unk_token",
    "sep_token",
    "cls_token",
    "mask_token",
];

/// Whether a request field or URL query parameter holds a credential
/// (case and `-`/`_` ignored). Narrower than [`is_credential_name`]: a
/// request carries `max_tokens`, `prompt_cache_key` and `eos_token`.
///
/// ```
/// use speedbench_credentials::is_credential_field;
/// for name in ["api_key", "API-KEY", "hf_token", "openai_api_key", "client_secret"] {
///     assert!(is_credential_field(name), "{name}");
/// }
/// for name in ["max_tokens", "prompt_cache_key", "eos_token", "temperature"] {
///     assert!(!is_credential_field(name), "{name}");
/// }
/// ```
pub fn is_credential_field(name: &str) -> bool {
    let n = name.trim().to_ascii_lowercase().replace('-', "_");
    FIELDS.contains(&n.as_str())
        || (FIELD_ENDINGS.iter().any(|e| n.ends_with(e)) && !SPECIAL_TOKENS.contains(&n.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_split_into_words_at_separators_and_case_changes() {
        assert_eq!(words("xAuthToken"), ["X", "AUTH", "TOKEN"]);
        assert_eq!(words("X-Api-Key"), ["X", "API", "KEY"]);
        assert_eq!(words("HF_HUB__TOKEN"), ["HF", "HUB", "TOKEN"]);
        assert_eq!(words("OPENAI_API_KEY"), ["OPENAI", "API", "KEY"]);
    }

    #[test]
    fn the_issues_environment_names_are_credentials() {
        for name in [
            "AWS_CREDS",
            "HF_TKN",
            "PASS",
            "DB_PWD",
            "HFTOKEN",
            "OAUTH",
            "Proxy-Authorization",
            "Cookie",
            "X-Amz-Security-Token",
            "GITHUB_PAT_TOKEN",
        ] {
            assert!(is_credential_name(name), "{name}");
        }
        for name in [
            "EXTRA_HEADER",
            "NUM_TOKENS",
            "KEYBOARD",
            "HOME",
            "PASSTHROUGH_MODE",
            "X-Request-Id",
        ] {
            assert!(!is_credential_name(name), "{name}");
        }
    }

    #[test]
    fn request_fields_are_credentials_by_name_only() {
        for name in [
            "token",
            "x-api-key",
            "Authorization",
            "github_token",
            "aws_secret_key",
        ] {
            assert!(is_credential_field(name), "{name}");
        }
        for name in [
            "stop_token_ids",
            "max_completion_tokens",
            "top_k",
            "pad_token",
        ] {
            assert!(!is_credential_field(name), "{name}");
        }
    }
}
