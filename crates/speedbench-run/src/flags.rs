//! The flags of `speedbench profile` as the library knows them: each
//! long name (and alias), how it takes its value, and what it sets in a
//! [`RunSpec`]. A sweep file's keys are these names, so a library user
//! expands a sweep without a command-line parser; the binary's clap
//! definition is tested against this table, so the two cannot drift.
//!
//! ```
//! use speedbench_run::{RunSpec, flags};
//!
//! let mut spec = RunSpec::default();
//! flags::set(&mut spec, "request_rate", "12.5")?;
//! flags::set(&mut spec, "category", "coding,math")?;
//! assert_eq!(spec.load.request_rate, Some(12.5));
//! assert_eq!(spec.dataset.category, ["coding", "math"]);
//! assert!(flags::set(&mut spec, "concurrency", "many").is_err());
//! # Ok::<(), speedbench_run::RunError>(())
//! ```

use std::collections::BTreeSet;
use std::fmt::Display;
use std::num::NonZeroUsize;
use std::path::PathBuf;
use std::str::FromStr;

use speedbench_client::{ConnectionReuse, DatasetSampling, ModelStrategy};
use speedbench_dataset::Resolver;
use speedbench_dataset::registry::SPEED_BENCH_CONFIGS;

use crate::error::RunError;
use crate::spec::{DatasetSource, RunSpec, Secret};

/// How a flag takes its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// A switch: `true` gives it, `false` leaves it out.
    Switch,
    /// One value.
    One,
    /// Repeatable: each value is added to the ones before.
    Many,
    /// One value that may name several, comma-separated; the command line
    /// may also repeat the flag (its values are joined with commas).
    List,
}

/// What a flag's value does to a spec; `Err` says why the text is no value
/// of it.
type Setter = fn(&mut RunSpec, &str) -> Result<(), String>;

/// One flag of `speedbench profile`: its names, how it takes its value,
/// what it sets, and how a command line presents it (`--help`).
#[derive(Clone, Copy)]
pub struct Flag {
    /// The long name, with dashes (`request-rate`).
    pub long: &'static str,
    /// Other names it answers to (`request-rate-mode` for `arrival`).
    pub aliases: &'static [&'static str],
    /// How it takes its value.
    pub kind: FlagKind,
    /// A one-letter name (`-m` for `--model`).
    pub short: Option<char>,
    /// What it does, for `--help`.
    pub help: &'static str,
    /// The placeholder of its value in `--help` (`SECONDS`).
    pub value_name: Option<&'static str>,
    /// Its default as typed; applying it to [`RunSpec::default`] changes
    /// nothing (a test holds every flag to that).
    pub default: Option<&'static str>,
    /// The environment variable that gives it when the command line does not.
    pub env: Option<&'static str>,
    /// The only values it takes, when it is a closed list.
    pub possible: &'static [&'static str],
    set: Setter,
}

impl std::fmt::Debug for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Flag")
            .field("long", &self.long)
            .field("kind", &self.kind)
            .finish()
    }
}

impl Flag {
    /// A flag with no help, placeholder, default or environment variable.
    const fn new(long: &'static str, kind: FlagKind, set: Setter) -> Flag {
        Flag {
            long,
            aliases: &[],
            kind,
            short: None,
            help: "",
            value_name: None,
            default: None,
            env: None,
            possible: &[],
            set,
        }
    }

    /// With its `--help` text.
    const fn help(self, help: &'static str) -> Flag {
        Flag { help, ..self }
    }

    /// With the placeholder of its value.
    const fn value(self, value_name: &'static str) -> Flag {
        Flag {
            value_name: Some(value_name),
            ..self
        }
    }

    /// With its default, as typed.
    const fn default(self, default: &'static str) -> Flag {
        Flag {
            default: Some(default),
            ..self
        }
    }

    /// Given by an environment variable too.
    const fn env(self, env: &'static str) -> Flag {
        Flag {
            env: Some(env),
            ..self
        }
    }

    /// With a one-letter name.
    const fn short(self, short: char) -> Flag {
        Flag {
            short: Some(short),
            ..self
        }
    }

    /// Answering to other names too.
    const fn aliases(self, aliases: &'static [&'static str]) -> Flag {
        Flag { aliases, ..self }
    }

    /// Taking only these values.
    const fn possible(self, possible: &'static [&'static str]) -> Flag {
        Flag { possible, ..self }
    }

    /// Checks one value as [`Flag::apply`] would take it, on a spec of its
    /// own (for a command-line parser's value check).
    pub fn check(&self, value: &str) -> Result<(), String> {
        (self.set)(&mut RunSpec::default(), value)
    }

    /// The key of this flag in a sweep file (`request_rate`).
    pub fn key(&self) -> String {
        self.long.replace('-', "_")
    }

    /// Sets one value (for a [`FlagKind::Many`] flag, adds it; for a
    /// switch, `true` or `false`), as the command line would.
    pub fn apply(&self, spec: &mut RunSpec, value: &str) -> Result<(), RunError> {
        (self.set)(spec, value).map_err(|why| {
            RunError::invalid(
                format!("invalid value '{value}' for '--{}'", self.long),
                why,
            )
        })
    }

    /// Whether `name` (dashes or underscores) names this flag.
    fn answers_to(&self, name: &str) -> bool {
        let name = normalize(name);
        self.long == name || self.aliases.contains(&name.as_str())
    }
}

/// `request_rate` and `request-rate` are one name.
pub fn normalize(name: &str) -> String {
    name.trim().replace('_', "-")
}

/// A value parsed as its flag's type.
fn parse<T: FromStr<Err: Display>>(value: &str) -> Result<T, String> {
    value.parse::<T>().map_err(|e| e.to_string())
}

/// `true` or `false`.
fn switch(value: &str) -> Result<bool, String> {
    parse::<bool>(value).map_err(|_| "a switch takes true or false".to_string())
}

/// The one dataset source: a second one is refused, as the command line's
/// `--input-file`, `--public-dataset` and `--bench` exclude each other.
fn source(spec: &mut RunSpec, new: DatasetSource) -> Result<(), String> {
    let name = |s: &DatasetSource| match s {
        DatasetSource::InputFile(_) => "--input-file",
        DatasetSource::PublicDataset(_) => "--public-dataset",
        DatasetSource::Bench(_) => "--bench",
        DatasetSource::Synthetic => "--isl",
        DatasetSource::InputRows(_) => "--input-rows",
    };
    match &spec.dataset.source {
        Some(old) if name(old) != name(&new) => Err(format!(
            "cannot be used with {} (one dataset source per run)",
            name(old)
        )),
        _ => {
            spec.dataset.source = Some(new);
            Ok(())
        }
    }
}

/// `--limit N`: a whole number of rows, at least 1.
pub fn parse_limit(s: &str) -> Result<NonZeroUsize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err(
            "must be at least 1: it is the number of rows kept of each category \
                      (omit --limit to keep every row)"
                .to_string(),
        ),
        Ok(n) => Ok(NonZeroUsize::new(n).expect("not zero")),
        Err(e) => Err(format!("not a whole number of rows ({e})")),
    }
}

