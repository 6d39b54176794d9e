//! SPEED-Bench resolution by the upstream prepare step, against the loopback
//! Hub and raw-GitHub endpoint of `tests/common`, with
//! `fixtures/upstream/fake_prepare.py` standing in for NeMo-Skills' script.
//!
//! The tests that run the driver need a Python with `datasets` and `numpy`:
//! `speedbench_test_support::test_python` makes the venv
//! `target/prepare-venv` on first use (once, under a lock) and reuses it;
//! `SPEEDBENCH_TEST_PYTHON` names another interpreter, or `skip` opts out.

use crate::common::{self, capture_logs};

use std::path::{Path, PathBuf};

use common::{FakeHub, GOOD_TOKEN};
use speedbench_dataset::hub::hex;
use speedbench_dataset::upstream::{
    PREPARE_SCRIPT_COMMIT, PREPARE_SCRIPT_PATH, PREPARE_SCRIPT_SHA256, fetch_prepare_script,
};
use speedbench_dataset::{
    DatasetError, LoadOptions, Origin, PLACEHOLDER, PrepareScript, Resolver, ScriptPin,
    UpstreamOptions, load_public_dataset,
};
use speedbench_dataset::{FetchError, IntegrityError, ResolveError};

/// Where the pinned script lives under the raw endpoint.
fn pinned_path() -> String {
    format!("NVIDIA-NeMo/Skills/{PREPARE_SCRIPT_COMMIT}/{PREPARE_SCRIPT_PATH}")
}

fn fake_script() -> Vec<u8> {
    std::fs::read(common::fixtures().join("upstream/fake_prepare.py")).unwrap()
}

fn sha256(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// The pin of the fake script, served by `hub` where the real one would be.
fn fake_pin(hub: &FakeHub) -> ScriptPin {
    hub.serve_raw(&pinned_path(), fake_script());
    let mut pin = ScriptPin::nemo_skills(&hub.raw_endpoint());
    pin.sha256 = sha256(&fake_script());
    pin
}

/// A copy of the fake script with `MODE` set, as a local script.
fn fake_script_in_mode(dir: &Path, mode: &str) -> PathBuf {
    let text = String::from_utf8(fake_script()).unwrap();
    assert!(text.contains("MODE = \"resolve\""));
    let path = dir.join(format!("fake_prepare_{mode}.py"));
    std::fs::write(
        &path,
        text.replace("MODE = \"resolve\"", &format!("MODE = {mode:?}")),
    )
    .unwrap();
    path
}

/// The interpreter for tests that run the driver, or `None` when the
/// developer opted out with `SPEEDBENCH_TEST_PYTHON=skip`.
#[track_caller]
fn test_python() -> Option<PathBuf> {
    speedbench_test_support::test_python()
}

/// A Python that has no site packages at all (`python3 -S`), whatever is
/// installed on this machine.
fn bare_python(dir: &Path) -> PathBuf {
    let path = dir.join("python-without-packages");
    std::fs::write(&path, "#!/bin/sh\nexec python3 -S \"$@\"\n").unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    path
}

fn options(
    hub: &FakeHub,
    dir: &Path,
    resolver: Resolver,
    script: PrepareScript,
    python: PathBuf,
) -> LoadOptions {
    LoadOptions {
        dataset_cache: dir.join("datasets"),
        read_only_caches: vec![],
        hub: hub.config(dir, Some(GOOD_TOKEN)),
        resolver,
        upstream: UpstreamOptions { script, python },
    }
}

fn speed_bench_files(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir.join("datasets/speed-bench")) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[tokio::test]
async fn the_pinned_script_is_downloaded_verified_cached_and_reused() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let upstream = dir.path().join("upstream");
    let pin = fake_pin(&hub);
    assert_eq!(
        pin.url,
        format!("{}/{}", hub.raw_endpoint(), pinned_path()),
        "the pin's URL is the raw endpoint plus repository, commit and path"
    );

    let path = fetch_prepare_script(&pin, &upstream, false).await.unwrap();
    assert_eq!(
        path,
        upstream.join(format!("prepare-{}.py", &pin.sha256[..16]))
    );
    assert_eq!(std::fs::read(&path).unwrap(), fake_script());
    // It followed GitHub-style redirects to another host name.
    assert_eq!(hub.count("/raw/"), 1);
    assert!(
        hub.seen()
            .iter()
            .any(|s| s.path.starts_with("/rawcdn/") && s.host.starts_with("localhost"))
    );
    assert_eq!(
        std::fs::read_dir(&upstream).unwrap().count(),
        1,
        "no partial file left"
    );

    // Reused: verified again, not downloaded again.
    hub.clear_seen();
    assert_eq!(
        fetch_prepare_script(&pin, &upstream, false).await.unwrap(),
        path
    );
    assert_eq!(
        fetch_prepare_script(&pin, &upstream, true).await.unwrap(),
        path
    );
    assert!(hub.seen().is_empty(), "{:?}", hub.seen());

    // A cached copy that changed is downloaded again online, refused offline.
    std::fs::write(&path, b"print('edited')\n").unwrap();
    let err = fetch_prepare_script(&pin, &upstream, true)
        .await
        .unwrap_err();
    assert!(
        matches!(err, DatasetError::Fetch(FetchError::Offline { .. })),
        "{err}"
    );
    std::fs::write(&path, b"print('edited')\n").unwrap();
    assert_eq!(
        fetch_prepare_script(&pin, &upstream, false).await.unwrap(),
        path
    );
    assert_eq!(std::fs::read(&path).unwrap(), fake_script());
    assert_eq!(hub.count("/raw/"), 1);
}

