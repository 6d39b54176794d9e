//! The sweep file of `speedbench profile --config`: what it holds, and how
//! it expands into one `speedbench profile` argument list per run.
//!
//! ```toml
//! [profile]                 # options every run shares, by flag name
//! url = "localhost:8000"
//! streaming = true
//! output_artifact_dir = "artifacts/ladder"   # the sweep's parent directory
//!
//! [matrix]                  # every combination of these lists is one run
//! concurrency = [1, 4, 16]
//!
//! [[variation]]             # or list runs one by one (times the matrix)
//! name = "mtbench"
//! public_dataset = "spec_al_mtbench"
//! num_conversations = 80
//!
//! [report]                  # `speedbench report` options for the report
//! metric = "accept_length"
//! ```
//!
//! Keys are the long flag names (`request_rate` or `request-rate`);
//! `true` sets a switch, a list repeats a repeatable flag. Values are
//! checked when each run's spec is built ([`crate::flags`]), as the
//! command line checks them.

use std::collections::BTreeSet;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::{Spanned, Value};

use crate::error::RunError;
use crate::flags::{self, FlagKind, REPORT_FLAGS, normalize};
use crate::spec::RunSpec;
use crate::yaml::{self, Node};

/// A refusal at a place in the file.
fn fail(at: &str, message: impl Into<String>) -> RunError {
    RunError::invalid(at, message)
}

/// A table of options as written: key and value, each with its place in
/// the file.
pub(crate) type Table = std::collections::BTreeMap<Spanned<String>, Spanned<Value>>;

/// A sweep file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SweepFile {
    /// `speedbench profile` options every run shares.
    #[serde(default)]
    pub profile: Table,
    /// Lists of option values: every combination is one run.
    #[serde(default)]
    pub matrix: Table,
    /// Runs listed one by one, each a table of options and an optional
    /// `name`; each is run once per matrix combination.
    #[serde(default, rename = "variation")]
    pub variations: Vec<Spanned<Table>>,
    /// `speedbench report` options for the report over the runs.
    #[serde(default)]
    pub report: Table,
}

/// Keys of `[profile]` or a variation that a sweep does not take, and why.
const RESERVED: [(&str, &str); 4] = [
    ("config", "a sweep file cannot name another sweep file"),
    ("dry_run", "give --dry-run on the command line"),
    ("help", "not an option of a run"),
    ("version", "not an option of a run"),
];

/// One flag a table may set: its long name and how it takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Flag {
    /// The long name, with dashes; also its identity.
    pub long: &'static str,
    kind: FlagKind,
}

/// The flags of a command, found by the names a sweep file may use.
struct Flags {
    command: &'static str,
    flags: Vec<(&'static str, Flag)>,
}

impl Flags {
    /// `speedbench profile`'s flags: [`crate::flags`].
    fn profile() -> Flags {
        let mut out = Vec::new();
        for f in flags::all() {
            let flag = Flag {
                long: f.long,
                kind: f.kind,
            };
            out.push((f.long, flag));
            out.extend(f.aliases.iter().map(|a| (*a, flag)));
        }
        Flags {
            command: "profile",
            flags: out,
        }
    }

    /// `speedbench report`'s options.
    fn report() -> Flags {
        Flags {
            command: "report",
            flags: REPORT_FLAGS
                .iter()
                .map(|&(long, kind)| (long, Flag { long, kind }))
                .collect(),
        }
    }

    fn find(&self, key: &str) -> Option<&Flag> {
        let key = normalize(key);
        self.flags.iter().find(|(n, _)| *n == key).map(|(_, f)| f)
    }

    fn suggest(&self, key: &str) -> Option<&str> {
        flags::closest(key, self.flags.iter().map(|(n, _)| *n))
    }
}

/// The file's text, for turning byte spans into line numbers.
pub(crate) struct Source<'a> {
    /// The file as given.
    pub path: &'a Path,
    /// Its contents.
    pub text: &'a str,
}

impl Source<'_> {
    fn at(&self, span: Range<usize>) -> String {
        let start = span.start.min(self.text.len());
        let line = self.text[..start].matches('\n').count() + 1;
        format!("{}:{line}", self.path.display())
    }
}

/// One option a table sets.
#[derive(Debug, Clone)]
pub(crate) struct Setting {
    /// The flag.
    pub flag: Flag,
    /// Its values: one, one per list element (repeatable), or `true` /
    /// `false` (a switch).
    pub values: Vec<String>,
    /// The value as text, for the run's directory name.
    text: String,
    /// Where it was written (`sweep.toml:12`).
    pub at: String,
}

