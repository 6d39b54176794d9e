//! The registry of every dataset `--public-dataset` accepts.

use crate::DatasetError;
use crate::error::LookupError;
use crate::{QUALITATIVE_CATEGORIES, THROUGHPUT_TIERS};

/// The Hub repository of SPEED-Bench.
pub const SPEED_BENCH_REPO: &str = "nvidia/SPEED-Bench";

/// The SPEED-Bench commit speedbench reads (the one AIPerf pins).
pub const SPEED_BENCH_REVISION: &str = "487aa718444e816458d1a0a52bfce7a454285cf4";

/// The SPEED-Bench configs: `qualitative` and the five throughput ISL buckets.
pub const SPEED_BENCH_CONFIGS: [&str; 6] = [
    "qualitative",
    "throughput_1k",
    "throughput_2k",
    "throughput_8k",
    "throughput_16k",
    "throughput_32k",
];

/// The Hub repository of ShareGPT, the one AIPerf and vLLM read.
pub const SHAREGPT_REPO: &str = "anon8231489123/ShareGPT_Vicuna_unfiltered";

/// ShareGPT's file in [`SHAREGPT_REPO`].
pub const SHAREGPT_FILE: &str = "ShareGPT_V3_unfiltered_cleaned_split.json";

/// The ShareGPT revision read (AIPerf reads `main`); the commit it resolves
/// to is recorded.
pub const SHAREGPT_REVISION: &str = "main";

/// Where a registered dataset's rows come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatasetSource {
    /// A SPEED-Bench config, optionally narrowed to one category after
    /// resolution.
    SpeedBench {
        /// The config (`qualitative`, `throughput_1k`, ...).
        config: &'static str,
        /// The category kept, or `None` for the whole config.
        category: Option<&'static str>,
    },
    /// A literature dataset read from the Hub's Parquet files.
    Literature(LiteratureSpec),
    /// Spec-Bench's `question.jsonl`, which lives on GitHub, not the Hub.
    SpecBench,
    /// ShareGPT's conversations ([`SHAREGPT_FILE`] on the Hub), each turn
    /// asking for its reference reply's token count
    /// ([`crate::sharegpt`]).
    ShareGpt,
}

/// A literature dataset on the Hub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiteratureSpec {
    /// Hub repository, e.g. `openai/gsm8k`.
    pub repo: &'static str,
    /// Dataset config (`main`, `full`, `default`, ...).
    pub config: &'static str,
    /// Split read.
    pub split: &'static str,
    /// Column holding the prompt: a string, or a list of strings (one per
    /// turn).
    pub prompt_field: &'static str,
    /// Column used as the row identifier, when the dataset has one.
    pub id_field: Option<&'static str>,
    /// Revision read: the Hub's Parquet conversion branch, resolved to a
    /// commit on download and recorded.
    pub revision: &'static str,
    /// Category recorded on every row (the report's column name).
    pub category: &'static str,
}

/// One registered dataset name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatasetSpec {
    /// The `--public-dataset` name.
    pub name: String,
    /// What it is, in one line.
    pub description: String,
    /// Rows (conversations) published upstream.
    pub rows: u32,
    /// Turns per row: `"1"`, `"2"`, `"1-n"`.
    pub turns: &'static str,
    /// Approximate size of the resolved JSONL, for planning disk and time.
    pub approx_size: &'static str,
    /// The license upstream names.
    pub license: &'static str,
    /// Where the rows come from.
    pub source: DatasetSource,
}

impl DatasetSpec {
    /// The Hub repository the rows are read from, if any.
    pub fn repo(&self) -> Option<&'static str> {
        match &self.source {
            DatasetSource::SpeedBench { .. } => Some(SPEED_BENCH_REPO),
            DatasetSource::Literature(l) => Some(l.repo),
            DatasetSource::SpecBench => None,
            DatasetSource::ShareGpt => Some(SHAREGPT_REPO),
        }
    }

    /// The file name rows are cached under inside the dataset cache, relative
    /// to it: `speed-bench/<config>.jsonl`, `public/<name>.jsonl`,
    /// `spec-bench/question.jsonl`.
    pub fn cache_file(&self) -> String {
        match &self.source {
            DatasetSource::SpeedBench { config, .. } => format!("speed-bench/{config}.jsonl"),
            DatasetSource::Literature(_) => format!("public/{}.jsonl", self.name),
            DatasetSource::SpecBench => "spec-bench/question.jsonl".to_string(),
            DatasetSource::ShareGpt => format!("public/{}.jsonl", self.name),
        }
    }
}

