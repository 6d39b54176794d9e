//! The deterministic generation model: PRNG, output text and acceptance.

use crate::config::AcceptanceProfile;

pub(crate) use crate::seed::{SplitMix64, stream_seed};

/// Built-in vocabulary. Each entry is one token: a leading space plus a word.
/// A few entries contain JSON-escaped characters and multi-byte UTF-8 on
/// purpose, so clients exercise escaping and split-UTF-8 handling.
const WORDS: &[&str] = &[
    " the",
    " a",
    " of",
    " and",
    " to",
    " in",
    " is",
    " that",
    " for",
    " it",
    " as",
    " with",
    " on",
    " by",
    " this",
    " be",
    " are",
    " from",
    " at",
    " or",
    " an",
    " which",
    " model",
    " draft",
    " token",
    " tokens",
    " target",
    " verify",
    " accept",
    " reject",
    " speculative",
    " decoding",
    " latency",
    " throughput",
    " batch",
    " kernel",
    " memory",
    " cache",
    " prompt",
    " output",
    " request",
    " server",
    " client",
    " stream",
    " chunk",
    " bench",
    " result",
    " value",
    " number",
    " step",
    " length",
    " rate",
    " mean",
    " median",
    " tail",
    " window",
    " simple",
    " fast",
    " slow",
    " small",
    " large",
    " first",
    " last",
    " next",
    " each",
    " every",
    " some",
    " many",
    " few",
    " more",
    " less",
    " time",
    " data",
    " test",
    " check",
    " code",
    " function",
    " returns",
    " compute",
    " sum",
    " list",
    " map",
    " loop",
    " index",
    " error",
    " answer",
    " question",
    " because",
    " therefore",
    " however",
    " also",
    " then",
    " when",
    " while",
    " until",
    " after",
    " before",
    " naïve",
    " café",
    " \"quoted\"",
    " x\\y",
    " a+b=c",
    " 42,",
    " done.",
];

/// The result of simulating one request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Generation {
    /// Output tokens; each is `" word"`.
    pub(crate) tokens: Vec<&'static str>,
    /// Whether `max_tokens` cut the natural length (`finish_reason: "length"`).
    pub(crate) truncated: bool,
    /// Tokens emitted per decode iteration (one SSE chunk each with
    /// [`crate::Chunking::PerStep`]); sums to `tokens.len()`.
    pub(crate) iterations: Vec<u32>,
    /// Speculative-decoding statistics (all zero when `k == 0`).
    pub(crate) spec: SpecStats,
}

impl Generation {
    /// The whole output text.
    pub(crate) fn text(&self) -> String {
        self.tokens.concat()
    }
}

/// Per-request speculative-decoding statistics.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct SpecStats {
    /// Configured draft length.
    pub(crate) k: u32,
    /// Verify steps that had drafts.
    pub(crate) steps: u64,
    /// Accepted draft tokens (bonus tokens excluded).
    pub(crate) accepted: u64,
    /// Proposed draft tokens (`k` per step, even on the last truncated step).
    pub(crate) proposed: u64,
    /// Dense, length `k + 1`: index `j` counts steps that accepted exactly `j` drafts.
    pub(crate) histogram: Vec<u64>,
    /// Accepted drafts per step.
    pub(crate) per_step_accepted: Vec<u32>,
    /// Drafted tokens per step.
    pub(crate) per_step_drafted: Vec<u32>,
}

impl SpecStats {
    /// Counts one verify step of `k` drafts that accepted `accepted` of them.
    fn record_step(&mut self, accepted: u32) {
        self.steps += 1;
        self.accepted += u64::from(accepted);
        self.proposed += u64::from(self.k);
        self.histogram[accepted as usize] += 1;
        self.per_step_accepted.push(accepted);
        self.per_step_drafted.push(self.k);
    }
}

