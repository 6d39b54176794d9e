//! Whether two runs measured the same thing: dataset, requests,
//! categories, prompts, `--osl`, sampling fields, load and preflight.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use speedbench_metrics::is_measured;
use speedbench_record::{RequestRecord, RunManifest};

use super::{CompareRun, Keyed, RequestKey, keyed};
use crate::matrix::category_key;

/// What [`check_runs_match`] found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunCheck {
    /// Differences that make the comparison meaningless (different
    /// datasets, requests, categories, prompts, `--osl` or sampling), most
    /// important first. `speedbench compare` refuses them unless `--force`.
    pub mismatches: Vec<String>,
    /// Things to know that do not stop the comparison: an incomplete run,
    /// settings that differ but do not change the prompts or sampling.
    pub warnings: Vec<String>,
}

/// Request fields (`--extra-inputs`) that change what the model samples;
/// both runs must agree on every one of them.
pub const SAMPLING_FIELDS: [&str; 20] = [
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "typical_p",
    "seed",
    "max_tokens",
    "max_completion_tokens",
    "min_tokens",
    "ignore_eos",
    "stop",
    "stop_token_ids",
    "n",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "repeat_penalty",
    "logit_bias",
    "n_predict",
    "response_format",
];

fn shown(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "not set".to_string(),
        Some(v) => v.to_string(),
    }
}

fn request_counts<'a>(
    keyed: &BTreeMap<RequestKey<'a>, &RequestRecord>,
) -> BTreeMap<(&'a str, u32), usize> {
    let mut counts = BTreeMap::new();
    for &(id, turn, _) in keyed.keys() {
        *counts.entry((id, turn)).or_default() += 1;
    }
    counts
}

/// Checks that a baseline and a speculative run measured the same thing.
///
/// From the manifests (when both runs have one): the dataset, endpoint
/// type, `--osl` and every [`SAMPLING_FIELDS`] entry of `--extra-inputs`.
/// From the records: the same categories, the same `(question_id, turn)`
/// requests as often, each row in the same category, the same prompt hash
/// (`prompt_sha256`: what the dataset gave each turn) on every request both
/// runs recorded it for, and the same `prompt_tokens` on every first turn
/// both runs answered (the check older files without hashes still get). A
/// run that did not complete only warns about requests it lacks.
pub fn check_runs_match(base: &CompareRun, spec: &CompareRun) -> RunCheck {
    let mut check = RunCheck::default();
    let mut incomplete = false;
    for (role, run) in [("baseline", base), ("speculative", spec)] {
        if let Some(why) = run.incomplete() {
            incomplete = true;
            check.warnings.push(format!(
                "the {role} run {} {why}: it holds {} record(s); only requests both runs \
                 answered are compared",
                run.dir.display(),
                run.records.iter().filter(|r| !r.warmup).count()
            ));
        }
    }
    if drafted(&base.records) == Some(true) && drafted(&spec.records) == Some(false) {
        check.mismatches.push(format!(
            "roles: the baseline run {} speculates (its requests drafted) and the speculative \
             run {} does not; were --baseline and --speculative swapped?",
            base.dir.display(),
            spec.dir.display()
        ));
    }
    if let (Some(b), Some(s)) = (&base.manifest, &spec.manifest) {
        check_manifests(b, s, &mut check);
    }
    check_categories(base, spec, incomplete, &mut check);
    let (bk, sk) = (keyed(&base.records), keyed(&spec.records));
    check_request_counts(&bk, &sk, incomplete, &mut check);
    check_prompts(&bk, &sk, &mut check);
    check
}

/// Whether a run's answered requests drafted tokens; `None` when none was
/// answered (a run that failed whole says nothing of its server).
fn drafted(records: &[RequestRecord]) -> Option<bool> {
    let mut measured = records.iter().filter(|r| is_measured(r)).peekable();
    measured.peek()?;
    Some(measured.any(|r| r.spec.as_ref().is_some_and(|s| s.proposed_draft_tokens > 0)))
}

