//! Gated repositories (`cais/hle`): the access preflight and the message
//! that says how to get access.

use crate::error::FetchError;
use crate::error::{DatasetError, GateReason};

use super::HubClient;

/// The only gated source of SPEED-Bench's 14 upstream sources.
pub const HLE_REPO: &str = "cais/hle";

/// The actionable message for a gated repository.
pub fn gate_message(repo: &str, reason: GateReason, endpoint: &str, token_search: &str) -> String {
    let page = format!("{endpoint}/datasets/{repo}");
    let head = match reason {
        GateReason::NoCredentials => format!(
            "SPEED-Bench needs '{repo}', which is gated on Hugging Face, and no Hugging Face \
             credentials were found (searched {token_search})."
        ),
        GateReason::NotAuthorized => format!(
            "SPEED-Bench needs '{repo}', which is gated on Hugging Face. You are authenticated, \
             but this account has not been granted access."
        ),
        GateReason::Rejected => format!(
            "SPEED-Bench needs '{repo}', which is gated on Hugging Face, and Hugging Face rejected \
             the credentials found on this machine ({token_search}). The token is most likely \
             expired, revoked, or lacks read scope."
        ),
    };
    format!(
        "{head}\n  1. Open {page} and accept the terms. Approval is automatic: no reviewer, no \
         waiting period.\n  2. Authenticate: run `hf auth login`, or set HF_TOKEN (in CI, the \
         token of a service account onboarded once by a human).\nAccess is granted to individual \
         users, not organizations. '{repo}' is the only gated source of the 14 and appears in \
         every SPEED-Bench config. On a host without access, import a bundle pre-staged on a \
         connected machine instead."
    )
}

impl HubClient {
    /// credentials here can read a gated repository.
    ///
    /// Without a token this fails at once, without touching the network. In
    /// offline mode it does nothing.
    pub async fn check_gated_access(&self, repo: &str) -> Result<(), DatasetError> {
        if self.config.offline {
            return Ok(());
        }
        if self.config.token.is_none() {
            return Err(DatasetError::from(FetchError::Gated {
                repo: repo.to_string(),
                reason: GateReason::NoCredentials,
                message: gate_message(
                    repo,
                    GateReason::NoCredentials,
                    &self.config.endpoint,
                    &self.config.token_search,
                ),
            }));
        }
        let url = format!("{}/api/datasets/{repo}/auth-check", self.config.endpoint);
        match self.api_get(&url, repo, self.config.gate_timeout).await {
            Ok(_) => Ok(()),
            Err(e @ DatasetError::Fetch(FetchError::Gated { .. })) => Err(e),
            Err(DatasetError::Fetch(FetchError::Status { status: 401, .. })) => {
                Err(DatasetError::from(FetchError::Gated {
                    repo: repo.to_string(),
                    reason: GateReason::Rejected,
                    message: gate_message(
                        repo,
                        GateReason::Rejected,
                        &self.config.endpoint,
                        &self.config.token_search,
                    ),
                }))
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hub::DEFAULT_ENDPOINT;

    #[test]
    fn the_gate_message_says_what_to_do() {
        let m = gate_message(
            HLE_REPO,
            GateReason::NoCredentials,
            DEFAULT_ENDPOINT,
            "$HF_TOKEN",
        );
        assert!(m.contains("https://huggingface.co/datasets/cais/hle"));
        assert!(m.contains("hf auth login") && m.contains("HF_TOKEN"));
    }
}
