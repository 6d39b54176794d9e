//! How much of a run is kept on disk: AIPerf's `--export-level`.
//!
//! - [`ExportLevel::Summary`]: `run.json`, `summary.json` and the server
//!   scrape only; the per-request records are written while the run lasts
//!   (`summary.json` is computed from them) and removed once `summary.json`
//!   is on disk.
//! - [`ExportLevel::Records`] (the default): the above plus
//!   `records.parquet`, one row per request.
//! - [`ExportLevel::Raw`]: the above plus [`RAW_RESPONSES_FILE_NAME`], every
//!   response body as the server sent it (the SSE stream's text or the JSON
//!   body), scrubbed of the run's credentials, one [`RawResponse`] per line.
//!
//! [`RAW_RESPONSES_FILE_NAME`]: speedbench_record::RAW_RESPONSES_FILE_NAME

use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::ClientError;

/// Which files a profile run keeps (AIPerf's `--export-level`).
///
/// ```
/// use speedbench_client::ExportLevel;
/// let level: ExportLevel = "raw".parse()?;
/// assert_eq!(level, ExportLevel::Raw);
/// assert!(level.keeps_records() && level.keeps_raw_responses());
/// assert_eq!(ExportLevel::default(), ExportLevel::Records);
/// assert!(!ExportLevel::Summary.keeps_records());
/// assert!("full".parse::<ExportLevel>().is_err());
/// # Ok::<(), speedbench_client::ClientError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum ExportLevel {
    /// Run-level files only: `run.json`, `summary.json`, the server scrape.
    Summary,
    /// Also `records.parquet`, one row per request.
    #[default]
    Records,
    /// Also every raw response body, scrubbed, in `raw_responses.jsonl`.
    Raw,
}

impl ExportLevel {
    /// Every level, smallest first.
    pub const ALL: [ExportLevel; 3] =
        [ExportLevel::Summary, ExportLevel::Records, ExportLevel::Raw];

    /// The name `--export-level` takes and `run.json`'s `config.export_level` stores.
    pub fn as_str(self) -> &'static str {
        match self {
            ExportLevel::Summary => "summary",
            ExportLevel::Records => "records",
            ExportLevel::Raw => "raw",
        }
    }

    /// True when `records.parquet` stays after the run.
    pub fn keeps_records(self) -> bool {
        self != ExportLevel::Summary
    }

    /// True when the raw response bodies are written.
    pub fn keeps_raw_responses(self) -> bool {
        self == ExportLevel::Raw
    }
}

impl FromStr for ExportLevel {
    type Err = ClientError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ExportLevel::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| ClientError::UnknownExportLevel(s.to_string()))
    }
}

impl fmt::Display for ExportLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One line of `raw_responses.jsonl`: a request's response body as it came
/// off the wire, scrubbed of the run's credentials.
///
/// A request that got no response (refused connection, skipped turn, a
/// request cut off by a stop) has no line; a failed or timed-out one has
/// what arrived before it failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RawResponse {
    /// The run, as in `records.parquet`'s `run_id`.
    pub run_id: String,
    /// The request, as in `records.parquet`'s `request_index` (the join key).
    pub request_index: u64,
    /// Conversation (row) identifier.
    pub conversation_id: String,
    /// Turn within the conversation, from 0.
    pub turn_index: u32,
    /// True for warmup requests.
    pub warmup: bool,
    /// HTTP status of the response.
    pub http_status: Option<u16>,
    /// The response's `Content-Type` (`text/event-stream` for a stream).
    pub content_type: Option<String>,
    /// The body: the SSE stream's text (every `data:` line, blank lines and
    /// comments included) or the whole JSON body. Bytes that are not UTF-8
    /// are replaced by U+FFFD; credentials by `<redacted>`.
    pub body: String,
}

/// Appends JSON lines ([`RawResponse`]s, [`crate::HttpTraceLine`]s) to a
/// file from the recorder thread; after the first write error it writes
/// nothing more and remembers the error.
pub(crate) struct JsonLinesWriter {
    path: PathBuf,
    /// What the lines are, for the error (`raw responses`).
    what: &'static str,
    out: Option<BufWriter<File>>,
    error: Option<String>,
}

impl JsonLinesWriter {
    pub(crate) fn create(path: &Path, what: &'static str) -> Result<JsonLinesWriter, ClientError> {
        let file = File::create(path).map_err(|source| ClientError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Ok(JsonLinesWriter {
            path: path.to_path_buf(),
            what,
            out: Some(BufWriter::with_capacity(256 * 1024, file)),
            error: None,
        })
    }

    fn fail(&mut self, e: impl fmt::Display) {
        self.out = None;
        self.error = Some(format!(
            "{}: cannot write {}: {e} (the lines written before it are kept)",
            self.path.display(),
            self.what
        ));
    }

    pub(crate) fn append(&mut self, line: &impl Serialize) {
        let Some(out) = &mut self.out else { return };
        let written = serde_json::to_writer(&mut *out, line)
            .map_err(std::io::Error::from)
            .and_then(|()| out.write_all(b"\n"));
        if let Err(e) = written {
            self.fail(e);
        }
    }

    pub(crate) fn flush(&mut self) {
        if let Some(out) = &mut self.out
            && let Err(e) = out.flush()
        {
            self.fail(e);
        }
    }

    /// Flushes and closes the file; the first write error, if any.
    pub(crate) fn finish(mut self) -> Option<String> {
        if let Some(out) = self.out.take() {
            match out.into_inner() {
                Ok(file) => {
                    if let Err(e) = file.sync_all() {
                        self.fail(e);
                    }
                }
                Err(e) => self.fail(e.error()),
            }
        }
        self.error
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for level in ExportLevel::ALL {
            assert_eq!(level.as_str().parse::<ExportLevel>().unwrap(), level);
            assert_eq!(level.to_string(), level.as_str());
        }
        let err = "Raw".parse::<ExportLevel>().unwrap_err().to_string();
        assert_eq!(
            err,
            "unknown export level \"Raw\": use summary, records or raw"
        );
    }

    #[test]
    fn lines_are_json_objects_one_per_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("raw.jsonl");
        let mut w = JsonLinesWriter::create(&path, "raw responses").unwrap();
        let raw = |i| RawResponse {
            run_id: "r".into(),
            request_index: i,
            conversation_id: "q".into(),
            turn_index: 0,
            warmup: false,
            http_status: Some(200),
            content_type: Some("text/event-stream".into()),
            body: "data: {\"x\":1}\n\ndata: [DONE]\n\n".into(),
        };
        w.append(&raw(0));
        w.append(&raw(1));
        assert_eq!(w.finish(), None);
        let text = std::fs::read_to_string(&path).unwrap();
        let back: Vec<RawResponse> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(back, vec![raw(0), raw(1)]);
    }
}
