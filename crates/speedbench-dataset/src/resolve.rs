//! Resolution of SPEED-Bench placeholder rows from their upstream sources.
//!
//! SPEED-Bench publishes, for rows whose sources forbid redistribution, the
//! sentinel [`PLACEHOLDER`] (often followed by `"\n\n"`
//! and a Python `str.format` template) plus a `source` and a `src_id`. The
//! upstream prepare step rebuilds the text from 14 sources. Some rebuilds are
//! pure lookups (a row id maps to a field); others depend on the prepare
//! step's random-number streams (numpy PCG64, pandas `sample`, Python's
//! Mersenne Twister) or on o200k tokenization, and cannot be reproduced
//! bit-exactly here. [`UpstreamSource::support`] says which is which. Native
//! resolution refuses a config whose placeholder rows need an unsupported
//! source *before* downloading any source, and never fabricates a prompt;
//! with [`Resolver::Auto`] such a config is resolved by the upstream prepare
//! step instead ([`crate::upstream`]).

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::error::{ContentError, ResolveError};
use crate::hub::{HLE_REPO, HubClient};
use crate::parquet_rows::{JsonRow, read_parquet_rows, string_items};
use crate::registry::{SPEED_BENCH_REPO, SPEED_BENCH_REVISION};
use crate::{DatasetError, PLACEHOLDER};

/// `cais/hle` revision the prepare step reads.
pub const HLE_REVISION: &str = "021a3d71f516a7ac28ceb8d284969902edf1edeb";
/// `deepmind/code_contests` revision the prepare step reads.
pub const CODE_CONTESTS_REVISION: &str = "802411c3010cb00d1b05bad57ca77365a3c699d6";
/// `livecodebench/code_generation_lite` revision the prepare step reads.
pub const LIVECODEBENCH_REVISION: &str = "0fe84c3912ea0c4d4a78037083943e8f0c4dd505";
/// The LiveCodeBench JSONL files, searched in this order.
pub const LIVECODEBENCH_FILES: [&str; 6] = [
    "test.jsonl",
    "test2.jsonl",
    "test3.jsonl",
    "test4.jsonl",
    "test5.jsonl",
    "test6.jsonl",
];

/// The upstream sources of SPEED-Bench, in the prepare step's dispatch order
/// (`RoleBench` covers its roles file too, making 14 sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UpstreamSource {
    /// `RUCAIBox/BAMBOO`
    Bamboo,
    /// `abisee/cnn_dailymail`
    CnnDailymail,
    /// `cais/hle` (gated)
    Hle,
    /// `livecodebench/code_generation_lite`
    LiveCodeBench,
    /// `deepmind/code_contests`
    CodeContests,
    /// `mtbench101/mt-bench-101`
    MtBench101,
    /// `Helsinki-NLP/opus-100`
    Opus100,
    /// `nvidia/ChatRAG-Bench`
    ChatRagBench,
    /// `TIGER-Lab/MMLU-Pro`
    MmluPro,
    /// `AdaLEval/stackselect`
    StackSelect,
    /// `AdaLEval/textsort`
    TextSort,
    /// `ZenMoore/RoleBench` (and its roles file)
    RoleBench,
    /// `Neph0s/CoSER`
    Coser,
}

/// Whether speedbench rebuilds a source's rows itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Rebuilt exactly: a direct lookup plus the row's own template.
    Exact,
    /// Not rebuilt; the reason, for the error message and the docs.
    NotReproducible(&'static str),
}

impl UpstreamSource {
    /// Every source, in dispatch order.
    pub const ALL: [UpstreamSource; 13] = [
        UpstreamSource::Bamboo,
        UpstreamSource::CnnDailymail,
        UpstreamSource::Hle,
        UpstreamSource::LiveCodeBench,
        UpstreamSource::CodeContests,
        UpstreamSource::MtBench101,
        UpstreamSource::Opus100,
        UpstreamSource::ChatRagBench,
        UpstreamSource::MmluPro,
        UpstreamSource::StackSelect,
        UpstreamSource::TextSort,
        UpstreamSource::RoleBench,
        UpstreamSource::Coser,
    ];

