//! A parser for the Prometheus text exposition format 0.0.4 (and the
//! OpenMetrics text that servers send under the same content type).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::ScrapeError;

/// The type a `# TYPE` line declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MetricType {
    /// Monotonic total (reset on restart).
    Counter,
    /// Instantaneous value.
    Gauge,
    /// Cumulative buckets plus `_sum` and `_count`.
    Histogram,
    /// Quantiles plus `_sum` and `_count`.
    Summary,
    /// No (or an unrecognised) type.
    #[default]
    #[serde(alias = "untyped", other)]
    Unknown,
}

/// One sample line.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The metric name as written on the line (e.g. `x_total`, `x_bucket`).
    pub name: String,
    /// Labels in line order, values unescaped.
    pub labels: Vec<(String, String)>,
    /// The value (`NaN` and infinities included).
    pub value: f64,
    /// The optional timestamp, milliseconds since the Unix epoch.
    pub timestamp_ms: Option<i64>,
}

/// Everything one exposition declared and sampled.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// `# TYPE` declarations by the name they were declared for.
    pub types: BTreeMap<String, MetricType>,
    /// `# HELP` texts (unescaped) by name.
    pub help: BTreeMap<String, String>,
    /// The sample lines in order.
    pub samples: Vec<Sample>,
}

/// What a sample line is, once matched with the declared families.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Role {
    /// A counter, keyed without `_total`.
    Counter,
    /// A gauge or an untyped value (or a summary quantile).
    Gauge(MetricType),
    /// A histogram's cumulative bucket with this `le`.
    Bucket(String),
    /// A histogram's `_sum`.
    HistSum,
    /// A histogram's `_count`.
    HistCount,
}

impl Exposition {
    /// Every counter sample (histogram counts included) as its name with
    /// its labels and its value, in exposition order: what a scraper
    /// compares between two scrapes to tell whether a server's counters
    /// still move.
    ///
    /// ```
    /// let e = speedbench_scrape::parse_exposition(
    ///     "# TYPE x_total counter\nx_total{a=\"1\"} 4\n# TYPE g gauge\ng 2\n",
    /// )?;
    /// assert_eq!(e.counters(), [("x_total{a=1}".to_string(), 4.0)]);
    /// # Ok::<(), speedbench_scrape::ScrapeError>(())
    /// ```
    pub fn counters(&self) -> Vec<(String, f64)> {
        self.samples
            .iter()
            .filter(|s| {
                matches!(
                    self.classify(s),
                    Some((_, Role::Counter | Role::HistCount | Role::Bucket(_), _))
                )
            })
            .map(|s| {
                let labels: Vec<String> =
                    s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                (format!("{}{{{}}}", s.name, labels.join(",")), s.value)
            })
            .collect()
    }

    fn declared(&self, name: &str) -> Option<MetricType> {
        self.types.get(name).copied()
    }

    fn is_counter_family(&self, base: &str) -> bool {
        self.declared(base) == Some(MetricType::Counter)
            || self.declared(&format!("{base}_total")) == Some(MetricType::Counter)
    }

