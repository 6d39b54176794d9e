//! The category vocabulary records carry, shared by datasets and reports.

/// The eleven SPEED-Bench qualitative categories, in the order reports use.
pub const QUALITATIVE_CATEGORIES: [&str; 11] = [
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

/// The three SPEED-Bench throughput entropy tiers, in report order.
pub const THROUGHPUT_TIERS: [&str; 3] = ["low_entropy", "mixed", "high_entropy"];

/// The literature acceptance-length benchmarks (`spec_al_*`), in report order.
pub const SPEC_AL_BENCHMARKS: [&str; 5] = ["gsm8k", "math500", "mtbench", "humaneval", "mbpp"];