impl Setting {
    /// The flag tokens it stands for (`--concurrency=4`; none for a switch
    /// set to false).
    pub(crate) fn tokens(&self) -> Vec<String> {
        match self.flag.kind {
            FlagKind::Switch if self.values == ["true"] => vec![format!("--{}", self.flag.long)],
            FlagKind::Switch => Vec::new(),
            _ => self
                .values
                .iter()
                .map(|v| format!("--{}={v}", self.flag.long))
                .collect(),
        }
    }

    /// `long`'s `values` as written at `at`, checked as the flag checks
    /// them (a config file's field translated to a flag).
    pub(crate) fn new(long: &str, values: Vec<String>, at: String) -> Result<Setting, RunError> {
        let table = flags::find(long).expect("a profile flag");
        let mut probe = RunSpec::default();
        for v in &values {
            table
                .apply(&mut probe, v)
                .map_err(|e| fail(&at, format!("{e}")))?;
        }
        Ok(Setting {
            flag: Flag {
                long: table.long,
                kind: table.kind,
            },
            text: values.join("+"),
            values,
            at,
        })
    }

    /// Sets it in `spec` (a repeatable flag's values are added to the
    /// spec's, which hold none: the command line's flags are not a run's
    /// settings).
    pub(crate) fn apply(&self, spec: &mut RunSpec) -> Result<(), RunError> {
        let flag = flags::find(self.flag.long).expect("a profile flag");
        for value in &self.values {
            flag.apply(spec, value)?;
        }
        Ok(())
    }
}

/// A value as a flag's value, or why it cannot be one.
fn scalar(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Integer(i) => Ok(i.to_string()),
        Value::Float(f) => Ok(f.to_string()),
        Value::Boolean(b) => Ok(b.to_string()),
        Value::Datetime(_) => Err("a date is not a flag value (quote it)".into()),
        Value::Array(_) => Err("a list inside a list is not a flag value".into()),
        Value::Table(_) => Err("a table is not a flag value".into()),
    }
}

fn setting(section: &str, flag: &Flag, value: &Value, at: String) -> Result<Setting, RunError> {
    let key = format!("{section} {}", flag.long.replace('-', "_"));
    let (values, text) = match (flag.kind, value) {
        (FlagKind::Switch, Value::Boolean(b)) => (vec![b.to_string()], b.to_string()),
        (FlagKind::Switch, _) => {
            return Err(fail(&at, format!("{key}: a switch, so true or false")));
        }
        (FlagKind::One, Value::Array(_)) => {
            return Err(fail(
                &at,
                format!(
                    "{key}: takes one value, not a list (to run each value, put the list under [matrix])"
                ),
            ));
        }
        (FlagKind::List | FlagKind::Many, Value::Array(items)) => {
            let texts = items
                .iter()
                .map(scalar)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| fail(&at, format!("{key}: {e}")))?;
            if flag.kind == FlagKind::List {
                // One value naming several (servers, models).
                let text = texts.join(",");
                (vec![text.clone()], text)
            } else {
                let text = texts.join("+");
                (texts, text)
            }
        }
        (_, v) => {
            let text = scalar(v).map_err(|e| fail(&at, format!("{key}: {e}")))?;
            (vec![text.clone()], text)
        }
    };
    Ok(Setting {
        flag: *flag,
        values,
        text,
        at,
    })
}

/// One run of the sweep, as the file describes it.
#[derive(Debug, Clone)]
pub(crate) struct Variation {
    /// Its place in the sweep, from 1.
    pub index: usize,
    /// Its run directory's name under the parent: `<index>-<description>`.
    pub dir_name: String,
    /// What sets it apart from the other runs (`concurrency=4`), or its
    /// `name`.
    pub description: String,
    /// Where the file describes it.
    pub origin: String,
    /// Its `speedbench profile` options from the file, without those the
    /// command line gives.
    pub settings: Vec<Setting>,
}

/// What a sweep file expands to.
#[derive(Debug)]
pub(crate) struct Expanded {
    /// The runs, in order.
    pub variations: Vec<Variation>,
    /// `[profile] output_artifact_dir`: the parent of the runs.
    pub parent: Option<PathBuf>,
    /// The `speedbench report` flags of `[report]`.
    pub report_tokens: Vec<String>,
    /// Each value an environment variable gave a `${VAR}` of the file, with
    /// the reference (`${VAR}`): it may be a secret, so a message or a
    /// printed flag names the variable instead.
    pub env_values: Vec<(String, String)>,
    /// An AIPerf config's `multiRun` of more than one trial: its one run
    /// repeated so.
    pub trials: Option<crate::RepeatSpec>,
    /// An AIPerf config's `plot:`: the plots drawn once the sweep ended.
    pub plots: super::SweepPlots,
}

