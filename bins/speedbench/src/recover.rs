//! `speedbench recover`: a killed run's crash journal into its records file.

use std::path::PathBuf;

use clap::Args;

use crate::{CliError, Context, Outcome};

/// Options of `speedbench recover`.
#[derive(Args, Debug)]
pub(crate) struct RecoverArgs {
    /// The run directory of a profile whose process was killed, or whose
    /// records file was closed after a failed write (a full disk) with
    /// fewer records than its crash journal.
    pub dir: PathBuf,
}

pub(crate) fn run(args: RecoverArgs) -> Result<Outcome, CliError> {
    let recovered = speedbench_runs::recover(&args.dir)
        .context(format!("recovering {}", args.dir.display()))?;
    for warning in &recovered.warnings {
        eprintln!("warning: {warning}");
    }
    let torn = if recovered.torn {
        " (a batch the kill tore while it was written is lost)"
    } else {
        ""
    };
    eprintln!(
        "recovered {} records from the crash journal into {}{torn}; the run is marked {}",
        recovered.records,
        recovered.records_path.display(),
        recovered.status.as_str()
    );
    Ok(Outcome::Done)
}
