//! The integration tests of `speedbench-dataset`: one test binary with a module per
//! subject (as ripgrep and cargo do), so the crate and its dependencies
//! are linked once for all of them.

#[cfg(feature = "hub")]
mod common;

mod fixture;
#[cfg(feature = "hub")]
mod hub;
#[cfg(feature = "hub")]
mod upstream;