#[tokio::test]
async fn a_script_that_is_not_the_pinned_one_is_refused() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let upstream = dir.path().join("upstream");
    // The real pin, but the endpoint serves the fake script.
    hub.serve_raw(&pinned_path(), fake_script());
    let pin = ScriptPin::nemo_skills(&hub.raw_endpoint());
    assert_eq!(pin.sha256, PREPARE_SCRIPT_SHA256);
    let err = fetch_prepare_script(&pin, &upstream, false)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            DatasetError::Integrity(IntegrityError::Checksum { .. })
        ),
        "{msg}"
    );
    assert!(
        msg.contains(PREPARE_SCRIPT_SHA256) && msg.contains(&sha256(&fake_script())),
        "names the expected and the actual digest: {msg}"
    );
    assert!(msg.contains(&pin.url), "{msg}");
    assert!(!upstream.exists() || std::fs::read_dir(&upstream).unwrap().count() == 0);

    // Through the resolver: nothing runs, nothing is cached.
    if let Some(python) = test_python() {
        let o = options(
            &hub,
            dir.path(),
            Resolver::Upstream,
            PrepareScript::Pinned(pin),
            python,
        );
        let err = load_public_dataset("speed_bench_throughput_1k", &o)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err,
                DatasetError::Integrity(IntegrityError::Checksum { .. })
            ),
            "{err}"
        );
        assert!(speed_bench_files(dir.path()).is_empty());
    }
    // A missing script is a clear download error.
    let mut gone = ScriptPin::nemo_skills(&format!("{}/elsewhere", hub.raw_endpoint()));
    gone.sha256 = sha256(&fake_script());
    let err = fetch_prepare_script(&gone, &upstream, false)
        .await
        .unwrap_err();
    assert!(
        matches!(err, DatasetError::Fetch(FetchError::Download { .. }))
            && err.to_string().contains("404"),
        "{err}"
    );
}

