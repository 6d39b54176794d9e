//! [`Console`]: a run's events on the terminal, as `speedbench profile`
//! prints them: progress on stderr, the summary tables on stdout. The
//! words are `speedbench_run::text`'s; this prints them.

use std::path::Path;
use std::sync::Arc;

use speedbench_client::{Engine, LiveSink, Preflight, Progress};
use speedbench_dataset::PublicDataset;
use speedbench_run::text::{self, Text};
use speedbench_run::{EngineSource, Observer, RunReport};
use speedbench_store::{StoreUrl, UploadReport};

use crate::dashboard::{self, Dashboard};
use crate::progress::{self, Display};

/// How a run shows itself while it runs (`--ui-type`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum UiType {
    /// The live view on a terminal (the plain progress elsewhere).
    #[default]
    Dashboard,
    /// The progress bar on a terminal, a line every 5 s elsewhere.
    Simple,
    /// Nothing while it runs.
    None,
}

impl UiType {
    /// The flag's words.
    pub(crate) const NAMES: [&'static str; 3] = ["dashboard", "simple", "none"];

    pub(crate) fn parse(name: &str) -> UiType {
        match name {
            "simple" => UiType::Simple,
            "none" => UiType::None,
            _ => UiType::Dashboard,
        }
    }
}

/// What shows the run while it runs.
enum Live {
    Progress(Display),
    Dashboard(Dashboard),
}

/// Prints a run's events; holds the progress display while it runs.
#[derive(Default)]
pub(crate) struct Console {
    ui: Option<UiType>,
    /// The live view's figures, fed by the run (`--ui-type dashboard` on a
    /// terminal).
    live: Option<LiveSink>,
    display: Option<Live>,
}

impl Console {
    /// A console showing the run as `ui` asks; the dashboard's figures come
    /// from `live`, a sink the run feeds.
    pub(crate) fn showing(ui: UiType, live: Option<LiveSink>) -> Console {
        Console {
            ui: Some(ui),
            live,
            display: None,
        }
    }
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
        let dashboard = match (self.ui.unwrap_or_default(), &self.live) {
            (UiType::None, _) => return,
            (UiType::Dashboard, Some(live)) => dashboard::spawn(progress.clone(), live.clone()),
            _ => None,
        };
        self.display = Some(match dashboard {
            Some(d) => Live::Dashboard(d),
            None => Live::Progress(progress::spawn(progress)),
        });
    }

    fn run_ended(&mut self) {
        match self.display.take() {
            Some(Live::Progress(display)) => progress::finish(display),
            Some(Live::Dashboard(d)) => dashboard::finish(d),
            None => {}
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