const LITERATURE: [(&str, LiteratureSpec, u32, &str, &str, &str); 5] = [
    (
        "spec_al_gsm8k",
        LiteratureSpec {
            repo: "openai/gsm8k",
            config: "main",
            split: "test",
            prompt_field: "question",
            id_field: None,
            revision: "refs/convert/parquet",
            category: "gsm8k",
        },
        1319,
        "GSM8K grade-school math word problems (`question`)",
        "MIT",
        "1",
    ),
    (
        "spec_al_math500",
        LiteratureSpec {
            repo: "HuggingFaceH4/MATH-500",
            config: "default",
            split: "test",
            prompt_field: "problem",
            id_field: Some("unique_id"),
            revision: "refs/convert/parquet",
            category: "math500",
        },
        500,
        "MATH-500 competition math problems (`problem`)",
        "MIT",
        "1",
    ),
    (
        "spec_al_humaneval",
        LiteratureSpec {
            repo: "openai/openai_humaneval",
            config: "openai_humaneval",
            split: "test",
            prompt_field: "prompt",
            id_field: Some("task_id"),
            revision: "refs/convert/parquet",
            category: "humaneval",
        },
        164,
        "HumanEval Python function completions (`prompt`)",
        "MIT",
        "1",
    ),
    (
        "spec_al_mbpp",
        LiteratureSpec {
            repo: "google-research-datasets/mbpp",
            config: "full",
            split: "test",
            prompt_field: "text",
            id_field: Some("task_id"),
            revision: "refs/convert/parquet",
            category: "mbpp",
        },
        500,
        "MBPP basic Python programming tasks (`text`, config `full`)",
        "CC-BY-4.0",
        "1",
    ),
    (
        "spec_al_mtbench",
        LiteratureSpec {
            repo: "HuggingFaceH4/mt_bench_prompts",
            config: "default",
            split: "train",
            prompt_field: "prompt",
            id_field: Some("prompt_id"),
            revision: "refs/convert/parquet",
            category: "mtbench",
        },
        80,
        "MT-Bench two-turn conversations (`prompt`, a list of 2 turns)",
        "Apache-2.0",
        "2",
    ),
];

fn category_description(category: &str) -> &'static str {
    match category {
        "coding" => "Code generation and programming",
        "humanities" => "History, philosophy, liberal arts",
        "math" => "Mathematical reasoning",
        "multilingual" => "Tasks across 23 languages",
        "qa" => "Question answering",
        "rag" => "Retrieval-augmented generation",
        "reasoning" => "Logical and analytical reasoning",
        "roleplay" => "Creative roleplay and dialogue",
        "stem" => "Science, technology, engineering",
        "summarization" => "Text summarization",
        "writing" => "Creative and technical writing",
        "low_entropy" => "Code, sorting: predictable output",
        "mixed" => "Needle-in-a-haystack, exams",
        "high_entropy" => "Creative writing, dialogue",
        _ => "",
    }
}

fn throughput_size(config: &str) -> &'static str {
    match config {
        "throughput_1k" => "~8 MB",
        "throughput_2k" => "~15 MB",
        "throughput_8k" => "~55 MB",
        "throughput_16k" => "~105 MB",
        _ => "~200 MB",
    }
}

