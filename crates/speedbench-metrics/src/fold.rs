//! Folds over a run's records one record at a time: the figures of a
//! report without the run's records in memory.
//!
//! [`acceptance_by`](crate::acceptance_by) and
//! [`histograms_by`](crate::histograms_by) are these folds over a slice, so a
//! report that streams a million-row file
//! (`speedbench_record::visit_records`) and one that holds the records
//! compute every number the same way.

use std::collections::{BTreeMap, BTreeSet};

use speedbench_record::{RequestRecord, columns};

use crate::acceptance::{AcceptanceTotals, RequestAcceptance, request_acceptance};
use crate::measured::is_measured;
use crate::run::RequestCounts;
use crate::spec::PooledHistogram;

/// Dataset-name prefixes a matrix column leaves out: `speed_bench_coding`
/// is the column `coding`.
pub const DATASET_PREFIXES: [&str; 2] = ["speed_bench_", "spec_al_"];

/// A dataset name without its `speed_bench_` / `spec_al_` prefix.
pub fn strip_dataset_prefix(dataset: &str) -> &str {
    DATASET_PREFIXES
        .iter()
        .find_map(|p| dataset.strip_prefix(p))
        .unwrap_or(dataset)
}

/// The acceptance-matrix column of a record: its category, else its
/// dataset name without a SPEED-Bench / spec_al prefix; `None` when both
/// are empty.
pub fn matrix_column(r: &RequestRecord) -> Option<&str> {
    if let Some(c) = r.category.as_deref().filter(|c| !c.is_empty()) {
        return Some(c);
    }
    Some(strip_dataset_prefix(&r.dataset)).filter(|d| !d.is_empty())
}

/// Sums [`AcceptanceTotals`] per group, e.g. per category for one column of
/// the acceptance matrix: `acceptance_by(&records, |r| r.category.clone())`.
///
/// `records` is one run: whether it speculates ([`run_speculates`](crate::run_speculates)) decides
/// whether requests that drafted nothing count (see [`AcceptanceTotals`]).
/// Every measured record with a key makes its group exist, so a category
/// whose requests all drafted nothing keeps its group (its acceptance
/// length is 1 in a speculating run, `None` otherwise). Skips warmup
/// records, failed records (`error_kind` set) and records whose `key` is
/// `None`. Groups come out sorted by key.
pub fn acceptance_by(
    records: &[RequestRecord],
    key: impl Fn(&RequestRecord) -> Option<String>,
) -> BTreeMap<String, AcceptanceTotals> {
    AcceptanceFold::of(records, key).totals()
}

/// The pooled histograms of the measured records, per group (e.g. per
/// category): every request whose acceptance counts (see
/// [`crate::request_acceptance`]) and that reported a histogram. Groups
/// come out sorted by key.
pub fn histograms_by(
    records: &[RequestRecord],
    key: impl Fn(&RequestRecord) -> Option<String>,
) -> BTreeMap<String, PooledHistogram> {
    AcceptanceFold::of(records, key).histograms()
}

/// Token-weighted acceptance and acceptance by draft position per group of
/// one run, folded one record at a time.
///
/// Whether a request that drafted nothing counts depends on the whole run
/// ([`run_speculates`](crate::run_speculates)): the fold keeps such requests
/// aside until its totals are asked for, so it needs one pass and gives
/// exactly what [`acceptance_by`](crate::acceptance_by) gives over the same
/// records.
///
/// ```
/// use speedbench_metrics::AcceptanceFold;
/// use speedbench_record::{RequestRecord, SpecDecodeStats};
///
/// let record = |category: &str, accepted, steps| RequestRecord {
///     category: Some(category.into()),
///     spec: Some(SpecDecodeStats {
///         accepted_draft_tokens: accepted,
///         proposed_draft_tokens: 3 * steps,
///         verify_steps: Some(steps),
///         ..Default::default()
///     }),
///     ..Default::default()
/// };
/// let mut fold = AcceptanceFold::default();
/// for r in [record("qa", 6, 4), record("qa", 2, 4), record("math", 9, 3)] {
///     fold.add(r.category.as_deref(), &r);
/// }
/// let totals = fold.totals();
/// assert_eq!(totals["qa"].accept_length(), Some(2.0)); // 1 + 8/8
/// assert_eq!(totals["math"].accept_length(), Some(4.0)); // 1 + 9/3
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AcceptanceFold {
    groups: BTreeMap<String, GroupFold>,
    speculates: bool,
}

