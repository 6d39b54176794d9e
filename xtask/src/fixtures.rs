//! Generator of the committed test fixtures.
//!
//! `fixtures/speed_bench_mini.jsonl` is a SPEED-Bench-shaped qualitative
//! split in miniature: all eleven categories, three rows each, the first row
//! of every category two turns long and one `reasoning` row three turns long.
//! Every prompt starts with `[<category> <n>]`, which the simulated server
//! reads to pick that category's acceptance profile.
//!
//! `fixtures/hub/<org>/<name>/<path>` are miniature Hugging Face Hub
//! datasets, a few KB of snappy Parquet each, served by the dataset crate's
//! loopback Hub test server: the five literature datasets in the Parquet
//! conversion branch's layout, SPEED-Bench configs with placeholder rows, and
//! the upstream sources those rows resolve from (CNN/DailyMail, HLE,
//! CodeContests); `throughput_8k` names a source on a host outside the
//! allowed set; ShareGPT's JSON file in miniature. `fixtures/upstream/fake_prepare.py` (written by hand, not
//! generated) stands in for NeMo-Skills' prepare script in tests. `fixtures/spec_bench_question.jsonl` is Spec-Bench's
//! `question.jsonl` format in miniature. `fixtures/tokenizers/tiny-bpe/`
//! (a small byte-level BPE tokenizer.json and the ids Hugging Face's Python
//! `tokenizers` gives) is not made here: `fixtures/tokenizers/make_tiny_bpe.py`
//! makes it with PyPI's `tokenizers`, the reference it is checked against.

