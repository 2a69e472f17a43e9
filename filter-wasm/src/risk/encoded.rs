//! Encoded payloads: base64-like and hexadecimal runs and runs of escapes, with the
//! per-text byte summary the pattern scans share.

use super::*;

// ---------------------------------------------------------------- encoded payloads

/// Minimum length of a base64-like run.
pub(super) const BASE64_MIN: usize = 40;
/// Minimum length of a hexadecimal run.
pub(super) const HEX_MIN: usize = 32;
/// Minimum number of escape sequences (and of escaped line breaks in a row).
pub(super) const ESCAPES_MIN: u32 = 8;

/// Encoded-payload detector only.
pub fn scan_encoded(text: &str) -> RiskFlags {
    encoded(text, ByteSummary::of(text.as_bytes()))
}

/// [`scan_encoded`], with the [`ByteSummary`] of `text`.
pub(super) fn encoded(text: &str, bytes: ByteSummary) -> RiskFlags {
    let b = text.as_bytes();
    // Nothing to find without a base64-like run long enough to be examined or a byte that
    // can start an escape sequence: most sentences of prose.
    if b.len() < ESCAPES_MIN as usize * 3 && b.len() < HEX_MIN
        || !bytes.long_b64_run && !bytes.has(ByteSummary::ESCAPE)
    {
        return RiskFlags::empty();
    }
    let mut i = 0;
    let mut escapes = 0u32;
    // Escaped line breaks and tabs in a row (`\n\n\n…`, whitespace between allowed): padding
    // that sets the instruction after it apart from the text before, a prompt-injection
    // layout. Scattered ones (strings in code) do not count.
    let mut breaks = 0u32;
    let mut breaks_end = 0usize;
    while i < b.len() {
        let x = at(b, i);
        if x == b'\\' && matches!(b.get(i + 1), Some(b'n' | b'r' | b't')) {
            let joined = breaks > 0
                && b.get(breaks_end..i)
                    .is_some_and(|gap| gap.iter().all(|c| c.is_ascii_whitespace()));
            breaks = if joined { breaks + 1 } else { 1 };
            breaks_end = i + 2;
            if breaks >= ESCAPES_MIN {
                return RiskFlags::ENCODED;
            }
            i += 2;
            continue;
        }
        if is_b64(x) {
            let s = i;
            i += b
                .get(s..)
                .unwrap_or_default()
                .iter()
                .position(|&y| !is_b64(y))
                .unwrap_or(b.len() - s);
            let run_end = i;
            while at(b, i) == b'=' {
                i += 1;
            }
            let run = b.get(s..run_end).unwrap_or_default();
            if run.len() >= HEX_MIN.min(BASE64_MIN) && encoded_run(run, i - s) {
                return RiskFlags::ENCODED;
            }
            continue;
        }
        // Escape sequences: \xHH, \uHHHH, %HH, &#NN;
        let esc = match x {
            b'\\' => match b.get(i + 1) {
                Some(b'x') if hex_at(b, i + 2, 2) => 4,
                Some(b'u') if hex_at(b, i + 2, 4) => 6,
                _ => 0,
            },
            b'%' if hex_at(b, i + 1, 2) => 3,
            b'&' if b.get(i + 1) == Some(&b'#') => {
                let mut j = i + 2;
                while j < b.len() && j - i < 9 && at(b, j).is_ascii_alphanumeric() {
                    j += 1;
                }
                if j > i + 2 && b.get(j) == Some(&b';') {
                    j + 1 - i
                } else {
                    0
                }
            }
            _ => 0,
        };
        if esc > 0 {
            escapes += 1;
            if escapes >= ESCAPES_MIN {
                return RiskFlags::ENCODED;
            }
            i += esc;
        } else {
            i += 1;
        }
    }
    RiskFlags::empty()
}

/// Whether a run of base64 alphabet characters (`len` counts its `=` padding) looks like
/// an encoded payload: hexadecimal of at least [`HEX_MIN`] digits mixing letters and
/// digits, or at least [`BASE64_MIN`] characters changing between upper case, lower case
/// and digits at least once every four characters (separators are transparent, so file
/// paths and identifiers do not qualify).
pub(super) fn encoded_run(run: &[u8], len: usize) -> bool {
    let mut transitions = 0usize;
    let mut hex = true;
    let mut has_digit = false;
    let mut has_alpha = false;
    let mut prev = 3u8;
    for &x in run {
        let c = class64(x);
        if c != 3 && c != prev {
            if prev != 3 {
                transitions += 1;
            }
            prev = c;
        }
        hex &= x.is_ascii_hexdigit();
        has_digit |= x.is_ascii_digit();
        has_alpha |= x.is_ascii_alphabetic();
    }
    (hex && len >= HEX_MIN && has_digit && has_alpha)
        || (len >= BASE64_MIN && transitions * 4 >= len)
}

/// Bytes of the base64 alphabets (standard and URL-safe), as a table: the scan tests every
/// byte of user text.
#[allow(clippy::indexing_slicing)] // `i < 256`, the table's length; `get_mut` is not const.
pub(super) const B64_ALPHABET: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        let x = i as u8;
        t[i] = x.is_ascii_alphanumeric() || matches!(x, b'+' | b'/' | b'-' | b'_');
        i += 1;
    }
    t
};

