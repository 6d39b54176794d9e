//! An incremental Server-Sent Events parser.
//!
//! Bytes arrive in arbitrary pieces: a frame may split an event, a line, a
//! `\r\n` pair or a UTF-8 sequence. The parser buffers bytes and emits an
//! event only when its terminating blank line has arrived, following the
//! WHATWG rules the OpenAI SDKs follow: `\n`, `\r\n` and `\r` end lines, a
//! line starting with `:` is a comment (keep-alive), `data` lines join with
//! `\n`, one space after the colon is dropped, unknown fields are ignored.

use std::borrow::Cow;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, when the server named the event.
    pub event: Option<String>,
    /// The joined `data:` lines.
    pub data: String,
}

/// One dispatched event, borrowed from the parser ([`SseParser::push_with`]):
/// an event of one `data:` line (a stream chunk) is read where it arrived,
/// not copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEventRef<'a> {
    /// The `event:` field, when the server named the event.
    pub event: Option<&'a str>,
    /// The joined `data:` lines.
    pub data: &'a str,
    /// Some line of the event was not valid UTF-8 and was decoded lossily:
    /// `data` is not what the server sent.
    pub lossy: bool,
}

impl SseEventRef<'_> {
    /// The event, owned.
    pub fn to_owned(self) -> SseEvent {
        SseEvent {
            event: self.event.map(str::to_string),
            data: self.data.to_string(),
        }
    }
}

/// Incremental SSE parser; feed bytes with [`SseParser::push`].
#[derive(Debug)]
pub struct SseParser {
    buf: Vec<u8>,
    /// Start of the unparsed part of `buf`.
    pos: usize,
    /// `buf[pos..scanned]` holds no line end: a search resumes here, so a
    /// long line arriving in many pieces is scanned once (linear time).
    scanned: usize,
    /// The longest line, and event data, kept ([`SseParser::with_max_line`]).
    max_line: usize,
    /// A line or an event's data passed `max_line`: parsing stopped.
    over_limit: bool,
    /// A `\r` ended the previous line; a following `\n` belongs to it.
    skip_lf: bool,
    event: Option<String>,
    /// The event's data, once it had to be copied: a second `data:` line,
    /// or an event not complete at the end of a push.
    data: String,
    /// The event's one `data:` value, where it lies in `buf` (not yet
    /// checked as UTF-8): the common case, read without a copy.
    data_in_buf: Option<(usize, usize)>,
    has_data: bool,
    /// Lines that were not valid UTF-8 (decoded lossily).
    invalid_utf8_lines: u64,
    /// `invalid_utf8_lines` when the current event began.
    invalid_before_event: u64,
}

impl Default for SseParser {
    fn default() -> Self {
        SseParser {
            buf: Vec::new(),
            pos: 0,
            scanned: 0,
            max_line: usize::MAX,
            over_limit: false,
            skip_lf: false,
            event: None,
            data: String::new(),
            data_in_buf: None,
            has_data: false,
            invalid_utf8_lines: 0,
            invalid_before_event: 0,
        }
    }
}

impl SseParser {
    /// Creates an empty parser without a line limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// A parser that keeps at most `max_line` bytes of one line, and of one
    /// event's joined data: past that it stops (see
    /// [`SseParser::over_limit`]) instead of growing without bound.
    pub fn with_max_line(max_line: usize) -> Self {
        SseParser {
            max_line,
            ..Self::default()
        }
    }

    /// True once a line or an event's data passed the limit of
    /// [`SseParser::with_max_line`]; nothing more is parsed.
    pub fn over_limit(&self) -> bool {
        self.over_limit
    }

    /// Feeds bytes and appends every event they complete to `out`.
    ///
    /// Linear in the bytes fed, however a line is split: a search for a
    /// line end never looks at the same byte twice.
    pub fn push(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) {
        self.push_with(bytes, |event| out.push(event.to_owned()));
    }

