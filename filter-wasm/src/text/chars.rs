//! Character classes as the encoder's tokenizer sees them (letters, digits, punctuation,
//! marks, ideographs), accent folding to ASCII, eight-byte letter and digit blocks, and
//! the character reader ([`read_chars`]) that feeds every scanner of a sentence in one pass.

use super::*;

/// How the BERT basic tokenizer treats a character.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CharClass {
    /// Whitespace: separates words, costs nothing.
    Space,
    /// Removed by the normalizer (controls, format characters, combining marks): joins the
    /// surrounding characters into one word, costs nothing.
    Zero,
    /// Punctuation: always one token of its own.
    Punct,
    /// CJK ideograph: always one token of its own.
    Ideograph,
    /// Latin letter (ASCII or accented; accents are stripped).
    Latin,
    /// ASCII digit.
    Digit,
    /// A letter of a no-space script (kana, Thai, Lao, Khmer, Myanmar): part of a word; for
    /// scoring, terms are its characters and their bigrams.
    NoSpaceLetter,
    /// Outside the vocabulary: the whole word becomes one `[UNK]`.
    Unknown,
    /// Any other word character, with its expected cost in centi-tokens.
    Other(u32),
}

/// The ASCII letters at the start of at most 8 bytes of text, read as one 64-bit word
/// (SWAR: most words are read without a branch per letter). See [`letter_block`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LetterBlock {
    /// Letters in the run, 0 to 8; 8 when the run may go on past the block.
    pub len: usize,
    /// The run's letters in lowercase, little-endian (byte `k` is letter `k`); the bytes
    /// past the run are zero.
    pub lower: u64,
    /// How many of the run's letters are uppercase.
    pub upper: u32,
}

impl LetterBlock {
    /// The run's letters in lowercase.
    #[inline]
    pub(crate) fn lower_bytes(&self) -> [u8; 8] {
        self.lower.to_le_bytes()
    }
}

/// High bit of each byte of a 64-bit word.
pub(super) const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The first 8 bytes of `rest` as a little-endian word, zero past its end.
#[inline]
pub(super) fn load8(rest: &[u8]) -> u64 {
    if let Some(head) = rest.first_chunk::<8>() {
        return u64::from_le_bytes(*head);
    }
    let mut b = [0u8; 8];
    for (d, s) in b.iter_mut().zip(rest) {
        *d = *s;
    }
    u64::from_le_bytes(b)
}

/// The high bit of each byte of `x` that is an ASCII letter (per byte, without carries
/// between bytes: folded to lowercase, where only letters land in `a..=z`, then `a <= t`
/// and `t <= z` as the high bit of a sum and of a difference of 7-bit values; bytes with
/// the high bit set are not ASCII).
#[inline]
pub(super) fn letter_bits(x: u64) -> u64 {
    let t = (x | 0x2020_2020_2020_2020) & !HIGH_BITS;
    let ge_a = t.wrapping_add(0x1f1f_1f1f_1f1f_1f1f);
    let le_z = 0xfafa_fafa_fafa_fafa_u64.wrapping_sub(t);
    ge_a & le_z & !x & HIGH_BITS
}

/// The high bit of each byte of `x` that is an ASCII digit (as in [`letter_bits`]).
#[inline]
pub(super) fn digit_bits(x: u64) -> u64 {
    let t = x & !HIGH_BITS;
    let ge_0 = t.wrapping_add(0x5050_5050_5050_5050);
    let le_9 = 0xb9b9_b9b9_b9b9_b9b9_u64.wrapping_sub(t);
    ge_0 & le_9 & !x & HIGH_BITS
}

/// The length (0 to 8) of the leading run of bytes whose high bit is set in `bits`, and the
/// mask of that run's bytes.
#[inline]
pub(super) fn leading_run(bits: u64) -> (usize, u64) {
    let stop = !bits & HIGH_BITS;
    match (stop.trailing_zeros() / 8) as usize {
        n @ 0..=7 => (n, (1u64 << (8 * n)) - 1),
        _ => (8, u64::MAX),
    }
}

