//! `--user-files` (AIPerf's `artifacts.user_files`): files of the user's,
//! rendered with Jinja2 into the run directory before the first request
//! (`aiperf/config/user_files.py`).
//!
//! Each file has a `path` inside the run directory (subdirectories made;
//! an absolute path, a `..` segment or a control character refused), a
//! `format` (`json`, `yaml` or `text`; by default `text` for a string
//! content and `json` otherwise) and a `content`: every string in it holding
//! `{{`, `{%` or `{#` is rendered, a name not defined being an error naming
//! the file. The names are the config's `variables` and, winning over them
//! (said), `epoch` (the run's start, Unix seconds), `job_name` (the run
//! directory's name), `namespace` (empty), `model`, `endpoint_url` (the
//! first server's, credentials taken out) and `artifact_dir` (the run
//! directory, absolute). In `json` and `yaml` files a rendered string that
//! reads as a boolean or a number becomes one, as in AIPerf; their keys are
//! written in sorted order (AIPerf keeps the config's).

use std::path::{Component, Path, PathBuf};

use minijinja::{Environment, UndefinedBehavior};
use serde_json::{Map, Value};

use crate::error::RunError;

const FLAG: &str = "--user-files";

/// One file to write: where, how, and what.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UserFile {
    path: String,
    format: Format,
    content: Value,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Format {
    Json,
    Yaml,
    Text,
}

/// The files of `--user-files`, checked, and the variables they see.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct UserFiles {
    files: Vec<UserFile>,
    variables: Map<String, Value>,
}

/// What only the run knows when it starts.
pub(crate) struct RunContext<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) model: &'a str,
    pub(crate) endpoint_url: &'a str,
    pub(crate) epoch_s: u64,
}

impl UserFiles {
    /// `--user-files`: a JSON array of `{path, format, content}`, or
    /// `{files: [...], variables: {...}}`.
    pub(crate) fn parse(text: &str) -> Result<UserFiles, RunError> {
        let bad = |m: String| RunError::invalid(FLAG, m);
        let value: Value =
            serde_json::from_str(text).map_err(|e| bad(format!("is not JSON ({e})")))?;
        let (files, variables) = match value {
            Value::Array(files) => (files, Map::new()),
            Value::Object(mut o) => {
                let files = match o.remove("files") {
                    Some(Value::Array(files)) => files,
                    _ => return Err(bad("needs `files`: a list".into())),
                };
                let variables = match o.remove("variables") {
                    Some(Value::Object(v)) => v,
                    None => Map::new(),
                    Some(_) => return Err(bad("`variables`: a mapping".into())),
                };
                (files, variables)
            }
            _ => return Err(bad("a list of files, or {files, variables}".into())),
        };
        let files = files.into_iter().map(file).collect::<Result<_, _>>()?;
        Ok(UserFiles { files, variables })
    }

    /// Renders and writes every file into `run.dir`; the paths written.
    /// The first failure stops, naming the file.
    pub(crate) fn write(&self, run: &RunContext<'_>) -> Result<Vec<PathBuf>, RunError> {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.set_keep_trailing_newline(true);
        let context = self.context(run);
        let mut written = Vec::new();
        for f in &self.files {
            let fail = |why: String| RunError::invalid(FLAG, format!("{}: {why}", f.path));
            let rendered = render(&env, &f.content, &context, f.format != Format::Text)
                .map_err(|e| fail(format!("rendering failed: {e}")))?;
            let bytes = match f.format {
                Format::Json => {
                    serde_json::to_vec_pretty(&rendered).map_err(|e| fail(e.to_string()))?
                }
                Format::Yaml => yaml(&rendered, 0).into_bytes(),
                Format::Text => match rendered {
                    Value::String(s) => s.into_bytes(),
                    other => other.to_string().into_bytes(),
                },
            };
            let target = run.dir.join(&f.path);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| fail(e.to_string()))?;
            }
            std::fs::write(&target, bytes).map_err(|e| fail(e.to_string()))?;
            written.push(target);
        }
        Ok(written)
    }

    /// The variables, then the run's own names over them.
    fn context(&self, run: &RunContext<'_>) -> Map<String, Value> {
        let mut context = self.variables.clone();
        let dir = std::path::absolute(run.dir).unwrap_or_else(|_| run.dir.to_path_buf());
        let job = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        for (name, value) in [
            ("epoch", run.epoch_s.to_string()),
            ("job_name", job.unwrap_or_default()),
            ("namespace", String::new()),
            ("model", run.model.to_string()),
            (
                "endpoint_url",
                speedbench_record::redact_url(run.endpoint_url),
            ),
            ("artifact_dir", dir.display().to_string()),
        ] {
            if context.contains_key(name) {
                tracing::warn!("variable `{name}` of --user-files is the run's own `{name}` there");
            }
            context.insert(name.into(), Value::String(value));
        }
        context
    }
}

