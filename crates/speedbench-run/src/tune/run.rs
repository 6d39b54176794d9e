//! Running a planned tune: per configuration, its server started (or its
//! URL probed), every load level run against it with the prefix cache
//! emptied first, the server stopped, and `tune.json` rewritten after each
//! run. A configuration whose runs are complete on disk is skipped, so the
//! same command resumes a stopped tune.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use speedbench_client::StopHandle;
use speedbench_dataset::Dataset;
use speedbench_http::{ClientOptions, HttpClient};
use speedbench_record::{RunManifest, RunStatus, TuneManifest, TuneRun, run_is_live};

use super::plan::{PlannedConfiguration, TunePlan};
use super::server::{ServerProcess, log_tail, port_free, probe_ready};
use crate::error::RunError;
use crate::observer::{Observer, Silent};
use crate::sweep::{RunEnd, Sweep, SweepObserver, SweepOutcome, SweepRun, run_valid};

/// A started server's log, in its configuration's directory.
pub(crate) const SERVER_LOG: &str = "server.log";
/// How many of the log's last lines a server's problem quotes.
const TAIL_LINES: usize = 20;

/// What happens to a tune's servers and runs, for an observer to show.
#[derive(Debug)]
#[non_exhaustive]
pub enum TuneEvent<'a> {
    /// A configuration's server is starting.
    ServerStarting {
        /// The configuration.
        configuration: &'a str,
        /// Its command (credentials hidden).
        command: &'a str,
        /// Its log.
        log: &'a Path,
    },
    /// It answers as a ready server does.
    ServerReady {
        /// The configuration.
        configuration: &'a str,
        /// How long it took.
        after: Duration,
    },
    /// It failed: it never became ready, or it died.
    ServerFailed {
        /// The configuration.
        configuration: &'a str,
        /// Why, with its log's tail.
        problem: &'a str,
    },
    /// It was stopped.
    ServerStopped {
        /// The configuration.
        configuration: &'a str,
        /// How (`SIGTERM`, `SIGKILL after 30 s`).
        how: &'a str,
        /// Whether its port is free again.
        port_free: bool,
    },
    /// A run already complete on disk is kept, not run again.
    RunKept {
        /// The run.
        run: &'a SweepRun,
    },
    /// How the prefix cache was emptied before a run, or why not.
    Cache {
        /// The run.
        run: &'a SweepRun,
        /// What was done.
        how: &'a str,
    },
}

impl fmt::Display for TuneEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TuneEvent::ServerStarting {
                configuration,
                command,
                log,
            } => write!(
                f,
                "starting the server of {configuration}: {command} (log: {})",
                log.display()
            ),
            TuneEvent::ServerReady {
                configuration,
                after,
            } => write!(
                f,
                "the server of {configuration} is ready after {:.1} s",
                after.as_secs_f64()
            ),
            TuneEvent::ServerFailed {
                configuration,
                problem,
            } => write!(f, "the server of {configuration} failed: {problem}"),
            TuneEvent::ServerStopped {
                configuration,
                how,
                port_free,
            } => write!(
                f,
                "stopped the server of {configuration} ({how}); its port is {}",
                if *port_free { "free" } else { "STILL TAKEN" }
            ),
            TuneEvent::RunKept { run } => write!(
                f,
                "kept {} (complete on disk from an earlier try)",
                run.dir.display()
            ),
            TuneEvent::Cache { run, how } => {
                write!(f, "prefix cache before {}: {how}", run.dir.display())
            }
        }
    }
}

/// An observer of a tune: every run's events (a [`SweepObserver`]), and
/// the servers'.
pub trait TuneObserver: SweepObserver {
    /// Something happened to a server, or a run was kept.
    fn tune_event(&mut self, _event: &TuneEvent<'_>) {}
}

impl TuneObserver for Silent {}

/// How a tune ended.
#[derive(Debug)]
#[non_exhaustive]
pub struct TuneOutcome {
    /// `tune.json` as last written: every run's status, every server's
    /// problem.
    pub manifest: TuneManifest,
    /// A stop (Ctrl-C) ended it early.
    pub stopped: bool,
    /// Why it was abandoned, when it was (a baseline that speculates).
    pub abandoned: Option<String>,
}

impl TuneOutcome {
    /// The runs that failed or never started, each `configuration at
    /// load: why`.
    pub fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        for c in &self.manifest.configurations {
            for r in c.runs.iter().filter(|r| r.status != "completed") {
                let why = r.problem.as_deref().unwrap_or(r.status.as_str());
                out.push(format!(
                    "{} at {}={}: {why}",
                    c.name, self.manifest.load_flag, r.load
                ));
            }
        }
        out
    }
}

