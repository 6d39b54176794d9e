//! The SSE parser never panics, and how the bytes are split never changes
//! the events it emits (the first input byte chooses the split sizes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use speedbench_client::sse::SseParser;

fuzz_target!(|data: &[u8]| {
    let Some((&seed, input)) = data.split_first() else {
        return;
    };
    let mut whole = SseParser::new();
    let mut expected = Vec::new();
    whole.push(input, &mut expected);

    let mut pieces = SseParser::new();
    let mut got = Vec::new();
    let mut rest = input;
    let mut step = usize::from(seed % 7) + 1;
    while !rest.is_empty() {
        let n = step.min(rest.len());
        pieces.push(&rest[..n], &mut got);
        rest = &rest[n..];
        step = step % 7 + 1;
    }
    assert_eq!(expected, got);
    assert_eq!(whole.pending(), pieces.pending());
    assert_eq!(whole.invalid_utf8_lines(), pieces.invalid_utf8_lines());
    for ev in &expected {
        // A dispatched event never holds a raw line break other than the
        // `\n` that joins data lines, and never a `\r`.
        assert!(!ev.data.contains('\r'));
    }
});