/// Where a table's key sends it.
enum Key<'a> {
    /// A flag of the command.
    Flag(&'a Flag),
    /// `name` of a variation.
    Name,
    /// `output_artifact_dir` of `[profile]`: the parent.
    Parent,
}

/// A key of a table, its value, and what the key names.
type Entry<'t, 'f> = (&'t Spanned<String>, &'t Spanned<Value>, Key<'f>);

/// The table's keys, in file order, with what each names; refuses keys
/// that are not flags or not allowed in `section`.
fn keys<'t, 'f>(
    source: &Source<'_>,
    section: &str,
    table: &'t Table,
    flags: &'f Flags,
) -> Result<Vec<Entry<'t, 'f>>, RunError> {
    let mut entries: Vec<_> = table.iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    let mut out: Vec<Entry<'t, 'f>> = Vec::new();
    for (key, value) in entries {
        let at = source.at(key.span());
        let name = normalize(key.get_ref()).replace('-', "_");
        if let Some((_, why)) = RESERVED.iter().find(|(r, _)| *r == name) {
            return Err(fail(&at, format!("{section} {}: {why}", key.get_ref())));
        }
        let what = key_meaning(&at, section, &name, key.get_ref(), flags)?;
        if let Key::Flag(flag) = &what
            && let Some((earlier, _, _)) = out
                .iter()
                .find(|(_, _, k)| matches!(k, Key::Flag(f) if f.long == flag.long))
        {
            return Err(fail(
                &at,
                format!(
                    "{section} {}: the same option as {} (line above); give it once",
                    key.get_ref(),
                    earlier.get_ref()
                ),
            ));
        }
        out.push((key, value, what));
    }
    Ok(out)
}

/// What a key of `section` names (`name` the key as normalized, `given`
/// as written): a flag, a variation's name, the sweep's parent; keys that
/// no section or not this one may set are refused, a near flag suggested.
fn key_meaning<'f>(
    at: &str,
    section: &str,
    name: &str,
    given: &str,
    flags: &'f Flags,
) -> Result<Key<'f>, RunError> {
    match (section, name) {
        ("[[variation]]", "name") => Ok(Key::Name),
        ("[profile]", "output_artifact_dir") => Ok(Key::Parent),
        (_, "output_artifact_dir") if section != "[report]" => Err(fail(
            at,
            format!(
                "{section} output_artifact_dir: each run's directory is named by the sweep \
                 (PARENT/<index>-<description>); set the parent in [profile] or with \
                 --output-artifact-dir"
            ),
        )),
        ("[profile]", "run_id") => Err(fail(
            at,
            "[profile] run_id: each run gets its own id; set run_id in a [[variation]]",
        )),
        ("[matrix]", "run_id") => Err(fail(at, "[matrix] run_id: set run_id in a [[variation]]")),
        _ => match flags.find(given) {
            Some(flag) => Ok(Key::Flag(flag)),
            None => {
                let hint = flags.suggest(given).map_or(String::new(), |s| {
                    format!(" (did you mean {}?)", s.replace('-', "_"))
                });
                Err(fail(
                    at,
                    format!(
                        "{section} {given}: not an option of `speedbench {}`{hint}",
                        flags.command
                    ),
                ))
            }
        },
    }
}

/// What `[profile]` or a variation sets.
struct Section {
    settings: Vec<Setting>,
    /// A variation's `name`.
    name: Option<String>,
    /// `[profile] output_artifact_dir`.
    parent: Option<PathBuf>,
}

/// The flags of `[profile]` or a variation, the command line's left out;
/// `Err` names the first that cannot be a flag.
fn settings(
    source: &Source<'_>,
    section: &str,
    table: &Table,
    flags: &Flags,
) -> Result<Section, RunError> {
    let mut out = Vec::new();
    let mut name = None;
    let mut parent = None;
    for (key, value, what) in keys(source, section, table, flags)? {
        let at = source.at(key.span());
        match what {
            Key::Flag(flag) => out.push(setting(section, flag, value.get_ref(), at)?),
            Key::Name => match value.get_ref() {
                Value::String(s) if !s.trim().is_empty() => name = Some(s.trim().to_string()),
                _ => return Err(fail(&at, format!("{section} name: a non-empty string"))),
            },
            Key::Parent => match value.get_ref() {
                Value::String(s) if !s.is_empty() => parent = Some(PathBuf::from(s)),
                _ => {
                    return Err(fail(
                        &at,
                        "[profile] output_artifact_dir: a directory path (a string)",
                    ));
                }
            },
        }
    }
    Ok(Section {
        settings: out,
        name,
        parent,
    })
}

