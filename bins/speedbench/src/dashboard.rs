//! `--ui-type dashboard`: a live view of a long run on stderr's terminal,
//! redrawn four times a second: requests done and in flight, the request
//! rate, TTFT, ITL and latency percentiles, acceptance per category as it
//! accumulates and errors by kind. The figures are
//! `speedbench_metrics::LiveFigures`' (fed by a `LiveSink`); this draws
//! them. stdout is untouched: the results still go there at the end.

use std::io::Stderr;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::{Constraint, Layout};
use ratatui::widgets::{Block, Paragraph, Row, Table};
use speedbench_client::{LiveSink, Progress};
use speedbench_metrics::{LivePercentiles, LiveSnapshot};

/// The running view; end it with [`finish`].
pub(crate) struct Dashboard {
    task: tokio::task::JoinHandle<()>,
}

/// Takes over stderr's terminal (its alternate screen) until [`finish`];
/// `None` when the terminal refuses.
pub(crate) fn spawn(progress: Arc<Progress>, live: LiveSink) -> Option<Dashboard> {
    let mut stderr = std::io::stderr();
    execute!(stderr, terminal::EnterAlternateScreen, cursor::Hide).ok()?;
    let mut screen = Terminal::new(CrosstermBackend::new(std::io::stderr())).ok()?;
    let start = Instant::now();
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tick.tick().await;
            draw(&mut screen, &progress, &live, start.elapsed());
        }
    });
    Some(Dashboard { task })
}

/// Gives the terminal back as it was.
pub(crate) fn finish(dashboard: Dashboard) {
    dashboard.task.abort();
    let _ = execute!(
        std::io::stderr(),
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
}

fn now_unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

fn draw(
    screen: &mut Terminal<CrosstermBackend<Stderr>>,
    progress: &Progress,
    live: &LiveSink,
    elapsed: Duration,
) {
    let now = live.snapshot(now_unix_ns());
    let _ = screen.draw(|frame| {
        let [head, latency, categories] = Layout::vertical([
            Constraint::Length(5),
            Constraint::Length(6),
            Constraint::Min(3),
        ])
        .areas(frame.area());
        frame.render_widget(header(progress, &now, elapsed), head);
        frame.render_widget(latency_table(&now), latency);
        frame.render_widget(category_table(&now), categories);
    });
}

/// Counts, in flight, rate and errors by kind.
fn header(progress: &Progress, now: &LiveSnapshot, elapsed: Duration) -> Paragraph<'static> {
    let planned = match progress.planned() {
        0 => String::new(),
        n => format!(" of {n}"),
    };
    let errors = match now.failed.is_empty() {
        true => "none".to_string(),
        false => (now.failed.iter())
            .map(|(kind, n)| format!("{kind}: {n}"))
            .collect::<Vec<_>>()
            .join(", "),
    };
    let lines = [
        format!(
            "requests {}{planned} done, {} in flight, {:.1} req/s (last 10 s), {:.0} s elapsed",
            progress.done(),
            progress.in_flight(),
            now.request_rate,
            elapsed.as_secs_f64()
        ),
        format!(
            "succeeded {}, failed {}, cancelled on purpose {}",
            now.succeeded,
            progress.failed(),
            now.client_cancelled
        ),
        format!("errors by kind: {errors}"),
    ];
    Paragraph::new(lines.join("\n")).block(Block::bordered().title(" speedbench: live "))
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

fn percentile_row(name: &'static str, p: &LivePercentiles) -> Row<'static> {
    Row::new(vec![name.to_string(), ms(p.p50), ms(p.p90), ms(p.p99)])
}

/// TTFT, ITL and latency percentiles (within 4.5%: the run's own figures
/// at the end are exact).
fn latency_table(now: &LiveSnapshot) -> Table<'static> {
    let rows = vec![
        percentile_row("TTFT ms", &now.ttft_ms),
        percentile_row("ITL ms", &now.itl_ms),
        percentile_row("latency ms", &now.latency_ms),
    ];
    Table::new(rows, [Constraint::Length(12); 4])
        .header(Row::new(["", "p50", "p90", "p99"]))
        .block(Block::bordered().title(" latency (live, within 4.5%) "))
}

/// Acceptance length and rate per category so far.
fn category_table(now: &LiveSnapshot) -> Table<'static> {
    let rows: Vec<Row> = (now.categories.iter())
        .map(|c| {
            Row::new(vec![
                c.name.clone(),
                c.requests.to_string(),
                c.acceptance_length
                    .map_or("-".into(), |v| format!("{v:.2}")),
                c.acceptance_rate_pct
                    .map_or("-".into(), |v| format!("{v:.1}%")),
            ])
        })
        .collect();
    let widths = [
        Constraint::Length(24),
        Constraint::Length(10),
        Constraint::Length(18),
        Constraint::Length(16),
    ];
    Table::new(rows, widths)
        .header(Row::new([
            "category",
            "requests",
            "acceptance length",
            "acceptance rate",
        ]))
        .block(Block::bordered().title(" speculation by category "))
}
