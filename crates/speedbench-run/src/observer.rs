//! [`Observer`]: what a run tells the program running it, as it goes.
//! `speedbench` prints these with its progress bar and tables; a test or
//! a downstream benchmark implements its own (every method has a default
//! that ignores the event).

use std::path::Path;
use std::sync::Arc;

use crate::store_types::{StoreUrl, UploadReport};
use speedbench_client::{Engine, Preflight, Progress};
use speedbench_dataset::PublicDataset;

use crate::finished::RunReport;

/// How the engine behind the server became known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EngineSource {
    /// The spec named it (`--engine`).
    Named,
    /// Found from what the server answered; the evidence.
    Detected(String),
}

/// Receives a run's events in the order they happen. Every method has an
/// empty default, so an observer implements only what it shows.
pub trait Observer: Send {
    /// A public dataset was loaded (from the cache, the Hub or a bundle).
    fn dataset_loaded(&mut self, _dataset: &PublicDataset) {}

    /// `--limit N` kept `kept` of `before` rows.
    fn rows_limited(&mut self, _limit: usize, _kept: usize, _before: usize) {}

    /// The run's output goes to a store: it is staged in `dir`.
    fn staging(&mut self, _url: &StoreUrl, _dir: &Path) {}

    /// The run waits for something before its first request (the engine
    /// probes, the preflight): what, and for how long at most.
    fn waiting(&mut self, _what: &str) {}

    /// The engine behind the server is known.
    fn engine(&mut self, _engine: Engine, _source: &EngineSource) {}

    /// The preflight request came back (or failed; the run goes on).
    fn preflight(&mut self, _check: &Preflight) {}

    /// The first request is about to go; `progress` counts the run's
    /// requests while it runs.
    fn run_started(&mut self, _progress: Arc<Progress>) {}

    /// The last request ended (or the run stopped); nothing is sent after.
    fn run_ended(&mut self) {}

    /// The sampling fields every request of the run carries
    /// ([`crate::text::sampling_line`]), before the first request.
    fn sampling(&mut self, _line: &str) {}

    /// The staged run reached the store.
    fn uploaded(&mut self, _report: &UploadReport) {}

    /// The run is over and its results are read back: everything a
    /// summary shows. Called once, before the executor returns.
    fn finished(&mut self, _report: &RunReport) {}

    /// Something the user should know that does not stop the run.
    fn warning(&mut self, _message: &str) {}
}

/// An observer that shows nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Silent;

impl Observer for Silent {}