/// The run of ASCII letters at the start of `rest`, up to 8 of them (the same letters as
/// [`u8::is_ascii_alphabetic`] finds, in one pass over a 64-bit word).
#[inline]
pub(crate) fn letter_block(rest: &[u8]) -> LetterBlock {
    let x = load8(rest);
    let (len, run) = leading_run(letter_bits(x));
    let letters = letter_bits(x) & run;
    let lower = (x | (letters >> 2)) & run;
    let upper = (letters & !((x & 0x2020_2020_2020_2020) << 2)).count_ones();
    LetterBlock { len, lower, upper }
}

/// The run of ASCII letters and digits at the start of `rest`, up to 8 of them (the bytes
/// [`u8::is_ascii_alphanumeric`] accepts), as a [`LetterBlock`]: `lower` holds the run
/// with its letters in lowercase; `upper` is not counted (0).
#[inline]
pub(crate) fn alphanumeric_block(rest: &[u8]) -> LetterBlock {
    let x = load8(rest);
    let letters = letter_bits(x);
    let (len, run) = leading_run(letters | digit_bits(x));
    let lower = (x | ((letters & run) >> 2)) & run;
    LetterBlock {
        len,
        lower,
        upper: 0,
    }
}

/// The character at byte `at` of `text`, whose first byte is `first` (decoded only when it
/// is not ASCII); `None` when `at` is not a character boundary.
#[inline]
pub(crate) fn char_at(text: &str, at: usize, first: u8) -> Option<char> {
    if first.is_ascii() {
        Some(char::from(first))
    } else {
        text.get(at..).and_then(|rest| rest.chars().next())
    }
}

/// Class of an ASCII byte.
#[inline(always)]
pub(super) const fn ascii_class(b: u8) -> CharClass {
    match b {
        b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C => CharClass::Space,
        b'0'..=b'9' => CharClass::Digit,
        b'a'..=b'z' | b'A'..=b'Z' => CharClass::Latin,
        0x00..=0x1F | 0x7F => CharClass::Zero,
        _ => CharClass::Punct,
    }
}

/// Classifies one character; see [`CharClass`].
#[inline(always)]
pub(crate) fn classify(c: char) -> CharClass {
    if c.is_ascii() {
        ascii_class(c as u8)
    } else {
        classify_non_ascii(c)
    }
}

pub(super) fn classify_non_ascii(c: char) -> CharClass {
    let u = c as u32;
    if c.is_whitespace() {
        return CharClass::Space;
    }
    match u {
        0x80..=0x9F | 0xAD | 0x034F | 0x061C | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E => {
            CharClass::Zero
        }
        0x2060..=0x206F | 0xFEFF | 0xFFF9..=0xFFFD | 0xFE00..=0xFE0F | 0xE0000..=0xE007F => {
            CharClass::Zero
        }
        0xC0..=0x24F if u != 0xD7 && u != 0xF7 => CharClass::Latin,
        0x1E00..=0x1EFF => CharClass::Latin,
        _ if is_mark(u) => CharClass::Zero,
        _ if is_punct(u) => CharClass::Punct,
        _ if is_ideograph(u) => CharClass::Ideograph,
        0x3040..=0x30FF | 0x31F0..=0x31FF | 0xFF66..=0xFF9F => CharClass::NoSpaceLetter,
        0x0E00..=0x0EFF | 0x1000..=0x109F | 0x1780..=0x17FF => CharClass::NoSpaceLetter,
        0xAC00..=0xD7A3 => CharClass::Other(HANGUL_SYLLABLE_CENTI),
        0x2600..=0x27BF | 0x1F000..=0x1FAFF | 0xE000..=0xF8FF | 0xF0000..=0x10FFFF => {
            CharClass::Unknown
        }
        0x2460..=0x24FF => CharClass::Unknown,
        _ => CharClass::Other(CENTI),
    }
}

