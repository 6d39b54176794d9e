//! What a run says as it goes and when it ends, as text: the lines
//! `speedbench` prints (progress, the preflight, the summary tables, where
//! every file went), for any front end that shows a run. An [`Observer`]
//! prints them; a front end of its own may print them differently or not.
//!
//! [`Observer`]: crate::Observer

use std::path::Path;

use speedbench_client::Preflight;
use speedbench_dataset::PublicDataset;

mod end;
mod progress;

pub use end::run_end;
pub use progress::{final_line, progress_line, rate_and_errors};

/// One piece of a run's text and where it goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Text {
    /// Results (tables): stdout, as written (newlines included).
    Out(String),
    /// Progress and what happened: stderr, one line.
    Err(String),
}

impl Text {
    /// Writes it where it goes: stdout as is, stderr as a line.
    pub fn print(&self) {
        match self {
            Text::Out(text) => print!("{text}"),
            Text::Err(line) => eprintln!("{line}"),
        }
    }
}

/// A loaded public dataset in one line: its name, size and origin.
pub fn loaded_line(loaded: &PublicDataset) -> String {
    format!(
        "{}: {} conversations, {} turns, from {}",
        loaded.spec.name,
        loaded.dataset.conversations.len(),
        loaded.dataset.turn_count(),
        loaded.origin
    )
}

/// `--limit N` kept `kept` of `before` rows.
pub fn limited_line(limit: usize, kept: usize, before: usize) -> String {
    format!("--limit {limit}: {kept} of {before} rows kept (the first {limit} of each category)")
}

/// A run staged in `dir` for the store `url`.
pub fn staging_line(url: &crate::StoreUrl, dir: &Path) -> String {
    format!(
        "uploading to {url} (the run is staged in {})",
        dir.display()
    )
}

/// The engine, and how it became known.
pub fn engine_line(engine: speedbench_client::Engine, source: &crate::EngineSource) -> String {
    match source {
        crate::EngineSource::Named => format!("engine: {engine} (--engine)"),
        crate::EngineSource::Detected(evidence) => format!("engine: {engine} ({evidence})"),
    }
}

/// The sampling fields every request carries, said before the first one,
/// so that nobody benchmarks sampled, uncapped decoding by accident:
/// `max_tokens` (`--osl`) and every `--extra-inputs` field, or what the
/// server decides when one is missing.
///
/// ```
/// use serde_json::json;
/// use speedbench_run::text::sampling_line;
///
/// let fields = json!({"temperature": 0, "top_p": 1}).as_object().unwrap().clone();
/// assert_eq!(
///     sampling_line(Some(4096), &fields),
///     "sampling: max_tokens 4096 (--osl), temperature 0, top_p 1 (--extra-inputs)"
/// );
/// assert_eq!(
///     sampling_line(None, &Default::default()),
///     "sampling: max_tokens not sent (each answer runs as long as the server allows; --osl \
///      caps it), temperature not sent (the server's default, usually sampled decoding; \
///      --extra-inputs temperature:0 for greedy)"
/// );
/// ```
pub fn sampling_line(
    max_tokens: Option<u32>,
    fields: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let cap = match max_tokens {
        Some(n) => format!("max_tokens {n} (--osl)"),
        None => {
            "max_tokens not sent (each answer runs as long as the server allows; --osl caps it)"
                .to_string()
        }
    };
    format!("sampling: {}", field_parts(cap, fields).join(", "))
}

/// [`sampling_line`] for a dataset whose rows give their own output
/// lengths (a trace's `output_length`, ShareGPT's replies): each row's
/// `max_tokens` is its own, and `--osl` is sent only for rows without.
///
/// ```
/// use speedbench_run::text::row_lengths_line;
///
/// assert_eq!(
///     row_lengths_line(Some(64), &Default::default()),
///     "sampling: max_tokens each row's own (the dataset's output lengths; 64 (--osl) for rows \
///      without), temperature not sent (the server's default, usually sampled decoding; \
///      --extra-inputs temperature:0 for greedy)"
/// );
/// ```
pub fn row_lengths_line(
    max_tokens: Option<u32>,
    fields: &serde_json::Map<String, serde_json::Value>,
) -> String {
    let others = match max_tokens {
        Some(n) => format!("{n} (--osl) for rows without"),
        None => "not sent for rows without".to_string(),
    };
    let cap = format!("max_tokens each row's own (the dataset's output lengths; {others})");
    format!("sampling: {}", field_parts(cap, fields).join(", "))
}