/// A run's status in `tune.json`.
fn status_of(end: &RunEnd) -> &'static str {
    match end {
        RunEnd::Completed(_) => "completed",
        RunEnd::Interrupted(_) => "interrupted",
        RunEnd::Failed(_) => "failed",
        RunEnd::NotStarted => "not started",
    }
}

/// Whether the run in `dir` finished complete (so a resumed tune keeps it,
/// when the earlier try counted it complete too).
fn complete_on_disk(dir: &Path) -> bool {
    // A level of repeated runs: every one of them in its figures.
    if let Ok(Some(runs)) = crate::repeat::RepeatedRuns::read(dir) {
        return runs.num_successful_runs == runs.num_runs;
    }
    let Ok(text) = std::fs::read(dir.join(RunManifest::FILE_NAME)) else {
        return false;
    };
    serde_json::from_slice::<RunManifest>(&text)
        .is_ok_and(|m| m.status == RunStatus::Completed && !run_is_live(dir))
}

/// The tune's mutable state while it runs.
struct Progress<'a> {
    manifest: TuneManifest,
    /// `tune.json` as an earlier try of the same plan left it.
    earlier: Option<TuneManifest>,
    dir: &'a Path,
    stop: &'a StopHandle,
    client: HttpClient,
}

impl Progress<'_> {
    /// How the earlier try of the same plan left a run.
    fn earlier_status(&self, config: usize, run: usize) -> Option<&str> {
        let entry = self
            .earlier
            .as_ref()?
            .configurations
            .get(config)?
            .runs
            .get(run)?;
        Some(entry.status.as_str())
    }

    fn run_entry(&mut self, config: usize, run: usize) -> &mut TuneRun {
        &mut self.manifest.configurations[config].runs[run]
    }

    fn save(&self) -> Result<(), RunError> {
        self.manifest.write(self.dir).map_err(|e| RunError::Io {
            context: format!(
                "writing {}",
                self.dir.join(TuneManifest::FILE_NAME).display()
            ),
            source: std::io::Error::other(e.to_string()),
        })
    }

    /// Marks every run of `config` from `from` on (of those in `which`)
    /// with `status` and `problem`.
    fn mark(&mut self, config: usize, which: &[usize], status: &str, problem: &str) {
        for &r in which {
            let entry = self.run_entry(config, r);
            entry.status = status.into();
            entry.problem = Some(problem.into());
        }
    }
}

impl TunePlan {
    /// Runs the tune: the dataset loaded once (every configuration gets
    /// the same prompts in the same order), then each configuration in
    /// turn. A server that fails is reported with its log's tail and the
    /// tune goes on; a stop ends the current run (its finished requests
    /// kept), stops the server and starts nothing more; a baseline whose
    /// answers carry drafted tokens abandons the tune. Errors only when
    /// the directory or the dataset cannot be had.
    pub async fn run<O: TuneObserver>(
        self,
        stop: &StopHandle,
        observer: &mut O,
    ) -> Result<TuneOutcome, RunError> {
        std::fs::create_dir_all(&self.dir).map_err(|source| RunError::Io {
            context: format!("creating the tune's directory {}", self.dir.display()),
            source,
        })?;
        let client = speedbench_http::new_client(&ClientOptions::default())
            .map_err(|e| RunError::invalid("the cache-reset client", e.to_string()))?;
        let mut progress = Progress {
            manifest: self.manifest.clone(),
            earlier: self.earlier.clone(),
            dir: &self.dir,
            stop,
            client,
        };
        progress.save()?;
        let dataset = self.base.load_dataset(observer).await?;
        let mut abandoned = None;
        for (ci, planned) in self.configurations.iter().enumerate() {
            if stop.is_stopped() || abandoned.is_some() {
                let why = abandoned.as_deref().unwrap_or("the tune was stopped");
                let all: Vec<usize> = (0..planned.runs.len()).collect();
                progress.mark(ci, &all, "not started", why);
                continue;
            }
            abandoned = self
                .run_configuration(ci, planned, &dataset, &mut progress, observer)
                .await?;
        }
        progress.save()?;
        Ok(TuneOutcome {
            manifest: progress.manifest,
            stopped: stop.is_stopped(),
            abandoned,
        })
    }

