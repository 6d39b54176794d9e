//! What a benchmark program needs of its process: enough file descriptors
//! for its concurrency, and a Ctrl-C that keeps what was measured.

mod limits;
mod signals;

pub use limits::raise_open_files;
pub use signals::{EXIT_SIGINT, EXIT_SIGTERM, SignalEvent, SignalWatch, stop_on_signals};
pub(crate) use signals::{disown_group, own_group};
