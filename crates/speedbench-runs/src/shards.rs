//! Merging the shards of one sharded run (`speedbench profile --shard I/N`)
//! into one run.
//!
//! A shard is a speedbench run whose manifest has a `shard` entry: its
//! group (the `--run-id` every shard was given), its index and the shard
//! count. [`merge_shards`] turns the shards of each group among the runs of
//! a report into one [`RunData`] whose records are the union of the
//! shards' records (each keeps its shard's `run_id`,
//! `{group}-shard{I}of{N}`), so every statistic is computed once over the
//! pooled records: percentiles from all of them, rates over the union of
//! the shards' windows, acceptance sums added. A shard that is absent
//! among the runs given, or that did not complete, is named in the merged
//! run's [`RunData::status_reason`] and makes the merged run incomplete.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use speedbench_metrics::RecordsDigest;
use speedbench_record::{MeasuredStart, RunManifest};

use crate::{RunData, RunStatus, RunsError, find_run_dirs, load_run};

/// One run of a report after merging: a run as loaded, or the shards of
/// one sharded run merged into one.
#[derive(Debug, Clone)]
pub struct MergedRun {
    /// The run; for merged shards, their union (see [`merge_shards`]).
    pub run: RunData,
    /// For merged shards, which were found and which were not.
    pub shards: Option<ShardSet>,
}

/// The shards of one sharded run, as found among the runs given.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardSet {
    /// The id the shards share (`profile --run-id`).
    pub group: String,
    /// How many shards the run was split into.
    pub count: u32,
    /// The shards found, by index.
    pub found: Vec<FoundShard>,
    /// Indices of shards no run given holds, in order.
    pub missing: Vec<u32>,
    /// What the merge itself found worth telling (shards run with
    /// different options, server-metrics exports left out); also in the
    /// merged run's warnings, after the shards' own.
    pub notes: Vec<String>,
}

/// One shard found of a [`ShardSet`].
#[derive(Debug, Clone, PartialEq)]
pub struct FoundShard {
    /// Its index.
    pub index: u32,
    /// Its run directory.
    pub dir: PathBuf,
    /// How it ended.
    pub status: RunStatus,
    /// Why it counts as incomplete, in words.
    pub status_reason: Option<String>,
    /// Records it contributed (`None`: its records could not be read).
    pub records: Option<usize>,
    /// When its measured phase was planned to start and did, from its
    /// `run.json`.
    pub start: Option<MeasuredStart>,
}

impl ShardSet {
    /// True when every shard was found, completed, and gave its records.
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty()
            && self
                .found
                .iter()
                .all(|s| s.status.is_complete() && s.records.is_some())
    }

    /// What keeps the merged run from being complete, one sentence per
    /// shard at fault (empty when [`Self::is_complete`]).
    pub fn problems(&self) -> Vec<String> {
        let n = self.count;
        let mut out: Vec<String> = self
            .missing
            .iter()
            .map(|i| {
                format!(
                    "shard {i}/{n} of run {} is missing: no run directory given holds it \
                     (run.json shard index {i})",
                    self.group
                )
            })
            .collect();
        for s in &self.found {
            if !s.status.is_complete() {
                out.push(format!(
                    "shard {}/{n} ({}) is {}: {}",
                    s.index,
                    s.dir.display(),
                    s.status,
                    s.status_reason.as_deref().unwrap_or("no outcome recorded")
                ));
            } else if s.records.is_none() {
                out.push(format!(
                    "shard {}/{n} ({}) has no readable records",
                    s.index,
                    s.dir.display()
                ));
            }
        }
        out
    }

    /// One line: `merged 4 shards of run bench1` when complete, else how
    /// many of how many and what is wrong.
    pub fn describe(&self) -> String {
        let problems = self.problems();
        if problems.is_empty() {
            return format!("merged {} shards of run {}", self.count, self.group);
        }
        format!(
            "merged {} of {} shards of run {}; INCOMPLETE: {}",
            self.found.len(),
            self.count,
            self.group,
            problems.join("; ")
        )
    }

    /// The set as JSON, for a report row: `group`, `count`, `merged` (the
    /// indices found), `missing`, `incomplete` (index, dir, status, reason
    /// of each shard at fault), `complete`, `note` ([`Self::describe`])
    /// and `start_spread_ms` ([`Self::start_spread_ns`]).
    pub fn to_json(&self) -> serde_json::Value {
        let incomplete: Vec<serde_json::Value> = self
            .found
            .iter()
            .filter(|s| !s.status.is_complete() || s.records.is_none())
            .map(|s| {
                serde_json::json!({
                    "index": s.index,
                    "dir": s.dir.display().to_string(),
                    "status": s.status.as_str(),
                    "status_reason": s.status_reason,
                    "records_readable": s.records.is_some(),
                })
            })
            .collect();
        serde_json::json!({
            "group": self.group,
            "count": self.count,
            "merged": self.found.iter().map(|s| s.index).collect::<Vec<_>>(),
            "missing": self.missing,
            "incomplete": incomplete,
            "complete": self.is_complete(),
            "note": self.describe(),
            "start_spread_ms": self.start_spread_ns().map(|ns| ns as f64 / 1e6),
        })
    }

    /// The spread of the shards' measured starts (latest minus earliest
    /// `measured_unix_ns`), when at least two shards recorded one.
    pub fn start_spread_ns(&self) -> Option<i64> {
        let starts: Vec<i64> = self
            .found
            .iter()
            .filter_map(|s| s.start.as_ref().map(|m| m.measured_unix_ns))
            .collect();
        (starts.len() >= 2)
            .then(|| starts.iter().max().unwrap_or(&0) - starts.iter().min().unwrap_or(&0))
    }
}

