//! `cargo xtask downstream`: build a crate placed outside the repository's
//! tree, as a downstream user's would be, that depends on the `speedbench`
//! facade alone, and run the facade's examples from it (issue #23: a
//! downstream `cargo build` needs nothing the facade does not give; issue
//! #35: an example that reaches for a file of the repository fails here,
//! not in a user's crate).
//!
//! The crate is made afresh in a temporary directory: the examples are
//! copied into its `src/bin/` (with the files they embed), and it builds
//! into the repository's `target/` from the repository's lockfile, so the
//! dependencies the test build compiled are reused.

use std::path::Path;
use std::process::Command;

/// The examples built as the downstream crate's binaries, run in turn.
const EXAMPLES: [&str; 3] = ["downstream", "run_spec", "sweep"];

/// Files an example embeds (`include_str!`), copied beside it.
const EMBEDDED: [&str; 1] = ["sweep.toml"];

pub(crate) fn run(root: &Path) -> Result<(), String> {
    let work =
        tempfile::tempdir().map_err(|e| format!("downstream: a temporary directory: {e}"))?;
    let dir = work.path().join("speedbench-downstream-check");
    make_crate(root, &dir)?;
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
        "downstream: {} examples built and ran from a crate outside the repository ({}) that \
         depends only on `speedbench`",
        EXAMPLES.len(),
        dir.display()
    );
    Ok(())
}

/// Writes the downstream crate at `dir`: its manifest, the repository's
/// lockfile (the same versions, already built), and the examples.
fn make_crate(root: &Path, dir: &Path) -> Result<(), String> {
    let bin = dir.join("src").join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| format!("{}: {e}", bin.display()))?;
    let examples = root.join("crates/speedbench/examples");
    let copy = |from: &Path, to: &Path| {
        std::fs::copy(from, to)
            .map(|_| ())
            .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))
    };
    for example in EXAMPLES {
        let name = format!("{example}.rs");
        copy(&examples.join(&name), &bin.join(&name))?;
    }
    for file in EMBEDDED {
        copy(&examples.join(file), &bin.join(file))?;
    }
    copy(&root.join("Cargo.lock"), &dir.join("Cargo.lock"))?;
    let facade = root.join("crates/speedbench");
    let manifest = format!(
        r#"# A benchmark outside the repository that depends on the `speedbench`
# facade alone, as a downstream user's would (made by `cargo xtask downstream`).
[package]
name = "speedbench-downstream-check"
version = "0.0.0"
edition = "2024"
publish = false

# Its own workspace: not a member of the repository's.
[workspace]

[dependencies]
speedbench = {{ path = {facade:?} }}

# The repository's dev profile, so the shared target directory reuses its
# dependencies' builds.
[profile.dev]
debug = "line-tables-only"

[profile.dev.package."*"]
opt-level = 1
debug = false
"#,
        facade = facade.display().to_string()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).map_err(|e| format!("{}: {e}", dir.display()))
}
