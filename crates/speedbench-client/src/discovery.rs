//! Questions asked of a server before a run: is it up, what does it serve.

use std::time::Duration;

use serde_json::Value;
use speedbench_http::{ClientOptions, HttpClient, HttpError, get_capped, new_client};

use crate::detect::PROBE_MAX_BODY;
use crate::error::ClientError;
use crate::secrets::Secrets;
use crate::target::{ApiKey, BaseUrl, request_headers};
use crate::tls_roots::{is_https, with_roots};

/// The client of the questions asked beside a run (models, health,
/// `/metrics`, a tokenizer) of the URLs in `urls`, trusting
/// `extra_roots_pem` for HTTPS. Where none of them is `https://`, no TLS
/// roots are read (`SSL_CERT_FILE`'s bundle, parsed for nothing, was a
/// third of a short run's start-up).
pub(crate) fn control_client<'u>(
    extra_roots_pem: &[Vec<u8>],
    urls: impl IntoIterator<Item = &'u str>,
) -> Result<HttpClient, ClientError> {
    let options = ClientOptions {
        max_idle_per_host: 1,
        ..Default::default()
    };
    let tls = urls.into_iter().any(is_https);
    new_client(&with_roots(options, extra_roots_pem, tls))
        .map_err(|e| ClientError::Tls(e.to_string()))
}

/// The message of a failed fetch of `url`, without `url` when the error
/// already starts with it (the caller names the URL once).
pub(crate) fn fetch_failure(url: &str, e: &HttpError) -> String {
    let text = e.to_string();
    match text.strip_prefix(url).and_then(|t| t.strip_prefix(": ")) {
        Some(rest) => rest.to_string(),
        None => text,
    }
}

/// The first model id the server lists at `GET /v1/models`.
pub async fn discover_model(
    base_url: &BaseUrl,
    api_key: Option<&ApiKey>,
) -> Result<String, ClientError> {
    discover_model_with_headers(base_url, api_key, &[], &[]).await
}

/// Like [`discover_model`], also trusting `extra_roots_pem` (PEM bundles, as
/// in [`crate::Target::extra_roots_pem`]) for HTTPS.
pub async fn discover_model_with_roots(
    base_url: &BaseUrl,
    api_key: Option<&ApiKey>,
    extra_roots_pem: &[Vec<u8>],
) -> Result<String, ClientError> {
    discover_model_with_headers(base_url, api_key, &[], extra_roots_pem).await
}

/// Like [`discover_model_with_roots`], also sending the extra `headers`
/// (as [`crate::Target::headers`]: the `-H` headers go wherever the API key
/// goes). An `Authorization` header together with an API key is refused.
/// The model id and any error are scrubbed of those credentials.
pub async fn discover_model_with_headers(
    base_url: &BaseUrl,
    api_key: Option<&ApiKey>,
    headers: &[(String, String)],
    extra_roots_pem: &[Vec<u8>],
) -> Result<String, ClientError> {
    let url = base_url.join("/v1/models");
    let send = request_headers(api_key, headers)?;
    let secrets = Secrets::for_credentials(api_key, headers);
    let failed_by = |message: String, failure| ClientError::Discovery {
        url: url.clone(),
        message: secrets.scrub(&message).into_owned(),
        failure,
    };
    let failed = |message: String| failed_by(message, None);
    let client = control_client(extra_roots_pem, [url.as_str()])?;
    let resp = get_capped(
        &client,
        &url,
        &send,
        Duration::from_secs(10),
        PROBE_MAX_BODY,
    )
    .await
    .map_err(|e| failed_by(fetch_failure(&url, &e), e.connect_failure()))?;
    if resp.status != 200 {
        return Err(failed(format!(
            "HTTP {}; name the model instead of asking the server",
            resp.status
        )));
    }
    let v: Value =
        serde_json::from_slice(&resp.body).map_err(|e| failed(format!("not JSON: {e}")))?;
    let id = v
        .pointer("/data/0/id")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            failed("the list holds no model id; name the model instead of asking the server".into())
        })?;
    if secrets.scrub(id) != id {
        return Err(failed(
            "the listed model id holds a credential sent with the request; name the model instead"
                .into(),
        ));
    }
    Ok(id.to_string())
}

/// Polls `GET /health` until it answers 200 or `timeout` passes.
pub async fn wait_for_health(base_url: &BaseUrl, timeout: Duration) -> Result<(), ClientError> {
    let url = base_url.join("/health");
    let client = control_client(&[], [url.as_str()])?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::from("no attempt");
    let mut failure = None;
    while tokio::time::Instant::now() < deadline {
        match get_capped(&client, &url, &[], Duration::from_secs(2), PROBE_MAX_BODY).await {
            Ok(resp) if resp.status == 200 => return Ok(()),
            Ok(resp) => (last, failure) = (format!("HTTP {}", resp.status), None),
            Err(e) => (last, failure) = (fetch_failure(&url, &e), e.connect_failure()),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(ClientError::Discovery {
        url,
        message: format!("not healthy within {timeout:?} (last: {last})"),
        failure,
    })
}

#[cfg(test)]
mod tests {

    use super::*;
    use speedbench_http::ConnectFailure;

    #[tokio::test]
    async fn a_refused_model_list_says_refused() {
        // A loopback port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = BaseUrl::parse(&format!("127.0.0.1:{port}")).unwrap();
        match discover_model(&url, None).await {
            Err(ClientError::Discovery { failure, url, .. }) => {
                assert_eq!(failure, Some(ConnectFailure::Refused));
                assert!(url.ends_with("/v1/models"), "{url}");
            }
            other => panic!("{other:?}"),
        }
    }
}
