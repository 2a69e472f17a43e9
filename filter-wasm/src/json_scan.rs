//! Incremental, resumable JSON scanner.
//!
//! [`Scanner::feed`] consumes a request body chunk by chunk, exactly as Envoy
//! delivers it, and reports [`Event`]s to a [`Sink`]. Every event carries byte
//! offsets into the *whole* body (not the chunk), so a later stage can splice
//! the original bytes without re-reading them.
//!
//! Properties:
//! - State kept between chunks is O(nesting depth): one byte per open
//!   container, the key being read (capped at [`MAX_KEY_BYTES`]), at most three
//!   bytes of an incomplete UTF-8 sequence and the progress of one escape,
//!   number or literal. Earlier chunks are never looked at again.
//! - The input is validated fully against RFC 8259: structure, number grammar,
//!   literals, string escapes, UTF-8 (overlong forms, surrogates encoded in
//!   UTF-8 and bytes past U+10FFFF are rejected), control characters inside
//!   strings and trailing garbage. `\uXXXX` escapes are decoded including
//!   surrogate pairs; a lone or mismatched surrogate is an error.
//! - No panics on any input: all failures are [`ScanError`]s.
//!
//! String values are reported as [`Event::StringStart`], any number of
//! [`Event::StringFragment`]s carrying decoded text (fragment boundaries depend
//! on chunking and escapes; concatenate them) and [`Event::StringEnd`]. Object
//! keys are decoded and reported whole as [`Event::Key`].

use thiserror::Error;

/// Longest object key, in decoded UTF-8 bytes, that is reported by name.
/// Longer keys are still validated but reported as [`Event::Key`] with
/// `None`: no key this filter acts on is that long.
pub const MAX_KEY_BYTES: usize = 64;

/// One syntactic event. Offsets are byte offsets into the whole body.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event<'a> {
    /// `{` at `offset`.
    ObjectStart {
        /// Offset of the `{`.
        offset: u64,
    },
    /// `}` at `offset`.
    ObjectEnd {
        /// Offset of the `}`.
        offset: u64,
    },
    /// `[` at `offset`.
    ArrayStart {
        /// Offset of the `[`.
        offset: u64,
    },
    /// `]` at `offset`.
    ArrayEnd {
        /// Offset of the `]`.
        offset: u64,
    },
    /// An object key, decoded. `None` when longer than [`MAX_KEY_BYTES`].
    Key(Option<&'a str>),
    /// A string value begins; `offset` is that of its opening quote.
    StringStart {
        /// Offset of the opening `"`.
        offset: u64,
    },
    /// Decoded text of the current string value (a piece of it).
    StringFragment(&'a str),
    /// The current string value ended; `end` is the offset just past its
    /// closing quote, so the raw value spans `start..end`.
    StringEnd {
        /// Offset one past the closing `"`.
        end: u64,
    },
    /// A number value spanning `start..end`.
    Number {
        /// Offset of the first byte.
        start: u64,
        /// Offset one past the last byte.
        end: u64,
    },
    /// `true` or `false` spanning `start..end`.
    Bool {
        /// The literal's value.
        value: bool,
        /// Offset of the first byte.
        start: u64,
        /// Offset one past the last byte.
        end: u64,
    },
    /// `null` spanning `start..end`.
    Null {
        /// Offset of the first byte.
        start: u64,
        /// Offset one past the last byte.
        end: u64,
    },
}

/// A byte for an error message: the character when it is printable ASCII (`'x'`), else
/// its value (`byte 0xEF`), so that a byte of a multi-byte sequence is not shown as the
/// Latin-1 character it is not.
fn describe_byte(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("character '{}'", char::from(b))
    } else {
        format!("byte 0x{b:02X}")
    }
}

