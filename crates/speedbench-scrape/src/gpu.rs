//! GPU power, utilisation, memory and energy from NVIDIA's DCGM exporter
//! (`--gpu-telemetry`), read from a scrape's export: the exporter's
//! Prometheus text scraped during the run like the server's own metrics.
//!
//! Per GPU (one per `UUID`, else per `gpu` index, and endpoint): power
//! `DCGM_FI_DEV_POWER_USAGE` (W), utilisation `DCGM_FI_DEV_GPU_UTIL` (%)
//! and framebuffer in use `DCGM_FI_DEV_FB_USED` (MiB), each averaged over
//! the samples inside the profiling window with its maximum; energy the
//! increase of `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` (mJ since boot) from
//! the scrape that opened the window to the one after the last request.
//! Energy per output token is the energy of every GPU that reports it,
//! summed, over the run's output tokens.

use serde::{Deserialize, Serialize};

use crate::export::{SeriesExport, SeriesStats, ServerMetricsExport};

/// The DCGM field of a GPU's power draw, W.
pub const DCGM_POWER: &str = "DCGM_FI_DEV_POWER_USAGE";
/// The DCGM field of a GPU's energy since boot, mJ (a counter).
pub const DCGM_ENERGY: &str = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION";
/// The DCGM field of a GPU's utilisation, %.
pub const DCGM_UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
/// The DCGM field of a GPU's framebuffer memory in use, MiB.
pub const DCGM_FB_USED: &str = "DCGM_FI_DEV_FB_USED";

/// A gauge over the window: its mean and its largest sample.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GaugeFigure {
    /// Mean of the samples in the window.
    pub avg: f64,
    /// Largest sample in the window.
    pub max: f64,
}

/// One GPU's figures over the profiling window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuFigures {
    /// The exporter scraped.
    pub endpoint_url: String,
    /// The `gpu` label (the index on its host).
    pub gpu: String,
    /// The `UUID` label, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// The `modelName` label, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_name: Option<String>,
    /// The `Hostname` label, when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<String>,
    /// Power draw, W.
    pub power_w: Option<GaugeFigure>,
    /// Utilisation, %.
    pub utilization_pct: Option<GaugeFigure>,
    /// Framebuffer memory in use, MiB.
    pub memory_used_mib: Option<GaugeFigure>,
    /// Energy over the window, J.
    pub energy_j: Option<f64>,
}

/// Every GPU's figures and the energy per output token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuTelemetry {
    /// One entry per GPU, in endpoint then `gpu` order.
    pub gpus: Vec<GpuFigures>,
    /// Σ energy of the GPUs that report it, J.
    pub energy_j: Option<f64>,
    /// GPUs without an energy counter (not in `energy_j`).
    pub gpus_without_energy: usize,
    /// The run's output tokens (successful, measured requests).
    pub output_tokens: u64,
    /// `energy_j / output_tokens`, J per token.
    pub energy_per_output_token_j: Option<f64>,
}

impl GpuTelemetry {
    /// The GPUs of `export` (the DCGM exporters' scrape) and the energy
    /// per token of a run that produced `output_tokens`; `None` when the
    /// export holds no DCGM GPU series.
    pub fn from_export(export: &ServerMetricsExport, output_tokens: u64) -> Option<GpuTelemetry> {
        let mut gpus: Vec<GpuFigures> = Vec::new();
        for name in [DCGM_POWER, DCGM_UTIL, DCGM_FB_USED, DCGM_ENERGY] {
            let Some(family) = export.family(name) else {
                continue;
            };
            // A MIG instance's series (GPU_I_ID) is not the whole GPU's.
            for s in family
                .series
                .iter()
                .filter(|s| !s.labels.contains_key("GPU_I_ID"))
            {
                let at = match gpus.iter().position(|g| same_gpu(g, s)) {
                    Some(i) => i,
                    None => {
                        gpus.push(new_gpu(s));
                        gpus.len() - 1
                    }
                };
                set_figure(&mut gpus[at], name, s.stats.as_ref());
            }
        }
        if gpus.is_empty() {
            return None;
        }
        gpus.sort_by(|a, b| {
            (&a.endpoint_url, gpu_order(&a.gpu)).cmp(&(&b.endpoint_url, gpu_order(&b.gpu)))
        });
        let energies: Vec<f64> = gpus.iter().filter_map(|g| g.energy_j).collect();
        let energy_j = (!energies.is_empty()).then(|| energies.iter().sum::<f64>());
        Some(GpuTelemetry {
            gpus_without_energy: gpus.len() - energies.len(),
            energy_per_output_token_j: energy_j
                .filter(|_| output_tokens > 0)
                .map(|e| e / output_tokens as f64),
            energy_j,
            output_tokens,
            gpus,
        })
    }
}