/// One of `names`, or an error listing them.
/// `--server-metrics-formats`: whether `csv` and `parquet` are among them
/// (each must be `json`, `csv` or `parquet`; AIPerf's list may be
/// space-separated too).
fn server_metrics_formats(value: &str) -> Result<(bool, bool), String> {
    let (mut csv, mut parquet) = (false, false);
    for format in value.split([',', ' ']).filter(|f| !f.is_empty()) {
        match format.to_ascii_lowercase().as_str() {
            "json" => {}
            "csv" => csv = true,
            "parquet" => parquet = true,
            other => return Err(format!("`{other}`: possible values: json, csv, parquet")),
        }
    }
    Ok((csv, parquet))
}

fn one_of(value: &str, names: &[&str]) -> Result<(), String> {
    if names.contains(&value) {
        Ok(())
    } else {
        Err(format!("possible values: {}", names.join(", ")))
    }
}

macro_rules! flag {
    ($long:literal, $kind:ident, |$s:ident, $v:ident| $body:expr) => {
        Flag::new(
            $long,
            FlagKind::$kind,
            |$s: &mut RunSpec, $v: &str| -> Result<(), String> {
                $body;
                #[allow(unreachable_code)]
                Ok(())
            },
        )
    };
}

/// The server and how each request is made.
const TARGET: &[Flag] = &[
    flag!("url", List, |s, v| s.target.url = v.to_string())
        .short('u')
        .value("URL")
        .help("Server URL: `host:port` or `http://host:port`, with or without `/v1`. Several (repeated, or comma-separated): servers of the same model and engine, conversations shared out round robin (every turn of one to the same server); each record names its server (`server_index`), and the server metrics are every server's together.")
        .default("localhost:8000"),
    flag!("url-strategy", One, |s, v| {
        one_of(v, &["round_robin"])?;
        s.target.url_strategy = v.to_string()
    })
    .value("STRATEGY")
    .default("round_robin")
    .possible(&["round_robin"])
    .help("How conversations are shared out among several `--url`s: `round_robin` (AIPerf's only strategy), in the order the URLs are given."),
    flag!("model", List, |s, v| s.target.model = Some(v.to_string()))
        .short('m')
        .aliases(&["model-names"])
        .value("MODEL")
        .help("Model name to send; asked of `GET /v1/models` when omitted. Several, comma-separated (LoRA adapters behind one server), share out the dataset's rows by `--model-selection-strategy`; each record names its model and the summary has the figures per model."),
    flag!("model-selection-strategy", One, |s, v| {
        one_of(v, &ModelStrategy::NAMES)?;
        s.target.model_selection_strategy = v.to_string()
    })
    .value("STRATEGY")
    .default("round_robin")
    .possible(&ModelStrategy::NAMES)
    .help("With several `--model`s: `round_robin` (row i asks for model i mod n, AIPerf's default) or `random` (each row's model drawn from `--random-seed`). Every turn of a conversation asks for its row's model."),
    flag!("endpoint-type", One, |s, v| s.target.endpoint_type = parse(v)?)
        .value("ENDPOINT_TYPE")
        .help("API to call: `chat` (/v1/chat/completions) or `completions` (/v1/completions).")
        .default("chat"),
    flag!("streaming", Switch, |s, v| s.target.streaming = switch(v)?)
        .help("Ask for streamed (SSE) responses; needed for TTFT and inter-token latency."),
    flag!("timeout", One, |s, v| s.target.timeout_s = parse(v)?)
        .value("TIMEOUT")
        .help("Per-request timeout in seconds.")
        .default("600"),
    flag!("api-key", One, |s, v| s.target.api_key = Some(Secret::new(v)))
        .value("API_KEY")
        .help("API key sent as a bearer token (never logged or stored).")
        .env("OPENAI_API_KEY"),
    flag!("header", Many, |s, v| s.target.headers.push(Secret::new(v)))
        .short('H')
        .value("HEADER")
        .help("Extra HTTP header `Name:value` (repeatable; values are never stored)."),
    flag!("ca-cert", Many, |s, v| s.target.ca_cert.push(v.into()))
        .value("FILE")
        .help("Extra CA certificate(s) to trust for HTTPS, as a PEM file (repeatable); `SSL_CERT_FILE` works too."),
    flag!("local-addr", Many, |s, v| {
        for addr in v.split(',') {
            s.target.local_addr.push(parse(addr)?);
        }
    })
    .value("ADDR")
    .help("Source address(es) for the connections, taken in turn (repeatable or a comma list, e.g. `127.0.0.2,127.0.0.3`): one client can then hold more connections to one server than one address has ephemeral ports."),
    flag!("http-client", One, |s, v| s.target.http_client = parse(v)?)
        .value("CLIENT")
        .default("lean")
        .help("The HTTP client of requests to a plain http:// server: `lean` (speedbench's HTTP/1.1 client, a few KiB per request in flight) or `hyper` (about 21 KiB more per connection). https:// always uses hyper."),
    flag!("connection-reuse-strategy", One, |s, v| s.target.connection_reuse = parse(v)?)
        .value("STRATEGY")
        .default("pooled")
        .possible(&ConnectionReuse::NAMES)
        .help("How connections are reused (AIPerf's): `pooled` (kept alive, any request takes any idle one), `never` (a new connection per request, closed after it) or `sticky-user-sessions` (one connection per conversation, kept across its turns and closed after the last: a sticky load balancer keeps the conversation on one replica)."),
    flag!("max-response-bytes", One, |s, v| s.target.max_response_bytes = parse(v)?)
        .value("BYTES")
        .default("33554432")
        .help("The most bytes kept of one non-streamed response body, and of one line or event of a stream (default 32 MiB); a response past it is a failed request naming the cap."),
    flag!("engine", One, |s, v| s.target.engine = parse(v)?)
        .value("ENGINE")
        .default("auto")
        .help("The engine behind the server: `auto` (found from what it answers: `/v1/models`, `/get_server_info`, `/props`, the metric names), or `vllm`, `sglang`, `trtllm`, `llamacpp`, `nim`, `openai`. It decides what each request asks for (SGLang's per-request acceptance) and which metrics endpoints are scraped (docs/engines.md)."),
    flag!("no-preflight", Switch, |s, v| s.target.preflight = !switch(v)?)
        .env("SPEEDBENCH_NO_PREFLIGHT")
        .help("Skip the preflight: one small request before the run, to check that the server reports acceptance per request and say what to change when it does not (`SPEEDBENCH_NO_PREFLIGHT=true` too, e.g. for every run of a script)."),
    flag!("osl", One, |s, v| s.sampling.osl = Some(parse(v)?))
        .aliases(&["output-tokens-mean"])
        .value("OSL")
        .help("Output length cap, sent as `max_tokens`. With `--isl`, the output length itself: each request asks for exactly it (`ignore_eos`), drawn per prompt with `--osl-stddev`."),
    flag!("force-min-tokens", Switch, |s, v| s.sampling.force_min_tokens = switch(v)?)
        .help("Send each row's own output length (a trace's `output_length`) as `min_tokens` beside its `max_tokens`, so that the server writes exactly that many tokens (AIPerf's; vLLM, SGLang and TensorRT-LLM honour `min_tokens`). Rows without an output length are sent as without it."),
    flag!("osl-stddev", One, |s, v| s.dataset.synthetic.osl_stddev = parse(v)?)
        .aliases(&["output-tokens-stddev"])
        .value("TOKENS")
        .default("0")
        .help("With `--isl` and `--osl`: the output lengths' standard deviation (normal, rounded, at least 1)."),
    flag!("extra-inputs", Many, |s, v| s.sampling.extra_inputs.push(v.to_string()))
        .value("EXTRA_INPUTS")
        .help("Extra request fields: `key:value` pairs or JSON objects (e.g. `temperature:0`)."),
];

