//! User-centric pacing: see [`UserCentric`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

/// User-centric pacing (AIPerf's `--user-centric-rate` with `--num-users`):
/// a steady population of users holding multi-turn conversations, each
/// user's turns a fixed gap apart, for benchmarking a prefix (KV) cache
/// under realistic reuse: gaps too short keep the cache warm, too long let
/// it evict.
///
/// With `users` users and a total `rate` (requests per second), each user
/// sends a turn every `turn_gap = users / rate` seconds, after the reply
/// to the last one if that came later. The run opens in a steady state
/// rather than with every user at turn 1: with `L` = the dataset's mean
/// turns per conversation less one (at least 1), user `i` of `users` has
/// already lived `(users - i) · L / users` of its `L` gaps and sends only
/// the turns left; the first user has none, and a new user with every
/// turn takes its place at once. The first turns are staggered `1 / rate`
/// apart in an order that spreads users of similar age; each user, when
/// it starts, books its successor `turns · turn_gap` later, so users join
/// as others leave whatever the server's speed (an open loop). This is
/// AIPerf 0.13.0's `UserCentricStrategy`, step for step, except that the
/// k-th user to start takes the k-th conversation (AIPerf hands them out
/// in the order the users were made).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UserCentric {
    /// Users at once (AIPerf's `--num-users`), at least 1.
    pub users: usize,
    /// Requests per second over all of them (AIPerf's
    /// `--user-centric-rate`), above 0.
    pub rate: f64,
}

/// One user's start: when it sends its first turn, from the phase's
/// start, and how many turns it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserStart {
    /// Its first turn's send time, from the phase's start.
    pub at: Duration,
    /// How many of its conversation's turns it sends (a user of the
    /// opening steady state has fewer left than its conversation holds).
    pub turns: usize,
}

impl UserCentric {
    /// The time between one user's turns: `users / rate`.
    ///
    /// ```
    /// use std::time::Duration;
    /// use speedbench_client::UserCentric;
    /// let u = UserCentric { users: 30, rate: 2.0 };
    /// assert_eq!(u.turn_gap(), Duration::from_secs(15));
    /// ```
    pub fn turn_gap(&self) -> Duration {
        Duration::from_secs_f64(self.users as f64 / self.rate)
    }

    /// Why these values cannot run, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.users == 0 {
            return Err("at least one user is needed (--num-users)".into());
        }
        if !(self.rate.is_finite() && self.rate > 0.0) {
            return Err(format!(
                "the rate must be a number above 0 (--user-centric-rate), not {}",
                self.rate
            ));
        }
        Ok(())
    }

    /// The users' starts in time order, forever (a phase's duration or
    /// counts end it). `turns_of(k)` is the number of turns in the
    /// conversation the `k`-th user to start takes; `mean_turns` is the
    /// dataset's mean turns per conversation.
    ///
    /// ```
    /// use speedbench_client::UserCentric;
    /// // 3 users at 1 request/s, conversations of 4 turns: a gap of 3 s.
    /// let u = UserCentric { users: 3, rate: 1.0 };
    /// let starts: Vec<_> = u.schedule(Box::new(|_| 4), 4.0).take(4).collect();
    /// let at: Vec<_> = starts.iter().map(|s| (s.at.as_secs(), s.turns)).collect();
    /// // A new user at 0 s with all 4 turns; two mid-session users with 1 and 2
    /// // turns left at 1 s and 2 s; the first of them is done at 1 + 1·3 = 4 s.
    /// assert_eq!(at, [(0, 4), (1, 1), (2, 2), (4, 4)]);
    /// ```
    pub fn schedule(
        &self,
        turns_of: Box<dyn Fn(u64) -> usize + Send>,
        mean_turns: f64,
    ) -> UserSchedule {
        UserSchedule {
            opening: self.opening(mean_turns).into_iter(),
            joins: BinaryHeap::new(),
            stagger: Duration::from_secs_f64(1.0 / self.rate),
            gap: self.turn_gap(),
            started: 0,
            turns_of,
        }
    }

    /// The opening steady state: each user's place in the stagger and its
    /// turns left (`None`: a new user, every turn of its conversation), in
    /// the order they start.
    fn opening(&self, mean_turns: f64) -> Vec<(u64, Option<usize>)> {
        let n = self.users;
        // Python's round(): halves to even.
        let lifetime = ((mean_turns.round_ties_even() as usize).saturating_sub(1)).max(1);
        let step = (gcd(n, lifetime) > 1).then(|| coprime_step(n));
        let mut users: Vec<(u64, Option<usize>)> = (0..n)
            .filter_map(|i| {
                let age = (n - i) * lifetime;
                let left = lifetime - (age / n).min(lifetime);
                let slot = match step {
                    Some(step) => (i * step) % n,
                    None => age % n,
                };
                (left > 0).then_some(((n - slot) as u64, Some(left)))
            })
            .collect();
        // The user who finished just before the start is replaced at once.
        users.push((0, None));
        users.sort_by_key(|u| u.0);
        users
    }
}

