//! The Hub client, public-dataset loading, SPEED-Bench resolution and
//! pre-staging, against a loopback Hub serving the generated fixtures.

use crate::common::{self, Logs};

use std::path::Path;
use std::time::Instant;

use common::{BAD_TOKEN, FakeHub, GOOD_TOKEN, NOACCESS_TOKEN, SPEED_BENCH_MAIN};
use speedbench_dataset::hub::{HubClient, repo_folder};
use speedbench_dataset::registry::SPEED_BENCH_REVISION;
use speedbench_dataset::resolve::LIVECODEBENCH_REVISION;
use speedbench_dataset::{ContentError, FetchError, IntegrityError, LookupError, ResolveError};
use speedbench_dataset::{
    DatasetError, GateReason, LoadOptions, Origin, PLACEHOLDER, PrepareScript, Resolver, ScriptPin,
    UpstreamOptions, import_bundle, load_public_dataset, prestage,
};

/// An upstream prepare step that cannot run: nothing on 127.0.0.1:9, no
/// such interpreter. These tests never need it.
fn no_upstream() -> UpstreamOptions {
    UpstreamOptions {
        script: PrepareScript::Pinned(ScriptPin::nemo_skills("http://127.0.0.1:9")),
        python: "/nonexistent/speedbench-test/python3".into(),
    }
}

fn options(hub: &FakeHub, dir: &Path, token: Option<&str>) -> LoadOptions {
    LoadOptions {
        dataset_cache: dir.join("datasets"),
        read_only_caches: vec![dir.join("aiperf")],
        hub: hub.config(dir, token),
        resolver: Resolver::Auto,
        upstream: no_upstream(),
    }
}

fn offline(mut o: LoadOptions) -> LoadOptions {
    o.hub.offline = true;
    o
}

/// The binary's one log capture (`common::capture_logs`), as this
/// module's tests hold it.
fn capture_logs() -> (Logs, ()) {
    (common::capture_logs(), ())
}

#[tokio::test]
async fn literature_datasets_download_cache_and_reload_offline() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let o = options(&hub, dir.path(), None);

    let gsm = load_public_dataset("spec_al_gsm8k", &o).await.unwrap();
    assert_eq!(gsm.dataset.name, "spec_al_gsm8k");
    assert_eq!(gsm.dataset.conversations.len(), 3);
    assert_eq!(gsm.dataset.turn_count(), 3);
    assert!(gsm.dataset.conversations[0].turns[0].starts_with("Tom has 3 boxes"));
    assert_eq!(
        gsm.dataset.conversations[0].category.as_deref(),
        Some("gsm8k")
    );
    assert!(matches!(gsm.origin, Origin::Hub { .. }));

    // Standard Hub cache layout: refs, blobs named by sha256, relative symlinks.
    let repo = o.hub.cache_dir.join(repo_folder("openai/gsm8k"));
    let commit = std::fs::read_to_string(repo.join("refs/refs/convert/parquet")).unwrap();
    assert_eq!(commit.len(), 40);
    let snap = repo
        .join("snapshots")
        .join(&commit)
        .join("main/test/0000.parquet");
    let link = std::fs::read_link(&snap).unwrap();
    assert!(link.starts_with("../../../../blobs"), "{link:?}");
    let blob_name = link.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(blob_name.len(), 64);
    assert!(repo.join("blobs").join(&blob_name).is_file());
    // The LFS redirect went to another host without the credential.
    assert!(
        hub.seen()
            .iter()
            .any(|s| s.path.starts_with("/cdn/") && s.host.starts_with("localhost"))
    );

    // MT-Bench is two-turn; the other three load their prompt field.
    let mt = load_public_dataset("spec_al_mtbench", &o).await.unwrap();
    assert_eq!(mt.dataset.conversations.len(), 2);
    assert!(mt.dataset.conversations.iter().all(|c| c.turns.len() == 2));
    assert_eq!(mt.dataset.conversations[0].id, "81");
    let math = load_public_dataset("spec_al_math500", &o).await.unwrap();
    assert_eq!(
        math.dataset.conversations[1].id,
        "test/number_theory/2.json"
    );
    let he = load_public_dataset("spec_al_humaneval", &o).await.unwrap();
    assert!(he.dataset.conversations[0].turns[0].starts_with("def add"));
    let mbpp = load_public_dataset("spec_al_mbpp", &o).await.unwrap();
    assert!(mbpp.dataset.conversations[0].turns[0].starts_with("Write a python function"));
    assert_eq!(mbpp.dataset.conversations[0].id, "11");

    // Cached: a second load downloads nothing.
    hub.clear_seen();
    let again = load_public_dataset("spec_al_gsm8k", &o).await.unwrap();
    assert_eq!(again.dataset, gsm.dataset);
    assert_eq!(hub.count("/cdn/"), 0, "{:?}", hub.seen());

    // Offline: no request at all, same rows.
    hub.clear_seen();
    let off = load_public_dataset("spec_al_gsm8k", &offline(o.clone()))
        .await
        .unwrap();
    assert_eq!(off.dataset, gsm.dataset);
    assert!(hub.seen().is_empty(), "{:?}", hub.seen());
}