/// Keys whose value alone names a run (a dataset, a category): the
/// directory is `03-speed_bench_coding`, not `03-public-dataset-...`.
const VALUE_ONLY: [&str; 4] = ["public-dataset", "bench", "input-file", "category"];

/// Whether a setting names the run's rows (a dataset, a category).
fn names_the_data(s: &Setting) -> bool {
    VALUE_ONLY.contains(&s.flag.long)
}

/// A setting as a part of a run's description (`concurrency=4`).
fn describe(s: &Setting) -> String {
    if names_the_data(s) {
        let text = if s.flag.long == "input-file" {
            Path::new(&s.text)
                .file_stem()
                .map_or(s.text.clone(), |n| n.to_string_lossy().into_owned())
        } else {
            s.text.clone()
        };
        return text;
    }
    format!("{}={}", s.flag.long.replace('-', "_"), s.text)
}

/// A description as a directory name: letters, digits, `.`, `_`, `+` and
/// `-`, at most 64 bytes.
pub(crate) fn dir_safe(description: &str) -> String {
    let mut out = String::new();
    for c in description.chars() {
        let c = match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '_' | '+' | '-' => c,
            '=' | ' ' => '-',
            _ => '-',
        };
        if c == '-' && out.ends_with('-') {
            continue;
        }
        out.push(c);
    }
    let mut out = out.trim_matches(|c| c == '-' || c == '.').to_string();
    out.truncate(64);
    let out = out.trim_end_matches(['-', '.']).to_string();
    if out.is_empty() {
        "run".to_string()
    } else {
        out
    }
}

/// The most runs one sweep file may expand to: every run is checked
/// before the first request, and a matrix of a million runs would take
/// minutes and gigabytes only to plan.
pub const MAX_VARIATIONS: usize = 10_000;

/// The error of a sweep that expands to more than [`MAX_VARIATIONS`] runs.
pub(crate) fn too_many(source: &Source<'_>, total: &str) -> RunError {
    fail(
        &source.path.display().to_string(),
        format!(
            "the sweep expands to {total} runs (its variations times every [matrix] or \
             sweep combination); one sweep runs at most {MAX_VARIATIONS}: narrow the [matrix] \
             (or the AIPerf sweep's values) or split the sweep into several files"
        ),
    )
}

/// Expands a sweep file into its runs.
///
/// `cli` are the long names of the profile flags the command line gives,
/// which every run takes from there (a `[matrix]` or variation key among
/// them is refused: it would make the runs alike).
pub(crate) fn expand(source: &Source<'_>, cli: &BTreeSet<String>) -> Result<Expanded, RunError> {
    let file = match yaml_document(source)? {
        Some(root) if super::aiperf::is_aiperf_config(&root) => {
            return super::aiperf::expand(source, root, cli, &|name| std::env::var(name).ok());
        }
        Some(root) => yaml_sweep_file(source, &root)?,
        None => toml::from_str(source.text).map_err(|e| {
            fail(
                &source.path.display().to_string(),
                e.to_string().trim_end().to_string(),
            )
        })?,
    };
    let profile_flags = Flags::profile();
    let Section {
        settings: shared,
        parent,
        ..
    } = settings(source, "[profile]", &file.profile, &profile_flags)?;
    let matrix = matrix_of(source, &file.matrix, &profile_flags)?;
    let listed = listed_of(source, &file, &profile_flags, &matrix)?;
    refuse_cli_overrides(&matrix, &listed, cli)?;
    let combinations = matrix
        .iter()
        .try_fold(1usize, |acc, m| acc.checked_mul(m.len()));
    let total = combinations.and_then(|c| c.checked_mul(listed.len()));
    let (Some(_), Some(total)) = (combinations, total) else {
        return Err(too_many(source, "more than 2^64"));
    };
    if total > MAX_VARIATIONS {
        return Err(too_many(source, &total.to_string()));
    }
    let plan = Combinations {
        shared: &shared,
        matrix: &matrix,
        cli,
    };
    let variations = plan.variations(&listed, total);
    let report_tokens = report_tokens(source, &file.report, &Flags::report())?;
    Ok(Expanded {
        variations,
        parent,
        report_tokens,
        env_values: Vec::new(),
        trials: None,
        plots: super::SweepPlots::default(),
    })
}

