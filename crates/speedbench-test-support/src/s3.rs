//! A real S3-compatible server on 127.0.0.1 for the object-storage tests:
//! moto's server (PyPI `moto[server]`, pinned in
//! `moto-venv-requirements.txt`), run from the venv `target/moto-venv`
//! that [`S3Server::start`] makes on first use, as [`crate::test_python`]
//! does for its venv. Requests are signature-checked against an IAM user
//! made at start, so a wrong secret is refused as AWS refuses it.
//!
//! `SPEEDBENCH_TEST_S3=skip` skips these tests, loudly.

use std::io::{BufRead, BufReader};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;

use crate::{Announcer, Venv, announce};

/// The pinned package list of `target/moto-venv`.
pub const REQUIREMENTS: &str = include_str!("../moto-venv-requirements.txt");

/// The venv, relative to the workspace root.
pub const VENV_DIR: &str = "target/moto-venv";

/// The environment variable that can skip the object-storage tests.
pub const ENV: &str = "SPEEDBENCH_TEST_S3";

/// The server script: prints its endpoint and credentials on one line, serves until its standard input closes.
const SCRIPT: &str = include_str!("../moto_server.py");

/// A running moto S3 server with one bucket and one access key.
#[derive(Debug)]
pub struct S3Server {
    child: Child,
    stdin: Option<ChildStdin>,
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    /// The region the bucket is in.
    pub region: String,
    /// The access key id of the test's IAM user.
    pub access_key_id: String,
    /// Its secret.
    pub secret_access_key: String,
    /// The bucket made for the test.
    pub bucket: String,
}

impl S3Server {
    /// Starts a server holding the empty bucket `bucket`; `None` (announced)
    /// when `SPEEDBENCH_TEST_S3=skip`.
    ///
    /// # Panics
    ///
    /// When the venv cannot be made or the server does not start: the
    /// message says what failed.
    #[track_caller]
    pub fn start(bucket: &str) -> Option<S3Server> {
        if std::env::var_os(ENV).is_some_and(|v| v == "skip") {
            announce(&format!(
                "SKIPPED {}: {ENV}=skip, so no S3 server was started",
                std::thread::current().name().unwrap_or("a test")
            ));
            return None;
        }
        static PYTHON: OnceLock<Result<std::path::PathBuf, String>> = OnceLock::new();
        let python = PYTHON.get_or_init(|| {
            Venv::in_workspace(VENV_DIR, REQUIREMENTS, "import moto.server, boto3")
            .with_purpose("the object-storage tests' S3 server")
            .ensure(&mut Announcer)
            .map(|ready| ready.python)
            .map_err(|e| {
                format!("the S3 test server's venv {VENV_DIR} cannot be made: {e} (set {ENV}=skip to skip these tests)")
            })
        });
        let python = match python {
            Ok(p) => p,
            Err(msg) => panic!("{msg}"),
        };
        let mut child = Command::new(python)
            .args(["-c", SCRIPT, bucket])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("starting moto's S3 server: {e}"));
        let stdin = child.stdin.take();
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("reading moto's first line: {e}"));
        let fields: Vec<String> = line.trim_end().split('\t').map(str::to_string).collect();
        let [endpoint, region, access_key_id, secret_access_key, bucket] =
            <[String; 5]>::try_from(fields).unwrap_or_else(|_| {
                panic!("moto's S3 server did not start (its first line: {line:?})")
            });
        Some(S3Server {
            endpoint,
            region,
            access_key_id,
            secret_access_key,
            bucket,
            child,
            stdin,
        })
    }

    /// The standard AWS environment that points a client at this server
    /// with the test user's credentials.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".to_string()),
            ("AWS_REGION", self.region.clone()),
            ("AWS_ACCESS_KEY_ID", self.access_key_id.clone()),
            ("AWS_SECRET_ACCESS_KEY", self.secret_access_key.clone()),
        ]
    }

    /// Stops the server now (a test of a store that goes away mid-run).
    pub fn stop(&mut self) {
        self.stdin.take();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        self.stop();
    }
}
