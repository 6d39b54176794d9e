//! Output lengths from reference replies (ShareGPT's shape): each turn of
//! a row with [`Conversation::reference_replies`] asks for its reply's
//! token count, counted by the run's [`TokenCodec`] before the run, and a
//! row with any turn outside [`ReplyLimits`] is left out whole, as
//! AIPerf's ShareGPT loader does.

use futures_util::stream::{self, StreamExt, TryStreamExt};
use speedbench_dataset::{Conversation, Dataset, LimitBroken, ReplyLimits};

use super::{CONCURRENT_PROMPTS, TokenCodec};
use crate::error::ClientError;

/// The reply-length step: its limits, and how many rows it keeps at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ReplyLengths {
    /// The token limits a turn must be inside.
    pub limits: ReplyLimits,
    /// Keep the first this many rows inside the limits and leave the rest
    /// uncounted (`--limit` where the rows are of one category); `None`
    /// counts every row.
    pub keep_first: Option<usize>,
}

/// What the reply-length step did, for the run's notes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReplyCount {
    /// Rows whose turns take their length from a reply.
    pub rows: usize,
    /// Of those, the rows kept.
    pub kept: usize,
    /// Rows left out, by the first limit one of their turns is outside.
    pub outside: Vec<(LimitBroken, usize)>,
    /// Rows past `keep_first`, left out uncounted.
    pub not_counted: usize,
    /// Prompts and replies counted.
    pub texts: usize,
}

impl ReplyCount {
    /// Rows left out by the limits.
    pub fn left_out(&self) -> usize {
        self.outside.iter().map(|(_, n)| n).sum()
    }
}

/// One row's verdict: its turns' reply lengths, or the limit it breaks.
type Verdict = Result<Vec<u32>, LimitBroken>;

impl ReplyLengths {
    /// Sets each reply row's `turn_output_tokens` (and `max_output_tokens`,
    /// its first) from its replies, empties its `reference_replies`, and
    /// leaves out the rows outside the limits; other rows are kept as
    /// they are. A tokenizer error names the row.
    pub async fn apply(
        &self,
        dataset: &mut Dataset,
        codec: &dyn TokenCodec,
    ) -> Result<ReplyCount, ClientError> {
        let mut count = ReplyCount::default();
        let rows = &dataset.conversations;
        let mut verdicts: Vec<Option<Verdict>> = Vec::with_capacity(rows.len());
        while verdicts.len() < rows.len() {
            let needed = self.keep_first.map(|n| n - count.kept);
            if needed == Some(0) {
                // Met: the rest is left uncounted.
                let rest = &rows[verdicts.len()..];
                count.not_counted += rest.iter().filter(|r| has_replies(r)).count();
                count.rows += count.not_counted;
                verdicts.resize(rows.len(), None);
                break;
            }
            // At most as many reply rows as are still needed at a time, so
            // that the rows kept are the first inside the limits.
            let most = needed.unwrap_or(usize::MAX).min(CONCURRENT_PROMPTS * 4);
            let batch = next_batch(&rows[verdicts.len()..], most);
            let judged = self.judge(batch, codec).await?;
            count.rows += judged.iter().filter(|v| v.is_some()).count();
            count.kept += judged.iter().filter(|v| matches!(v, Some(Ok(_)))).count();
            count.texts += batch
                .iter()
                .map(|r| 2 * r.reference_replies.len())
                .sum::<usize>();
            verdicts.extend(judged);
        }
        keep_judged(dataset, verdicts, &mut count);
        Ok(count)
    }

    /// The verdicts of `rows`: `None` for a row without replies.
    async fn judge(
        &self,
        rows: &[Conversation],
        codec: &dyn TokenCodec,
    ) -> Result<Vec<Option<Verdict>>, ClientError> {
        let texts = rows.iter().flat_map(|row| {
            (row.turns.iter().zip(&row.reference_replies))
                .flat_map(move |(p, r)| [(row, p), (row, r)])
        });
        let lengths: Vec<u32> = stream::iter(texts)
            .map(|(row, text)| async move {
                let ids = codec.encode(text).await.map_err(|e| {
                    ClientError::Synthesis(format!(
                        "row {}: counting its reply lengths with {}: {e}",
                        row.id,
                        codec.describe()
                    ))
                })?;
                Ok::<u32, ClientError>(u32::try_from(ids.len()).unwrap_or(u32::MAX))
            })
            .buffered(CONCURRENT_PROMPTS)
            .try_collect()
            .await?;
        let mut lengths = lengths.chunks_exact(2);
        let verdicts = rows.iter().map(|row| {
            has_replies(row).then(|| {
                let turns = lengths.by_ref().take(row.reference_replies.len());
                self.verdict(turns.map(|pair| (pair[0], pair[1])))
            })
        });
        Ok(verdicts.collect())
    }

    /// A row's verdict from its turns' `(prompt, reply)` token counts.
    fn verdict(&self, turns: impl Iterator<Item = (u32, u32)>) -> Verdict {
        turns
            .map(|(prompt, reply)| match self.limits.refuse(prompt, reply) {
                Some(why) => Err(why),
                None => Ok(reply),
            })
            .collect()
    }
}

