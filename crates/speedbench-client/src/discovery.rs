//! Questions asked of a server before a run: is it up, what does it serve.

use std::time::Duration;

use hyper::header::{AUTHORIZATION, HeaderName, HeaderValue};
use serde_json::Value;
use speedbench_http::{ClientOptions, HttpClient, get, new_client};

use crate::error::ClientError;
use crate::target::{ApiKey, BaseUrl};

pub(crate) fn control_client(extra_roots_pem: &[Vec<u8>]) -> Result<HttpClient, ClientError> {
    new_client(&ClientOptions {
        max_idle_per_host: 1,
        extra_roots_pem: extra_roots_pem.to_vec(),
        ..Default::default()
    })
    .map_err(|e| ClientError::Tls(e.to_string()))
}

pub(crate) fn auth_headers(api_key: Option<&ApiKey>) -> Vec<(HeaderName, HeaderValue)> {
    api_key
        .and_then(|key| HeaderValue::from_str(&format!("Bearer {}", key.expose())).ok())
        .map(|mut v| {
            v.set_sensitive(true);
            vec![(AUTHORIZATION, v)]
        })
        .unwrap_or_default()
}

/// The first model id the server lists at `GET /v1/models`.
pub async fn discover_model(
    base_url: &BaseUrl,
    api_key: Option<&ApiKey>,
) -> Result<String, ClientError> {
    discover_model_with_roots(base_url, api_key, &[]).await
}

/// Like [`discover_model`], also trusting `extra_roots_pem` (PEM bundles, as
/// in [`crate::Target::extra_roots_pem`]) for HTTPS.
pub async fn discover_model_with_roots(
    base_url: &BaseUrl,
    api_key: Option<&ApiKey>,
    extra_roots_pem: &[Vec<u8>],
) -> Result<String, ClientError> {
    let url = base_url.join("/v1/models");
    let failed = |message: String| ClientError::Discovery {
        url: url.clone(),
        message,
    };
    let client = control_client(extra_roots_pem)?;
    let resp = get(
        &client,
        &url,
        &auth_headers(api_key),
        Duration::from_secs(10),
    )
    .await
    .map_err(|e| failed(e.to_string()))?;
    if resp.status != 200 {
        return Err(failed(format!(
            "HTTP {}; pass --model explicitly",
            resp.status
        )));
    }
    let v: Value =
        serde_json::from_slice(&resp.body).map_err(|e| failed(format!("not JSON: {e}")))?;
    v.pointer("/data/0/id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| failed("the list holds no model id; pass --model explicitly".into()))
}

/// Polls `GET /health` until it answers 200 or `timeout` passes.
pub async fn wait_for_health(base_url: &BaseUrl, timeout: Duration) -> Result<(), ClientError> {
    let url = base_url.join("/health");
    let client = control_client(&[])?;
    let deadline = tokio::time::Instant::now() + timeout;
    let mut last = String::from("no attempt");
    while tokio::time::Instant::now() < deadline {
        match get(&client, &url, &[], Duration::from_secs(2)).await {
            Ok(resp) if resp.status == 200 => return Ok(()),
            Ok(resp) => last = format!("HTTP {}", resp.status),
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Err(ClientError::Discovery {
        url,
        message: format!("not healthy within {timeout:?} (last: {last})"),
    })
}
