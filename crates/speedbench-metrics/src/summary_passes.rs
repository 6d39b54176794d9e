//! Exact distribution statistics of more samples than a run should hold:
//! the samples are read again (a records file read from the start, a
//! slice iterated again) instead of kept.
//!
//! A percentile needs the samples at two ranks of the sorted whole. A
//! first pass counts the samples per top 12 bits of their order key (the
//! sign and the exponent: values of one magnitude share a bucket), and
//! the buckets of the first few magnitudes it meets again per their next
//! 12 bits; each later pass either collects the few samples of the bucket
//! a wanted rank falls in, or splits that bucket on its next 12 bits (a
//! bucket of one value needs no more). A statistic holds a few hundred
//! KiB at most at any length, and each value is the one sorting every
//! sample would give. Every pass is a read of the records file, so the
//! common case takes two: samples of a few magnitudes, a few thousand to
//! a bucket of 24 bits, or token counts (one value to a bucket).

use crate::summary::Summary;

/// A bucket collects its samples outright once it holds no more than this
/// many; a larger one is split by a histogram of its next bits.
const COLLECT_LIMIT: usize = 4096;
/// Bits of the order key each histogram splits on.
const LEVEL_BITS: u32 = 12;
/// Magnitudes (top buckets) the first pass splits on their next bits as
/// well: 32 KiB each.
const FIRST_PASS_SPLITS: usize = 8;
/// The percentiles a [`Summary`] reports.
const PERCENTILES: [f64; 3] = [99.0, 90.0, 50.0];

/// Ends the pass of every summary, whether or not another needs more;
/// true when one does.
pub(crate) fn end_passes<'a>(summaries: impl IntoIterator<Item = &'a mut SummaryPasses>) -> bool {
    let mut more = false;
    for summary in summaries {
        more |= summary.end_pass();
    }
    more
}

/// The exact [`Summary`] of samples given in passes, holding a bounded
/// amount of memory whatever their count.
///
/// Give every sample in each pass, in the same order, and call
/// [`Self::end_pass`] after each until it returns false. The mean and the
/// standard deviation are summed in the order given; the percentiles are
/// those of the sorted samples (numpy's linear method). Non-finite
/// samples are skipped.
///
/// ```
/// use speedbench_metrics::{Summary, SummaryPasses};
///
/// let samples: Vec<f64> = (0..10_000).map(|i| ((i * 7919) % 10_000) as f64).collect();
/// let mut passes = SummaryPasses::default();
/// loop {
///     samples.iter().for_each(|&x| passes.add(x));
///     if !passes.end_pass() {
///         break;
///     }
/// }
/// let summary = passes.finish().unwrap();
/// assert_eq!(summary.p50, 4999.5);
/// assert_eq!(Some(summary), Summary::of(&samples));
/// ```
#[derive(Debug, Clone, Default)]
pub struct SummaryPasses {
    /// Passes ended so far.
    pass: u32,
    /// No pass is needed any more: samples given in later passes (other
    /// figures read on) change nothing.
    done: bool,
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
    /// Σ(x - mean)², summed in the second pass (or from `first` when the
    /// samples fit it).
    squares: f64,
    /// The first pass's samples, in order, while there are few.
    first: Vec<f64>,
    /// The first pass's histogram, once there were too many to collect.
    top: Vec<u64>,
    /// The first pass's counts per next bits of the top buckets split.
    splits: FirstSplits,
    /// The buckets the wanted ranks still fall in.
    open: Vec<Bucket>,
    /// The sorted samples' values at the wanted ranks found so far.
    found: Vec<(u64, f64)>,
}

/// The first pass's counts per second [`LEVEL_BITS`] bits of the samples
/// in the first [`FIRST_PASS_SPLITS`] top buckets to get one: for samples
/// of a few magnitudes, the next pass can collect the samples at a rank
/// without splitting their magnitude first (a pass, a read of the file,
/// saved).
#[derive(Debug, Clone, Default)]
struct FirstSplits {
    /// Per top bucket, 1 + its index in `counts`; 0: not split.
    slot: Vec<u8>,
    counts: Vec<Vec<u64>>,
}

