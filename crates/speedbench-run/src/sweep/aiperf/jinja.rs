//! AIPerf's Jinja2 in config values (`aiperf/config/loader/jinja.py`):
//! a string holding `{{ expression }}` or `{% block %}` is rendered, after
//! `${VAR}` substitution and before anything else reads the config, with
//! the document's own values and its `variables` block, and the result
//! read back as a boolean, an integer or a number where it is one
//! (`"{{ base_concurrency * 4 }}"` is the integer 64).
//!
//! The context is AIPerf's: every top-level field of the document and of
//! its `benchmark` block by name (a list of named entries, such as
//! `phases`, as a mapping by name: `{{ phases.profiling.rate }}`), and
//! every variable, each rendered in the order their references need (a
//! cycle is refused, naming the variables in it). A name that is not
//! defined is an error naming the field, never an empty string. Strings
//! rendered at request time by AIPerf (`template`, `body`,
//! `payload_template`) and `artifacts.user_files` are left as written.

use std::collections::BTreeMap;

use minijinja::{Environment, UndefinedBehavior, Value as Jinja};

use crate::yaml::{Key, Node, Value};

/// Fields whose strings AIPerf renders later, with their own context.
const SKIPPED_FIELDS: [&str; 3] = ["template", "body", "payload_template"];

/// Subtrees left as written (AIPerf renders them at run start).
const SKIPPED_PATHS: [&str; 4] = [
    "artifacts.user_files",
    "benchmark.artifacts.user_files",
    "artifacts.userFiles",
    "benchmark.artifacts.userFiles",
];

/// `root` with every template string rendered and its `variables` block
/// resolved (kept, rendered, for whoever reads it); the error names the
/// line and the field.
pub(super) fn render(root: Node) -> Result<Node, (usize, String)> {
    if !has_template(&root) {
        return Ok(root);
    }
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    let mut context = document_context(&root);
    let variables = resolve_variables(&env, &root, &mut context)?;
    let mut root = render_node(&env, root, &context, "")?;
    if let (Some(resolved), Value::Map(entries)) = (variables, &mut root.value) {
        for (key, node) in entries.iter_mut() {
            if key.name == "variables" {
                *node = resolved;
                break;
            }
        }
    }
    Ok(root)
}

/// Whether any string of `node` asks for rendering.
fn has_template(node: &Node) -> bool {
    match &node.value {
        Value::Str(s) => is_template(s),
        Value::List(items) => items.iter().any(has_template),
        Value::Map(entries) => entries.iter().any(|(_, v)| has_template(v)),
        _ => false,
    }
}

fn is_template(s: &str) -> bool {
    (s.contains("{{") && s.contains("}}")) || s.contains("{%")
}

/// The names a template sees: the document's top-level fields and the
/// `benchmark` block's, lists of named entries as mappings by name.
fn document_context(root: &Node) -> BTreeMap<String, Jinja> {
    let mut context = BTreeMap::new();
    let top = root.entries().unwrap_or_default();
    let benchmark = root
        .get("benchmark")
        .and_then(Node::entries)
        .unwrap_or_default();
    for (key, value) in top.iter().chain(benchmark) {
        context.insert(key.name.clone(), jinja_value(value, true));
    }
    context
}

/// `node` as a template value; with `by_name`, a list whose entries are
/// mappings with a `name` becomes a mapping by those names.
fn jinja_value(node: &Node, by_name: bool) -> Jinja {
    match &node.value {
        Value::Null => Jinja::from(()),
        Value::Bool(b) => Jinja::from(*b),
        Value::Int(i) => Jinja::from(*i),
        Value::Float(f) => Jinja::from(*f),
        Value::Str(s) => Jinja::from(s.as_str()),
        Value::List(items) => {
            let named: BTreeMap<String, Jinja> = items
                .iter()
                .filter_map(|item| {
                    let name = item.get("name")?.scalar_text()?;
                    Some((name, jinja_value(item, false)))
                })
                .collect();
            if by_name && !named.is_empty() {
                Jinja::from(named)
            } else {
                items.iter().map(|i| jinja_value(i, false)).collect()
            }
        }
        Value::Map(entries) => entries
            .iter()
            .map(|(k, v)| (k.name.clone(), jinja_value(v, false)))
            .collect::<BTreeMap<String, Jinja>>()
            .into(),
    }
}

