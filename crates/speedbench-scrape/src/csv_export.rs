//! `server_metrics_export.csv`: an export in AIPerf 0.13.0's CSV layout
//! (`aiperf/server_metrics/csv_exporter.py`, its `formats: [csv]`), so a
//! script or spreadsheet made for AIPerf's file reads speedbench's.
//!
//! The layout, as AIPerf writes it: `#` comment lines, then one section per
//! family type (gauge, counter, histogram, untyped; speedbench adds
//! summaries last), each with its own header: `Endpoint,Type,Metric,Unit`,
//! the type's statistics, one column per label (ordered so that labels
//! used together sit together), `Description`, and for histograms the
//! window's bucket counts (`le=count;...`). Rows are grouped by which label
//! columns they fill, then by name, endpoint and labels. Info families
//! (`*_info` gauges) come last, one row per label. Sections are separated
//! by an empty line; rows end in CRLF, cells are quoted only when they hold
//! a comma, a quote or a line break; numbers have four decimals, counts
//! none, and a statistic with no value is an empty cell.
//!
//! Two columns stay empty where AIPerf fills them: the histogram
//! percentile estimates (`p1_estimate` .. `p99_estimate`, from AIPerf's
//! own polynomial estimator, which speedbench does not implement; the
//! `buckets` cell holds what they would be estimated from), and the
//! counters' `rate_avg` .. `rate_std` unless the run was cut into time
//! slices (as in AIPerf, which computes them from its slices only).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use crate::export::{SeriesExport, SeriesStats, ServerMetricsExport};
use crate::parse::MetricType;
use crate::units::infer_unit;

const GAUGE_KEYS: &[&str] = &[
    "avg", "min", "max", "std", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99",
];
const COUNTER_KEYS: &[&str] = &[
    "total", "rate", "rate_avg", "rate_min", "rate_max", "rate_std",
];
const HISTOGRAM_KEYS: &[&str] = &[
    "count",
    "count_rate",
    "sum",
    "sum_rate",
    "avg",
    "p1_estimate",
    "p5_estimate",
    "p10_estimate",
    "p25_estimate",
    "p50_estimate",
    "p75_estimate",
    "p90_estimate",
    "p95_estimate",
    "p99_estimate",
];

/// The sections, in the order they are written.
const SECTIONS: [MetricType; 5] = [
    MetricType::Gauge,
    MetricType::Counter,
    MetricType::Histogram,
    MetricType::Unknown,
    MetricType::Summary,
];

/// One series and what its row shows about its family.
struct Row<'a> {
    endpoint: String,
    kind: MetricType,
    name: &'a str,
    help: &'a str,
    unit: Option<&'static str>,
    series: &'a SeriesExport,
}

impl Row<'_> {
    /// Info families hold configuration in their labels: transposed.
    fn is_info(&self) -> bool {
        self.name.ends_with("_info")
    }
}

