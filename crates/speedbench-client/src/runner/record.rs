//! Building a record from what an exchange measured.

use std::ops::Deref;
use std::sync::OnceLock;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use speedbench_dataset::{Conversation, Dataset};
use speedbench_record::{ErrorKind, RequestRecord, SpecDecodeStats};

use super::Shared;
use crate::Load;
use crate::exchange::Exchange;
use crate::spec::MalformedSpec;

/// Maps monotonic instants onto wall-clock nanoseconds consistently.
#[derive(Clone, Copy)]
pub(super) struct Clock {
    instant: Instant,
    pub(super) unix_ns: i64,
}

impl Clock {
    pub(super) fn now() -> Clock {
        let unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as i64)
            .unwrap_or(0);
        Clock {
            instant: Instant::now(),
            unix_ns,
        }
    }

    pub(super) fn unix_ns(&self, at: Instant) -> i64 {
        self.unix_ns + at.saturating_duration_since(self.instant).as_nanos() as i64
    }
}

/// A conversation as a run sends it: the row and its place in the run's
/// dataset (where its prompt hashes are kept).
#[derive(Clone, Copy)]
pub(super) struct DatasetRow<'a> {
    pub(super) index: usize,
    /// The session sending it (the dataset's rows are sent in turn, again
    /// and again): which server it goes to, with several.
    pub(super) session: u64,
    pub(super) conv: &'a Conversation,
}

impl DatasetRow<'_> {
    /// The row session `session` sends, as the load's
    /// [`DatasetSampling`](crate::DatasetSampling) picks it (by default the
    /// dataset's rows in turn).
    pub(super) fn of_session<'d>(
        dataset: &'d Dataset,
        load: &Load,
        session: u64,
    ) -> DatasetRow<'d> {
        let n = dataset.conversations.len() as u64;
        let index = load.sampling.conversation(session, n, load.random_seed);
        DatasetRow {
            index,
            session,
            conv: &dataset.conversations[index],
        }
    }
}

impl Deref for DatasetRow<'_> {
    type Target = Conversation;

    fn deref(&self) -> &Conversation {
        self.conv
    }
}

/// Each turn's [`prompt_sha256`], computed the first time the turn is sent:
/// a benchmark sends the same rows thousands of times, and hashing the
/// prompt at every send was 5% of the client's CPU with 60-byte prompts
/// (more with SPEED-Bench's long ones).
pub(super) struct PromptHashes(Vec<Box<[OnceLock<String>]>>);

impl PromptHashes {
    pub(super) fn new(dataset: &Dataset) -> PromptHashes {
        PromptHashes(
            dataset
                .conversations
                .iter()
                .map(|c| c.turns.iter().map(|_| OnceLock::new()).collect())
                .collect(),
        )
    }

    /// The hash of turn `turn_index` of `row`.
    fn of(&self, row: DatasetRow<'_>, turn_index: usize) -> String {
        match self
            .0
            .get(row.index)
            .and_then(|turns| turns.get(turn_index))
        {
            Some(cell) => cell
                .get_or_init(|| prompt_sha256(row.conv, turn_index))
                .clone(),
            None => prompt_sha256(row.conv, turn_index),
        }
    }
}