/// Combining marks (Unicode category Mn) that the accent stripping removes, by range.
pub(super) fn is_mark(u: u32) -> bool {
    match u {
        0x0300..=0x036F | 0x0483..=0x0489 | 0x0591..=0x05BD | 0x05BF | 0x05C1 | 0x05C2 => true,
        0x05C4 | 0x05C5 | 0x05C7 | 0x0610..=0x061A | 0x064B..=0x065F | 0x0670 => true,
        0x06D6..=0x06DC | 0x06DF..=0x06E4 | 0x06E7 | 0x06E8 | 0x06EA..=0x06ED => true,
        0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F => true,
        0x3099 | 0x309A | 0x0E31 | 0x0E34..=0x0E3A | 0x0E47..=0x0E4E => true,
        // Brahmic scripts (Devanagari .. Sinhala) share one layout per 128-code-point block:
        // signs at 0x00-0x02, nukta at 0x3C, dependent vowels at 0x41-0x48, virama at 0x4D.
        0x0900..=0x0DFF => {
            let off = (u - 0x0900) % 0x80;
            off <= 0x02
                || off == 0x3C
                || (0x41..=0x48).contains(&off)
                || off == 0x4D
                || (0x51..=0x57).contains(&off)
                || (0x62..=0x63).contains(&off)
        }
        _ => false,
    }
}

/// Non-ASCII punctuation (Unicode category P*), by range.
pub(super) fn is_punct(u: u32) -> bool {
    matches!(
        u,
        0xA1 | 0xA7
            | 0xAB
            | 0xB6
            | 0xB7
            | 0xBB
            | 0xBF
            | 0x037E
            | 0x0387
            | 0x055A..=0x055F
            | 0x0589
            | 0x058A
            | 0x05BE
            | 0x05C0
            | 0x05C3
            | 0x05C6
            | 0x05F3
            | 0x05F4
            | 0x0609
            | 0x060A
            | 0x060C
            | 0x060D
            | 0x061B
            | 0x061D..=0x061F
            | 0x066A..=0x066D
            | 0x06D4
            | 0x0964
            | 0x0965
            | 0x0970
            | 0x0E4F
            | 0x0E5A
            | 0x0E5B
            | 0x104A..=0x104F
            | 0x10FB
            | 0x1360..=0x1368
            | 0x166E
            | 0x17D4..=0x17D6
            | 0x17D8..=0x17DA
            | 0x2010..=0x2027
            | 0x2030..=0x2043
            | 0x2045..=0x2051
            | 0x2053..=0x205E
            | 0x207D
            | 0x207E
            | 0x208D
            | 0x208E
            | 0x2308..=0x230B
            | 0x2329
            | 0x232A
            | 0x2768..=0x2775
            | 0x27C5
            | 0x27C6
            | 0x27E6..=0x27EF
            | 0x2983..=0x2998
            | 0x29D8..=0x29DB
            | 0x29FC
            | 0x29FD
            | 0x2CF9..=0x2CFC
            | 0x2CFE
            | 0x2CFF
            | 0x2E00..=0x2E4F
            | 0x3001..=0x3003
            | 0x3008..=0x3011
            | 0x3014..=0x301F
            | 0x3030
            | 0x303D
            | 0x30A0
            | 0x30FB
            | 0xFE10..=0xFE19
            | 0xFE30..=0xFE52
            | 0xFE54..=0xFE61
            | 0xFE63
            | 0xFE68
            | 0xFE6A
            | 0xFE6B
            | 0xFF01..=0xFF03
            | 0xFF05..=0xFF0A
            | 0xFF0C..=0xFF0F
            | 0xFF1A
            | 0xFF1B
            | 0xFF1F
            | 0xFF20
            | 0xFF3B..=0xFF3D
            | 0xFF3F
            | 0xFF5B
            | 0xFF5D
            | 0xFF5F..=0xFF65
    )
}

