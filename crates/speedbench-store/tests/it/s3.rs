//! RunUpload and fetch against a real S3-compatible server (moto) on
//! 127.0.0.1, with signature-checked credentials.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use speedbench_store::object_store::ObjectStore;
use speedbench_store::{
    PART_SIZE, POLL_INTERVAL, RunUpload, StoreError, StoreOptions, StoreUrl, fetch, open,
};
use speedbench_test_support::s3::S3Server;

/// The server's settings passed explicitly (the binary's tests cover the
/// environment variables; a test process shares one environment).
fn options(server: &S3Server, secret: &str) -> StoreOptions {
    StoreOptions::default()
        .with_config("aws_endpoint", &server.endpoint)
        .with_config("aws_allow_http", "true")
        .with_config("aws_region", &server.region)
        .with_config("aws_access_key_id", &server.access_key_id)
        .with_config("aws_secret_access_key", secret)
}

fn store(server: &S3Server, url: &StoreUrl) -> Arc<dyn ObjectStore> {
    open(url, &options(server, &server.secret_access_key)).unwrap()
}

/// Bytes that differ from part to part (a repeated pattern would hide a
/// part uploaded twice or out of order).
fn bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn write_run(dir: &Path, outcome: &str) {
    std::fs::write(
        dir.join("run.json"),
        format!(r#"{{"run_id":"r1","model":"m","outcome":"{outcome}"}}"#),
    )
    .unwrap();
    std::fs::write(dir.join("summary.json"), br#"{"outcome":"completed"}"#).unwrap();
    std::fs::write(dir.join(".speedbench.lock"), b"").unwrap();
}

/// Waits until the streamer has had time to send what the partial file
/// holds (two polls).
async fn let_it_stream() {
    tokio::time::sleep(POLL_INTERVAL * 2 + Duration::from_millis(500)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_stream_while_the_run_goes_and_the_run_comes_back_byte_for_byte() {
    let Some(server) = S3Server::start("runs") else {
        return;
    };
    let url: StoreUrl = format!("s3://{}/sweep/spec", server.bucket)
        .parse()
        .unwrap();
    let store = store(&server, &url);
    let staging = tempfile::tempdir().unwrap();
    write_run(staging.path(), "running");
    let upload = RunUpload::begin(store.clone(), url.clone(), staging.path(), false)
        .await
        .unwrap();
    // Two whole parts and a bit flushed mid-run...
    let records = bytes(2 * PART_SIZE + 1000, 1);
    let partial = staging.path().join("records.parquet.partial");
    std::fs::write(&partial, &records).unwrap();
    let_it_stream().await;
    // ...then the run closes the file (more rows, the footer) and renames it.
    let mut closed = records.clone();
    closed.extend(bytes(PART_SIZE / 2, 2));
    std::fs::write(&partial, &closed).unwrap();
    std::fs::rename(&partial, staging.path().join("records.parquet")).unwrap();
    write_run(staging.path(), "completed");
    let report = upload.finish().await.unwrap();

    assert_eq!(report.streamed_bytes, 2 * PART_SIZE as u64, "{report:?}");
    assert_eq!(report.restarted, None);
    let names: Vec<String> = report.objects.iter().map(|o| o.url.to_string()).collect();
    let want: Vec<String> = ["records.parquet", "summary.json", "run.json"]
        .iter()
        .map(|n| format!("s3://runs/sweep/spec/{n}"))
        .collect();
    assert_eq!(names, want, "run.json last, the lock file not at all");
    assert_eq!(report.objects[0].bytes, closed.len() as u64);

    let dest = tempfile::tempdir().unwrap();
    let parent: StoreUrl = "s3://runs/sweep".parse().unwrap();
    let fetched = fetch(&store, &parent, dest.path()).await.unwrap();
    assert_eq!(fetched.root, dest.path().join("sweep"));
    assert_eq!(fetched.objects, 3, "no write-check object is left behind");
    let run = fetched.root.join("spec");
    assert!(std::fs::read(run.join("records.parquet")).unwrap() == closed);
    assert_eq!(
        std::fs::read_to_string(run.join("run.json")).unwrap(),
        std::fs::read_to_string(staging.path().join("run.json")).unwrap()
    );
    assert_eq!(
        fetched.bytes,
        (closed.len() + std::fs::metadata(run.join("run.json")).unwrap().len() as usize + 23)
            as u64
    );

    // A URL naming one object fetches that object.
    let one = url.join("summary.json");
    let fetched = fetch(&store, &one, dest.path()).await.unwrap();
    assert_eq!(
        (fetched.objects, fetched.root.clone()),
        (1, dest.path().join("summary.json"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_records_file_cut_back_after_streaming_is_uploaded_whole() {
    let Some(server) = S3Server::start("runs") else {
        return;
    };
    let url: StoreUrl = "s3://runs/cut".parse().unwrap();
    let store = store(&server, &url);
    let staging = tempfile::tempdir().unwrap();
    write_run(staging.path(), "running");
    let upload = RunUpload::begin(store.clone(), url.clone(), staging.path(), false)
        .await
        .unwrap();
    let partial = staging.path().join("records.parquet.partial");
    std::fs::write(&partial, bytes(PART_SIZE + 10, 3)).unwrap();
    let_it_stream().await;
    // A write error: the file is cut back to its last whole row group,
    // shorter than what was streamed, and given a footer.
    let salvaged = bytes(PART_SIZE / 3, 4);
    std::fs::write(staging.path().join("records.parquet"), &salvaged).unwrap();
    std::fs::remove_file(&partial).unwrap();
    write_run(staging.path(), "failed");
    let report = upload.finish().await.unwrap();
    assert_eq!(report.streamed_bytes, PART_SIZE as u64);
    assert!(
        report
            .restarted
            .as_deref()
            .is_some_and(|r| r.contains("uploaded whole")),
        "{report:?}"
    );
    let dest = tempfile::tempdir().unwrap();
    let fetched = fetch(&store, &url, dest.path()).await.unwrap();
    assert!(std::fs::read(fetched.root.join("records.parquet")).unwrap() == salvaged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_before_it_finished_leaves_nothing_a_reader_lists() {
    let Some(server) = S3Server::start("runs") else {
        return;
    };
    let url: StoreUrl = "s3://runs/killed".parse().unwrap();
    let store = store(&server, &url);
    let staging = tempfile::tempdir().unwrap();
    write_run(staging.path(), "running");
    let upload = RunUpload::begin(store.clone(), url.clone(), staging.path(), false)
        .await
        .unwrap();
    std::fs::write(
        staging.path().join("records.parquet.partial"),
        bytes(PART_SIZE + 1, 5),
    )
    .unwrap();
    let_it_stream().await;
    // The process dies: the upload is never finished.
    drop(upload);
    let dest = tempfile::tempdir().unwrap();
    let err = fetch(&store, &url, dest.path()).await.unwrap_err();
    assert!(
        matches!(err, StoreError::Empty { .. }),
        "a streamed but uncompleted upload must not be an object: {err}"
    );
    assert_eq!(
        err.to_string(),
        "s3://runs/killed: no object is stored under this URL"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prefix_that_holds_a_run_is_refused_unless_replacing_it_was_asked() {
    let Some(server) = S3Server::start("runs") else {
        return;
    };
    let url: StoreUrl = "s3://runs/taken".parse().unwrap();
    let store = store(&server, &url);
    let staging = tempfile::tempdir().unwrap();
    write_run(staging.path(), "completed");
    speedbench_store::check_vacant(&store, &url).await.unwrap();
    let upload = RunUpload::begin(store.clone(), url.clone(), staging.path(), false)
        .await
        .unwrap();
    upload.finish().await.unwrap();
    let err = RunUpload::begin(store.clone(), url.clone(), staging.path(), false)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "s3://runs/taken already holds a run (run.json exists)"
    );
    let err = speedbench_store::check_vacant(&store, &url)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "s3://runs/taken already holds a run (run.json exists)"
    );
    // A sibling sharing the name's start is not the run.
    let sibling: StoreUrl = "s3://runs/take".parse().unwrap();
    speedbench_store::check_vacant(&store, &sibling)
        .await
        .unwrap();
    let upload = RunUpload::begin(store.clone(), url.clone(), staging.path(), true)
        .await
        .unwrap();
    upload.finish().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_secret_is_refused_before_the_run_and_never_printed() {
    let Some(server) = S3Server::start("runs") else {
        return;
    };
    let url: StoreUrl = "s3://runs/denied".parse().unwrap();
    let wrong = "wrong-secret-0123456789abcdefghijklmnopqrst";
    let store = open(&url, &options(&server, wrong)).unwrap();
    let staging = tempfile::tempdir().unwrap();
    let err = RunUpload::begin(store, url, staging.path(), false)
        .await
        .unwrap_err();
    assert!(err.is_denied(), "{err:?}");
    let mut text = err.to_string();
    let mut cause = std::error::Error::source(&err);
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    assert!(
        text.starts_with("s3://runs/denied/run.json: the object store refused access")
            && text.contains("AWS_SECRET_ACCESS_KEY"),
        "{text}"
    );
    assert!(!text.contains(wrong), "the secret leaked: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_is_refused_unless_allowed() {
    let Some(server) = S3Server::start("runs") else {
        return;
    };
    let url: StoreUrl = "s3://runs/x".parse().unwrap();
    let options = StoreOptions::default()
        .with_config("aws_endpoint", &server.endpoint)
        .with_config("aws_region", &server.region)
        .with_config("aws_access_key_id", &server.access_key_id)
        .with_config("aws_secret_access_key", &server.secret_access_key);
    let store = open(&url, &options).unwrap();
    let dest = tempfile::tempdir().unwrap();
    let err = fetch(&store, &url, dest.path()).await.unwrap_err();
    let mut text = err.to_string();
    let mut cause = std::error::Error::source(&err);
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    assert!(text.contains("AWS_ALLOW_HTTP=true"), "{text}");
}
