//! [`RunMetrics`] over records read in passes ([`RecordPasses`]): a run of
//! any length summarised in a bounded amount of memory, and the one way
//! every run's figures are computed (a slice in memory is read the same
//! way).

use speedbench_record::{RequestRecord, columns};

use crate::goodput::GoodputFold;
use crate::http_trace::HttpTraceFold;
use crate::measured::{BenchmarkWindow, is_measured};
use crate::passes::{PassFold, RecordPasses, run_passes};
use crate::request::RequestMetricsExt;
use crate::run::{
    FigureOptions, MIN_RESOLVED_INTERVAL_NS, ModelMetrics, RequestCounts, RunMetrics,
    ServerTimingFold,
};
use crate::spec::SpecFold;
use crate::steady::{Span, SteadyFold};
use crate::summary_passes::{SummaryPasses, end_passes};
use crate::window::time_slices;

const NS_PER_MS: f64 = 1e6;

impl RunMetrics {
    /// Every figure of the run whose records `source` reads, as
    /// [`RunMetrics::with_figures`] computes them, in a few passes over the
    /// records: none is held, but for time slices, which need them all at
    /// once ([`RecordPasses::held`]).
    pub fn from_passes<S: RecordPasses + ?Sized>(
        source: &S,
        options: &FigureOptions,
    ) -> Result<RunMetrics, S::Error> {
        RunMetrics::from_passes_visiting(source, options, &mut |_| {})
    }

    /// [`RunMetrics::from_passes`], showing every record once to `visit`
    /// in the figures' first pass: a caller's own fold over the run (a
    /// [`crate::RecordsDigest`]) without a read of its own. (The pass
    /// before it, for the run's span and models, reads only the few
    /// columns they need: [`RecordPasses::pass_reading`].)
    pub fn from_passes_visiting<S: RecordPasses + ?Sized>(
        source: &S,
        options: &FigureOptions,
        visit: &mut dyn FnMut(&RequestRecord),
    ) -> Result<RunMetrics, S::Error> {
        let mut shape = RunShape::new();
        source.pass_reading(&RunShape::COLUMNS, &mut |r| shape.add(r))?;
        let mut passes = RunPasses::new(shape, options);
        run_passes(source, &mut passes, visit)?;
        let mut metrics = passes.run.finish();
        metrics.by_model = (passes.models.into_iter())
            .map(|(model, fold)| ModelMetrics {
                model,
                metrics: Box::new(fold.finish()),
            })
            .collect();
        metrics.steady_state = passes.steady.and_then(SteadyFold::finish);
        if let Some(duration_s) = options.slice_duration_s {
            metrics.time_slices = time_slices(&source.held()?, duration_s);
        }
        Ok(metrics)
    }

    /// [`RunMetrics::timing_warnings`] alone, without the other
    /// statistics (a comparison needs only these).
    pub fn timing_warnings_of(records: &[RequestRecord]) -> Vec<String> {
        let (mut intervals, mut window) = (ShortIntervals::default(), BenchmarkWindow::default());
        for r in records {
            window.add(r);
            intervals.add(r);
        }
        intervals.warnings(window.duration_s())
    }
}

/// What the passes need to know first: the run's span (whether it
/// speculates, where its steady state starts looking), and its models with
/// whether each speculates, in order of first record.
struct RunShape {
    span: Span,
    models: Vec<(String, bool)>,
}

impl RunShape {
    /// What [`RunShape::add`] reads: a records file's other columns are
    /// left undecoded in its pass (the spec-decode counts too: a spec
    /// source without them is not a row that can be read).
    const COLUMNS: [&'static str; 8] = [
        columns::MODEL,
        columns::WARMUP,
        columns::ERROR_KIND,
        columns::START_TIME,
        columns::END_TIME,
        columns::SPEC_SOURCE,
        columns::SPEC_ACCEPTED_DRAFT_TOKENS,
        columns::SPEC_PROPOSED_DRAFT_TOKENS,
    ];

    fn new() -> RunShape {
        RunShape {
            span: Span::EMPTY,
            models: Vec::new(),
        }
    }