    /// The family key, role and description of a sample, or `None` for
    /// samples that carry no measurement (`_created` timestamps).
    ///
    /// Counters are keyed without `_total`, whichever of `x` or `x_total`
    /// the `# TYPE` line named (prometheus_client names the base, vLLM's and
    /// llama.cpp's expositions name the sample); a `_total` sample with no
    /// declaration at all is taken as a counter too.
    pub(crate) fn classify(&self, sample: &Sample) -> Option<(String, Role, Option<&str>)> {
        let name = sample.name.as_str();
        let help = |n: &str| self.help.get(n).map(String::as_str);
        if let Some(base) = name.strip_suffix("_created")
            && (self.is_counter_family(base)
                || matches!(
                    self.declared(base),
                    Some(MetricType::Histogram | MetricType::Summary)
                ))
        {
            return None;
        }
        if let Some(base) = name.strip_suffix("_total")
            && (self.is_counter_family(base)
                || (self.declared(name).is_none() && self.declared(base).is_none()))
        {
            let help = help(name).or_else(|| help(base));
            return Some((base.to_string(), Role::Counter, help));
        }
        if let Some(kind) = self.declared(name) {
            let role = match kind {
                MetricType::Counter => Role::Counter,
                _ => Role::Gauge(kind),
            };
            return Some((name.to_string(), role, help(name)));
        }
        for (suffix, hist_role) in [
            ("_bucket", None),
            ("_sum", Some(Role::HistSum)),
            ("_count", Some(Role::HistCount)),
        ] {
            let Some(base) = name.strip_suffix(suffix) else {
                continue;
            };
            match (self.declared(base), hist_role) {
                (Some(MetricType::Histogram), None) => {
                    let le = sample
                        .labels
                        .iter()
                        .find(|(k, _)| k == "le")
                        .map(|(_, v)| v.clone())?;
                    return Some((base.to_string(), Role::Bucket(le), help(base)));
                }
                (Some(MetricType::Histogram), Some(role)) => {
                    return Some((base.to_string(), role, help(base)));
                }
                // A summary's `_sum` / `_count` are counters of their own.
                (Some(MetricType::Summary), Some(_)) => {
                    return Some((name.to_string(), Role::Counter, help(base)));
                }
                _ => {}
            }
        }
        Some((name.to_string(), Role::Gauge(MetricType::Unknown), None))
    }
}

fn is_name_start(c: u8, colon: bool) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || (colon && c == b':')
}

fn is_name_char(c: u8, colon: bool) -> bool {
    is_name_start(c, colon) || c.is_ascii_digit()
}

/// A cursor over one line.
struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn skip_ws(&mut self) -> bool {
        let start = self.i;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
        self.i > start
    }

    fn name(&mut self, colon: bool) -> Option<&'a str> {
        let start = self.i;
        if !self.peek().is_some_and(|c| is_name_start(c, colon)) {
            return None;
        }
        while self.peek().is_some_and(|c| is_name_char(c, colon)) {
            self.i += 1;
        }
        std::str::from_utf8(&self.s[start..self.i]).ok()
    }

    /// A token up to the next space, tab or end.
    fn token(&mut self) -> &'a str {
        let start = self.i;
        while self.peek().is_some_and(|c| c != b' ' && c != b'\t') {
            self.i += 1;
        }
        std::str::from_utf8(&self.s[start..self.i]).unwrap_or("")
    }

    /// A quoted label value; the opening quote is next.
    fn quoted(&mut self) -> Result<String, String> {
        if self.peek() != Some(b'"') {
            return Err("expected '\"' to open a label value".into());
        }
        self.i += 1;
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => return Err("unterminated label value".into()),
                Some(b'"') => {
                    self.i += 1;
                    break;
                }
                Some(b'\\') => {
                    self.i += 1;
                    match self.peek() {
                        Some(b'n') => out.push(b'\n'),
                        Some(b'\\') => out.push(b'\\'),
                        Some(b'"') => out.push(b'"'),
                        Some(c) => out.extend_from_slice(&[b'\\', c]),
                        None => return Err("unterminated label value".into()),
                    }
                    self.i += 1;
                }
                Some(c) => {
                    out.push(c);
                    self.i += 1;
                }
            }
        }
        String::from_utf8(out).map_err(|_| "label value is not UTF-8".into())
    }
}

/// A Go-style float: `1.5`, `1e+06`, `NaN`, `+Inf`, `-Inf`.
fn parse_value(t: &str) -> Option<f64> {
    match t {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => t.parse().ok().filter(|v: &f64| !v.is_nan()),
    }
}

