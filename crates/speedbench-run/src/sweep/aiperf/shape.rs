//! The shape AIPerf gives a config before it reads it: `${VAR:default}`
//! substituted, camelCase keys as snake_case, the shorthands (`model:`,
//! `dataset:`, a flat `phases:`, `warmup:`/`profiling:`) expanded, and a
//! sweep's dotted path set in the `benchmark` block.

use super::super::file::Source;
use crate::yaml::{Key, Node, Value};

/// `file:line`.
pub(super) fn at(source: &Source<'_>, line: usize) -> String {
    format!("{}:{line}", source.path.display())
}

/// `schemaVersion` -> `schema_version` (AIPerf accepts both spellings).
pub(super) fn snake(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if !out.is_empty() && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Every key as snake_case, except inside the maps whose keys are the
/// user's own (request body fields, header names, template variables,
/// user files' content; sweep paths' segments are converted where they
/// are read).
pub(crate) fn snake_keys(node: Node) -> Node {
    let value = match node.value {
        Value::Map(entries) => Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| {
                    let name = snake(&k.name);
                    let users_own = ["extra", "headers", "parameters", "variables", "user_files"];
                    let v = if users_own.contains(&name.as_str()) {
                        v
                    } else {
                        snake_keys(v)
                    };
                    (Key { name, line: k.line }, v)
                })
                .collect(),
        ),
        Value::List(items) => Value::List(items.into_iter().map(snake_keys).collect()),
        other => other,
    };
    Node {
        line: node.line,
        value,
    }
}

/// `${VAR}` and `${VAR:default}` in every string, as AIPerf substitutes
/// them: a string that is one reference becomes a number or boolean when
/// its text is one (`${TIMEOUT:600.0}` is 600.0); a variable without a
/// default that is not set is refused.
pub(crate) fn substitute(
    node: Node,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Node, (usize, String)> {
    let line = node.line;
    let value = match node.value {
        Value::Str(s) => substitute_text(&s, env).map_err(|m| (line, m))?,
        Value::List(items) => Value::List(
            items
                .into_iter()
                .map(|n| substitute(n, env))
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(entries) => Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| Ok((k, substitute(v, env)?)))
                .collect::<Result<_, _>>()?,
        ),
        other => other,
    };
    Ok(Node { line, value })
}

fn substitute_text(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Value, String> {
    let mut out = String::new();
    let mut rest = text;
    let mut references = 0;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("`{text}`: a `${{` without its closing `}}`"))?;
        let inner = &after[..end];
        let (name, default) = match inner.split_once(':') {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        let valid = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!(
                "`${{{inner}}}`: `{name}` is not an environment variable's name"
            ));
        }
        match (env(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(format!(
                    "`${{{name}}}`: the environment variable {name} is not set and has no default \
                     (write `${{{name}:default}}`)"
                ));
            }
        }
        references += 1;
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    let whole = references == 1 && text.starts_with("${") && text.ends_with('}');
    Ok(if whole { coerce(out) } else { Value::Str(out) })
}

/// AIPerf's `_coerce_scalar_string`: `true`/`false`, an integer, a float,
/// else the text.
pub(super) fn coerce(text: String) -> Value {
    if text.eq_ignore_ascii_case("true") {
        return Value::Bool(true);
    }
    if text.eq_ignore_ascii_case("false") {
        return Value::Bool(false);
    }
    if let Ok(i) = text.parse::<i64>() {
        return Value::Int(i);
    }
    match text.parse::<f64>() {
        Ok(f) => Value::Float(f),
        Err(_) => Value::Str(text),
    }
}

fn entry(name: &str, line: usize, value: Node) -> (Key, Node) {
    (
        Key {
            name: name.into(),
            line,
        },
        value,
    )
}

fn text_node(line: usize, text: &str) -> Node {
    Node {
        line,
        value: Value::Str(text.into()),
    }
}

/// A mapping with `name` (and `kind`) put first unless it has them.
fn named(node: Node, name: &str, kind: bool) -> Node {
    let Value::Map(mut entries) = node.value else {
        return node;
    };
    if kind && !entries.iter().any(|(k, _)| k.name == "kind") {
        entries.insert(0, entry("kind", node.line, text_node(node.line, name)));
    }
    if !entries.iter().any(|(k, _)| k.name == "name") {
        entries.insert(0, entry("name", node.line, text_node(node.line, name)));
    }
    Node {
        line: node.line,
        value: Value::Map(entries),
    }
}