/// The smallest step above 1 coprime with `n` (1 for `n` <= 2): stepping
/// by it visits every slot of `n` once.
fn coprime_step(n: usize) -> usize {
    (2..n).find(|&s| gcd(n, s) == 1).unwrap_or(1)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// The users' starts in time order ([`UserCentric::schedule`]).
pub struct UserSchedule {
    opening: std::vec::IntoIter<(u64, Option<usize>)>,
    /// When the users who will replace those started so far join.
    joins: BinaryHeap<Reverse<Duration>>,
    stagger: Duration,
    gap: Duration,
    started: u64,
    turns_of: Box<dyn Fn(u64) -> usize + Send>,
}

impl std::fmt::Debug for UserSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserSchedule")
            .field("started", &self.started)
            .field("gap", &self.gap)
            .finish_non_exhaustive()
    }
}

impl Iterator for UserSchedule {
    type Item = UserStart;

    fn next(&mut self) -> Option<UserStart> {
        let k = self.started;
        // Every opening user starts by `users · stagger`, no later than
        // the first join (at least one gap after a start): the opening
        // comes first.
        let (at, left) = match self.opening.next() {
            Some((place, left)) => (self.stagger * place as u32, left),
            None => (self.joins.pop()?.0, None),
        };
        let turns = left.unwrap_or_else(|| (self.turns_of)(k));
        self.started += 1;
        self.joins.push(Reverse(at + self.gap * turns as u32));
        Some(UserStart { at, turns })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starts(users: usize, rate: f64, turns: usize, n: usize) -> Vec<(f64, usize)> {
        let u = UserCentric { users, rate };
        u.schedule(Box::new(move |_| turns), turns as f64)
            .take(n)
            .map(|s| (s.at.as_secs_f64(), s.turns))
            .collect()
    }

    /// AIPerf's docstring example: 15 users, 20 turns, 1 request/s.
    #[test]
    fn the_opening_matches_aiperfs_worked_example() {
        let got = starts(15, 1.0, 20, 15);
        // (send time, turns) as AIPerf's table lists users 16, 5, 9, ...
        let table = [
            (0.0, 20),
            (1.0, 6),
            (2.0, 11),
            (3.0, 16),
            (4.0, 2),
            (5.0, 7),
            (6.0, 12),
            (7.0, 17),
            (8.0, 3),
            (9.0, 8),
            (10.0, 13),
            (11.0, 18),
            (12.0, 4),
            (13.0, 9),
            (14.0, 14),
        ];
        assert_eq!(got, table);
    }

    /// The gap is 15 s: the user who started at 4 s with 2 turns is
    /// replaced at 4 + 2·15 = 34 s, the first join; then 8 + 3·15 = 53 s.
    #[test]
    fn each_start_books_its_successor_turns_times_the_gap_later() {
        let got = starts(15, 1.0, 20, 17);
        assert_eq!(got[15], (34.0, 20));
        assert_eq!(got[16], (53.0, 20));
        // Joins take their conversation's own turn count.
        let u = UserCentric {
            users: 2,
            rate: 1.0,
        };
        let s: Vec<_> = u
            .schedule(Box::new(|k| k as usize + 1), 2.0)
            .take(4)
            .map(|s| (s.at.as_secs(), s.turns))
            .collect();
        // Lifetime 1, gap 2 s: user 1 done, user 2 has 1 turn left (at 1 s),
        // a new user at 0 s with conversation 0's 1 turn; joins at 2 s
        // (conversation 2: 3 turns) and 3 s (conversation 3: 4 turns).
        assert_eq!(s, [(0, 1), (1, 1), (2, 3), (3, 4)]);
    }

    /// A count sharing a factor with the lifetime uses the coprime step,
    /// so no two users share a slot.
    #[test]
    fn shared_factors_still_give_every_user_its_own_slot() {
        for (users, turns) in [(10, 5), (30, 4), (12, 7), (1, 1), (2, 3)] {
            let got = starts(users, 2.0, turns, users);
            let mut slots: Vec<u64> = got.iter().map(|s| (s.0 * 2.0) as u64).collect();
            slots.dedup();
            assert_eq!(
                slots.len(),
                got.len(),
                "{users} users, {turns} turns: {got:?}"
            );
            assert!(slots.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(
            UserCentric {
                users: 0,
                rate: 1.0
            }
            .check()
            .is_err()
        );
        for rate in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(UserCentric { users: 3, rate }.check().is_err());
        }
        assert!(
            UserCentric {
                users: 3,
                rate: 0.5
            }
            .check()
            .is_ok()
        );
    }
}
