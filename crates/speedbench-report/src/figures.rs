//! The console sections of the figures a run asks for beyond its records'
//! own: goodput against SLOs, the steady state, time slices.

use speedbench_metrics::{
    Goodput, RepeatedMetrics, SteadyState, Summary, TimeSlice, WindowFigures,
};

use crate::format::thousands;
use crate::table::{FirstColumn, titled_table};

/// `N of M requests sent met every SLO (x %): ...`, each SLO with the
/// requests that met it alone.
pub fn goodput_line(g: &Goodput) -> String {
    let share = g
        .good_request_fraction
        .map_or(String::new(), |f| format!(" ({:.1} %)", f * 100.0));
    let slos: Vec<String> = g
        .slos
        .iter()
        .map(|a| {
            let op = if a.slo.metric.larger_is_better() {
                ">="
            } else {
                "<="
            };
            format!(
                "{} {op} {} {} (met by {})",
                a.slo.metric,
                a.slo.threshold,
                a.slo.metric.unit(),
                a.met
            )
        })
        .collect();
    format!(
        "Goodput: {} of {} requests sent met every SLO{share}: {}\n",
        g.good_requests,
        g.attempted,
        slos.join(", ")
    )
}

/// The steady state's table, or the line saying why there is none.
pub(crate) fn steady_state(s: &SteadyState, run_s: Option<f64>) -> String {
    let Some(w) = &s.window else {
        let why = s.why_none.as_deref().unwrap_or("none found");
        return format!("Steady state: none ({why})\n");
    };
    let of_run = run_s.map_or(String::new(), |d| format!(" of {d:.2} s"));
    let title = format!(
        "speedbench | Steady State ({} or more of {} in flight, {:.2}-{:.2} s{of_run})",
        s.level, s.options.concurrency, w.start_s, w.end_s
    );
    let header = ["Metric", "avg", "min", "max", "p99", "p90", "p50", "std"];
    titled_table(&title, &header, &window_rows(w), FirstColumn::Right)
}

fn window_rows(w: &WindowFigures) -> Vec<Vec<String>> {
    let dist = |label: &str, s: &Option<Summary>| {
        s.as_ref().map(|s| {
            std::iter::once(label.to_string())
                .chain([s.avg, s.min, s.max, s.p99, s.p90, s.p50, s.std].map(thousands))
                .collect::<Vec<_>>()
        })
    };
    let scalar = |label: &str, v: Option<f64>| {
        v.map(|v| {
            std::iter::once(label.to_string())
                .chain(std::iter::once(thousands(v)))
                .chain(std::iter::repeat_n("N/A".to_string(), 6))
                .collect::<Vec<_>>()
        })
    };
    [
        dist("Time to First Token (ms)", &w.ttft_ms),
        dist("Inter Token Latency (ms)", &w.inter_token_latency_ms),
        dist("Request Latency (ms)", &w.request_latency_ms),
        scalar("Acceptance Length (tokens/step)", w.acceptance_length),
        scalar(
            "Output Token Throughput (tokens/sec)",
            w.output_token_throughput,
        ),
        scalar("Request Throughput (requests/sec)", w.request_throughput),
        scalar("Requests Started (requests)", Some(w.requests as f64)),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// A table cell: the number, or `-` when there is none.
fn cell(v: Option<f64>) -> String {
    v.map_or("-".to_string(), thousands)
}

/// The median of a distribution, as a cell.
fn p50(s: &Option<Summary>) -> String {
    cell(s.map(|s| s.p50))
}

/// One row per slice: its span, requests started, throughput, median
/// latencies and acceptance length.
pub(crate) fn time_slices(slices: &[TimeSlice]) -> Option<String> {
    let first = slices.first()?;
    let length = first.figures.end_s - first.figures.start_s;
    let header = [
        &["Slice", "Start-End (s)", "Started", "Failed"][..],
        &RATE_COLUMNS,
    ]
    .concat();
    let rows: Vec<Vec<String>> = slices
        .iter()
        .map(|s| {
            let f = &s.figures;
            let partial = if s.complete { "" } else { " (partial)" };
            let lead = [
                s.index.to_string(),
                format!("{:.2}-{:.2}{partial}", f.start_s, f.end_s),
                f.requests.to_string(),
                f.failed.to_string(),
            ];
            let rates = RateCells {
                requests: f.request_throughput,
                tokens: f.output_token_throughput,
                ttft: &f.ttft_ms,
                itl: &f.inter_token_latency_ms,
                latency: &f.request_latency_ms,
                acceptance: f.acceptance_length,
            };
            lead.into_iter().chain(rates.cells()).collect()
        })
        .collect();
    let title = format!("speedbench | Time Slices ({} s each)", trim_float(length));
    Some(titled_table(&title, &header, &rows, FirstColumn::Right))
}

/// The columns a slice and a model share: throughputs, median latencies
/// and acceptance length.
const RATE_COLUMNS: [&str; 6] = [
    "Requests/s",
    "Tokens/s",
    "TTFT p50 (ms)",
    "ITL p50 (ms)",
    "Latency p50 (ms)",
    "Accept len",
];

/// The figures of [`RATE_COLUMNS`], in order.
struct RateCells<'a> {
    requests: Option<f64>,
    tokens: Option<f64>,
    ttft: &'a Option<Summary>,
    itl: &'a Option<Summary>,
    latency: &'a Option<Summary>,
    acceptance: Option<f64>,
}

impl RateCells<'_> {
    fn cells(&self) -> [String; 6] {
        [
            cell(self.requests),
            cell(self.tokens),
            p50(self.ttft),
            p50(self.itl),
            p50(self.latency),
            cell(self.acceptance),
        ]
    }
}