/// The rows sent.
const DATASET: &[Flag] = &[
    flag!("input-file", One, |s, v| source(s, DatasetSource::InputFile(PathBuf::from(v)))?)
        .value("INPUT_FILE")
        .help("SPEED-Bench-shaped JSONL rows (`question_id`, `category`, `messages` or `turns`)."),
    flag!("input-rows", One, |s, v| source(s, DatasetSource::InputRows(v.to_string()))?)
        .value("JSON")
        .help("The rows themselves: a JSON array of the objects an input file holds one per line (`text`, `turns`, `messages`, ...); an AIPerf config's inline `records`."),
    flag!("public-dataset", One, |s, v| source(s, DatasetSource::PublicDataset(v.to_string()))?)
        .value("NAME")
        .help("A registered dataset (`speedbench datasets` lists them), fetched from the Hugging Face Hub and cached; SPEED-Bench placeholders are resolved first."),
    flag!("bench", One, |s, v| {
        one_of(v, &SPEED_BENCH_CONFIGS)?;
        source(s, DatasetSource::Bench(v.to_string()))?
    })
    .value("CONFIG")
    .possible(&SPEED_BENCH_CONFIGS)
    .help("A whole SPEED-Bench config, as llama.cpp's speed_bench.py names it: shorthand for `--public-dataset speed_bench_CONFIG` (the same cache, resolution and `--dataset-cache`). In speed_bench.py's vocabulary, speed_bench.py's defaults apply to the flags not given: --url localhost:8080, --osl 4096, --extra-inputs '{\"temperature\":0}', --timeout 600."),
    flag!("isl", One, |s, v| {
        source(s, DatasetSource::Synthetic)?;
        s.dataset.synthetic.isl = Some(parse(v)?)
    })
    .aliases(&["synthetic-input-tokens-mean"])
    .value("TOKENS")
    .help("Synthetic prompts of this many tokens (AIPerf's `--isl`), cut from a fixed corpus and counted by the server's own `/tokenize` (vLLM, SGLang, llama.cpp) or `--tokenizer`'s; with `--osl`, outputs of exactly that length."),
    flag!("tokenizer", One, |s, v| s.dataset.synthetic.tokenizer = Some(PathBuf::from(v)))
        .value("PATH")
        .help("The model's Hugging Face `tokenizer.json` (or a directory holding it) that counts synthetic and trace prompts' tokens, for a server without `/tokenize` (TensorRT-LLM, NIM). Never downloaded: a Hub name is refused when prompts are built; unread (a note says so) where none are. The run's files record which counted."),
    flag!("isl-stddev", One, |s, v| s.dataset.synthetic.isl_stddev = parse(v)?)
        .aliases(&["synthetic-input-tokens-stddev"])
        .value("TOKENS")
        .default("0")
        .help("With `--isl`: the prompt lengths' standard deviation (normal, rounded, at least 1)."),
    flag!("isl-block-size", One, |s, v| s.dataset.synthetic.block_size = parse(v)?)
        .value("TOKENS")
        .default("512")
        .help("Tokens per `hash_ids` block of a trace row given by `input_length` (AIPerf's): rows naming the same id share that block's text, so a prefix cache sees the trace's reuse."),
    flag!("isl-distribution", One, |s, v| {
        source(s, DatasetSource::Synthetic)?;
        s.dataset.synthetic.isl_distribution = Some(v.to_string())
    })
    .value("JSON")
    .help("Synthetic prompts whose lengths follow a distribution in AIPerf's forms, as JSON: `{\"mean\": 512, \"median\": 400}` (log-normal), `{\"peaks\": [{\"mean\": 256, \"stddev\": 30, \"weight\": 70}, ...]}` (a weighted mixture), `{\"points\": [{\"value\": 128, \"weight\": 40}, ...]}`, any with `min`/`max`; instead of --isl/--isl-stddev."),
    flag!("sequence-distribution", One, |s, v| {
        source(s, DatasetSource::Synthetic)?;
        s.dataset.synthetic.sequence_distribution = Some(v.to_string())
    })
    .aliases(&["seq-dist"])
    .value("PAIRS")
    .help("Synthetic prompts whose input and output lengths are drawn together (AIPerf's): `256,128:40;512|20,256|10:60` is 40 % of 256 in and 128 out, 60 % of 512 ± 20 in and 256 ± 10 out (percentages adding up to 100); also `[(256,128):40,...]` or JSON `{\"pairs\": [{\"isl\", \"isl_stddev\", \"osl\", \"osl_stddev\", \"prob\"}]}`. Instead of --isl and --osl; outputs forced as with them."),
    flag!("osl-distribution", One, |s, v| s.dataset.synthetic.osl_distribution = Some(v.to_string()))
        .value("JSON")
        .help("With synthetic prompts: the output lengths (forced, as --osl) drawn from a distribution in --isl-distribution's forms; instead of --osl/--osl-stddev."),
    flag!("conversation-turn-mean", One, |s, v| s.dataset.synthetic.turn_mean = parse(v)?)
        .aliases(&["session-turns-mean"])
        .value("TURNS")
        .default("1")
        .help("With `--isl`: user turns per synthetic conversation (normal around this, rounded, at least 1; AIPerf's). Each turn is a prompt of its own length asking for its own output length; later turns carry the conversation so far, replies included."),
    flag!("conversation-turn-stddev", One, |s, v| s.dataset.synthetic.turn_stddev = parse(v)?)
        .aliases(&["session-turns-stddev"])
        .value("TURNS")
        .default("0")
        .help("With `--conversation-turn-mean`: the turn counts' standard deviation."),
    flag!("num-prefix-prompts", One, |s, v| s.dataset.synthetic.prefix_prompts = parse(v)?)
        .aliases(&["prefix-prompt-pool-size", "prompt-prefix-pool-size"])
        .value("N")
        .default("0")
        .help("With synthetic prompts: a pool of this many shared prefixes (AIPerf's), one drawn per conversation and put before its first prompt, on top of its --isl, so a prefix cache has something to find."),
    flag!("prefix-prompt-length", One, |s, v| s.dataset.synthetic.prefix_length = parse(v)?)
        .aliases(&["prompt-prefix-length"])
        .value("TOKENS")
        .default("0")
        .help("With --num-prefix-prompts: each prefix's length, tokens (counted as the prompts are)."),
    flag!("synthesis-speedup-ratio", One, |s, v| s.dataset.synthesis.speedup_ratio = parse(v)?)
        .value("X")
        .default("1")
        .help("Replay a trace X times as fast: each row's timestamp divided by X (AIPerf's trace synthesis, as every --synthesis-* flag)."),
    flag!("synthesis-prefix-len-multiplier", One, |s, v| s.dataset.synthesis.prefix_len_multiplier = parse(v)?)
        .value("X")
        .default("1")
        .help("A trace row's shared prefix (its leading `hash_ids` other rows name too) stretched or cut to X times its blocks."),
    flag!("synthesis-prefix-root-multiplier", One, |s, v| s.dataset.synthesis.prefix_root_multiplier = parse(v)?)
        .value("N")
        .default("1")
        .help("Spread the trace's rows over N copies of its prefix trees (drawn per row from --random-seed): N times the distinct prefixes for a cache to hold."),
    flag!("synthesis-prompt-len-multiplier", One, |s, v| s.dataset.synthesis.prompt_len_multiplier = parse(v)?)
        .value("X")
        .default("1")
        .help("A trace row's own (unshared) length multiplied by X, onto new blocks."),
    flag!("synthesis-output-len-multiplier", One, |s, v| s.dataset.synthesis.output_len_multiplier = parse(v)?)
        .value("X")
        .default("1")
        .help("A trace row's output length multiplied by X (rounded, at least 1)."),
    flag!("synthesis-max-isl", One, |s, v| s.dataset.synthesis.max_isl = Some(parse(v)?))
        .value("TOKENS")
        .help("Trace rows given by a longer `input_length` are not sent (the run says how many); synthesized lengths are clamped to it."),
    flag!("synthesis-max-osl", One, |s, v| s.dataset.synthesis.max_osl = Some(parse(v)?))
        .value("TOKENS")
        .help("Trace rows' output lengths capped at this many tokens (the run says how many)."),
    flag!("num-dataset-entries", One, |s, v| s.dataset.synthetic.entries = parse(v)?)
        .value("N")
        .default("100")
        .help("With `--isl`: how many distinct prompts are built (requests past them reuse them in order)."),
    flag!("dataset-cache", One, |s, v| s.dataset.dataset_cache = Some(v.into()))
        .value("DIR")
        .help("Dataset cache (default `.cache/speedbench/datasets`), or a bundle from `cargo xtask prestage` (its checksums are verified)."),
    flag!("resolver", One, |s, v| {
        one_of(v, &Resolver::NAMES)?;
        s.dataset.resolver = parse(v)?
    })
    .value("RESOLVER")
    .default("auto")
    .possible(&Resolver::NAMES)
    .help("`auto`: natively when every placeholder's source is rebuilt exactly, else by running the upstream prepare step (NeMo-Skills' prepare.py, pinned by sha256; needs Python 3 with datasets, pandas, numpy, tiktoken). `native`: never run Python. `upstream`: always the prepare step."),
    flag!("python", One, |s, v| s.dataset.python = Some(v.into()))
        .value("PATH")
        .env("SPEEDBENCH_PYTHON")
        .help("The Python interpreter that runs the prepare step (default `python3`)."),
    flag!("prepare-script", One, |s, v| s.dataset.prepare_script = Some(v.into()))
        .value("PATH")
        .env("SPEEDBENCH_PREPARE_SCRIPT")
        .help("Run this local prepare script instead of downloading the pinned one (it is run as given; its sha256 is logged)."),
    flag!("category", Many, |s, v| s.dataset.category.extend(v.split(',').map(str::to_string)))
        .value("CATEGORY")
        .help("Keep only rows of these categories (repeat or separate with commas); `all` (alone) keeps every row, as when it is omitted."),
    flag!("limit", One, |s, v| s.dataset.limit = Some(parse_limit(v)?))
        .value("N")
        .help("At most N rows (samples) of each category: the first N in file order, after resolution and --category; rows without a category count as one group, multi-turn rows are kept whole. The run is then sized over the kept rows (--num-conversations, --request-count)."),
];

