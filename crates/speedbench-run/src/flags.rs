//! The flags of `speedbench profile` as the library knows them: each
//! long name (and alias), how it takes its value, and what it sets in a
//! [`RunSpec`]. A sweep file's keys are these names, so a library user
//! expands a sweep without a command-line parser; the binary's clap
//! definition is tested against this table, so the two cannot drift.
//!
//! ```
//! use speedbench_run::{RunSpec, flags};
//!
//! let mut spec = RunSpec::default();
//! flags::set(&mut spec, "request_rate", "12.5")?;
//! flags::set(&mut spec, "category", "coding,math")?;
//! assert_eq!(spec.load.request_rate, Some(12.5));
//! assert_eq!(spec.dataset.category, ["coding", "math"]);
//! assert!(flags::set(&mut spec, "concurrency", "many").is_err());
//! # Ok::<(), speedbench_run::RunError>(())
//! ```

use std::fmt::Display;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::str::FromStr;

use speedbench_dataset::Resolver;
use speedbench_dataset::registry::SPEED_BENCH_CONFIGS;

use crate::error::RunError;
use crate::spec::{DatasetSource, RunSpec, Secret};

/// How a flag takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// A switch: `true` gives it, `false` leaves it out.
    Switch,
    /// One value.
    One,
    /// Repeatable: each value is added to the ones before.
    Many,
}

/// What a flag's value does to a spec; `Err` says why the text is no value
/// of it.
type Setter = fn(&mut RunSpec, &str) -> Result<(), String>;

/// One flag of `speedbench profile`.
#[derive(Clone, Copy)]
pub struct Flag {
    /// The long name, with dashes (`request-rate`).
    pub long: &'static str,
    /// Other names it answers to (`request-rate-mode` for `arrival`).
    pub aliases: &'static [&'static str],
    /// How it takes its value.
    pub kind: FlagKind,
    set: Setter,
}

impl std::fmt::Debug for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flag")
            .field("long", &self.long)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Flag {
    /// The key of this flag in a sweep file (`request_rate`).
    pub fn key(&self) -> String {
        self.long.replace('-', "_")
    }

    /// Sets one value (for a [`FlagKind::Many`] flag, adds it; for a
    /// switch, `true` or `false`), as the command line would.
    pub fn apply(&self, spec: &mut RunSpec, value: &str) -> Result<(), RunError> {
        (self.set)(spec, value).map_err(|why| {
            RunError::invalid(
                format!("invalid value '{value}' for '--{}'", self.long),
                why,
            )
        })
    }

    /// Whether `name` (dashes or underscores) names this flag.
    fn answers_to(&self, name: &str) -> bool {
        let name = normalize(name);
        self.long == name || self.aliases.contains(&name.as_str())
    }
}

/// `request_rate` and `request-rate` are one name.
pub fn normalize(name: &str) -> String {
    name.trim().replace('_', "-")
}

/// A value parsed as its flag's type.
fn parse<T: FromStr<Err: Display>>(value: &str) -> Result<T, String> {
    value.parse::<T>().map_err(|e| e.to_string())
}

/// `true` or `false`.
fn switch(value: &str) -> Result<bool, String> {
    parse::<bool>(value).map_err(|_| "a switch takes true or false".to_string())
}

/// The one dataset source: a second one is refused, as the command line's
/// `--input-file`, `--public-dataset` and `--bench` exclude each other.
fn source(spec: &mut RunSpec, new: DatasetSource) -> Result<(), String> {
    let name = |s: &DatasetSource| match s {
        DatasetSource::InputFile(_) => "--input-file",
        DatasetSource::PublicDataset(_) => "--public-dataset",
        DatasetSource::Bench(_) => "--bench",
    };
    match &spec.dataset.source {
        Some(old) if name(old) != name(&new) => Err(format!(
            "cannot be used with {} (one dataset source per run)",
            name(old)
        )),
        _ => {
            spec.dataset.source = Some(new);
            Ok(())
        }
    }
}

/// `--limit N`: a whole number of rows, at least 1.
pub fn parse_limit(s: &str) -> Result<NonZeroUsize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err(
            "must be at least 1: it is the number of rows kept of each category \
                      (omit --limit to keep every row)"
                .to_string(),
        ),
        Ok(n) => Ok(NonZeroUsize::new(n).expect("not zero")),
        Err(e) => Err(format!("not a whole number of rows ({e})")),
    }
}

/// One of `names`, or an error listing them.
fn one_of(value: &str, names: &[&str]) -> Result<(), String> {
    if names.contains(&value) {
        Ok(())
    } else {
        Err(format!("possible values: {}", names.join(", ")))
    }
}

