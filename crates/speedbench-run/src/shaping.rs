//! The load's shape over time, from `profile`'s words to the client's:
//! gamma arrivals, ramps, a rate series and cancellations on purpose.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use speedbench_client::{
    Arrival, Cancellation, FixedSchedule, Load, RateCurve, RatePoint, RequestRamp, TurnDelay,
    UserCentric,
};

use crate::error::RunError;
use crate::spec::{DatasetSpec, LoadSpec};
use speedbench_client::synthetic::TraceSynthesis;

/// Sets `load`'s arrivals, ramps, series and cancellations from `l`,
/// refusing what no run can honour, by the flag that fixes it. A rate
/// series or vLLM's ramp given without `--request-rate` sets it (the
/// series' first rate; the ramp's end rate, which the warmup runs at).
pub(crate) fn apply(l: &LoadSpec, load: &mut Load) -> Result<(), RunError> {
    if let Some(k) = l.arrival_smoothness {
        if !(k.is_finite() && k > 0.0) {
            return Err(RunError::invalid(
                "--arrival-smoothness",
                format!("must be a number above 0 (1.0 is Poisson), got {k}"),
            ));
        }
        if l.arrival == Arrival::Constant {
            return Err(RunError::invalid(
                "--arrival-smoothness",
                "shapes gamma arrivals; --arrival constant has none to shape",
            ));
        }
        load.arrival = Arrival::Gamma { smoothness: k };
    }
    let ramp = |flag: &str, d: Option<f64>| d.map(|d| positive_seconds(flag, d)).transpose();
    load.rate_ramp = ramp(
        "--request-rate-ramp-duration",
        l.request_rate_ramp_duration_s,
    )?;
    load.concurrency_ramp = ramp("--concurrency-ramp-duration", l.concurrency_ramp_duration_s)?;
    load.warmup_concurrency_ramp = ramp(
        "--warmup-concurrency-ramp-duration",
        l.warmup_concurrency_ramp_duration_s,
    )?;
    if let Some(path) = &l.request_rate_series {
        let series = read_series(path)?;
        load.request_rate = load.request_rate.or(Some(series.points()[0].rate));
        load.rate_series = Some(series);
    }
    if let Some(ramp) = request_ramp(l)? {
        if l.request_rate.is_some() {
            return Err(RunError::invalid(
                "--request-rate",
                "--ramp-up-strategy sets the rate of every request: leave --request-rate out",
            ));
        }
        load.request_rate = Some(ramp.end_rps);
        load.request_ramp = Some(ramp);
    }
    load.cancellation = cancellation(l)?;
    load.turn_delay = turn_delay(l)?;
    apply_users(l, load)?;
    load.prefill = prefill_limit(
        ("--prefill-concurrency", l.prefill_concurrency),
        (
            "--prefill-concurrency-ramp-duration",
            l.prefill_concurrency_ramp_duration_s,
        ),
    )?;
    load.warmup_prefill = prefill_limit(
        ("--warmup-prefill-concurrency", l.warmup_prefill_concurrency),
        (
            "--warmup-prefill-concurrency-ramp-duration",
            l.warmup_prefill_concurrency_ramp_duration_s,
        ),
    )?;
    Ok(())
}

/// The measured phase's and the warmup's user-centric pacing.
fn apply_users(l: &LoadSpec, load: &mut Load) -> Result<(), RunError> {
    load.user_centric = user_centric(
        ("--user-centric-rate", l.user_centric_rate),
        ("--num-users", l.num_users),
    )?;
    load.warmup_user_centric = user_centric(
        ("--warmup-user-centric-rate", l.warmup_user_centric_rate),
        ("--warmup-num-users", l.warmup_num_users),
    )?;
    match load.user_centric {
        Some(_) => users_alone(l),
        None => Ok(()),
    }
}

