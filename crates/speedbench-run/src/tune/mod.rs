//! Tuning: one value, a [`TuneSpec`], that says which speculative
//! configurations to try (a server command template and the parameters it
//! takes, or a server URL per configuration), the baseline they are
//! compared with and the load levels, over the options of a `profile`
//! run. [`TuneSpec::plan`] checks it before any server starts and lays
//! out every run; [`TunePlan::run`] starts each configuration's server,
//! runs every load level against it and stops it (docs/tune.md).
//!
//! ```
//! use speedbench_run::RunSpec;
//! use speedbench_run::tune::{TuneLoad, TuneSpec};
//!
//! let base = RunSpec::default().with("input-file", "rows.jsonl")?;
//! let spec = TuneSpec::command(base, "my-server --port {port} --draft {k}", "artifacts/tune")
//!     .with_param("k", ["2", "4"])
//!     .with_baseline_params([("k", "0")])
//!     .with_load(TuneLoad::concurrency([1, 8]));
//! let configurations = spec.configurations()?;
//! let names: Vec<&str> = configurations.iter().map(|c| c.name.as_str()).collect();
//! assert_eq!(names, ["baseline", "k=2", "k=4"]);
//! assert_eq!(configurations[2].command("8123").unwrap(), "my-server --port 8123 --draft 4");
//! # Ok::<(), speedbench_run::RunError>(())
//! ```

mod options;
mod plan;
mod run;
mod server;

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::error::RunError;
use crate::spec::RunSpec;

pub use options::{TuneFile, TuneOptions};
pub use plan::{PlannedConfiguration, TunePlan};
pub use run::{TuneEvent, TuneObserver, TuneOutcome};

/// A tuning run: the configurations, the baseline, the load levels, and
/// the `profile` options every run shares.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct TuneSpec {
    /// The options every run shares (dataset, categories, limit, osl,
    /// sampling, ...). Its URL is each configuration's own; its output
    /// directory is each run's.
    pub base: RunSpec,
    /// Where each configuration's server comes from.
    pub servers: TuneServers,
    /// The parameters the template takes, each with its values; several
    /// make a grid (every combination, the last varying fastest).
    pub params: Vec<TuneParam>,
    /// The load levels every configuration runs at.
    pub load: TuneLoad,
    /// The tune's directory: `tune.json`, and a directory per
    /// configuration holding its server's log and a run per load level.
    pub dir: PathBuf,
    /// How long a started server has to become ready.
    pub ready_timeout: Duration,
    /// How long a server has to exit after SIGTERM before its process
    /// group is killed.
    pub stop_grace: Duration,
    /// Warmup requests before every run; `None`: the base's when it has
    /// some, else the largest concurrency level (1 for request rates), so
    /// that a fresh server's first requests (compilation, graph capture,
    /// cold caches) are not measured.
    pub warmup: Option<u64>,
}

/// Where the configurations' servers come from.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TuneServers {
    /// Started by the tune, one at a time, from a command template.
    Command {
        /// The command, run by `sh -c`, with `{port}` and a placeholder
        /// per parameter (`{k}`).
        template: String,
        /// The baseline's server.
        baseline: Baseline,
        /// The address servers listen on (`{host}` in the template).
        host: IpAddr,
        /// The port every server gets (`{port}`); a free one is picked
        /// when `None`.
        port: Option<u16>,
    },
    /// Servers someone else runs: a URL per configuration.
    Urls {
        /// The baseline's URL.
        baseline: String,
        /// Each speculative configuration's name (`k=2`, `eagle3`) and URL.
        configurations: Vec<(String, String)>,
    },
}

/// The baseline of a command-template tune.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Baseline {
    /// The template with these parameter values (`k=0`).
    Params(Vec<(String, String)>),
    /// A command of its own (`{port}` and `{host}` filled in).
    Command(String),
}

/// One parameter and its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuneParam {
    /// Its name, as the template's placeholder writes it (`k` for `{k}`).
    pub name: String,
    /// Its values, in order.
    pub values: Vec<String>,
}