use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder};
use arrow_array::{Array, ArrayRef, BooleanArray, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use speedbench_record::QUALITATIVE_CATEGORIES;

const TOPICS: [&str; 6] = [
    "binary search over a sorted list",
    "the causes of the first industrial revolution",
    "the sum of the first hundred odd numbers",
    "a short greeting in three languages",
    "why the sky looks blue at noon",
    "the key facts in the passage about tides",
];

fn speed_bench_mini() -> String {
    let mut out = String::new();
    for (c, category) in QUALITATIVE_CATEGORIES.iter().enumerate() {
        for n in 0..3 {
            let topic = TOPICS[(c + n) % TOPICS.len()];
            let mut turns = vec![format!(
                "[{category} {n}] Please answer carefully: {topic}."
            )];
            if n == 0 {
                turns.push(format!(
                    "[{category} {n}] Now explain your answer in more detail."
                ));
            }
            if n == 1 && *category == "reasoning" {
                turns.push(format!(
                    "[{category} {n}] Follow up: what changes if the input doubles?"
                ));
                turns.push(format!(
                    "[{category} {n}] Finally, summarise in one sentence."
                ));
            }
            let messages: Vec<_> = turns
                .iter()
                .map(|t| serde_json::json!({"role": "user", "content": t}))
                .collect();
            let row = serde_json::json!({
                "question_id": format!("{category}-{n:03}"),
                "category": category,
                "sub_category": null,
                "source": "speedbench-fixture",
                "src_id": format!("{category}-{n:03}"),
                "difficulty": null,
                "multiturn": messages.len() > 1,
                "messages": messages,
            });
            out.push_str(&row.to_string());
            out.push('\n');
        }
    }
    out
}

/// The placeholder SPEED-Bench publishes in place of prompt text.
const PLACEHOLDER: &str =
    "FULL BENCHMARK DATA SHOULD BE FETCHED FROM THE SOURCE USING SPECDEC_BENCH";

/// One column of a fixture table.
enum Col {
    Str(&'static str, Vec<Option<String>>),
    Int(&'static str, Vec<i64>),
    Bool(&'static str, Vec<bool>),
    StrList(&'static str, Vec<Vec<String>>),
}

fn s(v: &str) -> Option<String> {
    Some(v.to_string())
}

fn strs(v: &[&str]) -> Vec<Option<String>> {
    v.iter().map(|x| s(x)).collect()
}

/// Writes a table as snappy Parquet, deterministically.
fn parquet_bytes(cols: Vec<Col>) -> Vec<u8> {
    let mut fields = Vec::new();
    let mut arrays: Vec<ArrayRef> = Vec::new();
    for c in cols {
        match c {
            Col::Str(n, v) => {
                fields.push(Field::new(n, DataType::Utf8, true));
                arrays.push(Arc::new(StringArray::from(v)));
            }
            Col::Int(n, v) => {
                fields.push(Field::new(n, DataType::Int64, false));
                arrays.push(Arc::new(Int64Array::from(v)));
            }
            Col::Bool(n, v) => {
                fields.push(Field::new(n, DataType::Boolean, false));
                arrays.push(Arc::new(BooleanArray::from(v)));
            }
            Col::StrList(n, v) => {
                let mut b = ListBuilder::new(StringBuilder::new());
                for row in v {
                    for item in row {
                        b.values().append_value(item);
                    }
                    b.append(true);
                }
                let a = b.finish();
                fields.push(Field::new(n, a.data_type().clone(), true));
                arrays.push(Arc::new(a));
            }
        }
    }
    let batch = RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays).expect("valid table");
    let props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_created_by("speedbench xtask fixtures".to_string())
        .build();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).expect("writer");
    w.write(&batch).expect("write");
    w.close().expect("close");
    out
}

fn qid(n: u32) -> String {
    format!("{:032x}", 0x5eed_0000u64 + u64::from(n))
}

struct SpeedRow {
    category: &'static str,
    turns: Vec<String>,
    source: &'static str,
    src_id: &'static str,
}

fn speed_bench(first_id: u32, rows: Vec<SpeedRow>) -> Vec<u8> {
    let n = rows.len();
    parquet_bytes(vec![
        Col::Str(
            "question_id",
            (0..n).map(|i| Some(qid(first_id + i as u32))).collect(),
        ),
        Col::Str("category", rows.iter().map(|r| s(r.category)).collect()),
        Col::Str("sub_category", vec![None; n]),
        Col::StrList("turns", rows.iter().map(|r| r.turns.clone()).collect()),
        Col::Str("source", rows.iter().map(|r| s(r.source)).collect()),
        Col::Str("src_id", rows.iter().map(|r| s(r.src_id)).collect()),
        Col::Str("difficulty", vec![None; n]),
        Col::Bool(
            "multiturn",
            rows.iter().map(|r| r.turns.len() > 1).collect(),
        ),
    ])
}

fn inline(category: &'static str, turns: &[&str]) -> SpeedRow {
    SpeedRow {
        category,
        turns: turns.iter().map(|t| t.to_string()).collect(),
        source: "speedbench-fixture",
        src_id: "",
    }
}

fn placeholder(
    category: &'static str,
    template: Option<&str>,
    source: &'static str,
    src_id: &'static str,
) -> SpeedRow {
    let text = match template {
        Some(t) => format!("{PLACEHOLDER}\n\n{t}"),
        None => PLACEHOLDER.to_string(),
    };
    SpeedRow {
        category,
        turns: vec![text],
        source,
        src_id,
    }
}

/// The miniature Hub: (path under fixtures/, Parquet bytes).
fn hub_files() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            "fixtures/hub/openai/gsm8k/main/test/0000.parquet",
            parquet_bytes(vec![
                Col::Str("question", strs(&[
                    "Tom has 3 boxes of 12 pencils and gives away 7. How many pencils are left?",
                    "A train travels 60 km in 45 minutes. What is its speed in km per hour?",
                    "Sara reads 14 pages a day. How many days does a 98-page book take?",
                ])),
                Col::Str("answer", strs(&["36 - 7 = 29\n#### 29", "60 / 0.75 = 80\n#### 80", "98 / 14 = 7\n#### 7"])),
            ]),
        ),
        (
            "fixtures/hub/HuggingFaceH4/MATH-500/default/test/0000.parquet",
            parquet_bytes(vec![
                Col::Str("problem", strs(&[
                    "Find the remainder when $2^{10}$ is divided by 7.",
                    "How many positive divisors does 36 have?",
                ])),
                Col::Str("solution", strs(&["$2^{10} = 1024 = 7 \\cdot 146 + 2$.", "$36 = 2^2 3^2$, so $3 \\cdot 3 = 9$."])),
                Col::Str("answer", strs(&["2", "9"])),
                Col::Str("subject", strs(&["Number Theory", "Number Theory"])),
                Col::Int("level", vec![2, 1]),
                Col::Str("unique_id", strs(&["test/number_theory/1.json", "test/number_theory/2.json"])),
            ]),
        ),
        (
            "fixtures/hub/openai/openai_humaneval/openai_humaneval/test/0000.parquet",
            parquet_bytes(vec![
                Col::Str("task_id", strs(&["HumanEval/0", "HumanEval/1"])),
                Col::Str("prompt", strs(&[
                    "def add(a: int, b: int) -> int:\n    \"\"\"Return the sum of a and b.\"\"\"\n",
                    "def is_even(n: int) -> bool:\n    \"\"\"Return True when n is even.\"\"\"\n",
                ])),
                Col::Str("canonical_solution", strs(&["    return a + b\n", "    return n % 2 == 0\n"])),
                Col::Str("test", strs(&["assert add(1, 2) == 3", "assert is_even(4)"])),
                Col::Str("entry_point", strs(&["add", "is_even"])),
            ]),
        ),
        (
            "fixtures/hub/google-research-datasets/mbpp/full/test/0000.parquet",
            parquet_bytes(vec![
                Col::Int("task_id", vec![11, 12]),
                Col::Str("text", strs(&[
                    "Write a python function to remove first and last occurrence of a given character from the string.",
                    "Write a function to sort a given matrix in ascending order according to the sum of its rows.",
                ])),
                Col::Str("code", strs(&["def remove_Occ(s, ch):\n    return s", "def sort_matrix(m):\n    return sorted(m, key=sum)"])),
                Col::StrList("test_list", vec![vec!["assert remove_Occ(\"hello\",\"l\") == \"heo\"".into()], vec!["assert sort_matrix([[1]]) == [[1]]".into()]]),
                Col::Str("test_setup_code", strs(&["", ""])),
            ]),
        ),
        (
            "fixtures/hub/HuggingFaceH4/mt_bench_prompts/default/train/0000.parquet",
            parquet_bytes(vec![
                Col::StrList("prompt", vec![
                    vec!["Compose an engaging travel blog post about a recent trip to Hawaii.".into(), "Rewrite your previous response. Start every sentence with the letter A.".into()],
                    vec!["Draft a professional email seeking your supervisor's feedback.".into(), "Take a moment to evaluate and critique your own response.".into()],
                ]),
                Col::Int("prompt_id", vec![81, 82]),
                Col::Str("category", strs(&["writing", "writing"])),
                Col::StrList("reference", vec![vec![], vec![]]),
            ]),
        ),
        (
            "fixtures/hub/nvidia/SPEED-Bench/qualitative/test-00000-of-00001.parquet",
            speed_bench(0, vec![
                inline("coding", &["[coding 0] Write a function that reverses a linked list."]),
                placeholder("coding", Some("Solve the following competitive programming problem in Python.\n\n{question}"), "deepmind/code_contests", "1554_A. Cherry"),
                placeholder("summarization", Some("Summarize the following article in three sentences.\n\n{article}"), "abisee/cnn_dailymail", "cnn-0001"),
                placeholder("qa", None, "cais/hle", "hle-0001"),
                inline("writing", &["[writing 0] Draft a short story opening.", "[writing 0] Now rewrite it in the second person."]),
                inline("math", &["[math 0] What is the sum of the first hundred odd numbers?"]),
                placeholder("coding", Some("### Question:\n{question}\n\n### Format:\n{starter_code}"), "livecodebench/code_generation_lite", "abc301_a"),
            ]),
        ),
        (
            "fixtures/hub/nvidia/SPEED-Bench/throughput_1k/test-00000-of-00001.parquet",
            speed_bench(100, vec![
                inline("low_entropy", &["[low_entropy 0] Sort these numbers: 5 3 9 1."]),
                placeholder("mixed", None, "cais/hle", "hle-0002"),
                placeholder("high_entropy", Some("{content}"), "https://huggingface.co/datasets/RUCAIBox/BAMBOO/resolve/main/senhallu_16k.jsonl", "senhallu_3_7"),
                placeholder("mixed", Some("{question}"), "TIGER-Lab/MMLU-Pro", "(12, 13)"),
            ]),
        ),
        (
            "fixtures/hub/nvidia/SPEED-Bench/throughput_2k/test-00000-of-00001.parquet",
            speed_bench(200, vec![
                inline("low_entropy", &["[low_entropy 1] Continue the sequence: 2 4 6 8."]),
                inline("mixed", &["[mixed 1] Find the hidden number in this passage: ... 42 ..."]),
            ]),
        ),
        (
            // A row whose source URL is off the allowed hosts: the upstream
            // prepare step must never be run on it.
            "fixtures/hub/nvidia/SPEED-Bench/throughput_8k/test-00000-of-00001.parquet",
            speed_bench(300, vec![
                inline("low_entropy", &["[low_entropy 2] Reverse this list: 1 2 3."]),
                placeholder("high_entropy", Some("{content}"), "https://evil.example/RUCAIBox/BAMBOO/senhallu_16k.jsonl", "senhallu_1_2"),
            ]),
        ),
        (
            "fixtures/hub/abisee/cnn_dailymail/3.0.0/test-00000-of-00001.parquet",
            parquet_bytes(vec![
                Col::Str("article", strs(&[
                    "(CNN) -- The harbour town reopened its lighthouse on Sunday after a two-year restoration, with {braces} kept literally.",
                    "(CNN) -- A second article nobody asked for.",
                ])),
                Col::Str("highlights", strs(&["Lighthouse reopens.", "Nothing happens."])),
                Col::Str("id", strs(&["cnn-0001", "cnn-0002"])),
            ]),
        ),
        (
            "fixtures/hub/cais/hle/data/test-00000-of-00001.parquet",
            parquet_bytes(vec![
                Col::Str("id", strs(&["hle-0001", "hle-0002"])),
                Col::Str("question", strs(&[
                    "Which of the first ten primes has a digit sum of 11? Answer with the prime.",
                    "Name the smallest perfect number.",
                ])),
                Col::Str("image", strs(&["", ""])),
                Col::Str("answer", strs(&["29", "6"])),
                Col::Str("rationale", strs(&["2+9 = 11.", "1+2+3 = 6."])),
                Col::Str("category", strs(&["Math", "Math"])),
            ]),
        ),
        (
            "fixtures/hub/deepmind/code_contests/data/test-00000-of-00001.parquet",
            parquet_bytes(vec![
                Col::Str("name", strs(&["1554_A. Cherry", "1554_B. Cobb"])),
                Col::Str("description", strs(&[
                    "You are given n integers a_1, ..., a_n. Find the maximum of max(a_l..a_r) * min(a_l..a_r) over all pairs l < r.",
                    "Unused problem.",
                ])),
                Col::Int("difficulty", vec![7, 8]),
            ]),
        ),
        // LiveCodeBench's JSONL files, searched in order: the row sits in the
        // third, behind a decoy in the first; the rest are empty.
        (
            "fixtures/hub/livecodebench/code_generation_lite/test.jsonl",
            lcb_rows(&[("abc300_a", "Unused problem.", "")]),
        ),
        ("fixtures/hub/livecodebench/code_generation_lite/test2.jsonl", Vec::new()),
        (
            "fixtures/hub/livecodebench/code_generation_lite/test3.jsonl",
            lcb_rows(&[(
                "abc301_a",
                "Given a string S of T and A, print who won more games.",
                "class Solution:\n    def winner(self, s: str) -> str:\n        counts = {}",
            )]),
        ),
        ("fixtures/hub/livecodebench/code_generation_lite/test4.jsonl", Vec::new()),
        ("fixtures/hub/livecodebench/code_generation_lite/test5.jsonl", Vec::new()),
        ("fixtures/hub/livecodebench/code_generation_lite/test6.jsonl", Vec::new()),
        (
            "fixtures/hub/anon8231489123/ShareGPT_Vicuna_unfiltered/ShareGPT_V3_unfiltered_cleaned_split.json",
            sharegpt_mini(),
        ),
    ]
}

