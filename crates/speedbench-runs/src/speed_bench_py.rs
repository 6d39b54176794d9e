//! llama.cpp `speed_bench.py`'s `--output` JSON file as a run.
//!
//! The file holds `config`, `selected_samples`, `completed_samples`,
//! `failed_samples`, the per-category `summary` rows and the per-sample
//! `results`, whether speed_bench.py or `speedbench profile --output`
//! wrote it. It is read with `speedbench-metrics`' serde types
//! ([`SpeedBenchPyOutput`]); no per-request record is made up from it (a
//! sample sums its turns, and the turns are gone), so such a run has
//! `records: None` and carries the file in [`RunData::speed_bench_py`].

use std::path::Path;

use serde::de::DeserializeOwned;
use serde_json::Value;
use speedbench_metrics::{
    SpeedBenchPyConfig, SpeedBenchPyOutput, SpeedBenchPyRow, SpeedBenchPySample,
};

use crate::RunsError;
use crate::run_data::{RunData, RunFormat, read_json};
use speedbench_record::RunStatus;

/// The top-level keys a file must have to be taken for speed_bench.py's
/// layout when found in a directory: both of these.
pub const SPEED_BENCH_PY_KEYS: [&str; 2] = ["summary", "results"];

/// True when `path` names a `.json` file (any case), the only files a run
/// path may be besides a directory.
pub(crate) fn has_json_extension(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.to_string_lossy().eq_ignore_ascii_case("json"))
}

/// True when `path` is a `.json` file whose top level is an object holding
/// both `summary` and `results` (of any type: a malformed one is still
/// taken, so that loading it names what is wrong). Unreadable files, other
/// JSON and other extensions are not.
pub(crate) fn looks_like_speed_bench_py(path: &Path) -> bool {
    if !path.is_file() || !has_json_extension(path) {
        return false;
    }
    let Ok(text) = std::fs::read_to_string(path) else {
        return false;
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => SPEED_BENCH_PY_KEYS.iter().all(|k| map.contains_key(*k)),
        _ => false,
    }
}

/// The key of a pretty-printed JSON line (`  "name": value`).
fn key_of_line(line: &str) -> Option<&str> {
    let rest = line.trim_start().strip_prefix('"')?;
    let end = rest.find("\":")?;
    Some(&rest[..end])
}

/// `value` as a `T`, the error naming the field at fault: `at` (e.g.
/// `summary[2]`) and, for a wrong type, the key whose value it is.
fn typed<T: DeserializeOwned>(value: &Value, at: &str) -> Result<T, String> {
    // Pretty-printed, every field is on a line of its own, so the line of
    // the error names the field.
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    serde_json::from_str(&text).map_err(|e| {
        let full = e.to_string();
        let message = full
            .rfind(" at line ")
            .map_or(full.as_str(), |i| &full[..i])
            .to_string();
        let key = (e.line() > 1 && !message.starts_with("missing field"))
            .then(|| text.lines().nth(e.line() - 1).and_then(key_of_line))
            .flatten();
        match key {
            Some(k) => format!("{at}.{k}: {message}"),
            None => format!("{at}: {message}"),
        }
    })
}

