//! speedbench-report