    /// The identifier the prepare step looks for in a row's `source`.
    pub fn id(self) -> &'static str {
        match self {
            UpstreamSource::Bamboo => "RUCAIBox/BAMBOO",
            UpstreamSource::CnnDailymail => "abisee/cnn_dailymail",
            UpstreamSource::Hle => HLE_REPO,
            UpstreamSource::LiveCodeBench => "livecodebench/code_generation_lite",
            UpstreamSource::CodeContests => "deepmind/code_contests",
            UpstreamSource::MtBench101 => "mtbench101/mt-bench-101",
            UpstreamSource::Opus100 => "Helsinki-NLP/opus-100",
            UpstreamSource::ChatRagBench => "nvidia/ChatRAG-Bench",
            UpstreamSource::MmluPro => "TIGER-Lab/MMLU-Pro",
            UpstreamSource::StackSelect => "AdaLEval/stackselect",
            UpstreamSource::TextSort => "AdaLEval/textsort",
            UpstreamSource::RoleBench => "ZenMoore/RoleBench",
            UpstreamSource::Coser => "Neph0s/CoSER",
        }
    }

    /// The source a row's `source` names: the first, in dispatch order, whose
    /// identifier is a substring of it (as the prepare step tests).
    pub fn dispatch(source: &str) -> Option<UpstreamSource> {
        UpstreamSource::ALL
            .into_iter()
            .find(|s| source.contains(s.id()))
    }

    /// Whether speedbench rebuilds this source's rows for `config`.
    pub fn support(self, config: &str) -> Support {
        let throughput = config.starts_with("throughput_");
        match self {
            UpstreamSource::CnnDailymail
            | UpstreamSource::LiveCodeBench
            | UpstreamSource::CodeContests => Support::Exact,
            UpstreamSource::Hle if !throughput => Support::Exact,
            UpstreamSource::Hle => Support::NotReproducible(
                "throughput rows sample demonstrations with numpy's PCG64 stream shared across rows, \
                 after a shuffled train/test split, and cut at o200k token counts",
            ),
            UpstreamSource::Bamboo | UpstreamSource::TextSort => Support::NotReproducible(
                "the prompt is padded or truncated to the config's length in o200k_base tokens",
            ),
            UpstreamSource::StackSelect => Support::NotReproducible(
                "answers are shuffled with Python's Mersenne Twister (seed 42) and fitted to an \
                 o200k_base token budget",
            ),
            UpstreamSource::Coser => Support::NotReproducible(
                "the character is drawn with numpy default_rng(12347).choice",
            ),
            UpstreamSource::MmluPro => Support::NotReproducible(
                "the chain-of-thought header text is built by the prepare step, not carried by \
                 the row, and is not reproduced here",
            ),
            UpstreamSource::RoleBench => Support::NotReproducible(
                "role profiles and question prefixes come from files outside the Hub whose \
                 formatting is not reproduced here",
            ),
            UpstreamSource::MtBench101 => Support::NotReproducible(
                "its rows are read from a JSON file at a URL outside the Hub; not implemented",
            ),
            UpstreamSource::Opus100 => Support::NotReproducible(
                "the prompt embeds a Python dict repr of the translation; not implemented",
            ),
            UpstreamSource::ChatRagBench => {
                Support::NotReproducible("rebuilding its multi-turn context is not implemented")
            }
        }
    }

    /// The id column the lookup uses, for exact sources.
    fn key_field(self) -> &'static str {
        match self {
            UpstreamSource::CodeContests => "name",
            UpstreamSource::LiveCodeBench => "question_id",
            _ => "id",
        }
    }

    /// Downloads (or finds in the Hub cache) the source's rows, keyed by id.
    async fn load_index(
        self,
        hub: &HubClient,
        wanted: &std::collections::HashSet<String>,
    ) -> Result<HashMap<String, JsonRow>, DatasetError> {
        let mut index = HashMap::new();
        let key = self.key_field();
        let mut keep = |row: JsonRow| {
            let id = match row.get(key) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Number(n)) => n.to_string(),
                _ => return,
            };
            if wanted.contains(&id) {
                index.insert(id, row);
            }
        };
        match self {
            UpstreamSource::LiveCodeBench => {
                for f in LIVECODEBENCH_FILES {
                    let (_, path) = hub.fetch_file(self.id(), LIVECODEBENCH_REVISION, f).await?;
                    let text =
                        std::fs::read_to_string(&path).map_err(|source| DatasetError::Io {
                            path: path.clone(),
                            source,
                        })?;
                    for (n, line) in crate::strip_bom(&text).lines().enumerate() {
                        if line.trim().is_empty() {
                            continue;
                        }
                        let row: JsonRow = serde_json::from_str(line).map_err(|e| {
                            DatasetError::from(ContentError::InvalidRow {
                                source_name: path.display().to_string(),
                                line: n + 1,
                                message: e.to_string(),
                            })
                        })?;
                        keep(row);
                    }
                }
            }
            _ => {
                let (revision, config) = match self {
                    UpstreamSource::CnnDailymail => ("main", "3.0.0"),
                    UpstreamSource::Hle => (HLE_REVISION, "default"),
                    UpstreamSource::CodeContests => (CODE_CONTESTS_REVISION, "default"),
                    _ => unreachable!("only exact sources are loaded"),
                };
                let files = hub.fetch_split(self.id(), revision, config, "test").await?;
                for path in &files.paths {
                    for row in read_parquet_rows(path)? {
                        keep(row);
                    }
                }
            }
        }
        Ok(index)
    }

    /// Rebuilds the turns of one placeholder row from its upstream row.
    fn build_turns(
        self,
        template: Option<&str>,
        upstream: &JsonRow,
    ) -> Result<Vec<String>, String> {
        let field = |name: &str| -> Result<String, String> {
            match upstream.get(name) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(Value::Null) | None => Err(format!("upstream row has no `{name}`")),
                Some(other) => Ok(other.to_string()),
            }
        };
        let need_template = || template.ok_or("the row carries no template after the placeholder");
        let text = match self {
            UpstreamSource::CnnDailymail => {
                python_format(need_template()?, &[("article", &field("article")?)])?
            }
            UpstreamSource::CodeContests => {
                python_format(need_template()?, &[("question", &field("description")?)])?
            }
            UpstreamSource::LiveCodeBench => python_format(
                need_template()?,
                &[
                    ("question", &field("question_content")?),
                    ("starter_code", &field("starter_code")?),
                ],
            )?,
            UpstreamSource::Hle => field("question")?,
            _ => return Err("source not supported".into()),
        };
        Ok(vec![text])
    }
}

