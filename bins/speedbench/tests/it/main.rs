//! The integration tests of `speedbench-cli`: one test binary with a module per
//! subject (as ripgrep and cargo do), so the crate and its dependencies
//! are linked once for all of them.

mod common;

mod acceptance_sources_e2e;
mod aiperf_config_e2e;
mod bad_files_e2e;
mod bench_limit_e2e;
mod compare_e2e;
mod dataset_hints_e2e;
mod dataset_input_e2e;
mod datasets_e2e;
mod demo_e2e;
mod engines_e2e;
mod export_level_e2e;
mod faults_e2e;
mod figures_e2e;
mod html_e2e;
mod http_client_e2e;
mod http_trace_e2e;
mod input_e2e;
mod kube_e2e;
mod live_view_e2e;
mod llama_e2e;
mod load_e2e;
mod local_addr_e2e;
mod object_store_e2e;
mod probes_e2e;
mod profile_e2e;
mod report_runs_e2e;
mod resend_e2e;
mod rewritten_parquet_e2e;
mod run_outcome_e2e;
mod scrape_precedence_e2e;
mod secrets_e2e;
mod shapes_e2e;
mod shard_e2e;
mod sharegpt_e2e;
mod sim_config_e2e;
mod speed_bench_py_compare_e2e;
mod speed_bench_py_e2e;
mod sweep_e2e;
mod synthesis_e2e;
mod synthetic_e2e;
mod tune_e2e;
mod users_e2e;
mod vllm_e2e;
