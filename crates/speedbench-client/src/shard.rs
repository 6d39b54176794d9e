//! Sharded runs: one process runs a deterministic share of a run's work,
//! and every shard can start its measured phase at one shared instant.
//!
//! # How a run splits
//!
//! A run's work is a sequence of *sessions* `0, 1, 2, ...`; session `s`
//! runs conversation `s mod n` of the dataset (`n` rows, after any
//! category selection and `--limit`), every turn in order. Shard `I` of
//! `N` runs exactly the sessions `s` with `s mod N == I`, in order, so
//! a multi-turn conversation always stays whole on one shard and the N
//! shards together run every session of the unsharded plan once:
//!
//! - every row once (the default), or `num_conversations = C`: shard `I`
//!   runs the sessions `s < C` it owns, `ceil((C - I) / N)` of them;
//! - `request_count = R`: the unsharded plan is the first `R` turns of the
//!   sessions in order (the last session cut short if `R` falls inside
//!   it); shard `I` runs its sessions of that prefix and exactly the turns
//!   of it they hold, so the shards' request counts sum to `R`;
//! - a benchmark duration alone: every shard recycles its own sessions
//!   until the duration (as given, not divided) runs out;
//! - closed loop: concurrency `C` becomes `C / N` per shard, the first
//!   `C mod N` shards one more; `max_concurrency` splits the same way, and
//!   so does the warmup request count;
//! - open loop (`request_rate = R`): every shard draws the same seeded
//!   arrival schedule at rate `R` and keeps the arrivals whose index `j`
//!   has `j mod N == I` (arrival `j` starts session `j`, as unsharded), so
//!   the union of the shards' arrivals is the unsharded schedule, offset
//!   for offset, and each shard starts `R / N` conversations per second
//!   on average.
//!
//! A split that leaves a shard with nothing to do (concurrency, requests
//! or conversations fewer than the shards) is refused.

use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::ClientError;

/// Shard `index` of `count` (`0 <= index < count`), parsed from `"I/N"`.
///
/// ```
/// use speedbench_client::Shard;
/// let shard: Shard = "2/4".parse()?;
/// assert_eq!((shard.index(), shard.count()), (2, 4));
/// assert_eq!(shard.to_string(), "2/4");
/// assert_eq!(shard.run_id("bench1"), "bench1-shard2of4");
/// // Concurrency 10 over 4 shards: 3, 3, 2, 2.
/// assert_eq!(shard.share(10), 2);
/// assert!("4/4".parse::<Shard>().is_err());
/// # Ok::<(), speedbench_client::ClientError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Shard {
    /// Shard `index` of `count`; refused unless `count >= 1` and
    /// `index < count`.
    pub fn new(index: u32, count: u32) -> Result<Shard, ClientError> {
        if count == 0 {
            return Err(ClientError::InvalidLoad(
                "a run splits into at least 1 shard (N >= 1 in --shard I/N)".into(),
            ));
        }
        if index >= count {
            return Err(ClientError::InvalidLoad(format!(
                "shard index {index} is not below the shard count {count} (indices run 0 to {})",
                count - 1
            )));
        }
        Ok(Shard { index, count })
    }

    /// This shard's index, `0..count`.
    pub fn index(self) -> u32 {
        self.index
    }

    /// How many shards the run splits into.
    pub fn count(self) -> u32 {
        self.count
    }

    /// True when session `session` of the unsharded plan is this shard's.
    pub fn owns(self, session: u64) -> bool {
        session % u64::from(self.count) == u64::from(self.index)
    }

    /// This shard's share of `total` interchangeable units (workers,
    /// warmup requests): `total / N`, plus one on the first `total mod N`
    /// shards. The shares of the N shards sum to `total`.
    pub fn share(self, total: u64) -> u64 {
        let n = u64::from(self.count);
        total / n + u64::from(u64::from(self.index) < total % n)
    }

    /// The run id of this shard of the run `group`:
    /// `{group}-shard{index}of{count}`.
    pub fn run_id(self, group: &str) -> String {
        format!("{group}-shard{}of{}", self.index, self.count)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl std::str::FromStr for Shard {
    type Err = ClientError;

    /// `I/N`: shard `I` (from 0) of `N`.
    fn from_str(s: &str) -> Result<Shard, ClientError> {
        let bad = |why: &str| ClientError::InvalidLoad(format!("shard {s:?}: {why}"));
        let (i, n) = s
            .split_once('/')
            .ok_or_else(|| bad("not I/N (shard index from 0, a slash, the shard count)"))?;
        let i = i
            .trim()
            .parse::<u32>()
            .map_err(|e| bad(&format!("the index is not a whole number ({e})")))?;
        let n = n
            .trim()
            .parse::<u32>()
            .map_err(|e| bad(&format!("the count is not a whole number ({e})")))?;
        Shard::new(i, n)
    }
}

/// What a run waits for before its measured phase (after its warmup), so
/// that the shards of one run start together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartBarrier {
    /// Start at this wall-clock instant, nanoseconds since the Unix epoch
    /// (at once, late, when the warmup ends after it).
    At(i64),
    /// Start once this file exists (polled every 5 ms); the planned start
    /// is the file's modification time. A URL barrier is not supported.
    File(PathBuf),
}