/// The array under `key`, each element typed, errors naming `key[i]`.
fn typed_array<T: DeserializeOwned>(
    top: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Vec<T>, String> {
    match top.get(key) {
        None => Err(format!("missing field `{key}`")),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| typed(item, &format!("{key}[{i}]")))
            .collect(),
        Some(other) => Err(format!("{key}: expected an array, found {}", kind(other))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Parses a speed_bench.py `--output` value; the error names the field.
pub(crate) fn parse(value: &Value) -> Result<SpeedBenchPyOutput, String> {
    let Value::Object(top) = value else {
        return Err(format!("expected a JSON object, found {}", kind(value)));
    };
    let field = |key: &str| top.get(key).ok_or_else(|| format!("missing field `{key}`"));
    let count = |key: &str| -> Result<u64, String> { typed(field(key)?, key) };
    let config: SpeedBenchPyConfig = typed(field("config")?, "config")?;
    Ok(SpeedBenchPyOutput {
        config,
        selected_samples: count("selected_samples")?,
        completed_samples: count("completed_samples")?,
        failed_samples: count("failed_samples")?,
        summary: typed_array::<SpeedBenchPyRow>(top, "summary")?,
        results: typed_array::<SpeedBenchPySample>(top, "results")?,
    })
}

/// Loads a speed_bench.py `--output` file as a run.
///
/// Its label and model are `config.model`, or the file's stem when the file
/// names none (speed_bench.py's `--model` is optional). Its status is
/// completed (the file is written only at the end of a run); counts that
/// disagree with `results` are warnings.
pub(crate) fn load(path: &Path) -> Result<RunData, RunsError> {
    let value = read_json(path)?;
    let output = parse(&value).map_err(|message| RunsError::Artifact {
        path: path.to_path_buf(),
        line: None,
        message: format!("not a speed_bench.py --output file: {message}"),
    })?;
    let mut warnings = Vec::new();
    let ok = output.results.iter().filter(|s| s.ok).count() as u64;
    let n = output.results.len() as u64;
    if (
        output.selected_samples,
        output.completed_samples,
        output.failed_samples,
    ) != (n, ok, n - ok)
    {
        warnings.push(format!(
            "{}: selected_samples {}, completed_samples {}, failed_samples {} disagree with its \
             results ({n} samples, {ok} ok); its summary rows are used as written",
            path.display(),
            output.selected_samples,
            output.completed_samples,
            output.failed_samples
        ));
    }
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let model = output
        .config
        .model
        .clone()
        .filter(|m| !m.trim().is_empty())
        .unwrap_or(stem);
    Ok(RunData {
        dir: path.to_path_buf(),
        format: RunFormat::SpeedBenchPy,
        run_group: None,
        label: crate::model_name::display_model(&model),
        model,
        status: RunStatus::Completed,
        status_reason: None,
        speed_bench: true,
        dataset: output.config.bench.clone().unwrap_or_default(),
        manifest: None,
        records: None,
        digest: None,
        summary: None,
        server: None,
        speed_bench_py: Some(output),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Value {
        serde_json::json!({
            "config": {"bench": "qualitative", "category": "all", "concurrency": 1,
                       "extra_inputs": {"temperature": 0}, "model": null, "osl": 64,
                       "url": "localhost:8080"},
            "selected_samples": 1, "completed_samples": 1, "failed_samples": 0,
            "summary": [{"category": "qa", "requests": 1, "turns": 1, "failed": 0,
                         "avg_prompt_t_s": 10.0, "avg_pred_t_s": 5.0, "avg_latency": 1.0,
                         "draft_n": 0, "accepted": 0, "accept_rate": null}],
            "results": [{"id": "q", "category": "qa", "ok": true, "turns": 1, "latency_s": 1.0,
                         "prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7,
                         "finish_reason": "stop", "draft_n": 0, "draft_n_accepted": 0,
                         "prompt_ms": 1.0, "predicted_ms": 2.0, "prompt_per_second": 10.0,
                         "predicted_per_second": 5.0, "error": null}]
        })
    }

    #[test]
    fn parses_and_names_the_field_at_fault() {
        let out = parse(&good()).unwrap();
        assert_eq!(out.summary[0].category, "qa");
        let mut v = good();
        v["summary"][0]["avg_latency"] = "slow".into();
        let e = parse(&v).unwrap_err();
        assert!(
            e.starts_with("summary[0].avg_latency: invalid type: string"),
            "{e}"
        );
        let mut v = good();
        v["results"][0].as_object_mut().unwrap().remove("latency_s");
        assert_eq!(
            parse(&v).unwrap_err(),
            "results[0]: missing field `latency_s`"
        );
        let mut v = good();
        v.as_object_mut().unwrap().remove("config");
        assert_eq!(parse(&v).unwrap_err(), "missing field `config`");
        let mut v = good();
        v["summary"] = 3.into();
        assert_eq!(
            parse(&v).unwrap_err(),
            "summary: expected an array, found a number"
        );
        let mut v = good();
        v["config"]["concurrency"] = (-1).into();
        let e = parse(&v).unwrap_err();
        assert!(e.starts_with("config.concurrency: invalid value"), "{e}");
        let mut v = good();
        v["failed_samples"] = Value::Null;
        let e = parse(&v).unwrap_err();
        assert!(e.starts_with("failed_samples: invalid type: null"), "{e}");
    }

    #[test]
    fn only_files_of_the_layout_are_recognised() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        assert!(looks_like_speed_bench_py(&write(
            "a.json",
            &good().to_string()
        )));
        assert!(looks_like_speed_bench_py(&write(
            "b.JSON",
            r#"{"summary": 1, "results": 2}"#
        )));
        assert!(!looks_like_speed_bench_py(&write(
            "c.json",
            r#"{"summary": []}"#
        )));
        assert!(!looks_like_speed_bench_py(&write("d.json", "[1, 2]")));
        assert!(!looks_like_speed_bench_py(&write("e.json", "not json")));
        assert!(!looks_like_speed_bench_py(&write(
            "f.txt",
            &good().to_string()
        )));
    }
}
