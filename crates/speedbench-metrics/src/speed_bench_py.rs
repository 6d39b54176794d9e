//! llama.cpp's SPEED-Bench client, `tools/server/bench/speed-bench/speed_bench.py`:
//! its per-sample results, its per-category summary and its `--output`
//! JSON layout, computed from speedbench records.
//!
//! speed_bench.py's unit is a *sample*: one dataset row, every turn of it
//! sent in order with the replies as history, its turns' numbers summed.
//! speedbench records one row per request (turn), so
//! [`SpeedBenchPySample::from_records`] first joins the turns of each
//! conversation back into samples, then applies `run_one`'s arithmetic;
//! [`SpeedBenchPyRow::of`] is `summarize_group`. The serde types read the
//! files speed_bench.py writes as well as the ones speedbench writes (the
//! few fields speedbench adds are optional).
//!
//! The prompt rate of a multi-turn sample is speed_bench.py's
//! `Σprompt_tokens / Σprompt_ms`, where `prompt_tokens` is `usage`'s full
//! prompt (cached history included) but `prompt_ms` covers only the tokens
//! llama-server prefilled: with the prompt cache on (its default) that
//! rate is inflated. [`SpeedBenchPySample::uncached_prompt_per_second`]
//! is the cache-correct `Σtimings.prompt_n / Σprompt_ms` beside it.
//!
//! ```
//! use speedbench_metrics::{SpeedBenchPyRow, SpeedBenchPySample, speed_bench_py_summary};
//! use speedbench_record::{RequestRecord, ServerTimings};
//!
//! // One two-turn conversation; turn 2 reuses 66 cached prompt tokens.
//! let turn = |index: u64, usage_prompt, prompt_n, cache_n| RequestRecord {
//!     request_index: index,
//!     conversation_id: "q1".into(),
//!     turn_index: index as u32,
//!     category: Some("qa".into()),
//!     e2e_latency_ns: 500_000_000,
//!     start_unix_ns: index as i64 * 600_000_000,
//!     end_unix_ns: index as i64 * 600_000_000 + 500_000_000,
//!     prompt_tokens: Some(usage_prompt),
//!     completion_tokens: Some(20),
//!     server_timings: Some(ServerTimings {
//!         prompt_n: Some(prompt_n),
//!         cache_n: Some(cache_n),
//!         prompt_ms: Some(100.0),
//!         predicted_n: Some(20),
//!         predicted_ms: Some(400.0),
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! };
//! let samples = SpeedBenchPySample::from_records(&[turn(0, 41, 41, 0), turn(1, 81, 15, 66)]);
//! assert_eq!(samples.len(), 1);
//! // speed_bench.py: (41 + 81) / 0.2 s = 610 t/s; prefilled: (41 + 15) / 0.2 s = 280 t/s.
//! assert_eq!(samples[0].prompt_per_second, Some(610.0));
//! assert_eq!(samples[0].uncached_prompt_per_second, Some(280.0));
//! let rows: Vec<SpeedBenchPyRow> = speed_bench_py_summary(&samples);
//! assert_eq!(rows[1].category, "overall");
//! assert_eq!(rows[1].avg_latency, Some(1.0));
//! ```

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use speedbench_record::RequestRecord;

use crate::mean::mean;

/// Name of the row [`speed_bench_py_summary`] appends over every sample.
pub const OVERALL: &str = "overall";

/// One sample's result: speed_bench.py's `RequestResult`, one element of
/// the JSON's `results`.
///
/// On a failed sample (`ok == false`) speed_bench.py zeroes every counter
/// and leaves every rate and duration `None`; `latency_s` then holds the
/// turns that succeeded before the failure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedBenchPySample {
    /// The row's `question_id` (speedbench: the records' `conversation_id`).
    pub id: String,
    /// The row's category; `None` for records without one (they count in
    /// the `overall` row only).
    pub category: Option<String>,
    /// True when every turn of the sample succeeded.
    pub ok: bool,
    /// Turns of the sample, those never sent (speedbench's `skipped` rows)
    /// included, as speed_bench.py counts `len(sample.turns)`.
    pub turns: u64,
    /// Client end-to-end latency summed over the sample's turns, seconds
    /// (on a failure: over the turns before the failed one).
    pub latency_s: f64,
    /// Σ per turn `usage.prompt_tokens`, or `timings.prompt_n` where usage
    /// gives none or 0 (cached tokens included); 0 when failed.
    pub prompt_tokens: u64,
    /// Σ per turn `usage.completion_tokens`, or `timings.predicted_n`
    /// where usage gives none or 0; 0 when failed.
    pub completion_tokens: u64,
    /// Σ per turn prompt plus completion tokens (as above); 0 when failed.
    pub total_tokens: u64,
    /// `finish_reason` of the last turn; `None` when failed.
    pub finish_reason: Option<String>,
    /// Σ drafted tokens (`timings.draft_n`, 0 where absent); 0 when failed.
    pub draft_n: u64,
    /// Σ accepted draft tokens (`timings.draft_n_accepted`); 0 when failed.
    pub draft_n_accepted: u64,
    /// Σ `timings.prompt_ms` (0 where absent); `None` when that sum is 0
    /// or the sample failed.
    pub prompt_ms: Option<f64>,
    /// Σ `timings.predicted_ms`; `None` when 0 or failed.
    pub predicted_ms: Option<f64>,
    /// Single-turn sample: the server's `timings.prompt_per_second`.
    /// Multi-turn: `prompt_tokens / (prompt_ms / 1000)` (cached history
    /// tokens counted, so inflated when the prompt cache hits); `None`
    /// without timings or when failed.
    pub prompt_per_second: Option<f64>,
    /// Single-turn: `timings.predicted_per_second`. Multi-turn:
    /// `completion_tokens / (predicted_ms / 1000)`.
    pub predicted_per_second: Option<f64>,
    /// What failed (`None` when `ok`).
    pub error: Option<String>,
    /// speedbench addition: Σ `timings.prompt_n`, the prompt tokens the
    /// server prefilled (cache hits excluded); `None` when a turn did not
    /// report it, when failed, and in speed_bench.py's files.
    #[serde(default)]
    pub prompt_n: Option<u64>,
    /// speedbench addition: Σ `timings.cache_n`, the prompt tokens served
    /// from the prompt cache; `None` as for `prompt_n`.
    #[serde(default)]
    pub cache_n: Option<u64>,
    /// speedbench addition: `prompt_n / (prompt_ms / 1000)`, the
    /// cache-correct prefill rate, for single- and multi-turn samples alike;
    /// `None` without `prompt_n` or `prompt_ms`.
    #[serde(default)]
    pub uncached_prompt_per_second: Option<f64>,
}

