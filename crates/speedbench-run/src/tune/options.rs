//! A tune's options as the command line and a tune file give them (the
//! same names: `server-cmd`, `param`, `baseline`, ...), merged (the
//! command line wins) and made into a [`TuneSpec`]. A file is TOML or YAML
//! (docs/tune.md): its top-level keys are the tune's options, its
//! `[profile]` the options of every run.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::{Table, Value};

use super::{Baseline, TuneLoad, TuneParam, TuneServers, TuneSpec, parse_assignments};
use crate::error::RunError;
use crate::spec::RunSpec;

/// A tune's own options, each unset until given.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct TuneOptions {
    /// `--server-cmd`: the server command template.
    pub server_cmd: Option<String>,
    /// `--param NAME=V1,V2` (several make a grid).
    pub params: Vec<TuneParam>,
    /// `--baseline NAME=V,...`: the template's values for the baseline.
    pub baseline: Option<Vec<(String, String)>>,
    /// `--baseline-cmd`: the baseline's own command.
    pub baseline_cmd: Option<String>,
    /// `--baseline-url`: the baseline's server, run by someone else.
    pub baseline_url: Option<String>,
    /// `--config-url NAME=URL`: a configuration run by someone else.
    pub config_urls: Vec<(String, String)>,
    /// `--concurrency 1,4,16` or `--request-rate 2,8`.
    pub load: Option<TuneLoad>,
    /// `--port`.
    pub port: Option<u16>,
    /// `--server-host`.
    pub host: Option<IpAddr>,
    /// `--ready-timeout` (seconds).
    pub ready_timeout: Option<Duration>,
    /// `--stop-grace` (seconds).
    pub stop_grace: Option<Duration>,
}

/// A tune file: its options, and the `[profile]` options of every run
/// (long flag names and values, in file order).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct TuneFile {
    /// The tune's options.
    pub options: TuneOptions,
    /// `[profile]`: `(flag, value)`, a list flag's values one by one.
    pub profile: Vec<(String, String)>,
}

impl TuneOptions {
    /// These options, with `file`'s where these leave one unset (a
    /// parameter given here replaces the file's of that name).
    pub fn over(self, file: TuneOptions) -> TuneOptions {
        // A parameter given here replaces the file's; one given twice here
        // stays twice, for the plan to refuse.
        let mut params: Vec<TuneParam> = file
            .params
            .into_iter()
            .filter(|p| !self.params.iter().any(|q| q.name == p.name))
            .collect();
        params.extend(self.params);
        TuneOptions {
            server_cmd: self.server_cmd.or(file.server_cmd),
            params,
            baseline: self.baseline.or(file.baseline),
            baseline_cmd: self.baseline_cmd.or(file.baseline_cmd),
            baseline_url: self.baseline_url.or(file.baseline_url),
            config_urls: if self.config_urls.is_empty() {
                file.config_urls
            } else {
                self.config_urls
            },
            load: self.load.or(file.load),
            port: self.port.or(file.port),
            host: self.host.or(file.host),
            ready_timeout: self.ready_timeout.or(file.ready_timeout),
            stop_grace: self.stop_grace.or(file.stop_grace),
        }
    }

    /// The tune over `base` into `dir`: a command tune (`server-cmd`) or
    /// a URL tune (`baseline-url` and `config-url`), not both.
    pub fn into_spec(self, base: RunSpec, dir: PathBuf) -> Result<TuneSpec, RunError> {
        let servers = match (&self.server_cmd, &self.baseline_url) {
            (Some(_), Some(_)) => {
                return Err(RunError::invalid(
                    "--server-cmd",
                    "a tune starts its servers (--server-cmd) or uses running ones \
                     (--baseline-url and --config-url), not both",
                ));
            }
            (None, None) => {
                return Err(RunError::invalid(
                    "--server-cmd",
                    "no servers: give --server-cmd (the tune starts each configuration's), or \
                     --baseline-url and --config-url NAME=URL (servers someone else runs)",
                ));
            }
            (Some(template), None) => TuneServers::Command {
                template: template.clone(),
                baseline: match (&self.baseline_cmd, &self.baseline) {
                    (Some(_), Some(_)) => {
                        return Err(RunError::invalid(
                            "--baseline-cmd",
                            "give the baseline's values (--baseline) or its command, not both",
                        ));
                    }
                    (Some(cmd), None) => Baseline::Command(cmd.clone()),
                    (None, values) => Baseline::Params(values.clone().unwrap_or_default()),
                },
                host: self.host.unwrap_or(IpAddr::from([127, 0, 0, 1])),
                port: self.port,
            },
            (None, Some(url)) => {
                if !self.params.is_empty() {
                    return Err(RunError::invalid(
                        "--param",
                        "servers given by URL take no --param (each --config-url is one configuration)",
                    ));
                }
                TuneServers::Urls {
                    baseline: url.clone(),
                    configurations: self.config_urls.clone(),
                }
            }
        };
        let mut spec = TuneSpec::new(base, servers, dir);
        spec.params = self.params;
        if let Some(load) = self.load {
            spec.load = load;
        }
        spec.ready_timeout = self.ready_timeout.unwrap_or(spec.ready_timeout);
        spec.stop_grace = self.stop_grace.unwrap_or(spec.stop_grace);
        Ok(spec)
    }
}