/// The `variables` block rendered, each variable once the ones it names
/// are (in any order they are written), and added to `context`; `None`
/// without a block.
fn resolve_variables(
    env: &Environment<'_>,
    root: &Node,
    context: &mut BTreeMap<String, Jinja>,
) -> Result<Option<Node>, (usize, String)> {
    let Some(block) = root.get("variables") else {
        return Ok(None);
    };
    let Some(entries) = block.entries() else {
        return Err((
            block.line,
            "`variables`: a mapping of names to values".into(),
        ));
    };
    // A variable's name hides the document field of that name.
    for (key, _) in entries {
        context.remove(&key.name);
    }
    context.remove("variables");
    let mut done = render_in_dependency_order(env, entries, context, block.line)?;
    let order: Vec<&str> = entries.iter().map(|(k, _)| k.name.as_str()).collect();
    done.sort_by_key(|(k, _)| order.iter().position(|n| *n == k.name));
    let resolved: BTreeMap<String, Jinja> = (done.iter())
        .map(|(k, v)| (k.name.clone(), jinja_value(v, true)))
        .collect();
    context.insert("variables".into(), Jinja::from(resolved));
    Ok(Some(Node {
        line: block.line,
        value: Value::Map(done),
    }))
}

/// Each variable rendered once every variable it names is: passes over
/// the ones left until a pass renders none (then a name is undefined, or
/// they name each other in a circle: refused, naming them).
fn render_in_dependency_order(
    env: &Environment<'_>,
    entries: &[(Key, Node)],
    context: &mut BTreeMap<String, Jinja>,
    block_line: usize,
) -> Result<Vec<(Key, Node)>, (usize, String)> {
    let mut pending: Vec<&(Key, Node)> = entries.iter().collect();
    let mut done: Vec<(Key, Node)> = Vec::new();
    while !pending.is_empty() {
        let mut waiting = Vec::new();
        let mut last_error = None;
        for entry @ (key, value) in pending.iter().copied() {
            match render_node(
                env,
                value.clone(),
                context,
                &format!("variables.{}", key.name),
            ) {
                Ok(rendered) => {
                    context.insert(key.name.clone(), jinja_value(&rendered, true));
                    done.push((key.clone(), rendered));
                }
                Err(e) => {
                    last_error = Some(e);
                    waiting.push(entry);
                }
            }
        }
        if waiting.len() == pending.len() {
            let names: Vec<&str> = waiting.iter().map(|(k, _)| k.name.as_str()).collect();
            let (line, why) = last_error.unwrap_or((block_line, String::new()));
            return Err((
                line,
                format!(
                    "`variables` {} cannot be rendered: each names one not defined, or they \
                     name each other in a circle ({why})",
                    names.join(", ")
                ),
            ));
        }
        pending = waiting;
    }
    Ok(done)
}

/// `node` with its template strings rendered; `path` is its dotted place
/// in the document.
fn render_node(
    env: &Environment<'_>,
    node: Node,
    context: &BTreeMap<String, Jinja>,
    path: &str,
) -> Result<Node, (usize, String)> {
    if SKIPPED_PATHS.contains(&path) {
        return Ok(node);
    }
    let child = |name: &str| {
        if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}.{name}")
        }
    };
    let line = node.line;
    let value = match node.value {
        Value::Str(s) if is_template(&s) && !SKIPPED_FIELDS.contains(&leaf(path)) => {
            let rendered = env
                .render_str(&s, context)
                .map_err(|e| (line, format!("`{path}`: the template `{s}` fails: {e}")))?;
            coerce(rendered)
        }
        Value::List(items) => Value::List(
            items
                .into_iter()
                .enumerate()
                .map(|(i, item)| render_node(env, item, context, &child(&i.to_string())))
                .collect::<Result<_, _>>()?,
        ),
        Value::Map(entries) => Value::Map(
            entries
                .into_iter()
                .map(|(k, v)| {
                    let rendered = render_node(env, v, context, &child(&k.name))?;
                    Ok((k, rendered))
                })
                .collect::<Result<_, (usize, String)>>()?,
        ),
        other => other,
    };
    Ok(Node { line, value })
}

