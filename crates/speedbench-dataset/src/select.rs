//! Choosing the rows a run sends: which SPEED-Bench config
//! ([`bench_dataset`]), which categories ([`CategorySelection`],
//! [`Dataset::select_categories`]) and how many rows of each
//! ([`Dataset::limit_per_category`]).
//!
//! The operations compose in that order — load (and resolve) the config, keep
//! the chosen categories, then keep the first rows of each — and every one
//! keeps file order, so the same arguments give the same rows, and so the
//! same prompts, on every run.
//!
//! A row is one sample: a multi-turn row is kept or dropped whole, never cut
//! into turns.
//!
//! ```
//! use std::num::NonZeroUsize;
//! use speedbench_dataset::{CategorySelection, Dataset};
//!
//! let jsonl = r#"{"question_id":"c1","category":"coding","turns":["a"]}
//! {"question_id":"m1","category":"math","turns":["b", "c"]}
//! {"question_id":"c2","category":"coding","turns":["d"]}
//! {"question_id":"m2","category":"math","turns":["e"]}
//! "#;
//! let dataset = Dataset::from_jsonl_str("rows.jsonl", jsonl)?;
//! let every = CategorySelection::parse(&["all".to_string()])?;
//! let first = dataset
//!     .select_categories(&every)?
//!     .limit_per_category(NonZeroUsize::new(1).unwrap());
//! let ids: Vec<_> = first.conversations.iter().map(|c| c.id.as_str()).collect();
//! assert_eq!(ids, ["c1", "m1"]);
//! # Ok::<(), speedbench_dataset::DatasetError>(())
//! ```

use std::collections::HashMap;
use std::num::NonZeroUsize;

use crate::error::LookupError;
use crate::registry::{DatasetSpec, SPEED_BENCH_CONFIGS, edit_distance, lookup};
use crate::{Dataset, DatasetError};

/// The category name that stands for every category (llama.cpp's
/// `speed_bench.py --category all`). It is reserved: a dataset category of
/// that name is selected with all the others.
pub const ALL_CATEGORIES: &str = "all";

/// Which categories of a dataset a run keeps.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum CategorySelection {
    /// Every row, rows without a category included.
    #[default]
    All,
    /// Only rows whose category is one of these (see
    /// [`Dataset::filter_categories`]).
    Only(Vec<String>),
}

impl CategorySelection {
    /// Reads a list of category names: an empty list, or [`ALL_CATEGORIES`]
    /// alone (possibly repeated), is [`CategorySelection::All`]; otherwise
    /// the names as given.
    ///
    /// [`ALL_CATEGORIES`] together with other names is an error naming them
    /// (it is unclear whether every category or only those was meant).
    ///
    /// ```
    /// use speedbench_dataset::CategorySelection;
    /// let names = |s: &[&str]| s.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    /// assert_eq!(CategorySelection::parse(&[])?, CategorySelection::All);
    /// assert_eq!(CategorySelection::parse(&names(&["all"]))?, CategorySelection::All);
    /// assert_eq!(
    ///     CategorySelection::parse(&names(&["math", "qa"]))?,
    ///     CategorySelection::Only(names(&["math", "qa"]))
    /// );
    /// assert!(CategorySelection::parse(&names(&["all", "math"])).is_err());
    /// # Ok::<(), speedbench_dataset::DatasetError>(())
    /// ```
    pub fn parse(names: &[String]) -> Result<CategorySelection, DatasetError> {
        // `--category 'humaneval, mtbench'`: names are trimmed, as
        // speed_bench.py trims them; an empty one is no name.
        let names: Vec<String> = names
            .iter()
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .collect();
        if !names.iter().any(|n| n == ALL_CATEGORIES) {
            return Ok(if names.is_empty() {
                CategorySelection::All
            } else {
                CategorySelection::Only(names.to_vec())
            });
        }
        let others: Vec<String> = names
            .iter()
            .filter(|n| *n != ALL_CATEGORIES)
            .cloned()
            .collect();
        if others.is_empty() {
            Ok(CategorySelection::All)
        } else {
            Err(DatasetError::from(LookupError::AllCategoriesWithOthers {
                others,
            }))
        }
    }
}

impl Dataset {
    /// Keeps the rows `selection` chooses: everything for
    /// [`CategorySelection::All`], else as [`Dataset::filter_categories`]
    /// (with its errors and warnings).
    pub fn select_categories(
        &self,
        selection: &CategorySelection,
    ) -> Result<Dataset, DatasetError> {
        match selection {
            CategorySelection::All => Ok(self.clone()),
            CategorySelection::Only(names) => self.filter_categories(names),
        }
    }

