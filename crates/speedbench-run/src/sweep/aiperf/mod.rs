//! AIPerf 0.13.0's YAML config files (`schemaVersion: "2.0"`) read as a
//! sweep: `${VAR:default}` substituted, AIPerf's shorthands expanded, a
//! `sweep: {type: grid}` turned into one run per combination, and each
//! run's `benchmark` block turned into the `speedbench profile` flags that
//! do the same (module `fields`). A field speedbench has no counterpart
//! for is refused with its dotted name and line, never ignored.
//!
//! The runs go where AIPerf puts them: `artifacts.dir` itself for a config
//! without a sweep, `artifacts.dir/<leaf>_<value>` (AIPerf's `dir_name`,
//! `format_speed_bench_coding`) for each combination of a sweep.

mod fields;
mod jinja;
mod merge;
mod plot;
mod shape;

use std::collections::BTreeSet;

use super::SweepPlots;
use super::file::{Expanded, Setting, Source, Variation};
use crate::error::RunError;
use crate::yaml::{Key, Node, Value};
use shape::{at, normalize_benchmark, snake_keys, substitute};

/// AIPerf's bare sweep names and the phase fields they stand for
/// (`_SWEEP_PATH_ALIASES`, aiperf/config/loader/dotted_path.py).
const SWEEP_ALIASES: [&str; 13] = [
    "concurrency",
    "prefill_concurrency",
    "rate",
    "requests",
    "duration",
    "sessions",
    "users",
    "smoothness",
    "grace_period",
    "concurrency_ramp",
    "prefill_ramp",
    "rate_ramp",
    "rate_series",
];

/// Whether a YAML document is an AIPerf config (it names its schema).
pub(crate) fn is_aiperf_config(root: &Node) -> bool {
    root.get("schemaVersion").is_some() || root.get("schema_version").is_some()
}

/// One swept parameter: its dotted path (aliases resolved) and values.
struct Dimension {
    path: String,
    values: Vec<Node>,
}

/// One run of a `sweep: {type: scenarios}`: its name and the `benchmark`
/// fields it lays over the config's.
struct Scenario {
    name: String,
    benchmark: Node,
    line: usize,
}

/// What a `sweep:` asks for, and whether every run takes the config's
/// `randomSeed` as it is (`sameSeed: true`, or no sweep) or plus its index.
struct Plan {
    runs: SweepPlan,
    same_seed: bool,
}

/// The runs a `sweep:` asks for.
enum SweepPlan {
    /// Every combination of the dimensions (none: the config's one run).
    Grid(Vec<Dimension>),
    /// Each scenario's fields over the config's, one run each.
    Scenarios(Vec<Scenario>),
}