/// Formats a Python `str.format` template with named fields.
///
/// Supports `{name}` and the `{{`/`}}` escapes; a conversion, format spec,
/// positional or unknown field is an error (the prepare step would raise too).
pub fn python_format(template: &str, fields: &[(&str, &str)]) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut i = 0;
    while i < template.len() {
        let rest = &template[i..];
        if rest.starts_with("{{") {
            out.push('{');
            i += 2;
        } else if rest.starts_with("}}") {
            out.push('}');
            i += 2;
        } else if rest.starts_with('{') {
            let end = rest
                .find('}')
                .ok_or_else(|| "template has an unclosed `{`".to_string())?;
            let name = &rest[1..end];
            if !name.chars().all(|c| c.is_alphanumeric() || c == '_') || name.is_empty() {
                return Err(format!("template field {{{name}}} is not supported"));
            }
            let value = fields
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| *v)
                .ok_or_else(|| format!("template field {{{name}}} is not supported"))?;
            out.push_str(value);
            i += end + 1;
        } else if rest.starts_with('}') {
            return Err("template has a single `}`".to_string());
        } else {
            let c = rest.chars().next().expect("rest is not empty");
            out.push(c);
            i += c.len_utf8();
        }
    }
    Ok(out)
}

/// A SPEED-Bench config resolved into rows with `messages`.
#[derive(Debug, Clone)]
pub struct ResolvedConfig {
    /// The config.
    pub config: String,
    /// The SPEED-Bench commit read.
    pub commit: String,
    /// The rows, in upstream order: every column but `turns`, plus
    /// `messages: [{"role":"user","content":turn}, ...]`.
    pub rows: Vec<Value>,
    /// Rows rebuilt, per upstream source id.
    pub resolved: BTreeMap<String, usize>,
}

