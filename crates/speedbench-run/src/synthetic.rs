//! `--isl`: a run's prompts built to a token length with the server's own
//! tokenizer ([`speedbench_client::synthetic`]), before the run.

use serde_json::Value;
use speedbench_client::Target;
use speedbench_client::synthetic::{
    ServerTokenizer, SyntheticPrompts, TokenCodec, TokenLength, TracePrompts, TurnCount,
};
use speedbench_dataset::Dataset;

use crate::error::RunError;
use crate::execute::served_model;
use crate::observer::Observer;
use crate::spec::{DatasetSource, EngineChoice, RunSpec};
use crate::validate::hinted;

impl RunSpec {
    /// What `--isl` and its company ask for, checked; `None` without
    /// `--isl`, where the synthetic flags are refused.
    pub(crate) fn synthetic_prompts(&self) -> Result<Option<SyntheticPrompts>, RunError> {
        let s = &self.dataset.synthetic;
        let Some(isl) = s
            .isl
            .filter(|_| self.dataset.source == Some(DatasetSource::Synthetic))
        else {
            let given = [
                (s.isl_stddev != 0.0, "--isl-stddev"),
                (s.osl_stddev != 0.0, "--osl-stddev"),
                (s.entries != 100, "--num-dataset-entries"),
                (s.turn_mean != 1, "--conversation-turn-mean"),
                (s.turn_stddev != 0.0, "--conversation-turn-stddev"),
            ];
            if let Some((_, flag)) = given.into_iter().find(|(set, _)| *set) {
                return Err(RunError::invalid(
                    flag,
                    "shapes synthetic prompts: give --isl too",
                ));
            }
            return Ok(None);
        };
        let mut prompts = SyntheticPrompts::new(s.entries, TokenLength::normal(isl, s.isl_stddev))
            .with_turns(TurnCount {
                mean: s.turn_mean,
                stddev: s.turn_stddev,
            })
            .with_seed(self.load.random_seed);
        if let Some(osl) = self.sampling.osl {
            prompts = prompts.with_output(TokenLength::normal(osl, s.osl_stddev));
        } else if s.osl_stddev != 0.0 {
            return Err(RunError::invalid("--osl-stddev", "needs --osl (the mean)"));
        }
        prompts
            .validate()
            .map_err(|e| hinted("--isl and --osl", e))?;
        Ok(Some(prompts))
    }

    /// The prompts of `--isl`, counted by the server's tokenizer.
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
        let tokenizer = self.server_tokenizer().await?;
        let turns = match prompts.turns {
            t if t.mean == 1 && t.stddev == 0.0 => String::new(),
            t => format!(
                " in conversations of {} turns (stddev {})",
                t.mean, t.stddev
            ),
        };
        observer.waiting(&format!(
            "building {} synthetic prompts of {} tokens (stddev {}){turns} with {}",
            prompts.entries,
            prompts.input.mean,
            prompts.input.stddev,
            tokenizer.describe()
        ));
        let built = prompts
            .build(&tokenizer)
            .await
            .map_err(|e| hinted("building the synthetic prompts", e))?;
        Ok(built.dataset)
    }

    /// `dataset` with the prompts its trace rows give by length built
    /// (`input_length`, `hash_ids` in blocks of `--isl-block-size`), by the
    /// server's tokenizer; unchanged when it has none.
    pub(crate) async fn trace_prompts(
        &self,
        mut dataset: Dataset,
        observer: &mut dyn Observer,
    ) -> Result<Dataset, RunError> {
        let rows = (dataset.conversations.iter())
            .filter(|c| c.prompt_to_build.is_some())
            .count();
        if rows == 0 {
            return Ok(dataset);
        }
        let s = &self.dataset.synthetic;
        if s.block_size == 0 {
            return Err(RunError::invalid(
                "--isl-block-size",
                "must be at least 1 token",
            ));
        }
        let tokenizer = self.server_tokenizer().await?;
        observer.waiting(&format!(
            "building the prompts of {rows} trace rows given by `input_length` (blocks of {} \
             tokens per hash id) with {}",
            s.block_size,
            tokenizer.describe()
        ));
        TracePrompts::new(s.block_size)
            .with_seed(self.load.random_seed)
            .build(&mut dataset, &tokenizer)
            .await
            .map_err(|e| hinted("building the trace's prompts", e))?;
        Ok(dataset)
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

    /// The output length's mean and deviation of synthetic prompts that
    /// ask for one, where `extra_body` forces it (`ignore_eos: true`).
    pub(crate) fn forced_output(
        &self,
        extra_body: &serde_json::Map<String, Value>,
    ) -> Option<(u32, f64)> {
        let synthetic = self.dataset.source == Some(DatasetSource::Synthetic);
        let forced = extra_body.get("ignore_eos") == Some(&Value::Bool(true));
        let osl = self.sampling.osl.filter(|_| synthetic && forced)?;
        Some((osl, self.dataset.synthetic.osl_stddev))
    }

    /// Whether requests must produce exactly their output length: `--isl`
    /// with `--osl` (vLLM's `--dataset-name random` forces it the same
    /// way), unless `--extra-inputs` says otherwise.
    pub(crate) fn forces_output_length(&self, extra_body: &serde_json::Map<String, Value>) -> bool {
        self.dataset.source == Some(DatasetSource::Synthetic)
            && self.sampling.osl.is_some()
            && !extra_body.contains_key("ignore_eos")
    }
}