/// Simulates one request.
///
/// `prompt_key` is the canonical full prompt text. The output text depends
/// only on `(seed, prompt_key)` and the length limits, never on `profile`, so
/// speculation is lossless by construction. Acceptance uses a separate stream
/// seeded by `(seed, prompt_key, "accept")`. With `ignore_eos` and a
/// `max_tokens`, exactly `max_tokens` tokens are produced (the text continues
/// the natural text's word stream).
pub(crate) fn generate(
    seed: u64,
    prompt_key: &str,
    profile: &AcceptanceProfile,
    len_range: (u32, u32),
    max_tokens: Option<u32>,
    ignore_eos: bool,
) -> Generation {
    let mut text_rng = SplitMix64::new(stream_seed(seed, prompt_key, "text"));
    let (n, truncated) = output_length(&mut text_rng, len_range, max_tokens, ignore_eos);
    let tokens: Vec<&'static str> = (0..n)
        .map(|_| WORDS[text_rng.below(WORDS.len() as u64) as usize])
        .collect();
    let (iterations, spec) = simulate_acceptance(seed, prompt_key, profile, n);
    Generation {
        tokens,
        truncated,
        iterations,
        spec,
    }
}

/// The output length and whether `max_tokens` cut it: the natural length is
/// drawn (first, from the text stream) in `len_range`, then capped by
/// `max_tokens`, or replaced by it with `ignore_eos`.
fn output_length(
    text_rng: &mut SplitMix64,
    len_range: (u32, u32),
    max_tokens: Option<u32>,
    ignore_eos: bool,
) -> (u32, bool) {
    let (lo, hi) = (len_range.0.min(len_range.1), len_range.0.max(len_range.1));
    let natural = lo + text_rng.below(u64::from(hi - lo) + 1) as u32;
    let n = match max_tokens {
        Some(m) if ignore_eos => m,
        Some(m) => natural.min(m),
        None => natural,
    };
    (n, max_tokens.is_some_and(|m| ignore_eos || m < natural))
}

/// One decode step of `profile`: `None` when it drafts nothing (it emits
/// one target token and is no verify step), else how many of its `k`
/// drafts the target accepts (`k` with probability `p_full`, else a run of
/// `p_token` successes capped at `k - 1`; as a chain, a run of `p_token`
/// successes up to `k`), before the request's last step is cut to the
/// tokens left.
fn draw_step(rng: &mut SplitMix64, profile: &AcceptanceProfile) -> Option<u32> {
    let k = profile.num_spec_tokens;
    // Drawn only when some steps skip drafting, so configurations that
    // draft every step keep their exact acceptance streams.
    if profile.p_draft < 1.0 && rng.next_f64() >= profile.p_draft {
        return None;
    }
    if profile.chain {
        let mut j = 0;
        while j < k && rng.next_f64() < profile.p_token {
            j += 1;
        }
        return Some(j);
    }
    if rng.next_f64() < profile.p_full {
        return Some(k);
    }
    let mut j = 0;
    while j < k.saturating_sub(1) && rng.next_f64() < profile.p_token {
        j += 1;
    }
    Some(j)
}

/// Splits `completion_tokens` into verify steps according to `profile`.
fn simulate_acceptance(
    seed: u64,
    prompt_key: &str,
    profile: &AcceptanceProfile,
    completion_tokens: u32,
) -> (Vec<u32>, SpecStats) {
    let k = profile.num_spec_tokens;
    if k == 0 {
        let spec = SpecStats {
            histogram: vec![0],
            ..SpecStats::default()
        };
        return (vec![1; completion_tokens as usize], spec);
    }
    let mut rng = SplitMix64::new(stream_seed(seed, prompt_key, "accept"));
    let mut spec = SpecStats {
        k,
        histogram: vec![0; k as usize + 1],
        ..SpecStats::default()
    };
    let mut iterations = Vec::new();
    let mut remaining = completion_tokens;
    while remaining > 0 {
        let Some(drawn) = draw_step(&mut rng, profile) else {
            iterations.push(1);
            remaining -= 1;
            continue;
        };
        let emitted = (drawn + 1).min(remaining);
        remaining -= emitted;
        iterations.push(emitted);
        spec.record_step(emitted - 1);
    }
    (iterations, spec)
}

