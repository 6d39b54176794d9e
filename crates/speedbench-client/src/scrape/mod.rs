//! Server-side metrics: scrape Prometheus endpoints over HTTP during a run
//! and export counter deltas and gauge statistics over the profiling window.
//!
//! Only the fetching loop lives here. The parser, the export types, the
//! reduction of samples to statistics and the acceptance precedence are
//! the `speedbench_scrape` crate's, re-exported below under their old
//! paths (NIM serves its metrics at `/v1/metrics`).
//!
//! - A [`Scraper`] fetches every endpoint every [`Scrape::interval`]
//!   (333 ms by default, as AIPerf) from the start of the run, takes one
//!   scrape exactly when the profiling window opens (the reference that
//!   excludes warmup), keeps going after the window closes until two
//!   scrapes in a row show the counters unchanged (at most
//!   [`Scrape::shutdown_delay`]), and builds a [`ServerMetricsExport`] with
//!   [`ServerMetricsExport::from_samples`].
//! - [`ServerMetricsExport::acceptance_length`] turns it into the number
//!   `speedbench report --source server` prints for the run.
//!
//! ```
//! use speedbench_client::scrape::{Scrape, Scraper};
//! use speedbench_sim::{SimConfig, SimServer};
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let server = SimServer::start(SimConfig::default(), ([127, 0, 0, 1], 0).into()).await?;
//! let scraper = Scraper::start(Scrape::new(vec![format!("{}/metrics", server.url())]))?;
//! scraper.mark_profiling_start().await; // after warmup, before the first measured request
//! // ... run the measured requests ...
//! scraper.mark_profiling_end();
//! // `true` would wait up to the shutdown delay for late counter updates.
//! let export = scraper.finish(false).await;
//! assert_eq!(export.summary.endpoints_successful.len(), 1);
//! if let Some(al) = export.acceptance_length() {
//!     println!("acceptance length {} ({})", al.value, al.weighting);
//! }
//! server.shutdown().await;
//! # Ok(()) }
//! ```

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use hyper::header::{HeaderName, HeaderValue};
use speedbench_http::{HttpClient, get_capped};

/// The file names of the export in a run directory (JSON, and AIPerf's CSV
/// and Parquet).
pub use speedbench_record::{
    SERVER_METRICS_CSV_FILE_NAME, SERVER_METRICS_FILE_NAME, SERVER_METRICS_PARQUET_FILE_NAME,
};
pub use speedbench_scrape::{
    Acceptance, CounterAggregate, CounterStats, EndpointInfo, EndpointSamples, EnergyComparison,
    EnergySide, ExportSummary, Exposition, GaugeStats, GpuFigures, GpuTelemetry, HistogramStats,
    IterationStatsTotals, MetricExport, MetricType, RawRow, RawServerMetrics, Sample, ScrapeError,
    SeriesExport, SeriesStats, ServerMetricsExport, SliceRates, SpecDecodeSummary, Weighting,
    Window, is_iteration_stats, parse_exposition,
};

use crate::discovery::{control_client, fetch_failure};
use crate::error::ClientError;
use crate::secrets::Secrets;
use crate::stop::StopHandle;
use crate::target::{ApiKey, Target, request_headers};

