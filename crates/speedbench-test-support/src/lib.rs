//! What speedbench's own tests need from the machine, made on first use, so
//! that `cargo test --workspace` passes on a fresh clone with no set-up step.
//!
//! The tests that run the SPEED-Bench prepare step through speedbench's
//! driver (`crates/speedbench-dataset/tests/it/upstream.rs`,
//! `bins/speedbench/tests/it/secrets_e2e.rs`) need Python 3 with `datasets`,
//! `numpy` and `pandas`. [`test_python`] gives them one, chosen by
//! `SPEEDBENCH_TEST_PYTHON`:
//!
//! - unset (or empty): the venv `target/prepare-venv`, made on first use from
//!   `prepare-venv-requirements.txt` (every package pinned, from PyPI) and
//!   reused after. It is made once: under an exclusive lock on
//!   `target/prepare-venv.lock`, so test binaries (and `cargo xtask
//!   prepare-venv`) running at the same time install it once, and a stamp
//!   inside it records the package list it was installed from, so a changed
//!   list is installed again. While it installs, a line on stderr says so.
//! - a path: that interpreter, which must import the packages; it is never
//!   changed. A relative path with a `/` is taken from the workspace root.
//! - `skip`: none; every test that needed it says loudly that it skipped.
//!
//! When no venv can be made (no `python3`, no `venv` module, pip failing)
//! the tests fail with the command that failed, its output and what to run.
//! `cargo xtask prepare-venv` makes the same venv ahead of time
//! ([`Venv::ensure`]).

pub mod kube;
pub mod s3;

use std::ffi::{OsStr, OsString};
use std::fs::{File, TryLockError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Instant;

/// The pinned package list of `target/prepare-venv`
/// (`prepare-venv-requirements.txt` beside this crate's manifest), in pip's
/// requirements format.
pub const REQUIREMENTS: &str = include_str!("../prepare-venv-requirements.txt");

/// Where [`REQUIREMENTS`] lives, relative to the workspace root.
pub const REQUIREMENTS_FILE: &str = "crates/speedbench-test-support/prepare-venv-requirements.txt";

/// The Python that must succeed for an interpreter to be usable by the
/// prepare-step tests.
pub const IMPORT_CHECK: &str = "import datasets, numpy, pandas";

/// The managed venv, relative to the workspace root.
pub const VENV_DIR: &str = "target/prepare-venv";

/// The environment variable that chooses the tests' Python.
pub const ENV: &str = "SPEEDBENCH_TEST_PYTHON";

/// The file inside a venv holding the requirements it was installed from.
const STAMP: &str = "speedbench-requirements.txt";

/// What to do when the tests' Python cannot be had.
pub const HOW_TO_FIX: &str = "The SPEED-Bench prepare-step tests need Python 3 with datasets, \
    numpy and pandas; unless SPEEDBENCH_TEST_PYTHON names one, they make the venv \
    target/prepare-venv on first use (pip install from PyPI). Fix the cause above and rerun \
    `cargo test --workspace` (it tries again), or run `cargo xtask prepare-venv` to make the venv \
    by hand, or set SPEEDBENCH_TEST_PYTHON to a Python 3 that imports datasets, numpy and pandas, \
    or set SPEEDBENCH_TEST_PYTHON=skip to skip these tests.";

/// Why the venv could not be made.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VenvError {
    /// A file or directory of the venv could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A command could not be started at all.
    #[error("`{command}` could not start: {source}{hint}")]
    Spawn {
        /// The command line.
        command: String,
        /// What usually fixes it, starting with "; " (or empty).
        hint: &'static str,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A command ran and failed.
    #[error("`{command}` failed ({status}){hint}; its last output:\n{output}")]
    Failed {
        /// The command line.
        command: String,
        /// How it ended.
        status: ExitStatus,
        /// What usually fixes it, starting with "; " (or empty).
        hint: &'static str,
        /// The last lines of its stdout and stderr.
        output: String,
    },
}

/// A venv made from a pinned package list, checked by a Python snippet.
#[derive(Debug, Clone)]
pub struct Venv {
    dir: PathBuf,
    base_python: OsString,
    requirements: String,
    check: String,
    purpose: String,
}

/// A venv that [`Venv::ensure`] found or made ready.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    /// Its interpreter.
    pub python: PathBuf,
    /// Whether this call installed anything (false: it was reused as it was).
    pub installed: bool,
}

