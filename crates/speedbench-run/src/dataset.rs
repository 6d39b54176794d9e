//! The rows a [`RunSpec`] names: loaded, then narrowed to its categories
//! and per-category limit.

use speedbench_dataset::{
    CategorySelection, ChecksumOf, Dataset, DatasetError, FetchError, IntegrityError, LoadOptions,
    LookupError, PrepareScript, ResolveError, bench_dataset, load_public_dataset,
};

use crate::error::RunError;
use crate::observer::Observer;
use crate::spec::{DatasetSource, DatasetSpec, RunSpec};

const BUNDLE_HINT: &str = "on a connected machine, `speedbench datasets resolve NAME --dataset-cache \
                           DIR` fills a cache to copy here and pass as `--dataset-cache DIR`; from \
                           a checkout, `cargo xtask prestage --dataset NAME --out DIR` makes a \
                           checksummed bundle that `speedbench datasets import DIR` imports here";

/// What to do about a dataset error, where there is something to do.
pub fn dataset_hint(error: &DatasetError) -> Option<String> {
    Some(match error {
        DatasetError::Lookup(LookupError::UnknownDataset { .. }) => {
            "`speedbench datasets` lists every name".to_string()
        }
        DatasetError::Lookup(LookupError::NotOnHub { .. }) => {
            "or pass the downloaded file with --input-file".to_string()
        }
        DatasetError::Fetch(FetchError::Offline { .. } | FetchError::Gated { .. }) => {
            BUNDLE_HINT.to_string()
        }
        DatasetError::Resolve(ResolveError::Unresolvable { .. }) => format!(
            "`--resolver auto` or `--resolver upstream` runs the prepare step; or {BUNDLE_HINT}"
        ),
        DatasetError::Resolve(ResolveError::PythonUnavailable { .. }) => format!(
            "`--python venv/bin/python` (or SPEEDBENCH_PYTHON) chooses the interpreter; or \
             {BUNDLE_HINT}"
        ),
        DatasetError::Integrity(IntegrityError::Checksum {
            of: ChecksumOf::PrepareScript,
            ..
        }) => "to run another script deliberately, pass it with --prepare-script PATH".to_string(),
        _ => return None,
    })
}

/// A dataset error with what was being done and what to do about it
/// ([`dataset_hint`]), shown as `CONTEXT: ERROR` and an indented
/// `hint:` line.
pub fn dataset_error(context: impl Into<String>, source: DatasetError) -> RunError {
    let hint = dataset_hint(&source);
    RunError::Dataset {
        context: context.into(),
        source: Box::new(source),
        hint,
    }
}

impl DatasetSpec {
    /// The public dataset's load options: the cache, resolver, interpreter
    /// and prepare script this spec names (the environment gives the rest).
    pub fn load_options(&self) -> LoadOptions {
        let mut options = LoadOptions::from_env(self.dataset_cache.clone());
        options.resolver = self.resolver;
        if let Some(python) = &self.python {
            options.upstream.python = python.clone();
        }
        if let Some(script) = &self.prepare_script {
            options.upstream.script = PrepareScript::Local(script.clone());
        }
        options
    }

    /// The registered name of a public source (`--bench CONFIG` is
    /// `speed_bench_CONFIG`); `None` for an input file.
    pub fn public_name(&self) -> Result<Option<String>, RunError> {
        match &self.source {
            Some(DatasetSource::PublicDataset(name)) => Ok(Some(name.clone())),
            Some(DatasetSource::Bench(config)) => bench_dataset(config)
                .map(|spec| Some(spec.name))
                .map_err(|e| dataset_error(format!("--bench {config}"), e)),
            _ => Ok(None),
        }
    }

