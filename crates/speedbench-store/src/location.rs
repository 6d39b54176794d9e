//! Store URLs: `s3://bucket/prefix`, `gs://bucket/prefix`,
//! `az://container/prefix`, told apart from local paths.

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use object_store::path::Path as ObjectPath;

use crate::StoreError;

/// The kind of object store a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Scheme {
    /// Amazon S3 and S3-compatible stores (`s3://`, `s3a://`).
    S3,
    /// Google Cloud Storage (`gs://`).
    Gcs,
    /// Azure Blob Storage (`az://`, `azure://`).
    Azure,
}

impl Scheme {
    /// The environment variables this kind of store takes its credentials
    /// and endpoint from (object_store's `from_env` names).
    pub fn credential_env(self) -> &'static str {
        match self {
            Scheme::S3 => {
                "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (AWS_SESSION_TOKEN, AWS_REGION, \
                 AWS_ENDPOINT_URL)"
            }
            Scheme::Gcs => "GOOGLE_SERVICE_ACCOUNT (or GOOGLE_APPLICATION_CREDENTIALS)",
            Scheme::Azure => "AZURE_STORAGE_ACCOUNT_NAME / AZURE_STORAGE_ACCOUNT_KEY",
        }
    }

    fn of(scheme: &str) -> Option<Scheme> {
        match scheme {
            "s3" | "s3a" => Some(Scheme::S3),
            "gs" => Some(Scheme::Gcs),
            "az" | "azure" => Some(Scheme::Azure),
            _ => None,
        }
    }
}

/// A place in an object store: a bucket (container) and a prefix inside it.
///
/// ```
/// use speedbench_store::{Scheme, StoreUrl};
///
/// let url: StoreUrl = "s3://bench-runs/2026-12/spec/".parse()?;
/// assert_eq!(url.scheme(), Scheme::S3);
/// assert_eq!(url.bucket(), "bench-runs");
/// assert_eq!(url.prefix().as_ref(), "2026-12/spec");
/// assert_eq!(url.join("records.parquet").to_string(), "s3://bench-runs/2026-12/spec/records.parquet");
/// // A local path is not a store URL.
/// assert!(StoreUrl::from_path("runs/spec".as_ref()).is_none());
/// # Ok::<(), speedbench_store::StoreError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StoreUrl {
    scheme: Scheme,
    scheme_text: String,
    bucket: String,
    prefix: ObjectPath,
}

impl StoreUrl {
    /// The URL in `path`, when it is one: `Some(Err)` for text that has a
    /// `scheme://` this crate does not address (so `http://...` is refused
    /// rather than made into a local directory named `http:`), `None` for
    /// a local path.
    pub fn from_path(path: &Path) -> Option<Result<StoreUrl, StoreError>> {
        let text = path.to_str()?;
        text.contains("://").then(|| text.parse())
    }

    /// The kind of store.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The bucket (S3, GCS) or container (Azure).
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The prefix inside the bucket, without leading or trailing `/`.
    pub fn prefix(&self) -> &ObjectPath {
        &self.prefix
    }

    /// The URL of `name` under this prefix (`name` may hold `/`).
    pub fn join(&self, name: &str) -> StoreUrl {
        let mut prefix = self.prefix.clone();
        for part in name.split('/').filter(|p| !p.is_empty()) {
            prefix = prefix.join(part);
        }
        StoreUrl {
            prefix,
            ..self.clone()
        }
    }

    /// The URL of an object given by its full path in the bucket.
    pub(crate) fn of_object(&self, location: &ObjectPath) -> StoreUrl {
        StoreUrl {
            prefix: location.clone(),
            ..self.clone()
        }
    }

    /// The last segment of the prefix (`spec` for `s3://b/runs/spec`), or
    /// the bucket when the prefix is empty.
    pub fn last_segment(&self) -> &str {
        self.prefix
            .as_ref()
            .rsplit('/')
            .next()
            .filter(|s| !s.is_empty())
            .unwrap_or(&self.bucket)
    }
}

impl FromStr for StoreUrl {
    type Err = StoreError;

    fn from_str(text: &str) -> Result<StoreUrl, StoreError> {
        // A URL with user:password@ in it is echoed without them.
        let bad = |message: &str| StoreError::BadUrl {
            url: speedbench_record::redact_url(text),
            message: message.to_string(),
        };
        let (scheme_text, rest) = text
            .split_once("://")
            .ok_or_else(|| bad("not a URL (expected s3://, gs:// or az://)"))?;
        let scheme = Scheme::of(&scheme_text.to_ascii_lowercase()).ok_or_else(|| {
            bad("unsupported scheme: runs go to s3:// (and S3-compatible stores), gs:// or az://, or to a local directory")
        })?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(bad("no bucket after the scheme"));
        }
        if bucket.contains(['?', '#', '@']) {
            return Err(bad(
                "the bucket may not hold '?', '#' or '@' (credentials and options come from the environment)",
            ));
        }
        let prefix = ObjectPath::parse(prefix.trim_matches('/'))
            .map_err(|e| bad(&format!("bad prefix: {e}")))?;
        Ok(StoreUrl {
            scheme,
            scheme_text: scheme_text.to_ascii_lowercase(),
            bucket: bucket.to_string(),
            prefix,
        })
    }
}

impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme_text, self.bucket)?;
        if !self.prefix.as_ref().is_empty() {
            write!(f, "/{}", self.prefix)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_scheme_and_keeps_the_prefix() {
        let url: StoreUrl = "gs://b/a/b/".parse().unwrap();
        assert_eq!((url.scheme(), url.bucket()), (Scheme::Gcs, "b"));
        assert_eq!(url.prefix().as_ref(), "a/b");
        assert_eq!(url.to_string(), "gs://b/a/b");
        let url: StoreUrl = "az://container".parse().unwrap();
        assert_eq!(url.scheme(), Scheme::Azure);
        assert_eq!(url.prefix().as_ref(), "");
        assert_eq!(url.last_segment(), "container");
        assert_eq!(url.to_string(), "az://container");
        let url: StoreUrl = "S3A://b/x".parse().unwrap();
        assert_eq!(url.scheme(), Scheme::S3);
        assert_eq!(
            url.join("shard-1/run.json").to_string(),
            "s3a://b/x/shard-1/run.json"
        );
        assert_eq!(url.last_segment(), "x");
    }

    #[test]
    fn refuses_what_it_cannot_address() {
        for (text, why) in [
            ("http://host/x", "unsupported scheme"),
            ("s3:///x", "no bucket"),
            ("s3://b/a/../b", "bad prefix"),
        ] {
            let e = text.parse::<StoreUrl>().unwrap_err().to_string();
            assert!(e.contains(why) && e.starts_with(text), "{text}: {e}");
        }
        let e = "s3://key:secret@b/x"
            .parse::<StoreUrl>()
            .unwrap_err()
            .to_string();
        assert!(e.contains("may not hold") && !e.contains("secret"), "{e}");
        assert!(
            StoreUrl::from_path(Path::new("http://x/y"))
                .unwrap()
                .is_err()
        );
        assert!(StoreUrl::from_path(Path::new("/tmp/runs")).is_none());
    }
}