/// An I/O error at `path`, as this crate reports it.
fn io_err(path: &Path) -> impl Fn(io::Error) -> VenvError + use<> {
    let path = path.to_path_buf();
    move |source| VenvError::Io {
        path: path.clone(),
        source,
    }
}

impl Venv {
    /// `target/prepare-venv` of this workspace with [`REQUIREMENTS`] and
    /// [`IMPORT_CHECK`], made with `$PYTHON` (default `python3`).
    pub fn managed() -> Venv {
        Venv::in_workspace(VENV_DIR, REQUIREMENTS, IMPORT_CHECK)
    }

    /// A venv at `dir` (relative to the workspace root) made with `$PYTHON`
    /// (default `python3`), holding `requirements`, ready when it runs
    /// `check`: how each of the tests' venvs is made.
    pub fn in_workspace(dir: &str, requirements: &str, check: &str) -> Venv {
        let base = std::env::var_os("PYTHON")
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| "python3".into());
        Venv::new(workspace_root().join(dir), base, requirements, check)
    }

    /// A venv at `dir`, made with `base_python -m venv`, holding the
    /// packages `requirements` lists (pip's format; `#` comments allowed),
    /// ready when its interpreter runs `check`.
    pub fn new(
        dir: impl Into<PathBuf>,
        base_python: impl Into<OsString>,
        requirements: &str,
        check: &str,
    ) -> Venv {
        Venv {
            dir: dir.into(),
            base_python: base_python.into(),
            requirements: requirements.to_string(),
            check: check.to_string(),
            purpose: "the SPEED-Bench prepare-step tests".to_string(),
        }
    }

    /// Names what the venv is for in the line announcing its install.
    pub fn with_purpose(mut self, purpose: &str) -> Venv {
        self.purpose = purpose.to_string();
        self
    }

    /// The venv's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The venv's interpreter (which may not exist yet).
    pub fn python(&self) -> PathBuf {
        if cfg!(windows) {
            self.dir.join("Scripts").join("python.exe")
        } else {
            self.dir.join("bin").join("python")
        }
    }

    /// The lock file that serializes every process making this venv.
    pub fn lock_file(&self) -> PathBuf {
        let mut name = self
            .dir
            .file_name()
            .unwrap_or(OsStr::new("venv"))
            .to_owned();
        name.push(".lock");
        self.dir.with_file_name(name)
    }

    /// Makes the venv ready, once: under an exclusive lock on
    /// [`Venv::lock_file`], reuses it when its stamp matches the package list
    /// and its interpreter passes the check; otherwise creates it (anew when
    /// its interpreter no longer runs), installs the packages and writes the
    /// stamp. Each step it takes is announced on `progress`; a reuse writes
    /// nothing.
    pub fn ensure(&self, progress: &mut dyn Write) -> Result<Ready, VenvError> {
        // Held until the end of this call, and released there explicitly: a
        // process another thread is just starting may hold a copy of the
        // descriptor until its exec, and closing ours would leave the lock
        // held by that copy.
        let _held = self.lock(progress)?;
        let python = self.python();
        let stamp = self.dir.join(STAMP);
        let stamped = std::fs::read_to_string(&stamp).is_ok_and(|s| s == self.requirements);
        if stamped && self.checks(&python) {
            return Ok(Ready {
                python,
                installed: false,
            });
        }
        self.install(&python, &stamp, progress)?;
        Ok(Ready {
            python,
            installed: true,
        })
    }

    /// Takes the venv's lock, saying so when another process holds it.
    fn lock(&self, progress: &mut dyn Write) -> Result<HeldLock, VenvError> {
        let lock_path = self.lock_file();
        if let Some(parent) = lock_path.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        let lock = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io_err(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let _ = writeln!(
                    progress,
                    "waiting for another process that is making {} (lock {})",
                    self.dir.display(),
                    lock_path.display()
                );
                lock.lock().map_err(io_err(&lock_path))?;
            }
            Err(TryLockError::Error(e)) => return Err(io_err(&lock_path)(e)),
        }
        Ok(HeldLock(lock))
    }

    /// Makes the venv (anew when its interpreter no longer runs), installs
    /// the packages, checks them and writes the stamp.
    fn install(
        &self,
        python: &Path,
        stamp: &Path,
        progress: &mut dyn Write,
    ) -> Result<(), VenvError> {
        let started = Instant::now();
        let packages = self.packages();
        let runs = python.exists() && run(Command::new(python).args(["-c", ""]), "").is_ok();
        let _ = writeln!(
            progress,
            "{} {} for {} (pip install {} pinned packages: {}), once; later runs reuse it",
            if runs { "updating" } else { "creating" },
            self.dir.display(),
            self.purpose,
            packages.len(),
            self.top_level_names(),
        );
        if !runs {
            self.create()?;
        }
        // A stamp stays only on a venv whose install finished and checked.
        match std::fs::remove_file(stamp) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(io_err(stamp)(e)),
            _ => {}
        }
        run(
            Command::new(python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--no-input",
                    "--disable-pip-version-check",
                ])
                .args(&packages),
            "; pip needs PyPI (or the index PIP_INDEX_URL names) to be reachable",
        )?;
        run(
            Command::new(python).args(["-c", &self.check]),
            "; the packages installed but do not import",
        )?;
        std::fs::write(stamp, &self.requirements).map_err(io_err(stamp))?;
        let _ = writeln!(
            progress,
            "{} is ready ({:.0} s)",
            self.dir.display(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// A fresh venv in place of whatever is there.
    fn create(&self) -> Result<(), VenvError> {
        if self.dir.exists() {
            std::fs::remove_dir_all(&self.dir).map_err(io_err(&self.dir))?;
        }
        run(
            Command::new(&self.base_python)
                .args(["-m", "venv"])
                .arg(&self.dir),
            "; Debian/Ubuntu: apt-get install python3 python3-venv, or set PYTHON to a \
             Python 3 that has the venv module",
        )
    }

    /// Whether `python` runs the check.
    fn checks(&self, python: &Path) -> bool {
        python.exists() && run(Command::new(python).args(["-c", &self.check]), "").is_ok()
    }

    /// The requirement lines, without comments and blank lines.
    fn packages(&self) -> Vec<&str> {
        self.requirements
            .lines()
            .map(|l| l.split('#').next().unwrap_or("").trim())
            .filter(|l| !l.is_empty())
            .collect()
    }

    /// The names of the packages the check imports, for the announcement.
    fn top_level_names(&self) -> String {
        self.check
            .trim()
            .strip_prefix("import ")
            .map(|names| names.replace(',', ""))
            .unwrap_or_else(|| self.check.clone())
    }
}

/// Runs `cmd` with its output captured; a failure keeps the output's tail.
fn run(cmd: &mut Command, hint: &'static str) -> Result<(), VenvError> {
    let command = {
        let mut words = vec![cmd.get_program().to_string_lossy().into_owned()];
        words.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
        if words.len() > 12 {
            let more = words.len() - 12;
            words.truncate(12);
            words.push(format!("… ({more} more)"));
        }
        words.join(" ")
    };
    cmd.stdin(Stdio::null());
    let mut attempts = 0;
    let out = loop {
        match cmd.output() {
            // A script written a moment ago can still be open for writing in
            // a child another thread is forking (ETXTBSY); that passes.
            Err(e) if e.kind() == io::ErrorKind::ExecutableFileBusy && attempts < 20 => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => {
                break other.map_err(|source| VenvError::Spawn {
                    command: command.clone(),
                    hint,
                    source,
                })?;
            }
        }
    };
    if out.status.success() {
        return Ok(());
    }
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = text.lines().collect();
    let output = lines[lines.len().saturating_sub(30)..].join("\n");
    Err(VenvError::Failed {
        command,
        status: out.status,
        hint,
        output,
    })
}

/// The workspace this crate belongs to.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("speedbench-test-support lives in crates/ of the workspace")
        .to_path_buf()
}

