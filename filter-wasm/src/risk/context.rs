//! The context scanner: names, street addresses, address blocks, ages, dates of birth and
//! document numbers, read from the words around them (see the parent module).

use super::*;

/// Scanner state: the last few words and where context cues were last seen.
pub(super) struct ContextScanner {
    pub(super) recent: [Word; CTX_WINDOW],
    pub(super) n: usize,
    /// Capitalised words in a row (not starting a sentence) ending at the last word.
    pub(super) cap_run: usize,
    /// Capitalised words in a row (a sentence start included) ending at the last word, and
    /// whether one of them holds an accented letter.
    pub(super) any_run: usize,
    pub(super) any_run_accent: bool,
    /// Word index after the last run of two or more capitalised words.
    pub(super) name_run_at: Option<usize>,
    /// Word index after the last personal-context word.
    pub(super) context_at: Option<usize>,
    /// Word index after the last "name".
    pub(super) name_at: Option<usize>,
    /// Word index after the last "address".
    pub(super) address_at: Option<usize>,
    /// The same for "address" in lowercase (a postal address, not a speech: "Logan's
    /// Address", "Address attributed to Logan").
    pub(super) address_lower_at: Option<usize>,
    /// Word index after the last place verb ([`PLACE_VERBS`]).
    pub(super) place_verb_at: Option<usize>,
    /// Word index after the last identity-document cue.
    pub(super) id_at: Option<usize>,
    /// Word index after the last Greek or Cyrillic street type.
    pub(super) foreign_street_at: Option<usize>,
    pub(super) flags: RiskFlags,
}

impl ContextScanner {
    pub(super) fn new() -> Self {
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
            flags: RiskFlags::empty(),
        }
    }

    /// The word `k` back (0 = the current word); an empty word before the text.
    pub(super) fn back(&self, k: usize) -> Word {
        if k >= self.n || k >= CTX_WINDOW {
            Word::default()
        } else {
            self.recent
                .get((self.n - 1 - k) % CTX_WINDOW)
                .copied()
                .unwrap_or_default()
        }
    }

    pub(super) fn within(at: Option<usize>, n: usize, k: usize) -> bool {
        at.is_some_and(|a| n - a <= k)
    }

    /// Whether the word `k` back is a part of a clock time: the hour before a colon or
    /// the minutes or seconds after one ("10:01", "05:11:14").
    pub(super) fn clock_part(&self, k: usize) -> bool {
        let w = self.back(k);
        let before = self.back(k + 1);
        w.numeric() && (w.after == ':' || before.numeric() && before.after == ':')
    }

    /// Whether the words from `k` back to "in" or "at" are the start of a place name: up to
    /// three capitalised words or name particles, one space apart, after which come the
    /// name's last word and a postal code ("in Quinta de São Tiago 3610-114": from "São"
    /// back). With none of them (the name one word long), the word `k` back is "in" or "at".
    pub(super) fn place_after_in(&self, k: usize) -> bool {
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
    pub(super) fn street_type_first(&self) -> bool {
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
    pub(super) fn french_street(&self) -> bool {
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
    pub(super) fn begin(&mut self, w: Word) {
        if let Some(x) = self.cur() {
            *x = w;
        }
    }

    /// The word being read (started by [`ContextScanner::begin`]).
    #[inline]
    pub(super) fn cur(&mut self) -> Option<&mut Word> {
        self.recent.get_mut(self.n % CTX_WINDOW)
    }

    /// Ends the word being read, `upper` of its letters uppercase; `foreign` is the
    /// [`foreign_hash`] of its letters outside the Latin script (`None` when it has none).
    /// Then applies the rules to it.
    pub(super) fn end_word(&mut self, upper: u32, foreign: Option<Fnv>) {
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
    pub(super) fn rules(&mut self, p1: Word) {
        let n = self.n;
        let cur = self.back(0);
        let (p2, p3) = (self.back(2), self.back(3));
        let c = cur.text();
        let mut f = RiskFlags::empty();

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
        // Not a part of a clock time ("[10:01] <Dr_Willis>" in a chat log) or a year that
        // ends a phrase ("In 2004, Coronation Street").
        let house_before = |k: usize| {
            let w = self.back(k);
            w.house_number() && !self.clock_part(k) && !(w.year_like() && w.after == ',')
        };
        if street_cur && (1..=4).any(house_before) {
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
            // A date: "Thu, 10 Feb 2022", "on 25 February 1994".
            && !is_month(p1.text())
            && !is_month(name.text())
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
                    b"lives" | b"live" | b"living" | b"located" | b"arrived"
                ) // "I'm in Leeds", "im at Kafe Bar"; "I'm on Ubuntu 16.04" is a version.
                    || p2.is(b"im") && p1_cue != b"on"
                    || p1_cue == b"at"
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