/// Expands an AIPerf config into its runs, reading `${VAR}` from `env`.
pub(crate) fn expand(
    source: &Source<'_>,
    root: Node,
    cli: &BTreeSet<String>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Expanded, RunError> {
    let fail = |line: usize, m: String| RunError::invalid(at(source, line), m);
    // The values the environment gives, remembered to be named by their
    // variable wherever they would be shown (one may be a secret).
    let env_values = std::cell::RefCell::new(Vec::new());
    let recording = |name: &str| {
        let value = env(name);
        if let Some(v) = &value {
            env_values
                .borrow_mut()
                .push((v.clone(), format!("${{{name}}}")));
        }
        value
    };
    let root = substitute(root, &recording).map_err(|(l, m)| fail(l, m))?;
    let root = snake_keys(jinja::render(root).map_err(|(l, m)| fail(l, m))?);
    let env_values = env_values.into_inner();
    let named = |text: String| super::named_not_valued(&text, &env_values);
    let expanded = expand_substituted(source, &root, cli).map_err(|e| match e {
        RunError::Invalid { field, message } => RunError::Invalid {
            field: named(field),
            message: named(message),
        },
        other => other,
    })?;
    Ok(Expanded {
        env_values,
        ..expanded
    })
}

/// [`expand`] of a config whose `${VAR}`s are substituted.
fn expand_substituted(
    source: &Source<'_>,
    root: &Node,
    cli: &BTreeSet<String>,
) -> Result<Expanded, RunError> {
    let fail = |line: usize, m: String| RunError::invalid(at(source, line), m);
    let mut top = Top::read(root).map_err(|(l, m)| fail(l, m))?;
    let plots = match top.plot.map(|p| plot::read_plot(p, source.path)) {
        Some(Ok(plots)) => plots,
        Some(Err(refused)) => {
            top.refused.push(refused);
            SweepPlots::default()
        }
        None => SweepPlots::default(),
    };
    let plan = match top.sweep {
        Some(s) => sweep_plan(s).map_err(|(l, m)| fail(l, m))?,
        None => Plan {
            runs: SweepPlan::Grid(Vec::new()),
            same_seed: true,
        },
    };
    let base = normalize_benchmark(top.benchmark.clone()).map_err(|(l, m)| fail(l, m))?;
    let base = with_user_file_variables(base, root.get("variables"));
    refuse_top_level(source, &top, &base)?;
    let seeds = Seeds {
        seed: top.random_seed,
        same: plan.same_seed,
    };
    let mut variations = match &plan.runs {
        SweepPlan::Grid(dimensions) => grid_variations(source, &top, &base, dimensions, seeds)?,
        SweepPlan::Scenarios(scenarios) => {
            scenario_variations(source, &top, root, scenarios, seeds)?
        }
    };
    refuse_swept_cli_flags(&variations, cli)?;
    for v in &mut variations {
        v.settings.retain(|s| !cli.contains(s.flag.long));
    }
    let parent = fields::artifacts_dir(&base).map_err(|(l, m)| fail(l, m))?;
    Ok(Expanded {
        variations,
        parent,
        report_tokens: Vec::new(),
        env_values: Vec::new(),
        trials: top.trials,
        plots,
    })
}

/// One run per combination of the grid's values over `base`; the same
/// cap as a TOML sweep's, checked before anything is expanded.
fn grid_variations(
    source: &Source<'_>,
    top: &Top<'_>,
    base: &Node,
    dimensions: &[Dimension],
    seeds: Seeds<'_>,
) -> Result<Vec<Variation>, RunError> {
    let fail = |line: usize, m: String| RunError::invalid(at(source, line), m);
    let total = dimensions
        .iter()
        .try_fold(1usize, |acc, d| acc.checked_mul(d.values.len()));
    match total {
        None => return Err(super::file::too_many(source, "more than 2^64")),
        Some(n) if n > super::file::MAX_VARIATIONS => {
            return Err(super::file::too_many(source, &n.to_string()));
        }
        Some(_) => {}
    }
    let mut variations = Vec::new();
    for (index, chosen) in combinations(dimensions).into_iter().enumerate() {
        let mut benchmark = base.clone();
        for (d, value) in dimensions.iter().zip(&chosen) {
            shape::set_path(&mut benchmark, &d.path, value.clone()).map_err(|(l, m)| fail(l, m))?;
        }
        let settings = seeded(
            source,
            fields::settings(source, &benchmark)?,
            seeds.seed,
            seeds.offset(index),
        )?;
        variations.push(variation(source, index, dimensions, &chosen, settings, top));
    }
    Ok(variations)
}

/// One run per scenario: its `benchmark` fields laid over the config's
/// (module `merge`), then read as any config's; its directory its name.
fn scenario_variations(
    source: &Source<'_>,
    top: &Top<'_>,
    root: &Node,
    scenarios: &[Scenario],
    seeds: Seeds<'_>,
) -> Result<Vec<Variation>, RunError> {
    let fail = |line: usize, m: String| RunError::invalid(at(source, line), m);
    if scenarios.len() > super::file::MAX_VARIATIONS {
        return Err(super::file::too_many(source, &scenarios.len().to_string()));
    }
    let mut variations = Vec::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        let mut overlay = scenario.benchmark.clone();
        merge::dataset_as_list_entry(&mut overlay, top.benchmark);
        let mut merged = top.benchmark.clone();
        merge::deep_merge(&mut merged, &overlay);
        let benchmark = normalize_benchmark(merged).map_err(|(l, m)| fail(l, m))?;
        let benchmark = with_user_file_variables(benchmark, root.get("variables"));
        let settings = seeded(
            source,
            fields::settings(source, &benchmark)?,
            seeds.seed,
            seeds.offset(index),
        )?;
        let mut dir_name = safe_segment(&scenario.name);
        if dir_name.trim_matches('.').is_empty() {
            dir_name = format!("variation_{index}");
        }
        variations.push(Variation {
            index: index + 1,
            dir_name,
            description: format!("scenario {}", scenario.name),
            origin: format!("sweep run {} at {}", index + 1, at(source, scenario.line)),
            settings,
        });
    }
    Ok(variations)
}