/// How often a [`StartBarrier::File`] is looked for.
const BARRIER_POLL: Duration = Duration::from_millis(5);

impl StartBarrier {
    /// A barrier at `seconds` since the Unix epoch (fractions allowed).
    ///
    /// ```
    /// use speedbench_client::StartBarrier;
    /// assert_eq!(StartBarrier::at_unix_seconds(1.5)?, StartBarrier::At(1_500_000_000));
    /// assert!(StartBarrier::at_unix_seconds(-1.0).is_err());
    /// # Ok::<(), speedbench_client::ClientError>(())
    /// ```
    pub fn at_unix_seconds(seconds: f64) -> Result<StartBarrier, ClientError> {
        if !(0.0..9.2e9).contains(&seconds) {
            return Err(ClientError::InvalidLoad(format!(
                "start time {seconds}: not a Unix time in seconds"
            )));
        }
        Ok(StartBarrier::At((seconds * 1e9).round() as i64))
    }

    /// How it is recorded in `run.json`'s `start.barrier`: `at` or
    /// `file:PATH`.
    pub fn describe(&self) -> String {
        match self {
            StartBarrier::At(_) => "at".into(),
            StartBarrier::File(p) => format!("file:{}", p.display()),
        }
    }

    /// Waits until the barrier opens and returns the planned start
    /// (nanoseconds since the Unix epoch).
    pub(crate) async fn wait(&self) -> i64 {
        match self {
            StartBarrier::At(at) => {
                let now = unix_now_ns();
                if *at > now {
                    tokio::time::sleep(Duration::from_nanos((*at - now) as u64)).await;
                }
                *at
            }
            StartBarrier::File(path) => loop {
                if let Ok(meta) = std::fs::metadata(path) {
                    // Without a readable modification time the planned
                    // start is the moment the file was seen.
                    return meta
                        .modified()
                        .ok()
                        .and_then(|m| m.duration_since(UNIX_EPOCH).ok())
                        .map_or_else(unix_now_ns, |d| d.as_nanos() as i64);
                }
                tokio::time::sleep(BARRIER_POLL).await;
            },
        }
    }
}

pub(crate) fn unix_now_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

#[cfg(test)]
mod tests {
    use speedbench_dataset::{Conversation, Dataset};

    use super::*;
    use crate::runner::Load;
    use crate::schedule::{Arrival, ArrivalSchedule};

    fn dataset(turns: &[usize]) -> Dataset {
        Dataset {
            name: "d".into(),
            conversations: turns
                .iter()
                .enumerate()
                .map(|(i, &n)| Conversation {
                    id: format!("c{i}"),
                    category: None,
                    preamble: vec![],
                    turns: (0..n).map(|t| format!("c{i} turn {t}")).collect(),
                    ..Default::default()
                })
                .collect(),
        }
    }