/// ShareGPT: its JSON file downloaded, each human->gpt pair a turn with
/// its reply kept to be counted, the conversations without a pair left out,
/// the rows cached and read back with no request.
#[tokio::test]
async fn sharegpt_downloads_pairs_its_turns_and_caches_the_rows() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let o = options(&hub, dir.path(), None);
    let sg = load_public_dataset("sharegpt", &o).await.unwrap();
    assert!(
        matches!(&sg.origin, Origin::Hub { repo, .. } if repo == "anon8231489123/ShareGPT_Vicuna_unfiltered")
    );
    let ids: Vec<&str> = sg
        .dataset
        .conversations
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    // Only `sg-no-pair` is left out here; the length limits need a
    // tokenizer and apply at run time.
    assert_eq!(
        ids,
        [
            "sg-multi",
            "sg-short-prompt",
            "sg-system",
            "sg-short-reply",
            "sg-long-prompt",
            "sg-three",
            "sg-plain"
        ]
    );
    let multi = &sg.dataset.conversations[0];
    assert_eq!(multi.turns.len(), 2);
    assert_eq!(multi.reference_replies.len(), 2);
    assert!(multi.reference_replies[1].starts_with("The sun adds"));
    let system = &sg.dataset.conversations[2];
    assert!(system.turns[0].starts_with("[coding 0] Sort a list"));
    assert!(system.preamble.is_empty());
    assert_eq!(
        sg.dataset.categories().into_iter().collect::<Vec<_>>(),
        ["sharegpt"]
    );
    let cached = dir.path().join("datasets/public/sharegpt.jsonl");
    assert!(cached.is_file(), "{}", cached.display());

    hub.clear_seen();
    let off = load_public_dataset("sharegpt", &offline(o.clone()))
        .await
        .unwrap();
    assert_eq!(off.dataset, sg.dataset);
    assert!(matches!(off.origin, Origin::Cache { .. }));
    assert!(hub.seen().is_empty(), "{:?}", hub.seen());
}

#[tokio::test]
async fn offline_without_a_cache_fails_without_network() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let err = load_public_dataset(
        "spec_al_humaneval",
        &offline(options(&hub, dir.path(), None)),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(err, DatasetError::Fetch(FetchError::Offline { .. })),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("HF_HUB_OFFLINE") && msg.contains("openai/openai_humaneval"),
        "{msg}"
    );
    assert!(hub.seen().is_empty());
}

