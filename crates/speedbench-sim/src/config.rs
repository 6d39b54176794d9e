//! Server configuration: timing, acceptance profiles and wire flavour.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::SimError;
use crate::faults::FaultPlan;

/// Configuration of the simulated server.
///
/// Every field has a default (see [`SimConfig::default`]), so a config file
/// only needs the fields it changes. Unknown fields are rejected so that
/// typos do not silently fall back to defaults.
///
/// In code, start from [`SimConfig::default`] or
/// [`SimConfig::speed_bench_demo`] and change fields with the `with_*`
/// methods (the struct is `#[non_exhaustive]`, so new fields can be added
/// without breaking callers):
///
/// ```
/// use speedbench_sim::{AcceptanceProfile, Chunking, FaultKind, FaultPlan, SimConfig, SpecFlavor};
/// let config = SimConfig::speed_bench_demo()
///     .with_seed(7)
///     .with_ttft_ms(20.0)
///     .with_step_ms(2.0)
///     .with_output_tokens(8, 24)
///     .with_flavor(SpecFlavor::Both)
///     .with_chunking(Chunking::PerToken)
///     .with_category("chat", AcceptanceProfile::new(3, 0.4, 0.5))
///     .with_fault(FaultPlan::every_nth(FaultKind::HttpStatus(503), 10));
/// config.validate()?;
/// assert_eq!(config.categories.len(), 12);
/// # Ok::<(), speedbench_sim::SimError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct SimConfig {
    /// Global seed mixed into every per-request PRNG seed. Default 0.
    pub seed: u64,
    /// Delay in milliseconds before the first output chunk (time to first token). Default 0.
    pub ttft_ms: f64,
    /// Delay in milliseconds per verify step, i.e. between consecutive output
    /// chunks of one request, before the costs below. Default 0.
    pub step_ms: f64,
    /// What drafting costs: milliseconds added to a step per token drafted
    /// (`k` per step). Default 0.
    pub draft_ms_per_token: f64,
    /// What verifying costs under load: milliseconds added to a step per
    /// token the batch verifies (each request in flight verifies `1 + k`
    /// tokens a step). With both costs, more drafts stop paying at some
    /// `k`, and speculation stops paying above some load
    /// ([`SimConfig::step_time_ms`]). Default 0.
    pub verify_ms_per_token: f64,
    /// Acceptance profile used when the prompt names no known category.
    pub default_spec: AcceptanceProfile,
    /// Per-category acceptance profiles, selected by a `[<category>` marker at
    /// the start of the first user message (see the crate docs).
    pub categories: BTreeMap<String, AcceptanceProfile>,
    /// Smallest natural output length in tokens (before `max_tokens`). Default 48.
    pub output_tokens_min: u32,
    /// Largest natural output length in tokens (before `max_tokens`). Default 160.
    pub output_tokens_max: u32,
    /// Which engine's per-request spec-decode statistics to emit. Default [`SpecFlavor::Vllm`].
    pub flavor: SpecFlavor,
    /// vLLM flavour only: also emit `per_step_accepted` / `per_step_drafted`
    /// (vLLM's `--per-request-spec-decode-metrics detailed`). Default false.
    pub detailed: bool,
    /// Model id reported by `/v1/models` and in responses. Default `"speedbench-sim"`.
    pub model: String,
    /// How streamed output is split into SSE chunks. Default [`Chunking::PerStep`].
    pub chunking: Chunking,
    /// Injected faults (see [`crate::FaultPlan`]); the first matching plan
    /// wins. Default: none.
    pub faults: Vec<FaultPlan>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            seed: 0,
            ttft_ms: 0.0,
            step_ms: 0.0,
            draft_ms_per_token: 0.0,
            verify_ms_per_token: 0.0,
            default_spec: AcceptanceProfile::default(),
            categories: BTreeMap::new(),
            output_tokens_min: 48,
            output_tokens_max: 160,
            flavor: SpecFlavor::default(),
            detailed: false,
            model: "speedbench-sim".to_owned(),
            chunking: Chunking::default(),
            faults: Vec::new(),
        }
    }
}