/// One side's energy over one or more runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EnergySide {
    /// Runs pooled.
    pub runs: usize,
    /// Σ energy of their GPUs, J.
    pub energy_j: f64,
    /// Σ their output tokens.
    pub output_tokens: u64,
    /// `energy_j / output_tokens`.
    pub energy_per_output_token_j: f64,
}

impl EnergySide {
    /// The runs' energy pooled (energy and tokens summed, divided once);
    /// `None` unless every run has an energy figure and a token.
    pub fn of(runs: &[GpuTelemetry]) -> Option<EnergySide> {
        let energy_j = runs.iter().map(|t| t.energy_j).sum::<Option<f64>>()?;
        let output_tokens: u64 = runs.iter().map(|t| t.output_tokens).sum();
        (output_tokens > 0 && !runs.is_empty()).then(|| EnergySide {
            runs: runs.len(),
            energy_j,
            output_tokens,
            energy_per_output_token_j: energy_j / output_tokens as f64,
        })
    }
}

/// Energy per output token with and without speculation: speculation
/// spends compute to save time, and users pay for both.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EnergyComparison {
    /// The baseline's.
    pub baseline: EnergySide,
    /// The speculative run's.
    pub speculative: EnergySide,
    /// Speculative J per token over the baseline's (below 1: speculation
    /// spent less energy per token).
    pub energy_per_token_ratio: f64,
}

impl EnergyComparison {
    /// Both sides' energy; `None` unless both have one.
    pub fn of(baseline: &[GpuTelemetry], speculative: &[GpuTelemetry]) -> Option<EnergyComparison> {
        let (b, s) = (EnergySide::of(baseline)?, EnergySide::of(speculative)?);
        (b.energy_per_output_token_j > 0.0).then(|| EnergyComparison {
            energy_per_token_ratio: s.energy_per_output_token_j / b.energy_per_output_token_j,
            baseline: b,
            speculative: s,
        })
    }
}

/// `gpu` labels sort as numbers where they are.
fn gpu_order(gpu: &str) -> (u64, String) {
    (gpu.parse().unwrap_or(u64::MAX), gpu.to_string())
}

fn label(s: &SeriesExport, name: &str) -> Option<String> {
    s.labels.get(name).cloned()
}

fn same_gpu(g: &GpuFigures, s: &SeriesExport) -> bool {
    g.endpoint_url == s.endpoint_url
        && match (&g.uuid, s.labels.get("UUID")) {
            (Some(a), Some(b)) => a == b,
            _ => s.labels.get("gpu") == Some(&g.gpu),
        }
}

fn new_gpu(s: &SeriesExport) -> GpuFigures {
    GpuFigures {
        endpoint_url: s.endpoint_url.clone(),
        gpu: label(s, "gpu").unwrap_or_default(),
        uuid: label(s, "UUID"),
        model_name: label(s, "modelName"),
        hostname: label(s, "Hostname"),
        power_w: None,
        utilization_pct: None,
        memory_used_mib: None,
        energy_j: None,
    }
}

fn set_figure(g: &mut GpuFigures, name: &str, stats: Option<&SeriesStats>) {
    let gauge = || match stats {
        Some(SeriesStats::Gauge(s)) if s.avg.is_finite() && s.max.is_finite() => {
            Some(GaugeFigure {
                avg: s.avg,
                max: s.max,
            })
        }
        _ => None,
    };
    match name {
        DCGM_POWER => g.power_w = gauge(),
        DCGM_UTIL => g.utilization_pct = gauge(),
        DCGM_FB_USED => g.memory_used_mib = gauge(),
        _ => {
            g.energy_j = match stats {
                Some(SeriesStats::Counter(c)) if c.total.is_finite() => Some(c.total / 1000.0),
                _ => None,
            }
        }
    }
}

