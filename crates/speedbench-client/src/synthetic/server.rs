//! [`ServerTokenizer`]: the server's own `/tokenize` and `/detokenize`.

use std::time::Duration;

use hyper::header::{HeaderName, HeaderValue};
use serde_json::{Value, json};
use speedbench_http::{HttpClient, post_json};

use super::{TokenCodec, TokenFuture};
use crate::discovery::{control_client, fetch_failure};
use crate::engine_kind::Engine;
use crate::error::ClientError;
use crate::secrets::Secrets;
use crate::target::{Target, request_headers};

/// The most bytes read of one answer: a corpus of ~10,000 tokens as ids
/// is ~100 KB.
const MAX_ANSWER_BYTES: usize = 16 << 20;

/// How long one tokenize or detokenize call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Counts tokens with the server's tokenizer: `POST /tokenize` and `POST
/// /detokenize`, in vLLM's and SGLang's shape (`{model, prompt,
/// add_special_tokens: false}`, the text back as `prompt` or `text`) or
/// llama.cpp's (`{content, add_special: false}`, the text back as
/// `content`), by the target's engine. Special tokens (a BOS) are not
/// counted: the length is the prompt text's.
pub struct ServerTokenizer {
    client: HttpClient,
    root: String,
    model: String,
    llama_cpp: bool,
    headers: Vec<(HeaderName, HeaderValue)>,
    secrets: Secrets,
}

impl ServerTokenizer {
    /// The tokenizer of `target`'s server, asked as its engine
    /// ([`Target::engine`]; vLLM's shape when unknown) with its
    /// credentials and CA roots.
    pub fn new(target: &Target) -> Result<ServerTokenizer, ClientError> {
        let root = target.base_url.to_string();
        Ok(ServerTokenizer {
            client: control_client(&target.extra_roots_pem, [root.as_str()])?,
            root,
            model: target.model.clone(),
            llama_cpp: target.engine == Some(Engine::LlamaCpp),
            headers: request_headers(target.api_key.as_ref(), &target.headers)?,
            secrets: Secrets::for_credentials(target.api_key.as_ref(), &target.headers),
        })
    }

    /// [`ServerTokenizer::new`], and where the target's engine is not
    /// known, the wire shape found by asking: vLLM's (SGLang's too) first,
    /// then llama.cpp's, the first to give tokens for a word kept. A
    /// server neither answers is the first one's error.
    pub async fn connect(target: &Target) -> Result<ServerTokenizer, ClientError> {
        let mut tokenizer = ServerTokenizer::new(target)?;
        if target.engine.is_some() {
            return Ok(tokenizer);
        }
        let first = match tokenizer.encode_text("speedbench").await {
            Ok(ids) if !ids.is_empty() => return Ok(tokenizer),
            Ok(_) => None,
            Err(e) => Some(e),
        };
        tokenizer.llama_cpp = true;
        match tokenizer.encode_text("speedbench").await {
            Ok(ids) if !ids.is_empty() => Ok(tokenizer),
            _ => Err(first.unwrap_or_else(|| ClientError::Discovery {
                url: format!("{}/tokenize", tokenizer.root),
                message: "the server gave no tokens for a word, in vLLM's shape or llama.cpp's"
                    .into(),
                failure: None,
            })),
        }
    }

    async fn call(&self, path: &str, body: Value) -> Result<Value, ClientError> {
        let url = format!("{}{path}", self.root);
        let failed = |message: String| ClientError::Discovery {
            url: url.clone(),
            message: self.secrets.scrub(&message).into_owned(),
            failure: None,
        };
        let body = serde_json::to_vec(&body).unwrap_or_default();
        let answer = post_json(
            &self.client,
            &url,
            &self.headers,
            body,
            CALL_TIMEOUT,
            MAX_ANSWER_BYTES,
        )
        .await
        .map_err(|e| failed(fetch_failure(&url, &e)))?;
        if answer.status != 200 {
            let text = String::from_utf8_lossy(&answer.body);
            return Err(failed(format!(
                "HTTP {}: {} (synthetic prompts are counted with the server's own tokenizer; \
                 this server did not tokenize)",
                answer.status.as_u16(),
                text.chars().take(300).collect::<String>()
            )));
        }
        serde_json::from_slice(&answer.body)
            .map_err(|e| failed(format!("the answer is not JSON: {e}")))
    }

    async fn encode_text(&self, text: &str) -> Result<Vec<u32>, ClientError> {
        let body = if self.llama_cpp {
            json!({"content": text, "add_special": false})
        } else {
            json!({"model": self.model, "prompt": text, "add_special_tokens": false})
        };
        let answer = self.call("/tokenize", body).await?;
        token_ids(&answer).ok_or_else(|| ClientError::Discovery {
            url: format!("{}/tokenize", self.root),
            message: "the answer has no `tokens` array of token ids".into(),
            failure: None,
        })
    }

    async fn decode_ids(&self, tokens: &[u32]) -> Result<String, ClientError> {
        let body = if self.llama_cpp {
            json!({"tokens": tokens})
        } else {
            json!({"model": self.model, "tokens": tokens})
        };
        let answer = self.call("/detokenize", body).await?;
        ["prompt", "text", "content"]
            .iter()
            .find_map(|k| answer.get(k).and_then(Value::as_str))
            .map(str::to_string)
            .ok_or_else(|| ClientError::Discovery {
                url: format!("{}/detokenize", self.root),
                message: "the answer has no text (`prompt`, `text` or `content`)".into(),
                failure: None,
            })
    }
}

/// The `tokens` of a tokenize answer: ids, or llama.cpp's `{id, piece}`
/// objects.
fn token_ids(answer: &Value) -> Option<Vec<u32>> {
    answer
        .get("tokens")?
        .as_array()?
        .iter()
        .map(|t| {
            let id = t.as_u64().or_else(|| t.get("id")?.as_u64())?;
            u32::try_from(id).ok()
        })
        .collect()
}

impl TokenCodec for ServerTokenizer {
    fn describe(&self) -> String {
        format!(
            "the server's /tokenize at {}",
            speedbench_record::redact_url(&self.root)
        )
    }

    fn encode<'a>(&'a self, text: &'a str) -> TokenFuture<'a, Vec<u32>> {
        Box::pin(self.encode_text(text))
    }

    fn decode<'a>(&'a self, tokens: &'a [u32]) -> TokenFuture<'a, String> {
        Box::pin(self.decode_ids(tokens))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_ids_read_plain_ids_and_llama_cpp_pieces() {
        assert_eq!(
            token_ids(&json!({"tokens": [1, 2, 3], "count": 3})),
            Some(vec![1, 2, 3])
        );
        let pieces = json!({"tokens": [{"id": 7, "piece": "a"}, {"id": 9, "piece": "b"}]});
        assert_eq!(token_ids(&pieces), Some(vec![7, 9]));
        assert_eq!(token_ids(&json!({"tokens": [-1]})), None);
        assert_eq!(token_ids(&json!({"count": 3})), None);
    }
}