    /// Keeps at most `limit` rows of each category: the first ones in file
    /// order, the others dropped. Rows without a category count as one
    /// group of their own. A row is one sample, whatever its turn count
    /// (multi-turn rows are kept whole).
    ///
    /// The kept rows stay in file order, so the result depends on the
    /// dataset and `limit` alone: two runs with the same limit send the
    /// same prompts. A zero limit cannot be asked for: it would keep
    /// nothing.
    ///
    /// ```
    /// use std::num::NonZeroUsize;
    /// use speedbench_dataset::Dataset;
    /// let d = Dataset::from_jsonl_str("d", concat!(
    ///     r#"{"question_id":"a","category":"math","turns":["1"]}"#, "\n",
    ///     r#"{"question_id":"b","category":"math","turns":["2"]}"#, "\n",
    ///     r#"{"question_id":"c","category":"qa","turns":["3"]}"#, "\n",
    /// ))?;
    /// let one = d.limit_per_category(NonZeroUsize::new(1).unwrap());
    /// assert_eq!(one.conversations.len(), 2);
    /// # Ok::<(), speedbench_dataset::DatasetError>(())
    /// ```
    pub fn limit_per_category(&self, limit: NonZeroUsize) -> Dataset {
        let mut kept: HashMap<Option<&str>, usize> = HashMap::new();
        let conversations = self
            .conversations
            .iter()
            .filter(|c| {
                let n = kept.entry(c.category.as_deref()).or_insert(0);
                *n += 1;
                *n <= limit.get()
            })
            .cloned()
            .collect();
        Dataset {
            name: self.name.clone(),
            conversations,
        }
    }
}

