//! Unique row labels for the runs of one report.

use std::path::{Path, PathBuf};

use crate::RunsError;
use crate::load::dir_name;
use crate::model_name::display_model;
use crate::run_data::RunData;

/// `DIR#ID` as the directory and the run id of a sharded run in it; a
/// path without `#` (or whose `#` is part of an existing path) as itself.
pub fn split_group(path: &Path) -> (PathBuf, Option<String>) {
    let text = path.to_string_lossy();
    match text.rsplit_once('#') {
        Some((dir, id)) if !id.is_empty() && !id.contains('/') && !path.exists() => {
            (PathBuf::from(dir), Some(id.to_string()))
        }
        _ => (path.to_path_buf(), None),
    }
}

/// Makes the runs' labels unique: `overrides` (`(dir, name)` pairs, from
/// `--label DIR=NAME`) first, then the model as shown
/// ([`display_model`]), and where two runs' labels collide, that name
/// followed by the run directory's name (`model (dir)`), or its whole path
/// if the names collide too.
///
/// A sharded run (merged from its shards) is also matched by its run id:
/// `ID=NAME`, or `DIR#ID=NAME` where runs share the directory; two sharded
/// runs of one model in one parent are labelled `model (ID)`.
///
/// An override naming a directory that is not one of the runs, or two runs
/// given the same name, is an error. A directory matches when it is the
/// same directory (after resolving `..` and links) or when `dir` is just
/// its last component.
pub fn assign_labels(
    runs: &mut [RunData],
    overrides: &[(PathBuf, String)],
) -> Result<(), RunsError> {
    let fixed = given_labels(runs, overrides)?;
    let labels = derived_labels(runs, &fixed);
    for (i, l) in labels.iter().enumerate() {
        if let Some(j) = labels[..i].iter().position(|x| x == l) {
            return Err(RunsError::Label(format!(
                "{} and {} would both be labelled {l:?}; give one of them another label",
                runs[j].dir.display(),
                runs[i].dir.display()
            )));
        }
    }
    for (run, label) in runs.iter_mut().zip(labels) {
        run.label = label;
    }
    Ok(())
}

/// The label each override gives, by run: `None` for a run none names.
fn given_labels(
    runs: &[RunData],
    overrides: &[(PathBuf, String)],
) -> Result<Vec<Option<String>>, RunsError> {
    let mut fixed: Vec<Option<String>> = vec![None; runs.len()];
    for (dir, name) in overrides {
        let matches = runs_named(runs, dir);
        match matches.as_slice() {
            [] => {
                return Err(RunsError::Label(format!(
                    "label {}={name}: {} is not one of the run directories ({})",
                    dir.display(),
                    dir.display(),
                    runs.iter()
                        .map(|r| r.dir.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
            [i] => fixed[*i] = Some(name.clone()),
            _ => {
                return Err(RunsError::Label(format!(
                    "label {}={name}: {} names {} run directories; give its path",
                    dir.display(),
                    dir.display(),
                    matches.len()
                )));
            }
        }
    }
    Ok(fixed)
}

/// The runs `dir` names: the same directory, or its last component alone;
/// `DIR#ID` (or `ID` alone) picks a sharded run by its run id.
fn runs_named(runs: &[RunData], dir: &Path) -> Vec<usize> {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (path, group) = split_group(dir);
    let wanted = canonical(&path);
    let single = path.components().count() == 1;
    runs.iter()
        .enumerate()
        .filter(|(_, r)| {
            let by_path = canonical(&r.dir) == wanted
                || (single && r.dir.file_name() == Some(path.as_os_str()));
            let by_group = |g: &str| r.run_group.as_deref() == Some(g);
            match &group {
                Some(g) => by_path && by_group(g),
                None => by_path || (single && by_group(&dir.to_string_lossy())),
            }
        })
        .map(|(i, _)| i)
        .collect()
}

/// Every run's label: the one given, else its model's; where models
/// collide, the directory's name (or a sharded run's id) is added, and
/// where those collide too, the whole path.
fn derived_labels(runs: &[RunData], fixed: &[Option<String>]) -> Vec<String> {
    let base: Vec<String> = runs
        .iter()
        .zip(fixed)
        .map(|(r, f)| f.clone().unwrap_or_else(|| display_model(&r.model)))
        .collect();
    let count = |labels: &[String], l: &str| labels.iter().filter(|x| x.as_str() == l).count();
    let with_name: Vec<String> = runs
        .iter()
        .zip(fixed)
        .zip(&base)
        .map(|((r, f), b)| match f {
            Some(name) => name.clone(),
            // Two sharded runs in one parent share its directory: their
            // run ids tell them apart.
            None if count(&base, b) > 1 => match &r.run_group {
                Some(group) => format!("{b} ({group})"),
                None => format!("{b} ({})", dir_name(&r.dir)),
            },
            None => b.clone(),
        })
        .collect();
    runs.iter()
        .zip(fixed)
        .zip(&with_name)
        .zip(&base)
        .map(|(((r, f), l), b)| match f {
            None if count(&with_name, l) > 1 => match &r.run_group {
                Some(group) => format!("{b} ({}#{group})", r.dir.display()),
                None => format!("{b} ({})", r.dir.display()),
            },
            _ => l.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RunFormat, RunStatus};

    fn run(dir: &str, model: &str) -> RunData {
        RunData {
            dir: PathBuf::from(dir),
            format: RunFormat::Speedbench,
            label: display_model(model),
            model: model.into(),
            status: RunStatus::Completed,
            status_reason: None,
            speed_bench: true,
            dataset: String::new(),
            manifest: None,
            records: None,
            digest: None,
            summary: None,
            server: None,
            speed_bench_py: None,
            warnings: Vec::new(),
            run_group: None,
        }
    }

    #[test]
    fn paths_show_their_stem_and_colliding_stems_get_the_directory() {
        assert_eq!(display_model("C:\\models\\tiny.gguf"), "tiny");
        assert_eq!(display_model("/models/dir/"), "dir");
        assert_eq!(display_model(".gguf"), ".gguf");
        assert_eq!(display_model("é.gguf"), "é");
        assert_eq!(display_model("ééé"), "ééé");
        let mut runs = [
            run("/runs/base", "/srv/a/SmolLM2-135M.gguf"),
            run("/runs/spec", "/srv/b/SmolLM2-135M.gguf"),
            run("/runs/other", "/srv/a/Qwen.gguf"),
        ];
        assign_labels(&mut runs, &[]).unwrap();
        let labels: Vec<&str> = runs.iter().map(|r| r.label.as_str()).collect();
        assert_eq!(
            labels,
            ["SmolLM2-135M (base)", "SmolLM2-135M (spec)", "Qwen"]
        );
        // The full ids stay.
        assert_eq!(runs[0].model, "/srv/a/SmolLM2-135M.gguf");
        // An override wins over the stem.
        assign_labels(&mut runs, &[(PathBuf::from("spec"), "draft".into())]).unwrap();
        assert_eq!(runs[1].label, "draft");
        assert_eq!(runs[0].label, "SmolLM2-135M");
    }
}