/// Why the body is not valid JSON (or not acceptable to this scanner).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScanErrorKind {
    /// A byte that cannot appear where it was found.
    #[error("unexpected {}", describe_byte(*.0))]
    UnexpectedByte(u8),
    /// The body ended inside a value or container.
    #[error("unexpected end of input")]
    UnexpectedEnd,
    /// The body holds no value at all.
    #[error("empty body")]
    Empty,
    /// Containers nested deeper than the configured limit.
    #[error("nesting deeper than {0} levels")]
    TooDeep(usize),
    /// An escape other than `\" \\ \/ \b \f \n \r \t \uXXXX`.
    #[error("invalid escape sequence")]
    InvalidEscape,
    /// A `\u` escape with a non-hex digit.
    #[error("invalid \\u escape")]
    InvalidUnicodeEscape,
    /// A high surrogate not followed by a low one, or a lone low surrogate.
    #[error("unpaired UTF-16 surrogate in \\u escape")]
    LoneSurrogate,
    /// A raw control character (below U+0020) inside a string.
    #[error("control character in string")]
    ControlCharacter,
    /// Bytes that are not UTF-8.
    #[error("invalid UTF-8")]
    InvalidUtf8,
    /// A malformed number such as `01`, `1.`, `-` or `1e`.
    #[error("invalid number")]
    InvalidNumber,
    /// A malformed literal such as `tru`.
    #[error("invalid literal")]
    InvalidLiteral,
}

/// A syntax error and the body offset where it was detected.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("invalid JSON at byte {offset}: {kind}")]
pub struct ScanError {
    /// What is wrong.
    pub kind: ScanErrorKind,
    /// Offset into the whole body.
    pub offset: u64,
}

/// Failure of [`Scanner::feed`] / [`Scanner::finish`]: the JSON itself or
/// the sink that consumes the events.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FeedError<E> {
    /// The body is not valid JSON.
    #[error(transparent)]
    Syntax(#[from] ScanError),
    /// The sink rejected an event.
    #[error("{0}")]
    Sink(E),
}

/// Consumer of scanner events.
pub trait Sink {
    /// Error the sink can raise; it stops the scan.
    type Error;
    /// Called for each event, in body order.
    fn event(&mut self, event: Event<'_>) -> Result<(), Self::Error>;
}

/// Where the parser is inside the current container (or at top level).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// Just after `{`: a key or `}`.
    ObjectFirst,
    /// After `,` in an object: a key.
    ObjectKey,
    /// After a key: `:`.
    ObjectColon,
    /// After `:`: a value.
    ObjectValue,
    /// After a member value: `,` or `}`.
    ObjectNext,
    /// Just after `[`: a value or `]`.
    ArrayFirst,
    /// After `,` in an array: a value.
    ArrayValue,
    /// After an element: `,` or `]`.
    ArrayNext,
}

/// Top-level progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Top {
    /// Nothing but whitespace so far.
    Start,
    /// Inside the top-level value.
    InValue,
    /// The top-level value is complete; only whitespace may follow.
    Done,
}

/// Progress of a number token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Num {
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

impl Num {
    fn accepting(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpDigits)
    }

    /// Next state on `b`, or `None` when `b` does not continue the number.
    fn step(self, b: u8) -> Option<Num> {
        match (self, b) {
            (Num::Minus, b'0') => Some(Num::Zero),
            (Num::Minus, b'1'..=b'9') => Some(Num::Int),
            (Num::Int, b'0'..=b'9') => Some(Num::Int),
            (Num::Zero | Num::Int, b'.') => Some(Num::Dot),
            (Num::Zero | Num::Int | Num::Frac, b'e' | b'E') => Some(Num::Exp),
            (Num::Dot | Num::Frac, b'0'..=b'9') => Some(Num::Frac),
            (Num::Exp, b'+' | b'-') => Some(Num::ExpSign),
            (Num::Exp | Num::ExpSign | Num::ExpDigits, b'0'..=b'9') => Some(Num::ExpDigits),
            _ => None,
        }
    }
}

/// Progress of a `\` escape inside a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Esc {
    /// Not in an escape.
    None,
    /// After `\`.
    Backslash,
    /// Reading the hex digits of `\u`; `digits` read so far, value so far.
    Hex { digits: u8, value: u16 },
    /// A high surrogate was decoded; expecting `\`.
    LowBackslash { high: u16 },
    /// Expecting `u` of the low surrogate escape.
    LowU { high: u16 },
    /// Reading the low surrogate's hex digits.
    LowHex { high: u16, digits: u8, value: u16 },
}

/// The token being read when a chunk ended (or nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    None,
    /// Inside a string; `key` tells whether it is an object key.
    Str {
        key: bool,
    },
    /// Inside a number that started at `start`.
    Number {
        state: Num,
        start: u64,
    },
    /// Inside `true`, `false` or `null`: which one, bytes matched, start.
    Literal {
        which: Lit,
        matched: u8,
        start: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lit {
    True,
    False,
    Null,
}

impl Lit {
    fn text(self) -> &'static [u8] {
        match self {
            Lit::True => b"true",
            Lit::False => b"false",
            Lit::Null => b"null",
        }
    }
}