/// Python's `a or b` on optional counts: a missing or zero value falls
/// through.
fn or_nonzero(a: Option<u64>, b: Option<u64>) -> u64 {
    a.filter(|&v| v != 0).or(b.filter(|&v| v != 0)).unwrap_or(0)
}

impl SpeedBenchPySample {
    /// The samples of a run: the non-warmup `records` joined into one
    /// sample per conversation run, in completion order (the order
    /// speed_bench.py's `as_completed` gives).
    ///
    /// Turns are joined in dispatch order (`request_index`): turn 0 starts
    /// a sample, and turn `k` joins the sample of its `conversation_id`
    /// whose turn `k - 1` ended last no later than turn `k` started (turns
    /// of one conversation run are sent one after another, so a
    /// conversation recycled by `--num-conversations` gives several
    /// samples with one `id`). A turn with no such sample starts its own.
    /// Completion order is the end of a sample's last record, ties broken
    /// by dispatch order.
    pub fn from_records(records: &[RequestRecord]) -> Vec<SpeedBenchPySample> {
        group_samples(records)
            .iter()
            .map(|turns| SpeedBenchPySample::of_turns(turns))
            .collect()
    }

    /// [`SpeedBenchPySample::from_records`] in dispatch order (by each
    /// sample's first request) instead: the dataset order in which
    /// speed_bench.py lists its categories.
    pub fn from_records_in_dispatch_order(records: &[RequestRecord]) -> Vec<SpeedBenchPySample> {
        let mut groups = group_samples(records);
        groups.sort_by_key(|turns| turns[0].request_index);
        groups
            .iter()
            .map(|turns| SpeedBenchPySample::of_turns(turns))
            .collect()
    }

    /// speed_bench.py's `run_one` over the records of one sample, in turn
    /// order. `turns` must not be empty.
    pub fn of_turns(turns: &[&RequestRecord]) -> SpeedBenchPySample {
        match turns.iter().find(|r| !r.is_success()) {
            Some(failed) => SpeedBenchPySample::failed(turns, failed),
            None => SpeedBenchPySample::succeeded(turns),
        }
    }

    /// A sample one of whose turns failed: speed_bench.py adds a turn's
    /// latency only once it succeeded, and counts no token.
    fn failed(turns: &[&RequestRecord], failed: &RequestRecord) -> SpeedBenchPySample {
        let first = turns.first().copied().cloned().unwrap_or_default();
        let latency_s = turns
            .iter()
            .take_while(|r| r.is_success())
            .map(|r| r.e2e_latency_ns as f64 / 1e9)
            // From +0.0, as speed_bench.py adds (`Sum` for floats starts at -0.0).
            .fold(0.0, |sum, s| sum + s);
        let kind = failed.error_kind.map_or("error", |k| k.as_str());
        let message = failed.error_message.as_deref().unwrap_or("no message");
        SpeedBenchPySample {
            id: first.conversation_id,
            category: first.category,
            ok: false,
            turns: turns.len() as u64,
            latency_s,
            prompt_tokens: 0,
            completion_tokens: 0,
            total_tokens: 0,
            finish_reason: None,
            draft_n: 0,
            draft_n_accepted: 0,
            prompt_ms: None,
            predicted_ms: None,
            prompt_per_second: None,
            predicted_per_second: None,
            error: Some(format!(
                "turn {} of {} failed ({kind}): {message}",
                failed.turn_index + 1,
                turns.len()
            )),
            prompt_n: None,
            cache_n: None,
            uncached_prompt_per_second: None,
        }
    }

    /// A sample whose every turn succeeded: its turns summed; a single
    /// turn keeps the server's own rates, several get them recomputed
    /// from the sums.
    fn succeeded(turns: &[&RequestRecord]) -> SpeedBenchPySample {
        let first = turns.first().copied().cloned().unwrap_or_default();
        let single = turns.len() == 1;
        let mut latency_s = 0.0;
        let (mut prompt_tokens, mut completion_tokens) = (0u64, 0u64);
        let (mut draft_n, mut draft_n_accepted) = (0u64, 0u64);
        let (mut prompt_ms, mut predicted_ms) = (0.0f64, 0.0f64);
        let (mut prompt_n, mut cache_n) = (Some(0u64), Some(0u64));
        let (mut prompt_per_second, mut predicted_per_second) = (None, None);
        let mut finish_reason = None;
        for r in turns {
            let t = r.server_timings.clone().unwrap_or_default();
            latency_s += r.e2e_latency_ns as f64 / 1e9;
            prompt_tokens += or_nonzero(r.prompt_tokens, t.prompt_n);
            completion_tokens += or_nonzero(r.completion_tokens, t.predicted_n);
            if let Some(s) = &r.spec {
                draft_n += s.proposed_draft_tokens;
                draft_n_accepted += s.accepted_draft_tokens;
            }
            prompt_ms += t.prompt_ms.unwrap_or(0.0);
            predicted_ms += t.predicted_ms.unwrap_or(0.0);
            prompt_n = prompt_n.zip(t.prompt_n).map(|(a, b)| a + b);
            cache_n = cache_n.zip(t.cache_n).map(|(a, b)| a + b);
            if single {
                prompt_per_second = t.prompt_per_second;
                predicted_per_second = t.predicted_per_second;
            }
            finish_reason = r.finish_reason.clone();
        }
        let per_second = |tokens: u64, ms: f64| (ms > 0.0).then(|| tokens as f64 / (ms / 1000.0));
        if !single {
            prompt_per_second = per_second(prompt_tokens, prompt_ms);
            predicted_per_second = per_second(completion_tokens, predicted_ms);
        }
        SpeedBenchPySample {
            id: first.conversation_id,
            category: first.category,
            ok: true,
            turns: turns.len() as u64,
            latency_s,
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens + completion_tokens,
            finish_reason,
            draft_n,
            draft_n_accepted,
            prompt_ms: (prompt_ms > 0.0).then_some(prompt_ms),
            predicted_ms: (predicted_ms > 0.0).then_some(predicted_ms),
            prompt_per_second,
            predicted_per_second,
            error: None,
            prompt_n,
            cache_n,
            uncached_prompt_per_second: prompt_n.and_then(|n| per_second(n, prompt_ms)),
        }
    }
}

