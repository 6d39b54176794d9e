//! Seeds of the simulator's PRNG streams, one per prompt and purpose, so
//! every draw is reproducible. A leaf: the model and the fault plan draw
//! from it.

/// The one seeded generator of speedbench (see its docs for why it is
/// written out by hand): every draw of the simulator comes from it.
pub(crate) use speedbench_metrics::SplitMix64;

/// FNV-1a over bytes, continuing from `h` (start with [`FNV_OFFSET`]).
fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

const FNV_OFFSET: u64 = 0xCBF2_9CE4_8422_2325;

/// Seed of a PRNG stream from the global seed, the prompt and a stream name.
pub(crate) fn stream_seed(seed: u64, prompt_key: &str, stream: &str) -> u64 {
    let h = fnv1a(fnv1a(FNV_OFFSET, prompt_key.as_bytes()), stream.as_bytes());
    let mut mix = SplitMix64::new(seed ^ h);
    mix.next_u64()
}
