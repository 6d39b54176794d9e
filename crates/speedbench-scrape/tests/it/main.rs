//! The integration tests of `speedbench-scrape`: one test binary with a module per
//! subject (as ripgrep and cargo do), so the crate and its dependencies
//! are linked once for all of them.

mod aiperf_raw;
mod csv;
mod exports;
#[cfg(feature = "parquet")]
mod raw_parquet;