/// The config's `randomSeed` and whether a sweep's runs share it.
#[derive(Clone, Copy)]
struct Seeds<'a> {
    seed: Option<&'a Node>,
    same: bool,
}

impl Seeds<'_> {
    /// What run `index` (from 0) adds to the seed.
    fn offset(&self, index: usize) -> usize {
        if self.same { 0 } else { index }
    }
}

/// A run's flags with the config's `randomSeed`, where it has one.
///
/// In a sweep, run `offset` (from 0) takes `randomSeed + offset`, as AIPerf
/// derives each variation's seed, unless the sweep says `sameSeed: true`
/// (then `offset` is 0).
fn seeded(
    source: &Source<'_>,
    mut settings: Vec<Setting>,
    seed: Option<&Node>,
    offset: usize,
) -> Result<Vec<Setting>, RunError> {
    let Some(seed) = seed else {
        return Ok(settings);
    };
    let line = at(source, seed.line);
    let value = match (&seed.value, offset) {
        (_, 0) => text(seed),
        (Value::Int(base), _) if *base >= 0 => (*base as u64 + offset as u64).to_string(),
        _ => {
            let m = "randomSeed: a whole number (each run of a sweep takes it plus its index)";
            return Err(RunError::invalid(line, m));
        }
    };
    settings.push(Setting::new("random-seed", vec![value], line)?);
    Ok(settings)
}

/// A refused top-level field, named with every refused field of the
/// benchmark block in one error.
fn refuse_top_level(source: &Source<'_>, top: &Top<'_>, base: &Node) -> Result<(), RunError> {
    let fail = |line: usize, m: &str| RunError::invalid(at(source, line), m);
    let mut all: Vec<RunError> = top.refused.iter().map(|(l, m)| fail(*l, m)).collect();
    if all.is_empty() {
        return Ok(());
    }
    all.extend(fields::read_benchmark(source, base).1);
    Err(fields::all_refused(all).unwrap_or_else(|| fail(1, "refused")))
}

/// The top level of a config: what speedbench reads of it.
struct Top<'a> {
    benchmark: &'a Node,
    sweep: Option<&'a Node>,
    random_seed: Option<&'a Node>,
    /// `plot`: AIPerf's plot envelope (module `plot`).
    plot: Option<&'a Node>,
    /// `multiRun` of more than one trial: the one run repeated so, or
    /// each run of the sweep in as many trials.
    trials: Option<crate::RepeatSpec>,
    /// Top-level fields speedbench cannot honour.
    refused: Vec<(usize, String)>,
}