/// The runs of a report with the shards of each sharded run merged into
/// one, in the order of each group's first shard; runs that are not
/// shards pass through unchanged.
///
/// A merged run's records are the union of its shards' records, in shard
/// order; its manifest is the lowest shard's with `run_id` set to the
/// group, the earliest start, the latest end and the summed record count;
/// its status is the worst of its shards' (a missing shard makes it
/// [`RunStatus::Unfinished`]), with every shard at fault named in
/// [`RunData::status_reason`]. It has no summary-file numbers and no
/// server-metrics export: each shard's covers only itself, or (a scrape of
/// the one server) every shard's traffic at once, so neither adds up;
/// statistics come from the pooled records. Shards that disagree on the
/// model, dataset or shard count, or two directories claiming one shard,
/// are errors naming both.
///
/// ```
/// use speedbench_record::{RecordWriter, RequestRecord, RunManifest, RunShard};
/// use speedbench_runs::{RunStatus, load_run, merge_shards};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let parent = tempfile::tempdir()?;
/// let mut runs = Vec::new();
/// for index in [0, 2] {
///     let dir = parent.path().join(format!("bench-shard{index}of3"));
///     std::fs::create_dir(&dir)?;
///     let manifest = RunManifest {
///         run_id: format!("bench-shard{index}of3"),
///         model: "m".into(),
///         status: speedbench_record::RunStatus::Completed,
///         shard: Some(RunShard { group: "bench".into(), index, count: 3, ..Default::default() }),
///         ..Default::default()
///     };
///     let mut writer = RecordWriter::create(dir.join("records.parquet"))?;
///     writer.append(&RequestRecord { model: "m".into(), ..Default::default() })?;
///     writer.close(&manifest)?;
///     runs.push(load_run(&dir)?);
/// }
/// let merged = merge_shards(runs)?;
/// assert_eq!(merged.len(), 1);
/// let shards = merged[0].shards.as_ref().unwrap();
/// assert_eq!(shards.missing, [1]);
/// assert_eq!(merged[0].run.records.as_ref().map(Vec::len), Some(2));
/// assert_eq!(merged[0].run.status, RunStatus::Unfinished);
/// assert!(merged[0].run.status_reason.as_deref().unwrap().contains("shard 1/3 of run bench is missing"));
/// # Ok(())
/// # }
/// ```
pub fn merge_shards(runs: Vec<RunData>) -> Result<Vec<MergedRun>, RunsError> {
    // Slot per output run: a plain run, or a group to merge.
    enum Slot {
        Plain(Box<RunData>),
        Group(String),
    }
    let mut slots = Vec::new();
    let mut groups: BTreeMap<String, Vec<RunData>> = BTreeMap::new();
    for run in runs {
        match run.manifest.as_ref().and_then(|m| m.shard.as_ref()) {
            Some(shard) => {
                let group = shard.group.clone();
                if !groups.contains_key(&group) {
                    slots.push(Slot::Group(group.clone()));
                }
                groups.entry(group).or_default().push(run);
            }
            None => slots.push(Slot::Plain(Box::new(run))),
        }
    }
    slots
        .into_iter()
        .map(|slot| match slot {
            Slot::Plain(run) => Ok(MergedRun {
                run: *run,
                shards: None,
            }),
            Slot::Group(group) => merge_group(&group, groups.remove(&group).unwrap_or_default()),
        })
        .collect()
}