impl SimConfig {
    /// Time to first token of a server a person would benchmark (an
    /// 8B-class model on one GPU), milliseconds; see
    /// [`SimConfig::with_typical_delays`].
    pub const TYPICAL_TTFT_MS: f64 = 30.0;
    /// Time per verify step of such a server, milliseconds.
    pub const TYPICAL_STEP_MS: f64 = 10.0;

    /// With [`SimConfig::TYPICAL_TTFT_MS`] and [`SimConfig::TYPICAL_STEP_MS`]:
    /// what `speedbench sim` serves without a config file (the default of no
    /// delay at all gives billions of tokens per second on a first try).
    pub fn with_typical_delays(self) -> Self {
        self.with_ttft_ms(Self::TYPICAL_TTFT_MS)
            .with_step_ms(Self::TYPICAL_STEP_MS)
    }

    /// Reads a configuration written as JSON (this type's serde form).
    pub fn from_json_file(path: &std::path::Path) -> Result<SimConfig, crate::SimError> {
        let error = |message: String| crate::SimError::ConfigFile {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
        serde_json::from_str(&text).map_err(|e| error(e.to_string()))
    }

    /// Sets the draft budget k of the default profile and of every
    /// category's (0 turns speculation off).
    pub fn with_num_spec_tokens(mut self, k: u32) -> Self {
        self.default_spec.num_spec_tokens = k;
        for profile in self.categories.values_mut() {
            profile.num_spec_tokens = k;
        }
        self
    }

    /// Sets the global seed mixed into every per-request PRNG seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets the delay before the first output chunk, in milliseconds.
    pub fn with_ttft_ms(mut self, ttft_ms: f64) -> Self {
        self.ttft_ms = ttft_ms;
        self
    }

    /// Sets what drafting costs per drafted token and what verifying costs
    /// per token the batch verifies, milliseconds (see
    /// [`SimConfig::step_time_ms`]).
    pub fn with_step_costs(mut self, draft_ms_per_token: f64, verify_ms_per_token: f64) -> Self {
        self.draft_ms_per_token = draft_ms_per_token;
        self.verify_ms_per_token = verify_ms_per_token;
        self
    }

    /// The time of one step of a request that drafts `k` tokens a step
    /// while `in_flight` requests (itself included) share the batch:
    /// `step_ms + draft_ms_per_token·k + verify_ms_per_token·in_flight·(1 + k)`.
    /// A request's steps all take the time of its arrival's batch.
    ///
    /// ```
    /// use speedbench_sim::SimConfig;
    /// let cfg = SimConfig::default().with_step_ms(10.0).with_step_costs(1.0, 0.5);
    /// assert_eq!(cfg.step_time_ms(0, 1), 10.5);
    /// assert_eq!(cfg.step_time_ms(4, 2), 10.0 + 4.0 + 0.5 * 2.0 * 5.0);
    /// ```
    pub fn step_time_ms(&self, k: u32, in_flight: u64) -> f64 {
        let k = f64::from(k);
        self.step_ms
            + self.draft_ms_per_token * k
            + self.verify_ms_per_token * in_flight as f64 * (1.0 + k)
    }

    /// Sets the delay per verify step (between consecutive output chunks
    /// of one request), in milliseconds.
    pub fn with_step_ms(mut self, step_ms: f64) -> Self {
        self.step_ms = step_ms;
        self
    }

    /// Sets the profile used when the prompt names no known category.
    pub fn with_default_spec(mut self, profile: AcceptanceProfile) -> Self {
        self.default_spec = profile;
        self
    }

    /// Adds (or replaces) the profile of one category.
    pub fn with_category(mut self, name: impl Into<String>, profile: AcceptanceProfile) -> Self {
        self.categories.insert(name.into(), profile);
        self
    }

    /// Replaces all per-category profiles (an empty iterator removes them).
    pub fn with_categories(
        mut self,
        categories: impl IntoIterator<Item = (String, AcceptanceProfile)>,
    ) -> Self {
        self.categories = categories.into_iter().collect();
        self
    }

    /// Sets the range of natural output lengths in tokens, `min..=max`
    /// (before `max_tokens`; [`SimConfig::validate`] wants `1 <= min <= max`).
    pub fn with_output_tokens(mut self, min: u32, max: u32) -> Self {
        self.output_tokens_min = min;
        self.output_tokens_max = max;
        self
    }

    /// Sets which engine's per-request statistics to emit.
    pub fn with_flavor(mut self, flavor: SpecFlavor) -> Self {
        self.flavor = flavor;
        self
    }

    /// vLLM flavour: also emit `per_step_accepted` / `per_step_drafted`.
    pub fn with_detailed(mut self, detailed: bool) -> Self {
        self.detailed = detailed;
        self
    }

    /// Sets the model id reported by `/v1/models` and in responses.
    pub fn with_model(mut self, model: impl Into<String>) -> Self {
        self.model = model.into();
        self
    }

    /// Sets how streamed output is split into SSE chunks.
    pub fn with_chunking(mut self, chunking: Chunking) -> Self {
        self.chunking = chunking;
        self
    }

    /// Adds one fault plan after those already set (the first matching
    /// plan wins).
    pub fn with_fault(mut self, plan: FaultPlan) -> Self {
        self.faults.push(plan);
        self
    }

    /// Replaces all fault plans (an empty iterator removes them).
    pub fn with_faults(mut self, plans: impl IntoIterator<Item = FaultPlan>) -> Self {
        self.faults = plans.into_iter().collect();
        self
    }

    /// Checks that delays are finite and non-negative, probabilities lie in
    /// `[0, 1]`, `1 <= output_tokens_min <= output_tokens_max`, and every
    /// fault plan is well formed.
    pub fn validate(&self) -> Result<(), SimError> {
        let bad = |msg: String| Err(SimError::InvalidConfig(msg));
        for (name, v) in [
            ("ttft_ms", self.ttft_ms),
            ("step_ms", self.step_ms),
            ("draft_ms_per_token", self.draft_ms_per_token),
            ("verify_ms_per_token", self.verify_ms_per_token),
        ] {
            if !v.is_finite() || v < 0.0 {
                return bad(format!("{name} must be finite and >= 0, got {v}"));
            }
        }
        if self.output_tokens_min == 0 || self.output_tokens_min > self.output_tokens_max {
            return bad(format!(
                "need 1 <= output_tokens_min <= output_tokens_max, got {}..{}",
                self.output_tokens_min, self.output_tokens_max
            ));
        }
        if self.model.is_empty() {
            return bad("model must not be empty".to_owned());
        }
        let profiles = std::iter::once(("default_spec", &self.default_spec))
            .chain(self.categories.iter().map(|(k, v)| (k.as_str(), v)));
        for (name, p) in profiles {
            for (field, v) in [
                ("p_full", p.p_full),
                ("p_token", p.p_token),
                ("p_draft", p.p_draft),
            ] {
                if !(0.0..=1.0).contains(&v) {
                    return bad(format!("{name}.{field} must be in [0, 1], got {v}"));
                }
            }
        }
        for (i, plan) in self.faults.iter().enumerate() {
            plan.validate(i)?;
        }
        Ok(())
    }

    /// A demo configuration with a distinct acceptance profile for each of
    /// SPEED-Bench's 11 qualitative categories (`coding`, `humanities`, `math`,
    /// `multilingual`, `qa`, `rag`, `reasoning`, `roleplay`, `stem`,
    /// `summarization`, `writing`), all with `k = 5`.
    ///
    /// `p_token` is 0.6 everywhere and `p_full` is set so the expected mean
    /// acceptance length matches the per-category values of the one real run
    /// documented by AIPerf (vLLM, Llama-3.1-8B-Instruct with a
    /// Llama-3.2-1B-Instruct draft, k = 5): from roleplay ≈ 3.3 to math ≈ 5.2.
    /// Realised values are slightly lower because final steps are truncated.
    /// Everything else is [`SimConfig::default`] except `default_spec`
    /// (k = 5, `p_full` 0.61, `p_token` 0.67, the run's pooled histogram).
    pub fn speed_bench_demo() -> Self {
        let profile = |p_full| AcceptanceProfile::new(5, p_full, 0.6);
        let categories = [
            ("coding", 0.732),
            ("humanities", 0.686),
            ("math", 0.794),
            ("multilingual", 0.756),
            ("qa", 0.710),
            ("rag", 0.597),
            ("reasoning", 0.586),
            ("roleplay", 0.280),
            ("stem", 0.641),
            ("summarization", 0.407),
            ("writing", 0.510),
        ]
        .into_iter()
        .map(|(name, p_full)| (name.to_owned(), profile(p_full)))
        .collect();
        Self {
            default_spec: AcceptanceProfile::new(5, 0.61, 0.67),
            categories,
            ..Self::default()
        }
    }

    /// The profile for a request whose category marker is `category`
    /// (falls back to `default_spec` when absent or unknown).
    pub(crate) fn profile_for(&self, category: Option<&str>) -> &AcceptanceProfile {
        category
            .and_then(|c| self.categories.get(c))
            .unwrap_or(&self.default_spec)
    }

    /// Largest `num_spec_tokens` over all profiles (sizes pooled histograms).
    pub(crate) fn max_spec_tokens(&self) -> u32 {
        self.categories
            .values()
            .map(|p| p.num_spec_tokens)
            .chain(std::iter::once(self.default_spec.num_spec_tokens))
            .max()
            .unwrap_or(0)
    }
}

/// A deterministic model of how many draft tokens each verify step accepts.
///
/// Each step accepts all `k` drafts with probability `p_full`; otherwise it
/// accepts successive drafts, each with probability `p_token`, until the first
/// rejection, capped at `k - 1`. This gives the bimodal acceptance histogram
/// (peaks at 0 and `k`) that real servers show. `num_spec_tokens == 0` means
/// no speculation: a baseline server with zero drafts and one token per step.
///
/// Build one with [`AcceptanceProfile::new`] (or [`AcceptanceProfile::baseline`])
/// and the `with_*` methods:
///
/// ```
/// use speedbench_sim::AcceptanceProfile;
/// let ngram = AcceptanceProfile::new(4, 0.5, 0.4).with_p_draft(0.3);
/// assert_eq!((ngram.num_spec_tokens, ngram.p_draft), (4, 0.3));
/// assert!(!AcceptanceProfile::baseline().is_enabled());
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[non_exhaustive]
pub struct AcceptanceProfile {
    /// Draft length `k` proposed per verify step; 0 disables speculation. Default 4.
    pub num_spec_tokens: u32,
    /// Probability that a step accepts all `k` drafts. Default 0.5.
    pub p_full: f64,
    /// Otherwise, probability of accepting each successive draft. Default 0.4.
    pub p_token: f64,
    /// Probability that a decode step drafts at all. Default 1.0 (every
    /// step drafts, as vLLM). Below 1, some steps emit one target token with
    /// no draft, as llama.cpp's n-gram drafters do when the context has no
    /// match: they are not verify steps (`…num_drafts` does not count them)
    /// but they are target forward passes. 0 means a request never drafts.
    pub p_draft: f64,
    /// Accept as a chain: each draft with probability `p_token` once the
    /// one before it was, up to all `k` (`p_full` unused). The first `k'`
    /// drafts then behave the same at every budget `k >= k'`, as a draft
    /// model's and an n-gram drafter's do, which predicting smaller
    /// budgets from one run assumes. Default false.
    pub chain: bool,
}

impl Default for AcceptanceProfile {
    /// `k = 4`, `p_full` 0.5, `p_token` 0.4, `p_draft` 1.
    fn default() -> Self {
        Self {
            num_spec_tokens: 4,
            p_full: 0.5,
            p_token: 0.4,
            p_draft: 1.0,
            chain: false,
        }
    }
}

impl AcceptanceProfile {
    /// A profile drafting `num_spec_tokens` tokens on every step, accepting
    /// all of them with probability `p_full`, else each successive draft
    /// with probability `p_token` (`p_draft` is 1).
    pub fn new(num_spec_tokens: u32, p_full: f64, p_token: f64) -> Self {
        Self {
            num_spec_tokens,
            p_full,
            p_token,
            p_draft: 1.0,
            chain: false,
        }
    }

