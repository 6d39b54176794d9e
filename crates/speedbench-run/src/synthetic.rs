//! `--isl`: a run's prompts built to a token length with the server's own
//! tokenizer or a local `tokenizer.json` (`--tokenizer`)
//! ([`speedbench_client::synthetic`]), before the run.

use serde_json::Value;
use speedbench_client::Target;
use speedbench_client::synthetic::{
    LengthDistribution, PrefixPool, SequenceDistribution, ServerTokenizer, SyntheticPrompts,
    TokenCodec, TokenLength, TracePrompts, TurnCount,
};
use speedbench_dataset::Dataset;

use crate::error::RunError;
use crate::execute::served_model;
use crate::observer::Observer;
use crate::spec::{DatasetSource, EngineChoice, RunSpec};
use crate::validate::hinted;

/// `--tokenizer PATH` read.
#[cfg(feature = "tokenizer-json")]
fn local_tokenizer(path: &std::path::Path) -> Result<Box<dyn TokenCodec>, RunError> {
    let tokenizer = speedbench_client::synthetic::LocalTokenizer::open(path)
        .map_err(|e| hinted("--tokenizer", e))?;
    Ok(Box::new(tokenizer))
}

/// `--tokenizer` in a build without a tokenizer reader.
#[cfg(not(feature = "tokenizer-json"))]
fn local_tokenizer(_path: &std::path::Path) -> Result<Box<dyn TokenCodec>, RunError> {
    Err(RunError::invalid(
        "--tokenizer",
        "needs speedbench-run's `tokenizer-json` feature (this build reads no tokenizer.json); \
         leave it out to count with the server's /tokenize",
    ))
}

impl RunSpec {
    /// What `--isl` (or `--isl-distribution`) and its company ask for,
    /// checked; `None` without either, where the synthetic flags are
    /// refused.
    pub(crate) fn synthetic_prompts(&self) -> Result<Option<SyntheticPrompts>, RunError> {
        let s = &self.dataset.synthetic;
        let (prompts, flags) = match self.sequence_lengths()? {
            Some(sequence) => {
                let mean = sequence_marginals(&sequence).0.expected_value().round() as u32;
                let prompts = SyntheticPrompts::new(s.entries, TokenLength::fixed(mean.max(1)));
                (prompts.with_sequence(sequence), "--sequence-distribution")
            }
            None => {
                let Some(input) = self.input_lengths()? else {
                    return self.refuse_shaping_without_prompts();
                };
                let mut prompts = SyntheticPrompts::new(s.entries, input);
                if let Some(output) = self.output_lengths()? {
                    prompts = prompts.with_output(output);
                }
                (prompts, "--isl and --osl")
            }
        };
        let prompts = prompts
            .with_turns(TurnCount {
                mean: s.turn_mean,
                stddev: s.turn_stddev,
            })
            .with_seed(self.load.random_seed);
        let prompts = match self.prefix_pool()? {
            Some(pool) => prompts.with_prefix(pool),
            None => prompts,
        };
        prompts.validate().map_err(|e| hinted(flags, e))?;
        Ok(Some(prompts))
    }

    /// `--num-prefix-prompts` with `--prefix-prompt-length`, both or
    /// neither.
    fn prefix_pool(&self) -> Result<Option<PrefixPool>, RunError> {
        let s = &self.dataset.synthetic;
        match (s.prefix_prompts, s.prefix_length) {
            (0, 0) => Ok(None),
            (0, _) => Err(RunError::invalid(
                "--prefix-prompt-length",
                "needs --num-prefix-prompts (how many prefixes)",
            )),
            (_, 0) => Err(RunError::invalid(
                "--num-prefix-prompts",
                "needs --prefix-prompt-length (each prefix's tokens)",
            )),
            (prompts, length) => Ok(Some(PrefixPool { prompts, length })),
        }
    }

    /// Without synthetic prompts: `None`, unless a flag that shapes them
    /// was given (refused by name).
    fn refuse_shaping_without_prompts(&self) -> Result<Option<SyntheticPrompts>, RunError> {
        let s = &self.dataset.synthetic;
        let given = [
            (s.isl_stddev != 0.0, "--isl-stddev"),
            (s.osl_stddev != 0.0, "--osl-stddev"),
            (s.osl_distribution.is_some(), "--osl-distribution"),
            (s.entries != 100, "--num-dataset-entries"),
            (s.turn_mean != 1, "--conversation-turn-mean"),
            (s.turn_stddev != 0.0, "--conversation-turn-stddev"),
            (s.prefix_prompts != 0, "--num-prefix-prompts"),
            (s.prefix_length != 0, "--prefix-prompt-length"),
        ];
        match given.into_iter().find(|(set, _)| *set) {
            Some((_, flag)) => Err(RunError::invalid(
                flag,
                "shapes synthetic prompts: give --isl too",
            )),
            None => Ok(None),
        }
    }

