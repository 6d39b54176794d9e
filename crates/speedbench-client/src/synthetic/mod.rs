//! Synthetic prompts of a known token length (AIPerf's `--isl/--osl`,
//! `vllm bench serve --dataset-name random`'s shape), so that published
//! fixed-length numbers can be reproduced.
//!
//! The text is cut from a corpus of Shakespeare's sonnets (public domain;
//! AIPerf samples the same text) by token: the corpus is tokenized once by
//! the server's own tokenizer ([`ServerTokenizer`]) or another
//! [`TokenCodec`], a prompt of `L` tokens is `L` corpus tokens from a
//! seeded offset (wrapping at the end), decoded, and tokenized again to
//! check: where decoding merged or split tokens at the cut, tokens are
//! dropped or added until the text is exactly `L` tokens, as vLLM's
//! `gen_prompt_decode_to_target_len` does. A prompt that never comes out
//! exact is an error naming the entry, never a prompt of another length.
//!
//! ```
//! use speedbench_client::synthetic::{SyntheticPrompts, TokenLength, WordCodec};
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let spec = SyntheticPrompts::new(3, TokenLength::fixed(5)).with_output(TokenLength::fixed(7));
//! let built = spec.build(&WordCodec::default()).await?;
//! assert_eq!(built.input_tokens, vec![5, 5, 5]);
//! let first = &built.dataset.conversations[0];
//! assert_eq!(first.turns[0].split_whitespace().count(), 5);
//! assert_eq!(first.max_output_tokens, Some(7));
//! # Ok::<(), speedbench_client::ClientError>(())
//! # }).unwrap();
//! ```

mod lengths;
#[cfg(feature = "tokenizer-json")]
mod local;
mod replies;
mod server;
mod synthesis;
mod word;

use std::future::Future;
use std::pin::Pin;

use speedbench_dataset::{Conversation, Dataset, PromptToBuild};
use speedbench_metrics::SplitMix64;

use crate::error::ClientError;
use crate::schedule::standard_normal;

pub use lengths::{LengthDistribution, SequenceDistribution};
#[cfg(feature = "tokenizer-json")]
pub use local::LocalTokenizer;
pub use replies::{ReplyCount, ReplyLengths};
pub use server::ServerTokenizer;
pub use synthesis::{SynthesisReport, TraceSynthesis};
pub use word::WordCodec;

/// The corpus prompts are cut from: the first ~1,000 lines of
/// Shakespeare's sonnets.
pub const CORPUS: &str = include_str!("sonnets.txt");

/// How many times a prompt's tokens are adjusted before it is an error.
const MAX_ADJUSTMENTS: usize = 8;

/// A tokenizer's answer, boxed so [`TokenCodec`] stays object-safe.
pub type TokenFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ClientError>> + Send + 'a>>;

/// Text to token ids and back: the server's tokenizer
/// ([`ServerTokenizer`]), a local `tokenizer.json` (`LocalTokenizer`, with
/// the `tokenizer-json` feature), or a test's.
pub trait TokenCodec: Send + Sync {
    /// What counted the tokens, kept in the run's files (e.g. `server
    /// /tokenize at http://host:8000`).
    fn describe(&self) -> String;
    /// The token ids of `text`, without special tokens (no BOS).
    fn encode<'a>(&'a self, text: &'a str) -> TokenFuture<'a, Vec<u32>>;
    /// The text of `tokens`.
    fn decode<'a>(&'a self, tokens: &'a [u32]) -> TokenFuture<'a, String>;
}

/// A length drawn per entry: normal around `mean` with `stddev`, rounded,
/// at least 1 (AIPerf's `--isl`/`--isl-stddev`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenLength {
    /// The mean, in tokens (at least 1).
    pub mean: u32,
    /// The standard deviation, in tokens (0 for every entry at `mean`).
    pub stddev: f64,
}

impl TokenLength {
    /// Every entry exactly `mean` tokens.
    pub fn fixed(mean: u32) -> TokenLength {
        TokenLength { mean, stddev: 0.0 }
    }

