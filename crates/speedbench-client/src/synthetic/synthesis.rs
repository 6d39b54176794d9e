//! A trace reshaped before it is replayed (AIPerf's `synthesis` block and
//! `--synthesis-*` flags): faster or slower, longer or shorter prompts and
//! prefixes, more prefix trees, capped lengths.

use std::collections::HashMap;

use speedbench_dataset::{Conversation, Dataset};
use speedbench_metrics::SplitMix64;

use crate::error::ClientError;

/// How a trace is reshaped, as AIPerf 0.13.0's `Synthesizer` does it.
///
/// In order: rows given by length longer than `max_isl` are dropped (at
/// their original length); then, when any ratio or multiplier is not 1,
/// each row is synthesized: its timestamp divided by `speedup_ratio`;
/// its leading `hash_ids` that other rows share too (its shared prefix)
/// stretched by `prefix_len_multiplier` (each id becomes `⌊m⌋`
/// consecutive ids, plus new ids for the fraction) or cut to `⌊n·m⌋`
/// blocks (at least 1) below 1; its own part (the length past the shared
/// blocks) scaled by `prompt_len_multiplier` onto new ids; the whole
/// shifted onto one of `prefix_root_multiplier` copies of the id space,
/// drawn per row (more distinct trees for a cache to hold); its length
/// clamped to `max_isl`; its output length scaled by
/// `output_len_multiplier` (rounded, halves to even, at least 1). Last,
/// every output length is capped at `max_osl`.
///
/// ```
/// use speedbench_client::synthetic::TraceSynthesis;
/// use speedbench_dataset::{Conversation, Dataset, PromptToBuild};
/// let row = |at_ms: u64, tokens, hash_ids: Vec<u64>| Conversation {
///     timestamp_us: Some(at_ms * 1000),
///     prompt_to_build: Some(PromptToBuild { tokens, hash_ids }),
///     max_output_tokens: Some(300),
///     ..Conversation::default()
/// };
/// let mut trace = Dataset {
///     name: "t".into(),
///     conversations: vec![row(1000, 20, vec![1, 2]), row(3000, 30, vec![1, 3, 4]), row(4000, 90, vec![5])],
/// };
/// let synthesis = TraceSynthesis { speedup_ratio: 2.0, max_isl: Some(64), max_osl: Some(256), ..TraceSynthesis::new(10) };
/// let report = synthesis.apply(&mut trace, 0)?;
/// assert_eq!(report.dropped_over_max_isl, 1); // the 90-token row
/// let c = &trace.conversations;
/// assert_eq!((c[0].timestamp_us, c[1].timestamp_us), (Some(500_000), Some(1_500_000)));
/// assert_eq!(c[1].max_output_tokens, Some(256));
/// # Ok::<(), speedbench_client::ClientError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceSynthesis {
    /// Timestamps divided by it (2: twice as fast), above 0.
    pub speedup_ratio: f64,
    /// The shared prefix's length multiplied by it, above 0.
    pub prefix_len_multiplier: f64,
    /// Copies of the prefix trees rows are spread over, at least 1.
    pub prefix_root_multiplier: u32,
    /// A row's own (unshared) length multiplied by it, above 0.
    pub prompt_len_multiplier: f64,
    /// Output lengths multiplied by it, above 0.
    pub output_len_multiplier: f64,
    /// Rows given by a longer length are dropped; synthesized lengths
    /// clamped to it.
    pub max_isl: Option<u32>,
    /// Output lengths capped at it.
    pub max_osl: Option<u32>,
    /// Tokens per hash id's block (`--isl-block-size`).
    pub block_size: u32,
}

/// What a synthesis changed that a user must be told.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SynthesisReport {
    /// Rows dropped for an input length over `max_isl`.
    pub dropped_over_max_isl: usize,
    /// Rows whose output length was cut to `max_osl`.
    pub capped_at_max_osl: usize,
}

impl TraceSynthesis {
    /// No change (every ratio and multiplier 1, no caps), blocks of
    /// `block_size` tokens.
    pub fn new(block_size: u32) -> TraceSynthesis {
        TraceSynthesis {
            speedup_ratio: 1.0,
            prefix_len_multiplier: 1.0,
            prefix_root_multiplier: 1,
            prompt_len_multiplier: 1.0,
            output_len_multiplier: 1.0,
            max_isl: None,
            max_osl: None,
            block_size,
        }
    }