impl TuneFile {
    /// Reads a tune file: YAML by its extension (`.yaml`, `.yml`), TOML
    /// otherwise.
    pub fn read(path: &Path) -> Result<TuneFile, RunError> {
        let text = std::fs::read_to_string(path).map_err(|source| RunError::Io {
            context: format!("reading the tune file {}", path.display()),
            source,
        })?;
        TuneFile::parse(path, &text)
    }

    /// [`TuneFile::read`] over the file's text.
    pub fn parse(path: &Path, text: &str) -> Result<TuneFile, RunError> {
        let at = |message: String| RunError::invalid(path.display().to_string(), message);
        let yaml = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| matches!(e.to_ascii_lowercase().as_str(), "yaml" | "yml"));
        let table = if yaml {
            let node = crate::yaml::parse(text).map_err(|(line, why)| {
                RunError::invalid(format!("{}:{line}", path.display()), why)
            })?;
            match crate::sweep::file::toml_value(&node).map_err(at)? {
                Value::Table(t) => t,
                _ => return Err(at("a tune file is a mapping of options".into())),
            }
        } else {
            text.parse::<Table>().map_err(|e| at(e.to_string()))?
        };
        from_table(&table).map_err(at)
    }
}

/// The options of a file's top level and its `[profile]`.
fn from_table(table: &Table) -> Result<TuneFile, String> {
    let mut file = TuneFile::default();
    let o = &mut file.options;
    for (key, value) in table {
        let name = key.replace('_', "-");
        match name.as_str() {
            "server-cmd" => o.server_cmd = Some(text(&name, value)?),
            "baseline-cmd" => o.baseline_cmd = Some(text(&name, value)?),
            "baseline-url" => o.baseline_url = Some(text(&name, value)?),
            "baseline" => o.baseline = Some(assignments(&name, value)?),
            "param" | "params" => o.params = params(&name, value)?,
            "config-url" | "config-urls" => o.config_urls = assignments(&name, value)?,
            "concurrency" | "request-rate" => {
                o.load = Some(TuneLoad {
                    flag: name.clone(),
                    levels: list(&name, value)?,
                })
            }
            "port" => o.port = Some(number(&name, value)?),
            "server-host" => {
                let host = text(&name, value)?;
                o.host = Some(host.parse().map_err(|e| format!("{name}: {host:?}: {e}"))?);
            }
            "ready-timeout" => o.ready_timeout = Some(seconds(&name, value)?),
            "stop-grace" => o.stop_grace = Some(seconds(&name, value)?),
            "profile" => file.profile = profile(value)?,
            other => {
                return Err(format!(
                    "`{key}`: not a tune option (server_cmd, param, baseline, baseline_cmd, \
                     baseline_url, config_url, concurrency, request_rate, port, server_host, \
                     ready_timeout, stop_grace, [profile]){}",
                    if crate::flags::find(other).is_some() {
                        "; a run's option goes under [profile]"
                    } else {
                        ""
                    }
                ));
            }
        }
    }
    Ok(file)
}

fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Integer(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn text(name: &str, value: &Value) -> Result<String, String> {
    scalar(value).ok_or_else(|| format!("{name}: one value, not {}", value.type_str()))
}

fn number<T: std::str::FromStr>(name: &str, value: &Value) -> Result<T, String> {
    let t = text(name, value)?;
    t.parse()
        .map_err(|_| format!("{name}: {t:?} is not a number here"))
}

fn seconds(name: &str, value: &Value) -> Result<Duration, String> {
    let s: f64 = number(name, value)?;
    Duration::try_from_secs_f64(s).map_err(|_| format!("{name}: {s} is not a number of seconds"))
}

/// A list, or one value (a list of one), or a comma list.
fn list(name: &str, value: &Value) -> Result<Vec<String>, String> {
    match value {
        Value::Array(items) => items
            .iter()
            .map(|v| scalar(v).ok_or_else(|| format!("{name}: a list of values")))
            .collect(),
        v => Ok(text(name, v)?
            .split(',')
            .map(|s| s.trim().to_string())
            .collect()),
    }
}

/// `{ k = 0, m = "none" }`, or `"k=0,m=none"`.
fn assignments(name: &str, value: &Value) -> Result<Vec<(String, String)>, String> {
    match value {
        Value::Table(t) => t
            .iter()
            .map(|(k, v)| Ok((k.clone(), text(&format!("{name}.{k}"), v)?)))
            .collect(),
        v => parse_assignments(&text(name, v)?).map_err(|e| format!("{name}: {e}")),
    }
}

/// `{ k = [1, 2, 4] }`, in file order.
fn params(name: &str, value: &Value) -> Result<Vec<TuneParam>, String> {
    let Value::Table(t) = value else {
        return Err(format!("{name}: a table of lists (k = [1, 2, 4])"));
    };
    t.iter()
        .map(|(k, v)| {
            Ok(TuneParam {
                name: k.clone(),
                values: list(&format!("{name}.{k}"), v)?,
            })
        })
        .collect()
}

/// `[profile]`: each key a `profile` flag (`input_file`), a list's values
/// one by one.
fn profile(value: &Value) -> Result<Vec<(String, String)>, String> {
    let Value::Table(t) = value else {
        return Err("profile: a table of a run's options".into());
    };
    let mut out = Vec::new();
    for (key, v) in t {
        let flag = key.replace('_', "-");
        if crate::flags::find(&flag).is_none() {
            return Err(format!("profile.{key}: not a `profile` option"));
        }
        if matches!(flag.as_str(), "url" | "concurrency" | "request-rate") {
            return Err(format!(
                "profile.{key}: the tune sets it (each configuration's server; the load levels \
                 at the top level)"
            ));
        }
        for value in list(&format!("profile.{key}"), v)? {
            out.push((flag.clone(), value));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_and_a_yaml_file_give_the_same_tune() {
        let toml = "server_cmd = \"s --port {port} -k {k}\"\nbaseline = { k = 0 }\n\
                    concurrency = [1, 4]\nready_timeout = 30\n[param]\nk = [2, 4]\n\
                    [profile]\ninput_file = \"rows.jsonl\"\nlimit = 3\n";
        let yaml = "server_cmd: s --port {port} -k {k}\nbaseline: {k: 0}\nconcurrency: [1, 4]\n\
                    ready_timeout: 30\nparam:\n  k: [2, 4]\nprofile:\n  input_file: rows.jsonl\n  limit: 3\n";
        let a = TuneFile::parse(Path::new("t.toml"), toml).unwrap();
        let b = TuneFile::parse(Path::new("t.yaml"), yaml).unwrap();
        assert_eq!(a.options, b.options);
        assert_eq!(a.profile, b.profile);
        assert_eq!(a.options.params[0].values, ["2", "4"]);
        assert_eq!(a.options.load, Some(TuneLoad::concurrency([1, 4])));
        assert_eq!(a.options.ready_timeout, Some(Duration::from_secs(30)));
        assert_eq!(
            a.profile,
            [
                ("input-file".into(), "rows.jsonl".into()),
                ("limit".into(), "3".into())
            ]
        );
    }

    #[test]
    fn the_command_line_wins_and_bad_keys_are_named() {
        let file = TuneFile::parse(
            Path::new("t.toml"),
            "server_cmd = \"a {port} {k}\"\nport = 9\n[param]\nk = [1]\nm = [2]\n",
        )
        .unwrap();
        let cli = TuneOptions {
            params: vec![TuneParam {
                name: "k".into(),
                values: vec!["8".into()],
            }],
            port: Some(10),
            ..TuneOptions::default()
        };
        let merged = cli.over(file.options);
        assert_eq!(merged.server_cmd.as_deref(), Some("a {port} {k}"));
        assert_eq!(merged.port, Some(10));
        let names: Vec<(&str, &str)> = merged
            .params
            .iter()
            .map(|p| (p.name.as_str(), p.values[0].as_str()))
            .collect();
        assert_eq!(names, [("m", "2"), ("k", "8")]);
        for (text, words) in [
            ("limit = 3\n", "a run's option goes under [profile]"),
            ("nonsense = 1\n", "not a tune option"),
            ("[profile]\nurl = \"x\"\n", "the tune sets it"),
            ("[profile]\nbogus = 1\n", "not a `profile` option"),
            ("port = \"x\"\n", "not a number"),
        ] {
            let e = TuneFile::parse(Path::new("t.toml"), text)
                .unwrap_err()
                .to_string();
            assert!(e.contains(words) && e.contains("t.toml"), "{text}: {e}");
        }
        let e = TuneOptions::default()
            .into_spec(RunSpec::default(), "t".into())
            .unwrap_err();
        assert!(e.to_string().contains("no servers"), "{e}");
    }
}