    /// One configuration: its runs not yet complete, against its server.
    /// Returns why the tune is abandoned, if it is.
    async fn run_configuration<O: TuneObserver>(
        &self,
        ci: usize,
        planned: &PlannedConfiguration,
        dataset: &Dataset,
        progress: &mut Progress<'_>,
        observer: &mut O,
    ) -> Result<Option<String>, RunError> {
        let pending = keep_complete_runs(ci, planned, progress, observer);
        progress.save()?;
        if pending.is_empty() {
            return Ok(None);
        }
        let mut server = match self.bring_up(planned, progress, observer).await {
            Ok(server) => server,
            Err(_) if progress.stop.is_stopped() => {
                let why = "the tune was stopped while its server was starting";
                progress.mark(ci, &pending, "not started", why);
                progress.save()?;
                return Ok(None);
            }
            Err(problem) => {
                progress.manifest.configurations[ci].problem = Some(problem.clone());
                let why = format!("its server failed: {}", first_line(&problem));
                progress.mark(ci, &pending, "failed", &why);
                progress.save()?;
                return Ok(None);
            }
        };
        let abandoned = self
            .run_levels(
                ci,
                planned,
                &pending,
                server.as_mut(),
                dataset,
                progress,
                observer,
            )
            .await;
        if let Some(server) = server {
            let addr = self.addr.expect("a started server has an address");
            let stopped = server.stop(self.stop_grace, addr).await;
            observer.tune_event(&TuneEvent::ServerStopped {
                configuration: &planned.configuration.name,
                how: &stopped.how,
                port_free: stopped.port_free,
            });
        }
        progress.save()?;
        abandoned
    }

    /// Starts the configuration's server and waits until it is ready (or
    /// probes the URL of one someone else runs); the problem otherwise,
    /// with the log's tail.
    async fn bring_up<O: TuneObserver>(
        &self,
        planned: &PlannedConfiguration,
        progress: &Progress<'_>,
        observer: &mut O,
    ) -> Result<Option<ServerProcess>, String> {
        let name = planned.configuration.name.as_str();
        let Some(command) = &planned.command else {
            return probe_ready(&progress.client, &planned.url)
                .await
                .map(|()| None)
                .map_err(|why| format!("{} is not ready: {why}", planned.url));
        };
        let addr = self.addr.expect("a command tune has an address");
        if !port_free(addr) {
            return Err(format!(
                "{addr} is still taken when its server should start"
            ));
        }
        std::fs::create_dir_all(&planned.dir)
            .map_err(|e| format!("creating {}: {e}", planned.dir.display()))?;
        let log = planned.dir.join(SERVER_LOG);
        let shown = super::plan::hide_credentials(command);
        observer.tune_event(&TuneEvent::ServerStarting {
            configuration: name,
            command: &shown,
            log: &log,
        });
        let mut server = ServerProcess::start(command, &log)
            .map_err(|e| format!("cannot start `sh -c {shown}`: {e}"))?;
        match server
            .wait_ready(&planned.url, self.ready_timeout, progress.stop)
            .await
        {
            Ok(after) => {
                observer.tune_event(&TuneEvent::ServerReady {
                    configuration: name,
                    after,
                });
                Ok(Some(server))
            }
            Err(why) => {
                let _ = server.stop(self.stop_grace, addr).await;
                let problem = format!("{why}\n{}", log_tail(&log, TAIL_LINES));
                observer.tune_event(&TuneEvent::ServerFailed {
                    configuration: name,
                    problem: &problem,
                });
                Err(problem)
            }
        }
    }

    /// The pending load levels against a ready server. Returns why the
    /// tune is abandoned, if it is.
    #[allow(clippy::too_many_arguments)]
    async fn run_levels<O: TuneObserver>(
        &self,
        ci: usize,
        planned: &PlannedConfiguration,
        pending: &[usize],
        mut server: Option<&mut ServerProcess>,
        dataset: &Dataset,
        progress: &mut Progress<'_>,
        observer: &mut O,
    ) -> Result<Option<String>, RunError> {
        for (n, &ri) in pending.iter().enumerate() {
            let run = &planned.runs[ri];
            if progress.stop.is_stopped() {
                progress.mark(ci, &pending[n..], "not started", "the tune was stopped");
                break;
            }
            if let Some(exited) = server.as_deref_mut().and_then(ServerProcess::exited) {
                let why = format!("its server had exited ({exited})");
                progress.mark(ci, &pending[n..], "failed", &why);
                break;
            }
            let cache = if n == 0 && server.is_some() {
                "a fresh server".to_string()
            } else {
                reset_prefix_cache(&progress.client, &planned.url).await
            };
            observer.tune_event(&TuneEvent::Cache { run, how: &cache });
            progress.run_entry(ci, ri).cache = Some(cache);
            let reset = (&progress.client, planned.url.as_str());
            let of = (run, planned.runs.len());
            let end = self
                .run_level(of, dataset, (progress.stop, reset), observer)
                .await;
            record_end(progress, (ci, ri), &end);
            if let Some(s) = server.as_deref_mut()
                && let Some(exited) = s.exited()
            {
                server_died(progress, (ci, ri), planned, (s, exited), observer);
            }
            progress.save()?;
            if planned.configuration.baseline
                && let Some(why) = baseline_speculates(&end)
            {
                return Ok(Some(why));
            }
        }
        Ok(None)
    }

