//! A spec run end to end against the simulator, without a process: the
//! observer sees every event in order, and the report's figures are the
//! records'.

use std::sync::{Arc, Mutex};

use speedbench_client::{Engine, Preflight, Progress, RunStatus, StopHandle};
use speedbench_record::read_records_file;
use speedbench_run::{
    DatasetSource, EngineChoice, EngineSource, Observer, RunError, RunReport, RunResults, RunSpec,
};
use speedbench_sim::{SimConfig, SimServer};

const ROWS: &str = r#"{"question_id": "c1", "category": "coding", "turns": ["Sort a list."]}
{"question_id": "c2", "category": "coding", "turns": ["Reverse a string."]}
{"question_id": "w1", "category": "writing", "turns": ["A haiku.", "Another one."]}
"#;

/// Every event, as a word, in the order it came.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<String>>>);

impl Recorder {
    fn events(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
    fn push(&self, event: String) {
        self.0.lock().unwrap().push(event);
    }
}

impl Observer for Recorder {
    fn rows_limited(&mut self, limit: usize, kept: usize, before: usize) {
        self.push(format!("limited {limit}: {kept} of {before}"));
    }
    fn engine(&mut self, engine: Engine, source: &EngineSource) {
        let how = match source {
            EngineSource::Named => "named",
            EngineSource::Detected(_) => "detected",
        };
        self.push(format!("engine {engine} {how}"));
    }
    fn preflight(&mut self, check: &Preflight) {
        self.push(format!("preflight {}", check.has_acceptance()));
    }
    fn run_started(&mut self, _progress: Arc<Progress>) {
        self.push("started".into());
    }
    fn run_ended(&mut self) {
        self.push("ended".into());
    }
    fn finished(&mut self, report: &RunReport) {
        self.push(format!("finished {}", report.outcome.record_count));
    }
}

async fn spec_for(server: &SimServer, dir: &std::path::Path) -> RunSpec {
    let rows = dir.join("rows.jsonl");
    std::fs::write(&rows, ROWS).unwrap();
    let mut spec = RunSpec::default();
    spec.target.url = server.url();
    spec.target.streaming = true;
    spec.dataset.source = Some(DatasetSource::InputFile(rows));
    spec.load.concurrency = 2;
    spec.outputs.output_artifact_dir = Some(dir.join("run"));
    spec.scrape.shutdown_delay_s = 0.0;
    spec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_tells_its_observer_each_step_in_order_and_reports_its_records() {
    let server = SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec_for(&server, dir.path()).await;
    spec.dataset.limit = std::num::NonZeroUsize::new(1);
    let mut recorder = Recorder::default();
    let report = speedbench_run::run_spec(&spec, StopHandle::new(), &mut recorder)
        .await
        .unwrap();
    // Two categories, one row each kept: c1 (one turn) and w1 (two turns).
    assert_eq!(
        recorder.events(),
        [
            "limited 1: 2 of 3",
            "engine vllm detected",
            "preflight true",
            "started",
            "ended",
            "finished 3",
        ]
    );
    let RunResults::Records {
        metrics,
        digest,
        held,
        ..
    } = &report.results
    else {
        panic!("the records were kept and read back");
    };
    // The report's figures are the file's, read in passes: the records
    // themselves are not held (no llama.cpp timings, no --output).
    let file = read_records_file(&report.outcome.records_path).unwrap();
    assert_eq!(held, &None);
    let figures = speedbench_metrics::FigureOptions::of_run(file.manifest.as_ref().unwrap());
    assert!(
        figures.steady_state.is_some(),
        "a closed loop asks for its steady state"
    );
    assert_eq!(
        metrics,
        &speedbench_metrics::RunMetrics::with_figures(&file.records, &figures)
    );
    assert_eq!(
        **digest,
        speedbench_metrics::RecordsDigest::of(&file.records)
    );
    assert_eq!(metrics.counts.succeeded, 3);
    for r in &file.records {
        let (ttft, e2e) = (r.ttft_ns.unwrap(), r.e2e_latency_ns);
        assert!(ttft <= e2e, "ttft {ttft} > e2e {e2e} in {r:?}");
    }
    assert_eq!(report.into_status().unwrap(), RunStatus::Completed);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_named_engine_without_preflight_sends_only_the_run() {
    let server = SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec_for(&server, dir.path()).await;
    spec.target.engine = EngineChoice::Named(Engine::Vllm);
    spec.target.preflight = false;
    spec.load.request_count = Some(5);
    let mut recorder = Recorder::default();
    let report = speedbench_run::run_spec(&spec, StopHandle::new(), &mut recorder)
        .await
        .unwrap();
    assert_eq!(
        recorder.events(),
        ["engine vllm named", "started", "ended", "finished 5"]
    );
    assert_eq!(report.outcome.requests.sent, 5);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_spec_sends_nothing_and_names_the_field() {
    let server = SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut spec = spec_for(&server, dir.path()).await;
    spec.load.concurrency = 0;
    let mut recorder = Recorder::default();
    let Err(e) = speedbench_run::run_spec(&spec, StopHandle::new(), &mut recorder).await else {
        panic!("a zero concurrency is refused");
    };
    assert!(matches!(e, RunError::Client { .. }), "{e:?}");
    assert!(
        e.to_string().contains("concurrency must be at least 1"),
        "{e}"
    );
    assert!(recorder.events().is_empty(), "{:?}", recorder.events());
    assert!(
        !dir.path().join("run").exists(),
        "no run directory was made"
    );
    server.shutdown().await;
}

/// Reads vLLM's `metrics.speculative_decoding` under its own name: an
/// engine adapter a downstream benchmark brings.
#[derive(Debug)]
struct MyVllm;

impl speedbench_client::spec::SpecAdapter for MyVllm {
    fn source(&self) -> speedbench_record::SpecSource {
        speedbench_record::SpecSource::named("my_vllm").unwrap()
    }
    fn find<'a>(&self, object: &'a serde_json::Value) -> Option<&'a serde_json::Value> {
        object.get("metrics")?.get("speculative_decoding")
    }
    fn parse(
        &self,
        payload: &serde_json::Value,
    ) -> Result<speedbench_record::SpecDecodeStats, speedbench_client::spec::MalformedSpec> {
        // vLLM's own reading, less its histogram: what this adapter read
        // is told apart from what the built-in one would have.
        let mut stats = speedbench_client::spec::from_vllm(payload)?;
        stats.acceptance_histogram.clear();
        Ok(stats)
    }
}

/// Fills `x_turn_parity` from each record's turn.
struct TurnParity;

impl speedbench_client::RecordAnnotator for TurnParity {
    fn columns(&self) -> Vec<speedbench_record::CustomColumn> {
        vec![
            speedbench_record::CustomColumn::new(
                "x_turn_parity",
                speedbench_record::CustomKind::Utf8,
            )
            .unwrap(),
        ]
    }
    fn annotate(&mut self, record: &mut speedbench_record::RequestRecord) {
        let parity = if record.turn_index.is_multiple_of(2) {
            "even"
        } else {
            "odd"
        };
        record.custom.insert(
            "x_turn_parity".into(),
            speedbench_record::CustomValue::Utf8(parity.into()),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checked_run_takes_its_callers_sinks_annotators_and_adapters() {
    let server = SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = spec_for(&server, dir.path()).await;
    let (sink, seen) = speedbench_client::VecSink::new();
    let valid = spec
        .validate()
        .unwrap()
        .with_sink(sink)
        .with_annotator(TurnParity)
        .with_spec_adapter(MyVllm);
    let dataset = spec
        .load_dataset(&mut speedbench_run::Silent)
        .await
        .unwrap();
    let mut recorder = Recorder::default();
    let report = speedbench_run::execute(valid, dataset, StopHandle::new(), &mut recorder)
        .await
        .unwrap();
    // The same path as any run: the engine found, the preflight sent.
    assert_eq!(
        recorder.events(),
        [
            "engine vllm detected",
            "preflight true",
            "started",
            "ended",
            "finished 4"
        ]
    );
    let file = read_records_file(&report.outcome.records_path).unwrap();
    let seen = seen.take();
    assert_eq!(seen.len(), file.records.len(), "the sink saw every record");
    assert_eq!(file.records.len(), 4);
    for (r, s) in file.records.iter().zip(&seen) {
        assert_eq!(r.request_index, s.request_index);
        let want = if r.turn_index.is_multiple_of(2) {
            "even"
        } else {
            "odd"
        };
        assert_eq!(
            r.custom["x_turn_parity"],
            speedbench_record::CustomValue::Utf8(want.into())
        );
        let stats = r.spec.as_ref().expect("read by the caller's adapter");
        assert_eq!(stats.source.unwrap().as_str(), "my_vllm");
        assert!(stats.acceptance_histogram.is_empty());
        assert!(r.ttft_ns.unwrap() <= r.e2e_latency_ns);
    }
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_built_in_code_runs_each_point_and_carries_its_figures() {
    let server = SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into())
        .await
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let base = spec_for(&server, dir.path()).await;
    let sweep = speedbench_run::sweep::Sweep::grid(
        &base,
        dir.path().join("ladder"),
        &[("concurrency", &["1", "3"]), ("request-count", &["4"])],
    )
    .unwrap();
    assert_eq!(sweep.path(), None);
    let checked = sweep.check().await.unwrap();
    assert!(checked.plan_lines(false)[0].starts_with("sweep built in code"));
    let outcome = checked
        .run(&StopHandle::new(), &mut speedbench_run::Silent)
        .await;
    assert_eq!(outcome.runs.len(), 2);
    for (run, end) in &outcome.runs {
        let metrics = end.metrics().expect("the figures of a completed run");
        // The figures are the run's records', not a second reading.
        let file = read_records_file(run.dir.join("records.parquet")).unwrap();
        let succeeded = file.records.iter().filter(|r| r.is_success()).count();
        assert_eq!(
            metrics.counts.succeeded as usize, succeeded,
            "{}",
            run.description
        );
        assert_eq!(succeeded, 4);
        for r in &file.records {
            assert!(r.ttft_ns.unwrap() <= r.e2e_latency_ns);
        }
    }
    assert_eq!(
        outcome.runs[1].0.spec().unwrap().load.concurrency,
        3,
        "{}",
        outcome.runs[1].0.description
    );
    server.shutdown().await;
}