/// One group's part of an [`AcceptanceFold`].
#[derive(Debug, Clone, Default, PartialEq)]
struct GroupFold {
    /// Every measured request but those that drafted nothing.
    totals: AcceptanceTotals,
    /// The requests that drafted nothing, counted if the run speculates.
    undrafted: AcceptanceTotals,
    histogram: PooledHistogram,
}

impl AcceptanceFold {
    /// The fold of `records` (one run), grouped by `key`.
    pub fn of(
        records: &[RequestRecord],
        key: impl Fn(&RequestRecord) -> Option<String>,
    ) -> AcceptanceFold {
        let mut fold = AcceptanceFold::default();
        for r in records {
            fold.add(key(r).as_deref(), r);
        }
        fold
    }

    /// Adds the run's next record, in group `key`: warmup and failed
    /// records count nowhere, a measured record without a key only in
    /// whether the run speculates.
    pub fn add(&mut self, key: Option<&str>, r: &RequestRecord) {
        if !is_measured(r) {
            return;
        }
        self.speculates |= r.spec.is_some();
        let Some(key) = key else { return };
        // Looked up by `&str` first: a group's key is allocated once.
        let group = match self.groups.get_mut(key) {
            Some(group) => group,
            None => self.groups.entry(key.to_string()).or_default(),
        };
        // As if the run speculates; `totals` decides once the run is read.
        match request_acceptance(r, true) {
            RequestAcceptance::Undrafted(steps) => group.undrafted.add_undrafted(steps),
            RequestAcceptance::Spec(spec) => {
                group.totals.add(spec);
                group.histogram.add(&spec.acceptance_histogram);
            }
            other => group.totals.add_acceptance(other),
        }
    }

    /// Adds the fold of the rest of the same run (another shard of it).
    pub fn merge(&mut self, other: &AcceptanceFold) {
        self.speculates |= other.speculates;
        for (key, theirs) in &other.groups {
            let ours = self.groups.entry(key.clone()).or_default();
            ours.totals.merge(&theirs.totals);
            ours.undrafted.merge(&theirs.undrafted);
            ours.histogram.merge(&theirs.histogram);
        }
    }

    /// True when some measured record had spec stats (see
    /// [`run_speculates`](crate::run_speculates)).
    pub fn speculates(&self) -> bool {
        self.speculates
    }

    /// Each group's totals, sorted by key: every group with a measured
    /// record, its requests that drafted nothing counted as steps when the
    /// run speculates and as requests without stats when it does not.
    pub fn totals(&self) -> BTreeMap<String, AcceptanceTotals> {
        self.groups
            .iter()
            .map(|(key, group)| {
                let mut totals = group.totals;
                if self.speculates {
                    totals.merge(&group.undrafted);
                } else {
                    totals.requests_without_stats += group.undrafted.requests;
                }
                (key.clone(), totals)
            })
            .collect()
    }

    /// Each group's pooled acceptance histogram, for the groups that have
    /// one (see [`histograms_by`](crate::histograms_by)).
    pub fn histograms(&self) -> BTreeMap<String, PooledHistogram> {
        self.groups
            .iter()
            .filter(|(_, group)| group.histogram.requests > 0)
            .map(|(key, group)| (key.clone(), group.histogram.clone()))
            .collect()
    }
}