/// What the two runs' manifests say they sent: the dataset, the request
/// options, the sampling fields, streaming and the model.
fn check_manifests(b: &RunManifest, s: &RunManifest, check: &mut RunCheck) {
    if b.dataset != s.dataset {
        check.mismatches.push(format!(
            "dataset: baseline {:?}, speculative {:?}",
            b.dataset, s.dataset
        ));
    }
    let (bc, sc) = (&b.config, &s.config);
    let field = |c: &Value, k: &str| c.get(k).cloned().filter(|v| !v.is_null());
    for (key, what) in [
        ("endpoint_type", "endpoint_type"),
        ("osl", "osl (max_tokens)"),
    ] {
        let (x, y) = (field(bc, key), field(sc, key));
        if x != y {
            check.mismatches.push(format!(
                "{what}: baseline {}, speculative {}",
                shown(x.as_ref()),
                shown(y.as_ref())
            ));
        }
    }
    let extra = |c: &Value| c.get("extra_inputs").and_then(Value::as_object).cloned();
    let (be, se) = (extra(bc).unwrap_or_default(), extra(sc).unwrap_or_default());
    check_extra_inputs(&be, &se, check);
    if be.get("temperature").and_then(Value::as_f64) != Some(0.0) {
        check.warnings.push(format!(
            "the baseline does not pin temperature 0 (an extra input temperature of 0; \
             it sent {}): outputs are sampled, so byte-identical outputs are not expected",
            shown(be.get("temperature"))
        ));
    }
    if field(bc, "streaming") != field(sc, "streaming") {
        check.warnings.push(format!(
            "streaming: baseline {}, speculative {} (client decode speeds need streaming)",
            shown(bc.get("streaming")),
            shown(sc.get("streaming"))
        ));
    }
    if b.model != s.model {
        check.warnings.push(format!(
            "models: baseline {:?}, speculative {:?}",
            b.model, s.model
        ));
    }
    check_load_and_preflight(bc, sc, check);
}

/// The load each run put on its server, and whether each sent a preflight:
/// speedups between different loads, or between a primed and an unprimed
/// server, are not the speculation's.
fn check_load_and_preflight(bc: &Value, sc: &Value, check: &mut RunCheck) {
    for (pointer, what) in [
        ("/concurrency", "concurrency"),
        ("/client/request_rate", "request rate"),
        ("/client/max_concurrency", "max concurrency"),
    ] {
        let value = |c: &Value| c.pointer(pointer).cloned().filter(|v| !v.is_null());
        let (x, y) = (value(bc), value(sc));
        if x != y {
            check.warnings.push(format!(
                "{what}: baseline {}, speculative {}: latency and throughput depend on the load,                  so the speedups compare different loads as well as speculation",
                shown(x.as_ref()),
                shown(y.as_ref())
            ));
        }
    }
    let preflight = |c: &Value| c.pointer("/client/no_preflight").and_then(Value::as_bool);
    if let (Some(x), Some(y)) = (preflight(bc), preflight(sc))
        && x != y
    {
        let (with, without) = if x {
            ("speculative", "baseline")
        } else {
            ("baseline", "speculative")
        };
        check.warnings.push(format!(
            "preflight: the {with} run sent one and the {without} run did not (--no-preflight):              a preflight is a real request that primes the server's prompt cache and feeds an              n-gram drafter; give both runs --no-preflight, or neither"
        ));
    }
}

/// A category in one run only: a mismatch, or a warning when a run is
/// incomplete (it may not have reached it).
fn check_categories(base: &CompareRun, spec: &CompareRun, incomplete: bool, check: &mut RunCheck) {
    let categories = |run: &CompareRun| -> BTreeSet<String> {
        run.records
            .iter()
            .filter(|r| !r.warmup)
            .filter_map(category_key)
            .collect()
    };
    let (bcat, scat) = (categories(base), categories(spec));
    for (cat, only_in) in bcat
        .difference(&scat)
        .map(|c| (c, "baseline"))
        .chain(scat.difference(&bcat).map(|c| (c, "speculative")))
    {
        let line = format!("category {cat:?} is only in the {only_in} run");
        if incomplete {
            check.warnings.push(line);
        } else {
            check.mismatches.push(line);
        }
    }
}