fn unescape_help(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

fn parse_type(t: &str) -> MetricType {
    match t {
        "counter" => MetricType::Counter,
        "gauge" => MetricType::Gauge,
        "histogram" => MetricType::Histogram,
        "summary" => MetricType::Summary,
        _ => MetricType::Unknown,
    }
}

fn sample_line(line: &str) -> Result<Sample, String> {
    let mut c = Cursor {
        s: line.as_bytes(),
        i: 0,
    };
    let name = c.name(true).ok_or("expected a metric name")?.to_string();
    let mut spaced = c.skip_ws();
    let mut labels = Vec::new();
    if c.peek() == Some(b'{') {
        labels = label_set(&mut c)?;
        spaced = c.skip_ws();
    }
    if !spaced {
        return Err("expected a space before the value".into());
    }
    let token = c.token();
    let value = parse_value(token).ok_or_else(|| format!("bad value {token:?}"))?;
    c.skip_ws();
    let mut timestamp_ms = None;
    if c.peek().is_some_and(|b| b != b'#') {
        let t = c.token();
        timestamp_ms = Some(match t.parse::<i64>() {
            Ok(ms) => ms,
            // OpenMetrics writes float seconds.
            Err(_) => t
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite())
                .map(|s| (s * 1000.0) as i64)
                .ok_or_else(|| format!("bad timestamp {t:?}"))?,
        });
        c.skip_ws();
    }
    // Anything after `#` is an OpenMetrics exemplar, which is not a measurement.
    if c.peek().is_some_and(|b| b != b'#') {
        return Err("unexpected text after the value".into());
    }
    Ok(Sample {
        name,
        labels,
        value,
        timestamp_ms,
    })
}

/// A sample's `{name="value",...}`, the cursor at its `{`; it is left
/// just past the `}`.
fn label_set(c: &mut Cursor<'_>) -> Result<Vec<(String, String)>, String> {
    let mut labels = Vec::new();
    c.i += 1;
    loop {
        c.skip_ws();
        if c.peek() == Some(b'}') {
            c.i += 1;
            return Ok(labels);
        }
        let key = c.name(false).ok_or("expected a label name")?.to_string();
        c.skip_ws();
        if c.peek() != Some(b'=') {
            return Err(format!("expected '=' after label {key}"));
        }
        c.i += 1;
        c.skip_ws();
        let value = c.quoted()?;
        labels.push((key, value));
        c.skip_ws();
        match c.peek() {
            Some(b',') => c.i += 1,
            Some(b'}') => {}
            _ => return Err("expected ',' or '}' after a label".into()),
        }
    }
}

