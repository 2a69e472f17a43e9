//! The word lexicon of the context detectors: a lowercased, accent-folded word with its
//! shape, the lists and predicates that say what it may be (a personal word, a relative,
//! an identity document, a month, a unit, a venue, a name particle...).

use super::*;

/// Longest word (in folded bytes) the context scanner compares with its cue words.
pub(super) const CTX_WORD: usize = lexicon::MAX_WORD;
/// Words of history the context scanner keeps.
pub(super) const CTX_WINDOW: usize = 8;

/// Appends the lowercase letters of `block` to the word `w[..*len]` (whose bytes past
/// `len` are zero, as a packed key needs) as far as they fit; returns how many did.
#[inline]
pub(super) fn push_lowercase_block(
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
pub(super) struct Word {
    /// Lowercase, accent-folded letters and digits (valid up to `len`).
    pub(super) w: [u8; CTX_WORD],
    pub(super) len: usize,
    /// Longer than `CTX_WORD`, or holds letters outside the Latin script: matches no cue.
    pub(super) odd: bool,
    /// Starts with an uppercase letter and is not written in capitals (one capital counts).
    pub(super) cap: bool,
    /// Written in capitals (at least two letters).
    pub(super) caps: bool,
    /// Number of ASCII digits (saturating).
    pub(super) digits: u32,
    /// Number of letters (saturating).
    pub(super) letters: u32,
    /// First word of a sentence, line or quoted run.
    pub(super) start: bool,
    /// First word of the text or of a line (after quote markers such as `>`).
    pub(super) line: bool,
    /// Holds an accented Latin letter.
    pub(super) accent: bool,
    /// Directly follows a hyphen ("45-year-old").
    pub(super) hyphen: bool,
    /// Directly follows a sign or a dot ("$36000", ".0324"): an amount or a decimal.
    pub(super) signed: bool,
    /// First punctuation character after the word, before the next word (0 when none).
    pub(super) after: char,
    /// Word lists the word is in ([`Lex`] bits), set once when the word is complete.
    pub(super) lex: u16,
    /// Holds a letter outside the Latin script (Greek, Cyrillic, ...).
    pub(super) foreign: bool,
}

impl Word {
    /// Appends a block of ASCII letters: lowercase into `w`, counted in `letters`.
    #[inline]
    pub(super) fn push_ascii_letters(&mut self, block: &LetterBlock) {
        let room = push_lowercase_block(&mut self.w, &mut self.len, block);
        self.odd |= room < block.len;
        self.letters = self.letters.saturating_add(block.len as u32);
    }

    /// Ends the word, `upper` of its letters uppercase: written in capitals when all of at
    /// least two are, and then not counted as capitalised.
    pub(super) fn finish(&mut self, upper: u32) {
        self.caps = self.letters >= 2 && upper == self.letters;
        self.cap &= !self.caps;
    }

    pub(super) fn is(&self, s: &[u8]) -> bool {
        !self.odd && self.w.get(..self.len) == Some(s)
    }
    pub(super) fn text(&self) -> &[u8] {
        if self.odd {
            &[]
        } else {
            self.w.get(..self.len).unwrap_or_default()
        }
    }
    /// Only digits, 1 to 6 of them (a house number).
    pub(super) fn house_number(&self) -> bool {
        self.letters == 0 && (1..=6).contains(&self.digits)
    }
    /// A house number, which may end in one letter: "6", "6b", "29C", "7в" (the letter of
    /// a non-Latin script is not kept in `w`, so there the pushed bytes are all digits).
    pub(super) fn house_no(&self) -> bool {
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
    pub(super) fn year_like(&self) -> bool {
        self.digits == 4 && looks_like_year(self.text())
    }
    /// A house number of 2 to 5 digits that does not read as a year, as after a street
    /// name ("Erhvervsvangen 91", "granville st" after "3489").
    pub(super) fn street_number(&self) -> bool {
        self.house_number() && (2..=5).contains(&self.digits) && !self.year_like()
    }
    /// Holds a digit.
    pub(super) fn numeric(&self) -> bool {
        self.digits > 0
    }
    /// The packed form of the word ([`lexicon::pack`]); `None` when it matches no cue.
    /// Bytes past `len` are zero (a word starts from `Word::default()` and only appends).
    pub(super) fn key(&self) -> Option<u128> {
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
    pub(super) fn in_list(&self, bits: u16) -> bool {
        self.lex & bits != 0
    }
}

/// Word-list membership bits of a context word, looked up once per word (one lookup
/// instead of one comparison chain per list and rule).
pub(super) struct Lex;

impl Lex {
    pub(super) const HONORIFIC: u16 = 1;
    pub(super) const STREET: u16 = 1 << 1;
    pub(super) const STREET_COMPOUND: u16 = 1 << 2;
    pub(super) const PERSONAL: u16 = 1 << 3;
    pub(super) const OPENER: u16 = 1 << 4;
    pub(super) const RELATIVE: u16 = 1 << 5;
    pub(super) const ID_DOCUMENT: u16 = 1 << 6;
    /// Words after which any word may complete a name cue ("is", "name", "me", "with").
    pub(super) const NAME_LEAD: u16 = 1 << 7;
    /// Words a rule tests the current word for ("name", "old", "birth", "number", "id").
    pub(super) const RULE_WORD: u16 = 1 << 8;
    /// Verbs that a place or address follows within a few words ([`PLACE_VERBS`]).
    pub(super) const PLACE_VERB: u16 = 1 << 9;
    /// French street types written in lowercase after the house number
    /// ([`FRENCH_STREET_TYPES`]).
    pub(super) const STREET_LOW: u16 = 1 << 11;
    /// Greek and Cyrillic street types ([`FOREIGN_STREET_WORDS`]), found by
    /// [`Word::foreign`].
    pub(super) const FOREIGN_STREET: u16 = 1 << 12;
    /// Cyrillic house-number words ("д.", "буд."), found by [`Word::foreign`].
    pub(super) const FOREIGN_HOUSE: u16 = 1 << 13;
    /// Cyrillic abbreviations of a settlement ("г." city, "д." village, "пос."), found by
    /// [`Word::foreign`].
    pub(super) const FOREIGN_PLACE: u16 = 1 << 14;
    /// Lists that only a later word's rule reads: a word in them alone is still plain.
    pub(super) const LATER: u16 = Lex::OPENER
        | Lex::NAME_LEAD
        | Lex::STREET_LOW
        | Lex::FOREIGN_STREET
        | Lex::FOREIGN_HOUSE
        | Lex::FOREIGN_PLACE;

    /// The lists a packed word ([`Word::key`]) is in.
    pub(super) fn of(key: Option<u128>) -> u16 {
        static TABLE: OnceLock<WordTable<u16>> = OnceLock::new();
        let Some(key) = key else { return 0 };
        TABLE
            .get_or_init(|| {
                let rules: [(&[&[u8]], u16); 2] = [
                    (&[b"is", b"name", b"me", b"with"], Lex::NAME_LEAD),
                    (
                        &[b"name", b"old", b"birth", b"number", b"id"],
                        Lex::RULE_WORD,
                    ),
                ];
                let lists: [(&'static str, u16); 8] = [
                    (HONORIFICS, Lex::HONORIFIC),
                    (STREET_WORDS, Lex::STREET),
                    (PERSONAL_CONTEXT, Lex::PERSONAL),
                    (SENTENCE_OPENERS, Lex::OPENER),
                    (RELATIVES, Lex::RELATIVE),
                    (ID_DOCUMENTS, Lex::ID_DOCUMENT),
                    (PLACE_VERBS, Lex::PLACE_VERB),
                    (FRENCH_STREET_TYPES, Lex::STREET_LOW),
                ];
                let listed = lists.into_iter().flat_map(|(data, bit)| {
                    lexicon::list_words(data).map(move |w| (w.as_bytes(), bit))
                });
                WordTable::new(
                    rules
                        .into_iter()
                        .flat_map(|(words, bit)| words.iter().map(move |&w| (w, bit)))
                        .chain(listed),
                    |a, b| a | b,
                )
            })
            .get_packed(key)
    }

    /// The Greek and Cyrillic lists a word with letters of those scripts is in, by its
    /// [`Word::foreign`] hash (a short linear search: such words are rare in the text this
    /// scanner sees, and only they come here).
    #[cold]
    pub(super) fn of_foreign(hash: u64) -> u16 {
        static TABLE: OnceLock<Vec<(u64, u16)>> = OnceLock::new();
        TABLE
            .get_or_init(|| {
                let street = lexicon::list_words(FOREIGN_STREET_WORDS)
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
pub(super) fn foreign_fold(hash: &mut Fnv, c: char) {
    hash.char(c.to_lowercase().next().unwrap_or(c));
}

/// The [`Word::foreign`] hash of a lowercase word.
pub(super) fn foreign_hash(w: &str) -> u64 {
    let mut h = Fnv::new();
    w.chars().for_each(|c| foreign_fold(&mut h, c));
    h.finish()
}

/// Words that name a part of a document or a series, which a number may follow and
/// precede ("Table 3 Figure 4", "Chapter 12 Section 3"), or a numbered standard ("RFC
/// 5322", "ISO 8601", "PEP 3000"): not a street or a place.
pub(super) fn is_document_part(w: &[u8]) -> bool {
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
            | b"rfc"
            | b"iso"
            | b"pep"
            | b"cve"
    )
}

/// Places whose location a sentence may give as an address ("the restaurant is at ...").
pub(super) fn is_venue(w: &[u8]) -> bool {
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
pub(super) fn is_name_particle(w: &[u8]) -> bool {
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
pub(super) fn split_postal_code(first: Word, second: Word) -> bool {
    first.house_number()
        && second.house_number()
        && matches!(first.after, '\0' | '-')
        && matches!(
            (first.digits, second.digits),
            (3, 2) | (4, 3) | (5, 3) | (2, 3)
        )
}

/// Four digits that read as a year from 1000 to 2099.
pub(super) fn looks_like_year(d: &[u8]) -> bool {
    matches!(d, [b'1', ..] | [b'2', b'0', ..]) && d.len() == 4
}

/// Words that make a nearby run of capitalised words read as a person's name (`lists/personal_context.txt`).
pub(super) const PERSONAL_CONTEXT: &str = include_str!("lists/personal_context.txt");

/// Common first words of a sentence, which can follow "Species B." without being a surname (`lists/sentence_openers.txt`).
pub(super) const SENTENCE_OPENERS: &str = include_str!("lists/sentence_openers.txt");

/// Relatives and close people named after "my" ("my son Lukas") (`lists/relatives.txt`).
pub(super) const RELATIVES: &str = include_str!("lists/relatives.txt");

/// Document and account words that precede an identifying number (`lists/id_documents.txt`).
pub(super) const ID_DOCUMENTS: &str = include_str!("lists/id_documents.txt");

/// Verbs after which a street name and a house number read as an address (`lists/place_verbs.txt`).
pub(super) const PLACE_VERBS: &str = include_str!("lists/place_verbs.txt");

/// Weekday names ("delivered on Friday 13" is a date, not a street).
pub(super) fn is_weekday(w: &[u8]) -> bool {
    matches!(
        w,
        b"monday" | b"tuesday" | b"wednesday" | b"thursday" | b"friday" | b"saturday" | b"sunday"
    )
}

/// Street compounds in lowercase text: a word of eight letters or more ending in a street
/// type that no common English word ends in ("kopfhölzistrasse", "torpegårdsvej",
/// "siikasaarentie", "eichendorffstr"); unlike [`street_compound`], which also reads
/// "-ring", "-hof" and "-pad" and so needs a capital.
pub(super) fn lowercase_street_compound(w: &[u8]) -> bool {
    const SUFFIXES: [&[u8]; 18] = [
        b"strasse", b"strase", b"str", b"gasse", b"straat", b"vej", b"veien", b"gata", b"gatan",
        b"gade", b"katu", b"kuja", b"tie", b"vagen", b"vegen", b"platz", b"gracht", b"plads",
    ];
    w.len() >= 8 && w.iter().all(u8::is_ascii_lowercase) && SUFFIXES.iter().any(|x| w.ends_with(x))
}

/// Units of length and time ("60 miles road", "10 minutes walk"): not a street name.
pub(super) fn is_unit_word(w: &[u8]) -> bool {
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
pub(super) fn is_quantity_word(w: &[u8]) -> bool {
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
pub(super) fn is_month(w: &[u8]) -> bool {
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
    ) || crate::text::segment::is_month_abbreviation(w)
}
