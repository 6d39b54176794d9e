//! Which prepare script runs (pinned by URL and sha256, or a local file)
//! and which Python runs it.

use std::path::PathBuf;

pub use crate::pins::{
    PREPARE_SCRIPT_COMMIT, PREPARE_SCRIPT_PATH, PREPARE_SCRIPT_REPO, PREPARE_SCRIPT_SHA256,
};

/// Where raw GitHub files are downloaded from, unless
/// `SPEEDBENCH_GITHUB_RAW_ENDPOINT` names a mirror.
pub const DEFAULT_GITHUB_RAW_ENDPOINT: &str = "https://raw.githubusercontent.com";

/// A prepare script pinned by URL and sha256: nothing else is run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptPin {
    /// Where to download it.
    pub url: String,
    /// Its sha256, lowercase hex.
    pub sha256: String,
}

impl ScriptPin {
    /// NeMo-Skills' `prepare.py` at [`PREPARE_SCRIPT_COMMIT`], from a raw
    /// GitHub endpoint (e.g. [`DEFAULT_GITHUB_RAW_ENDPOINT`] or a mirror).
    pub fn nemo_skills(raw_endpoint: &str) -> ScriptPin {
        ScriptPin {
            url: format!(
                "{}/{PREPARE_SCRIPT_REPO}/{PREPARE_SCRIPT_COMMIT}/{PREPARE_SCRIPT_PATH}",
                raw_endpoint.trim_end_matches('/')
            ),
            sha256: PREPARE_SCRIPT_SHA256.to_string(),
        }
    }

    /// The cached copy's file name: `prepare-<first 16 hex of sha256>.py`.
    pub fn cache_file_name(&self) -> String {
        let sha = self.sha256.to_ascii_lowercase();
        format!("prepare-{}.py", &sha[..sha.len().min(16)])
    }
}

/// Which prepare script runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PrepareScript {
    /// Downloaded, verified against the pin, cached.
    Pinned(ScriptPin),
    /// A local file, run as given (its sha256 is logged).
    Local(PathBuf),
}

/// How to run the upstream prepare step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamOptions {
    /// The script.
    pub script: PrepareScript,
    /// The Python interpreter (`--python`, `SPEEDBENCH_PYTHON`, default
    /// `python3`, looked up on `PATH`).
    pub python: PathBuf,
}

impl Default for UpstreamOptions {
    /// The pinned script from GitHub, run by `python3`.
    fn default() -> UpstreamOptions {
        UpstreamOptions::from_vars(|_| None)
    }
}

impl UpstreamOptions {
    /// Options from the process environment.
    pub fn from_env() -> UpstreamOptions {
        UpstreamOptions::from_vars(|k| std::env::var(k).ok())
    }

    /// Options through `var`: `SPEEDBENCH_PREPARE_SCRIPT` (a local script),
    /// else the pinned script from `SPEEDBENCH_GITHUB_RAW_ENDPOINT` (default
    /// [`DEFAULT_GITHUB_RAW_ENDPOINT`]); `SPEEDBENCH_PYTHON` (default
    /// `python3`).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> UpstreamOptions {
        let nonempty = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let script = match nonempty("SPEEDBENCH_PREPARE_SCRIPT") {
            Some(path) => PrepareScript::Local(PathBuf::from(path)),
            None => PrepareScript::Pinned(ScriptPin::nemo_skills(
                &nonempty("SPEEDBENCH_GITHUB_RAW_ENDPOINT")
                    .unwrap_or_else(|| DEFAULT_GITHUB_RAW_ENDPOINT.to_string()),
            )),
        };
        UpstreamOptions {
            script,
            python: PathBuf::from(
                nonempty("SPEEDBENCH_PYTHON").unwrap_or_else(|| "python3".into()),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pin_names_the_commit_and_the_cache_file_the_digest() {
        let pin = ScriptPin::nemo_skills("https://mirror.example/raw/");
        assert_eq!(
            pin.url,
            "https://mirror.example/raw/NVIDIA-NeMo/Skills/5ac8609a56ac941540b10c92e68d556e6343cd4c/nemo_skills/dataset/speed-bench/prepare.py"
        );
        assert_eq!(pin.cache_file_name(), "prepare-a551be4df541474e.py");
        let o = UpstreamOptions::from_vars(|k| match k {
            "SPEEDBENCH_PYTHON" => Some("/venv/bin/python".into()),
            _ => None,
        });
        assert_eq!(o.python, PathBuf::from("/venv/bin/python"));
        assert!(
            matches!(&o.script, PrepareScript::Pinned(p) if p.url.starts_with(DEFAULT_GITHUB_RAW_ENDPOINT))
        );
        let o = UpstreamOptions::from_vars(|k| match k {
            "SPEEDBENCH_PREPARE_SCRIPT" => Some("/tmp/prepare.py".into()),
            _ => None,
        });
        assert_eq!(o.script, PrepareScript::Local("/tmp/prepare.py".into()));
        assert_eq!(o.python, PathBuf::from("python3"));
    }
}