impl<'a> Top<'a> {
    fn read(root: &'a Node) -> Result<Top<'a>, (usize, String)> {
        let entries = root
            .entries()
            .ok_or((root.line, "an AIPerf config is a mapping".to_string()))?;
        let (mut benchmark, mut sweep, mut random_seed, mut plot) = (None, None, None, None);
        let (mut trials, mut refused) = (None, Vec::new());
        for (key, value) in entries {
            match key.name.as_str() {
                "schema_version" => check_schema(value)?,
                "benchmark" => benchmark = Some(value),
                "sweep" => sweep = Some(value),
                "random_seed" => random_seed = Some(value),
                "plot" => plot = Some(value),
                // Rendered into the values that name them (module `jinja`).
                "variables" => {}
                "multi_run" => match multi_run(value) {
                    Ok(repeat) => trials = repeat,
                    Err(r) => refused.push(r),
                },
                other => refused.push(unsupported(key, other, top_level_why(other))),
            }
        }
        Ok(Top {
            benchmark: benchmark.ok_or((1, "no `benchmark:` block: nothing to run".to_string()))?,
            sweep,
            random_seed,
            plot,
            trials,
            refused,
        })
    }
}

fn check_schema(value: &Node) -> Result<(), (usize, String)> {
    match &value.value {
        Value::Str(s) if s == "2.0" => Ok(()),
        Value::Float(f) if *f == 2.0 => Ok(()),
        _ => Err((
            value.line,
            format!(
                "schemaVersion `{}`: speedbench reads AIPerf's schema \"2.0\" (AIPerf 0.13.0)",
                value.scalar_text().unwrap_or_default()
            ),
        )),
    }
}

/// `multiRun`: `numRuns` (1 to 10: one is a plain run), `cooldownSeconds`,
/// `confidenceLevel` and `disableWarmupAfterFirst`, as `profile
/// --num-profile-runs` repeats a run; `setConsistentSeed: false` is
/// refused (every run sends the same prompts in the same order).
fn multi_run(value: &Node) -> Result<Option<crate::RepeatSpec>, (usize, String)> {
    let mut repeat = crate::RepeatSpec::default();
    for (key, v) in value.entries().unwrap_or_default() {
        let number = match &v.value {
            Value::Int(i) => Some(*i as f64),
            Value::Float(f) => Some(*f),
            _ => None,
        };
        let bad = |what: &str| {
            unsupported(
                key,
                &format!(
                    "multi_run.{}: {}",
                    key.name,
                    v.scalar_text().unwrap_or_default()
                ),
                what,
            )
        };
        match (key.name.as_str(), number, &v.value) {
            ("num_runs", Some(n), _) if (1.0..=10.0).contains(&n) && n.fract() == 0.0 => {
                repeat.num_profile_runs = n as usize;
            }
            ("num_runs", ..) => return Err(bad("repeated runs are 1 to 10 (AIPerf's bound)")),
            ("cooldown_seconds", Some(s), _) if s >= 0.0 => repeat.cooldown_s = s,
            ("confidence_level", Some(c), _) if c > 0.0 && c < 1.0 => repeat.confidence_level = c,
            ("disable_warmup_after_first", _, Value::Bool(b)) => repeat.warmup_every_run = !b,
            ("set_consistent_seed", _, Value::Bool(true)) => {}
            _ => {
                return Err(bad(
                    "repeated runs send the same prompts in the same order with the same seed, \
                     and take `numRuns` (1-10), `cooldownSeconds` (0 or more), \
                     `confidenceLevel` (between 0 and 1) and `disableWarmupAfterFirst`",
                ));
            }
        }
    }
    Ok((repeat.num_profile_runs > 1).then_some(repeat))
}

fn top_level_why(name: &str) -> &'static str {
    match name {
        "slos" => "it computes no goodput against SLOs; leave `slos` out",
        _ => "not a field of an AIPerf 0.13.0 config that speedbench has a counterpart for",
    }
}

/// A refusal of field `name` at its key's line.
pub(super) fn unsupported(key: &Key, name: &str, why: &str) -> (usize, String) {
    (
        key.line,
        format!("`{name}` is not run by speedbench: {why}"),
    )
}

/// `artifacts.user_files` with the config's `variables` beside them
/// (`{files, variables}`): they are rendered when the run starts, with the
/// run's own names too (`--user-files`).
fn with_user_file_variables(mut benchmark: Node, variables: Option<&Node>) -> Node {
    let (Some(vars), Value::Map(entries)) = (variables, &mut benchmark.value) else {
        return benchmark;
    };
    let artifacts = entries.iter_mut().find(|(k, _)| k.name == "artifacts");
    let Some((
        _,
        Node {
            value: Value::Map(fields),
            ..
        },
    )) = artifacts
    else {
        return benchmark;
    };
    if let Some((key, files)) = fields.iter_mut().find(|(k, _)| k.name == "user_files") {
        let line = files.line;
        let list = std::mem::replace(
            files,
            Node {
                line,
                value: Value::Null,
            },
        );
        let key = |name: &str| Key {
            name: name.into(),
            line: key.line,
        };
        *files = Node {
            line,
            value: Value::Map(vec![(key("files"), list), (key("variables"), vars.clone())]),
        };
    }
    benchmark
}

