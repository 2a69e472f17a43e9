//! Cheap risk detectors: personal-data patterns, prompt-injection cues and encoded payloads.
//!
//! They decide which sentences compression must keep so that the daemon's jailbreak and
//! PII signals still see them; they are not the classifiers themselves. Every detector is a
//! hand-written scanner over bytes or characters (no regular expressions), linear in the
//! text length with small constants, so they can run over every character of user text.
//! False positives only cost budget (a benign sentence is kept); false negatives lose
//! nothing that plain TextRank compression would not.
//!
//! The kinds ([`RiskFlags`]):
//! - validated personal data: e-mail addresses, phone numbers (international, national,
//!   in groups, or a looser shape next to a phone word), Luhn-valid card numbers, mod-97
//!   IBANs, SSNs by the SSA's rules, IPv4 and IPv6 addresses;
//! - personal data in context: names (after titles, introductions, greetings, signatures,
//!   or near personal words), street addresses in many languages and scripts, residence
//!   phrases and address blocks, ages, dates of birth and document numbers;
//! - injection cues over lowercase, accent-folded words: instruction overrides, role-play
//!   setups, system-prompt extraction, fiction framings, and plainly harmful requests (an
//!   asking phrase, then a harm word in the same clause, unless a defensive word or a
//!   harmless object shares it);
//! - encoded payloads: base64-like and hexadecimal runs, runs of `\xHH`, `%HH`, `\uHHHH` or
//!   `&#NN;` escapes, and text hidden in Unicode tag characters (whose cues count too).
//!
//! The examples of each kind, and look-alikes that must not count, are the table of
//! `tests/examples.rs`; the word lists are data files in `lists/`.
//!
//! Layout: this module holds [`RiskFlags`], the entry points and the shared word pass;
//! `patterns` the byte patterns of personal data, `encoded` the encoded payloads and the
//! byte summary, `hidden_text` the text hidden in tag characters, `words` the word
//! lexicon, `streets` the street words, `context` the context scanner, `injection` the
//! injection cues with their list in `cue_words`.

use std::fmt;
use std::sync::OnceLock;

use crate::text::lexicon::{self, WordTable};
use crate::text::{CharSink, Fnv, LetterBlock};

bitflags::bitflags! {
    /// A set of risk kinds found in a text.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
    pub struct RiskFlags: u16 {
        /// An e-mail address.
        const EMAIL = 1 << 0;
        /// A phone number.
        const PHONE = 1 << 1;
        /// A Luhn-valid payment-card-like digit run.
        const CARD = 1 << 2;
        /// A mod-97-valid IBAN-like string.
        const IBAN = 1 << 3;
        /// A US Social Security number-like `AAA-GG-SSSS`.
        const SSN = 1 << 4;
        /// An IPv4 or IPv6 address.
        const IP = 1 << 5;
        /// An instruction override ("ignore previous instructions").
        const OVERRIDE = 1 << 6;
        /// A role-play or persona setup ("you are now DAN", "developer mode").
        const ROLE_PLAY = 1 << 7;
        /// An attempt to extract the system prompt.
        const PROMPT_EXTRACTION = 1 << 8;
        /// A long encoded payload (base64, hexadecimal, escape sequences), or a run of escaped
        /// line breaks padding an instruction away from the text before it.
        const ENCODED = 1 << 9;
        /// A person's name in context (after a courtesy title, an introduction, a greeting or a
        /// signature, or next to personal words such as "patient" or "account").
        const NAME = 1 << 10;
        /// A street address, apartment or post-office box number, or a place of residence.
        const ADDRESS = 1 << 11;
        /// An age, a date of birth, or a document or account number in context.
        const IDENTITY = 1 << 12;
        /// A weak injection cue: a fiction or hypothetical framing ("a hypothetical
        /// vulnerability") or "act as" inside a sentence. Common in exam and technical prose
        /// ("a hypothetical gas", "the diode acts as"), so compression keeps the sentence but
        /// not the text around it, unlike the [`RiskFlags::INJECTION`] kinds.
        const FRAMING = 1 << 13;
        /// A plainly harmful request, with no injection wording: an asking phrase ("give
        /// instructions for", "explain how to", "write a tutorial on", "how can I") and a harm
        /// word after it in the same clause ("hacking", "ransomware", "a bomb", "launder money",
        /// "poison", "without getting caught"). The sentence is the request itself, so
        /// compression keeps it but not the text around it, unlike the
        /// [`RiskFlags::INJECTION`] kinds.
        const HARMFUL_REQUEST = 1 << 14;

        /// All personal-data kinds (what makes the daemon's PII model read a request under
        /// `pii.model_pass: on_cue`).
        const PII = Self::VALIDATED_PII.bits()
                | Self::NAME.bits()
                | Self::ADDRESS.bits()
                | Self::IDENTITY.bits();
        /// The personal-data kinds the daemon finds with validated patterns: e-mail, phone,
        /// card, IBAN, SSN, IP address.
        const VALIDATED_PII = Self::EMAIL.bits()
                | Self::PHONE.bits()
                | Self::CARD.bits()
                | Self::IBAN.bits()
                | Self::SSN.bits()
                | Self::IP.bits();
        /// The jailbreak / prompt-injection kinds whose surrounding text compression keeps
        /// (every injection kind but the weak [`RiskFlags::FRAMING`] and the self-contained
        /// [`RiskFlags::HARMFUL_REQUEST`]).
        const INJECTION = Self::OVERRIDE.bits()
                | Self::ROLE_PLAY.bits()
                | Self::PROMPT_EXTRACTION.bits()
                | Self::ENCODED.bits();
    }
}