/// Whether a row's turns take their lengths from replies.
fn has_replies(row: &Conversation) -> bool {
    !row.reference_replies.is_empty()
}

/// The first rows of `rows` holding at most `most` (at least 1) reply rows,
/// with the rows without replies among them.
fn next_batch(rows: &[Conversation], most: usize) -> &[Conversation] {
    let mut seen = 0;
    let end = rows
        .iter()
        .position(|r| {
            seen += usize::from(has_replies(r));
            seen > most
        })
        .unwrap_or(rows.len());
    &rows[..end]
}

/// Applies the verdicts: lengths set on the rows kept, the others left
/// out and counted by reason.
fn keep_judged(dataset: &mut Dataset, verdicts: Vec<Option<Verdict>>, count: &mut ReplyCount) {
    let mut verdicts = verdicts.into_iter();
    dataset.conversations.retain_mut(|row| {
        let verdict = verdicts.next().flatten();
        if row.reference_replies.is_empty() {
            return true;
        }
        row.reference_replies = Vec::new();
        match verdict {
            Some(Ok(lengths)) => {
                row.max_output_tokens = lengths.first().copied();
                row.turn_output_tokens = lengths;
                true
            }
            Some(Err(why)) => {
                match count.outside.iter_mut().find(|(w, _)| *w == why) {
                    Some((_, n)) => *n += 1,
                    None => count.outside.push((why, 1)),
                }
                false
            }
            None => false,
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synthetic::WordCodec;

    /// Rows of `(id, [(prompt words, reply words)])`, and one plain row.
    fn dataset(rows: &[(&str, &[(usize, usize)])]) -> Dataset {
        let words = |n: usize| vec!["w"; n].join(" ");
        let mut conversations: Vec<Conversation> = rows
            .iter()
            .map(|(id, turns)| Conversation {
                id: id.to_string(),
                turns: turns.iter().map(|(p, _)| words(*p)).collect(),
                reference_replies: turns.iter().map(|(_, r)| words(*r)).collect(),
                ..Default::default()
            })
            .collect();
        conversations.push(Conversation {
            id: "plain".into(),
            turns: vec!["no reply here".into()],
            ..Default::default()
        });
        Dataset {
            name: "t".into(),
            conversations,
        }
    }

    fn ids(d: &Dataset) -> Vec<&str> {
        d.conversations.iter().map(|c| c.id.as_str()).collect()
    }

    #[tokio::test]
    async fn each_turn_asks_for_its_replys_length_and_rows_outside_the_limits_go() {
        let mut d = dataset(&[
            ("a", &[(5, 7), (4, 4)]),
            ("short-prompt", &[(5, 7), (3, 9)]),
            ("long-prompt", &[(1025, 4)]),
            ("short-reply", &[(9, 3)]),
            ("too-long", &[(1000, 1049)]),
            ("b", &[(1024, 1024)]),
        ]);
        let count = ReplyLengths::default()
            .apply(&mut d, &WordCodec::default())
            .await
            .unwrap();
        assert_eq!(ids(&d), ["a", "b", "plain"]);
        assert_eq!(d.conversations[0].turn_output_tokens, [7, 4]);
        assert_eq!(d.conversations[0].max_output_tokens, Some(7));
        assert_eq!(d.conversations[1].turn_output_tokens, [1024]);
        assert!(
            d.conversations
                .iter()
                .all(|c| c.reference_replies.is_empty())
        );
        assert_eq!(d.conversations[2].max_output_tokens, None);
        assert_eq!((count.rows, count.kept, count.left_out()), (6, 2, 4));
        assert_eq!(count.texts, 16);
        assert_eq!(count.not_counted, 0);
        assert_eq!(
            count.outside,
            [
                (LimitBroken::PromptUnder, 1),
                (LimitBroken::PromptOver, 1),
                (LimitBroken::ReplyUnder, 1),
                (LimitBroken::TogetherOver, 1)
            ]
        );
    }

    #[tokio::test]
    async fn keep_first_stops_counting_once_met() {
        let many: Vec<(String, [(usize, usize); 1])> = (0..300)
            .map(|i| (format!("r{i}"), [(if i == 1 { 2 } else { 5 }, 6)]))
            .collect();
        let rows: Vec<(&str, &[(usize, usize)])> =
            many.iter().map(|(id, t)| (id.as_str(), &t[..])).collect();
        let mut d = dataset(&rows);
        let lengths = ReplyLengths {
            keep_first: Some(3),
            ..Default::default()
        };
        let count = lengths.apply(&mut d, &WordCodec::default()).await.unwrap();
        assert_eq!(ids(&d), ["r0", "r2", "r3", "plain"]);
        assert_eq!((count.rows, count.kept, count.left_out()), (300, 3, 1));
        assert_eq!(count.not_counted, 296);
        // Only the rows up to the third kept were counted.
        assert_eq!(count.texts, 8);
    }
}
