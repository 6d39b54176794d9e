//! Sweeps built in code: a base [`RunSpec`] and its changes, a list or a
//! grid, checked and run as a file's runs are. A file (TOML, YAML, AIPerf
//! YAML) is one way to build a sweep; this is the other.

use std::path::{Path, PathBuf};

use crate::error::RunError;
use crate::spec::RunSpec;
use crate::sweep::file::{MAX_VARIATIONS, dir_safe};
use crate::sweep::{Sweep, SweepPlots, SweepRun};
use speedbench_runs::REPEATED_RUNS_DIR;

/// One change to a base spec: a `profile` flag's long name (`concurrency`,
/// `request-rate`) and its value as the command line writes it.
type Change = (String, String);

impl Sweep {
    /// A sweep of `runs` built in code, each a description (what sets it
    /// apart: `k=4`) and its spec. Run `i` (from 1) goes to
    /// `parent/<i>-<description>`: its `output_artifact_dir` is set there.
    /// At most [`MAX_VARIATIONS`] runs.
    ///
    /// ```
    /// use speedbench_run::{RunSpec, sweep::Sweep};
    /// let base = RunSpec::default().with("url", "http://127.0.0.1:8000")?;
    /// let runs = [1, 8].map(|c| (format!("c={c}"), base.clone().with("concurrency", &c.to_string()).unwrap()));
    /// let sweep = Sweep::from_runs("artifacts/ladder", runs)?;
    /// assert_eq!(sweep.runs()[1].dir_name, "2-c-8");
    /// assert_eq!(sweep.runs()[1].spec().unwrap().load.concurrency, 8);
    /// # Ok::<(), speedbench_run::RunError>(())
    /// ```
    pub fn from_runs(
        parent: impl Into<PathBuf>,
        runs: impl IntoIterator<Item = (String, RunSpec)>,
    ) -> Result<Sweep, RunError> {
        let parent = parent.into();
        let runs: Vec<(String, RunSpec)> = runs.into_iter().take(MAX_VARIATIONS + 1).collect();
        if runs.len() > MAX_VARIATIONS {
            return Err(too_many(&format!("more than {MAX_VARIATIONS}")));
        }
        let width = runs.len().to_string().len();
        let runs = runs
            .into_iter()
            .enumerate()
            .map(|(i, (description, spec))| code_run(&parent, i + 1, width, description, spec))
            .collect();
        Ok(Sweep::in_code(parent, runs))
    }

    /// `n` runs of `spec` over the same prompts in the same order, in
    /// `parent/profile_runs/run_0001` and on (AIPerf's layout for repeated
    /// runs): each a single run; only the first warms up unless
    /// `warmup_every_run`. At most [`crate::RepeatSpec::MAX_RUNS`].
    ///
    /// ```
    /// use speedbench_run::{RunSpec, sweep::Sweep};
    /// let spec = RunSpec::default().with("url", "http://127.0.0.1:8000")?.with("warmup-request-count", "4")?;
    /// let sweep = Sweep::repeated(&spec, "artifacts/five", 5, false)?;
    /// assert_eq!(sweep.runs()[1].dir, std::path::Path::new("artifacts/five/profile_runs/run_0002"));
    /// assert_eq!(sweep.runs()[0].spec().unwrap().load.warmup_request_count, 4);
    /// assert_eq!(sweep.runs()[1].spec().unwrap().load.warmup_request_count, 0);
    /// # Ok::<(), speedbench_run::RunError>(())
    /// ```
    pub fn repeated(
        spec: &RunSpec,
        parent: impl Into<PathBuf>,
        n: usize,
        warmup_every_run: bool,
    ) -> Result<Sweep, RunError> {
        let max = crate::RepeatSpec::MAX_RUNS;
        if !(1..=max).contains(&n) {
            return Err(RunError::invalid(
                "--num-profile-runs",
                format!("{n} runs asked for: from 1 to {max}"),
            ));
        }
        let parent = parent.into();
        let runs = (1..=n)
            .map(|index| {
                let dir_name = format!("run_{index:04}");
                let dir = parent.join(REPEATED_RUNS_DIR).join(&dir_name);
                let spec = one_repetition(spec.clone(), &dir, index > 1 && !warmup_every_run);
                SweepRun {
                    index,
                    description: format!("run {index} of {n}"),
                    dir_name,
                    origin: format!("run {index} of --num-profile-runs {n}"),
                    dir,
                    file_flags: Vec::new(),
                    spec: Ok(spec),
                }
            })
            .collect();
        Ok(Sweep::in_code(parent, runs))
    }