    /// Normal around `mean` with `stddev`.
    pub fn normal(mean: u32, stddev: f64) -> TokenLength {
        TokenLength { mean, stddev }
    }
}

/// `round(mean + stddev·z)` for a standard normal `z`, at least 1 (no
/// draw at all without a spread, so a fixed count leaves the seed's
/// sequence as it was).
fn normal_count(mean: u32, stddev: f64, rng: &mut SplitMix64) -> u32 {
    if stddev <= 0.0 {
        return mean.max(1);
    }
    let x = f64::from(mean) + stddev * standard_normal(rng);
    // `as` saturates: a draw past u32::MAX is u32::MAX.
    (x.round().max(1.0)) as u32
}

/// How many turns each synthetic conversation has: normal around `mean`
/// with `stddev`, rounded, at least 1 (AIPerf's `--conversation-turn-mean`
/// and `--conversation-turn-stddev`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnCount {
    /// The mean number of turns (at least 1).
    pub mean: u32,
    /// The standard deviation (0: every conversation `mean` turns).
    pub stddev: f64,
}

impl TurnCount {
    /// One turn per conversation.
    pub const SINGLE: TurnCount = TurnCount {
        mean: 1,
        stddev: 0.0,
    };
}

/// What to build: `entries` conversations of [`TurnCount`] `turns` user
/// turns (one, unless asked), each turn a prompt of [`TokenLength`]
/// `input` tokens asking for `output` tokens when given. Each turn draws
/// its own lengths, as AIPerf's synthetic conversations do.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticPrompts {
    /// How many conversations (AIPerf's `--num-dataset-entries`).
    pub entries: usize,
    /// Each prompt's length.
    pub input: LengthDistribution,
    /// Each prompt's output length (its requests' `max_tokens`), when set.
    pub output: Option<LengthDistribution>,
    /// Turns per conversation.
    pub turns: TurnCount,
    /// Input and output lengths drawn together, in place of `input` and
    /// `output` (AIPerf's `--sequence-distribution`).
    pub sequence: Option<SequenceDistribution>,
    /// The seed of the lengths and the corpus offsets.
    pub seed: u64,
    /// Shared prefixes, one of them before each conversation's first
    /// prompt (AIPerf's `--num-prefix-prompts`).
    pub prefix: Option<PrefixPool>,
}

/// A pool of shared prefixes (AIPerf's `--num-prefix-prompts` and
/// `--prefix-prompt-length`), for a prefix cache to find: `prompts`
/// distinct texts of exactly `length` tokens each, cut from the corpus at
/// seeded offsets. Each conversation's first prompt is one of them, drawn
/// per conversation, followed by its own text of its drawn length, joined
/// by token and adjusted so the whole counts exactly `length` plus that
/// length (the prefix rides on top of `--isl`, as in AIPerf and vLLM's
/// `--random-prefix-len`). Later turns have none: the history carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixPool {
    /// How many distinct prefixes (at least 1).
    pub prompts: usize,
    /// Each prefix's length, tokens (at least 1).
    pub length: u32,
}

/// The prompts built, with what the tokenizer counted.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntheticDataset {
    /// One conversation per entry, ids `synthetic-0`, ...
    pub dataset: Dataset,
    /// Each prompt's length in tokens, as the tokenizer counted it: every
    /// turn of every entry, in order.
    pub input_tokens: Vec<u32>,
    /// What counted them ([`TokenCodec::describe`]).
    pub tokenizer: String,
}

impl SyntheticPrompts {
    /// `entries` prompts of `input` tokens, seed 0, no output length.
    pub fn new(entries: usize, input: impl Into<LengthDistribution>) -> SyntheticPrompts {
        SyntheticPrompts {
            entries,
            input: input.into(),
            output: None,
            turns: TurnCount::SINGLE,
            sequence: None,
            seed: 0,
            prefix: None,
        }
    }

