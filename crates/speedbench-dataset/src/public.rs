//! `--public-dataset NAME`: find a registered dataset in the dataset cache,
//! or fetch it from the Hub (resolving SPEED-Bench placeholders), then load
//! and filter it.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::bundle::{BundleEntry, read_manifest, verify_entry};
use crate::error::{ContentError, LookupError};
use crate::hub::{HubClient, HubConfig, write_atomic};
use crate::parquet_rows::{json_kind, read_parquet_rows, string_items};
use crate::registry::{DatasetSource, DatasetSpec, LiteratureSpec, lookup};
use crate::resolve::{Plan, Resolver, fetch_config, resolve_native};
use crate::upstream::UpstreamOptions;
use crate::{Dataset, DatasetError};

/// speedbench's dataset cache, relative to the working directory.
pub const DEFAULT_DATASET_CACHE: &str = ".cache/speedbench/datasets";

/// AIPerf's dataset cache, relative to the working directory; its resolved
/// SPEED-Bench files (`speed-bench/<config>.jsonl`) are used as they are.
pub const AIPERF_DATASET_CACHE: &str = ".cache/aiperf/datasets";

/// Where to look for and put datasets.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// The dataset cache written to (`--dataset-cache`, default
    /// [`DEFAULT_DATASET_CACHE`]). It may be a pre-staged bundle: then its
    /// `manifest.json` checksums are verified on load.
    pub dataset_cache: PathBuf,
    /// Further caches read (never written), after `dataset_cache`.
    pub read_only_caches: Vec<PathBuf>,
    /// How to reach the Hub.
    pub hub: HubConfig,
    /// How SPEED-Bench placeholder rows are resolved (`--resolver`).
    pub resolver: Resolver,
    /// The upstream prepare step: script and Python interpreter
    /// (`--prepare-script`, `--python`).
    pub upstream: UpstreamOptions,
}

impl LoadOptions {
    /// Options from the environment (the Hub's variables, and
    /// `SPEEDBENCH_PYTHON`, `SPEEDBENCH_PREPARE_SCRIPT`,
    /// `SPEEDBENCH_GITHUB_RAW_ENDPOINT` for the prepare step), resolving
    /// with [`Resolver::Auto`]; `dataset_cache` overrides the default cache,
    /// and AIPerf's cache is read when no override is given.
    pub fn from_env(dataset_cache: Option<PathBuf>) -> LoadOptions {
        let read_only_caches = if dataset_cache.is_some() {
            Vec::new()
        } else {
            vec![PathBuf::from(AIPERF_DATASET_CACHE)]
        };
        LoadOptions {
            dataset_cache: dataset_cache.unwrap_or_else(|| PathBuf::from(DEFAULT_DATASET_CACHE)),
            read_only_caches,
            hub: HubConfig::from_env(),
            resolver: Resolver::Auto,
            upstream: UpstreamOptions::from_env(),
        }
    }
}

/// Where a dataset's rows came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// A JSONL file in a dataset cache (resolved earlier, pre-staged, or
    /// imported); `verified` when a bundle manifest's checksum was checked.
    Cache {
        /// The file.
        path: PathBuf,
        /// Whether a manifest checksum was verified.
        verified: bool,
    },
    /// Hub Parquet files at a commit.
    Hub {
        /// The repository.
        repo: String,
        /// The commit read.
        commit: String,
    },
    /// SPEED-Bench resolved from its sources just now and written to `path`.
    Resolved {
        /// The SPEED-Bench commit.
        commit: String,
        /// The resolved JSONL written.
        path: PathBuf,
        /// How: `natively`, or `by the upstream prepare step (URL, sha256 …)`.
        by: String,
    },
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Cache { path, verified } => write!(
                f,
                "{}{}",
                path.display(),
                if *verified {
                    " (checksum verified)"
                } else {
                    ""
                }
            ),
            Origin::Hub { repo, commit } => write!(f, "{repo}@{commit}"),
            Origin::Resolved { commit, path, by } => write!(
                f,
                "resolved from nvidia/SPEED-Bench@{commit} {by} into {}",
                path.display()
            ),
        }
    }
}