/// Parses a Prometheus text exposition (format 0.0.4; OpenMetrics text
/// too: `# EOF`, `# UNIT`, float timestamps and exemplars are accepted).
///
/// Metric names may hold `:` (vLLM's `vllm:…`), label values may hold any
/// escaped or unescaped character including `}` and `,`, values may be
/// `NaN`/`+Inf`/`-Inf`, and a timestamp may follow the value.
///
/// ```
/// use speedbench_scrape::{MetricType, parse_exposition};
/// let text = "# TYPE vllm:spec_decode_num_drafts counter\n\
///             vllm:spec_decode_num_drafts_total{model_name=\"a}b\",engine=\"0\"} 43.0\n";
/// let e = parse_exposition(text)?;
/// assert_eq!(e.types["vllm:spec_decode_num_drafts"], MetricType::Counter);
/// assert_eq!(e.samples[0].labels[0], ("model_name".to_string(), "a}b".to_string()));
/// assert_eq!(e.samples[0].value, 43.0);
/// # Ok::<(), speedbench_scrape::ScrapeError>(())
/// ```
pub fn parse_exposition(text: &str) -> Result<Exposition, ScrapeError> {
    let mut out = Exposition::default();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let comment = comment.trim_start_matches([' ', '\t']);
            let mut parts = comment.splitn(3, [' ', '\t']);
            match (parts.next(), parts.next(), parts.next()) {
                (Some("TYPE"), Some(name), Some(kind)) => {
                    out.types.insert(name.to_string(), parse_type(kind.trim()));
                }
                (Some("HELP"), Some(name), help) => {
                    out.help
                        .insert(name.to_string(), unescape_help(help.unwrap_or("")));
                }
                // Other comments, `# UNIT`, `# EOF`.
                _ => {}
            }
            continue;
        }
        let sample = sample_line(line).map_err(|message| ScrapeError::Exposition {
            line: n + 1,
            message,
        })?;
        out.samples.push(sample);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(line: &str) -> Sample {
        let e = parse_exposition(line).unwrap();
        assert_eq!(e.samples.len(), 1, "{line}");
        e.samples[0].clone()
    }

    #[test]
    fn names_with_colons_and_escaped_labels() {
        let s = one(r#"vllm:x_total{a="q\"z",b="x\\y",c="l1\nl2",d="}{,= "} 1e+06"#);
        assert_eq!(s.name, "vllm:x_total");
        let labels: Vec<(&str, &str)> = s
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            labels,
            [
                ("a", "q\"z"),
                ("b", "x\\y"),
                ("c", "l1\nl2"),
                ("d", "}{,= ")
            ]
        );
        assert_eq!(s.value, 1e6);
    }

    #[test]
    fn values_timestamps_whitespace_and_trailing_commas() {
        assert!(one("a NaN").value.is_nan());
        assert_eq!(one("a +Inf").value, f64::INFINITY);
        assert_eq!(one("a -Inf").value, f64::NEG_INFINITY);
        let s = one("a{x=\"1\",} 2.5 1700000000123");
        assert_eq!((s.value, s.timestamp_ms), (2.5, Some(1_700_000_000_123)));
        assert_eq!(s.labels.len(), 1);
        let s = one("a\t{ x = \"1\" }\t3\t");
        assert_eq!((s.value, s.labels[0].1.as_str()), (3.0, "1"));
        let s = one("a{} -0.5 # {trace_id=\"x\"} 1.0");
        assert_eq!((s.value, s.timestamp_ms), (-0.5, None));
        assert_eq!(one("a 1 1.7e9").timestamp_ms, Some(1_700_000_000_000));
    }

    #[test]
    fn help_type_comments_and_blank_lines() {
        let text =
            "# HELP a Line one\\nline \\\\two\n# TYPE a gauge\n\n# just a comment\n# EOF\na 1\n";
        let e = parse_exposition(text).unwrap();
        assert_eq!(e.help["a"], "Line one\nline \\two");
        assert_eq!(e.types["a"], MetricType::Gauge);
        assert_eq!(e.samples.len(), 1);
    }

    #[test]
    fn bad_lines_name_their_line_number() {
        for bad in [
            "a{b=\"1\" 2",
            "a{b=1} 2",
            "a{b=\"1} 2",
            "a one",
            "a 1 2 3",
            "9a 1",
            "a{1b=\"x\"} 2",
        ] {
            let err = parse_exposition(&format!("ok 1\n{bad}\n")).unwrap_err();
            assert!(
                matches!(err, ScrapeError::Exposition { line: 2, .. }),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn families_resolve_total_created_and_histograms() {
        let text = "\
# TYPE vllm:drafts_total counter
vllm:drafts_total{engine=\"0\"} 3.0
# TYPE vllm:drafts_created gauge
vllm:drafts_created{engine=\"0\"} 1.7e9
# TYPE proc counter
proc_total 5
proc_created 1.7e9
llamacpp:n_decode_total 7
# TYPE lat histogram
lat_bucket{le=\"0.1\"} 1
lat_bucket{le=\"+Inf\"} 2
lat_sum 0.3
lat_count 2
lat_created 1.7e9
# TYPE q summary
q{quantile=\"0.5\"} 0.2
q_sum 1
q_count 4
sglang:spec_accept_length 2.5
";
        let e = parse_exposition(text).unwrap();
        let roles: Vec<Option<(String, Role)>> = e
            .samples
            .iter()
            .map(|s| e.classify(s).map(|(k, r, _)| (k, r)))
            .collect();
        let c = |k: &str, r: Role| Some((k.to_string(), r));
        assert_eq!(
            roles,
            [
                c("vllm:drafts", Role::Counter),
                None,
                c("proc", Role::Counter),
                None,
                c("llamacpp:n_decode", Role::Counter),
                c("lat", Role::Bucket("0.1".into())),
                c("lat", Role::Bucket("+Inf".into())),
                c("lat", Role::HistSum),
                c("lat", Role::HistCount),
                None,
                c("q", Role::Gauge(MetricType::Summary)),
                c("q_sum", Role::Counter),
                c("q_count", Role::Counter),
                c(
                    "sglang:spec_accept_length",
                    Role::Gauge(MetricType::Unknown)
                ),
            ]
        );
    }
}