/// The records of each sample, turn order within, samples in completion
/// order (see [`SpeedBenchPySample::from_records`]).
fn group_samples(records: &[RequestRecord]) -> Vec<Vec<&RequestRecord>> {
    let mut sorted: Vec<&RequestRecord> = records.iter().filter(|r| !r.warmup).collect();
    sorted.sort_by_key(|r| r.request_index);
    let mut samples: Vec<Vec<&RequestRecord>> = Vec::new();
    // Samples waiting for turn `k` of a conversation: (id, k) -> indices.
    let mut open: HashMap<(&str, u32), Vec<usize>> = HashMap::new();
    for r in sorted {
        let key = (r.conversation_id.as_str(), r.turn_index);
        let joined = (r.turn_index > 0)
            .then(|| open.get_mut(&key))
            .flatten()
            .and_then(|waiting| {
                let pick = waiting
                    .iter()
                    .enumerate()
                    .filter(|&(_, &s)| last_end(&samples[s]) <= r.start_unix_ns)
                    .max_by_key(|&(_, &s)| last_end(&samples[s]))
                    .map(|(i, _)| i)?;
                Some(waiting.remove(pick))
            });
        let index = match joined {
            Some(s) => {
                samples[s].push(r);
                s
            }
            None => {
                samples.push(vec![r]);
                samples.len() - 1
            }
        };
        open.entry((r.conversation_id.as_str(), r.turn_index + 1))
            .or_default()
            .push(index);
    }
    samples.sort_by_key(|s| (last_end(s), s[0].request_index));
    samples
}

fn last_end(turns: &[&RequestRecord]) -> i64 {
    turns.last().map_or(i64::MIN, |r| r.end_unix_ns)
}

/// One row of speed_bench.py's summary (`summarize_group`), one element of
/// the JSON's `summary`.
///
/// Every value but `failed` is over the category's successful (`ok`)
/// samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedBenchPyRow {
    /// Category name, or [`OVERALL`].
    pub category: String,
    /// Successful samples (the table's `samples` column).
    pub requests: u64,
    /// Σ turns of the successful samples.
    pub turns: u64,
    /// Samples that failed.
    pub failed: u64,
    /// Unweighted mean of the samples' `prompt_per_second` (samples
    /// without one ignored), tokens/s; server-reported.
    pub avg_prompt_t_s: Option<f64>,
    /// Unweighted mean of the samples' `predicted_per_second`, tokens/s;
    /// server-reported.
    pub avg_pred_t_s: Option<f64>,
    /// Mean of the samples' `latency_s` (client end-to-end, turns summed),
    /// seconds.
    pub avg_latency: Option<f64>,
    /// Σ `draft_n`.
    pub draft_n: u64,
    /// Σ `draft_n_accepted` (speed_bench.py's name for it here).
    #[serde(alias = "draft_n_accepted")]
    pub accepted: u64,
    /// `accepted / draft_n`, a fraction; `None` when `draft_n == 0`.
    pub accept_rate: Option<f64>,
    /// speedbench addition: unweighted mean of the samples'
    /// `uncached_prompt_per_second` (`Σprompt_n / Σprompt_ms`), tokens/s;
    /// absent from speed_bench.py's files.
    #[serde(default)]
    pub avg_uncached_prompt_t_s: Option<f64>,
}

impl SpeedBenchPyRow {
    /// `summarize_group(category, samples)`.
    pub fn of<'a>(
        category: impl Into<String>,
        samples: impl IntoIterator<Item = &'a SpeedBenchPySample>,
    ) -> SpeedBenchPyRow {
        let all: Vec<&SpeedBenchPySample> = samples.into_iter().collect();
        let ok: Vec<&SpeedBenchPySample> = all.iter().copied().filter(|s| s.ok).collect();
        let draft_n = ok.iter().map(|s| s.draft_n).sum();
        let accepted = ok.iter().map(|s| s.draft_n_accepted).sum();
        SpeedBenchPyRow {
            category: category.into(),
            requests: ok.len() as u64,
            turns: ok.iter().map(|s| s.turns).sum(),
            failed: (all.len() - ok.len()) as u64,
            avg_prompt_t_s: mean(ok.iter().filter_map(|s| s.prompt_per_second)),
            avg_pred_t_s: mean(ok.iter().filter_map(|s| s.predicted_per_second)),
            avg_latency: mean(ok.iter().map(|s| s.latency_s)),
            draft_n,
            accepted,
            accept_rate: (draft_n > 0).then(|| accepted as f64 / draft_n as f64),
            avg_uncached_prompt_t_s: mean(ok.iter().filter_map(|s| s.uncached_prompt_per_second)),
        }
    }
}

/// speed_bench.py's summary: one [`SpeedBenchPyRow`] per category in order
/// of first appearance in `samples` (speed_bench.py: in the dataset; give
/// [`SpeedBenchPySample::from_records_in_dispatch_order`] for that), then [`OVERALL`], which pools every sample (those without a category
/// included) as speed_bench.py's `summarize_group("overall", results)`
/// does — not a mean of the category rows.
pub fn speed_bench_py_summary(samples: &[SpeedBenchPySample]) -> Vec<SpeedBenchPyRow> {
    let mut order: Vec<&str> = Vec::new();
    for c in samples.iter().filter_map(|s| s.category.as_deref()) {
        if !order.contains(&c) {
            order.push(c);
        }
    }
    let mut rows: Vec<SpeedBenchPyRow> = order
        .iter()
        .map(|&c| {
            SpeedBenchPyRow::of(
                c,
                samples.iter().filter(|s| s.category.as_deref() == Some(c)),
            )
        })
        .collect();
    rows.push(SpeedBenchPyRow::of(OVERALL, samples));
    rows
}