    /// A short name of the source, for a directory's name: the input
    /// file's stem, the public dataset's name, `speed_bench_CONFIG`.
    pub fn label(&self) -> String {
        match &self.source {
            Some(DatasetSource::InputFile(p)) => p
                .file_stem()
                .map_or("input".into(), |s| s.to_string_lossy().into_owned()),
            Some(DatasetSource::PublicDataset(name)) => name.clone(),
            Some(DatasetSource::Bench(config)) => format!("speed_bench_{config}"),
            Some(DatasetSource::Synthetic) => "synthetic".into(),
            Some(DatasetSource::InputRows(_)) => "inline".into(),
            None => "run".into(),
        }
    }
}

impl RunSpec {
    /// Loads the rows the spec names (an input file, or a public dataset
    /// through the cache, the Hub or the prepare step), unnarrowed. A
    /// trace's rows given by length are built when the run starts, against
    /// its server, after the window and any synthesis.
    pub async fn load_dataset(&self, observer: &mut dyn Observer) -> Result<Dataset, RunError> {
        let d = &self.dataset;
        if let Some(DatasetSource::InputFile(path)) = &d.source {
            return Dataset::from_jsonl_file(path)
                .map_err(|e| dataset_error("loading the input file", e));
        }
        if d.source == Some(DatasetSource::Synthetic) {
            return self.synthetic_dataset(observer).await;
        }
        if let Some(DatasetSource::InputRows(json)) = &d.source {
            return inline_rows(json);
        }
        let Some(name) = d.public_name()? else {
            return Err(RunError::invalid(
                "profile",
                "give exactly one of --input-file, --public-dataset, --bench and --isl",
            ));
        };
        let loaded = load_public_dataset(&name, &d.load_options())
            .await
            .map_err(|e| dataset_error(format!("loading --public-dataset {name}"), e))?;
        observer.dataset_loaded(&loaded);
        Ok(loaded.dataset)
    }
}

/// `--input-rows`: a JSON array of rows, read as an input file's lines
/// (errors name the row by its place, `--input-rows:N`).
fn inline_rows(json: &str) -> Result<Dataset, RunError> {
    let rows: Vec<serde_json::Value> = serde_json::from_str(json).map_err(|e| {
        RunError::invalid("--input-rows", format!("a JSON array of row objects: {e}"))
    })?;
    let lines: Vec<String> = rows.iter().map(serde_json::Value::to_string).collect();
    let mut dataset = Dataset::from_jsonl_str("--input-rows", &lines.join("\n"))
        .map_err(|e| dataset_error("reading --input-rows", e))?;
    dataset.name = "inline".into();
    Ok(dataset)
}

/// Narrows `dataset` to the spec's categories and per-category limit.
pub(crate) fn select_rows(
    limit: Option<std::num::NonZeroUsize>,
    categories: &CategorySelection,
    dataset: Dataset,
    observer: &mut dyn Observer,
) -> Result<Dataset, RunError> {
    let mut dataset = dataset
        .select_categories(categories)
        .map_err(|e| dataset_error("filtering categories", e))?;
    if let Some(limit) = limit {
        let before = dataset.conversations.len();
        dataset = dataset.limit_per_category(limit);
        observer.rows_limited(limit.get(), dataset.conversations.len(), before);
    }
    Ok(dataset)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_rows_read_as_a_files_lines_and_name_a_bad_one() {
        let rows = inline_rows(r#"[{"text": "a"}, {"text": "b", "output_length": 7}]"#).unwrap();
        assert_eq!(rows.name, "inline");
        assert_eq!(rows.conversations[1].turns, ["b"]);
        assert_eq!(rows.conversations[1].max_output_tokens, Some(7));
        let bad = inline_rows(r#"[{"text": "a"}, {"nothing": 1}]"#)
            .unwrap_err()
            .to_string();
        assert!(bad.contains("--input-rows:2"), "{bad}");
        let not_json = inline_rows("{").unwrap_err().to_string();
        assert!(
            not_json.contains("--input-rows") && not_json.contains("JSON array"),
            "{not_json}"
        );
    }
}