    /// Sets the draft length `k` proposed per verify step (0 disables speculation).
    pub fn with_num_spec_tokens(mut self, num_spec_tokens: u32) -> Self {
        self.num_spec_tokens = num_spec_tokens;
        self
    }

    /// Sets the probability that a step accepts all `k` drafts.
    pub fn with_p_full(mut self, p_full: f64) -> Self {
        self.p_full = p_full;
        self
    }

    /// Sets the probability of accepting each successive draft otherwise.
    pub fn with_p_token(mut self, p_token: f64) -> Self {
        self.p_token = p_token;
        self
    }

    /// Sets the probability that a decode step drafts at all (below 1, some
    /// steps emit one target token without drafting, as llama.cpp's n-gram
    /// drafters do).
    pub fn with_p_draft(mut self, p_draft: f64) -> Self {
        self.p_draft = p_draft;
        self
    }

    /// Sets whether drafts are accepted as a chain (see
    /// [`AcceptanceProfile::chain`]).
    pub fn with_chain(mut self, chain: bool) -> Self {
        self.chain = chain;
        self
    }

    /// A profile with speculation disabled (`num_spec_tokens == 0`).
    pub fn baseline() -> Self {
        Self {
            num_spec_tokens: 0,
            p_full: 0.0,
            p_token: 0.0,
            p_draft: 1.0,
            chain: false,
        }
    }