/// One `{path, format, content}`, checked.
fn file(value: Value) -> Result<UserFile, RunError> {
    let bad = |m: String| RunError::invalid(FLAG, m);
    let Value::Object(mut o) = value else {
        return Err(bad("each file is {path, format, content}".into()));
    };
    let path = match o.remove("path") {
        Some(Value::String(p)) => p,
        _ => return Err(bad("a file needs `path`".into())),
    };
    check_path(&path).map_err(|why| bad(format!("{path}: {why}")))?;
    let content = o
        .remove("content")
        .ok_or_else(|| bad(format!("{path}: needs `content`")))?;
    let format = match o.remove("format").as_ref().and_then(Value::as_str) {
        Some("json") => Format::Json,
        Some("yaml") => Format::Yaml,
        Some("text") => Format::Text,
        None if content.is_string() => Format::Text,
        None => Format::Json,
        Some(other) => {
            return Err(bad(format!(
                "{path}: format `{other}` (json, yaml or text)"
            )));
        }
    };
    match (format, content.is_string()) {
        (Format::Text, false) => Err(bad(format!("{path}: format text needs a string content"))),
        (Format::Json | Format::Yaml, true) => Err(bad(format!(
            "{path}: a json or yaml file needs structured content (wrap it in a mapping, or \
             write format: text)"
        ))),
        _ => Ok(UserFile {
            path,
            format,
            content,
        }),
    }
}

/// A path that stays in the run directory.
fn check_path(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("an empty path");
    }
    if path.chars().any(|c| c.is_control()) {
        return Err("a control character in the path");
    }
    let p = Path::new(path);
    if p.is_absolute() || path.starts_with('/') {
        return Err("an absolute path (paths are inside the run directory)");
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err("a `..` segment (paths stay inside the run directory)");
    }
    Ok(())
}

/// `value` with its template strings rendered, read back as numbers and
/// booleans where `coerce` (json, yaml).
fn render(
    env: &Environment<'_>,
    value: &Value,
    context: &Map<String, Value>,
    coerce: bool,
) -> Result<Value, minijinja::Error> {
    Ok(match value {
        Value::String(s) if ["{{", "{%", "{#"].iter().any(|m| s.contains(m)) => {
            let text = env.render_str(s, context)?;
            if coerce {
                coerced(text)
            } else {
                Value::String(text)
            }
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| render(env, v, context, coerce))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, v)| Ok((k.clone(), render(env, v, context, coerce)?)))
                .collect::<Result<_, minijinja::Error>>()?,
        ),
        other => other.clone(),
    })
}

/// AIPerf's `_coerce_scalar`: `true`/`false`, an integer, a number, else
/// the string.
fn coerced(text: String) -> Value {
    let t = text.trim();
    if t.eq_ignore_ascii_case("true") || t.eq_ignore_ascii_case("false") {
        return Value::Bool(t.eq_ignore_ascii_case("true"));
    }
    if let Ok(i) = t.parse::<i64>() {
        return Value::from(i);
    }
    match t.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
        Some(n) => Value::Number(n),
        None => Value::String(text),
    }
}

/// `value` as block-style YAML (PyYAML's `safe_dump` without flow style),
/// `indent` spaces in.
fn yaml(value: &Value, indent: usize) -> String {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(o) if !o.is_empty() => o
            .iter()
            .map(|(k, v)| match v {
                Value::Object(c) if !c.is_empty() => {
                    format!("{pad}{}:\n{}", scalar(k), yaml(v, indent + 2))
                }
                Value::Array(a) if !a.is_empty() => {
                    format!("{pad}{}:\n{}", scalar(k), yaml(v, indent))
                }
                _ => format!("{pad}{}: {}\n", scalar(k), yaml_scalar(v)),
            })
            .collect(),
        Value::Array(a) if !a.is_empty() => a
            .iter()
            .map(|v| match v {
                Value::Object(c) if !c.is_empty() => {
                    let inner = yaml(v, indent + 2);
                    format!("{pad}- {}", inner.trim_start())
                }
                Value::Array(x) if !x.is_empty() => format!("{pad}-\n{}", yaml(v, indent + 2)),
                _ => format!("{pad}- {}\n", yaml_scalar(v)),
            })
            .collect(),
        other => format!("{pad}{}\n", yaml_scalar(other)),
    }
}