impl RiskFlags {
    /// Every kind, most severe first (the order compression keeps flagged sentences in
    /// when they do not all fit), with its name.
    pub const KINDS: [(RiskFlags, &'static str); 15] = [
        (RiskFlags::OVERRIDE, "override"),
        (RiskFlags::PROMPT_EXTRACTION, "prompt_extraction"),
        (RiskFlags::ROLE_PLAY, "role_play"),
        (RiskFlags::ENCODED, "encoded"),
        (RiskFlags::HARMFUL_REQUEST, "harmful_request"),
        (RiskFlags::FRAMING, "framing"),
        (RiskFlags::CARD, "card"),
        (RiskFlags::SSN, "ssn"),
        (RiskFlags::IBAN, "iban"),
        (RiskFlags::EMAIL, "email"),
        (RiskFlags::PHONE, "phone"),
        (RiskFlags::IP, "ip"),
        (RiskFlags::IDENTITY, "identity"),
        (RiskFlags::ADDRESS, "address"),
        (RiskFlags::NAME, "name"),
    ];

    /// Names of the kinds set, most severe first.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        RiskFlags::KINDS
            .into_iter()
            .filter(move |(k, _)| self.contains(*k))
            .map(|(_, n)| n)
    }
    /// The kind named `name` (as [`RiskFlags::names`] writes it), if any.
    pub fn named(name: &str) -> Option<RiskFlags> {
        RiskFlags::KINDS
            .into_iter()
            .find(|(_, n)| *n == name)
            .map(|(k, _)| k)
    }
    /// Index in [`RiskFlags::KINDS`] of the most severe kind set, if any.
    pub fn severity_rank(self) -> Option<usize> {
        RiskFlags::KINDS.iter().position(|(k, _)| self.contains(*k))
    }
}

impl fmt::Display for RiskFlags {
    /// Comma-separated kind names, or `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        for (i, n) in self.names().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(n)?;
        }
        Ok(())
    }
}

/// Runs every detector over `text`. Linear time; never panics.
pub fn scan(text: &str) -> RiskFlags {
    scan_after(text, "")
}

/// [`scan`], with `lead` the text just before `text` on the same message (the end of the
/// previous line or sentence): a phone word there ("Phone:" on the line above) makes a
/// looser number shape at the start of `text` a phone number. Only the last 16 bytes of
/// `lead` are read.
pub fn scan_after(text: &str, lead: &str) -> RiskFlags {
    let mut words = WordScan::new();
    super::text::read_chars(text, &mut words);
    flags_after(text, lead, words, ByteSummary::of(text.as_bytes()))
}