/// ShareGPT's `ShareGPT_V3_unfiltered_cleaned_split.json` in miniature:
/// conversations whose turns AIPerf's rules keep (`sg-multi` two turns,
/// `sg-system` behind a leading gpt message and a system one, `sg-three`
/// three turns, `sg-plain` one), and ones they leave out, counted in
/// whitespace words as the simulator counts tokens: a prompt of 2 words
/// (`sg-short-prompt`), a reply of 1 (`sg-short-reply`), a prompt of 1,100
/// (`sg-long-prompt`), and `sg-no-pair` with nothing to pair.
fn sharegpt_mini() -> Vec<u8> {
    let turn = |from: &str, value: String| serde_json::json!({"from": from, "value": value});
    let words = |lead: &str, n: usize| {
        let mut text = lead.to_string();
        for i in 0..n.saturating_sub(lead.split_whitespace().count()) {
            text.push_str(&format!(" w{}", i % 7));
        }
        text
    };
    let conversation = |id: &str, turns: Vec<serde_json::Value>| serde_json::json!({"id": id, "conversations": turns});
    let rows = vec![
        conversation(
            "sg-multi",
            vec![
                turn("human", words("[qa 0] Please explain tides", 6)),
                turn("gpt", words("Tides follow the moon", 9)),
                turn("human", words("[qa 0] And the sun?", 5)),
                turn("gpt", words("The sun adds a smaller pull", 13)),
            ],
        ),
        conversation(
            "sg-short-prompt",
            vec![
                turn("human", "Hi there".into()),
                turn("gpt", words("Hello, how can I help", 8)),
            ],
        ),
        conversation(
            "sg-system",
            vec![
                turn("gpt", "Welcome back.".into()),
                turn("system", "Be brief.".into()),
                turn("human", words("[coding 0] Sort a list in Python", 7)),
                turn("gpt", words("Use sorted on the list", 11)),
            ],
        ),
        conversation(
            "sg-short-reply",
            vec![
                turn("human", words("[math 0] Is seven a prime number", 7)),
                turn("gpt", "Yes.".into()),
            ],
        ),
        conversation(
            "sg-no-pair",
            vec![turn("human", words("[qa 1] Nobody answers this", 5))],
        ),
        conversation(
            "sg-long-prompt",
            vec![
                turn("human", words("[summarization 0] Summarize this", 1100)),
                turn("gpt", words("It is long", 6)),
            ],
        ),
        conversation(
            "sg-three",
            vec![
                turn("human", words("[writing 0] Write a haiku about rain", 7)),
                turn("gpt", words("Rain on the roof", 10)),
                turn("human", words("[writing 0] Now one about snow", 6)),
                turn("gpt", words("Snow on the hills", 10)),
                turn("human", words("[writing 0] And about the wind", 6)),
                turn("gpt", words("Wind in the trees", 4)),
            ],
        ),
        conversation(
            "sg-plain",
            vec![
                turn(
                    "human",
                    words("[roleplay 0] Play a ship captain greeting the crew", 9),
                ),
                turn("gpt", words("Welcome aboard, sailors", 15)),
            ],
        ),
    ];
    let mut text = serde_json::to_string_pretty(&rows).unwrap_or_default();
    text.push('\n');
    text.into_bytes()
}