fn leaf(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// A rendered string read as AIPerf does (`_coerce_rendered`): `true` or
/// `false` (any case), an integer, a number, else the string as rendered.
fn coerce(rendered: String) -> Value {
    match super::shape::coerce(rendered.trim().to_string()) {
        Value::Str(_) => Value::Str(rendered),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rendered(text: &str) -> Result<Node, (usize, String)> {
        render(crate::yaml::parse(text).unwrap())
    }

    #[test]
    fn expressions_use_variables_in_any_order_and_become_numbers() {
        let doc = rendered(
            "variables:\n  total: \"{{ per_gpu * gpus }}\"\n  per_gpu: 32\n  gpus: 4\n\
             benchmark:\n  dataset:\n    entries: \"{{ total * 4 }}\"\n    \
             isl: {mean: \"{{ total // 10 }}\", stddev: \"{{ 0.5 * 3 }}\"}\n  \
             streaming: \"{{ gpus > 2 }}\"\n  model: \"m-{{ gpus }}\"\n",
        )
        .unwrap();
        let b = doc.get("benchmark").unwrap();
        let d = b.get("dataset").unwrap();
        assert_eq!(d.get("entries").unwrap().value, Value::Int(512));
        let isl = d.get("isl").unwrap();
        assert_eq!(isl.get("mean").unwrap().value, Value::Int(12));
        assert_eq!(isl.get("stddev").unwrap().value, Value::Float(1.5));
        assert_eq!(b.get("streaming").unwrap().value, Value::Bool(true));
        assert_eq!(b.get("model").unwrap().value, Value::Str("m-4".into()));
        // The line of a rendered value is the template's.
        assert_eq!(d.get("entries").unwrap().line, 7);
        let vars = doc.get("variables").unwrap();
        assert_eq!(vars.get("total").unwrap().value, Value::Int(128));
    }

    #[test]
    fn the_documents_own_fields_are_names_too() {
        let doc = rendered(
            "benchmark:\n  phases:\n    - name: profiling\n      rate: 20\n  \
             artifacts:\n    dir: \"./runs/rate-{{ phases.profiling.rate }}\"\n",
        )
        .unwrap();
        let dir = doc
            .get("benchmark")
            .unwrap()
            .get("artifacts")
            .unwrap()
            .get("dir")
            .unwrap();
        assert_eq!(dir.value, Value::Str("./runs/rate-20".into()));
    }

    #[test]
    fn undefined_names_and_circles_are_errors_naming_the_field() {
        let (line, err) =
            rendered("benchmark:\n  model: x\n  dataset:\n    entries: \"{{ nope }}\"\n")
                .unwrap_err();
        assert_eq!(line, 4);
        assert!(
            err.contains("`benchmark.dataset.entries`") && err.contains("{{ nope }}"),
            "{err}"
        );
        let (_, err) = rendered("variables:\n  a: \"{{ b }}\"\n  b: \"{{ a }}\"\n").unwrap_err();
        assert!(err.contains("`variables` a, b cannot be rendered"), "{err}");
    }

    #[test]
    fn request_time_templates_and_user_files_are_left_as_written() {
        let doc = rendered(
            "variables:\n  v: 1\nbenchmark:\n  endpoint:\n    template: \"{{ text }}\"\n  \
             artifacts:\n    user_files:\n      - content: \"{{ epoch }}\"\n",
        )
        .unwrap();
        let b = doc.get("benchmark").unwrap();
        let t = b.get("endpoint").unwrap().get("template").unwrap();
        assert_eq!(t.value, Value::Str("{{ text }}".into()));
        let uf = b.get("artifacts").unwrap().get("user_files").unwrap();
        assert!(has_template(uf));
    }
}