    /// A prefix of `pool` before each conversation's first prompt.
    pub fn with_prefix(mut self, pool: PrefixPool) -> Self {
        self.prefix = Some(pool);
        self
    }

    /// Each prompt's input and output lengths drawn together from
    /// `sequence`, in place of `input` and `output`.
    pub fn with_sequence(mut self, sequence: SequenceDistribution) -> Self {
        self.sequence = Some(sequence);
        self
    }

    /// Conversations of `turns` user turns each (drawn per entry).
    pub fn with_turns(mut self, turns: TurnCount) -> Self {
        self.turns = turns;
        self
    }

    /// Each prompt asks for `output` tokens.
    pub fn with_output(mut self, output: impl Into<LengthDistribution>) -> Self {
        self.output = Some(output.into());
        self
    }

    /// The seed of the lengths and offsets.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Checks the lengths: a mean of at least 1, a finite standard
    /// deviation not below 0, at least one entry.
    pub fn validate(&self) -> Result<(), ClientError> {
        if self.entries == 0 {
            return Err(ClientError::Synthesis(
                "at least one synthetic entry is needed".into(),
            ));
        }
        let bad = |what: &str, why: String| ClientError::Synthesis(format!("{what}: {why}"));
        (self.input.check()).map_err(|why| bad("the input length (--isl)", why))?;
        if let Some(output) = &self.output {
            output
                .check()
                .map_err(|why| bad("the output length (--osl)", why))?;
        }
        if let Some(pool) = self.prefix
            && (pool.prompts == 0 || pool.length == 0)
        {
            return Err(ClientError::Synthesis(format!(
                "the prefix prompts (--num-prefix-prompts, --prefix-prompt-length): at least \
                 one prefix of at least one token is needed (got {} of {} tokens)",
                pool.prompts, pool.length
            )));
        }
        let turns = self.turns;
        if turns.mean == 0 || !turns.stddev.is_finite() || turns.stddev < 0.0 {
            return Err(ClientError::Synthesis(format!(
                "the turns per conversation (--conversation-turn-mean): the mean must be at \
                 least 1 and the standard deviation finite and not negative (got mean {}, \
                 stddev {})",
                turns.mean, turns.stddev
            )));
        }
        Ok(())
    }

    /// Builds the prompts with `codec`: the corpus tokenized once, then
    /// each prompt cut, decoded and counted again (two calls of `codec`
    /// per adjustment).
    pub async fn build(&self, codec: &dyn TokenCodec) -> Result<SyntheticDataset, ClientError> {
        use futures_util::stream::{self, StreamExt, TryStreamExt};
        self.validate()?;
        let corpus = tokenized_corpus(codec).await?;
        let (pool, plan) = self.plan(corpus.len());
        let prefixes = prefix_texts(codec, &corpus, &pool).await?;
        // The prompts are cut independently: several at once, so a
        // server's tokenizer is not asked one call at a time.
        let prompts = plan.iter().flat_map(|entry| {
            (entry.turns.iter().enumerate()).map(move |(turn, t)| (entry, turn, t))
        });
        let texts: Vec<String> = stream::iter(prompts)
            .map(|(entry, turn, t)| {
                let corpus = &corpus;
                let prefix = match (turn, entry.prefix) {
                    (0, Some(p)) => prefixes[p].as_slice(),
                    _ => &[],
                };
                async move {
                    exact_prompt(codec, corpus, prefix, t.start, t.input)
                        .await
                        .map_err(|why| {
                            let at = match entry.turns.len() {
                                1 => format!("entry {}", entry.index),
                                _ => format!("entry {}, turn {}", entry.index, turn + 1),
                            };
                            let by = codec.describe();
                            ClientError::Synthesis(format!("{at}: {why} (tokens counted by {by})"))
                        })
                }
            })
            .buffered(CONCURRENT_PROMPTS)
            .try_collect()
            .await?;
        let (dataset, input_tokens) = assemble(plan, texts, &prefixes);
        Ok(SyntheticDataset {
            dataset,
            input_tokens,
            tokenizer: codec.describe(),
        })
    }