#[tokio::test]
async fn speed_bench_resolves_exact_sources_at_the_pinned_revision() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let o = options(&hub, dir.path(), Some(GOOD_TOKEN));
    let (logs, _guard) = capture_logs();

    let q = load_public_dataset("speed_bench_qualitative", &o)
        .await
        .unwrap();
    assert_eq!(q.dataset.conversations.len(), 7);
    let text = |i: usize| q.dataset.conversations[i].turns[0].clone();
    assert_eq!(
        text(0),
        "[coding 0] Write a function that reverses a linked list."
    );
    assert!(text(1).starts_with(
        "Solve the following competitive programming problem in Python.\n\nYou are given n integers"
    ));
    assert_eq!(
        text(2),
        "Summarize the following article in three sentences.\n\n(CNN) -- The harbour town reopened \
         its lighthouse on Sunday after a two-year restoration, with {braces} kept literally."
    );
    assert_eq!(
        text(3),
        "Which of the first ten primes has a digit sum of 11? Answer with the prime."
    );
    assert_eq!(q.dataset.conversations[4].turns.len(), 2);
    // LiveCodeBench: found in the third of its files, both fields filled in,
    // braces in the starter code kept literally.
    assert_eq!(
        text(6),
        "### Question:\nGiven a string S of T and A, print who won more games.\n\n### Format:\n\
         class Solution:\n    def winner(self, s: str) -> str:\n        counts = {}"
    );
    assert!(hub.count(LIVECODEBENCH_REVISION) > 0);
    // The pinned commit was read, not `main` (whose file has other categories).
    assert!(q.dataset.categories().contains("summarization"));
    assert!(hub.count(SPEED_BENCH_REVISION) > 0);
    assert_eq!(hub.count(SPEED_BENCH_MAIN), 0);
    assert_eq!(hub.count("/revision/main"), 1, "{:?}", hub.seen()); // cnn_dailymail only
    // The gate was checked before any download, and CDN requests carried no token.
    let seen = hub.seen();
    let gate = seen
        .iter()
        .position(|s| s.path.ends_with("/cais/hle/auth-check"))
        .unwrap();
    let first_download = seen
        .iter()
        .position(|s| s.path.contains("/resolve/"))
        .unwrap();
    assert!(gate < first_download);
    assert!(
        seen.iter()
            .filter(|s| s.path.starts_with("/cdn/"))
            .all(|s| !s.authorized)
    );

    // Written atomically to the dataset cache, with messages and no turns.
    let cached = dir.path().join("datasets/speed-bench/qualitative.jsonl");
    let body = std::fs::read_to_string(&cached).unwrap();
    assert_eq!(body.lines().count(), 7);
    let row: serde_json::Value = serde_json::from_str(body.lines().nth(2).unwrap()).unwrap();
    assert_eq!(row["messages"][0]["role"], "user");
    assert!(row.get("turns").is_none());
    assert_eq!(row["src_id"], "cnn-0001");
    assert!(!body.contains(PLACEHOLDER));
    let leftovers: Vec<_> = std::fs::read_dir(cached.parent().unwrap())
        .unwrap()
        .collect();
    assert_eq!(leftovers.len(), 1);

    // A category name loads the cached config, filtered after resolution.
    hub.clear_seen();
    let s = load_public_dataset("speed_bench_summarization", &o)
        .await
        .unwrap();
    assert_eq!(s.dataset.name, "speed_bench_summarization");
    assert_eq!(s.dataset.conversations.len(), 1);
    assert!(matches!(
        s.origin,
        Origin::Cache {
            verified: false,
            ..
        }
    ));
    assert!(hub.seen().is_empty());

    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("hub GET"), "logging was captured");
    assert!(!logs.contains("SECRET"), "a token leaked into the logs");
}

#[tokio::test]
async fn the_gate_fails_fast_with_instructions_and_never_shows_the_token() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (logs, _guard) = capture_logs();
    for (token, reason) in [
        (None, GateReason::NoCredentials),
        (Some(NOACCESS_TOKEN), GateReason::NotAuthorized),
        (Some(BAD_TOKEN), GateReason::Rejected),
    ] {
        hub.clear_seen();
        let o = options(&hub, dir.path(), token);
        let t = Instant::now();
        let err = load_public_dataset("speed_bench_qualitative", &o)
            .await
            .unwrap_err();
        assert!(t.elapsed().as_secs_f64() < 1.5, "{:?}", t.elapsed());
        let DatasetError::Fetch(FetchError::Gated { reason: r, .. }) = &err else {
            panic!("{err}")
        };
        assert_eq!(*r, reason);
        let msg = format!("{err} {err:?}");
        assert!(
            msg.contains("/datasets/cais/hle") && msg.contains("accept the terms"),
            "{msg}"
        );
        assert!(
            msg.contains("hf auth login") && msg.contains("HF_TOKEN"),
            "{msg}"
        );
        assert!(!msg.contains("SECRET"), "token in error: {msg}");
        // Nothing large was downloaded.
        assert_eq!(hub.count("/resolve/"), 0);
        if token.is_none() {
            assert!(hub.seen().is_empty(), "no credentials: no request");
        }
    }
    // The same checks hold for a gated repository read directly.
    let client = HubClient::new(options(&hub, dir.path(), Some(NOACCESS_TOKEN)).hub).unwrap();
    let err = client
        .fetch_split(
            "cais/hle",
            "021a3d71f516a7ac28ceb8d284969902edf1edeb",
            "default",
            "test",
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            DatasetError::Fetch(FetchError::Gated {
                reason: GateReason::NotAuthorized,
                ..
            })
        ),
        "{err}"
    );
    let client = HubClient::new(options(&hub, dir.path(), Some(BAD_TOKEN)).hub).unwrap();
    let err = client
        .fetch_split("openai/gsm8k", "refs/convert/parquet", "main", "test")
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("rejected the token") && !msg.contains("SECRET"),
        "{msg}"
    );
    let logs = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert!(!logs.contains("SECRET"), "a token leaked into the logs");
}

