//! The integration tests of `speedbench-client`: one test binary with a module per
//! subject (as ripgrep and cargo do), so the crate and its dependencies
//! are linked once for all of them.

mod common;

mod extension;
mod load;
mod scrape;
mod scrape_sequence;
mod stale_connection;
mod timing;
mod wire;