/// The load levels: a `profile` flag and its values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuneLoad {
    /// `concurrency` or `request-rate`.
    pub flag: String,
    /// Its values, as the flag takes them, in the order they run.
    pub levels: Vec<String>,
}

impl TuneLoad {
    /// Closed-loop concurrency levels.
    pub fn concurrency(levels: impl IntoIterator<Item = u32>) -> TuneLoad {
        TuneLoad {
            flag: "concurrency".into(),
            levels: levels.into_iter().map(|c| c.to_string()).collect(),
        }
    }

    /// Open-loop request rates (requests per second).
    pub fn request_rate(levels: impl IntoIterator<Item = f64>) -> TuneLoad {
        TuneLoad {
            flag: "request-rate".into(),
            levels: levels.into_iter().map(|r| r.to_string()).collect(),
        }
    }
}

/// One configuration of a tune, as planned.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Configuration {
    /// `baseline`, or its parameters (`k=2`, `k=2,method=ngram`).
    pub name: String,
    /// Whether it is the baseline.
    pub baseline: bool,
    /// Its parameters' values, in the order the parameters were given.
    pub params: Vec<(String, String)>,
    /// Its server: a command (every placeholder but `{port}` filled in) or
    /// a URL.
    pub server: ServerSource,
}

/// Where a configuration's server comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerSource {
    /// Started by the tune: the command, `{port}` still to fill.
    Command(String),
    /// Run by someone else.
    Url(String),
}

impl Configuration {
    /// The command that starts its server on `port`, when the tune starts
    /// one.
    pub fn command(&self, port: &str) -> Option<String> {
        match &self.server {
            ServerSource::Command(c) => Some(c.replace("{port}", port)),
            ServerSource::Url(_) => None,
        }
    }
}

impl TuneSpec {
    /// A tune that starts each configuration's server from `template`
    /// (`{port}` and a placeholder per parameter), on 127.0.0.1 and a
    /// free port, writing under `dir`. Add parameters, the baseline and
    /// the load levels with the `with_` methods.
    pub fn command(base: RunSpec, template: impl Into<String>, dir: impl Into<PathBuf>) -> Self {
        TuneSpec::new(
            base,
            TuneServers::Command {
                template: template.into(),
                baseline: Baseline::Params(Vec::new()),
                host: IpAddr::from([127, 0, 0, 1]),
                port: None,
            },
            dir,
        )
    }

    /// A tune of servers someone else runs: the baseline's URL and each
    /// configuration's name and URL.
    pub fn urls(
        base: RunSpec,
        baseline: impl Into<String>,
        configurations: impl IntoIterator<Item = (String, String)>,
        dir: impl Into<PathBuf>,
    ) -> Self {
        TuneSpec::new(
            base,
            TuneServers::Urls {
                baseline: baseline.into(),
                configurations: configurations.into_iter().collect(),
            },
            dir,
        )
    }

    fn new(base: RunSpec, servers: TuneServers, dir: impl Into<PathBuf>) -> Self {
        TuneSpec {
            base,
            servers,
            params: Vec::new(),
            load: TuneLoad::concurrency([1]),
            dir: dir.into(),
            ready_timeout: Duration::from_secs(600),
            stop_grace: Duration::from_secs(30),
            warmup: None,
        }
    }

    /// Adds a parameter and its values.
    pub fn with_param<S: Into<String>>(
        mut self,
        name: impl Into<String>,
        values: impl IntoIterator<Item = S>,
    ) -> Self {
        self.params.push(TuneParam {
            name: name.into(),
            values: values.into_iter().map(Into::into).collect(),
        });
        self
    }

    /// The baseline is the template with these values (`k=0`).
    pub fn with_baseline_params<K: Into<String>, V: Into<String>>(
        mut self,
        values: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        if let TuneServers::Command { baseline, .. } = &mut self.servers {
            *baseline = Baseline::Params(
                values
                    .into_iter()
                    .map(|(k, v)| (k.into(), v.into()))
                    .collect(),
            );
        }
        self
    }

    /// The baseline's server is a command of its own.
    pub fn with_baseline_command(mut self, command: impl Into<String>) -> Self {
        if let TuneServers::Command { baseline, .. } = &mut self.servers {
            *baseline = Baseline::Command(command.into());
        }
        self
    }