/// The registered dataset of a SPEED-Bench config (`qualitative`,
/// `throughput_1k`, ..., see [`SPEED_BENCH_CONFIGS`]): the whole config,
/// `speed_bench_<config>`, as llama.cpp's `speed_bench.py --bench CONFIG`
/// names it.
///
/// Any other name is an error listing the configs (and the closest one).
///
/// ```
/// use speedbench_dataset::bench_dataset;
/// assert_eq!(bench_dataset("throughput_1k")?.name, "speed_bench_throughput_1k");
/// assert!(bench_dataset("throughput_4k").unwrap_err().to_string().contains("throughput_8k"));
/// # Ok::<(), speedbench_dataset::DatasetError>(())
/// ```
pub fn bench_dataset(config: &str) -> Result<DatasetSpec, DatasetError> {
    if SPEED_BENCH_CONFIGS.contains(&config) {
        return lookup(&format!("speed_bench_{config}"));
    }
    let suggestion = SPEED_BENCH_CONFIGS
        .iter()
        .map(|c| (edit_distance(config, c), *c))
        .min()
        .filter(|(d, _)| *d <= config.len().max(4) / 2)
        .map(|(_, c)| c.to_string());
    Err(DatasetError::from(LookupError::UnknownBenchConfig {
        config: config.to_string(),
        suggestion,
        configs: SPEED_BENCH_CONFIGS.iter().map(|c| c.to_string()).collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::DatasetSource;

    fn names(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| s.to_string()).collect()
    }

    /// Rows `(id, category, turns)` in this order.
    fn dataset(rows: &[(&str, Option<&str>, usize)]) -> Dataset {
        let text: String = rows
            .iter()
            .map(|(id, cat, turns)| {
                let turns: Vec<String> = (0..*turns).map(|t| format!("{id} turn {t}")).collect();
                let mut row = serde_json::json!({"question_id": id, "turns": turns});
                if let Some(c) = cat {
                    row["category"] = serde_json::json!(c);
                }
                format!("{row}\n")
            })
            .collect();
        Dataset::from_jsonl_str("t", &text).unwrap()
    }

    fn ids(d: &Dataset) -> Vec<&str> {
        d.conversations.iter().map(|c| c.id.as_str()).collect()
    }

    fn limit(n: usize) -> NonZeroUsize {
        NonZeroUsize::new(n).unwrap()
    }

    #[test]
    fn the_limit_keeps_the_first_rows_of_each_category_in_file_order() {
        let d = dataset(&[
            ("m1", Some("math"), 1),
            ("q1", Some("qa"), 1),
            ("m2", Some("math"), 2),
            ("m3", Some("math"), 1),
            ("q2", Some("qa"), 1),
            ("q3", Some("qa"), 1),
            ("w1", Some("writing"), 1),
        ]);
        assert_eq!(
            ids(&d.limit_per_category(limit(2))),
            ["m1", "q1", "m2", "q2", "w1"]
        );
        assert_eq!(ids(&d.limit_per_category(limit(1))), ["m1", "q1", "w1"]);
        // A limit above every category's size keeps everything, in order.
        assert_eq!(d.limit_per_category(limit(3)), d);
        assert_eq!(d.limit_per_category(limit(1000)), d);
        assert_eq!(d.limit_per_category(limit(1)).name, "t");
    }

    #[test]
    fn multi_turn_rows_are_kept_whole() {
        let d = dataset(&[
            ("a", Some("c"), 3),
            ("b", Some("c"), 2),
            ("x", Some("c"), 1),
        ]);
        let kept = d.limit_per_category(limit(2));
        assert_eq!(ids(&kept), ["a", "b"]);
        assert_eq!(kept.turn_count(), 5);
        assert_eq!(kept.conversations[0], d.conversations[0]);
    }

    #[test]
    fn rows_without_a_category_count_as_one_group() {
        let d = dataset(&[
            ("n1", None, 1),
            ("g1", Some("gsm8k"), 1),
            ("n2", None, 1),
            ("n3", None, 1),
            ("g2", Some("gsm8k"), 1),
        ]);
        assert_eq!(
            ids(&d.limit_per_category(limit(2))),
            ["n1", "g1", "n2", "g2"]
        );
        // An empty category is read as none: it joins the same group.
        let d = dataset(&[("e", Some(""), 1), ("n", None, 1)]);
        assert_eq!(ids(&d.limit_per_category(limit(1))), ["e"]);
    }

    #[test]
    fn the_limit_is_deterministic() {
        let d = dataset(&[
            ("a", Some("x"), 1),
            ("b", Some("y"), 1),
            ("c", Some("x"), 1),
        ]);
        assert_eq!(
            d.limit_per_category(limit(1)),
            d.limit_per_category(limit(1))
        );
    }

    #[test]
    fn all_means_every_category_and_stands_alone() {
        assert_eq!(
            CategorySelection::parse(&[]).unwrap(),
            CategorySelection::All
        );
        assert_eq!(
            CategorySelection::parse(&names(&["all"])).unwrap(),
            CategorySelection::All
        );
        assert_eq!(
            CategorySelection::parse(&names(&["all", "all"])).unwrap(),
            CategorySelection::All
        );
        assert_eq!(
            CategorySelection::parse(&names(&["math"])).unwrap(),
            CategorySelection::Only(names(&["math"]))
        );
        // Only the exact word: a category spelled otherwise is a name.
        assert_eq!(
            CategorySelection::parse(&names(&["All"])).unwrap(),
            CategorySelection::Only(names(&["All"]))
        );
        let err = CategorySelection::parse(&names(&["coding", "all", "math"]))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("\"all\"") && err.contains("[\"coding\", \"math\"]"),
            "{err}"
        );
    }

    #[test]
    fn names_are_trimmed_and_an_unknown_one_is_refused_with_what_exists() {
        let d = dataset(&[("h", Some("humaneval"), 1), ("m", Some("mtbench"), 2)]);
        let both = CategorySelection::parse(&names(&["humaneval", " mtbench", ""])).unwrap();
        assert_eq!(ids(&d.select_categories(&both).unwrap()), ["h", "m"]);
        let typo = CategorySelection::parse(&names(&["humaneval", "coding"])).unwrap();
        let err = d.select_categories(&typo).unwrap_err().to_string();
        assert_eq!(
            err,
            "dataset t: no rows in category \"coding\"; available categories: humaneval, mtbench"
        );
    }

    #[test]
    fn selecting_all_keeps_uncategorised_rows_and_only_filters() {
        let d = dataset(&[("n", None, 1), ("m", Some("math"), 1), ("q", Some("qa"), 1)]);
        assert_eq!(d.select_categories(&CategorySelection::All).unwrap(), d);
        let only = d
            .select_categories(&CategorySelection::Only(names(&["qa"])))
            .unwrap();
        assert_eq!(ids(&only), ["q"]);
        let err = d
            .select_categories(&CategorySelection::Only(names(&["rag"])))
            .unwrap_err()
            .to_string();
        assert!(err.contains("available categories"), "{err}");
    }

    #[test]
    fn bench_configs_name_their_whole_config() {
        for config in SPEED_BENCH_CONFIGS {
            let spec = bench_dataset(config).unwrap();
            assert_eq!(spec.name, format!("speed_bench_{config}"));
            assert_eq!(
                spec.source,
                DatasetSource::SpeedBench {
                    config,
                    category: None
                }
            );
        }
    }

    #[test]
    fn an_unknown_bench_config_lists_the_valid_ones() {
        for bad in ["throughput_4k", "speed_bench_qualitative", "coding", ""] {
            let err = bench_dataset(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
            for config in SPEED_BENCH_CONFIGS {
                assert!(err.contains(config), "{config} missing from: {err}");
            }
        }
        let err = bench_dataset("qualitativ").unwrap_err().to_string();
        assert!(err.contains("did you mean \"qualitative\""), "{err}");
        let err = bench_dataset("zzz").unwrap_err().to_string();
        assert!(!err.contains("did you mean"), "{err}");
    }
}