/// One row per model of a run that asked for several
/// ([`RunMetrics::by_model`](speedbench_metrics::RunMetrics::by_model)):
/// requests, throughputs, median latencies and acceptance length.
pub(crate) fn models(by_model: &[speedbench_metrics::ModelMetrics]) -> Option<String> {
    if by_model.is_empty() {
        return None;
    }
    let header = [&["Model", "Succeeded", "Failed"][..], &RATE_COLUMNS].concat();
    let rows: Vec<Vec<String>> = by_model
        .iter()
        .map(|b| {
            let m = &b.metrics;
            let lead = [
                b.model.clone(),
                m.counts.succeeded.to_string(),
                m.counts.failed.to_string(),
            ];
            let rates = RateCells {
                requests: m.request_throughput,
                tokens: m.output_token_throughput,
                ttft: &m.ttft_ms,
                itl: &m.inter_token_latency_ms,
                latency: &m.request_latency_ms,
                acceptance: m.spec_decode.token_weighted_acceptance_length(),
            };
            lead.into_iter().chain(rates.cells()).collect()
        })
        .collect();
    let title = "speedbench | Per Model (each model's requests alone)";
    Some(titled_table(title, &header, &rows, FirstColumn::Left))
}

/// The headline figures of repeated runs: per figure its mean, sample
/// std, coefficient of variation, the Student's t interval across the runs
/// and the range.
pub fn render_repeated(r: &RepeatedMetrics) -> String {
    let header = [
        "Metric", "mean", "std", "CV", "CI low", "CI high", "min", "max", "runs",
    ];
    let rows: Vec<Vec<String>> = r
        .figures
        .iter()
        .map(|f| {
            let s = &f.spread;
            let cv = s.cv.map_or("-".into(), |cv| format!("{:.1}%", cv * 100.0));
            vec![
                format!("{} ({})", f.name, f.unit),
                thousands(s.mean),
                thousands(s.std),
                cv,
                thousands(s.ci_low),
                thousands(s.ci_high),
                thousands(s.min),
                thousands(s.max),
                s.runs.to_string(),
            ]
        })
        .collect();
    let title = format!(
        "speedbench | Across {} runs ({:.0}% Student's t intervals of the mean)",
        r.runs,
        r.confidence_level * 100.0
    );
    titled_table(&title, &header, &rows, FirstColumn::Right)
}

/// Each GPU's power, utilisation, memory and energy over the run, then
/// the energy per output token.
pub fn render_gpu_telemetry(t: &speedbench_scrape::GpuTelemetry) -> String {
    let header = [
        "GPU",
        "Power avg (W)",
        "Power max (W)",
        "Util avg (%)",
        "Memory avg (MiB)",
        "Memory max (MiB)",
        "Energy (J)",
    ];
    let cell = |v: Option<f64>| v.map_or("-".to_string(), thousands);
    let rows: Vec<Vec<String>> = t
        .gpus
        .iter()
        .map(|g| {
            let name = match (&g.hostname, &g.model_name) {
                (Some(h), Some(m)) => format!("{h} {} ({m})", g.gpu),
                (Some(h), None) => format!("{h} {}", g.gpu),
                (None, Some(m)) => format!("{} ({m})", g.gpu),
                (None, None) => g.gpu.clone(),
            };
            vec![
                name,
                cell(g.power_w.map(|p| p.avg)),
                cell(g.power_w.map(|p| p.max)),
                cell(g.utilization_pct.map(|u| u.avg)),
                cell(g.memory_used_mib.map(|m| m.avg)),
                cell(g.memory_used_mib.map(|m| m.max)),
                cell(g.energy_j),
            ]
        })
        .collect();
    let mut out = titled_table(
        "speedbench | GPU Telemetry (DCGM)",
        &header,
        &rows,
        FirstColumn::Left,
    );
    let left_out = match t.gpus_without_energy {
        0 => String::new(),
        n => format!(" ({n} GPU(s) without an energy counter left out)"),
    };
    out.push_str(&match (t.energy_j, t.energy_per_output_token_j) {
        (Some(e), Some(per)) => format!(
            "Energy: {} J over {} output tokens: {per:.4} J per output token{left_out}\n",
            thousands(e),
            t.output_tokens
        ),
        (Some(e), None) => format!("Energy: {} J; no output token{left_out}\n", thousands(e)),
        (None, _) => "Energy: no GPU reported DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION\n".to_string(),
    });
    out
}