/// Which endpoints to scrape, and how often: the client's layer of the
/// scrape (the user's is `speedbench_run::ScrapeSpec`).
#[derive(Debug, Clone)]
pub struct Scrape {
    /// Full URLs of the Prometheus endpoints (e.g. `http://h:8000/metrics`,
    /// NIM's `http://h:8000/v1/metrics`).
    pub endpoints: Vec<String>,
    /// Time between scrapes (default 333 ms).
    pub interval: Duration,
    /// The longest the scraper keeps going after the profiling window
    /// closes, so counters the server publishes late are counted (default
    /// 2 s); it stops earlier, once two scrapes in a row show every
    /// counter unchanged.
    pub shutdown_delay: Duration,
    /// Deadline of one fetch (default 5 s).
    pub fetch_timeout: Duration,
    /// The most of one exposition read (default 32 MiB; the target's
    /// `max_response_bytes` for [`Scrape::for_target`]): a larger
    /// one is a failed scrape, read no further.
    pub max_body: usize,
    /// Extra CA roots (PEM) for HTTPS endpoints.
    pub extra_roots_pem: Vec<Vec<u8>>,
    /// Counters' rates per time slice of this length as well
    /// ([`speedbench_scrape::SliceRates`]; a run's `--slice-duration`).
    pub slice: Option<Duration>,
    /// Also write the export in AIPerf's CSV layout
    /// ([`SERVER_METRICS_CSV_FILE_NAME`], beside the JSON).
    pub csv: bool,
    /// Also keep the raw samples for AIPerf's Parquet layout
    /// ([`SERVER_METRICS_PARQUET_FILE_NAME`]).
    pub parquet: bool,
    /// API key and `-H` headers, sent only to endpoints whose URL starts
    /// with one of `key_origins` (the target's own servers).
    api_key: Option<ApiKey>,
    headers: Vec<(String, String)>,
    key_origins: Vec<String>,
}

impl Scrape {
    /// Scrapes `endpoints` with the default timings and no credentials.
    /// Entries without a scheme get `http://`, and entries without a path
    /// get `/metrics`.
    pub fn new(endpoints: Vec<String>) -> Scrape {
        Scrape {
            endpoints: endpoints.iter().map(|e| normalize_endpoint(e)).collect(),
            interval: Duration::from_millis(333),
            shutdown_delay: Duration::from_secs(2),
            fetch_timeout: Duration::from_secs(5),
            max_body: 32 * 1024 * 1024,
            extra_roots_pem: Vec::new(),
            slice: None,
            csv: false,
            parquet: false,
            api_key: None,
            headers: Vec::new(),
            key_origins: Vec::new(),
        }
    }

    /// Scrapes the target's own `/metrics` (every server's, with
    /// [`Target::more_urls`]) plus `extra` endpoints, with the target's CA
    /// roots; the target's API key and `-H` headers go to its own servers
    /// only, as they do for inference requests.
    ///
    /// The target's own endpoints are its engine's
    /// ([`crate::Engine::metrics_paths`]: TensorRT-LLM's
    /// `/prometheus/metrics` and JSON `/metrics`, NIM's `/v1/metrics`), or
    /// `/metrics` when the engine is not known.
    pub fn for_target(target: &Target, extra: &[String]) -> Scrape {
        let paths = target
            .engine
            .map_or(&["/metrics"][..], |e| e.metrics_paths());
        // Every server's: counters are summed over endpoints, so a fleet's
        // acceptance is its servers' tokens together.
        let mut endpoints: Vec<String> = (target.urls())
            .flat_map(|url| paths.iter().map(|p| url.join(p)))
            .collect();
        endpoints.extend(extra.iter().cloned());
        let mut c = Scrape::new(endpoints);
        let mut seen = std::collections::HashSet::new();
        c.endpoints.retain(|e| seen.insert(e.clone()));
        c.extra_roots_pem = target.extra_roots_pem.clone();
        c.max_body = target.max_response_bytes;
        c.api_key = target.api_key.clone();
        c.headers = target.headers.clone();
        c.key_origins = target.urls().map(|url| format!("{url}/")).collect();
        c
    }

    /// Only these endpoints (for `--server-metrics URL...` without the
    /// target's own), keeping credentials and roots.
    pub fn with_endpoints(mut self, endpoints: Vec<String>) -> Scrape {
        self.endpoints = endpoints.iter().map(|e| normalize_endpoint(e)).collect();
        self
    }
}

fn normalize_endpoint(e: &str) -> String {
    let with_scheme = if e.contains("://") {
        e.to_string()
    } else {
        format!("http://{e}")
    };
    let after_scheme = with_scheme.split_once("://").map_or("", |(_, r)| r);
    match after_scheme.find('/') {
        Some(i) if after_scheme.len() > i + 1 => with_scheme,
        _ => format!("{}/metrics", with_scheme.trim_end_matches('/')),
    }
}