/// The same (question_id, turn) pairs, as often, in both complete runs.
fn check_request_counts<'a>(
    bk: &Keyed<'a>,
    sk: &Keyed<'a>,
    incomplete: bool,
    check: &mut RunCheck,
) {
    let (bn, sn) = (request_counts(bk), request_counts(sk));
    let all: BTreeSet<&(&str, u32)> = bn.keys().chain(sn.keys()).collect();
    let mut request_lines = Vec::new();
    for key in all {
        let (x, y) = (
            bn.get(key).copied().unwrap_or(0),
            sn.get(key).copied().unwrap_or(0),
        );
        if x != y {
            request_lines.push(format!(
                "request {:?} turn {}: {x} in the baseline, {y} in the speculative run",
                key.0, key.1
            ));
        }
    }
    if request_lines.is_empty() || incomplete {
        return;
    }
    let n = request_lines.len();
    let mut line = format!(
        "the runs sent different requests ({n} (question_id, turn) pair(s) differ); first: {}",
        request_lines[0]
    );
    if n > 1 {
        line.push_str(&format!("; next: {}", request_lines[1]));
    }
    check.mismatches.push(line);
}

/// The same request in both runs asked the same thing: its category, the
/// dataset's text (hash), and its first turn's prompt length.
fn check_prompts<'a>(bk: &Keyed<'a>, sk: &Keyed<'a>, check: &mut RunCheck) {
    let category = |r: &RequestRecord| {
        shown(
            r.category
                .as_ref()
                .map(|c| Value::String(c.clone()))
                .as_ref(),
        )
    };
    let mut category_lines = Vec::new();
    let mut prompt_lines = Vec::new();
    let mut hash_lines = Vec::new();
    for (key, s) in sk {
        let Some(b) = bk.get(key) else { continue };
        if b.category != s.category && category_lines.is_empty() {
            category_lines.push(format!(
                "request {:?} is in category {} in the baseline, {} in the speculative run: \
                 not the same dataset",
                key.0,
                category(b),
                category(s)
            ));
        }
        if let (Some(x), Some(y)) = (&b.prompt_sha256, &s.prompt_sha256)
            && x != y
        {
            hash_lines.push(format!(
                "request {:?} turn {}: the dataset gave it other text in the baseline (sha256 {}…) \
                 than in the speculative run ({}…)",
                key.0,
                key.1,
                &x[..x.len().min(12)],
                &y[..y.len().min(12)]
            ));
        }
        if key.1 == 0
            && let (Some(x), Some(y)) = (b.prompt_tokens, s.prompt_tokens)
            && x != y
        {
            prompt_lines.push(format!(
                "request {:?} turn 0: a prompt of {x} tokens in the baseline, {y} in the \
                 speculative run",
                key.0
            ));
        }
    }
    check.mismatches.extend(category_lines);
    if let Some(first) = hash_lines.first() {
        check.mismatches.push(format!(
            "not the same prompts ({} request(s) differ); first: {first}",
            hash_lines.len()
        ));
    }
    if let Some(first) = prompt_lines.first() {
        check.mismatches.push(format!(
            "not the same prompts ({} first turn(s) differ in prompt length); first: {first}",
            prompt_lines.len()
        ));
    }
}

/// The two runs' `--extra-inputs`: a differing [`SAMPLING_FIELDS`] entry is
/// a mismatch, any other differing field a warning.
pub(super) fn check_extra_inputs(
    be: &serde_json::Map<String, Value>,
    se: &serde_json::Map<String, Value>,
    check: &mut RunCheck,
) {
    let keys: BTreeSet<&String> = be.keys().chain(se.keys()).collect();
    for key in keys {
        let (x, y) = (be.get(key), se.get(key));
        if x == y {
            continue;
        }
        let line = format!(
            "extra input {key}: baseline {}, speculative {}",
            shown(x),
            shown(y)
        );
        if SAMPLING_FIELDS.contains(&key.as_str()) {
            check.mismatches.push(format!("sampling field {line}"));
        } else {
            check
                .warnings
                .push(format!("{line} (not a sampling field)"));
        }
    }
}