impl ServerMetricsExport {
    /// The export in AIPerf's `server_metrics_export.csv` layout (see the
    /// module docs above for what each part holds).
    ///
    /// ```
    /// use std::time::Duration;
    /// use speedbench_scrape::{EndpointSamples, ServerMetricsExport, Window, parse_exposition};
    ///
    /// let mut samples = EndpointSamples::new();
    /// for (at_ns, waiting) in [(0, 1), (1_000_000_000, 3)] {
    ///     let text = format!("# HELP vllm:num_requests_waiting Requests waiting.\n\
    ///                         ## TYPE vllm:num_requests_waiting gauge\n\
    ///                         vllm:num_requests_waiting{{engine=\"0\"}} {waiting}\n");
    ///     samples.record(&parse_exposition(&text)?, at_ns, Duration::from_millis(2));
    /// }
    /// let export = ServerMetricsExport::from_samples(
    ///     vec![("http://127.0.0.1:8000/metrics".into(), samples)],
    ///     Window { start: Some(0), end: Some(1_000_000_000) },
    ///     Duration::from_millis(333),
    ///     "my-bench 1.0",
    /// );
    /// let csv = export.to_csv();
    /// let rows: Vec<&str> = csv.lines().filter(|l| !l.starts_with('#')).collect();
    /// assert!(rows[0].starts_with("Endpoint,Type,Metric,Unit,avg,min,max,std,p1,"));
    /// assert!(rows[0].ends_with(",p99,engine,Description"));
    /// assert!(csv.contains(",Description\r\n"), "rows end in CRLF, as Python's csv writes them");
    /// assert!(rows[1].starts_with("127.0.0.1:8000,gauge,vllm:num_requests_waiting,requests,2.0000,1.0000,3.0000,"));
    /// # Ok::<(), speedbench_scrape::ScrapeError>(())
    /// ```
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        out.push_str("# speedbench Server Metrics Export (CSV), in AIPerf 0.13.0's layout\n");
        let _ = writeln!(out, "# tool: {}", self.tool);
        out.push_str("# schema_version: 1.0\n");
        out.push_str(
            "# p*_estimate: not computed (AIPerf's own histogram estimator); `buckets` holds the counts\n",
        );
        out.push_str("#\n");
        let mut by_kind: BTreeMap<u8, Vec<Row<'_>>> = BTreeMap::new();
        for (name, family) in &self.metrics {
            let help = family.description.as_deref().unwrap_or("");
            let unit = infer_unit(name, Some(help));
            for series in &family.series {
                let row = Row {
                    endpoint: endpoint_display(&series.endpoint_url),
                    kind: family.kind,
                    name,
                    help,
                    unit,
                    series,
                };
                by_kind
                    .entry(section_index(family.kind))
                    .or_default()
                    .push(row);
            }
        }
        let info: Vec<Row<'_>> = match by_kind.get_mut(&0) {
            Some(gauges) => {
                let (info, rest): (Vec<_>, Vec<_>) = gauges.drain(..).partition(Row::is_info);
                *gauges = rest;
                info
            }
            None => Vec::new(),
        };
        let mut first = true;
        for rows in by_kind.values().filter(|rows| !rows.is_empty()) {
            if !first {
                out.push_str("\r\n");
            }
            write_section(&mut out, rows);
            first = false;
        }
        if !info.is_empty() {
            if !first {
                out.push_str("\r\n");
            }
            write_info_section(&mut out, info);
        }
        out
    }
}

/// Where `kind`'s section comes among [`SECTIONS`].
fn section_index(kind: MetricType) -> u8 {
    SECTIONS.iter().position(|k| *k == kind).unwrap_or(3) as u8
}

/// An endpoint as AIPerf shows it: host, port and path without the
/// scheme and a trailing `/metrics` (and without any user:password part).
fn endpoint_display(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let path = path.split(['?', '#']).next().unwrap_or("");
    format!("{host}{}", path.strip_suffix("/metrics").unwrap_or(path))
}