    /// Why these values cannot run, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        let ratios = [
            (self.speedup_ratio, "the speedup ratio"),
            (self.prefix_len_multiplier, "the prefix length multiplier"),
            (self.prompt_len_multiplier, "the prompt length multiplier"),
            (self.output_len_multiplier, "the output length multiplier"),
        ];
        if let Some((v, what)) = ratios.iter().find(|(v, _)| !(v.is_finite() && *v > 0.0)) {
            return Err(format!("{what} must be a number above 0, not {v}"));
        }
        if self.prefix_root_multiplier == 0 {
            return Err("the prefix root multiplier must be at least 1".into());
        }
        if self.max_isl == Some(0) || self.max_osl == Some(0) || self.block_size == 0 {
            return Err("a maximum length and the block size must be at least 1 token".into());
        }
        Ok(())
    }

    /// Whether a row is synthesized at all (AIPerf synthesizes only when a
    /// ratio or multiplier is not 1; the caps apply regardless).
    pub fn reshapes(&self) -> bool {
        self.speedup_ratio != 1.0
            || self.prefix_len_multiplier != 1.0
            || self.prefix_root_multiplier != 1
            || self.prompt_len_multiplier != 1.0
            || self.output_len_multiplier != 1.0
    }

    /// Reshapes `trace` in place; `seed` draws each row's prefix tree. A
    /// row whose length is shorter than its shared blocks is an error
    /// naming it.
    pub fn apply(&self, trace: &mut Dataset, seed: u64) -> Result<SynthesisReport, ClientError> {
        self.check().map_err(ClientError::Synthesis)?;
        let mut report = SynthesisReport::default();
        if let Some(max) = self.max_isl {
            let before = trace.conversations.len();
            trace
                .conversations
                .retain(|c| c.prompt_to_build.as_ref().is_none_or(|p| p.tokens <= max));
            report.dropped_over_max_isl = before - trace.conversations.len();
        }
        if self.reshapes() {
            self.reshape_prompts(&mut trace.conversations, seed)?;
            for c in &mut trace.conversations {
                self.reshape_row(c);
            }
        }
        if let Some(max) = self.max_osl {
            for c in &mut trace.conversations {
                let over = c.max_output_tokens.is_some_and(|n| n > max)
                    || c.turn_output_tokens.iter().any(|&n| n > max);
                report.capped_at_max_osl += usize::from(over);
                cap(c, |n| n.min(max));
            }
        }
        Ok(report)
    }

    /// A row's timestamp and output lengths.
    fn reshape_row(&self, c: &mut Conversation) {
        if let Some(at) = c.timestamp_us.as_mut() {
            *at = (*at as f64 / self.speedup_ratio) as u64;
        }
        let m = self.output_len_multiplier;
        let max = self.max_osl.unwrap_or(u32::MAX);
        cap(c, |n| {
            ((f64::from(n) * m).round_ties_even() as u32)
                .min(max)
                .max(1)
        });
    }

    /// Every row's blocks and length (AIPerf's `_apply_multipliers`).
    fn reshape_prompts(&self, rows: &mut [Conversation], seed: u64) -> Result<(), ClientError> {
        let mut counts: HashMap<u64, usize> = HashMap::new();
        for p in rows.iter().filter_map(|c| c.prompt_to_build.as_ref()) {
            for &h in &p.hash_ids {
                *counts.entry(h).or_default() += 1;
            }
        }
        let shared = |h: &u64| counts.get(h).is_some_and(|&n| n > 1);
        let stretch = match self.prefix_len_multiplier {
            m if m > 1.0 => m as u64,
            _ => 1,
        };
        let mut next_id = (counts
            .keys()
            .filter(|h| shared(h))
            .max()
            .copied()
            .unwrap_or(0)
            + 1)
            * stretch;
        let block = u64::from(self.block_size);
        for c in rows.iter_mut() {
            let Some(p) = c
                .prompt_to_build
                .as_mut()
                .filter(|p| !p.hash_ids.is_empty())
            else {
                continue;
            };
            let prefix: Vec<u64> = p
                .hash_ids
                .iter()
                .copied()
                .take_while(|h| shared(h))
                .collect();
            let prefix_len = prefix.len() as u64 * block;
            let Some(own_len) = u64::from(p.tokens).checked_sub(prefix_len) else {
                return Err(ClientError::Synthesis(format!(
                    "row {:?}: input_length {} is shorter than its {} shared blocks of {} tokens",
                    c.id,
                    p.tokens,
                    prefix.len(),
                    self.block_size
                )));
            };
            let (mut ids, new_prefix_len) = self.stretch_prefix(&prefix, stretch, &mut next_id);
            let new_own_len = (own_len as f64 * self.prompt_len_multiplier) as u64;
            let own_blocks = new_own_len.div_ceil(block);
            ids.extend(next_id + 1..next_id + 1 + own_blocks);
            next_id += own_blocks;
            p.hash_ids = ids;
            p.tokens = self.clamped(new_prefix_len + new_own_len);
        }
        self.spread_roots(rows, next_id + 1, seed);
        Ok(())
    }

    /// Each row with blocks shifted onto one of the prefix root
    /// multiplier's copies of the id space (`base` ids apart), drawn from
    /// `seed`.
    fn spread_roots(&self, rows: &mut [Conversation], base: u64, seed: u64) {
        if self.prefix_root_multiplier <= 1 {
            return;
        }
        let mut rng = SplitMix64::new(seed ^ 0x524F_4F54_5452_4545); // "ROOTTREE"
        for p in rows.iter_mut().filter_map(|c| c.prompt_to_build.as_mut()) {
            if p.hash_ids.is_empty() {
                continue;
            }
            let tree = rng.below(u64::from(self.prefix_root_multiplier));
            p.hash_ids.iter_mut().for_each(|h| *h += tree * base);
        }
    }

    /// A synthesized length, clamped to the maximum.
    fn clamped(&self, isl: u64) -> u32 {
        let clamp = self.max_isl.map_or(u64::MAX, u64::from);
        isl.min(clamp).min(u64::from(u32::MAX)) as u32
    }

    /// A shared prefix stretched or cut by the prefix multiplier, new ids
    /// taken past `next_id`; its blocks and length in tokens.
    fn stretch_prefix(&self, prefix: &[u64], stretch: u64, next_id: &mut u64) -> (Vec<u64>, u64) {
        let m = self.prefix_len_multiplier;
        let block = u64::from(self.block_size);
        let mut ids: Vec<u64> = if m > 1.0 {
            prefix
                .iter()
                .flat_map(|h| (0..stretch).map(move |j| h * stretch + j))
                .collect()
        } else if m < 1.0 {
            let keep = ((prefix.len() as f64 * m) as usize)
                .max(1)
                .min(prefix.len());
            prefix[..keep].to_vec()
        } else {
            prefix.to_vec()
        };
        if m > 1.0 {
            let target = (prefix.len() as f64 * m).ceil() as u64;
            let extra = target.saturating_sub(ids.len() as u64);
            ids.extend(*next_id + 1..*next_id + 1 + extra);
            *next_id += extra;
        }
        let len = ids.len() as u64 * block;
        (ids, len)
    }
}

