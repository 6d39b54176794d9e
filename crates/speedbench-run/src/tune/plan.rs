//! A tune laid out before any server starts: each configuration's
//! directory, URL and runs (a [`Sweep`] of the load levels), every run's
//! options checked, the port checked free, and `tune.json` compared with
//! the one a stopped tune left (the same plan resumes; another is refused).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use speedbench_record::{RUN_FILE_NAMES, TuneConfiguration, TuneManifest, TuneRun, redact_url};

use super::server::{pick_free_port, port_free};
use super::{Configuration, ServerSource, TuneServers, TuneSpec};
use crate::error::RunError;
use crate::spec::RunSpec;
use crate::sweep::file::dir_safe;
use crate::sweep::{Sweep, SweepRun};

/// A tune checked and laid out, ready to [`run`](TunePlan::run).
#[derive(Debug)]
pub struct TunePlan {
    /// The tune's directory.
    pub dir: PathBuf,
    /// Every configuration, the baseline first.
    pub configurations: Vec<PlannedConfiguration>,
    /// What `tune.json` says of the plan (every run `pending`, or as a
    /// stopped tune left it).
    pub manifest: TuneManifest,
    /// The options every run shares (its dataset is loaded once).
    pub(super) base: RunSpec,
    /// Where started servers listen, when the tune starts them.
    pub(super) addr: Option<SocketAddr>,
    pub(super) ready_timeout: Duration,
    pub(super) stop_grace: Duration,
    /// `tune.json` as an earlier try of the same plan left it.
    pub(super) earlier: Option<TuneManifest>,
}

/// One configuration, laid out.
#[derive(Debug)]
#[non_exhaustive]
pub struct PlannedConfiguration {
    /// What it is.
    pub configuration: Configuration,
    /// Its directory (the server's log, a run per load level).
    pub dir: PathBuf,
    /// Its server's URL.
    pub url: String,
    /// The command that starts its server, when the tune starts one.
    pub command: Option<String>,
    /// Its runs, one per load level.
    pub runs: Vec<SweepRun>,
}

impl TuneSpec {
    /// Checks the tune and lays out its runs: the configurations
    /// ([`TuneSpec::configurations`]), the load levels, every run's
    /// options ([`RunSpec::validate`]), the port (free, or a free one
    /// picked), and the directory (a stopped tune of the same plan is
    /// resumed; anything else there is refused). Nothing is started.
    pub fn plan(&self) -> Result<TunePlan, RunError> {
        let configurations = self.configurations()?;
        check_load(&self.base, &self.load.flag, &self.load.levels)?;
        let addr = self.server_addr()?;
        let mut base = with_default_temperature(self.base.clone());
        base.load.warmup_request_count = self.warmup_requests();
        let mut planned = Vec::with_capacity(configurations.len());
        for configuration in configurations {
            planned.push(self.lay_out(configuration, addr, &base)?);
        }
        check_distinct_dirs(&planned)?;
        let manifest = self.manifest(&planned, &base);
        let earlier = check_dir(&self.dir, &manifest)?;
        Ok(TunePlan {
            dir: self.dir.clone(),
            configurations: planned,
            manifest,
            base,
            addr,
            ready_timeout: self.ready_timeout,
            stop_grace: self.stop_grace,
            earlier,
        })
    }

    /// The warmup requests of every run ([`TuneSpec::warmup`]).
    fn warmup_requests(&self) -> u64 {
        let base = self.base.load.warmup_request_count;
        self.warmup.unwrap_or(if base > 0 {
            base
        } else if self.load.flag == "concurrency" {
            self.load
                .levels
                .iter()
                .filter_map(|l| l.parse::<u64>().ok())
                .max()
                .unwrap_or(1)
        } else {
            1
        })
    }

    /// The address every started server gets: the port given (refused
    /// when taken) or a free one.
    fn server_addr(&self) -> Result<Option<SocketAddr>, RunError> {
        let TuneServers::Command { host, port, .. } = &self.servers else {
            return Ok(None);
        };
        let port = match port {
            Some(p) => {
                if !port_free(SocketAddr::new(*host, *p)) {
                    return Err(RunError::invalid(
                        "--port",
                        format!(
                            "{host}:{p} is taken (another server listens there); free it or give another --port"
                        ),
                    ));
                }
                *p
            }
            None => pick_free_port(*host).map_err(|source| RunError::Io {
                context: format!("finding a free port on {host}"),
                source,
            })?,
        };
        Ok(Some(SocketAddr::new(*host, port)))
    }

