//! The request bodies of first turns, written once per run.

use std::sync::OnceLock;

use bytes::Bytes;
use speedbench_dataset::{Dataset, Message};

use super::record::DatasetRow;
use crate::target::Target;

/// Each conversation's first-turn body, written the first time it is sent
/// and sent as is after. A benchmark sends the same rows thousands of
/// times, and a first turn's body (model, the dataset's preamble and first
/// prompt, the run's fixed options) is the same bytes every time; writing
/// it, mostly escaping the prompt, was 41% of the client's CPU with 8 KB
/// prompts (docs/benchmarks.md). Later turns carry the live replies and
/// are written at each send. Holds about the dataset's text once more, for
/// the rows sent.
pub(super) struct FirstTurnBodies(Box<[OnceLock<Bytes>]>);

impl FirstTurnBodies {
    pub(super) fn new(dataset: &Dataset) -> FirstTurnBodies {
        FirstTurnBodies(
            dataset
                .conversations
                .iter()
                .map(|_| OnceLock::new())
                .collect(),
        )
    }

    /// The body of turn `turn_index` of `row`, whose history (preamble and
    /// turns so far, replies included) is `history`.
    pub(super) fn body(
        &self,
        target: &Target,
        row: DatasetRow<'_>,
        turn_index: usize,
        history: &[Message],
    ) -> Bytes {
        let model = target.model_for_row(row.index);
        let max_tokens = row.output_tokens_of_turn(turn_index);
        let write = || Bytes::from(target.body_json_for(model, history, max_tokens));
        match self.0.get(row.index) {
            Some(cell) if turn_index == 0 => cell.get_or_init(write).clone(),
            _ => write(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::BaseUrl;
    use speedbench_dataset::Conversation;

    #[test]
    fn a_first_turn_is_written_once_and_later_turns_each_time() {
        let conv = |id: &str, turns: &[&str]| Conversation {
            id: id.into(),
            category: None,
            preamble: vec![Message {
                role: "system".into(),
                content: "Be brief.".into(),
            }],
            turns: turns.iter().map(|t| t.to_string()).collect(),
            ..Default::default()
        };
        let dataset = Dataset {
            name: "d".into(),
            conversations: vec![conv("a", &["first a", "second a"]), conv("b", &["first b"])],
        };
        let target = Target::new(BaseUrl::parse("http://127.0.0.1:1").unwrap(), "m");
        let bodies = FirstTurnBodies::new(&dataset);
        let row = |index| DatasetRow::of_session(&dataset, &crate::Load::default(), index);
        let history = |conv: &Conversation, upto: usize, reply: &str| {
            let mut h = conv.preamble.clone();
            for (i, t) in conv.turns.iter().take(upto + 1).enumerate() {
                if i > 0 {
                    h.push(Message {
                        role: "assistant".into(),
                        content: reply.into(),
                    });
                }
                h.push(Message {
                    role: "user".into(),
                    content: t.clone(),
                });
            }
            h
        };
        let (a, b) = (&dataset.conversations[0], &dataset.conversations[1]);
        let first = bodies.body(&target, row(0), 0, &history(a, 0, ""));
        assert_eq!(first, target.body_json(&history(a, 0, "")));
        // Sent again (session 2 is row 0 again): the same bytes, not rewritten.
        let again = bodies.body(&target, row(2), 0, &history(a, 0, ""));
        assert_eq!(again.as_ptr(), first.as_ptr());
        // Each row has its own.
        let other = bodies.body(&target, row(1), 0, &history(b, 0, ""));
        assert_eq!(other, target.body_json(&history(b, 0, "")));
        // A later turn carries this send's reply: written each time.
        for reply in ["one reply", "another"] {
            let h = history(a, 1, reply);
            assert_eq!(bodies.body(&target, row(0), 1, &h), target.body_json(&h));
        }
    }
}
