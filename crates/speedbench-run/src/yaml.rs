//! YAML read into a small tree whose every node and key keeps its line, so
//! a config file's refusal names the line (`speed_bench_sweep.yaml:71`).

use saphyr::{LoadableYamlNode, MarkedYaml, Scalar, YamlData};

/// A YAML value and the line it starts on (from 1).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    /// The line it starts on, from 1.
    pub line: usize,
    /// What it holds.
    pub value: Value,
}

/// What a YAML node holds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    /// `~`, `null` or nothing.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// A string.
    Str(String),
    /// A sequence.
    List(Vec<Node>),
    /// A mapping, in file order: each key with its line, and its value.
    Map(Vec<(Key, Node)>),
}

/// A mapping's key and its line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Key {
    /// The key as written.
    pub name: String,
    /// Its line, from 1.
    pub line: usize,
}

impl Node {
    /// The mapping's entries, if it is one.
    pub(crate) fn entries(&self) -> Option<&[(Key, Node)]> {
        match &self.value {
            Value::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The value of `key` in a mapping.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        self.entries()?
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(_, v)| v)
    }

    /// The key `key` of a mapping, with its line.
    pub(crate) fn key(&self, key: &str) -> Option<&Key> {
        self.entries()?
            .iter()
            .find(|(k, _)| k.name == key)
            .map(|(k, _)| k)
    }

    /// A scalar as the text a flag takes (`None` for a list or mapping).
    pub(crate) fn scalar_text(&self) -> Option<String> {
        match &self.value {
            Value::Null => Some(String::new()),
            Value::Bool(b) => Some(b.to_string()),
            Value::Int(i) => Some(i.to_string()),
            Value::Float(f) => Some(f.to_string()),
            Value::Str(s) => Some(s.clone()),
            Value::List(_) | Value::Map(_) => None,
        }
    }

    /// What kind of value it is, for an error (`a list`).
    pub(crate) fn kind(&self) -> &'static str {
        match self.value {
            Value::Null => "nothing",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::List(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

/// Parses one YAML document; `Err` holds the line and what is wrong.
/// An alias reads as its anchor's value; a tag is refused (no config
/// field takes one).
pub(crate) fn parse(text: &str) -> Result<Node, (usize, String)> {
    refuse_tags(text)?;
    let docs =
        MarkedYaml::load_from_str(text).map_err(|e| (e.marker().line(), e.info().to_string()))?;
    let mut docs = docs.into_iter();
    let doc = docs
        .next()
        .ok_or((1, "the file holds no YAML document".to_string()))?;
    if let Some(second) = docs.next() {
        return Err((
            line_of(&second),
            "a second YAML document (after `---`); one file holds one".into(),
        ));
    }
    convert(&doc)
}

/// Refuses any tag (`!!python/object/apply:...`, `!mine`): saphyr's loader
/// keeps a scalar's tag but drops a collection's, so a tagged list read as
/// its plain items; the parser's events show every one.
fn refuse_tags(text: &str) -> Result<(), (usize, String)> {
    use saphyr_parser::{Event, Parser};
    for event in Parser::new_from_str(text) {
        // A syntax error is the loader's to report, with its words.
        let Ok((event, span)) = event else {
            return Ok(());
        };
        let tag = match &event {
            Event::Scalar(_, _, _, tag) => tag.as_ref(),
            Event::SequenceStart(_, tag) | Event::MappingStart(_, tag) => tag.as_ref(),
            _ => None,
        };
        if let Some(tag) = tag {
            // As the file wrote it: `!!` is the core schema's prefix.
            let handle = match tag.handle.as_str() {
                "tag:yaml.org,2002:" => "!!",
                other => other,
            };
            return Err((
                span.start.line().max(1),
                format!(
                    "the YAML tag `{handle}{}` is not read; write the value out",
                    tag.suffix
                ),
            ));
        }
    }
    Ok(())
}

fn line_of(node: &MarkedYaml<'_>) -> usize {
    node.span.start.line().max(1)
}

fn convert(node: &MarkedYaml<'_>) -> Result<Node, (usize, String)> {
    let line = line_of(node);
    let value = match &node.data {
        YamlData::Value(scalar) => match scalar {
            Scalar::Null => Value::Null,
            Scalar::Boolean(b) => Value::Bool(*b),
            Scalar::Integer(i) => Value::Int(*i),
            Scalar::FloatingPoint(f) => Value::Float(f.into_inner()),
            Scalar::String(s) => Value::Str(s.to_string()),
        },
        YamlData::Representation(text, _, _) => Value::Str(text.to_string()),
        YamlData::Sequence(items) => {
            Value::List(items.iter().map(convert).collect::<Result<_, _>>()?)
        }
        YamlData::Mapping(map) => {
            let mut entries = Vec::with_capacity(map.len());
            for (k, v) in map {
                let name = match &k.data {
                    YamlData::Value(Scalar::String(s)) => s.to_string(),
                    YamlData::Value(s) => convert(k)?
                        .scalar_text()
                        .unwrap_or_else(|| format!("{s:?}")),
                    _ => return Err((line_of(k), "a key must be a plain word".into())),
                };
                let key = Key {
                    name,
                    line: line_of(k),
                };
                entries.push((key, convert(v)?));
            }
            Value::Map(entries)
        }
        YamlData::Alias(_) | YamlData::Tagged(..) => {
            return Err((line, "YAML tags are not read; write the value out".into()));
        }
        YamlData::BadValue => return Err((line, "a value YAML cannot read".into())),
    };
    Ok(Node { line, value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_node_and_key_keeps_its_line() {
        let doc = parse("a: 1\nb:\n  - x\n  - 2.5\nc: {d: true}\ne: \"2.0\"\nf:\n").unwrap();
        let entries = doc.entries().unwrap();
        let lines: Vec<(&str, usize)> = entries
            .iter()
            .map(|(k, _)| (k.name.as_str(), k.line))
            .collect();
        assert_eq!(lines, [("a", 1), ("b", 2), ("c", 5), ("e", 6), ("f", 7)]);
        let b = doc.get("b").unwrap();
        let Value::List(items) = &b.value else {
            panic!("{b:?}")
        };
        assert_eq!(
            items[1],
            Node {
                line: 4,
                value: Value::Float(2.5)
            }
        );
        assert_eq!(
            doc.get("c").unwrap().get("d").unwrap().value,
            Value::Bool(true)
        );
        assert_eq!(doc.get("e").unwrap().value, Value::Str("2.0".into()));
        assert_eq!(doc.get("f").unwrap().value, Value::Null);
    }

    #[test]
    fn what_cannot_be_read_is_refused_with_its_line() {
        assert_eq!(parse("a: 1\na: 2\n").unwrap_err().0, 2);
        // An alias is its anchor's value, as in any YAML reader.
        assert_eq!(
            parse("a: &x 1\nb: *x\n").unwrap().get("b").unwrap().value,
            Value::Int(1)
        );
        assert!(
            parse("a: !mine 1\n").unwrap_err().1.contains("tag"),
            "a tag"
        );
        // A tagged collection too (the loader alone read it as its items).
        assert_eq!(
            parse("a: 1\nmodel: !!python/object/apply:os.system [\"echo hi\"]\n").unwrap_err(),
            (
                2,
                "the YAML tag `!!python/object/apply:os.system` is not read; write the value out"
                    .to_string()
            )
        );
        let (line, why) = parse("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(why.contains("second YAML document"), "{line}: {why}");
        assert_eq!(parse("a: [1,\n").unwrap_err().0, 2);
    }
}
