//! A configuration's server, as a careful operator runs one: started by
//! `sh -c` in a process group of its own with its output in a log file,
//! waited on until its health endpoint and `/v1/models` answer, and
//! stopped with SIGTERM, then SIGKILL of the whole group after a grace
//! period, until its port is free again.

use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use speedbench_client::StopHandle;
use speedbench_http::{ClientOptions, HttpClient};

use crate::process::{disown_group, own_group};

/// How often readiness and exit are polled.
const POLL: Duration = Duration::from_millis(100);
/// The most of a probe's body read.
const PROBE_BODY_CAP: usize = 64 * 1024;
/// How long a stopped server's port may take to be free again.
const PORT_RELEASE: Duration = Duration::from_secs(10);

/// A server started from a command.
#[derive(Debug)]
pub(crate) struct ServerProcess {
    child: Child,
    /// Its process group (the child's pid: it leads the group).
    pgid: i32,
    log: PathBuf,
}

/// How a server was stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stopped {
    /// `SIGTERM`, or `SIGKILL after 10 s` when the grace period passed,
    /// or that it had already exited (and how).
    pub(crate) how: String,
    /// Its port is free again (checked by binding it).
    pub(crate) port_free: bool,
}

impl ServerProcess {
    /// Starts `command` under `sh -c` in a new process group, stdin closed,
    /// stdout and stderr appended to `log` after a line naming the start.
    pub(crate) fn start(command: &str, log: &Path) -> std::io::Result<ServerProcess> {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)?;
        writeln!(file, "=== speedbench tune: starting the server")?;
        let err = file.try_clone()?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .process_group(0)
            .spawn()?;
        let pgid = i32::try_from(child.id()).expect("a pid fits in i32");
        own_group(pgid);
        Ok(ServerProcess {
            child,
            pgid,
            log: log.to_path_buf(),
        })
    }

    /// Its log file.
    pub(crate) fn log(&self) -> &Path {
        &self.log
    }

    /// How it exited, if it has.
    pub(crate) fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Waits until `url` answers as a ready server does ([`probe_ready`]),
    /// for at most `timeout`; an exit, the timeout or a stop is an error
    /// saying which (the log's tail is the caller's to add).
    pub(crate) async fn wait_ready(
        &mut self,
        url: &str,
        timeout: Duration,
        stop: &StopHandle,
    ) -> Result<Duration, String> {
        let client = probe_client()?;
        let started = Instant::now();
        loop {
            if let Some(status) = self.exited() {
                return Err(format!("the server exited before it was ready ({status})"));
            }
            if stop.is_stopped() {
                return Err("stopped while the server was starting".into());
            }
            let last = match probe_ready(&client, url).await {
                Ok(()) => return Ok(started.elapsed()),
                Err(why) => why,
            };
            if started.elapsed() >= timeout {
                return Err(format!(
                    "the server was not ready after {} s (last probe: {last})",
                    timeout.as_secs_f64()
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Stops it: SIGTERM to its process group, SIGKILL to the group once
    /// `grace` passes with any of it alive, then waits for `port` on
    /// `host` to be free.
    pub(crate) async fn stop(mut self, grace: Duration, addr: SocketAddr) -> Stopped {
        let how = match self.exited() {
            Some(status) => format!("it had exited ({status})"),
            None => {
                signal_group(self.pgid, libc::SIGTERM);
                if self.group_gone_within(grace).await {
                    "SIGTERM".to_string()
                } else {
                    signal_group(self.pgid, libc::SIGKILL);
                    self.group_gone_within(Duration::from_secs(5)).await;
                    format!("SIGKILL after {} s", grace.as_secs_f64())
                }
            }
        };
        // What the leader left behind in its group goes too.
        signal_group(self.pgid, libc::SIGKILL);
        let _ = self.child.wait();
        disown_group(self.pgid);
        Stopped {
            how,
            port_free: wait_port_free(addr, PORT_RELEASE).await,
        }
    }

    /// Whether every process of the group is gone within `limit` (the
    /// leader reaped as it exits).
    async fn group_gone_within(&mut self, limit: Duration) -> bool {
        let started = Instant::now();
        loop {
            let _ = self.exited();
            // SAFETY: kill(2) with signal 0 only asks whether the group exists.
            let alive = unsafe { libc::kill(-self.pgid, 0) } == 0;
            if !alive {
                return true;
            }
            if started.elapsed() >= limit {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// Sends `signal` to process group `pgid`.
fn signal_group(pgid: i32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals a process group; it
    // touches no memory of ours.
    unsafe { libc::kill(-pgid, signal) };
}

/// The client of the readiness probes.
fn probe_client() -> Result<HttpClient, String> {
    speedbench_http::new_client(&ClientOptions::default())
        .map_err(|e| format!("making the readiness probe's client: {e}"))
}

/// A server is ready when `/v1/models` answers 2xx and its health endpoint
/// (`/health`: vLLM, SGLang, llama.cpp, TensorRT-LLM) answers 2xx, or 404
/// on a server that has none.
pub(crate) async fn probe_ready(client: &HttpClient, url: &str) -> Result<(), String> {
    let base = url.trim_end_matches('/');
    let get = |path: &'static str| async move {
        let at = format!("{base}{path}");
        speedbench_http::get_capped(client, &at, &[], Duration::from_secs(5), PROBE_BODY_CAP)
            .await
            .map(|r| r.status.as_u16())
            .map_err(|e| format!("GET {path}: {}", speedbench_http::describe(&e)))
    };
    match get("/health").await? {
        200..=299 | 404 => {}
        code => return Err(format!("GET /health answered {code}")),
    }
    match get("/v1/models").await? {
        200..=299 => Ok(()),
        code => Err(format!("GET /v1/models answered {code}")),
    }
}

/// Whether `addr` can be bound now.
pub(crate) fn port_free(addr: SocketAddr) -> bool {
    TcpListener::bind(addr).is_ok()
}

/// Waits up to `limit` for `addr` to be free.
async fn wait_port_free(addr: SocketAddr, limit: Duration) -> bool {
    let started = Instant::now();
    while !port_free(addr) {
        if started.elapsed() >= limit {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
    true
}

/// A free loopback port, as the kernel picks one.
pub(crate) fn pick_free_port(host: std::net::IpAddr) -> std::io::Result<u16> {
    Ok(TcpListener::bind(SocketAddr::new(host, 0))?
        .local_addr()?
        .port())
}

/// The last `lines` lines of the log at `path`, each indented, for an
/// error that says why a server failed.
pub(crate) fn log_tail(path: &Path, lines: usize) -> String {
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => return format!("    (its log {} cannot be read: {e})", path.display()),
    };
    let all: Vec<&str> = text.lines().collect();
    let tail = &all[all.len().saturating_sub(lines)..];
    let shown: Vec<String> = tail
        .iter()
        .map(|l| format!("    | {}", speedbench_credentials::redact_shapes(l)))
        .collect();
    format!("last lines of {}:\n{}", path.display(), shown.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn a_server_that_ignores_sigterm_is_killed_with_its_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        // The shell and a child of its own, both deaf to SIGTERM.
        let mut server =
            ServerProcess::start("trap '' TERM; sleep 30 & echo started; wait", &log).unwrap();
        let pgid = server.pgid;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(server.exited().is_none());
        let addr = SocketAddr::from((
            [127, 0, 0, 1],
            pick_free_port([127, 0, 0, 1].into()).unwrap(),
        ));
        let stopped = server.stop(Duration::from_millis(300), addr).await;
        assert_eq!(stopped.how, "SIGKILL after 0.3 s");
        assert!(stopped.port_free);
        assert_ne!(unsafe { libc::kill(-pgid, 0) }, 0, "the group is gone");
        let tail = log_tail(&log, 5);
        assert!(tail.contains("| started"), "{tail}");
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_server_that_exits_is_not_ready_and_says_how_it_exited() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("server.log");
        let mut server = ServerProcess::start("echo no model; exit 3", &log).unwrap();
        let e = server
            .wait_ready(
                "http://127.0.0.1:9",
                Duration::from_secs(5),
                &StopHandle::new(),
            )
            .await
            .unwrap_err();
        assert!(
            e.contains("exited before it was ready") && e.contains('3'),
            "{e}"
        );
        assert!(log_tail(server.log(), 3).contains("| no model"));
    }
}