/// One section: its header and its rows, all of one type.
fn write_section(out: &mut String, rows: &[Row<'_>]) {
    let kind = rows[0].kind;
    let keys = stat_keys(kind);
    let labels = label_columns(rows);
    let mut header: Vec<&str> = vec!["Endpoint", "Type", "Metric", "Unit"];
    header.extend(keys);
    header.extend(labels.iter().map(String::as_str));
    header.push("Description");
    if kind == MetricType::Histogram {
        header.push("buckets");
    }
    write_row(out, header.iter().map(|h| h.to_string()));
    let mut sorted: Vec<(String, &Row<'_>)> = rows
        .iter()
        .map(|row| (sort_key(row, &labels), row))
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    for (_, row) in sorted {
        let mut cells = vec![
            row.endpoint.clone(),
            type_name(kind).to_string(),
            row.name.to_string(),
            row.unit.unwrap_or("").to_string(),
        ];
        cells.extend(stat_cells(kind, row.series.stats.as_ref()));
        for label in &labels {
            let value = (!row.is_info())
                .then(|| row.series.labels.get(label))
                .flatten();
            cells.push(value.cloned().unwrap_or_default());
        }
        cells.push(row.help.to_string());
        if kind == MetricType::Histogram {
            cells.push(bucket_cell(row.series.stats.as_ref()));
        }
        write_row(out, cells);
    }
}

/// The info families, one row per label: `Endpoint,Metric,Key,Value,Description`.
fn write_info_section(out: &mut String, mut rows: Vec<Row<'_>>) {
    write_row(
        out,
        ["Endpoint", "Metric", "Key", "Value", "Description"].map(String::from),
    );
    rows.sort_by(|a, b| (a.name, &a.endpoint).cmp(&(b.name, &b.endpoint)));
    for row in rows {
        for (key, value) in &row.series.labels {
            write_row(
                out,
                [
                    row.endpoint.clone(),
                    row.name.to_string(),
                    key.clone(),
                    value.clone(),
                    row.help.to_string(),
                ],
            );
        }
    }
}

/// A CSV line as Python's `csv.writer` writes it (the `excel` dialect).
fn write_row(out: &mut String, cells: impl IntoIterator<Item = String>) {
    for (i, cell) in cells.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if cell.contains([',', '"', '\r', '\n']) {
            out.push('"');
            out.push_str(&cell.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(&cell);
        }
    }
    out.push_str("\r\n");
}

fn type_name(kind: MetricType) -> &'static str {
    match kind {
        MetricType::Counter => "counter",
        MetricType::Gauge => "gauge",
        MetricType::Histogram => "histogram",
        MetricType::Summary => "summary",
        MetricType::Unknown => "unknown",
    }
}

fn stat_keys(kind: MetricType) -> &'static [&'static str] {
    match kind {
        MetricType::Counter => COUNTER_KEYS,
        MetricType::Histogram => HISTOGRAM_KEYS,
        _ => GAUGE_KEYS,
    }
}

/// A statistic: four decimals; no value (NaN) is an empty cell.
fn number(x: f64) -> String {
    if x.is_nan() {
        String::new()
    } else {
        format!("{x:.4}")
    }
}

/// A count: a whole number without decimals (else as [`number`]).
fn count(x: f64) -> String {
    if x.is_finite() && x.fract() == 0.0 {
        format!("{}", x as i64)
    } else {
        number(x)
    }
}

fn optional(x: Option<f64>) -> String {
    x.map(number).unwrap_or_default()
}

/// The statistic cells of a row of `kind`'s section, in [`stat_keys`]
/// order; empty where the series has no such statistic.
fn stat_cells(kind: MetricType, stats: Option<&SeriesStats>) -> Vec<String> {
    let width = stat_keys(kind).len();
    let mut cells = match (kind, stats) {
        (MetricType::Counter, Some(SeriesStats::Counter(c))) => {
            let s = c.slice_rates;
            vec![
                number(c.total),
                optional(c.rate),
                optional(s.rate_avg),
                optional(s.rate_min),
                optional(s.rate_max),
                optional(s.rate_std),
            ]
        }
        // An empty window is a count of 0 and nothing else, as AIPerf
        // writes it (and reads back as `{"count": 0}`).
        (MetricType::Histogram, Some(SeriesStats::Histogram(h))) if h.count == 0.0 => {
            vec![count(0.0)]
        }
        (MetricType::Histogram, Some(SeriesStats::Gauge(g))) => vec![count(g.count as f64)],
        (MetricType::Histogram, Some(SeriesStats::Histogram(h))) => vec![
            count(h.count),
            optional(h.count_rate),
            number(h.sum),
            optional(h.sum_rate),
            optional(h.avg),
        ],
        (MetricType::Counter | MetricType::Histogram, _) => Vec::new(),
        (_, Some(SeriesStats::Gauge(g))) => [
            g.avg, g.min, g.max, g.std, g.p1, g.p5, g.p10, g.p25, g.p50, g.p75, g.p90, g.p95, g.p99,
        ]
        .map(number)
        .to_vec(),
        _ => Vec::new(),
    };
    cells.resize(width, String::new());
    cells
}

