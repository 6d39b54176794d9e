//! An AIPerf `benchmark` block (shorthands expanded) as the `speedbench
//! profile` flags that run the same thing: endpoint, model, one file or
//! public dataset, a warmup and a profiling phase, server metrics and
//! artifacts. Every field is either turned into flags, accepted as what
//! speedbench does anyway (named in each arm), or refused by name and line.

use std::path::PathBuf;

use speedbench_client::{ConnectionReuse, DatasetSampling};

use super::super::file::{Setting, Source};
use super::shape::at;
use super::unsupported;
use crate::error::RunError;
use crate::yaml::{Key, Node, Value};

/// The flags a block sets, each with the line it came from.
struct Out<'s> {
    source: &'s Source<'s>,
    settings: Vec<Setting>,
}

type Refusal = (usize, String);

impl Out<'_> {
    fn set(&mut self, long: &str, values: Vec<String>, line: usize) -> Result<(), RunError> {
        self.settings
            .push(Setting::new(long, values, at(self.source, line))?);
        Ok(())
    }

    fn one(&mut self, long: &str, node: &Node) -> Result<(), RunError> {
        self.set(
            long,
            vec![node.scalar_text().unwrap_or_default()],
            node.line,
        )
    }
}

/// The flags of one run's `benchmark` block.
pub(super) fn settings(source: &Source<'_>, benchmark: &Node) -> Result<Vec<Setting>, RunError> {
    let (settings, refused) = read_benchmark(source, benchmark);
    match all_refused(refused) {
        Some(e) => Err(e),
        None => Ok(settings),
    }
}

/// The flags of a `benchmark` block, and every refusal of its fields.
pub(super) fn read_benchmark(
    source: &Source<'_>,
    benchmark: &Node,
) -> (Vec<Setting>, Vec<RunError>) {
    let fail = |(line, m): Refusal| RunError::invalid(at(source, line), m);
    let mut out = Out {
        source,
        settings: Vec::new(),
    };
    // Every block is read, so a config is refused for all it holds that
    // speedbench cannot honour at once, not one field per attempt.
    let mut refused = Vec::new();
    for (key, value) in benchmark.entries().unwrap_or_default() {
        let read = match key.name.as_str() {
            "models" => models(&mut out, key, value),
            "endpoint" => endpoint(&mut out, value),
            "datasets" => datasets(&mut out, key, value),
            "phases" => phases(&mut out, key, value),
            "server_metrics" => server_metrics(&mut out, value),
            "artifacts" => artifacts(&mut out, value),
            "slos" => slos(&mut out, value),
            "gpu_telemetry" => gpu_telemetry(&mut out, value),
            "tokenizer" => tokenizer(&mut out, value),
            other => Err(fail(unsupported(key, other, BENCHMARK_WHY))),
        };
        refused.extend(read.err());
    }
    (out.settings, refused)
}

/// One error for every refusal: the first's field (its file and line),
/// and each refusal on a line of its own.
pub(super) fn all_refused(mut refused: Vec<RunError>) -> Option<RunError> {
    if refused.len() < 2 {
        return refused.pop();
    }
    let count = refused.len();
    let lines: Vec<String> = refused
        .into_iter()
        .map(|e| match e {
            RunError::Invalid { field, message } => format!("{field}: {message}"),
            other => other.to_string(),
        })
        .collect();
    let field = lines[0].split(": ").next().unwrap_or_default().to_string();
    Some(RunError::invalid(
        field,
        format!(
            "{count} fields speedbench cannot honour (each says what to write instead):\n  {}",
            lines.join("\n  ")
        ),
    ))
}

/// Why a field of the benchmark block not read above is refused.
const BENCHMARK_WHY: &str = "no counterpart in speedbench for this field of the benchmark block";

/// Checks a mapping's keys against `allowed`, refusing any other by its
/// dotted name.
fn only<'n>(
    node: &'n Node,
    prefix: &str,
    allowed: &[&str],
    why: &str,
) -> Result<&'n [(Key, Node)], Refusal> {
    let entries = node.entries().ok_or((
        node.line,
        format!("`{prefix}`: a mapping, not {}", node.kind()),
    ))?;
    // Every field the mapping holds that speedbench cannot honour, named.
    let unknown: Vec<&Key> = entries
        .iter()
        .map(|(key, _)| key)
        .filter(|key| !allowed.contains(&key.name.as_str()))
        .collect();
    match unknown.as_slice() {
        [] => Ok(entries),
        [one] => Err(unsupported(one, &format!("{prefix}.{}", one.name), why)),
        [first, ..] => {
            let names: Vec<String> = unknown
                .iter()
                .map(|k| format!("`{prefix}.{}` (line {})", k.name, k.line))
                .collect();
            Err((
                first.line,
                format!("{} are not run by speedbench: {why}", names.join(", ")),
            ))
        }
    }
}

fn invalid(out: &Out<'_>, r: Refusal) -> RunError {
    RunError::invalid(at(out.source, r.0), r.1)
}

/// `models`: a name, a list, or `items: [{name}]` with a `strategy`
/// (`round_robin`, `random`): `--model a,b` and `--model-selection-strategy`.
fn models(out: &mut Out<'_>, key: &Key, value: &Node) -> Result<(), RunError> {
    let names: Vec<&Node> = match &value.value {
        Value::Str(_) => vec![value],
        Value::List(items) => items.iter().collect(),
        Value::Map(_) => match value.get("items").map(|i| &i.value) {
            Some(Value::List(items)) => items.iter().filter_map(|i| i.get("name")).collect(),
            _ => Vec::new(),
        },
        _ => Vec::new(),
    };
    if names.is_empty() {
        return Err(invalid(out, (key.line, "`models`: a model name".into())));
    }
    let joined: Vec<String> = names.iter().filter_map(|n| n.scalar_text()).collect();
    out.set("model", vec![joined.join(",")], names[0].line)?;
    let Some(strategy) = value.get("strategy") else {
        return Ok(());
    };
    match strategy.scalar_text().as_deref() {
        Some("round_robin" | "random") => out.one("model-selection-strategy", strategy),
        other => Err(invalid(
            out,
            (
                strategy.line,
                format!(
                    "`models.strategy: {}`: speedbench shares rows out `round_robin` or \
                     `random` (no weights)",
                    other.unwrap_or_default()
                ),
            ),
        )),
    }
}

