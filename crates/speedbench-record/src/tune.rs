//! `tune.json`: what a tuning run (`speedbench tune`) planned and how each
//! of its runs ended, at the top of its directory. The tune writes it
//! before the first server starts and again after every run, so a report
//! over a tune that was stopped still knows which run is which.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::RecordError;

/// A tune's plan and progress, as `tune.json` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TuneManifest {
    /// The format's version ([`TuneManifest::VERSION`]).
    pub version: u32,
    /// The names of the parameters the configurations vary (`k`), in the
    /// order the user gave them.
    pub parameters: Vec<String>,
    /// The `profile` flag the load levels set: `concurrency` or
    /// `request-rate`.
    pub load_flag: String,
    /// The load levels, in the order they run (as the flag writes them).
    pub load_levels: Vec<String>,
    /// The sampling temperature every configuration ran with, as sent
    /// (`0` unless the user gave one), or `None` when the server's default
    /// was left in place.
    pub temperature: Option<String>,
    /// Warmup requests before every run (not measured).
    #[serde(default)]
    pub warmup_requests: u64,
    /// Every configuration, the baseline first.
    pub configurations: Vec<TuneConfiguration>,
}

/// One configuration of a tune: a server (started from a command, or
/// given by URL) and its runs, one per load level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TuneConfiguration {
    /// Its name: `baseline`, or its parameters (`k=2`, `k=2,method=ngram`).
    pub name: String,
    /// Whether it is the baseline every other configuration is compared
    /// with.
    pub baseline: bool,
    /// Its parameters' values (`{"k": "2"}`).
    pub params: BTreeMap<String, String>,
    /// The command that starts its server, `{port}` left in (the port is
    /// [`TuneConfiguration::url`]'s) and credentials hidden, when the tune
    /// starts one.
    pub command: Option<String>,
    /// The server's base URL (credentials hidden).
    pub url: String,
    /// Its directory, relative to the tune's.
    pub dir: String,
    /// The server's log (stdout and stderr), relative to the tune's
    /// directory, when the tune started the server.
    pub server_log: Option<String>,
    /// What went wrong with its server (it never became ready, it died
    /// during a run), with the tail of its log.
    pub problem: Option<String>,
    /// Its runs, one per load level, in order.
    pub runs: Vec<TuneRun>,
}

/// One run of a configuration at one load level.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TuneRun {
    /// The load level (`4`), as [`TuneManifest::load_flag`] takes it.
    pub load: String,
    /// The run's directory, relative to the tune's.
    pub dir: String,
    /// How it ended: `pending`, `completed`, `interrupted`, `failed` or
    /// `not started`.
    pub status: String,
    /// Why it failed or was not started.
    pub problem: Option<String>,
    /// How the server's prefix cache was emptied before it (`POST
    /// /reset_prefix_cache`, `a fresh server`), or why it was not.
    pub cache: Option<String>,
}

impl TuneManifest {
    /// `tune.json`.
    pub const FILE_NAME: &'static str = "tune.json";
    /// The format's version this crate writes and reads.
    pub const VERSION: u32 = 1;

    /// Reads `dir/tune.json`; `Ok(None)` when there is none.
    pub fn read(dir: &Path) -> Result<Option<TuneManifest>, RecordError> {
        let path = dir.join(Self::FILE_NAME);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(RecordError::Io { path, source }),
        };
        let manifest: TuneManifest =
            serde_json::from_slice(&text).map_err(|e| RecordError::Metadata {
                path: path.clone(),
                message: e.to_string(),
            })?;
        if manifest.version != Self::VERSION {
            return Err(RecordError::Metadata {
                path,
                message: format!(
                    "version {} (this speedbench reads version {})",
                    manifest.version,
                    Self::VERSION
                ),
            });
        }
        Ok(Some(manifest))
    }

    /// Writes `dir/tune.json` whole (a temporary file renamed over it, so
    /// a reader never sees half of one).
    pub fn write(&self, dir: &Path) -> Result<(), RecordError> {
        let path = dir.join(Self::FILE_NAME);
        let tmp = dir.join(format!(".{}.tmp", Self::FILE_NAME));
        let text = serde_json::to_vec_pretty(self).expect("a tune manifest serialises");
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|source| RecordError::Io { path, source })
    }

    /// The baseline configuration.
    pub fn baseline(&self) -> Option<&TuneConfiguration> {
        self.configurations.iter().find(|c| c.baseline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_reads_back_as_written_and_another_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(TuneManifest::read(dir.path()).unwrap(), None);
        let manifest = TuneManifest {
            version: TuneManifest::VERSION,
            parameters: vec!["k".into()],
            load_flag: "concurrency".into(),
            load_levels: vec!["1".into(), "4".into()],
            temperature: Some("0".into()),
            warmup_requests: 2,
            configurations: vec![TuneConfiguration {
                name: "baseline".into(),
                baseline: true,
                params: [("k".to_string(), "0".to_string())].into(),
                url: "http://127.0.0.1:9".into(),
                dir: "baseline".into(),
                runs: vec![TuneRun {
                    load: "1".into(),
                    dir: "baseline/1-concurrency-1".into(),
                    status: "pending".into(),
                    ..TuneRun::default()
                }],
                ..TuneConfiguration::default()
            }],
        };
        manifest.write(dir.path()).unwrap();
        let back = TuneManifest::read(dir.path()).unwrap().unwrap();
        assert_eq!(back, manifest);
        assert_eq!(back.baseline().unwrap().name, "baseline");
        let text = std::fs::read_to_string(dir.path().join("tune.json")).unwrap();
        std::fs::write(
            dir.path().join("tune.json"),
            text.replace("\"version\": 1", "\"version\": 7"),
        )
        .unwrap();
        let e = TuneManifest::read(dir.path()).unwrap_err().to_string();
        assert!(e.contains("tune.json") && e.contains("version 7"), "{e}");
    }
}