/// Writes a line to this process's stderr past the test harness's output
/// capture (which holds back `eprintln!` of a passing test), so a developer
/// running `cargo test` sees it.
pub fn announce(line: &str) {
    let mut err = io::stderr().lock();
    let _ = writeln!(err, "{line}");
    let _ = err.flush();
}

/// [`announce`] as a writer, one announcement per line.
struct Announcer;

impl Write for Announcer {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut err = io::stderr().lock();
        err.write_all(buf)?;
        err.flush()?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        io::stderr().lock().flush()
    }
}

/// The name of the running test (libtest names each test's thread after it).
fn test_name() -> String {
    std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string()
}

/// The Python for a test that runs the SPEED-Bench prepare step, chosen once
/// per process as the crate docs say, or `None` when the developer set
/// `SPEEDBENCH_TEST_PYTHON=skip` (announced, naming the test, on every
/// call).
///
/// # Panics
///
/// When the chosen interpreter cannot be had: the message names what
/// failed and what to run ([`HOW_TO_FIX`]).
#[track_caller]
pub fn test_python() -> Option<PathBuf> {
    static CHOSEN: OnceLock<Result<Option<PathBuf>, String>> = OnceLock::new();
    let chosen =
        CHOSEN.get_or_init(|| choose(std::env::var_os(ENV), &Venv::managed(), &mut Announcer));
    match chosen {
        Ok(Some(python)) => Some(python.clone()),
        Ok(None) => {
            announce(&format!(
                "SKIPPED {}: {ENV}=skip, so the SPEED-Bench prepare step was not run",
                test_name()
            ));
            None
        }
        Err(msg) => panic!("{msg}"),
    }
}