const ENDPOINT_FIELDS: [&str; 9] = [
    "url",
    "urls",
    "path",
    "type",
    "streaming",
    "timeout",
    "extra",
    "headers",
    "api_key",
];

/// `endpoint`: the URL (with its `path`), API, streaming, timeout, body
/// fields, headers and key.
fn endpoint(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    let why = "no counterpart for this endpoint field (speedbench reads the server's token counts; `connection_reuse` is `pooled`, `never` or `sticky-user-sessions`)";
    let mut allowed = ENDPOINT_FIELDS.to_vec();
    // AIPerf's words, which speedbench takes.
    for (field, words) in [
        ("connection_reuse", &ConnectionReuse::NAMES[..]),
        ("url_strategy", &["round_robin"][..]),
    ] {
        if (node.get(field).and_then(Node::scalar_text))
            .is_some_and(|w| words.contains(&w.as_str()))
        {
            allowed.push(field);
        }
    }
    let entries = only(node, "endpoint", &allowed, why).map_err(|r| invalid(out, r))?;
    let mut urls: Option<(Vec<String>, usize)> = None;
    for (key, value) in entries {
        match key.name.as_str() {
            "url" => urls = Some((vec![value.scalar_text().unwrap_or_default()], value.line)),
            "urls" => urls = Some(url_list(value).map_err(|r| invalid(out, r))?),
            "type" => endpoint_type(out, key, value)?,
            "streaming" => out.set("streaming", vec![bool_text(value)], value.line)?,
            "timeout" => out.one("timeout", value)?,
            "extra" => out.set("extra-inputs", vec![json(value).to_string()], value.line)?,
            "headers" => headers(out, value)?,
            "api_key" => out.one("api-key", value)?,
            "connection_reuse" => out.one("connection-reuse-strategy", value)?,
            _ => {}
        }
    }
    if let Some((urls, line)) = urls {
        let path = node.get("path").and_then(Node::scalar_text);
        let servers: Vec<String> = urls
            .iter()
            .map(|url| match &path {
                Some(path) => server_of(&format!(
                    "{}/{}",
                    url.trim_end_matches('/'),
                    path.trim_start_matches('/')
                )),
                None => server_of(url),
            })
            .collect();
        out.set("url", vec![servers.join(",")], line)?;
    }
    Ok(())
}

/// AIPerf's URLs name the endpoint (`…/v1/chat/completions`); speedbench's
/// `--url` is the server, the endpoint from `--endpoint-type`.
fn server_of(url: &str) -> String {
    let trimmed = url.trim_end_matches('/');
    for path in ["/v1/chat/completions", "/v1/completions"] {
        if let Some(server) = trimmed.strip_suffix(path) {
            return server.to_string();
        }
    }
    url.to_string()
}

/// `urls`: one or several servers (conversations shared out round robin,
/// AIPerf's `url_strategy`).
fn url_list(value: &Node) -> Result<(Vec<String>, usize), Refusal> {
    match &value.value {
        Value::List(items) if !items.is_empty() => Ok((
            items
                .iter()
                .map(|i| i.scalar_text().unwrap_or_default())
                .collect(),
            items[0].line,
        )),
        Value::Str(s) => Ok((vec![s.clone()], value.line)),
        _ => Err((value.line, "`endpoint.urls`: a list of server URLs".into())),
    }
}

fn endpoint_type(out: &mut Out<'_>, key: &Key, value: &Node) -> Result<(), RunError> {
    match value.scalar_text().as_deref() {
        Some(t @ ("chat" | "completions")) => out.set("endpoint-type", vec![t.into()], value.line),
        Some(other) => Err(invalid(
            out,
            unsupported(
                key,
                &format!("endpoint.type: {other}"),
                "it drives `chat` and `completions` endpoints",
            ),
        )),
        None => Err(invalid(out, (value.line, "`endpoint.type`: a word".into()))),
    }
}

fn bool_text(node: &Node) -> String {
    node.scalar_text().unwrap_or_default().to_lowercase()
}

fn headers(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    for (key, value) in node.entries().unwrap_or_default() {
        let header = format!("{}:{}", key.name, value.scalar_text().unwrap_or_default());
        out.set("header", vec![header], key.line)?;
    }
    Ok(())
}

/// A YAML value as JSON (`endpoint.extra`, sent in every request body).
pub(super) fn json(node: &Node) -> serde_json::Value {
    use serde_json::Value as J;
    match &node.value {
        Value::Null => J::Null,
        Value::Bool(b) => J::Bool(*b),
        Value::Int(i) => J::from(*i),
        Value::Float(f) => serde_json::Number::from_f64(*f).map_or(J::Null, J::Number),
        Value::Str(s) => J::String(s.clone()),
        Value::List(items) => J::Array(items.iter().map(json).collect()),
        Value::Map(entries) => J::Object(
            entries
                .iter()
                .map(|(k, v)| (k.name.clone(), json(v)))
                .collect(),
        ),
    }
}