    /// Feeds bytes and hands every event they complete to `on_event`, in
    /// order, borrowed: [`SseParser::push`] without a `String` per event.
    pub fn push_with(&mut self, bytes: &[u8], mut on_event: impl FnMut(SseEventRef<'_>)) {
        if self.over_limit {
            return;
        }
        if self.buf.is_empty() {
            // Nothing pending (reads mostly end where an event does): the
            // lines are read where they lie, and only the part they leave
            // is kept.
            if self.lines(bytes, &mut on_event) {
                self.copy_data_out(bytes);
                self.buf.extend_from_slice(&bytes[self.pos..]);
                self.scanned = self.scanned.max(self.pos) - self.pos;
                self.pos = 0;
            }
            return;
        }
        self.buf.extend_from_slice(bytes);
        // Lines are read in place from the buffer, taken out of `self` for
        // the loop (a copy of every line into its own String was the
        // parser's largest cost).
        let buf = std::mem::take(&mut self.buf);
        if !self.lines(&buf, &mut on_event) {
            return;
        }
        // A value left in place would move with the buffer below.
        self.copy_data_out(&buf);
        self.buf = buf;
        // Keep only what is not parsed yet: a stream held open for minutes
        // must not hold its past. Moving the rest only once it is at most
        // half the buffer keeps pushes O(n).
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
            self.scanned = 0;
        } else if self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.scanned -= self.pos;
            self.pos = 0;
        }
    }

    /// Reads the complete lines of `buf` from `self.pos` on, handing out
    /// the events they end; false when one passed the limit (parsing
    /// stopped).
    fn lines(&mut self, buf: &[u8], on_event: &mut impl FnMut(SseEventRef<'_>)) -> bool {
        loop {
            if self.skip_lf && self.pos < buf.len() {
                if buf[self.pos] == b'\n' {
                    self.pos += 1;
                }
                self.skip_lf = false;
            }
            let from = self.scanned.max(self.pos);
            let Some(found) = memchr::memchr2(b'\n', b'\r', &buf[from..]) else {
                self.scanned = buf.len();
                if buf.len() - self.pos > self.max_line {
                    self.stop();
                    return false;
                }
                return true;
            };
            let end = from - self.pos + found;
            let is_cr = buf[self.pos + end] == b'\r';
            let line_start = self.pos;
            self.pos += end + 1;
            self.skip_lf = is_cr;
            self.line(buf, line_start, line_start + end, on_event);
            if self.data.len() > self.max_line || end > self.max_line {
                self.stop();
                return false;
            }
        }
    }

    /// Stops parsing and frees what was held.
    fn stop(&mut self) {
        self.over_limit = true;
        self.buf = Vec::new();
        self.data = String::new();
        self.data_in_buf = None;
        self.pos = 0;
        self.scanned = 0;
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

    /// `bytes` as text: lossily, and counted, when not UTF-8.
    fn text<'b>(&mut self, bytes: &'b [u8]) -> Cow<'b, str> {
        match std::str::from_utf8(bytes) {
            Ok(s) => Cow::Borrowed(s),
            Err(_) => {
                self.invalid_utf8_lines += 1;
                String::from_utf8_lossy(bytes)
            }
        }
    }

    /// Moves a value held in place into `data`.
    fn copy_data_out(&mut self, buf: &[u8]) {
        if let Some((from, to)) = self.data_in_buf.take() {
            let value = self.text(&buf[from..to]);
            self.data.push_str(&value);
        }
    }

    /// One complete line, `buf[from..to]`. Fields are matched as bytes; a
    /// line is checked as UTF-8 once, a data value when it is taken.
    fn line(
        &mut self,
        buf: &[u8],
        from: usize,
        to: usize,
        on_event: &mut impl FnMut(SseEventRef<'_>),
    ) {
        let line = &buf[from..to];
        if line.is_empty() {
            self.dispatch(buf, on_event);
            return;
        }
        let (field, value_from) = match memchr::memchr(b':', line) {
            // A comment (keep-alive): checked, not kept.
            Some(0) => {
                self.text(line);
                return;
            }
            Some(colon) => {
                let after = from + colon + 1;
                let space = buf.get(after) == Some(&b' ') && after < to;
                (&line[..colon], after + usize::from(space))
            }
            None => (line, to),
        };
        match field {
            b"data" => {
                if self.has_data {
                    self.copy_data_out(buf);
                    self.data.push('\n');
                    let value = self.text(&buf[value_from..to]);
                    self.data.push_str(&value);
                } else {
                    self.data_in_buf = Some((value_from, to));
                }
                self.has_data = true;
            }
            b"event" => self.event = Some(self.text(&buf[value_from..to]).into_owned()),
            _ => {
                self.text(line);
            }
        }
    }

    /// A blank line: the event so far goes out, if it had data.
    fn dispatch(&mut self, buf: &[u8], on_event: &mut impl FnMut(SseEventRef<'_>)) {
        if self.has_data {
            let in_place = self.data_in_buf.take().map(|(from, to)| &buf[from..to]);
            let in_place = in_place.map(|bytes| self.text(bytes));
            let data = in_place.as_deref().unwrap_or(&self.data);
            on_event(SseEventRef {
                event: self.event.as_deref(),
                data,
                lossy: self.invalid_utf8_lines > self.invalid_before_event,
            });
            self.data.clear();
        }
        self.event = None;
        self.has_data = false;
        self.invalid_before_event = self.invalid_utf8_lines;
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
    fn a_long_line_in_small_pieces_is_scanned_once() {
        // 2 MiB of data in 16-byte pieces: rescanning the pending line on
        // every piece would look at ~1.3e11 bytes; this finishes at once.
        let mut p = SseParser::new();
        let mut out = Vec::new();
        let line = format!("data: {}\n\n", "x".repeat(2 << 20));
        for piece in line.as_bytes().chunks(16) {
            p.push(piece, &mut out);
        }
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data.len(), 2 << 20);
        assert!(p.pending().is_empty());
    }

    #[test]
    fn lines_and_event_data_past_the_limit_stop_the_parser() {
        let mut p = SseParser::with_max_line(64);
        let mut out = Vec::new();
        p.push(b"data: short\n\n", &mut out);
        assert_eq!(out.len(), 1);
        assert!(!p.over_limit());
        // An unterminated line past the limit, in pieces.
        for _ in 0..10 {
            p.push(b"data: 0123456789", &mut out);
        }
        assert!(p.over_limit());
        assert!(p.pending().is_empty(), "nothing more is held");
        p.push(b"\n\ndata: after\n\n", &mut out);
        assert_eq!(out.len(), 1, "nothing is parsed after the limit");
        // Many short data lines of one event add up past the limit too.
        let mut p = SseParser::with_max_line(64);
        for _ in 0..10 {
            p.push(b"data: 0123456789\n", &mut out);
        }
        assert!(p.over_limit());
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
    fn events_are_handed_over_borrowed_and_marked_when_lossy() {
        let input = b"data: ok\n\ndata: caf\xc3\n\n: keep\xff\nevent: e\ndata: a\ndata: b\n\n";
        for piece in 1..input.len() {
            let mut p = SseParser::new();
            let mut seen = Vec::new();
            for chunk in input.chunks(piece) {
                p.push_with(chunk, |ev| {
                    seen.push((ev.event.map(str::to_string), ev.data.to_string(), ev.lossy))
                });
            }
            let want = vec![
                (None, "ok".to_string(), false),
                (None, "caf\u{fffd}".to_string(), true),
                // A bad comment line inside the event marks it too.
                (Some("e".to_string()), "a\nb".to_string(), true),
            ];
            assert_eq!(seen, want, "piece {piece}");
            assert_eq!(p.invalid_utf8_lines(), 2);
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