    /// Sets the load levels.
    pub fn with_load(mut self, load: TuneLoad) -> Self {
        self.load = load;
        self
    }

    /// Every server listens on `port` (checked free before the first
    /// starts).
    pub fn with_port(mut self, port: u16) -> Self {
        if let TuneServers::Command { port: p, .. } = &mut self.servers {
            *p = Some(port);
        }
        self
    }

    /// Sets how long a server has to become ready, and to exit after
    /// SIGTERM.
    pub fn with_timeouts(mut self, ready: Duration, stop_grace: Duration) -> Self {
        self.ready_timeout = ready;
        self.stop_grace = stop_grace;
        self
    }

    /// The configurations, baseline first, then every combination of the
    /// parameters' values (the last parameter varying fastest), or the
    /// URLs in the order given. Refuses an empty grid, a parameter named
    /// twice or with no value, a template without `{port}`, a placeholder
    /// no parameter fills, a parameter the template does not use, and a
    /// baseline that leaves a placeholder empty.
    pub fn configurations(&self) -> Result<Vec<Configuration>, RunError> {
        check_params(&self.params)?;
        match &self.servers {
            TuneServers::Command {
                template,
                baseline,
                host,
                ..
            } => command_configurations(template, baseline, &host.to_string(), &self.params),
            TuneServers::Urls {
                baseline,
                configurations,
            } => url_configurations(baseline, configurations),
        }
    }
}

/// Every parameter named once, each with a value; at least one.
fn check_params(params: &[TuneParam]) -> Result<(), RunError> {
    let mut seen = std::collections::BTreeSet::new();
    for p in params {
        if p.name.is_empty()
            || !p
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(RunError::invalid(
                "--param",
                format!("{:?}: a parameter's name is letters, digits and _", p.name),
            ));
        }
        if !seen.insert(p.name.as_str()) {
            return Err(RunError::invalid(
                "--param",
                format!(
                    "{} is named twice; give its values once (--param {0}=1,2,4)",
                    p.name
                ),
            ));
        }
        if p.values.is_empty() || p.values.iter().any(|v| v.is_empty()) {
            return Err(RunError::invalid(
                "--param",
                format!("{}: an empty value (the grid would be empty)", p.name),
            ));
        }
    }
    Ok(())
}

/// The placeholders of `template` (`{port}`, `{k}`), in order, once each:
/// a name of letters, digits and `_` between `{` and `}`, so that JSON in
/// a command (`{"num_speculative_tokens":{k}}`) keeps its braces.
fn placeholders(template: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, _) in template.match_indices('{') {
        let after = &template[i + 1..];
        let Some(end) = after.find(['{', '}']) else {
            continue;
        };
        let name = &after[..end];
        if after[end..].starts_with('}')
            && !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !out.iter().any(|n| n == name)
        {
            out.push(name.to_string());
        }
    }
    out
}

/// `template` with `{name}` replaced by each value.
fn fill(template: &str, values: &[(String, String)]) -> String {
    values
        .iter()
        .fold(template.to_string(), |t, (name, value)| {
            t.replace(&format!("{{{name}}}"), value)
        })
}

fn command_configurations(
    template: &str,
    baseline: &Baseline,
    host: &str,
    params: &[TuneParam],
) -> Result<Vec<Configuration>, RunError> {
    let used = placeholders(template);
    if !used.iter().any(|p| p == "port") {
        return Err(RunError::invalid(
            "--server-cmd",
            "the command has no {port}: every server must listen on the port the tune gives it",
        ));
    }
    if params.is_empty() {
        return Err(RunError::invalid(
            "--param",
            "no parameter: give the values to try (--param k=2,4) and the baseline's (--baseline k=0)",
        ));
    }
    for name in used.iter().filter(|n| *n != "port" && *n != "host") {
        if !params.iter().any(|p| &p.name == name) {
            return Err(RunError::invalid(
                "--server-cmd",
                format!("{{{name}}} is in the command but no --param gives it values"),
            ));
        }
    }
    for p in params {
        if !used.contains(&p.name) {
            return Err(RunError::invalid(
                "--param",
                format!("{} is not in the server command (no {{{0}}})", p.name),
            ));
        }
    }
    let host_value = [("host".to_string(), host.to_string())];
    let mut out = vec![baseline_configuration(
        template,
        baseline,
        params,
        &host_value,
    )?];
    for values in grid(params) {
        let name = values
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(",");
        let command = fill(&fill(template, &values), &host_value);
        out.push(Configuration {
            name,
            baseline: false,
            params: values,
            server: ServerSource::Command(command),
        });
    }
    Ok(out)
}

