//! A shard's share of a run: its conversations and its load, from the
//! unsharded ones (the rule is `crate::shard`'s documentation). Here, not
//! in `shard`, so that the shard types import nothing of the runner.

use speedbench_dataset::Dataset;

use crate::error::ClientError;
use crate::runner::Load;
use crate::shard::Shard;

impl Shard {
    /// The dataset and load this shard runs, from the unsharded ones (see
    /// the module documentation for the rule). The shard's dataset holds
    /// the conversations of its sessions in order (`(I + kN) mod n` for
    /// `k = 0, 1, ...`, one period), so its local session `k` is global
    /// session `I + kN`; its load keeps the request rate and the seed (the
    /// arrival schedule thins itself by [`Load::shard`]).
    pub(crate) fn plan(
        self,
        dataset: &Dataset,
        load: &Load,
    ) -> Result<(Dataset, Load), ClientError> {
        let n = dataset.conversations.len() as u64;
        if n == 0 {
            return Err(ClientError::EmptyDataset(dataset.name.clone()));
        }
        let local_dataset = self.conversations_of(dataset);
        let mut local = load.clone();
        let none_left = |what: String| {
            Err(ClientError::InvalidLoad(format!(
                "{what} over {} shards leaves shard {self} with nothing to run; use at most as many shards",
                self.count()
            )))
        };
        if load.request_rate.is_none() {
            let c = self.share(load.concurrency as u64);
            if c == 0 {
                return none_left(format!("concurrency {}", load.concurrency));
            }
            local.concurrency = c as usize;
        }
        if let Some(m) = load.max_concurrency {
            let m_local = self.share(m as u64);
            if m_local == 0 {
                return none_left(format!("maximum concurrency {m}"));
            }
            local.max_concurrency = Some(m_local as usize);
        }
        local.warmup_request_count = self.share(load.warmup_request_count);
        // A shard too small for a warmup worker of its own warms up with one.
        local.warmup_concurrency = load
            .warmup_concurrency
            .map(|c| (self.share(c as u64) as usize).max(1));
        match (load.num_conversations, load.request_count) {
            (None, None) if load.benchmark_duration.is_some() => {}
            (sessions, None) => {
                let c = sessions.unwrap_or(n);
                let mine = self.share(c);
                if mine == 0 {
                    return none_left(format!("{c} conversations"));
                }
                local.num_conversations = Some(mine);
            }
            (sessions, Some(r)) => {
                let (sent, my_sessions, my_turns) = self.walk_turns(dataset, sessions, r);
                if my_turns == 0 {
                    return none_left(format!("{} requests", sent.min(r)));
                }
                local.num_conversations = Some(my_sessions);
                local.request_count = Some(my_turns);
            }
        }
        Ok((local_dataset, local))
    }
}

impl Shard {
    /// This shard's conversations, one period of its sessions in order
    /// (`(I + kN) mod n`); `dataset` holds at least one.
    fn conversations_of(self, dataset: &Dataset) -> Dataset {
        let n = dataset.conversations.len() as u64;
        let big_n = u64::from(self.count());
        let index = u64::from(self.index());
        let period = n / gcd(n, big_n);
        Dataset {
            name: dataset.name.clone(),
            conversations: (0..period)
                .map(|k| dataset.conversations[((index + k * big_n) % n) as usize].clone())
                .collect(),
        }
    }

    /// The first `r` turns of the sessions in order (at most `sessions`):
    /// the turns walked, and this shard's sessions and turns among them. A
    /// dataset of turnless rows can never reach `r`, so the walk also
    /// stops after the session limit or one dataset's worth of sessions
    /// without a turn.
    fn walk_turns(self, dataset: &Dataset, sessions: Option<u64>, r: u64) -> (u64, u64, u64) {
        let n = dataset.conversations.len() as u64;
        let turns = |s: u64| dataset.conversations[(s % n) as usize].turns.len() as u64;
        let (mut sent, mut s, mut my_sessions, mut my_turns) = (0u64, 0u64, 0u64, 0u64);
        let mut idle = 0u64;
        while sent < r && sessions.is_none_or(|c| s < c) && idle < n {
            let t = turns(s).min(r - sent);
            idle = if t == 0 { idle + 1 } else { 0 };
            if self.owns(s) {
                my_sessions += 1;
                my_turns += t;
            }
            sent += t;
            s += 1;
        }
        (sent, my_sessions, my_turns)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 { a } else { gcd(b, a % b) }
}
