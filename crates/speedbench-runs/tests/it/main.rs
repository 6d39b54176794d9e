//! The integration tests of `speedbench-runs`: one test binary with a module per
//! subject (as ripgrep and cargo do), so the crate and its dependencies
//! are linked once for all of them.

mod aiperf_http_trace;
mod run_dirs;
