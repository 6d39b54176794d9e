//! The load shape of a run.

use std::time::Duration;

use crate::error::ClientError;
use crate::pacing::{RateCurve, RequestRamp};
use crate::schedule::Arrival;
use crate::shard::{Shard, StartBarrier};
use crate::users::UserCentric;

/// How much load to apply and for how long.
///
/// Two shapes: *fixed concurrency* (closed loop; the default), where
/// `concurrency` workers each run one conversation at a time, and *request
/// rate* (open loop, when [`Load::request_rate`] is set), where
/// conversations start on an [`ArrivalSchedule`](crate::ArrivalSchedule) whatever the server's
/// speed, optionally capped by [`Load::max_concurrency`]. In both, a
/// conversation's turns run in order, each after the previous reply.
///
/// The client's layer of the load: what a run puts on a server. The user's
/// layer is `speedbench_run::LoadSpec` (in `profile`'s words); validation
/// turns one into the other.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Load {
    /// Fixed-concurrency mode: requests in flight at once (each worker runs
    /// one conversation at a time). Unused in request-rate mode.
    pub concurrency: usize,
    /// Request-rate mode: conversation starts per second (for single-turn
    /// data, requests per second), as AIPerf's `--request-rate`.
    pub request_rate: Option<f64>,
    /// How arrivals are spaced in request-rate mode.
    pub arrival: Arrival,
    /// Seed of the arrival schedule (Poisson gaps) and of the dataset
    /// sampling.
    pub random_seed: u64,
    /// Which conversation each session sends (`--dataset-sampling-strategy`):
    /// in order (the default), a fresh seeded order per pass, or drawn with
    /// replacement.
    pub sampling: crate::DatasetSampling,
    /// Request-rate mode: at most this many conversations in flight; an
    /// arrival that finds them all busy waits (and counts as late).
    pub max_concurrency: Option<usize>,
    /// Stop dispatching new requests this long after the profiling phase
    /// starts; in-flight requests may finish within `grace_period`. Without
    /// a request or conversation count, conversations recycle until then.
    pub benchmark_duration: Option<Duration>,
    /// After `benchmark_duration`, how long in-flight requests may still run
    /// before they are cancelled (recorded as cancelled).
    pub grace_period: Duration,
    /// Stop after this many profiled requests (turns), recycling
    /// conversations if the dataset is shorter.
    pub request_count: Option<u64>,
    /// Run exactly this many conversations, every turn of each, recycling
    /// the dataset if needed.
    pub num_conversations: Option<u64>,
    /// Requests sent first and recorded with `warmup = true` (in the same
    /// load shape, without the duration limit).
    pub warmup_request_count: u64,
    /// Warm up closed-loop at this many requests in flight, whatever the
    /// measured phase's shape (AIPerf's `--warmup-concurrency`, a warmup
    /// phase of `type: concurrency`); `None` warms up in the measured
    /// phase's own shape.
    pub warmup_concurrency: Option<usize>,
    /// Warm up for at most this long (AIPerf's `--warmup-duration`): no
    /// warmup request starts after it (nor after `warmup_request_count`
    /// of them, when that is set too); without a count, conversations
    /// recycle until then.
    pub warmup_duration: Option<Duration>,
    /// Warm up with this many conversations, every turn of each (AIPerf's
    /// `--num-warmup-sessions`); with a count or a duration too, the first
    /// limit reached ends the warmup.
    pub warmup_sessions: Option<u64>,
    /// After `warmup_duration`, how long warmup requests still in flight
    /// may run before they are cancelled (recorded as cancelled warmup
    /// requests); `None` waits for every one (AIPerf's
    /// `--warmup-grace-period` and its default).
    pub warmup_grace_period: Option<Duration>,
    /// At most this many requests waiting for their first output at once
    /// (AIPerf's `--prefill-concurrency`, with its ramp), in the measured
    /// phase and, unless `warmup_prefill` says otherwise, the warmup.
    pub prefill: Option<PrefillLimit>,
    /// The warmup's own prefill limit (AIPerf's
    /// `--warmup-prefill-concurrency`).
    pub warmup_prefill: Option<PrefillLimit>,
    /// Run only this shard's share of the work described by the other
    /// fields, which keep their unsharded values (see [`Shard`] for the
    /// split); `None` runs all of it.
    pub shard: Option<Shard>,
    /// Wait for this before the measured phase (after the warmup), so that
    /// the shards of one run start together; `None` starts at once.
    pub start_barrier: Option<StartBarrier>,
    /// Request-rate mode: rise to `request_rate` over this long
    /// ([`RateCurve::ramped`], AIPerf's `--request-rate-ramp-duration`), in
    /// the warmup too.
    pub rate_ramp: Option<Duration>,
    /// Request-rate mode: the rate of the measured phase from the end of
    /// any ramp on, times counted from there (AIPerf's
    /// `--request-rate-series`).
    pub rate_series: Option<RateCurve>,
    /// Request-rate mode: vLLM's ramp over the measured phase's requests
    /// (a pass over the dataset or the counts given; not a duration alone,
    /// which has no count to spread it over). The warmup runs at
    /// `request_rate`.
    pub request_ramp: Option<RequestRamp>,
    /// Open the closed loop's workers, or the request-rate mode's
    /// `max_concurrency` slots, one at a time over this long (AIPerf's
    /// `--concurrency-ramp-duration`: from 1 to the target, evenly).
    pub concurrency_ramp: Option<Duration>,
    /// The warmup's own concurrency ramp (AIPerf's
    /// `--warmup-concurrency-ramp-duration`); `None` takes
    /// `concurrency_ramp`.
    pub warmup_concurrency_ramp: Option<Duration>,
    /// Cancel a share of the measured phase's requests on purpose
    /// (AIPerf's `--request-cancellation-rate`).
    pub cancellation: Option<Cancellation>,
    /// A user's think time between a reply and the conversation's next
    /// turn (AIPerf's `--session-turn-delay-mean`); `None`: at once.
    pub turn_delay: Option<TurnDelay>,
    /// Replay a trace: the measured phase starts conversation `k` (dataset
    /// row `k`, rows in time order, each once) at its row's timestamp less
    /// this zero, in request-rate mode (`request_rate` then paces only the
    /// warmup; the trace's mean rate is a fair value). AIPerf's
    /// `--fixed-schedule`.
    pub fixed_schedule: Option<FixedSchedule>,
    /// User-centric pacing of the measured phase (AIPerf's
    /// `--user-centric-rate` with `--num-users`, see [`UserCentric`]): in
    /// place of `concurrency` and `request_rate`; the turn gap replaces
    /// `turn_delay`.
    pub user_centric: Option<UserCentric>,
    /// The warmup's own user-centric pacing (an AIPerf config's warmup
    /// phase of `type: user_centric`); `None` warms up as the measured
    /// phase does (unless `warmup_concurrency` is set).
    pub warmup_user_centric: Option<UserCentric>,
}

