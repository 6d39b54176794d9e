//! `cargo xtask prepare-venv`: make `target/prepare-venv`, the Python the
//! SPEED-Bench prepare-step tests run, ahead of time.
//!
//! The tests make it themselves on first use (`speedbench-test-support`),
//! so this is only a pre-staging chore: the same venv, the same pinned list
//! (`crates/speedbench-test-support/prepare-venv-requirements.txt`), the same
//! lock, so running it while tests run installs once. It does nothing when
//! the venv is ready. `PYTHON` names the interpreter that creates it
//! (default `python3`). The real prepare script also needs `tiktoken`; the
//! tests do not.

use std::path::Path;

use speedbench_test_support::{REQUIREMENTS_FILE, VENV_DIR, Venv};

pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!("prepare-venv: unexpected argument {a:?}"));
    }
    let venv = Venv::managed();
    debug_assert_eq!(venv.dir(), root.join(VENV_DIR));
    let ready = venv
        .ensure(&mut std::io::stderr())
        .map_err(|e| format!("prepare-venv: {e}"))?;
    eprintln!(
        "{} is {}; `cargo test --workspace` uses it unless SPEEDBENCH_TEST_PYTHON names another \
         Python (packages: {REQUIREMENTS_FILE})",
        ready.python.display(),
        if ready.installed {
            "ready"
        } else {
            "already ready"
        },
    );
    Ok(())
}