/// AIPerf's `normalize_benchmark_input`: `model` -> `models`, `dataset`
/// -> `datasets: [{name: default, ...}]`, a flat `phases:` -> one phase
/// named `profiling`, `warmup:`/`profiling:` -> `phases`.
pub(crate) fn normalize_benchmark(benchmark: Node) -> Result<Node, (usize, String)> {
    let line = benchmark.line;
    let Value::Map(entries) = benchmark.value else {
        return Err((line, "`benchmark:` is a mapping".into()));
    };
    let has = |n: &str| entries.iter().any(|(k, _)| k.name == n);
    for (a, b) in [
        ("warmup", "phases"),
        ("profiling", "phases"),
        ("dataset", "datasets"),
        ("model", "models"),
    ] {
        if has(a) && has(b) {
            return Err((
                line,
                format!("benchmark: `{a}` cannot be used with `{b}` (AIPerf refuses it too)"),
            ));
        }
    }
    if has("warmup") && !has("profiling") {
        return Err((
            line,
            "benchmark: `warmup` requires `profiling` (a warmup alone measures nothing)".into(),
        ));
    }
    let mut out: Vec<(Key, Node)> = Vec::new();
    let mut phases: Vec<Node> = Vec::new();
    // Where the phases stand among the fields (refusals come in file order).
    let mut phases_at: Option<(usize, usize)> = None;
    for (key, value) in entries {
        match key.name.as_str() {
            "warmup" | "profiling" => {
                phases_at.get_or_insert((out.len(), key.line));
                phases.push(named(value, &key.name, true));
            }
            "dataset" => out.push(entry(
                "datasets",
                key.line,
                list(vec![named(value, "default", false)], key.line),
            )),
            "model" => out.push(entry("models", key.line, value)),
            "phases" => out.push(entry("phases", key.line, flat_phases(value))),
            _ => out.push((key, value)),
        }
    }
    if let Some((index, phases_line)) = phases_at {
        phases.sort_by_key(|p| {
            p.get("kind").and_then(Node::scalar_text).as_deref() != Some("warmup")
        });
        out.insert(
            index,
            entry("phases", phases_line, list(phases, phases_line)),
        );
    }
    Ok(Node {
        line,
        value: Value::Map(out),
    })
}

fn list(items: Vec<Node>, line: usize) -> Node {
    Node {
        line,
        value: Value::List(items),
    }
}

/// A flat `phases: {type: ...}` is one phase named `profiling`; in a list,
/// a phase named `warmup` or `profiling` is of that kind.
fn flat_phases(phases: Node) -> Node {
    let line = phases.line;
    match phases.value {
        Value::Map(_) if phases.get("type").is_some() => {
            list(vec![named(phases, "profiling", true)], line)
        }
        Value::List(items) => list(
            items
                .into_iter()
                .map(|p| match p.get("name").and_then(Node::scalar_text) {
                    Some(n) if n == "warmup" || n == "profiling" => named(p, &n, true),
                    _ => p,
                })
                .collect(),
            line,
        ),
        _ => phases,
    }
}

