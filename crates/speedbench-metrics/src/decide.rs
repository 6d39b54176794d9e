//! Deciding from speedups with intervals: which configuration to deploy
//! (or none), and up to which load one still pays. A difference counts
//! only where the intervals say so: a configuration is chosen over
//! another when its interval lies wholly above the other's, and over the
//! baseline when its interval lies wholly above 1.

use serde::Serialize;

use crate::Interval;

/// One candidate: its name, its speedup against the baseline and the
/// speedup's interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate<'a> {
    /// The configuration's name.
    pub name: &'a str,
    /// Its speedup (baseline time / its time).
    pub speedup: f64,
    /// The speedup's interval; `None` when none could be computed (a
    /// candidate without one is never significantly better).
    pub interval: Option<Interval>,
}

/// What the figures say to deploy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Choice {
    /// This configuration: faster than the baseline and than every other
    /// candidate, each beyond the intervals.
    Configuration {
        /// Its name.
        name: String,
    },
    /// Faster than the baseline, but not beyond the intervals of these
    /// others (the best first): any of them.
    NoSignificantDifference {
        /// The configurations that cannot be told apart, best first.
        among: Vec<String>,
    },
    /// No candidate is faster than the baseline beyond its interval: do
    /// not speculate.
    Baseline,
}

impl Choice {
    /// `k=3`, `no significant difference (k=2, k=3)`, `baseline (no speedup)`.
    pub fn describe(&self) -> String {
        match self {
            Choice::Configuration { name } => name.clone(),
            Choice::NoSignificantDifference { among } => {
                format!("no significant difference ({})", among.join(", "))
            }
            Choice::Baseline => "baseline (no configuration is significantly faster)".into(),
        }
    }
}

/// The choice among `candidates`: those whose interval lies above 1 pay;
/// the best of them (highest speedup) is chosen when its interval lies
/// above every other paying candidate's, else the candidates whose
/// intervals overlap the best's are named together.
pub fn choose(candidates: &[Candidate<'_>]) -> Choice {
    let mut paying: Vec<&Candidate<'_>> = candidates
        .iter()
        .filter(|c| c.interval.is_some_and(|i| i.low > 1.0))
        .collect();
    if paying.is_empty() {
        return Choice::Baseline;
    }
    paying.sort_by(|a, b| b.speedup.total_cmp(&a.speedup));
    let best = paying[0];
    let best_low = best
        .interval
        .expect("a paying candidate has an interval")
        .low;
    let tied: Vec<String> = paying
        .iter()
        .skip(1)
        .filter(|c| c.interval.is_some_and(|i| i.high >= best_low))
        .map(|c| c.name.to_string())
        .collect();
    if tied.is_empty() {
        Choice::Configuration {
            name: best.name.to_string(),
        }
    } else {
        let mut among = vec![best.name.to_string()];
        among.extend(tied);
        Choice::NoSignificantDifference { among }
    }
}

/// The break-even load: of `levels` (a configuration's interval at each
/// load level, in increasing load), the index of the highest level up to
/// which every interval lies above 1; `None` when it does not pay even at
/// the first.
pub fn break_even(levels: &[Option<Interval>]) -> Option<usize> {
    let paying = levels
        .iter()
        .take_while(|i| i.is_some_and(|i| i.low > 1.0))
        .count();
    paying.checked_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, speedup: f64, low: f64, high: f64) -> Candidate<'_> {
        Candidate {
            name,
            speedup,
            interval: Some(Interval { low, high }),
        }
    }

    #[test]
    fn the_best_is_chosen_only_beyond_the_intervals() {
        let apart = [c("k=2", 1.3, 1.2, 1.4), c("k=4", 1.6, 1.5, 1.7)];
        assert_eq!(choose(&apart), Choice::Configuration { name: "k=4".into() });
        let overlapping = [
            c("k=2", 1.45, 1.3, 1.55),
            c("k=4", 1.6, 1.5, 1.7),
            c("k=8", 1.2, 1.1, 1.3),
        ];
        assert_eq!(
            choose(&overlapping),
            Choice::NoSignificantDifference {
                among: vec!["k=4".into(), "k=2".into()]
            }
        );
        let none = [c("k=2", 1.05, 0.97, 1.12), c("k=4", 0.8, 0.7, 0.9)];
        assert_eq!(choose(&none), Choice::Baseline);
        let without = [Candidate {
            name: "k=2",
            speedup: 3.0,
            interval: None,
        }];
        assert_eq!(choose(&without), Choice::Baseline);
        assert_eq!(choose(&[]), Choice::Baseline);
    }

    #[test]
    fn break_even_is_the_last_level_of_the_paying_run_from_the_lowest() {
        let i = |low: f64| {
            Some(Interval {
                low,
                high: low + 0.2,
            })
        };
        assert_eq!(break_even(&[i(1.4), i(1.1), i(0.9), i(1.2)]), Some(1));
        assert_eq!(break_even(&[i(0.9), i(1.3)]), None);
        assert_eq!(break_even(&[i(1.3), None]), Some(0));
        assert_eq!(break_even(&[i(1.3), i(1.2)]), Some(1));
    }
}
