//! Project chores: `cargo xtask <task>`.
//!
//! Tasks:
//! - `fixtures`: regenerate the small test fixtures under `fixtures/`.
//! - `fixtures --check`: fail if the committed fixtures differ from what the
//!   generator makes (CI runs this).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod fixtures;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("fixtures") => fixtures::run(&workspace_root(), args.iter().any(|a| a == "--check")),
        _ => Err(format!(
            "usage: cargo xtask <task>\n\ntasks:\n  fixtures [--check]   regenerate (or verify) fixtures/\n\ngot: {args:?}"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}