/// The file's YAML document when it is a YAML file (`.yaml`, `.yml`).
fn yaml_document(source: &Source<'_>) -> Result<Option<Node>, RunError> {
    let ext = source
        .path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("");
    if !matches!(ext.to_ascii_lowercase().as_str(), "yaml" | "yml") {
        return Ok(None);
    }
    yaml::parse(source.text)
        .map(Some)
        .map_err(|(line, why)| fail(&format!("{}:{line}", source.path.display()), why))
}

/// A speedbench sweep file written in YAML: the TOML file's sections as
/// mappings (`profile:`, `matrix:`, `variation:` as a list, `report:`).
fn yaml_sweep_file(source: &Source<'_>, root: &Node) -> Result<SweepFile, RunError> {
    let at = |line: usize| format!("{}:{line}", source.path.display());
    let entries = root
        .entries()
        .ok_or_else(|| fail(&at(root.line), "a sweep file is a mapping of sections"))?;
    let mut file = SweepFile {
        profile: Table::new(),
        matrix: Table::new(),
        variations: Vec::new(),
        report: Table::new(),
    };
    for (key, value) in entries {
        match key.name.as_str() {
            "profile" => file.profile = yaml_table(source, value)?,
            "matrix" => file.matrix = yaml_table(source, value)?,
            "report" => file.report = yaml_table(source, value)?,
            "variation" | "variations" => {
                let yaml::Value::List(items) = &value.value else {
                    return Err(fail(&at(value.line), "variation: a list of runs"));
                };
                for item in items {
                    let span = line_span(source, item.line);
                    file.variations
                        .push(Spanned::new(span, yaml_table(source, item)?));
                }
            }
            other => {
                return Err(fail(
                    &at(key.line),
                    format!("`{other}`: a sweep file has profile, matrix, variation and report"),
                ));
            }
        }
    }
    Ok(file)
}

/// The bytes of line `line` (from 1), as a span `Source::at` reads back.
fn line_span(source: &Source<'_>, line: usize) -> Range<usize> {
    let start: usize = source
        .text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    start..start + 1
}

fn yaml_table(source: &Source<'_>, node: &Node) -> Result<Table, RunError> {
    let at = |line: usize| format!("{}:{line}", source.path.display());
    let entries = node.entries().ok_or_else(|| {
        fail(
            &at(node.line),
            format!("a mapping of options, not {}", node.kind()),
        )
    })?;
    let mut table = Table::new();
    for (key, value) in entries {
        let v = toml_value(value)
            .map_err(|why| fail(&at(value.line), format!("{}: {why}", key.name)))?;
        table.insert(
            Spanned::new(line_span(source, key.line), key.name.clone()),
            Spanned::new(line_span(source, value.line), v),
        );
    }
    Ok(table)
}

