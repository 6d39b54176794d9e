//! [`Console`]: a run's events on the terminal, as `speedbench profile`
//! prints them: progress on stderr, the summary tables on stdout. The
//! words are `speedbench_run::text`'s; this prints them.

use std::path::Path;
use std::sync::Arc;

use speedbench_client::{Engine, Preflight, Progress};
use speedbench_dataset::PublicDataset;
use speedbench_run::text::{self, Text};
use speedbench_run::{EngineSource, Observer, RunReport};
use speedbench_store::{StoreUrl, UploadReport};

use crate::progress::{self, Display};

/// Prints a run's events; holds the progress display while it runs.
#[derive(Default)]
pub(crate) struct Console {
    display: Option<Display>,
}

impl Observer for Console {
    fn dataset_loaded(&mut self, loaded: &PublicDataset) {
        eprintln!("dataset {}", text::loaded_line(loaded));
    }

    fn rows_limited(&mut self, limit: usize, kept: usize, before: usize) {
        eprintln!("{}", text::limited_line(limit, kept, before));
    }

    fn staging(&mut self, url: &StoreUrl, dir: &Path) {
        eprintln!("{}", text::staging_line(url, dir));
    }

    fn waiting(&mut self, what: &str) {
        eprintln!("{what}");
    }

    fn engine(&mut self, engine: Engine, source: &EngineSource) {
        eprintln!("{}", text::engine_line(engine, source));
    }

    fn preflight(&mut self, check: &Preflight) {
        for line in text::preflight_lines(check) {
            eprintln!("{line}");
        }
    }

    fn run_started(&mut self, progress: Arc<Progress>) {
        self.display = Some(progress::spawn(progress));
    }

    fn run_ended(&mut self) {
        if let Some(display) = self.display.take() {
            progress::finish(display);
        }
    }

    fn sampling(&mut self, line: &str) {
        eprintln!("{line}");
    }

    fn uploaded(&mut self, report: &UploadReport) {
        eprintln!("{}", speedbench_run::fetch::uploaded_line(report));
    }

    fn finished(&mut self, report: &RunReport) {
        text::run_end(report).iter().for_each(Text::print);
    }

    fn warning(&mut self, message: &str) {
        eprintln!("warning: {message}");
    }
}
