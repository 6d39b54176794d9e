//! llama.cpp-style per-category summary rows (`speed_bench.py`'s
//! `summarize_group`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};
use speedbench_record::RequestRecord;

use crate::mean::mean;
use crate::measured::is_measured;
use crate::request::RequestMetricsExt;

/// Name of the row [`summarize_by`] appends over every record.
pub const OVERALL: &str = "overall";

/// One row of llama.cpp's SPEED-Bench summary table.
///
/// Warmup records are ignored; failed records only add to `failed`; every
/// other field is computed over the successful records, as llama.cpp's
/// `summarize_group` does over its `ok` results.
///
/// Difference from llama.cpp: its unit is a whole conversation (a sample,
/// turns summed), ours is one request (one turn). So `requests` counts turns
/// (`conversations` counts distinct conversations) and `avg_latency_s` is the
/// mean per-turn latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategorySummary {
    /// Category name, or [`OVERALL`].
    pub category: String,
    /// Successful requests.
    pub requests: u64,
    /// Failed requests.
    pub failed: u64,
    /// Distinct `conversation_id`s among the successful requests.
    pub conversations: u64,
    /// Unweighted mean of per-request `timings.prompt_per_second` (tokens/s),
    /// requests without it ignored.
    pub avg_prompt_tps: Option<f64>,
    /// Unweighted mean of per-request `timings.predicted_per_second`
    /// (tokens/s), requests without it ignored.
    pub avg_decode_tps: Option<f64>,
    /// Mean end-to-end latency of the successful requests, seconds.
    pub avg_latency_s: Option<f64>,
    /// Σ proposed draft tokens (llama.cpp `draft_n`); 0 without spec stats.
    pub drafted: u64,
    /// Σ accepted draft tokens (llama.cpp `draft_n_accepted`).
    pub accepted: u64,
    /// `accepted / drafted` as a fraction; `None` when `drafted == 0`.
    pub accept_rate: Option<f64>,
}

impl CategorySummary {
    /// Summarizes `records` under the name `category`.
    pub fn of<'a>(
        category: impl Into<String>,
        records: impl IntoIterator<Item = &'a RequestRecord>,
    ) -> CategorySummary {
        let mut failed = 0;
        let mut ok = Vec::new();
        for r in records.into_iter().filter(|r| !r.warmup) {
            if is_measured(r) {
                ok.push(r);
            } else {
                failed += 1;
            }
        }
        let spec = |f: fn(&speedbench_record::SpecDecodeStats) -> u64| -> u64 {
            ok.iter().filter_map(|r| r.spec.as_ref()).map(f).sum()
        };
        let drafted = spec(|s| s.proposed_draft_tokens);
        let accepted = spec(|s| s.accepted_draft_tokens);
        let conversations: BTreeSet<&str> = ok.iter().map(|r| r.conversation_id.as_str()).collect();
        CategorySummary {
            category: category.into(),
            requests: ok.len() as u64,
            failed,
            conversations: conversations.len() as u64,
            avg_prompt_tps: mean(ok.iter().filter_map(|r| r.prompt_tokens_per_second())),
            avg_decode_tps: mean(ok.iter().filter_map(|r| r.decode_tokens_per_second())),
            avg_latency_s: mean(ok.iter().map(|r| r.e2e_latency_ns as f64 / 1e9)),
            drafted,
            accepted,
            accept_rate: (drafted > 0).then(|| accepted as f64 / drafted as f64),
        }
    }
}

