//! speedbench-metrics