    /// Every run of the sweep `trials.num_profile_runs` times, trials
    /// outer and the runs in their order inside each (AIPerf's `repeated`
    /// order, its default for a sweep with `multiRun`): run `v` of trial
    /// `t` goes to `parent/profile_runs/trial_000t/<v's directory name>`.
    /// Only trial 1 warms up unless `trials.warmup_every_run`; the
    /// cooldown (`trials.cooldown_s`) is waited between trials, not between
    /// the runs of one. [`crate::repeat::trial_aggregates`] gives each run's
    /// figures across its trials. A sweep of one run is refused (that is
    /// [`Sweep::repeated`]), as is one of more than [`MAX_VARIATIONS`]
    /// runs in all.
    ///
    /// ```
    /// use speedbench_run::{RepeatSpec, RunSpec, sweep::Sweep};
    /// let base = RunSpec::default().with("url", "http://127.0.0.1:8000")?;
    /// let grid = Sweep::grid(&base, "artifacts/grid", &[("concurrency", &["1", "4"])])?;
    /// let mut trials = RepeatSpec::default();
    /// trials.num_profile_runs = 3;
    /// let sweep = grid.in_trials(&trials)?;
    /// assert_eq!(sweep.runs().len(), 6);
    /// assert_eq!(
    ///     sweep.runs()[3].dir,
    ///     std::path::Path::new("artifacts/grid/profile_runs/trial_0002/2-concurrency-4")
    /// );
    /// # Ok::<(), speedbench_run::RunError>(())
    /// ```
    pub fn in_trials(self, trials: &crate::RepeatSpec) -> Result<Sweep, RunError> {
        let (n, variations) = (trials.num_profile_runs, self.runs.len());
        let max = crate::RepeatSpec::MAX_RUNS;
        if !(1..=max).contains(&n) {
            return Err(RunError::invalid(
                "multiRun.numRuns",
                format!("{n} runs asked for: from 1 to {max}"),
            ));
        }
        if variations < 2 {
            return Err(RunError::invalid(
                "multiRun",
                "trials of a sweep need two runs or more; one run is repeated as --num-profile-runs",
            ));
        }
        if n * variations > MAX_VARIATIONS {
            return Err(too_many(&format!("{n} trials of {variations} runs")));
        }
        let runs = (1..=n)
            .flat_map(|trial| {
                let parent = &self.parent;
                let index = move |v: usize| (trial - 1) * variations + v + 1;
                (self.runs.iter().enumerate())
                    .map(move |(v, run)| trial_run(parent, run, (index(v), trial, n), trials))
            })
            .collect();
        Ok(Sweep {
            runs,
            cooldown: std::time::Duration::from_secs_f64(trials.cooldown_s),
            cooldown_every: variations,
            trials: None,
            ..self
        })
    }

    /// Waits `cooldown` before every run but the first (a stop cuts the
    /// wait short): `--profile-run-cooldown-seconds`.
    pub fn with_cooldown(mut self, cooldown: std::time::Duration) -> Sweep {
        self.cooldown = cooldown;
        self
    }

    /// Every combination of `axes` over `base`, the last axis varying
    /// fastest: each axis a flag's long name and its values, set as
    /// [`RunSpec::with`] sets them (so a value is checked as the command
    /// line's). A sweep of more than [`MAX_VARIATIONS`] runs is refused
    /// before any is built.
    ///
    /// ```
    /// use speedbench_run::{RunSpec, sweep::Sweep};
    /// let base = RunSpec::default().with("url", "http://127.0.0.1:8000")?;
    /// let sweep = Sweep::grid(&base, "artifacts/grid", &[
    ///     ("concurrency", &["1", "4"]),
    ///     ("request-count", &["8", "16"]),
    /// ])?;
    /// assert_eq!(sweep.runs().len(), 4);
    /// assert_eq!(sweep.runs()[1].description, "concurrency=1, request_count=16");
    /// # Ok::<(), speedbench_run::RunError>(())
    /// ```
    pub fn grid(
        base: &RunSpec,
        parent: impl Into<PathBuf>,
        axes: &[(&str, &[&str])],
    ) -> Result<Sweep, RunError> {
        let total = axes
            .iter()
            .try_fold(1usize, |n, (_, values)| n.checked_mul(values.len()));
        match total {
            Some(n) if n <= MAX_VARIATIONS => {}
            Some(n) => return Err(too_many(&n.to_string())),
            None => return Err(too_many("more than 2^64")),
        }
        let changes = combinations(axes);
        let runs = changes
            .into_iter()
            .map(|changes| {
                let description = describe(&changes);
                let spec = changes
                    .iter()
                    .try_fold(base.clone(), |spec, (flag, value)| spec.with(flag, value))?;
                Ok((description, spec))
            })
            .collect::<Result<Vec<_>, RunError>>()?;
        Sweep::from_runs(parent, runs)
    }
}

impl Sweep {
    /// A sweep of `runs` under `parent`, built in code: no file, no report
    /// flags, no cooldown.
    fn in_code(parent: PathBuf, runs: Vec<SweepRun>) -> Sweep {
        Sweep {
            path: None,
            parent,
            runs,
            report_tokens: Vec::new(),
            cooldown: std::time::Duration::ZERO,
            cooldown_every: 1,
            trials: None,
            plots: SweepPlots::default(),
        }
    }
}