/// LiveCodeBench rows (question_id, question_content, starter_code) as JSONL.
fn lcb_rows(rows: &[(&str, &str, &str)]) -> Vec<u8> {
    rows.iter()
        .map(|(id, question, starter)| {
            let row = serde_json::json!({
                "question_title": "fixture",
                "question_content": question,
                "platform": "atcoder",
                "question_id": id,
                "starter_code": starter,
                "difficulty": "easy",
            });
            format!("{row}\n")
        })
        .collect::<String>()
        .into_bytes()
}

/// Spec-Bench's `question.jsonl` format: integer ids, `turns`, optional `reference`.
fn spec_bench_questions() -> String {
    let rows = [
        serde_json::json!({"question_id": 81, "category": "writing", "turns": ["[writing 0] Compose a travel blog post about Hawaii.", "[writing 0] Rewrite it starting every sentence with A."]}),
        serde_json::json!({"question_id": 161, "category": "translation", "turns": ["[multilingual 0] Translate into English: Guten Morgen."], "reference": ["Good morning."]}),
        serde_json::json!({"question_id": 481, "category": "rag", "turns": ["[rag 0] Using the passage, answer: when do tides peak?"]}),
    ];
    rows.iter().map(|r| format!("{r}\n")).collect()
}

/// Decoded Parquet contents, for a check that does not depend on bytes.
fn decoded(bytes: &[u8]) -> Result<String, String> {
    let dir = std::env::temp_dir().join(format!("xtask-fixture-{}.parquet", std::process::id()));
    std::fs::write(&dir, bytes).map_err(|e| e.to_string())?;
    let rows = speedbench_dataset::parquet_rows::read_parquet_rows(&dir).map_err(|e| e.to_string());
    let _ = std::fs::remove_file(&dir);
    Ok(serde_json::to_string(&rows?).unwrap_or_default())
}