impl ResolvedConfig {
    /// The rows as JSONL text (one object per line).
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for r in &self.rows {
            out.push_str(&r.to_string());
            out.push('\n');
        }
        out
    }
}

fn check_config_name(config: &str) -> Result<(), DatasetError> {
    if config.is_empty()
        || !config
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(DatasetError::from(ResolveError::InvalidConfig {
            config: config.to_string(),
        }));
    }
    Ok(())
}

/// How SPEED-Bench placeholder rows are resolved (`--resolver`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Resolver {
    /// Natively when every placeholder row's source is rebuilt exactly
    /// ([`Support::Exact`]), else with the upstream prepare step.
    #[default]
    Auto,
    /// Natively only: a row from another source is an error
    /// ([`ResolveError::Unresolvable`]); never runs Python.
    Native,
    /// Always with the upstream prepare step
    /// ([`crate::upstream`]), even where native resolution would do.
    Upstream,
}

impl Resolver {
    /// The names `--resolver` accepts, in [`Resolver`] order.
    pub const NAMES: [&'static str; 3] = ["auto", "native", "upstream"];
}

impl std::str::FromStr for Resolver {
    type Err = String;

    fn from_str(s: &str) -> Result<Resolver, String> {
        match s {
            "auto" => Ok(Resolver::Auto),
            "native" => Ok(Resolver::Native),
            "upstream" => Ok(Resolver::Upstream),
            other => Err(format!(
                "unknown resolver {other:?}; expected one of {}",
                Resolver::NAMES.join(", ")
            )),
        }
    }
}

impl std::fmt::Display for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Resolver::Auto => "auto",
            Resolver::Native => "native",
            Resolver::Upstream => "upstream",
        })
    }
}

/// A SPEED-Bench config's rows as published at the pinned revision.
pub(crate) struct ConfigRows {
    /// The commit read.
    pub(crate) commit: String,
    /// The Parquet files, in order.
    pub(crate) paths: Vec<std::path::PathBuf>,
    /// (file, index in file, row), in upstream order.
    pub(crate) rows: Vec<(String, usize, JsonRow)>,
}

/// Checks the name and the `cais/hle` gate, then fetches the config's
/// Parquet files at [`SPEED_BENCH_REVISION`] and reads their rows.
pub(crate) async fn fetch_config(
    config: &str,
    hub: &HubClient,
) -> Result<ConfigRows, DatasetError> {
    check_config_name(config)?;
    hub.check_gated_access(HLE_REPO).await?;
    let files = hub
        .fetch_split(SPEED_BENCH_REPO, SPEED_BENCH_REVISION, config, "test")
        .await?;
    let mut rows = Vec::new();
    for path in &files.paths {
        let name = path.display().to_string();
        for (i, row) in read_parquet_rows(path)?.into_iter().enumerate() {
            rows.push((name.clone(), i, row));
        }
    }
    Ok(ConfigRows {
        commit: files.commit,
        paths: files.paths,
        rows,
    })
}