#[tokio::test]
async fn the_native_resolver_refuses_unreproducible_sources_before_any_source_download() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(&hub, dir.path(), Some(GOOD_TOKEN));
    o.resolver = Resolver::Native;
    let err = load_public_dataset("speed_bench_throughput_1k_mixed", &o)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            DatasetError::Resolve(ResolveError::Unresolvable { count: 3, .. })
        ),
        "{msg}"
    );
    for needle in [
        "cais/hle (1 rows",
        "RUCAIBox/BAMBOO (1 rows",
        "TIGER-Lab/MMLU-Pro (1 rows",
        "prepare.py",
        // In this library's terms; the binary adds its flags and commands
        // (bins/speedbench/tests/dataset_hints_e2e.rs).
        "the `auto` and `upstream` resolvers",
        "import a bundle pre-staged on a connected machine",
    ] {
        assert!(msg.contains(needle), "{needle}: {msg}");
    }
    // Only SPEED-Bench itself was fetched; no source, no cache file.
    assert!(
        hub.seen()
            .iter()
            .filter(|s| s.path.contains("/resolve/"))
            .all(|s| s.path.contains("nvidia/SPEED-Bench"))
    );
    assert!(
        !dir.path()
            .join("datasets/speed-bench/throughput_1k.jsonl")
            .exists()
    );
}

#[tokio::test]
async fn a_category_filter_that_matches_nothing_names_what_exists() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let o = options(&hub, dir.path(), Some(GOOD_TOKEN));
    let ok = load_public_dataset("speed_bench_throughput_2k_mixed", &o)
        .await
        .unwrap();
    assert_eq!(ok.dataset.conversations.len(), 1);
    let err = load_public_dataset("speed_bench_throughput_2k_high_entropy", &o)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, DatasetError::Lookup(LookupError::NoRowsMatch { .. })),
        "{msg}"
    );
    assert!(
        msg.contains("\"high_entropy\"") && msg.contains("\"low_entropy\", \"mixed\""),
        "{msg}"
    );
    assert!(msg.contains("throughput_2k"), "{msg}");
}

#[tokio::test]
async fn a_truncated_download_is_detected_and_not_cached() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let o = options(&hub, dir.path(), None);
    hub.set_truncate(true);
    let err = load_public_dataset("spec_al_gsm8k", &o).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            DatasetError::Integrity(IntegrityError::Truncated { .. })
        ),
        "{msg}"
    );
    assert!(
        msg.contains("/resolve/") && msg.contains("nothing was cached"),
        "{msg}"
    );
    let blobs = o
        .hub
        .cache_dir
        .join(repo_folder("openai/gsm8k"))
        .join("blobs");
    assert_eq!(
        std::fs::read_dir(&blobs).unwrap().count(),
        0,
        "no blob, no .incomplete left"
    );
    hub.set_truncate(false);
    assert_eq!(
        load_public_dataset("spec_al_gsm8k", &o)
            .await
            .unwrap()
            .dataset
            .conversations
            .len(),
        3
    );
}

#[tokio::test]
async fn a_corrupt_cache_file_is_refetched_online_and_refused_offline() {
    let hub = FakeHub::start().await;
    let dir = tempfile::tempdir().unwrap();
    let o = options(&hub, dir.path(), None);
    load_public_dataset("spec_al_mbpp", &o).await.unwrap();
    let blobs = o
        .hub
        .cache_dir
        .join(repo_folder("google-research-datasets/mbpp"))
        .join("blobs");
    let blob = std::fs::read_dir(&blobs)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let len = std::fs::metadata(&blob).unwrap().len() as usize;
    std::fs::write(&blob, vec![b'x'; len]).unwrap();

    let err = load_public_dataset("spec_al_mbpp", &offline(o.clone()))
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
        msg.contains("corrupt")
            && msg.contains(&blob.file_name().unwrap().to_string_lossy().into_owned()),
        "{msg}"
    );

    hub.clear_seen();
    let d = load_public_dataset("spec_al_mbpp", &o).await.unwrap();
    assert_eq!(d.dataset.conversations.len(), 2);
    assert_eq!(hub.count("/cdn/"), 1, "re-downloaded");
}

