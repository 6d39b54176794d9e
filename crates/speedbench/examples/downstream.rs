//! A downstream benchmark written only on the `speedbench` facade: it serves
//! the simulated speculative-decoding server, profiles a small multi-turn
//! dataset at two concurrencies, streams every record to its own task as it
//! finishes, and prints the acceptance matrix of both runs.
//!
//! `cargo run -p speedbench --example downstream`

use std::sync::Arc;

use speedbench::client::{
    BaseUrl, ChannelSink, LoadConfig, ProfileRun, Progress, RunStatus, StopHandle, Target,
    run_profile,
};
use speedbench::dataset::Dataset;
use speedbench::report::{AcceptanceMatrix, MatrixMetric};
use speedbench::sim::{SimConfig, SimServer};

const ROWS: &str = r#"{"question_id": "c1", "category": "coding", "turns": ["Write quicksort in Rust.", "Now make it generic."]}
{"question_id": "m1", "category": "math", "turns": ["What is 17 * 23?"]}
{"question_id": "w1", "category": "writing", "turns": ["A limerick about latency."]}"#;

#[speedbench::tokio::main(flavor = "current_thread", crate = "speedbench::tokio")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server =
        SimServer::start(SimConfig::speed_bench_demo(), ([127, 0, 0, 1], 0).into()).await?;
    let dataset = Dataset::from_jsonl_str("downstream", ROWS)?;
    let out = std::env::temp_dir().join(format!("speedbench-downstream-{}", std::process::id()));
    let stop = StopHandle::new();
    let signals = speedbench::process::stop_on_signals(stop.clone(), |event| {
        eprintln!("{event:?}: keeping every finished request");
    });

    let mut runs = Vec::new();
    for concurrency in [1, 4] {
        let mut target = Target::new(BaseUrl::parse(&server.url())?, "speedbench-sim");
        target.streaming = true;
        let (sink, mut live) = ChannelSink::new();
        let watcher = speedbench::tokio::spawn(async move {
            let mut seen = 0;
            while let Some(record) = live.recv().await {
                seen += 1;
                eprintln!(
                    "c={concurrency} #{seen}: {} turn {} in {:.1} ms",
                    record.conversation_id,
                    record.turn_index + 1,
                    record.e2e_latency_ns as f64 / 1e6
                );
            }
            seen
        });
        let run = ProfileRun::new(dataset.clone(), target, out.join(format!("c{concurrency}")))
            .with_load(LoadConfig::closed_loop(concurrency).with_num_conversations(6))
            .with_overwrite(true)
            .with_sink(sink);
        let outcome = run_profile(run, stop.clone(), Arc::new(Progress::default())).await?;
        let streamed = watcher.await?;
        if outcome.status != RunStatus::Completed {
            return Err(format!("c={concurrency}: {:?}", outcome.status).into());
        }
        eprintln!(
            "c={concurrency}: {streamed} records streamed, {} in the file",
            outcome.record_count
        );
        runs.push((
            format!("c={concurrency}"),
            outcome
                .read_back
                .ok_or("records not readable")?
                .file
                .records,
        ));
    }
    let labelled: Vec<(String, &[_])> = runs
        .iter()
        .map(|(l, r)| (l.clone(), r.as_slice()))
        .collect();
    print!(
        "{}",
        AcceptanceMatrix::from_runs(MatrixMetric::AcceptLength, &labelled).to_console()
    );
    server.shutdown().await;
    let _ = std::fs::remove_dir_all(&out);
    std::process::exit(signals.exit_code().map_or(0, i32::from));
}
