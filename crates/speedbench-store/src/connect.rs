//! Opening a store: object_store's S3, GCS and Azure clients configured
//! from the standard environment, their requests sent by speedbench-http.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use object_store::ObjectStore;
use object_store::aws::AmazonS3Builder;
use object_store::azure::MicrosoftAzureBuilder;
use object_store::client::{
    ClientConfigKey, ClientOptions as StoreClientOptions, HttpClient, HttpConnector, HttpError,
    HttpErrorKind, HttpRequest, HttpRequestBody, HttpResponse, HttpResponseBody, HttpService,
};
use object_store::gcp::GoogleCloudStorageBuilder;

use crate::{Scheme, StoreError, StoreUrl};

/// How long a store request may wait for its response head.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(60);

/// What [`open`] takes besides the URL.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct StoreOptions {
    /// TLS and connection options of the HTTP client (extra CA roots for a
    /// private endpoint, source addresses).
    pub http: speedbench_http::ClientOptions,
    /// Settings applied over the environment's, as object_store names them
    /// (`aws_access_key_id`, `aws_endpoint`, `aws_allow_http`,
    /// `google_service_account`, `azure_storage_account_key`, ...).
    pub config: Vec<(String, String)>,
}

impl StoreOptions {
    /// Adds one setting over the environment's ([`StoreOptions::config`]).
    pub fn with_config(mut self, key: &str, value: &str) -> StoreOptions {
        self.config.push((key.to_string(), value.to_string()));
        self
    }
}

/// A client for the store `url` names, configured from the standard
/// environment variables of its kind ([`Scheme::credential_env`]; for S3
/// also `AWS_ENDPOINT_URL` for an S3-compatible server and
/// `AWS_ALLOW_HTTP=true` to let it be plain HTTP).
pub fn open(url: &StoreUrl, options: &StoreOptions) -> Result<Arc<dyn ObjectStore>, StoreError> {
    let connector = SpeedbenchConnector {
        options: options.http.clone(),
    };
    let configure = |source| StoreError::Configure {
        url: url.to_string(),
        source: Box::new(source),
    };
    // The three builders share these steps but no trait.
    macro_rules! configured {
        ($builder:expr) => {{
            let mut builder = $builder;
            for (key, value) in &options.config {
                builder = builder.with_config(key.parse().map_err(configure)?, value);
            }
            Arc::new(
                builder
                    .with_http_connector(connector)
                    .build()
                    .map_err(configure)?,
            )
        }};
    }
    let store: Arc<dyn ObjectStore> = match url.scheme() {
        Scheme::S3 => configured!(AmazonS3Builder::from_env().with_bucket_name(url.bucket())),
        Scheme::Gcs => {
            configured!(GoogleCloudStorageBuilder::from_env().with_bucket_name(url.bucket()))
        }
        Scheme::Azure => {
            configured!(MicrosoftAzureBuilder::from_env().with_container_name(url.bucket()))
        }
    };
    Ok(store)
}

/// object_store's transport on speedbench-http's hyper + rustls client.
#[derive(Debug)]
struct SpeedbenchConnector {
    options: speedbench_http::ClientOptions,
}

impl HttpConnector for SpeedbenchConnector {
    fn connect(&self, options: &StoreClientOptions) -> object_store::Result<HttpClient> {
        let connector = speedbench_http::new_connector(&self.options).map_err(|e| {
            object_store::Error::Generic {
                store: "speedbench-http",
                source: Box::new(e),
            }
        })?;
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector);
        let allow_http = options
            .get_config_value(&ClientConfigKey::AllowHttp)
            .is_some_and(|v| v.eq_ignore_ascii_case("true"));
        Ok(HttpClient::new(HyperService { client, allow_http }))
    }
}

#[derive(Debug)]
struct HyperService {
    client: Client<speedbench_http::Connector, HttpRequestBody>,
    allow_http: bool,
}

#[async_trait]
impl HttpService for HyperService {
    async fn call(&self, req: HttpRequest) -> Result<HttpResponse, HttpError> {
        // Plain HTTP sends the request signature (and, for some stores, a
        // bearer token) in the clear: only when the user allowed it.
        if req.uri().scheme_str() == Some("http") && !self.allow_http {
            return Err(HttpError::new(
                HttpErrorKind::Connect,
                PlainHttpRefused(req.uri().authority().map(|a| a.to_string())),
            ));
        }
        let response = tokio::time::timeout(RESPONSE_TIMEOUT, self.client.request(req))
            .await
            .map_err(|_| HttpError::new(HttpErrorKind::Timeout, ResponseTimeout))?
            .map_err(|e| {
                let kind = if e.is_connect() {
                    HttpErrorKind::Connect
                } else {
                    HttpErrorKind::Request
                };
                HttpError::new(kind, e)
            })?;
        let (parts, body) = response.into_parts();
        let body = body.map_err(|e| {
            let kind = if e.is_incomplete_message() || e.is_closed() {
                HttpErrorKind::Interrupted
            } else {
                HttpErrorKind::Decode
            };
            HttpError::new(kind, e)
        });
        Ok(HttpResponse::from_parts(parts, HttpResponseBody::new(body)))
    }
}

/// An `http://` endpoint without `AWS_ALLOW_HTTP=true` (or its kin).
#[derive(Debug, thiserror::Error)]
#[error(
    "plain-HTTP endpoint {} refused: set AWS_ALLOW_HTTP=true (GOOGLE_/AZURE_ALLOW_HTTP for the others) to use it",
    .0.as_deref().unwrap_or("?")
)]
struct PlainHttpRefused(Option<String>);

#[derive(Debug, thiserror::Error)]
#[error("no response within {RESPONSE_TIMEOUT:?}")]
struct ResponseTimeout;