macro_rules! flag {
    ($long:literal, $kind:ident, |$s:ident, $v:ident| $body:expr) => {
        flag!($long, [], $kind, |$s, $v| $body)
    };
    ($long:literal, [$($alias:literal),*], $kind:ident, |$s:ident, $v:ident| $body:expr) => {
        Flag {
            long: $long,
            aliases: &[$($alias),*],
            kind: FlagKind::$kind,
            set: |$s: &mut RunSpec, $v: &str| -> Result<(), String> {
                $body;
                #[allow(unreachable_code)]
                Ok(())
            },
        }
    };
}

/// The target and request flags.
const TARGET: &[Flag] = &[
    flag!("url", One, |s, v| s.target.url = v.to_string()),
    flag!("model", One, |s, v| s.target.model = Some(v.to_string())),
    flag!("endpoint-type", One, |s, v| s.target.endpoint_type =
        parse(v)?),
    flag!("streaming", Switch, |s, v| s.target.streaming = switch(v)?),
    flag!("timeout", One, |s, v| s.target.timeout_s = parse(v)?),
    flag!("api-key", One, |s, v| s.target.api_key =
        Some(Secret::new(v))),
    flag!("header", Many, |s, v| s.target.headers.push(Secret::new(v))),
    flag!("ca-cert", Many, |s, v| s.target.ca_cert.push(v.into())),
    flag!("local-addr", Many, |s, v| {
        for addr in v.split(',') {
            s.target.local_addr.push(parse(addr)?);
        }
    }),
    flag!("http-client", One, |s, v| s.target.http_client = parse(v)?),
    flag!("max-response-bytes", One, |s, v| s
        .target
        .max_response_bytes =
        parse(v)?),
    flag!("engine", One, |s, v| s.target.engine = parse(v)?),
    flag!("no-preflight", Switch, |s, v| s.target.preflight =
        !switch(v)?),
    flag!("osl", One, |s, v| s.sampling.osl = Some(parse(v)?)),
    flag!("extra-inputs", Many, |s, v| s
        .sampling
        .extra_inputs
        .push(v.to_string())),
];

/// The dataset flags.
const DATASET: &[Flag] = &[
    flag!("input-file", One, |s, v| source(
        s,
        DatasetSource::InputFile(PathBuf::from(v))
    )?),
    flag!("public-dataset", One, |s, v| source(
        s,
        DatasetSource::PublicDataset(v.to_string())
    )?),
    flag!("bench", One, |s, v| {
        one_of(v, &SPEED_BENCH_CONFIGS)?;
        source(s, DatasetSource::Bench(v.to_string()))?
    }),
    flag!("dataset-cache", One, |s, v| s.dataset.dataset_cache =
        Some(v.into())),
    flag!("resolver", One, |s, v| {
        one_of(v, &Resolver::NAMES)?;
        s.dataset.resolver = parse(v)?
    }),
    flag!("python", One, |s, v| s.dataset.python = Some(v.into())),
    flag!("prepare-script", One, |s, v| s.dataset.prepare_script =
        Some(v.into())),
    flag!("category", Many, |s, v| s
        .dataset
        .category
        .extend(v.split(',').map(str::to_string))),
    flag!("limit", One, |s, v| s.dataset.limit = Some(parse_limit(v)?)),
];

/// The load-shape flags.
const LOAD: &[Flag] = &[
    flag!("concurrency", One, |s, v| s.load.concurrency = parse(v)?),
    flag!("request-count", One, |s, v| s.load.request_count =
        Some(parse(v)?)),
    flag!("num-conversations", One, |s, v| s.load.num_conversations =
        Some(parse(v)?)),
    flag!("warmup-request-count", One, |s, v| s
        .load
        .warmup_request_count =
        parse(v)?),
    flag!("request-rate", One, |s, v| s.load.request_rate =
        Some(parse(v)?)),
    flag!("arrival", ["request-rate-mode"], One, |s, v| s
        .load
        .arrival =
        parse(v)?),
    flag!("random-seed", One, |s, v| s.load.random_seed = parse(v)?),
    flag!("max-concurrency", One, |s, v| s.load.max_concurrency =
        Some(parse(v)?)),
    flag!("benchmark-duration", One, |s, v| s
        .load
        .benchmark_duration_s =
        Some(parse(v)?)),
    flag!("benchmark-grace-period", One, |s, v| s
        .load
        .benchmark_grace_period_s =
        parse(v)?),
    flag!("max-error-rate", One, |s, v| s.load.max_error_rate =
        Some(parse(v)?)),
];

