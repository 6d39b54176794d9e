//! Load, validate and filter the datasets speedbench runs.
//!
//! A dataset is a list of [`Conversation`]s: one per dataset row, each with
//! one or more user turns. Single-turn rows become one request; multi-turn
//! rows become one request per turn, the live assistant reply fed back as
//! history by the client.
//!
//! SPEED-Bench rows are read from JSONL in either of the two shapes found in
//! the wild: resolved rows with `messages: [{role, content}]` (AIPerf's cache
//! and NeMo-Skills' prepare step) or Hub rows with `turns: [string]`. Rows that
//! still hold the upstream placeholder text are rejected, because benchmarking
//! the placeholder would produce numbers about nothing.
//!
//! Registered datasets (see [`registry()`]) come from the Hugging Face Hub:
//! `load_public_dataset` reads the dataset cache
//! (`.cache/speedbench/datasets`, or AIPerf's pre-staged
//! `.cache/aiperf/datasets` for SPEED-Bench), else downloads Parquet files
//! at a pinned revision into the standard Hub cache with `HubClient`,
//! resolving SPEED-Bench placeholder rows from their upstream sources:
//! natively where that can be done exactly (`resolve`), otherwise by
//! running the upstream prepare script, pinned by sha256, through a driver of
//! our own (`upstream`); `Resolver` chooses. `prestage` and `import_bundle`
//! carry resolved rows to air-gapped hosts.
//!
//! [`select`] chooses the rows a run sends: a SPEED-Bench config by name
//! ([`bench_dataset`]), categories ([`CategorySelection`], where `all` means
//! every one) and at most N rows of each category, the first in file order
//! ([`Dataset::limit_per_category`]).
//!
//! # Features
//!
//! - `hub` (default): everything above that touches the network or Python —
//!   the Hub client (`hub`), resolution (`resolve`, `upstream`),
//!   public datasets (`public`) and bundles (`bundle`). Without it the
//!   crate loads, validates and filters JSONL with serde and serde_json only:
//!   no HTTP, TLS or tokio.
//! - `parquet` (enabled by `hub`): `parquet_rows`, Parquet files read as
//!   JSON rows.
//!
//! ```
//! use speedbench_dataset::Dataset;
//!
//! let jsonl = r#"{"question_id":"q1","category":"coding","turns":["Write a sort."]}
//! {"question_id":"q2","category":"math","messages":[{"role":"user","content":"1+1?"},{"role":"user","content":"And 2+2?"}]}
//! "#;
//! let dataset = Dataset::from_jsonl_str("rows.jsonl", jsonl)?;
//! assert_eq!(dataset.conversations.len(), 2);
//! assert_eq!(dataset.turn_count(), 3);
//! let math = dataset.filter_categories(&["math".to_string()])?;
//! assert_eq!(math.conversations[0].turns.len(), 2);
//! # Ok::<(), speedbench_dataset::DatasetError>(())
//! ```
#![doc(test(attr(deny(warnings))))]
#[cfg(feature = "hub")]
pub mod bundle;
mod error;
#[cfg(feature = "hub")]
mod files;
#[cfg(feature = "hub")]
pub mod hub;
mod jsonl;
#[cfg(feature = "parquet")]
pub mod parquet_rows;
#[cfg(feature = "hub")]
mod pins;
#[cfg(feature = "hub")]
pub mod public;
pub mod registry;
#[cfg(feature = "hub")]
pub mod resolve;
pub mod select;
pub mod sharegpt;
#[cfg(feature = "hub")]
pub mod upstream;