/// `fixtures/llama_e2e.jsonl`: real prompts for the llama-server end-to-end
/// run (`.ci/llama-server-e2e.sh`), SPEED-Bench-shaped: five categories,
/// two rows two turns long. Several ask for repetitive output, which n-gram
/// drafting can predict, so the run sees both accepted and rejected drafts.
fn llama_e2e() -> String {
    let rows: [(&str, &str, &[&str]); 7] = [
        (
            "coding-1",
            "coding",
            &[
                "Write a Python function that returns the n-th Fibonacci number.",
                "Now add a docstring and type hints to it.",
            ],
        ),
        (
            "coding-2",
            "coding",
            &["Write a bash loop that prints the numbers from 1 to 20, one per line."],
        ),
        (
            "math-1",
            "math",
            &["Count from 1 to 40, separating the numbers with commas."],
        ),
        (
            "math-2",
            "math",
            &[
                "What is 12 times 12? Explain in one sentence.",
                "And 13 times 13?",
            ],
        ),
        (
            "writing-1",
            "writing",
            &["Write a short poem about the sea."],
        ),
        (
            "summarization-1",
            "summarization",
            &[
                "Summarize in two sentences: The quick brown fox jumps over the lazy dog. The dog sleeps. The fox runs into the forest and is never seen again.",
            ],
        ),
        (
            "qa-1",
            "qa",
            &[
                "What is the capital of France? Answer in one word, then repeat the answer three times.",
            ],
        ),
    ];
    let mut out = String::new();
    for (id, category, turns) in rows {
        let messages: Vec<_> = turns
            .iter()
            .map(|t| serde_json::json!({"role": "user", "content": t}))
            .collect();
        let row = serde_json::json!({
            "question_id": id,
            "category": category,
            "multiturn": turns.len() > 1,
            "messages": messages,
        });
        out.push_str(&row.to_string());
        out.push('\n');
    }
    out
}

pub(crate) fn run(root: &Path, check: bool) -> Result<(), String> {
    let mut files: Vec<(&str, Vec<u8>)> = vec![
        (
            "fixtures/speed_bench_mini.jsonl",
            speed_bench_mini().into_bytes(),
        ),
        (
            "fixtures/spec_bench_question.jsonl",
            spec_bench_questions().into_bytes(),
        ),
        ("fixtures/llama_e2e.jsonl", llama_e2e().into_bytes()),
    ];
    files.extend(hub_files());
    for (rel, content) in files {
        let path = root.join(rel);
        if check {
            let current = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            // Parquet bytes may change with the writer's version: compare
            // decoded contents when the bytes differ.
            let same = current == content
                || (rel.ends_with(".parquet") && decoded(&current)? == decoded(&content)?);
            if !same {
                return Err(format!("{rel} is stale: run `cargo xtask fixtures`"));
            }
        } else {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            }
            std::fs::write(&path, content).map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!("wrote {rel}");
        }
    }
    Ok(())
}
