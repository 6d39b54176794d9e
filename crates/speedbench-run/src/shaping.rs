//! The load's shape over time, from `profile`'s words to the client's:
//! gamma arrivals, ramps, a rate series and cancellations on purpose.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use speedbench_client::{
    Arrival, Cancellation, Load, RateCurve, RatePoint, RequestRamp, TurnDelay,
};

use crate::error::RunError;
use crate::spec::LoadSpec;

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
    load.rate_ramp = l
        .request_rate_ramp_duration_s
        .map(|d| positive_seconds("--request-rate-ramp-duration", d))
        .transpose()?;
    load.concurrency_ramp = l
        .concurrency_ramp_duration_s
        .map(|d| positive_seconds("--concurrency-ramp-duration", d))
        .transpose()?;
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
    Ok(())
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