/// A loaded public dataset.
#[derive(Debug, Clone)]
pub struct PublicDataset {
    /// The registry entry.
    pub spec: DatasetSpec,
    /// The rows, category-filtered, named after the registry name.
    pub dataset: Dataset,
    /// Where they came from.
    pub origin: Origin,
}

/// Rows of a dataset as JSONL text, with their provenance.
#[derive(Debug, Clone)]
pub struct Materialized {
    /// JSONL rows with `question_id`, `category`, `messages`.
    pub jsonl: String,
    /// Where they came from.
    pub origin: Origin,
    /// The Hub repository, if any.
    pub repo: Option<String>,
    /// The commit read, if known.
    pub revision: Option<String>,
}

/// Finds `spec`'s file in the caches and reads it; verifies it against a
/// bundle manifest when the cache has one that lists it.
fn find_cached(
    spec: &DatasetSpec,
    options: &LoadOptions,
) -> Result<Option<(PathBuf, Option<BundleEntry>, String)>, DatasetError> {
    let rel = spec.cache_file();
    let mut dirs = vec![options.dataset_cache.clone()];
    if matches!(spec.source, DatasetSource::SpeedBench { .. }) {
        dirs.extend(options.read_only_caches.iter().cloned());
    }
    for dir in dirs {
        let path = dir.join(&rel);
        if !path.is_file() {
            continue;
        }
        let entry = match read_manifest(&dir)? {
            Some(m) => m.files.into_iter().find(|e| e.file == rel),
            None => None,
        };
        let text = match &entry {
            Some(e) => verify_entry(&dir, e)?,
            None => std::fs::read_to_string(&path).map_err(|source| DatasetError::Io {
                path: path.clone(),
                source,
            })?,
        };
        return Ok(Some((path, entry, text)));
    }
    Ok(None)
}

/// Produces a dataset's rows: from a cache if present, else from the Hub
/// (SPEED-Bench configs are resolved and written to the dataset cache).
pub async fn materialize(
    spec: &DatasetSpec,
    options: &LoadOptions,
) -> Result<Materialized, DatasetError> {
    if let Some((path, entry, jsonl)) = find_cached(spec, options)? {
        return Ok(Materialized {
            jsonl,
            origin: Origin::Cache {
                path,
                verified: entry.is_some(),
            },
            repo: entry
                .as_ref()
                .and_then(|e| e.repo.clone())
                .or(spec.repo().map(String::from)),
            revision: entry.and_then(|e| e.revision),
        });
    }
    match &spec.source {
        DatasetSource::SpecBench => Err(DatasetError::from(LookupError::NotOnHub {
            dataset: spec.name.clone(),
            location: "GitHub (hemingkx/Spec-Bench, data/spec_bench/question.jsonl)".into(),
            path: options.dataset_cache.join(spec.cache_file()),
        })),
        DatasetSource::Literature(lit) => from_literature(lit, options).await,
        DatasetSource::ShareGpt => from_sharegpt(spec, options).await,
        DatasetSource::SpeedBench { config, .. } => {
            resolve_speed_bench(spec, config, options).await
        }
    }
}

/// A literature set's split from the Hub, its Parquet rows as JSONL.
async fn from_literature(
    lit: &crate::registry::LiteratureSpec,
    options: &LoadOptions,
) -> Result<Materialized, DatasetError> {
    let hub = HubClient::new(options.hub.clone())?;
    let files = hub
        .fetch_split(lit.repo, lit.revision, lit.config, lit.split)
        .await?;
    let mut jsonl = String::new();
    let mut index = 0;
    for path in &files.paths {
        for row in read_parquet_rows(path)? {
            let value = literature_row(lit, &row, index, path)?;
            jsonl.push_str(&value.to_string());
            jsonl.push('\n');
            index += 1;
        }
    }
    Ok(Materialized {
        jsonl,
        origin: Origin::Hub {
            repo: lit.repo.to_string(),
            commit: files.commit.clone(),
        },
        repo: Some(lit.repo.to_string()),
        revision: Some(files.commit),
    })
}