    /// Every entry's turns, each turn's lengths and corpus offset drawn
    /// from the seed in order (the same plan for a seed, whatever counts
    /// the tokens).
    ///
    /// The prefixes draw from a sequence of their own (their offsets, then
    /// each entry's choice), so a seed's prompts are the same with or
    /// without them.
    fn plan(&self, corpus_len: usize) -> (Vec<PlannedPrefix>, Vec<PlannedEntry>) {
        let mut rng = SplitMix64::new(self.seed ^ 0x5359_4E54_4845_5449); // "SYNTHETI"
        let mut prefix_rng = SplitMix64::new(self.seed ^ 0x5052_4546_4958_4553); // "PREFIXES"
        let pool: Vec<PlannedPrefix> = (self.prefix.iter())
            .flat_map(|p| (0..p.prompts).map(move |_| p.length))
            .map(|length| PlannedPrefix {
                length,
                start: prefix_rng.below(corpus_len as u64) as usize,
            })
            .collect();
        let entries = (0..self.entries)
            .map(|index| {
                let n_turns = normal_count(self.turns.mean, self.turns.stddev, &mut rng);
                let turns = (0..n_turns)
                    .map(|_| match &self.sequence {
                        Some(seq) => {
                            let (input, output) = seq.draw(&mut rng);
                            let start = rng.below(corpus_len as u64) as usize;
                            PlannedTurn {
                                input,
                                start,
                                output: Some(output),
                            }
                        }
                        None => {
                            let input = self.input.draw(&mut rng);
                            let start = rng.below(corpus_len as u64) as usize;
                            let output = self.output.as_ref().map(|o| o.draw(&mut rng));
                            PlannedTurn {
                                input,
                                start,
                                output,
                            }
                        }
                    })
                    .collect();
                let prefix =
                    (!pool.is_empty()).then(|| prefix_rng.below(pool.len() as u64) as usize);
                PlannedEntry {
                    index,
                    turns,
                    prefix,
                }
            })
            .collect();
        (pool, entries)
    }
}

/// The prefixes of `pool` cut to their lengths, as the token ids of their
/// exact texts (joined to a prompt by token, so no seam is charged).
async fn prefix_texts(
    codec: &dyn TokenCodec,
    corpus: &[u32],
    pool: &[PlannedPrefix],
) -> Result<Vec<Vec<u32>>, ClientError> {
    let mut prefixes = Vec::with_capacity(pool.len());
    for (k, p) in pool.iter().enumerate() {
        let by = codec.describe();
        let failed = |why: String| {
            ClientError::Synthesis(format!("prefix prompt {k}: {why} (tokens counted by {by})"))
        };
        let text = exact_prompt(codec, corpus, &[], p.start, p.length)
            .await
            .map_err(failed)?;
        prefixes.push(codec.encode(&text).await?);
    }
    Ok(prefixes)
}

/// The planned entries as conversations of their cut `texts` (every turn
/// of every entry, in order), with each prompt's length in tokens (a
/// first prompt's prefix included).
fn assemble(
    plan: Vec<PlannedEntry>,
    texts: Vec<String>,
    prefixes: &[Vec<u32>],
) -> (Dataset, Vec<u32>) {
    let mut texts = texts.into_iter();
    let mut input_tokens = Vec::with_capacity(texts.len());
    let conversations = plan
        .into_iter()
        .map(|entry| {
            let n = entry.turns.len();
            let prefix = entry.prefix.map_or(0, |p| prefixes[p].len() as u32);
            input_tokens.extend(entry.turns.iter().map(|t| t.input));
            if let Some(first) = input_tokens.len().checked_sub(n) {
                input_tokens[first] += prefix;
            }
            let outputs: Vec<u32> = entry.turns.iter().filter_map(|t| t.output).collect();
            Conversation {
                id: format!("synthetic-{}", entry.index),
                turns: texts.by_ref().take(n).collect(),
                max_output_tokens: outputs.first().copied(),
                turn_output_tokens: if n > 1 { outputs } else { Vec::new() },
                ..Conversation::default()
            }
        })
        .collect();
    let dataset = Dataset {
        name: "synthetic".into(),
        conversations,
    };
    (dataset, input_tokens)
}

