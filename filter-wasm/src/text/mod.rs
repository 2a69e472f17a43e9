//! Character classes, the WordPiece token estimator and the scoring terms of a sentence.
//!
//! The estimator mirrors what the daemon's encoder tokenizer does (a BERT WordPiece
//! tokenizer, MiniLM uncased, `max_input_chars_per_word` 100):
//!
//! 1. the normalizer lowercases, strips accents (combining marks vanish) and drops control
//!    and format characters;
//! 2. the pre-tokenizer splits on whitespace, makes every punctuation character its own
//!    token and every CJK ideograph its own token;
//! 3. WordPiece splits each remaining word into vocabulary pieces, or maps the whole word to
//!    `[UNK]` (one token) when it is longer than 100 characters or holds a character that is
//!    not in the vocabulary (emoji, Thai, ...).
//!
//! Steps 1 and 2 are reproduced exactly (up to the Unicode tables, which are approximated by
//! ranges); step 3 is estimated per word from its runs of Latin letters and digits, with
//! per-length piece counts measured by running the real MiniLM tokenizer over about 14,000
//! English prompts (MMLU-Pro questions, jailbreak and PII evaluation prompts), 400 Rust
//! source files and 200 README files. On held-out texts the mean absolute error of a whole
//! text's estimate is about 10% for one-line questions, 6% for source files and 4% for
//! Markdown; on long prompts (7K-32K tokens) it stays within 4%. The estimate of compressed
//! code runs low (the real count up to about 13% higher), because selection favours
//! sentences with rare identifiers, which split into more pieces than their length suggests; the
//! daemon-fed calibration ratio (`TokenCalibration`) learns exactly that bias, since it is
//! measured on the text that was sent. Costs are kept in hundredths of a token
//! ("centi-tokens") so that sums stay exact.

use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

pub mod lexicon;
pub mod segment;

use lexicon::WordTable;

/// Centi-tokens per token.
pub(crate) const CENTI: u32 = 100;

/// WordPiece maps words longer than this (in characters) to a single `[UNK]`.
const MAX_WORD_CHARS: u32 = 100;

/// Expected pieces (centi-tokens) of a lowercase Latin-letter run of length 1..=24 at the
/// start of a word, measured on the calibration corpus described in the module docs.
const LATIN_RUN_CENTI: [u32; 25] = [
    0, 100, 106, 112, 112, 115, 121, 121, 128, 139, 157, 180, 190, 224, 262, 351, 450, 520, 540,
    550, 560, 644, 659, 696, 720,
];

/// Expected pieces (centi-tokens) of a digit run of length 1..=4; longer runs cost about one
/// piece per 1.7 digits.
const DIGIT_RUN_CENTI: [u32; 5] = [0, 100, 100, 114, 155];

/// A Latin or digit run that continues a word is made of `##` pieces, which are about 15%
/// shorter than word-initial pieces.
const CONTINUATION_PERCENT: u32 = 115;

/// Pieces per Hangul syllable: the normalizer decomposes it into 2 or 3 jamo.
const HANGUL_SYLLABLE_CENTI: u32 = 240;

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
const HIGH_BITS: u64 = 0x8080_8080_8080_8080;