/// Every output length of `c` through `f`.
fn cap(c: &mut Conversation, f: impl Fn(u32) -> u32) {
    if let Some(n) = c.max_output_tokens.as_mut() {
        *n = f(*n);
    }
    for n in &mut c.turn_output_tokens {
        *n = f(*n);
    }
}

#[cfg(test)]
mod tests {
    use speedbench_dataset::PromptToBuild;

    use super::*;

    fn row(tokens: u32, hash_ids: &[u64]) -> Conversation {
        Conversation {
            id: format!("r{tokens}"),
            prompt_to_build: Some(PromptToBuild {
                tokens,
                hash_ids: hash_ids.to_vec(),
            }),
            max_output_tokens: Some(5),
            ..Conversation::default()
        }
    }

    fn trace(rows: Vec<Conversation>) -> Dataset {
        Dataset {
            name: "t".into(),
            conversations: rows,
        }
    }

    fn blocks(d: &Dataset) -> Vec<(u32, Vec<u64>)> {
        (d.conversations.iter())
            .map(|c| c.prompt_to_build.clone().unwrap())
            .map(|p| (p.tokens, p.hash_ids))
            .collect()
    }

    /// Blocks of 10; ids 1 and 2 are shared (max 2), 3, 4, 5 each a row's
    /// own. Worked by hand from AIPerf's `_apply_multipliers`.
    #[test]
    fn prefixes_stretch_and_prompts_scale_onto_new_ids() {
        let rows = || vec![row(25, &[1, 2, 3]), row(28, &[1, 2, 4]), row(15, &[5, 6])];
        // Prefix × 2: max id (2 + 1) × 2 = 6; row 0: [1, 2] → [2, 3, 4, 5]
        // (40 tokens), own 5 tokens → 1 block, id 7: 45 tokens. Row 1:
        // [2, 3, 4, 5] + own 8 → id 8: 48. Row 2: nothing shared, own 15 →
        // 2 blocks, ids 9, 10: 15.
        let mut d = trace(rows());
        let s = TraceSynthesis {
            prefix_len_multiplier: 2.0,
            ..TraceSynthesis::new(10)
        };
        s.apply(&mut d, 0).unwrap();
        assert_eq!(
            blocks(&d),
            [
                (45, vec![2, 3, 4, 5, 7]),
                (48, vec![2, 3, 4, 5, 8]),
                (15, vec![9, 10])
            ]
        );
        // Prefix × 1.5: ids stay (⌊1.5⌋ = 1), one new block past max id 3
        // per row for the fraction (⌈2 × 1.5⌉ = 3 blocks); prompt × 2.
        let mut d = trace(rows());
        let s = TraceSynthesis {
            prefix_len_multiplier: 1.5,
            prompt_len_multiplier: 2.0,
            ..TraceSynthesis::new(10)
        };
        s.apply(&mut d, 0).unwrap();
        // Row 0: [1, 2, 4] (30) + own 10 → id 5: 40. Row 1: [1, 2, 6] + own
        // 16 → ids 7, 8: 46. Row 2: own 30 → ids 9, 10, 11: 30.
        assert_eq!(
            blocks(&d),
            [
                (40, vec![1, 2, 4, 5]),
                (46, vec![1, 2, 6, 7, 8]),
                (30, vec![9, 10, 11])
            ]
        );
        // Prefix × 0.5: one shared block kept; new ids past (2 + 1) × 1.
        // Row 2 has no shared block and keeps its length (AIPerf 0.13.0
        // counts one block there that no id stands for: 25).
        let mut d = trace(rows());
        let s = TraceSynthesis {
            prefix_len_multiplier: 0.5,
            ..TraceSynthesis::new(10)
        };
        s.apply(&mut d, 0).unwrap();
        assert_eq!(
            blocks(&d),
            [(15, vec![1, 4]), (18, vec![1, 5]), (15, vec![6, 7])]
        );
    }