impl FirstSplits {
    fn add(&mut self, top: usize, key: u64) {
        if self.slot.is_empty() {
            self.slot = vec![0; 1 << LEVEL_BITS];
        }
        let mut slot = self.slot[top] as usize;
        if slot == 0 {
            if self.counts.len() == FIRST_PASS_SPLITS {
                return;
            }
            self.counts.push(vec![0; 1 << LEVEL_BITS]);
            slot = self.counts.len();
            self.slot[top] = slot as u8;
        }
        let next = (key >> (64 - 2 * LEVEL_BITS)) as usize & ((1 << LEVEL_BITS) - 1);
        self.counts[slot - 1][next] += 1;
    }

    /// The counts of top bucket `top`, when it was split.
    fn of(&self, top: usize) -> Option<&[u64]> {
        let slot = *self.slot.get(top)? as usize;
        slot.checked_sub(1).map(|i| self.counts[i].as_slice())
    }
}

/// The samples whose order keys share their top `bits` bits.
#[derive(Debug, Clone)]
struct Bucket {
    /// Those bits, right-aligned.
    prefix: u64,
    bits: u32,
    /// Samples that sort before the bucket.
    below: u64,
    /// The wanted ranks inside it.
    ranks: Vec<u64>,
    split: Split,
}

#[derive(Debug, Clone)]
enum Split {
    /// The bucket's samples, collected.
    Collect(Vec<f64>),
    /// Counts per next [`Bucket::next_bits`] bits, and the lowest and
    /// highest key counted (equal: the bucket holds one value).
    Histogram { counts: Vec<u64>, keys: (u64, u64) },
}

impl Bucket {
    fn new(prefix: u64, bits: u32, below: u64, count: u64) -> Bucket {
        let mut bucket = Bucket {
            prefix,
            bits,
            below,
            ranks: Vec::new(),
            split: Split::Collect(Vec::new()),
        };
        if count > COLLECT_LIMIT as u64 {
            bucket.split = Split::Histogram {
                counts: vec![0; 1 << bucket.next_bits()],
                keys: (u64::MAX, 0),
            };
        }
        bucket
    }

    fn next_bits(&self) -> u32 {
        LEVEL_BITS.min(64 - self.bits)
    }

    fn contains(&self, key: u64) -> bool {
        self.bits == 0 || key >> (64 - self.bits) == self.prefix
    }

    fn add(&mut self, x: f64, key: u64) {
        let next = self.next_bits();
        let shift = 64 - self.bits - next;
        match &mut self.split {
            Split::Collect(values) => values.push(x),
            Split::Histogram { counts, keys } => {
                let mask = (1u64 << next) - 1;
                counts[((key >> shift) & mask) as usize] += 1;
                *keys = (keys.0.min(key), keys.1.max(key));
            }
        }
    }

    /// The pass is over: the values at the bucket's ranks, and the smaller
    /// buckets still to read.
    fn resolve(self, found: &mut Vec<(u64, f64)>, open: &mut Vec<Bucket>) {
        match self.split {
            Split::Collect(mut values) => {
                values.sort_unstable_by(f64::total_cmp);
                for rank in self.ranks {
                    found.push((rank, values[(rank - self.below) as usize]));
                }
            }
            // One value: no need to look closer.
            Split::Histogram { keys: (lo, hi), .. } if lo == hi => {
                for rank in self.ranks {
                    found.push((rank, from_order_key(lo)));
                }
            }
            Split::Histogram { counts, .. } => {
                let bits = self.bits + LEVEL_BITS.min(64 - self.bits);
                let prefix = self.prefix << (bits - self.bits);
                for rank in self.ranks {
                    let (index, below) = locate(&counts, rank - self.below);
                    let prefix = prefix | index as u64;
                    if bits == 64 {
                        // Every sample in it has this one key.
                        found.push((rank, from_order_key(prefix)));
                        continue;
                    }
                    let count = counts[index];
                    open_bucket(open, (prefix, bits), self.below + below, count, rank);
                }
            }
        }
    }
}

