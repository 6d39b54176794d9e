use super::*;
use crate::export::{CounterStats, HistogramStats, MetricExport, SliceRates};

fn series(labels: &[(&str, &str)], stats: Option<SeriesStats>) -> SeriesExport {
    SeriesExport {
        endpoint_url: "http://u:secret@10.0.0.7:8000/metrics".into(),
        labels: labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        stats,
    }
}

fn export(families: Vec<(&str, MetricType, &str, Vec<SeriesExport>)>) -> ServerMetricsExport {
    let mut export = ServerMetricsExport::from_json(r#"{"metrics": {}}"#).unwrap();
    for (name, kind, help, series) in families {
        export.metrics.insert(
            name.to_string(),
            MetricExport {
                kind,
                description: Some(help.to_string()),
                series,
                aggregate: None,
            },
        );
    }
    export
}

/// The lines after the `#` comments (which end in a bare LF), CRLF off.
fn body(csv: &str) -> Vec<&str> {
    csv.split_inclusive('\n')
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.trim_end_matches("\r\n"))
        .collect()
}

#[test]
fn endpoints_show_host_port_and_path_without_credentials() {
    assert_eq!(
        endpoint_display("http://10.0.0.7:8000/metrics"),
        "10.0.0.7:8000"
    );
    assert_eq!(endpoint_display("https://h:9/v1/metrics"), "h:9/v1");
    assert_eq!(endpoint_display("http://u:pw@h:9/metrics"), "h:9");
    assert_eq!(endpoint_display("h:9/stats"), "h:9/stats");
}

#[test]
fn label_columns_group_labels_used_together() {
    let a = series(&[("zone", "1"), ("model", "m")], None);
    let b = series(&[("zone", "2"), ("model", "m")], None);
    let c = series(&[("gen", "0")], None);
    let d = series(&[("handler", "/x"), ("method", "GET")], None);
    let rows: Vec<Row<'_>> = [&a, &b, &c, &d]
        .into_iter()
        .map(|s| Row {
            endpoint: String::new(),
            kind: MetricType::Gauge,
            name: "g",
            help: "",
            unit: None,
            series: s,
        })
        .collect();
    // Families {model, zone} (both shared by two series), {gen} and
    // {handler, method} (each in one series: own labels), by first label.
    assert_eq!(
        label_columns(&rows),
        ["gen", "handler", "method", "model", "zone"]
    );
}

#[test]
fn rows_sort_by_filled_columns_then_name() {
    let e = export(vec![
        ("b_gauge", MetricType::Gauge, "B.", vec![series(&[], None)]),
        (
            "a_gauge",
            MetricType::Gauge,
            "A.",
            vec![series(&[("engine", "0")], None)],
        ),
        ("c_gauge", MetricType::Gauge, "C.", vec![series(&[], None)]),
    ]);
    let csv = e.to_csv();
    let names: Vec<&str> = body(&csv)[1..4]
        .iter()
        .map(|l| l.split(',').nth(2).unwrap())
        .collect();
    // Rows with no label column filled ("0") come before "1".
    assert_eq!(names, ["b_gauge", "c_gauge", "a_gauge"]);
}

#[test]
fn cells_are_quoted_and_numbers_formatted_as_python_does() {
    let counter = CounterStats {
        total: 12.0,
        rate: Some(2.0 / 3.0),
        resets: 0,
        slice_rates: SliceRates {
            rate_avg: Some(0.5),
            rate_min: Some(0.0),
            rate_max: Some(1.0),
            rate_std: Some(0.654_321),
        },
    };
    let e = export(vec![(
        "x_requests",
        MetricType::Counter,
        "Requests by \"kind\", all.",
        vec![series(
            &[("kind", "a,b")],
            Some(SeriesStats::Counter(counter)),
        )],
    )]);
    let csv = e.to_csv();
    let lines = body(&csv);
    assert_eq!(
        lines[0],
        "Endpoint,Type,Metric,Unit,total,rate,rate_avg,rate_min,rate_max,rate_std,kind,Description"
    );
    assert_eq!(
        lines[1],
        "10.0.0.7:8000,counter,x_requests,requests,12.0000,0.6667,0.5000,0.0000,1.0000,0.6543,\"a,b\",\"Requests by \"\"kind\"\", all.\""
    );
    assert!(!csv.contains("secret"));
}