/// ShareGPT's JSON file from the Hub, its conversations as JSONL rows
/// (each turn's reply kept to be counted), written to the dataset cache.
async fn from_sharegpt(
    spec: &DatasetSpec,
    options: &LoadOptions,
) -> Result<Materialized, DatasetError> {
    use crate::registry::{SHAREGPT_FILE, SHAREGPT_REPO, SHAREGPT_REVISION};
    let hub = HubClient::new(options.hub.clone())?;
    let (commit, file) = hub
        .fetch_file(SHAREGPT_REPO, SHAREGPT_REVISION, SHAREGPT_FILE)
        .await?;
    let bytes = std::fs::read(&file).map_err(|source| DatasetError::Io {
        path: file.clone(),
        source,
    })?;
    let rows = crate::sharegpt::sharegpt_rows(&file.display().to_string(), bytes)?;
    if rows.kept == 0 {
        return Err(DatasetError::from(ContentError::Empty {
            source_name: file.display().to_string(),
        }));
    }
    let path = options.dataset_cache.join(spec.cache_file());
    write_atomic(&path, rows.jsonl.as_bytes())?;
    tracing::warn!(
        "ShareGPT: {} of {} conversations kept into {}; {} without a human->gpt pair with \
         text are left out, as AIPerf leaves them out",
        rows.kept,
        rows.entries,
        path.display(),
        rows.without_pair()
    );
    Ok(Materialized {
        jsonl: rows.jsonl,
        origin: Origin::Hub {
            repo: SHAREGPT_REPO.to_string(),
            commit: commit.clone(),
        },
        repo: Some(SHAREGPT_REPO.to_string()),
        revision: Some(commit),
    })
}

/// A SPEED-Bench config resolved from its upstream sources, checked and
/// written to the dataset cache.
async fn resolve_speed_bench(
    spec: &DatasetSpec,
    config: &str,
    options: &LoadOptions,
) -> Result<Materialized, DatasetError> {
    let hub = HubClient::new(options.hub.clone())?;
    tracing::warn!(
        "resolving SPEED-Bench {config:?} from its upstream sources (resolver {}); the \
         result is cached in {}",
        options.resolver,
        options.dataset_cache.display()
    );
    let resolved = resolve_config(
        config,
        &hub,
        options.resolver,
        &options.upstream,
        &options.dataset_cache,
    )
    .await?;
    // Validate before caching: never cache placeholder text.
    Dataset::from_jsonl_str(config, &resolved.jsonl)?;
    let path = options.dataset_cache.join(spec.cache_file());
    write_atomic(&path, resolved.jsonl.as_bytes())?;
    tracing::warn!(
        bytes = resolved.jsonl.len(),
        "resolved SPEED-Bench {config:?} {} into {}",
        resolved.by,
        path.display()
    );
    Ok(Materialized {
        jsonl: resolved.jsonl,
        origin: Origin::Resolved {
            commit: resolved.commit.clone(),
            path,
            by: resolved.by,
        },
        repo: Some(crate::registry::SPEED_BENCH_REPO.to_string()),
        revision: Some(resolved.commit),
    })
}

/// One literature Parquet row as a JSONL row.
fn literature_row(
    lit: &LiteratureSpec,
    row: &crate::parquet_rows::JsonRow,
    index: usize,
    path: &Path,
) -> Result<Value, DatasetError> {
    let bad = |message: String| {
        DatasetError::from(ContentError::InvalidRow {
            source_name: path.display().to_string(),
            line: index + 1,
            message,
        })
    };
    let field = lit.prompt_field;
    let turns: Vec<String> = match row.get(field) {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) => string_items(items)
            .map_err(|j| bad(format!("field `{field}[{j}]` must be a string")))?,
        other => {
            return Err(bad(format!(
                "field `{field}` must be a string or a list of strings, found {}",
                other.map_or("nothing", json_kind)
            )));
        }
    };
    if turns.is_empty() || turns.iter().any(|t| t.trim().is_empty()) {
        return Err(bad(format!("field `{field}` holds an empty prompt")));
    }
    let id = match lit.id_field.and_then(|f| row.get(f)) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => format!("{}-{index}", lit.category),
    };
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|t| serde_json::json!({"role": "user", "content": t}))
        .collect();
    Ok(serde_json::json!({
        "question_id": id,
        "category": lit.category,
        "messages": messages,
    }))
}

