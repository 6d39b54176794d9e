//! The time slices of a run (`--slice-duration`) on the HTML page: output
//! token throughput and median latencies per slice against time, so warm-up,
//! saturation and drain show.

use std::fmt::Write;

use speedbench_metrics::TimeSlice;

use crate::svg::{PALETTE, Scale, esc, y_axis};

/// The two charts of a run's slices, or nothing without slices.
pub(crate) fn slice_charts(label: &str, slices: &[TimeSlice]) -> String {
    if slices.is_empty() {
        return String::new();
    }
    let mid = |s: &TimeSlice| (s.figures.start_s + s.figures.end_s) / 2.0;
    let throughput: Vec<(f64, f64)> = slices
        .iter()
        .filter_map(|s| Some((mid(s), s.figures.output_token_throughput?)))
        .collect();
    let p50 = |f: fn(&TimeSlice) -> Option<f64>| -> Vec<(f64, f64)> {
        slices
            .iter()
            .filter_map(|s| Some((mid(s), f(s)?)))
            .collect()
    };
    let latency = p50(|s| s.figures.request_latency_ms.map(|l| l.p50));
    let ttft = p50(|s| s.figures.ttft_ms.map(|l| l.p50));
    let end = slices.last().map_or(0.0, |s| s.figures.end_s);
    let mut out = format!(
        "<h3>Time slices: {}</h3><p class=\"note\">Each point is one slice: throughput from the \
         requests that ended in it, latencies (p50) from those that started in it.</p>",
        esc(label)
    );
    out.push_str(&line_chart(
        "output token throughput (tokens/s)",
        &[("tokens/s", &throughput)],
        end,
    ));
    out.push_str(&line_chart(
        "latency p50 (ms)",
        &[("request latency", &latency), ("TTFT", &ttft)],
        end,
    ));
    out
}

/// A line chart of `series` (name, points `(seconds, value)`) over
/// `0..end_s` seconds.
fn line_chart(y_title: &str, series: &[(&str, &Vec<(f64, f64)>)], end_s: f64) -> String {
    let max = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, v)| *v))
        .fold(0.0, f64::max);
    let Some(scale) = Scale::nice(max) else {
        return String::new();
    };
    let (w, h, left, bottom) = (560.0, 180.0, 60.0, 30.0);
    let x = |t: f64| left + (w - left - 10.0) * if end_s > 0.0 { t / end_s } else { 0.0 };
    let mut svg = format!(
        "<svg class=\"slice-chart\" width=\"{w}\" height=\"{}\" role=\"img\" aria-label=\"{}\">",
        h + bottom,
        esc(y_title)
    );
    y_axis(&mut svg, &scale, left, w - 10.0, h, y_title);
    for (i, (name, points)) in series.iter().enumerate() {
        let colour = PALETTE[i % PALETTE.len()];
        let coords: Vec<String> = points
            .iter()
            .map(|(t, v)| format!("{:.1},{:.1}", x(*t), h - h * v / scale.top))
            .collect();
        let _ = write!(
            svg,
            "<polyline class=\"slice-line\" data-series=\"{}\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"2\" points=\"{}\"/>",
            esc(name),
            coords.join(" ")
        );
    }
    let _ = write!(
        svg,
        "<text class=\"axis-title x-title\" x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\">seconds from the run's start (0-{end_s:.1})</text></svg>",
        left + (w - left) / 2.0,
        h + bottom - 6.0
    );
    svg
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_metrics::time_slices;
    use speedbench_record::RequestRecord;

    #[test]
    fn a_point_per_slice_on_a_shared_time_axis() {
        let req = |start_ms: i64, end_ms: i64| RequestRecord {
            start_unix_ns: start_ms * 1_000_000,
            end_unix_ns: end_ms * 1_000_000,
            e2e_latency_ns: ((end_ms - start_ms) * 1_000_000) as u64,
            completion_tokens: Some(10),
            ..Default::default()
        };
        let slices = time_slices(&[req(0, 500), req(600, 1500), req(1600, 2000)], 1.0);
        assert_eq!(slices.len(), 3);
        let html = slice_charts("m", &slices);
        assert_eq!(html.matches("<svg class=\"slice-chart\"").count(), 2);
        // Throughput: 10 tokens in slice 0 (ends at 0.5 s), 10 in slice 1
        // (1.5 s), 10 in the last (2.0 s, a slice of 0 s: no rate).
        let line = html.split("data-series=\"tokens/s\"").nth(1).unwrap();
        assert_eq!(
            line.split("points=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
                .split(' ')
                .count(),
            2
        );
        assert!(slice_charts("m", &[]).is_empty());
    }
}