/// `datasets`: one dataset, a file or a public one.
fn datasets(out: &mut Out<'_>, key: &Key, node: &Node) -> Result<(), RunError> {
    let items = match &node.value {
        Value::List(items) => items.as_slice(),
        _ => {
            return Err(invalid(
                out,
                (node.line, "`datasets`: a list of named datasets".into()),
            ));
        }
    };
    let [dataset] = items else {
        let why = "it runs one dataset per run (sweep over them instead)";
        return Err(invalid(out, unsupported(key, "datasets", why)));
    };
    let kind = dataset.get("type").and_then(Node::scalar_text);
    match kind.as_deref() {
        Some("file") => file_dataset(out, dataset),
        Some("public") => public_dataset(out, dataset),
        Some("synthetic") | None => synthetic_dataset(out, dataset),
        _ => {
            let k = dataset.key("type").unwrap_or(key);
            let why = "it sends a file's prompts, a public dataset's or synthetic ones of a \
                       token length: give `type: file`, `type: public` or `type: synthetic`";
            Err(invalid(
                out,
                unsupported(
                    k,
                    &format!(
                        "datasets[0].type: {}",
                        kind.as_deref().unwrap_or("synthetic")
                    ),
                    why,
                ),
            ))
        }
    }
}

/// `type: synthetic`: prompts of `isl` tokens asking for `osl` (each a
/// number or `{mean, stddev}`, under `prompts` or beside it), `entries` of
/// them: `--isl`, `--isl-stddev`, `--osl`, `--osl-stddev`,
/// `--num-dataset-entries`; conversations of `turns` turns
/// (`--conversation-turn-mean`/`-stddev`) with `turnDelay` ms between them
/// (`--session-turn-delay-mean`/`-stddev`, scaled by `turnDelayRatio`).
fn synthetic_dataset(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    let why = "speedbench builds synthetic conversations of prompts of a normal length \
               (`isl`, `osl`, `turns`, `turn_delay`: a number or `{mean, stddev}`) counted by \
               the server's /tokenize";
    let mut allowed = vec![
        "name",
        "type",
        "entries",
        "prompts",
        "isl",
        "osl",
        "turns",
        "turn_delay",
        "turn_delay_ratio",
        "prefix_prompts",
    ];
    if sampling_ok(node) {
        allowed.push("sampling");
    }
    only(node, "datasets[0]", &allowed, why).map_err(|r| invalid(out, r))?;
    sampling(out, node)?;
    let prompts = node.get("prompts");
    if let Some(p) = prompts {
        let allowed = ["isl", "osl", "sequence_distribution"];
        only(p, "datasets[0].prompts", &allowed, why).map_err(|r| invalid(out, r))?;
    }
    let length_of = |name: &str| prompts.and_then(|p| p.get(name)).or(node.get(name));
    if let Some(pairs) = length_of("sequence_distribution") {
        sequence_distribution(out, pairs)?;
        if let Some(entries) = node.get("entries") {
            out.one("num-dataset-entries", entries)?;
        }
        return conversation_shape(out, node);
    }
    let isl = length_of("isl").ok_or_else(|| {
        invalid(
            out,
            (
                node.line,
                "datasets[0]: a synthetic dataset needs `prompts.isl`".into(),
            ),
        )
    })?;
    match is_distribution(isl) {
        true => out.set("isl-distribution", vec![json(isl).to_string()], isl.line)?,
        false => token_length(out, isl, "prompts.isl", ("isl", "isl-stddev"))?,
    }
    if let Some(osl) = length_of("osl") {
        match is_distribution(osl) {
            true => out.set("osl-distribution", vec![json(osl).to_string()], osl.line)?,
            false => token_length(out, osl, "prompts.osl", ("osl", "osl-stddev"))?,
        }
    }
    if let Some(entries) = node.get("entries") {
        out.one("num-dataset-entries", entries)?;
    }
    conversation_shape(out, node)
}

/// `prefix_prompts: {pool_size, length}`: `--num-prefix-prompts` and
/// `--prefix-prompt-length`.
fn prefix_prompts(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    let why = "speedbench builds a pool of shared prefixes (`pool_size` of `length` tokens); \
               a shared system prompt or per-user context is not built";
    let prefix = "datasets[0].prefix_prompts";
    let fields = only(node, prefix, &["pool_size", "length"], why).map_err(|r| invalid(out, r))?;
    for (key, value) in fields {
        match key.name.as_str() {
            "pool_size" => out.one("num-prefix-prompts", value)?,
            _ => out.one("prefix-prompt-length", value)?,
        }
    }
    Ok(())
}

/// A synthetic dataset's `turns`, `turn_delay`, `turn_delay_ratio` and
/// `prefix_prompts`.
fn conversation_shape(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    if let Some(prefixes) = node.get("prefix_prompts") {
        prefix_prompts(out, prefixes)?;
    }
    let turns = ("conversation-turn-mean", "conversation-turn-stddev");
    if let Some(n) = node.get("turns") {
        token_length(out, n, "turns", turns)?;
    }
    let delay = ("session-turn-delay-mean", "session-turn-delay-stddev");
    if let Some(d) = node.get("turn_delay") {
        token_length(out, d, "turn_delay", delay)?;
    }
    if let Some(ratio) = node.get("turn_delay_ratio") {
        out.one("session-delay-ratio", ratio)?;
    }
    Ok(())
}

/// `prompts.sequence_distribution`: a list of `{isl, osl, probability}`
/// (with `isl_stddev`, `osl_stddev`), as `--sequence-distribution`'s JSON.
fn sequence_distribution(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    let Value::List(items) = &node.value else {
        let m = "`datasets[0].prompts.sequence_distribution`: a list of `{isl, osl, probability}`";
        return Err(invalid(out, (node.line, m.into())));
    };
    let pairs: Vec<serde_json::Value> = items.iter().map(json).collect();
    let text = serde_json::json!({ "pairs": pairs }).to_string();
    out.set("sequence-distribution", vec![text], node.line)
}

/// Whether a length is one of AIPerf's distributions beyond the normal
/// (`median`, `peaks`, `points`, bounds): `--isl-distribution` takes it.
fn is_distribution(node: &Node) -> bool {
    ["median", "peaks", "points", "min", "max"]
        .iter()
        .any(|k| node.get(k).is_some())
}

