//! [`Engine`]: which inference engine a server runs, what a request needs
//! to bring back acceptance and where the engine serves its metrics. A
//! leaf (a target names its engine; detection and the preflight are
//! `crate::engine`'s).

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};

/// An inference engine behind an OpenAI-compatible server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Engine {
    /// vLLM (`vllm serve`).
    Vllm,
    /// SGLang (`sglang.launch_server`).
    Sglang,
    /// TensorRT-LLM (`trtllm-serve`).
    TrtLlm,
    /// llama.cpp's `llama-server` (and servers that copy its `timings`).
    LlamaCpp,
    /// An NVIDIA NIM container (metrics at `/v1/metrics`).
    Nim,
    /// Any other OpenAI-compatible server.
    OpenAi,
}

impl Engine {
    /// Every engine, in a stable order.
    pub const ALL: [Engine; 6] = [
        Engine::Vllm,
        Engine::Sglang,
        Engine::TrtLlm,
        Engine::LlamaCpp,
        Engine::Nim,
        Engine::OpenAi,
    ];

    /// The stable name (`vllm`, `sglang`, `trtllm`, `llamacpp`, `nim`,
    /// `openai`).
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::TrtLlm => "trtllm",
            Engine::LlamaCpp => "llamacpp",
            Engine::Nim => "nim",
            Engine::OpenAi => "openai",
        }
    }

    /// Body fields the engine needs before it reports acceptance per
    /// request: SGLang's `"return_spec_tokens_details": true`; nothing for
    /// the others (vLLM's is a server flag, TensorRT-LLM and llama.cpp
    /// always report).
    pub fn request_fields(self) -> Map<String, Value> {
        let mut fields = Map::new();
        if self == Engine::Sglang {
            fields.insert("return_spec_tokens_details".into(), Value::Bool(true));
        }
        fields
    }

    /// Where the engine serves its metrics, relative to the server's root:
    /// `/metrics` for all but TensorRT-LLM (whose `/metrics` is JSON
    /// iteration statistics and whose Prometheus text is at
    /// `/prometheus/metrics`: both are read) and NIM (`/v1/metrics` too).
    pub fn metrics_paths(self) -> &'static [&'static str] {
        match self {
            Engine::TrtLlm => &["/prometheus/metrics", "/metrics"],
            Engine::Nim => &["/metrics", "/v1/metrics"],
            _ => &["/metrics"],
        }
    }

    /// What to change when a response carried no per-request acceptance.
    pub fn missing_acceptance_advice(self) -> &'static str {
        match self {
            Engine::Vllm => {
                "vLLM returns per-request acceptance only when started with \
                 `--per-request-spec-decode-metrics summary` (or `detailed`; a build with vLLM \
                 PR #48915), only for n == 1, and not behind Dynamo, which strips the field (use \
                 the server scrape there: vLLM's /metrics counters). Check that speculation is \
                 on (`--speculative-config`)"
            }
            Engine::Sglang => {
                "the request asked SGLang for `return_spec_tokens_details`; it answers with \
                 `sglext.spec_tokens_details` from SGLang PR #33518 (v0.5.19 and later) and only \
                 with speculation on (`--speculative-algorithm`). Older servers give only the \
                 time-averaged `sglang:spec_accept_length` gauge of the server scrape"
            }
            Engine::TrtLlm => {
                "trtllm-serve puts `avg_decoded_tokens_per_iter` on each choice when it \
                 speculates (`speculative_config` in `--extra_llm_api_options`); without it the \
                 server scrape reads /prometheus/metrics and the JSON iteration statistics of \
                 /metrics (`enable_iter_perf_stats: true`)"
            }
            Engine::LlamaCpp => {
                "llama-server sends `timings.draft_n` only when it drafted: give it a draft model \
                 (`-md FILE`) and `--spec-type draft-simple` (`-md` alone does not speculate); \
                 start it with `--metrics` for the server scrape"
            }
            Engine::Nim => {
                "NIM containers report acceptance only through their metrics endpoint \
                 (/v1/metrics, scraped with /metrics): the server scrape is the path"
            }
            Engine::OpenAi => {
                "the server answered like no engine speedbench knows: per-request acceptance \
                 is read from vLLM's `metrics.speculative_decoding`, SGLang's `sglext`, \
                 TensorRT-LLM's per-choice fields and llama.cpp's `timings`; name the engine if \
                 it is one of them"
            }
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Engine {
    type Err = String;

    /// The stable names, and the usual spellings (`tensorrt_llm`,
    /// `tensorrt-llm`, `trt-llm`, `llama.cpp`, `llama_cpp`).
    fn from_str(s: &str) -> Result<Engine, String> {
        let l = s.to_ascii_lowercase();
        let engine = match l.as_str() {
            "tensorrt_llm" | "tensorrt-llm" | "trt-llm" | "trt_llm" => Engine::TrtLlm,
            "llama.cpp" | "llama_cpp" | "llama-cpp" | "llama-server" => Engine::LlamaCpp,
            _ => Engine::ALL
                .into_iter()
                .find(|e| e.as_str() == l)
                .ok_or_else(|| {
                    format!(
                        "unknown engine {s:?} (one of {})",
                        Engine::ALL.map(Engine::as_str).join(", ")
                    )
                })?,
        };
        Ok(engine)
    }
}