#[cfg(feature = "hub")]
pub use bundle::{BundleEntry, BundleManifest, import_bundle, verify_bundle};
pub use error::{BoxedCause, ContentError, DatasetError, GateReason, LookupError};
#[cfg(feature = "hub")]
pub use error::{ChecksumOf, FetchError, IntegrityError, ResolveError};
#[cfg(feature = "hub")]
pub use hub::{HubClient, HubConfig, HubToken};
pub use jsonl::{PLACEHOLDER, UTF8_BOM, strip_bom};
#[cfg(feature = "hub")]
pub use public::prestage;
#[cfg(feature = "hub")]
pub use public::{LoadOptions, Origin, PublicDataset, load_public_dataset};
pub use registry::{DatasetSource, DatasetSpec, lookup, registry};
#[cfg(feature = "hub")]
pub use resolve::Resolver;
pub use select::{ALL_CATEGORIES, CategorySelection, bench_dataset};
pub use sharegpt::{LimitBroken, ReplyLimits, ShareGptRows, sharegpt_rows};
#[cfg(feature = "hub")]
pub use upstream::{PrepareScript, ScriptPin, UpstreamOptions};

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use speedbench_record::{QUALITATIVE_CATEGORIES, THROUGHPUT_TIERS};

/// One chat message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// `system`, `user` or `assistant`.
    pub role: String,
    /// The message text.
    pub content: String,
}

/// One dataset row: an identifier, a category and the turns to send.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Conversation {
    /// Row identifier (SPEED-Bench `question_id`).
    pub id: String,
    /// Category (domain or entropy tier), when the row has one.
    pub category: Option<String>,
    /// Messages that precede every turn (a system prompt), possibly empty.
    pub preamble: Vec<Message>,
    /// The user turns, sent one request each and in order.
    pub turns: Vec<String>,
    /// A trace's send time for the row, microseconds from the trace's
    /// zero (AIPerf's `timestamp`, milliseconds in the file), replayed by
    /// a fixed schedule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timestamp_us: Option<u64>,
    /// A trace's output length for the row (AIPerf's `output_length`):
    /// its requests' `max_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// Each turn's own output length, when the turns differ (synthetic
    /// multi-turn rows: AIPerf draws one per turn); turn `i` asks for
    /// entry `i`, and `max_output_tokens` holds the first. Empty: every
    /// turn asks for `max_output_tokens` ([`Conversation::output_tokens_of_turn`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turn_output_tokens: Vec<u32>,
    /// A trace row's prompt given as a token count, not text (AIPerf's
    /// `mooncake_trace` `input_length` and `hash_ids`): its `turns` are
    /// empty until it is built (`speedbench_client::synthetic::TracePrompts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_to_build: Option<PromptToBuild>,
    /// Each turn's reference reply, whose token count becomes that turn's
    /// output length before the run (ShareGPT's `gpt` messages; a row's
    /// `"output_length": "reply"`): empty for every other row, and emptied
    /// once counted (`turn_output_tokens` then holds the counts).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reference_replies: Vec<String>,
}

impl Conversation {
    /// The output length turn `turn_index` asks for: its own when the row
    /// has one per turn, else the row's.
    pub fn output_tokens_of_turn(&self, turn_index: usize) -> Option<u32> {
        self.turn_output_tokens
            .get(turn_index)
            .copied()
            .or(self.max_output_tokens)
    }
}

/// A prompt a trace gives by length: `tokens` long, its first blocks
/// shared with every row naming the same `hash_ids` (so a server's prefix
/// cache sees the trace's reuse).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptToBuild {
    /// The prompt's length, tokens.
    pub tokens: u32,
    /// One id per block of the prompt, in order: rows naming the same id at
    /// the same place share that block's text.
    pub hash_ids: Vec<u64>,
}

/// A named list of conversations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    /// Dataset name, recorded in every request record.
    pub name: String,
    /// The rows, in file order.
    pub conversations: Vec<Conversation>,
}