/// How many requests may wait for their first output at once: a slot is
/// taken before a request is sent and given back at its first output (a
/// streamed one) or its end; with `ramp`, the slots open one at a time from
/// 1 to `limit` over it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefillLimit {
    /// The most requests before their first output (at least 1).
    pub limit: usize,
    /// Open the slots over this long (AIPerf's
    /// `--prefill-concurrency-ramp-duration`).
    pub ramp: Option<Duration>,
}

/// A trace replayed at its own times (see [`Load::fixed_schedule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedSchedule {
    /// The trace time, microseconds, that is the measured phase's start:
    /// 0 (AIPerf's default: timestamps are offsets from the start), the
    /// first row's (`--fixed-schedule-auto-offset`) or the start offset.
    pub zero_us: u64,
}

/// Think time between turns: normal around `mean` with `stddev`, never
/// below 0 (AIPerf's conversation turn delay).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TurnDelay {
    /// The mean delay.
    pub mean: Duration,
    /// Its standard deviation (0: always the mean).
    pub stddev: Duration,
}

impl TurnDelay {
    /// The delay before turn `turn_index` (from 1) of dataset row `row` in
    /// a run seeded `seed`: its own draw, the same in every run of the seed.
    ///
    /// ```
    /// use std::time::Duration;
    /// use speedbench_client::TurnDelay;
    /// let fixed = TurnDelay { mean: Duration::from_millis(250), stddev: Duration::ZERO };
    /// assert_eq!(fixed.before(0, 3, 1), Duration::from_millis(250));
    /// ```
    pub fn before(&self, seed: u64, row: usize, turn_index: usize) -> Duration {
        let mut rng = speedbench_metrics::SplitMix64::new(
            seed ^ 0x7E1A_7E1A_D1A7_0000
                ^ (row as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ (turn_index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03),
        );
        let z = crate::schedule::standard_normal(&mut rng);
        let s = self.mean.as_secs_f64() + z * self.stddev.as_secs_f64();
        Duration::from_secs_f64(s.max(0.0))
    }
}

/// Requests cancelled on purpose: a share of them is abandoned `delay`
/// after it was handed to the connection, and recorded as
/// [`ErrorKind::ClientCancelled`](speedbench_record::ErrorKind::ClientCancelled)
/// (counted apart from failures, out of every latency figure). A response
/// that completes first is a success.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cancellation {
    /// The share of requests cancelled, above 0 and at most 1 (AIPerf
    /// takes a percentage).
    pub share: f64,
    /// How long after it is sent a chosen request is cancelled.
    pub delay: Duration,
}