/// The first 8 bytes of `rest` as a little-endian word, zero past its end.
#[inline]
fn load8(rest: &[u8]) -> u64 {
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
fn letter_bits(x: u64) -> u64 {
    let t = (x | 0x2020_2020_2020_2020) & !HIGH_BITS;
    let ge_a = t.wrapping_add(0x1f1f_1f1f_1f1f_1f1f);
    let le_z = 0xfafa_fafa_fafa_fafa_u64.wrapping_sub(t);
    ge_a & le_z & !x & HIGH_BITS
}

/// The high bit of each byte of `x` that is an ASCII digit (as in [`letter_bits`]).
#[inline]
fn digit_bits(x: u64) -> u64 {
    let t = x & !HIGH_BITS;
    let ge_0 = t.wrapping_add(0x5050_5050_5050_5050);
    let le_9 = 0xb9b9_b9b9_b9b9_b9b9_u64.wrapping_sub(t);
    ge_0 & le_9 & !x & HIGH_BITS
}

/// The length (0 to 8) of the leading run of bytes whose high bit is set in `bits`, and the
/// mask of that run's bytes.
#[inline]
fn leading_run(bits: u64) -> (usize, u64) {
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
const fn ascii_class(b: u8) -> CharClass {
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

fn classify_non_ascii(c: char) -> CharClass {
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
fn is_mark(u: u32) -> bool {
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
fn is_punct(u: u32) -> bool {
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

/// Expected centi-tokens of a run of `len` Latin letters.
fn latin_run_centi(len: u32, continuation: bool) -> u32 {
    let base = match LATIN_RUN_CENTI.get(len as usize) {
        Some(&v) => v,
        // Beyond 24 letters words are rare, technical or random: about 3.2 letters a piece.
        None => len.saturating_mul(CENTI * 10) / 32,
    };
    if continuation {
        base * CONTINUATION_PERCENT / 100
    } else {
        base
    }
}

/// Expected centi-tokens of a run of `len` digits.
fn digit_run_centi(len: u32, continuation: bool) -> u32 {
    let base = match DIGIT_RUN_CENTI.get(len as usize) {
        Some(&v) => v,
        None => len.saturating_mul(CENTI * 10) / 17,
    };
    if continuation {
        base * CONTINUATION_PERCENT / 100
    } else {
        base
    }
}

/// Incremental cost of one word (a run of characters between whitespace and punctuation).
#[derive(Default)]
struct WordCost {
    chars: u32,
    run_len: u32,
    run_is_digit: bool,
    runs: u32,
    acc: u32,
    unknown: bool,
}

impl WordCost {
    fn flush_run(&mut self) {
        if self.run_len > 0 {
            let cont = self.runs > 0;
            let c = if self.run_is_digit {
                digit_run_centi(self.run_len, cont)
            } else {
                latin_run_centi(self.run_len, cont)
            };
            self.acc = self.acc.saturating_add(c);
            self.runs += 1;
            self.run_len = 0;
        }
    }

    #[inline]
    fn push(&mut self, class: CharClass) {
        match class {
            CharClass::Latin | CharClass::Digit => {
                let digit = class == CharClass::Digit;
                if self.run_len > 0 && self.run_is_digit != digit {
                    self.flush_run();
                }
                self.run_is_digit = digit;
                self.run_len += 1;
                self.chars += 1;
            }
            CharClass::Unknown => {
                self.unknown = true;
                self.chars += 1;
            }
            CharClass::NoSpaceLetter => {
                self.flush_run();
                self.acc = self.acc.saturating_add(CENTI);
                self.runs += 1;
                self.chars += 1;
            }
            CharClass::Other(cost) => {
                self.flush_run();
                self.acc = self.acc.saturating_add(cost);
                self.runs += 1;
                self.chars += 1;
            }
            CharClass::Zero | CharClass::Space | CharClass::Punct | CharClass::Ideograph => {}
        }
    }

    /// `n` Latin letters in a row: the same as `n` calls of `push(CharClass::Latin)`.
    #[inline]
    fn push_latin_run(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        if self.run_len > 0 && self.run_is_digit {
            self.flush_run();
        }
        self.run_is_digit = false;
        self.run_len = self.run_len.saturating_add(n);
        self.chars = self.chars.saturating_add(n);
    }

    /// Ends the word and returns its cost; resets the state.
    fn take(&mut self) -> u32 {
        self.flush_run();
        if self.runs >= 3 {
            // Many letter/digit alternations (hashes, random identifiers): WordPiece falls
            // back to pieces of about 1.37 characters, fewer than one per run.
            self.acc = self.acc.min(self.chars.saturating_mul(73));
        }
        let cost = if self.chars == 0 {
            0
        } else if self.unknown || self.chars > MAX_WORD_CHARS {
            CENTI
        } else {
            self.acc.max(CENTI)
        };
        *self = WordCost::default();
        cost
    }
}

/// Estimated encoder tokens of `text` in centi-tokens (hundredths of a token), without the
/// encoder's special tokens. Linear in the length of `text`; never panics.
pub(crate) fn estimate_centi(text: &str) -> u32 {
    let mut word = WordCost::default();
    let mut total: u32 = 0;
    for c in text.chars() {
        let class = classify(c);
        match class {
            CharClass::Space => total = total.saturating_add(word.take()),
            CharClass::Punct | CharClass::Ideograph => {
                total = total.saturating_add(word.take()).saturating_add(CENTI);
            }
            _ => word.push(class),
        }
    }
    total.saturating_add(word.take())
}

/// Converts centi-tokens to tokens under a calibration ratio (rounding up).
pub(crate) fn centi_to_tokens(centi: u64, ratio: f32) -> u32 {
    let t = (centi as f64) * f64::from(ratio) / f64::from(CENTI);
    if !t.is_finite() || t <= 0.0 {
        return 0;
    }
    let t = t.ceil();
    if t >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        t as u32
    }
}

/// The largest centi-token sum whose [`centi_to_tokens`] is at most `tokens`.
pub(crate) fn tokens_to_centi_floor(tokens: u32, ratio: f32) -> u64 {
    let r = f64::from(ratio);
    if !r.is_finite() || r <= 0.0 {
        return 0;
    }
    let mut c = (f64::from(tokens) * f64::from(CENTI) / r).floor();
    if !c.is_finite() || c < 0.0 {
        c = 0.0;
    }
    let mut c = c.min(u64::MAX as f64 / 2.0) as u64;
    // Float rounding may put `c` one step over the limit.
    while c > 0 && centi_to_tokens(c, ratio) > tokens {
        c -= 1;
    }
    c
}

/// 64-bit FNV-1a, used to hash terms and sentence fingerprints.
#[derive(Clone, Copy)]
pub(crate) struct Fnv(u64);

impl Fnv {
    pub(crate) const fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    #[inline]
    pub(crate) fn byte(&mut self, b: u8) {
        self.0 ^= u64::from(b);
        self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
    }
    pub(crate) fn bytes(&mut self, bs: &[u8]) {
        for &b in bs {
            self.byte(b);
        }
    }
    #[inline]
    pub(crate) fn char(&mut self, c: char) {
        if c.is_ascii() {
            return self.byte(c as u8);
        }
        let mut buf = [0u8; 4];
        self.bytes(c.encode_utf8(&mut buf).as_bytes());
    }
    pub(crate) fn finish(self) -> u64 {
        // Final avalanche so that low bits are usable as hash-table buckets.
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }
}

/// Hasher for keys that are already well-mixed 64-bit hashes.
#[derive(Default)]
pub(crate) struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = Fnv::new();
        h.bytes(bytes);
        self.0 = h.finish();
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// `HashMap` builder for pre-hashed `u64` keys.
pub(crate) type PreHashedBuild = BuildHasherDefault<PreHashed>;

/// English function words that carry no topic (skipped as scoring terms).
const STOPWORDS: &[&[u8]] = &[
    b"about", b"above", b"after", b"again", b"all", b"also", b"am", b"an", b"and", b"any", b"are",
    b"as", b"at", b"be", b"been", b"before", b"being", b"below", b"between", b"both", b"but",
    b"by", b"can", b"could", b"did", b"do", b"does", b"doing", b"down", b"during", b"each", b"few",
    b"for", b"from", b"further", b"had", b"has", b"have", b"having", b"he", b"her", b"here",
    b"hers", b"him", b"his", b"how", b"if", b"in", b"into", b"is", b"it", b"its", b"just", b"me",
    b"more", b"most", b"my", b"no", b"nor", b"not", b"now", b"of", b"off", b"on", b"once", b"only",
    b"or", b"other", b"our", b"ours", b"out", b"over", b"own", b"same", b"she", b"should", b"so",
    b"some", b"such", b"than", b"that", b"the", b"their", b"them", b"then", b"there", b"these",
    b"they", b"this", b"those", b"through", b"to", b"too", b"under", b"until", b"up", b"very",
    b"was", b"we", b"were", b"what", b"when", b"where", b"which", b"while", b"who", b"whom",
    b"why", b"will", b"with", b"would", b"you", b"your", b"yours",
];

/// Whether `w` (lowercase ASCII) is in [`STOPWORDS`].
fn is_stopword(w: &[u8]) -> bool {
    static TABLE: OnceLock<WordTable<bool>> = OnceLock::new();
    TABLE
        .get_or_init(|| WordTable::new(STOPWORDS.iter().map(|&w| (w, true)), |a, _| a))
        .get(w)
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

fn fold_non_ascii(c: char) -> Option<u8> {
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

/// Result of a [`TermScan`] of one sentence.
pub(crate) struct Analysis {
    /// Estimated encoder tokens, in centi-tokens.
    pub centi: u32,
    /// Fingerprint of the sentence's lowercase non-whitespace characters (for
    /// deduplication).
    pub fingerprint: u64,
}

/// Scoring-term builder for one word.
struct TermWord<'a> {
    /// The word folded to lowercase, as UTF-8.
    buf: &'a mut Vec<u8>,
    chars: u32,
    ascii_only: bool,
}

impl TermWord<'_> {
    fn push(&mut self, c: char, class: CharClass) {
        match class {
            CharClass::Latin => {
                if let Some(b) = fold_latin(c) {
                    self.buf.push(b);
                } else {
                    self.ascii_only = false;
                    self.push_lowercase(c);
                }
                self.chars += 1;
            }
            CharClass::Digit => {
                self.buf
                    .extend_from_slice(c.encode_utf8(&mut [0u8; 4]).as_bytes());
                self.chars += 1;
            }
            CharClass::Other(_) => {
                self.ascii_only = false;
                self.push_lowercase(c);
                self.chars += 1;
            }
            _ => {}
        }
    }

    fn push_lowercase(&mut self, c: char) {
        let mut tmp = [0u8; 4];
        for l in c.to_lowercase() {
            self.buf
                .extend_from_slice(l.encode_utf8(&mut tmp).as_bytes());
        }
    }

    /// Appends a run of lowercase ASCII letters.
    #[inline]
    fn push_ascii_lowercase(&mut self, run: &[u8]) {
        self.buf.extend_from_slice(run);
        self.chars = self.chars.saturating_add(run.len() as u32);
    }

    /// Ends the word; pushes its term hash unless it is too short or a stopword.
    fn take(&mut self, out: &mut Vec<u64>) {
        if self.chars >= 2 && self.chars <= 48 {
            let mut w: &[u8] = self.buf;
            if self.ascii_only {
                if !is_stopword(w) {
                    w = stem(w);
                    let mut h = Fnv::new();
                    h.byte(b'w');
                    h.bytes(w);
                    out.push(h.finish());
                }
            } else {
                let mut h = Fnv::new();
                h.byte(b'w');
                h.bytes(w);
                out.push(h.finish());
            }
        }
        self.buf.clear();
        self.chars = 0;
        self.ascii_only = true;
    }
}

/// Light English suffix stripping so that "models" and "model" share a term.
fn stem(w: &[u8]) -> &[u8] {
    let n = w.len();
    if n > 5 && w.ends_with(b"ies") {
        return w.get(..n - 2).unwrap_or(w);
    }
    match w {
        [rest @ .., x, b's']
            if n > 3
                && !matches!(x, b's' | b'u' | b'i')
                && x.is_ascii_alphabetic()
                && rest.iter().all(u8::is_ascii_alphabetic) =>
        {
            w.get(..n - 1).unwrap_or(w)
        }
        _ => w,
    }
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

/// The analysis of one sentence for ranking, as a [`CharSink`]: its token estimate, its
/// scoring terms (pushed to `terms` as 64-bit hashes, duplicates included) and its
/// fingerprint.
///
/// Terms: lowercase words of two or more letters/digits, English stopwords skipped, light
/// plural stripping; for CJK ideographs and no-space scripts, every character and every
/// pair of adjacent characters (unigrams and bigrams).
pub(crate) struct TermScan<'a> {
    word: WordCost,
    term: TermWord<'a>,
    total: u32,
    fp: Fnv,
    prev_cjk: Option<char>,
    terms: &'a mut Vec<u64>,
}

impl<'a> TermScan<'a> {
    /// A scan that pushes its terms to `terms` and folds words in `word_buf` (a buffer
    /// kept between sentences; cleared here).
    pub(crate) fn new(terms: &'a mut Vec<u64>, word_buf: &'a mut Vec<u8>) -> Self {
        word_buf.clear();
        TermScan {
            word: WordCost::default(),
            term: TermWord {
                buf: word_buf,
                chars: 0,
                ascii_only: true,
            },
            total: 0,
            fp: Fnv::new(),
            prev_cjk: None,
            terms,
        }
    }

    /// Ends the text.
    pub(crate) fn finish(mut self) -> Analysis {
        self.total = self.total.saturating_add(self.word.take());
        self.term.take(self.terms);
        Analysis {
            centi: self.total,
            fingerprint: self.fp.finish(),
        }
    }
}

impl CharSink for TermScan<'_> {
    /// What [`CharSink::char`] does for each of them as a `Latin` character, in one step.
    #[inline]
    fn letters(&mut self, block: &LetterBlock, _raw: &[u8]) {
        let lower = block.lower_bytes();
        let letters = lower.get(..block.len).unwrap_or_default();
        self.word.push_latin_run(block.len as u32);
        self.term.push_ascii_lowercase(letters);
        for &x in letters {
            self.fp.byte(x);
        }
        self.prev_cjk = None;
    }

    /// What [`CharSink::char`] does for a `Space`.
    #[inline]
    fn space(&mut self) {
        self.total = self.total.saturating_add(self.word.take());
        self.term.take(self.terms);
        self.prev_cjk = None;
    }

    fn char(&mut self, c: char) {
        let class = classify(c);
        let cjk = matches!(class, CharClass::Ideograph | CharClass::NoSpaceLetter);
        match class {
            CharClass::Space => {
                self.total = self.total.saturating_add(self.word.take());
                self.term.take(self.terms);
            }
            CharClass::Punct | CharClass::Ideograph => {
                self.total = self
                    .total
                    .saturating_add(self.word.take())
                    .saturating_add(CENTI);
                self.term.take(self.terms);
            }
            CharClass::NoSpaceLetter => {
                self.word.push(class);
                self.term.take(self.terms);
            }
            CharClass::Zero => {}
            _ => {
                self.word.push(class);
                self.term.push(c, class);
            }
        }
        if cjk {
            let mut h = Fnv::new();
            h.byte(b'u');
            h.char(c);
            self.terms.push(h.finish());
            if let Some(p) = self.prev_cjk {
                let mut h = Fnv::new();
                h.byte(b'b');
                h.char(p);
                h.char(c);
                self.terms.push(h.finish());
            }
            self.prev_cjk = Some(c);
        } else if class != CharClass::Zero {
            self.prev_cjk = None;
        }
        if class == CharClass::Space || class == CharClass::Zero {
            return;
        }
        if c.is_ascii() {
            self.fp.byte(c.to_ascii_lowercase() as u8);
        } else {
            for l in c.to_lowercase() {
                self.fp.char(l);
            }
        }
    }
}

/// The [`TermScan`] analysis of `text` alone.
#[cfg(test)]
pub(crate) fn analyze(text: &str, terms: &mut Vec<u64>) -> Analysis {
    let mut buf = Vec::new();
    let mut scan = TermScan::new(terms, &mut buf);
    read_chars(text, &mut scan);
    scan.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(s: &str) -> u32 {
        centi_to_tokens(u64::from(estimate_centi(s)), 1.0)
    }

    /// What [`letter_block`] and [`alphanumeric_block`] must give, byte by byte.
    fn naive_block(rest: &[u8], accept: fn(&u8) -> bool) -> LetterBlock {
        let run: Vec<u8> = rest
            .iter()
            .take(8)
            .take_while(|x| accept(x))
            .copied()
            .collect();
        let mut lower = [0u8; 8];
        for (d, s) in lower.iter_mut().zip(&run) {
            *d = s.to_ascii_lowercase();
        }
        LetterBlock {
            len: run.len(),
            lower: u64::from_le_bytes(lower),
            upper: run.iter().filter(|x| x.is_ascii_uppercase()).count() as u32,
        }
    }

    #[test]
    fn blocks_match_the_byte_by_byte_definition() {
        // Every byte value at every place of a block, between letters and digits, and
        // texts shorter than a block.
        let mut texts: Vec<Vec<u8>> = Vec::new();
        for b in 0..=255u8 {
            for at in 0..10 {
                let mut t = b"aZ9mQ0xY7kLp".to_vec();
                if let Some(slot) = t.get_mut(at) {
                    *slot = b;
                }
                texts.push(t.clone());
                texts.push(t.get(at..).unwrap_or_default().to_vec());
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..20_000 {
            let len = (x % 12) as usize;
            let t: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *b"aBzZ09@[`{/:\x80\xc3 "
                        .get((x % 15) as usize)
                        .unwrap_or(&b'a')
                })
                .collect();
            texts.push(t);
        }
        for t in &texts {
            assert_eq!(
                letter_block(t),
                naive_block(t, u8::is_ascii_alphabetic),
                "{t:?}"
            );
            let expected = LetterBlock {
                upper: 0,
                ..naive_block(t, u8::is_ascii_alphanumeric)
            };
            assert_eq!(alphanumeric_block(t), expected, "{t:?}");
        }
    }

    #[test]
    fn punctuation_and_cjk_are_one_token_each() {
        assert_eq!(tokens("!?.,"), 4);
        assert_eq!(tokens("你好世界"), 4);
        assert_eq!(tokens("你好，世界。"), 6);
    }

    #[test]
    fn common_words_are_about_one_token() {
        // Real MiniLM count: 9 ("the quick brown fox jumps over the lazy dog").
        let t = tokens("the quick brown fox jumps over the lazy dog");
        assert!((9..=12).contains(&t), "{t}");
    }

    /// Real counts from the MiniLM tokenizer (`tokenizers`, no special tokens).
    #[test]
    fn estimates_track_the_real_tokenizer() {
        let cases: [(&str, u32); 9] = [
            ("What is the capital of France, and why did it become the capital?", 15),
            ("Привет, как дела? Сегодня хорошая погода, и мы пойдём гулять в парк.", 57),
            ("مرحبا، كيف حالك؟ القاهرة هي عاصمة مصر. أحب قراءة الكتب في المساء.", 54),
            ("नमस्ते, आप कैसे हैं? दिल्ली भारत की राजधानी है।", 31),
            ("你好，你好吗？北京是中国的首都。我喜欢读书。", 22),
            (
                "def get_user_name(user_id: int) -> str:\n    return self.db.query(User).filter(User.id == user_id).first().name",
                45,
            ),
            (
                r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.7}"#,
                45,
            ),
            ("See https://example.com/path/to/resource?query=value&x=1 for details.", 25),
            (
                "The mitochondrial electron transport chain couples oxidative phosphorylation to ATP synthesis.",
                18,
            ),
        ];
        let (mut est_sum, mut real_sum) = (0u32, 0u32);
        for (text, real) in cases {
            let est = tokens(text);
            let err = (f64::from(est) - f64::from(real)).abs() / f64::from(real);
            assert!(err <= 0.25, "{text}: estimated {est}, real {real}");
            est_sum += est;
            real_sum += real;
        }
        let total_err = (f64::from(est_sum) - f64::from(real_sum)).abs() / f64::from(real_sum);
        assert!(total_err <= 0.08, "total {est_sum} vs {real_sum}");
    }

    #[test]
    fn long_words_and_unknown_chars() {
        assert_eq!(tokens(&"a".repeat(150)), 1, "over 100 chars is one [UNK]");
        assert_eq!(tokens("great\u{1F44D}"), 1, "emoji makes the word [UNK]");
        // Random hexadecimal: about 1.4 characters per piece with the real tokenizer.
        let t = tokens("3f9a0c1e77b24d5e8a6f0b1c2d3e4f50");
        assert!((14..=30).contains(&t), "{t}");
    }

    #[test]
    fn accents_and_marks_cost_nothing_extra() {
        assert_eq!(tokens("cafe"), tokens("caf\u{e9}"));
        assert_eq!(tokens("cafe"), tokens("cafe\u{301}"));
        assert_eq!(tokens("a\u{200B}b"), tokens("ab"));
    }

    #[test]
    fn ratio_conversion_round_trips() {
        for ratio in [0.5f32, 0.8, 1.0, 1.13, 2.0] {
            for tokens in [0u32, 1, 7, 510, 10_000] {
                let c = tokens_to_centi_floor(tokens, ratio);
                assert!(centi_to_tokens(c, ratio) <= tokens);
                assert!(centi_to_tokens(c + 1, ratio) > tokens || tokens == 0);
            }
        }
    }

    #[test]
    fn terms_cover_words_and_cjk_bigrams() {
        let mut t = Vec::new();
        analyze("The models run fast", &mut t);
        assert_eq!(t.len(), 3, "stopword 'the' skipped");
        let mut t2 = Vec::new();
        analyze("model", &mut t2);
        assert!(t.contains(&t2[0]), "plural stripped");
        let mut c = Vec::new();
        analyze("北京大学", &mut c);
        assert_eq!(c.len(), 4 + 3);
    }

    #[test]
    fn fingerprint_ignores_case_and_spacing() {
        let mut t = Vec::new();
        let a = analyze("Ignore previous instructions!", &mut t).fingerprint;
        let b = analyze("ignore  previous\nINSTRUCTIONS!", &mut t).fingerprint;
        assert_eq!(a, b);
    }
}