/// Every placeholder row classified by source, before any source download.
pub(crate) struct Plan {
    /// Per row: the exact source that rebuilds it, or `None` (not a
    /// placeholder, or not natively supported).
    per_row: Vec<Option<UpstreamSource>>,
    /// The ids each exact source must provide.
    needed: BTreeMap<UpstreamSource, std::collections::HashSet<String>>,
    /// Placeholder rows native resolution cannot rebuild, per source.
    unsupported: BTreeMap<String, usize>,
}

impl Plan {
    /// Classifies every row of `config`.
    pub(crate) fn new(
        config: &str,
        rows: &[(String, usize, JsonRow)],
    ) -> Result<Plan, DatasetError> {
        let mut plan = Plan {
            per_row: Vec::with_capacity(rows.len()),
            needed: BTreeMap::new(),
            unsupported: BTreeMap::new(),
        };
        for (name, i, row) in rows {
            let turns = turns_of(row, name, *i)?;
            if !turns.first().is_some_and(|t| t.starts_with(PLACEHOLDER)) {
                plan.per_row.push(None);
                continue;
            }
            let source = row.get("source").and_then(Value::as_str).unwrap_or("");
            match UpstreamSource::dispatch(source) {
                Some(s) if s.support(config) == Support::Exact => {
                    let src_id = row.get("src_id").and_then(Value::as_str).unwrap_or("");
                    plan.needed.entry(s).or_default().insert(src_id.to_string());
                    plan.per_row.push(Some(s));
                }
                Some(s) => {
                    *plan.unsupported.entry(s.id().to_string()).or_default() += 1;
                    plan.per_row.push(None);
                }
                None => {
                    *plan
                        .unsupported
                        .entry(format!("unrecognised source {source:?}"))
                        .or_default() += 1;
                    plan.per_row.push(None);
                }
            }
        }
        Ok(plan)
    }

    /// Whether native resolution rebuilds every placeholder row.
    pub(crate) fn is_native(&self) -> bool {
        self.unsupported.is_empty()
    }

    /// Rows native resolution cannot rebuild, and `source (n rows: why)`
    /// for each of their sources.
    pub(crate) fn unsupported(&self, config: &str) -> (usize, String) {
        let count = self.unsupported.values().sum();
        let sources = self
            .unsupported
            .iter()
            .map(|(s, n)| {
                let why = UpstreamSource::dispatch(s)
                    .and_then(|u| match u.support(config) {
                        Support::NotReproducible(r) => Some(r),
                        Support::Exact => None,
                    })
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default();
                format!("{s} ({n} rows{why})")
            })
            .collect::<Vec<_>>()
            .join("; ");
        (count, sources)
    }
}

/// Resolves a whole SPEED-Bench config natively (categories are filtered
/// afterwards, never before: upstream resolution is order-dependent).
///
/// Order of work: the `cais/hle` access check (short deadline), the
/// SPEED-Bench Parquet files at [`SPEED_BENCH_REVISION`], a classification
/// of every placeholder row by source — failing with
/// [`ResolveError::Unresolvable`] before any source download if one is not
/// supported — then the sources, then the rows. [`crate::load_public_dataset`]
/// chooses between this and the upstream prepare step ([`Resolver`]).
pub async fn resolve_speed_bench(
    config: &str,
    hub: &HubClient,
) -> Result<ResolvedConfig, DatasetError> {
    let rows = fetch_config(config, hub).await?;
    let plan = Plan::new(config, &rows.rows)?;
    resolve_native(config, hub, rows, plan).await
}