    fn add(&mut self, r: &RequestRecord) {
        self.span.add(r);
        let speculates = is_measured(r) && r.spec.is_some();
        match self.models.iter_mut().find(|(m, _)| *m == r.model) {
            Some((_, s)) => *s |= speculates,
            None => self.models.push((r.model.clone(), speculates)),
        }
    }
}

/// The run's fold and, when its records name several models, one per
/// model ([`RunMetrics::by_model`], each with no [`FigureOptions`]).
struct RunPasses {
    run: RunFold,
    models: Vec<(String, RunFold)>,
    /// The steady state, when asked for.
    steady: Option<SteadyFold>,
}

impl RunPasses {
    fn new(shape: RunShape, options: &FigureOptions) -> RunPasses {
        let models = match shape.models.len() {
            0 | 1 => Vec::new(),
            _ => (shape.models.into_iter())
                .map(|(model, speculates)| {
                    (model, RunFold::new(speculates, &FigureOptions::default()))
                })
                .collect(),
        };
        RunPasses {
            run: RunFold::new(shape.span.speculates(), options),
            models,
            steady: (options.steady_state).map(|o| SteadyFold::after(o, shape.span)),
        }
    }
}

impl PassFold for RunPasses {
    fn add(&mut self, pass: u32, r: &RequestRecord) {
        self.run.add(pass, r);
        if let Some((_, fold)) = self.models.iter_mut().find(|(m, _)| *m == r.model) {
            fold.add(pass, r);
        }
        if let Some(steady) = &mut self.steady {
            steady.add(pass, r);
        }
    }

    fn end_pass(&mut self) -> bool {
        // Every fold ends its pass, whether or not another needs more.
        let mut more = self.run.end_pass();
        for (_, fold) in &mut self.models {
            more |= fold.end_pass();
        }
        if let Some(steady) = &mut self.steady {
            more |= steady.end_pass();
        }
        more
    }
}

/// One run's (or one model's) figures, folded in passes.
struct RunFold {
    counts: RequestCounts,
    window: BenchmarkWindow,
    output_tokens: u64,
    intervals: ShortIntervals,
    /// TTFT, ITL, inter-chunk gaps, latency, output and input lengths,
    /// per-user throughput.
    summaries: [SummaryPasses; 7],
    spec: SpecFold,
    server: ServerTimingFold,
    goodput: Option<GoodputFold>,
    http_trace: Option<HttpTraceFold>,
}

impl RunFold {
    fn new(speculates: bool, options: &FigureOptions) -> RunFold {
        RunFold {
            counts: RequestCounts::default(),
            window: BenchmarkWindow::default(),
            output_tokens: 0,
            intervals: ShortIntervals::default(),
            summaries: Default::default(),
            spec: SpecFold::new(speculates),
            server: ServerTimingFold::default(),
            goodput: GoodputFold::new(&options.slos),
            http_trace: options.http_trace.then(HttpTraceFold::default),
        }
    }

    /// What one pass over the records gives, once they were read.
    fn finish(self) -> RunMetrics {
        let duration = self.window.duration_s();
        let per_second = |n: u64| duration.map(|d| n as f64 / d);
        let [ttft, itl, chunks, latency, osl, isl, per_user] = self.summaries.map(|s| s.finish());
        RunMetrics {
            timing_warnings: self.intervals.warnings(duration),
            request_throughput: per_second(self.counts.succeeded),
            output_token_throughput: per_second(self.output_tokens),
            counts: self.counts,
            benchmark_duration_s: duration,
            ttft_ms: ttft,
            inter_token_latency_ms: itl,
            inter_chunk_latency_ms: chunks,
            request_latency_ms: latency,
            output_sequence_length: osl,
            input_sequence_length: isl,
            output_token_throughput_per_user: per_user,
            spec_decode: self.spec.finish(),
            server_timings: self.server.finish(),
            goodput: self.goodput.map(|g| g.finish(duration)),
            steady_state: None,
            time_slices: Vec::new(),
            http_trace: self.http_trace.and_then(|h| h.finish()),
            by_model: Vec::new(),
        }
    }
}