#[test]
fn histograms_write_counts_whole_and_buckets_by_bound() {
    let buckets = [("0.5", 1.0), ("10.0", 4.0), ("+Inf", 4.0), ("2.5", 3.0)]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    let full = HistogramStats {
        count: 4.0,
        sum: 9.5,
        avg: Some(2.375),
        count_rate: Some(0.4),
        sum_rate: Some(0.95),
        buckets,
    };
    let empty = HistogramStats {
        count: 0.0,
        sum: 0.0,
        avg: None,
        count_rate: Some(0.0),
        sum_rate: Some(0.0),
        buckets: Default::default(),
    };
    let e = export(vec![(
        "lat_seconds",
        MetricType::Histogram,
        "Latency.",
        vec![
            series(&[("h", "a")], Some(SeriesStats::Histogram(full))),
            series(&[("h", "b")], Some(SeriesStats::Histogram(empty))),
        ],
    )]);
    let csv = e.to_csv();
    let lines = body(&csv);
    assert!(lines[0].ends_with(",p99_estimate,h,Description,buckets"));
    assert_eq!(
        lines[1],
        "10.0.0.7:8000,histogram,lat_seconds,seconds,4,0.4000,9.5000,0.9500,2.3750,,,,,,,,,,a,Latency.,0.5=1;2.5=3;10.0=4;+Inf=4"
    );
    // A series that saw nothing: its count alone, as AIPerf writes it.
    assert_eq!(
        lines[2],
        "10.0.0.7:8000,histogram,lat_seconds,seconds,0,,,,,,,,,,,,,,b,Latency.,"
    );
}

#[test]
fn info_families_are_transposed_after_the_sections() {
    let gauge = crate::export::gauge_stats(&[(0, 1.0)], crate::Window::default()).unwrap();
    let e = export(vec![
        (
            "vllm:cache_config_info",
            MetricType::Gauge,
            "Cache config.",
            vec![series(
                &[("block_size", "16"), ("dtype", "auto")],
                Some(SeriesStats::Gauge(gauge.clone())),
            )],
        ),
        (
            "x",
            MetricType::Gauge,
            "",
            vec![series(&[], Some(SeriesStats::Gauge(gauge)))],
        ),
    ]);
    let csv = e.to_csv();
    let lines = body(&csv);
    assert_eq!(
        lines[0],
        "Endpoint,Type,Metric,Unit,avg,min,max,std,p1,p5,p10,p25,p50,p75,p90,p95,p99,Description"
    );
    assert_eq!(
        lines[1],
        "10.0.0.7:8000,gauge,x,,1.0000,1.0000,1.0000,0.0000,1.0000,1.0000,1.0000,1.0000,1.0000,1.0000,1.0000,1.0000,1.0000,"
    );
    assert_eq!(
        &lines[2..6],
        [
            "",
            "Endpoint,Metric,Key,Value,Description",
            "10.0.0.7:8000,vllm:cache_config_info,block_size,16,Cache config.",
            "10.0.0.7:8000,vllm:cache_config_info,dtype,auto,Cache config."
        ]
    );
}

#[test]
fn python_repr_picks_its_quotes() {
    assert_eq!(py_repr("a"), "'a'");
    assert_eq!(py_repr("it's"), "\"it's\"");
    assert_eq!(py_repr("a'\"b"), "'a\\'\"b'");
    assert_eq!(py_repr("x\\y\n"), "'x\\\\y\\n'");
}
