//! `cargo xtask wheel [--release]`: build the Python wheel that carries the
//! `speedbench` binary (pyproject.toml, maturin's `bindings = "bin"`),
//! install it into a fresh venv, and run `speedbench demo` and one
//! `profile` from there with no Rust on PATH: what `pip install
//! speedbench` gives a user.
//!
//! Without `--release` the wheel holds the dev-profile binary, so CI reuses
//! the test build instead of compiling everything again; with it, the
//! `dist` profile's (the release build without debug info or symbol
//! table: what users download), and the wheel's and binary's sizes are
//! printed. Maturin comes from PyPI into `target/wheel-build-venv` (made
//! once).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The maturin versions pyproject.toml's build-system asks for.
const MATURIN: &str = "maturin>=1.5,<2";

pub(crate) fn run(root: &Path, args: &[String]) -> Result<(), String> {
    let release = match args {
        [] => false,
        [a] if a == "--release" => true,
        [a, ..] => return Err(format!("wheel: unexpected argument {a:?} (only --release)")),
    };
    let target = root.join("target");
    let wheel = build(root, &target, release)?;
    eprintln!("built {}", wheel.display());
    if release {
        print_sizes(&target, &wheel);
    }
    let venv = target.join("wheel-check-venv");
    fresh_venv(&venv)?;
    let pip = venv.join("bin/pip");
    check(
        Command::new(&pip).args(["install", "--quiet"]).arg(&wheel),
        "pip install the wheel",
    )?;
    let work = tempfile::tempdir().map_err(|e| format!("wheel: a temporary directory: {e}"))?;
    let installed = Installed::new(&venv, work.path())?;
    installed.demo()?;
    installed.profile(&root.join("fixtures/speed_bench_mini.jsonl"))?;
    eprintln!(
        "the wheel installs into a fresh venv and runs `speedbench demo` and `profile` without Rust"
    );
    Ok(())
}

/// Runs `cmd`, failing with `what` and its exit status.
fn check(cmd: &mut Command, what: &str) -> Result<(), String> {
    let status = cmd.status().map_err(|e| format!("wheel: {what}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("wheel: {what} failed ({status})"))
    }
}

fn fresh_venv(dir: &Path) -> Result<(), String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| format!("wheel: removing {}: {e}", dir.display()))?;
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    check(
        Command::new(python).args(["-m", "venv"]).arg(dir),
        "making a venv",
    )
}

/// Builds the wheel into `target/wheels` (emptied first) and returns it.
fn build(root: &Path, target: &Path, release: bool) -> Result<PathBuf, String> {
    let builder = target.join("wheel-build-venv");
    let maturin = builder.join("bin/maturin");
    if !maturin.is_file() {
        fresh_venv(&builder)?;
        check(
            Command::new(builder.join("bin/pip")).args(["install", "--quiet", MATURIN]),
            "installing maturin from PyPI",
        )?;
    }
    let out = target.join("wheels");
    let _ = std::fs::remove_dir_all(&out);
    let profile = if release { "dist" } else { "dev" };
    check(
        Command::new(&maturin)
            .current_dir(root)
            .args(["build", "--locked", "--profile", profile, "--out"])
            .arg(&out),
        "maturin build",
    )?;
    let wheels: Vec<PathBuf> = std::fs::read_dir(&out)
        .map_err(|e| format!("wheel: reading {}: {e}", out.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    match wheels.as_slice() {
        [one] => Ok(one.clone()),
        other => Err(format!(
            "wheel: expected one wheel in {}, found {}",
            out.display(),
            other.len()
        )),
    }
}

/// The sizes a user downloads and installs: the wheel and the binary in it.
fn print_sizes(target: &Path, wheel: &Path) {
    let mib = |p: &Path| std::fs::metadata(p).map_or(f64::NAN, |m| m.len() as f64 / 1048576.0);
    println!(
        "wheel {:.2} MiB ({}), binary {:.2} MiB (target/dist/speedbench)",
        mib(wheel),
        wheel.display(),
        mib(&target.join("dist/speedbench"))
    );
}

/// The installed command, run as a user without Rust runs it.
struct Installed {
    /// PATH: the venv's bin, then the system's; no cargo, no rustc.
    path: String,
    work: PathBuf,
}

impl Installed {
    fn new(venv: &Path, work: &Path) -> Result<Installed, String> {
        let path = format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            venv.join("bin").display()
        );
        for dir in path.split(':') {
            for tool in ["cargo", "rustc"] {
                if Path::new(dir).join(tool).exists() {
                    return Err(format!(
                        "wheel: {tool} is in {dir}, so the check would not be without Rust"
                    ));
                }
            }
        }
        Ok(Installed {
            path,
            work: work.to_path_buf(),
        })
    }

    /// `speedbench ARGS` as found on PATH, in the work directory, with a
    /// bare environment.
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("speedbench");
        cmd.env_clear()
            .env("PATH", &self.path)
            .env("HOME", &self.work)
            .current_dir(&self.work)
            .args(args);
        cmd
    }

    fn demo(&self) -> Result<(), String> {
        check(
            &mut self.command(&["demo"]),
            "the installed `speedbench demo`",
        )?;
        let records = self.work.join("artifacts/demo/records.parquet");
        if !records.is_file() {
            return Err(format!(
                "wheel: `speedbench demo` left no {}",
                records.display()
            ));
        }
        Ok(())
    }

    /// One `profile` against the installed command's own simulator.
    fn profile(&self, dataset: &Path) -> Result<(), String> {
        let mut sim = self
            .command(&["sim", "--port", "0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("wheel: starting `speedbench sim`: {e}"))?;
        let mut url = String::new();
        let stdout = sim.stdout.take().expect("piped");
        let read = BufReader::new(stdout).read_line(&mut url);
        let outcome = read
            .map_err(|e| format!("wheel: reading the simulator's URL: {e}"))
            .and_then(|_| {
                let dataset = dataset.to_str().ok_or("wheel: a non-UTF-8 fixture path")?;
                check(
                    &mut self.command(&[
                        "profile",
                        "--url",
                        url.trim(),
                        "--model",
                        "m",
                        "--input-file",
                        dataset,
                        "--request-count",
                        "6",
                        "--output-artifact-dir",
                        "run",
                    ]),
                    "the installed `speedbench profile`",
                )
            });
        let _ = sim.kill();
        let _ = sim.wait();
        outcome?;
        let records = self.work.join("run/records.parquet");
        if !records.is_file() {
            return Err(format!(
                "wheel: `speedbench profile` left no {}",
                records.display()
            ));
        }
        Ok(())
    }
}
