//! Rows whose turns ask for their reference reply's length (ShareGPT's):
//! the replies counted with the run's tokenizer before the run
//! ([`speedbench_client::synthetic::ReplyLengths`]), the rows outside
//! AIPerf's limits left out and said, and `run.json` told.

use speedbench_client::synthetic::{ReplyCount, ReplyLengths};
use speedbench_dataset::{CategorySelection, Dataset, ReplyLimits};

use crate::error::RunError;
use crate::observer::Observer;
use crate::spec::DatasetSource;
use crate::validate::{ValidRun, hinted};

/// `dataset` with its reply rows' lengths counted (and those outside the
/// limits left out); unchanged when it has none. With `--limit` over rows
/// of one category, counting stops at the first `--limit` rows kept.
pub(crate) async fn count_replies(
    valid: &mut ValidRun,
    mut dataset: Dataset,
    observer: &mut dyn Observer,
) -> Result<Dataset, RunError> {
    let rows = (dataset.conversations.iter())
        .filter(|c| !c.reference_replies.is_empty())
        .count();
    if rows == 0 {
        return Ok(dataset);
    }
    let step = reply_step(valid, &dataset);
    let tokenizer = valid.spec.token_codec().await?;
    let until = step
        .keep_first
        .map_or(String::new(), |n| format!(", until {n} are kept (--limit)"));
    observer.waiting(&format!(
        "counting the prompts and replies of {rows} rows with {}, each turn to ask for its \
         reply's length ({}){until}",
        tokenizer.describe(),
        step.limits
    ));
    let count = step
        .apply(&mut dataset, tokenizer.as_ref())
        .await
        .map_err(|e| hinted("counting the replies' lengths", e))?;
    if let Some(line) = left_out_line(&count, &step.limits) {
        observer.warning(&line);
    }
    valid.description.config["reply_lengths"] = recorded(&step, &count, &tokenizer.describe());
    if count.kept == 0 {
        let flag = match &valid.spec.dataset.source {
            Some(DatasetSource::InputFile(_)) => "--input-file",
            Some(DatasetSource::InputRows(_)) => "--input-rows",
            _ => "--public-dataset",
        };
        return Err(RunError::invalid(
            flag,
            format!(
                "no row is inside the limits ({}): nothing to send",
                step.limits
            ),
        ));
    }
    Ok(dataset)
}

/// The step for `dataset`: AIPerf's limits (no reply's minimum with
/// `--osl`, as AIPerf checks none with an output length given), and
/// `--limit` as the rows kept where every row is of one category.
fn reply_step(valid: &ValidRun, dataset: &Dataset) -> ReplyLengths {
    let limits = match valid.spec.sampling.osl {
        Some(_) => ReplyLimits {
            min_reply_tokens: 0,
            ..ReplyLimits::default()
        },
        None => ReplyLimits::default(),
    };
    // `--limit` keeps N of each category: the first N rows counted are
    // those N only where every row is of one category (or of none).
    let first = dataset.conversations.first().map(|c| &c.category);
    let one_category = (dataset.conversations.iter()).all(|c| Some(&c.category) == first)
        && valid.categories == CategorySelection::All;
    ReplyLengths {
        limits,
        keep_first: valid.limit.filter(|_| one_category).map(|n| n.get()),
    }
}

/// `run.json`'s `config.reply_lengths`: what counted, the limits, and the
/// rows counted, kept, left out by limit and not counted.
fn recorded(step: &ReplyLengths, count: &ReplyCount, counted_by: &str) -> serde_json::Value {
    let left_out: Vec<serde_json::Value> = (count.outside.iter())
        .map(|(why, n)| serde_json::json!({"why": step.limits.explain(*why), "rows": n}))
        .collect();
    serde_json::json!({
        "tokens_counted_by": counted_by,
        "limits": step.limits.to_string(),
        "rows": count.rows,
        "kept": count.kept,
        "left_out": left_out,
        "not_counted_past_limit": count.not_counted,
    })
}

/// The rows the limits left out, by reason; `None` when none was.
fn left_out_line(count: &ReplyCount, limits: &ReplyLimits) -> Option<String> {
    if count.left_out() == 0 {
        return None;
    }
    let reasons: Vec<String> = (count.outside.iter())
        .map(|(why, n)| format!("{n} with {}", limits.explain(*why)))
        .collect();
    Some(format!(
        "{} of {} counted rows are left out, as AIPerf leaves them out: a turn outside {limits} \
         ({}); {} are sent from",
        count.left_out(),
        count.rows - count.not_counted,
        reasons.join(", "),
        count.kept
    ))
}