/// The bucket `rank` (counted inside the histogram) falls in, and the
/// samples of the buckets before it.
fn locate(counts: &[u64], rank: u64) -> (usize, u64) {
    let mut below = 0;
    for (index, &count) in counts.iter().enumerate() {
        if rank < below + count {
            return (index, below);
        }
        below += count;
    }
    unreachable!("a rank inside the histogram's samples")
}

/// Adds `rank` to the open bucket `(prefix, bits)`, opening it first.
fn open_bucket(
    open: &mut Vec<Bucket>,
    (prefix, bits): (u64, u32),
    below: u64,
    count: u64,
    rank: u64,
) {
    let at = match open
        .iter()
        .position(|b| (b.prefix, b.bits) == (prefix, bits))
    {
        Some(at) => at,
        None => {
            open.push(Bucket::new(prefix, bits, below, count));
            open.len() - 1
        }
    };
    open[at].ranks.push(rank);
}

/// `x`'s place in [`f64::total_cmp`] order, as an unsigned integer.
fn order_key(x: f64) -> u64 {
    let bits = x.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | 1 << 63
    }
}

fn from_order_key(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 {
        key & !(1 << 63)
    } else {
        !key
    })
}

impl SummaryPasses {
    /// The summary of `samples` held in memory ([`Summary::of`]).
    pub fn of_slice(samples: &[f64]) -> Option<Summary> {
        let mut passes = SummaryPasses::default();
        loop {
            samples.iter().for_each(|&x| passes.add(x));
            if !passes.end_pass() {
                return passes.finish();
            }
        }
    }

    /// The next sample of the current pass.
    pub fn add(&mut self, x: f64) {
        if !x.is_finite() || self.done {
            return;
        }
        if self.pass > 0 {
            return self.add_again(x);
        }
        if self.count == 0 {
            (self.min, self.max) = (x, x);
        }
        self.count += 1;
        self.sum += x;
        self.min = self.min.min(x);
        self.max = self.max.max(x);
        if self.top.is_empty() {
            self.first.push(x);
            if self.first.len() > COLLECT_LIMIT {
                self.top = vec![0; 1 << LEVEL_BITS];
                for x in std::mem::take(&mut self.first) {
                    self.count_first(order_key(x));
                }
            }
        } else {
            self.count_first(order_key(x));
        }
    }

    /// Counts a sample of the first pass in the histograms.
    fn count_first(&mut self, key: u64) {
        let top = (key >> (64 - LEVEL_BITS)) as usize;
        self.top[top] += 1;
        self.splits.add(top, key);
    }

    fn add_again(&mut self, x: f64) {
        if self.pass == 1 {
            self.squares += (x - self.mean()).powi(2);
        }
        let key = order_key(x);
        for bucket in self.open.iter_mut().filter(|b| b.contains(key)) {
            bucket.add(x, key);
        }
    }

    fn mean(&self) -> f64 {
        self.sum / self.count as f64
    }

    /// Ends a pass; true when another pass of the same samples is needed.
    /// Once it returned false, samples given in later passes are ignored.
    pub fn end_pass(&mut self) -> bool {
        let more = !self.done && self.next_pass();
        self.done = !more;
        more
    }

    fn next_pass(&mut self) -> bool {
        self.pass += 1;
        if self.pass == 1 {
            if self.count == 0 {
                return false;
            }
            if self.top.is_empty() {
                // Few samples: all of them are at hand.
                let mean = self.mean();
                self.squares = self.first.iter().map(|x| (x - mean).powi(2)).sum();
                let mut bucket = Bucket::new(0, 0, 0, 0);
                bucket.split = Split::Collect(std::mem::take(&mut self.first));
                bucket.ranks = self.wanted_ranks();
                bucket.resolve(&mut self.found, &mut self.open);
                return false;
            }
            let (top, splits) = (
                std::mem::take(&mut self.top),
                std::mem::take(&mut self.splits),
            );
            for rank in self.wanted_ranks() {
                let (index, below) = locate(&top, rank);
                match splits.of(index) {
                    Some(next) => {
                        let (sub, below_sub) = locate(next, rank - below);
                        let prefix = ((index << LEVEL_BITS | sub) as u64, 2 * LEVEL_BITS);
                        open_bucket(&mut self.open, prefix, below + below_sub, next[sub], rank);
                    }
                    None => {
                        let prefix = (index as u64, LEVEL_BITS);
                        open_bucket(&mut self.open, prefix, below, top[index], rank);
                    }
                }
            }
            return true;
        }
        for bucket in std::mem::take(&mut self.open) {
            bucket.resolve(&mut self.found, &mut self.open);
        }
        !self.open.is_empty()
    }