/// A user-centric rate with its users, both or neither, checked.
fn user_centric(
    (rate_flag, rate): (&str, Option<f64>),
    (users_flag, users): (&str, Option<usize>),
) -> Result<Option<UserCentric>, RunError> {
    let (rate, users) = match (rate, users) {
        (None, None) => return Ok(None),
        (Some(rate), Some(users)) => (rate, users),
        (Some(_), None) => return Err(RunError::invalid(rate_flag, format!("needs {users_flag}"))),
        (None, Some(_)) => return Err(RunError::invalid(users_flag, format!("needs {rate_flag}"))),
    };
    let u = UserCentric { users, rate };
    u.check().map_err(|why| RunError::invalid(rate_flag, why))?;
    Ok(Some(u))
}

/// User-centric pacing sets the measured phase's load alone: the flags
/// that would shape it too are refused by name.
fn users_alone(l: &LoadSpec) -> Result<(), RunError> {
    let clashes = [
        (l.request_rate.is_some(), "--request-rate"),
        (l.request_rate_series.is_some(), "--request-rate-series"),
        (l.ramp_up_strategy.is_some(), "--ramp-up-strategy"),
        (l.fixed_schedule, "--fixed-schedule"),
        (l.max_concurrency.is_some(), "--max-concurrency"),
        (l.concurrency != 1, "--concurrency"),
        (
            l.concurrency_ramp_duration_s.is_some(),
            "--concurrency-ramp-duration",
        ),
        (
            l.request_rate_ramp_duration_s.is_some(),
            "--request-rate-ramp-duration",
        ),
    ];
    match clashes.into_iter().find(|c| c.0) {
        Some((_, flag)) => Err(RunError::invalid(
            flag,
            "cannot be used with --user-centric-rate, which paces the run by its users alone",
        )),
        None => Ok(()),
    }
}

/// The think time between turns, scaled by the ratio; `None` when it is 0.
fn turn_delay(l: &LoadSpec) -> Result<Option<TurnDelay>, RunError> {
    let ms = |field: &str, v: f64| seconds(field, v * l.session_delay_ratio / 1e3);
    if !(l.session_delay_ratio.is_finite() && l.session_delay_ratio >= 0.0) {
        return Err(RunError::invalid(
            "--session-delay-ratio",
            "must be a number 0 or more",
        ));
    }
    let delay = TurnDelay {
        mean: ms("--session-turn-delay-mean", l.session_turn_delay_mean_ms)?,
        stddev: ms(
            "--session-turn-delay-stddev",
            l.session_turn_delay_stddev_ms,
        )?,
    };
    Ok((!delay.mean.is_zero() || !delay.stddev.is_zero()).then_some(delay))
}

fn positive_seconds(field: &str, v: f64) -> Result<std::time::Duration, RunError> {
    let d = seconds(field, v)?;
    if d.is_zero() {
        return Err(RunError::invalid(field, "must be above 0 seconds"));
    }
    Ok(d)
}

/// vLLM's three flags, all or none.
fn request_ramp(l: &LoadSpec) -> Result<Option<RequestRamp>, RunError> {
    match (l.ramp_up_strategy, l.ramp_up_start_rps, l.ramp_up_end_rps) {
        (None, None, None) => Ok(None),
        (Some(shape), Some(start_rps), Some(end_rps)) => Ok(Some(RequestRamp {
            shape,
            start_rps,
            end_rps,
        })),
        (None, ..) => Err(RunError::invalid(
            "--ramp-up-strategy",
            "--ramp-up-start-rps and --ramp-up-end-rps need a ramp-up strategy (linear or exponential)",
        )),
        _ => Err(RunError::invalid(
            "--ramp-up-strategy",
            "needs both --ramp-up-start-rps and --ramp-up-end-rps",
        )),
    }
}

fn cancellation(l: &LoadSpec) -> Result<Option<Cancellation>, RunError> {
    let Some(percent) = l.request_cancellation_rate else {
        if l.request_cancellation_delay_s != 0.0 {
            return Err(RunError::invalid(
                "--request-cancellation-delay",
                "needs --request-cancellation-rate (the percentage of requests to cancel)",
            ));
        }
        return Ok(None);
    };
    if !(percent > 0.0 && percent <= 100.0) {
        return Err(RunError::invalid(
            "--request-cancellation-rate",
            format!("is a percentage above 0 and at most 100, got {percent}"),
        ));
    }
    Ok(Some(Cancellation {
        share: percent / 100.0,
        delay: seconds(
            "--request-cancellation-delay",
            l.request_cancellation_delay_s,
        )?,
    }))
}