#[tokio::test]
async fn aiperf_caches_are_used_as_is_and_placeholders_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    // No Hub at all: the endpoint is a closed port.
    let o = LoadOptions {
        dataset_cache: dir.path().join("datasets"),
        read_only_caches: vec![dir.path().join("aiperf")],
        hub: speedbench_dataset::HubConfig::from_vars(|k| match k {
            "HF_ENDPOINT" => Some("http://127.0.0.1:9".into()),
            "HF_HOME" => Some(dir.path().join("hf").display().to_string()),
            _ => None,
        }),
        resolver: Resolver::Auto,
        upstream: no_upstream(),
    };
    let aiperf = dir.path().join("aiperf/speed-bench/qualitative.jsonl");
    std::fs::create_dir_all(aiperf.parent().unwrap()).unwrap();
    std::fs::copy(common::fixtures().join("speed_bench_mini.jsonl"), &aiperf).unwrap();
    let d = load_public_dataset("speed_bench_reasoning", &o)
        .await
        .unwrap();
    assert_eq!(d.dataset.conversations.len(), 3);
    assert_eq!(
        d.origin,
        Origin::Cache {
            path: aiperf.clone(),
            verified: false
        }
    );

    let mut text = std::fs::read_to_string(&aiperf).unwrap();
    for id in ["ph-1", "ph-2"] {
        text.push_str(&serde_json::json!({"question_id": id, "category": "qa", "messages": [{"role": "user", "content": PLACEHOLDER}]}).to_string());
        text.push('\n');
    }
    std::fs::write(&aiperf, text).unwrap();
    let err = load_public_dataset("speed_bench_qualitative", &o)
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            DatasetError::Content(ContentError::UnresolvedPlaceholders { count: 2, .. })
        ),
        "{msg}"
    );
    assert!(msg.contains("line 34 (ph-1), line 35 (ph-2)"), "{msg}");
}

#[tokio::test]
async fn prestage_then_import_on_an_air_gapped_host() {
    let hub = FakeHub::start().await;
    let connected = tempfile::tempdir().unwrap();
    let o = options(&hub, connected.path(), Some(GOOD_TOKEN));
    let bundle = connected.path().join("bundle");
    let e1 = prestage("speed_bench_qualitative", &bundle, &o)
        .await
        .unwrap();
    assert_eq!(
        (e1.rows, e1.file.as_str()),
        (7, "speed-bench/qualitative.jsonl")
    );
    assert_eq!(e1.revision.as_deref(), Some(SPEED_BENCH_REVISION));
    let e2 = prestage("spec_al_mtbench", &bundle, &o).await.unwrap();
    assert_eq!(
        (e2.rows, e2.file.as_str()),
        (2, "public/spec_al_mtbench.jsonl")
    );
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(manifest["files"].as_array().unwrap().len(), 2);
    assert_eq!(manifest["files"][1]["sha256"].as_str().unwrap().len(), 64);

    // The air-gapped host: no network, no token, offline.
    let gapped = tempfile::tempdir().unwrap();
    let off = |cache: &Path| LoadOptions {
        dataset_cache: cache.to_path_buf(),
        read_only_caches: vec![],
        hub: speedbench_dataset::HubConfig::from_vars(|k| match k {
            "HF_ENDPOINT" => Some("http://127.0.0.1:9".into()),
            "HF_HOME" => Some(gapped.path().join("hf").display().to_string()),
            "HF_HUB_OFFLINE" => Some("1".into()),
            _ => None,
        }),
        resolver: Resolver::Auto,
        upstream: no_upstream(),
    };
    // Pointing --dataset-cache at the bundle works directly, verified.
    let d = load_public_dataset("speed_bench_writing", &off(&bundle))
        .await
        .unwrap();
    assert_eq!(d.dataset.conversations.len(), 1);
    assert!(matches!(d.origin, Origin::Cache { verified: true, .. }));
    // Import copies and verifies; loads then come from the cache.
    let cache = gapped.path().join("datasets");
    let m = import_bundle(&bundle, &cache).unwrap();
    assert_eq!(m.files.len(), 2);
    let mt = load_public_dataset("spec_al_mtbench", &off(&cache))
        .await
        .unwrap();
    assert_eq!(mt.dataset.turn_count(), 4);
    assert!(matches!(mt.origin, Origin::Cache { verified: true, .. }));
    let q = load_public_dataset("speed_bench_qualitative", &off(&cache))
        .await
        .unwrap();
    assert_eq!(q.dataset.conversations.len(), 7);

    // A damaged copy is refused, by import and by load.
    let f = bundle.join("public/spec_al_mtbench.jsonl");
    let mut text = std::fs::read_to_string(&f).unwrap();
    text = text.replacen("Hawaii", "Hawai!", 1);
    std::fs::write(&f, text).unwrap();
    let err = import_bundle(&bundle, &gapped.path().join("other")).unwrap_err();
    assert!(
        matches!(
            err,
            DatasetError::Integrity(IntegrityError::Checksum { .. })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("spec_al_mtbench.jsonl"), "{err}");
    let err = load_public_dataset("spec_al_mtbench", &off(&bundle))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("checksum mismatch"), "{err}");
}