    /// The ranks the percentiles interpolate between.
    fn wanted_ranks(&self) -> Vec<u64> {
        let mut ranks: Vec<u64> = PERCENTILES
            .iter()
            .flat_map(|&p| {
                let (lo, hi) = rank_pair(p, self.count);
                [lo, hi]
            })
            .collect();
        ranks.sort_unstable();
        ranks.dedup();
        ranks
    }

    /// The summary, once [`Self::end_pass`] returned false; `None` without
    /// a finite sample.
    pub fn finish(&self) -> Option<Summary> {
        if self.count == 0 || !self.open.is_empty() || self.pass == 0 {
            return None;
        }
        let at = |rank: u64| {
            let found = self.found.iter().find(|(r, _)| *r == rank);
            found.map(|&(_, v)| v)
        };
        let percentile = |p: f64| -> Option<f64> {
            let (lo, hi) = rank_pair(p, self.count);
            let frac = p / 100.0 * (self.count - 1) as f64 - lo as f64;
            let (lo, hi) = (at(lo)?, at(hi)?);
            Some(lo + frac * (hi - lo))
        };
        Some(Summary {
            count: self.count as usize,
            avg: self.mean(),
            min: self.min,
            max: self.max,
            p99: percentile(99.0)?,
            p90: percentile(90.0)?,
            p50: percentile(50.0)?,
            std: (self.squares / self.count as f64).sqrt(),
        })
    }
}

/// The ranks `p` interpolates between among `count` sorted samples, as
/// [`crate::percentile_sorted`] finds them.
fn rank_pair(p: f64, count: u64) -> (u64, u64) {
    let lo = (p / 100.0 * (count - 1) as f64).floor() as u64;
    (lo, (lo + 1).min(count - 1))
}