    #[test]
    fn roots_shift_whole_rows_and_lengths_clamp() {
        let mut d = trace(vec![row(25, &[1, 2, 3]); 40]);
        let s = TraceSynthesis {
            prefix_root_multiplier: 3,
            max_isl: Some(22),
            ..TraceSynthesis::new(10)
        };
        // max_isl 22 drops every 25-token row before anything else.
        let report = s.apply(&mut d, 7).unwrap();
        assert_eq!(report.dropped_over_max_isl, 40);
        // Shared ids 1, 2, 3 (every row): 30 tokens of prefix, none of
        // its own; the copies of the id space start past (3 + 1) × 1 + 1.
        let mut d = trace(vec![row(30, &[1, 2, 3]); 40]);
        let s = TraceSynthesis {
            prefix_root_multiplier: 3,
            ..TraceSynthesis::new(10)
        };
        s.apply(&mut d, 7).unwrap();
        // Each row is [1, 2, 3] shifted by 0, 5 or 10.
        let mut trees = std::collections::BTreeSet::new();
        for (tokens, ids) in blocks(&d) {
            assert_eq!(tokens, 30);
            let shift = ids[0] - 1;
            assert!([0, 5, 10].contains(&shift), "{ids:?}");
            assert_eq!(ids, [1 + shift, 2 + shift, 3 + shift]);
            trees.insert(shift);
        }
        assert_eq!(trees.len(), 3);
    }

    #[test]
    fn a_row_shorter_than_its_shared_blocks_is_named() {
        let mut d = trace(vec![row(25, &[1, 2, 3]), row(25, &[1, 2, 3])]);
        let s = TraceSynthesis {
            speedup_ratio: 2.0,
            ..TraceSynthesis::new(10)
        };
        let err = s.apply(&mut d, 0).unwrap_err().to_string();
        assert!(
            err.contains("\"r25\"") && err.contains("input_length 25"),
            "{err}"
        );
    }

    #[test]
    fn outputs_scale_round_half_to_even_and_cap() {
        let mut d = trace(vec![row(5, &[]), row(5, &[])]);
        d.conversations[1].max_output_tokens = Some(7);
        let s = TraceSynthesis {
            output_len_multiplier: 0.5,
            max_osl: Some(3),
            ..TraceSynthesis::new(10)
        };
        let report = s.apply(&mut d, 0).unwrap();
        // 5 × 0.5 = 2.5 → 2 (halves to even); 7 × 0.5 = 3.5 → 4 → capped 3.
        let outs: Vec<_> = d
            .conversations
            .iter()
            .map(|c| c.max_output_tokens)
            .collect();
        assert_eq!(outs, [Some(2), Some(3)]);
        assert_eq!(
            report.capped_at_max_osl, 0,
            "capped in the synthesis itself"
        );
        // Without reshaping only the cap applies, and counts.
        let mut d = trace(vec![row(5, &[])]);
        let s = TraceSynthesis {
            max_osl: Some(3),
            ..TraceSynthesis::new(10)
        };
        assert_eq!(s.apply(&mut d, 0).unwrap().capped_at_max_osl, 1);
        assert_eq!(d.conversations[0].max_output_tokens, Some(3));
    }

    #[test]
    fn bad_values_are_refused() {
        let base = TraceSynthesis::new(10);
        for bad in [
            TraceSynthesis {
                speedup_ratio: 0.0,
                ..base
            },
            TraceSynthesis {
                prompt_len_multiplier: f64::NAN,
                ..base
            },
            TraceSynthesis {
                prefix_root_multiplier: 0,
                ..base
            },
            TraceSynthesis {
                max_isl: Some(0),
                ..base
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
