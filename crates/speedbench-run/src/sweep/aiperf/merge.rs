//! A scenario's `benchmark` laid over the config's, as AIPerf 0.13.0 does
//! for `sweep: {type: scenarios}` (`_deep_merge`,
//! aiperf/config/sweep/expand.py): mappings merge key by key; lists of
//! named mappings (`phases`, `datasets`) merge entry by entry by `name`,
//! new names appended; a length distribution whose kind changes
//! (`{mean, stddev}` to `{mean, median}` or `peaks`) is replaced whole, not
//! merged into a mixture of both; anything else is replaced.

use crate::yaml::{Key, Node, Value};

/// The keys that tell one kind of length distribution from another
/// (AIPerf's `_DIST_DISCRIMINATOR_KEYS`; `mean` is common to several).
const DISTRIBUTION_KEYS: [&str; 5] = ["peaks", "points", "value", "median", "stddev"];

/// `overlay` merged into `base` (both mappings; a non-mapping `overlay`
/// replaces `base`).
pub(super) fn deep_merge(base: &mut Node, overlay: &Node) {
    let (Value::Map(entries), Value::Map(over)) = (&mut base.value, &overlay.value) else {
        *base = overlay.clone();
        return;
    };
    for (key, value) in over {
        match entries.iter_mut().find(|(k, _)| k.name == key.name) {
            Some((_, existing)) => merge_value(existing, value),
            None => entries.push((key.clone(), value.clone())),
        }
    }
}

fn merge_value(existing: &mut Node, value: &Node) {
    let maps = matches!(existing.value, Value::Map(_)) && matches!(value.value, Value::Map(_));
    if maps && !distribution_swap(existing, value) {
        return deep_merge(existing, value);
    }
    if let (Value::List(items), Value::List(over)) = (&mut existing.value, &value.value)
        && named_list(items)
        && named_list(over)
    {
        for entry in over {
            let name = entry.get("name").and_then(Node::scalar_text);
            match items
                .iter_mut()
                .find(|i| i.get("name").and_then(Node::scalar_text) == name)
            {
                Some(item) => deep_merge(item, entry),
                None => items.push(entry.clone()),
            }
        }
        return;
    }
    *existing = value.clone();
}

/// Both sides name a kind of distribution, and not the same kind.
fn distribution_swap(base: &Node, overlay: &Node) -> bool {
    let kind = |n: &Node| -> Vec<&str> {
        (n.entries().unwrap_or_default().iter())
            .filter_map(|(k, _)| DISTRIBUTION_KEYS.iter().copied().find(|d| *d == k.name))
            .collect()
    };
    let (mut a, mut b) = (kind(base), kind(overlay));
    a.sort_unstable();
    b.sort_unstable();
    !a.is_empty() && !b.is_empty() && a != b
}

/// A non-empty list whose every entry is a mapping with a string `name`.
fn named_list(items: &[Node]) -> bool {
    !items.is_empty()
        && items
            .iter()
            .all(|i| matches!(i.get("name").map(|n| &n.value), Some(Value::Str(_))))
}

/// A scenario's `dataset:` (the one-dataset shorthand) laid over a config
/// whose `datasets:` list holds one dataset: rewritten as that list's
/// entry, by its name, so the merge finds it (AIPerf's
/// `_normalize_scenario_dataset_form`). Anything else is left as it is.
pub(super) fn dataset_as_list_entry(overlay: &mut Node, base: &Node) {
    let Some(Value::List(datasets)) = base.get("datasets").map(|d| &d.value) else {
        return;
    };
    let [only] = datasets.as_slice() else {
        return;
    };
    let Some(name) = only.get("name").cloned() else {
        return;
    };
    let Value::Map(entries) = &mut overlay.value else {
        return;
    };
    let Some(at) = entries.iter().position(|(k, _)| k.name == "dataset") else {
        return;
    };
    let (key, mut dataset) = entries.remove(at);
    if let Value::Map(fields) = &mut dataset.value
        && !fields.iter().any(|(k, _)| k.name == "name")
    {
        let name_key = Key {
            name: "name".into(),
            line: key.line,
        };
        fields.insert(0, (name_key, name));
    }
    let line = dataset.line;
    let list_key = Key {
        name: "datasets".into(),
        line: key.line,
    };
    entries.push((
        list_key,
        Node {
            line,
            value: Value::List(vec![dataset]),
        },
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn yaml(text: &str) -> Node {
        crate::yaml::parse(text).unwrap()
    }

    #[test]
    fn phases_merge_by_name_and_distributions_of_another_kind_are_replaced() {
        let mut base = yaml(
            "dataset:\n  entries: 10\n  prompts:\n    isl: {mean: 512, stddev: 50}\n    osl: {mean: 128, stddev: 25}\nphases:\n  - name: warmup\n    requests: 5\n  - name: profiling\n    rate: 20.0\n    duration: 180\n",
        );
        let overlay = yaml(
            "dataset:\n  prompts:\n    isl: {mean: 1024, median: 904}\n    osl: {mean: 64, stddev: 10}\nphases:\n  - name: profiling\n    rate: 5.0\n  - name: cooldown\n    requests: 1\n",
        );
        deep_merge(&mut base, &overlay);
        let want = yaml(
            "dataset:\n  entries: 10\n  prompts:\n    isl: {mean: 1024, median: 904}\n    osl: {mean: 64, stddev: 10}\nphases:\n  - name: warmup\n    requests: 5\n  - name: profiling\n    rate: 5.0\n    duration: 180\n  - name: cooldown\n    requests: 1\n",
        );
        assert_eq!(strip_lines(base), strip_lines(want));
    }

    #[test]
    fn a_one_dataset_list_takes_the_shorthand_by_its_name() {
        let base = yaml("datasets:\n  - name: main\n    entries: 10\n");
        let mut overlay = yaml("dataset:\n  entries: 20\n");
        dataset_as_list_entry(&mut overlay, &base);
        let mut merged = base.clone();
        deep_merge(&mut merged, &overlay);
        let want = yaml("datasets:\n  - name: main\n    entries: 20\n");
        assert_eq!(strip_lines(merged), strip_lines(want));
    }

    /// The tree without its line numbers (they differ by source).
    fn strip_lines(node: Node) -> Node {
        let value = match node.value {
            Value::Map(m) => Value::Map(
                m.into_iter()
                    .map(|(k, v)| {
                        (
                            Key {
                                name: k.name,
                                line: 0,
                            },
                            strip_lines(v),
                        )
                    })
                    .collect(),
            ),
            Value::List(l) => Value::List(l.into_iter().map(strip_lines).collect()),
            other => other,
        };
        Node { line: 0, value }
    }
}
