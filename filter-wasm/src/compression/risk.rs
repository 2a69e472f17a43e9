//! Cheap risk detectors: personal-data patterns, prompt-injection cues and encoded payloads.
//!
//! They decide which sentences compression must keep so that the daemon's jailbreak and
//! PII signals still see them; they are not the classifiers themselves. Every detector is a
//! hand-written scanner over bytes or characters (no regular expressions), linear in the
//! text length with small constants, so they can run over every character of user text.
//! False positives only cost budget (a benign sentence is kept); false negatives lose
//! nothing that plain TextRank compression would not.
//!
//! Detectors ([`RiskFlags`] bits):
//! - PII: e-mail addresses, phone numbers (international `+` or `00` form, also with an
//!   area code in parentheses "+49(0)9573 93185" or a five-digit first group, trunk-prefixed
//!   `0NNN-NNNNNNN` or unseparated "0360833541", "(0335) 773658", 10 or 11 digits without
//!   separators and not before a lowercase word ("9731046825."), 8-12 digits in short
//!   groups that do not read as a date, a number with an extension, or a looser shape next
//!   to a phone word such as "Phone:", "fax", "number is", "reach", "ring" or "contact",
//!   three pairs "47 18 22" included; lists of decimals or round quantities from tables
//!   are not phones), payment-card-like digit runs (12-19 digits, Luhn-valid), IBAN-like
//!   strings (country code, check digits, mod-97 valid), SSN-like `AAA-GG-SSSS` (SSA
//!   area/group/serial rules), IPv4 and IPv6 addresses; and context cues over accent-folded
//!   words for the personal data a PII model finds: names after courtesy titles ("Mr", "Dr"),
//!   introductions ("my name is", "I'm", "called"), greetings and signatures ("Dear",
//!   "Regards,"), or runs of two or three capitalised words (not starting a sentence) near
//!   personal words ("patient", "account", "born"); street addresses (a house number
//!   before a street word or a USPS street type after a name, "87 Osric Ports"; compound
//!   forms such as "-straße", "-katu", "-vej", "-dreef", "-torget", "-polku", "-platz" and
//!   hyphenated "Anna-Frank-Ring 4"; a street type before the name, with particles, a comma
//!   or a number word, "Avenida de Florinda Nicolau 56", "Ladeira Fonseca, 99", "Soseaua
//!   Ionescu Nr. 92"; French "57, boulevard de Raynaud"; Hungarian "Székfai tér 6."; Greek
//!   and Cyrillic street words, "ул. Ленина, д. 5", "Οδός Ερμού 21", or a capitalised name
//!   in those scripts before a number; house numbers may end in a letter, "6b"),
//!   apartment, suite and box numbers, residence phrases ("lives at", "address is", "ship
//!   to", "zip code", "zip is", "I'm in"), and the lines of an address block scanned one
//!   by one (a street line "4596 Tylova 285", a postal-code line "Denmark 29587", "Salem,
//!   OR 97301", "8010 Graz", "3749-005 Costa da Caparica" or "H-1743 Miskolc", a postal
//!   code before a place after "in": "in 20095 Hamburg"); ages, dates of birth and full
//!   calendar dates ("79 years old", "born on", "date of birth", `9/20/1968`,
//!   `2018-01-14`); and numbers after
//!   document words ("passport", "license", "account number"). Single accented
//!   capitalised words mid-sentence, runs of capitalised words holding one, and middle
//!   initials ("Hanne I. Kreutzmann") count as names.
//! - Injection cues, matched over lowercase, accent-folded words: instruction overrides
//!   ("ignore / disregard / forget ... previous instructions", "forget all the
//!   assignments", "now new instructions follow", also a few German, French and Spanish
//!   forms), role-play setups ("you are now", "pretend", "act as", "developer
//!   mode", "DAN", "do anything now", "jailbreak", "uncensored", "no restrictions", "from
//!   now on", "stay in character"), system-prompt extraction ("system prompt", "reveal
//!   your instructions", "repeat the words above"), and plainly harmful requests: an asking
//!   phrase ("give instructions for", "explain how to", "write a script that", "develop a",
//!   "how can I") followed within 12 words of its clause by a harm word ("hacking",
//!   "ransomware", "bomb", "launder money", "poison", "evade taxes", "without getting
//!   caught", "disinformation", "bribe", "bypass plagiarism detection"; a word of 7
//!   letters or more one typo from a listed one counts, "maleware"), unless a defensive or
//!   harmless word shares the clause ("detect", "prevent", "game") or the verb's object is
//!   harmless ("kill a process", "steal the show").
//! - Encoded payloads: base64-like runs of at least 40 characters with frequent
//!   letter-case/digit changes, hexadecimal runs of at least 32 digits, and runs of at
//!   least 8 `\xHH`, `%HH`, `\uHHHH` or `&#NN;` escapes.

use std::fmt;
use std::sync::OnceLock;

use super::lexicon::{self, WordTable};
use super::text::{CharSink, Fnv, LetterBlock};

/// A set of risk kinds found in a text (a bit set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct RiskFlags(u16);

impl RiskFlags {
    /// No risk found.
    pub const NONE: RiskFlags = RiskFlags(0);
    /// An e-mail address.
    pub const EMAIL: RiskFlags = RiskFlags(1 << 0);
    /// A phone number.
    pub const PHONE: RiskFlags = RiskFlags(1 << 1);
    /// A Luhn-valid payment-card-like digit run.
    pub const CARD: RiskFlags = RiskFlags(1 << 2);
    /// A mod-97-valid IBAN-like string.
    pub const IBAN: RiskFlags = RiskFlags(1 << 3);
    /// A US Social Security number-like `AAA-GG-SSSS`.
    pub const SSN: RiskFlags = RiskFlags(1 << 4);
    /// An IPv4 or IPv6 address.
    pub const IP: RiskFlags = RiskFlags(1 << 5);
    /// An instruction override ("ignore previous instructions").
    pub const OVERRIDE: RiskFlags = RiskFlags(1 << 6);
    /// A role-play or persona setup ("you are now DAN", "developer mode").
    pub const ROLE_PLAY: RiskFlags = RiskFlags(1 << 7);
    /// An attempt to extract the system prompt.
    pub const PROMPT_EXTRACTION: RiskFlags = RiskFlags(1 << 8);
    /// A long encoded payload (base64, hexadecimal, escape sequences), or a run of escaped
    /// line breaks padding an instruction away from the text before it.
    pub const ENCODED: RiskFlags = RiskFlags(1 << 9);
    /// A person's name in context (after a courtesy title, an introduction, a greeting or a
    /// signature, or next to personal words such as "patient" or "account").
    pub const NAME: RiskFlags = RiskFlags(1 << 10);
    /// A street address, apartment or post-office box number, or a place of residence.
    pub const ADDRESS: RiskFlags = RiskFlags(1 << 11);
    /// An age, a date of birth, or a document or account number in context.
    pub const IDENTITY: RiskFlags = RiskFlags(1 << 12);
    /// A weak injection cue: a fiction or hypothetical framing ("a hypothetical
    /// vulnerability") or "act as" inside a sentence. Common in exam and technical prose
    /// ("a hypothetical gas", "the diode acts as"), so compression keeps the sentence but
    /// not the text around it, unlike the [`RiskFlags::INJECTION`] kinds.
    pub const FRAMING: RiskFlags = RiskFlags(1 << 13);
    /// A plainly harmful request, with no injection wording: an asking phrase ("give
    /// instructions for", "explain how to", "write a tutorial on", "how can I") and a harm
    /// word after it in the same clause ("hacking", "ransomware", "a bomb", "launder money",
    /// "poison", "without getting caught"). The sentence is the request itself, so
    /// compression keeps it but not the text around it, unlike the
    /// [`RiskFlags::INJECTION`] kinds.
    pub const HARMFUL_REQUEST: RiskFlags = RiskFlags(1 << 14);

    /// All personal-data kinds.
    pub const PII: RiskFlags = RiskFlags(0b1_1100_0011_1111);
    /// The personal-data kinds the daemon finds with validated patterns: e-mail, phone,
    /// card, IBAN, SSN, IP address.
    pub const VALIDATED_PII: RiskFlags = RiskFlags(0b11_1111);
    /// The jailbreak / prompt-injection kinds whose surrounding text compression keeps
    /// (every injection kind but the weak [`RiskFlags::FRAMING`] and the self-contained
    /// [`RiskFlags::HARMFUL_REQUEST`]).
    pub const INJECTION: RiskFlags = RiskFlags(0b11_1100_0000);

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

    /// Whether no kind is set.
    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }
    /// Whether every kind in `other` is set.
    pub const fn contains(self, other: RiskFlags) -> bool {
        self.0 & other.0 == other.0
    }
    /// Whether any kind in `other` is set.
    pub const fn intersects(self, other: RiskFlags) -> bool {
        self.0 & other.0 != 0
    }
    /// The union of both sets.
    pub const fn union(self, other: RiskFlags) -> RiskFlags {
        RiskFlags(self.0 | other.0)
    }
    /// The kinds of `self` that are not in `other`.
    pub const fn without(self, other: RiskFlags) -> RiskFlags {
        RiskFlags(self.0 & !other.0)
    }
    /// The raw bits.
    pub const fn bits(self) -> u16 {
        self.0
    }
    /// Names of the kinds set, most severe first.
    pub fn names(self) -> impl Iterator<Item = &'static str> {
        RiskFlags::KINDS
            .into_iter()
            .filter(move |(k, _)| self.contains(*k))
            .map(|(_, n)| n)
    }
    /// Index in [`RiskFlags::KINDS`] of the most severe kind set, if any.
    pub fn severity_rank(self) -> Option<usize> {
        RiskFlags::KINDS.iter().position(|(k, _)| self.contains(*k))
    }
}