/// What the simulator extracts from a request's prompt.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PromptInfo {
    /// Canonical text of the whole prompt; seeds the PRNG streams.
    pub(crate) key: String,
    /// Text of the first user message (the prompt itself for `/v1/completions`).
    pub(crate) first_user: String,
    /// Number of user messages (1 for `/v1/completions`).
    pub(crate) turns: u32,
    /// Whitespace-separated word count of all message contents.
    pub(crate) prompt_tokens: u32,
    /// Category marker `[<name>` at the start of the first user message, if any.
    pub(crate) category: Option<String>,
}

impl PromptInfo {
    /// Builds prompt info from `(role, content)` chat messages.
    pub(crate) fn from_messages(messages: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut key = String::new();
        let mut first_user = None;
        let mut turns = 0u32;
        let mut prompt_tokens = 0u32;
        for (role, content) in messages {
            // Unit/record separators keep (role, content) boundaries unambiguous.
            key.push_str(&role);
            key.push('\u{1f}');
            key.push_str(&content);
            key.push('\u{1e}');
            prompt_tokens = prompt_tokens.saturating_add(word_count(&content));
            if role == "user" {
                turns += 1;
                if first_user.is_none() {
                    first_user = Some(content);
                }
            }
        }
        let first_user = first_user.unwrap_or_default();
        Self {
            category: category_marker(&first_user),
            key,
            first_user,
            turns,
            prompt_tokens,
        }
    }

    /// Builds prompt info from a `/v1/completions` prompt string.
    pub(crate) fn from_prompt(prompt: String) -> Self {
        Self {
            category: category_marker(&prompt),
            prompt_tokens: word_count(&prompt),
            key: prompt.clone(),
            first_user: prompt,
            turns: 1,
        }
    }
}

fn word_count(s: &str) -> u32 {
    u32::try_from(s.split_whitespace().count()).unwrap_or(u32::MAX)
}