fn shard_of(run: &RunData) -> (u32, u32) {
    run.manifest
        .as_ref()
        .and_then(|m| m.shard.as_ref())
        .map_or((0, 0), |s| (s.index, s.count))
}

/// The dataset digest a shard recorded, if it did.
fn rows_sha256(run: &RunData) -> Option<&str> {
    run.manifest
        .as_ref()
        .and_then(|m| m.shard.as_ref())
        .and_then(|s| s.dataset_sha256.as_deref())
}

/// Refuses shards that split different rows: the same dataset name and
/// row count can hide another file or another version of it, and pooled
/// records of different prompts are no run at all.
fn check_same_rows(group: &str, shards: &[RunData]) -> Result<(), RunsError> {
    let mut digests = shards.iter().filter_map(|r| rows_sha256(r).map(|d| (r, d)));
    let Some((first, want)) = digests.next() else {
        return Ok(());
    };
    for (run, got) in digests {
        if got != want {
            return Err(RunsError::Shards(format!(
                "the shards of run {group} split different rows under dataset {:?}: {} ran rows \
                 with sha256 {}..., {} rows with sha256 {}...; give every shard the same file \
                 (the same dataset version)",
                first.dataset,
                first.dir.display(),
                &want[..want.len().min(12)],
                run.dir.display(),
                &got[..got.len().min(12)]
            )));
        }
    }
    Ok(())
}

fn merge_group(group: &str, mut shards: Vec<RunData>) -> Result<MergedRun, RunsError> {
    shards.sort_by_key(|r| shard_of(r).0);
    check_fit(group, &shards)?;
    check_same_rows(group, &shards)?;
    let set = shard_set(group, &shards);
    let status = merged_status(&set);
    let dir = common_parent(shards.iter().map(|r| r.dir.as_path()));
    let (mut merged, records, mut manifest, mut warnings) = pool(group, set.count, shards);
    if let Some(m) = &mut manifest {
        // A shard that died leaves the merge `running` (it never ended);
        // a missing or unreadable shard makes it `unfinished`.
        m.status = match status {
            RunStatus::Died => RunStatus::Running,
            s => s,
        };
    }
    warnings.extend(set.notes.iter().cloned());
    merged.warnings = warnings;
    merged.dir = dir;
    merged.run_group = Some(group.to_string());
    merged.status = status;
    merged.status_reason = (!set.is_complete()).then(|| set.describe());
    merged.records = records;
    merged.manifest = manifest;
    merged.summary = None;
    merged.server = None;
    Ok(MergedRun {
        run: merged,
        shards: Some(set),
    })
}

/// Shards (sorted by index) that fit together: one shard count, no index
/// twice, one model and dataset.
fn check_fit(group: &str, shards: &[RunData]) -> Result<(), RunsError> {
    let bad = |m: String| Err(RunsError::Shards(m));
    for pair in shards.windows(2) {
        let ((i, n), (j, m)) = (shard_of(&pair[0]), shard_of(&pair[1]));
        if n != m {
            return bad(format!(
                "the shards of run {group} disagree on the shard count: {} says {n}, {} says {m}",
                pair[0].dir.display(),
                pair[1].dir.display()
            ));
        }
        if i == j {
            return bad(format!(
                "two directories claim shard {i}/{n} of run {group}: {} and {}",
                pair[0].dir.display(),
                pair[1].dir.display()
            ));
        }
    }
    for run in &shards[1..] {
        for (what, a, b) in [
            ("model", &shards[0].model, &run.model),
            ("dataset", &shards[0].dataset, &run.dataset),
        ] {
            if a != b {
                return bad(format!(
                    "the shards of run {group} disagree on the {what}: {} says {a:?}, {} says {b:?}",
                    shards[0].dir.display(),
                    run.dir.display()
                ));
            }
        }
    }
    Ok(())
}