/// A synthetic length or count: a number (AIPerf's `{value}` too) or
/// `{mean, stddev}`, as the `(mean, stddev)` flags; `field` names it under
/// `datasets[0]` in errors.
fn token_length(
    out: &mut Out<'_>,
    node: &Node,
    field: &str,
    flags: (&str, &str),
) -> Result<(), RunError> {
    let whole = |n: &Node| match n.value {
        Value::Float(f) if f.fract() == 0.0 && f >= 0.0 => Some(format!("{f:.0}")),
        _ => n.scalar_text(),
    };
    if node.entries().is_none() {
        return out.set(flags.0, vec![whole(node).unwrap_or_default()], node.line);
    }
    let prefix = format!("datasets[0].{field}");
    let why = "a length is a number or `{mean, stddev}` (normal), rounded to whole tokens";
    only(node, &prefix, &["mean", "stddev", "value"], why).map_err(|r| invalid(out, r))?;
    let mean = node
        .get("mean")
        .or(node.get("value"))
        .ok_or_else(|| invalid(out, (node.line, format!("`{prefix}` needs `mean`"))))?;
    out.set(flags.0, vec![whole(mean).unwrap_or_default()], mean.line)?;
    if let Some(stddev) = node.get("stddev") {
        out.one(flags.1, stddev)?;
    }
    Ok(())
}

/// Whether a dataset's `sampling` is one of AIPerf's strategies (or
/// absent): any other is refused with the block's other fields.
fn sampling_ok(node: &Node) -> bool {
    node.get("sampling")
        .and_then(Node::scalar_text)
        .is_none_or(|s| DatasetSampling::parse(&s).is_some())
}

/// A dataset's `sampling` (`sequential`, `shuffle`, `random`):
/// `--dataset-sampling-strategy`.
fn sampling(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    match node.get("sampling") {
        Some(strategy) => out.one("dataset-sampling-strategy", strategy),
        None => Ok(()),
    }
}

fn file_dataset(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    let mut allowed = vec![
        "name",
        "type",
        "path",
        "records",
        "format",
        "synthesis",
        "force_min_tokens",
    ];
    if sampling_ok(node) {
        allowed.push("sampling");
    }
    let why = "it reads a file dataset's rows as given (`sampling` picks the order they are \
               sent in)";
    only(node, "datasets[0]", &allowed, why).map_err(|r| invalid(out, r))?;
    sampling(out, node)?;
    match (node.get("path"), node.get("records")) {
        (Some(path), None) => out.one("input-file", path)?,
        // Inline rows travel as JSON, read as a file's lines.
        (None, Some(records)) => {
            out.set("input-rows", vec![json(records).to_string()], records.line)?
        }
        _ => {
            let m = "datasets[0]: a file dataset needs `path` or inline `records` (one of them)";
            return Err(invalid(out, (node.line, m.into())));
        }
    }
    if let Some(synthesis) = node.get("synthesis") {
        trace_synthesis(out, synthesis)?;
    }
    if let Some(force) = node.get("force_min_tokens") {
        out.set("force-min-tokens", vec![bool_text(force)], force.line)?;
    }
    match node.get("format") {
        Some(format) => file_format(out, format),
        None => Ok(()),
    }
}

/// A file dataset's `format`: a SPEED-Bench one narrows to its category;
/// AIPerf's row formats are read as they are.
fn file_format(out: &mut Out<'_>, format: &Node) -> Result<(), RunError> {
    let name = format.scalar_text().unwrap_or_default();
    match speed_bench_category(&name) {
        Some(Some(category)) => out.set("category", vec![category.to_string()], format.line),
        Some(None) => Ok(()),
        None if matches!(
            name.as_str(),
            "single_turn" | "multi_turn" | "mooncake_trace"
        ) =>
        {
            Ok(())
        }
        None => Err(invalid(
            out,
            (
                format.line,
                format!(
                    "`datasets[0].format: {name}`: speedbench reads SPEED-Bench files \
                     (`speed_bench_<category>`, `speed_bench_qualitative`, \
                     `speed_bench_throughput_<isl>[_<tier>]`), `single_turn`/`multi_turn` JSONL \
                     and `mooncake_trace` rows"
                ),
            ),
        )),
    }
}

/// `synthesis: {speedupRatio, ...}`: each field as its `--synthesis-*`
/// flag.
fn trace_synthesis(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    const FIELDS: [&str; 7] = [
        "speedup_ratio",
        "prefix_len_multiplier",
        "prefix_root_multiplier",
        "prompt_len_multiplier",
        "output_len_multiplier",
        "max_isl",
        "max_osl",
    ];
    let why = "speedbench reshapes a trace by AIPerf's ratios, multipliers and caps";
    let entries = only(node, "datasets[0].synthesis", &FIELDS, why).map_err(|r| invalid(out, r))?;
    for (key, value) in entries {
        let flag = format!("synthesis-{}", key.name.replace('_', "-"));
        out.one(&flag, value)?;
    }
    Ok(())
}

/// The category a SPEED-Bench loader name keeps: `Some(Some("coding"))`
/// for `speed_bench_coding`, `Some(None)` for a whole split
/// (`speed_bench_qualitative`, `speed_bench_throughput_1k`), `None` for a
/// name that is no SPEED-Bench loader.
fn speed_bench_category(name: &str) -> Option<Option<&str>> {
    let rest = name.strip_prefix("speed_bench_")?;
    if rest == "qualitative" {
        return Some(None);
    }
    if let Some(tier) = rest.strip_prefix("throughput_") {
        return match tier.split_once('_') {
            Some((_isl, tier)) => Some(Some(tier)),
            None => Some(None),
        };
    }
    (!rest.is_empty()).then_some(Some(rest))
}

