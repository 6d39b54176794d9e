//! What the upstream prepare step is pinned to: the script, the Python
//! packages it needs, the hosts its sources may come from. A leaf: errors
//! quote these, and it imports nothing of this crate.

/// The repository of the pinned prepare script.
pub const PREPARE_SCRIPT_REPO: &str = "NVIDIA-NeMo/Skills";
/// The pinned commit of the prepare script (the one AIPerf vendors).
pub const PREPARE_SCRIPT_COMMIT: &str = "5ac8609a56ac941540b10c92e68d556e6343cd4c";
/// The script's path in [`PREPARE_SCRIPT_REPO`].
pub const PREPARE_SCRIPT_PATH: &str = "nemo_skills/dataset/speed-bench/prepare.py";
/// The sha256 the script at [`PREPARE_SCRIPT_COMMIT`] must have.
pub const PREPARE_SCRIPT_SHA256: &str =
    "a551be4df541474e54e21b480022b0cbb66c2da068fda61b2a64bd3223bbbed2";
/// The Python packages the pinned prepare step needs.
pub const PYTHON_PACKAGES: &str = "datasets pandas numpy tiktoken";

/// The hosts a row's URL `source` may name (AIPerf's list, enumerated from
/// every config at the pinned SPEED-Bench revision).
pub const ALLOWED_SOURCE_HOSTS: [&str; 5] = [
    "huggingface.co",
    "raw.githubusercontent.com",
    "github.com",
    "opencompass.openxlab.space",
    "www.gutenberg.org",
];
