//! The raw rows against AIPerf 0.13.0's own: fixtures/aiperf/raw-server-metrics
//! holds hand-written `/metrics` bodies and the rows AIPerf's
//! `ServerMetricsParquetExporter` computes from them (its `generate.py`
//! runs AIPerf's own parser, storage and exporter); speedbench's rows over
//! the same bodies and window are the same rows, field for field.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use speedbench_scrape::{EndpointSamples, RawRow, RawServerMetrics, Window, parse_exposition};

fn fixture(name: &str) -> Value {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/aiperf/raw-server-metrics");
    serde_json::from_str(&std::fs::read_to_string(dir.join(name)).unwrap()).unwrap()
}

/// A row as AIPerf's JSON has it: every column, labels by name.
fn ours(row: &RawRow, label_keys: &[String]) -> Value {
    let mut v = serde_json::json!({
        "endpoint_url": row.endpoint_url,
        "metric_name": row.metric_name,
        "metric_type": row.metric_type,
        "unit": row.unit,
        "description": row.description,
        "timestamp_ns": row.timestamp_ns,
        "value": row.value,
        "sum": row.sum,
        "count": row.count,
        "bucket_le": row.bucket_le,
        "bucket_count": row.bucket_count,
    });
    for k in label_keys {
        v[k] = serde_json::json!(row.labels.get(k));
    }
    v
}

fn sort_key(v: &Value) -> (String, i64, String) {
    (
        v["metric_name"].as_str().unwrap().to_string(),
        v["timestamp_ns"].as_i64().unwrap(),
        v["bucket_le"].as_str().unwrap_or("").to_string(),
    )
}

#[test]
fn speedbench_writes_the_rows_aiperfs_exporter_computes() {
    let spec = fixture("scrapes.json");
    let mut samples = EndpointSamples::new();
    for s in spec["scrapes"].as_array().unwrap() {
        let text = s["text"].as_str().unwrap();
        let at = s["timestamp_ns"].as_i64().unwrap();
        samples.record(&parse_exposition(text).unwrap(), at, Duration::ZERO);
    }
    let window = Window {
        start: spec["window"]["start_ns"].as_i64(),
        end: spec["window"]["end_ns"].as_i64(),
    };
    let url = spec["endpoint_url"].as_str().unwrap().to_string();
    let raw = RawServerMetrics::of(&[(url, samples)], window);
    let mut got: Vec<Value> = raw.rows().map(|r| ours(&r, &raw.label_keys)).collect();
    let mut want = fixture("aiperf_rows.json").as_array().unwrap().clone();
    got.sort_by_key(sort_key);
    want.sort_by_key(sort_key);
    assert_eq!(got.len(), want.len(), "{got:#?}");
    for (g, w) in got.iter().zip(&want) {
        for (column, theirs) in w.as_object().unwrap() {
            let mine = &g[column];
            match (mine.as_f64(), theirs.as_f64()) {
                (Some(a), Some(b)) => {
                    assert!((a - b).abs() < 1e-9, "{column}: {a} vs {b}\n{g}\n{w}")
                }
                _ => assert_eq!(mine, theirs, "{column}\n{g}\n{w}"),
            }
        }
    }
    assert_eq!(raw.label_keys, ["engine", "model_name"]);
}