/// The shards found and missing, with notes on options that differ and on
/// server exports that are not merged.
fn shard_set(group: &str, shards: &[RunData]) -> ShardSet {
    let (_, count) = shard_of(&shards[0]);
    let mut warnings = Vec::new();
    let first_config = shards[0].manifest.as_ref().map(|m| m.config.clone());
    for run in &shards[1..] {
        let config = run.manifest.as_ref().map(|m| &m.config);
        let differing = differing_keys(first_config.as_ref(), config);
        if !differing.is_empty() {
            warnings.push(format!(
                "shard {}/{count} ({}) was run with options other than shard {}'s ({}): {}",
                shard_of(run).0,
                run.dir.display(),
                shard_of(&shards[0]).0,
                shards[0].dir.display(),
                differing.join(", ")
            ));
        }
    }
    if shards.iter().any(|r| r.server.is_some()) {
        warnings.push(format!(
            "run {group}: the shards' server-metrics exports are not merged (each scraped the \
             server on its own, so their counters overlap); the merged run's numbers come from \
             its pooled records"
        ));
    }
    let present: Vec<u32> = shards.iter().map(|r| shard_of(r).0).collect();
    let missing: Vec<u32> = (0..count).filter(|i| !present.contains(i)).collect();
    let found: Vec<FoundShard> = shards
        .iter()
        .map(|r| FoundShard {
            index: shard_of(r).0,
            dir: r.dir.clone(),
            status: r.status,
            status_reason: r.status_reason.clone(),
            records: r
                .records
                .as_ref()
                .map(Vec::len)
                .or_else(|| r.digest.as_ref().map(|d| d.counts.total as usize)),
            start: r.manifest.as_ref().and_then(|m| m.start.clone()),
        })
        .collect();
    ShardSet {
        group: group.to_string(),
        count,
        found,
        missing,
        notes: warnings,
    }
}

/// A merged run's base, records, manifest and warnings.
type Pooled = (
    RunData,
    Option<Vec<speedbench_record::RequestRecord>>,
    Option<RunManifest>,
    Vec<String>,
);

/// The shards pooled: the lowest shard's run as the base, the union of
/// the records, one manifest (the group's id, the earliest start, the
/// latest end, the summed count) and every shard's warnings, named.
fn pool(group: &str, count: u32, shards: Vec<RunData>) -> Pooled {
    let mut records: Option<Vec<_>> = None;
    let mut digest: Option<RecordsDigest> = None;
    let mut manifest: Option<RunManifest> = None;
    let mut warnings = Vec::new();
    let mut first: Option<RunData> = None;
    for mut run in shards {
        let (index, _) = shard_of(&run);
        // In shard order, so the merged counts' first error is the
        // first shard's.
        if let Some(part) = run.records_digest() {
            digest
                .get_or_insert_with(RecordsDigest::default)
                .merge(&part);
        }
        if let Some(part) = run.records.take() {
            records.get_or_insert_with(Vec::new).extend(part);
        }
        warnings.extend(
            std::mem::take(&mut run.warnings)
                .into_iter()
                .map(|w| format!("shard {index}/{count}: {w}")),
        );
        if let Some(m) = &run.manifest {
            match &mut manifest {
                None => {
                    let mut m = m.clone();
                    m.run_id = group.to_string();
                    m.shard = None;
                    m.start = None;
                    manifest = Some(m);
                }
                Some(acc) => {
                    acc.started_unix_ns = acc.started_unix_ns.min(m.started_unix_ns);
                    acc.ended_unix_ns = acc.ended_unix_ns.max(m.ended_unix_ns);
                    acc.record_count += m.record_count;
                }
            }
        }
        first.get_or_insert(run);
    }
    let mut first = first.expect("a group has a shard");
    first.digest = digest;
    (first, records, manifest, warnings)
}

/// The worst of the shards' statuses; a missing shard, or one whose
/// records cannot be read, makes it at least [`RunStatus::Unfinished`].
fn merged_status(set: &ShardSet) -> RunStatus {
    let has = |s: RunStatus| set.found.iter().any(|f| f.status == s);
    for worst in [
        RunStatus::Failed,
        RunStatus::Died,
        RunStatus::Running,
        RunStatus::Interrupted,
        RunStatus::Unfinished,
    ] {
        if has(worst) {
            return worst;
        }
    }
    if set.is_complete() {
        RunStatus::Completed
    } else {
        RunStatus::Unfinished
    }
}

/// Top-level configuration keys whose values differ between two shards.
fn differing_keys(a: Option<&serde_json::Value>, b: Option<&serde_json::Value>) -> Vec<String> {
    let empty = serde_json::Map::new();
    let obj =
        |v: Option<&serde_json::Value>| v.and_then(|v| v.as_object()).unwrap_or(&empty).clone();
    let (a, b) = (obj(a), obj(b));
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect()
}

