//! [`DatasetSampling`]: which conversation each session sends (AIPerf's
//! `--dataset-sampling-strategy`).
//!
//! The choice is a pure function of the session number, the number of
//! conversations and the seed, so every place that asks (the workers, the
//! planned request count, the user schedule, the records) agrees without
//! sharing state, and a seed gives the same order on every run.

use std::fmt;

/// How sessions pick their conversation from the dataset.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum DatasetSampling {
    /// In order, again from the first once all were sent (the default).
    #[default]
    Sequential,
    /// Each pass over the dataset in a fresh seeded order: every
    /// conversation once before any is sent again.
    Shuffle,
    /// Each session draws a conversation uniformly, with replacement.
    Random,
}

/// Feistel rounds of the shuffle's permutation.
const ROUNDS: u64 = 4;

impl DatasetSampling {
    /// Every strategy, in the order `--help` lists them.
    pub const ALL: [DatasetSampling; 3] = [
        DatasetSampling::Sequential,
        DatasetSampling::Shuffle,
        DatasetSampling::Random,
    ];

    /// The strategy named `name` (AIPerf's names), if any.
    pub fn parse(name: &str) -> Option<DatasetSampling> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Its name, as AIPerf writes it.
    pub fn name(self) -> &'static str {
        match self {
            DatasetSampling::Sequential => "sequential",
            DatasetSampling::Shuffle => "shuffle",
            DatasetSampling::Random => "random",
        }
    }

    /// The index of the conversation session `session` sends, of `n` (at
    /// least 1), under `seed`.
    ///
    /// ```
    /// use speedbench_client::DatasetSampling;
    /// assert_eq!(DatasetSampling::Sequential.conversation(7, 5, 42), 2);
    /// let mut first_pass: Vec<usize> =
    ///     (0..5).map(|s| DatasetSampling::Shuffle.conversation(s, 5, 42)).collect();
    /// first_pass.sort();
    /// assert_eq!(first_pass, [0, 1, 2, 3, 4]);
    /// ```
    pub fn conversation(self, session: u64, n: u64, seed: u64) -> usize {
        let n = n.max(1);
        let index = match self {
            DatasetSampling::Sequential => session % n,
            DatasetSampling::Random => {
                let draw = mix(seed ^ 0x5241_4E44_4F4D_0001 ^ mix(session));
                // Multiply-shift: uniform over n without a modulo's bias
                // beyond 2^-64.
                ((u128::from(draw) * u128::from(n)) >> 64) as u64
            }
            DatasetSampling::Shuffle => {
                let pass = session / n;
                permute(
                    session % n,
                    n,
                    mix(seed ^ 0x5348_5546_464C_4501 ^ mix(pass)),
                )
            }
        };
        index as usize
    }
}

impl fmt::Display for DatasetSampling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// SplitMix64's finaliser: a bijection of u64 that mixes every bit.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Position `x` of a seeded permutation of `0..n`: a balanced Feistel
/// network over the smallest even power of two at least `n`, walked
/// until it lands below `n` (a permutation of the larger domain restricted
/// to `0..n` by cycle walking stays a permutation; fewer than four steps
/// are expected, as the domain is under 4n).
fn permute(x: u64, n: u64, key: u64) -> u64 {
    let bits = (64 - (n - 1).leading_zeros()).max(2).next_multiple_of(2);
    let half = bits / 2;
    let mask = (1u64 << half) - 1;
    let round = |value: u64| {
        let (mut left, mut right) = (value >> half, value & mask);
        for r in 0..ROUNDS {
            let f = mix(key ^ r.wrapping_mul(0xA076_1D64_78BD_642F) ^ right) & mask;
            (left, right) = (right, left ^ f);
        }
        (left << half) | right
    };
    let mut y = round(x);
    while y >= n {
        y = round(y);
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pass_of_a_shuffle_sends_each_conversation_once_in_a_new_order() {
        for n in [1u64, 2, 3, 5, 7, 64, 100, 1000, 1025] {
            let mut orders = Vec::new();
            for pass in 0..4 {
                let order: Vec<usize> = (0..n)
                    .map(|k| DatasetSampling::Shuffle.conversation(pass * n + k, n, 9))
                    .collect();
                let mut sorted = order.clone();
                sorted.sort_unstable();
                assert_eq!(
                    sorted,
                    (0..n as usize).collect::<Vec<_>>(),
                    "n {n} pass {pass}"
                );
                orders.push(order);
            }
            if n >= 5 {
                assert_ne!(orders[0], orders[1], "n {n}");
                assert_ne!(orders[0], (0..n as usize).collect::<Vec<_>>(), "n {n}");
            }
        }
    }

    #[test]
    fn the_seed_decides_the_order_and_the_same_seed_repeats_it() {
        let order = |seed| -> Vec<usize> {
            (0..50)
                .map(|s| DatasetSampling::Shuffle.conversation(s, 50, seed))
                .collect()
        };
        assert_eq!(order(1), order(1));
        assert_ne!(order(1), order(2));
        let draws = |seed| -> Vec<usize> {
            (0..50)
                .map(|s| DatasetSampling::Random.conversation(s, 50, seed))
                .collect()
        };
        assert_eq!(draws(1), draws(1));
        assert_ne!(draws(1), draws(2));
    }

    #[test]
    fn random_draws_with_replacement_about_uniformly() {
        let n = 10u64;
        let mut counts = [0u32; 10];
        for s in 0..100_000 {
            counts[DatasetSampling::Random.conversation(s, n, 3)] += 1;
        }
        // 10,000 expected each; 5 standard deviations is ±474.
        assert!(
            counts.iter().all(|&c| (9_526..=10_474).contains(&c)),
            "{counts:?}"
        );
        // With replacement: some conversation repeats within the first n.
        let first: std::collections::BTreeSet<usize> = (0..n)
            .map(|s| DatasetSampling::Random.conversation(s, n, 3))
            .collect();
        assert!(first.len() < n as usize, "{first:?}");
    }

    #[test]
    fn sequential_is_the_rows_in_turn_and_names_round_trip() {
        let order: Vec<usize> = (0..7)
            .map(|s| DatasetSampling::Sequential.conversation(s, 3, 5))
            .collect();
        assert_eq!(order, [0, 1, 2, 0, 1, 2, 0]);
        for s in DatasetSampling::ALL {
            assert_eq!(DatasetSampling::parse(s.name()), Some(s));
        }
        assert_eq!(DatasetSampling::parse("weighted"), None);
    }
}
