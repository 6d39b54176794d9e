//! Where the Hub is, where its cache lives and which token to send, read
//! from the environment as `huggingface_hub` reads it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper::header::HeaderValue;

/// The default Hub endpoint.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// A Hub access token. Its `Debug` output is redacted, and it has no
/// `Display`: it cannot end up in a log line or an error by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct HubToken(String);

impl HubToken {
    /// Wraps a token.
    pub fn new(token: impl Into<String>) -> HubToken {
        HubToken(token.into())
    }

    /// The token text, for the prepare step's environment and for redaction
    /// only; never formatted into a message.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    pub(super) fn header(&self) -> Option<HeaderValue> {
        let mut v = HeaderValue::from_str(&format!("Bearer {}", self.0)).ok()?;
        v.set_sensitive(true);
        Some(v)
    }
}

impl std::fmt::Debug for HubToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HubToken(<redacted>)")
    }
}

/// How to reach the Hub and where its cache lives.
#[derive(Debug, Clone)]
pub struct HubConfig {
    /// Base URL (`HF_ENDPOINT`), without a trailing `/`.
    pub endpoint: String,
    /// The token, if one was found.
    pub token: Option<HubToken>,
    /// Where the token was looked for, for messages (`$HF_TOKEN`, then the file).
    pub token_search: String,
    /// `HF_HOME` (default `$XDG_CACHE_HOME/huggingface` or
    /// `~/.cache/huggingface`), passed on to the upstream prepare step.
    pub home: PathBuf,
    /// The Hub cache (`HF_HUB_CACHE`, else `$HF_HOME/hub`).
    pub cache_dir: PathBuf,
    /// `HF_HUB_OFFLINE`: never touch the network, use the cache only.
    pub offline: bool,
    /// Deadline of one API call (revision, tree).
    pub api_timeout: Duration,
    /// Deadline of the gated-access preflight.
    pub gate_timeout: Duration,
    /// Longest silence tolerated in the middle of a download.
    pub read_timeout: Duration,
}

/// `1/ON/YES/TRUE`, case-insensitive, as `huggingface_hub` reads booleans.
fn truthy(v: Option<String>) -> bool {
    v.is_some_and(|v| {
        matches!(
            v.trim().to_ascii_uppercase().as_str(),
            "1" | "ON" | "YES" | "TRUE"
        )
    })
}

impl HubConfig {
    /// Reads the process environment.
    pub fn from_env() -> HubConfig {
        HubConfig::from_vars(|k| std::env::var(k).ok())
    }

    /// Reads configuration through `var` (the environment, or a test's map).
    ///
    /// `HF_ENDPOINT`, `HF_HOME` (default `$XDG_CACHE_HOME/huggingface` or
    /// `~/.cache/huggingface`), `HF_HUB_CACHE` (legacy
    /// `HUGGINGFACE_HUB_CACHE`), `HF_TOKEN`, `HF_TOKEN_PATH`,
    /// `HF_HUB_DISABLE_IMPLICIT_TOKEN`, `HF_HUB_OFFLINE` (or
    /// `TRANSFORMERS_OFFLINE`).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> HubConfig {
        let nonempty = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let endpoint = nonempty("HF_ENDPOINT")
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
            .trim_end_matches('/')
            .to_string();
        let hf_home = nonempty("HF_HOME").map(PathBuf::from).unwrap_or_else(|| {
            let base = nonempty("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| nonempty("HOME").map(|h| Path::new(&h).join(".cache")))
                .unwrap_or_else(|| PathBuf::from(".cache"));
            base.join("huggingface")
        });
        let cache_dir = nonempty("HF_HUB_CACHE")
            .or_else(|| nonempty("HUGGINGFACE_HUB_CACHE"))
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home.join("hub"));
        let token_path = nonempty("HF_TOKEN_PATH")
            .map(PathBuf::from)
            .unwrap_or_else(|| hf_home.join("token"));
        let token = if let Some(t) = nonempty("HF_TOKEN") {
            Some(HubToken::new(t.trim()))
        } else if truthy(var("HF_HUB_DISABLE_IMPLICIT_TOKEN")) {
            None
        } else {
            std::fs::read_to_string(&token_path)
                .ok()
                .map(|t| t.trim().to_string())
                .filter(|t| !t.is_empty())
                .map(HubToken::new)
        };
        HubConfig {
            endpoint,
            token,
            token_search: format!("$HF_TOKEN, then the token file {}", token_path.display()),
            home: hf_home,
            cache_dir,
            offline: truthy(var("HF_HUB_OFFLINE")) || truthy(var("TRANSFORMERS_OFFLINE")),
            api_timeout: Duration::from_secs(30),
            gate_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(60),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn environment_is_read_like_huggingface_hub() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("token"), "hf_fromfile\n").unwrap();
        let home = dir.path().display().to_string();
        let c = HubConfig::from_vars(vars(&[
            ("HF_HOME", &home),
            ("HF_ENDPOINT", "http://127.0.0.1:1/"),
            ("HF_HUB_OFFLINE", "yes"),
        ]));
        assert_eq!(c.endpoint, "http://127.0.0.1:1");
        assert_eq!(c.cache_dir, dir.path().join("hub"));
        assert_eq!(c.token, Some(HubToken::new("hf_fromfile")));
        assert!(c.offline);
        assert!(!format!("{c:?}").contains("hf_fromfile"));
        let c = HubConfig::from_vars(vars(&[
            ("HF_HOME", &home),
            ("HF_TOKEN", "hf_env"),
            ("HF_HUB_CACHE", "/x/hub"),
        ]));
        assert_eq!(c.token, Some(HubToken::new("hf_env")));
        assert_eq!(c.cache_dir, PathBuf::from("/x/hub"));
        assert_eq!(c.endpoint, DEFAULT_ENDPOINT);
        assert!(!c.offline);
        let c = HubConfig::from_vars(vars(&[
            ("HF_HOME", &home),
            ("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"),
        ]));
        assert_eq!(c.token, None);
        let c = HubConfig::from_vars(vars(&[("HOME", "/h")]));
        assert_eq!(c.cache_dir, PathBuf::from("/h/.cache/huggingface/hub"));
    }
}