/// [`sampling_line`] for synthetic prompts whose output length is forced
/// (`--isl` with `--osl`): each prompt's own `max_tokens`, exactly `--osl`,
/// drawn around it or from `--osl-distribution`, and the `ignore_eos` that
/// forces it.
///
/// ```
/// use serde_json::json;
/// use speedbench_client::synthetic::TokenLength;
/// use speedbench_run::text::forced_output_line;
///
/// let fields = json!({"ignore_eos": true, "temperature": 0}).as_object().unwrap().clone();
/// assert_eq!(
///     forced_output_line(&TokenLength::normal(16, 4.0).into(), &fields),
///     "sampling: max_tokens per prompt, drawn around 16 (stddev 4; --osl, --osl-stddev), \
///      ignore_eos true (--isl with --osl: every answer exactly its max_tokens), \
///      temperature 0 (--extra-inputs)"
/// );
/// ```
pub fn forced_output_line(
    output: &speedbench_client::synthetic::LengthDistribution,
    fields: &serde_json::Map<String, serde_json::Value>,
) -> String {
    use speedbench_client::synthetic::LengthDistribution;
    let cap = match output {
        LengthDistribution::Normal(t) if t.stddev > 0.0 => format!(
            "max_tokens per prompt, drawn around {} (stddev {}; --osl, --osl-stddev)",
            t.mean, t.stddev
        ),
        LengthDistribution::Normal(t) => format!("max_tokens {} (--osl)", t.mean),
        other => format!("max_tokens per prompt, drawn from {other} (--osl-distribution)"),
    };
    let mut rest = fields.clone();
    rest.remove("ignore_eos");
    let mut parts = field_parts(cap, &rest);
    parts.insert(
        1,
        "ignore_eos true (--isl with --osl: every answer exactly its max_tokens)".into(),
    );
    format!("sampling: {}", parts.join(", "))
}

/// The cap, then the `--extra-inputs` fields, then what is not sent.
fn field_parts(cap: String, fields: &serde_json::Map<String, serde_json::Value>) -> Vec<String> {
    let mut parts = vec![cap];
    if !fields.is_empty() {
        let list: Vec<String> = fields.iter().map(|(k, v)| format!("{k} {v}")).collect();
        parts.push(format!("{} (--extra-inputs)", list.join(", ")));
    }
    if !fields.contains_key("temperature") {
        parts.push(
            "temperature not sent (the server's default, usually sampled decoding; \
             --extra-inputs temperature:0 for greedy)"
                .to_string(),
        );
    }
    parts
}

/// Whether per-request acceptance came back, and what to change when not.
pub fn preflight_lines(check: &Preflight) -> Vec<String> {
    let engine = check.engine;
    match (&check.error, &check.acceptance) {
        (Some(error), _) => vec![format!("preflight: the request failed: {error}")],
        (None, Some(acceptance)) => {
            vec![format!("preflight: per-request acceptance: {acceptance}")]
        }
        (None, None) => {
            let mut lines = Vec::new();
            if let Some(dropped) = &check.dropped {
                lines.push(format!(
                    "preflight: the acceptance payload cannot be right: {dropped}"
                ));
            }
            lines.push(format!(
                "preflight: no per-request acceptance came back from {engine}: {}. The server \
                 scrape may still give run-level figures; --engine names another engine, \
                 --no-preflight skips this check",
                check.advice().unwrap_or_default()
            ));
            lines
        }
    }
}

#[cfg(test)]
mod tests {
    use super::end::engine_lines;
    use super::*;
    use speedbench_client::Progress;
    use speedbench_client::scrape::ServerMetricsExport;
    use std::time::Duration;

    #[test]
    fn the_position_line_stops_at_the_last_position_reached_and_names_its_denominator() {
        // An ngram-mod llama-server: 12 accepted at position 1, 6 at 2,
        // none past it of a budget of 5, over 81 - 18 = 63 target passes.
        let counter = |total: f64| serde_json::json!({"type": "counter", "series": [{"stats": {"total": total}}]});
        let positions: Vec<serde_json::Value> = [12.0, 6.0, 0.0, 0.0, 0.0]
            .iter()
            .enumerate()
            .map(|(i, t)| serde_json::json!({"labels": {"position": i.to_string()}, "stats": {"total": t}}))
            .collect();
        let export = ServerMetricsExport::from_json(
            &serde_json::json!({"metrics": {
                "llamacpp:spec_decode_num_accepted_tokens": counter(18.0),
                "llamacpp:spec_decode_num_draft_tokens": counter(60.0),
                "llamacpp:spec_decode_num_drafts": counter(12.0),
                "llamacpp:tokens_predicted": counter(81.0),
                "llamacpp:spec_decode_num_accepted_tokens_per_pos":
                    {"type": "counter", "series": positions}}})
            .to_string(),
        )
        .unwrap();
        let lines = engine_lines(&export);
        let line = lines
            .iter()
            .find(|l| l.contains("by draft position"))
            .unwrap();
        assert_eq!(
            line,
            &format!(
                "server metrics: acceptance by draft position (llamacpp counters, accepted at \
                 position / target passes): 1: {:.3}, 2: {:.3} (positions 3-5: 0)",
                12.0 / 63.0,
                6.0 / 63.0
            )
        );
    }

    #[test]
    fn the_final_line_shows_the_tables_throughput() {
        let p = Progress::default();
        assert_eq!(
            final_line(&p, Some(65.8)),
            "profiled: 0/? requests, 65.80 req/s (request throughput), 0 failed"
        );
        assert_eq!(
            final_line(&p, None),
            "profiled: 0/? requests, ? req/s (request throughput), 0 failed"
        );
    }

    #[test]
    fn a_run_waiting_for_its_start_says_so() {
        let p = Progress::default();
        p.set_waiting_for_start(true);
        assert_eq!(
            progress_line(&p, Duration::from_secs(7)),
            "profiling: 0/? requests, waiting for the start (--start-at or \
             --start-after-barrier), 7s"
        );
    }

    #[test]
    fn the_plain_line_shows_done_total_rate_and_failures() {
        let p = Progress::default();
        let l = progress_line(&p, Duration::from_secs(2));
        assert_eq!(l, "profiling: 0/? requests, 0.0 req/s, 0 failed, 2s");
    }
}