    fn lay_out(
        &self,
        configuration: Configuration,
        addr: Option<SocketAddr>,
        base: &RunSpec,
    ) -> Result<PlannedConfiguration, RunError> {
        let dir = self.dir.join(dir_safe(&configuration.name));
        let (url, command) = match (&configuration.server, addr) {
            (ServerSource::Url(url), _) => (url.clone(), None),
            (ServerSource::Command(_), Some(addr)) => (
                // SocketAddr writes an IPv6 host in brackets.
                format!("http://{addr}"),
                configuration.command(&addr.port().to_string()),
            ),
            (ServerSource::Command(_), None) => unreachable!("a command tune has an address"),
        };
        let mut runs = Vec::with_capacity(self.load.levels.len());
        for level in &self.load.levels {
            let spec = base
                .clone()
                .with("url", &url)?
                .with(&self.load.flag, level)?;
            runs.push((format!("{}={level}", self.load.flag), spec));
        }
        let sweep = Sweep::from_runs(&dir, runs)?;
        for run in sweep.runs() {
            // With --num-profile-runs each level's runs are repeated by the
            // tune, each run checked as one run.
            let mut spec = run
                .spec()
                .expect("a run built in code has its spec")
                .clone();
            spec.repeat = crate::RepeatSpec {
                num_profile_runs: 1,
                ..spec.repeat.clone()
            };
            spec.validate().map_err(|e| RunError::Invalid {
                field: format!(
                    "configuration {} at {}",
                    configuration.name, run.description
                ),
                message: crate::error_message(&e),
            })?;
        }
        Ok(PlannedConfiguration {
            configuration,
            dir,
            url,
            command,
            runs: sweep.into_runs(),
        })
    }

    fn manifest(&self, planned: &[PlannedConfiguration], base: &RunSpec) -> TuneManifest {
        TuneManifest {
            version: TuneManifest::VERSION,
            parameters: self.params.iter().map(|p| p.name.clone()).collect(),
            load_flag: self.load.flag.clone(),
            load_levels: self.load.levels.clone(),
            temperature: temperature_of(base),
            warmup_requests: base.load.warmup_request_count,
            configurations: planned
                .iter()
                .map(|p| manifest_entry(p, &self.dir))
                .collect(),
        }
    }
}

/// The load flag is `concurrency` or `request-rate`, with at least one
/// level, each a value the flag takes, none twice.
fn check_load(base: &RunSpec, flag: &str, levels: &[String]) -> Result<(), RunError> {
    if !matches!(flag, "concurrency" | "request-rate") {
        return Err(RunError::invalid(
            "the load",
            format!("{flag}: a tune's load levels are --concurrency or --request-rate values"),
        ));
    }
    if levels.is_empty() {
        return Err(RunError::invalid(
            format!("--{flag}"),
            "no load level (--concurrency 1,4,16)",
        ));
    }
    for (i, level) in levels.iter().enumerate() {
        base.clone().with(flag, level)?;
        if levels[..i].contains(level) {
            return Err(RunError::invalid(
                format!("--{flag}"),
                format!("{level} is given twice"),
            ));
        }
    }
    Ok(())
}

