//! Removing Hub tokens from the prepare step's output.

use crate::hub::HubConfig;

/// Removes secrets from the child's output before it is logged or quoted.
#[derive(Clone)]
pub(crate) struct Redactor {
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Redactor({} secrets)", self.secrets.len())
    }
}

impl Redactor {
    /// Redacts the given values, and anything shaped like a credential
    /// (`speedbench_credentials::shapes`: Hub tokens, `Bearer` tokens, ...).
    pub(crate) fn new(secrets: impl IntoIterator<Item = String>) -> Redactor {
        let mut secrets: Vec<String> = secrets
            .into_iter()
            .map(|s| s.trim().to_string())
            .filter(|s| s.len() >= 4)
            .collect();
        // Longest first, so a secret containing another is removed whole.
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    /// The token speedbench uses and the one in `HF_TOKEN`.
    pub(super) fn for_hub(hub: &HubConfig) -> Redactor {
        Redactor::new(
            hub.token
                .iter()
                .map(|t| t.expose().to_string())
                .chain(std::env::var("HF_TOKEN").ok()),
        )
    }

    /// `line` with every secret replaced by `<redacted>`.
    pub(crate) fn redact(&self, line: &str) -> String {
        let mut out = line.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), "<redacted>");
            }
        }
        // Hub tokens and every other credential shape, as the client scrubs them.
        speedbench_credentials::redact_shapes(&out).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_redacted() {
        let r = Redactor::new(["hf_good_tokenSECRET123".to_string(), "".to_string()]);
        assert_eq!(
            r.redact("401 for token hf_good_tokenSECRET123 at https://x"),
            "401 for token <redacted> at https://x"
        );
        let real_shape = format!("hf_{}", "AbCdEfGhIjKlMnOpQrStUvWxYz01234567");
        assert_eq!(
            r.redact(&format!("Authorization: Bearer {real_shape}.")),
            "Authorization: Bearer <redacted>"
        );
        assert_eq!(
            r.redact(&format!("token {real_shape} refused")),
            "token <redacted> refused"
        );
        // Ordinary identifiers stay.
        assert_eq!(
            r.redact("huggingface_hub.hf_hub_download(hf_token=None)"),
            "huggingface_hub.hf_hub_download(hf_token=None)"
        );
    }
}