/// The output, shard and scrape flags.
const OUTPUT: &[Flag] = &[
    flag!("output-artifact-dir", One, |s, v| s
        .outputs
        .output_artifact_dir =
        Some(v.into())),
    flag!("staging-dir", One, |s, v| s.outputs.staging_dir =
        Some(v.into())),
    flag!("output", One, |s, v| s.outputs.output = Some(v.into())),
    flag!("overwrite", Switch, |s, v| s.outputs.overwrite = switch(v)?),
    flag!("export-level", One, |s, v| s.outputs.export_level =
        parse(v)?),
    flag!("run-id", One, |s, v| s.outputs.run_id = Some(v.to_string())),
    flag!("shard", One, |s, v| s.shard.shard = Some(parse(v)?)),
    flag!("shard-count", One, |s, v| s.shard.shard_count =
        Some(parse(v)?)),
    flag!("shard-index", One, |s, v| s.shard.shard_index =
        Some(parse(v)?)),
    flag!("start-at", One, |s, v| s.shard.start_at = Some(parse(v)?)),
    flag!("start-after-barrier", One, |s, v| s
        .shard
        .start_after_barrier =
        Some(v.into())),
    flag!("server-metrics", Many, |s, v| s
        .scrape
        .server_metrics
        .push(v.to_string())),
    flag!("no-server-metrics", Switch, |s, v| s.scrape.enabled =
        !switch(v)?),
    flag!("server-metrics-shutdown-delay", One, |s, v| s
        .scrape
        .shutdown_delay_s =
        parse(v)?),
];

/// Every flag of a run, in groups.
const GROUPS: [&[Flag]; 4] = [TARGET, DATASET, LOAD, OUTPUT];

/// Every flag that sets a field of a [`RunSpec`].
pub fn all() -> impl Iterator<Item = &'static Flag> {
    GROUPS.into_iter().flatten()
}

/// The flag a name (long name or alias, dashes or underscores) names.
pub fn find(name: &str) -> Option<&'static Flag> {
    all().find(|f| f.answers_to(name))
}

/// The flag name closest to a mistyped one, when one is close.
pub fn suggest(name: &str) -> Option<&'static str> {
    closest(name, all().map(|f| f.long))
}

/// The name of `names` closest to `name`, within a third of its length.
pub(crate) fn closest<'a>(name: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let name = normalize(name);
    names
        .map(|n| (speedbench_dataset::registry::edit_distance(&name, n), n))
        .filter(|(d, _)| *d <= name.len().max(4) / 3)
        .min()
        .map(|(_, n)| n)
}

/// Sets flag `name` to `value` in `spec`, as the command line would; an
/// unknown name is refused with the closest one.
pub fn set(spec: &mut RunSpec, name: &str, value: &str) -> Result<(), RunError> {
    match find(name) {
        Some(flag) => flag.apply(spec, value),
        None => Err(RunError::invalid(
            format!("--{}", normalize(name)),
            match suggest(name) {
                Some(s) => format!("not an option of `speedbench profile` (did you mean --{s}?)"),
                None => "not an option of `speedbench profile`".to_string(),
            },
        )),
    }
}

/// The options of `speedbench report` a sweep file's `[report]` may set,
/// with how each takes its value (the report's values are checked by the
/// program that runs the report).
pub const REPORT_FLAGS: [(&str, FlagKind); 6] = [
    ("metric", FlagKind::One),
    ("source", FlagKind::One),
    ("format", FlagKind::One),
    ("output", FlagKind::One),
    ("html-output", FlagKind::One),
    ("label", FlagKind::Many),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_sets_its_field_and_refuses_a_bad_value_by_name() {
        let mut spec = RunSpec::default();
        set(&mut spec, "max_concurrency", "8").unwrap();
        set(&mut spec, "request-rate-mode", "constant").unwrap();
        set(&mut spec, "no_preflight", "true").unwrap();
        set(&mut spec, "local_addr", "127.0.0.2,127.0.0.3").unwrap();
        set(&mut spec, "header", "X-A:1").unwrap();
        assert_eq!(spec.load.max_concurrency, Some(8));
        assert_eq!(spec.load.arrival, speedbench_client::Arrival::Constant);
        assert!(!spec.target.preflight);
        assert_eq!(spec.target.local_addr.len(), 2);
        assert_eq!(spec.target.headers.len(), 1);
        let e = set(&mut spec, "concurrency", "many")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid value 'many' for '--concurrency': "),
            "{e}"
        );
        let e = set(&mut spec, "limit", "0").unwrap_err().to_string();
        assert!(e.contains("must be at least 1"), "{e}");
        let e = set(&mut spec, "bench", "nope").unwrap_err().to_string();
        assert!(e.contains("possible values: qualitative"), "{e}");
        let e = set(&mut spec, "concurency", "1").unwrap_err().to_string();
        assert!(e.contains("did you mean --concurrency?"), "{e}");
    }

    #[test]
    fn a_second_dataset_source_is_refused() {
        let mut spec = RunSpec::default();
        set(&mut spec, "input_file", "a.jsonl").unwrap();
        set(&mut spec, "input_file", "b.jsonl").unwrap();
        let e = set(&mut spec, "public_dataset", "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot be used with --input-file"), "{e}");
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = all()
            .flat_map(|f| std::iter::once(f.long).chain(f.aliases.iter().copied()))
            .collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
    }
}