/// Prompts cut at once while a dataset is built (tokenizer calls in
/// flight, two per adjustment).
const CONCURRENT_PROMPTS: usize = 16;

/// One synthetic conversation as drawn, before its text is cut.
struct PlannedEntry {
    index: usize,
    turns: Vec<PlannedTurn>,
    /// The pool's prefix before its first prompt.
    prefix: Option<usize>,
}

/// One shared prefix as drawn: its length and corpus offset.
struct PlannedPrefix {
    length: u32,
    start: usize,
}

/// One turn as drawn: its prompt's length and corpus offset, its output.
struct PlannedTurn {
    input: u32,
    start: usize,
    output: Option<u32>,
}

/// `prefix`, then `wanted` tokens of `corpus` from `start` (wrapping),
/// decoded, adjusted until the text counts exactly the prefix's tokens
/// and `wanted`; the error says what it counted instead.
async fn exact_prompt(
    codec: &dyn TokenCodec,
    corpus: &[u32],
    prefix: &[u32],
    start: usize,
    wanted: u32,
) -> Result<String, String> {
    let mut source = CorpusCursor {
        corpus,
        next: start,
    };
    let mut ids = Vec::with_capacity(prefix.len() + wanted as usize);
    ids.extend_from_slice(prefix);
    source.take(wanted as usize, &mut ids);
    exact_text(codec, ids, &mut source, wanted + prefix.len() as u32).await
}

/// Corpus tokens in order from `next`, wrapping at the end.
struct CorpusCursor<'c> {
    corpus: &'c [u32],
    next: usize,
}

impl CorpusCursor<'_> {
    fn take(&mut self, n: usize, into: &mut Vec<u32>) {
        for _ in 0..n {
            into.push(self.corpus[self.next % self.corpus.len()]);
            self.next += 1;
        }
    }
}

/// `ids` decoded, then adjusted (tokens dropped from the end, or more
/// taken from `more`) until the text counts exactly `wanted` tokens.
async fn exact_text(
    codec: &dyn TokenCodec,
    mut ids: Vec<u32>,
    more: &mut CorpusCursor<'_>,
    wanted: u32,
) -> Result<String, String> {
    let wanted = wanted as usize;
    let mut counted = Vec::new();
    for _ in 0..MAX_ADJUSTMENTS {
        let text = codec.decode(&ids).await.map_err(|e| e.to_string())?;
        let n = codec.encode(&text).await.map_err(|e| e.to_string())?.len();
        counted.push(n);
        if n == wanted {
            return Ok(text);
        }
        if n > wanted {
            let drop = (n - wanted).min(ids.len().saturating_sub(1));
            if drop == 0 {
                break;
            }
            ids.truncate(ids.len() - drop);
        } else {
            more.take(wanted - n, &mut ids);
        }
    }
    Err(format!(
        "no text of exactly {wanted} tokens could be cut from the corpus (the tokenizer \
         counted {counted:?} after each adjustment)"
    ))
}

