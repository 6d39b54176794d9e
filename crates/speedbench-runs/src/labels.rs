//! Unique row labels for the runs of one report.

use std::path::{Path, PathBuf};

use crate::RunsError;
use crate::load::{RunData, dir_name};

/// Makes the runs' labels unique: `overrides` (`(dir, name)` pairs, from
/// `--label DIR=NAME`) first, then the model name, and where two runs'
/// labels collide, the model followed by the run directory's name
/// (`model (dir)`), or its whole path if the names collide too.
///
/// An override naming a directory that is not one of the runs, or two runs
/// given the same name, is an error. A directory matches when it is the
/// same directory (after resolving `..` and links) or when `dir` is just
/// its last component.
pub fn assign_labels(
    runs: &mut [RunData],
    overrides: &[(PathBuf, String)],
) -> Result<(), RunsError> {
    let canonical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mut fixed: Vec<Option<String>> = vec![None; runs.len()];
    for (dir, name) in overrides {
        let wanted = canonical(dir);
        let matches: Vec<usize> = runs
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                canonical(&r.dir) == wanted
                    || (dir.components().count() == 1 && r.dir.file_name() == Some(dir.as_os_str()))
            })
            .map(|(i, _)| i)
            .collect();
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
    let base: Vec<String> = runs
        .iter()
        .zip(&fixed)
        .map(|(r, f)| f.clone().unwrap_or_else(|| r.model.clone()))
        .collect();
    let count = |labels: &[String], l: &str| labels.iter().filter(|x| x.as_str() == l).count();
    let with_name: Vec<String> = runs
        .iter()
        .zip(&fixed)
        .zip(&base)
        .map(|((r, f), b)| match f {
            Some(name) => name.clone(),
            None if count(&base, b) > 1 => format!("{} ({})", r.model, dir_name(&r.dir)),
            None => b.clone(),
        })
        .collect();
    let labels: Vec<String> = runs
        .iter()
        .zip(&fixed)
        .zip(&with_name)
        .map(|((r, f), l)| match f {
            None if count(&with_name, l) > 1 => format!("{} ({})", r.model, r.dir.display()),
            _ => l.clone(),
        })
        .collect();
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
