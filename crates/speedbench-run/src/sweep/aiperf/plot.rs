//! `plot:`, AIPerf's plot envelope: the sweep plots it asks for
//! (`visualization.multi_run_defaults`), read into [`SweepPlots`]. The
//! envelope inline, or a path to a file holding it (relative to the
//! config's directory).

use std::path::Path;

use speedbench_metrics::{PLOT_METRICS, PLOT_STATS, PlotMetric};
use speedbench_report::SweepPlotKind;

use super::shape::snake_keys;
use super::unsupported;
use crate::sweep::{PlotAxis, PlotRequest, SweepPlots};
use crate::yaml::{Node, Value};

type Refusal = (usize, String);

/// The plots `value` (a config's `plot:`) asks a sweep to draw; `config`
/// is the config's path, against which a path to an envelope file is read.
pub(super) fn read_plot(value: &Node, config: &Path) -> Result<SweepPlots, Refusal> {
    let file;
    let envelope = match &value.value {
        Value::Str(path) => {
            let path = config.parent().unwrap_or(Path::new(".")).join(path);
            let in_file = |what: String| (value.line, format!("plot: {}: {what}", path.display()));
            let text = std::fs::read_to_string(&path).map_err(|e| in_file(e.to_string()))?;
            file = snake_keys(
                crate::yaml::parse(&text).map_err(|(l, m)| in_file(format!("line {l}: {m}")))?,
            );
            &file
        }
        _ => value,
    };
    let mut plots = SweepPlots::default();
    for (key, node) in mapping(envelope, "plot")? {
        match key.name.as_str() {
            "visualization" => visualization(node, &mut plots)?,
            "settings" => plots.notes.push(
                "plot.settings: not used: its settings shape server-metrics plots, which \
                 speedbench does not draw"
                    .into(),
            ),
            other => {
                return Err(unsupported(
                    key,
                    &format!("plot.{other}"),
                    "speedbench draws the sweep plots of `plot.visualization`, a line per model",
                ));
            }
        }
    }
    Ok(plots)
}

fn mapping<'n>(node: &'n Node, name: &str) -> Result<&'n [(crate::yaml::Key, Node)], Refusal> {
    node.entries().ok_or((
        node.line,
        format!("`{name}`: a mapping, not {}", node.kind()),
    ))
}

/// `plot.visualization`: the multi-run defaults drawn, the single-run ones
/// said to be AIPerf's for one run.
fn visualization(node: &Node, plots: &mut SweepPlots) -> Result<(), Refusal> {
    check_visualization_fields(node)?;
    for (kind, defined) in [
        ("multi_run", "multi_run_plots"),
        ("single_run", "single_run_plots"),
    ] {
        for (line, name) in plot_names(node, &format!("{kind}_defaults"))? {
            if node.get(defined).and_then(|p| p.get(&name)).is_none() {
                return Err((
                    line,
                    format!(
                        "`plot.visualization.{kind}_defaults`: `{name}` is not defined in `{defined}`"
                    ),
                ));
            }
        }
    }
    let defined = |name: &str| node.get("multi_run_plots").and_then(|p| p.get(name));
    for (_, name) in plot_names(node, "multi_run_defaults")? {
        let Some(spec) = defined(&name) else {
            continue;
        };
        match plot_request(&name, spec)? {
            Ok(request) => plots.draw.push(request),
            Err(why) => plots.notes.push(format!("plot `{name}`: not drawn: {why}")),
        }
    }
    let single: Vec<String> = plot_names(node, "single_run_defaults")?
        .into_iter()
        .map(|(_, n)| n)
        .collect();
    if !single.is_empty() {
        plots.notes.push(format!(
            "plot.visualization.single_run_defaults ({}): AIPerf draws these only when `aiperf \
             plot` is given one run's directory, not for a sweep; `speedbench report RUN \
             --format html` draws a run's figures",
            single.join(", ")
        ));
    }
    Ok(())
}

/// `plot.visualization` holds only the four fields AIPerf's envelope has.
fn check_visualization_fields(node: &Node) -> Result<(), Refusal> {
    let known = [
        "multi_run_defaults",
        "multi_run_plots",
        "single_run_defaults",
        "single_run_plots",
    ];
    for (key, _) in mapping(node, "plot.visualization")? {
        if !known.contains(&key.name.as_str()) {
            return Err(unsupported(
                key,
                &format!("plot.visualization.{}", key.name),
                "speedbench reads `multi_run_defaults`/`multi_run_plots` and `single_run_defaults`/`single_run_plots`",
            ));
        }
    }
    Ok(())
}

/// The plot names a `*_defaults` list of `plot.visualization` gives, each
/// with its line.
fn plot_names(node: &Node, field: &str) -> Result<Vec<(usize, String)>, Refusal> {
    match node.get(field).map(|n| (n.line, &n.value)) {
        None | Some((_, Value::Null)) => Ok(Vec::new()),
        Some((_, Value::List(items))) => items
            .iter()
            .map(|i| {
                i.scalar_text().map(|t| (i.line, t)).ok_or((
                    i.line,
                    format!("`plot.visualization.{field}`: names of plots"),
                ))
            })
            .collect(),
        Some((line, _)) => Err((
            line,
            format!("`plot.visualization.{field}`: a list of plot names"),
        )),
    }
}