impl Cancellation {
    /// Whether request `request_index` of a run seeded `seed` is one to
    /// cancel: a draw of its own, so the choice does not depend on which
    /// requests came before it.
    pub fn chooses(&self, seed: u64, request_index: u64) -> bool {
        let mut rng = speedbench_metrics::SplitMix64::new(
            seed ^ 0xC0FF_EE00_CA4C_E11D ^ request_index.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        rng.next_f64() < self.share
    }
}

impl Default for Load {
    /// One pass over the dataset at concurrency 1, no warmup, no duration
    /// limit, a 30 s grace period (AIPerf's default) and seed 0.
    fn default() -> Self {
        Load {
            concurrency: 1,
            request_rate: None,
            arrival: Arrival::default(),
            random_seed: 0,
            sampling: crate::DatasetSampling::Sequential,
            max_concurrency: None,
            benchmark_duration: None,
            grace_period: Duration::from_secs(30),
            request_count: None,
            num_conversations: None,
            warmup_request_count: 0,
            warmup_concurrency: None,
            warmup_duration: None,
            warmup_sessions: None,
            warmup_concurrency_ramp: None,
            warmup_grace_period: None,
            prefill: None,
            warmup_prefill: None,
            shard: None,
            start_barrier: None,
            rate_ramp: None,
            rate_series: None,
            request_ramp: None,
            concurrency_ramp: None,
            cancellation: None,
            turn_delay: None,
            fixed_schedule: None,
            user_centric: None,
            warmup_user_centric: None,
        }
    }
}

impl Load {
    /// Fixed concurrency (closed loop): `concurrency` requests in flight.
    ///
    /// ```
    /// use std::time::Duration;
    /// use speedbench_client::Load;
    /// let load = Load::closed_loop(8)
    ///     .with_request_count(200)
    ///     .with_warmup_requests(8);
    /// assert_eq!((load.concurrency, load.request_count), (8, Some(200)));
    /// let open = Load::request_rate(5.0)
    ///     .with_max_concurrency(16)
    ///     .with_benchmark_duration(Duration::from_secs(60));
    /// assert_eq!(open.request_rate, Some(5.0));
    /// ```
    pub fn closed_loop(concurrency: usize) -> Load {
        Load {
            concurrency,
            ..Load::default()
        }
    }

    /// Request rate (open loop): `rate` conversation starts per second.
    pub fn request_rate(rate: f64) -> Load {
        Load {
            request_rate: Some(rate),
            ..Load::default()
        }
    }

