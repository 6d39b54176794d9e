//! The error type of this crate.

use std::path::PathBuf;

/// Everything that can stop a run before or while it starts.
///
/// A failing *request* is not an error of this type: it becomes a record
/// with an [`speedbench_record::ErrorKind`], and the run goes on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The server URL cannot be used.
    #[error("invalid server URL {url:?}: {message}")]
    InvalidUrl {
        /// The URL, with credentials removed.
        url: String,
        /// Why it cannot be used.
        message: String,
    },
    /// An `--extra-inputs` item cannot be parsed.
    #[error("invalid extra input {input:?}: {message}")]
    InvalidExtraInput {
        /// The offending item.
        input: String,
        /// Why it cannot be parsed.
        message: String,
    },
    /// A header name or value is not valid HTTP.
    #[error("invalid header {name:?}: {message}")]
    InvalidHeader {
        /// The header name.
        name: String,
        /// Why it is invalid.
        message: String,
    },
    /// An extra body field would replace one speedbench sets itself (the
    /// request sent would not be the one recorded).
    #[error(
        "invalid extra input {input:?}: `{}` is set by speedbench itself and cannot be overridden; it comes from {}",
        field.name(),
        field.set_by()
    )]
    OwnedField {
        /// The offending item.
        input: String,
        /// The field it would replace.
        field: OwnedField,
    },
    /// An `Authorization` header given together with an API key: one would
    /// silently replace the other.
    #[error(
        "the header {header} and the API key both set the Authorization header; give only one (the key is sent as `Authorization: Bearer KEY`)"
    )]
    AuthorizationTwice {
        /// The header's name as given.
        header: String,
    },
    /// The server URL names one endpoint while requests use another API.
    #[error(
        "the URL names the endpoint {} but requests use {}; use the {} API, or give the server URL without the endpoint path",
        named.path(),
        used.path(),
        named.name()
    )]
    EndpointMismatch {
        /// The API the URL's path names.
        named: crate::ApiKind,
        /// The API requests use.
        used: crate::ApiKind,
    },
    /// The load configuration is inconsistent.
    #[error("invalid load configuration: {0}")]
    InvalidLoad(String),
    /// More requests would be in flight at once than the process may open
    /// files (one socket each, plus what the run itself keeps open).
    #[error(
        "{in_flight} requests in flight need about {needed} open files (one socket each, plus \
         {reserved} kept for the run's own files and connections), but this process may open \
         {limit}; at most {allowed} requests fit, or split the load over several processes"
    )]
    OpenFileLimit {
        /// Requests the load would hold in flight at once.
        in_flight: u64,
        /// Open files that needs, the reserve included.
        needed: u64,
        /// Open files kept back for the run's own files and connections.
        reserved: u64,
        /// The process's open-file limit.
        limit: u64,
        /// The most requests in flight the limit allows.
        allowed: u64,
    },
    /// The dataset has nothing to send.
    #[error("dataset {0} has no conversations to send")]
    EmptyDataset(String),
    /// The artifact directory cannot be created or written.
    #[error("{path}: {source}")]
    Io {
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A pre-run question to the server (health, model list) failed.
    #[error("{url}: {message}")]
    Discovery {
        /// The URL asked.
        url: String,
        /// What went wrong.
        message: String,
        /// When no answer came, what stopped the connection (refused, DNS,
        /// TLS, closed).
        failure: Option<speedbench_http::ConnectFailure>,
    },
    /// Synthetic prompts could not be built as asked (a bad length, or a
    /// length the tokenizer cannot cut text to).
    #[error("synthetic prompts: {0}")]
    Synthesis(String),
    /// A local tokenizer (`tokenizer.json`) cannot be read or used.
    #[error("tokenizer {path}: {message}")]
    Tokenizer {
        /// The file (or the path given for it).
        path: PathBuf,
        /// What is wrong with it.
        message: String,
    },
    /// An export level that is none of `summary`, `records` and `raw`.
    #[error("unknown export level {0:?}: use summary, records or raw")]
    UnknownExportLevel(String),
    /// The TLS setup failed (e.g. an unreadable `SSL_CERT_FILE`).
    #[error("TLS setup: {0}")]
    Tls(String),
    /// A source address for connections ([`crate::Target::local_addrs`])
    /// is not one of this machine's addresses, or was given twice.
    #[error("source address {addr}: {message}")]
    LocalAddr {
        /// The address.
        addr: std::net::IpAddr,
        /// What is wrong with it.
        message: String,
    },
    /// The records file failed.
    #[error(transparent)]
    Record(#[from] speedbench_record::RecordError),
}

/// A request body field speedbench sets itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OwnedField {
    /// `model`: the model name.
    Model,
    /// `messages`: the conversation, from the dataset.
    Messages,
    /// `prompt`: the prompt, from the dataset.
    Prompt,
    /// `stream`: whether the response is streamed.
    Stream,
    /// `stream_options`: set with streaming to ask for usage.
    StreamOptions,
}

impl OwnedField {
    /// Every owned field.
    pub const ALL: [OwnedField; 5] = [
        OwnedField::Model,
        OwnedField::Messages,
        OwnedField::Prompt,
        OwnedField::Stream,
        OwnedField::StreamOptions,
    ];

    /// The body field's name.
    pub fn name(self) -> &'static str {
        match self {
            OwnedField::Model => "model",
            OwnedField::Messages => "messages",
            OwnedField::Prompt => "prompt",
            OwnedField::Stream => "stream",
            OwnedField::StreamOptions => "stream_options",
        }
    }

    /// Where its value comes from instead ([`crate::Target`]'s fields).
    pub fn set_by(self) -> &'static str {
        match self {
            OwnedField::Model => "the target's model",
            OwnedField::Messages | OwnedField::Prompt => "the dataset",
            OwnedField::Stream => "the target's streaming option",
            OwnedField::StreamOptions => {
                "the target's streaming option (which asks for usage with stream_options.include_usage)"
            }
        }
    }
}