    /// `--sequence-distribution`, checked alone: it draws both lengths.
    fn sequence_lengths(&self) -> Result<Option<SequenceDistribution>, RunError> {
        let s = &self.dataset.synthetic;
        let Some(text) = s
            .sequence_distribution
            .as_deref()
            .filter(|_| self.dataset.source == Some(DatasetSource::Synthetic))
        else {
            return Ok(None);
        };
        let given = [
            (s.isl.is_some(), "--isl"),
            (s.isl_distribution.is_some(), "--isl-distribution"),
            (s.isl_stddev != 0.0, "--isl-stddev"),
            (self.sampling.osl.is_some(), "--osl"),
            (s.osl_distribution.is_some(), "--osl-distribution"),
            (s.osl_stddev != 0.0, "--osl-stddev"),
        ];
        if let Some((_, flag)) = given.into_iter().find(|(set, _)| *set) {
            return Err(RunError::invalid(
                "--sequence-distribution",
                format!("draws the input and output lengths together: leave {flag} out"),
            ));
        }
        SequenceDistribution::parse(text)
            .map(Some)
            .map_err(|why| RunError::invalid("--sequence-distribution", why))
    }

    /// The synthetic prompts' lengths: `--isl` (with `--isl-stddev`) or
    /// `--isl-distribution`; `None` without synthetic prompts.
    fn input_lengths(&self) -> Result<Option<LengthDistribution>, RunError> {
        let s = &self.dataset.synthetic;
        if self.dataset.source != Some(DatasetSource::Synthetic) {
            return Ok(None);
        }
        match (s.isl, &s.isl_distribution) {
            (Some(_), Some(_)) => Err(RunError::invalid(
                "--isl-distribution",
                "replaces --isl and --isl-stddev: give one of them",
            )),
            (Some(isl), None) => Ok(Some(TokenLength::normal(isl, s.isl_stddev).into())),
            (None, Some(_)) if s.isl_stddev != 0.0 => Err(RunError::invalid(
                "--isl-stddev",
                "with --isl-distribution: the distribution has its own spread",
            )),
            (None, Some(text)) => distribution("--isl-distribution", text).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// The synthetic prompts' output lengths: `--osl` (with
    /// `--osl-stddev`) or `--osl-distribution`; `None` for neither.
    fn output_lengths(&self) -> Result<Option<LengthDistribution>, RunError> {
        let s = &self.dataset.synthetic;
        match (self.sampling.osl, &s.osl_distribution) {
            (Some(_), Some(_)) => Err(RunError::invalid(
                "--osl-distribution",
                "replaces --osl and --osl-stddev: give one of them",
            )),
            (Some(osl), None) => Ok(Some(TokenLength::normal(osl, s.osl_stddev).into())),
            (None, _) if s.osl_stddev != 0.0 => {
                Err(RunError::invalid("--osl-stddev", "needs --osl (the mean)"))
            }
            (None, Some(text)) => distribution("--osl-distribution", text).map(Some),
            (None, None) => Ok(None),
        }
    }

    /// The prompts of `--isl`, counted by [`RunSpec::token_codec`].
    pub(crate) async fn synthetic_dataset(
        &self,
        observer: &mut dyn Observer,
    ) -> Result<Dataset, RunError> {
        let Some(prompts) = self.synthetic_prompts()? else {
            return Err(RunError::invalid(
                "--isl",
                "is needed for synthetic prompts",
            ));
        };
        let tokenizer = self.token_codec().await?;
        let turns = match prompts.turns {
            t if t.mean == 1 && t.stddev == 0.0 => String::new(),
            t => format!(
                " in conversations of {} turns (stddev {})",
                t.mean, t.stddev
            ),
        };
        let lengths = match (&prompts.sequence, &prompts.input) {
            (Some(seq), _) => format!("lengths drawn in pairs ({seq})"),
            (None, LengthDistribution::Normal(t)) => {
                format!("{} tokens (stddev {})", t.mean, t.stddev)
            }
            (None, other) => format!("{other} tokens"),
        };
        let prefixes = prompts.prefix.map_or(String::new(), |p| {
            format!(
                ", each conversation's first after one of {} shared prefixes of {} tokens",
                p.prompts, p.length
            )
        });
        observer.waiting(&format!(
            "building {} synthetic prompts of {lengths}{turns}{prefixes} with {}",
            prompts.entries,
            tokenizer.describe()
        ));
        let built = prompts
            .build(tokenizer.as_ref())
            .await
            .map_err(|e| hinted("building the synthetic prompts", e))?;
        Ok(built.dataset)
    }

    /// `dataset` with the prompts its trace rows give by length built
    /// (`input_length`, `hash_ids` in blocks of `--isl-block-size`), by
    /// [`RunSpec::token_codec`]; unchanged when it has none. Without them,
    /// a `--tokenizer` that counted nothing else (`counted_replies`
    /// false) is said to be unread. With them, also what was built, for
    /// `run.json` (`config.trace_prompts`).
    pub(crate) async fn trace_prompts(
        &self,
        mut dataset: Dataset,
        counted_replies: bool,
        observer: &mut dyn Observer,
    ) -> Result<(Dataset, Option<serde_json::Value>), RunError> {
        let rows = (dataset.conversations.iter())
            .filter(|c| c.prompt_to_build.is_some())
            .count();
        if rows == 0 {
            if let Some(path) = self.tokenizer_unused().filter(|_| !counted_replies) {
                observer.warning(&format!(
                    "--tokenizer {} is not read: this run builds no prompt to a length, and \
                     its token counts are the server's own (`usage`)",
                    path.display()
                ));
            }
            return Ok((dataset, None));
        }
        let s = &self.dataset.synthetic;
        if s.block_size == 0 {
            return Err(RunError::invalid(
                "--isl-block-size",
                "must be at least 1 token",
            ));
        }
        let tokenizer = self.token_codec().await?;
        observer.waiting(&format!(
            "building the prompts of {rows} trace rows given by `input_length` (blocks of {} \
             tokens per hash id) with {}",
            s.block_size,
            tokenizer.describe()
        ));
        TracePrompts::new(s.block_size)
            .with_seed(self.load.random_seed)
            .build(&mut dataset, tokenizer.as_ref())
            .await
            .map_err(|e| hinted("building the trace's prompts", e))?;
        let built = serde_json::json!({
            "rows": rows,
            "block_size": s.block_size,
            "tokens_counted_by": tokenizer.describe(),
        });
        Ok((dataset, Some(built)))
    }

    /// What counts the prompts' tokens: the `tokenizer.json` of
    /// `--tokenizer`, else the server's own `/tokenize`.
    pub(crate) async fn token_codec(&self) -> Result<Box<dyn TokenCodec>, RunError> {
        match &self.dataset.synthetic.tokenizer {
            Some(path) => local_tokenizer(path),
            None => Ok(Box::new(self.server_tokenizer().await?)),
        }
    }

    /// `--tokenizer` where nothing is built with it (it is not opened).
    fn tokenizer_unused(&self) -> Option<&std::path::Path> {
        let s = &self.dataset.synthetic;
        let synthetic = self.dataset.source == Some(DatasetSource::Synthetic);
        s.tokenizer.as_deref().filter(|_| !synthetic)
    }

    /// The server's tokenizer (the served model asked for when `--model`
    /// is not given; the engine's wire shape from `--engine`, else found
    /// by asking).
    async fn server_tokenizer(&self) -> Result<ServerTokenizer, RunError> {
        let mut target: Target = self.validate()?.target;
        target.model = served_model(&target).await?;
        if let EngineChoice::Named(engine) = self.target.engine {
            target.engine = Some(engine);
        }
        ServerTokenizer::connect(&target)
            .await
            .map_err(|e| hinted("asking the server's /tokenize", e))
    }

    /// The output lengths of synthetic prompts that ask for one, where
    /// `extra_body` forces them (`ignore_eos: true`).
    pub(crate) fn forced_output(
        &self,
        extra_body: &serde_json::Map<String, Value>,
    ) -> Option<LengthDistribution> {
        let synthetic = self.dataset.source == Some(DatasetSource::Synthetic);
        let forced = extra_body.get("ignore_eos") == Some(&Value::Bool(true));
        if !(synthetic && forced) {
            return None;
        }
        if let Ok(Some(sequence)) = self.sequence_lengths() {
            return Some(sequence_marginals(&sequence).1);
        }
        self.output_lengths().ok().flatten()
    }

    /// Whether requests must produce exactly their output length: `--isl`
    /// with `--osl` (vLLM's `--dataset-name random` forces it the same
    /// way), unless `--extra-inputs` says otherwise.
    pub(crate) fn forces_output_length(&self, extra_body: &serde_json::Map<String, Value>) -> bool {
        self.dataset.source == Some(DatasetSource::Synthetic)
            && (self.sampling.osl.is_some()
                || self.dataset.synthetic.osl_distribution.is_some()
                || self.dataset.synthetic.sequence_distribution.is_some())
            && !extra_body.contains_key("ignore_eos")
    }
}

/// A length distribution given as JSON to `flag`, checked.
fn distribution(flag: &str, text: &str) -> Result<LengthDistribution, RunError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| RunError::invalid(flag, format!("is not JSON ({e}): {text}")))?;
    LengthDistribution::from_json(&value).map_err(|why| RunError::invalid(flag, why))
}

/// The input and output lengths of a sequence distribution each on its
/// own: the mixture of its pairs' sides, weighted by their percentages.
fn sequence_marginals(sequence: &SequenceDistribution) -> (LengthDistribution, LengthDistribution) {
    let side = |pick: fn(&(f64, TokenLength, TokenLength)) -> TokenLength| {
        let peaks: Vec<(f64, LengthDistribution)> = (sequence.pairs.iter())
            .map(|p| (p.0, pick(p).into()))
            .collect();
        match peaks.as_slice() {
            [(_, one)] => one.clone(),
            _ => LengthDistribution::Peaks(peaks),
        }
    };
    (side(|p| p.1), side(|p| p.2))
}