pub(crate) fn toml_value(node: &Node) -> Result<Value, String> {
    Ok(match &node.value {
        yaml::Value::Null => return Err("a value is missing".into()),
        yaml::Value::Bool(b) => Value::Boolean(*b),
        yaml::Value::Int(i) => Value::Integer(*i),
        yaml::Value::Float(f) => Value::Float(*f),
        yaml::Value::Str(s) => Value::String(s.clone()),
        yaml::Value::List(items) => {
            Value::Array(items.iter().map(toml_value).collect::<Result<_, _>>()?)
        }
        yaml::Value::Map(entries) => Value::Table(
            entries
                .iter()
                .map(|(k, v)| Ok((k.name.clone(), toml_value(v)?)))
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// A listed variation: its settings, its `name`, and where it is written
/// (`None` for the one implicit variation of a file that lists none).
type Listed = (Vec<Setting>, Option<String>, Option<String>);

/// `[matrix]`: each key a non-empty list, in file order.
fn matrix_of(
    source: &Source<'_>,
    table: &Table,
    flags: &Flags,
) -> Result<Vec<Vec<Setting>>, RunError> {
    let mut matrix: Vec<Vec<Setting>> = Vec::new();
    for (key, value, what) in keys(source, "[matrix]", table, flags)? {
        let at = source.at(key.span());
        let Key::Flag(flag) = what else {
            return Err(fail(
                &at,
                format!("[matrix] {}: not a matrix key", key.get_ref()),
            ));
        };
        let values = match value.get_ref() {
            Value::Array(items) if !items.is_empty() => items,
            _ => {
                return Err(fail(
                    &at,
                    format!(
                        "[matrix] {}: a non-empty list of values, one per run (e.g. [1, 4, 16])",
                        key.get_ref()
                    ),
                ));
            }
        };
        matrix.push(
            values
                .iter()
                .map(|v| setting("[matrix]", flag, v, at.clone()))
                .collect::<Result<_, _>>()?,
        );
    }
    Ok(matrix)
}

/// The `[[variation]]`s (one empty one when none is); a key also in
/// `[matrix]` is refused.
fn listed_of(
    source: &Source<'_>,
    file: &SweepFile,
    flags: &Flags,
    matrix: &[Vec<Setting>],
) -> Result<Vec<Listed>, RunError> {
    let mut listed: Vec<Listed> = Vec::new();
    for (i, table) in file.variations.iter().enumerate() {
        let at = source.at(table.span());
        let Section {
            settings: own,
            name,
            ..
        } = settings(source, "[[variation]]", table.get_ref(), flags)?;
        for s in &own {
            if let Some(m) = matrix.iter().find(|m| m[0].flag.long == s.flag.long) {
                return Err(fail(
                    &s.at,
                    format!(
                        "[[variation]] {}: also a [matrix] key (at {}); give it in one place",
                        s.flag.long.replace('-', "_"),
                        m[0].at
                    ),
                ));
            }
        }
        listed.push((own, name, Some(format!("[[variation]] {} at {at}", i + 1))));
    }
    if listed.is_empty() {
        listed.push((Vec::new(), None, None));
    }
    Ok(listed)
}

/// The command line wins over `[profile]`; over a key that tells runs
/// apart it would make them alike, so that is refused.
fn refuse_cli_overrides(
    matrix: &[Vec<Setting>],
    listed: &[Listed],
    cli: &BTreeSet<String>,
) -> Result<(), RunError> {
    for s in matrix
        .iter()
        .map(|m| &m[0])
        .chain(listed.iter().flat_map(|(own, _, _)| own))
    {
        if cli.contains(s.flag.long) {
            return Err(fail(
                &s.at,
                format!(
                    "--{} on the command line would replace what this sets for each run, \
                     making the runs alike; change it in the file instead",
                    s.flag.long
                ),
            ));
        }
    }
    Ok(())
}

/// `[report]`: `speedbench report` options, as flag tokens.
fn report_tokens(
    source: &Source<'_>,
    table: &Table,
    flags: &Flags,
) -> Result<Vec<String>, RunError> {
    let mut tokens = Vec::new();
    for (key, value, what) in keys(source, "[report]", table, flags)? {
        let Key::Flag(flag) = what else {
            return Err(fail(
                &source.at(key.span()),
                format!("[report] {}: not a report option", key.get_ref()),
            ));
        };
        tokens.extend(setting("[report]", flag, value.get_ref(), source.at(key.span()))?.tokens());
    }
    Ok(tokens)
}

/// The runs of a sweep: every listed variation times every combination
/// of the matrix, over what `[profile]` shares.
struct Combinations<'a> {
    shared: &'a [Setting],
    matrix: &'a [Vec<Setting>],
    cli: &'a BTreeSet<String>,
}

impl Combinations<'_> {
    /// Every run, numbered from 1; the first matrix key varies slowest.
    fn variations(&self, listed: &[Listed], total: usize) -> Vec<Variation> {
        let combinations: usize = self.matrix.iter().map(Vec::len).product();
        let width = total.to_string().len().max(2);
        let mut variations = Vec::with_capacity(total);
        for (own, name, origin) in listed {
            for c in 0..combinations {
                let chosen = self.chosen(c);
                let index = variations.len() + 1;
                let parts = parts(own, name.as_deref(), &chosen);
                let origin = match (origin, combinations > 1) {
                    (Some(o), true) => {
                        format!("{o}, [matrix] combination {} of {combinations}", c + 1)
                    }
                    (None, true) => format!("[matrix] combination {} of {combinations}", c + 1),
                    (Some(o), false) => o.clone(),
                    (None, false) => "[profile]".to_string(),
                };
                variations.push(Variation {
                    index,
                    dir_name: format!("{index:0width$}-{}", dir_safe(&parts.join("_"))),
                    description: if parts.is_empty() {
                        "run".to_string()
                    } else {
                        parts.join(", ")
                    },
                    origin,
                    settings: self.settings(own, &chosen),
                });
            }
        }
        variations
    }

    /// The matrix values of combination `c`.
    fn chosen(&self, c: usize) -> Vec<&Setting> {
        let mut rest = c;
        let mut picked = vec![0; self.matrix.len()];
        for (k, m) in self.matrix.iter().enumerate().rev() {
            picked[k] = rest % m.len();
            rest /= m.len();
        }
        self.matrix
            .iter()
            .zip(&picked)
            .map(|(m, &i)| &m[i])
            .collect()
    }

    /// A run's flags from the file: `[profile]`, then its own, then its
    /// matrix values, each option once (the later wins), less those the
    /// command line gives.
    fn settings(&self, own: &[Setting], chosen: &[&Setting]) -> Vec<Setting> {
        let mut merged: Vec<&Setting> = Vec::new();
        for s in self
            .shared
            .iter()
            .chain(own.iter())
            .chain(chosen.iter().copied())
        {
            merged.retain(|m| m.flag.long != s.flag.long);
            merged.push(s);
        }
        merged
            .iter()
            .filter(|s| !self.cli.contains(s.flag.long))
            .map(|&s| s.clone())
            .collect()
    }
}

/// What names a run: a listed variation's `name`, else its dataset or
/// category, else every option it sets; then its matrix values.
fn parts(own: &[Setting], name: Option<&str>, chosen: &[&Setting]) -> Vec<String> {
    let mut parts: Vec<String> = match name {
        Some(n) => vec![n.to_string()],
        None if own.iter().any(names_the_data) => own
            .iter()
            .filter(|s| names_the_data(s))
            .map(describe)
            .collect(),
        None => own.iter().map(describe).collect(),
    };
    parts.extend(chosen.iter().map(|s| describe(s)));
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    fn expand_text(text: &str, cli: &[&str]) -> Result<Expanded, String> {
        let path = Path::new("s.toml");
        let cli: BTreeSet<String> = cli.iter().map(|s| s.to_string()).collect();
        expand(&Source { path, text }, &cli).map_err(|e| e.to_string())
    }

    fn tokens(v: &Variation) -> Vec<String> {
        v.settings.iter().flat_map(Setting::tokens).collect()
    }

    #[test]
    fn a_matrix_is_every_combination_with_the_first_key_slowest() {
        let e = expand_text(
            "[profile]\nstreaming = true\noutput_artifact_dir = \"out\"\n\
             [matrix]\npublic_dataset = [\"a\", \"b\"]\nconcurrency = [1, 4, 16]\n",
            &[],
        )
        .unwrap();
        let names: Vec<&str> = e.variations.iter().map(|v| v.dir_name.as_str()).collect();
        assert_eq!(
            names,
            [
                "01-a_concurrency-1",
                "02-a_concurrency-4",
                "03-a_concurrency-16",
                "04-b_concurrency-1",
                "05-b_concurrency-4",
                "06-b_concurrency-16",
            ]
        );
        assert_eq!(
            tokens(&e.variations[4]),
            ["--streaming", "--public-dataset=b", "--concurrency=4"]
        );
        assert_eq!(e.variations[4].description, "b, concurrency=4");
        assert_eq!(e.variations[4].origin, "[matrix] combination 5 of 6");
        assert_eq!(e.parent, Some(PathBuf::from("out")));
    }

    #[test]
    fn variations_replace_shared_options_and_run_once_per_combination() {
        let e = expand_text(
            "[profile]\nconcurrency = 2\n\
             [matrix]\nrequest_rate = [1.5, 3]\n\
             [[variation]]\nname = \"first try\"\nconcurrency = 8\n\
             [[variation]]\ncategory = [\"coding\", \"math\"]\nrun_id = \"r2\"\n",
            &[],
        )
        .unwrap();
        let names: Vec<&str> = e.variations.iter().map(|v| v.dir_name.as_str()).collect();
        assert_eq!(
            names,
            [
                "01-first-try_request_rate-1.5",
                "02-first-try_request_rate-3",
                "03-coding+math_request_rate-1.5",
                "04-coding+math_request_rate-3",
            ]
        );
        assert_eq!(
            tokens(&e.variations[0]),
            ["--concurrency=8", "--request-rate=1.5"]
        );
        assert_eq!(
            tokens(&e.variations[3]),
            [
                "--concurrency=2",
                "--category=coding",
                "--category=math",
                "--run-id=r2",
                "--request-rate=3"
            ]
        );
        assert_eq!(
            e.variations[2].origin,
            "[[variation]] 2 at s.toml:8, [matrix] combination 1 of 2"
        );
    }

    #[test]
    fn a_file_without_matrix_or_variations_is_one_run() {
        let e = expand_text("[profile]\nconcurrency = 2\n", &[]).unwrap();
        assert_eq!(e.variations.len(), 1);
        assert_eq!(e.variations[0].dir_name, "01-run");
        assert_eq!(tokens(&e.variations[0]), ["--concurrency=2"]);
    }

    #[test]
    fn the_command_line_replaces_shared_options_but_not_the_ones_that_vary() {
        let e = expand_text(
            "[profile]\nconcurrency = 2\nstreaming = true\n[matrix]\npublic_dataset = [\"a\"]\n",
            &["concurrency"],
        )
        .unwrap();
        assert_eq!(
            tokens(&e.variations[0]),
            ["--streaming", "--public-dataset=a"]
        );
        let err = expand_text("[matrix]\nconcurrency = [1, 2]\n", &["concurrency"]).unwrap_err();
        assert!(
            err.contains("s.toml:2") && err.contains("making the runs alike"),
            "{err}"
        );
    }

    #[test]
    fn keys_are_flag_names_with_dashes_or_underscores_and_aliases() {
        let e = expand_text(
            "[profile]\nrequest-rate = 2\nrequest_rate_mode = \"constant\"\n",
            &[],
        )
        .unwrap();
        assert_eq!(
            tokens(&e.variations[0]),
            ["--request-rate=2", "--arrival=constant"]
        );
        let err = expand_text("[profile]\nrequest-rate = 2\nrequest_rate = 3\n", &[]).unwrap_err();
        assert!(
            err.contains("s.toml:3") && err.contains("give it once"),
            "{err}"
        );
    }

    #[test]
    fn mistakes_are_refused_with_their_line() {
        let cases = [
            (
                "[profile]\n\nconcurency = 3\n",
                "s.toml:3: [profile] concurency: not an option of `speedbench profile` (did you mean concurrency?)",
            ),
            (
                "[profile]\nstreaming = 1\n",
                "s.toml:2: [profile] streaming: a switch",
            ),
            (
                "[profile]\nconcurrency = [1, 2]\n",
                "s.toml:2: [profile] concurrency: takes one value, not a list",
            ),
            (
                "[matrix]\nconcurrency = 4\n",
                "s.toml:2: [matrix] concurrency: a non-empty list",
            ),
            (
                "[matrix]\nconcurrency = []\n",
                "s.toml:2: [matrix] concurrency: a non-empty list",
            ),
            (
                "[matrix]\nconcurrency = [1]\n[[variation]]\nconcurrency = 2\n",
                "s.toml:4: [[variation]] concurrency: also a [matrix] key (at s.toml:2)",
            ),
            (
                "[[variation]]\noutput_artifact_dir = \"x\"\n",
                "s.toml:2: [[variation]] output_artifact_dir: each run's directory is named by the sweep",
            ),
            (
                "[profile]\nrun_id = \"x\"\n",
                "s.toml:2: [profile] run_id: each run gets its own id",
            ),
            (
                "[profile]\nconfig = \"x\"\n",
                "s.toml:2: [profile] config: a sweep file cannot",
            ),
            (
                "[[variation]]\nname = 3\n",
                "s.toml:2: [[variation]] name: a non-empty string",
            ),
            (
                "[report]\npaths = [\"x\"]\n",
                "s.toml:2: [report] paths: not an option of `speedbench report`",
            ),
            (
                "[profile]\nconcurrency = 1979-05-27\n",
                "s.toml:2: [profile] concurrency: a date",
            ),
            ("[profil]\n", "unknown field `profil`"),
        ];
        for (text, wanted) in cases {
            let err = expand_text(text, &[]).unwrap_err();
            assert!(err.contains(wanted), "{text:?}: {err}");
        }
    }

    #[test]
    fn report_options_become_report_flags() {
        let e = expand_text("[report]\nmetric = \"accept_rate\"\n", &[]).unwrap();
        assert_eq!(e.report_tokens, ["--metric=accept_rate"]);
    }

    #[test]
    fn directory_names_keep_to_safe_characters_and_64_bytes() {
        assert_eq!(dir_safe("a b/c=d"), "a-b-c-d");
        assert_eq!(dir_safe("--x--"), "x");
        assert_eq!(dir_safe("ü"), "run");
        assert_eq!(dir_safe(&"x".repeat(100)).len(), 64);
    }
}
