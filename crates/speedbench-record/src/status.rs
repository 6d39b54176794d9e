//! [`RunStatus`]: how a run ended, the one type for it everywhere: the
//! client judges a run with it, `run.json`'s `outcome` and `summary.json`
//! store it (as its word), and a reader of run directories tells it.

use std::fmt;

/// How a run ended (or that it has not).
///
/// A run writes [`Running`](RunStatus::Running) when it starts and one of
/// [`Completed`](RunStatus::Completed), [`Interrupted`](RunStatus::Interrupted)
/// or [`Failed`](RunStatus::Failed) when it ends; a reader of a run
/// directory may find two more that no run writes:
/// [`Died`](RunStatus::Died) and [`Unfinished`](RunStatus::Unfinished).
///
/// ```
/// use speedbench_record::RunStatus;
///
/// let status: RunStatus = "interrupted".parse().unwrap();
/// assert_eq!(status, RunStatus::Interrupted);
/// assert_eq!(serde_json::to_string(&status).unwrap(), "\"interrupted\"");
/// assert!(!status.is_complete());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RunStatus {
    /// Every planned request was sent and the error rate was acceptable
    /// (also assumed for run directories written before the outcome was
    /// recorded).
    Completed,
    /// The run is in progress: a process holds its lock.
    Running,
    /// Stopped by a signal before the planned work was done (speedbench's
    /// `interrupted`, AIPerf's `was_cancelled`).
    Interrupted,
    /// No request succeeded, the error rate passed its limit, or a file
    /// could not be written (the reason is kept beside it).
    Failed,
    /// `run.json` says `running` but no process holds the run's lock: the
    /// process died (SIGKILL, out of memory, a full disk).
    Died,
    /// The records were never closed and renamed (only
    /// `records.parquet.partial` exists), or AIPerf says the run is not
    /// complete.
    Unfinished,
}

impl RunStatus {
    /// Every status, in the order above.
    pub const ALL: [RunStatus; 6] = [
        RunStatus::Completed,
        RunStatus::Running,
        RunStatus::Interrupted,
        RunStatus::Failed,
        RunStatus::Died,
        RunStatus::Unfinished,
    ];

    /// Its word: in `run.json`, `summary.json`, the `Status` column and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Completed => "completed",
            RunStatus::Running => "running",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
            RunStatus::Died => "died",
            RunStatus::Unfinished => "unfinished",
        }
    }

    /// True only for [`RunStatus::Completed`].
    pub fn is_complete(self) -> bool {
        self == RunStatus::Completed
    }
}

/// [`RunStatus::Completed`]: what a run directory that recorded no outcome
/// (written before outcomes were) is taken to be.
impl Default for RunStatus {
    fn default() -> RunStatus {
        RunStatus::Completed
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status equals its word (`status == "completed"`).
impl PartialEq<&str> for RunStatus {
    fn eq(&self, word: &&str) -> bool {
        self.as_str() == *word
    }
}

impl std::str::FromStr for RunStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<RunStatus, String> {
        RunStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                let words: Vec<&str> = RunStatus::ALL.iter().map(|s| s.as_str()).collect();
                format!("{s:?} is not a run status ({})", words.join(", "))
            })
    }
}

impl serde::Serialize for RunStatus {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for RunStatus {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<RunStatus, D::Error> {
        let word = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        if word.is_empty() {
            // No outcome recorded: see `Default`.
            return Ok(RunStatus::default());
        }
        word.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_status_round_trips_through_its_word() {
        for status in RunStatus::ALL {
            assert_eq!(status.as_str().parse::<RunStatus>(), Ok(status));
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(serde_json::from_str::<RunStatus>(&json).unwrap(), status);
        }
        let e = serde_json::from_str::<RunStatus>("\"done\"").unwrap_err();
        assert!(e.to_string().contains("not a run status"), "{e}");
    }
}
