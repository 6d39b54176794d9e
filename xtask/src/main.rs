//! Project chores: `cargo xtask <task>`.
//!
//! Tasks:
//! - `fixtures`: regenerate the small test fixtures under `fixtures/`.
//! - `fixtures --check`: fail if the committed fixtures differ from what the
//!   generator makes (CI runs this).
//! - `downstream`: build and run the facade's examples from a crate made
//!   outside the repository's tree that depends only on `speedbench`.
//! - `circles`: fail if the top-level modules of a crate import each other
//!   in a circle (CI runs this).
//! - `wheel [--release]`: build the Python wheel of the `speedbench` binary
//!   (maturin), install it into a fresh venv and run `speedbench demo` and a
//!   `profile` from it with no Rust on PATH (CI runs this).
//! - `fuzz [--seconds N] [--target NAME]`: run every cargo-fuzz target under
//!   `fuzz/` for N seconds (default 60) on the stable toolchain.
//! - `prestage --dataset NAME --out DIR [--resolver R] [--python PATH]
//!   [--prepare-script PATH]`: resolve or download a registered dataset and
//!   write a checksummed bundle for air-gapped hosts.
//! - `prepare-venv`: create `target/prepare-venv`, the Python (datasets,
//!   numpy, pandas) the upstream-prepare-step tests run, ahead of time (the
//!   tests make it on first use otherwise).
//! - `bench report [--records N] [--keep]`: time `speedbench report` building the
//!   acceptance matrix over 1,000,000 records (target: under 2 s).
//! - `bench client [--requests N] [--no-aiperf] [--cpu-only | --ttft-only |
//!   --memory-only]`: client request rate, streamed tokens/s and memory per
//!   in-flight request at concurrency 1, 64 and 1024 against the zero-delay
//!   simulator, client CPU time per request over 10 s of load (both tools),
//!   TTFT error against an injected delay, and the ratio to AIPerf on the
//!   same server; a worker thread per core on either side.
//! - `bench startup [--runs N] [--no-aiperf] [--no-build]`: CPU, wall time and peak RSS
//!   of a one-request `speedbench profile`, process start to exit (the
//!   kernel's `wait4` accounting), beside AIPerf's.
//! - `bench dataset [--mb N]`: time loading a throughput_32k-sized file.
//! - `bench sse`: the SSE parser on 1, 4 and 16 MiB `data:` lines, with
//!   the 16/4 MiB ratio against linear (4x).
//! - `bench vllm [--concurrency C] [--rounds N]`: AIPerf 0.13.0 and
//!   speedbench on the same prompts against the same real vLLM (CPU build,
//!   n-gram speculation): every acceptance figure and request count both
//!   print, equal or named.
//! - `bench load [--requests N] [--concurrency C] [--no-build]`: 10,000
//!   streamed requests at concurrency 1,024 against the simulator; prints
//!   wall time, req/s, peak RSS, peak open fds and failures.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

mod bench;
mod bench_cpu;
mod bench_dataset;
mod bench_load;
mod bench_peer;
mod bench_report;
mod bench_soak;
mod bench_sse;
mod bench_startup;
mod bench_vllm;
mod child_cost;
mod circles;
mod downstream;
mod fixtures;
mod fuzz;
mod prepare_venv;
mod prestage;
mod wheel;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some(child_cost::HELPER) => child_cost::helper_main(&args[1..]),
        Some("fixtures") => fixtures::run(&workspace_root(), args.iter().any(|a| a == "--check")),
        Some("prestage") => prestage::run(&args[1..]),
        Some("prepare-venv") => prepare_venv::run(&workspace_root(), &args[1..]),
        Some("fuzz") => fuzz::run(&workspace_root(), &args[1..]),
        Some("downstream") => downstream::run(&workspace_root()),
        Some("circles") => circles::run(&workspace_root()),
        Some("wheel") => wheel::run(&workspace_root(), &args[1..]),
        Some("bench") if args.get(1).map(String::as_str) == Some("load") => {
            bench_load::run(&workspace_root(), &args[2..])
        }
        Some("bench") if args.get(1).map(String::as_str) == Some("report") => {
            bench_report::run(&workspace_root(), &args[2..])
        }
        Some("bench") if args.get(1).map(String::as_str) == Some("startup") => {
            bench_startup::run(&workspace_root(), &args[2..])
        }
        Some("bench") if args.get(1).map(String::as_str) == Some("client") => {
            bench::run(&workspace_root(), &args[2..])
        }
        Some("bench") if args.get(1).map(String::as_str) == Some("soak") => {
            bench_soak::run(&workspace_root(), &args[2..])
        }
        Some("bench") if args.get(1).map(String::as_str) == Some("sse") => {
            bench_sse::run(&args[2..])
        }
        Some("bench") if args.get(1).map(String::as_str) == Some("dataset") => {
            bench_dataset::run(&args[2..])
        }
        Some("bench") if args.get(1).map(String::as_str) == Some("vllm") => {
            bench_vllm::run(&workspace_root(), &args[2..])
        }
        _ => Err(format!(
            "usage: cargo xtask <task>\n\ntasks:\n  fixtures [--check]   regenerate (or verify) fixtures/\n  prestage --dataset NAME --out DIR [--resolver auto|native|upstream] [--python PATH] [--prepare-script PATH]\n  prepare-venv         create target/prepare-venv for the prepare-step tests\n  bench client [--requests N] [--no-aiperf] [--cpu-only | --ttft-only | --memory-only | --peer-only] [--peer-vllm-bench PATH [--peer-requests N] [--peer-rounds N]]\n  bench startup [--runs N] [--no-aiperf] [--no-build] [--peer-vllm-bench PATH]\n  bench soak [--requests 10000,1000000] [--concurrency C] [--no-build]\n  bench dataset [--mb N]\n  bench sse\n  bench vllm [--concurrency C] [--rounds N]\n  bench load [--requests N] [--concurrency C] [--no-build]\n  fuzz [--seconds N] [--target NAME]\n  downstream           build and run the facade's examples from a crate outside the workspace\n  circles              fail on an import circle between a crate's modules\n  wheel [--release]    build the Python wheel, install it in a fresh venv, run demo and profile from it\n\ngot: {args:?}"
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}