/// How many requests, at what concurrency or rate.
const LOAD: &[Flag] = &[
    flag!("concurrency", One, |s, v| s.load.concurrency = parse(v)?)
        .default("1")
        .value("CONCURRENCY")
        .help("Requests in flight at once."),
    flag!("request-count", One, |s, v| s.load.request_count = Some(parse(v)?))
        .value("REQUEST_COUNT")
        .help("Profiled requests (turns) to send; conversations recycle to reach it."),
    flag!("num-conversations", One, |s, v| s.load.num_conversations = Some(parse(v)?))
        .value("NUM_CONVERSATIONS")
        .help("Conversations to run, every turn each; default: every row once."),
    flag!("warmup-request-count", One, |s, v| s.load.warmup_request_count = parse(v)?)
        .default("0")
        .value("WARMUP_REQUEST_COUNT")
        .help("Requests sent first and excluded from every statistic."),
    flag!("warmup-concurrency", One, |s, v| s.load.warmup_concurrency = Some(parse(v)?))
        .value("WARMUP_CONCURRENCY")
        .help("Warm up closed-loop at this many requests in flight, whatever the measured load (AIPerf's warmup phase of `type: concurrency`); default: the measured load's shape."),
    flag!("warmup-duration", One, |s, v| s.load.warmup_duration_s = Some(positive(v)?))
        .value("SECONDS")
        .help("Warm up for at most this long (with --warmup-request-count, whichever ends first): no warmup request starts after it, those in flight finish (see --warmup-grace-period). Without a count, the dataset's rows recycle until then."),
    flag!("num-warmup-sessions", One, |s, v| s.load.warmup_sessions = Some(parse(v)?))
        .value("N")
        .help("Warm up with N conversations, every turn of each (AIPerf's; with --warmup-request-count or --warmup-duration, whichever limit comes first)."),
    flag!("warmup-grace-period", One, |s, v| s.load.warmup_grace_period_s = Some(non_negative(v)?))
        .value("SECONDS")
        .help("With --warmup-duration: how long warmup requests still in flight when it ends may run before they are cancelled (recorded as cancelled warmup requests); default: wait for every one, as AIPerf does."),
    flag!("request-rate", One, |s, v| s.load.request_rate = Some(parse(v)?))
        .value("REQUEST_RATE")
        .help("Open-loop load: conversation starts per second (requests per second for single-turn rows); `--concurrency` is then unused."),
    flag!("arrival", One, |s, v| s.load.arrival = parse(v)?)
        .aliases(&["request-rate-mode"])
        .default("poisson")
        .value("ARRIVAL")
        .help("How request-rate arrivals are spaced: `poisson` (exponential gaps), `constant` (equal gaps of 1/rate) or `gamma` (see --arrival-smoothness)."),
    flag!("arrival-smoothness", One, |s, v| s.load.arrival_smoothness = Some(parse(v)?))
        .aliases(&["vllm-burstiness"])
        .value("SMOOTHNESS")
        .help("Gamma arrivals of this shape (sets --arrival gamma): 1.0 is Poisson, below 1 burstier, above 1 more regular; vLLM's --burstiness, same value, same spacing."),
    flag!("request-rate-ramp-duration", One, |s, v| s.load.request_rate_ramp_duration_s = Some(parse(v)?))
        .value("SECONDS")
        .help("Rise linearly to --request-rate over this many seconds (from one 0.1 s step's share of it, as AIPerf), warmup included."),
    flag!("request-rate-series", One, |s, v| s.load.request_rate_series = Some(PathBuf::from(v)))
        .value("FILE")
        .help("A JSON file of rate points, `[{\"time_s\": 0, \"qps\": 2}, ...]` or `{\"points\": [...]}` (AIPerf's): the measured phase's rate, linear between points, the last held; times from the end of any ramp. Two points at one time make a step."),
    flag!("ramp-up-strategy", One, |s, v| s.load.ramp_up_strategy = Some(parse(v)?))
        .value("STRATEGY")
        .help("vLLM's ramp over the requests: `linear` or `exponential` from --ramp-up-start-rps to --ramp-up-end-rps, request i of n spaced at the rate of i/(n-1); replaces --request-rate."),
    flag!("ramp-up-start-rps", One, |s, v| s.load.ramp_up_start_rps = Some(parse(v)?))
        .value("RPS")
        .help("With --ramp-up-strategy: the first request's rate."),
    flag!("ramp-up-end-rps", One, |s, v| s.load.ramp_up_end_rps = Some(parse(v)?))
        .value("RPS")
        .help("With --ramp-up-strategy: the last request's rate (and the warmup's)."),
    flag!("concurrency-ramp-duration", One, |s, v| s.load.concurrency_ramp_duration_s = Some(parse(v)?))
        .value("SECONDS")
        .help("Open the concurrency (or --max-concurrency's slots) one at a time, from 1 to the target evenly over this many seconds (AIPerf's)."),
    flag!("warmup-concurrency-ramp-duration", One, |s, v| s.load.warmup_concurrency_ramp_duration_s = Some(parse(v)?))
        .value("SECONDS")
        .help("The warmup's own --concurrency-ramp-duration (default: the measured phase's)."),
    flag!("prefill-concurrency", One, |s, v| s.load.prefill_concurrency = Some(parse(v)?))
        .value("N")
        .help("At most N requests waiting for their first output at once (AIPerf's): a request takes a slot before it is sent and gives it back at its first streamed output (or its end); the wait for a slot is not part of its latency. Limits concurrent prefills of long prompts."),
    flag!("prefill-concurrency-ramp-duration", One, |s, v| s.load.prefill_concurrency_ramp_duration_s = Some(parse(v)?))
        .value("SECONDS")
        .help("With --prefill-concurrency: open its slots one at a time, from 1 to N evenly over this many seconds."),
    flag!("warmup-prefill-concurrency", One, |s, v| s.load.warmup_prefill_concurrency = Some(parse(v)?))
        .value("N")
        .help("The warmup's own --prefill-concurrency (default: the measured phase's)."),
    flag!("warmup-prefill-concurrency-ramp-duration", One, |s, v| s.load.warmup_prefill_concurrency_ramp_duration_s = Some(parse(v)?))
        .value("SECONDS")
        .help("The warmup's own --prefill-concurrency-ramp-duration."),
    flag!("request-cancellation-rate", One, |s, v| s.load.request_cancellation_rate = Some(parse(v)?))
        .value("PERCENT")
        .help("Cancel this percentage (0-100] of the measured requests on purpose, --request-cancellation-delay after sending: recorded as `client_cancelled`, counted apart from failures, out of every latency figure."),
    flag!("user-centric-rate", One, |s, v| s.load.user_centric_rate = Some(parse(v)?))
        .value("QPS")
        .help("User-centric pacing (AIPerf's, for prefix-cache tests): --num-users users share this many requests per second, each sending its conversation's turns num-users/QPS seconds apart (or at its reply, if later); the run opens mid-flight, users at every stage of their sessions, and a new user joins as one leaves. Replaces --concurrency and --request-rate; the turn gap replaces --session-turn-delay-*."),
    flag!("num-users", One, |s, v| s.load.num_users = Some(parse(v)?))
        .value("N")
        .help("With --user-centric-rate: the users at once."),
    flag!("warmup-user-centric-rate", One, |s, v| s.load.warmup_user_centric_rate = Some(parse(v)?))
        .value("QPS")
        .help("The warmup's own user-centric rate (with --warmup-num-users); without it a warmup follows --user-centric-rate."),
    flag!("warmup-num-users", One, |s, v| s.load.warmup_num_users = Some(parse(v)?))
        .value("N")
        .help("With --warmup-user-centric-rate: the warmup's users."),
    flag!("session-turn-delay-mean", One, |s, v| s.load.session_turn_delay_mean_ms = parse(v)?)
        .aliases(&["conversation-turn-delay-mean"])
        .default("0")
        .value("MS")
        .help("Think time between a reply and the conversation's next turn, milliseconds: normal around this mean (AIPerf's)."),
    flag!("session-turn-delay-stddev", One, |s, v| s.load.session_turn_delay_stddev_ms = parse(v)?)
        .aliases(&["conversation-turn-delay-stddev"])
        .default("0")
        .value("MS")
        .help("The think time's standard deviation, milliseconds (never below 0)."),
    flag!("session-delay-ratio", One, |s, v| s.load.session_delay_ratio = parse(v)?)
        .aliases(&["conversation-turn-delay-ratio"])
        .default("1")
        .value("RATIO")
        .help("Scales the think time's mean and deviation (0: none)."),
    flag!("fixed-schedule", Switch, |s, v| s.load.fixed_schedule = switch(v)?)
        .help("Replay the input's rows at their `timestamp`s (milliseconds; AIPerf's trace rows, `text_input` or turns): each row once, in time order, lateness recorded."),
    flag!("fixed-schedule-auto-offset", Switch, |s, v| s.load.fixed_schedule_auto_offset = switch(v)?)
        .help("With --fixed-schedule: the first row's timestamp is the start (else timestamps are offsets from it)."),
    flag!("fixed-schedule-start-offset", One, |s, v| s.load.fixed_schedule_start_offset_ms = Some(parse(v)?))
        .value("MS")
        .help("With --fixed-schedule: rows before this trace time are not sent (said), and it is the start."),
    flag!("fixed-schedule-end-offset", One, |s, v| s.load.fixed_schedule_end_offset_ms = Some(parse(v)?))
        .value("MS")
        .help("With --fixed-schedule: rows after this trace time are not sent (said)."),
    flag!("request-cancellation-delay", One, |s, v| s.load.request_cancellation_delay_s = parse(v)?)
        .default("0")
        .value("SECONDS")
        .help("With --request-cancellation-rate: seconds after sending a chosen request is dropped (0: at once)."),
    flag!("random-seed", One, |s, v| s.load.random_seed = parse(v)?)
        .default("0")
        .value("RANDOM_SEED")
        .help("Seed of the arrival schedule, of synthetic prompts and of the dataset sampling."),
    flag!("dataset-sampling-strategy", One, |s, v| {
        s.load.dataset_sampling = DatasetSampling::parse(v)
            .ok_or_else(|| "possible values: sequential, shuffle, random".to_string())?
    })
    .value("STRATEGY")
    .default("sequential")
    .possible(&["sequential", "shuffle", "random"])
    .help("Which conversation each session sends (AIPerf's): `sequential`, the rows in order and again from the first; `shuffle`, every pass over the rows in a fresh order (each row once before any again); `random`, each drawn uniformly with replacement. Seeded by --random-seed; a fixed schedule and a shard take rows in order."),
    flag!("max-concurrency", One, |s, v| s.load.max_concurrency = Some(parse(v)?))
        .value("MAX_CONCURRENCY")
        .help("With --request-rate: at most this many conversations in flight."),
    flag!("benchmark-duration", One, |s, v| s.load.benchmark_duration_s = Some(parse(v)?))
        .value("SECONDS")
        .help("Stop sending new requests after this many seconds of profiling."),
    flag!("benchmark-grace-period", One, |s, v| s.load.benchmark_grace_period_s = parse(v)?)
        .value("SECONDS")
        .default("30")
        .help("After --benchmark-duration, seconds in-flight requests may still run."),
    flag!("max-error-rate", One, |s, v| s.load.max_error_rate = Some(parse(v)?))
        .value("RATE")
        .help("Fail the run (exit 1, outcome `failed`) when more than this share of its requests failed, 0.0-1.0; by default only when none succeeded."),
];

