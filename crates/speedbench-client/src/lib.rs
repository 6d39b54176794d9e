//! speedbench-client