/// What `SPEEDBENCH_TEST_PYTHON=value` chooses, making `venv` when it is
/// unset; the error is the whole message a failing test shows.
fn choose(
    value: Option<OsString>,
    venv: &Venv,
    progress: &mut dyn Write,
) -> Result<Option<PathBuf>, String> {
    match value.filter(|v| !v.is_empty()) {
        Some(v) if v == "skip" => Ok(None),
        Some(v) => {
            let given = PathBuf::from(&v);
            let python = if given.is_relative() && given.components().count() > 1 {
                workspace_root().join(given)
            } else {
                given
            };
            match run(Command::new(&python).args(["-c", &venv.check]), "") {
                Ok(()) => Ok(Some(python)),
                Err(e) => Err(format!(
                    "{ENV}={} cannot be used: {e}\nIt must name a Python 3 that runs `{}`; unset \
                     it to let the tests make {} themselves, or set {ENV}=skip to skip these \
                     tests.",
                    python.display(),
                    venv.check,
                    venv.dir.display(),
                )),
            }
        }
        None => venv
            .ensure(progress)
            .map(|ready| Some(ready.python))
            .map_err(|e| format!("could not make {}: {e}\n\n{HOW_TO_FIX}", venv.dir.display())),
    }
}

/// An exclusive file lock released on drop with an explicit unlock.
struct HeldLock(File);

impl Drop for HeldLock {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// A stand-in for `python3` that only does `-m venv DIR`, making a venv
    /// whose `bin/python` logs each `pip install` to `pip.log`, fails it
    /// while `pip-fails` exists next to the venv, and passes any `-c` check
    /// once an install finished. Every venv it makes is logged to `venv.log`.
    fn fake_base_python(dir: &Path) -> PathBuf {
        let path = dir.join("python3");
        std::fs::write(
            &path,
            r#"#!/bin/sh
[ "$1" = "-m" ] && [ "$2" = "venv" ] || exit 2
mkdir -p "$3/bin"
cat > "$3/bin/python" <<'PY'
#!/bin/sh
venv=$(dirname "$0")/..
case "$1" in
  -m) shift 3; echo "$*" >> "$venv/pip.log"
      if [ -f "$venv/../pip-fails" ]; then echo "ERROR: No matching distribution found" >&2; exit 1; fi
      sleep 0.2; touch "$venv/installed" ;;
  -c) [ -z "$2" ] || [ -f "$venv/installed" ] ;;
  *) exit 2 ;;
