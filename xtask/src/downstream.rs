//! `cargo xtask downstream`: build `xtask/downstream`, a crate outside the
//! workspace that depends on the `speedbench` facade alone, and run the
//! facade's examples from it (issue #23: a downstream `cargo build` needs
//! nothing the facade does not give).

use std::path::Path;
use std::process::Command;

/// The examples built as the downstream crate's binaries, run in turn.
const EXAMPLES: [&str; 3] = ["downstream", "run_spec", "sweep"];

pub(crate) fn run(root: &Path) -> Result<(), String> {
    let dir = root.join("xtask").join("downstream");
    // The repository's lockfile as the starting point: the same versions,
    // so the shared target directory has them built already.
    let lock = dir.join("Cargo.lock");
    std::fs::copy(root.join("Cargo.lock"), &lock)
        .map_err(|e| format!("copying Cargo.lock to {}: {e}", lock.display()))?;
    let cargo = env!("CARGO");
    for example in EXAMPLES {
        let status = Command::new(cargo)
            .args(["run", "-q", "--bin", example, "--target-dir"])
            .arg(root.join("target"))
            .current_dir(&dir)
            .status()
            .map_err(|e| format!("cargo run --bin {example}: {e}"))?;
        if !status.success() {
            return Err(format!(
                "the downstream crate's {example} failed ({status}): see above"
            ));
        }
    }
    println!(
        "downstream: {} examples built and ran from a crate that depends only on `speedbench`",
        EXAMPLES.len()
    );
    Ok(())
}