    /// What the runner sends at concurrency 1: sessions in order
    /// (session `s` runs row `s mod n`), every turn, no more sessions than
    /// the plan's and no more requests than its request count. Each
    /// request as (session, row id, turn text).
    fn expand(dataset: &Dataset, load: &Load) -> Vec<(u64, String, String)> {
        let n = dataset.conversations.len() as u64;
        let sessions = match (load.num_conversations, load.request_count) {
            (Some(c), _) => c,
            (None, Some(_)) => u64::MAX,
            (None, None) => n,
        };
        let limit = load.request_count.unwrap_or(u64::MAX);
        let mut out = Vec::new();
        let mut s = 0;
        while s < sessions && (out.len() as u64) < limit {
            let conv = &dataset.conversations[(s % n) as usize];
            for t in &conv.turns {
                if out.len() as u64 == limit {
                    break;
                }
                out.push((s, conv.id.clone(), t.clone()));
            }
            s += 1;
        }
        out
    }

    /// The union of the N shards' expanded plans, each local session `k`
    /// of shard `I` renamed to its global session `I + kN`, in global
    /// order.
    fn union(dataset: &Dataset, load: &Load, count: u32) -> Vec<(u64, String, String)> {
        let mut all = Vec::new();
        for i in 0..count {
            let shard = Shard::new(i, count).unwrap();
            let (d, l) = shard.plan(dataset, load).unwrap();
            for (k, id, turn) in expand(&d, &l) {
                let global = u64::from(i) + k * u64::from(count);
                assert!(shard.owns(global));
                all.push((global, id, turn));
            }
        }
        // Sessions in order, turns in order within each (stable sort).
        all.sort_by_key(|(s, _, _)| *s);
        all
    }

    #[test]
    fn the_union_of_the_shards_plans_is_the_unsharded_plan() {
        // Multi-turn rows of 1 to 4 turns, 7 rows.
        let d = dataset(&[2, 1, 3, 1, 4, 1, 2]);
        let loads = [
            Load::closed_loop(8),
            Load::closed_loop(8).with_num_conversations(23),
            Load::closed_loop(8).with_request_count(31),
            // Session 4 (row 4, 4 turns) cut after its first turn.
            Load::closed_loop(8).with_request_count(8),
            Load::closed_loop(8)
                .with_num_conversations(9)
                .with_request_count(13),
            Load::closed_loop(8)
                .with_num_conversations(9)
                .with_request_count(1000),
            Load::request_rate(10.0).with_num_conversations(12),
        ];
        for load in &loads {
            let whole = expand(&d, load);
            for count in [1, 2, 3, 4] {
                let got = union(&d, load, count);
                assert_eq!(got, whole, "{count} shards of {load:?}");
                let planned: u64 = (0..count)
                    .map(|i| {
                        let (d, l) = Shard::new(i, count).unwrap().plan(&d, load).unwrap();
                        crate::runner::planned_requests(&d, &l).1
                    })
                    .sum();
                assert_eq!(
                    planned,
                    crate::runner::planned_requests(&d, load).1,
                    "{count} shards of {load:?}"
                );
            }
        }
    }

    #[test]
    fn a_cut_conversation_keeps_its_first_turns_on_one_shard() {
        // Rows of 3 turns; 7 requests: sessions 0 and 1 whole, session 2
        // cut after its first turn, all on the shards that own them.
        let d = dataset(&[3, 3]);
        let load = Load::closed_loop(4).with_request_count(7);
        let plans: Vec<_> = (0..2)
            .map(|i| Shard::new(i, 2).unwrap().plan(&d, &load).unwrap().1)
            .collect();
        assert_eq!(
            plans
                .iter()
                .map(|l| (l.num_conversations, l.request_count, l.concurrency))
                .collect::<Vec<_>>(),
            [(Some(2), Some(4), 2), (Some(1), Some(3), 2)]
        );
    }

