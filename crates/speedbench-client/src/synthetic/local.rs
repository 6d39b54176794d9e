//! [`LocalTokenizer`]: a Hugging Face `tokenizer.json` on disk.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{TokenCodec, TokenFuture};
use crate::error::ClientError;

/// A model's tokenizer read from the Hugging Face `tokenizer.json` a user
/// gives (the file, or the model directory holding it): prompts counted
/// where a server has no `/tokenize`, and nothing downloaded at run time.
///
/// Text is encoded without special tokens (no BOS), as a server's
/// `/tokenize` is asked to, so a prompt's count is the tokens of its text.
pub struct LocalTokenizer {
    file: PathBuf,
    tokenizer: Arc<tokenizers::Tokenizer>,
}

/// Texts of at least this many bytes are encoded on the runtime's blocking
/// threads, so that many of them (a dataset's replies, counted before a
/// run) are encoded on every core; shorter ones cost less than the hand-off.
const ON_A_BLOCKING_THREAD: usize = 256;

impl LocalTokenizer {
    /// Reads `path`: a `tokenizer.json`, or a directory holding one. A
    /// path that does not exist (a Hub model name, say) is an error that
    /// says so: speedbench downloads no tokenizer.
    pub fn open(path: &Path) -> Result<LocalTokenizer, ClientError> {
        let refused = |message: String| ClientError::Tokenizer {
            path: path.to_path_buf(),
            message,
        };
        if !path.exists() {
            return Err(refused(
                "no such file or directory: speedbench downloads no tokenizer; give the \
                 model's tokenizer.json or a directory holding it (e.g. `hf download MODEL \
                 tokenizer.json --local-dir DIR`)"
                    .into(),
            ));
        }
        let file = if path.is_dir() {
            path.join("tokenizer.json")
        } else {
            path.to_path_buf()
        };
        if !file.is_file() {
            return Err(refused(
                "the directory holds no tokenizer.json (a Hugging Face tokenizer's one-file \
                 form; tokenizer.model and vocab files alone are not read)"
                    .into(),
            ));
        }
        let bytes = std::fs::read(&file).map_err(|source| ClientError::Io {
            path: file.clone(),
            source,
        })?;
        let tokenizer =
            tokenizers::Tokenizer::from_bytes(&bytes).map_err(|e| ClientError::Tokenizer {
                path: file.clone(),
                message: format!("not a tokenizer.json this version can read: {e}"),
            })?;
        Ok(LocalTokenizer {
            file,
            tokenizer: Arc::new(tokenizer),
        })
    }

    /// The `tokenizer.json` read.
    pub fn file(&self) -> &Path {
        &self.file
    }

    fn failed(&self, what: &str, e: impl fmt::Display) -> ClientError {
        ClientError::Tokenizer {
            path: self.file.clone(),
            message: format!("{what}: {e}"),
        }
    }

    /// `text`'s ids, without offsets (`encode_fast`: the same ids, less
    /// work).
    fn ids(tokenizer: &tokenizers::Tokenizer, text: &str) -> tokenizers::Result<Vec<u32>> {
        (tokenizer.encode_fast(text, false)).map(|encoding| encoding.get_ids().to_vec())
    }
}

impl fmt::Debug for LocalTokenizer {
    // The vocabulary is tens of thousands of entries: the file says which.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalTokenizer")
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

impl TokenCodec for LocalTokenizer {
    fn describe(&self) -> String {
        format!("the tokenizer.json at {}", self.file.display())
    }

    fn encode<'a>(&'a self, text: &'a str) -> TokenFuture<'a, Vec<u32>> {
        let runtime = tokio::runtime::Handle::try_current().ok();
        match runtime.filter(|_| text.len() >= ON_A_BLOCKING_THREAD) {
            Some(runtime) => {
                let (tokenizer, owned) = (self.tokenizer.clone(), text.to_owned());
                let ids = runtime.spawn_blocking(move || Self::ids(&tokenizer, &owned));
                Box::pin(async move {
                    match ids.await {
                        Ok(ids) => ids.map_err(|e| self.failed("encoding", e)),
                        Err(e) => Err(self.failed("encoding", e)),
                    }
                })
            }
            None => {
                let ids = Self::ids(&self.tokenizer, text).map_err(|e| self.failed("encoding", e));
                Box::pin(async move { ids })
            }
        }
    }