    /// Whether this profile speculates at all (`num_spec_tokens > 0`).
    pub fn is_enabled(&self) -> bool {
        self.num_spec_tokens > 0
    }
}

/// Which engine's per-request spec-decode statistics the server emits.
///
/// `/metrics` always carries the `vllm:` counters; `LlamaCpp` and `Both` add
/// the `llamacpp:` spec counters too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum SpecFlavor {
    /// vLLM: `metrics.speculative_decoding` at the response root
    /// (streaming: only on the `include_usage` chunk). Config name `"vllm"`.
    #[default]
    #[serde(rename = "vllm")]
    Vllm,
    /// llama.cpp: a top-level `timings` object with `draft_n` / `draft_n_accepted`.
    /// Config name `"llamacpp"`.
    #[serde(rename = "llamacpp", alias = "llama_cpp", alias = "llama.cpp")]
    LlamaCpp,
    /// Both of the above on every response. Config name `"both"`.
    #[serde(rename = "both")]
    Both,
    /// No per-request statistics; only `/metrics`. Config name `"none"`.
    #[serde(rename = "none")]
    None,
    /// SGLang: `sglext.spec_tokens_details` at the response root, only when
    /// the request asks with `"return_spec_tokens_details": true`
    /// (streaming: a separate `{"choices": [], "sglext": ...}` chunk before
    /// the usage chunk); `/v1/models` owned by `sglang`,
    /// `/get_server_info`, and `/metrics` with `sglang:` gauges published
    /// per `engine_type` (`unified` and `draft`). Config name `"sglang"`.
    #[serde(rename = "sglang")]
    Sglang,
    /// TensorRT-LLM (`trtllm-serve`): `avg_decoded_tokens_per_iter` on the
    /// choice (streaming: on the finishing chunk's choice); `/metrics`
    /// answers JSON iteration statistics (drained on read) and
    /// `/prometheus/metrics` the `trtllm_` counters and gauges. Config name
    /// `"trtllm"`.
    #[serde(rename = "trtllm", alias = "tensorrt_llm")]
    TrtLlm,
}

