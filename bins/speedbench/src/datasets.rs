//! `speedbench datasets`: list the registered datasets, resolve them into
//! the cache, import pre-staged bundles.

use std::path::PathBuf;

use clap::{ArgMatches, Args, Command, FromArgMatches, Subcommand};
use speedbench_dataset::public::DEFAULT_DATASET_CACHE;
use speedbench_dataset::{import_bundle, load_public_dataset, registry};
use speedbench_run::{DatasetSpec, RunSpec, dataset_error, flags};

use crate::{CliError, Outcome};

/// `--dataset-cache`, `--resolver`, `--python` and `--prepare-script`,
/// as `speedbench profile` takes them (the library's flags).
#[derive(Debug, Clone, Default)]
pub(crate) struct ResolveFlags {
    dataset: Box<DatasetSpec>,
}

/// The flags [`ResolveFlags`] takes.
const RESOLVE_FLAGS: [&str; 4] = ["dataset-cache", "resolver", "python", "prepare-script"];

impl Args for ResolveFlags {
    fn augment_args(cmd: Command) -> Command {
        cmd.args(
            RESOLVE_FLAGS
                .iter()
                .filter_map(|name| flags::find(name).map(|f| crate::profile::arg(f, None))),
        )
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for ResolveFlags {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut spec = RunSpec::default();
        crate::profile::apply_matches(
            &mut spec,
            m,
            RESOLVE_FLAGS.iter().filter_map(|n| flags::find(n)),
        )?;
        Ok(ResolveFlags {
            dataset: Box::new(spec.dataset),
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

/// Options of `speedbench datasets`.
#[derive(Args, Debug, Clone)]
pub(crate) struct DatasetsArgs {
    /// What to do; lists the datasets when omitted.
    #[command(subcommand)]
    pub command: Option<DatasetsCommand>,
}

/// The `speedbench datasets` subcommands.
#[derive(Subcommand, Debug, Clone)]
pub(crate) enum DatasetsCommand {
    /// List every `--public-dataset` name with its size and description.
    List,
    /// Fetch a registered dataset into the dataset cache, resolving a
    /// SPEED-Bench config's placeholder rows (the whole config, once).
    Resolve {
        /// A `--public-dataset` name.
        name: String,
        /// `--dataset-cache`, `--resolver`, `--python`, `--prepare-script`.
        #[command(flatten)]
        resolve: ResolveFlags,
    },
    /// Verify a bundle made by `cargo xtask prestage` (sha256, sizes, row
    /// counts) and copy it into the dataset cache, for air-gapped hosts.
    Import {
        /// The bundle directory (holds `manifest.json`).
        dir: PathBuf,
        /// Dataset cache to import into.
        #[arg(long, value_name = "DIR", default_value = DEFAULT_DATASET_CACHE)]
        dataset_cache: PathBuf,
    },
}

/// Runs `speedbench datasets`.
pub(crate) async fn run(args: DatasetsArgs) -> Result<Outcome, CliError> {
    match args.command.unwrap_or(DatasetsCommand::List) {
        DatasetsCommand::List => print!("{}", registry::render_table()),
        DatasetsCommand::Resolve { name, resolve } => {
            let options = resolve.dataset.load_options();
            let loaded = load_public_dataset(&name, &options)
                .await
                .map_err(|e| dataset_error(format!("resolving {name}"), e))?;
            println!("{}", speedbench_run::text::loaded_line(&loaded));
        }
        DatasetsCommand::Import { dir, dataset_cache } => {
            let m = import_bundle(&dir, &dataset_cache)
                .map_err(|e| dataset_error(format!("importing bundle {}", dir.display()), e))?;
            for e in &m.files {
                println!(
                    "imported {} ({} rows, sha256 {}, revision {}) into {}",
                    e.dataset,
                    e.rows,
                    e.sha256,
                    e.revision.as_deref().unwrap_or("unknown"),
                    dataset_cache.join(&e.file).display()
                );
            }
        }
    }
    Ok(Outcome::Done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use speedbench_dataset::{ChecksumOf, DatasetError, IntegrityError};

    #[test]
    fn a_prepare_script_that_is_not_the_pin_names_the_flag_that_runs_another() {
        let e = DatasetError::from(IntegrityError::Checksum {
            path: "https://raw.example/prepare.py".into(),
            expected: "a".repeat(64),
            actual: "b".repeat(64),
            of: ChecksumOf::PrepareScript,
        });
        let text = dataset_error("resolving", e).to_string();
        assert!(
            text.contains("checksum mismatch") && text.contains("--prepare-script PATH"),
            "{text}"
        );
        // Other checksums get no such hint.
        let e = DatasetError::from(IntegrityError::Checksum {
            path: "f".into(),
            expected: "1 bytes".into(),
            actual: "2 bytes".into(),
            of: ChecksumOf::Download,
        });
        assert!(!dataset_error("resolving", e).to_string().contains("hint:"));
    }
}
