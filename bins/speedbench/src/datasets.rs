//! `speedbench datasets`: list the registered datasets, resolve them into
//! the cache, import pre-staged bundles; and the `--public-dataset` loading
//! `speedbench profile` uses.

use std::path::PathBuf;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Subcommand};
use speedbench_dataset::public::DEFAULT_DATASET_CACHE;
use speedbench_dataset::{LoadOptions, Resolver, import_bundle, load_public_dataset, registry};

use speedbench_run::dataset_error;

use crate::{CliError, Outcome};

/// How SPEED-Bench placeholder rows are resolved.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct ResolveArgs {
    /// `auto`: natively when every placeholder's source is rebuilt exactly,
    /// else by running the upstream prepare step (NeMo-Skills' prepare.py,
    /// pinned by sha256; needs Python 3 with datasets, pandas, numpy,
    /// tiktoken). `native`: never run Python. `upstream`: always the prepare step.
    #[arg(
        long,
        value_name = "RESOLVER",
        default_value = "auto",
        value_parser = PossibleValuesParser::new(Resolver::NAMES)
            .map(|s| s.parse::<Resolver>().expect("a possible value"))
    )]
    pub resolver: Resolver,
    /// The Python interpreter that runs the prepare step (default `python3`).
    #[arg(long, value_name = "PATH", env = "SPEEDBENCH_PYTHON")]
    pub python: Option<PathBuf>,
    /// Run this local prepare script instead of downloading the pinned one
    /// (it is run as given; its sha256 is logged).
    #[arg(long, value_name = "PATH", env = "SPEEDBENCH_PREPARE_SCRIPT")]
    pub prepare_script: Option<PathBuf>,
}

/// The `--public-dataset` options of `speedbench profile`.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct PublicDatasetArgs {
    /// A registered dataset (`speedbench datasets` lists them), fetched from the
    /// Hugging Face Hub and cached; SPEED-Bench placeholders are resolved first.
    #[arg(long, value_name = "NAME", group = "dataset_source")]
    pub public_dataset: Option<String>,
    /// Dataset cache (default `.cache/speedbench/datasets`), or a bundle from
    /// `cargo xtask prestage` (its checksums are verified).
    #[arg(long, value_name = "DIR")]
    pub dataset_cache: Option<PathBuf>,
    /// `--resolver`, `--python`, `--prepare-script`.
    #[command(flatten)]
    pub resolve: ResolveArgs,
}

/// The load options of a public dataset: as `profile` loads it.
fn load_options(cache: Option<PathBuf>, resolve: &ResolveArgs) -> LoadOptions {
    let mut spec = speedbench_run::DatasetSpec::default();
    spec.dataset_cache = cache;
    spec.resolver = resolve.resolver;
    spec.python = resolve.python.clone();
    spec.prepare_script = resolve.prepare_script.clone();
    spec.load_options()
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
        /// Dataset cache (default `.cache/speedbench/datasets`).
        #[arg(long, value_name = "DIR")]
        dataset_cache: Option<PathBuf>,
        /// `--resolver`, `--python`, `--prepare-script`.
        #[command(flatten)]
        resolve: ResolveArgs,
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

/// The registry as a text table.
pub(crate) fn render_list() -> String {
    let specs = registry();
    let width = specs.iter().map(|s| s.name.len()).max().unwrap_or(4);
    let mut out = format!(
        "{:<width$}  {:>5}  {:<5}  {:<21}  DESCRIPTION\n",
        "NAME", "ROWS", "TURNS", "SIZE (resolved)"
    );
    for s in &specs {
        out.push_str(&format!(
            "{:<width$}  {:>5}  {:<5}  {:<21}  {} [{}]\n",
            s.name, s.rows, s.turns, s.approx_size, s.description, s.license
        ));
    }
    out.push_str(
        "\nSPEED-Bench names share one resolved file per config (categories are filtered after \
         resolution); see docs/datasets.md for what resolves natively and how to pre-stage.\n",
    );
    out
}

/// Runs `speedbench datasets`.
pub(crate) async fn run(args: DatasetsArgs) -> Result<Outcome, CliError> {
    match args.command.unwrap_or(DatasetsCommand::List) {
        DatasetsCommand::List => print!("{}", render_list()),
        DatasetsCommand::Resolve {
            name,
            dataset_cache,
            resolve,
        } => {
            let options = load_options(dataset_cache, &resolve);
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
