//! Kubernetes's own schema for the manifests `speedbench kube manifest`
//! prints in the tests: PyPI's `kubernetes-validate` (pinned in
//! `kube-venv-requirements.txt`, run from the venv `target/kube-venv` made
//! on first use, as [`crate::s3`] makes its venv) checks each against the
//! official OpenAPI schema of Kubernetes [`KUBERNETES_VERSION`], strictly
//! (an unknown field fails), independently of speedbench's own checks.
//!
//! `SPEEDBENCH_TEST_KUBE_SCHEMA=skip` skips the check, loudly.

use std::process::Command;
use std::sync::OnceLock;

use crate::{Announcer, Venv, announce};

/// The pinned package list of `target/kube-venv`.
pub const REQUIREMENTS: &str = include_str!("../kube-venv-requirements.txt");

/// The venv, relative to the workspace root.
pub const VENV_DIR: &str = "target/kube-venv";

/// The environment variable that can skip the schema check.
pub const ENV: &str = "SPEEDBENCH_TEST_KUBE_SCHEMA";

/// The Kubernetes release whose schema the manifests must meet.
pub const KUBERNETES_VERSION: &str = "1.33.0";

/// Checks every manifest (a JSON or YAML text) against Kubernetes
/// [`KUBERNETES_VERSION`]'s schema with `kubernetes-validate --strict`;
/// `false` (announced) when `SPEEDBENCH_TEST_KUBE_SCHEMA=skip`.
///
/// # Panics
///
/// When a manifest does not validate (with the validator's words and the
/// manifest), or the venv cannot be made.
#[track_caller]
pub fn assert_valid_manifests(manifests: &[&str]) -> bool {
    if std::env::var_os(ENV).is_some_and(|v| v == "skip") {
        announce(&format!(
            "SKIPPED the Kubernetes schema check in {}: {ENV}=skip",
            std::thread::current().name().unwrap_or("a test")
        ));
        return false;
    }
    let python = python();
    let dir = std::env::temp_dir().join(format!(
        "speedbench-kube-manifests-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&dir).expect("a directory for the manifests");
    let files: Vec<_> = manifests
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let path = dir.join(format!("manifest-{i}.json"));
            std::fs::write(&path, text).expect("writing a manifest");
            path
        })
        .collect();
    let out = Command::new(python)
        .args([
            "-m",
            "kubernetes_validate",
            "--strict",
            "-k",
            KUBERNETES_VERSION,
        ])
        .args(&files)
        .output()
        .unwrap_or_else(|e| panic!("running kubernetes-validate: {e}"));
    let _ = std::fs::remove_dir_all(&dir);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let passed = said
        .lines()
        .filter(|l| l.contains(" passed for resource "))
        .count();
    assert!(
        out.status.success() && passed == manifests.len(),
        "kubernetes-validate (Kubernetes {KUBERNETES_VERSION}, --strict) refused a manifest:\n{said}\nmanifests:\n{}",
        manifests.join("\n---\n")
    );
    true
}

/// The venv's Python, made once per test binary.
fn python() -> std::path::PathBuf {
    static PYTHON: OnceLock<Result<std::path::PathBuf, String>> = OnceLock::new();
    let made = PYTHON.get_or_init(|| {
        Venv::in_workspace(VENV_DIR, REQUIREMENTS, "import kubernetes_validate")
        .with_purpose("the Kubernetes schema check of the manifests")
        .ensure(&mut Announcer)
        .map(|ready| ready.python)
        .map_err(|e| {
            format!(
                "the schema check's venv {VENV_DIR} cannot be made: {e} (set {ENV}=skip to skip it)"
            )
        })
    });
    match made {
        Ok(p) => p.clone(),
        Err(msg) => panic!("{msg}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const JOB: &str = r#"{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"j"},
        "spec":{"template":{"spec":{"restartPolicy":"Never",
        "containers":[{"name":"c","image":"i"}]}}}}"#;

    #[test]
    fn a_valid_job_passes_and_a_wrong_field_fails() {
        if std::env::var_os(ENV).is_some_and(|v| v == "skip") {
            return;
        }
        assert!(assert_valid_manifests(&[JOB]));
        let misplaced = JOB.replace("\"restartPolicy\"", "\"restartPolicyy\"");
        let typed_wrong = JOB.replace("\"image\":\"i\"", "\"image\":7");
        for bad in [misplaced, typed_wrong] {
            let refused = std::panic::catch_unwind(|| assert_valid_manifests(&[JOB, &bad]));
            assert!(refused.is_err(), "{bad}");
        }
    }
}