/// `30` for 30.0, `2.5` for 2.5.
fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_metrics::{Slo, SloAttainment, SloMetric, SteadyStateOptions};

    #[test]
    fn goodput_line_names_each_slo_and_its_direction() {
        let g = Goodput {
            slos: vec![
                SloAttainment {
                    slo: Slo {
                        metric: SloMetric::TimeToFirstToken,
                        threshold: 200.0,
                    },
                    met: 7,
                },
                SloAttainment {
                    slo: Slo {
                        metric: SloMetric::OutputTokenThroughputPerUser,
                        threshold: 20.0,
                    },
                    met: 5,
                },
            ],
            good_requests: 4,
            attempted: 8,
            good_request_fraction: Some(0.5),
            goodput: Some(2.0),
        };
        assert_eq!(
            goodput_line(&g),
            "Goodput: 4 of 8 requests sent met every SLO (50.0 %): time_to_first_token <= 200 \
             ms (met by 7), output_token_throughput_per_user >= 20 tokens/s/user (met by 5)\n"
        );
    }

    #[test]
    fn repeated_runs_show_mean_std_cv_and_interval() {
        use speedbench_metrics::RunMetrics;
        let run = |rps: f64| RunMetrics {
            request_throughput: Some(rps),
            ..RunMetrics::from_records(&[])
        };
        let (a, b, c) = (run(10.0), run(12.0), run(14.0));
        let out = render_repeated(&RepeatedMetrics::of(&[&a, &b, &c], 0.95));
        // mean 12, std 2, CV 16.7 %, 12 ± 4.3027 × 2/√3 = 7.03 .. 16.97.
        assert!(
            out.contains("Across 3 runs (95% Student's t intervals of the mean)"),
            "{out}"
        );
        assert!(
            out.contains("│ request_throughput_avg (requests/sec) │ 12.00 │ 2.00 │ 16.7% │   7.03 │   16.97 │ 10.00 │ 14.00 │    3 │"),
            "{out}"
        );
    }

    #[test]
    fn a_run_of_several_models_has_a_row_per_model() {
        use speedbench_metrics::RunMetrics;
        use speedbench_record::{RequestRecord, SpecDecodeStats};
        // a: 0 -> 2 s, 20 tokens, 4 of 8 drafts over 4 steps (length 2);
        // b: 1 -> 2 s, 10 tokens, 2 of 2 over 2 steps (length 2).
        let rec = |model: &str, start: i64, tokens: u64, accepted: u64, proposed: u64, steps| {
            RequestRecord {
                model: model.into(),
                start_unix_ns: start * 1_000_000_000,
                end_unix_ns: 2_000_000_000,
                e2e_latency_ns: (2 - start) as u64 * 1_000_000_000,
                completion_tokens: Some(tokens),
                spec: Some(SpecDecodeStats {
                    accepted_draft_tokens: accepted,
                    proposed_draft_tokens: proposed,
                    verify_steps: Some(steps),
                    ..Default::default()
                }),
                ..Default::default()
            }
        };
        let m = RunMetrics::from_records(&[rec("a", 0, 20, 4, 8, 4), rec("b", 1, 10, 2, 2, 2)]);
        let out = models(&m.by_model).unwrap();
        assert!(out.contains("Per Model"), "{out}");
        // a: 1 request over 2 s = 0.50/s, 10 tokens/s, latency 2,000 ms.
        assert!(
            out.contains("│ a     │         1 │      0 │       0.50 │    10.00 │             - │            - │         2,000.00 │       2.00 │"),
            "{out}"
        );
        assert!(models(&[]).is_none());
    }

    #[test]
    fn no_steady_state_says_why() {
        let s = SteadyState {
            options: SteadyStateOptions {
                concurrency: 4,
                threshold: 0.95,
                min_window_s: 1.0,
            },
            level: 4,
            window: None,
            why_none: Some("requests in flight never reached 4".into()),
        };
        assert_eq!(
            steady_state(&s, Some(3.0)),
            "Steady state: none (requests in flight never reached 4)\n"
        );
        assert_eq!(trim_float(30.0), "30");
        assert_eq!(trim_float(2.5), "2.5");
    }
}