/// [`scan_after`] for `text` once `words` has read it and `bytes` is its [`ByteSummary`]
/// (from a pass shared with other readers).
pub(crate) fn flags_after(
    text: &str,
    lead: &str,
    words: WordScan,
    bytes: ByteSummary,
) -> RiskFlags {
    let (context, injection) = words.finish();
    let hidden = if bytes.has(ByteSummary::UNUSUAL) {
        hidden_text_flags(text)
    } else {
        RiskFlags::empty()
    };
    scan_patterns(text, lead.as_bytes(), bytes)
        | context
        | injection
        | encoded(text, bytes)
        | hidden
}

/// Personal-data detectors only.
pub fn scan_pii(text: &str) -> RiskFlags {
    scan_patterns(text, b"", ByteSummary::of(text.as_bytes())) | scan_words(text).0
}

/// Injection-cue detector only (instruction overrides, role-play, prompt extraction, the
/// weak fiction framings, and plainly harmful requests).
pub fn scan_injection(text: &str) -> RiskFlags {
    scan_words(text).1
}

/// Personal data with a fixed shape: dates of birth, e-mail addresses, card, SSN and
/// phone numbers, IBANs and IP addresses; in the text as written and, where it differs, in
/// its [`pattern_view`].
fn scan_patterns(text: &str, lead: &[u8], bytes: ByteSummary) -> RiskFlags {
    let f = scan_ascii_patterns(text, lead, bytes);
    match bytes
        .has(ByteSummary::UNUSUAL)
        .then(|| pattern_view(text))
        .flatten()
    {
        Some(view) => f | scan_ascii_patterns(&view, lead, ByteSummary::of(view.as_bytes())),
        None => f,
    }
}

/// `text` as the daemon's patterns read it, or `None` where that is the text itself: its
/// fullwidth forms, other scripts' decimal digits and tag characters as ASCII
/// ([`semroute_checks::ascii_form`]), and the characters the tokenizer drops (controls,
/// format characters such as zero-width spaces, combining marks) as spaces. So that a card
/// written `４１１１ …`, `٤١١١ …` or with NULs between its groups is found by the filter too,
/// where the policy must act on it without the daemon (`pii.fail_closed_on_pattern`).
fn pattern_view(text: &str) -> Option<String> {
    use crate::text::{classify, CharClass};
    // Cheap for ASCII, most of a sentence with one accented letter: `ascii_form` returns
    // at once below U+0660 and `classify` decides ASCII in one match.
    let fold = |c: char| match semroute_checks::ascii_form(c) {
        Some(a) => Some(a),
        None if classify(c) == CharClass::Zero => Some(' '),
        None => None,
    };
    if !text.chars().any(|c| fold(c).is_some()) {
        return None;
    }
    Some(text.chars().map(|c| fold(c).unwrap_or(c)).collect())
}

/// [`scan_patterns`] over the text's bytes as they are.
fn scan_ascii_patterns(text: &str, lead: &[u8], bytes: ByteSummary) -> RiskFlags {
    let b = text.as_bytes();
    let has_digit = bytes.has(ByteSummary::DIGIT);
    let has_at = bytes.has(ByteSummary::AT);
    let has_colon = bytes.has(ByteSummary::COLON);
    let has_bracket = bytes.has(ByteSummary::BRACKET);
    let mut f = RiskFlags::empty();
    if has_digit && has_full_date(b) {
        f |= RiskFlags::IDENTITY;
    }
    if has_at && has_email(b) || (has_at || has_bracket) && has_spelled_email(b) {
        f |= RiskFlags::EMAIL;
    }
    if has_digit {
        f |= scan_digit_runs(b, lead);
        if has_iban(b) {
            f |= RiskFlags::IBAN;
        }
        if has_ipv4(b) || (has_colon && has_ipv6(b)) {
            f |= RiskFlags::IP;
        }
    }
    f
}

/// Byte `i` of `b`, or 0 (which matches no class the scanners look for) past the end.
fn at(b: &[u8], i: usize) -> u8 {
    b.get(i).copied().unwrap_or(0)
}

mod encoded;
mod hidden_text;
mod patterns;
pub use encoded::scan_encoded;
use encoded::*;
pub(crate) use encoded::{ByteScan, ByteSummary};
use hidden_text::hidden_text_flags;
use patterns::*;

// ---------------------------------------------------------------- names, addresses, identity
mod context;
mod streets;
mod words;
use context::*;
use streets::*;
use words::*;