    /// Stops after this many profiled requests (turns).
    pub fn with_request_count(mut self, requests: u64) -> Self {
        self.request_count = Some(requests);
        self
    }

    /// Runs exactly this many conversations, every turn of each.
    pub fn with_num_conversations(mut self, conversations: u64) -> Self {
        self.num_conversations = Some(conversations);
        self
    }

    /// Sends this many warmup requests first.
    pub fn with_warmup_requests(mut self, requests: u64) -> Self {
        self.warmup_request_count = requests;
        self
    }

    /// Warms up closed-loop at `concurrency` requests in flight.
    pub fn with_warmup_concurrency(mut self, concurrency: usize) -> Self {
        self.warmup_concurrency = Some(concurrency);
        self
    }

    /// Warms up for at most `duration` (see [`Load::warmup_duration`]).
    pub fn with_warmup_duration(mut self, duration: Duration) -> Self {
        self.warmup_duration = Some(duration);
        self
    }

    /// Stops dispatching this long after profiling starts.
    pub fn with_benchmark_duration(mut self, duration: Duration) -> Self {
        self.benchmark_duration = Some(duration);
        self
    }

    /// How long in-flight requests may run after the benchmark duration.
    pub fn with_grace_period(mut self, grace: Duration) -> Self {
        self.grace_period = grace;
        self
    }

    /// How request-rate arrivals are spaced.
    pub fn with_arrival(mut self, arrival: Arrival) -> Self {
        self.arrival = arrival;
        self
    }

    /// Seeds the arrival schedule.
    pub fn with_random_seed(mut self, seed: u64) -> Self {
        self.random_seed = seed;
        self
    }

    /// Request-rate mode: at most this many conversations in flight.
    pub fn with_max_concurrency(mut self, max: usize) -> Self {
        self.max_concurrency = Some(max);
        self
    }

    /// Runs only `shard`'s share of this load (see [`Shard`]).
    ///
    /// ```
    /// use speedbench_client::{Load, Shard};
    /// let load = Load::closed_loop(64)
    ///     .with_request_count(1000)
    ///     .with_shard("1/4".parse::<Shard>()?);
    /// assert_eq!(load.shard.map(|s| s.index()), Some(1));
    /// # Ok::<(), speedbench_client::ClientError>(())
    /// ```
    pub fn with_shard(mut self, shard: Shard) -> Self {
        self.shard = Some(shard);
        self
    }

    /// Waits for `barrier` before the measured phase.
    pub fn with_start_barrier(mut self, barrier: StartBarrier) -> Self {
        self.start_barrier = Some(barrier);
        self
    }

    /// The rate curve of a phase in request-rate mode: the ramp, then (in
    /// the measured phase) the series; `None` in closed-loop mode.
    pub fn rate_curve(&self, warmup: bool) -> Option<RateCurve> {
        let rate = self.request_rate?;
        let ramp_s = self.rate_ramp.map(|d| d.as_secs_f64());
        let curve = match ramp_s {
            Some(d) => RateCurve::ramped(rate, d),
            None => RateCurve::constant(rate),
        };
        Some(match (&self.rate_series, warmup) {
            (Some(series), false) => curve.then(ramp_s.unwrap_or(0.0), series),
            _ => curve,
        })
    }

    /// Refuses a load no run can have: a zero or non-finite rate, zero
    /// concurrency or counts, a zero duration, a maximum concurrency
    /// without a rate. [`run_profile`](crate::run_profile) checks it too;
    /// a caller checks first to refuse a plan before anything is sent.
    pub fn validate(&self) -> Result<(), ClientError> {
        let bad = |m: &str| Err(ClientError::InvalidLoad(m.into()));
        match self.request_rate {
            Some(r) if !(r.is_finite() && r > 0.0) => {
                return bad("the request rate must be a positive number");
            }
            None if self.concurrency == 0 => return bad("concurrency must be at least 1"),
            None if self.max_concurrency.is_some() => {
                return bad("a maximum concurrency needs a request rate");
            }
            _ => {}
        }
        if self.warmup_concurrency == Some(0) {
            return bad("the warmup concurrency must be at least 1");
        }
        if self.max_concurrency == Some(0) {
            return bad("the maximum concurrency must be at least 1");
        }
        if self.request_count == Some(0) || self.num_conversations == Some(0) {
            return bad("request and conversation counts must be at least 1");
        }
        if self.benchmark_duration == Some(Duration::ZERO) {
            return bad("the benchmark duration must be positive");
        }
        self.validate_users()?;
        self.validate_sampling()?;
        self.validate_shaping()
    }

