//! The spec-decode adapters never panic on any JSON, and whatever they
//! accept satisfies the invariants documented in docs/record-schema.md.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use speedbench_client::spec::{from_llamacpp, from_sglang, from_trtllm, from_vllm};

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let results = [
        from_vllm(&v).ok(),
        from_trtllm(&v).ok(),
        from_sglang(&v).ok(),
        from_llamacpp(&v).ok().flatten(),
    ];
    for s in results.into_iter().flatten() {
        assert!(s.accepted_draft_tokens <= s.proposed_draft_tokens);
        let h = &s.acceptance_histogram;
        if !h.is_empty() {
            let steps: u128 = h.iter().map(|&n| u128::from(n)).sum();
            assert_eq!(Some(steps), s.verify_steps.map(u128::from));
            let weighted: u128 = h
                .iter()
                .enumerate()
                .map(|(j, &n)| j as u128 * u128::from(n))
                .sum();
            assert_eq!(weighted, u128::from(s.accepted_draft_tokens));
        }
        if let (Some(a), Some(d)) = (&s.per_step_accepted, &s.per_step_drafted) {
            assert_eq!(a.len(), d.len());
            assert!(a.iter().zip(d).all(|(a, d)| a <= d));
            let sum = |xs: &[u32]| xs.iter().map(|&x| u64::from(x)).sum::<u64>();
            assert_eq!(sum(a), s.accepted_draft_tokens);
            assert_eq!(sum(d), s.proposed_draft_tokens);
        }
    }
});
