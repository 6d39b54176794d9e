//! Hub error statuses mapped to actionable errors.

use hyper::StatusCode;

use crate::error::FetchError;
use crate::error::{DatasetError, GateReason};

use super::HubClient;
use super::gate::{HLE_REPO, gate_message};

impl HubClient {
    /// Maps an error status to an actionable error.
    pub(super) fn status_error(
        &self,
        url: &str,
        repo: &str,
        status: StatusCode,
        headers: &hyper::HeaderMap,
        body: &[u8],
    ) -> DatasetError {
        let (code, hub_message) = hub_error(headers, body);
        let has_token = self.config.token.is_some();
        let rejected = hub_message.contains("Invalid credentials")
            || (status == StatusCode::UNAUTHORIZED && has_token && code != "GatedRepo");
        if code == "GatedRepo" || (rejected && repo == HLE_REPO) {
            let reason = if rejected {
                GateReason::Rejected
            } else if status == StatusCode::FORBIDDEN {
                GateReason::NotAuthorized
            } else if has_token {
                GateReason::Rejected
            } else {
                GateReason::NoCredentials
            };
            return DatasetError::from(FetchError::Gated {
                repo: repo.to_string(),
                reason,
                message: gate_message(
                    repo,
                    reason,
                    &self.config.endpoint,
                    &self.config.token_search,
                ),
            });
        }
        let advice = self.advice(repo, status, &code, rejected);
        let message = match (advice.is_empty(), hub_message.is_empty()) {
            (true, _) => hub_message,
            (false, true) => advice,
            (false, false) => format!("{hub_message} ({advice})"),
        };
        DatasetError::from(FetchError::Status {
            url: url.to_string(),
            status: status.as_u16(),
            message,
        })
    }

    /// What to do about a refusal: a rejected token, a repository,
    /// revision or file not found, a rate limit; empty when nothing helps.
    fn advice(&self, repo: &str, status: StatusCode, code: &str, rejected: bool) -> String {
        if rejected {
            return format!(
                "the Hub rejected the token found on this machine ({}): it is expired, revoked or \
                 lacks read scope; run `hf auth login` or set HF_TOKEN",
                self.config.token_search
            );
        }
        match (status.as_u16(), code) {
            (401 | 404, "RepoNotFound") | (404, "") => format!(
                "repository {repo} not found (or private: a private repository needs a token \
                 with access; searched {})",
                self.config.token_search
            ),
            (_, "RevisionNotFound") => format!("revision not found in {repo}"),
            (_, "EntryNotFound") => format!("file not found in {repo}"),
            (429, _) => "rate limited by the Hub; wait and retry".to_string(),
            _ => String::new(),
        }
    }
}

/// The Hub's error code (`x-error-code`) and message (`x-error-message`,
/// else the body's `error`, else the body's first 200 bytes).
fn hub_error(headers: &hyper::HeaderMap, body: &[u8]) -> (String, String) {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let code = header("x-error-code").unwrap_or_default();
    let message = header("x-error-message")
        .or_else(|| {
            serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v.get("error")?.as_str().map(str::to_string))
        })
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
    (code, message)
}