/// `sweep:`: a grid over dotted parameters, or named scenarios.
fn sweep_plan(sweep: &Node) -> Result<Plan, (usize, String)> {
    let kind = sweep.get("type").and_then(Node::scalar_text);
    let (fields, why): (&[&str], _) = match kind.as_deref() {
        Some("grid") => (
            &["type", "parameters", "same_seed", "iteration_order"],
            "its grid sweeps take `type`, `parameters`, `sameSeed` and `iterationOrder: repeated`",
        ),
        Some("scenarios") => (
            &["type", "runs", "same_seed", "iteration_order"],
            "its scenario sweeps take `type`, `runs`, `sameSeed` and `iterationOrder: repeated`",
        ),
        _ => {
            let line = sweep.key("type").map_or(sweep.line, |k| k.line);
            return Err((
                line,
                "sweep: `type: grid` (every combination of the lists) or `type: scenarios` \
                 (named runs over the config) are the sweeps speedbench expands"
                    .into(),
            ));
        }
    };
    let mut same_seed = false;
    for (key, value) in sweep.entries().unwrap_or_default() {
        match (key.name.as_str(), &value.value) {
            ("same_seed", Value::Bool(b)) => same_seed = *b,
            ("iteration_order", _) if value.scalar_text().as_deref() == Some("repeated") => {}
            ("iteration_order", _) => {
                let why = "trials run outer, the sweep's runs inner (`repeated`, AIPerf's default)";
                return Err(unsupported(key, "sweep.iteration_order", why));
            }
            ("same_seed", _) => return Err((key.line, "sweep.sameSeed: true or false".into())),
            (name, _) if !fields.contains(&name) => {
                return Err(unsupported(key, &format!("sweep.{name}"), why));
            }
            _ => {}
        }
    }
    let runs = match kind.as_deref() {
        Some("scenarios") => SweepPlan::Scenarios(scenarios(sweep)?),
        _ => SweepPlan::Grid(dimensions(sweep)?),
    };
    Ok(Plan { runs, same_seed })
}

/// `sweep: {type: scenarios, runs}`: each run's `name` and `benchmark`.
fn scenarios(sweep: &Node) -> Result<Vec<Scenario>, (usize, String)> {
    let Some(Value::List(runs)) = sweep.get("runs").map(|r| &r.value) else {
        return Err((sweep.line, "sweep: `runs`, a list of scenarios".to_string()));
    };
    let mut out = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let (mut name, mut benchmark) = (None, None);
        for (key, value) in run.entries().unwrap_or_default() {
            match key.name.as_str() {
                "name" => name = value.scalar_text(),
                "benchmark" => benchmark = Some(value.clone()),
                other => {
                    let why = "a scenario takes `name` and `benchmark` (the fields it changes)";
                    return Err(unsupported(key, &format!("sweep.runs[{i}].{other}"), why));
                }
            }
        }
        out.push(Scenario {
            name: name.unwrap_or_else(|| format!("scenario_{i}")),
            benchmark: benchmark.ok_or((run.line, format!("sweep.runs[{i}]: no `benchmark`")))?,
            line: run.line,
        });
    }
    if out.is_empty() {
        return Err((sweep.line, "sweep: `runs` is empty".to_string()));
    }
    Ok(out)
}

/// `sweep: {type: grid, parameters}`: the dimensions.
fn dimensions(sweep: &Node) -> Result<Vec<Dimension>, (usize, String)> {
    let parameters = sweep.get("parameters");
    let parameters = parameters.ok_or((sweep.line, "sweep: no `parameters`".to_string()))?;
    let mut out: Vec<Dimension> = Vec::new();
    for (key, value) in parameters.entries().unwrap_or_default() {
        let path = resolve_alias(&key.name);
        let Value::List(values) = &value.value else {
            return Err((
                key.line,
                format!("sweep parameter `{}`: a list of values", key.name),
            ));
        };
        if values.is_empty() {
            return Err((
                key.line,
                format!("sweep parameter `{}`: an empty list", key.name),
            ));
        }
        if path.starts_with("benchmark.") || out.iter().any(|d| d.path == path) {
            let why = format!(
                "sweep parameter `{}`: a path under `benchmark`, once",
                key.name
            );
            return Err((key.line, why));
        }
        out.push(Dimension {
            path,
            values: values.clone(),
        });
    }
    Ok(out)
}