/// Where the run's files go, the shard and the server-metrics scrape.
const OUTPUT: &[Flag] = &[
    flag!("output-artifact-dir", One, |s, v| s.outputs.output_artifact_dir = Some(v.into()))
        .value("OUTPUT_ARTIFACT_DIR")
        .help("Directory for `records.parquet`, `run.json` and `summary.json`, or a store URL (`s3://bucket/prefix`, `gs://...`, `az://...`; credentials from the store's standard environment variables): the run is staged locally, its records stream up as it goes and the rest follows at the end (docs/distributed.md)."),
    flag!("staging-dir", One, |s, v| s.outputs.staging_dir = Some(v.into()))
        .value("DIR")
        .help("With a store URL as --output-artifact-dir: the local directory the run is staged in (kept); by default a new temporary directory, removed once the upload succeeded."),
    flag!("output", One, |s, v| s.outputs.output = Some(v.into()))
        .aliases(&["speed-bench-py-output"])
        .value("FILE.json")
        .help("Also write llama.cpp speed_bench.py's `--output` JSON (not `report`'s CSV: a .csv name is refused; config, per-category summary, per-sample results; docs/speed-bench-py.md) to this file, atomically; an existing file is refused unless --overwrite. The run directory is written as well, the records behind every figure of the file (--output-artifact-dir; by default artifacts/<dataset>-<run id>, named at the end of the run)."),
    flag!("overwrite", Switch, |s, v| s.outputs.overwrite = switch(v)?)
        .help("Replace a run already in --output-artifact-dir (refused otherwise)."),
    flag!("export-level", One, |s, v| s.outputs.export_level = parse(v)?)
        .value("LEVEL")
        .default("records")
        .help("Files kept, as AIPerf's --export-level: `summary` (run.json, summary.json and the scrape; no records.parquet), `records` (also records.parquet) or `raw` (also raw_responses.jsonl: every response body, credentials scrubbed)."),
    flag!("export-http-trace", Switch, |s, v| s.outputs.export_http_trace = switch(v)?)
        .help("Also write http_trace.jsonl (AIPerf's --export-http-trace): one JSON object per request the lean HTTP/1.1 client carried, with its connection's phases and addresses, the wall-clock moments of its send and receive (AIPerf's field names), the response's headers (credentials scrubbed) and each body read as [arrival ns, bytes]. The per-request phases are in records.parquet either way (`http_*` columns)."),
    flag!("run-id", One, |s, v| s.outputs.run_id = Some(v.to_string()))
        .value("RUN_ID")
        .help("Run identifier; generated when omitted."),
    flag!("user-files", One, |s, v| s.outputs.user_files = Some(v.to_string()))
        .value("JSON")
        .help("Files rendered with Jinja2 into the run directory before the first request (AIPerf's artifacts.user_files): a JSON array of {\"path\", \"format\": json|yaml|text, \"content\"}, or {\"files\": [...], \"variables\": {...}}; the templates see the variables and the run's epoch, job_name, namespace, model, endpoint_url and artifact_dir."),
    flag!("shard", One, |s, v| s.shard.shard = Some(parse(v)?))
        .value("I/N")
        .help("Run shard I of N (I from 0) of the work the other flags describe: conversations k with k mod N == I, concurrency and counts divided, request-rate arrivals thinned. Every shard needs the same --run-id; `speedbench report` merges them (docs/distributed.md). Wins over --shard-count and --shard-index."),
    flag!("shard-count", One, |s, v| s.shard.shard_count = Some(parse(v)?))
        .value("N")
        .env("SPEEDBENCH_SHARD_COUNT")
        .help("The shard count N, for a shard whose index comes from --shard-index or JOB_COMPLETION_INDEX (a Kubernetes indexed Job)."),
    flag!("shard-index", One, |s, v| s.shard.shard_index = Some(parse(v)?))
        .value("I")
        .env("JOB_COMPLETION_INDEX")
        .help("With --shard-count: this shard's index (default: JOB_COMPLETION_INDEX)."),
    flag!("start-at", One, |s, v| s.shard.start_at = Some(parse(v)?))
        .value("UNIX_TIME")
        .help("Start the measured phase (after any warmup) at this Unix time, in seconds (fractions allowed), so that every shard starts together; run.json records the planned and the measured start."),
    flag!("start-after-barrier", One, |s, v| s.shard.start_after_barrier = Some(v.into()))
        .value("FILE")
        .help("Start the measured phase (after any warmup) once FILE exists (on a filesystem every shard sees); the planned start is its modification time. A URL barrier is not supported."),
    flag!("server-metrics", Many, |s, v| s.scrape.server_metrics.push(v.to_string()))
        .value("URL")
        .help("Prometheus endpoints to scrape besides `{url}/metrics` (NIM: `http://host:8000/v1/metrics`); written to server_metrics_export.json."),
    flag!("no-server-metrics", Switch, |s, v| s.scrape.enabled = !switch(v)?)
        .help("Do not scrape server metrics."),
    flag!("gpu-telemetry", Many, |s, v| s.scrape.gpu_telemetry.push(v.to_string()))
        .value("URL")
        .help("NVIDIA DCGM exporter to scrape during the run (`http://gpu-host:9400/metrics`; repeat for several hosts): each GPU's power, utilisation and memory, and the energy per output token, in the summary, summary.json and `compare`. Checked before the first request."),
    flag!("server-metrics-formats", List, |s, v| {
        (s.scrape.csv, s.scrape.parquet) = server_metrics_formats(v)?
    })
        .value("FORMATS")
        .default("json")
        .help("Files of the server-metrics scrape, comma-separated: `json` (server_metrics_export.json, always written: the report reads it) and `csv` (server_metrics_export.csv, in AIPerf's CSV layout: a section per metric type, a column per label, counters' rates per slice with --slice-duration). `parquet` (server_metrics_export.parquet, AIPerf's layout of the raw samples: a row per series per scrape in the profiling window, gauges as read, counters and histograms as their increase since it opened, a histogram's buckets a row each)."),
    flag!("server-metrics-shutdown-delay", One, |s, v| s.scrape.shutdown_delay_s = parse(v)?)
        .value("SECONDS")
        .default("2")
        .help("At most this many seconds of scraping after the last request, for late counter updates; it stops once two scrapes in a row show no change."),
];

