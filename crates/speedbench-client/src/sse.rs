//! An incremental Server-Sent Events parser.
//!
//! Bytes arrive in arbitrary pieces: a frame may split an event, a line, a
//! `\r\n` pair or a UTF-8 sequence. The parser buffers bytes and emits an
//! event only when its terminating blank line has arrived, following the
//! WHATWG rules the OpenAI SDKs follow: `\n`, `\r\n` and `\r` end lines, a
//! line starting with `:` is a comment (keep-alive), `data` lines join with
//! `\n`, one space after the colon is dropped, unknown fields are ignored.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, when the server named the event.
    pub event: Option<String>,
    /// The joined `data:` lines.
    pub data: String,
}

/// Incremental SSE parser; feed bytes with [`SseParser::push`].
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    /// Start of the unparsed part of `buf`.
    pos: usize,
    /// A `\r` ended the previous line; a following `\n` belongs to it.
    skip_lf: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    /// Lines that were not valid UTF-8 (decoded lossily).
    invalid_utf8_lines: u64,
}

impl SseParser {
    /// Creates an empty parser.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes and appends every event they complete to `out`.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        self.buf.extend_from_slice(bytes);
        loop {
            if self.skip_lf && self.pos < self.buf.len() {
                if self.buf[self.pos] == b'\n' {
                    self.pos += 1;
                }
                self.skip_lf = false;
            }
            let rest = &self.buf[self.pos..];
            let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') else {
                break;
            };
            let is_cr = rest[end] == b'\r';
            let line_start = self.pos;
            self.pos += end + 1;
            self.skip_lf = is_cr;
            let bytes = &self.buf[line_start..line_start + end];
            let line = match std::str::from_utf8(bytes) {
                Ok(s) => s.to_owned(),
                Err(_) => {
                    self.invalid_utf8_lines += 1;
                    String::from_utf8_lossy(bytes).into_owned()
                }
            };
            self.line(&line, out);
        }
        // Keep only what is not parsed yet: a stream held open for minutes
        // must not hold its past. Moving the rest only once it is at most
        // half the buffer keeps pushes O(n).
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }

    /// Complete lines so far that were not valid UTF-8. SSE is UTF-8 only;
    /// such lines are still parsed (with U+FFFD replacements), so callers
    /// that must not record altered text check this.
    pub fn invalid_utf8_lines(&self) -> u64 {
        self.invalid_utf8_lines
    }

    /// Bytes received after the last complete line (an unterminated tail).
    pub fn pending(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    fn line(&mut self, line: &str, out: &mut Vec<SseEvent>) {
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data),
                });
            }
            self.event = None;
            self.has_data = false;
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in_pieces(input: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for chunk in input.chunks(piece) {
            p.push(chunk, &mut out);
        }
        out
    }

    #[test]
    fn events_survive_any_split() {
        let input = "data: {\"a\":1}\n\n: keep-alive\n\nevent: sglext_ids\ndata: x\n\ndata: é€\r\n\r\ndata: l1\rdata: l2\r\r\ndata: [DONE]\n\n";
        let expected = vec![
            SseEvent {
                event: None,
                data: "{\"a\":1}".into(),
            },
            SseEvent {
                event: Some("sglext_ids".into()),
                data: "x".into(),
            },
            SseEvent {
                event: None,
                data: "é€".into(),
            },
            SseEvent {
                event: None,
                data: "l1\nl2".into(),
            },
            SseEvent {
                event: None,
                data: "[DONE]".into(),
            },
        ];
        for piece in 1..input.len() {
            assert_eq!(
                parse_in_pieces(input.as_bytes(), piece),
                expected,
                "piece {piece}"
            );
        }
    }

    #[test]
    fn fields_without_space_and_unknown_fields() {
        let out = parse_in_pieces(b"data:x\nid: 3\nretry: 10\nfoo\n\n", 64);
        assert_eq!(
            out,
            vec![SseEvent {
                event: None,
                data: "x".into()
            }]
        );
    }

    #[test]
    fn an_unterminated_tail_is_pending_not_dispatched() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        p.push(b"data: {\"partial\":", &mut out);
        assert!(out.is_empty());
        assert_eq!(p.pending(), b"data: {\"partial\":");
    }

    #[test]
    fn invalid_utf8_is_counted_even_when_split() {
        let input = b"data: ok\n\ndata: caf\xc3\n\ndata: \xff\xfe\n\ndata: \xc3\xa9\n\n";
        for piece in 1..input.len() {
            let mut p = SseParser::new();
            let mut out = Vec::new();
            for chunk in input.chunks(piece) {
                p.push(chunk, &mut out);
            }
            assert_eq!(out.len(), 4);
            assert_eq!(out[3].data, "é", "a split sequence is not invalid");
            assert_eq!(p.invalid_utf8_lines(), 2, "piece {piece}");
        }
    }

    #[test]
    fn long_streams_do_not_grow_the_buffer() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for _ in 0..10_000 {
            p.push(b"data: {\"choices\":[]}\n\n", &mut out);
        }
        assert_eq!(out.len(), 10_000);
        // Nothing parsed is kept: the buffer holds at most one push.
        assert!(p.buf.capacity() <= 64, "{}", p.buf.capacity());
        // A tail is kept (moved to the front) until its line ends.
        p.push(b"data: {\"a\"", &mut out);
        p.push(b":1}\n\n", &mut out);
        assert_eq!(out.last().unwrap().data, "{\"a\":1}");
        assert!(p.pending().is_empty());
    }
}
