//! [`WordCodec`]: whitespace-separated words as tokens.

use std::collections::HashMap;
use std::sync::Mutex;

use super::{TokenCodec, TokenFuture};

/// Counts whitespace-separated words as tokens, as speedbench's simulator
/// counts a prompt's tokens; ids are the order words were first seen.
/// Decoding joins words with one space, so a decoded text counts exactly
/// its ids: for tests and the simulator, not for a real model.
#[derive(Debug, Default)]
pub struct WordCodec {
    vocab: Mutex<Vocab>,
}

#[derive(Debug, Default)]
struct Vocab {
    ids: HashMap<String, u32>,
    words: Vec<String>,
}

impl WordCodec {
    fn encode_now(&self, text: &str) -> Vec<u32> {
        let mut vocab = self.vocab.lock().unwrap_or_else(|e| e.into_inner());
        text.split_whitespace()
            .map(|word| {
                if let Some(&id) = vocab.ids.get(word) {
                    return id;
                }
                let id = vocab.words.len() as u32;
                vocab.words.push(word.to_string());
                vocab.ids.insert(word.to_string(), id);
                id
            })
            .collect()
    }

    fn decode_now(&self, tokens: &[u32]) -> String {
        let vocab = self.vocab.lock().unwrap_or_else(|e| e.into_inner());
        let words: Vec<&str> = tokens
            .iter()
            .map(|&id| vocab.words.get(id as usize).map_or("<unk>", String::as_str))
            .collect();
        words.join(" ")
    }
}

impl TokenCodec for WordCodec {
    fn describe(&self) -> String {
        "whitespace-separated words".into()
    }

    fn encode<'a>(&'a self, text: &'a str) -> TokenFuture<'a, Vec<u32>> {
        let ids = self.encode_now(text);
        Box::pin(async move { Ok(ids) })
    }

    fn decode<'a>(&'a self, tokens: &'a [u32]) -> TokenFuture<'a, String> {
        let text = self.decode_now(tokens);
        Box::pin(async move { Ok(text) })
    }
}
