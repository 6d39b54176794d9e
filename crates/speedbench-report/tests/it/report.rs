//! End to end: records written to Parquet, read back, and rendered.

use std::path::Path;

use speedbench_metrics::{RunMetrics, SpeedBenchPySample, speed_bench_py_summary};
use speedbench_record::{
    ErrorKind, RecordWriter, RequestRecord, RunManifest, SpecDecodeStats, SpecSource,
    read_records_file,
};
use speedbench_report::{
    AcceptanceMatrix, MatrixMetric, render_category_table, render_run_summary,
};

const MS: u64 = 1_000_000;
const S: i64 = 1_000_000_000;

/// A successful vLLM request (times: wall clock in s, latencies in ms).
#[allow(clippy::too_many_arguments)]
fn vllm(
    run: &str,
    category: &str,
    conv: &str,
    (start_s, end_s): (i64, i64),
    (ttft_ms, e2e_ms): (u64, u64),
    (prompt, completion): (u64, u64),
    (accepted, proposed, steps): (u64, u64, u64),
    histogram: &[u64],
) -> RequestRecord {
    RequestRecord {
        run_id: run.into(),
        conversation_id: conv.into(),
        dataset: "speed_bench_qualitative".into(),
        category: Some(category.into()),
        model: "llama".into(),
        start_unix_ns: start_s * S,
        end_unix_ns: end_s * S,
        ttft_ns: Some(ttft_ms * MS),
        e2e_latency_ns: e2e_ms * MS,
        prompt_tokens: Some(prompt),
        completion_tokens: Some(completion),
        spec: Some(SpecDecodeStats {
            source: Some(SpecSource::Vllm),
            accepted_draft_tokens: accepted,
            proposed_draft_tokens: proposed,
            verify_steps: Some(steps),
            num_spec_tokens: Some(3),
            acceptance_histogram: histogram.to_vec(),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Run "eagle": coding (10/129/43, 4/12/4), math (30/40/10), plus a warmup
/// with a huge TTFT and acceptance, and a math timeout.
fn eagle_run() -> Vec<RequestRecord> {
    let r = "eagle";
    let mut warmup = vllm(
        r,
        "coding",
        "w",
        (90, 99),
        (5000, 9000),
        (1, 9),
        (100, 100, 1),
        &[],
    );
    warmup.warmup = true;
    let timeout = RequestRecord {
        run_id: r.into(),
        category: Some("math".into()),
        start_unix_ns: 102 * S,
        end_unix_ns: 104 * S,
        e2e_latency_ns: 2000 * MS,
        error_kind: Some(ErrorKind::Timeout),
        ..Default::default()
    };
    vec![
        vllm(
            r,
            "coding",
            "q1",
            (100, 101),
            (20, 1000),
            (40, 50),
            (10, 129, 43),
            &[39, 1, 0, 3],
        ),
        vllm(
            r,
            "coding",
            "q2",
            (100, 102),
            (40, 2000),
            (60, 100),
            (4, 12, 4),
            &[2, 1, 0, 1],
        ),
        vllm(
            r,
            "math",
            "q3",
            (101, 104),
            (60, 3000),
            (80, 150),
            (30, 40, 10),
            &[0, 0, 0, 10],
        ),
        warmup,
        timeout,
    ]
}

/// Run "ngram": math only, 5 accepted of 10 in 5 steps.
fn ngram_run() -> Vec<RequestRecord> {
    vec![vllm(
        "ngram",
        "math",
        "q3",
        (0, 1),
        (10, 500),
        (80, 20),
        (5, 10, 5),
        &[1, 3, 1, 0],
    )]
}

/// Writes `records` as a run's Parquet file and reads them back.
fn round_trip(dir: &Path, records: &[RequestRecord]) -> Vec<RequestRecord> {
    let path = dir.join(format!("{}.parquet", records[0].run_id));
    let mut writer = RecordWriter::create(&path).unwrap();
    for r in records {
        writer.append(r).unwrap();
    }
    writer
        .close(&RunManifest {
            run_id: records[0].run_id.clone(),
            ..Default::default()
        })
        .unwrap();
    let file = read_records_file(&path).unwrap();
    assert_eq!(file.records.len(), records.len());
    file.records
}

#[test]
fn parquet_records_render_summary_matrix_and_table() {
    let dir = tempfile::tempdir().unwrap();
    let eagle = round_trip(dir.path(), &eagle_run());
    let ngram = round_trip(dir.path(), &ngram_run());

    // --- Run summary of "eagle" ---------------------------------------
    let summary = render_run_summary(&RunMetrics::from_records(&eagle));
    let row = |label: &str| -> Vec<String> {
        let line = summary
            .lines()
            .find(|l| l.split('│').nth(1).map(str::trim) == Some(label))
            .unwrap_or_else(|| panic!("no {label:?} in\n{summary}"));
        let cells: Vec<String> = line.split('│').map(|c| c.trim().to_string()).collect();
        cells[2..cells.len() - 1].to_vec()
    };
    // TTFT [20, 40, 60] ms (warmup's 5000 ms excluded): avg 40;
    // p99: h = .99*2 = 1.98 -> 40 + .98*20 = 59.6; p90: h = 1.8 -> 56;
    // std = sqrt((400 + 0 + 400) / 3) = 16.33.
    assert_eq!(
        row("Time to First Token (ms)"),
        [
            "40.00", "20.00", "60.00", "59.60", "56.00", "40.00", "16.33"
        ]
    );
    // Window 100 s .. 104 s = 4 s (timeout inside, warmup outside);
    // 50 + 100 + 150 = 300 tokens / 4 s = 75; 3 successes / 4 s = 0.75.
    assert_eq!(row("Output Token Throughput (tokens/sec)")[0], "75.00");
    assert_eq!(row("Request Throughput (requests/sec)")[0], "0.75");
    assert_eq!(row("Request Count (requests)")[0], "3.00");
    // Token-weighted AL = 1 + (10+4+30)/(43+4+10) = 1 + 44/57 = 1.77;
    // overall rate = 44/(129+12+40) = 44/181 = 24.31 %.
    assert_eq!(row("Token-Weighted Acceptance Length (ratio)")[0], "1.77");
    assert_eq!(row("Overall Draft Acceptance Rate (%)")[0], "24.31");
    // Pooled [41, 2, 0, 14] over 57 steps: 71.9 -> 72, 3.5 -> 4, 0, 24.6 -> 25.
    assert!(summary.contains(
        "  Accepted drafts per step (% of steps):  0: 72%   1: 4%   2: 0%   3: 25%   \
         (57 steps, 3 requests with histograms)\n"
    ));
    assert!(
        summary.ends_with("Errors: 1 of 4 requests failed (timeout: 1); statistics exclude them\n")
    );

    // --- Matrix of both runs -----------------------------------------
    let runs = [
        ("llama-ngram".to_string(), ngram.as_slice()),
        ("llama-eagle".to_string(), eagle.as_slice()),
    ];
    let matrix = AcceptanceMatrix::from_runs(MatrixMetric::AcceptLength, &runs);
    // eagle: coding 1 + 14/47 = 1.30, math 1 + 30/10 = 4.00 (the warmup's
    // 1 + 100/1 is excluded), Overall (1.2979 + 4) / 2 = 2.65;
    // ngram: math 1 + 5/5 = 2.00, no coding, Overall 2.00. Rows sorted.
    let csv = matrix.to_csv();
    assert_eq!(
        csv,
        "Model,coding,math,Overall\r\n\
         llama-eagle,1.30,4.00,2.65\r\n\
         llama-ngram,,2.00,2.00\r\n"
    );
    let csv_path = dir.path().join("speed_bench_report.csv");
    std::fs::write(&csv_path, &csv).unwrap();
    assert_eq!(std::fs::read(&csv_path).unwrap(), csv.as_bytes());
    assert!(
        matrix
            .to_console()
            .contains("│ llama-ngram │      - │ 2.00 │    2.00 │")
    );
    let json = matrix.to_json();
    assert_eq!(json["rows"][0]["requests"], serde_json::json!([2, 1]));
    assert_eq!(json["rows"][1]["cells"][0], serde_json::Value::Null);

    // --- llama.cpp-style category table of "eagle" -------------------
    // coding: 2 ok, latency (1 + 2) / 2 = 1.500 s, rate 14/141 = 0.0993;
    // math: 1 ok (the timeout only counts as failed), 3.000 s, 30/40 = 0.75;
    // overall: 3 ok, (1 + 2 + 3) / 3 = 2.000 s, 44/181 = 0.2431.
    // No llama.cpp timings: speeds n/a. Every row is single-turn: one
    // request is one sample.
    let samples = SpeedBenchPySample::from_records_in_dispatch_order(&eagle);
    let table = render_category_table(&speed_bench_py_summary(&samples));
    assert_eq!(
        table,
        "category  samples  avg_prompt_t/s  avg_pred_t/s  avg_latency  accept_rate  avg_uncached_prompt_t/s\n\
         --------  -------  --------------  ------------  -----------  -----------  -----------------------\n\
         coding    2        n/a             n/a           1.500s       0.0993       n/a                    \n\
         math      1        n/a             n/a           3.000s       0.7500       n/a                    \n\
         overall   3        n/a             n/a           2.000s       0.2431       n/a                    \n"
    );
}