impl SpecFlavor {
    pub(crate) fn vllm(self) -> bool {
        matches!(self, SpecFlavor::Vllm | SpecFlavor::Both)
    }

    pub(crate) fn llamacpp(self) -> bool {
        matches!(self, SpecFlavor::LlamaCpp | SpecFlavor::Both)
    }

    /// The `owned_by` of `GET /v1/models`, as the engine writes it.
    pub(crate) fn owner(self) -> &'static str {
        match self {
            SpecFlavor::Vllm | SpecFlavor::Both | SpecFlavor::None => "vllm",
            SpecFlavor::LlamaCpp => "llamacpp",
            SpecFlavor::Sglang => "sglang",
            SpecFlavor::TrtLlm => "tensorrt_llm",
        }
    }
}

/// How streamed output is split into SSE chunks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub enum Chunking {
    /// One chunk per verify step carrying all tokens it emitted (vLLM-like);
    /// the last content chunk also carries `finish_reason`. Config name `"per_step"`.
    #[default]
    #[serde(rename = "per_step")]
    PerStep,
    /// One chunk per token; the tokens of one step arrive back to back, then a
    /// separate finish chunk with an empty delta (llama.cpp-like). Config name `"per_token"`.
    #[serde(rename = "per_token")]
    PerToken,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_partial_json() {
        let c: SimConfig = serde_json::from_str(
            r#"{"ttft_ms": 5, "flavor": "llamacpp", "categories": {"coding": {"p_full": 0.9}}}"#,
        )
        .expect("parse");
        assert_eq!(c.ttft_ms, 5.0);
        assert_eq!(c.flavor, SpecFlavor::LlamaCpp);
        assert_eq!(c.output_tokens_min, 48);
        assert_eq!(c.categories["coding"].num_spec_tokens, 4);
        assert_eq!(c.categories["coding"].p_full, 0.9);
        assert_eq!(c.profile_for(Some("coding")).p_full, 0.9);
        assert_eq!(c.profile_for(Some("math")).p_full, 0.5);
        c.validate().expect("valid");
        assert!(serde_json::from_str::<SimConfig>(r#"{"sed": 1}"#).is_err());
    }

    #[test]
    fn builders_set_what_a_config_file_sets() {
        let file: SimConfig = serde_json::from_str(
            r#"{"seed": 3, "ttft_ms": 12.5, "step_ms": 0.5,
                "default_spec": {"num_spec_tokens": 6, "p_full": 0.25, "p_token": 0.75, "p_draft": 0.5},
                "categories": {"coding": {"num_spec_tokens": 2, "p_full": 0.9, "p_token": 0.1}},
                "output_tokens_min": 7, "output_tokens_max": 9, "flavor": "both",
                "detailed": true, "model": "m", "chunking": "per_token",
                "faults": [{"kind": "stall", "every_nth": 4},
                           {"kind": {"http_status": 503}, "probability": 0.5}]}"#,
        )
        .expect("parse");
        let built = SimConfig::default()
            .with_seed(3)
            .with_ttft_ms(12.5)
            .with_step_ms(0.5)
            .with_default_spec(
                AcceptanceProfile::new(1, 0.0, 0.0)
                    .with_num_spec_tokens(6)
                    .with_p_full(0.25)
                    .with_p_token(0.75)
                    .with_p_draft(0.5),
            )
            .with_category("coding", AcceptanceProfile::new(2, 0.9, 0.1))
            .with_output_tokens(7, 9)
            .with_flavor(SpecFlavor::Both)
            .with_detailed(true)
            .with_model("m")
            .with_chunking(Chunking::PerToken)
            .with_fault(FaultPlan::every_nth(crate::FaultKind::Stall, 4))
            .with_fault(FaultPlan::probability(
                crate::FaultKind::HttpStatus(503),
                0.5,
            ));
        assert_eq!(built, file);
        // The replacing forms.
        let demo = SimConfig::speed_bench_demo();
        let cleared = demo
            .clone()
            .with_categories([])
            .with_faults([FaultPlan::every_nth(crate::FaultKind::Stall, 1)])
            .with_faults([]);
        assert!(cleared.categories.is_empty() && cleared.faults.is_empty());
        assert_eq!(
            SimConfig::default().with_categories(demo.categories.clone()),
            SimConfig {
                categories: demo.categories,
                ..SimConfig::default()
            }
        );
        assert_eq!(
            AcceptanceProfile::new(4, 0.5, 0.4),
            AcceptanceProfile::default()
        );
    }

    #[test]
    fn demo_config_is_valid() {
        let c = SimConfig::speed_bench_demo();
        c.validate().expect("valid");
        assert_eq!(c.categories.len(), 11);
        assert_eq!(c.max_spec_tokens(), 5);
    }

    #[test]
    fn validation_rejects_bad_values() {
        let mut c = SimConfig::default();
        c.default_spec.p_full = 1.5;
        assert!(c.validate().is_err());
        let c = SimConfig {
            output_tokens_min: 10,
            output_tokens_max: 5,
            ..SimConfig::default()
        };
        assert!(c.validate().is_err());
        let c = SimConfig {
            step_ms: f64::NAN,
            ..SimConfig::default()
        };
        assert!(c.validate().is_err());
    }
}