fn public_dataset(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    let mut allowed = vec!["name", "type", "dataset"];
    if sampling_ok(node) {
        allowed.push("sampling");
    }
    let one_category = (node.get("dataset").and_then(Node::scalar_text))
        .and_then(|name| speedbench_dataset::registry::lookup(&name).ok())
        .is_some_and(|spec| of_one_category(&spec));
    if one_category {
        allowed.push("entries");
    }
    let why = "`entries` keeps a dataset's first rows (`--limit`) where its rows are of one \
               category; a dataset of several has no first N rows to keep (`--limit` keeps N of \
               each category: give it on the command line)";
    let name = node.get("dataset").ok_or_else(|| {
        invalid(
            out,
            (
                node.line,
                "datasets[0]: a public dataset needs `dataset`".into(),
            ),
        )
    })?;
    // Both refusals at once: the block's fields and the name.
    let refused: Vec<RunError> = [
        only(node, "datasets[0]", &allowed, why).err(),
        unregistered(name),
    ]
    .into_iter()
    .flatten()
    .map(|r| invalid(out, r))
    .collect();
    if let Some(e) = all_refused(refused) {
        return Err(e);
    }
    sampling(out, node)?;
    if let Some(entries) = node.get("entries") {
        out.one("limit", entries)?;
    }
    out.one("public-dataset", name)
}

/// Whether every row of a registered dataset is of one category, so that
/// AIPerf's `entries` (a count of rows) is `--limit` (a count per
/// category).
fn of_one_category(spec: &speedbench_dataset::DatasetSpec) -> bool {
    use speedbench_dataset::DatasetSource;
    match &spec.source {
        DatasetSource::SpeedBench { category, .. } => category.is_some(),
        DatasetSource::Literature(_) | DatasetSource::ShareGpt => true,
        DatasetSource::SpecBench => false,
    }
}

/// A public dataset's name speedbench has no loader for (AIPerf's
/// `sharegpt`), with what to write instead.
fn unregistered(name: &Node) -> Option<Refusal> {
    let text = name.scalar_text()?;
    let e = speedbench_dataset::registry::lookup(&text).err()?;
    Some((
        name.line,
        format!(
            "`datasets[0].dataset: {text}`: {e}: `speedbench datasets` lists the registered \
             ones; rows of your own run as a file dataset (`type: file`, `path` to JSONL)"
        ),
    ))
}

/// `server_metrics`: on or off, the URLs to scrape, and the files:
/// `formats` of `json`, `csv` and `parquet` (`--server-metrics-formats`).
fn server_metrics(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    let mut allowed = vec!["enabled", "urls"];
    if matches!(node.get("formats").map(|f| &f.value), Some(Value::List(l)) if l.iter().all(|f| matches!(f.scalar_text().as_deref(), Some("json" | "csv" | "parquet"))))
    {
        allowed.push("formats");
    }
    let why = "it scrapes the URLs given, or the server's own `/metrics`, into a JSON \
               export and, with `formats: [json, csv, parquet]`, AIPerf's CSV layout of it and \
               its raw samples as Parquet";
    let entries = only(node, "server_metrics", &allowed, why).map_err(|r| invalid(out, r))?;
    for (key, value) in entries {
        match (key.name.as_str(), &value.value) {
            ("enabled", Value::Bool(false)) => {
                out.set("no-server-metrics", vec!["true".into()], value.line)?
            }
            ("urls", Value::List(urls)) => {
                for u in urls {
                    out.one("server-metrics", u)?;
                }
            }
            ("formats", Value::List(formats)) => {
                let names: Vec<String> = formats.iter().filter_map(|f| f.scalar_text()).collect();
                out.set("server-metrics-formats", vec![names.join(",")], value.line)?
            }
            _ => {}
        }
    }
    Ok(())
}