/// Temperature 0 unless the options send one: every configuration then
/// decodes greedily, so the lossless check means something.
fn with_default_temperature(mut base: RunSpec) -> RunSpec {
    if temperature_of(&base).is_none() {
        base.sampling
            .extra_inputs
            .push(r#"{"temperature":0}"#.into());
    }
    base
}

/// The temperature the options send, as written.
fn temperature_of(base: &RunSpec) -> Option<String> {
    base.sampling.extra_inputs.iter().rev().find_map(|input| {
        if let Ok(serde_json::Value::Object(map)) = serde_json::from_str(input) {
            return map.get("temperature").map(|v| v.to_string());
        }
        input
            .strip_prefix("temperature:")
            .map(|v| v.trim().to_string())
    })
}

/// Two configurations whose names make the same directory are refused.
fn check_distinct_dirs(planned: &[PlannedConfiguration]) -> Result<(), RunError> {
    for (i, p) in planned.iter().enumerate() {
        if let Some(other) = planned[..i].iter().find(|o| o.dir == p.dir) {
            return Err(RunError::invalid(
                "the configurations",
                format!(
                    "{} and {} would share the directory {}; name them apart",
                    other.configuration.name,
                    p.configuration.name,
                    p.dir.display()
                ),
            ));
        }
    }
    Ok(())
}

fn manifest_entry(p: &PlannedConfiguration, tune_dir: &Path) -> TuneConfiguration {
    let relative = |path: &Path| {
        path.strip_prefix(tune_dir)
            .unwrap_or(path)
            .display()
            .to_string()
    };
    TuneConfiguration {
        name: p.configuration.name.clone(),
        baseline: p.configuration.baseline,
        params: p.configuration.params.iter().cloned().collect(),
        // `{port}` left in: the port is the URL's, and a resumed tune may
        // get another.
        command: match &p.configuration.server {
            ServerSource::Command(template) => Some(hide_credentials(template)),
            ServerSource::Url(_) => None,
        },
        url: redact_url(&p.url),
        dir: relative(&p.dir),
        server_log: p
            .command
            .as_ref()
            .map(|_| relative(&p.dir.join(super::run::SERVER_LOG))),
        problem: None,
        runs: p
            .runs
            .iter()
            .map(|r| TuneRun {
                load: level_of(&r.description),
                dir: relative(&r.dir),
                status: "pending".into(),
                problem: None,
                cache: None,
            })
            .collect(),
    }
}

/// `4` of `concurrency=4`.
fn level_of(description: &str) -> String {
    description
        .split_once('=')
        .map_or(description, |(_, v)| v)
        .to_string()
}

/// A command with every credential hidden: the value after a flag named
/// like one (`--api-key X`, `--hf-token=X`) and anything shaped like a key.
pub(crate) fn hide_credentials(command: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut hide_next = false;
    // A number is no one's secret (`--draft-ms-per-token 0.3`).
    let secret_value = |v: &str| !v.is_empty() && v.parse::<f64>().is_err();
    for word in command.split(' ') {
        if hide_next && !word.is_empty() {
            let shown = if secret_value(word) {
                "<redacted>"
            } else {
                word
            };
            out.push(shown.into());
            hide_next = false;
            continue;
        }
        let flag = word.trim_start_matches('-');
        match flag.split_once('=') {
            Some((name, value))
                if word.starts_with('-')
                    && speedbench_credentials::is_credential_name(name)
                    && secret_value(value) =>
            {
                out.push(format!(
                    "{}=<redacted>",
                    &word[..word.len() - flag.len() + name.len()]
                ));
            }
            None if word.starts_with('-') && speedbench_credentials::is_credential_name(flag) => {
                hide_next = true;
                out.push(word.to_string());
            }
            _ => out.push(speedbench_credentials::redact_shapes(word).into_owned()),
        }
    }
    out.join(" ")
}

/// Refuses a directory that holds something other than this tune: a run
/// at its top, or a `tune.json` of another plan (the same plan resumes:
/// its `tune.json` is returned).
fn check_dir(dir: &Path, planned: &TuneManifest) -> Result<Option<TuneManifest>, RunError> {
    let at = |message: String| RunError::invalid("the tune's directory", message);
    if dir.exists() && !dir.is_dir() {
        return Err(at(format!(
            "{}: exists and is not a directory",
            dir.display()
        )));
    }
    if let Some(found) = RUN_FILE_NAMES.iter().find(|n| dir.join(n).exists()) {
        return Err(at(format!(
            "{}: holds a run ({found}), not a tune; give the tune a directory of its own",
            dir.display()
        )));
    }
    let Some(existing) = TuneManifest::read(dir).map_err(|e| at(e.to_string()))? else {
        // No tune here yet: a run where one of ours goes is someone else's.
        let runs = planned.configurations.iter().flat_map(|c| &c.runs);
        for run in runs {
            let run_dir = dir.join(&run.dir);
            if let Some(found) = RUN_FILE_NAMES.iter().find(|n| run_dir.join(n).exists()) {
                return Err(at(format!(
                    "{}: holds a run ({found}) but no tune.json says it is this tune's; its \
                     results are kept (give the tune a directory of its own)",
                    run_dir.display()
                )));
            }
        }
        return Ok(None);
    };
    if !same_plan(&existing, planned) {
        return Err(at(format!(
            "{}: holds another tune (its tune.json plans other configurations or load levels); \
             running the same command again resumes a tune, so give this one a directory of \
             its own (--output-artifact-dir)",
            dir.display()
        )));
    }
    Ok(Some(existing))
}

/// Whether two manifests plan the same runs (names, commands, URLs, load
/// levels): progress aside.
fn same_plan(a: &TuneManifest, b: &TuneManifest) -> bool {
    let shape = |m: &TuneManifest| {
        let configs: Vec<(String, Option<String>, Vec<String>)> = m
            .configurations
            .iter()
            .map(|c| {
                (
                    c.name.clone(),
                    c.command.clone(),
                    c.runs.iter().map(|r| r.dir.clone()).collect(),
                )
            })
            .collect();
        (m.load_flag.clone(), m.load_levels.clone(), configs)
    };
    shape(a) == shape(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_in_a_server_command_are_hidden() {
        assert_eq!(
            hide_credentials("vllm serve m --api-key sk-abc --port 9 --hf-token=hf_x k"),
            "vllm serve m --api-key <redacted> --port 9 --hf-token=<redacted> k"
        );
        assert_eq!(
            hide_credentials("llama-server -m a.gguf --port 9"),
            "llama-server -m a.gguf --port 9"
        );
        assert_eq!(
            hide_credentials("sim --draft-ms-per-token 0.3 --token-budget=2"),
            "sim --draft-ms-per-token 0.3 --token-budget=2"
        );
    }

    #[test]
    fn the_temperature_is_zero_unless_given() {
        let base = with_default_temperature(RunSpec::default());
        assert_eq!(temperature_of(&base).as_deref(), Some("0"));
        let given = RunSpec::default()
            .with("extra-inputs", "temperature:0.7")
            .unwrap();
        let kept = with_default_temperature(given);
        assert_eq!(temperature_of(&kept).as_deref(), Some("0.7"));
        assert_eq!(kept.sampling.extra_inputs.len(), 1);
    }
}