/// What a report's acceptance matrix reads of one run's records, folded
/// one record at a time: request counts, the categories measured, and the
/// acceptance per [`matrix_column`].
///
/// Built while a records file is read
/// (`speedbench_record::visit_records`), a million-row run costs a few
/// dozen groups of counters instead of a million records in memory.
///
/// ```
/// use speedbench_metrics::RecordsDigest;
/// use speedbench_record::{ErrorKind, RequestRecord};
///
/// let ok = RequestRecord { dataset: "speed_bench_coding".into(), ..Default::default() };
/// let failed = RequestRecord { error_kind: Some(ErrorKind::Timeout), ..ok.clone() };
/// let digest = RecordsDigest::of(&[ok, failed]);
/// assert_eq!((digest.counts.succeeded, digest.counts.failed), (1, 1));
/// assert!(digest.acceptance.totals().contains_key("coding"));
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RecordsDigest {
    /// Requests by result, as [`RequestCounts::from_records`] counts them.
    pub counts: RequestCounts,
    /// The distinct categories of the non-warmup records.
    pub categories: BTreeSet<String>,
    /// Acceptance grouped by [`matrix_column`].
    pub acceptance: AcceptanceFold,
}

impl RecordsDigest {
    /// The record columns the digest reads (pass them to
    /// `speedbench_record::visit_records`), the model's included: a
    /// report names a run without a manifest by its first record's model.
    pub const COLUMNS: [&'static str; 15] = [
        columns::CATEGORY,
        columns::DATASET,
        columns::MODEL,
        columns::WARMUP,
        columns::ERROR_KIND,
        // The first failure's words (`RequestCounts::first_error`).
        columns::ERROR_MESSAGE,
        columns::SPEC_SOURCE,
        columns::SPEC_ACCEPTED_DRAFT_TOKENS,
        columns::SPEC_PROPOSED_DRAFT_TOKENS,
        columns::SPEC_VERIFY_STEPS,
        // Acceptance by draft position.
        columns::SPEC_ACCEPTANCE_HISTOGRAM,
        // llama.cpp requests that drafted nothing count their target passes.
        columns::TIMINGS_PREDICTED_N,
        // Dropped payloads are counted; TensorRT-LLM's tokens per iteration
        // count completion tokens over iterations.
        columns::SPEC_DROPPED,
        columns::TOKENS_PER_ITERATION,
        columns::COMPLETION_TOKENS,
    ];

    /// The digest of one run's records.
    pub fn of(records: &[RequestRecord]) -> RecordsDigest {
        let mut digest = RecordsDigest::default();
        for r in records {
            digest.add(r);
        }
        digest
    }

    /// Adds the run's next record.
    pub fn add(&mut self, r: &RequestRecord) {
        self.counts.add(r);
        if !r.warmup
            && let Some(category) = &r.category
            && !self.categories.contains(category)
        {
            self.categories.insert(category.clone());
        }
        self.acceptance.add(matrix_column(r), r);
    }