/// AIPerf's rate-series file: a JSON array of `{"time_s", "qps"}` points or
/// an object whose one key, `points`, holds it; at least two points, times
/// strictly increasing, rates above 0. Each fault names the file and point.
/// The points may also be given inline, as the JSON itself (an AIPerf
/// config's `rate_series: [...]` travels so).
pub(crate) fn read_series(path: &Path) -> Result<RateCurve, RunError> {
    let field = "--request-rate-series";
    let inline = path
        .to_str()
        .filter(|t| t.trim_start().starts_with(['[', '{']));
    let at = |m: String| match inline {
        Some(_) => RunError::invalid(field, m),
        None => RunError::invalid(field, format!("{}: {m}", path.display())),
    };
    let text = match inline {
        Some(text) => text.to_string(),
        None => std::fs::read_to_string(path).map_err(|e| at(format!("cannot be read: {e}")))?,
    };
    let doc: Value = serde_json::from_str(&text).map_err(|e| at(format!("is not JSON: {e}")))?;
    let points = match &doc {
        Value::Array(points) => points,
        Value::Object(o) if o.len() == 1 => match o.get("points") {
            Some(Value::Array(points)) => points,
            _ => return Err(at("`points` must be an array of points".into())),
        },
        _ => {
            return Err(at(
                "must be an array of points or an object with only `points`".into(),
            ));
        }
    };
    series_points(points).map_err(at)
}

/// Points from parsed JSON, checked as AIPerf checks them.
pub(crate) fn series_points(points: &[Value]) -> Result<RateCurve, String> {
    if points.len() < 2 {
        return Err("a request-rate series needs at least two points".into());
    }
    let mut out = Vec::with_capacity(points.len());
    for (i, p) in points.iter().enumerate() {
        let get = |key: &str| p.get(key).and_then(Value::as_f64);
        let (Some(time_s), Some(rate)) = (get("time_s"), get("qps")) else {
            return Err(format!("point {i}: needs numbers `time_s` and `qps`"));
        };
        if let Some(extra) = p
            .as_object()
            .and_then(|o| o.keys().find(|k| *k != "time_s" && *k != "qps"))
        {
            return Err(format!(
                "point {i}: unknown field `{extra}` (only time_s and qps)"
            ));
        }
        if rate <= 0.0 {
            return Err(format!("point {i}: qps must be above 0, got {rate}"));
        }
        if let Some(prev) = out.last().map(|p: &RatePoint| p.time_s)
            && time_s <= prev
        {
            return Err(format!(
                "point {i}: time_s {time_s} is not after the point before it ({prev}): times must strictly increase"
            ));
        }
        out.push(RatePoint { time_s, rate });
    }
    RateCurve::new(out).map_err(|e| e.to_string())
}

/// A number of seconds from a field, or the error naming it.
pub(crate) fn seconds(field: &str, v: f64) -> Result<Duration, RunError> {
    Duration::try_from_secs_f64(v)
        .ok()
        .filter(|_| v.is_finite())
        .ok_or_else(|| RunError::invalid(field, "must be a non-negative number of seconds"))
}

/// `--fixed-schedule`'s window over a trace's rows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TraceWindow {
    auto_offset: bool,
    start_us: Option<u64>,
    end_us: Option<u64>,
}