/// speed_bench.py's summary of a run's `records`: [`speed_bench_py_summary`]
/// of [`SpeedBenchPySample::from_records_in_dispatch_order`].
pub fn speed_bench_py_rows(records: &[RequestRecord]) -> Vec<SpeedBenchPyRow> {
    speed_bench_py_summary(&SpeedBenchPySample::from_records_in_dispatch_order(records))
}

/// True when some non-warmup record carries llama.cpp `timings`: the
/// records speed_bench.py's table is about.
pub fn has_llamacpp_timings(records: &[RequestRecord]) -> bool {
    records.iter().any(has_llamacpp_timing)
}

/// Whether `record` is a measured request that carries llama.cpp's
/// `timings`: [`has_llamacpp_timings`] of one record, for a fold.
pub fn has_llamacpp_timing(record: &RequestRecord) -> bool {
    !record.warmup && record.server_timings.is_some()
}

/// Wall time of the run's non-warmup requests, seconds: latest end minus
/// earliest start (speed_bench.py's `elapsed` spans its thread pool).
/// `None` without records.
pub fn speed_bench_py_elapsed_s(records: &[RequestRecord]) -> Option<f64> {
    let measured = || records.iter().filter(|r| !r.warmup);
    let start = measured().map(|r| r.start_unix_ns).min()?;
    let end = measured().map(|r| r.end_unix_ns).max()?;
    Some(end.saturating_sub(start) as f64 / 1e9)
}

/// The options of the run: speed_bench.py's `config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedBenchPyConfig {
    /// `--url` as given.
    pub url: String,
    /// `--model`: the model sent.
    pub model: Option<String>,
    /// `--bench`: the SPEED-Bench config (speedbench: the `--bench` config
    /// when given, else the dataset's name).
    pub bench: Option<String>,
    /// `--category`: `all`, or the categories asked for, comma-separated.
    pub category: String,
    /// `--osl`, sent as `max_tokens` (`None`: speedbench sent no cap).
    pub osl: Option<u64>,
    /// `--concurrency`.
    pub concurrency: u64,
    /// `--extra-inputs`, the JSON object merged into each request body.
    pub extra_inputs: serde_json::Map<String, serde_json::Value>,
    /// speedbench addition: `--limit`, samples per category (absent from
    /// speed_bench.py's files, which do not save it).
    #[serde(default)]
    pub limit: Option<u64>,
    /// speedbench addition: `--timeout`, seconds per request.
    #[serde(default)]
    pub timeout: Option<f64>,
    /// speedbench addition: whether responses were streamed
    /// (speed_bench.py never streams).
    #[serde(default)]
    pub streaming: Option<bool>,
}

/// speed_bench.py's `--output` JSON file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedBenchPyOutput {
    /// The run's options.
    pub config: SpeedBenchPyConfig,
    /// Samples run (every element of `results`).
    pub selected_samples: u64,
    /// Samples whose every turn succeeded.
    pub completed_samples: u64,
    /// Samples with a failed turn.
    pub failed_samples: u64,
    /// [`speed_bench_py_summary`] of `results`.
    pub summary: Vec<SpeedBenchPyRow>,
    /// One element per sample, in completion order.
    pub results: Vec<SpeedBenchPySample>,
}

impl SpeedBenchPyOutput {
    /// The file's content for `config` and a run's `records`.
    ///
    /// `summary` lists the categories in dispatch order, `results` is in
    /// completion order.
    pub fn from_records(config: SpeedBenchPyConfig, records: &[RequestRecord]) -> Self {
        let summary = speed_bench_py_rows(records);
        SpeedBenchPyOutput::assemble(config, summary, SpeedBenchPySample::from_records(records))
    }

    /// The file's content for `config` and its `results` (categories listed
    /// in their order of first appearance in `results`).
    pub fn from_samples(config: SpeedBenchPyConfig, results: Vec<SpeedBenchPySample>) -> Self {
        let summary = speed_bench_py_summary(&results);
        SpeedBenchPyOutput::assemble(config, summary, results)
    }

    fn assemble(
        config: SpeedBenchPyConfig,
        summary: Vec<SpeedBenchPyRow>,
        results: Vec<SpeedBenchPySample>,
    ) -> Self {
        let completed = results.iter().filter(|s| s.ok).count() as u64;
        SpeedBenchPyOutput {
            config,
            selected_samples: results.len() as u64,
            completed_samples: completed,
            failed_samples: results.len() as u64 - completed,
            summary,
            results,
        }
    }
}

/// One row of llama.cpp `speed_bench_compare.py`'s comparison of a
/// baseline and a speculative `--output` file (its `compare_rows`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedBenchPyComparisonRow {
    /// The category (or [`OVERALL`]), as the speculative row names it.
    pub category: String,
    /// The baseline row's `avg_pred_t_s`, tokens/s.
    pub base_avg_pred_t_s: Option<f64>,
    /// The speculative row's `avg_pred_t_s`, tokens/s.
    pub spec_avg_pred_t_s: Option<f64>,
    /// `spec_avg_pred_t_s / base_avg_pred_t_s`; `None` when either is
    /// missing or 0.
    pub decode_speedup: Option<f64>,
    /// The baseline row's `avg_latency`, seconds per sample.
    pub base_avg_latency: Option<f64>,
    /// The speculative row's `avg_latency`, seconds per sample.
    pub spec_avg_latency: Option<f64>,
    /// `base_avg_latency / spec_avg_latency`; `None` when either is
    /// missing or 0.
    pub latency_speedup: Option<f64>,
    /// The speculative row's `accept_rate` (a fraction).
    pub accept_rate: Option<f64>,
}

/// `a / b` as speed_bench_compare.py guards it (`a / b if b and a else
/// None`): `None` when either side is missing or zero.
fn guarded_ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a != 0.0 && b != 0.0 => Some(a / b),
        _ => None,
    }
}