/// The word-level detectors, in one pass over `text`: personal-data context cues (names
/// after titles, introductions and greetings or near personal words, street addresses,
/// ages, dates of birth and document numbers) and injection cues. Returns `(personal,
/// injection)` flags. The two split words differently: a context word also holds digits
/// and letters of other scripts, which end a cue word.
fn scan_words(text: &str) -> (RiskFlags, RiskFlags) {
    let mut scan = WordScan::new();
    super::text::read_chars(text, &mut scan);
    scan.finish()
}

/// The word-level scanners of [`scan_words`] as a [`CharSink`]: personal-data context and
/// injection cues.
pub(crate) struct WordScan {
    inj: CueWords,
    s: ContextScanner,
    /// A word is being read.
    any: bool,
    /// Whether the next word starts a sentence, starts a line, follows a hyphen, and
    /// follows a sign or a dot.
    start: bool,
    line: bool,
    hyphen: bool,
    signed: bool,
    /// The next letter is the word's first.
    first: bool,
    /// Uppercase letters of the current word.
    upper: u32,
    /// The [`foreign_hash`] of the current word's letters outside the Latin script.
    foreign: Option<Fnv>,
}

impl WordScan {
    pub(crate) fn new() -> Self {
        WordScan {
            inj: CueWords::new(),
            s: ContextScanner::new(),
            any: false,
            start: true,
            line: true,
            hyphen: false,
            signed: false,
            first: true,
            upper: 0,
            foreign: None,
        }
    }

    /// Starts a word.
    #[inline]
    fn begin(&mut self, cap: bool) {
        self.s.begin(Word {
            start: self.start,
            line: self.line,
            hyphen: self.hyphen,
            signed: self.signed,
            cap,
            ..Word::default()
        });
        self.any = true;
        self.upper = 0;
    }

    /// Ends the current context word.
    #[inline]
    fn end_word(&mut self) {
        self.s.end_word(self.upper, self.foreign.take());
        self.any = false;
        self.start = false;
        self.line = false;
        self.hyphen = false;
    }

    /// Ends the text: `(personal, injection)` flags.
    pub(crate) fn finish(mut self) -> (RiskFlags, RiskFlags) {
        if self.any {
            self.s.end_word(self.upper, self.foreign.take());
        }
        let s = &mut self.s;
        // A question for an address ends its sentence ("What is your address?", "what's
        // the address?"): the answer follows in the next one, which personal-data context
        // keeps with it.
        let (last, before) = (s.back(0), s.back(1));
        if last.is(b"address")
            && last.after == '?'
            && matches!(
                before.text(),
                b"your" | b"my" | b"his" | b"her" | b"their" | b"the"
            )
        {
            s.flags |= RiskFlags::ADDRESS;
        }
        (s.flags, self.inj.finish())
    }
}

impl CharSink for WordScan {
    /// What [`CharSink::char`] does for each of them, in one step (a word's first letter
    /// decides `cap`).
    #[inline]
    fn letters(&mut self, block: &LetterBlock, raw: &[u8]) {
        if !self.any {
            self.begin(raw.first().is_some_and(u8::is_ascii_uppercase));
        }
        self.first = false;
        self.inj.ascii_letters(block);
        if let Some(cur) = self.s.cur() {
            cur.push_ascii_letters(block);
        }
        self.upper = self.upper.saturating_add(block.upper);
    }

    /// What [`CharSink::char`] does for a space: it ends the words.
    #[inline]
    fn space(&mut self) {
        self.inj.end();
        if self.any {
            self.end_word();
        }
        self.signed = false;
    }

    /// A line break written as an escape ("Inc.\\n287 Jaanioja 13") starts a line as a
    /// real one does.
    fn escaped_newline(&mut self) {
        self.char('\n');
    }

