//! The server scrape against the simulated server: counter deltas over the
//! profiling window equal the server's ground truth, warmup excluded.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use speedbench_client::scrape::{
    MetricType, SERVER_METRICS_FILE_NAME, Scrape, SeriesStats, ServerMetricsExport, Weighting,
};
use speedbench_client::{Load, ProfileRun, Progress, StopHandle, run_profile};
use speedbench_record::read_records_file;
use speedbench_sim::{SimConfig, SpecFlavor};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scraped_counter_deltas_equal_the_ground_truth_without_warmup() {
    let config = SimConfig::speed_bench_demo()
        .with_step_ms(1.0)
        .with_flavor(SpecFlavor::Both);
    let server = start_sim(config).await;
    let dir = tempfile::tempdir().unwrap();
    let mut t = target(&server.url());
    t.max_tokens = Some(64);
    let mut scrape = Scrape::for_target(&t, &[format!("{}/v1/metrics", server.url())]);
    scrape.interval = Duration::from_millis(50);
    scrape.shutdown_delay = Duration::from_millis(120);
    let load = Load::closed_loop(3)
        .with_warmup_requests(4)
        .with_num_conversations(12);
    let run = ProfileRun::new(single_turns(6), t, dir.path())
        .with_load(load)
        .with_run_id("t")
        .with_server_metrics(scrape);
    let outcome = run_profile(run, StopHandle::new(), Arc::new(Progress::default()))
        .await
        .unwrap();
    let truth = server.ground_truth();
    server.shutdown().await;

    let path = outcome.server_metrics_path.expect("export written");
    assert_eq!(path, dir.path().join(SERVER_METRICS_FILE_NAME));
    let export: ServerMetricsExport =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let records = read_records_file(&outcome.records_path).unwrap().records;
    assert_eq!(records.len(), 16);
    let profiled = || records.iter().filter(|r| !r.warmup);
    let warm = || records.iter().filter(|r| r.warmup);
    let sum = |it: &mut dyn Iterator<Item = &speedbench_record::RequestRecord>,
               f: fn(&speedbench_record::SpecDecodeStats) -> u64| {
        it.map(|r| f(r.spec.as_ref().unwrap())).sum::<u64>() as f64
    };
    let steps = sum(&mut profiled(), |s| s.verify_steps.unwrap());
    let accepted = sum(&mut profiled(), |s| s.accepted_draft_tokens);
    let proposed = sum(&mut profiled(), |s| s.proposed_draft_tokens);
    let warm_steps = sum(&mut warm(), |s| s.verify_steps.unwrap());
    assert!(warm_steps > 0.0);
    assert_eq!(steps + warm_steps, truth.steps as f64);

    let total = |name: &str| export.metrics[name].aggregate.as_ref().unwrap().total;
    for engine in ["vllm", "llamacpp"] {
        assert_eq!(total(&format!("{engine}:spec_decode_num_drafts")), steps);
        assert_eq!(
            total(&format!("{engine}:spec_decode_num_accepted_tokens")),
            accepted
        );
        assert_eq!(
            total(&format!("{engine}:spec_decode_num_draft_tokens")),
            proposed
        );
    }
    assert_eq!(total("vllm:request_success"), 12.0);
    // Per position: summed over label sets, and they add up to the accepted total.
    let per_pos = &export.metrics["vllm:spec_decode_num_accepted_tokens_per_pos"];
    let by_position = &per_pos.aggregate.as_ref().unwrap().by_position;
    assert_eq!(by_position.len(), 5);
    assert_eq!(by_position.values().sum::<f64>(), accepted);
    assert!(
        export
            .metrics
            .keys()
            .all(|k| !k.ends_with("_created") && !k.ends_with("_total"))
    );

    // Acceptance the way `vllm bench serve` computes it.
    let spec = export.spec_decode();
    let vllm = spec.iter().find(|s| s.engine == "vllm").unwrap();
    let length = vllm.acceptance_length.as_ref().unwrap();
    assert_eq!(length.weighting, Weighting::TokenWeighted);
    assert_eq!(length.value, 1.0 + accepted / steps);
    assert_eq!(
        vllm.acceptance_rate.as_ref().map(|a| a.value),
        Some(accepted / proposed)
    );
    assert_eq!(vllm.per_position.len(), 5);

    // The gauge has in-window statistics.
    let running = &export.metrics["vllm:num_requests_running"];
    assert_eq!(running.kind, MetricType::Gauge);
    match &running.series[0].stats {
        Some(SeriesStats::Gauge(g)) => assert!(g.count >= 1 && g.max <= 3.0, "{g:?}"),
        other => panic!("{other:?}"),
    }

    // The NIM-style path does not exist on the simulator: counted, not fatal.
    let s = &export.summary;
    assert_eq!(s.endpoints_configured.len(), 2);
    assert_eq!(s.endpoints_successful, [s.endpoints_configured[0].clone()]);
    assert!(s.endpoints_configured[0].ends_with("/metrics"));
    let nim = &s.endpoint_info[&s.endpoints_configured[1]];
    assert_eq!(nim.failed_fetches, nim.total_fetches);
    assert_eq!(nim.last_error.as_deref(), Some("HTTP 404 Not Found"));
    assert!(s.profiling_start_ns.unwrap() < s.profiling_end_ns.unwrap());
}
