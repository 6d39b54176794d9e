//! The unit of a Prometheus family, inferred from its name and `# HELP`
//! text by AIPerf 0.13.0's rules (`aiperf/server_metrics/units.py`), so
//! the CSV export's `Unit` column reads as AIPerf's does.
//!
//! The order of the sources is AIPerf's: a scale written in the help text
//! (`(0-1)` is a ratio, `(0-100)` a percent), then a unit written there
//! (`(in MiB)`, `in seconds`, `(tokens/s)`), then the name's suffix
//! (`_seconds`, `_tokens_total`, ...; the longest that matches).

use std::sync::LazyLock;

use regex::Regex;

/// The unit `name` (with `help`, its `# HELP` text) is measured in, as
/// AIPerf names it (`seconds`, `tokens`, `requests/s`, `percent`, ...);
/// `None` when neither says.
///
/// ```
/// use speedbench_scrape::infer_unit;
///
/// assert_eq!(infer_unit("vllm:e2e_request_latency_seconds", None), Some("seconds"));
/// assert_eq!(infer_unit("vllm:prompt_tokens", Some("Number of prefill tokens processed.")), Some("tokens"));
/// assert_eq!(infer_unit("vllm:kv_cache_usage_perc", Some("KV-cache usage. 1 means 100 percent usage.")), Some("ratio"));
/// assert_eq!(infer_unit("DCGM_FI_DEV_FB_USED", Some("Framebuffer memory used (in MiB).")), Some("megabytes"));
/// assert_eq!(infer_unit("vllm:num_preemptions", None), None);
/// ```
pub fn infer_unit(name: &str, help: Option<&str>) -> Option<&'static str> {
    let help = help.filter(|h| !h.is_empty());
    help.and_then(scale_in_help)
        .or_else(|| help.and_then(unit_in_help))
        .or_else(|| unit_of_name(name))
}

/// Name suffixes and their units. The longest suffix that matches wins
/// (`_tokens_total` before `_total`).
const SUFFIXES: &[(&str, &str)] = &[
    ("_seconds", "seconds"),
    ("_seconds_total", "seconds"),
    ("_milliseconds", "milliseconds"),
    ("_ms", "milliseconds"),
    ("_ms_total", "milliseconds"),
    ("_nanoseconds", "nanoseconds"),
    ("_ns", "nanoseconds"),
    ("_ns_total", "nanoseconds"),
    ("_bytes", "bytes"),
    ("_kilobytes", "kilobytes"),
    ("_megabytes", "megabytes"),
    ("_gigabytes", "gigabytes"),
    ("_bytes_total", "bytes"),
    ("_total", "count"),
    ("_count", "count"),
    ("_tokens", "tokens"),
    ("_tokens_total", "tokens"),
    ("_requests", "requests"),
    ("_requests_total", "requests"),
    ("request_success", "requests"),
    ("_errors", "errors"),
    ("_errors_total", "errors"),
    ("_error_count", "errors"),
    ("_error_count_total", "errors"),
    ("_reqs", "requests"),
    ("_blocks", "blocks"),
    ("_blocks_total", "blocks"),
    ("_block_count", "blocks"),
    ("_gb_s", "gb/s"),
    ("_ratio", "ratio"),
    ("_percent", "percent"),
    ("_perc", "percent"),
    ("_celsius", "celsius"),
    ("_joules", "joule"),
    ("_watts", "watt"),
];

/// The unit a name's suffix gives (case-insensitive), else `requests`
/// for names holding `num_requests_` (AIPerf's one wildcard pattern).
fn unit_of_name(name: &str) -> Option<&'static str> {
    let lower = name.to_lowercase();
    SUFFIXES
        .iter()
        .filter(|(suffix, _)| lower.ends_with(suffix))
        .max_by_key(|(suffix, _)| suffix.len())
        .map(|(_, unit)| *unit)
        .or_else(|| lower.contains("num_requests_").then_some("requests"))
}

/// A range in the help text: `(0-1)`, `0.0 to 1.0`, `1 means 100 percent`
/// is a ratio; `(0-100)`, `range 0-100`, `0-100%` a percent.
fn scale_in_help(help: &str) -> Option<&'static str> {
    static RATIO: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(concat!(
            r"(?i)\(0(?:\.0)?\s*(?:[-–—]+|to)\s*1(?:\.0)?\)",
            r"|\b0(?:\.0)?\s*(?:[-–—]+|to)\s*1(?:\.0)?\b",
            r"|\brange\s+0(?:\.0)?\s*(?:[-–—]+|to)\s*1(?:\.0)?\b",
            r"|(?:\b|\()1(?:\.0)?\s*(?:means|is|equals?|==?)\s*100\s*(?:%|percent)",
        ))
        .expect("the ratio pattern compiles")
    });
    static PERCENT: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(concat!(
            r"(?i)\(0(?:\.0)?\s*(?:[-–—]+|to)\s*100(?:\.0)?\)",
            r"|\brange\s+0\s*(?:[-–—]+|to)\s*100\b",
            r"|\b0\s*(?:[-–—]+|to)\s*100\s*%",
        ))
        .expect("the percent pattern compiles")
    });
    if RATIO.is_match(help) {
        Some("ratio")
    } else if PERCENT.is_match(help) {
        Some("percent")
    } else {
        None
    }
}

