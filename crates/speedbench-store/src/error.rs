//! The one error type of this crate.

use std::path::PathBuf;

/// Everything that can go wrong addressing, writing or reading a store.
///
/// Messages name the URL (never a credential) and, for a refusal by the
/// store, the standard environment variables the credentials come from.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The text looks like a URL but is not one this crate can address.
    #[error("{url}: {message}")]
    BadUrl {
        /// The text as given.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// The store client could not be configured (region, endpoint,
    /// credentials settings) from the environment.
    #[error("{url}: cannot configure the object store client: {source}")]
    Configure {
        /// The store URL.
        url: String,
        /// object_store's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// The store refused the credentials or the access.
    #[error(
        "{url}: the object store refused access ({what}); check the credentials in {env} \
         and that they may read and write this bucket"
    )]
    Denied {
        /// The URL of the object refused.
        url: String,
        /// What was being done.
        what: String,
        /// Where the credentials come from, for this kind of store.
        env: &'static str,
        /// object_store's error (the store's answer).
        #[source]
        source: Box<object_store::Error>,
    },
    /// Any other failure of a request to the store.
    #[error("{url}: {what} failed")]
    Request {
        /// The URL of the object.
        url: String,
        /// What was being done.
        what: String,
        /// object_store's error.
        #[source]
        source: Box<object_store::Error>,
    },
    /// The prefix already holds a run and replacing it was not asked for.
    #[error("{url} already holds a run ({file} exists)")]
    Occupied {
        /// The run's URL.
        url: String,
        /// The file found there.
        file: String,
    },
    /// Nothing is stored under the URL.
    #[error("{url}: no object is stored under this URL")]
    Empty {
        /// The URL.
        url: String,
    },
    /// A local file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The local file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The HTTP(S) client could not be built.
    #[error("building the HTTP client for the object store: {0}")]
    Http(#[from] speedbench_http::HttpError),
}

impl StoreError {
    /// Whether the store refused the credentials or the access.
    pub fn is_denied(&self) -> bool {
        matches!(self, StoreError::Denied { .. })
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io { path, source }
    }
}
