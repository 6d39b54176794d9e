//! speedbench-record