/// Every registered dataset, in listing order: SPEED-Bench aggregate and
/// per-category names, the literature datasets, Spec-Bench, then ShareGPT.
// Longer than 60 lines on purpose: it is the registry's table, one entry
// after another in listing order; split, the order would be in no one
// place.
pub fn registry() -> Vec<DatasetSpec> {
    let mut out = Vec::new();
    out.push(DatasetSpec {
        name: "speed_bench_qualitative".into(),
        description: "SPEED-Bench qualitative: all 11 semantic domains".into(),
        rows: 880,
        turns: "1-n",
        approx_size: "~2 MB",
        license: "NVIDIA Evaluation Dataset License",
        source: DatasetSource::SpeedBench {
            config: "qualitative",
            category: None,
        },
    });
    for category in QUALITATIVE_CATEGORIES {
        out.push(DatasetSpec {
            name: format!("speed_bench_{category}"),
            description: format!(
                "SPEED-Bench qualitative, {category}: {}",
                category_description(category)
            ),
            rows: 80,
            turns: "1-n",
            approx_size: "~2 MB (whole config)",
            license: "NVIDIA Evaluation Dataset License",
            source: DatasetSource::SpeedBench {
                config: "qualitative",
                category: Some(category),
            },
        });
    }
    for config in &SPEED_BENCH_CONFIGS[1..] {
        let isl = config.trim_start_matches("throughput_");
        out.push(DatasetSpec {
            name: format!("speed_bench_{config}"),
            description: format!("SPEED-Bench ~{isl} input tokens, all 3 entropy tiers"),
            rows: 1536,
            turns: "1",
            approx_size: throughput_size(config),
            license: "NVIDIA Evaluation Dataset License",
            source: DatasetSource::SpeedBench {
                config,
                category: None,
            },
        });
        for tier in THROUGHPUT_TIERS {
            out.push(DatasetSpec {
                name: format!("speed_bench_{config}_{tier}"),
                description: format!(
                    "SPEED-Bench ~{isl} input tokens, {tier}: {}",
                    category_description(tier)
                ),
                rows: 512,
                turns: "1",
                approx_size: throughput_size(config),
                license: "NVIDIA Evaluation Dataset License",
                source: DatasetSource::SpeedBench {
                    config,
                    category: Some(tier),
                },
            });
        }
    }
    for (name, spec, rows, description, license, turns) in LITERATURE {
        out.push(DatasetSpec {
            name: name.into(),
            description: format!("{description} from {}", spec.repo),
            rows,
            turns,
            approx_size: "< 1 MB",
            license,
            source: DatasetSource::Literature(spec),
        });
    }
    out.push(DatasetSpec {
        name: "spec_bench".into(),
        description: "Spec-Bench question.jsonl (hemingkx/Spec-Bench on GitHub): 13 task types"
            .into(),
        rows: 480,
        turns: "1-2",
        approx_size: "< 1 MB",
        license: "Apache-2.0",
        source: DatasetSource::SpecBench,
    });
    out.push(DatasetSpec {
        name: "sharegpt".into(),
        description: format!(
            "ShareGPT conversations ({SHAREGPT_REPO}, {SHAREGPT_FILE}): each human->gpt pair a \
             turn asking for its reply's token count (AIPerf's `sharegpt`)"
        ),
        // About: the file is not read to count them (AIPerf says ~90K).
        rows: 90000,
        turns: "1-n",
        approx_size: "~650 MB (file)",
        license: "Apache-2.0",
        source: DatasetSource::ShareGpt,
    });
    out
}

/// Finds a registered dataset; an unknown name suggests the closest one.
pub fn lookup(name: &str) -> Result<DatasetSpec, DatasetError> {
    let all = registry();
    if let Some(spec) = all.iter().find(|s| s.name == name) {
        return Ok(spec.clone());
    }
    let best = all
        .iter()
        .map(|s| (edit_distance(name, &s.name), &s.name))
        .min();
    let suggestion = best
        .filter(|(d, _)| *d <= name.len().max(4) / 2)
        .map(|(_, n)| n.clone());
    Err(DatasetError::from(LookupError::UnknownDataset {
        name: name.to_string(),
        suggestion,
    }))
}

/// Every registered dataset as a text table (`speedbench datasets`): name,
/// rows, turns, size once resolved, description and license.
pub fn render_table() -> String {
    let specs = registry();
    let width = specs.iter().map(|s| s.name.len()).max().unwrap_or(4);
    let mut out = format!(
        "{:<width$}  {:>5}  {:<5}  {:<21}  DESCRIPTION\n",
        "NAME", "ROWS", "TURNS", "SIZE (resolved)"
    );
    for s in &specs {
        out.push_str(&format!(
            "{:<width$}  {:>5}  {:<5}  {:<21}  {} [{}]\n",
            s.name, s.rows, s.turns, s.approx_size, s.description, s.license
        ));
    }
    out.push_str(
        "\nSPEED-Bench names share one resolved file per config (categories are filtered after \
         resolution); see docs/datasets.md for what resolves natively and how to pre-stage.\n",
    );
    out
}

/// Levenshtein distance over chars.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_aiperf_name_is_registered_once() {
        let all = registry();
        // 1 + 11 + 5 * 4 + 5 + 1 + 1
        assert_eq!(all.len(), 39);
        let mut names: Vec<_> = all.iter().map(|s| s.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), 39);
        for n in [
            "speed_bench_qualitative",
            "speed_bench_rag",
            "speed_bench_throughput_32k",
            "speed_bench_throughput_8k_low_entropy",
            "speed_bench_throughput_1k_mixed",
            "spec_al_mtbench",
            "spec_bench",
            "sharegpt",
        ] {
            assert!(names.contains(&n), "{n}");
        }
    }

    #[test]
    fn unknown_names_suggest_the_closest() {
        let err = lookup("speed_bench_codin").unwrap_err().to_string();
        assert!(err.contains("did you mean \"speed_bench_coding\""), "{err}");
        let err = lookup("spec_al_gsm8").unwrap_err().to_string();
        assert!(err.contains("\"spec_al_gsm8k\""), "{err}");
        let err = lookup("zzz").unwrap_err().to_string();
        assert!(!err.contains("did you mean"), "{err}");
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