impl Summary {
    /// Summarizes `samples`; `None` when there is no finite sample.
    ///
    /// Non-finite samples (NaN, ±∞) are skipped, so `count` is the number of
    /// finite samples. The order changes only the last bits of `avg` and `std`.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        // One way to every summary: what a records file read in passes
        // gives, here over samples in memory.
        SummaryPasses::of_slice(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::percentile_sorted;
    use crate::rng::SplitMix64;

    /// What sorting every sample gives: the reference.
    fn sorted_summary(samples: &[f64]) -> Summary {
        let mut sorted: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        let n = sorted.len() as f64;
        let avg = sorted.iter().sum::<f64>() / n;
        let std = (sorted.iter().map(|x| (x - avg).powi(2)).sum::<f64>() / n).sqrt();
        sorted.sort_by(f64::total_cmp);
        Summary {
            count: sorted.len(),
            avg,
            min: sorted[0],
            max: sorted[sorted.len() - 1],
            p99: percentile_sorted(&sorted, 99.0),
            p90: percentile_sorted(&sorted, 90.0),
            p50: percentile_sorted(&sorted, 50.0),
            std,
        }
    }

    fn passes_needed(samples: &[f64]) -> (Summary, u32) {
        let mut passes = SummaryPasses::default();
        loop {
            samples.iter().for_each(|&x| passes.add(x));
            if !passes.end_pass() {
                return (passes.finish().unwrap(), passes.pass);
            }
        }
    }

    #[test]
    fn order_keys_sort_as_total_cmp_does() {
        let mut xs = [3.5, -0.0, 0.0, -2.0, 1e-300, -1e300, f64::MAX, f64::MIN];
        let keys: Vec<u64> = xs.iter().map(|&x| order_key(x)).collect();
        for (&x, &k) in xs.iter().zip(&keys) {
            assert_eq!(from_order_key(k).to_bits(), x.to_bits());
        }
        let mut by_key = xs;
        by_key.sort_by_key(|&x| order_key(x));
        xs.sort_by(f64::total_cmp);
        assert_eq!(by_key.map(f64::to_bits), xs.map(f64::to_bits));
    }

    /// Few samples: one pass, the sorted summary's percentiles exactly.
    #[test]
    fn few_samples_take_one_pass() {
        let samples = [4.0, 1.0, f64::NAN, 3.0, 2.0];
        let (summary, passes) = passes_needed(&samples);
        assert_eq!(passes, 1);
        // numpy: p90 of [1, 2, 3, 4] = 3.7, p50 = 2.5.
        assert_eq!((summary.count, summary.p50), (4, 2.5));
        assert!((summary.p90 - 3.7).abs() < 1e-12);
    }

    /// Many samples of every shape: the percentiles, min and max are the
    /// sorted samples' bit for bit; a million samples of one magnitude
    /// need two passes (each a read of a records file).
    #[test]
    fn many_samples_give_what_sorting_them_gives() {
        let mut rng = SplitMix64::new(7);
        let latencies: Vec<f64> = (0..1_000_000)
            .map(|_| 20.0 + rng.next_f64() * 5.0)
            .collect();
        let (summary, passes) = passes_needed(&latencies);
        let sorted = sorted_summary(&latencies);
        for (ours, theirs) in [
            (summary.p50, sorted.p50),
            (summary.p90, sorted.p90),
            (summary.p99, sorted.p99),
            (summary.min, sorted.min),
            (summary.max, sorted.max),
        ] {
            assert_eq!(ours.to_bits(), theirs.to_bits());
        }
        assert!((summary.avg - sorted.avg).abs() < 1e-9);
        assert!((summary.std - sorted.std).abs() < 1e-9);
        assert_eq!(passes, 2);
        // Ties, signs, more magnitudes than the first pass splits and a
        // single repeated value past the collect limit.
        let mixed: Vec<f64> = (0..20_000)
            .map(|i| match i % 4 {
                0 => 1.0,
                1 => -((i % 97) as f64),
                2 => 1e-9 * i as f64,
                _ => 1.0,
            })
            .collect();
        for samples in [mixed, vec![5.0; 10_000], vec![-0.0; 5_000]] {
            let (summary, _) = passes_needed(&samples);
            let sorted = sorted_summary(&samples);
            assert_eq!(
                [summary.p50, summary.p90, summary.p99].map(f64::to_bits),
                [sorted.p50, sorted.p90, sorted.p99].map(f64::to_bits)
            );
        }
    }

    /// What a run's records give: token counts (a few values, each many
    /// times), latencies of a few magnitudes, one value throughout; two
    /// passes each, where splitting a value's bucket down to its 64 bits
    /// took six.
    #[test]
    fn a_run_s_samples_take_two_passes() {
        let mut rng = SplitMix64::new(11);
        let tokens: Vec<f64> = (0..50_000).map(|i| (16 + i % 7) as f64).collect();
        let gaps: Vec<f64> = (0..150_000).map(|_| 0.004 + rng.next_f64() * 0.1).collect();
        for samples in [tokens, gaps, vec![16.0; 10_000]] {
            let (summary, passes) = passes_needed(&samples);
            let sorted = sorted_summary(&samples);
            assert_eq!(
                [summary.p50, summary.p90, summary.p99].map(f64::to_bits),
                [sorted.p50, sorted.p90, sorted.p99].map(f64::to_bits)
            );
            assert_eq!(passes, 2);
        }
    }

    #[test]
    fn passes_after_the_last_change_nothing() {
        for n in [10, 50_000] {
            let samples: Vec<f64> = (0..n).map(|i| (i % 977) as f64).collect();
            let (expected, needed) = passes_needed(&samples);
            let mut passes = SummaryPasses::default();
            for _ in 0..needed + 3 {
                samples.iter().for_each(|&x| passes.add(x));
                passes.end_pass();
            }
            assert_eq!(passes.finish(), Some(expected));
        }
    }

    #[test]
    fn no_finite_sample_gives_none() {
        let mut passes = SummaryPasses::default();
        passes.add(f64::NAN);
        assert!(!passes.end_pass());
        assert_eq!(passes.finish(), None);
    }
}
