//! Generator of the committed test fixtures.
//!
//! `fixtures/speed_bench_mini.jsonl` is a SPEED-Bench-shaped qualitative
//! split in miniature: all eleven categories, three rows each, the first row
//! of every category two turns long and one `reasoning` row three turns long.
//! Every prompt starts with `[<category> <n>]`, which the simulated server
//! reads to pick that category's acceptance profile.

use std::path::Path;

const CATEGORIES: [&str; 11] = [
    "coding",
    "humanities",
    "math",
    "multilingual",
    "qa",
    "rag",
    "reasoning",
    "roleplay",
    "stem",
    "summarization",
    "writing",
];

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
    for (c, category) in CATEGORIES.iter().enumerate() {
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

pub fn run(root: &Path, check: bool) -> Result<(), String> {
    let files = [("fixtures/speed_bench_mini.jsonl", speed_bench_mini())];
    for (rel, content) in files {
        let path = root.join(rel);
        if check {
            let current =
                std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
            if current != content {
                return Err(format!("{rel} is stale: run `cargo xtask fixtures`"));
            }
        } else {
            std::fs::write(&path, content).map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!("wrote {rel}");
        }
    }
    Ok(())
}
