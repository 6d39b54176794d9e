//! `cargo xtask prestage --dataset NAME --out DIR [--dataset-cache DIR]
//! [--resolver auto|native|upstream] [--python PATH] [--prepare-script PATH]`:
//! resolve or download a registered dataset on a connected machine and write
//! it, with a manifest (revision, row count, sha256), into a bundle that an
//! air-gapped host imports with `speedbench datasets import DIR`.
//! SPEED-Bench configs with sources speedbench does not rebuild natively run
//! the upstream prepare step (Python 3 with datasets, pandas, numpy,
//! tiktoken; `SPEEDBENCH_PYTHON` or `--python`).

use std::path::PathBuf;

use speedbench_dataset::{
    ChecksumOf, DatasetError, IntegrityError, LoadOptions, PrepareScript, ResolveError, Resolver,
    prestage,
};

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    let mut names = Vec::new();
    let mut out = None;
    let mut cache = None;
    let mut resolver = Resolver::Auto;
    let mut python = None;
    let mut script = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match a.as_str() {
            "--dataset" => names.push(value("--dataset")?),
            "--out" => out = Some(PathBuf::from(value("--out")?)),
            "--dataset-cache" => cache = Some(PathBuf::from(value("--dataset-cache")?)),
            "--resolver" => resolver = value("--resolver")?.parse()?,
            "--python" => python = Some(PathBuf::from(value("--python")?)),
            "--prepare-script" => script = Some(PathBuf::from(value("--prepare-script")?)),
            other => return Err(format!("prestage: unexpected argument {other:?}")),
        }
    }
    let out = out.ok_or("prestage: --out DIR is required")?;
    if names.is_empty() {
        return Err("prestage: --dataset NAME is required (repeatable)".into());
    }
    // Show the resolution's warnings and the prepare step's relayed progress
    // (tens of minutes for a full SPEED-Bench config); RUST_LOG overrides.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new("warn,speedbench_dataset::upstream=info")
            }),
        )
        .with_target(false)
        .try_init();
    let mut options = LoadOptions::from_env(cache);
    options.resolver = resolver;
    if let Some(p) = python {
        options.upstream.python = p;
    }
    if let Some(s) = script {
        options.upstream.script = PrepareScript::Local(s);
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    for name in names {
        let entry = runtime
            .block_on(prestage(&name, &out, &options))
            .map_err(|e| format!("prestage {name}: {e}{}", hint(&e)))?;
        eprintln!(
            "staged {name}: {} ({} rows, {} bytes, sha256 {}, revision {})",
            out.join(&entry.file).display(),
            entry.rows,
            entry.bytes,
            entry.sha256,
            entry.revision.as_deref().unwrap_or("unknown")
        );
    }
    eprintln!(
        "bundle ready: copy {} to the target host and run `speedbench datasets import DIR` \
         (or pass `--dataset-cache DIR` to `speedbench profile`)",
        out.display()
    );
    Ok(())
}

/// What to do about a dataset error in terms of this command's flags (the
/// library's messages name none).
fn hint(e: &DatasetError) -> &'static str {
    match e {
        DatasetError::Resolve(ResolveError::Unresolvable { .. }) => {
            "\n  hint: `--resolver auto` or `--resolver upstream` runs the prepare step"
        }
        DatasetError::Resolve(ResolveError::PythonUnavailable { .. }) => {
            "\n  hint: `--python venv/bin/python` (or SPEEDBENCH_PYTHON) chooses the interpreter"
        }
        DatasetError::Integrity(IntegrityError::Checksum {
            of: ChecksumOf::PrepareScript,
            ..
        }) => "\n  hint: to run another script deliberately, pass it with --prepare-script PATH",
        _ => "",
    }
}