/// One [`CategorySummary`] per key, in order of first appearance, then an
/// [`OVERALL`] row over every non-warmup record (those whose key is `None`
/// included), like llama.cpp's summary table.
pub fn summarize_by(
    records: &[RequestRecord],
    key: impl Fn(&RequestRecord) -> Option<String>,
) -> Vec<CategorySummary> {
    let mut order: Vec<String> = Vec::new();
    let keyed: Vec<(Option<String>, &RequestRecord)> = records
        .iter()
        .filter(|r| !r.warmup)
        .map(|r| (key(r), r))
        .collect();
    for k in keyed.iter().filter_map(|(k, _)| k.as_ref()) {
        if !order.contains(k) {
            order.push(k.clone());
        }
    }
    let mut rows: Vec<CategorySummary> = order
        .into_iter()
        .map(|name| {
            let members = keyed
                .iter()
                .filter(|(k, _)| k.as_deref() == Some(name.as_str()))
                .map(|&(_, r)| r);
            CategorySummary::of(name.clone(), members)
        })
        .collect();
    rows.push(CategorySummary::of(OVERALL, keyed.iter().map(|&(_, r)| r)));
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::{ErrorKind, ServerTimings, SpecDecodeStats};

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    fn llama(
        category: &str,
        conv: &str,
        latency_ms: u64,
        pps: f64,
        dps: f64,
        drafted: u64,
        accepted: u64,
    ) -> RequestRecord {
        RequestRecord {
            category: Some(category.into()),
            conversation_id: conv.into(),
            e2e_latency_ns: latency_ms * 1_000_000,
            server_timings: Some(ServerTimings {
                prompt_per_second: Some(pps),
                predicted_per_second: Some(dps),
                ..Default::default()
            }),
            spec: Some(SpecDecodeStats {
                proposed_draft_tokens: drafted,
                accepted_draft_tokens: accepted,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn rows_per_category_plus_overall() {
        // math:   two turns of q1 (1 s, 3 s), prompt/s 100 & 200, pred/s 10 & 30,
        //         drafted 10+30 = 40, accepted 5+15 = 20 -> rate 0.5;
        //         one timeout (failed 1).
        // coding: q2, 2 s, 400 / 50, drafted 0 -> rate None.
        // overall: 3 ok, 1 failed, prompt mean (100+200+400)/3 = 233.33,
        //          pred mean (10+30+50)/3 = 30, latency (1+3+2)/3 = 2 s,
        //          drafted 40, accepted 20 -> 0.5.
        let mut timeout = llama("math", "q9", 9000, 1.0, 1.0, 99, 99);
        timeout.error_kind = Some(ErrorKind::Timeout);
        let mut warm = llama("writing", "w", 1, 1.0, 1.0, 1, 1);
        warm.warmup = true;
        let records = vec![
            llama("math", "q1", 1000, 100.0, 10.0, 10, 5),
            llama("coding", "q2", 2000, 400.0, 50.0, 0, 0),
            llama("math", "q1", 3000, 200.0, 30.0, 30, 15),
            timeout,
            warm,
        ];
        let rows = summarize_by(&records, |r| r.category.clone());
        let names: Vec<&str> = rows.iter().map(|r| r.category.as_str()).collect();
        assert_eq!(names, ["math", "coding", OVERALL]);

        let math = &rows[0];
        assert_eq!((math.requests, math.failed, math.conversations), (2, 1, 1));
        assert!(close(math.avg_prompt_tps.unwrap(), 150.0));
        assert!(close(math.avg_decode_tps.unwrap(), 20.0));
        assert!(close(math.avg_latency_s.unwrap(), 2.0));
        assert_eq!((math.drafted, math.accepted), (40, 20));
        assert!(close(math.accept_rate.unwrap(), 0.5));

        let coding = &rows[1];
        assert_eq!(coding.accept_rate, None);
        assert_eq!(coding.failed, 0);

        let overall = &rows[2];
        assert_eq!(
            (overall.requests, overall.failed, overall.conversations),
            (3, 1, 2)
        );
        assert!(close(overall.avg_prompt_tps.unwrap(), 700.0 / 3.0));
        assert!(close(overall.avg_decode_tps.unwrap(), 30.0));
        assert!(close(overall.avg_latency_s.unwrap(), 2.0));
        assert!(close(overall.accept_rate.unwrap(), 0.5));
    }

    #[test]
    fn all_failed_group_has_no_averages() {
        let mut a = llama("qa", "q", 1000, 1.0, 1.0, 4, 2);
        a.error_kind = Some(ErrorKind::Connection);
        let s = CategorySummary::of("qa", [&a]);
        assert_eq!((s.requests, s.failed), (0, 1));
        assert_eq!(s.avg_latency_s, None);
        assert_eq!(s.avg_prompt_tps, None);
        assert_eq!(s.accept_rate, None);
    }
}
