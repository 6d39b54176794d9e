//! `/tokenize` and `/detokenize` as the flavour's engine serves them,
//! with the simulator's own tokens: whitespace-separated words (what it
//! counts as a prompt's tokens), numbered in the order first seen.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::config::SpecFlavor;

/// The words seen so far and their ids.
#[derive(Debug, Default)]
pub(crate) struct Vocab {
    ids: HashMap<String, u64>,
    words: Vec<String>,
}

impl Vocab {
    fn encode(&mut self, text: &str) -> Vec<u64> {
        text.split_whitespace()
            .map(|word| match self.ids.get(word) {
                Some(&id) => id,
                None => {
                    let id = self.words.len() as u64;
                    self.words.push(word.to_string());
                    self.ids.insert(word.to_string(), id);
                    id
                }
            })
            .collect()
    }

    fn decode(&self, tokens: &[u64]) -> Result<String, String> {
        let words = tokens
            .iter()
            .map(|&id| {
                let word = usize::try_from(id).ok().and_then(|i| self.words.get(i));
                word.map(String::as_str)
                    .ok_or_else(|| format!("token id {id} out of vocabulary"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(words.join(" "))
    }
}

/// Whether the flavour's engine serves `/tokenize` (TensorRT-LLM's
/// `trtllm-serve` does not).
pub(crate) fn served(flavor: SpecFlavor) -> bool {
    flavor != SpecFlavor::TrtLlm
}

/// The answer to `POST /tokenize`: llama.cpp reads `content`, vLLM and
/// SGLang `prompt`; both answer `tokens` (vLLM and SGLang with `count`).
pub(crate) fn tokenize(
    vocab: &mut Vocab,
    flavor: SpecFlavor,
    body: &Value,
) -> Result<Value, String> {
    let llama = flavor == SpecFlavor::LlamaCpp;
    let field = if llama { "content" } else { "prompt" };
    let text = body
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| format!("`{field}` (a string) is required"))?;
    let tokens = vocab.encode(text);
    Ok(if llama {
        json!({"tokens": tokens})
    } else {
        json!({"count": tokens.len(), "max_model_len": 131072, "tokens": tokens})
    })
}

/// The answer to `POST /detokenize {tokens}`: the text as `content`
/// (llama.cpp), `text` (SGLang) or `prompt` (vLLM).
pub(crate) fn detokenize(vocab: &Vocab, flavor: SpecFlavor, body: &Value) -> Result<Value, String> {
    let tokens: Vec<u64> = body
        .get("tokens")
        .and_then(Value::as_array)
        .and_then(|ids| ids.iter().map(Value::as_u64).collect())
        .ok_or("`tokens` (an array of token ids) is required")?;
    let text = vocab.decode(&tokens)?;
    let key = match flavor {
        SpecFlavor::LlamaCpp => "content",
        SpecFlavor::Sglang => "text",
        _ => "prompt",
    };
    Ok(json!({ key: text }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_in_each_engines_shape() {
        let mut vocab = Vocab::default();
        let vllm = tokenize(
            &mut vocab,
            SpecFlavor::Vllm,
            &json!({"prompt": "a b  a\nc"}),
        )
        .unwrap();
        assert_eq!(vllm["tokens"], json!([0, 1, 0, 2]));
        assert_eq!(vllm["count"], 4);
        let llama = tokenize(&mut vocab, SpecFlavor::LlamaCpp, &json!({"content": "c d"})).unwrap();
        assert_eq!(llama, json!({"tokens": [2, 3]}));
        let back = |flavor| detokenize(&vocab, flavor, &json!({"tokens": [3, 0, 2]})).unwrap();
        assert_eq!(back(SpecFlavor::Vllm), json!({"prompt": "d a c"}));
        assert_eq!(back(SpecFlavor::Sglang), json!({"text": "d a c"}));
        assert_eq!(back(SpecFlavor::LlamaCpp), json!({"content": "d a c"}));
        let unknown = detokenize(&vocab, SpecFlavor::Vllm, &json!({"tokens": [99]}));
        assert!(unknown.unwrap_err().contains("99"));
        let wrong = tokenize(&mut vocab, SpecFlavor::LlamaCpp, &json!({"prompt": "x"}));
        assert!(wrong.unwrap_err().contains("content"));
        assert!(!served(SpecFlavor::TrtLlm) && served(SpecFlavor::Sglang));
    }
}