/// `"[coding 0] ..."` -> `Some("coding")`: the text after a leading `[` up to
/// the first whitespace or `]`.
fn category_marker(s: &str) -> Option<String> {
    let rest = s.strip_prefix('[')?;
    let end = rest
        .find(|c: char| c.is_whitespace() || c == ']')
        .unwrap_or(rest.len());
    (end > 0).then(|| rest[..end].to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(k: u32, p_full: f64, p_token: f64) -> AcceptanceProfile {
        AcceptanceProfile {
            num_spec_tokens: k,
            p_full,
            p_token,
            p_draft: 1.0,
            chain: false,
        }
    }

    #[test]
    fn a_chain_accepts_its_first_drafts_alike_at_every_budget() {
        // The share of steps accepting at least i drafts is p^i at every
        // budget k >= i (within sampling error), and all k are reachable.
        let draws = 40_000;
        let at_least = |k: u32, i: u32| {
            let p = profile(k, 0.9, 0.6).with_chain(true);
            let mut rng = SplitMix64::new(7);
            let hits = (0..draws)
                .filter(|_| draw_step(&mut rng, &p).unwrap() >= i)
                .count();
            hits as f64 / f64::from(draws)
        };
        for i in 1..=3 {
            let expected = 0.6f64.powi(i as i32);
            for k in [i, 4, 8] {
                let share = at_least(k, i);
                assert!(
                    (share - expected).abs() < 0.01,
                    "k={k}, i={i}: {share} vs {expected}"
                );
            }
        }
    }

    #[test]
    fn a_step_accepts_at_most_k_and_the_extremes_are_exact() {
        for k in 1..=8 {
            for (p_full, p_token) in [(0.5, 0.4), (0.0, 0.9), (0.2, 1.0), (0.9, 0.0)] {
                let p = profile(k, p_full, p_token);
                let mut rng = SplitMix64::new(u64::from(k));
                for _ in 0..2000 {
                    let j = draw_step(&mut rng, &p).expect("p_draft 1 always drafts");
                    assert!(j <= k, "{j} > {k}");
                    // Without full acceptance, a run stops at k - 1.
                    assert!(p_full > 0.0 || j < k, "{j} of {k}");
                }
            }
            let mut rng = SplitMix64::new(1);
            let draws = |p: &AcceptanceProfile, rng: &mut SplitMix64| {
                (0..50).map(|_| draw_step(rng, p)).collect::<Vec<_>>()
            };
            assert!(
                draws(&profile(k, 1.0, 0.0), &mut rng)
                    .iter()
                    .all(|&d| d == Some(k))
            );
            assert!(
                draws(&profile(k, 0.0, 1.0), &mut rng)
                    .iter()
                    .all(|&d| d == Some(k - 1))
            );
            assert!(
                draws(&profile(k, 0.0, 0.0), &mut rng)
                    .iter()
                    .all(|&d| d == Some(0))
            );
            let never = profile(k, 1.0, 1.0).with_p_draft(0.0);
            assert!(draws(&never, &mut rng).iter().all(Option::is_none));
        }
        // The same seed gives the same steps.
        let p = profile(5, 0.3, 0.6).with_p_draft(0.5);
        let run = |seed| {
            let mut rng = SplitMix64::new(seed);
            (0..100)
                .map(|_| draw_step(&mut rng, &p))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(9), run(9));
        assert_ne!(run(9), run(10));
        assert!(run(9).contains(&None) && run(9).iter().any(Option::is_some));
    }

    #[test]
    fn output_length_caps_forces_and_draws_once() {
        let len = |range, max, eos| output_length(&mut SplitMix64::new(3), range, max, eos);
        assert_eq!(len((10, 10), None, false), (10, false));
        assert_eq!(len((10, 10), Some(5), false), (5, true));
        assert_eq!(len((10, 10), Some(10), false), (10, false));
        assert_eq!(len((10, 10), Some(20), false), (10, false));
        assert_eq!(len((10, 10), Some(20), true), (20, true));
        assert_eq!(len((10, 10), None, true), (10, false));
        for seed in 0..200 {
            let (n, cut) = output_length(&mut SplitMix64::new(seed), (30, 20), None, false);
            assert!((20..=30).contains(&n) && !cut, "{n}");
        }
        // One draw from the text stream: the words then follow from the
        // second draw on, whatever the limits.
        let mut a = SplitMix64::new(4);
        let mut b = SplitMix64::new(4);
        output_length(&mut a, (1, 100), Some(3), true);
        b.next_u64();
        assert_eq!(a.next_u64(), b.next_u64());
    }

    #[test]
    fn record_step_counts_one_verify_step() {
        let mut s = SpecStats {
            k: 3,
            histogram: vec![0; 4],
            ..SpecStats::default()
        };
        s.record_step(2);
        s.record_step(0);
        s.record_step(2);
        assert_eq!((s.steps, s.accepted, s.proposed), (3, 4, 9));
        assert_eq!(s.histogram, vec![1, 0, 2, 0]);
        assert_eq!(s.per_step_accepted, vec![2, 0, 2]);
        assert_eq!(s.per_step_drafted, vec![3, 3, 3]);
    }

    #[test]
    fn invariants_hold_for_many_prompts_and_profiles() {
        let profiles = [
            profile(1, 0.5, 0.4),
            profile(2, 0.0, 0.0),
            profile(3, 1.0, 0.0),
            profile(4, 0.5, 0.4),
            profile(5, 0.0, 1.0),
            profile(7, 0.3, 0.9),
            profile(16, 0.1, 0.7),
        ];
        for p in &profiles {
            for i in 0..200 {
                let key = format!("prompt number {i}");
                let cap = (i % 3 == 0).then_some(i as u32 % 40 + 1);
                let g = generate(i as u64 % 5, &key, p, (1, 90), cap, false);
                let n = g.tokens.len() as u64;
                let s = &g.spec;
                assert_eq!(s.steps + s.accepted, n, "steps + accepted == completion");
                assert_eq!(s.histogram.len(), p.num_spec_tokens as usize + 1);
                assert_eq!(s.histogram.iter().sum::<u64>(), s.steps);
                let weighted: u64 = s
                    .histogram
                    .iter()
                    .enumerate()
                    .map(|(j, c)| j as u64 * c)
                    .sum();
                assert_eq!(weighted, s.accepted);
                assert_eq!(s.proposed, s.steps * u64::from(p.num_spec_tokens));
                assert_eq!(g.iterations.len() as u64, s.steps);
                assert_eq!(g.iterations.iter().map(|&x| u64::from(x)).sum::<u64>(), n);
                assert!(
                    g.iterations
                        .iter()
                        .all(|&e| e >= 1 && e <= p.num_spec_tokens + 1)
                );
                assert_eq!(s.per_step_accepted.len() as u64, s.steps);
                if let Some(c) = cap {
                    assert!(n <= u64::from(c));
                }
            }
        }
    }

    #[test]
    fn deterministic_and_lossless() {
        let key = "user\u{1f}[coding 0] write a sort\u{1e}";
        let a = generate(7, key, &profile(4, 0.5, 0.4), (48, 160), None, false);
        let b = generate(7, key, &profile(4, 0.5, 0.4), (48, 160), None, false);
        assert_eq!(a, b);
        let base = generate(
            7,
            key,
            &AcceptanceProfile::baseline(),
            (48, 160),
            None,
            false,
        );
        let other = generate(7, key, &profile(8, 0.9, 0.9), (48, 160), None, false);
        assert_eq!(a.text(), base.text());
        assert_eq!(a.text(), other.text());
        assert_eq!(base.spec.steps, 0);
        assert_eq!(base.spec.proposed, 0);
        assert_eq!(base.iterations.len(), base.tokens.len());
        // A different seed or prompt changes the text.
        assert_ne!(
            generate(8, key, &profile(4, 0.5, 0.4), (48, 160), None, false).text(),
            a.text()
        );
        assert_ne!(
            generate(7, "other", &profile(4, 0.5, 0.4), (48, 160), None, false).text(),
            a.text()
        );
        // A cap gives a prefix of the same text.
        let capped = generate(7, key, &profile(4, 0.5, 0.4), (48, 160), Some(10), false);
        assert!(capped.truncated);
        assert_eq!(capped.tokens[..], a.tokens[..10]);
        assert!(!a.truncated);
    }

    #[test]
    fn ignore_eos_forces_length_and_extends_text() {
        let p = profile(4, 0.5, 0.4);
        let natural = generate(3, "k", &p, (10, 20), None, false);
        let forced = generate(3, "k", &p, (10, 20), Some(500), true);
        assert_eq!(forced.tokens.len(), 500);
        assert!(forced.truncated);
        assert_eq!(forced.tokens[..natural.tokens.len()], natural.tokens[..]);
        assert_eq!(forced.spec.steps + forced.spec.accepted, 500);
        // ignore_eos without max_tokens keeps the natural length.
        assert_eq!(generate(3, "k", &p, (10, 20), None, true), natural);
    }

    #[test]
    fn steps_without_drafts_emit_one_token_and_are_not_verify_steps() {
        let every = profile(4, 0.5, 0.4);
        let some = AcceptanceProfile {
            p_draft: 0.5,
            ..every.clone()
        };
        let never = AcceptanceProfile {
            p_draft: 0.0,
            ..every.clone()
        };
        let g = generate(3, "k", &some, (100, 100), None, false);
        // Every token is an accepted draft or one token per target pass.
        let passes = g.iterations.len() as u64;
        assert_eq!(passes + g.spec.accepted, 100);
        // Some passes drafted nothing: fewer verify steps than passes.
        let undrafted = g.iterations.len() - g.spec.per_step_accepted.len();
        assert!(undrafted > 0 && g.spec.steps < passes, "{g:?}");
        assert_eq!(g.spec.steps as usize, g.spec.per_step_accepted.len());
        assert_eq!(g.spec.proposed, 4 * g.spec.steps);
        // p_draft 1 keeps the stream of a profile that always drafts.
        let same = AcceptanceProfile {
            p_draft: 1.0,
            ..every.clone()
        };
        assert_eq!(
            generate(3, "k", &same, (100, 100), None, false),
            generate(3, "k", &every, (100, 100), None, false)
        );
        let none = generate(3, "k", &never, (100, 100), None, false);
        assert_eq!((none.spec.steps, none.spec.proposed), (0, 0));
        assert_eq!(none.iterations.len(), 100);
        assert_eq!(none.text(), g.text(), "drafting never changes the text");
    }

    #[test]
    fn histogram_is_bimodal() {
        let p = profile(4, 0.6, 0.4);
        let mut hist = [0u64; 5];
        for i in 0..300 {
            let g = generate(1, &format!("p{i}"), &p, (48, 160), None, false);
            for (j, c) in g.spec.histogram.iter().enumerate() {
                hist[j] += c;
            }
        }
        // Expected shape: ~0.6 at k; the rest geometric: 0.24, 0.096, 0.038, 0.026 (the
        // last slots lose some mass to truncated final steps).
        let middle_max = hist[1..4].iter().copied().max().unwrap_or(0);
        assert!(hist[4] > hist[0] && hist[0] > middle_max, "{hist:?}");
        let total: u64 = hist.iter().sum();
        assert!(hist[4] as f64 / total as f64 > 0.5, "{hist:?}");
    }

    #[test]
    fn demo_profiles_order_categories() {
        let c = crate::SimConfig::speed_bench_demo();
        let mean_al = |cat: &str| {
            let p = c.profile_for(Some(cat));
            let (mut steps, mut acc) = (0, 0);
            for i in 0..200 {
                let g = generate(0, &format!("[{cat} {i}]"), p, (48, 160), None, false);
                steps += g.spec.steps;
                acc += g.spec.accepted;
            }
            1.0 + acc as f64 / steps as f64
        };
        let (math, roleplay, coding) = (mean_al("math"), mean_al("roleplay"), mean_al("coding"));
        assert!(
            math > coding && coding > roleplay,
            "{math} {coding} {roleplay}"
        );
        assert!(
            (4.6..5.4).contains(&math) && (2.9..3.6).contains(&roleplay),
            "{math} {roleplay}"
        );
    }

    #[test]
    fn prompt_info_from_messages() {
        let info = PromptInfo::from_messages(
            [
                ("system", "be brief"),
                ("user", "[coding 0] write  a\nsort"),
                ("assistant", "ok"),
                ("user", "again"),
            ]
            .map(|(r, c)| (r.to_owned(), c.to_owned())),
        );
        assert_eq!(info.turns, 2);
        assert_eq!(info.first_user, "[coding 0] write  a\nsort");
        assert_eq!(info.prompt_tokens, 2 + 5 + 1 + 1);
        assert_eq!(info.category.as_deref(), Some("coding"));
        assert_eq!(category_marker("[math] x").as_deref(), Some("math"));
        assert_eq!(category_marker("[] x"), None);
        assert_eq!(category_marker("coding"), None);
        let c = PromptInfo::from_prompt("[qa 3] what".to_owned());
        assert_eq!((c.turns, c.prompt_tokens), (1, 3));
        assert_eq!(c.category.as_deref(), Some("qa"));
    }
}