    /// Adds the digest of the records that follow (the next shard).
    pub fn merge(&mut self, later: &RecordsDigest) {
        self.counts.merge(&later.counts);
        self.categories.extend(later.categories.iter().cloned());
        self.acceptance.merge(&later.acceptance);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_record::{ErrorKind, ServerTimings, SpecDecodeStats};

    fn spec(
        category: &str,
        accepted: u64,
        proposed: u64,
        steps: u64,
        hist: &[u64],
    ) -> RequestRecord {
        RequestRecord {
            category: Some(category.into()),
            spec: Some(SpecDecodeStats {
                accepted_draft_tokens: accepted,
                proposed_draft_tokens: proposed,
                verify_steps: Some(steps),
                acceptance_histogram: hist.to_vec(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// llama.cpp: `timings` with `predicted_n` and no draft fields.
    fn undrafted(category: &str, predicted_n: u64) -> RequestRecord {
        RequestRecord {
            category: Some(category.into()),
            server_timings: Some(ServerTimings {
                predicted_n: Some(predicted_n),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// An undrafted request read before the run shows it speculates counts
    /// as steps once a later record has spec stats.
    #[test]
    fn a_request_that_drafted_nothing_counts_once_the_run_speculates() {
        let records = [undrafted("qa", 10), spec("qa", 6, 9, 5, &[2, 1, 2])];
        let totals = AcceptanceFold::of(&records, |r| r.category.clone()).totals();
        // By hand: steps 10 + 5 = 15, accepted 6: 1 + 6/15 = 1.4.
        assert_eq!(totals["qa"].steps, 15);
        assert_eq!(totals["qa"].undrafted_requests, 1);
        assert_eq!(totals["qa"].accept_length(), Some(1.4));
        // Without any spec stats the run does not speculate: no ratio.
        let alone = AcceptanceFold::of(&records[..1], |r| r.category.clone()).totals();
        assert_eq!(alone["qa"].requests_without_stats, 1);
        assert_eq!(alone["qa"].accept_length(), None);
    }

    /// Two shards folded apart and merged give the totals of the records
    /// folded together, the undrafted request of the first shard included
    /// because the second speculates.
    #[test]
    fn merged_shards_equal_one_fold_of_all_their_records() {
        let first = [
            undrafted("qa", 7),
            spec("math", 4, 6, 3, &[1, 1, 1]),
            RequestRecord {
                error_kind: Some(ErrorKind::Timeout),
                error_message: Some("timed out".into()),
                ..spec("qa", 99, 99, 1, &[])
            },
        ];
        let second = [
            spec("qa", 3, 6, 4, &[2, 1, 0, 1]),
            RequestRecord {
                warmup: true,
                ..spec("stem", 5, 5, 5, &[])
            },
        ];
        let mut merged = RecordsDigest::of(&first[..1]);
        merged.merge(&RecordsDigest::of(&first[1..]));
        merged.merge(&RecordsDigest::of(&second));
        let all: Vec<_> = first.iter().chain(&second).cloned().collect();
        assert_eq!(merged, RecordsDigest::of(&all));
        assert_eq!(merged.counts, RequestCounts::from_records(&all));
        assert_eq!(merged.counts.first_error.as_deref(), Some("timed out"));
        // The warmup record's category is not a measured one.
        assert_eq!(
            merged.categories,
            BTreeSet::from(["math".into(), "qa".into()])
        );
        let qa = &merged.acceptance.totals()["qa"];
        // By hand: steps 7 + 4 = 11, accepted 3: 1 + 3/11.
        assert_eq!((qa.steps, qa.accepted, qa.requests), (11, 3, 2));
        assert_eq!(merged.acceptance.histograms()["qa"].counts, [2, 1, 0, 1]);
        assert!(!merged.acceptance.histograms().contains_key("stem"));
    }

    #[test]
    fn the_matrix_column_is_the_category_else_the_dataset_without_its_prefix() {
        let r = |category: Option<&str>, dataset: &str| RequestRecord {
            category: category.map(str::to_string),
            dataset: dataset.into(),
            ..Default::default()
        };
        assert_eq!(
            matrix_column(&r(Some("qa"), "speed_bench_qualitative")),
            Some("qa")
        );
        assert_eq!(
            matrix_column(&r(Some(""), "speed_bench_coding")),
            Some("coding")
        );
        assert_eq!(matrix_column(&r(None, "spec_al_gsm8k")), Some("gsm8k"));
        assert_eq!(matrix_column(&r(None, "prompts")), Some("prompts"));
        assert_eq!(matrix_column(&r(None, "")), None);
    }

    #[test]
    fn failures_by_kind_keep_their_order_whatever_order_they_come_in() {
        let failed = |kind| RequestRecord {
            error_kind: Some(kind),
            ..Default::default()
        };
        let records = [
            failed(ErrorKind::Protocol),
            failed(ErrorKind::Connection),
            failed(ErrorKind::Protocol),
            failed(ErrorKind::Timeout),
        ];
        let counts = RequestCounts::from_records(&records);
        let kinds: Vec<_> = counts
            .failed_by_kind
            .iter()
            .map(|e| (e.kind, e.count))
            .collect();
        assert_eq!(
            kinds,
            [
                (ErrorKind::Connection, 1),
                (ErrorKind::Timeout, 1),
                (ErrorKind::Protocol, 2)
            ]
        );
        let mut merged = RequestCounts::from_records(&records[2..]);
        let earlier = RequestCounts::from_records(&records[..2]);
        merged.merge(&earlier);
        assert_eq!(merged.failed_by_kind, counts.failed_by_kind);
    }
}