/// Units written as `(in <tag>)` (DCGM's help texts), matched exactly
/// (`mJ` is not `MJ`).
const TAGS: &[(&str, &str)] = &[
    ("MiB", "megabytes"),
    ("GiB", "gigabytes"),
    ("KiB", "kilobytes"),
    ("B", "bytes"),
    ("MB", "megabytes"),
    ("GB", "gigabytes"),
    ("KB", "kilobytes"),
    ("TB", "terabytes"),
    ("C", "celsius"),
    ("°C", "celsius"),
    ("F", "fahrenheit"),
    ("°F", "fahrenheit"),
    ("K", "kelvin"),
    ("Hz", "hertz"),
    ("MHz", "megahertz"),
    ("GHz", "gigahertz"),
    ("W", "watt"),
    ("mW", "milliwatt"),
    ("J", "joule"),
    ("mJ", "millijoule"),
    ("MJ", "megajoule"),
    ("s", "seconds"),
    ("sec", "seconds"),
    ("ms", "milliseconds"),
    ("ns", "nanoseconds"),
    ("us", "microseconds"),
    ("µs", "microseconds"),
    ("GB/s", "gb/s"),
    ("MB/s", "mb/s"),
    ("%", "percent"),
    ("percent", "percent"),
];

/// A unit written in the help text: the first `(in <tag>)`, if its tag is
/// known, else the first of AIPerf's phrases that matches, in its order.
fn unit_in_help(help: &str) -> Option<&'static str> {
    static PARENTHETICAL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"\(in\s+([^\s)]+)\)").expect("the parenthetical pattern compiles")
    });
    static PHRASES: LazyLock<Vec<(Regex, &'static str)>> = LazyLock::new(|| {
        [
            (r"(?:\bin\s+|\()seconds?(?:\b|\))", "seconds"),
            (
                r"(?:\bin\s+|\()(?:milliseconds?|ms)(?:\b|\))",
                "milliseconds",
            ),
            (r"(?:\bin\s+|\()(?:nanoseconds?|ns)(?:\b|\))", "nanoseconds"),
            (r"(?:\bin\s+|\()bytes?(?:\b|\))", "bytes"),
            (r"(?:\bin\s+|\()GB/s(?:\b|\))", "gb/s"),
            (r"(?:\bin\s+|\()MB/s(?:\b|\))", "mb/s"),
            (
                r"(?:\bin\s+|\()tokens?/s(?:ec(?:ond)?)?(?:\b|\))",
                "tokens/s",
            ),
            (
                r"(?:\bin\s+|\()requests?/s(?:ec(?:ond)?)?(?:\b|\))",
                "requests/s",
            ),
            (r"\bin\s+tokens?\b", "tokens"),
        ]
        .into_iter()
        .map(|(pattern, unit)| {
            let re = Regex::new(&format!("(?i){pattern}")).expect("a unit phrase compiles");
            (re, unit)
        })
        .collect()
    });
    if let Some(tag) = PARENTHETICAL.captures(help).and_then(|c| c.get(1))
        && let Some((_, unit)) = TAGS.iter().find(|(t, _)| *t == tag.as_str())
    {
        return Some(unit);
    }
    PHRASES
        .iter()
        .find(|(re, _)| re.is_match(help))
        .map(|(_, unit)| *unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_matching_suffix_wins() {
        assert_eq!(unit_of_name("x_tokens_total"), Some("tokens"));
        assert_eq!(unit_of_name("x_total"), Some("count"));
        assert_eq!(unit_of_name("x_milliseconds"), Some("milliseconds"));
        assert_eq!(unit_of_name("X_SECONDS"), Some("seconds"));
        assert_eq!(unit_of_name("vllm:num_requests_waiting"), Some("requests"));
        assert_eq!(unit_of_name("vllm:request_success"), Some("requests"));
        assert_eq!(unit_of_name("plain"), None);
    }

    #[test]
    fn the_help_text_comes_before_the_name() {
        // A `_percent` name whose help says 0-1 is a ratio.
        assert_eq!(
            infer_unit("hit_percent", Some("Hit rate (0.0-1.0)")),
            Some("ratio")
        );
        assert_eq!(
            infer_unit("util", Some("Utilization (0-100)")),
            Some("percent")
        );
        assert_eq!(infer_unit("util", Some("Busy 0 to 100%")), Some("percent"));
        assert_eq!(
            infer_unit("lat", Some("Request latency in milliseconds")),
            Some("milliseconds")
        );
        assert_eq!(
            infer_unit("power", Some("Power draw (in W).")),
            Some("watt")
        );
        assert_eq!(
            infer_unit("energy", Some("Energy (in mJ).")),
            Some("millijoule")
        );
        assert_eq!(
            infer_unit("x", Some("Throughput (tokens/s)")),
            Some("tokens/s")
        );
        // An unknown tag falls through to the phrases, then the name.
        assert_eq!(
            infer_unit("x_bytes", Some("Size (in parsecs)")),
            Some("bytes")
        );
        assert_eq!(infer_unit("x_bytes", Some("")), Some("bytes"));
    }
}