/// The figures asked of the run beyond the records' own.
const FIGURES: &[Flag] = &[
    flag!("goodput", Many, |s, v| add_slos(s, v)?)
        .value("METRIC:VALUE ...")
        .help("Service-level objectives, AIPerf's metric tags (ms for latencies): `time_to_first_token:200 inter_token_latency:50 request_latency:5000 output_token_throughput_per_user:20` (vLLM's `ttft`, `tpot`, `e2el` too). A request that succeeded and met every one is good: goodput (good requests/s) and the good share of the requests sent go into the summary, `compare` and `tune`."),
    flag!("slice-duration", One, |s, v| s.figures.slice_duration_s = Some(positive(v)?))
        .value("SECONDS")
        .help("Also report the run in consecutive slices of this many seconds (throughput, latency, acceptance per slice) in summary.json and the HTML report: warm-up, saturation and drain."),
    flag!("show-trace-timing", Switch, |s, v| s.figures.show_trace_timing = switch(v)?)
        .help("Also report each request's HTTP phases (AIPerf's HTTP Trace Timing: blocked, DNS, connecting, sending, waiting/TTFB, receiving, connection reuse, bytes and reads each way) in the summary and summary.json. records.parquet keeps the phases of every request whether or not this is given (`http_*` columns; the lean HTTP/1.1 client times them, so not over https:// or with --http-client hyper)."),
    flag!("steady-state-threshold", One, |s, v| s.figures.steady_state_threshold = share(v)?)
        .value("SHARE")
        .default("0.95")
        .help("A closed loop's steady state is the window from the first moment this share of --concurrency is in flight to the last moment it falls below it; its figures are reported beside the whole run's."),
    flag!("steady-state-min-window", One, |s, v| s.figures.steady_state_min_window_s = non_negative(v)?)
        .value("SECONDS")
        .default("1")
        .help("A steady state shorter than this is not reported (the summary says why)."),
];

