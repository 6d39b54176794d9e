//! The raw samples written as Parquet and read back with the `parquet`
//! crate's Arrow reader: AIPerf 0.13.0's column names in order, a label
//! column per label, every row's values as computed.

use std::time::Duration;

use arrow_array::{Array, Float64Array, Int64Array, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use speedbench_scrape::{EndpointSamples, RawServerMetrics, Window, parse_exposition};

#[test]
fn the_raw_samples_read_back_in_aiperfs_columns() {
    let mut samples = EndpointSamples::new();
    let texts = [
        (
            100,
            "# HELP tok Prompt tokens.\n# TYPE tok counter\ntok_total{model=\"m\"} 10\n# TYPE kv gauge\nkv{engine=\"0\"} 0.5\n# TYPE lat histogram\nlat_bucket{le=\"1\"} 1\nlat_bucket{le=\"+Inf\"} 2\nlat_sum 3\nlat_count 2\n",
        ),
        (
            200,
            "# HELP tok Prompt tokens.\n# TYPE tok counter\ntok_total{model=\"m\"} 25\n# TYPE kv gauge\nkv{engine=\"0\"} 0.75\n# TYPE lat histogram\nlat_bucket{le=\"1\"} 4\nlat_bucket{le=\"+Inf\"} 6\nlat_sum 9.5\nlat_count 6\n",
        ),
    ];
    for (at, text) in texts {
        samples.record(&parse_exposition(text).unwrap(), at, Duration::ZERO);
    }
    let window = Window {
        start: Some(150),
        end: None,
    };
    let raw = RawServerMetrics::of(&[("http://h/metrics".into(), samples)], window);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server_metrics_export.parquet");
    assert_eq!(raw.write_parquet(&path).unwrap(), 4);
    let file = std::fs::File::open(&path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let batches: Vec<_> = reader.map(Result::unwrap).collect();
    assert_eq!(batches.len(), 1);
    let b = &batches[0];
    let schema = b.schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(
        names,
        [
            "endpoint_url",
            "metric_name",
            "metric_type",
            "unit",
            "description",
            "timestamp_ns",
            "engine",
            "model",
            "value",
            "sum",
            "count",
            "bucket_le",
            "bucket_count"
        ]
    );
    let text = |name: &str| -> Vec<Option<String>> {
        let a = b
            .column_by_name(name)
            .unwrap()
            .as_any()
            .downcast_ref::<StringArray>()
            .unwrap();
        (0..a.len())
            .map(|i| a.is_valid(i).then(|| a.value(i).to_string()))
            .collect()
    };
    let number = |name: &str| -> Vec<Option<f64>> {
        let a = b
            .column_by_name(name)
            .unwrap()
            .as_any()
            .downcast_ref::<Float64Array>()
            .unwrap();
        (0..a.len())
            .map(|i| a.is_valid(i).then(|| a.value(i)))
            .collect()
    };
    // Families by name: kv (gauge), lat (histogram, two buckets), tok
    // (counter, from its sample before the window: 25 - 10).
    let s = |v: &str| Some(v.to_string());
    assert_eq!(text("metric_name"), [s("kv"), s("lat"), s("lat"), s("tok")]);
    assert_eq!(
        text("metric_type"),
        [s("gauge"), s("histogram"), s("histogram"), s("counter")]
    );
    assert_eq!(text("engine"), [s("0"), None, None, None]);
    assert_eq!(text("model"), [None, None, None, s("m")]);
    assert_eq!(text("bucket_le"), [None, s("1"), s("+Inf"), None]);
    assert_eq!(number("value"), [Some(0.75), None, None, Some(15.0)]);
    assert_eq!(number("bucket_count"), [None, Some(3.0), Some(4.0), None]);
    assert_eq!(number("count"), [None, Some(4.0), Some(4.0), None]);
    assert_eq!(number("sum"), [None, Some(6.5), Some(6.5), None]);
    assert_eq!(text("description")[3], s("Prompt tokens."));
    let times = b
        .column_by_name("timestamp_ns")
        .unwrap()
        .as_any()
        .downcast_ref::<Int64Array>()
        .unwrap();
    assert!(times.iter().all(|t| t == Some(200)));
}