/// A histogram's bucket counts, `le=count` by bound (`+Inf` last).
fn bucket_cell(stats: Option<&SeriesStats>) -> String {
    let Some(SeriesStats::Histogram(h)) = stats else {
        return String::new();
    };
    let bound = |le: &str| match le {
        "+Inf" | "Inf" | "inf" => f64::INFINITY,
        _ => le.parse().unwrap_or(f64::NAN),
    };
    let mut buckets: Vec<(&String, &f64)> = h.buckets.iter().collect();
    buckets.sort_by(|a, b| bound(a.0).total_cmp(&bound(b.0)));
    buckets
        .iter()
        .map(|(le, n)| format!("{le}={}", count(**n)))
        .collect::<Vec<_>>()
        .join(";")
}

/// The label columns of a section, AIPerf's way: labels that occur
/// together in a series form a family (union-find); families by their
/// first label; in each, the labels of one series alone first, then the
/// labels several series share, each part sorted. Info rows' labels are
/// not columns.
fn label_columns(rows: &[Row<'_>]) -> Vec<String> {
    let sets: Vec<BTreeSet<&str>> = rows
        .iter()
        .filter(|r| !r.is_info() && !r.series.labels.is_empty())
        .map(|r| r.series.labels.keys().map(String::as_str).collect())
        .collect();
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    fn root<'s>(parent: &mut BTreeMap<&'s str, &'s str>, x: &'s str) -> &'s str {
        let up = *parent.entry(x).or_insert(x);
        if up == x { x } else { root(parent, up) }
    }
    for set in &sets {
        let labels: Vec<&str> = set.iter().copied().collect();
        for pair in labels.windows(2) {
            let (a, b) = (root(&mut parent, pair[0]), root(&mut parent, pair[1]));
            parent.insert(b, a);
        }
    }
    let all: BTreeSet<&str> = sets.iter().flatten().copied().collect();
    let mut families: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for label in &all {
        let r = root(&mut parent, label);
        families.entry(r).or_default().push(label);
    }
    let shared = |label: &&str| sets.iter().filter(|s| s.contains(label)).count() > 1;
    let mut families: Vec<Vec<&str>> = families.into_values().collect();
    families.sort_by_key(|f| f.iter().min().copied());
    let mut columns = Vec::new();
    for family in families {
        let (bridges, own): (Vec<&str>, Vec<&str>) = family.into_iter().partition(shared);
        columns.extend(own.into_iter().chain(bridges).map(String::from));
    }
    columns
}

/// A row's place in its section: which label columns it fills (as `1`s
/// and `0`s), then its name, endpoint and labels (as Python prints a
/// dict), joined by separators below any printable character.
fn sort_key(row: &Row<'_>, columns: &[String]) -> String {
    let labels = &row.series.labels;
    let filled: String = columns
        .iter()
        .map(|c| if labels.contains_key(c) { '1' } else { '0' })
        .collect();
    let dict = if labels.is_empty() {
        String::new()
    } else {
        let items: Vec<String> = labels
            .iter()
            .map(|(k, v)| format!("{}: {}", py_repr(k), py_repr(v)))
            .collect();
        format!("{{{}}}", items.join(", "))
    };
    format!("{filled}\u{0}{}\u{0}{}\u{0}{dict}", row.name, row.endpoint)
}

/// A string as Python's `repr` prints it (the quotes it picks, the
/// escapes it makes), for AIPerf's tie-breaking order.
fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::from(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

#[cfg(test)]
mod tests;
