//! Run-level metadata stored beside and inside a records file.

use serde::{Deserialize, Serialize};

/// Run-level facts that hold for every record of a run.
///
/// It is stored twice: as JSON under the Parquet key-value metadata key
/// [`RunManifest::PARQUET_KEY`], and as `run.json` beside the records file,
/// so both Parquet tools and people with `jq` can read it. It must never hold
/// a credential: [`redact_url`] strips user-info and query strings from URLs
/// before they are stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RunManifest {
    /// Unique identifier of the run (also in every record's `run_id`).
    pub run_id: String,
    /// Version of the schema this file follows ([`crate::SCHEMA_VERSION`]).
    pub schema_version: String,
    /// Name and version of the tool that wrote the file.
    pub tool: String,
    /// Server base URL, redacted with [`redact_url`].
    pub server_url: String,
    /// Model name sent in requests.
    pub model: String,
    /// Dataset name, or the input file's stem.
    pub dataset: String,
    /// Wall-clock start of the run, nanoseconds since the Unix epoch.
    pub started_unix_ns: i64,
    /// Wall-clock end of the run; 0 while the run is in progress.
    pub ended_unix_ns: i64,
    /// How the run ended: `completed`, `interrupted` or `failed`
    /// (`running` while it runs). `outcome` in `run.json`: on disk the
    /// key stays as files have always had it; in code a run's status is
    /// `status` wherever it is read.
    #[serde(rename = "outcome")]
    pub status: crate::RunStatus,
    /// Number of records the file holds, set when the file is closed.
    pub record_count: u64,
    /// The run's configuration (load shape, request options), secrets removed.
    pub config: serde_json::Value,
    /// Which share of a sharded run this run is (`profile --shard I/N`);
    /// `None` for a run that is not a shard (and for manifests written
    /// before shards existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<RunShard>,
    /// When the measured phase was planned to start and when it did
    /// (`profile --start-at` / `--start-after-barrier`); `None` when the
    /// run waited for no start barrier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<MeasuredStart>,
}

/// A run's place in a sharded run: shard `index` of `count`, all of them
/// sharing `group`.
///
/// Every shard's [`RunManifest::run_id`] (and every record's `run_id`) is
/// `{group}-shard{index}of{count}`; `speedbench report` merges the shards
/// of one group into one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct RunShard {
    /// The id of the whole sharded run (`profile --run-id`), the same on
    /// every shard.
    pub group: String,
    /// This shard's index, `0..count`.
    pub index: u32,
    /// How many shards the run was split into.
    pub count: u32,
    /// SHA-256 (hex) of every row of the dataset before it was split (ids,
    /// preambles and turns, in order): the same on every shard of one run,
    /// so shards that loaded different rows under one dataset name are
    /// not merged. `None` in manifests written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset_sha256: Option<String>,
}

/// When a run's measured phase was planned to start and when it did.
///
/// `offset_ns` is `measured_unix_ns - planned_unix_ns`, both read from
/// this host's wall clock: how late this process began against the shared
/// start instant (positive: late). It is not a measure of the skew
/// between hosts' clocks, which no process can see alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct MeasuredStart {
    /// What the run waited for: `at` (a wall-clock instant) or
    /// `file:PATH` (a file to appear).
    pub barrier: String,
    /// The planned start, nanoseconds since the Unix epoch: the instant
    /// given, or the barrier file's modification time.
    pub planned_unix_ns: i64,
    /// When the measured phase began on this host's clock.
    pub measured_unix_ns: i64,
    /// `measured_unix_ns - planned_unix_ns`.
    pub offset_ns: i64,
}

impl RunManifest {
    /// Parquet key-value metadata key holding the manifest JSON.
    pub const PARQUET_KEY: &'static str = "speedbench.run";
    /// Conventional file name of the manifest beside the records file.
    pub const FILE_NAME: &'static str = "run.json";
    /// Key of [`RunManifest::config`] holding the per-category row limit
    /// the run's dataset was cut to (`profile --limit`), beside the other
    /// dataset-selection keys (`input_file`, `public_dataset`, `bench`,
    /// `categories`). Absent or `null`: every selected row ran.
    pub const LIMIT_PER_CATEGORY_KEY: &'static str = "limit_per_category";

    /// The per-category row limit the run's dataset was cut to (at most
    /// this many rows of each category, the first in file order), or
    /// `None` when the run was not limited (and for manifests written
    /// before the limit existed).
    ///
    /// ```
    /// use speedbench_record::RunManifest;
    /// let m: RunManifest = serde_json::from_str(
    ///     r#"{"run_id":"r","schema_version":"1","tool":"t","server_url":"u","model":"m",
    ///         "dataset":"d","started_unix_ns":0,"ended_unix_ns":0,"outcome":"completed",
    ///         "record_count":0,"config":{"limit_per_category":8}}"#,
    /// )?;
    /// assert_eq!(m.limit_per_category(), Some(8));
    /// assert_eq!(RunManifest::default().limit_per_category(), None);
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn limit_per_category(&self) -> Option<u64> {
        self.config
            .get(Self::LIMIT_PER_CATEGORY_KEY)
            .and_then(serde_json::Value::as_u64)
    }
}

/// Removes user-info (`user:password@`) and the query string from a URL.
///
/// ```
/// use speedbench_record::redact_url;
/// assert_eq!(redact_url("https://u:secret@host:8000/v1?key=abc"), "https://host:8000/v1");
/// assert_eq!(redact_url("http://127.0.0.1:8000"), "http://127.0.0.1:8000");
/// ```
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((s, r)) => (Some(s), r),
        None => (None, url),
    };
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    match scheme {
        Some(s) => format!("{s}://{host}{path}"),
        None => format!("{host}{path}"),
    }
}
