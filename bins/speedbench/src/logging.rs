//! Where the libraries' `tracing` events go: stderr, as plain lines
//! (`warning: ...`, like every other warning the binary prints), unless
//! `RUST_LOG` asks for more, which gets tracing's full format (time, level,
//! fields) for debugging.

use std::fmt;

use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// Installs the subscriber: plain warnings by default, tracing's format
/// under `RUST_LOG`.
pub(crate) fn init() {
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    match tracing_subscriber::EnvFilter::try_from_default_env() {
        Ok(filter) => tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            .with_env_filter(filter)
            .with_target(false)
            // Colours only for a person at a terminal, never into a log file.
            .with_ansi(ansi)
            .init(),
        Err(_) => tracing_subscriber::fmt()
            .with_writer(std::io::stderr)
            // The upstream prepare step's progress (tens of minutes) is shown.
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "warn,speedbench_dataset::upstream=info",
            ))
            // The fields' styling too: only for a person at a terminal.
            .with_ansi(ansi)
            .event_format(Plain)
            .init(),
    }
}

/// `warning: MESSAGE` / `error: MESSAGE` / `MESSAGE`, the event's fields
/// after its message.
struct Plain;

impl<S, N> FormatEvent<S, N> for Plain
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        match *event.metadata().level() {
            Level::ERROR => write!(writer, "error: ")?,
            Level::WARN => write!(writer, "warning: ")?,
            _ => {}
        }
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}