/// `spec` as one run of a repetition (a repeated run, or a trial of a
/// sweep): repeated no further, into `dir`, without warmup when `cold`.
fn one_repetition(mut spec: RunSpec, dir: &Path, cold: bool) -> RunSpec {
    spec.repeat = crate::RepeatSpec::default();
    spec.outputs.output_artifact_dir = Some(dir.to_path_buf());
    if cold {
        spec.load.without_warmup();
    }
    spec
}

/// `run` as trial `trial` of `n`, in `parent/profile_runs/trial_000t/`,
/// the sweep's `index`-th run.
fn trial_run(
    parent: &Path,
    run: &SweepRun,
    (index, trial, n): (usize, usize, usize),
    trials: &crate::RepeatSpec,
) -> SweepRun {
    let dir = (parent.join(REPEATED_RUNS_DIR))
        .join(format!("trial_{trial:04}"))
        .join(&run.dir_name);
    let cold = trial > 1 && !trials.warmup_every_run;
    let spec = run
        .spec
        .clone()
        .map(|spec| one_repetition(spec, &dir, cold));
    let no_warmup = if cold { ", no warmup" } else { "" };
    SweepRun {
        index,
        dir_name: run.dir_name.clone(),
        description: format!("{} (trial {trial} of {n}{no_warmup})", run.description),
        origin: run.origin.clone(),
        dir,
        file_flags: run.file_flags.clone(),
        spec,
    }
}

/// Each combination of one value per axis, the last axis fastest.
fn combinations(axes: &[(&str, &[&str])]) -> Vec<Vec<Change>> {
    axes.iter().fold(vec![Vec::new()], |done, (flag, values)| {
        done.iter()
            .flat_map(|prefix| {
                values.iter().map(move |v| {
                    let mut next = prefix.clone();
                    next.push((flag.to_string(), v.to_string()));
                    next
                })
            })
            .collect()
    })
}

/// `concurrency=4, request_count=8`, as a file's matrix runs are described.
fn describe(changes: &[Change]) -> String {
    if changes.is_empty() {
        return "run".into();
    }
    let parts: Vec<String> = changes
        .iter()
        .map(|(flag, value)| format!("{}={value}", flag.replace('-', "_")))
        .collect();
    parts.join(", ")
}

fn code_run(
    parent: &Path,
    index: usize,
    width: usize,
    description: String,
    spec: RunSpec,
) -> SweepRun {
    let dir_name = format!("{index:0width$}-{}", dir_safe(&description));
    let dir = parent.join(&dir_name);
    let mut spec = spec;
    spec.outputs.output_artifact_dir = Some(dir.clone());
    SweepRun {
        index,
        dir_name,
        description,
        origin: format!("run {index}, built in code"),
        dir,
        file_flags: Vec::new(),
        spec: Ok(spec),
    }
}

fn too_many(total: &str) -> RunError {
    RunError::invalid(
        "sweep",
        format!(
            "the sweep has {total} runs; one sweep runs at most {MAX_VARIATIONS}: narrow its \
             axes or split it"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grid_is_every_combination_the_last_axis_fastest() {
        let base = RunSpec::default();
        let sweep = Sweep::grid(
            &base,
            "p",
            &[("concurrency", &["1", "2"]), ("osl", &["8", "16", "32"])],
        )
        .unwrap();
        let got: Vec<(usize, Option<u32>)> = sweep
            .runs()
            .iter()
            .map(|r| {
                let s = r.spec().unwrap();
                (s.load.concurrency, s.sampling.osl)
            })
            .collect();
        assert_eq!(
            got,
            [
                (1, Some(8)),
                (1, Some(16)),
                (1, Some(32)),
                (2, Some(8)),
                (2, Some(16)),
                (2, Some(32))
            ]
        );
        assert_eq!(sweep.runs()[5].dir_name, "6-concurrency-2-osl-32");
        assert_eq!(
            sweep.runs()[5].spec().unwrap().outputs.output_artifact_dir,
            Some(PathBuf::from("p/6-concurrency-2-osl-32"))
        );
        assert_eq!(sweep.path(), None);
    }

    #[test]
    fn a_grid_past_the_cap_or_with_a_bad_value_is_refused_before_building() {
        let many: Vec<String> = (1..=101).map(|i| i.to_string()).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = Sweep::grid(
            &RunSpec::default(),
            "p",
            &[("concurrency", &many), ("osl", &many)],
        )
        .unwrap_err();
        assert!(e.to_string().contains("10201 runs"), "{e}");
        let e = Sweep::grid(&RunSpec::default(), "p", &[("concurrency", &["x"])]).unwrap_err();
        assert!(e.to_string().contains("concurrency"), "{e}");
    }
}
