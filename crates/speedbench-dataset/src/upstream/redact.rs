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
    /// Redacts the given values, and anything shaped like a Hub token
    /// (`hf_` and 30 or more letters and digits).
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
        redact_token_shapes(&out)
    }
}

fn redact_token_shapes(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut last = 0;
    let mut i = 0;
    while let Some(pos) = line[i..].find("hf_") {
        let start = i + pos;
        let body = start + 3;
        let end = body
            + bytes[body..]
                .iter()
                .take_while(|b| b.is_ascii_alphanumeric())
                .count();
        let boundary = start == 0 || !bytes[start - 1].is_ascii_alphanumeric();
        if boundary && end - body >= 30 {
            out.push_str(&line[last..start]);
            out.push_str("hf_<redacted>");
            last = end;
        }
        i = end.max(body);
    }
    out.push_str(&line[last..]);
    out
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
            "Authorization: Bearer hf_<redacted>."
        );
        // Ordinary identifiers stay.
        assert_eq!(
            r.redact("huggingface_hub.hf_hub_download(hf_token=None)"),
            "huggingface_hub.hf_hub_download(hf_token=None)"
        );
    }
}