/// One `multi_run_plots` entry as a plot to draw; `Ok(Err(why))` for one
/// that needs what a sweep does not measure (GPU telemetry).
fn plot_request(name: &str, spec: &Node) -> Result<Result<PlotRequest, String>, Refusal> {
    let prefix = format!("plot.visualization.multi_run_plots.{name}");
    let field = |f: &str| format!("{prefix}.{f}");
    let allowed = [
        "type",
        "description",
        "x",
        "y",
        "labels",
        "groups",
        "autoscale",
        "title",
    ];
    for (key, _) in mapping(spec, &prefix)? {
        if !allowed.contains(&key.name.as_str()) {
            return Err(unsupported(
                key,
                &field(&key.name),
                "a `pareto` or `scatter_line` plot takes type, x, y, labels, groups, title, description and autoscale",
            ));
        }
    }
    let kind = plot_kind(spec, &field("type"))?;
    check_groups(spec, &field("groups"))?;
    let (x, y) = match (axis(spec, "x", &field)?, axis(spec, "y", &field)?) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(why), _) | (_, Err(why)) => return Ok(Err(why)),
    };
    let title = spec
        .get("title")
        .and_then(Node::scalar_text)
        .unwrap_or_else(|| format!("{} vs {}", y.tag, x.tag));
    Ok(Ok(PlotRequest {
        name: name.to_string(),
        kind,
        x,
        y,
        title,
    }))
}

/// A plot's `type`: the two kinds a sweep plot draws.
fn plot_kind(spec: &Node, field: &str) -> Result<SweepPlotKind, Refusal> {
    match spec.get("type").and_then(Node::scalar_text).as_deref() {
        Some("pareto") => Ok(SweepPlotKind::Pareto),
        Some("scatter_line") => Ok(SweepPlotKind::ScatterLine),
        other => Err((
            spec.get("type").map_or(spec.line, |t| t.line),
            format!(
                "`{field}: {}`: speedbench draws a sweep's `pareto` and `scatter_line` plots",
                other.unwrap_or("(none)")
            ),
        )),
    }
}

/// A plot's `groups`: by model, or not given.
fn check_groups(spec: &Node, field: &str) -> Result<(), Refusal> {
    let Some(groups) = spec.get("groups") else {
        return Ok(());
    };
    let by_model = matches!(&groups.value, Value::List(l)
        if l.iter().all(|g| g.scalar_text().as_deref() == Some("model")));
    if by_model {
        return Ok(());
    }
    Err((
        groups.line,
        format!("`{field}`: speedbench draws a line per model (`[model]`)"),
    ))
}