/// speed_bench_compare.py's `compare_rows`: for each `speculative` summary
/// row, in its order, the `baseline` row of the same category (the last
/// one when a category repeats), skipping categories the baseline lacks.
/// The `overall` rows are compared like any other, so the result ends with
/// `overall` when both sides have one.
///
/// `decode_speedup = spec avg_pred_t_s / base avg_pred_t_s` and
/// `latency_speedup = base avg_latency / spec avg_latency`, each `None`
/// when either value is missing or 0; `accept_rate` is the speculative
/// row's. An empty result means no category overlaps.
pub fn speed_bench_py_compare(
    baseline: &[SpeedBenchPyRow],
    speculative: &[SpeedBenchPyRow],
) -> Vec<SpeedBenchPyComparisonRow> {
    let base_by_category: HashMap<&str, &SpeedBenchPyRow> =
        baseline.iter().map(|r| (r.category.as_str(), r)).collect();
    speculative
        .iter()
        .filter_map(|spec| {
            let base = base_by_category.get(spec.category.as_str())?;
            Some(SpeedBenchPyComparisonRow {
                category: spec.category.clone(),
                base_avg_pred_t_s: base.avg_pred_t_s,
                spec_avg_pred_t_s: spec.avg_pred_t_s,
                decode_speedup: guarded_ratio(spec.avg_pred_t_s, base.avg_pred_t_s),
                base_avg_latency: base.avg_latency,
                spec_avg_latency: spec.avg_latency,
                latency_speedup: guarded_ratio(base.avg_latency, spec.avg_latency),
                accept_rate: spec.accept_rate,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::{ErrorKind, ServerTimings, SpecDecodeStats};

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9)
    }

    /// One turn; `at_ms` is its start, times in ms.
    #[allow(clippy::too_many_arguments)]
    fn turn(
        index: u64,
        conv: &str,
        turn_index: u32,
        category: &str,
        at_ms: i64,
        latency_ms: u64,
        usage: (Option<u64>, Option<u64>),
        timings: Option<ServerTimings>,
        drafts: Option<(u64, u64)>,
    ) -> RequestRecord {
        RequestRecord {
            request_index: index,
            conversation_id: conv.into(),
            turn_index,
            category: Some(category.into()),
            start_unix_ns: at_ms * 1_000_000,
            end_unix_ns: (at_ms + latency_ms as i64) * 1_000_000,
            e2e_latency_ns: latency_ms * 1_000_000,
            prompt_tokens: usage.0,
            completion_tokens: usage.1,
            finish_reason: Some(format!("stop{turn_index}")),
            server_timings: timings,
            spec: drafts.map(|(drafted, accepted)| SpecDecodeStats {
                proposed_draft_tokens: drafted,
                accepted_draft_tokens: accepted,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn timings(
        prompt_n: u64,
        cache_n: u64,
        prompt_ms: f64,
        pps: f64,
        predicted_n: u64,
        predicted_ms: f64,
        dps: f64,
    ) -> Option<ServerTimings> {
        Some(ServerTimings {
            prompt_n: Some(prompt_n),
            cache_n: Some(cache_n),
            prompt_ms: Some(prompt_ms),
            prompt_per_second: Some(pps),
            predicted_n: Some(predicted_n),
            predicted_ms: Some(predicted_ms),
            predicted_per_second: Some(dps),
        })
    }

    #[test]
    fn single_turn_takes_the_servers_rates() {
        // The server's rates are taken as reported, even where they do
        // not equal n / ms (242.5 vs 41 / 0.16905 = 242.53...).
        let r = turn(
            0,
            "q",
            0,
            "qa",
            0,
            1_250,
            (Some(41), Some(64)),
            timings(41, 0, 169.05, 242.5, 64, 701.5, 89.8),
            Some((47, 40)),
        );
        let s = SpeedBenchPySample::from_records(&[r]);
        let s = &s[0];
        assert!(s.ok);
        assert_eq!((s.turns, s.prompt_tokens, s.completion_tokens), (1, 41, 64));
        assert_eq!(s.total_tokens, 105);
        assert_eq!((s.draft_n, s.draft_n_accepted), (47, 40));
        assert_eq!(s.latency_s, 1.25);
        assert_eq!(s.prompt_ms, Some(169.05));
        assert_eq!(s.predicted_ms, Some(701.5));
        assert_eq!(s.prompt_per_second, Some(242.5));
        assert_eq!(s.predicted_per_second, Some(89.8));
        assert_eq!(s.finish_reason.as_deref(), Some("stop0"));
        assert_eq!((s.prompt_n, s.cache_n), (Some(41), Some(0)));
        // 41 / 0.16905 s.
        assert!(close(s.uncached_prompt_per_second, 41.0 / 0.16905));
        assert_eq!(s.error, None);
    }

    #[test]
    fn multi_turn_sums_and_divides_with_cached_tokens_counted() {
        // Turn 1: usage 41 prompt / 64 completion, prompt_n 41, 100 ms
        //         prefill, 640 ms decode, 30 drafted / 20 accepted, 1 s.
        // Turn 2: usage 81 / 36, prompt_n 15 + cache_n 66, 50 ms prefill,
        //         360 ms decode, nothing drafted (no draft fields), 0.5 s.
        // speed_bench.py: prompt (41 + 81) / 0.150 s = 813.33 t/s,
        //   pred (64 + 36) / 1.0 s = 100 t/s, latency 1.5 s.
        // Prefilled: (41 + 15) / 0.150 s = 373.33 t/s.
        let records = [
            turn(
                0,
                "q1",
                0,
                "qa",
                0,
                1_000,
                (Some(41), Some(64)),
                timings(41, 0, 100.0, 410.0, 64, 640.0, 100.0),
                Some((30, 20)),
            ),
            turn(
                1,
                "q1",
                1,
                "qa",
                1_000,
                500,
                (Some(81), Some(36)),
                timings(15, 66, 50.0, 300.0, 36, 360.0, 100.0),
                None,
            ),
        ];
        let s = &SpeedBenchPySample::from_records(&records)[0];
        assert!(s.ok);
        assert_eq!(s.turns, 2);
        assert_eq!(
            (s.prompt_tokens, s.completion_tokens, s.total_tokens),
            (122, 100, 222)
        );
        assert_eq!((s.draft_n, s.draft_n_accepted), (30, 20));
        assert!(close(Some(s.latency_s), 1.5));
        assert!(close(s.prompt_ms, 150.0));
        assert!(close(s.predicted_ms, 1000.0));
        assert!(close(s.prompt_per_second, 122.0 / 0.15));
        assert!(close(s.predicted_per_second, 100.0));
        assert_eq!((s.prompt_n, s.cache_n), (Some(56), Some(66)));
        assert!(close(s.uncached_prompt_per_second, 56.0 / 0.15));
        // The last turn's finish reason.
        assert_eq!(s.finish_reason.as_deref(), Some("stop1"));
    }

    #[test]
    fn usage_falls_back_to_timings_when_missing_or_zero() {
        // Turn 1: no usage -> prompt_n 10, predicted_n 5.
        // Turn 2: usage zero -> prompt_n 7, predicted_n 3 (Python's `or`).
        // Turn 3: no usage, no timings -> 0 tokens, 0 ms; the sample then
        //         has no prompt_n sum (a turn did not report it).
        // prompt (10 + 7) / 0.2 s = 85, pred (5 + 3) / 0.4 s = 20.
        let records = [
            turn(
                0,
                "c",
                0,
                "rag",
                0,
                100,
                (None, None),
                timings(10, 0, 100.0, 1.0, 5, 200.0, 1.0),
                None,
            ),
            turn(
                1,
                "c",
                1,
                "rag",
                100,
                100,
                (Some(0), Some(0)),
                timings(7, 3, 100.0, 1.0, 3, 200.0, 1.0),
                None,
            ),
            turn(2, "c", 2, "rag", 200, 100, (None, None), None, None),
        ];
        let s = &SpeedBenchPySample::from_records(&records)[0];
        assert_eq!(
            (s.prompt_tokens, s.completion_tokens, s.total_tokens),
            (17, 8, 25)
        );
        assert!(close(s.prompt_per_second, 85.0));
        assert!(close(s.predicted_per_second, 20.0));
        assert_eq!((s.prompt_n, s.cache_n), (None, None));
        assert_eq!(s.uncached_prompt_per_second, None);
        assert_eq!((s.draft_n, s.draft_n_accepted), (0, 0));
    }

    #[test]
    fn no_timings_at_all_leaves_rates_none() {
        let single = turn(0, "a", 0, "qa", 0, 300, (Some(4), Some(2)), None, None);
        let s = &SpeedBenchPySample::from_records(&[single])[0];
        assert_eq!((s.prompt_ms, s.predicted_ms), (None, None));
        assert_eq!((s.prompt_per_second, s.predicted_per_second), (None, None));
        assert_eq!(s.uncached_prompt_per_second, None);
        assert_eq!(s.total_tokens, 6);
    }

    #[test]
    fn a_failed_turn_fails_the_sample_and_zeroes_it() {
        // Turn 1 ok (0.8 s), turn 2 times out after 5 s, turn 3 skipped.
        // latency_s holds turn 1 only; turns counts all three.
        let mut timeout = turn(1, "f", 1, "math", 800, 5_000, (None, None), None, None);
        timeout.error_kind = Some(ErrorKind::Timeout);
        timeout.error_message = Some("no response in 5 s".into());
        let mut skipped = turn(2, "f", 2, "math", 5_800, 0, (None, None), None, None);
        skipped.error_kind = Some(ErrorKind::Skipped);
        skipped.error_message = Some("not sent".into());
        let records = [
            turn(
                0,
                "f",
                0,
                "math",
                0,
                800,
                (Some(9), Some(9)),
                timings(9, 0, 10.0, 900.0, 9, 90.0, 100.0),
                Some((5, 5)),
            ),
            timeout,
            skipped,
        ];
        let s = &SpeedBenchPySample::from_records(&records)[0];
        assert!(!s.ok);
        assert_eq!(s.turns, 3);
        assert!(close(Some(s.latency_s), 0.8));
        assert_eq!(
            (s.prompt_tokens, s.completion_tokens, s.total_tokens),
            (0, 0, 0)
        );
        assert_eq!((s.draft_n, s.draft_n_accepted), (0, 0));
        assert_eq!(
            (s.prompt_ms, s.prompt_per_second, s.finish_reason.clone()),
            (None, None, None)
        );
        assert_eq!(
            s.error.as_deref(),
            Some("turn 2 of 3 failed (timeout): no response in 5 s")
        );
    }

    #[test]
    fn turns_join_their_conversation_run_and_warmup_is_left_out() {
        // Two runs of "q" overlap (concurrency 2): A = requests 0, 2 and
        // B = requests 1, 3. A's turn 0 ends at 100 ms, B's at 150 ms; A's
        // turn 1 starts at 110 ms (only A had ended by then), B's at 160 ms.
        // A third run of "q" (request 4, turn 0) starts its own sample, and
        // its turn 1 (request 5) must not join the stale A or B.
        let mut warm = turn(9, "q", 0, "qa", -1_000, 10, (Some(1), Some(1)), None, None);
        warm.warmup = true;
        let records = [
            turn(0, "q", 0, "qa", 0, 100, (Some(1), Some(1)), None, None),
            turn(1, "q", 0, "qa", 0, 150, (Some(2), Some(2)), None, None),
            turn(2, "q", 1, "qa", 110, 1_000, (Some(3), Some(3)), None, None),
            turn(3, "q", 1, "qa", 160, 100, (Some(4), Some(4)), None, None),
            turn(4, "q", 0, "qa", 2_000, 10, (Some(5), Some(5)), None, None),
            turn(5, "q", 1, "qa", 2_010, 10, (Some(6), Some(6)), None, None),
            // A run cut short after turn 0 (ends 3010 ms), and one whose
            // turn 1 follows its own turn 0 (ended 3020 ms, the later).
            turn(6, "q", 0, "qa", 3_000, 10, (Some(7), Some(7)), None, None),
            turn(7, "q", 0, "qa", 3_000, 20, (Some(8), Some(8)), None, None),
            turn(8, "q", 1, "qa", 3_030, 10, (Some(9), Some(9)), None, None),
            warm,
        ];
        let samples = SpeedBenchPySample::from_records(&records);
        // Completion order: B ends at 260 ms, A at 1110 ms, the third at
        // 2020 ms, the cut one at 3010 ms, the last at 3040 ms.
        let prompts: Vec<u64> = samples.iter().map(|s| s.prompt_tokens).collect();
        assert_eq!(prompts, [2 + 4, 1 + 3, 5 + 6, 7, 8 + 9]);
        let turns: Vec<u64> = samples.iter().map(|s| s.turns).collect();
        assert_eq!(turns, [2, 2, 2, 1, 2]);
        assert!(samples.iter().all(|s| s.id == "q"));
    }

    fn sample(
        category: &str,
        ok: bool,
        latency: f64,
        pps: Option<f64>,
        dps: Option<f64>,
        drafts: (u64, u64),
    ) -> SpeedBenchPySample {
        SpeedBenchPySample {
            id: format!("{category}-{latency}"),
            category: Some(category.into()),
            ok,
            turns: 2,
            latency_s: latency,
            prompt_tokens: 0,
            completion_tokens: 0,
            total_tokens: 0,
            finish_reason: None,
            draft_n: drafts.0,
            draft_n_accepted: drafts.1,
            prompt_ms: None,
            predicted_ms: None,
            prompt_per_second: pps,
            predicted_per_second: dps,
            error: None,
            prompt_n: None,
            cache_n: None,
            uncached_prompt_per_second: pps.map(|p| p / 2.0),
        }
    }

    #[test]
    fn rows_per_category_then_overall_pooling_every_sample() {
        // math: ok (1 s, 100/10 t/s, 40 drafted / 20 accepted),
        //       ok (3 s, 300/30, 10 / 10), failed (9 s, 99 drafted: not counted).
        //   -> 2 samples, 4 turns, 1 failed, prompt 200, pred 20, 2 s,
        //      rate 30 / 50 = 0.6, uncached (50 + 150) / 2 = 100.
        // coding: ok (2 s, no rates, nothing drafted) -> n/a everywhere but latency.
        // overall pools 3 ok samples: prompt (100 + 300) / 2 = 200 (coding has
        //   none), pred 20, latency (1 + 3 + 2) / 3 = 2, rate 30 / 50 = 0.6.
        // A macro-average of the category latencies would be (2 + 2) / 2 = 2
        // too, so also: a category-less sample (4 s) only in overall.
        let mut uncategorized = sample("x", true, 6.0, None, None, (0, 0));
        uncategorized.category = None;
        let samples = [
            sample("math", true, 1.0, Some(100.0), Some(10.0), (40, 20)),
            sample("coding", true, 2.0, None, None, (0, 0)),
            sample("math", true, 3.0, Some(300.0), Some(30.0), (10, 10)),
            sample("math", false, 9.0, Some(1.0), Some(1.0), (99, 99)),
            uncategorized,
        ];
        let rows = speed_bench_py_summary(&samples);
        let names: Vec<&str> = rows.iter().map(|r| r.category.as_str()).collect();
        assert_eq!(names, ["math", "coding", OVERALL]);
        let math = &rows[0];
        assert_eq!((math.requests, math.turns, math.failed), (2, 4, 1));
        assert!(close(math.avg_prompt_t_s, 200.0));
        assert!(close(math.avg_pred_t_s, 20.0));
        assert!(close(math.avg_latency, 2.0));
        assert_eq!((math.draft_n, math.accepted), (50, 30));
        assert!(close(math.accept_rate, 0.6));
        assert!(close(math.avg_uncached_prompt_t_s, 100.0));
        let coding = &rows[1];
        assert_eq!((coding.requests, coding.failed), (1, 0));
        assert_eq!(
            (
                coding.avg_prompt_t_s,
                coding.avg_pred_t_s,
                coding.accept_rate
            ),
            (None, None, None)
        );
        assert!(close(coding.avg_latency, 2.0));
        let overall = &rows[2];
        assert_eq!((overall.requests, overall.turns, overall.failed), (4, 8, 1));
        assert!(close(overall.avg_prompt_t_s, 200.0));
        // Pooled: (1 + 2 + 3 + 6) / 4 = 3; the category rows' mean would be 2.
        assert!(close(overall.avg_latency, 3.0));
        assert!(close(overall.accept_rate, 0.6));
    }

    #[test]
    fn output_counts_and_round_trips_through_json() {
        let samples = vec![
            sample("qa", true, 1.0, Some(1.0), Some(2.0), (4, 1)),
            sample("qa", false, 0.0, None, None, (0, 0)),
        ];
        let config = SpeedBenchPyConfig {
            url: "localhost:8080".into(),
            model: None,
            bench: Some("qualitative".into()),
            category: "all".into(),
            osl: Some(4096),
            concurrency: 1,
            extra_inputs: serde_json::from_str(r#"{"temperature":0}"#).unwrap(),
            limit: None,
            timeout: Some(600.0),
            streaming: Some(false),
        };
        let out = SpeedBenchPyOutput::from_samples(config, samples);
        assert_eq!(
            (
                out.selected_samples,
                out.completed_samples,
                out.failed_samples
            ),
            (2, 1, 1)
        );
        assert_eq!(out.summary.len(), 2);
        assert!(close(out.summary[1].accept_rate, 0.25));
        let text = serde_json::to_string(&out).unwrap();
        let back: SpeedBenchPyOutput = serde_json::from_str(&text).unwrap();
        assert_eq!(back, out);
    }

    #[test]
    fn every_figure_of_the_output_reads_back_bit_for_bit() {
        // Ratios like the ones a run produces (latencies in s, tokens per
        // second, accept rates): serde_json without `float_roundtrip` read
        // about one in seven of these back one ULP off.
        let samples: Vec<SpeedBenchPySample> = (1..400u64)
            .map(|i| {
                let x = 1.0 + i as f64 / 7.0 * 0.37;
                sample(
                    ["qa", "math"][i as usize % 2],
                    true,
                    x,
                    Some(x * 13.1),
                    Some(1.0 / x),
                    (3 * i, i),
                )
            })
            .collect();
        let config = SpeedBenchPyConfig {
            url: "localhost:8080".into(),
            model: None,
            bench: None,
            category: "all".into(),
            osl: None,
            concurrency: 4,
            extra_inputs: serde_json::Map::new(),
            limit: None,
            timeout: None,
            streaming: None,
        };
        let out = SpeedBenchPyOutput::from_samples(config, samples);
        let text = serde_json::to_string_pretty(&out).unwrap();
        let back: SpeedBenchPyOutput = serde_json::from_str(&text).unwrap();
        let bits = |o: &SpeedBenchPyOutput| -> Vec<u64> {
            o.results
                .iter()
                .flat_map(|r| {
                    [
                        Some(r.latency_s),
                        r.prompt_per_second,
                        r.predicted_per_second,
                    ]
                })
                .chain(
                    o.summary
                        .iter()
                        .flat_map(|r| [r.avg_latency, r.accept_rate]),
                )
                .flatten()
                .map(f64::to_bits)
                .collect()
        };
        let (written, read) = (bits(&out), bits(&back));
        assert_eq!(read.len(), 399 * 3 + 3 * 2);
        let differ = written.iter().zip(&read).filter(|(a, b)| a != b).count();
        assert_eq!(
            differ,
            0,
            "{differ} of {} figures read back differently",
            read.len()
        );
    }

    #[test]
    fn reads_a_file_speed_bench_py_wrote() {
        // speed_bench.py's keys only (no speedbench additions), sorted as
        // json.dump(sort_keys=True) writes them.
        let text = r#"{
  "completed_samples": 1,
  "config": {"bench": "qualitative", "category": "coding", "concurrency": 1,
             "extra_inputs": {"temperature": 0}, "model": null, "osl": 1024, "url": "localhost:8080"},
  "failed_samples": 0,
  "results": [{"category": "coding", "completion_tokens": 64, "draft_n": 47, "draft_n_accepted": 47,
               "error": null, "finish_reason": "length", "id": "q-1", "latency_s": 1.6, "ok": true,
               "predicted_ms": 1255.109, "predicted_per_second": 50.19, "prompt_ms": 335.133,
               "prompt_per_second": 122.34, "prompt_tokens": 41, "total_tokens": 105, "turns": 1}],
  "selected_samples": 1,
  "summary": [{"accept_rate": 1.0, "accepted": 47, "avg_latency": 1.6, "avg_pred_t_s": 50.19,
               "avg_prompt_t_s": 122.34, "category": "coding", "draft_n": 47, "failed": 0,
               "requests": 1, "turns": 1}]
}"#;
        let out: SpeedBenchPyOutput = serde_json::from_str(text).unwrap();
        assert_eq!(out.config.osl, Some(1024));
        assert_eq!(out.config.timeout, None);
        assert_eq!(out.results[0].draft_n_accepted, 47);
        assert_eq!(out.results[0].prompt_n, None);
        assert_eq!(out.summary[0].accepted, 47);
        assert_eq!(out.summary[0].avg_uncached_prompt_t_s, None);
    }

    fn row(
        category: &str,
        pred: Option<f64>,
        latency: Option<f64>,
        rate: Option<f64>,
    ) -> SpeedBenchPyRow {
        SpeedBenchPyRow {
            category: category.into(),
            requests: 1,
            turns: 1,
            failed: 0,
            avg_prompt_t_s: None,
            avg_pred_t_s: pred,
            avg_latency: latency,
            draft_n: 0,
            accepted: 0,
            accept_rate: rate,
            avg_uncached_prompt_t_s: None,
        }
    }

    #[test]
    fn compare_rows_as_speed_bench_compare_py_does() {
        // Baseline: coding 40 t/s 2.0 s; math 50 t/s 3.0 s; qa 0 t/s (a
        // zero, not missing) 1.0 s; rag missing speed, 0 s latency; a
        // repeated "math" whose last occurrence (25 t/s, 1.5 s) wins;
        // overall 45 t/s 2.5 s.
        let baseline = [
            row("coding", Some(40.0), Some(2.0), None),
            row("math", Some(50.0), Some(3.0), None),
            row("qa", Some(0.0), Some(1.0), None),
            row("rag", None, Some(0.0), None),
            row("math", Some(25.0), Some(1.5), None),
            row(OVERALL, Some(45.0), Some(2.5), None),
        ];
        // Speculative, in its own order: math first; "writing" is not in
        // the baseline and is skipped; coding has no latency.
        let speculative = [
            row("math", Some(100.0), Some(0.5), Some(0.75)),
            row("writing", Some(99.0), Some(9.0), Some(0.5)),
            row("coding", Some(60.0), None, Some(0.25)),
            row("qa", Some(30.0), Some(0.8), None),
            row("rag", Some(20.0), Some(0.4), Some(0.1)),
            row(OVERALL, Some(90.0), Some(2.0), Some(0.6)),
        ];
        let rows = speed_bench_py_compare(&baseline, &speculative);
        let names: Vec<&str> = rows.iter().map(|r| r.category.as_str()).collect();
        assert_eq!(names, ["math", "coding", "qa", "rag", OVERALL]);
        // math: 100 / 25 = 4, 1.5 / 0.5 = 3 (the last baseline "math").
        assert_eq!(rows[0].decode_speedup, Some(4.0));
        assert_eq!(rows[0].latency_speedup, Some(3.0));
        assert_eq!(
            (rows[0].base_avg_pred_t_s, rows[0].base_avg_latency),
            (Some(25.0), Some(1.5))
        );
        assert_eq!(rows[0].accept_rate, Some(0.75));
        // coding: 60 / 40 = 1.5; no speculative latency -> None.
        assert_eq!(rows[1].decode_speedup, Some(1.5));
        assert_eq!(rows[1].latency_speedup, None);
        assert_eq!(rows[1].spec_avg_latency, None);
        // qa: a zero baseline speed gives no decode speedup; 1.0 / 0.8.
        assert_eq!(rows[2].decode_speedup, None);
        assert_eq!(rows[2].latency_speedup, Some(1.25));
        assert_eq!(rows[2].accept_rate, None);
        // rag: missing baseline speed, zero baseline latency -> both None.
        assert_eq!(
            (rows[3].decode_speedup, rows[3].latency_speedup),
            (None, None)
        );
        // overall: 90 / 45 = 2, 2.5 / 2 = 1.25.
        assert_eq!(rows[4].decode_speedup, Some(2.0));
        assert_eq!(rows[4].latency_speedup, Some(1.25));
        assert_eq!(rows[4].accept_rate, Some(0.6));
        // No overlap: nothing.
        assert!(speed_bench_py_compare(&baseline[..1], &speculative[..1]).is_empty());
    }
}