/// SHA-256 (hex) of what the dataset gave turn `turn_index` of `conv`: its
/// preamble and user turns up to that one, as `[role, content]` pairs in
/// JSON. The live replies are left out: two runs of one dataset ask the same
/// things whatever their servers answered.
pub(super) fn prompt_sha256(conv: &Conversation, turn_index: usize) -> String {
    let given: Vec<(&str, &str)> = conv
        .preamble
        .iter()
        .map(|m| (m.role.as_str(), m.content.as_str()))
        .chain(
            conv.turns[..=turn_index]
                .iter()
                .map(|t| ("user", t.as_str())),
        )
        .collect();
    let bytes = serde_json::to_vec(&given).unwrap_or_default();
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 (hex) of every row of `dataset` as the run was given it: each
/// conversation's id, preamble and user turns, in order. The shards of one
/// run record it from the whole dataset (before their split), so it is the
/// same on every shard that loaded the same rows.
pub(super) fn dataset_sha256(dataset: &speedbench_dataset::Dataset) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for conv in &dataset.conversations {
        let preamble: Vec<(&str, &str)> = conv
            .preamble
            .iter()
            .map(|m| (m.role.as_str(), m.content.as_str()))
            .collect();
        let row = (&conv.id, preamble, &conv.turns);
        ctx.update(&serde_json::to_vec(&row).unwrap_or_default());
        ctx.update(b"\n");
    }
    let digest = ctx.finish();
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

pub(super) fn base_record(
    shared: &Shared,
    conv: DatasetRow<'_>,
    turn_index: usize,
    request_index: u64,
    warmup: bool,
) -> RequestRecord {
    RequestRecord {
        run_id: shared.run.run_id.clone(),
        request_index,
        conversation_id: conv.id.clone(),
        turn_index: turn_index as u32,
        dataset: shared.run.dataset.name.clone(),
        category: conv.category.clone(),
        model: shared.run.target.model_for_row(conv.index).to_string(),
        server_index: shared.server_of(conv).map(|i| i as u32),
        warmup,
        prompt_sha256: Some(shared.prompt_hashes.of(conv, turn_index)),
        ..Default::default()
    }
}

pub(super) fn cancelled_record(
    shared: &Shared,
    conv: DatasetRow<'_>,
    turn_index: usize,
    request_index: u64,
    warmup: bool,
    started: Instant,
    (kind, why): (ErrorKind, &str),
) -> RequestRecord {
    let now = Instant::now();
    RequestRecord {
        start_unix_ns: shared.clock.unix_ns(started),
        end_unix_ns: shared.clock.unix_ns(now),
        e2e_latency_ns: now.duration_since(started).as_nanos() as u64,
        error_kind: Some(kind),
        error_message: Some(why.into()),
        ..base_record(shared, conv, turn_index, request_index, warmup)
    }
}

pub(super) fn to_record(
    shared: &Shared,
    conv: DatasetRow<'_>,
    turn_index: usize,
    request_index: u64,
    warmup: bool,
    ex: Exchange,
) -> RequestRecord {
    let http_phases = ex.http_phases();
    let mut error = ex.error;
    let (spec, tokens_per_iteration, spec_dropped) =
        kept_payloads(ex.spec, ex.tokens_per_iteration, request_index);
    // No output is a failure, unless the server said the generation ended
    // (a model may end at once with its end-of-sequence token: vLLM's
    // completions endpoint answers `finish_reason: "stop"`, one completion
    // token and no text, and counts it in `vllm:request_success_total`) or
    // that it generated nothing.
    if error.is_none()
        && ex.state.first_output.is_none()
        && ex.state.completion_tokens() != Some(0)
        && ex.state.finish_reason.is_none()
    {
        error = Some((ErrorKind::Protocol, "the response carried no output".into()));
    }
    let state = ex.state;
    // A response cannot end before its first content arrived; the two are
    // stamped on different paths, a few hundred ns apart when one read
    // brought the whole body.
    let ended_at = state
        .first_output
        .map_or(ex.ended_at, |first| ex.ended_at.max(first));
    // Without streaming the first content comes with the whole body: there
    // is no time to first token to measure.
    let ttft_ns = state
        .first_output
        .filter(|_| shared.run.target.streaming)
        .map(|t| t.duration_since(ex.sent_at).as_nanos() as u64);
    RequestRecord {
        start_unix_ns: shared.clock.unix_ns(ex.sent_at),
        end_unix_ns: shared.clock.unix_ns(ended_at),
        ttft_ns,
        e2e_latency_ns: ended_at.duration_since(ex.sent_at).as_nanos() as u64,
        prompt_tokens: state.prompt_tokens,
        completion_tokens: state.completion_tokens(),
        output_chunks: state.chunks,
        finish_reason: state.finish_reason.clone(),
        http_status: ex.status,
        error_kind: error.as_ref().map(|e| e.0),
        error_message: error.map(|e| e.1),
        spec,
        spec_dropped,
        tokens_per_iteration,
        server_timings: state.server_timings(),
        resends: ex.sends.resends,
        http_phases,
        inter_chunk_latencies_ns: state.gaps_ns,
        output_text: state.text,
        ..base_record(shared, conv, turn_index, request_index, warmup)
    }
}

/// The request's spec-decode stats and tokens per iteration as recorded:
/// a payload that cannot be right is left out of every acceptance figure,
/// and the record says why (AIPerf drops such payloads too).
fn kept_payloads(
    spec: Result<Option<SpecDecodeStats>, MalformedSpec>,
    per_iteration: Result<Option<f64>, MalformedSpec>,
    request_index: u64,
) -> (Option<SpecDecodeStats>, Option<f64>, Option<String>) {
    let mut dropped = None;
    let spec = spec.unwrap_or_else(|malformed| {
        tracing::warn!(request_index, "{malformed}; recording no spec-decode stats");
        dropped = Some(malformed.to_string());
        None
    });
    let per_iteration = per_iteration.unwrap_or_else(|malformed| {
        tracing::warn!(
            request_index,
            "{malformed}; recording no tokens per iteration"
        );
        dropped.get_or_insert(malformed.to_string());
        None
    });
    (spec, per_iteration, dropped)
}

#[cfg(test)]
mod tests {
    use speedbench_dataset::Message;

    use super::*;

    #[test]
    fn the_prompt_hash_covers_what_the_dataset_gave_up_to_the_turn() {
        let conv = Conversation {
            id: "q".into(),
            category: None,
            preamble: vec![Message {
                role: "system".into(),
                content: "Be brief.".into(),
            }],
            turns: vec!["Hi".into(), "More".into()],
            ..Default::default()
        };
        // sha256 of [["system","Be brief."],["user","Hi"]] as compact JSON.
        let want = ring::digest::digest(
            &ring::digest::SHA256,
            br#"[["system","Be brief."],["user","Hi"]]"#,
        );
        let want: String = want.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(prompt_sha256(&conv, 0), want);
        assert_eq!(want.len(), 64);
        assert_ne!(prompt_sha256(&conv, 1), want, "turn 2 adds its message");
        let mut edited = conv.clone();
        edited.turns[0].push('!');
        assert_ne!(prompt_sha256(&edited, 0), want);
    }

    /// The cached hash of a turn is the turn's own, for every row and turn
    /// and for every session that sends the row again.
    #[test]
    fn cached_prompt_hashes_are_each_turns_own() {
        let row = |id: &str, turns: &[&str]| Conversation {
            id: id.into(),
            category: None,
            preamble: Vec::new(),
            turns: turns.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        };
        let dataset = Dataset {
            name: "d".into(),
            conversations: vec![
                row("a", &["1", "2"]),
                row("b", &["3"]),
                row("a", &["1", "x"]),
            ],
        };
        let hashes = PromptHashes::new(&dataset);
        for session in 0..7 {
            let r = DatasetRow::of_session(&dataset, &Load::default(), session);
            assert_eq!(r.index, session as usize % 3);
            for turn in 0..r.turns.len() {
                assert_eq!(
                    hashes.of(r, turn),
                    prompt_sha256(r.conv, turn),
                    "row {} turn {turn}",
                    r.index
                );
            }
        }
        // Rows that share an id keep their own hashes.
        let (first, third) = (
            DatasetRow::of_session(&dataset, &Load::default(), 0),
            DatasetRow::of_session(&dataset, &Load::default(), 2),
        );
        assert_eq!(hashes.of(first, 0), hashes.of(third, 0));
        assert_ne!(hashes.of(first, 1), hashes.of(third, 1));
    }
}