impl PassFold for RunFold {
    fn add(&mut self, pass: u32, r: &RequestRecord) {
        if pass == 0 {
            self.counts.add(r);
            self.window.add(r);
            if let Some(goodput) = &mut self.goodput {
                goodput.add(r);
            }
            self.intervals.add(r);
            if is_measured(r) {
                self.output_tokens += r.completion_tokens.unwrap_or(0);
            }
        }
        self.spec.add(pass, r);
        self.server.add(pass, r);
        if let Some(http) = &mut self.http_trace {
            http.add(pass, r);
        }
        if !is_measured(r) {
            return;
        }
        let [ttft, itl, chunks, latency, osl, isl, per_user] = &mut self.summaries;
        r.ttft_ms().into_iter().for_each(|v| ttft.add(v));
        r.inter_token_latency_ms()
            .into_iter()
            .for_each(|v| itl.add(v));
        for &gap in &r.inter_chunk_latencies_ns {
            chunks.add(gap as f64 / NS_PER_MS);
        }
        latency.add(r.request_latency_ms());
        r.completion_tokens
            .into_iter()
            .for_each(|n| osl.add(n as f64));
        r.prompt_tokens.into_iter().for_each(|n| isl.add(n as f64));
        r.output_token_throughput_per_user()
            .into_iter()
            .for_each(|v| per_user.add(v));
    }

    fn end_pass(&mut self) -> bool {
        let spec = self.spec.end_pass();
        let server = self.server.end_pass();
        let http = self
            .http_trace
            .as_mut()
            .is_some_and(HttpTraceFold::end_pass);
        end_passes(&mut self.summaries) || spec || server || http
    }
}

/// The measured requests whose tokens after the first came faster than
/// the client can time ([`RunMetrics::timing_warnings`]).
#[derive(Default)]
struct ShortIntervals {
    /// Measured requests with an inter-token latency.
    decoding: u64,
    /// Of those, the ones with e2e - TTFT under [`MIN_RESOLVED_INTERVAL_NS`].
    short: u64,
    /// Their highest per-user throughput.
    fastest: Option<f64>,
}

impl ShortIntervals {
    fn add(&mut self, r: &RequestRecord) {
        if !is_measured(r) || r.inter_token_latency_ms().is_none() {
            return;
        }
        self.decoding += 1;
        let short = (r.ttft_ns)
            .is_some_and(|t| r.e2e_latency_ns.saturating_sub(t) < MIN_RESOLVED_INTERVAL_NS);
        if short {
            self.short += 1;
            if let Some(v) = r.output_token_throughput_per_user() {
                self.fastest = Some(self.fastest.map_or(v, |m| m.max(v)));
            }
        }
    }

    /// The sentences, for a run of `duration_s` seconds.
    fn warnings(&self, duration_s: Option<f64>) -> Vec<String> {
        let limit_ms = MIN_RESOLVED_INTERVAL_NS as f64 / NS_PER_MS;
        let mut out = Vec::new();
        if self.short > 0 {
            // A request whose tokens came at once has no finite throughput.
            let fastest =
                (self.fastest).map_or(String::new(), |v| format!(" (up to {v:.3e} tokens/s)"));
            out.push(format!(
                "{} of {} streamed requests received all their tokens after the first within \
                 {limit_ms} ms (e2e - TTFT): their inter-token latency and per-user throughput{fastest} \
                 are below what the client can time, not the server's speed (a server that sends \
                 the whole answer at once, or one with no delays)",
                self.short, self.decoding
            ));
        }
        if let Some(d) = duration_s.filter(|d| *d * 1e9 < MIN_RESOLVED_INTERVAL_NS as f64) {
            out.push(format!(
                "the whole benchmark took {:.3} ms, under {limit_ms} ms: request and output-token \
                 throughput are below what the client can time",
                d * 1e3
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acceptance::run_speculates;

    /// The shape's speculation flag is [`run_speculates`]'s.
    #[test]
    fn the_shape_speculates_as_run_speculates_says() {
        let spec = RequestRecord {
            spec: Some(Default::default()),
            ..Default::default()
        };
        let warm = RequestRecord {
            warmup: true,
            ..spec.clone()
        };
        for records in [vec![warm.clone()], vec![warm, spec], vec![]] {
            let mut shape = RunShape::new();
            records.iter().for_each(|r| shape.add(r));
            assert_eq!(shape.span.speculates(), run_speculates(&records));
        }
    }
}