impl Dataset {
    /// Loads a JSONL file of SPEED-Bench-shaped rows.
    ///
    /// The dataset is named after the file stem. Errors name the file, the
    /// line and the field.
    pub fn from_jsonl_file(path: impl AsRef<Path>) -> Result<Dataset, DatasetError> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|source| DatasetError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let text = utf8_text(&path.display().to_string(), bytes)?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "dataset".into());
        let mut dataset = Dataset::from_jsonl_str(&path.display().to_string(), &text)?;
        dataset.name = name;
        Ok(dataset)
    }

    /// Parses JSONL text; `source` names it in errors and becomes the name.
    pub fn from_jsonl_str(source: &str, text: &str) -> Result<Dataset, DatasetError> {
        let conversations = jsonl::parse_rows(source, text)?;
        Ok(Dataset {
            name: source.to_string(),
            conversations,
        })
    }

    /// Total number of turns, i.e. requests one pass over the dataset sends.
    pub fn turn_count(&self) -> usize {
        self.conversations.iter().map(|c| c.turns.len()).sum()
    }

    /// The distinct categories present, sorted.
    pub fn categories(&self) -> BTreeSet<&str> {
        self.conversations
            .iter()
            .filter_map(|c| c.category.as_deref())
            .collect()
    }

    /// Keeps only the rows of the given categories.
    ///
    /// An empty filter keeps everything. A filter that matches no row is an
    /// error listing the categories that do exist, and so is one naming a
    /// category no row has while others match (as speed_bench.py refuses
    /// an unknown `--category`; see [`Dataset::unknown_categories`]).
    pub fn filter_categories(&self, wanted: &[String]) -> Result<Dataset, DatasetError> {
        if wanted.is_empty() {
            return Ok(self.clone());
        }
        let unknown = self.unknown_categories(wanted);
        if !unknown.is_empty() && unknown.len() < wanted.len() {
            return Err(DatasetError::from(LookupError::UnknownCategories {
                dataset: self.name.clone(),
                unknown: unknown.iter().map(|c| c.to_string()).collect(),
                available: self.categories().into_iter().map(String::from).collect(),
            }));
        }
        let conversations: Vec<_> = self
            .conversations
            .iter()
            .filter(|c| c.category.as_ref().is_some_and(|cat| wanted.contains(cat)))
            .cloned()
            .collect();
        if conversations.is_empty() {
            return Err(DatasetError::from(LookupError::NoRowsMatch {
                dataset: self.name.clone(),
                wanted: wanted.to_vec(),
                available: self.categories().into_iter().map(String::from).collect(),
            }));
        }
        Ok(Dataset {
            name: self.name.clone(),
            conversations,
        })
    }

    /// The entries of `wanted` that no row of this dataset has, in the
    /// order given.
    ///
    /// ```
    /// use speedbench_dataset::Dataset;
    /// let d = Dataset::from_jsonl_str("d", r#"{"question_id":"q","category":"math","turns":["1+1?"]}"#)?;
    /// assert_eq!(d.unknown_categories(&["math".into(), "maths".into()]), ["maths"]);
    /// # Ok::<(), speedbench_dataset::DatasetError>(())
    /// ```
    pub fn unknown_categories<'a>(&self, wanted: &'a [String]) -> Vec<&'a str> {
        let present = self.categories();
        wanted
            .iter()
            .filter(|w| !present.contains(w.as_str()))
            .map(String::as_str)
            .collect()
    }
}

/// Decodes a file's bytes as UTF-8 text, without a leading byte-order mark.
///
/// A UTF-16 file (a byte-order mark `FF FE` or `FE FF`, as Windows'
/// "Unicode" encoding writes) and bytes that are not UTF-8 are errors naming
/// the encoding or the line.
fn utf8_text(source: &str, bytes: Vec<u8>) -> Result<String, DatasetError> {
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return Err(DatasetError::from(ContentError::InvalidRow {
            source_name: source.to_string(),
            line: 1,
            message: "the file is UTF-16 text (it starts with a UTF-16 byte-order mark); \
                      save it as UTF-8"
                .to_string(),
        }));
    }
    match String::from_utf8(bytes) {
        Ok(mut text) => {
            if text.starts_with(UTF8_BOM) {
                text.drain(..UTF8_BOM.len_utf8());
            }
            Ok(text)
        }
        Err(e) => {
            let valid = e.utf8_error().valid_up_to();
            let bytes = e.into_bytes();
            let line = 1 + bytes[..valid].iter().filter(|&&b| b == b'\n').count();
            Err(DatasetError::from(ContentError::InvalidRow {
                source_name: source.to_string(),
                line,
                message: format!(
                    "not UTF-8 text (byte {valid} of the file); save the file as UTF-8"
                ),
            }))
        }
    }
}