esac
PY
chmod +x "$3/bin/python"
echo "$3" >> "$(dirname "$0")/venv.log"
"#,
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    fn venv_in(dir: &Path, requirements: &str) -> Venv {
        Venv::new(
            dir.join("target/prepare-venv"),
            fake_base_python(dir),
            requirements,
            IMPORT_CHECK,
        )
    }

    fn lines(path: &Path) -> Vec<String> {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn a_missing_venv_is_created_once_with_the_pinned_list_and_then_reused() {
        let dir = tempfile::tempdir().unwrap();
        let venv = venv_in(dir.path(), REQUIREMENTS);
        let mut said = Vec::new();
        let ready = venv.ensure(&mut said).unwrap();
        assert_eq!(
            ready,
            Ready {
                python: dir.path().join("target/prepare-venv/bin/python"),
                installed: true
            }
        );
        let said = String::from_utf8(said).unwrap();
        assert!(
            said.starts_with(&format!(
                "creating {} for the SPEED-Bench prepare-step tests (pip install 24 pinned \
                 packages: datasets numpy pandas), once",
                venv.dir().display()
            )),
            "{said}"
        );
        assert!(said.contains("is ready"), "{said}");
        let pip = lines(&venv.dir().join("pip.log"));
        assert_eq!(pip.len(), 1);
        assert!(
            pip[0].contains("datasets==5.2.0 numpy==2.4.6 pandas==3.1.1") && !pip[0].contains('#'),
            "{pip:?}"
        );
        assert_eq!(
            std::fs::read_to_string(venv.dir().join(STAMP)).unwrap(),
            REQUIREMENTS
        );

        let mut said = Vec::new();
        assert!(!venv.ensure(&mut said).unwrap().installed);
        assert!(said.is_empty(), "a reuse is silent");
        assert_eq!(lines(&venv.dir().join("pip.log")).len(), 1);
        assert_eq!(lines(&dir.path().join("venv.log")).len(), 1);
    }

    #[test]
    fn callers_that_ask_at_once_install_once_under_the_file_lock() {
        let dir = tempfile::tempdir().unwrap();
        let venv = venv_in(dir.path(), REQUIREMENTS);
        // Each thread opens the lock file itself, as separate processes do;
        // the fake install takes 0.2 s, so without the lock they would all
        // find no stamp and install.
        let results: Vec<Ready> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| s.spawn(|| venv.ensure(&mut Vec::new()).unwrap()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(results.iter().filter(|r| r.installed).count(), 1);
        assert!(results.iter().all(|r| r.python == venv.python()));
        assert_eq!(lines(&venv.dir().join("pip.log")).len(), 1);
        assert_eq!(lines(&dir.path().join("venv.log")).len(), 1);
        assert!(dir.path().join("target/prepare-venv.lock").exists());
    }

    #[test]
    fn a_changed_package_list_is_installed_into_the_same_venv() {
        let dir = tempfile::tempdir().unwrap();
        venv_in(dir.path(), "datasets==1.0\n")
            .ensure(&mut Vec::new())
            .unwrap();
        let venv = venv_in(dir.path(), "datasets==2.0\nnumpy==2.0\n");
        let mut said = Vec::new();
        assert!(venv.ensure(&mut said).unwrap().installed);
        let said = String::from_utf8(said).unwrap();
        assert!(said.starts_with("updating "), "{said}");
        assert_eq!(
            lines(&venv.dir().join("pip.log"))[1..],
            ["--quiet --no-input --disable-pip-version-check datasets==2.0 numpy==2.0"]
        );
        assert_eq!(
            lines(&dir.path().join("venv.log")).len(),
            1,
            "not made anew"
        );
    }

    #[test]
    fn a_venv_whose_interpreter_no_longer_runs_is_made_anew() {
        let dir = tempfile::tempdir().unwrap();
        let venv = venv_in(dir.path(), REQUIREMENTS);
        venv.ensure(&mut Vec::new()).unwrap();
        // As when the base interpreter a venv links to was removed.
        std::fs::write(venv.python(), "#!/bin/sh\nexit 127\n").unwrap();
        let mut said = Vec::new();
        assert!(venv.ensure(&mut said).unwrap().installed);
        assert!(String::from_utf8(said).unwrap().starts_with("creating "));
        assert_eq!(lines(&dir.path().join("venv.log")).len(), 2);
        assert_eq!(lines(&venv.dir().join("pip.log")).len(), 1);
    }

    #[test]
    fn a_failed_install_shows_pip_and_what_to_run_and_the_next_run_tries_again() {
        let dir = tempfile::tempdir().unwrap();
        let venv = venv_in(dir.path(), REQUIREMENTS);
        std::fs::create_dir_all(dir.path().join("target")).unwrap();
        std::fs::write(dir.path().join("target/pip-fails"), "").unwrap();
        let msg = choose(None, &venv, &mut Vec::new()).unwrap_err();
        assert!(
            msg.starts_with(&format!("could not make {}: `", venv.dir().display()))
                && msg.contains("-m pip install --quiet")
                && msg.contains("(exit status: 1); pip needs PyPI")
                && msg.contains("ERROR: No matching distribution found")
                && msg.contains("`cargo xtask prepare-venv`")
                && msg.contains("SPEEDBENCH_TEST_PYTHON=skip"),
            "{msg}"
        );
        assert!(!venv.dir().join(STAMP).exists());

        std::fs::remove_file(dir.path().join("target/pip-fails")).unwrap();
        let chosen = choose(None, &venv, &mut Vec::new()).unwrap();
        assert_eq!(chosen, Some(venv.python()));
    }

    #[test]
    fn without_a_base_python_the_message_says_what_to_install() {
        let dir = tempfile::tempdir().unwrap();
        let venv = Venv::new(
            dir.path().join("target/prepare-venv"),
            dir.path().join("no-such-python3"),
            REQUIREMENTS,
            IMPORT_CHECK,
        );
        let msg = choose(None, &venv, &mut Vec::new()).unwrap_err();
        assert!(
            msg.contains("-m venv")
                && msg.contains("could not start")
                && msg.contains("apt-get install python3 python3-venv")
                && msg.contains(HOW_TO_FIX),
            "{msg}"
        );
    }

    #[test]
    fn a_named_interpreter_is_used_as_it_is_or_refused_never_changed() {
        let dir = tempfile::tempdir().unwrap();
        let venv = venv_in(dir.path(), REQUIREMENTS);
        let ready = venv.ensure(&mut Vec::new()).unwrap();
        std::fs::create_dir(dir.path().join("other")).unwrap();
        let other = venv_in(&dir.path().join("other"), REQUIREMENTS);
        assert_eq!(
            choose(Some(ready.python.clone().into()), &other, &mut Vec::new()),
            Ok(Some(ready.python.clone()))
        );
        assert!(!other.dir().exists(), "the managed venv was not made");

        let bare = dir.path().join("bare-python");
        std::fs::write(
            &bare,
            "#!/bin/sh\necho 'ModuleNotFoundError: datasets' >&2\nexit 1\n",
        )
        .unwrap();
        std::fs::set_permissions(&bare, std::fs::Permissions::from_mode(0o755)).unwrap();
        let msg = choose(Some(bare.clone().into()), &other, &mut Vec::new()).unwrap_err();
        assert!(
            msg.starts_with(&format!(
                "SPEEDBENCH_TEST_PYTHON={} cannot be used",
                bare.display()
            )) && msg.contains("ModuleNotFoundError: datasets")
                && msg.contains("unset it to let the tests make"),
            "{msg}"
        );
        assert!(!other.dir().exists());

        assert_eq!(
            choose(Some("skip".into()), &other, &mut Vec::new()),
            Ok(None)
        );
    }
}