#[tokio::test]
async fn the_prepare_step_resolves_a_config_that_then_loads_from_the_cache() {
    let Some(python) = test_python() else { return };
    let logs = capture_logs();
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let pin = fake_pin(&hub);
    let o = options(
        &hub,
        dir.path(),
        Resolver::Auto,
        PrepareScript::Pinned(pin.clone()),
        python.clone(),
    );

    // throughput_1k has HLE-throughput, BAMBOO and MMLU-Pro rows: auto runs
    // the prepare step.
    let mixed = load_public_dataset("speed_bench_throughput_1k_mixed", &o)
        .await
        .unwrap();
    let texts: Vec<&str> = mixed
        .dataset
        .conversations
        .iter()
        .map(|c| c.turns[0].as_str())
        .collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[0].starts_with("resolved:cais/hle:hle-0002:"),
        "{texts:?}"
    );
    assert_eq!(texts[1], "resolved:TIGER-Lab/MMLU-Pro:(12, 13)");
    let Origin::Resolved { by, path, commit } = &mixed.origin else {
        panic!("{:?}", mixed.origin)
    };
    assert!(
        by.contains("upstream prepare step") && by.contains(&pin.sha256),
        "{by}"
    );
    assert_eq!(commit, speedbench_dataset::registry::SPEED_BENCH_REVISION);
    assert_eq!(
        *path,
        dir.path().join("datasets/speed-bench/throughput_1k.jsonl")
    );

    // The whole config was cached, atomically, in the native resolver's place.
    let body = std::fs::read_to_string(path).unwrap();
    assert_eq!(body.lines().count(), 4);
    assert!(!body.contains(PLACEHOLDER));
    let first: serde_json::Value = serde_json::from_str(body.lines().next().unwrap()).unwrap();
    assert_eq!(
        first["messages"][0]["content"],
        "[low_entropy 0] Sort these numbers: 5 3 9 1."
    );
    assert!(first.get("turns").is_none());
    assert_eq!(first["source"], "speedbench-fixture");
    assert_eq!(speed_bench_files(dir.path()), vec!["throughput_1k.jsonl"]);
    assert!(
        dir.path()
            .join("datasets/upstream")
            .join(pin.cache_file_name())
            .is_file()
    );

    // Another category of the config comes from the cache: no Hub, no Python.
    hub.clear_seen();
    let mut cached = o.clone();
    cached.upstream.python = "/nonexistent/python3".into();
    let high = load_public_dataset("speed_bench_throughput_1k_high_entropy", &cached)
        .await
        .unwrap();
    assert_eq!(
        high.dataset.conversations[0].turns[0],
        "resolved:https://huggingface.co/datasets/RUCAIBox/BAMBOO/resolve/main/senhallu_16k.jsonl:senhallu_3_7"
    );
    assert!(matches!(high.origin, Origin::Cache { .. }));
    assert!(hub.seen().is_empty(), "{:?}", hub.seen());

    // Deterministic: HLE_RNG is re-seeded, so a second resolution elsewhere
    // writes the same bytes.
    let other = tempfile::tempdir().unwrap();
    let o2 = options(
        &hub,
        other.path(),
        Resolver::Upstream,
        PrepareScript::Pinned(pin),
        python,
    );
    load_public_dataset("speed_bench_throughput_1k", &o2)
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(
            other
                .path()
                .join("datasets/speed-bench/throughput_1k.jsonl")
        )
        .unwrap(),
        body
    );

    // The child saw the Hub settings through its environment, and its
    // output was relayed without the token.
    let logs = logs.text();
    assert!(
        logs.contains(&format!("HF_ENDPOINT={} token=set", hub.url)),
        "{logs}"
    );
    assert!(logs.contains("prepare step stderr"), "{logs}");
    assert!(!logs.contains("SECRET"), "a token leaked into the logs");
}