/// One scrape's counter samples, `name{labels}` and the value's bits.
type CounterBits = Vec<(String, u64)>;

struct Inner {
    config: Scrape,
    client: HttpClient,
    headers: Vec<Vec<(HeaderName, HeaderValue)>>,
    /// Scrubs what endpoints send back (an echoing server may quote the key).
    secrets: Secrets,
    stores: Vec<Mutex<EndpointSamples>>,
    /// Running totals of endpoints that answer with TensorRT-LLM's JSON
    /// iteration statistics instead of Prometheus text.
    iteration_totals: Vec<Mutex<IterationStatsTotals>>,
    /// Each endpoint's counters at its latest scrape (`None` after a failed
    /// one), values as bits so that NaN equals itself.
    last_counters: Vec<Mutex<Option<CounterBits>>>,
    base: (Instant, i64),
    window: Mutex<Window>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Inner {
    fn unix_ns(&self, at: Instant) -> i64 {
        self.base.1 + at.saturating_duration_since(self.base.0).as_nanos() as i64
    }

    async fn fetch(&self, i: usize) {
        let url = &self.config.endpoints[i];
        let t0 = Instant::now();
        let result = get_capped(
            &self.client,
            url,
            &self.headers[i],
            self.config.fetch_timeout,
            self.config.max_body,
        )
        .await;
        let t1 = Instant::now();
        let parsed = match result {
            Ok(resp) if resp.status == 200 => std::str::from_utf8(&resp.body)
                .map_err(|_| "the exposition is not UTF-8".to_string())
                .and_then(|text| {
                    if is_iteration_stats(text) {
                        lock(&self.iteration_totals[i]).absorb(text)
                    } else {
                        parse_exposition(text)
                    }
                    .map_err(|e| e.to_string())
                })
                .map(|e| scrub_exposition(e, &self.secrets)),
            Ok(resp) => Err(format!("HTTP {}", resp.status)),
            Err(e) => Err(fetch_failure(url, &e)),
        }
        .map_err(|message| self.secrets.scrub(&message).into_owned());
        let ts = self.unix_ns(t1);
        *lock(&self.last_counters[i]) = parsed.as_ref().ok().map(|e| {
            e.counters()
                .into_iter()
                .map(|(k, v)| (k, v.to_bits()))
                .collect()
        });
        let mut store = lock(&self.stores[i]);
        match parsed {
            Ok(exposition) => store.record(&exposition, ts, t1 - t0),
            Err(message) => {
                if store.info().failed_fetches == 0 {
                    tracing::warn!("server metrics from {url}: {message}");
                }
                store.record_failure(message);
            }
        }
    }

    /// Every endpoint's counters at its latest scrape.
    fn counters(&self) -> Vec<Option<CounterBits>> {
        self.last_counters.iter().map(|c| lock(c).clone()).collect()
    }

    /// Scrapes every endpoint until two consecutive scrapes show the same
    /// counters everywhere, or the shutdown delay runs out: late counter
    /// updates are caught without waiting the whole delay when there are
    /// none. Returns how many scrapes it took.
    async fn settle(self: &Arc<Self>) -> u32 {
        let deadline = Instant::now() + self.config.shutdown_delay;
        self.fetch_all().await;
        let mut scrapes = 1;
        let mut previous = self.counters();
        loop {
            let now = Instant::now();
            if now >= deadline {
                return scrapes;
            }
            tokio::time::sleep(self.config.interval.min(deadline - now)).await;
            self.fetch_all().await;
            scrapes += 1;
            let current = self.counters();
            if current == previous {
                return scrapes;
            }
            previous = current;
        }
    }

    async fn fetch_all(self: &Arc<Self>) {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..self.config.endpoints.len() {
            let inner = self.clone();
            set.spawn(async move { inner.fetch(i).await });
        }
        while set.join_next().await.is_some() {}
    }
}

/// Scrapes Prometheus endpoints in the background during a run.
pub struct Scraper {
    inner: Arc<Inner>,
    stop: StopHandle,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Scraper {
    /// Starts scraping every endpoint now and every `interval` after, on the
    /// current tokio runtime. Failing fetches are counted, never fatal.
    pub fn start(config: Scrape) -> Result<Scraper, ClientError> {
        let urls = config.endpoints.iter().map(String::as_str);
        let client = control_client(&config.extra_roots_pem, urls)?;
        let own = request_headers(config.api_key.as_ref(), &config.headers)?;
        let headers = config
            .endpoints
            .iter()
            .map(|url| {
                let same_origin = config.key_origins.iter().any(|origin| {
                    url.starts_with(origin.as_str())
                        || format!("{url}/").starts_with(origin.as_str())
                });
                if same_origin { own.clone() } else { Vec::new() }
            })
            .collect();
        let secrets = Secrets::for_credentials(config.api_key.as_ref(), &config.headers);
        let unix_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        let inner = Arc::new(Inner {
            stores: config.endpoints.iter().map(|_| Mutex::default()).collect(),
            iteration_totals: config.endpoints.iter().map(|_| Mutex::default()).collect(),
            last_counters: config.endpoints.iter().map(|_| Mutex::default()).collect(),
            config,
            client,
            headers,
            secrets,
            base: (Instant::now(), unix_ns),
            window: Mutex::new(Window::default()),
        });
        let stop = StopHandle::new();
        let tasks = (0..inner.config.endpoints.len())
            .map(|i| {
                let inner = inner.clone();
                let stop = stop.clone();
                tokio::spawn(async move {
                    let mut tick = tokio::time::interval(inner.config.interval);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    loop {
                        tokio::select! {
                            _ = tick.tick() => inner.fetch(i).await,
                            _ = stop.stopped() => return,
                        }
                    }
                })
            })
            .collect();
        Ok(Scraper { inner, stop, tasks })
    }

    /// Scrapes every endpoint once, then opens the profiling window: that
    /// scrape is the reference for counter deltas, so everything counted
    /// before it (warmup) is excluded. Call it after warmup has finished and
    /// before the first measured request.
    pub async fn mark_profiling_start(&self) {
        self.inner.fetch_all().await;
        lock(&self.inner.window).start = Some(self.inner.unix_ns(Instant::now()));
    }

    /// Closes the profiling window (gauge statistics stop here).
    pub fn mark_profiling_end(&self) {
        lock(&self.inner.window).end = Some(self.inner.unix_ns(Instant::now()));
    }

    /// Whether the export is to be written in AIPerf's CSV layout too.
    pub fn writes_csv(&self) -> bool {
        self.inner.config.csv
    }

    /// Stops the periodic scrapes and takes the last ones, then computes the
    /// export. With `wait`, late counter updates are waited for: scrapes
    /// every interval until two in a row show every endpoint's counters
    /// unchanged, for at most [`Scrape::shutdown_delay`]; without it,
    /// one final scrape.
    pub async fn finish(self, wait: bool) -> ServerMetricsExport {
        self.finish_keeping_samples(wait).await.0
    }

    /// [`finish`](Scraper::finish), with the raw samples inside the
    /// window too when [`Scrape::parquet`] asks for them.
    pub async fn finish_keeping_samples(
        self,
        wait: bool,
    ) -> (ServerMetricsExport, Option<RawServerMetrics>) {
        self.stop.stop();
        for t in self.tasks {
            let _ = t.await;
        }
        if wait {
            let scrapes = self.inner.settle().await;
            tracing::debug!(scrapes, "server counters settled");
        } else {
            self.inner.fetch_all().await;
        }
        let inner = &self.inner;
        let window = *lock(&inner.window);
        let endpoints = inner
            .config
            .endpoints
            .iter()
            .zip(&inner.stores)
            .map(|(url, s)| (url.clone(), std::mem::take(&mut *lock(s))))
            .collect::<Vec<_>>();
        // To the last scrape, late counter updates included, as AIPerf
        // widens its Parquet window to its last collection.
        let widened = Window {
            end: None,
            ..window
        };
        let raw = (inner.config.parquet).then(|| RawServerMetrics::of(&endpoints, widened));
        let export = ServerMetricsExport::from_samples_in_slices(
            endpoints,
            window,
            inner.config.interval,
            format!("speedbench {}", env!("CARGO_PKG_VERSION")),
            inner.config.slice,
        );
        (export, raw)
    }
}

/// Checks, before a run, that each of `scrape`'s endpoints answers as a
/// DCGM exporter does (HTTP 200, Prometheus text with a `DCGM_FI_`
/// family); the first that does not, with what it answered.
pub async fn check_dcgm(scrape: &Scrape) -> Result<(), String> {
    let urls = scrape.endpoints.iter().map(String::as_str);
    let client = control_client(&scrape.extra_roots_pem, urls).map_err(|e| e.to_string())?;
    for url in &scrape.endpoints {
        let resp = get_capped(&client, url, &[], scrape.fetch_timeout, scrape.max_body)
            .await
            .map_err(|e| format!("{url}: {}", fetch_failure(url, &e)))?;
        if resp.status != 200 {
            return Err(format!("{url} answered HTTP {}", resp.status));
        }
        let text = std::str::from_utf8(&resp.body)
            .map_err(|_| format!("{url} answered something that is not text"))?;
        let exposition = parse_exposition(text)
            .map_err(|e| format!("{url} answered no Prometheus text ({e})"))?;
        if !speedbench_scrape::is_dcgm(&exposition) {
            return Err(format!(
                "{url} answered Prometheus text without a DCGM_FI_* metric: not a DCGM exporter \
                 (dcgm-exporter serves them at :9400/metrics)"
            ));
        }
    }
    Ok(())
}

/// Every name, label and help text of `e` scrubbed of `secrets`: what the
/// export stores comes from the server and may quote a credential.
fn scrub_exposition(mut e: Exposition, secrets: &Secrets) -> Exposition {
    let scrub = |s: &mut String| secrets.scrub_in_place(s);
    for sample in &mut e.samples {
        scrub(&mut sample.name);
        for (k, v) in &mut sample.labels {
            scrub(k);
            scrub(v);
        }
    }
    e.help = std::mem::take(&mut e.help)
        .into_iter()
        .map(|(mut k, mut v)| {
            scrub(&mut k);
            scrub(&mut v);
            (k, v)
        })
        .collect();
    e.types = std::mem::take(&mut e.types)
        .into_iter()
        .map(|(mut k, v)| {
            scrub(&mut k);
            (k, v)
        })
        .collect();
    e
}

/// The former name of [`Scrape`].
#[deprecated(
    since = "0.1.0",
    note = "renamed `Scrape`: one name per layer (`ScrapeSpec` asked for, `Scrape` run)"
)]
pub type ScrapeConfig = Scrape;

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[test]
    fn scraped_names_labels_and_help_lose_credentials() {
        let text = "# HELP m_total echo Bearer tok-abcdefgh\n# TYPE m_total counter\n\
                    m_total{auth=\"Bearer tok-abcdefgh\",k=\"hdr-secret-1\"} 1\n";
        let e = parse_exposition(text).unwrap();
        let secrets = Secrets::new(["hdr-secret-1".to_string()]);
        let e = scrub_exposition(e, &secrets);
        let all = format!("{:?}", e);
        assert!(
            !all.contains("tok-abcdefgh") && !all.contains("hdr-secret-1"),
            "{all}"
        );
        assert_eq!(e.samples[0].value, 1.0);
        assert_eq!(e.help["m_total"], "echo Bearer <redacted>");
    }

    #[test]
    fn the_targets_headers_go_to_its_own_metrics_only() {
        // Loopback ports nothing listens on: the first scrapes fail quietly.
        let mut t = Target::new(crate::BaseUrl::parse("127.0.0.1:9").unwrap(), "m");
        t.headers = vec![("X-Gw".into(), "v".into())];
        let c = Scrape::for_target(&t, &["127.0.0.1:10".into()]);
        assert_eq!(c.headers, t.headers);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let s = Scraper::start(c).unwrap();
            let names = |i: usize| -> Vec<String> {
                s.inner.headers[i]
                    .iter()
                    .map(|(n, _)| n.to_string())
                    .collect()
            };
            assert_eq!((names(0), names(1)), (vec!["x-gw".to_string()], vec![]));
            s.stop.stop();
        });
        // An Authorization header next to a key is refused here too.
        t.api_key = Some(ApiKey::new("k-123456"));
        t.headers = vec![("authorization".into(), "Bearer x".into())];
        let err = Scraper::start(Scrape::for_target(&t, &[]))
            .err()
            .unwrap()
            .to_string();
        assert!(
            err.contains("the API key") && err.contains("authorization"),
            "{err}"
        );
    }

    #[test]
    fn endpoints_get_a_scheme_and_a_path() {
        assert_eq!(normalize_endpoint("h:1"), "http://h:1/metrics");
        assert_eq!(normalize_endpoint("http://h:1/"), "http://h:1/metrics");
        assert_eq!(
            normalize_endpoint("https://h:1/v1/metrics"),
            "https://h:1/v1/metrics"
        );
    }

    /// A loopback `/metrics` whose counter grows by 5 on each of the first
    /// `moving` scrapes after `armed` is set, then stays; counts its scrapes.
    async fn moving_endpoint(
        moving: u64,
        armed: Arc<AtomicU64>,
        scrapes: Arc<AtomicU64>,
    ) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/metrics", listener.local_addr().unwrap());
        let value = Arc::new(AtomicU64::new(100));
        let left = Arc::new(AtomicU64::new(moving));
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let (armed, scrapes, value, left) =
                    (armed.clone(), scrapes.clone(), value.clone(), left.clone());
                tokio::spawn(async move {
                    let mut buf = [0u8; 4096];
                    loop {
                        match sock.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => {}
                        }
                        scrapes.fetch_add(1, Ordering::Relaxed);
                        if armed.load(Ordering::Relaxed) == 1
                            && left
                                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                                    n.checked_sub(1)
                                })
                                .is_ok()
                        {
                            value.fetch_add(5, Ordering::Relaxed);
                        }
                        let body = format!(
                            "# TYPE accepted_total counter\naccepted_total {}\n",
                            value.load(Ordering::Relaxed)
                        );
                        let reply = format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if sock.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        url
    }

    /// Runs the settling wait against a counter that moves `moving` times
    /// after the last request; returns the late counter total and how many
    /// scrapes the wait took (counted by `settle` and by the endpoint).
    async fn settle_on(moving: u64) -> (f64, u32, u64) {
        let (armed, scrapes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let url = moving_endpoint(moving, armed.clone(), scrapes.clone()).await;
        let mut config = Scrape::new(vec![url]);
        config.interval = Duration::from_millis(20);
        // Far longer than the test may take: only settling can end it early.
        config.shutdown_delay = Duration::from_secs(600);
        let mut scraper = Scraper::start(config).unwrap();
        scraper.mark_profiling_start().await;
        scraper.mark_profiling_end();
        // No periodic scrape may land in the count below.
        scraper.stop.stop();
        for t in std::mem::take(&mut scraper.tasks) {
            t.await.unwrap();
        }
        let before = scrapes.load(Ordering::Relaxed);
        // The last request just finished; the server updates its counters late.
        armed.store(1, Ordering::Relaxed);
        let settled = scraper.inner.settle().await;
        let seen = scrapes.load(Ordering::Relaxed) - before;
        let export = scraper.finish(false).await;
        let total = match export.metrics["accepted"].series[0].stats.as_ref() {
            Some(SeriesStats::Counter(c)) => c.total,
            other => panic!("{other:?}"),
        };
        (total, settled, seen)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn late_updates_are_counted_and_the_wait_ends_when_counters_stand_still() {
        // Three late updates of 5: all counted; the wait stops at the first
        // scrape equal to the one before (3 that moved + 1), not after 600 s.
        assert_eq!(settle_on(3).await, (15.0, 4, 4));
        // Nothing late: two scrapes, equal.
        assert_eq!(settle_on(0).await, (0.0, 2, 2));
    }
}