/// The deepest directory holding every shard directory (the parent of
/// them all when they are siblings).
fn common_parent<'a>(dirs: impl Iterator<Item = &'a Path>) -> PathBuf {
    let mut common: Option<PathBuf> = None;
    for dir in dirs {
        let parent = dir.parent().unwrap_or(dir).to_path_buf();
        common = Some(match common {
            None => parent,
            Some(c) => {
                let mut c = c;
                while !parent.starts_with(&c) {
                    if !c.pop() {
                        break;
                    }
                }
                c
            }
        });
    }
    common.unwrap_or_default()
}

/// Loads `path` as one run for a side of a comparison: a run directory
/// (merged with nothing, or, when it is a shard, shown with its sibling
/// shards missing), or a directory whose run directories are the shards
/// of one sharded run, merged. `None` when `path` holds neither (the
/// caller's own loader then says what is wrong).
///
/// `DIR#ID` picks the sharded run `ID` where `DIR` holds the shards of
/// several runs (the default `artifacts/<dataset>-ID-shardIofN` layout
/// puts every run's shards in one parent).
pub fn load_shard_group(path: &Path) -> Result<Option<MergedRun>, RunsError> {
    let (path, group) = crate::labels::split_group(path);
    let path = path.as_path();
    if !path.is_dir() {
        return Ok(None);
    }
    let dirs = match find_run_dirs(&[path.to_path_buf()]) {
        Ok(dirs) => dirs,
        Err(_) => return Ok(None),
    };
    // Only `run.json` is read to tell: a plain run's records are loaded
    // once, by the caller.
    let all_shards = dirs.iter().all(|d| {
        std::fs::read(d.join(RunManifest::FILE_NAME))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<RunManifest>(&bytes).ok())
            .is_some_and(|m| m.shard.is_some())
    });
    if !all_shards {
        return Ok(None);
    }
    let runs = dirs
        .iter()
        .map(|d| load_run(d))
        .collect::<Result<Vec<_>, _>>()?;
    let mut merged = merge_shards(runs)?;
    let groups: Vec<String> = merged
        .iter()
        .filter_map(|m| m.shards.as_ref().map(|s| s.group.clone()))
        .collect();
    if let Some(group) = &group {
        return match merged
            .iter()
            .position(|m| m.run.run_group.as_ref() == Some(group))
        {
            Some(i) => Ok(Some(merged.swap_remove(i))),
            None => Err(RunsError::Shards(format!(
                "{} holds no sharded run {group} (it holds {})",
                path.display(),
                groups.join(", ")
            ))),
        };
    }
    if merged.len() > 1 {
        return Err(RunsError::Shards(format!(
            "{} holds the shards of {} runs ({}), not of one; give the directory of one run's \
             shards, or pick one as {}#{}",
            path.display(),
            merged.len(),
            groups.join(", "),
            path.display(),
            groups.first().map_or("ID", String::as_str)
        )));
    }
    Ok(merged.pop())
}

#[cfg(test)]
mod tests {
    use speedbench_record::{RecordWriter, RequestRecord, RunShard};

    use super::*;

    /// Writes a shard run directory `name` under `parent` and loads it.
    fn shard(
        parent: &Path,
        name: &str,
        index: u32,
        count: u32,
        outcome: &str,
        records: u64,
    ) -> RunData {
        let dir = parent.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let manifest = RunManifest {
            run_id: format!("g-shard{index}of{count}"),
            model: "m".into(),
            status: outcome.parse().expect("a run status"),
            started_unix_ns: 100 + i64::from(index),
            ended_unix_ns: 200 + i64::from(index),
            record_count: records,
            config: serde_json::json!({"concurrency": 8}),
            shard: Some(RunShard {
                group: "g".into(),
                index,
                count,
                dataset_sha256: Some("ab".repeat(32)),
            }),
            ..Default::default()
        };
        let mut w = RecordWriter::create(dir.join("records.parquet")).unwrap();
        for i in 0..records {
            w.append(&RequestRecord {
                run_id: manifest.run_id.clone(),
                request_index: i,
                model: "m".into(),
                ..Default::default()
            })
            .unwrap();
        }
        w.close(&manifest).unwrap();
        std::fs::write(
            dir.join(RunManifest::FILE_NAME),
            serde_json::to_vec(&manifest).unwrap(),
        )
        .unwrap();
        load_run(&dir).unwrap()
    }