fn baseline_configuration(
    template: &str,
    baseline: &Baseline,
    params: &[TuneParam],
    host_value: &[(String, String)],
) -> Result<Configuration, RunError> {
    let (command, values) = match baseline {
        Baseline::Command(command) => {
            if !placeholders(command).iter().any(|p| p == "port") {
                return Err(RunError::invalid(
                    "--baseline-cmd",
                    "the baseline's command has no {port}",
                ));
            }
            (fill(command, host_value), Vec::new())
        }
        Baseline::Params(values) => {
            for (name, _) in values {
                if !params.iter().any(|p| &p.name == name) {
                    return Err(RunError::invalid(
                        "--baseline",
                        format!("{name} is not a --param of the tune"),
                    ));
                }
            }
            if let Some(missing) = params
                .iter()
                .find(|p| !values.iter().any(|(n, _)| n == &p.name))
            {
                return Err(RunError::invalid(
                    "--baseline",
                    format!(
                        "no value for {} (the baseline's server needs every placeholder; \
                         --baseline {0}=0, or its own command with --baseline-cmd)",
                        missing.name
                    ),
                ));
            }
            (fill(&fill(template, values), host_value), values.clone())
        }
    };
    Ok(Configuration {
        name: "baseline".into(),
        baseline: true,
        params: values,
        server: ServerSource::Command(command),
    })
}

/// Every combination of one value per parameter, the last fastest.
fn grid(params: &[TuneParam]) -> Vec<Vec<(String, String)>> {
    params.iter().fold(vec![Vec::new()], |done, p| {
        done.iter()
            .flat_map(|prefix| {
                p.values.iter().map(move |v| {
                    let mut next = prefix.clone();
                    next.push((p.name.clone(), v.clone()));
                    next
                })
            })
            .collect()
    })
}

fn url_configurations(
    baseline: &str,
    configurations: &[(String, String)],
) -> Result<Vec<Configuration>, RunError> {
    if configurations.is_empty() {
        return Err(RunError::invalid(
            "--config-url",
            "no configuration to compare with the baseline (--config-url NAME=URL)",
        ));
    }
    let mut out = vec![Configuration {
        name: "baseline".into(),
        baseline: true,
        params: Vec::new(),
        server: ServerSource::Url(baseline.to_string()),
    }];
    for (name, url) in configurations {
        if name.is_empty() || name == "baseline" || out.iter().any(|c| &c.name == name) {
            return Err(RunError::invalid(
                "--config-url",
                format!("{name:?}: each configuration needs a name of its own"),
            ));
        }
        out.push(Configuration {
            name: name.clone(),
            baseline: false,
            params: vec![("config".to_string(), name.clone())],
            server: ServerSource::Url(url.clone()),
        });
    }
    Ok(out)
}

/// Parses `k=1,2,4` into a parameter.
pub fn parse_param(text: &str) -> Result<TuneParam, RunError> {
    let (name, values) = text.split_once('=').ok_or_else(|| {
        RunError::invalid(
            "--param",
            format!("{text:?}: NAME=VALUE[,VALUE...] (k=1,2,4)"),
        )
    })?;
    Ok(TuneParam {
        name: name.trim().to_string(),
        values: values.split(',').map(|v| v.trim().to_string()).collect(),
    })
}