/// Sets `path` (`datasets.main.format`, `phases.profiling.rate`) in the
/// benchmark block: a list's element is found by its `name`, a missing
/// mapping key is added.
pub(crate) fn set_path(
    benchmark: &mut Node,
    path: &str,
    value: Node,
) -> Result<(), (usize, String)> {
    let line = value.line;
    // A list entry is found by its `name` as written; a mapping's key in
    // snake_case, as every key was read.
    let segments: Vec<&str> = path.split('.').collect();
    let mut node = benchmark;
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        node = match &mut node.value {
            Value::List(items) => items
                .iter_mut()
                .find(|n| n.get("name").and_then(Node::scalar_text).as_deref() == Some(*segment))
                .ok_or_else(|| {
                    (
                        line,
                        format!(
                            "sweep parameter `{path}`: no entry named `{segment}` in that list"
                        ),
                    )
                })?,
            Value::Map(entries) => {
                let segment = snake(segment);
                if !entries.iter().any(|(k, _)| k.name == segment) {
                    entries.push(entry(
                        &segment,
                        line,
                        Node {
                            line,
                            value: Value::Null,
                        },
                    ));
                }
                &mut entries
                    .iter_mut()
                    .find(|(k, _)| k.name == segment)
                    .expect("just added")
                    .1
            }
            _ => {
                return Err((
                    line,
                    format!(
                        "sweep parameter `{path}`: `{segment}` is not inside a mapping or list"
                    ),
                ));
            }
        };
        if last {
            *node = value;
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::yaml::parse;

    fn env(name: &str) -> Option<String> {
        (name == "SET").then(|| "value".to_string())
    }

    #[test]
    fn variables_are_substituted_as_aiperf_does() {
        let sub = |t: &str| substitute_text(t, &env);
        assert_eq!(sub("${SET}").unwrap(), Value::Str("value".into()));
        assert_eq!(sub("${UNSET:600.0}").unwrap(), Value::Float(600.0));
        assert_eq!(sub("${UNSET:8}").unwrap(), Value::Int(8));
        assert_eq!(sub("${UNSET:true}").unwrap(), Value::Bool(true));
        assert_eq!(
            sub("x-${SET}-${UNSET:}").unwrap(),
            Value::Str("x-value-".into())
        );
        assert_eq!(
            sub("${UNSET:http://h:1/v1}").unwrap(),
            Value::Str("http://h:1/v1".into())
        );
        assert!(sub("${UNSET}").unwrap_err().contains("UNSET is not set"));
        assert!(sub("${SET").unwrap_err().contains("closing"));
    }

    #[test]
    fn shorthands_expand_to_aiperfs_long_forms() {
        let doc = parse("model: m\ndataset:\n  type: file\nwarmup:\n  type: concurrency\nprofiling:\n  type: poisson\n").unwrap();
        let b = normalize_benchmark(snake_keys(doc)).unwrap();
        assert_eq!(b.get("models").unwrap().scalar_text().unwrap(), "m");
        let Value::List(ds) = &b.get("datasets").unwrap().value else {
            panic!()
        };
        assert_eq!(ds[0].get("name").unwrap().scalar_text().unwrap(), "default");
        let Value::List(ph) = &b.get("phases").unwrap().value else {
            panic!()
        };
        let kinds: Vec<String> = ph
            .iter()
            .map(|p| p.get("kind").unwrap().scalar_text().unwrap())
            .collect();
        assert_eq!(kinds, ["warmup", "profiling"]);
        let flat = normalize_benchmark(parse("phases:\n  type: concurrency\n").unwrap()).unwrap();
        let Value::List(ph) = &flat.get("phases").unwrap().value else {
            panic!()
        };
        assert_eq!(
            ph[0].get("name").unwrap().scalar_text().unwrap(),
            "profiling"
        );
        assert!(
            normalize_benchmark(parse("warmup: {}\n").unwrap())
                .unwrap_err()
                .1
                .contains("requires")
        );
        assert_eq!(snake("excludeFromResults"), "exclude_from_results");
    }

    #[test]
    fn a_sweep_path_finds_list_entries_by_name() {
        let mut b = parse(
            "datasets:\n  - name: main\n    format: a\nphases:\n  - name: profiling\n    rate: 1\n",
        )
        .unwrap();
        let v = |t: &str| Node {
            line: 9,
            value: Value::Str(t.into()),
        };
        set_path(&mut b, "datasets.main.format", v("b")).unwrap();
        set_path(&mut b, "phases.profiling.gracePeriod", v("5")).unwrap();
        // An entry's name keeps its spelling (camelCase keys become snake_case).
        let mut named = parse("datasets:\n  - name: mainSet\n").unwrap();
        set_path(&mut named, "datasets.mainSet.format", v("c")).unwrap();
        assert!(set_path(&mut named, "datasets.main_set.format", v("c")).is_err());
        let Value::List(ds) = &b.get("datasets").unwrap().value else {
            panic!()
        };
        assert_eq!(ds[0].get("format").unwrap(), &v("b"));
        assert!(
            set_path(&mut b, "datasets.other.format", v("c"))
                .unwrap_err()
                .1
                .contains("no entry named `other`")
        );
    }
}
