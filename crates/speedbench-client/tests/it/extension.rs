//! The extension points a downstream benchmark uses without forking: a spec
//! adapter for an engine speedbench does not know, and record sinks.

use crate::common;

use common::*;
use serde_json::Value;
use speedbench_client::spec::{MalformedSpec, SpecAdapter};
use speedbench_client::{ChannelSink, Load, RunStatus};
use speedbench_record::{
    CustomColumn, CustomKind, CustomValue, SpecDecodeStats, SpecSource, read_records_file,
};
use speedbench_sim::SimConfig;

/// An engine reporting `{"my_spec": {"accepted": a, "drafted": d, "steps": s}}`
/// in its last chunk.
#[derive(Debug)]
struct MyEngine;

impl SpecAdapter for MyEngine {
    fn source(&self) -> SpecSource {
        SpecSource::named("my_engine").unwrap()
    }

    fn find<'a>(&self, object: &'a Value) -> Option<&'a Value> {
        object.get("my_spec")
    }

    fn parse(&self, payload: &Value) -> Result<SpecDecodeStats, MalformedSpec> {
        let field = |name: &str| {
            payload
                .get(name)
                .and_then(Value::as_u64)
                .ok_or_else(|| MalformedSpec {
                    source: self.source(),
                    message: format!("`{name}` is missing"),
                })
        };
        Ok(SpecDecodeStats {
            accepted_draft_tokens: field("accepted")?,
            proposed_draft_tokens: field("drafted")?,
            verify_steps: Some(field("steps")?),
            ..Default::default()
        })
    }
}