    /// A sampling other than in order: not where the order is the
    /// schedule's (a trace's rows at their times) or split by session
    /// number (a shard's share).
    fn validate_sampling(&self) -> Result<(), ClientError> {
        if self.sampling == crate::DatasetSampling::Sequential {
            return Ok(());
        }
        let clash = match (&self.fixed_schedule, &self.shard) {
            (Some(_), _) => "a fixed schedule sends its rows in their time order",
            (None, Some(_)) => "a shard's share of the conversations is taken in order",
            (None, None) => return Ok(()),
        };
        Err(ClientError::InvalidLoad(format!(
            "dataset sampling {}: {clash}; leave the sampling sequential",
            self.sampling
        )))
    }

    /// User-centric pacing: its values, and nothing else that paces the
    /// same phase.
    fn validate_users(&self) -> Result<(), ClientError> {
        let bad = |m: String| Err(ClientError::InvalidLoad(m));
        for (u, phase) in [
            (self.user_centric, "the measured phase"),
            (self.warmup_user_centric, "the warmup"),
        ] {
            if let Some(Err(why)) = u.map(|u| u.check()) {
                return bad(format!("user-centric pacing of {phase}: {why}"));
            }
        }
        if self.warmup_user_centric.is_some() && self.warmup_concurrency.is_some() {
            return bad(
                "the warmup is either closed-loop (a warmup concurrency) or user-centric, not both"
                    .into(),
            );
        }
        let users = self.user_centric.is_some() || self.warmup_user_centric.is_some();
        let clashes = [
            (
                self.user_centric.is_some() && self.request_rate.is_some(),
                "a request rate",
            ),
            (
                self.user_centric.is_some() && self.max_concurrency.is_some(),
                "a maximum concurrency (a user holds no slot between its turns)",
            ),
            (
                self.user_centric.is_some() && self.fixed_schedule.is_some(),
                "a fixed schedule",
            ),
            (
                self.user_centric.is_some() && self.request_ramp.is_some(),
                "vLLM's ramp over the requests",
            ),
            (
                self.user_centric.is_some()
                    && (self.rate_ramp.is_some() || self.rate_series.is_some()),
                "a request-rate ramp or series",
            ),
            (
                self.user_centric.is_some() && self.concurrency_ramp.is_some(),
                "a concurrency ramp",
            ),
            (
                users && self.shard.is_some(),
                "shards (the users' schedule is one population)",
            ),
        ];
        match clashes.into_iter().find(|c| c.0) {
            Some((_, what)) => bad(format!(
                "user-centric pacing paces its phase alone: no {what} with it"
            )),
            None => Ok(()),
        }
    }