    /// One load level's run, replacing whatever an earlier, unfinished try
    /// left; with `--num-profile-runs`, its repeated runs, the prefix cache
    /// emptied before each after the first (`reset`: the client and the
    /// server's URL), and their `aggregate.json`.
    async fn run_level<O: TuneObserver>(
        &self,
        (run, levels): (&SweepRun, usize),
        dataset: &Dataset,
        (stop, reset): (&StopHandle, (&HttpClient, &str)),
        observer: &mut O,
    ) -> RunEnd {
        let spec = run.spec().expect("a planned run has its spec");
        let repeat = spec.repeat.clone();
        if repeat.num_profile_runs <= 1 {
            return self.run_one((run, levels), dataset, stop, observer).await;
        }
        let sweep = match Sweep::repeated(
            spec,
            &run.dir,
            repeat.num_profile_runs,
            repeat.warmup_every_run,
        ) {
            Ok(sweep) => sweep,
            Err(e) => return RunEnd::Failed(e),
        };
        let mut ends = Vec::with_capacity(repeat.num_profile_runs);
        for (k, child) in sweep.into_runs().into_iter().enumerate() {
            if k > 0 && !stop.is_stopped() {
                let how = reset_prefix_cache(reset.0, reset.1).await;
                observer.tune_event(&TuneEvent::Cache {
                    run: &child,
                    how: &how,
                });
                cool_down(repeat.cooldown_s, stop).await;
            }
            let end = match stop.is_stopped() {
                true => RunEnd::NotStarted,
                false => {
                    let of = (&child, repeat.num_profile_runs);
                    self.run_one(of, dataset, stop, observer).await
                }
            };
            ends.push((child, end));
        }
        level_end(
            SweepOutcome::from_ends(ends),
            &run.dir,
            repeat.confidence_level,
        )
    }

    /// One run (of `total`: the configuration's levels, or a level's
    /// repeated runs), replacing whatever an earlier, unfinished try left.
    async fn run_one<O: TuneObserver>(
        &self,
        (run, total): (&SweepRun, usize),
        dataset: &Dataset,
        stop: &StopHandle,
        observer: &mut O,
    ) -> RunEnd {
        let mut spec = run.spec().expect("a planned run has its spec").clone();
        spec.outputs.overwrite = true;
        let valid = match spec.validate() {
            Ok(v) => v,
            Err(e) => return RunEnd::Failed(e),
        };
        crate::process::raise_open_files(spec.load.concurrency as u64 + 256);
        observer.sweep_run_started(run, total);
        let end = run_valid(valid, dataset.clone(), stop, observer as &mut dyn Observer).await;
        observer.sweep_run_ended(run, &end);
        end
    }
}

/// Waits `seconds` (`--profile-run-cooldown-seconds`), less if stopped.
async fn cool_down(seconds: f64, stop: &StopHandle) {
    if seconds > 0.0 {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs_f64(seconds)) => {}
            () = stop.stopped() => {}
        }
    }
}

/// How a level of repeated runs ended, its `aggregate.json` written: the
/// first failure, else a stop, else completed (with a run's figures).
fn level_end(outcome: SweepOutcome, dir: &Path, confidence: f64) -> RunEnd {
    let runs = crate::repeat::repeated_runs(&outcome, dir, confidence);
    if let Err(source) = runs.write(dir) {
        return RunEnd::Failed(RunError::Runs {
            context: "writing the level's figures across runs".into(),
            source,
        });
    }
    let mut ends: Vec<RunEnd> = outcome.runs.into_iter().map(|(_, end)| end).collect();
    if let Some(i) = ends.iter().position(|e| matches!(e, RunEnd::Failed(_))) {
        return ends.swap_remove(i);
    }
    let interrupted = ends
        .iter()
        .any(|e| matches!(e, RunEnd::Interrupted(_) | RunEnd::NotStarted));
    let figures = ends.into_iter().find_map(|e| match e {
        RunEnd::Completed(m) | RunEnd::Interrupted(m) => m,
        _ => None,
    });
    match interrupted {
        true => RunEnd::Interrupted(figures),
        false => RunEnd::Completed(figures),
    }
}

