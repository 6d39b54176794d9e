//! Several models behind one server (LoRA adapters): which one each
//! dataset row asks for.

use speedbench_metrics::SplitMix64;

/// How rows are shared out among models (AIPerf's
/// `--model-selection-strategy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ModelStrategy {
    /// Row `i` asks for model `i mod n`.
    #[default]
    RoundRobin,
    /// Each row asks for a model drawn uniformly, seeded by the row's
    /// index (the same model for a row on every run of a seed).
    Random {
        /// The seed of the draws.
        seed: u64,
    },
}

impl ModelStrategy {
    /// Names as the command line takes them.
    pub const NAMES: [&'static str; 2] = ["round_robin", "random"];

    /// `round_robin` or `random`.
    pub fn name(self) -> &'static str {
        match self {
            ModelStrategy::RoundRobin => "round_robin",
            ModelStrategy::Random { .. } => "random",
        }
    }
}

/// The models a run's rows ask for, and how they are chosen; every turn of
/// a row (a conversation) asks for the row's model.
///
/// ```
/// use speedbench_client::{ModelChoice, ModelStrategy};
/// let choice = ModelChoice::new(vec!["base".into(), "lora-a".into()], ModelStrategy::RoundRobin);
/// assert_eq!([choice.for_row(0), choice.for_row(1), choice.for_row(2)], ["base", "lora-a", "base"]);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    names: Vec<String>,
    strategy: ModelStrategy,
}

impl ModelChoice {
    /// `names` (at least one) chosen by `strategy`.
    pub fn new(names: Vec<String>, strategy: ModelStrategy) -> ModelChoice {
        assert!(!names.is_empty(), "a model choice needs a model");
        ModelChoice { names, strategy }
    }

    /// The models, in the order given.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// How they are chosen.
    pub fn strategy(&self) -> ModelStrategy {
        self.strategy
    }

    /// The model dataset row `index` asks for.
    pub fn for_row(&self, index: usize) -> &str {
        let n = self.names.len() as u64;
        let at = match self.strategy {
            ModelStrategy::RoundRobin => index as u64 % n,
            ModelStrategy::Random { seed } => {
                // One generator per row: the choice does not depend on
                // which rows were drawn before it.
                SplitMix64::new(seed ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)).below(n)
            }
        };
        &self.names[at as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_choices_are_seeded_per_row_and_spread() {
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let choice = ModelChoice::new(names.clone(), ModelStrategy::Random { seed: 9 });
        let again = ModelChoice::new(names, ModelStrategy::Random { seed: 9 });
        let picks: Vec<&str> = (0..3000).map(|i| choice.for_row(i)).collect();
        assert!((0..3000).all(|i| again.for_row(i) == picks[i]));
        for name in ["a", "b", "c"] {
            let n = picks.iter().filter(|p| **p == name).count();
            assert!((900..1100).contains(&n), "{name}: {n}");
        }
    }
}