fn content(s: &str) -> String {
    format!(r#"{{"choices":[{{"delta":{{"content":"{s}"}}}}]}}"#)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_adapter_reads_an_unknown_engine_into_the_records() {
    let last = r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7},"my_spec":{"accepted":4,"drafted":6,"steps":3}}"#;
    let addr = scripted_sse(vec![
        data(0, &content("Hello")),
        data(1, &content(" world")),
        data(1, last),
        data(0, "[DONE]"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let t = target(&format!("http://{addr}")).with_spec_adapter(MyEngine);
    let records = profile(dir.path(), single_turns(3), t, Load::closed_loop(1)).await;
    assert_eq!(records.len(), 3);
    for r in &records {
        let s = r.spec.as_ref().expect("the adapter's stats");
        assert_eq!(s.source, Some(SpecSource::Other("my_engine")));
        assert_eq!(
            (
                s.accepted_draft_tokens,
                s.proposed_draft_tokens,
                s.verify_steps
            ),
            (4, 6, Some(3))
        );
    }
    // The name survives the Parquet file (read back above by `profile`).
    assert_eq!(
        records[0].spec.as_ref().unwrap().source.unwrap().as_str(),
        "my_engine"
    );

    // A payload breaking the invariants is refused, not recorded.
    let bad = r#"{"choices":[{"delta":{},"finish_reason":"stop"}],"my_spec":{"accepted":9,"drafted":6,"steps":3}}"#;
    let addr = scripted_sse(vec![
        data(0, &content("Hi")),
        data(0, bad),
        data(0, "[DONE]"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let t = target(&format!("http://{addr}")).with_spec_adapter(MyEngine);
    let records = profile(dir.path(), single_turns(1), t, Load::closed_loop(1)).await;
    assert!(records[0].is_success() && records[0].spec.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_channel_sink_streams_every_record_and_a_dropped_receiver_fails_the_run() {
    let server = start_sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let (sink, mut rx) = ChannelSink::new();
    let run =
        speedbench_client::ProfileRun::new(single_turns(5), target(&server.url()), dir.path())
            .with_load(Load::closed_loop(2))
            .with_sink(sink);
    let outcome = speedbench_client::run_profile(
        run,
        speedbench_client::StopHandle::new(),
        Default::default(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    let mut streamed = Vec::new();
    while let Ok(r) = rx.try_recv() {
        streamed.push(r);
    }
    let file = read_records_file(&outcome.records_path).unwrap().records;
    assert_eq!(streamed, file, "the channel saw exactly the file's records");

    // Nobody listening: the sink is detached at once, and the run says so.
    let dir = tempfile::tempdir().unwrap();
    let (sink, rx) = ChannelSink::new();
    drop(rx);
    let run =
        speedbench_client::ProfileRun::new(single_turns(3), target(&server.url()), dir.path())
            .with_sink(sink);
    let outcome = speedbench_client::run_profile(
        run,
        speedbench_client::StopHandle::new(),
        Default::default(),
    )
    .await
    .unwrap();
    assert_eq!(
        (outcome.status, outcome.failure.as_deref()),
        (
            RunStatus::Failed,
            Some("record sink record channel: the receiver was dropped (detached)")
        )
    );
    assert_eq!(outcome.record_count, 3, "the records file is whole");
    server.shutdown().await;
}

/// Numbers each record it sees and copies its completion tokens; with
/// `typo`, also sets a column it never declared.
struct Annotator {
    seen: i64,
    typo: bool,
}

impl speedbench_client::RecordAnnotator for Annotator {
    fn columns(&self) -> Vec<CustomColumn> {
        vec![
            CustomColumn::new("x_seen", CustomKind::Int64).unwrap(),
            CustomColumn::new("x_tokens_even", CustomKind::Boolean).unwrap(),
        ]
    }

    fn annotate(&mut self, record: &mut speedbench_record::RequestRecord) {
        record
            .custom
            .insert("x_seen".into(), CustomValue::Int64(self.seen));
        self.seen += 1;
        if let Some(n) = record.completion_tokens {
            record.custom.insert(
                "x_tokens_even".into(),
                CustomValue::Boolean(n.is_multiple_of(2)),
            );
        }
        if self.typo {
            record.custom.insert("x_typo".into(), CustomValue::Int64(1));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_annotator_fills_its_columns_in_the_file_and_the_sinks() {
    let server = start_sim(SimConfig::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let (sink, mut rx) = ChannelSink::new();
    let run =
        speedbench_client::ProfileRun::new(single_turns(6), target(&server.url()), dir.path())
            .with_load(Load::closed_loop(2))
            .with_annotator(Annotator {
                seen: 0,
                typo: false,
            })
            .with_sink(sink);
    let outcome = speedbench_client::run_profile(
        run,
        speedbench_client::StopHandle::new(),
        Default::default(),
    )
    .await
    .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    let file = read_records_file(&outcome.records_path).unwrap();
    assert_eq!(
        file.custom_columns
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>(),
        ["x_seen", "x_tokens_even"]
    );
    // Every record numbered in the order the file holds them, each with
    // its own token parity.
    for (i, r) in file.records.iter().enumerate() {
        assert_eq!(r.custom["x_seen"], CustomValue::Int64(i as i64));
        let even = r.completion_tokens.unwrap().is_multiple_of(2);
        assert_eq!(r.custom["x_tokens_even"], CustomValue::Boolean(even));
    }
    let mut streamed = Vec::new();
    while let Ok(r) = rx.try_recv() {
        streamed.push(r);
    }
    assert_eq!(streamed, file.records, "the sink saw the annotated records");

    // A value in a column nobody declared fails the run, naming it; the
    // file is still readable.
    let dir = tempfile::tempdir().unwrap();
    let run =
        speedbench_client::ProfileRun::new(single_turns(3), target(&server.url()), dir.path())
            .with_annotator(Annotator {
                seen: 0,
                typo: true,
            });
    let outcome = speedbench_client::run_profile(
        run,
        speedbench_client::StopHandle::new(),
        Default::default(),
    )
    .await
    .unwrap();
    match (outcome.status, &outcome.failure) {
        (RunStatus::Failed, Some(why)) => assert!(
            why.contains("x_typo") && why.contains("not declared"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    read_records_file(&outcome.records_path).unwrap();
    server.shutdown().await;
}
