//! Run directories in object storage: S3 (and S3-compatible servers),
//! Google Cloud Storage and Azure Blob Storage, through the
//! [`object_store`] crate.
//!
//! A run still writes into a local directory (its staging copy); this crate
//! moves that directory to a store URL and back:
//!
//! - [`RunUpload`] checks the store before the run (a prefix that holds a
//!   run is refused unless replacing it was asked for; a test object is put
//!   and deleted, so wrong credentials fail before any request is sent),
//!   streams the records file's flushed row groups as the parts of a
//!   multipart upload while the run goes, and uploads the rest when it
//!   ends, `run.json` last (the `upload` module docs give the order and why
//!   an interrupted upload never reads as a complete run);
//! - [`fetch`] copies everything under a URL into a local directory for
//!   `speedbench-runs` to load.
//!
//! Credentials and endpoints come from the standard environment variables
//! of each store ([`Scheme::credential_env`]); none is ever put into a
//! message. Requests go through `speedbench-http` (hyper and rustls with
//! ring), the stack every other request of speedbench uses.
//!
//! ```
//! use speedbench_store::{Scheme, StoreOptions, StoreUrl, open};
//!
//! let url: StoreUrl = "s3://bench-runs/2026-12".parse()?;
//! assert_eq!(url.scheme(), Scheme::S3);
//! assert_eq!(url.join("spec/run.json").to_string(), "s3://bench-runs/2026-12/spec/run.json");
//! // Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; for a MinIO
//! // or Ceph endpoint also AWS_ENDPOINT_URL (and AWS_ALLOW_HTTP). Settings
//! // given here win over the environment's.
//! let options = StoreOptions::default().with_config("aws_region", "eu-west-1");
//! let store = open(&url, &options)?; // no request is sent yet
//! # let _ = store;
//! # Ok::<(), speedbench_store::StoreError>(())
//! ```
//!
//! Fetching runs for a report (with a store to talk to):
//!
//! ```no_run
//! # #[allow(dead_code)]
//! # async fn demo(store: std::sync::Arc<dyn speedbench_store::object_store::ObjectStore>) -> Result<(), speedbench_store::StoreError> {
//! let url: speedbench_store::StoreUrl = "s3://bench-runs/2026-12".parse()?;
//! let fetched = speedbench_store::fetch(&store, &url, std::path::Path::new("/tmp/runs")).await?;
//! println!("{} objects ({} bytes) in {}", fetched.objects, fetched.bytes, fetched.root.display());
//! # Ok(()) }
//! ```
#![doc(test(attr(deny(warnings))))]

mod connect;
mod error;
mod fetch;
mod location;
mod upload;

pub use connect::{StoreOptions, open};
pub use error::StoreError;
pub use fetch::{Fetched, fetch};
pub use location::{Scheme, StoreUrl};
pub use object_store;
pub use upload::{PART_SIZE, POLL_INTERVAL, RunUpload, UploadReport, UploadedObject, check_vacant};