/// `gpu_telemetry`: DCGM exporter URLs (`--gpu-telemetry`), as a URL, a
/// mapping with `url` or `urls`, or `enabled: false`; a local collector
/// or a recorded file has no counterpart.
fn gpu_telemetry(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    if node.scalar_text().is_some() {
        return out.one("gpu-telemetry", node);
    }
    let mut allowed = vec!["enabled", "url", "urls"];
    let is = |field: &str, word: &str| {
        node.get(field).and_then(Node::scalar_text).as_deref() == Some(word)
    };
    if is("collector", "dcgm") {
        allowed.push("collector");
    }
    if is("mode", "summary") {
        allowed.push("mode");
    }
    let why = "it scrapes DCGM exporter URLs into the run's summary (no local pynvml/amdsmi \
               collector, no recorded file, no live dashboard)";
    let entries = only(node, "gpu_telemetry", &allowed, why).map_err(|r| invalid(out, r))?;
    if matches!(
        node.get("enabled").map(|n| &n.value),
        Some(Value::Bool(false))
    ) {
        return Ok(());
    }
    for (key, value) in entries {
        match (key.name.as_str(), &value.value) {
            ("url", _) => out.one("gpu-telemetry", value)?,
            ("urls", Value::List(urls)) => {
                for u in urls {
                    out.one("gpu-telemetry", u)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// `artifacts`: where the runs go (the sweep's parent); speedbench writes
/// `summary.json` and `records.parquet` (AIPerf's `summary: [json]`,
/// `records: [jsonl]`), `raw: true` keeps every response;
/// `showTraceTiming` is `--show-trace-timing` and `trace`
/// `--export-http-trace`.
fn artifacts(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    let is = |field: &str, word: &str| match node.get(field).map(|n| &n.value) {
        Some(Value::List(l)) => l.iter().all(|f| f.scalar_text().as_deref() == Some(word)),
        _ => false,
    };
    let mut allowed = vec![
        "dir",
        "slice_duration",
        "user_files",
        "show_trace_timing",
        "trace",
    ];
    if is("summary", "json") {
        allowed.push("summary");
    }
    if is("records", "jsonl") {
        allowed.push("records");
    }
    let why = "it writes summary.json (time slices in it) and records.parquet (`speedbench \
               report --format csv` for a CSV), without plots";
    only(node, "artifacts", &allowed, why).map_err(|r| invalid(out, r))?;
    if let Some(slice) = node.get("slice_duration") {
        out.set("slice-duration", vec![seconds(out, slice)?], slice.line)?;
    }
    if let Some(files) = node.get("user_files") {
        out.set("user-files", vec![json(files).to_string()], files.line)?;
    }
    if let Some(show) = node.get("show_trace_timing") {
        out.set("show-trace-timing", vec![bool_text(show)], show.line)?;
    }
    if let Some(trace) = node.get("trace") {
        out.set("export-http-trace", vec![bool_text(trace)], trace.line)?;
    }
    Ok(())
}

/// `tokenizer`: its `name` is `--tokenizer`, read only where prompts are
/// built to a length (a Hub name is refused there: speedbench downloads
/// none); `revision` and `trust_remote_code` only steer a download, and a
/// tokenizer.json runs no code.
fn tokenizer(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    let mut allowed = vec!["name", "revision", "trust_remote_code"];
    if node
        .get("apply_chat_template")
        .and_then(Node::scalar_text)
        .as_deref()
        == Some("false")
    {
        allowed.push("apply_chat_template");
    }
    let why = "speedbench counts a prompt's tokens with a local tokenizer.json (`name`) and \
               sends the text as built: on a chat endpoint the server applies the template";
    only(node, "tokenizer", &allowed, why).map_err(|r| invalid(out, r))?;
    if let Some(name) = node.get("name") {
        out.one("tokenizer", name)?;
    }
    Ok(())
}

/// `slos`: a mapping of AIPerf metric tags to thresholds, `--goodput`.
fn slos(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    let entries = node.entries().ok_or_else(|| {
        invalid(
            out,
            (
                node.line,
                format!(
                    "`slos`: a mapping of metric to threshold, not {}",
                    node.kind()
                ),
            ),
        )
    })?;
    let pairs: Vec<String> = entries
        .iter()
        .map(|(key, value)| format!("{}:{}", key.name, value.scalar_text().unwrap_or_default()))
        .collect();
    out.set("goodput", vec![pairs.join(" ")], node.line)
}

/// `artifacts.dir`, the runs' parent.
pub(super) fn artifacts_dir(benchmark: &Node) -> Result<Option<PathBuf>, Refusal> {
    match benchmark.get("artifacts").and_then(|a| a.get("dir")) {
        Some(d) => match d.scalar_text() {
            Some(t) if !t.is_empty() => Ok(Some(PathBuf::from(t))),
            _ => Err((d.line, "`artifacts.dir`: a directory".into())),
        },
        None => Ok(None),
    }
}

/// The kind of a phase: `warmup` if AIPerf's normalizing made it one or
/// it is left out of the results, else `profiling`.
fn is_warmup(phase: &Node) -> bool {
    phase.get("kind").and_then(Node::scalar_text).as_deref() == Some("warmup")
        || matches!(
            phase.get("exclude_from_results").map(|n| &n.value),
            Some(Value::Bool(true))
        )
}

/// `phases`: at most one warmup, then one profiling phase.
fn phases(out: &mut Out<'_>, key: &Key, node: &Node) -> Result<(), RunError> {
    let Value::List(list) = &node.value else {
        return Err(invalid(
            out,
            (node.line, "`phases`: a list of phases".into()),
        ));
    };
    let (warmups, profiling): (Vec<&Node>, Vec<&Node>) = list.iter().partition(|p| is_warmup(p));
    let why = "it runs one warmup (optional), then one measured phase";
    if warmups.len() > 1 || profiling.len() != 1 {
        return Err(invalid(out, unsupported(key, "phases", why)));
    }
    if let Some(w) = warmups.first() {
        warmup(out, w)?;
    }
    measured(out, profiling[0])
}

const PHASE_ID: [&str; 4] = ["name", "kind", "type", "exclude_from_results"];

fn phase_type(out: &Out<'_>, phase: &Node) -> Result<String, RunError> {
    phase
        .get("type")
        .and_then(Node::scalar_text)
        .ok_or_else(|| invalid(out, (phase.line, "a phase needs `type`".into())))
}

/// The warmup: closed-loop, counted in requests.
fn warmup(out: &mut Out<'_>, phase: &Node) -> Result<(), RunError> {
    let name = phase
        .get("name")
        .and_then(Node::scalar_text)
        .unwrap_or("warmup".into());
    let kind = phase_type(out, phase)?;
    if kind == "user_centric" {
        return user_centric(out, phase, &name, true);
    }
    if kind != "concurrency" {
        let k = phase.key("type").cloned().unwrap_or(Key {
            name: "type".into(),
            line: phase.line,
        });
        let why = "it warms up closed-loop (`type: concurrency`) or user-centric, counted in \
                   requests or time";
        return Err(invalid(
            out,
            unsupported(&k, &format!("phases.{name}.type"), why),
        ));
    }
    let why = "its warmup takes `requests`, `sessions`, `duration`, `grace_period`, \
               `concurrency`, `concurrency_ramp`, `prefill_concurrency` and `prefill_ramp`";
    let allowed = [
        &PHASE_ID[..],
        &[
            "requests",
            "sessions",
            "duration",
            "grace_period",
            "concurrency",
            "concurrency_ramp",
            "prefill_concurrency",
            "prefill_ramp",
        ],
    ]
    .concat();
    let entries =
        only(phase, &format!("phases.{name}"), &allowed, why).map_err(|r| invalid(out, r))?;
    for (key, value) in entries {
        warmup_field(out, &key.name, value)?;
    }
    if ["requests", "sessions", "duration"]
        .iter()
        .all(|k| phase.get(k).is_none())
    {
        let m = format!("phases.{name}: a warmup needs `requests`, `sessions` or a `duration`");
        return Err(invalid(out, (phase.line, m)));
    }
    Ok(())
}

/// One field of the warmup phase as its flag.
fn warmup_field(out: &mut Out<'_>, name: &str, value: &Node) -> Result<(), RunError> {
    match name {
        "requests" => out.one("warmup-request-count", value),
        "sessions" => out.one("num-warmup-sessions", value),
        "duration" => {
            let s = seconds(out, value)?;
            out.set("warmup-duration", vec![s], value.line)
        }
        "grace_period" => {
            let s = seconds(out, value)?;
            out.set("warmup-grace-period", vec![s], value.line)
        }
        "concurrency" => out.one("warmup-concurrency", value),
        "concurrency_ramp" => ramp(out, "warmup-concurrency-ramp-duration", value),
        "prefill_concurrency" => out.one("warmup-prefill-concurrency", value),
        "prefill_ramp" => ramp(out, "warmup-prefill-concurrency-ramp-duration", value),
        _ => Ok(()),
    }
}

/// The measured phase: closed-loop (`concurrency`) or at a rate
/// (`poisson`, `constant`), sized by requests, sessions or a duration.
fn measured(out: &mut Out<'_>, phase: &Node) -> Result<(), RunError> {
    let name = phase
        .get("name")
        .and_then(Node::scalar_text)
        .unwrap_or("profiling".into());
    let kind = phase_type(out, phase)?;
    if kind == "fixed_schedule" {
        return fixed_schedule(out, phase, &name);
    }
    if kind == "user_centric" {
        return user_centric(out, phase, &name, false);
    }
    let arrival = arrival_of(out, phase, &name, &kind)?;
    let mut allowed = [
        &PHASE_ID[..],
        &[
            "requests",
            "sessions",
            "duration",
            "grace_period",
            "concurrency",
        ],
    ]
    .concat();
    allowed.extend([
        "concurrency_ramp",
        "cancellation",
        "prefill_concurrency",
        "prefill_ramp",
    ]);
    if arrival.is_some() {
        allowed.extend(["rate", "rate_ramp", "rate_series"]);
    }
    if kind == "gamma" {
        allowed.push("smoothness");
    }
    let why = "no counterpart for this phase field";
    let entries =
        only(phase, &format!("phases.{name}"), &allowed, why).map_err(|r| invalid(out, r))?;
    let concurrency_flag = if arrival.is_some() {
        "max-concurrency"
    } else {
        "concurrency"
    };
    for (key, value) in entries {
        measured_field(out, &key.name, value, concurrency_flag)?;
    }
    let paced = phase.get("rate").is_some() || phase.get("rate_series").is_some();
    match (arrival, paced) {
        (Some(a), true) => out.set("arrival", vec![a], phase.line),
        (Some(_), false) => Err(invalid(
            out,
            (
                phase.line,
                format!("phases.{name}: a `{kind}` phase needs `rate` or `rate_series`"),
            ),
        )),
        (None, _) => Ok(()),
    }
}

/// `type: fixed_schedule`: the dataset's rows at their timestamps
/// (`--fixed-schedule`), `auto_offset`, `start_offset` and `end_offset`
/// (milliseconds) as their flags, `concurrency` as the ceiling of requests
/// in flight (`--max-concurrency`), `duration` and `grace_period` as ever.
fn fixed_schedule(out: &mut Out<'_>, phase: &Node, name: &str) -> Result<(), RunError> {
    let fields = [
        "auto_offset",
        "start_offset",
        "end_offset",
        "concurrency",
        "duration",
        "grace_period",
    ];
    let allowed = [&PHASE_ID[..], &fields].concat();
    let why = "a fixed schedule takes its offsets, a concurrency ceiling, a duration and a \
               grace period";
    let entries =
        only(phase, &format!("phases.{name}"), &allowed, why).map_err(|r| invalid(out, r))?;
    out.set("fixed-schedule", vec!["true".into()], phase.line)?;
    for (key, value) in entries {
        match key.name.as_str() {
            "auto_offset" => out.set(
                "fixed-schedule-auto-offset",
                vec![bool_text(value)],
                value.line,
            )?,
            "start_offset" => out.one("fixed-schedule-start-offset", value)?,
            "end_offset" => out.one("fixed-schedule-end-offset", value)?,
            other => measured_field(out, other, value, "max-concurrency")?,
        }
    }
    Ok(())
}

/// `type: user_centric` (the warmup's or the measured phase's): `users`
/// and `rate` as `--num-users` and `--user-centric-rate` (their warmup
/// flags for a warmup), its size and grace period as ever.
fn user_centric(out: &mut Out<'_>, phase: &Node, name: &str, warmup: bool) -> Result<(), RunError> {
    let mut fields = vec![
        "users",
        "rate",
        "requests",
        "sessions",
        "duration",
        "grace_period",
    ];
    fields.extend(["prefill_concurrency", "prefill_ramp"]);
    if !warmup {
        fields.push("cancellation");
    }
    let allowed = [&PHASE_ID[..], &fields].concat();
    let why = "a user-centric phase takes `users`, `rate`, its size (`requests`, `sessions`, \
               `duration`), `grace_period` and a prefill limit";
    let entries =
        only(phase, &format!("phases.{name}"), &allowed, why).map_err(|r| invalid(out, r))?;
    let (users_flag, rate_flag) = match warmup {
        true => ("warmup-num-users", "warmup-user-centric-rate"),
        false => ("num-users", "user-centric-rate"),
    };
    for (key, value) in entries {
        match (key.name.as_str(), warmup) {
            ("users", _) => out.one(users_flag, value)?,
            ("rate", _) => out.one(rate_flag, value)?,
            (other, true) => warmup_field(out, other, value)?,
            (other, false) => measured_field(out, other, value, "max-concurrency")?,
        }
    }
    for needed in ["users", "rate"] {
        if phase.get(needed).is_none() {
            let m = format!("phases.{name}: a `user_centric` phase needs `{needed}`");
            return Err(invalid(out, (phase.line, m)));
        }
    }
    if warmup
        && ["requests", "sessions", "duration"]
            .iter()
            .all(|k| phase.get(k).is_none())
    {
        let m = format!("phases.{name}: a warmup needs `requests`, `sessions` or a `duration`");
        return Err(invalid(out, (phase.line, m)));
    }
    Ok(())
}

/// One field of the measured phase as its flag.
fn measured_field(
    out: &mut Out<'_>,
    name: &str,
    value: &Node,
    concurrency_flag: &str,
) -> Result<(), RunError> {
    match name {
        "requests" => out.one("request-count", value),
        "sessions" => out.one("num-conversations", value),
        "duration" => out.set("benchmark-duration", vec![seconds(out, value)?], value.line),
        "grace_period" => out.set(
            "benchmark-grace-period",
            vec![seconds(out, value)?],
            value.line,
        ),
        "concurrency" => out.one(concurrency_flag, value),
        "rate" => out.one("request-rate", value),
        "smoothness" => out.one("arrival-smoothness", value),
        "rate_ramp" => ramp(out, "request-rate-ramp-duration", value),
        "concurrency_ramp" => ramp(out, "concurrency-ramp-duration", value),
        "prefill_concurrency" => out.one("prefill-concurrency", value),
        "prefill_ramp" => ramp(out, "prefill-concurrency-ramp-duration", value),
        "rate_series" => rate_series(out, value),
        "cancellation" => cancellation(out, value),
        _ => Ok(()),
    }
}

/// A phase's ramp: seconds (`30`, `"30s"`) or `{duration, strategy}`,
/// linear only (speedbench's ramps are AIPerf's linear ones).
fn ramp(out: &mut Out<'_>, flag: &str, node: &Node) -> Result<(), RunError> {
    let duration = match node.entries() {
        None => node,
        Some(_) => {
            let allowed = ["duration", "strategy"];
            let why = "a ramp takes `duration` and `strategy: linear`";
            only(node, flag, &allowed, why).map_err(|r| invalid(out, r))?;
            if let Some(strategy) = node.get("strategy")
                && strategy.scalar_text().as_deref() != Some("linear")
            {
                let m = format!(
                    "`strategy: {}`: speedbench ramps linearly (AIPerf's default); write `strategy: linear` or leave it out",
                    strategy.scalar_text().unwrap_or_default()
                );
                return Err(invalid(out, (strategy.line, m)));
            }
            node.get("duration")
                .ok_or_else(|| invalid(out, (node.line, "a ramp needs `duration`".to_string())))?
        }
    };
    out.set(flag, vec![seconds(out, duration)?], duration.line)
}

/// `rate_series`: a JSON file's path, or the points inline (a list, or
/// `{points: [...]}`), which travel to `--request-rate-series` as JSON.
fn rate_series(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    let points = match (&node.value, node.get("points"), node.get("path")) {
        (Value::Str(_), ..) => return out.one("request-rate-series", node),
        (_, _, Some(path)) => return out.one("request-rate-series", path),
        (Value::List(points), ..) => points,
        (
            _,
            Some(Node {
                value: Value::List(points),
                ..
            }),
            _,
        ) => points,
        _ => {
            let m = "`rate_series`: a JSON file's path or a list of `{time_s, qps}` points";
            return Err(invalid(out, (node.line, m.to_string())));
        }
    };
    let json: Vec<String> = points
        .iter()
        .map(|p| {
            let field = |k: &str| p.get(k).and_then(Node::scalar_text).unwrap_or_default();
            format!(
                r#"{{"time_s": {}, "qps": {}}}"#,
                field("time_s"),
                field("qps")
            )
        })
        .collect();
    out.set(
        "request-rate-series",
        vec![format!("[{}]", json.join(", "))],
        node.line,
    )
}

/// `cancellation: {rate, delay}`: the percentage cancelled and the delay.
fn cancellation(out: &mut Out<'_>, node: &Node) -> Result<(), RunError> {
    let why = "cancellation takes `rate` (a percentage) and `delay` (seconds)";
    let entries =
        only(node, "cancellation", &["rate", "delay"], why).map_err(|r| invalid(out, r))?;
    for (key, value) in entries {
        match key.name.as_str() {
            "rate" => out.one("request-cancellation-rate", value)?,
            "delay" => out.set(
                "request-cancellation-delay",
                vec![seconds(out, value)?],
                value.line,
            )?,
            _ => {}
        }
    }
    Ok(())
}

/// A measured phase's arrival: `None` for a closed loop (`concurrency`),
/// the process of a request rate (`poisson`, `constant`); any other phase
/// type has no counterpart.
fn arrival_of(
    out: &Out<'_>,
    phase: &Node,
    name: &str,
    kind: &str,
) -> Result<Option<String>, RunError> {
    match kind {
        "concurrency" => Ok(None),
        "poisson" | "constant" | "gamma" => Ok(Some(kind.to_string())),
        _ => {
            let why = "speedbench's load is closed-loop (`concurrency`) or a request rate \
                       (`poisson`, `constant`, `gamma`)";
            let m = format!(
                "`phases.{name}.type: {kind}`: {why}; change it to run this config with speedbench"
            );
            Err(invalid(out, (phase.line, m)))
        }
    }
}

/// An AIPerf duration (`30`, `30s`, `5m`, `2h`) in seconds.
fn seconds(out: &Out<'_>, node: &Node) -> Result<String, RunError> {
    let bad = || {
        invalid(
            out,
            (
                node.line,
                format!(
                    "`{}`: a duration (30, 30s, 5m, 2h)",
                    node.scalar_text().unwrap_or_default()
                ),
            ),
        )
    };
    match &node.value {
        Value::Int(i) => Ok(i.to_string()),
        Value::Float(f) => Ok(f.to_string()),
        Value::Str(s) => {
            let s = s.trim().to_ascii_lowercase();
            let split = s
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(s.len());
            let number: f64 = s[..split].parse().map_err(|_| bad())?;
            let factor = match s[split..].trim() {
                "" | "s" | "sec" => 1.0,
                "m" | "min" => 60.0,
                "h" | "hr" | "hour" => 3600.0,
                _ => return Err(bad()),
            };
            Ok((number * factor).to_string())
        }
        _ => Err(bad()),
    }
}