    fn decode<'a>(&'a self, tokens: &'a [u32]) -> TokenFuture<'a, String> {
        let text = (self.tokenizer.decode(tokens, false)).map_err(|e| self.failed("decoding", e));
        Box::pin(async move { text })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tokenizers/tiny-bpe")
    }

    fn run<T>(future: TokenFuture<'_, T>) -> Result<T, ClientError> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(future)
    }

    /// The ids and texts Hugging Face's own Python `tokenizers` gave
    /// (`fixtures/tokenizers/make_tiny_bpe.py`).
    #[test]
    fn encodes_and_decodes_as_hugging_face_does_without_the_bos() {
        let tokenizer = LocalTokenizer::open(&fixture()).unwrap();
        let expected: Vec<serde_json::Value> = serde_json::from_str(
            &std::fs::read_to_string(fixture().join("expected.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(expected.len(), 4);
        for entry in expected {
            let text = entry["text"].as_str().unwrap();
            let ids: Vec<u32> = serde_json::from_value(entry["ids"].clone()).unwrap();
            let with_bos: Vec<u32> =
                serde_json::from_value(entry["ids_with_special"].clone()).unwrap();
            assert_eq!(with_bos[1..], ids[..], "the fixture's BOS comes first");
            assert_eq!(run(tokenizer.encode(text)).unwrap(), ids, "{text:?}");
            assert_eq!(
                run(tokenizer.decode(&ids)).unwrap(),
                entry["decoded"],
                "{text:?}"
            );
        }
    }

    /// A long text, encoded on a blocking thread inside a runtime, has the
    /// ids it has encoded in place.
    #[tokio::test]
    async fn a_long_text_encodes_the_same_on_a_blocking_thread() {
        let tokenizer = LocalTokenizer::open(&fixture()).unwrap();
        let text = "The quick brown fox jumps over the lazy dog. ".repeat(200);
        assert!(text.len() >= ON_A_BLOCKING_THREAD);
        let in_place = LocalTokenizer::ids(&tokenizer.tokenizer, &text).unwrap();
        let ids = tokenizer.encode(&text).await.unwrap();
        assert_eq!(ids, in_place);
        assert!(ids.len() > 200);
    }

    #[test]
    fn reads_the_file_or_the_directory_holding_it() {
        let by_dir = LocalTokenizer::open(&fixture()).unwrap();
        let by_file = LocalTokenizer::open(&fixture().join("tokenizer.json")).unwrap();
        assert_eq!(by_dir.file(), by_file.file());
        assert!(
            by_dir.describe().ends_with("tiny-bpe/tokenizer.json"),
            "{}",
            by_dir.describe()
        );
    }

    #[test]
    fn a_hub_name_an_empty_directory_and_a_bad_file_are_refused_by_path() {
        let name = LocalTokenizer::open(Path::new("meta-llama/Llama-3.1-8B")).unwrap_err();
        let text = name.to_string();
        assert!(
            text.starts_with("tokenizer meta-llama/Llama-3.1-8B: "),
            "{text}"
        );
        assert!(text.contains("downloads no tokenizer"), "{text}");

        let dir = tempfile::tempdir().unwrap();
        let empty = LocalTokenizer::open(dir.path()).unwrap_err().to_string();
        assert!(empty.contains("holds no tokenizer.json"), "{empty}");

        let bad = dir.path().join("tokenizer.json");
        std::fs::write(&bad, "{\"model\": 3}").unwrap();
        let text = LocalTokenizer::open(dir.path()).unwrap_err().to_string();
        assert!(
            text.starts_with(&format!(
                "tokenizer {}: not a tokenizer.json",
                bad.display()
            )),
            "{text}"
        );
    }
}
