//! The Prometheus text parser never panics, and what it accepts
//! round-trips through a canonical rendering (names, labels and values
//! survive re-escaping).
#![no_main]

use libfuzzer_sys::fuzz_target;
use speedbench_client::scrape::parse_exposition;

fn value(v: f64) -> String {
    match v {
        v if v.is_nan() => "NaN".into(),
        f64::INFINITY => "+Inf".into(),
        f64::NEG_INFINITY => "-Inf".into(),
        v => format!("{v:?}"),
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(exposition) = parse_exposition(text) else {
        return;
    };
    let mut canonical = String::new();
    for s in &exposition.samples {
        let labels: Vec<String> = s
            .labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
            .collect();
        if labels.is_empty() {
            canonical.push_str(&format!("{} {}\n", s.name, value(s.value)));
        } else {
            let labels = labels.join(",");
            canonical.push_str(&format!("{}{{{labels}}} {}\n", s.name, value(s.value)));
        }
    }
    let again = parse_exposition(&canonical).expect("the canonical rendering parses");
    assert_eq!(again.samples.len(), exposition.samples.len());
    for (a, b) in exposition.samples.iter().zip(&again.samples) {
        assert_eq!(a.name, b.name);
        assert_eq!(a.labels, b.labels);
        assert!(a.value == b.value || (a.value.is_nan() && b.value.is_nan()));
    }
});