/// Loads a registered dataset by name (see the crate docs).
///
/// SPEED-Bench names load their config's resolved file — from the dataset
/// cache, AIPerf's cache, or by resolving it — then keep their category.
/// Literature names read the Hub's Parquet files (through the Hub cache).
pub async fn load_public_dataset(
    name: &str,
    options: &LoadOptions,
) -> Result<PublicDataset, DatasetError> {
    let spec = lookup(name)?;
    let m = materialize(&spec, options).await?;
    let source_name = match &m.origin {
        Origin::Cache { path, .. } | Origin::Resolved { path, .. } => path.display().to_string(),
        Origin::Hub { repo, commit } => format!("{repo}@{commit}"),
    };
    let mut dataset = Dataset::from_jsonl_str(&source_name, &m.jsonl)?;
    dataset.name = spec.name.clone();
    if let DatasetSource::SpeedBench {
        category: Some(category),
        config,
    } = &spec.source
    {
        dataset = dataset
            .filter_categories(&[category.to_string()])
            .map_err(|e| match e {
                DatasetError::Lookup(LookupError::NoRowsMatch {
                    wanted, available, ..
                }) => DatasetError::from(LookupError::NoRowsMatch {
                    dataset: format!("{} (config {config}, {source_name})", spec.name),
                    wanted,
                    available,
                }),
                other => other,
            })?;
    }
    Ok(PublicDataset {
        spec,
        dataset,
        origin: m.origin,
    })
}

/// A resolved config as the JSONL text to cache.
pub(crate) struct Resolution {
    /// The SPEED-Bench commit read.
    pub(crate) commit: String,
    /// The rows, one JSON object a line.
    pub(crate) jsonl: String,
    /// How the rows were resolved, for the origin and the logs.
    pub(crate) by: String,
}

/// Resolves `config` with the chosen resolver: natively when it can (or must),
/// else by running the upstream prepare step.
pub(crate) async fn resolve_config(
    config: &str,
    hub: &HubClient,
    resolver: Resolver,
    upstream: &crate::upstream::UpstreamOptions,
    dataset_cache: &std::path::Path,
) -> Result<Resolution, DatasetError> {
    let rows = fetch_config(config, hub).await?;
    let plan = Plan::new(config, &rows.rows)?;
    let native = match resolver {
        Resolver::Native => true,
        Resolver::Upstream => false,
        Resolver::Auto => plan.is_native(),
    };
    if native {
        let commit = rows.commit.clone();
        let resolved = resolve_native(config, hub, rows, plan).await?;
        return Ok(Resolution {
            commit,
            jsonl: resolved.to_jsonl(),
            by: "natively".into(),
        });
    }
    // In auto mode, say why Python is needed if it turns out to be missing.
    let why = (resolver == Resolver::Auto).then(|| plan.unsupported(config));
    let (jsonl, by) = crate::upstream::run_prepare_step(
        config,
        &rows,
        upstream,
        hub.config(),
        dataset_cache,
        why,
    )
    .await?;
    Ok(Resolution {
        commit: rows.commit,
        jsonl,
        by,
    })
}

/// Resolves or downloads `name` on a connected machine and writes it, with
/// its manifest entry, into the bundle `out` (created if needed; other
/// datasets already in it are kept).
///
/// The rows are validated (no placeholder left) before anything is written.
pub async fn prestage(
    name: &str,
    out: &Path,
    options: &LoadOptions,
) -> Result<BundleEntry, DatasetError> {
    let spec = crate::registry::lookup(name)?;
    let m = materialize(&spec, options).await?;
    crate::bundle::stage_rows(
        out,
        name,
        &m.jsonl,
        m.repo,
        m.revision,
        &m.origin.to_string(),
    )
}