/// Keeps the runs of configuration `ci` that an earlier try completed;
/// the indices of the others.
fn keep_complete_runs<O: TuneObserver>(
    ci: usize,
    planned: &PlannedConfiguration,
    progress: &mut Progress<'_>,
    observer: &mut O,
) -> Vec<usize> {
    let mut pending = Vec::new();
    for (ri, run) in planned.runs.iter().enumerate() {
        let earlier = progress.earlier_status(ci, ri);
        if earlier == Some("completed") && complete_on_disk(&run.dir) {
            progress.run_entry(ci, ri).status = "completed".into();
            observer.tune_event(&TuneEvent::RunKept { run });
        } else {
            pending.push(ri);
        }
    }
    pending
}

/// A run's end, in `tune.json`.
fn record_end(progress: &mut Progress<'_>, (ci, ri): (usize, usize), end: &RunEnd) {
    let entry = progress.run_entry(ci, ri);
    entry.status = status_of(end).into();
    entry.problem = match end {
        RunEnd::Failed(e) => Some(crate::error_message(e)),
        _ => None,
    };
}

/// The server exited during run `ri`: said with its log's tail, and the
/// run failed (its figures are a dying server's: kept on disk, not
/// counted as a completed run).
fn server_died<O: TuneObserver>(
    progress: &mut Progress<'_>,
    (ci, ri): (usize, usize),
    planned: &PlannedConfiguration,
    (server, exited): (&ServerProcess, std::process::ExitStatus),
    observer: &mut O,
) {
    let run = &planned.runs[ri];
    let problem = format!(
        "the server exited during the run at {} ({exited})\n{}",
        run.description,
        log_tail(server.log(), TAIL_LINES)
    );
    observer.tune_event(&TuneEvent::ServerFailed {
        configuration: &planned.configuration.name,
        problem: &problem,
    });
    let entry = progress.run_entry(ci, ri);
    entry.status = "failed".into();
    entry.problem = Some(format!("its server exited during the run ({exited})"));
    progress.manifest.configurations[ci].problem = Some(problem);
}

/// Why a baseline run shows speculation (its answers carried drafted
/// tokens), if it does.
fn baseline_speculates(end: &RunEnd) -> Option<String> {
    let totals = &end.metrics()?.spec_decode.totals;
    (totals.proposed > 0).then(|| {
        format!(
            "the baseline speculates: its answers report {} drafted tokens ({} accepted); \
             a baseline runs without speculation (--baseline k=0, or --baseline-cmd)",
            totals.proposed, totals.accepted
        )
    })
}

/// The first line of a problem.
fn first_line(problem: &str) -> &str {
    problem.lines().next().unwrap_or(problem)
}

/// Empties the server's prefix cache where the engine offers a way: vLLM's
/// `POST /reset_prefix_cache`, SGLang's `POST /flush_cache`. Says which
/// answered, or that none did.
async fn reset_prefix_cache(client: &HttpClient, url: &str) -> String {
    let base = url.trim_end_matches('/');
    let mut tried = Vec::new();
    for path in ["/reset_prefix_cache", "/flush_cache"] {
        let answer = speedbench_http::post_empty(
            client,
            &format!("{base}{path}"),
            Duration::from_secs(30),
            64 * 1024,
        )
        .await;
        // vLLM answers 200 with `{"success": false}` when blocks are held.
        let refused = |body: &[u8]| {
            serde_json::from_slice::<serde_json::Value>(body)
                .is_ok_and(|v| v.get("success") == Some(&serde_json::Value::Bool(false)))
        };
        match answer {
            Ok(r) if r.status.is_success() && refused(&r.body) => {
                tried.push(format!("POST {path} answered success: false"));
            }
            Ok(r) if r.status.is_success() => return format!("emptied (POST {path})"),
            Ok(r) => tried.push(format!("POST {path} answered {}", r.status.as_u16())),
            Err(e) => tried.push(format!("POST {path}: {}", speedbench_http::describe(&e))),
        }
    }
    format!("not emptied ({})", tried.join("; "))
}
