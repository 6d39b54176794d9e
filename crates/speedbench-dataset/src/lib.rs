//! speedbench-dataset
