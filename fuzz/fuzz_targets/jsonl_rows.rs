//! The JSONL row parser never panics, and what it accepts is well formed:
//! every conversation has an id and at least one turn.
#![no_main]

use libfuzzer_sys::fuzz_target;
use speedbench_dataset::Dataset;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match Dataset::from_jsonl_str("fuzz.jsonl", &text) {
        Ok(ds) => {
            assert!(!ds.conversations.is_empty());
            for c in &ds.conversations {
                assert!(!c.turns.is_empty());
            }
        }
        Err(e) => {
            // Every error names its source.
            assert!(e.to_string().contains("fuzz.jsonl"), "{e}");
        }
    }
});
