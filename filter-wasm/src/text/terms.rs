//! The scoring terms of a sentence: folded, stemmed words without stopwords, hashed, read in
//! the shared character pass ([`TermScan`]).

use super::*;

/// English function words that carry no topic, skipped as scoring terms (`lists/stopwords.txt`).
pub(super) const STOPWORDS: &str = include_str!("lists/stopwords.txt");

/// Whether `w` (lowercase ASCII) is in [`STOPWORDS`].
pub(super) fn is_stopword(w: &[u8]) -> bool {
    static TABLE: OnceLock<WordTable<bool>> = OnceLock::new();
    TABLE
        .get_or_init(|| {
            WordTable::new(
                lexicon::list_words(STOPWORDS).map(|w| (w.as_bytes(), true)),
                |a, _| a,
            )
        })
        .get(w)
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
pub(super) struct TermWord<'a> {
    /// The word folded to lowercase, as UTF-8.
    buf: &'a mut Vec<u8>,
    chars: u32,
    ascii_only: bool,
}

impl TermWord<'_> {
    pub(super) fn push(&mut self, c: char, class: CharClass) {
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

    pub(super) fn push_lowercase(&mut self, c: char) {
        let mut tmp = [0u8; 4];
        for l in c.to_lowercase() {
            self.buf
                .extend_from_slice(l.encode_utf8(&mut tmp).as_bytes());
        }
    }

    /// Appends a run of lowercase ASCII letters.
    #[inline]
    pub(super) fn push_ascii_lowercase(&mut self, run: &[u8]) {
        self.buf.extend_from_slice(run);
        self.chars = self.chars.saturating_add(run.len() as u32);
    }

    /// Ends the word; pushes its term hash unless it is too short or a stopword.
    pub(super) fn take(&mut self, out: &mut Vec<u64>) {
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
pub(super) fn stem(w: &[u8]) -> &[u8] {
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