    /// The ramps, series and cancellations against the rest of the load.
    fn validate_shaping(&self) -> Result<(), ClientError> {
        let bad = |m: &str| Err(ClientError::InvalidLoad(m.into()));
        let open = self.request_rate.is_some();
        if !open
            && (self.rate_ramp.is_some()
                || self.rate_series.is_some()
                || self.request_ramp.is_some())
        {
            return bad("a request-rate ramp or series needs a request rate");
        }
        if self.rate_ramp == Some(Duration::ZERO) || self.concurrency_ramp == Some(Duration::ZERO) {
            return bad("a ramp's duration must be positive");
        }
        if self.fixed_schedule.is_some()
            && (self.request_ramp.is_some()
                || self.rate_series.is_some()
                || self.rate_ramp.is_some())
        {
            return bad(
                "a fixed schedule replays the trace's own times: no rate ramp or series with it",
            );
        }
        if self.fixed_schedule.is_some() && !open {
            return bad(
                "a fixed schedule runs in request-rate mode: give the trace's mean rate as the request rate",
            );
        }
        if let Some(ramp) = &self.request_ramp {
            ramp.validate()?;
            if self.rate_ramp.is_some() || self.rate_series.is_some() {
                return bad(
                    "vLLM's ramp over the requests replaces a request-rate ramp or series: give one",
                );
            }
            if self.num_conversations.is_none()
                && self.request_count.is_none()
                && self.benchmark_duration.is_some()
            {
                return bad(
                    "vLLM's ramp over the requests needs to know how many there are: a benchmark duration alone recycles the dataset without end (give a conversation or request count)",
                );
            }
        }
        if open && self.concurrency_ramp.is_some() && self.max_concurrency.is_none() {
            return bad(
                "a concurrency ramp with a request rate needs a maximum concurrency to ramp",
            );
        }
        self.validate_windows()
    }

    /// The ramps against the duration, and the share cancelled.
    fn validate_windows(&self) -> Result<(), ClientError> {
        let bad = |m: &str| Err(ClientError::InvalidLoad(m.into()));
        let longest_ramp = self.rate_ramp.max(self.concurrency_ramp);
        if let (Some(ramp), Some(run)) = (longest_ramp, self.benchmark_duration)
            && ramp > run
        {
            return bad(&format!(
                "a ramp of {:.1} s is longer than the benchmark duration of {:.1} s: the target load would never be reached",
                ramp.as_secs_f64(),
                run.as_secs_f64()
            ));
        }
        if let Some(c) = &self.cancellation
            && !(c.share > 0.0 && c.share <= 1.0)
        {
            return bad("the share of requests to cancel must be above 0 and at most 100%");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn think_times_are_normal_clipped_at_zero_and_seeded() {
        let ms = Duration::from_millis;
        let delay = TurnDelay {
            mean: ms(100),
            stddev: ms(20),
        };
        let draws: Vec<f64> = (0..20_000)
            .map(|row| delay.before(7, row, 1).as_secs_f64())
            .collect();
        let mean = draws.iter().sum::<f64>() / draws.len() as f64;
        let sd =
            (draws.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / draws.len() as f64).sqrt();
        assert!((mean - 0.1).abs() < 0.001, "{mean}");
        assert!((sd - 0.02).abs() < 0.001, "{sd}");
        assert_eq!(delay.before(7, 3, 2), delay.before(7, 3, 2));
        assert_ne!(delay.before(7, 3, 2), delay.before(8, 3, 2));
        // A deviation as large as the mean: about 16% of draws clip to 0.
        let wide = TurnDelay {
            mean: ms(10),
            stddev: ms(10),
        };
        let zeros = (0..10_000)
            .filter(|&row| wide.before(1, row, 1).is_zero())
            .count();
        assert!((1400..1800).contains(&zeros), "{zeros}");
    }

    #[test]
    fn inconsistent_load_shapes_are_refused() {
        let bad = |l: Load| l.validate().unwrap_err().to_string();
        let rate = |r| Load {
            request_rate: Some(r),
            ..Default::default()
        };
        assert!(bad(rate(0.0)).contains("rate"));
        assert!(bad(rate(f64::NAN)).contains("rate"));
        assert!(
            bad(Load {
                max_concurrency: Some(4),
                ..Default::default()
            })
            .contains("needs a request rate")
        );
        assert!(
            bad(Load {
                max_concurrency: Some(0),
                ..rate(1.0)
            })
            .contains("at least 1")
        );
        assert!(
            bad(Load {
                concurrency: 0,
                ..Default::default()
            })
            .contains("concurrency")
        );
        // Concurrency is unused in request-rate mode.
        assert!(
            Load {
                concurrency: 0,
                ..rate(1.0)
            }
            .validate()
            .is_ok()
        );
    }
}