    #[test]
    fn shares_sum_to_the_whole_and_empty_shards_are_refused() {
        for total in 0..20u64 {
            for count in 1..6 {
                let sum: u64 = (0..count)
                    .map(|i| Shard::new(i, count).unwrap().share(total))
                    .sum();
                assert_eq!(sum, total);
            }
        }
        let d = dataset(&[1, 1, 1]);
        let err = |load: Load| {
            Shard::new(3, 4)
                .unwrap()
                .plan(&d, &load)
                .unwrap_err()
                .to_string()
        };
        assert!(err(Load::closed_loop(3)).contains("concurrency 3 over 4 shards"));
        // Three rows, once each: shard 3 of 4 would get none.
        assert!(err(Load::closed_loop(4)).contains("3 conversations"));
        assert!(err(Load::closed_loop(4).with_request_count(2)).contains("2 requests"));
        assert!(
            err(Load::request_rate(1.0)
                .with_max_concurrency(2)
                .with_num_conversations(8))
            .contains("maximum concurrency 2")
        );
        // A duration alone gives every shard work.
        let timed = Load::closed_loop(4).with_benchmark_duration(Duration::from_secs(1));
        let (_, l) = Shard::new(3, 4).unwrap().plan(&d, &timed).unwrap();
        assert_eq!((l.num_conversations, l.request_count), (None, None));
    }

    #[test]
    fn the_shards_dataset_holds_its_sessions_rows_in_order() {
        // 6 rows over 4 shards: shard 1 runs sessions 1, 5, 9, 13, ...,
        // rows 1, 5, 3, 1, 5, 3, ... (period 6 / gcd(6, 4) = 3).
        let d = dataset(&[1; 6]);
        let (local, _) = Shard::new(1, 4)
            .unwrap()
            .plan(&d, &Load::closed_loop(4).with_num_conversations(40))
            .unwrap();
        let ids: Vec<&str> = local.conversations.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["c1", "c5", "c3"]);
    }

    #[test]
    fn parsing_names_what_is_wrong() {
        let err = |s: &str| s.parse::<Shard>().unwrap_err().to_string();
        assert!(err("2").contains("not I/N"));
        assert!(err("x/4").contains("index is not a whole number"));
        assert!(err("1/y").contains("count is not a whole number"));
        assert!(err("0/0").contains("at least 1 shard"));
        assert!(err("4/4").contains("not below the shard count 4"));
        assert_eq!(
            " 3 / 4 ".trim().parse::<Shard>().unwrap(),
            Shard::new(3, 4).unwrap()
        );
    }

    #[test]
    fn the_union_of_the_thinned_schedules_is_the_unsharded_schedule() {
        for arrival in [Arrival::Poisson, Arrival::Constant] {
            let whole: Vec<Duration> = ArrivalSchedule::new(40.0, arrival, 7).take(4000).collect();
            for count in [1u32, 2, 3, 4, 7] {
                let mut merged: Vec<(Duration, u32)> = Vec::new();
                for i in 0..count {
                    let shard = Shard::new(i, count).unwrap();
                    let mine: Vec<Duration> = ArrivalSchedule::new(40.0, arrival, 7)
                        .with_shard(shard)
                        .take(4000 / count as usize + 1)
                        .collect();
                    // Shard I's k-th arrival is arrival I + kN of the whole.
                    for (k, at) in mine.iter().enumerate() {
                        let j = i as usize + k * count as usize;
                        if j < whole.len() {
                            assert_eq!(
                                *at, whole[j],
                                "{arrival:?}, shard {i}/{count}, arrival {k}"
                            );
                            merged.push((*at, i));
                        }
                    }
                }
                merged.sort();
                let offsets: Vec<Duration> = merged.iter().map(|(d, _)| *d).collect();
                assert_eq!(offsets, whole, "{arrival:?} over {count} shards");
            }
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_file_barrier_opens_when_the_file_appears_and_plans_its_mtime() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("go");
        let barrier = StartBarrier::File(path.clone());
        assert_eq!(barrier.describe(), format!("file:{}", path.display()));
        let waiting = tokio::spawn(async move { barrier.wait().await });
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "no file yet");
        std::fs::write(&path, b"").unwrap();
        let planned = waiting.await.unwrap();
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        let want = mtime.duration_since(UNIX_EPOCH).unwrap().as_nanos() as i64;
        assert_eq!(planned, want);
        // An instant already past opens at once and is the planned start.
        assert_eq!(StartBarrier::At(5).wait().await, 5);
    }
}