/// The incremental scanner. Create one per body, call [`Scanner::feed`] for
/// each chunk in order, then [`Scanner::finish`] once.
#[derive(Debug, Clone)]
pub struct Scanner {
    max_depth: usize,
    stack: Vec<Frame>,
    top: Top,
    token: Token,
    esc: Esc,
    /// Bytes of an incomplete UTF-8 sequence carried over a chunk boundary.
    utf8: [u8; 4],
    utf8_len: u8,
    /// Body offset of that sequence's first byte: invalid UTF-8 is reported
    /// there, as when the sequence is not split.
    utf8_start: u64,
    /// The key being read.
    key: [u8; MAX_KEY_BYTES],
    key_len: usize,
    key_overlong: bool,
    /// Offset of the first byte of the next chunk.
    offset: u64,
    /// A failure already reported: every later call fails the same way.
    failed: Option<ScanError>,
}

/// The length of the run of string bytes at the start of `rest` that need no attention: up
/// to the first quote, backslash or control byte (below 0x20), or all of it. Read 8 bytes
/// at a time (SWAR), as string content is most of a prompt's body.
fn plain_run(rest: &[u8]) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // The high bit of each zero byte of `v`, exactly (no false hits from borrows).
    let zero_bytes = |v: u64| !(((v & !HIGH) + !HIGH) | v) & HIGH;
    let mut n = 0;
    while let Some(word) = rest.get(n..).and_then(|r| r.first_chunk::<8>()) {
        let x = u64::from_le_bytes(*word);
        // Bytes below 0x20: the high bit clear in `x` and in `x + 0x60`.
        let control = !(x | (x & !HIGH).wrapping_add(ONES * 0x60)) & HIGH;
        let stop = zero_bytes(x ^ (ONES * u64::from(b'"')))
            | zero_bytes(x ^ (ONES * u64::from(b'\\')))
            | control;
        if stop != 0 {
            return n + (stop.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    n + rest
        .get(n..)
        .unwrap_or_default()
        .iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .unwrap_or(rest.len().saturating_sub(n))
}

/// Number of bytes a UTF-8 sequence with this lead byte has, or 0 when the
/// byte cannot start a sequence.
fn utf8_width(lead: u8) -> usize {
    match lead {
        0x00..=0x7f => 1,
        0xc2..=0xdf => 2,
        0xe0..=0xef => 3,
        0xf0..=0xf4 => 4,
        _ => 0,
    }
}

fn hex_value(b: u8) -> Option<u16> {
    match b {
        b'0'..=b'9' => Some(u16::from(b - b'0')),
        b'a'..=b'f' => Some(u16::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u16::from(b - b'A' + 10)),
        _ => None,
    }
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

impl Scanner {
    /// A scanner that rejects containers nested deeper than `max_depth`.
    pub fn new(max_depth: usize) -> Self {
        Scanner {
            max_depth,
            stack: Vec::new(),
            top: Top::Start,
            token: Token::None,
            esc: Esc::None,
            utf8: [0; 4],
            utf8_len: 0,
            utf8_start: 0,
            key: [0; MAX_KEY_BYTES],
            key_len: 0,
            key_overlong: false,
            offset: 0,
            failed: None,
        }
    }

    /// Bytes consumed so far (the offset the next chunk starts at).
    pub fn consumed(&self) -> u64 {
        self.offset
    }

    /// Current container depth (0 at top level).
    pub fn depth(&self) -> usize {
        self.stack.len()
    }

    /// True once the top-level value is complete (only whitespace may follow).
    /// A top-level number is complete only at [`Scanner::finish`].
    pub fn value_complete(&self) -> bool {
        self.top == Top::Done
    }

    /// Consume the next chunk of the body.
    ///
    /// # Errors
    /// [`FeedError::Syntax`] for invalid JSON, [`FeedError::Sink`] when the
    /// sink rejects an event. After an error the scanner stays failed.
    pub fn feed<S: Sink>(&mut self, chunk: &[u8], sink: &mut S) -> Result<(), FeedError<S::Error>> {
        if let Some(e) = &self.failed {
            return Err(FeedError::Syntax(e.clone()));
        }
        let result = self.run(chunk, sink);
        self.offset = self.offset.saturating_add(chunk.len() as u64);
        if let Err(FeedError::Syntax(e)) = &result {
            self.failed = Some(e.clone());
        }
        result
    }

    /// Signal the end of the body: completes a trailing top-level number
    /// and checks that exactly one value was seen.
    ///
    /// # Errors
    /// [`ScanErrorKind::UnexpectedEnd`] inside a value, [`ScanErrorKind::Empty`]
    /// for a body of only whitespace, or the sink's error.
    pub fn finish<S: Sink>(&mut self, sink: &mut S) -> Result<(), FeedError<S::Error>> {
        if let Some(e) = &self.failed {
            return Err(FeedError::Syntax(e.clone()));
        }
        let at = self.offset;
        if let Token::Number { state, start } = self.token {
            if !state.accepting() {
                return Err(self.fail(ScanErrorKind::InvalidNumber, at).into());
            }
            self.token = Token::None;
            sink.event(Event::Number { start, end: at })
                .map_err(FeedError::Sink)?;
            self.value_done();
        }
        match self.top {
            Top::Done => Ok(()),
            Top::Start => Err(self.fail(ScanErrorKind::Empty, at).into()),
            Top::InValue => Err(self.fail(ScanErrorKind::UnexpectedEnd, at).into()),
        }
    }

    fn fail(&mut self, kind: ScanErrorKind, offset: u64) -> ScanError {
        let e = ScanError { kind, offset };
        self.failed = Some(e.clone());
        e
    }

    /// Marks the end of a value in the current context.
    fn value_done(&mut self) {
        match self.stack.last_mut() {
            Some(f @ Frame::ObjectValue) => *f = Frame::ObjectNext,
            Some(f @ (Frame::ArrayFirst | Frame::ArrayValue)) => *f = Frame::ArrayNext,
            Some(_) => {}
            None => self.top = Top::Done,
        }
    }

    /// True when the current context expects a value.
    fn expects_value(&self) -> bool {
        match self.stack.last() {
            Some(Frame::ObjectValue | Frame::ArrayFirst | Frame::ArrayValue) => true,
            Some(_) => false,
            None => self.top == Top::Start,
        }
    }

    fn run<S: Sink>(&mut self, chunk: &[u8], sink: &mut S) -> Result<(), FeedError<S::Error>> {
        let base = self.offset;
        let mut i = 0usize;
        while i < chunk.len() {
            match self.token {
                Token::Str { key } => {
                    i = self.string(chunk, i, key, sink)?;
                    continue;
                }
                Token::Number { state, start } => {
                    let mut st = state;
                    let mut j = i;
                    while let Some(&b) = chunk.get(j) {
                        match st.step(b) {
                            Some(n) => st = n,
                            None => break,
                        }
                        j += 1;
                    }
                    if j == chunk.len() {
                        self.token = Token::Number { state: st, start };
                        return Ok(());
                    }
                    if !st.accepting() {
                        return Err(self
                            .fail(ScanErrorKind::InvalidNumber, base + j as u64)
                            .into());
                    }
                    self.token = Token::None;
                    sink.event(Event::Number {
                        start,
                        end: base + j as u64,
                    })
                    .map_err(FeedError::Sink)?;
                    self.value_done();
                    i = j;
                    continue;
                }
                Token::Literal {
                    which,
                    matched,
                    start,
                } => {
                    let text = which.text();
                    let mut m = usize::from(matched);
                    while m < text.len() {
                        match chunk.get(i) {
                            None => break,
                            Some(b) if Some(b) == text.get(m) => {
                                m += 1;
                                i += 1;
                            }
                            Some(_) => {
                                return Err(self
                                    .fail(ScanErrorKind::InvalidLiteral, base + i as u64)
                                    .into());
                            }
                        }
                    }
                    if m < text.len() {
                        self.token = Token::Literal {
                            which,
                            matched: m as u8,
                            start,
                        };
                        return Ok(());
                    }
                    self.token = Token::None;
                    let end = base + i as u64;
                    let ev = match which {
                        Lit::True => Event::Bool {
                            value: true,
                            start,
                            end,
                        },
                        Lit::False => Event::Bool {
                            value: false,
                            start,
                            end,
                        },
                        Lit::Null => Event::Null { start, end },
                    };
                    sink.event(ev).map_err(FeedError::Sink)?;
                    self.value_done();
                    continue;
                }
                Token::None => {}
            }
            let Some(&b) = chunk.get(i) else { break };
            let at = base + i as u64;
            i += 1;
            if is_ws(b) {
                continue;
            }
            if self.top == Top::Done {
                return Err(self.fail(ScanErrorKind::UnexpectedByte(b), at).into());
            }
            match self.stack.last().copied() {
                Some(Frame::ObjectFirst | Frame::ObjectKey) => {
                    let first = self.stack.last() == Some(&Frame::ObjectFirst);
                    if b == b'"' {
                        self.key_len = 0;
                        self.key_overlong = false;
                        self.token = Token::Str { key: true };
                    } else if b == b'}' && first {
                        self.stack.pop();
                        sink.event(Event::ObjectEnd { offset: at })
                            .map_err(FeedError::Sink)?;
                        self.value_done();
                    } else {
                        return Err(self.fail(ScanErrorKind::UnexpectedByte(b), at).into());
                    }
                    continue;
                }
                Some(Frame::ObjectColon) => {
                    if b == b':' {
                        if let Some(f) = self.stack.last_mut() {
                            *f = Frame::ObjectValue;
                        }
                        continue;
                    }
                    return Err(self.fail(ScanErrorKind::UnexpectedByte(b), at).into());
                }
                Some(Frame::ObjectNext) => {
                    match b {
                        b',' => {
                            if let Some(f) = self.stack.last_mut() {
                                *f = Frame::ObjectKey;
                            }
                        }
                        b'}' => {
                            self.stack.pop();
                            sink.event(Event::ObjectEnd { offset: at })
                                .map_err(FeedError::Sink)?;
                            self.value_done();
                        }
                        _ => {
                            return Err(self.fail(ScanErrorKind::UnexpectedByte(b), at).into());
                        }
                    }
                    continue;
                }
                Some(Frame::ArrayNext) => {
                    match b {
                        b',' => {
                            if let Some(f) = self.stack.last_mut() {
                                *f = Frame::ArrayValue;
                            }
                        }
                        b']' => {
                            self.stack.pop();
                            sink.event(Event::ArrayEnd { offset: at })
                                .map_err(FeedError::Sink)?;
                            self.value_done();
                        }
                        _ => {
                            return Err(self.fail(ScanErrorKind::UnexpectedByte(b), at).into());
                        }
                    }
                    continue;
                }
                Some(Frame::ArrayFirst) if b == b']' => {
                    self.stack.pop();
                    sink.event(Event::ArrayEnd { offset: at })
                        .map_err(FeedError::Sink)?;
                    self.value_done();
                    continue;
                }
                _ => {}
            }
            // A value is expected here.
            if !self.expects_value() {
                return Err(self.fail(ScanErrorKind::UnexpectedByte(b), at).into());
            }
            if self.stack.is_empty() {
                self.top = Top::InValue;
            }
            match b {
                b'{' | b'[' => {
                    if self.stack.len() >= self.max_depth {
                        return Err(self.fail(ScanErrorKind::TooDeep(self.max_depth), at).into());
                    }
                    if b == b'{' {
                        self.stack.push(Frame::ObjectFirst);
                        sink.event(Event::ObjectStart { offset: at })
                            .map_err(FeedError::Sink)?;
                    } else {
                        self.stack.push(Frame::ArrayFirst);
                        sink.event(Event::ArrayStart { offset: at })
                            .map_err(FeedError::Sink)?;
                    }
                }
                b'"' => {
                    self.token = Token::Str { key: false };
                    sink.event(Event::StringStart { offset: at })
                        .map_err(FeedError::Sink)?;
                }
                b'-' => {
                    self.token = Token::Number {
                        state: Num::Minus,
                        start: at,
                    }
                }
                b'0' => {
                    self.token = Token::Number {
                        state: Num::Zero,
                        start: at,
                    }
                }
                b'1'..=b'9' => {
                    self.token = Token::Number {
                        state: Num::Int,
                        start: at,
                    }
                }
                b't' => {
                    self.token = Token::Literal {
                        which: Lit::True,
                        matched: 1,
                        start: at,
                    }
                }
                b'f' => {
                    self.token = Token::Literal {
                        which: Lit::False,
                        matched: 1,
                        start: at,
                    }
                }
                b'n' => {
                    self.token = Token::Literal {
                        which: Lit::Null,
                        matched: 1,
                        start: at,
                    }
                }
                _ => {
                    return Err(self.fail(ScanErrorKind::UnexpectedByte(b), at).into());
                }
            }
        }
        Ok(())
    }

    /// Delivers decoded string text to the key buffer or the sink.
    fn emit_text<S: Sink>(
        &mut self,
        key: bool,
        text: &str,
        sink: &mut S,
    ) -> Result<(), FeedError<S::Error>> {
        if text.is_empty() {
            return Ok(());
        }
        if key {
            let bytes = text.as_bytes();
            let end = self.key_len.saturating_add(bytes.len());
            match self.key.get_mut(self.key_len..end) {
                Some(dst) if !self.key_overlong => {
                    dst.copy_from_slice(bytes);
                    self.key_len = end;
                }
                _ => self.key_overlong = true,
            }
            Ok(())
        } else {
            sink.event(Event::StringFragment(text))
                .map_err(FeedError::Sink)
        }
    }

    fn emit_char<S: Sink>(
        &mut self,
        key: bool,
        c: char,
        sink: &mut S,
    ) -> Result<(), FeedError<S::Error>> {
        let mut buf = [0u8; 4];
        let s = c.encode_utf8(&mut buf);
        self.emit_text(key, s, sink)
    }

    /// Scans string content from `chunk[i..]`; returns the index to continue at.
    fn string<S: Sink>(
        &mut self,
        chunk: &[u8],
        mut i: usize,
        key: bool,
        sink: &mut S,
    ) -> Result<usize, FeedError<S::Error>> {
        let base = self.offset;
        while i < chunk.len() {
            // Escape in progress.
            if self.esc != Esc::None {
                let Some(&b) = chunk.get(i) else { break };
                let at = base + i as u64;
                i += 1;
                self.escape_byte(b, at, key, sink)?;
                continue;
            }
            // Finish a UTF-8 sequence split over the previous chunk boundary.
            if self.utf8_len > 0 {
                let have = usize::from(self.utf8_len);
                let width = self.utf8.first().map_or(0, |&l| utf8_width(l));
                let need = width.saturating_sub(have);
                let mut taken = 0;
                while taken < need {
                    match chunk.get(i + taken) {
                        Some(&b) if (0x80..0xc0).contains(&b) => {
                            if let Some(slot) = self.utf8.get_mut(have + taken) {
                                *slot = b;
                            }
                            taken += 1;
                        }
                        Some(_) => {
                            let at = self.utf8_start;
                            return Err(self.fail(ScanErrorKind::InvalidUtf8, at).into());
                        }
                        None => break,
                    }
                }
                i += taken;
                self.utf8_len = (have + taken) as u8;
                if taken < need {
                    // Still incomplete: fail now if no ending can make it valid (a
                    // surrogate or overlong prefix such as `ED A2`), as a one-shot scan does.
                    let prefix = self.utf8.get(..have + taken).unwrap_or_default();
                    if std::str::from_utf8(prefix).is_err_and(|e| e.error_len().is_some()) {
                        let at = self.utf8_start;
                        return Err(self.fail(ScanErrorKind::InvalidUtf8, at).into());
                    }
                    return Ok(i);
                }
                let seq = self.utf8;
                let seq_len = usize::from(self.utf8_len);
                self.utf8_len = 0;
                match seq.get(..seq_len).and_then(|s| std::str::from_utf8(s).ok()) {
                    Some(t) => self.emit_text(key, t, sink)?,
                    None => {
                        let at = self.utf8_start;
                        return Err(self.fail(ScanErrorKind::InvalidUtf8, at).into());
                    }
                }
                continue;
            }
            // A run of plain bytes up to the next quote, backslash or control.
            let rest = chunk.get(i..).unwrap_or_default();
            let run_len = plain_run(rest);
            let run = rest.get(..run_len).unwrap_or_default();
            let at_chunk_end = run_len == rest.len();
            match std::str::from_utf8(run) {
                Ok(s) => self.emit_text(key, s, sink)?,
                Err(e) => {
                    let valid = e.valid_up_to();
                    if let Some(s) = run.get(..valid).and_then(|v| std::str::from_utf8(v).ok()) {
                        self.emit_text(key, s, sink)?;
                    }
                    let tail = run.get(valid..).unwrap_or_default();
                    // Only an incomplete sequence at the very end of the chunk may wait.
                    if e.error_len().is_some() || !at_chunk_end || tail.len() > 3 {
                        return Err(self
                            .fail(ScanErrorKind::InvalidUtf8, base + (i + valid) as u64)
                            .into());
                    }
                    if let Some(dst) = self.utf8.get_mut(..tail.len()) {
                        dst.copy_from_slice(tail);
                    }
                    self.utf8_len = tail.len() as u8;
                    self.utf8_start = base + (i + valid) as u64;
                }
            }
            i += run_len;
            let Some(&b) = chunk.get(i) else { break };
            let at = base + i as u64;
            i += 1;
            match b {
                b'"' => {
                    self.token = Token::None;
                    if key {
                        let name = if self.key_overlong {
                            None
                        } else {
                            self.key
                                .get(..self.key_len)
                                .and_then(|k| std::str::from_utf8(k).ok())
                        };
                        sink.event(Event::Key(name)).map_err(FeedError::Sink)?;
                        if let Some(f) = self.stack.last_mut() {
                            *f = Frame::ObjectColon;
                        }
                    } else {
                        sink.event(Event::StringEnd { end: at + 1 })
                            .map_err(FeedError::Sink)?;
                        self.value_done();
                    }
                    return Ok(i);
                }
                b'\\' => self.esc = Esc::Backslash,
                _ => return Err(self.fail(ScanErrorKind::ControlCharacter, at).into()),
            }
        }
        Ok(i)
    }

    fn escape_byte<S: Sink>(
        &mut self,
        b: u8,
        at: u64,
        key: bool,
        sink: &mut S,
    ) -> Result<(), FeedError<S::Error>> {
        match self.esc {
            Esc::None => Ok(()),
            Esc::Backslash => {
                let c = match b {
                    b'"' => '"',
                    b'\\' => '\\',
                    b'/' => '/',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'n' => '\n',
                    b'r' => '\r',
                    b't' => '\t',
                    b'u' => {
                        self.esc = Esc::Hex {
                            digits: 0,
                            value: 0,
                        };
                        return Ok(());
                    }
                    _ => return Err(self.fail(ScanErrorKind::InvalidEscape, at).into()),
                };
                self.esc = Esc::None;
                self.emit_char(key, c, sink)
            }
            Esc::Hex { digits, value } => {
                let Some(h) = hex_value(b) else {
                    return Err(self.fail(ScanErrorKind::InvalidUnicodeEscape, at).into());
                };
                let value = (value << 4) | h;
                if digits < 3 {
                    self.esc = Esc::Hex {
                        digits: digits + 1,
                        value,
                    };
                    return Ok(());
                }
                match value {
                    0xd800..=0xdbff => {
                        self.esc = Esc::LowBackslash { high: value };
                        Ok(())
                    }
                    0xdc00..=0xdfff => Err(self.fail(ScanErrorKind::LoneSurrogate, at).into()),
                    _ => {
                        self.esc = Esc::None;
                        match char::from_u32(u32::from(value)) {
                            Some(c) => self.emit_char(key, c, sink),
                            None => Err(self.fail(ScanErrorKind::InvalidUnicodeEscape, at).into()),
                        }
                    }
                }
            }
            Esc::LowBackslash { high } => {
                if b == b'\\' {
                    self.esc = Esc::LowU { high };
                    Ok(())
                } else {
                    Err(self.fail(ScanErrorKind::LoneSurrogate, at).into())
                }
            }
            Esc::LowU { high } => {
                if b == b'u' {
                    self.esc = Esc::LowHex {
                        high,
                        digits: 0,
                        value: 0,
                    };
                    Ok(())
                } else {
                    Err(self.fail(ScanErrorKind::LoneSurrogate, at).into())
                }
            }
            Esc::LowHex {
                high,
                digits,
                value,
            } => {
                let Some(h) = hex_value(b) else {
                    return Err(self.fail(ScanErrorKind::InvalidUnicodeEscape, at).into());
                };
                let value = (value << 4) | h;
                if digits < 3 {
                    self.esc = Esc::LowHex {
                        high,
                        digits: digits + 1,
                        value,
                    };
                    return Ok(());
                }
                if !(0xdc00..=0xdfff).contains(&value) {
                    return Err(self.fail(ScanErrorKind::LoneSurrogate, at).into());
                }
                self.esc = Esc::None;
                let cp = 0x10000 + ((u32::from(high) - 0xd800) << 10) + (u32::from(value) - 0xdc00);
                match char::from_u32(cp) {
                    Some(c) => self.emit_char(key, c, sink),
                    None => Err(self.fail(ScanErrorKind::LoneSurrogate, at).into()),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