#[tokio::test]
async fn auto_resolves_exact_configs_natively_and_upstream_forces_the_prepare_step() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    // Every qualitative placeholder is exact: auto needs no Python.
    let o = options(
        &hub,
        dir.path(),
        Resolver::Auto,
        PrepareScript::Pinned(fake_pin(&hub)),
        "/nonexistent/python3".into(),
    );
    let q = load_public_dataset("speed_bench_qualitative", &o)
        .await
        .unwrap();
    let Origin::Resolved { by, .. } = &q.origin else {
        panic!("{:?}", q.origin)
    };
    assert_eq!(by, "natively");
    assert_eq!(hub.count("/raw/"), 0);

    let Some(python) = test_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let o = options(
        &hub,
        dir.path(),
        Resolver::Upstream,
        PrepareScript::Pinned(fake_pin(&hub)),
        python,
    );
    let q = load_public_dataset("speed_bench_qualitative", &o)
        .await
        .unwrap();
    assert_eq!(
        q.dataset.conversations[2].turns[0],
        "resolved:abisee/cnn_dailymail:cnn-0001"
    );
    // Rows that were never placeholders are untouched, multi-turn included.
    assert_eq!(q.dataset.conversations[4].turns.len(), 2);
    assert_eq!(
        q.dataset.conversations[0].turns[0],
        "[coding 0] Write a function that reverses a linked list."
    );
}

#[tokio::test]
async fn leftover_placeholders_are_rejected_and_nothing_is_cached() {
    let Some(python) = test_python() else { return };
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let script = fake_script_in_mode(dir.path(), "leave-mmlu");
    let o = options(
        &hub,
        dir.path(),
        Resolver::Upstream,
        PrepareScript::Local(script),
        python,
    );
    let err = load_public_dataset("speed_bench_throughput_1k", &o)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            DatasetError::Resolve(ResolveError::Unresolved {
                unresolved: 1,
                total: 4,
                ..
            })
        ),
        "{msg}"
    );
    assert!(
        msg.contains(
            "SPEED-Bench 'throughput_1k': 1 of 4 rows were left unresolved by the prepare step, \
             which reports success even when a source is unreachable"
        ),
        "{msg}"
    );
    assert!(
        msg.contains("0000000000000000000000005eed0067 (TIGER-Lab/MMLU-Pro)"),
        "{msg}"
    );
    assert!(speed_bench_files(dir.path()).is_empty());
    // A local script is never downloaded.
    assert_eq!(hub.count("/raw/"), 0);
}

#[tokio::test]
async fn a_failing_prepare_step_names_its_status_and_script_and_never_the_token() {
    let Some(python) = test_python() else { return };
    let logs = capture_logs();
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let script = fake_script_in_mode(dir.path(), "fail");
    let o = options(
        &hub,
        dir.path(),
        Resolver::Auto,
        PrepareScript::Local(script.clone()),
        python,
    );
    let err = load_public_dataset("speed_bench_throughput_1k_low_entropy", &o)
        .await
        .unwrap_err();
    let msg = format!("{err} {err:?}");
    assert!(
        matches!(
            err,
            DatasetError::Resolve(ResolveError::PrepareFailed { .. })
        ),
        "{msg}"
    );
    assert!(msg.contains("exit status: 1"), "{msg}");
    assert!(msg.contains(&script.display().to_string()), "{msg}");
    assert!(
        msg.contains("RuntimeError: 401 Client Error: Unauthorized for token <redacted>"),
        "the child's last stderr lines are quoted, redacted: {msg}"
    );
    assert!(!msg.contains("SECRET"), "token in error: {msg}");
    assert!(speed_bench_files(dir.path()).is_empty());
    let logs = logs.text();
    assert!(logs.contains("Unauthorized for token <redacted>"), "{logs}");
    assert!(!logs.contains("SECRET"), "a token leaked into the logs");
}