#[tokio::test]
async fn spec_bench_questions_load_from_the_cache_or_say_where_to_put_them() {
    let dir = tempfile::tempdir().unwrap();
    let o = LoadOptions {
        dataset_cache: dir.path().to_path_buf(),
        read_only_caches: vec![],
        hub: speedbench_dataset::HubConfig::from_vars(|_| None),
        resolver: Resolver::Auto,
        upstream: no_upstream(),
    };
    let err = load_public_dataset("spec_bench", &o).await.unwrap_err();
    assert!(
        err.to_string().contains("question.jsonl")
            && err.to_string().contains(&format!(
                "place it at {}",
                dir.path().join("spec-bench/question.jsonl").display()
            )),
        "{err}"
    );
    let to = dir.path().join("spec-bench/question.jsonl");
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    std::fs::copy(common::fixtures().join("spec_bench_question.jsonl"), &to).unwrap();
    let d = load_public_dataset("spec_bench", &o).await.unwrap();
    assert_eq!(d.dataset.conversations.len(), 3);
    assert_eq!(d.dataset.conversations[0].id, "81");
    assert_eq!(d.dataset.turn_count(), 4);
    let err = load_public_dataset("spec_bnch", &o).await.unwrap_err();
    assert!(
        err.to_string().contains("did you mean \"spec_bench\""),
        "{err}"
    );
}

/// The causes of `err`, outermost first.
fn causes(err: &DatasetError) -> Vec<&(dyn std::error::Error + 'static)> {
    let mut out = Vec::new();
    let mut cause = std::error::Error::source(err);
    while let Some(c) = cause {
        out.push(c);
        cause = c.source();
    }
    out
}

#[tokio::test]
async fn a_refused_connection_keeps_its_cause() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().display().to_string();
    let endpoint = format!("http://127.0.0.1:{port}");
    let hub = HubClient::new(speedbench_dataset::HubConfig::from_vars(|k| match k {
        "HF_HOME" => Some(home.clone()),
        "HF_ENDPOINT" => Some(endpoint.clone()),
        _ => None,
    }))
    .unwrap();

    // An API call: the HTTP client's error is the source, and says which
    // kind of failure it was (a connection, not a deadline or a bad URL).
    let err = hub.resolve_revision("org/name", "main").await.unwrap_err();
    assert!(
        matches!(err, DatasetError::Fetch(FetchError::Network { .. })),
        "{err}"
    );
    let http = causes(&err)
        .into_iter()
        .find_map(|c| c.downcast_ref::<speedbench_http::HttpError>());
    assert!(
        matches!(http, Some(speedbench_http::HttpError::Connect { .. })),
        "{err}: {http:?}"
    );

    // A download: the chain reaches the socket's own error.
    let file = speedbench_dataset::hub::RepoFile {
        path: "data/test.parquet".into(),
        size: 4,
        oid: "0".repeat(40),
        lfs_sha256: None,
    };
    let err = hub
        .download("org/name", &"a".repeat(40), &file)
        .await
        .unwrap_err();
    assert!(
        matches!(err, DatasetError::Fetch(FetchError::Network { .. })),
        "{err}"
    );
    let refused = causes(&err)
        .into_iter()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::ConnectionRefused);
    assert!(refused, "{err}: {:?}", causes(&err));
    // The message still says what happened without walking the chain.
    assert!(
        err.to_string().contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
}