/// CJK ideographs as the BERT pre-tokenizer defines them (each is a token of its own).
pub(crate) fn is_ideograph(u: u32) -> bool {
    matches!(
        u,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

/// Folds a Latin letter to lowercase ASCII where it has an obvious base letter.
#[inline(always)]
pub(crate) fn fold_latin(c: char) -> Option<u8> {
    if c.is_ascii() {
        return c
            .is_ascii_alphabetic()
            .then_some(c.to_ascii_lowercase() as u8);
    }
    fold_non_ascii(c)
}

pub(super) fn fold_non_ascii(c: char) -> Option<u8> {
    let u = c as u32;
    let b = match u {
        0xC0..=0xC5 | 0xE0..=0xE5 | 0x100..=0x105 => b'a',
        0xC7 | 0xE7 | 0x106..=0x10D => b'c',
        0xD0 | 0xF0 | 0x10E..=0x111 => b'd',
        0xC8..=0xCB | 0xE8..=0xEB | 0x112..=0x11B => b'e',
        0x11C..=0x123 => b'g',
        0x124..=0x127 => b'h',
        0xCC..=0xCF | 0xEC..=0xEF | 0x128..=0x131 => b'i',
        0x134 | 0x135 => b'j',
        0x136..=0x138 => b'k',
        0x139..=0x142 => b'l',
        0xD1 | 0xF1 | 0x143..=0x14B => b'n',
        0xD2..=0xD6 | 0xD8 | 0xF2..=0xF6 | 0xF8 | 0x14C..=0x151 => b'o',
        0x154..=0x159 => b'r',
        0xDF | 0x15A..=0x161 => b's',
        0x162..=0x167 => b't',
        0xD9..=0xDC | 0xF9..=0xFC | 0x168..=0x173 => b'u',
        0x174 | 0x175 => b'w',
        0xDD | 0xFD | 0xFF | 0x176..=0x178 => b'y',
        0x179..=0x17E => b'z',
        _ => return None,
    };
    Some(b)
}

/// A reader of text in one pass of [`read_chars`], which decodes each character once for
/// all the readers of a sentence.
pub(crate) trait CharSink {
    /// 1 to 8 ASCII letters in a row, as a [`letter_block`] and as written (`raw`); a run
    /// of more comes in several blocks.
    fn letters(&mut self, block: &LetterBlock, raw: &[u8]);
    /// An ASCII space.
    fn space(&mut self);
    /// Any other character.
    fn char(&mut self, c: char);
    /// A line break written as an escape, a backslash then `n` (text pasted from a JSON
    /// string or a log). By default the two characters as written.
    fn escaped_newline(&mut self) {
        self.char('\\');
        self.char('n');
    }
}

impl<A: CharSink, B: CharSink> CharSink for (A, B) {
    #[inline]
    fn letters(&mut self, block: &LetterBlock, raw: &[u8]) {
        self.0.letters(block, raw);
        self.1.letters(block, raw);
    }
    #[inline]
    fn space(&mut self) {
        self.0.space();
        self.1.space();
    }
    #[inline]
    fn char(&mut self, c: char) {
        self.0.char(c);
        self.1.char(c);
    }
    #[inline]
    fn escaped_newline(&mut self) {
        self.0.escaped_newline();
        self.1.escaped_newline();
    }
}

/// Reads `text` into `sink`: ASCII letters in blocks of up to 8, ASCII spaces, a backslash
/// followed by `n` as an escaped line break, every other character one by one.
#[inline]
pub(crate) fn read_chars<S: CharSink>(text: &str, sink: &mut S) {
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b.is_ascii_alphabetic() {
            loop {
                let rest = bytes.get(i..).unwrap_or_default();
                let block = letter_block(rest);
                if block.len == 0 {
                    break;
                }
                sink.letters(&block, rest.get(..block.len).unwrap_or_default());
                i += block.len;
                if block.len < 8 {
                    break;
                }
            }
            continue;
        }
        if b == b' ' {
            sink.space();
            i += 1;
            continue;
        }
        if b == b'\\' && bytes.get(i + 1) == Some(&b'n') {
            sink.escaped_newline();
            i += 2;
            continue;
        }
        let Some(c) = char_at(text, i, b) else {
            break;
        };
        sink.char(c);
        i += c.len_utf8();
    }
}