/// The measured phase repeated, for run-to-run variance.
const REPEAT: &[Flag] = &[
    flag!("num-profile-runs", One, |s, v| s.repeat.num_profile_runs = profile_runs(v)?)
        .value("N")
        .default("1")
        .help("Run the measured phase N times (1-10) over the same prompts in the same order, each run in OUTPUT/profile_runs/run_000K, then OUTPUT/aggregate.json: each headline figure's mean, std, coefficient of variation and a Student's t interval across the runs."),
    flag!("profile-run-cooldown-seconds", One, |s, v| s.repeat.cooldown_s = non_negative(v)?)
        .value("SECONDS")
        .default("0")
        .help("With --num-profile-runs: seconds to wait between two runs."),
    flag!("confidence-level", One, |s, v| s.repeat.confidence_level = confidence(v)?)
        .value("LEVEL")
        .default("0.95")
        .help("With --num-profile-runs: the confidence level of the across-run intervals, strictly between 0 and 1."),
    flag!("no-profile-run-disable-warmup-after-first", Switch, |s, v| s.repeat.warmup_every_run = switch(v)?)
        .help("With --num-profile-runs: warm up before every run, not only the first."),
];

/// `--num-profile-runs`: 1 to 10.
fn profile_runs(value: &str) -> Result<usize, String> {
    let max = crate::spec::RepeatSpec::MAX_RUNS;
    match parse::<usize>(value) {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "must be a whole number of runs from 1 to {max} (1: one run)"
        )),
    }
}

/// A confidence level strictly between 0 and 1.
fn confidence(value: &str) -> Result<f64, String> {
    match parse::<f64>(value)? {
        v if v > 0.0 && v < 1.0 => Ok(v),
        _ => Err("must lie strictly between 0 and 1 (0.95: 95 %)".into()),
    }
}

/// Adds `--goodput`'s SLOs; a metric given twice is refused.
fn add_slos(spec: &mut RunSpec, value: &str) -> Result<(), String> {
    let slos: speedbench_metrics::Slos = value.parse()?;
    for slo in slos.0 {
        spec.figures.goodput.push(slo)?;
    }
    Ok(())
}

/// A number of seconds above 0.
fn positive(value: &str) -> Result<f64, String> {
    match parse::<f64>(value)? {
        v if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err("must be a number of seconds above 0".into()),
    }
}

/// A number of seconds, 0 or more.
fn non_negative(value: &str) -> Result<f64, String> {
    match parse::<f64>(value)? {
        v if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err("must be a number of seconds, 0 or more".into()),
    }
}

/// A share above 0, at most 1.
fn share(value: &str) -> Result<f64, String> {
    match parse::<f64>(value)? {
        v if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err("must be a share above 0 and at most 1 (0.95: 95 %)".into()),
    }
}

/// Every flag of a run under its `--help` heading.
pub const GROUPS: [(&str, &[Flag]); 6] = [
    ("Server and requests", TARGET),
    ("Dataset", DATASET),
    ("Load", LOAD),
    ("Output, shards and server metrics", OUTPUT),
    ("Figures", FIGURES),
    ("Repeated runs", REPEAT),
];

/// Every flag that sets a field of a [`RunSpec`].
pub fn all() -> impl Iterator<Item = &'static Flag> {
    GROUPS.into_iter().flat_map(|(_, flags)| flags.iter())
}

/// The flag a name (long name or alias, dashes or underscores) names.
pub fn find(name: &str) -> Option<&'static Flag> {
    all().find(|f| f.answers_to(name))
}