/// The `x` or `y` of a plot: `{metric, stat}` (stat `avg` unless given).
fn axis(
    spec: &Node,
    which: &str,
    field: &dyn Fn(&str) -> String,
) -> Result<Result<PlotAxis, String>, Refusal> {
    let node = spec
        .get(which)
        .ok_or((spec.line, format!("`{}`: missing", field(which))))?;
    let tag = node
        .get("metric")
        .and_then(Node::scalar_text)
        .ok_or((node.line, format!("`{}`: `{{metric, stat}}`", field(which))))?;
    let stat = node
        .get("stat")
        .and_then(Node::scalar_text)
        .unwrap_or_else(|| "avg".into());
    let Some(metric) = PlotMetric::named(&tag) else {
        if tag.ends_with("_per_gpu") {
            return Ok(Err(format!(
                "`{tag}` needs GPU telemetry per GPU, which a sweep plot does not read"
            )));
        }
        return Err((
            node.line,
            format!(
                "`{}.metric: {tag}`: speedbench plots {}",
                field(which),
                PLOT_METRICS.join(", ")
            ),
        ));
    };
    let stats: &[&str] = if metric.is_one_value() {
        &["avg"]
    } else {
        &PLOT_STATS
    };
    if !stats.contains(&stat.as_str()) {
        return Err((
            node.line,
            format!(
                "`{}.stat: {stat}`: `{tag}` has {}",
                field(which),
                stats.join(", ")
            ),
        ));
    }
    Ok(Ok(PlotAxis { tag, metric, stat }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `plot:` of a config's text, read.
    fn read(text: &str, config: &Path) -> Result<SweepPlots, Refusal> {
        let root = snake_keys(crate::yaml::parse(text).unwrap());
        read_plot(root.get("plot").unwrap(), config)
    }

    fn template() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/aiperf/configs/sweep_with_plot.yaml")
    }

    use std::path::PathBuf;

    /// AIPerf's `sweep_with_plot` template: its two multi-run defaults
    /// drawn as written; its single-run defaults and settings said.
    #[test]
    fn aiperfs_template_asks_for_its_two_sweep_plots() {
        let text = std::fs::read_to_string(template()).unwrap();
        let plots = read(&text, &template()).unwrap();
        let got: Vec<(&str, SweepPlotKind, &str, &str, &str, &str, &str)> = plots
            .draw
            .iter()
            .map(|p| {
                (
                    p.name.as_str(),
                    p.kind,
                    p.x.tag.as_str(),
                    p.x.stat.as_str(),
                    p.y.tag.as_str(),
                    p.y.stat.as_str(),
                    p.title.as_str(),
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (
                    "pareto_throughput_vs_latency",
                    SweepPlotKind::Pareto,
                    "request_latency",
                    "avg",
                    "output_token_throughput",
                    "avg",
                    "Pareto: Output Token Throughput vs Latency"
                ),
                (
                    "ttft_vs_throughput",
                    SweepPlotKind::ScatterLine,
                    "time_to_first_token",
                    "avg",
                    "request_throughput",
                    "avg",
                    "TTFT vs Request Throughput"
                ),
            ]
        );
        assert_eq!(plots.notes.len(), 2, "{:?}", plots.notes);
        assert!(plots.notes[0].contains("ttft_over_time, timeslices_ttft, timeslices_itl"));
        assert!(plots.notes[1].starts_with("plot.settings: not used"));
    }

    const ONE: &str = "plot:\n  visualization:\n    multi_run_defaults: [p]\n    multi_run_plots:\n      p:\n        type: pareto\n        x: {metric: request_latency, stat: p90}\n        y: {metric: output_token_throughput}\n";

    #[test]
    fn each_bad_field_is_refused_at_its_line() {
        let config = Path::new("c.yaml");
        let plots = read(ONE, config).unwrap();
        assert_eq!(
            (plots.draw[0].x.stat.as_str(), plots.draw[0].y.stat.as_str()),
            ("p90", "avg")
        );
        assert_eq!(
            plots.draw[0].title,
            "output_token_throughput vs request_latency"
        );
        let refused = |text: String| read(&text, config).unwrap_err();
        let (line, why) = refused(ONE.replace("[p]", "[p, q]"));
        assert_eq!(line, 3);
        assert!(
            why.contains("`q` is not defined in `multi_run_plots`"),
            "{why}"
        );
        let (line, why) = refused(ONE.replace("type: pareto", "type: heatmap"));
        assert_eq!(line, 6);
        assert!(
            why.contains("draws a sweep's `pareto` and `scatter_line` plots"),
            "{why}"
        );
        let (line, why) = refused(ONE.replace("metric: request_latency", "metric: goodput"));
        assert_eq!(line, 7);
        assert!(
            why.contains("speedbench plots request_latency, time_to_first_token"),
            "{why}"
        );
        let (_, why) = refused(ONE.replace(
            "metric: output_token_throughput}",
            "metric: output_token_throughput, stat: p90}",
        ));
        assert!(why.contains("`output_token_throughput` has avg"), "{why}");
        let (line, why) = refused(ONE.replace(
            "        type: pareto\n",
            "        type: pareto\n        groups: [endpoint]\n",
        ));
        assert_eq!(line, 7);
        assert!(why.contains("a line per model"), "{why}");
        let (line, why) = refused(format!(
            "{ONE}  experiment_classification:\n    default: treatment\n"
        ));
        assert_eq!(line, 9);
        assert!(
            why.contains("`plot.experiment_classification` is not run by speedbench"),
            "{why}"
        );
    }

    /// A plot of GPU telemetry is not drawn, and said; the others still
    /// are.
    #[test]
    fn a_plot_per_gpu_is_said_not_drawn() {
        let text = ONE.replace(
            "metric: output_token_throughput",
            "metric: output_token_throughput_per_gpu",
        );
        let plots = read(&text, Path::new("c.yaml")).unwrap();
        assert!(plots.draw.is_empty());
        assert_eq!(plots.notes.len(), 1);
        assert!(
            plots.notes[0].contains(
                "plot `p`: not drawn: `output_token_throughput_per_gpu` needs GPU telemetry"
            ),
            "{:?}",
            plots.notes
        );
    }

    /// Form A: the envelope in a file beside the config.
    #[test]
    fn the_envelope_may_be_a_file_beside_the_config() {
        let dir = tempfile::tempdir().unwrap();
        let body = ONE
            .strip_prefix("plot:\n")
            .unwrap()
            .lines()
            .map(|l| &l[2..])
            .collect::<Vec<_>>()
            .join("\n");
        std::fs::create_dir(dir.path().join("plots")).unwrap();
        std::fs::write(dir.path().join("plots/base.yaml"), body).unwrap();
        let config = dir.path().join("sweep.yaml");
        let plots = read("plot: ./plots/base.yaml\n", &config).unwrap();
        assert_eq!(plots.draw.len(), 1);
        let (line, why) = read("plot: ./plots/missing.yaml\n", &config).unwrap_err();
        assert_eq!(line, 1);
        assert!(why.contains("missing.yaml"), "{why}");
    }
}
