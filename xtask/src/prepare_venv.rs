//! `cargo xtask prepare-venv`: the Python the upstream-prepare-step tests run.
//!
//! `crates/speedbench-dataset/tests/upstream.rs` runs speedbench's driver of
//! the SPEED-Bench prepare step (with a fake prepare script), which needs
//! Python 3 with `datasets` and `numpy`. This creates a venv with them under
//! `target/prepare-venv` (where `.cargo/config.toml` points
//! `SPEEDBENCH_TEST_PYTHON`), pinned to versions known to work together.
//! It does nothing when the venv already imports them. The real prepare
//! script also needs `tiktoken`; the tests do not.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

/// The venv, relative to the workspace root.
pub(crate) const VENV: &str = "target/prepare-venv";

/// `pip freeze` of a venv made from `datasets numpy pandas` (CPython 3.11,
/// Linux x86_64): every transitive dependency pinned, so CI is reproducible.
const REQUIREMENTS: &[&str] = &[
    "datasets==5.2.0",
    "numpy==2.4.6",
    "pandas==3.1.1",
    "anyio==4.16.0",
    "click==8.5.1",
    "dill==0.4.1",
    "filelock==4.3.1",
    "fsspec==2026.9.0",
    "h11==0.16.0",
    "hf-xet==1.8.0",
    "httpcore2==2.16.2",
    "httpx2==2.16.2",
    "huggingface_hub==2.4.0",
    "idna==3.20",
    "multiprocess==0.70.19",
    "packaging==26.4",
    "pyarrow==26.0.1",
    "python-dateutil==4.0.0",
    "PyYAML==6.0.4",
    "tqdm==4.70.1",
    "truststore==0.10.5",
    "typing_extensions==4.16.0",
    "tzdata==2026.6",
    "xxhash==4.1.0",
];

const CHECK: &str = "import datasets, numpy, pandas; print('datasets', datasets.__version__, \
                     'numpy', numpy.__version__, 'pandas', pandas.__version__)";

fn run_ok(cmd: &mut Command) -> Result<bool, String> {
    cmd.status()
        .map(|s| s.success())
        .map_err(|e| format!("{cmd:?}: {e}"))
}

pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!("prepare-venv: unexpected argument {a:?}"));
    }
    let venv = root.join(VENV);
    let python = venv.join("bin/python");
    let started = Instant::now();
    if python.exists() && run_ok(Command::new(&python).args(["-c", CHECK]))? {
        eprintln!("{} is ready", python.display());
        return Ok(());
    }
    if !python.exists() {
        let base = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        eprintln!("creating {} with {base}", venv.display());
        if !run_ok(Command::new(&base).arg("-m").arg("venv").arg(&venv))? {
            return Err(format!(
                "`{base} -m venv {}` failed (Debian/Ubuntu: apt-get install python3-venv)",
                venv.display()
            ));
        }
    }
    eprintln!(
        "installing datasets, numpy, pandas (pinned) into {}",
        venv.display()
    );
    let installed = run_ok(
        Command::new(&python)
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
            .args(REQUIREMENTS),
    )?;
    if !installed || !run_ok(Command::new(&python).args(["-c", CHECK]))? {
        return Err(format!("installing into {} failed", venv.display()));
    }
    eprintln!(
        "{} is ready ({:.0} s); `cargo test --workspace` uses it through SPEEDBENCH_TEST_PYTHON \
         (.cargo/config.toml)",
        python.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
