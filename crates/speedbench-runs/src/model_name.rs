//! [`display_model`]: a model id as a row label. A leaf: loading sets
//! the first label with it, labelling makes labels unique.

/// A model id as a table shows it: an id that is a path (it contains `/`
/// or `\\`, or ends in `.gguf`, as llama-server reports the GGUF file it
/// serves) by its file stem, anything else as it is.
///
/// ```
/// use speedbench_runs::display_model;
/// assert_eq!(display_model("/models/llama/SmolLM2-135M-Instruct-Q8_0.gguf"), "SmolLM2-135M-Instruct-Q8_0");
/// assert_eq!(display_model("qwen2.5-0.5b.GGUF"), "qwen2.5-0.5b");
/// assert_eq!(display_model("meta-llama/Llama-3.1-8B-Instruct"), "Llama-3.1-8B-Instruct");
/// assert_eq!(display_model("gpt-oss-20b"), "gpt-oss-20b");
/// ```
///
/// The full id stays where the run keeps it ([`RunData::model`](crate::RunData::model), `run.json`)
/// and in JSON outputs.
pub fn display_model(model: &str) -> String {
    let is_gguf = |s: &str| {
        s.len()
            .checked_sub(5)
            .and_then(|i| s.get(i..))
            .is_some_and(|e| e.eq_ignore_ascii_case(".gguf"))
    };
    if !(model.contains('/') || model.contains('\\') || is_gguf(model)) {
        return model.to_string();
    }
    let trimmed = model.trim_end_matches(['/', '\\']);
    let name = trimmed.rsplit(['/', '\\']).next().unwrap_or(trimmed);
    let stem = if is_gguf(name) {
        &name[..name.len() - 5]
    } else {
        name
    };
    if stem.is_empty() {
        model.to_string()
    } else {
        stem.to_string()
    }
}