    #[test]
    fn shards_merge_into_their_union() {
        let t = tempfile::tempdir().unwrap();
        let runs = vec![
            shard(t.path(), "b", 1, 2, "completed", 3),
            shard(t.path(), "a", 0, 2, "completed", 2),
        ];
        let merged = merge_shards(runs).unwrap();
        assert_eq!(merged.len(), 1);
        let (run, set) = (&merged[0].run, merged[0].shards.as_ref().unwrap());
        assert!(set.is_complete(), "{:?}", set.problems());
        assert_eq!(set.describe(), "merged 2 shards of run g");
        assert_eq!(run.status, RunStatus::Completed);
        assert_eq!(run.status_reason, None);
        assert_eq!(run.dir, t.path());
        // Shard order, each record keeping its shard's run id.
        let ids: Vec<&str> = run
            .records
            .as_ref()
            .unwrap()
            .iter()
            .map(|r| r.run_id.as_str())
            .collect();
        assert_eq!(
            ids,
            ["g-shard0of2"; 2]
                .into_iter()
                .chain(["g-shard1of2"; 3])
                .collect::<Vec<_>>()
        );
        let m = run.manifest.as_ref().unwrap();
        assert_eq!(
            (m.run_id.as_str(), m.shard.as_ref(), m.status.as_str()),
            ("g", None, "completed")
        );
        assert_eq!(
            (m.started_unix_ns, m.ended_unix_ns, m.record_count),
            (100, 201, 5)
        );
    }

    #[test]
    fn a_failed_or_missing_shard_is_named_and_the_merge_incomplete() {
        let t = tempfile::tempdir().unwrap();
        let runs = vec![
            shard(t.path(), "s0", 0, 4, "completed", 1),
            shard(t.path(), "s1", 1, 4, "failed", 1),
            shard(t.path(), "s3", 3, 4, "completed", 1),
        ];
        let merged = merge_shards(runs).unwrap();
        let run = &merged[0].run;
        assert_eq!(run.status, RunStatus::Failed);
        let why = run.status_reason.as_deref().unwrap();
        assert!(
            why.contains("merged 3 of 4 shards of run g; INCOMPLETE"),
            "{why}"
        );
        assert!(why.contains("shard 2/4 of run g is missing"), "{why}");
        assert!(why.contains("shard 1/4 ("), "{why}");
        assert!(why.contains("is failed"), "{why}");
        assert_eq!(run.manifest.as_ref().unwrap().status, "failed");
        assert_eq!(merged[0].shards.as_ref().unwrap().missing, [2]);
    }

    #[test]
    fn shards_that_do_not_fit_together_are_refused() {
        let t = tempfile::tempdir().unwrap();
        let twice = vec![
            shard(t.path(), "x", 1, 2, "completed", 1),
            shard(t.path(), "y", 1, 2, "completed", 1),
        ];
        let e = merge_shards(twice).unwrap_err().to_string();
        assert!(
            e.contains("two directories claim shard 1/2 of run g"),
            "{e}"
        );
        let counts = vec![
            shard(t.path(), "p", 0, 2, "completed", 1),
            shard(t.path(), "q", 1, 3, "completed", 1),
        ];
        let e = merge_shards(counts).unwrap_err().to_string();
        assert!(e.contains("disagree on the shard count"), "{e}");
    }

    #[test]
    fn shards_of_different_rows_are_refused_and_old_ones_without_a_digest_merge() {
        let t = tempfile::tempdir().unwrap();
        let mut other = shard(t.path(), "b", 1, 2, "completed", 1);
        if let Some(s) = other.manifest.as_mut().and_then(|m| m.shard.as_mut()) {
            s.dataset_sha256 = Some("cd".repeat(32));
        }
        let e = merge_shards(vec![shard(t.path(), "a", 0, 2, "completed", 1), other])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("the shards of run g split different rows")
                && e.contains("sha256 abababababab...")
                && e.contains("sha256 cdcdcdcdcdcd..."),
            "{e}"
        );
        // A manifest from before the digest was recorded: nothing to check.
        let mut old = shard(t.path(), "d", 1, 2, "completed", 1);
        if let Some(s) = old.manifest.as_mut().and_then(|m| m.shard.as_mut()) {
            s.dataset_sha256 = None;
        }
        assert!(merge_shards(vec![shard(t.path(), "c", 0, 2, "completed", 1), old]).is_ok());
    }

    #[test]
    fn differing_options_are_named() {
        let a = serde_json::json!({"concurrency": 8, "osl": 1});
        let b = serde_json::json!({"concurrency": 4, "osl": 1, "x": true});
        assert_eq!(differing_keys(Some(&a), Some(&b)), ["concurrency", "x"]);
        assert!(differing_keys(Some(&a), Some(&a)).is_empty());
    }
}