/// The window the spec asks for, checked: offsets only with
/// `--fixed-schedule`, the auto offset or a start offset, a start not after
/// the end, and no rate shaping beside a trace's own times.
pub(crate) fn trace_window(l: &LoadSpec) -> Result<Option<TraceWindow>, RunError> {
    let offsets = l.fixed_schedule_auto_offset
        || l.fixed_schedule_start_offset_ms.is_some()
        || l.fixed_schedule_end_offset_ms.is_some();
    if !l.fixed_schedule {
        return match offsets {
            true => Err(RunError::invalid(
                "--fixed-schedule-start-offset",
                "the offsets and --fixed-schedule-auto-offset need --fixed-schedule",
            )),
            false => Ok(None),
        };
    }
    let conflicts = [
        (l.request_rate.is_some(), "--request-rate"),
        (l.request_rate_series.is_some(), "--request-rate-series"),
        (
            l.request_rate_ramp_duration_s.is_some(),
            "--request-rate-ramp-duration",
        ),
        (l.ramp_up_strategy.is_some(), "--ramp-up-strategy"),
        (l.arrival_smoothness.is_some(), "--arrival-smoothness"),
    ];
    if let Some((_, flag)) = conflicts.iter().find(|(set, _)| *set) {
        return Err(RunError::invalid(
            *flag,
            "--fixed-schedule sends each row at its own timestamp: leave the rate out",
        ));
    }
    if l.fixed_schedule_auto_offset && l.fixed_schedule_start_offset_ms.is_some() {
        return Err(RunError::invalid(
            "--fixed-schedule-auto-offset",
            "give it or --fixed-schedule-start-offset, not both (each sets the start)",
        ));
    }
    if let (Some(start), Some(end)) = (
        l.fixed_schedule_start_offset_ms,
        l.fixed_schedule_end_offset_ms,
    ) && start > end
    {
        return Err(RunError::invalid(
            "--fixed-schedule-start-offset",
            format!("{start} ms is after --fixed-schedule-end-offset {end} ms"),
        ));
    }
    Ok(Some(TraceWindow {
        auto_offset: l.fixed_schedule_auto_offset,
        start_us: l.fixed_schedule_start_offset_ms.map(|ms| ms * 1000),
        end_us: l.fixed_schedule_end_offset_ms.map(|ms| ms * 1000),
    }))
}

impl TraceWindow {
    /// The rows to replay: in time order (a row without a timestamp
    /// refused by id), those outside the window left out and said. The
    /// offsets are the trace's own times: a synthesis reshapes the rows
    /// kept, then [`Self::schedule`] sets the load.
    pub(crate) fn keep(
        &self,
        mut dataset: speedbench_dataset::Dataset,
        observer: &mut dyn crate::observer::Observer,
    ) -> Result<speedbench_dataset::Dataset, RunError> {
        let field = "--fixed-schedule";
        if let Some(row) = dataset
            .conversations
            .iter()
            .find(|c| c.timestamp_us.is_none())
        {
            return Err(RunError::invalid(
                field,
                format!(
                    "row {:?} has no `timestamp` (milliseconds) to be sent at",
                    row.id
                ),
            ));
        }
        dataset.conversations.sort_by_key(|c| c.timestamp_us);
        let before = dataset.conversations.len();
        let at = |c: &speedbench_dataset::Conversation| c.timestamp_us.unwrap_or(0);
        dataset.conversations.retain(|c| {
            self.start_us.is_none_or(|s| at(c) >= s) && self.end_us.is_none_or(|e| at(c) <= e)
        });
        if dataset.conversations.len() < before {
            observer.warning(&format!(
                "fixed schedule: {} of {before} rows lie outside the offsets' window and are not sent",
                before - dataset.conversations.len()
            ));
        }
        if dataset.conversations.is_empty() {
            return Err(RunError::invalid(
                field,
                "no row lies inside the offsets' window",
            ));
        }
        Ok(dataset)
    }

    /// `load` set to replay the kept rows (in time order, at least one),
    /// each once, from the zero the window names (a start offset scaled
    /// by a synthesis' `speedup`), its warmup at their mean rate.
    pub(crate) fn schedule(
        &self,
        dataset: &speedbench_dataset::Dataset,
        load: &mut Load,
        speedup: f64,
    ) {
        let at = |c: &speedbench_dataset::Conversation| c.timestamp_us.unwrap_or(0);
        let rows = &dataset.conversations;
        let (first, last) = (rows.first().map_or(0, at), rows.last().map_or(0, at));
        let zero_us = match (self.auto_offset, self.start_us) {
            (true, _) => first,
            (false, Some(start)) => (start as f64 / speedup) as u64,
            (false, None) => 0,
        };
        let span_s = (last - first) as f64 / 1e6;
        let kept = rows.len();
        load.request_rate = Some(if span_s > 0.0 {
            (kept - 1).max(1) as f64 / span_s
        } else {
            kept as f64
        });
        load.num_conversations = Some(kept as u64);
        load.fixed_schedule = Some(FixedSchedule { zero_us });
    }
}