/// The byte classes of a sentence that the pattern and encoded-payload scanners start
/// from, found in one pass (a table lookup per byte, no branch).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ByteSummary {
    /// The union of the classes ([`ByteSummary::DIGIT`], ...) of the bytes.
    pub(super) classes: u8,
    /// Holds a base64-like run ([`B64_ALPHABET`]) long enough for [`encoded_run`].
    pub(super) long_b64_run: bool,
}

impl ByteSummary {
    pub(super) const DIGIT: u8 = 1;
    pub(super) const AT: u8 = 1 << 1;
    pub(super) const COLON: u8 = 1 << 2;
    /// `[`, `(`, `{` or `<`.
    pub(super) const BRACKET: u8 = 1 << 3;
    /// A byte that can start an escape sequence: `\`, `%` or `&`.
    pub(super) const ESCAPE: u8 = 1 << 4;
    pub(super) const B64: u8 = 1 << 5;
    /// A byte of a non-ASCII character, or an ASCII control other than whitespace: the
    /// text may hold what the patterns read only in [`pattern_view`](super::pattern_view).
    pub(super) const UNUSUAL: u8 = 1 << 6;

    /// The classes of every byte value.
    #[allow(clippy::indexing_slicing)] // `i < 256`, the tables' length; `get_mut` is not const.
    pub(super) const TABLE: [u8; 256] = {
        let mut t = [0u8; 256];
        let mut i = 0;
        while i < 256 {
            let x = i as u8;
            if x.is_ascii_digit() {
                t[i] |= Self::DIGIT;
            }
            match x {
                b'@' => t[i] |= Self::AT,
                b':' => t[i] |= Self::COLON,
                b'[' | b'(' | b'{' | b'<' => t[i] |= Self::BRACKET,
                b'\\' | b'%' | b'&' => t[i] |= Self::ESCAPE,
                _ => {}
            }
            if B64_ALPHABET[i] {
                t[i] |= Self::B64;
            }
            if x >= 0x80
                || x == 0x7F
                || (x < 0x20 && !matches!(x, b'\t' | b'\n' | b'\r' | 0x0B | 0x0C))
            {
                t[i] |= Self::UNUSUAL;
            }
            i += 1;
        }
        t
    };

    pub(super) fn of(b: &[u8]) -> ByteSummary {
        let mut scan = ByteScan::default();
        for &x in b {
            scan.byte(x);
        }
        scan.summary()
    }

    pub(super) fn has(self, class: u8) -> bool {
        self.classes & class != 0
    }
}

/// A [`ByteSummary`] being found: byte by byte ([`ByteSummary::of`]) or as a [`CharSink`]
/// in a pass shared with other readers.
#[derive(Debug, Default)]
pub(crate) struct ByteScan {
    classes: u8,
    /// Base64-like bytes in a row so far.
    run: u32,
    long: bool,
}

impl ByteScan {
    /// The shortest run [`encoded_run`] examines.
    pub(super) const MIN_RUN: u32 = if HEX_MIN < BASE64_MIN {
        HEX_MIN as u32
    } else {
        BASE64_MIN as u32
    };

    #[inline]
    pub(super) fn byte(&mut self, x: u8) {
        let c = ByteSummary::TABLE.get(usize::from(x)).copied().unwrap_or(0);
        self.classes |= c;
        self.run = self.run.saturating_add(1) * u32::from(c & ByteSummary::B64 != 0);
        self.long |= self.run >= Self::MIN_RUN;
    }

    pub(crate) fn summary(&self) -> ByteSummary {
        ByteSummary {
            classes: self.classes,
            long_b64_run: self.long,
        }
    }
}

impl CharSink for ByteScan {
    /// Letters are base64-like and of no other class.
    #[inline]
    fn letters(&mut self, block: &LetterBlock, _raw: &[u8]) {
        if block.len > 0 {
            self.classes |= ByteSummary::B64;
            self.run = self.run.saturating_add(block.len as u32);
            self.long |= self.run >= Self::MIN_RUN;
        }
    }
    #[inline]
    fn space(&mut self) {
        self.byte(b' ');
    }
    /// A character outside ASCII is bytes of [`ByteSummary::UNUSUAL`] alone.
    #[inline]
    fn char(&mut self, c: char) {
        if c.is_ascii() {
            self.byte(c as u8);
        } else {
            self.classes |= ByteSummary::UNUSUAL;
            self.run = 0;
        }
    }
    fn escaped_newline(&mut self) {
        self.byte(b'\\');
        self.byte(b'n');
    }
}

#[inline]
pub(super) fn is_b64(x: u8) -> bool {
    B64_ALPHABET.get(usize::from(x)).copied().unwrap_or(false)
}

pub(super) fn class64(x: u8) -> u8 {
    if x.is_ascii_uppercase() {
        0
    } else if x.is_ascii_lowercase() {
        1
    } else if x.is_ascii_digit() {
        2
    } else {
        3
    }
}

pub(super) fn hex_at(b: &[u8], i: usize, n: usize) -> bool {
    b.get(i..i + n)
        .is_some_and(|s| s.iter().all(u8::is_ascii_hexdigit))
}