/// `rate` is `phases.profiling.rate`, as in AIPerf.
fn resolve_alias(name: &str) -> String {
    let bare = shape::snake(name);
    if !name.contains('.') && SWEEP_ALIASES.contains(&bare.as_str()) {
        format!("phases.profiling.{bare}")
    } else {
        // As written: a list entry's `name` keeps its spelling.
        name.to_string()
    }
}

/// Every combination of the dimensions' values, the first varying slowest
/// (AIPerf's order, `itertools.product`); one empty combination without a
/// sweep.
fn combinations(dimensions: &[Dimension]) -> Vec<Vec<Node>> {
    let mut out: Vec<Vec<Node>> = vec![Vec::new()];
    for d in dimensions {
        out = out
            .into_iter()
            .flat_map(|prefix| {
                d.values.iter().map(move |v| {
                    let mut next = prefix.clone();
                    next.push(v.clone());
                    next
                })
            })
            .collect();
    }
    out
}

/// A value as Python's `str()` writes it: AIPerf's directory names and
/// labels are made so (`rate_10.0`, `format_speed_bench_coding`).
fn python_str(node: &Node) -> String {
    match &node.value {
        Value::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e16 => format!("{f:.1}"),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Null => "None".into(),
        _ => node
            .scalar_text()
            .unwrap_or_else(|| node.kind().to_string()),
    }
}

fn text(node: &Node) -> String {
    node.scalar_text().unwrap_or_default()
}

/// AIPerf's `dir_name`: `<last segment>_<value>`, joined by `__`, with
/// `/`, `\`, `..` and `<>:"|?*` taken out.
fn dir_name(dimensions: &[Dimension], chosen: &[Node]) -> String {
    let joined = dimensions
        .iter()
        .zip(chosen)
        .map(|(d, v)| {
            let leaf = d.path.rsplit('.').next().unwrap_or(&d.path);
            format!("{leaf}_{}", python_str(v))
        })
        .collect::<Vec<_>>()
        .join("__");
    safe_segment(&joined)
}

/// `segment` with `/`, `\`, `..` and `<>:"|?*` taken out (AIPerf's
/// `_sanitize_dir_segment`): a name from the file never leaves the parent.
fn safe_segment(segment: &str) -> String {
    let mut safe = segment.replace(['/', '\\'], "").replace("..", "");
    safe.retain(|c| !"<>:\"|?*".contains(c));
    safe
}

fn variation(
    source: &Source<'_>,
    index: usize,
    dimensions: &[Dimension],
    chosen: &[Node],
    settings: Vec<Setting>,
    top: &Top<'_>,
) -> Variation {
    let label = dimensions
        .iter()
        .zip(chosen)
        .map(|(d, v)| format!("{}={}", d.path, python_str(v)))
        .collect::<Vec<_>>()
        .join(", ");
    let origin = match chosen.first() {
        Some(v) => format!("sweep combination {} at {}", index + 1, at(source, v.line)),
        None => format!("benchmark at {}", at(source, top.benchmark.line)),
    };
    Variation {
        index: index + 1,
        dir_name: dir_name(dimensions, chosen),
        description: if label.is_empty() {
            "run".into()
        } else {
            label
        },
        origin,
        settings,
    }
}

/// A flag the sweep varies may not come from the command line too: every
/// run would take the command line's value and the runs would be alike.
fn refuse_swept_cli_flags(
    variations: &[Variation],
    cli: &BTreeSet<String>,
) -> Result<(), RunError> {
    let Some(first) = variations.first() else {
        return Ok(());
    };
    for v in &variations[1..] {
        for s in &v.settings {
            let same = first
                .settings
                .iter()
                .any(|f| f.flag.long == s.flag.long && f.values == s.values);
            if !same && cli.contains(s.flag.long) {
                return Err(RunError::invalid(
                    &s.at,
                    format!(
                        "--{} on the command line would replace what the sweep varies, making \
                         the runs alike; change it in the file instead",
                        s.flag.long
                    ),
                ));
            }
        }
    }
    Ok(())
}