fn yaml_scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

/// A string plain where YAML reads it back as the same string, else
/// single-quoted.
fn scalar(s: &str) -> String {
    let reads_as_other = s.parse::<f64>().is_ok()
        || matches!(
            s.to_ascii_lowercase().as_str(),
            "" | "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~"
        );
    let plain = !reads_as_other
        && !s.starts_with(|c: char| "-?:,[]{}#&*!|>'\"%@` ".contains(c))
        && !s.ends_with(' ')
        && !s.contains(": ")
        && !s.contains(" #")
        && !s.contains('\n')
        && !s.chars().any(char::is_control);
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_in(dir: &Path) -> RunContext<'_> {
        RunContext {
            dir,
            model: "m",
            endpoint_url: "http://user:secret@h:8000",
            epoch_s: 1_714_000_000,
        }
    }

    #[test]
    fn files_are_rendered_with_the_variables_and_the_runs_names() {
        let files = UserFiles::parse(
            r#"{"variables": {"per_gpu": 32, "label": "dense", "epoch": "mine"},
                "files": [
                  {"path": "input_config.json",
                   "content": {"scenario": "{{ label }}", "total": "{{ per_gpu * 4 }}",
                               "run": {"epoch": "{{ epoch }}", "model": "{{ model }}"}, "literal": "42"}},
                  {"path": "meta/run.yaml", "format": "yaml",
                   "content": {"run_id": "{{ job_name }}-{{ epoch }}", "tags": ["{{ label }}", "isl=1024"],
                               "endpoint": "{{ endpoint_url }}"}},
                  {"path": "README.md", "content": "Model: {{ model }} ({{ per_gpu }}/GPU)\n"}
                ]}"#,
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let run_dir = dir.path().join("run-7");
        let written = files.write(&run_in(&run_dir)).unwrap();
        assert_eq!(written.len(), 3);
        let json: Value =
            serde_json::from_slice(&std::fs::read(run_dir.join("input_config.json")).unwrap())
                .unwrap();
        assert_eq!(json["scenario"], "dense");
        assert_eq!(json["total"], 128, "a rendered number is a number");
        assert_eq!(json["literal"], "42", "a literal string stays one");
        assert_eq!(json["run"]["epoch"], 1_714_000_000, "the run's epoch wins");
        let yaml = std::fs::read_to_string(run_dir.join("meta/run.yaml")).unwrap();
        assert_eq!(
            yaml,
            "endpoint: http://h:8000\nrun_id: run-7-1714000000\ntags:\n- dense\n- isl=1024\n"
        );
        assert!(!yaml.contains("secret"));
        let text = std::fs::read_to_string(run_dir.join("README.md")).unwrap();
        assert_eq!(text, "Model: m (32/GPU)\n");
    }

    #[test]
    fn bad_files_are_refused_by_path() {
        for (text, says) in [
            (r#"[{"path": "/etc/x", "content": "a"}]"#, "absolute"),
            (r#"[{"path": "a/../../x", "content": "a"}]"#, "`..`"),
            (
                r#"[{"path": "x.json", "format": "json", "content": "a"}]"#,
                "structured",
            ),
            (
                r#"[{"path": "x.txt", "format": "text", "content": {"a": 1}}]"#,
                "string content",
            ),
            (
                r#"[{"path": "x", "format": "toml", "content": "a"}]"#,
                "format `toml`",
            ),
            (r#"[{"content": "a"}]"#, "needs `path`"),
        ] {
            let err = UserFiles::parse(text).unwrap_err().to_string();
            assert!(
                err.contains(says) && err.contains("--user-files"),
                "{text}: {err}"
            );
        }
        let files = UserFiles::parse(r#"[{"path": "x.txt", "content": "{{ nope }}"}]"#).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let err = files.write(&run_in(dir.path())).unwrap_err().to_string();
        assert!(err.contains("x.txt: rendering failed"), "{err}");
    }

    #[test]
    fn yaml_quotes_what_would_read_back_as_something_else() {
        let v: Value = serde_json::json!({"a": "1.5", "b": "yes", "c": "plain text", "d": "x: y",
            "e": [1, {"f": true}], "g": {}});
        assert_eq!(
            yaml(&v, 0),
            "a: '1.5'\nb: 'yes'\nc: plain text\nd: 'x: y'\ne:\n- 1\n- f: true\ng: {}\n"
        );
    }
}