/// The flag name closest to a mistyped one, when one is close.
pub fn suggest(name: &str) -> Option<&'static str> {
    closest(name, all().map(|f| f.long))
}

/// The name of `names` closest to `name`, within a third of its length.
pub(crate) fn closest<'a>(name: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let name = normalize(name);
    names
        .map(|n| (speedbench_dataset::registry::edit_distance(&name, n), n))
        .filter(|(d, _)| *d <= name.len().max(4) / 3)
        .min()
        .map(|(_, n)| n)
}

/// Sets flag `name` to `value` in `spec`, as the command line would; an
/// unknown name is refused with the closest one.
pub fn set(spec: &mut RunSpec, name: &str, value: &str) -> Result<(), RunError> {
    match find(name) {
        Some(flag) => flag.apply(spec, value),
        None => Err(RunError::invalid(
            format!("--{}", normalize(name)),
            match suggest(name) {
                Some(s) => format!("not an option of `speedbench profile` (did you mean --{s}?)"),
                None => "not an option of `speedbench profile`".to_string(),
            },
        )),
    }
}

/// What llama.cpp's speed_bench.py sends (and where) when its user gives
/// no flag: the defaults of a `--bench` run, in speed_bench.py's
/// vocabulary. Without `--bench`, AIPerf's defaults hold (no sampling
/// fields, no `max_tokens`, `localhost:8000`).
pub const SPEED_BENCH_PY_DEFAULTS: [(&str, &str); 4] = [
    ("url", "localhost:8080"),
    ("osl", "4096"),
    ("extra-inputs", r#"{"temperature":0}"#),
    ("timeout", "600"),
];

impl RunSpec {
    /// For a `--bench` run, [`SPEED_BENCH_PY_DEFAULTS`] for each flag not
    /// in `given` (long names); the names set, in order. A run of another
    /// dataset source is left as it is.
    ///
    /// ```
    /// use std::collections::BTreeSet;
    /// use speedbench_run::RunSpec;
    ///
    /// let mut spec = RunSpec::default().with("bench", "qualitative")?;
    /// let given: BTreeSet<String> = ["bench".to_string(), "osl".to_string()].into();
    /// assert_eq!(spec.apply_speed_bench_py_defaults(&given), ["url", "extra-inputs", "timeout"]);
    /// assert_eq!(spec.target.url, "localhost:8080");
    /// assert_eq!(spec.sampling.extra_inputs, [r#"{"temperature":0}"#]);
    /// # Ok::<(), speedbench_run::RunError>(())
    /// ```
    pub fn apply_speed_bench_py_defaults(&mut self, given: &BTreeSet<String>) -> Vec<&'static str> {
        if !matches!(self.dataset.source, Some(DatasetSource::Bench(_))) {
            return Vec::new();
        }
        let mut set_now = Vec::new();
        for (name, value) in SPEED_BENCH_PY_DEFAULTS {
            if given.contains(name) {
                continue;
            }
            if name == "extra-inputs" {
                self.sampling.extra_inputs.clear();
            }
            set(self, name, value).expect("speed_bench.py's defaults are values of their flags");
            set_now.push(name);
        }
        set_now
    }

    /// This spec with flag `name` set to `value`, as the command line
    /// would set it: a builder in the flags' own words.
    ///
    /// ```
    /// use speedbench_run::RunSpec;
    ///
    /// let spec = RunSpec::default()
    ///     .with("url", "127.0.0.1:8000")?
    ///     .with("bench", "qualitative")?
    ///     .with("concurrency", "16")?
    ///     .with("streaming", "true")?;
    /// assert_eq!(spec.load.concurrency, 16);
    /// assert!(RunSpec::default().with("concurrency", "lots").is_err());
    /// # Ok::<(), speedbench_run::RunError>(())
    /// ```
    pub fn with(mut self, name: &str, value: &str) -> Result<RunSpec, RunError> {
        set(&mut self, name, value)?;
        Ok(self)
    }
}

/// The options of `speedbench report` a sweep file's `[report]` may set,
/// with how each takes its value (the report's values are checked by the
/// program that runs the report).
pub const REPORT_FLAGS: [(&str, FlagKind); 6] = [
    ("metric", FlagKind::One),
    ("source", FlagKind::One),
    ("format", FlagKind::One),
    ("output", FlagKind::One),
    ("html-output", FlagKind::One),
    ("label", FlagKind::Many),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_flag_sets_its_field_and_refuses_a_bad_value_by_name() {
        let mut spec = RunSpec::default();
        set(&mut spec, "max_concurrency", "8").unwrap();
        set(&mut spec, "request-rate-mode", "constant").unwrap();
        set(&mut spec, "no_preflight", "true").unwrap();
        set(&mut spec, "local_addr", "127.0.0.2,127.0.0.3").unwrap();
        set(&mut spec, "header", "X-A:1").unwrap();
        assert_eq!(spec.load.max_concurrency, Some(8));
        assert_eq!(spec.load.arrival, speedbench_client::Arrival::Constant);
        assert!(!spec.target.preflight);
        assert_eq!(spec.target.local_addr.len(), 2);
        assert_eq!(spec.target.headers.len(), 1);
        let e = set(&mut spec, "concurrency", "many")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("invalid value 'many' for '--concurrency': "),
            "{e}"
        );
        let e = set(&mut spec, "limit", "0").unwrap_err().to_string();
        assert!(e.contains("must be at least 1"), "{e}");
        let e = set(&mut spec, "bench", "nope").unwrap_err().to_string();
        assert!(e.contains("possible values: qualitative"), "{e}");
        let e = set(&mut spec, "concurency", "1").unwrap_err().to_string();
        assert!(e.contains("did you mean --concurrency?"), "{e}");
    }

    #[test]
    fn a_second_dataset_source_is_refused() {
        let mut spec = RunSpec::default();
        set(&mut spec, "input_file", "a.jsonl").unwrap();
        set(&mut spec, "input_file", "b.jsonl").unwrap();
        let e = set(&mut spec, "public_dataset", "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("cannot be used with --input-file"), "{e}");
    }

    #[test]
    fn every_default_is_the_specs_own() {
        for flag in all() {
            let mut spec = RunSpec::default();
            if let Some(default) = flag.default {
                flag.apply(&mut spec, default).unwrap();
                assert_eq!(
                    spec,
                    RunSpec::default(),
                    "--{} default {default}",
                    flag.long
                );
            }
            for value in flag.possible {
                flag.check(value)
                    .unwrap_or_else(|e| panic!("--{} {value}: {e}", flag.long));
            }
            assert!(!flag.help.is_empty(), "--{} has no help", flag.long);
            assert_eq!(
                flag.value_name.is_some(),
                flag.kind != FlagKind::Switch,
                "--{}: a placeholder for a value, none for a switch",
                flag.long
            );
        }
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = all()
            .flat_map(|f| std::iter::once(f.long).chain(f.aliases.iter().copied()))
            .collect();
        let count = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), count);
    }
}