/// `--synthesis-*`, checked; `None` when nothing is asked.
pub(crate) fn trace_synthesis(d: &DatasetSpec) -> Result<Option<TraceSynthesis>, RunError> {
    let s = &d.synthesis;
    let synthesis = TraceSynthesis {
        speedup_ratio: s.speedup_ratio,
        prefix_len_multiplier: s.prefix_len_multiplier,
        prefix_root_multiplier: s.prefix_root_multiplier,
        prompt_len_multiplier: s.prompt_len_multiplier,
        output_len_multiplier: s.output_len_multiplier,
        max_isl: s.max_isl,
        max_osl: s.max_osl,
        ..TraceSynthesis::new(d.synthetic.block_size.max(1))
    };
    if !synthesis.reshapes() && s.max_isl.is_none() && s.max_osl.is_none() {
        return Ok(None);
    }
    synthesis
        .check()
        .map_err(|why| RunError::invalid("--synthesis-*", why))?;
    Ok(Some(synthesis))
}

/// "1 row", "2 rows".
fn rows(n: usize) -> String {
    match n {
        1 => "1 row".into(),
        n => format!("{n} rows"),
    }
}

/// `dataset` reshaped by `s`; what it dropped or capped said.
pub(crate) fn synthesize(
    s: &TraceSynthesis,
    seed: u64,
    dataset: &mut speedbench_dataset::Dataset,
    observer: &mut dyn crate::observer::Observer,
) -> Result<(), RunError> {
    let report = s.apply(dataset, seed).map_err(|source| RunError::Client {
        context: "synthesizing the trace (--synthesis-*)".into(),
        source,
    })?;
    let dropped = report.dropped_over_max_isl;
    if dropped > 0 {
        observer.warning(&format!(
            "trace synthesis: {} with an input_length over --synthesis-max-isl {} {} not sent",
            rows(dropped),
            s.max_isl.unwrap_or_default(),
            if dropped == 1 { "is" } else { "are" }
        ));
    }
    if report.capped_at_max_osl > 0 {
        observer.warning(&format!(
            "trace synthesis: the output length of {} capped at --synthesis-max-osl {}",
            rows(report.capped_at_max_osl),
            s.max_osl.unwrap_or_default()
        ));
    }
    if dataset.conversations.is_empty() {
        return Err(RunError::invalid(
            "--synthesis-max-isl",
            "no row of the trace is left to send",
        ));
    }
    Ok(())
}

/// A prefill limit and its ramp, checked: at least 1, a ramp of more than
/// 0 s. A ramp without a limit ramps nothing (AIPerf takes it so; the run
/// says so, [`prefill_warnings`]).
fn prefill_limit(
    (limit_flag, limit): (&str, Option<usize>),
    (ramp_flag, ramp): (&str, Option<f64>),
) -> Result<Option<speedbench_client::PrefillLimit>, RunError> {
    let ramp = ramp.map(|d| positive_seconds(ramp_flag, d)).transpose()?;
    match limit {
        Some(0) => Err(RunError::invalid(limit_flag, "must be at least 1")),
        Some(limit) => Ok(Some(speedbench_client::PrefillLimit { limit, ramp })),
        None => Ok(None),
    }
}

/// What the run says of prefill ramps without a limit to ramp.
pub(crate) fn prefill_warnings(l: &LoadSpec) -> Vec<String> {
    let pairs = [
        (
            l.prefill_concurrency_ramp_duration_s,
            l.prefill_concurrency,
            "--prefill-concurrency-ramp-duration",
            "--prefill-concurrency",
        ),
        (
            l.warmup_prefill_concurrency_ramp_duration_s,
            l.warmup_prefill_concurrency.or(l.prefill_concurrency),
            "--warmup-prefill-concurrency-ramp-duration",
            "--warmup-prefill-concurrency",
        ),
    ];
    pairs
        .into_iter()
        .filter(|(ramp, limit, _, _)| ramp.is_some() && limit.is_none())
        .map(|(_, _, ramp, limit)| {
            format!("{ramp} without {limit}: there is no prefill limit to ramp, so it does nothing")
        })
        .collect()
}