/// Whether an exposition is a DCGM exporter's: it holds a `DCGM_FI_`
/// family.
pub fn is_dcgm(exposition: &crate::Exposition) -> bool {
    exposition
        .samples
        .iter()
        .any(|s| s.name.starts_with("DCGM_FI_"))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{EndpointSamples, Window, parse_exposition};

    const A100: &str = include_str!("../../../fixtures/dcgm/a100-dcgm-exporter.prom");
    const README: &str = include_str!("../../../fixtures/dcgm/dcgm-exporter-readme.prom");

    /// The A100 sample with its power and energy set: as the exporter
    /// would answer a little later.
    fn a100_at(power_w: f64, energy_mj: u64) -> String {
        A100.lines()
            .map(|l| {
                let value = if l.starts_with("DCGM_FI_DEV_POWER_USAGE{") {
                    power_w.to_string()
                } else if l.starts_with("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{") {
                    energy_mj.to_string()
                } else {
                    return format!("{l}\n");
                };
                format!("{} {value}\n", l.rsplit_once(' ').unwrap().0)
            })
            .collect()
    }

    fn export(scrapes: &[(i64, String)], window: Window) -> ServerMetricsExport {
        let mut samples = EndpointSamples::new();
        for (at, text) in scrapes {
            samples.record(
                &parse_exposition(text).unwrap(),
                *at,
                Duration::from_millis(1),
            );
        }
        ServerMetricsExport::from_samples(
            vec![("http://127.0.0.1:9400/metrics".into(), samples)],
            window,
            Duration::from_millis(333),
            "test",
        )
    }

    #[test]
    fn the_genuine_a100_sample_gives_one_gpu_by_hand() {
        // The reference scrape at 0 (the window opens at 1), two in the
        // window, the last after it: energy 319,159,391 -> 319,459,391 mJ.
        let scrapes = [
            (0, a100_at(409.692, 319_159_391)),
            (2, a100_at(400.0, 319_259_391)),
            (3, a100_at(420.0, 319_359_391)),
            (5, a100_at(100.0, 319_459_391)),
        ];
        let t = GpuTelemetry::from_export(
            &export(
                &scrapes,
                Window {
                    start: Some(1),
                    end: Some(4),
                },
            ),
            600,
        )
        .unwrap();
        assert_eq!(
            t.gpus.len(),
            1,
            "the MIG instance's series is not another GPU"
        );
        let g = &t.gpus[0];
        assert_eq!(
            g.uuid.as_deref(),
            Some("GPU-34319582-d595-d1c7-d1d2-179bcfa61660")
        );
        assert_eq!(
            (g.gpu.as_str(), g.hostname.as_deref()),
            ("0", Some("ub20-a100-k8s"))
        );
        assert_eq!(
            g.power_w,
            Some(GaugeFigure {
                avg: 410.0,
                max: 420.0
            }),
            "the samples in the window"
        );
        assert_eq!(
            g.memory_used_mib,
            Some(GaugeFigure {
                avg: 4845.0,
                max: 4845.0
            })
        );
        assert_eq!(
            g.utilization_pct, None,
            "the sample has no DCGM_FI_DEV_GPU_UTIL"
        );
        assert_eq!(g.energy_j, Some(300.0), "(319,459,391 - 319,159,391) mJ");
        assert_eq!((t.energy_j, t.gpus_without_energy), (Some(300.0), 0));
        assert_eq!(t.energy_per_output_token_j, Some(0.5));
    }

    #[test]
    fn energy_pools_runs_and_divides_once() {
        let run = |energy_j: Option<f64>, output_tokens: u64| GpuTelemetry {
            gpus: Vec::new(),
            energy_j,
            gpus_without_energy: 0,
            output_tokens,
            energy_per_output_token_j: None,
        };
        // Baseline: (300 + 100) J over (100 + 300) tokens = 1 J/token, not
        // the mean of 3 and 1/3. Speculative: 150 J over 300 tokens.
        let base = [run(Some(300.0), 100), run(Some(100.0), 300)];
        let spec = [run(Some(150.0), 300)];
        let c = EnergyComparison::of(&base, &spec).unwrap();
        assert_eq!(
            (c.baseline.runs, c.baseline.energy_per_output_token_j),
            (2, 1.0)
        );
        assert_eq!(c.speculative.energy_per_output_token_j, 0.5);
        assert_eq!(c.energy_per_token_ratio, 0.5);
        assert!(EnergySide::of(&[run(None, 10)]).is_none());
        assert!(EnergySide::of(&[]).is_none());
    }

    #[test]
    fn the_readme_sample_parses_and_has_no_gpu_figures() {
        let e = parse_exposition(README).unwrap();
        assert!(is_dcgm(&e));
        assert_eq!(
            e.samples[0].labels[1],
            (
                "UUID".into(),
                "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52".into()
            )
        );
        let x = export(
            &[(0, README.to_string())],
            Window {
                start: Some(0),
                end: Some(1),
            },
        );
        assert!(
            GpuTelemetry::from_export(&x, 10).is_none(),
            "no power, memory or energy field"
        );
        assert!(!is_dcgm(
            &parse_exposition("vllm:num_requests_running 1\n").unwrap()
        ));
    }
}