/// Parses `k=0,method=none` into the baseline's values.
pub fn parse_assignments(text: &str) -> Result<Vec<(String, String)>, RunError> {
    text.split(',')
        .map(|part| {
            part.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| {
                    RunError::invalid("--baseline", format!("{part:?}: NAME=VALUE (k=0)"))
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> RunSpec {
        RunSpec::default()
    }

    #[test]
    fn a_grid_is_every_combination_after_the_baseline() {
        let spec = TuneSpec::command(base(), "s --port {port} -k {k} -m {m} --host {host}", "t")
            .with_param("k", ["2", "4"])
            .with_param("m", ["a", "b"])
            .with_baseline_params([("k", "0"), ("m", "none")]);
        let c = spec.configurations().unwrap();
        let names: Vec<&str> = c.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(
            names,
            ["baseline", "k=2,m=a", "k=2,m=b", "k=4,m=a", "k=4,m=b"]
        );
        assert_eq!(
            c[0].command("9").unwrap(),
            "s --port 9 -k 0 -m none --host 127.0.0.1"
        );
        assert_eq!(
            c[2].params,
            [("k".into(), "2".into()), ("m".into(), "b".into())]
        );
    }

    #[test]
    fn bad_templates_and_grids_are_refused_by_name() {
        let refused = |spec: TuneSpec, words: &str| {
            let e = spec.configurations().unwrap_err().to_string();
            assert!(e.contains(words), "{e}");
        };
        let t = |tpl: &str| TuneSpec::command(base(), tpl, "t");
        refused(t("s -k {k}").with_param("k", ["1"]), "no {port}");
        refused(t("s --port {port}"), "no parameter");
        refused(
            t("s --port {port} -k {k}")
                .with_param("k", ["1"])
                .with_param("k", ["2"]),
            "named twice",
        );
        refused(
            t("s --port {port} -k {k}").with_param("k", Vec::<String>::new()),
            "empty",
        );
        refused(
            t("s --port {port} {k} {j}").with_param("k", ["1"]),
            "{j} is in the command",
        );
        refused(
            t("s --port {port}").with_param("k", ["1"]),
            "not in the server command",
        );
        refused(
            t("s --port {port} {k}").with_param("k", ["1"]),
            "no value for k",
        );
        refused(
            t("s --port {port} {k}")
                .with_param("k", ["1"])
                .with_baseline_params([("k", "0"), ("q", "1")]),
            "q is not a --param",
        );
        refused(
            t("s --port {port} {k}")
                .with_param("k", ["1"])
                .with_baseline_command("b"),
            "baseline's command has no {port}",
        );
    }

    #[test]
    fn json_in_a_command_keeps_its_braces() {
        let tpl = r#"vllm serve m --port {port} --speculative-config {"method":"ngram","num_speculative_tokens":{k}}"#;
        assert_eq!(placeholders(tpl), ["port", "k"]);
        let spec = TuneSpec::command(base(), tpl, "t")
            .with_param("k", ["4"])
            .with_baseline_command("vllm serve m --port {port}");
        let c = spec.configurations().unwrap();
        assert_eq!(
            c[1].command("9").unwrap(),
            r#"vllm serve m --port 9 --speculative-config {"method":"ngram","num_speculative_tokens":4}"#
        );
    }

    #[test]
    fn the_command_line_forms_parse() {
        assert_eq!(
            parse_param("k=1, 2,4").unwrap(),
            TuneParam {
                name: "k".into(),
                values: vec!["1".into(), "2".into(), "4".into()]
            }
        );
        assert!(parse_param("k").is_err());
        assert_eq!(
            parse_assignments("k=0,m=none").unwrap(),
            [
                ("k".to_string(), "0".to_string()),
                ("m".into(), "none".into())
            ]
        );
        assert!(parse_assignments("k").is_err());
        let urls = TuneSpec::urls(base(), "http://a", [("x".into(), "http://b".into())], "t");
        assert_eq!(
            urls.configurations().unwrap()[1].server,
            ServerSource::Url("http://b".into())
        );
        let twice = TuneSpec::urls(
            base(),
            "http://a",
            [
                ("x".into(), "http://b".into()),
                ("x".into(), "http://c".into()),
            ],
            "t",
        );
        assert!(twice.configurations().is_err());
    }
}