#[tokio::test]
async fn without_python_packages_auto_says_which_rows_need_them_and_what_to_do() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let o = options(
        &hub,
        dir.path(),
        Resolver::Auto,
        PrepareScript::Pinned(fake_pin(&hub)),
        bare_python(dir.path()),
    );
    let err = load_public_dataset("speed_bench_throughput_1k_mixed", &o)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            DatasetError::Resolve(ResolveError::PythonUnavailable { count: 3, .. })
        ),
        "{msg}"
    );
    for needle in [
        "cais/hle (1 rows",
        "RUCAIBox/BAMBOO (1 rows",
        "TIGER-Lab/MMLU-Pro (1 rows",
        "cannot import datasets",
        "pip install datasets pandas numpy tiktoken",
        // In this library's terms; the binary adds `--python`, `cargo xtask
        // prestage` and `speedbench datasets import`
        // (bins/speedbench/tests/dataset_hints_e2e.rs).
        "SPEEDBENCH_PYTHON=venv/bin/python",
        "resolve the config into a bundle and import that bundle here",
    ] {
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    // Found out before the script was downloaded; nothing cached.
    assert_eq!(hub.count("/raw/"), 0);
    assert!(speed_bench_files(dir.path()).is_empty());

    // No interpreter at all; the prepare step requested explicitly.
    let mut o = o;
    o.upstream.python = dir.path().join("no-such-python");
    o.resolver = Resolver::Upstream;
    let err = load_public_dataset("speed_bench_qualitative", &o)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            DatasetError::Resolve(ResolveError::PythonUnavailable { count: 0, .. })
        ),
        "{msg}"
    );
    assert!(msg.contains("no-such-python` was not found"), "{msg}");
    assert!(msg.contains("import that bundle here"), "{msg}");
    // The cause is kept: the interpreter was not found.
    let cause = std::error::Error::source(&err)
        .and_then(|c| c.downcast_ref::<std::io::Error>())
        .map(std::io::Error::kind);
    assert_eq!(cause, Some(std::io::ErrorKind::NotFound), "{msg}");
}

#[tokio::test]
async fn a_package_the_script_imports_is_reported_as_missing() {
    // The pinned script imports tiktoken and pandas as well; a package the
    // script needs is reported like one the driver needs.
    let Some(python) = test_python() else { return };
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("needs_more.py");
    let text = String::from_utf8(fake_script()).unwrap();
    std::fs::write(
        &script,
        text.replacen(
            "import os\n",
            "import os\nimport speedbench_no_such_module\n",
            1,
        ),
    )
    .unwrap();
    let o = options(
        &hub,
        dir.path(),
        Resolver::Auto,
        PrepareScript::Local(script.clone()),
        python,
    );
    let err = load_public_dataset("speed_bench_throughput_1k", &o)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            DatasetError::Resolve(ResolveError::PythonUnavailable { count: 3, .. })
        ),
        "{msg}"
    );
    assert!(
        msg.contains("cannot import speedbench_no_such_module")
            && msg.contains(&script.display().to_string())
            && msg.contains("pip install datasets pandas numpy tiktoken"),
        "{msg}"
    );
    assert!(speed_bench_files(dir.path()).is_empty());
}

#[tokio::test]
async fn a_source_off_the_allowed_hosts_stops_resolution_before_python_runs() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let o = options(
        &hub,
        dir.path(),
        Resolver::Auto,
        PrepareScript::Pinned(fake_pin(&hub)),
        // Were Python run, this would fail differently.
        "/nonexistent/python3".into(),
    );
    let err = load_public_dataset("speed_bench_throughput_8k", &o)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            DatasetError::Resolve(ResolveError::UntrustedSource { .. })
        ),
        "{msg}"
    );
    assert!(
        msg.contains("row 0000000000000000000000005eed012d")
            && msg.contains("https://evil.example/RUCAIBox/BAMBOO/senhallu_16k.jsonl")
            && msg.contains("\"evil.example\""),
        "{msg}"
    );
    assert_eq!(hub.count("/raw/"), 0);
    assert!(speed_bench_files(dir.path()).is_empty());
}
