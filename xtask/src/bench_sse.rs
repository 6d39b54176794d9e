//! `cargo xtask bench sse`: the SSE parser on one long `data:` line (a
//! server that sends a whole answer in one event), fed in network-sized
//! pieces. Linear parsing costs 4x for a 16 MiB line what it costs for a
//! 4 MiB one; the parser that rescanned its buffer on every piece cost
//! 11.5x (issue "Nothing sent twice"). Prints each size's best time of
//! five and the ratios to the 4 MiB line, against the linear 1x/4x.

use std::time::Instant;

use speedbench_client::sse::{SseEvent, SseParser};

/// Bytes per `push`: a typical read from a TCP socket.
const PIECE: usize = 16 * 1024;

/// `data: {"x":"aaaa…"}\n\n` of `mib` MiB, as one event.
fn event_of(mib: usize) -> Vec<u8> {
    let payload = "a".repeat(mib * 1024 * 1024);
    format!("data: {{\"x\":\"{payload}\"}}\n\n").into_bytes()
}

/// The best of five parses of `bytes` in [`PIECE`]-byte pieces, seconds.
fn best_parse(bytes: &[u8]) -> Result<f64, String> {
    let mut best = f64::MAX;
    for _ in 0..5 {
        let mut parser = SseParser::new();
        let mut out: Vec<SseEvent> = Vec::new();
        let started = Instant::now();
        for piece in bytes.chunks(PIECE) {
            parser.push(piece, &mut out);
        }
        best = best.min(started.elapsed().as_secs_f64());
        if out.len() != 1 || out[0].data.len() + 8 != bytes.len() {
            return Err(format!("parsed {} events from one", out.len()));
        }
    }
    Ok(best)
}

pub(crate) fn run(args: &[String]) -> Result<(), String> {
    if let Some(a) = args.first() {
        return Err(format!("bench sse: unexpected argument {a:?}"));
    }
    if cfg!(debug_assertions) {
        eprintln!(
            "bench sse: a debug build; run `cargo run --release -p xtask -- bench sse` for figures"
        );
    }
    let sizes = [1usize, 4, 16];
    let times: Vec<f64> = sizes
        .iter()
        .map(|&mib| best_parse(&event_of(mib)))
        .collect::<Result<_, _>>()?;
    let four = times[1];
    println!(
        "SSE parser, one data: line fed in {} KiB pieces (best of 5):",
        PIECE / 1024
    );
    println!(
        "{:>8} {:>10} {:>12} {:>14}",
        "line", "ms", "vs 4 MiB", "linear would"
    );
    for (mib, t) in sizes.iter().zip(&times) {
        println!(
            "{:>5} MiB {:>10.2} {:>11.2}x {:>13.2}x",
            mib,
            t * 1e3,
            t / four,
            *mib as f64 / 4.0
        );
    }
    println!(
        "16 MiB / 4 MiB: {:.2}x (linear: 4x; the quadratic parser: 11.5x)",
        times[2] / four
    );
    Ok(())
}