    fn char(&mut self, c: char) {
        let latin = super::text::fold_latin(c);
        // Apostrophes and zero-width characters split no word; looked up only for
        // non-letters (the first letter of every word comes this way).
        let skipped = latin.is_none()
            && (c == '\''
                || c == '\u{2019}'
                || super::text::classify(c) == super::text::CharClass::Zero);
        // The injection cues also read Cyrillic and Greek letters that look like Latin
        // ones as those ("Ignоre" with a Cyrillic "о"); the personal-data words do not.
        match latin.or_else(|| look_alike_latin(c)) {
            Some(l) => self.inj.letter(l, c.is_uppercase()),
            None if !skipped => self.inj.end(),
            None => {}
        }
        let digit = c.is_ascii_digit();
        if latin.is_some() || digit || (c.is_alphabetic() && !c.is_ascii()) {
            if !self.any {
                self.begin(false);
                self.first = true;
            }
            let b = latin.or_else(|| digit.then_some(c as u8));
            if b.is_none() {
                foreign_fold(self.foreign.get_or_insert_with(Fnv::new), c);
            }
            let upper_case = !digit && c.is_uppercase();
            let first = self.first;
            if let Some(cur) = self.s.cur() {
                match b {
                    Some(x) => {
                        if let Some(slot) = cur.w.get_mut(cur.len) {
                            *slot = x;
                            cur.len += 1;
                        } else {
                            cur.odd = true;
                        }
                    }
                    None => {
                        cur.odd = true;
                        cur.foreign = true;
                    }
                }
                cur.accent |= latin.is_some() && !c.is_ascii();
                if digit {
                    cur.digits = cur.digits.saturating_add(1);
                } else {
                    cur.letters = cur.letters.saturating_add(1);
                    cur.cap |= upper_case && first;
                }
            }
            if upper_case {
                self.upper = self.upper.saturating_add(1);
            }
            self.first = false;
            return;
        }
        if skipped {
            // "I'm" -> "im"; zero-width characters do not split words.
            return;
        }
        if self.any {
            self.end_word();
        }
        let s = &mut self.s;
        if !c.is_whitespace() {
            if let Some(last) =
                s.n.checked_sub(1)
                    .and_then(|i| s.recent.get_mut(i % CTX_WINDOW))
            {
                if last.after == '\0' {
                    last.after = c;
                }
            }
            self.hyphen = c == '-';
            self.signed = matches!(c, '$' | '.' | '\u{20AC}' | '\u{00A3}' | '#');
        } else {
            self.signed = false;
        }
        if matches!(
            c,
            '.' | '!' | '?' | '\n' | '"' | '>' | ':' | '(' | '\u{201C}'
        ) {
            self.start = true;
        }
        if matches!(c, '.' | '!' | '?' | ';' | '\n') {
            // A persona opening and a request count within their own sentence or clause.
            self.inj.m.clause_end();
        } else if c == ':' || c == ',' {
            self.inj.m.phrase_start();
        }
        self.line |= c == '\n';
    }
}

/// The Latin letter (lowercase ASCII) that a Cyrillic or Greek letter is drawn like, as
/// used to disguise words from word lists ("Ignоre" with a Cyrillic "о"); `None` for
/// every other character. Uppercase forms count where only they look Latin (Cyrillic
/// "В", "Н", "М", "Т"; Greek "Β", "Η", "Ζ").
fn look_alike_latin(c: char) -> Option<u8> {
    Some(match c {
        'а' | 'А' | 'α' | 'Α' => b'a',
        'В' | 'Β' => b'b',
        'с' | 'С' | 'ϲ' => b'c',
        'ԁ' => b'd',
        'е' | 'Е' | 'Ε' => b'e',
        'һ' | 'Н' | 'Η' => b'h',
        'і' | 'І' | 'ι' | 'Ι' | 'ӏ' => b'i',
        'ј' | 'Ј' => b'j',
        'к' | 'К' | 'κ' | 'Κ' => b'k',
        'М' | 'Μ' => b'm',
        'Ν' => b'n',
        'о' | 'О' | 'ο' | 'Ο' => b'o',
        'р' | 'Р' | 'ρ' | 'Ρ' => b'p',
        'ԛ' => b'q',
        'ѕ' | 'Ѕ' => b's',
        'Т' | 'Τ' => b't',
        'ν' => b'v',
        'ԝ' => b'w',
        'х' | 'Х' | 'χ' | 'Χ' => b'x',
        'у' | 'У' | 'Υ' => b'y',
        'Ζ' => b'z',
        _ => return None,
    })
}

mod cue_words;
mod injection;
use cue_words::cue_words;
use injection::*;

#[cfg(test)]
mod tests;
