//! speedbench-sim