impl std::ops::BitOr for RiskFlags {
    type Output = RiskFlags;
    fn bitor(self, rhs: RiskFlags) -> RiskFlags {
        self.union(rhs)
    }
}

impl std::ops::BitOrAssign for RiskFlags {
    fn bitor_assign(&mut self, rhs: RiskFlags) {
        self.0 |= rhs.0;
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
    scan_patterns(text, lead.as_bytes(), bytes) | context | injection | encoded(text, bytes)
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
/// phone numbers, IBANs and IP addresses.
fn scan_patterns(text: &str, lead: &[u8], bytes: ByteSummary) -> RiskFlags {
    let b = text.as_bytes();
    let has_digit = bytes.has(ByteSummary::DIGIT);
    let has_at = bytes.has(ByteSummary::AT);
    let has_colon = bytes.has(ByteSummary::COLON);
    let has_bracket = bytes.has(ByteSummary::BRACKET);
    let mut f = RiskFlags::NONE;
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
mod patterns;
pub use encoded::scan_encoded;
use encoded::*;
pub(crate) use encoded::{ByteScan, ByteSummary};
use patterns::*;

// ---------------------------------------------------------------- names, addresses, identity

/// Longest word (in folded bytes) the context scanner compares with its cue words.
const CTX_WORD: usize = lexicon::MAX_WORD;
/// Words of history the context scanner keeps.
const CTX_WINDOW: usize = 8;

/// Appends the lowercase letters of `block` to the word `w[..*len]` (whose bytes past
/// `len` are zero, as a packed key needs) as far as they fit; returns how many did.
#[inline]
fn push_lowercase_block(
    w: &mut [u8; lexicon::MAX_WORD],
    len: &mut usize,
    block: &LetterBlock,
) -> usize {
    let at = *len;
    if let Some(dst) = w.get_mut(at..at + 8) {
        // All 8 bytes: the ones past the run are zero, as `w` is there.
        dst.copy_from_slice(&block.lower_bytes());
        *len = at + block.len;
        return block.len;
    }
    let room = lexicon::MAX_WORD.saturating_sub(at).min(block.len);
    if let (Some(dst), Some(src)) = (w.get_mut(at..at + room), block.lower_bytes().get(..room)) {
        dst.copy_from_slice(src);
        *len = at + room;
    }
    room
}

/// One word (letters, digits and apostrophes) seen by the context scanner.
#[derive(Debug, Clone, Copy, Default)]
struct Word {
    /// Lowercase, accent-folded letters and digits (valid up to `len`).
    w: [u8; CTX_WORD],
    len: usize,
    /// Longer than `CTX_WORD`, or holds letters outside the Latin script: matches no cue.
    odd: bool,
    /// Starts with an uppercase letter and is not written in capitals (one capital counts).
    cap: bool,
    /// Written in capitals (at least two letters).
    caps: bool,
    /// Number of ASCII digits (saturating).
    digits: u32,
    /// Number of letters (saturating).
    letters: u32,
    /// First word of a sentence, line or quoted run.
    start: bool,
    /// First word of the text or of a line (after quote markers such as `>`).
    line: bool,
    /// Holds an accented Latin letter.
    accent: bool,
    /// Directly follows a hyphen ("45-year-old").
    hyphen: bool,
    /// Directly follows a sign or a dot ("$36000", ".0324"): an amount or a decimal.
    signed: bool,
    /// First punctuation character after the word, before the next word (0 when none).
    after: char,
    /// Word lists the word is in ([`Lex`] bits), set once when the word is complete.
    lex: u16,
    /// Holds a letter outside the Latin script (Greek, Cyrillic, ...).
    foreign: bool,
}

impl Word {
    /// Appends a block of ASCII letters: lowercase into `w`, counted in `letters`.
    #[inline]
    fn push_ascii_letters(&mut self, block: &LetterBlock) {
        let room = push_lowercase_block(&mut self.w, &mut self.len, block);
        self.odd |= room < block.len;
        self.letters = self.letters.saturating_add(block.len as u32);
    }

    /// Ends the word, `upper` of its letters uppercase: written in capitals when all of at
    /// least two are, and then not counted as capitalised.
    fn finish(&mut self, upper: u32) {
        self.caps = self.letters >= 2 && upper == self.letters;
        self.cap &= !self.caps;
    }

    fn is(&self, s: &[u8]) -> bool {
        !self.odd && self.w.get(..self.len) == Some(s)
    }
    fn text(&self) -> &[u8] {
        if self.odd {
            &[]
        } else {
            self.w.get(..self.len).unwrap_or_default()
        }
    }
    /// Only digits, 1 to 6 of them (a house number).
    fn house_number(&self) -> bool {
        self.letters == 0 && (1..=6).contains(&self.digits)
    }
    /// A house number, which may end in one letter: "6", "6b", "29C", "7в" (the letter of
    /// a non-Latin script is not kept in `w`, so there the pushed bytes are all digits).
    fn house_no(&self) -> bool {
        if self.letters > 1 || !(1..=5).contains(&self.digits) {
            return false;
        }
        let t = self.w.get(..self.len).unwrap_or_default();
        match t.split_last() {
            Some((last, head)) => {
                head.iter().all(u8::is_ascii_digit)
                    && (last.is_ascii_digit() || self.letters == 1 && !head.is_empty())
            }
            None => false,
        }
    }
    /// Four digits that read as a year ([`looks_like_year`]): "1998" is a date more often
    /// than a house number or a postal code.
    fn year_like(&self) -> bool {
        self.digits == 4 && looks_like_year(self.text())
    }
    /// A house number of 2 to 5 digits that does not read as a year, as after a street
    /// name ("Erhvervsvangen 91", "granville st" after "3489").
    fn street_number(&self) -> bool {
        self.house_number() && (2..=5).contains(&self.digits) && !self.year_like()
    }
    /// Holds a digit.
    fn numeric(&self) -> bool {
        self.digits > 0
    }
    /// The packed form of the word ([`lexicon::pack`]); `None` when it matches no cue.
    /// Bytes past `len` are zero (a word starts from `Word::default()` and only appends).
    fn key(&self) -> Option<u128> {
        if self.odd || self.len == 0 {
            return None;
        }
        let mut b = [0u8; lexicon::MAX_WORD];
        if let Some(head) = b.get_mut(..CTX_WORD) {
            head.copy_from_slice(&self.w);
        }
        Some(u128::from_le_bytes(b))
    }
    /// Whether the word is in any of the word lists `bits` ([`Lex`] constants).
    fn in_list(&self, bits: u16) -> bool {
        self.lex & bits != 0
    }
}

/// Word-list membership bits of a context word, looked up once per word (one lookup
/// instead of one comparison chain per list and rule).
struct Lex;

impl Lex {
    const HONORIFIC: u16 = 1;
    const STREET: u16 = 1 << 1;
    const STREET_COMPOUND: u16 = 1 << 2;
    const PERSONAL: u16 = 1 << 3;
    const OPENER: u16 = 1 << 4;
    const RELATIVE: u16 = 1 << 5;
    const ID_DOCUMENT: u16 = 1 << 6;
    /// Words after which any word may complete a name cue ("is", "name", "me", "with").
    const NAME_LEAD: u16 = 1 << 7;
    /// Words a rule tests the current word for ("name", "old", "birth", "number", "id").
    const RULE_WORD: u16 = 1 << 8;
    /// Verbs that a place or address follows within a few words ([`PLACE_VERBS`]).
    const PLACE_VERB: u16 = 1 << 9;
    /// French street types written in lowercase after the house number
    /// ([`FRENCH_STREET_TYPES`]).
    const STREET_LOW: u16 = 1 << 11;
    /// Greek and Cyrillic street types ([`FOREIGN_STREET_WORDS`]), found by
    /// [`Word::foreign`].
    const FOREIGN_STREET: u16 = 1 << 12;
    /// Cyrillic house-number words ("д.", "буд."), found by [`Word::foreign`].
    const FOREIGN_HOUSE: u16 = 1 << 13;
    /// Cyrillic abbreviations of a settlement ("г." city, "д." village, "пос."), found by
    /// [`Word::foreign`].
    const FOREIGN_PLACE: u16 = 1 << 14;
    /// Lists that only a later word's rule reads: a word in them alone is still plain.
    const LATER: u16 = Lex::OPENER
        | Lex::NAME_LEAD
        | Lex::STREET_LOW
        | Lex::FOREIGN_STREET
        | Lex::FOREIGN_HOUSE
        | Lex::FOREIGN_PLACE;

    /// The lists a packed word ([`Word::key`]) is in.
    fn of(key: Option<u128>) -> u16 {
        static TABLE: OnceLock<WordTable<u16>> = OnceLock::new();
        let Some(key) = key else { return 0 };
        TABLE
            .get_or_init(|| {
                let lists: [(&[&[u8]], u16); 10] = [
                    (&[b"is", b"name", b"me", b"with"], Lex::NAME_LEAD),
                    (
                        &[b"name", b"old", b"birth", b"number", b"id"],
                        Lex::RULE_WORD,
                    ),
                    (HONORIFICS, Lex::HONORIFIC),
                    (STREET_WORDS, Lex::STREET),
                    (PERSONAL_CONTEXT, Lex::PERSONAL),
                    (SENTENCE_OPENERS, Lex::OPENER),
                    (RELATIVES, Lex::RELATIVE),
                    (ID_DOCUMENTS, Lex::ID_DOCUMENT),
                    (PLACE_VERBS, Lex::PLACE_VERB),
                    (FRENCH_STREET_TYPES, Lex::STREET_LOW),
                ];
                WordTable::new(
                    lists
                        .into_iter()
                        .flat_map(|(words, bit)| words.iter().map(move |&w| (w, bit))),
                    |a, b| a | b,
                )
            })
            .get_packed(key)
    }

    /// The Greek and Cyrillic lists a word with letters of those scripts is in, by its
    /// [`Word::foreign`] hash (a short linear search: such words are rare in the text this
    /// scanner sees, and only they come here).
    #[cold]
    fn of_foreign(hash: u64) -> u16 {
        static TABLE: OnceLock<Vec<(u64, u16)>> = OnceLock::new();
        TABLE
            .get_or_init(|| {
                let street = FOREIGN_STREET_WORDS
                    .iter()
                    .map(|w| (foreign_hash(w), Lex::FOREIGN_STREET));
                let house = ["д", "дом", "буд", "будинок"]
                    .iter()
                    .map(|w| (foreign_hash(w), Lex::FOREIGN_HOUSE));
                let place = ["г", "д", "к", "с", "п", "пос", "дер", "ст", "м", "смт"]
                    .iter()
                    .map(|w| (foreign_hash(w), Lex::FOREIGN_PLACE));
                street.chain(house).chain(place).collect()
            })
            .iter()
            .filter(|(h, _)| *h == hash)
            .fold(0, |acc, (_, bit)| acc | bit)
    }
}

/// Folds one letter of a script other than Latin, lowercased, into a word's
/// [`Word::foreign`] hash.
fn foreign_fold(hash: &mut Fnv, c: char) {
    hash.char(c.to_lowercase().next().unwrap_or(c));
}

/// The [`Word::foreign`] hash of a lowercase word.
fn foreign_hash(w: &str) -> u64 {
    let mut h = Fnv::new();
    w.chars().for_each(|c| foreign_fold(&mut h, c));
    h.finish()
}

/// Greek and Cyrillic street types, lowercase, as Greek, Russian, Ukrainian, Bulgarian,
/// Serbian and Macedonian addresses write them before or after the street's name, full or
/// abbreviated ("ул. Ленина 5", "вулиця Шевченка, буд. 82", "Οδός Αθηνάς 12").
const FOREIGN_STREET_WORDS: &[&str] = &[
    "οδός",
    "οδος",
    "λεωφόρος",
    "λεωφορος",
    "λεωφ",
    "πλατεία",
    "πλατεια",
    "улица",
    "ул",
    "проспект",
    "пр",
    "переулок",
    "пер",
    "набережная",
    "наб",
    "аллея",
    "алл",
    "шоссе",
    "ш",
    "бульвар",
    "бул",
    "площадь",
    "пл",
    "проезд",
    "тупик",
    "вулиця",
    "вул",
    "провулок",
    "пров",
    "площа",
    "узвіз",
    "булевард",
    "булевар",
];

/// Street types written before the street's name, capitalised, in Spanish, Portuguese,
/// Italian, Romanian, Catalan, French and Polish addresses ("Avenida de Florinda Nicolau
/// 56", "Soseaua Ionescu Nr. 92", "Via Rossi 12"); abbreviations of one or two letters but
/// "Av" count only before a dot ("Av. Chaco 76", "R. Faria, 7", "C. de Alcalá 21").
fn is_street_first(w: &[u8]) -> bool {
    matches!(
        w,
        // Spanish.
        b"calle"
            | b"avenida"
            | b"avda"
            | b"av"
            | b"c"
            | b"paseo"
            | b"pasaje"
            | b"psje"
            | b"camino"
            | b"carretera"
            | b"ronda"
            | b"plaza"
            | b"alameda"
            | b"rambla"
            | b"vial"
            | b"travesia"
            | b"glorieta"
            | b"cuesta"
            | b"callejon"
            | b"urbanizacion"
            | b"bulevar"
            | b"privada"
            | b"cerrada"
            | b"andador"
            | b"circuito"
            | b"prolongacion"
            | b"pasadizo"
            | b"acceso"
            | b"viaducto"
            | b"corredor"
            | b"calzada"
            | b"carrera"
            | b"cra"
            | b"cr"
            | b"kr"
            | b"diagonal"
            | b"transversal"
            // Portuguese.
            | b"rua"
            | b"r"
            | b"travessa"
            | b"ladeira"
            | b"largo"
            | b"praca"
            | b"estrada"
            | b"rodovia"
            | b"quadra"
            | b"esplanada"
            | b"viaduto"
            | b"beco"
            | b"vila"
            | b"viela"
            | b"setor"
            | b"colonia"
            | b"trevo"
            | b"favela"
            | b"conjunto"
            | b"fazenda"
            | b"chacara"
            | b"sitio"
            | b"morro"
            // Italian.
            | b"via"
            | b"viale"
            | b"corso"
            | b"piazza"
            | b"piazzale"
            | b"vicolo"
            | b"contrada"
            | b"rotonda"
            | b"canale"
            | b"strada"
            | b"borgo"
            | b"lungomare"
            | b"salita"
            | b"vico"
            | b"stretto"
            | b"incrocio"
            | b"traversa"
            // Romanian.
            | b"soseaua"
            | b"sos"
            | b"bulevardul"
            | b"bd"
            | b"calea"
            | b"aleea"
            | b"splaiul"
            | b"intrarea"
            | b"piata"
            | b"drumul"
            | b"str"
            // Catalan, French, Polish.
            | b"carrer"
            | b"rue"
            | b"avenue"
            | b"boulevard"
            | b"chemin"
            | b"allee"
            | b"impasse"
            | b"quai"
            | b"ulica"
            | b"aleja"
            | b"al"
            | b"plac"
            | b"pl"
    )
}

/// French street types written in lowercase between the house number and the name ("12
/// rue du Moulin", "57, boulevard de Raynaud"). The ones that are also English words
/// ("place", "route", "passage", "square", "cours") count only before a particle ("3
/// place de la Gare").
const FRENCH_STREET_TYPES: &[&[u8]] = &[
    b"rue",
    b"avenue",
    b"boulevard",
    b"allee",
    b"chemin",
    b"impasse",
    b"quai",
    b"montee",
    b"rang",
    b"place",
    b"route",
    b"passage",
    b"square",
    b"cours",
];

/// Courtesy titles that precede a name.
const HONORIFICS: &[&[u8]] = &[
    b"mr", b"mrs", b"ms", b"miss", b"mx", b"dr", b"prof", b"sir", b"madam", b"dame", b"mme",
    b"mlle", b"herr", b"frau", b"sr", b"sra", b"srta",
];

/// Street words matched whole.
const STREET_WORDS: &[&[u8]] = &[
    b"street",
    b"st",
    b"avenue",
    b"ave",
    b"road",
    b"rd",
    b"boulevard",
    b"blvd",
    b"lane",
    b"ln",
    b"drive",
    b"dr",
    b"court",
    b"ct",
    b"way",
    b"place",
    b"pl",
    b"terrace",
    b"square",
    b"sq",
    b"highway",
    b"hwy",
    b"parkway",
    b"pkwy",
    b"circle",
    b"trail",
    b"plaza",
    b"rue",
    b"via",
    b"calle",
    b"avenida",
    b"rua",
    b"str",
    b"piazza",
    b"viale",
    b"corso",
    b"carrer",
    b"ulica",
    b"utca",
    b"strasse",
    b"gasse",
    b"platz",
    b"allee",
    b"avda",
];

/// Street suffixes that count only in "house number, capitalised name, suffix" (see
/// [`ContextScanner::word`]); as words of their own they are too common. The street types of
/// postal address conventions (USPS Publication 28, Royal Mail).
fn is_street_suffix(w: &[u8]) -> bool {
    matches!(
        w,
        b"crescent"
            | b"close"
            | b"mews"
            | b"grove"
            | b"gardens"
            | b"bypass"
            | b"causeway"
            | b"crossing"
            | b"dam"
            | b"lodge"
            | b"squares"
            | b"heights"
            | b"ridge"
            | b"loop"
            | b"pike"
            | b"turnpike"
            | b"row"
            | b"walk"
            | b"alley"
            | b"expressway"
            | b"freeway"
            | b"junction"
            | b"landing"
            | b"manor"
            | b"meadow"
            | b"meadows"
            | b"orchard"
            | b"passage"
            | b"path"
            | b"quay"
            | b"wharf"
            | b"esplanade"
            | b"promenade"
            | b"underpass"
            | b"overpass"
            | b"viaduct"
            | b"vista"
            | b"glen"
            | b"knoll"
            | b"hollow"
            | b"cove"
            | b"creek"
            | b"estates"
            // Place-like ones, common in generated and real addresses ("119 Nino Point",
            // "71 Berg Hills").
            | b"point"
            | b"points"
            | b"port"
            | b"hill"
            | b"hills"
            | b"flats"
            | b"falls"
            | b"springs"
            | b"pines"
            | b"plains"
            | b"shore"
            | b"shores"
            | b"valley"
            | b"village"
            | b"ville"
            | b"mill"
            | b"mills"
            | b"harbor"
            | b"harbour"
            | b"haven"
            | b"brook"
            | b"brooks"
            | b"canyon"
            | b"cliffs"
            | b"crest"
            | b"dale"
            | b"ferry"
            | b"ford"
            | b"forge"
            | b"forks"
            | b"fort"
            | b"inlet"
            | b"islands"
            | b"knolls"
            | b"lake"
            | b"lakes"
            | b"mountain"
            | b"prairie"
            | b"ranch"
            | b"rapids"
            | b"shoals"
            | b"summit"
            // The rest of the USPS street types (Publication 28, appendix C1) and their
            // plurals, as generated addresses use them ("90842 Vincent Ports", "83898 John
            // Tunnel", "46820 Johnny Circles"): measured on generated addresses, these
            // forms were missed.
            | b"annex"
            | b"arcade"
            | b"bayou"
            | b"beach"
            | b"bend"
            | b"bluff"
            | b"bluffs"
            | b"bottom"
            | b"branch"
            | b"bridge"
            | b"burg"
            | b"burgs"
            | b"camp"
            | b"cape"
            | b"center"
            | b"centers"
            | b"circles"
            | b"cliff"
            | b"club"
            | b"common"
            | b"commons"
            | b"corner"
            | b"corners"
            | b"course"
            | b"courts"
            | b"coves"
            | b"crossroad"
            | b"crossroads"
            | b"curve"
            | b"divide"
            | b"drives"
            | b"estate"
            | b"extension"
            | b"extensions"
            | b"fields"
            | b"fork"
            | b"forest"
            | b"forges"
            | b"fords"
            | b"garden"
            | b"gateway"
            | b"glens"
            | b"green"
            | b"greens"
            | b"groves"
            | b"harbors"
            | b"isle"
            | b"island"
            | b"junctions"
            | b"key"
            | b"keys"
            | b"lights"
            | b"loaf"
            | b"lock"
            | b"locks"
            | b"mall"
            | b"manors"
            | b"mission"
            | b"motorway"
            | b"mountains"
            | b"neck"
            | b"oval"
            | b"parks"
            | b"parkways"
            | b"pine"
            | b"plain"
            | b"ports"
            | b"radial"
            | b"ramp"
            | b"rest"
            | b"ridges"
            | b"river"
            | b"roads"
            | b"route"
            | b"shoal"
            | b"skyway"
            | b"spur"
            | b"spurs"
            | b"station"
            | b"stravenue"
            | b"stream"
            | b"streets"
            | b"throughway"
            | b"trace"
            | b"track"
            | b"trafficway"
            | b"tunnel"
            | b"union"
            | b"unions"
            | b"valleys"
            | b"view"
            | b"views"
            | b"villages"
            | b"walks"
            | b"ways"
            | b"wells"
            // Australian and New Zealand ones ("339 Martin Parklands", "841 Stuart
            // Concourse").
            | b"parklands"
            | b"concourse"
            | b"retreat"
            | b"cutting"
            | b"grange"
    )
}

/// Words that name a part of a document or a series, which a number may follow and
/// precede ("Table 3 Figure 4", "Chapter 12 Section 3"): not a street or a place.
fn is_document_part(w: &[u8]) -> bool {
    matches!(
        w,
        b"table"
            | b"figure"
            | b"fig"
            | b"chapter"
            | b"section"
            | b"part"
            | b"page"
            | b"exhibit"
            | b"problem"
            | b"question"
            | b"exercise"
            | b"example"
            | b"step"
            | b"level"
            | b"grade"
            | b"class"
            | b"type"
            | b"model"
            | b"version"
            | b"year"
            | b"round"
            | b"unit"
            | b"item"
            | b"line"
            | b"row"
            | b"column"
            | b"volume"
            | b"vol"
            | b"issue"
            | b"article"
            | b"rule"
            | b"case"
            | b"phase"
            | b"stage"
            | b"day"
            | b"week"
            | b"group"
            | b"sample"
            | b"trial"
            | b"test"
            | b"experiment"
            | b"room"
            | b"apollo"
    )
}

/// Places whose location a sentence may give as an address ("the restaurant is at ...").
fn is_venue(w: &[u8]) -> bool {
    matches!(
        w,
        b"station"
            | b"restaurant"
            | b"office"
            | b"offices"
            | b"shop"
            | b"store"
            | b"hotel"
            | b"house"
            | b"apartment"
            | b"flat"
            | b"building"
            | b"clinic"
            | b"pharmacy"
            | b"cafe"
            | b"venue"
            | b"warehouse"
            | b"stop"
    )
}

/// Lowercase words inside a place or street name ("Quinta de São Tiago", "Rua da Prata").
fn is_name_particle(w: &[u8]) -> bool {
    matches!(
        w,
        b"de"
            | b"da"
            | b"do"
            | b"dos"
            | b"das"
            | b"del"
            | b"della"
            | b"di"
            | b"du"
            | b"des"
            | b"la"
            | b"le"
            | b"van"
            | b"von"
            | b"der"
            | b"den"
            | b"y"
    )
}

/// A postal code written in two groups of digits, `first` then `second`, one space or a
/// hyphen apart, as in Swedish, Greek, Czech and Slovak ("840 24"), Portuguese
/// ("3610-114"), Brazilian ("01310-100") and Polish ("00-950") addresses.
fn split_postal_code(first: Word, second: Word) -> bool {
    first.house_number()
        && second.house_number()
        && matches!(first.after, '\0' | '-')
        && matches!(
            (first.digits, second.digits),
            (3, 2) | (4, 3) | (5, 3) | (2, 3)
        )
}

/// Four digits that read as a year from 1000 to 2099.
fn looks_like_year(d: &[u8]) -> bool {
    matches!(d, [b'1', ..] | [b'2', b'0', ..]) && d.len() == 4
}

/// Compound street names ("Koskikatu", "Mellemvej", "Hauptstraße", "Hammarvägen"): a word
/// of at least two letters before one of the street types that German, Dutch, Scandinavian
/// and Finnish addresses join to the street's name ("Lizedreef", "Mikasteeg", "Asptorget",
/// "Paulsenvollen", "Louhikkopolku", "Gstreinplatz", "Schusterstr."). Measured on generated
/// addresses, single-word streets of these forms were missed. English words ending in
/// "-ring" ("during", "string", "bearing") are not streets.
fn street_compound(w: &[u8]) -> bool {
    const SUFFIXES: [&[u8]; 66] = [
        b"strasse",
        b"strase",
        b"gasse",
        b"weg",
        b"vej",
        b"vei",
        b"veien",
        b"gata",
        b"gatan",
        b"gade",
        b"katu",
        b"kuja",
        b"tie",
        b"straat",
        b"laan",
        b"vegur",
        b"vagen",
        b"vegen",
        // German.
        b"platz",
        b"allee",
        b"ring",
        b"damm",
        b"ufer",
        b"steig",
        b"pfad",
        b"str",
        b"chaussee",
        b"stieg",
        // Dutch.
        b"dreef",
        b"baan",
        b"steeg",
        b"plein",
        b"singel",
        b"gracht",
        b"kade",
        b"dijk",
        b"hof",
        b"pad",
        // Norwegian, Swedish, Danish.
        b"stien",
        b"svingen",
        b"bakken",
        b"backen",
        b"haugen",
        b"jordet",
        b"tunet",
        b"vollen",
        b"stykket",
        b"holtet",
        b"skogen",
        b"sletta",
        b"kroken",
        b"plassen",
        b"lunden",
        b"grenda",
        b"stigen",
        b"torget",
        b"gangen",
        b"leden",
        b"plads",
        // Finnish.
        b"polku",
        b"kaari",
        b"bulevardi",
        b"rinne",
        b"raitti",
        b"vayla",
        b"aukio",
    ];
    // Most words are rejected on their last three letters alone, looked up once: the
    // suffixes that end in them, as bits of `SUFFIXES`.
    const TAILS: [&[u8]; 53] = [
        b"sse", b"ase", b"weg", b"vej", b"vei", b"ien", b"ata", b"tan", b"ade", b"atu", b"uja",
        b"tie", b"aat", b"aan", b"gur", b"gen", b"atz", b"lee", b"ing", b"amm", b"fer", b"eig",
        b"fad", b"str", b"see", b"ieg", b"eef", b"eeg", b"ein", b"gel", b"cht", b"ijk", b"hof",
        b"pad", b"ken", b"det", b"net", b"len", b"ket", b"tet", b"tta", b"sen", b"den", b"nda",
        b"get", b"ads", b"lku", b"ari", b"rdi", b"nne", b"tti", b"yla", b"kio",
    ];
    // One bit per suffix.
    const _: () = assert!(SUFFIXES.len() <= 128);
    static BY_TAIL: OnceLock<WordTable<u128>> = OnceLock::new();
    let tail = match w {
        [.., a, b, c] if w.len() >= 5 => [*a, *b, *c],
        _ => return false,
    };
    let by_tail = BY_TAIL.get_or_init(|| {
        WordTable::new(
            TAILS.iter().map(|&t| {
                let bits = SUFFIXES
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.ends_with(t))
                    .fold(0u128, |acc, (k, _)| acc | 1 << k);
                (t, bits)
            }),
            |a, b| a | b,
        )
    });
    let mut candidates = by_tail.get(&tail);
    if candidates == 0 {
        return false;
    }
    if tail == *b"ing"
        && (w.ends_with(b"string")
            || w.ends_with(b"spring")
            || matches!(
                w.get(w.len().saturating_sub(5)),
                Some(b'a' | b'e' | b'i' | b'o' | b'u' | b'y' | b'r')
            ))
    {
        return false;
    }
    while candidates != 0 {
        let k = candidates.trailing_zeros() as usize;
        candidates &= candidates - 1;
        if SUFFIXES
            .get(k)
            .is_some_and(|s| w.len() >= s.len() + 2 && w.ends_with(s))
        {
            return true;
        }
    }
    false
}

/// Words that make a nearby run of capitalised words read as a person's name.
const PERSONAL_CONTEXT: &[&[u8]] = &[
    b"contact",
    b"email",
    b"phone",
    b"born",
    b"lives",
    b"address",
    b"customer",
    b"patient",
    b"account",
    b"card",
    b"ssn",
    b"beneficiary",
    b"client",
    b"tenant",
    b"applicant",
    b"passenger",
    b"employee",
    b"cardholder",
    b"spouse",
    b"wife",
    b"husband",
    b"grandfather",
    b"grandmother",
    b"nephew",
    b"niece",
    b"mobile",
    b"birthday",
    b"username",
    b"signed",
    b"guardian",
];

/// Common first words of a sentence (which can follow "Species B." without being a
/// surname).
const SENTENCE_OPENERS: &[&[u8]] = &[
    b"the",
    b"these",
    b"this",
    b"that",
    b"those",
    b"what",
    b"which",
    b"who",
    b"how",
    b"why",
    b"when",
    b"where",
    b"if",
    b"it",
    b"its",
    b"they",
    b"he",
    b"she",
    b"we",
    b"you",
    b"in",
    b"on",
    b"at",
    b"for",
    b"a",
    b"an",
    b"there",
    b"then",
    b"find",
    b"assume",
    b"suppose",
    b"let",
    b"calculate",
    b"determine",
    b"is",
    b"are",
    b"does",
    b"do",
    b"as",
    b"after",
    b"both",
    b"each",
    b"all",
];

/// Relatives and close people named after "my" ("my son Lukas").
const RELATIVES: &[&[u8]] = &[
    b"kid",
    b"son",
    b"daughter",
    b"wife",
    b"husband",
    b"brother",
    b"sister",
    b"mother",
    b"father",
    b"mom",
    b"dad",
    b"friend",
    b"boss",
    b"partner",
    b"grandson",
    b"granddaughter",
    b"cousin",
    b"uncle",
    b"aunt",
];

/// Document and account words that precede an identifying number.
const ID_DOCUMENTS: &[&[u8]] = &[
    b"license",
    b"licence",
    b"passport",
    b"routing",
    b"dob",
    b"ssn",
    b"tin",
    b"ein",
    b"medicare",
    b"medicaid",
    b"nino",
];

/// Verbs after which, within a few words, a street name and a house number read as an
/// address ("lives on the north side of Joaquin Suarez 2906", "please return to Leon and
/// Eyrarodda 66").
const PLACE_VERBS: &[&[u8]] = &[
    b"lives",
    b"live",
    b"living",
    b"located",
    b"situated",
    b"return",
    b"returned",
    b"deliver",
    b"delivered",
    b"ship",
    b"shipped",
    b"moved",
];

/// Weekday names ("delivered on Friday 13" is a date, not a street).
fn is_weekday(w: &[u8]) -> bool {
    matches!(
        w,
        b"monday" | b"tuesday" | b"wednesday" | b"thursday" | b"friday" | b"saturday" | b"sunday"
    )
}

/// Street compounds in lowercase text: a word of eight letters or more ending in a street
/// type that no common English word ends in ("kopfhölzistrasse", "torpegårdsvej",
/// "siikasaarentie", "eichendorffstr"); unlike [`street_compound`], which also reads
/// "-ring", "-hof" and "-pad" and so needs a capital.
fn lowercase_street_compound(w: &[u8]) -> bool {
    const SUFFIXES: [&[u8]; 18] = [
        b"strasse", b"strase", b"str", b"gasse", b"straat", b"vej", b"veien", b"gata", b"gatan",
        b"gade", b"katu", b"kuja", b"tie", b"vagen", b"vegen", b"platz", b"gracht", b"plads",
    ];
    w.len() >= 8 && w.iter().all(u8::is_ascii_lowercase) && SUFFIXES.iter().any(|x| w.ends_with(x))
}

/// Units of length and time ("60 miles road", "10 minutes walk"): not a street name.
fn is_unit_word(w: &[u8]) -> bool {
    matches!(
        w,
        b"miles"
            | b"mile"
            | b"feet"
            | b"foot"
            | b"yards"
            | b"meters"
            | b"metres"
            | b"kilometers"
            | b"kilometres"
            | b"blocks"
            | b"minutes"
            | b"hours"
            | b"steps"
            | b"lanes"
    )
}

/// Words that count or measure what follows a number ("over 100 street children", "only
/// 3 street lights"): not the name of a street before its house number.
fn is_quantity_word(w: &[u8]) -> bool {
    matches!(
        w,
        b"than"
            | b"over"
            | b"about"
            | b"around"
            | b"some"
            | b"many"
            | b"only"
            | b"just"
            | b"with"
            | b"and"
            | b"from"
            | b"into"
            | b"under"
            | b"nearly"
            | b"almost"
            | b"approximately"
            | b"roughly"
            | b"number"
            | b"route"
            | b"every"
            | b"per"
            | b"has"
            | b"had"
            | b"have"
            | b"were"
            | b"was"
            | b"are"
            | b"total"
            | b"counted"
            | b"found"
            | b"lined"
            | b"weigh"
            | b"weighs"
            | b"weighed"
            | b"weighing"
            | b"weight"
    )
}

/// Month names and their abbreviations ("on June 1" is a date, not a house number).
fn is_month(w: &[u8]) -> bool {
    matches!(
        w,
        b"january"
            | b"february"
            | b"march"
            | b"april"
            | b"may"
            | b"june"
            | b"july"
            | b"august"
            | b"september"
            | b"october"
            | b"november"
            | b"december"
    ) || super::segment::is_month_abbreviation(w)
}

/// Scanner state: the last few words and where context cues were last seen.
struct ContextScanner {
    recent: [Word; CTX_WINDOW],
    n: usize,
    /// Capitalised words in a row (not starting a sentence) ending at the last word.
    cap_run: usize,
    /// Capitalised words in a row (a sentence start included) ending at the last word, and
    /// whether one of them holds an accented letter.
    any_run: usize,
    any_run_accent: bool,
    /// Word index after the last run of two or more capitalised words.
    name_run_at: Option<usize>,
    /// Word index after the last personal-context word.
    context_at: Option<usize>,
    /// Word index after the last "name".
    name_at: Option<usize>,
    /// Word index after the last "address".
    address_at: Option<usize>,
    /// The same for "address" in lowercase (a postal address, not a speech: "Logan's
    /// Address", "Address attributed to Logan").
    address_lower_at: Option<usize>,
    /// Word index after the last place verb ([`PLACE_VERBS`]).
    place_verb_at: Option<usize>,
    /// Word index after the last identity-document cue.
    id_at: Option<usize>,
    /// Word index after the last Greek or Cyrillic street type.
    foreign_street_at: Option<usize>,
    flags: RiskFlags,
}

impl ContextScanner {
    fn new() -> Self {
        ContextScanner {
            recent: [Word::default(); CTX_WINDOW],
            n: 0,
            cap_run: 0,
            any_run: 0,
            any_run_accent: false,
            name_run_at: None,
            context_at: None,
            id_at: None,
            name_at: None,
            address_at: None,
            address_lower_at: None,
            place_verb_at: None,
            foreign_street_at: None,
            flags: RiskFlags::NONE,
        }
    }

    /// The word `k` back (0 = the current word); an empty word before the text.
    fn back(&self, k: usize) -> Word {
        if k >= self.n || k >= CTX_WINDOW {
            Word::default()
        } else {
            self.recent
                .get((self.n - 1 - k) % CTX_WINDOW)
                .copied()
                .unwrap_or_default()
        }
    }

    fn within(at: Option<usize>, n: usize, k: usize) -> bool {
        at.is_some_and(|a| n - a <= k)
    }

    /// Whether the words from `k` back to "in" or "at" are the start of a place name: up to
    /// three capitalised words or name particles, one space apart, after which come the
    /// name's last word and a postal code ("in Quinta de São Tiago 3610-114": from "São"
    /// back). With none of them (the name one word long), the word `k` back is "in" or "at".
    fn place_after_in(&self, k: usize) -> bool {
        for j in k..k + 4 {
            let w = self.back(j);
            if matches!(w.text(), b"in" | b"at") {
                return true;
            }
            let name_word =
                (w.cap || w.caps) && w.letters >= 2 && !w.numeric() || is_name_particle(w.text());
            if !name_word || w.after != '\0' {
                return false;
            }
        }
        false
    }

    /// Whether the current word, a house number, ends a street written type first: a
    /// capitalised street type ([`is_street_first`]; lowercase "rue", "chemin", "ulica" and
    /// the like too), one to five capitalised name words or particles ("de", "da", "del"),
    /// perhaps a comma or a number word ("Nr.", "No", "N°", "#"), then the number:
    /// "Avenida de Florinda Nicolau 56", "Ladeira Fonseca, 99", "Soseaua Ionescu Nr. 92",
    /// "Calle 5 N° 91". A year-like number counts only after a number word ("Via Roma
    /// 1920" may be a date). At least one name word has two letters or more.
    #[inline(never)]
    fn street_type_first(&self) -> bool {
        let cur = self.back(0);
        let mark = self.back(1);
        let marked = matches!(
            mark.text(),
            b"nr" | b"no" | b"n" | b"num" | b"numero" | b"nro"
        ) && matches!(mark.after, '\0' | '.' | '\u{B0}' | '\u{BA}')
            || mark.after == '#';
        if !marked && cur.year_like() {
            return false;
        }
        // "#" follows the word before the number itself ("Cr. 68 # 7-96"): that word is
        // a name part.
        let first = if marked && mark.after != '#' { 2 } else { 1 };
        let mut long_name = false;
        for j in first..first + 6 {
            let w = self.back(j);
            let t = w.text();
            let punct_ok = if j == first {
                matches!(w.after, '\0' | ',' | '#')
            } else {
                w.after == '\0' || w.after == '.' && w.letters <= 2
            };
            // "et al. Science 238": not the Polish "al." (aleja).
            if j > first && is_street_first(t) && !self.back(j + 1).is(b"et") {
                let short = t.len() <= 2;
                let lower_ok = matches!(
                    t,
                    b"rue"
                        | b"chemin"
                        | b"avenue"
                        | b"boulevard"
                        | b"allee"
                        | b"ulica"
                        | b"aleja"
                        | b"al"
                        | b"plac"
                        | b"pl"
                );
                return (w.cap || w.caps || lower_ok)
                    && (if short && !w.is(b"av") {
                        w.after == '.'
                    } else {
                        matches!(w.after, '\0' | '.')
                    })
                    && long_name;
            }
            if !punct_ok {
                return false;
            }
            let name_word = (w.cap || w.caps) && w.letters >= 1 && !w.numeric()
                || j == first && marked && w.house_no() && w.digits <= 3;
            if name_word {
                long_name |= w.letters >= 2 || w.numeric();
            } else if !(is_name_particle(t)
                || matches!(
                    t,
                    b"las" | b"los" | b"el" | b"dei" | b"degli" | b"delle" | b"e"
                ))
            {
                return false;
            }
        }
        false
    }

    /// Whether the current word, a capitalised name, follows a French street type in
    /// lowercase ([`FRENCH_STREET_TYPES`]) and a house number, with up to two particles
    /// between type and name ("12 rue du Moulin", "57, boulevard de Raynaud", "3 place de
    /// la Gare"). The types that are English words count only before a particle.
    #[inline(never)]
    fn french_street(&self) -> bool {
        for j in 1..=3 {
            let w = self.back(j);
            if w.in_list(Lex::STREET_LOW) && !w.cap && !w.caps && w.after == '\0' {
                let num = self.back(j + 1);
                let english = matches!(
                    w.text(),
                    b"place" | b"route" | b"passage" | b"square" | b"cours"
                );
                return num.house_no()
                    && !num.signed
                    && matches!(num.after, '\0' | ',')
                    && (j > 1 || !english);
            }
            if !is_name_particle(w.text()) || w.after != '\0' {
                return false;
            }
        }
        false
    }

    /// Takes the next word; `foreign` is the [`foreign_hash`] of its letters outside the
    /// Latin script (`None` when it has none).
    /// Starts the next word as `w`: it is read in place, in the ring of recent words.
    #[inline]
    fn begin(&mut self, w: Word) {
        if let Some(x) = self.cur() {
            *x = w;
        }
    }

    /// The word being read (started by [`ContextScanner::begin`]).
    #[inline]
    fn cur(&mut self) -> Option<&mut Word> {
        self.recent.get_mut(self.n % CTX_WINDOW)
    }

    /// Ends the word being read, `upper` of its letters uppercase; `foreign` is the
    /// [`foreign_hash`] of its letters outside the Latin script (`None` when it has none).
    /// Then applies the rules to it.
    fn end_word(&mut self, upper: u32, foreign: Option<Fnv>) {
        let n = self.n + 1;
        let Some(cur) = self.recent.get_mut(self.n % CTX_WINDOW) else {
            return;
        };
        cur.finish(upper);
        cur.lex = Lex::of(cur.key());
        let mut foreign_street = false;
        if let Some(hash) = foreign {
            cur.lex |= Lex::of_foreign(hash.finish());
            foreign_street = cur.in_list(Lex::FOREIGN_STREET);
        }
        if street_compound(cur.text()) {
            cur.lex |= Lex::STREET | Lex::STREET_COMPOUND;
        }
        // Most words are plain: lowercase, no digit, in no word list that a rule tests the
        // current word for (openers, name leads and street types written before a name or
        // in lowercase are tested one or more words later). Such a word can only
        // complete a name cue after a `NAME_LEAD` word or a question; every other rule
        // needs a capital, a digit or a listed word, so only the runs are reset.
        let plain = cur.lex & !Lex::LATER == 0 && !cur.cap && !cur.caps && cur.digits == 0;
        if foreign_street {
            self.foreign_street_at = Some(n);
        }
        self.n = n;
        let p1 = self.back(1);
        if plain && !p1.in_list(Lex::NAME_LEAD) && p1.after != '?' {
            self.cap_run = 0;
            self.any_run = 0;
            self.any_run_accent = false;
            return;
        }
        self.rules(p1);
    }

    /// The rules for the word just ended (`back(0)`), `p1` the word before it.
    fn rules(&mut self, p1: Word) {
        let n = self.n;
        let cur = self.back(0);
        let (p2, p3) = (self.back(2), self.back(3));
        let c = cur.text();
        let mut f = RiskFlags::NONE;

        // Names: a courtesy title, an introduction, a greeting or a signature before a
        // capitalised word.
        let p1_cue = p1.text();
        if cur.cap
            && (p1.cap && p1.in_list(Lex::HONORIFIC)
                || matches!(p1_cue, b"named" | b"called") && !p1.hyphen
                || p1.is(b"dear") && p1.cap
                || p1.after == ',' && matches!(p1_cue, b"regards" | b"sincerely" | b"cheers")
                || p2.is(b"i") && p1.is(b"am")
                || p1.is(b"im") && p1.after == '\0'
                || p3.is(b"this") && p2.is(b"is") && p1.cap && p1.after == '\0'
                || matches!(p1_cue, b"said" | b"says" | b"shouted" | b"starring")
                    && p1.after == '\0'
                    && !cur.start
                || p1.is(b"at") && p2.is(b"shouted")
                || p1.is(b"by") && matches!(p2.text(), b"directed" | b"produced")
                || p1.in_list(Lex::RELATIVE) && matches!(p2.text(), b"my" | b"our"))
        {
            f |= RiskFlags::NAME;
        }
        if p2.is(b"name")
            && p1.is(b"is")
            && (cur.cap || matches!(p3.text(), b"my" | b"his" | b"her"))
            || p1.is(b"name") && p1.after == ':'
            || p1.is(b"me") && matches!(p2.text(), b"call" | b"calls" | b"called")
            || p1.is(b"with") && p2.is(b"up") && p3.is(b"follow")
            || p1.after == '?' && (1..=4).any(|k| self.back(k).is(b"name"))
        {
            f |= RiskFlags::NAME;
        }
        // Names with a middle initial: "Hanne I. Kreutzmann", "Kate M Begum".
        if cur.cap
            && cur.letters >= 2
            && p1.cap
            && p1.letters == 1
            && p1.digits == 0
            && (p1.after == '\0' || p1.after == '.' && !cur.in_list(Lex::OPENER))
            && p2.cap
            && p2.letters >= 2
            && p2.after == '\0'
        {
            f |= RiskFlags::NAME;
        }
        // Names: "under my partner's name Ada Li", "the name on the account is wrong, change
        // it to Ada Li".
        if cur.cap && (p1.is(b"name") || p1.is(b"to") && Self::within(self.name_at, n, 12)) {
            f |= RiskFlags::NAME;
        }
        if cur.is(b"name") {
            self.name_at = Some(n);
        }
        if cur.is(b"address") {
            self.address_at = Some(n);
            if !cur.cap && !cur.caps {
                self.address_lower_at = Some(n);
            }
        }
        if cur.in_list(Lex::PLACE_VERB) {
            self.place_verb_at = Some(n);
        }
        // Names: two or three capitalised words near a personal-context word.
        if cur.cap && !cur.start && (self.cap_run == 0 || p1.after == '\0') {
            self.cap_run += 1;
        } else {
            self.cap_run = 0;
        }
        if (2..=3).contains(&self.cap_run) && cur.letters >= 2 {
            self.name_run_at = Some(n);
            if Self::within(self.context_at, n, 5) {
                f |= RiskFlags::NAME;
            }
        }
        // Names: two or three capitalised words, one with an accented letter ("Šárka
        // Ottová"): rare in English text, common in names.
        if cur.cap && (self.any_run == 0 || p1.after == '\0') {
            self.any_run += 1;
            self.any_run_accent |= cur.accent;
        } else {
            self.any_run = usize::from(cur.cap);
            self.any_run_accent = cur.cap && cur.accent;
        }
        if ((2..=3).contains(&self.any_run) && self.any_run_accent && cur.letters >= 2)
            || (cur.cap && cur.accent && !cur.start && cur.letters >= 3)
        {
            f |= RiskFlags::NAME;
        }
        if cur.in_list(Lex::PERSONAL) {
            self.context_at = Some(n);
            if Self::within(self.name_run_at, n, 4) {
                f |= RiskFlags::NAME;
            }
        }

        // A house number, which may end in a letter ("12", "6b").
        let house = cur.house_no();
        // Addresses: a house number before a street word, or a street name before a number.
        let street_cur =
            cur.in_list(Lex::STREET) && (cur.cap || matches!(c, b"rue" | b"str" | b"calle"));
        if street_cur && (1..=4).any(|k| self.back(k).house_number()) {
            f |= RiskFlags::ADDRESS;
        }
        if house
            && (p1.in_list(Lex::STREET_COMPOUND) && p1.cap
                // "Wenke-Wulf-Weg 47", "Anna-Frank-Ring 4": a street type joined by a hyphen.
                || p1.hyphen
                    && p1.cap
                    && matches!(
                        p1_cue,
                        b"weg" | b"ring" | b"platz" | b"strasse" | b"str" | b"gasse" | b"allee"
                    )
                // "Villacher Strasse 89", "Baker Street 221".
                || p1.in_list(Lex::STREET)
                    && p1.cap
                    && p2.cap
                    && p2.letters >= 3
                    && !matches!(p1_cue, b"st" | b"dr" | b"ct" | b"pl" | b"place" | b"way")
                || p2.in_list(Lex::STREET)
                    && p2.cap
                    && p1.cap
                    && !matches!(p2.text(), b"st" | b"dr")
                // "Avda. Costa Brava 14", "Rua Cyro Franco 12".
                || p3.in_list(Lex::STREET)
                    && p3.cap
                    && p2.cap
                    && p1.cap
                    && p2.after == '\0'
                    && !matches!(p3.text(), b"st" | b"dr")
                // Spanish "C/ Señores Curas 88", "C/ Mayor 5" (calle).
                || p3.is(b"c") && p3.cap && p3.after == '/' && p2.cap && p1.cap
                || p2.is(b"c") && p2.cap && p2.after == '/' && p1.cap
                || matches!(p2.text(), b"fpo" | b"apo" | b"dpo")
                // Polish "ul. Słowicza 10", "ul. Więckowskiego Stefana 28".
                || p2.is(b"ul") && p2.after == '.' && p1.cap
                || p3.is(b"ul") && p3.after == '.' && p2.cap && p1.cap
                // Hungarian "Wesselényi u. 94", "hegyalja út 98", "Kossuth utca 12", "Árpád
                // fejedelem útja 62".
                || p1.is(b"u") && p1.after == '.' && p2.cap
                || ((p1.is(b"ut") || p1.is(b"utja")) && p1.accent || p1.is(b"utca"))
                    && p2.letters >= 3
                // Slovenian and Croatian "Gosposka ulica 61", "Dunajska cesta 5".
                || matches!(p1_cue, b"ulica" | b"cesta") && p2.cap && p2.letters >= 3)
        {
            f |= RiskFlags::ADDRESS;
        }
        // A street type before the name and a house number: "Avenida de Florinda Nicolau 56",
        // "Ladeira Fonseca, 99", "Soseaua Ionescu Nr. 92", "Calle 5 N° 91" (see
        // [`ContextScanner::street_type_first`]).
        if house && !cur.signed && self.street_type_first() {
            f |= RiskFlags::ADDRESS;
        }
        // French: a house number, a lowercase street type and a capitalised name, perhaps
        // after particles: "12 rue du Moulin", "57, boulevard de Raynaud", "3 allée des
        // Pins", "1777 avenue Poirier".
        if cur.cap
            && (p1.in_list(Lex::STREET_LOW)
                || p2.in_list(Lex::STREET_LOW)
                || p3.in_list(Lex::STREET_LOW))
            && cur.letters >= 2
            && !cur.numeric()
            && self.french_street()
        {
            f |= RiskFlags::ADDRESS;
        }
        // Hungarian lowercase street types after a capitalised name, before a house number:
        // "Székfai tér 6.", "Petőfi köz 12", "Tisza rakpart 3", "Múzeum körút 14/b". The
        // types that fold to other words ("tér", "köz") count only when written accented.
        if house
            && p2.cap
            && p2.letters >= 3
            && p2.after == '\0'
            && (p1.accent
                && matches!(
                    p1_cue,
                    b"ter" | b"koz" | b"korut" | b"setany" | b"lakotelep"
                )
                || matches!(p1_cue, b"kapu" | b"sor" | b"rakpart" | b"fasor")
                    && !p2.start
                    && !p2.in_list(Lex::OPENER))
        {
            f |= RiskFlags::ADDRESS;
        }
        // Greek and Cyrillic street types up to four words before a house number ("ул.
        // Ленина, 5", "вулиця Шевченка, буд. 82", "Οδός Αθηνάς 12"), and a Cyrillic house
        // word before one ("д. 14").
        if house
            && (p1.in_list(Lex::FOREIGN_HOUSE) && p1.after == '.'
                || Self::within(self.foreign_street_at, n, 4))
        {
            f |= RiskFlags::ADDRESS;
        }
        // A Russian postal code after an abbreviated settlement and its name: "д. Иваново,
        // 772185", "г. Тула 300041".
        if cur.house_number()
            && (5..=6).contains(&cur.digits)
            && p1.cap
            && p2.in_list(Lex::FOREIGN_PLACE)
            && p2.after == '.'
        {
            f |= RiskFlags::ADDRESS;
        }
        // A street name of two capitalised words (or two joined by "and" or a particle such
        // as "de") and a house number of 2 to 5 digits, at most eight words after a place
        // verb or "address": "lives on the north side of Joaquin Suarez 2906", "return to
        // Leon and Eyrarodda 66", "update my address to the same: Aba and Parva Domus
        // 9038". Neither name word starts a sentence or is a month ("moved in. On June
        // 12", "delivered on Friday, May 15").
        let street_name =
            |w: Word| w.cap && !w.start && w.letters >= 3 && w.after == '\0' && !is_month(w.text());
        if cur.street_number()
            && (Self::within(self.place_verb_at, n, 8) || Self::within(self.address_at, n, 8))
            && street_name(p1)
            && !p1.in_list(Lex::HONORIFIC | Lex::OPENER)
            && !is_document_part(p1_cue)
            && (street_name(p2) && !p2.in_list(Lex::HONORIFIC | Lex::OPENER)
                || (p2.is(b"and") || is_name_particle(p2.text())) && street_name(p3))
        {
            f |= RiskFlags::ADDRESS;
        }
        // After a place verb and a preposition, a street of one capitalised name and a
        // house number ("lives on the north side of Erhvervsvangen 91"), or a house number
        // and two capitalised words ("... side of 86 Pavlou Drandaki"). The name is not a
        // month, a weekday or a part of a document ("returned to Chapter 12").
        let preposition = |w: Word| matches!(w.text(), b"of" | b"on" | b"at" | b"to" | b"in");
        if Self::within(self.place_verb_at, n, 8)
            && (cur.street_number()
                && street_name(p1)
                && p1.letters >= 4
                && !p1.in_list(Lex::HONORIFIC | Lex::OPENER)
                && !is_weekday(p1_cue)
                && !is_document_part(p1_cue)
                && preposition(p2)
                || street_name(cur)
                    && street_name(p1)
                    && p2.house_number()
                    && p2.digits <= 5
                    && !p2.year_like()
                    && p2.after == '\0'
                    && !p2.signed
                    && preposition(p3))
        {
            f |= RiskFlags::ADDRESS;
        }
        // "the bus station is on turjaška 22": a venue, "is on" or "is at", one word with an
        // accented letter in any case (not an English word: "is on track 12") and a house
        // number.
        if cur.street_number()
            && p1.letters >= 4
            && p1.accent
            && !p1.numeric()
            && p1.after == '\0'
            && matches!(p2.text(), b"on" | b"at")
            && p3.is(b"is")
            && is_venue(self.back(4).text())
        {
            f |= RiskFlags::ADDRESS;
        }
        // Lowercase text: a street compound with a distinctive suffix before a house
        // number ("the corner of kopfhölzistrasse 45", "18703 torpegårdsvej 54",
        // "eichendorffstr. 41"), and a house number, a name and a street type ending a line
        // ("5189 3489 granville st"). The name does not count or measure ("60 miles road").
        if house
            && !cur.signed
            && !p1.cap
            && !p1.caps
            && matches!(p1.after, '\0' | '.')
            && lowercase_street_compound(p1_cue)
            || matches!(c, b"st" | b"street" | b"ave" | b"avenue" | b"rd" | b"road")
                && !cur.cap
                && p1.letters >= 4
                && !p1.numeric()
                && !p1.cap
                && p1.after == '\0'
                && !p1.in_list(Lex::OPENER)
                && !is_quantity_word(p1_cue)
                && !is_unit_word(p1_cue)
                && p2.street_number()
                && p2.after == '\0'
                && !p2.signed
        {
            f |= RiskFlags::ADDRESS;
        }
        // A name, a house number and "street" written after it: "refers to Moerbeigaarde 35
        // street in Zoetermeer", "lives on rue de la rulles 226 street", "the corner of r
        // nossa senhora fátima 119 st.". The name is a word of three letters or more that
        // does not count, measure or weigh ("the 35 street lamps", "over 100 street
        // children", "weighs 12 st"), and not a part of a document.
        if matches!(c, b"street" | b"st")
            && p1.house_number()
            && p1.digits <= 4
            && !p1.year_like()
            && p1.after == '\0'
            && !p1.signed
            && p2.letters >= 3
            && !p2.numeric()
            && matches!(p2.after, '\0' | '.')
            && !p2.in_list(Lex::OPENER)
            && !is_document_part(p2.text())
            && !is_quantity_word(p2.text())
        {
            f |= RiskFlags::ADDRESS;
        }
        // "the early shows on Berg Hills Street": a street named by two capitalised words
        // after "on", "at" or "in", without a house number (one word is too often a
        // landmark: "on Wall Street").
        if cur.cap
            && matches!(c, b"street" | b"avenue" | b"road" | b"boulevard" | b"lane")
            && p1.cap
            && p1.after == '\0'
            && p2.cap
            && !p2.start
            && p2.after == '\0'
            && p2.letters >= 2
            && !p2.in_list(Lex::HONORIFIC)
            && matches!(p3.text(), b"on" | b"at" | b"in")
        {
            f |= RiskFlags::ADDRESS;
        }
        // "22 Pollen Crescent", "41 Popović Dam": a house number, a capitalised name and a
        // capitalised street suffix that is too common a word to count on its own; not a
        // numbered part of a document ("Chapter 3 Lake Point").
        if cur.cap
            && p1.cap
            && !p1.start
            && self.back(2).house_number()
            && is_street_suffix(c)
            && !is_document_part(self.back(3).text())
        {
            f |= RiskFlags::ADDRESS;
        }
        // A street line of an address block: a line (or a part after a label and a colon,
        // or after a name and a comma: "at Locavore, 641 Dašická 688") that starts with a
        // house number, one or two capitalised words and a number of 2 to 4 digits ("4596
        // Tylova 285", "5551 Tjalling Harkeswei 125"), unless the words name a part of a
        // document ("3 Table 4"). A number before the comma is a thousands group ("$22,150
        // Accounts Payable $28,500"). A one-digit number is left out: it is often the integer part of a decimal
        // ("Alanine 2.34"), and the word scanner does not yet see what follows it.
        let (name, first, before) = if p2.cap && p2.after == '\0' && !p2.numeric() {
            (p2, p3, self.back(4))
        } else {
            (p1, p2, p3)
        };
        if cur.house_number()
            && (2..=4).contains(&cur.digits)
            && p1.cap
            && p1.letters >= 3
            && p1.after == '\0'
            && name.letters >= 3
            && first.house_number()
            && (first.line
                || before.after == ':'
                || before.after == ',' && !before.numeric()
                // "It's in 964 Viru 65", "sent to 287 Jaanioja 13".
                || matches!(before.text(), b"in" | b"at" | b"to")
                    && before.after == '\0'
                    && !first.year_like())
            && first.after == '\0'
            && !is_document_part(p1.text())
            && !is_document_part(name.text())
        {
            f |= RiskFlags::ADDRESS;
        }
        // A postal code of 4 to 6 digits (not a year) after a capitalised place or country
        // name: on a line that starts with the name, one or two words ("Denmark 29587",
        // "South Africa 70651", "Cyprus (Greek) 25572"), or after "in" / "at" and a name of
        // up to four words ("in Costamezzana 43015", "in Quinta de São Tiago 3610-114").
        // Codes written in two groups count whole: "840 24", "3610-114" (see
        // [`split_postal_code`]). And the US form "City, ST 12345" (a comma, a two-letter
        // state code in capitals, five digits).
        let place = |w: Word| (w.cap || w.caps) && w.letters >= 3 && !w.numeric();
        let split = split_postal_code(p1, cur);
        let (last, before) = if split { (p2, 3) } else { (p1, 2) };
        if cur.house_number()
            && ((4..=6).contains(&cur.digits) && !cur.year_like() || split)
            && place(last)
            && !last.in_list(Lex::OPENER)
            && !is_document_part(last.text())
            && (last.line
                || place(self.back(before)) && self.back(before).line
                || self.place_after_in(before))
            || cur.house_number()
                && cur.digits == 5
                && p1.caps
                && p1.letters == 2
                && p1.after == '\0'
                && p2.after == ','
                && (p2.cap || p2.caps)
        {
            f |= RiskFlags::ADDRESS;
        }
        // A postal code of 4 to 6 digits (not a year) before a capitalised place name, as
        // most of Europe writes it: at the start of a line ("75008 Paris", "8010 Graz") or
        // after "in" or "to" ("we are based in 20095 Hamburg"). Measured on generated
        // addresses, the code-first form was missed.
        if place(cur)
            && !cur.start
            && !cur.in_list(Lex::OPENER)
            && !is_document_part(c)
            && p1.house_number()
            && (4..=6).contains(&p1.digits)
            && !p1.year_like()
            && p1.after == '\0'
            && !p1.signed
            && (p1.line || matches!(p2.text(), b"in" | b"to"))
        {
            f |= RiskFlags::ADDRESS;
        }
        // The same at the start of a line with the code in two groups or after a country
        // letter: "3749-005 Costa da Caparica", "62-794 Tychy", "TK 638 60 Ναύπλιο",
        // "H-1743 Miskolc".
        if place(cur)
            && !cur.start
            && !cur.in_list(Lex::OPENER)
            && p1.after == '\0'
            && (split_postal_code(p2, p1) && (p2.line || p3.line && p3.caps && p3.letters == 2)
                || p1.house_number()
                    && (4..=5).contains(&p1.digits)
                    && p1.hyphen
                    && p2.line
                    && (p2.cap || p2.caps)
                    && p2.letters <= 2)
        {
            f |= RiskFlags::ADDRESS;
        }
        // A Greek, Cyrillic or Armenian capitalised name of four letters or more directly
        // before a house number: "Καμπούρη 39", "Букурешка 423". Text in those scripts is
        // rare in the prompts this filter sees and seldom puts a number after a name
        // otherwise.
        if house
            && !cur.signed
            && p1.foreign
            && p1.cap
            && p1.letters >= 4
            && p1.after == '\0'
            && p1.digits == 0
        {
            f |= RiskFlags::ADDRESS;
        }
        // Military and diplomatic addresses in lowercase: "unit 1009 box 0219".
        if cur.numeric() && p1.is(b"box") && p2.house_number() && p3.is(b"unit") {
            f |= RiskFlags::ADDRESS;
        }
        // Apartment, suite, unit and post-office box numbers; in lowercase text only "apt."
        // and a suite number of three or more digits ("fourth avenue suite 112": a test
        // suite or a unit of measure has a shorter one).
        if cur.numeric()
            && (p1.cap
                || p1.is(b"apt") && p1.after == '.'
                || p1.is(b"suite") && cur.house_number() && cur.digits >= 3)
            && matches!(p1.after, '\0' | '.' | '#')
            && matches!(p1_cue, b"apt" | b"apartment" | b"suite" | b"unit" | b"box")
        {
            f |= RiskFlags::ADDRESS;
        }
        // "lives at ...", "address is ...", "ship to ...", "zip code 12345".
        let place_next = cur.cap || cur.caps || cur.numeric();
        let place_cue = match p1_cue {
            b"at" | b"on" | b"in" => {
                matches!(
                    p2.text(),
                    b"lives" | b"live" | b"living" | b"located" | b"arrived" | b"im"
                ) || p1_cue == b"at"
                    // "meet me at", "we'll meet at", "we'll meet Thursday at".
                    && (matches!(p2.text(), b"me" | b"you" | b"us") && p3.is(b"meet")
                        || p2.is(b"meet")
                        || is_weekday(p2.text()) && p3.is(b"meet"))
                    && (cur.cap || cur.house_number() && cur.digits >= 3)
                    // "the restaurant is at 9816 ...", "the bus station is on Peter ...".
                    || p1_cue != b"in"
                        && p2.is(b"is")
                        && is_venue(p3.text())
                        && (cur.cap || cur.house_number() && cur.digits >= 2)
            }
            // "address is ...", "the address of Evidera is 928 ...", "the address of Daiwa
            // ETF Financials (Ex Banks) is ...".
            b"is" => {
                Self::within(self.address_at, n, 6) || Self::within(self.address_lower_at, n, 10)
            }
            // "ship to", "call a taxi to", "change the address linked to my card to".
            b"to" => {
                matches!(
                    p2.text(),
                    b"ship"
                        | b"address"
                        | b"deliver"
                        | b"moved"
                        | b"flew"
                        | b"travelling"
                        | b"traveling"
                        | b"coming"
                        | b"taxi"
                        | b"cab"
                ) || Self::within(self.address_lower_at, n, 8)
            }
            b"from" => matches!(
                p2.text(),
                b"moved" | b"here" | b"originally" | b"im" | b"am"
            ),
            b"of" => p2.is(b"corner") && !matches!(c, b"the" | b"a" | b"an"),
            b"address" | b"zip" | b"postcode" => p1.after == ':',
            // "update my address to the same: 92626 Acesso F 935".
            _ => p1.after == ':' && Self::within(self.address_lower_at, n, 8),
        };
        if place_next && place_cue
            || cur.numeric()
                && (matches!(p1_cue, b"postcode" | b"zip")
                    || p1.is(b"code") && matches!(p2.text(), b"zip" | b"postal")
                    || p1.is(b"is") && p2.is(b"code") && matches!(p3.text(), b"zip" | b"postal")
                    // "the zip is 53650", "my postcode is 8592".
                    || p1.is(b"is") && matches!(p2.text(), b"zip" | b"postcode" | b"zipcode"))
        {
            f |= RiskFlags::ADDRESS;
        }

        // Ages and dates of birth: "79 years old", "retired at the age of 66", "born on
        // 9/20/1968", "date of birth".
        let life_event_age = p1.is(b"of")
            && p2.is(b"age")
            && p3.is(b"the")
            && self.back(4).is(b"at")
            && matches!(self.back(5).text(), b"retired" | b"died" | b"married");
        if cur.is(b"old") && matches!(p1.text(), b"year" | b"years") && !p1.hyphen && p2.numeric()
            || cur.numeric()
                && (life_event_age
                    || p1.is(b"turned") && p2.is(b"just")
                    || p1.is(b"born")
                    || p2.is(b"born") && matches!(p1_cue, b"on" | b"in"))
            || cur.is(b"birth") && p1.is(b"of") && p2.is(b"date")
        {
            f |= RiskFlags::IDENTITY;
        }
        // Document and account numbers: "passport 123456789", "account number: 0012345".
        // "She'll turn 9", "he just turned 32".
        if cur.house_number()
            && cur.digits <= 3
            && matches!(p1_cue, b"turn" | b"turns" | b"turned")
            && matches!(
                p2.text(),
                b"just" | b"will" | b"shell" | b"hell" | b"ill" | b"youll"
            )
        {
            f |= RiskFlags::IDENTITY;
        }
        if cur.in_list(Lex::ID_DOCUMENT)
            || cur.is(b"number") && matches!(p1_cue, b"account" | b"policy" | b"member" | b"id")
            || cur.is(b"id") && p1.is(b"tax")
        {
            self.id_at = Some(n);
        }
        if cur.digits >= 4 && Self::within(self.id_at, n, 3) {
            f |= RiskFlags::IDENTITY;
        }
        self.flags |= f;
    }
}

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
use cue_words::CUE_WORDS;
use injection::*;

#[cfg(test)]
mod tests;