/// The prompts a trace gives by length ([`Conversation::prompt_to_build`],
/// AIPerf's `mooncake_trace` `input_length` and `hash_ids`), built as
/// AIPerf builds them: each hash id is a block of `block_size` corpus
/// tokens from an offset its id seeds, the same block wherever the id
/// appears, so rows that share ids share a prefix; the prompt is its
/// blocks in order, the last cut to the length, and tokens past its
/// blocks come from an offset the row seeds. The text is then adjusted to
/// count exactly its length, as [`SyntheticPrompts`] does.
///
/// ```
/// use speedbench_client::synthetic::{TracePrompts, WordCodec};
/// use speedbench_dataset::{Conversation, Dataset, PromptToBuild};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let row = |hash_ids: Vec<u64>, tokens| Conversation {
///     prompt_to_build: Some(PromptToBuild { tokens, hash_ids }),
///     ..Conversation::default()
/// };
/// let mut trace = Dataset {
///     name: "trace".into(),
///     conversations: vec![row(vec![1, 2], 7), row(vec![1, 3], 6)],
/// };
/// let built = TracePrompts::new(4).build(&mut trace, &WordCodec::default()).await?;
/// assert_eq!(built, 2);
/// let words = |i: usize| trace.conversations[i].turns[0].split(' ').map(str::to_owned).collect::<Vec<_>>();
/// assert_eq!((words(0).len(), words(1).len()), (7, 6));
/// assert_eq!(words(0)[..4], words(1)[..4], "block 1 is shared");
/// # Ok::<(), speedbench_client::ClientError>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracePrompts {
    /// Tokens per hash id's block (AIPerf's `--isl-block-size`, 512 by
    /// default).
    pub block_size: u32,
    /// The seed of the blocks' and rows' corpus offsets.
    pub seed: u64,
}

impl TracePrompts {
    /// Blocks of `block_size` tokens, seed 0.
    pub fn new(block_size: u32) -> TracePrompts {
        TracePrompts {
            block_size: block_size.max(1),
            seed: 0,
        }
    }

    /// The seed of the corpus offsets.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Builds the prompt of every row of `dataset` that has one to build
    /// (its one turn), with `codec`; how many were built. The error names
    /// the row.
    pub async fn build(
        &self,
        dataset: &mut Dataset,
        codec: &dyn TokenCodec,
    ) -> Result<usize, ClientError> {
        if !dataset
            .conversations
            .iter()
            .any(|c| c.prompt_to_build.is_some())
        {
            return Ok(0);
        }
        let corpus = tokenized_corpus(codec).await?;
        let mut built = 0;
        for (row, conversation) in dataset.conversations.iter_mut().enumerate() {
            let Some(prompt) = &conversation.prompt_to_build else {
                continue;
            };
            let (ids, mut more) = self.block_tokens(&corpus, prompt, row);
            let text = exact_text(codec, ids, &mut more, prompt.tokens)
                .await
                .map_err(|why| {
                    ClientError::Synthesis(format!(
                        "row {} ({} tokens): {why} (tokens counted by {})",
                        conversation.id,
                        prompt.tokens,
                        codec.describe()
                    ))
                })?;
            conversation.turns = vec![text];
            built += 1;
        }
        Ok(built)
    }

    /// The row's tokens before adjustment, and where more come from.
    fn block_tokens<'c>(
        &self,
        corpus: &'c [u32],
        prompt: &PromptToBuild,
        row: usize,
    ) -> (Vec<u32>, CorpusCursor<'c>) {
        let wanted = prompt.tokens as usize;
        let block = self.block_size as usize;
        let offset =
            |salt: u64| SplitMix64::new(self.seed ^ salt).below(corpus.len() as u64) as usize;
        let mut ids = Vec::with_capacity(wanted);
        for &hash in &prompt.hash_ids {
            let n = block.min(wanted - ids.len());
            if n == 0 {
                break;
            }
            // Block ids and rows seed apart: the top bit marks a row.
            let mut cursor = CorpusCursor {
                corpus,
                next: offset(hash & !(1 << 63)),
            };
            cursor.take(n, &mut ids);
        }
        let mut rest = CorpusCursor {
            corpus,
            next: offset(row as u64 | (1 << 63)),
        };
        rest.take(wanted - ids.len(), &mut ids);
        (ids, rest)
    }
}

/// The corpus as `codec`'s tokens; none is an error.
async fn tokenized_corpus(codec: &dyn TokenCodec) -> Result<Vec<u32>, ClientError> {
    let corpus = codec.encode(CORPUS).await?;
    if corpus.is_empty() {
        return Err(ClientError::Synthesis(format!(
            "{} gave no tokens for the corpus",
            codec.describe()
        )));
    }
    Ok(corpus)
}

#[cfg(test)]
mod tests;
