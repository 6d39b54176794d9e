//! `speedbench report TUNE_DIR`: a tune's answer ([`TuneReport`]) in the
//! report's formats.

use std::path::Path;

use speedbench_report::{CompareOptions, TuneReport};

use crate::error::RunError;
use crate::report::{ReportFormat, ReportObserver, ReportSpec};

/// Whether `spec` is a report over one tune's directory.
pub(crate) fn is_tune_report(spec: &ReportSpec) -> bool {
    matches!(spec.paths.as_slice(), [dir] if dir.join(speedbench_record::TuneManifest::FILE_NAME).is_file())
}

/// Renders the answer of the tune in `dir` as `spec.format` asks: console
/// (`both` too: a tune has no CSV), Markdown, JSON, or HTML to
/// `spec.html_output`.
pub(crate) fn report_tune(
    spec: &ReportSpec,
    dir: &Path,
    observer: &mut dyn ReportObserver,
) -> Result<(), RunError> {
    let report = TuneReport::from_dir(dir, &CompareOptions::default()).map_err(|source| {
        RunError::Report {
            context: format!("the tune in {}", dir.display()),
            source,
        }
    })?;
    match spec.format {
        ReportFormat::Console | ReportFormat::Both => observer.output(&report.to_console()),
        ReportFormat::Markdown => observer.output(&report.to_markdown()),
        ReportFormat::Json => {
            let text = serde_json::to_string_pretty(&report.to_json()).unwrap_or_default();
            observer.output(&format!("{text}\n"));
        }
        ReportFormat::Html => {
            std::fs::write(&spec.html_output, report.to_html()).map_err(|source| RunError::Io {
                context: format!("writing {}", spec.html_output.display()),
                source,
            })?;
            observer.info(&format!("HTML written to {}", spec.html_output.display()));
        }
        ReportFormat::Csv | ReportFormat::SpeedBenchPy => {
            return Err(RunError::invalid(
                "--format",
                "a tune's report is console, markdown, json or html",
            ));
        }
    }
    Ok(())
}