/// Native resolution of rows already fetched and classified.
pub(crate) async fn resolve_native(
    config: &str,
    hub: &HubClient,
    rows: ConfigRows,
    plan: Plan,
) -> Result<ResolvedConfig, DatasetError> {
    if !plan.is_native() {
        let (count, sources) = plan.unsupported(config);
        return Err(DatasetError::from(ResolveError::Unresolvable {
            config: config.to_string(),
            count,
            sources,
        }));
    }
    let mut indexes = HashMap::new();
    for (source, ids) in &plan.needed {
        tracing::info!(
            source = source.id(),
            rows = ids.len(),
            "fetching upstream source"
        );
        indexes.insert(*source, source.load_index(hub, ids).await?);
    }
    let mut out = Vec::with_capacity(rows.rows.len());
    let mut resolved: BTreeMap<String, usize> = BTreeMap::new();
    for ((name, i, mut row), source) in rows.rows.into_iter().zip(plan.per_row) {
        let mut turns = turns_of(&row, &name, i)?;
        if let Some(source) = source {
            turns = upstream_turns(config, &row, &turns, source, &indexes)?;
            *resolved.entry(source.id().to_string()).or_default() += 1;
        }
        row.remove("turns");
        let messages: Vec<Value> = turns
            .into_iter()
            .map(|t| serde_json::json!({"role": "user", "content": t}))
            .collect();
        row.insert("messages".into(), Value::Array(messages));
        out.push(Value::Object(row));
    }
    Ok(ResolvedConfig {
        config: config.to_string(),
        commit: rows.commit,
        rows: out,
        resolved,
    })
}

/// A placeholder row's turns, built from its upstream row (by `src_id`)
/// and the template its first turn carries.
fn upstream_turns(
    config: &str,
    row: &JsonRow,
    turns: &[String],
    source: UpstreamSource,
    indexes: &HashMap<UpstreamSource, HashMap<String, JsonRow>>,
) -> Result<Vec<String>, DatasetError> {
    let str_of = |k: &str| row.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let fail = |message: String| {
        DatasetError::from(ResolveError::Row {
            config: config.to_string(),
            question_id: str_of("question_id"),
            source_name: str_of("source"),
            src_id: str_of("src_id"),
            message,
        })
    };
    let src_id = str_of("src_id");
    let upstream = indexes
        .get(&source)
        .and_then(|ix| ix.get(&src_id))
        .ok_or_else(|| fail(format!("no row with that id in {}", source.id())))?;
    let template = turns[0]
        .strip_prefix(PLACEHOLDER)
        .and_then(|t| t.strip_prefix("\n\n"));
    source.build_turns(template, upstream).map_err(fail)
}

fn turns_of(row: &JsonRow, source: &str, index: usize) -> Result<Vec<String>, DatasetError> {
    let bad = |message: String| {
        DatasetError::from(ContentError::InvalidRow {
            source_name: source.to_string(),
            line: index + 1,
            message,
        })
    };
    match row.get("turns") {
        Some(Value::Array(items)) => {
            string_items(items).map_err(|j| bad(format!("field `turns[{j}]` must be a string")))
        }
        _ => Err(bad("field `turns` must be a list of strings".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_format_like_python() {
        assert_eq!(
            python_format("Summarize:\n{article}\n{{x}}", &[("article", "A {b}")]).unwrap(),
            "Summarize:\nA {b}\n{x}"
        );
        assert_eq!(
            python_format(
                "{question} {starter_code}",
                &[("question", "Q"), ("starter_code", "S")]
            )
            .unwrap(),
            "Q S"
        );
        assert!(python_format("{role_name}", &[("question", "Q")]).is_err());
        assert!(python_format("{question", &[("question", "Q")]).is_err());
        assert!(python_format("a } b", &[]).is_err());
    }

    #[test]
    fn dispatch_is_by_substring_in_upstream_order() {
        assert_eq!(
            UpstreamSource::dispatch("https://huggingface.co/datasets/RUCAIBox/BAMBOO/x.jsonl"),
            Some(UpstreamSource::Bamboo)
        );
        assert_eq!(
            UpstreamSource::dispatch("cais/hle"),
            Some(UpstreamSource::Hle)
        );
        assert_eq!(UpstreamSource::dispatch("somewhere/else"), None);
        assert_eq!(UpstreamSource::Hle.support("qualitative"), Support::Exact);
        assert!(matches!(
            UpstreamSource::Hle.support("throughput_1k"),
            Support::NotReproducible(_)
        ));
    }
}
