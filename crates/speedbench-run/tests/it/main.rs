//! The integration tests of `speedbench-run`: one test binary with a module
//! per subject.

mod aiperf_config;
mod execute;
