//! Validated patterns for entities the model cannot type: payment cards
//! (Luhn checksum), IBANs (ISO 13616 mod-97), US SSNs (SSA assignment
//! rules), email addresses, phone numbers, and IPv4/IPv6 addresses
//! (parsed with `std::net`).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

use regex::Regex;

use super::{Entity, Source};

struct Patterns {
    email: Regex,
    email_spelled: Regex,
    card: Regex,
    iban: Regex,
    iban_lower: Regex,
    ssn: Regex,
    phone: Regex,
    phone_intl: Regex,
    phone_cued: Regex,
    ipv4: Regex,
    ipv6: Regex,
}

fn patterns() -> &'static Patterns {
    static P: OnceLock<Patterns> = OnceLock::new();
    P.get_or_init(|| {
        // The expressions are constants; a failure here is a programming
        // error caught by the unit tests, never input-dependent.
        let re = |s: &str| Regex::new(&ascii_word_boundaries(s)).expect("constant regex");
        Patterns {
            email: re(r"(?i)\b[a-z0-9][a-z0-9._%+-]*@[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*\.[a-z]{2,24}\b"),
            // "name [at] example [dot] com", "name (at) example.com", "name@example dot com".
            email_spelled: re(r"(?i)\b[a-z0-9][a-z0-9._%+-]*(?:\s*(?:\[at\]|\(at\)|\{at\}|<at>)\s*|@|\s+at\s+)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?(?:(?:\s*(?:\[dot\]|\(dot\)|\{dot\}|<dot>)\s*|\.|\s+dot\s+)[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)*(?:\s*(?:\[dot\]|\(dot\)|\{dot\}|<dot>)\s*|\.|\s+dot\s+)[a-z]{2,24}\b"),
            card: re(r"\b\d(?:[ ._-]?\d){11,18}\b"),
            iban: re(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b"),
            // Lowercase, written together or in groups of four.
            iban_lower: re(r"\b[a-z]{2}\d{2}(?:[a-z0-9]{11,30}|(?: [a-z0-9]{4}){2,7}(?: [a-z0-9]{1,4})?)\b"),
            ssn: re(r"\b(\d{3})([- ]?)(\d{2})([- ]?)(\d{4})\b"),
            // A phone number stays on one line; its first group has 2-4 digits, or 5
            // after a trunk prefix 0 (UK "07700 900 123").
            phone: re(r"(?:\+\d{1,3}[ \t.-]?)?(?:\(\d{1,4}\)[ \t.-]?)?(?:0\d{4}|\d{2,4})(?:[ \t.-]\d{2,4}){1,4}(?:[ \t]?(?:x|ext\.?)[ \t]?\d{1,5})?\b"),
            // International form with a subscriber number of up to 8 digits and an optional
            // "(0)" trunk prefix: "+49 30 1234567", "+49 (0)30 1234567", "+33612345678".
            phone_intl: re(r"\+\d{1,3}[ \t.-]?(?:\(0\)[ \t.-]?)?\d{1,5}(?:[ \t.-]?\d{2,8}){0,3}\b"),
            // Looser shapes read as phone numbers next to a phone word (see
            // `semroute_checks::PHONE_CUES_BEFORE`): 7 to 15 digits in up to four groups.
            phone_cued: re(r"\b\d+(?:[ .-]\d+){0,3}\b"),
            ipv4: re(r"\b\d{1,3}(?:\.\d{1,3}){3}\b"),
            ipv6: re(r"(?i)(?:[0-9a-f]{0,4}:){2,7}[0-9a-f]{0,4}(?:%[0-9a-z]+)?"),
        }
    })
}

/// `pattern` with every `\b` made an ASCII word boundary, `(?-u:\b)`.
///
/// Every shape here begins and ends with ASCII letters or digits, so the two kinds of
/// boundary differ only beside a non-ASCII letter or digit, which the ASCII one reads as
/// a non-word character: a number glued to "é" or "٣" is still found. A Unicode `\b`
/// keeps the regex crate's lazy DFA from running on text that holds any non-ASCII
/// character, and its fallback engine costs about 18 times as much: on 32 KB of prose,
/// 7.2 ms for the eleven expressions against 0.39 ms (regex 1.13, one core).
fn ascii_word_boundaries(pattern: &str) -> String {
    pattern.replace(r"\b", r"(?-u:\b)")
}

/// IBAN check (ISO 13616 mod-97, [`semroute_checks::iban_valid`]) of a match that may be
/// written in groups separated by single spaces.
fn iban_valid(iban: &str) -> bool {
    let compact: Vec<u8> = iban.bytes().filter(|b| *b != b' ').collect();
    semroute_checks::iban_valid(&compact)
}

/// SSA issuing rules ([`semroute_checks::ssn_valid`]) on the digit groups of a match.
fn ssn_valid(area: &str, group: &str, serial: &str) -> bool {
    let (Ok(a), Ok(g), Ok(s)) = (area.parse(), group.parse(), serial.parse()) else {
        return false;
    };
    semroute_checks::ssn_valid(a, g, s)
}

fn pattern(kind: &'static str, start: usize, end: usize) -> Entity {
    Entity {
        kind,
        start,
        end,
        score: 1.0,
        source: Source::Pattern,
    }
}

fn overlaps(found: &[Entity], start: usize, end: usize) -> bool {
    found.iter().any(|e| e.start < end && start < e.end)
}

/// Whether `s` starts with an ISO 8601 calendar date, `YYYY-MM-DD` (a timestamp such as
/// "2018-01-14 03:12" is not a phone number).
fn starts_with_iso_date(s: &str) -> bool {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let d = b.get(r)?;
        d.iter()
            .all(u8::is_ascii_digit)
            .then(|| d.iter().fold(0, |n, &x| n * 10 + u32::from(x - b'0')))
    };
    matches!(
        (num(0..4), b.get(4), num(5..7), b.get(7), num(8..10)),
        (
            Some(1000..=2999),
            Some(b'-'),
            Some(1..=12),
            Some(b'-'),
            Some(1..=31)
        )
    )
}

/// Whether the digit groups of a phone-shaped match are decimal numbers separated by
/// spaces, as in a table of measurements ("13.4425 11.7056"): dots inside groups and
/// whitespace between them. Phone numbers written with dots use no other separator
/// ("01.84.17.61.18", "555.123.4567").
fn is_decimal_list(s: &str) -> bool {
    let body = s.trim_start_matches(|c: char| !c.is_ascii_digit());
    body.contains('.') && body.contains(char::is_whitespace) && !s.contains(['(', '+'])
}

/// Whether every digit group of a phone-shaped match is a multiple of 5, as in a list of
/// round numbers ("180 120 60 30", "25 50 75 100"); a phone number's groups are that
/// only about once in 25 (two groups) to 125 (three).
fn is_round_number_list(s: &str) -> bool {
    let mut groups = 0;
    for g in s
        .split(|c: char| !c.is_ascii_digit())
        .filter(|g| !g.is_empty())
    {
        if !g.ends_with(['0', '5']) {
            return false;
        }
        groups += 1;
    }
    groups >= 2
}

/// Whether a phone-shaped match is one decimal number ("238.0508") or a range of years
/// ("1837-1843"): two digit groups joined by a dot, or two years from 1000 to 2099 joined by
/// a hyphen.
fn is_decimal_or_year_range(s: &str) -> bool {
    let year = |g: &str| g.len() == 4 && g.parse::<u32>().is_ok_and(|y| (1000..=2099).contains(&y));
    let all_digits = |g: &str| !g.is_empty() && g.bytes().all(|b| b.is_ascii_digit());
    if let Some((a, b)) = s.split_once('.') {
        if all_digits(a) && all_digits(b) {
            return true;
        }
    }
    matches!(s.split_once('-'), Some((a, b)) if year(a) && year(b))
}

/// Whether a spelled-out e-mail match ([`Patterns::email_spelled`]) is one: it writes `at`
/// or `dot` in brackets (`[at]`, `(dot)`), or joins `@` with a spelled `dot`. "look at
/// this dot com" is not one, and a plain address is matched by the e-mail pattern.
fn is_spelled_email(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    let bracketed = [
        "[at]", "(at)", "{at}", "<at>", "[dot]", "(dot)", "{dot}", "<dot>",
    ]
    .iter()
    .any(|m| lower.contains(m));
    let spelled_dot = lower.split_whitespace().any(|w| w == "dot");
    bracketed || lower.contains('@') && spelled_dot
}

/// Whether the separators of a card-shaped match are usable: spaces and hyphens in any
/// mix (as before), or dots or underscores used alone between at least three groups
/// (`4111.1111.1111.1111`, `4111_1111_1111_1111`), so a long decimal number is no card.
fn card_separators_agree(s: &str) -> bool {
    let seps: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_digit()).collect();
    match seps.first() {
        Some(&x @ (b'.' | b'_')) => seps.len() >= 2 && seps.iter().all(|&y| y == x),
        _ => true,
    }
}

/// IBAN lengths by country code, from the SWIFT IBAN registry (ISO 13616).
const IBAN_LENGTHS: &[(&str, usize)] = &[
    ("AD", 24),
    ("AE", 23),
    ("AL", 28),
    ("AT", 20),
    ("AZ", 28),
    ("BA", 20),
    ("BE", 16),
    ("BG", 22),
    ("BH", 22),
    ("BR", 29),
    ("BY", 28),
    ("CH", 21),
    ("CR", 22),
    ("CY", 28),
    ("CZ", 24),
    ("DE", 22),
    ("DK", 18),
    ("DO", 28),
    ("EE", 20),
    ("EG", 29),
    ("ES", 24),
    ("FI", 18),
    ("FO", 18),
    ("FR", 27),
    ("GB", 22),
    ("GE", 22),
    ("GI", 23),
    ("GL", 18),
    ("GR", 27),
    ("GT", 28),
    ("HR", 21),
    ("HU", 28),
    ("IE", 22),
    ("IL", 23),
    ("IQ", 23),
    ("IS", 26),
    ("IT", 27),
    ("JO", 30),
    ("KW", 30),
    ("KZ", 20),
    ("LB", 28),
    ("LC", 32),
    ("LI", 21),
    ("LT", 20),
    ("LU", 20),
    ("LV", 21),
    ("MC", 27),
    ("MD", 24),
    ("ME", 22),
    ("MK", 19),
    ("MR", 27),
    ("MT", 31),
    ("MU", 30),
    ("NL", 18),
    ("NO", 15),
    ("PK", 24),
    ("PL", 28),
    ("PS", 29),
    ("PT", 25),
    ("QA", 29),
    ("RO", 24),
    ("RS", 22),
    ("SA", 24),
    ("SC", 31),
    ("SE", 24),
    ("SI", 19),
    ("SK", 24),
    ("SM", 27),
    ("ST", 25),
    ("SV", 28),
    ("TL", 23),
    ("TN", 24),
    ("TR", 26),
    ("UA", 29),
    ("VA", 22),
    ("VG", 24),
    ("XK", 20),
];

/// Whether an IBAN-shaped match has a registered country code and that country's length,
/// the check a lowercase match must also pass: in running text, two letters, two digits
/// and a dozen letters and digits spaced one by one pass mod-97 about once in 97.
fn iban_registered(s: &str) -> bool {
    let compact: String = s.chars().filter(|c| *c != ' ').collect();
    let Some(country) = compact.get(..2) else {
        return false;
    };
    // Written together, or in groups of four with a shorter last group.
    let groups: Vec<&str> = s.split(' ').collect();
    let grouped = groups.len() == 1
        || groups.split_last().is_some_and(|(last, rest)| {
            rest.iter().all(|g| g.len() == 4) && (1..=4).contains(&last.len())
        });
    grouped
        && IBAN_LENGTHS
            .iter()
            .any(|&(c, n)| c.eq_ignore_ascii_case(country) && n == compact.len())
}

/// The [`semroute_checks::CUE_WINDOW`] bytes of `text` before `at`.
fn cue_window(text: &str, at: usize) -> &[u8] {
    text.as_bytes()
        .get(at.saturating_sub(semroute_checks::CUE_WINDOW)..at)
        .unwrap_or_default()
}

/// Finds validated pattern entities in `text`. Spans are byte offsets;
/// earlier (more specific) patterns win where spans overlap.
pub fn find(text: &str) -> Vec<Entity> {
    let p = patterns();
    let mut found: Vec<Entity> = Vec::new();
    for m in p.email.find_iter(text) {
        found.push(pattern("EMAIL_ADDRESS", m.start(), m.end()));
    }
    for m in p.email_spelled.find_iter(text) {
        if is_spelled_email(m.as_str()) && !overlaps(&found, m.start(), m.end()) {
            found.push(pattern("EMAIL_ADDRESS", m.start(), m.end()));
        }
    }
    for m in p.iban.find_iter(text).chain(p.iban_lower.find_iter(text)) {
        // The shape can run on into the words after the number ("... 7654 32 THEN"):
        // without its last groups, one at a time, it may still be valid.
        let mut iban = m.as_str();
        loop {
            let lower = iban.bytes().any(|b| b.is_ascii_lowercase());
            if iban_valid(iban) && (!lower || iban_registered(iban)) {
                break;
            }
            match iban.rsplit_once(' ') {
                Some((head, _)) => iban = head,
                None => {
                    iban = "";
                    break;
                }
            }
        }
        let end = m.start() + iban.len();
        if !iban.is_empty() && !overlaps(&found, m.start(), end) {
            found.push(pattern("IBAN_CODE", m.start(), end));
        }
    }
    for m in p.card.find_iter(text) {
        let digits: Vec<u8> = m.as_str().bytes().filter(u8::is_ascii_digit).collect();
        // 12-digit numbers only after a card word ("card 501864667909").
        let cued_short =
            digits.len() == 12 && semroute_checks::card_cue_before(cue_window(text, m.start()));
        if ((13..=19).contains(&digits.len()) || cued_short)
            && card_separators_agree(m.as_str())
            && semroute_checks::luhn_valid(digits.iter().map(|d| d - b'0'))
            && !overlaps(&found, m.start(), m.end())
        {
            found.push(pattern("CREDIT_CARD", m.start(), m.end()));
        }
    }
    for c in p.ssn.captures_iter(text) {
        let (Some(m), Some(a), Some(s1), Some(g), Some(s2), Some(s)) =
            (c.get(0), c.get(1), c.get(2), c.get(3), c.get(4), c.get(5))
        else {
            continue;
        };
        // Separators must agree: 123-45-6789, 123 45 6789 or 123456789.
        if s1.as_str() != s2.as_str() {
            continue;
        }
        if ssn_valid(a.as_str(), g.as_str(), s.as_str()) && !overlaps(&found, m.start(), m.end()) {
            found.push(pattern("US_SSN", m.start(), m.end()));
        }
    }
    for m in p.ipv4.find_iter(text) {
        if m.as_str().parse::<Ipv4Addr>().is_ok() && !overlaps(&found, m.start(), m.end()) {
            found.push(pattern("IP_ADDRESS", m.start(), m.end()));
        }
    }
    for m in p.ipv6.find_iter(text) {
        let s = m.as_str();
        let addr = s.split('%').next().unwrap_or(s);
        if (addr.contains("::") || addr.matches(':').count() == 7)
            && addr.parse::<Ipv6Addr>().is_ok()
            && !overlaps(&found, m.start(), m.end())
        {
            found.push(pattern("IP_ADDRESS", m.start(), m.end()));
        }
    }
    for m in p.phone.find_iter(text).chain(p.phone_intl.find_iter(text)) {
        let digits = m.as_str().bytes().filter(u8::is_ascii_digit).count();
        let inside_word = m.start() > 0
            && text
                .as_bytes()
                .get(m.start() - 1)
                .is_some_and(u8::is_ascii_alphanumeric);
        // More groups of digits follow: a list of numbers ("12 34 56 78 90 11 22").
        let list_goes_on = matches!(
            text.as_bytes().get(m.end()..m.end() + 2),
            Some([b' ' | b'\t' | b'.' | b'-' | b',', d]) if d.is_ascii_digit()
        );
        if (7..=15).contains(&digits)
            && !inside_word
            && !list_goes_on
            && !starts_with_iso_date(m.as_str())
            && !is_decimal_list(m.as_str())
            && !is_round_number_list(m.as_str())
            && !is_decimal_or_year_range(m.as_str())
            && !overlaps(&found, m.start(), m.end())
        {
            found.push(pattern("PHONE_NUMBER", m.start(), m.end()));
        }
    }
    for m in p.phone_cued.find_iter(text) {
        let s = m.as_str();
        let digits = s.bytes().filter(u8::is_ascii_digit).count();
        let groups: Vec<usize> = s.split([' ', '.', '-']).map(str::len).collect();
        // After a letter or digit, or after a decimal point or thousands separator
        // ("1.5", "2,000"), the run is part of something else.
        let before = |k: usize| {
            m.start()
                .checked_sub(k)
                .and_then(|i| text.as_bytes().get(i))
        };
        let inside_word = before(1).is_some_and(u8::is_ascii_alphanumeric)
            || before(1).is_some_and(|b| matches!(b, b'.' | b','))
                && before(2).is_some_and(u8::is_ascii_digit);
        let cued = semroute_checks::phone_cue_before(cue_window(text, m.start()))
            || semroute_checks::phone_cue_after(text.as_bytes().get(m.end()..).unwrap_or_default());
        if (7..=15).contains(&digits)
            && groups.iter().all(|&g| g <= 11)
            && !(s.contains('.') && groups.len() == 2)
            && !inside_word
            && cued
            && !starts_with_iso_date(s)
            && !overlaps(&found, m.start(), m.end())
        {
            found.push(pattern("PHONE_NUMBER", m.start(), m.end()));
        }
    }
    found.sort_by_key(|e| e.start);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<(&'static str, &str)> {
        find(text)
            .into_iter()
            .map(|e| (e.kind, &text[e.start..e.end]))
            .collect()
    }

    #[test]
    fn card_and_email_at_exact_offsets() {
        let text = "my card is 4111 1111 1111 1111, mail me at jane.doe@example.com";
        assert_eq!(
            kinds(text),
            vec![
                ("CREDIT_CARD", "4111 1111 1111 1111"),
                ("EMAIL_ADDRESS", "jane.doe@example.com")
            ]
        );
    }

    #[test]
    fn numbers_beside_non_ascii_letters_keep_their_offsets() {
        // Word boundaries are ASCII ones: a letter outside ASCII next to a number is no
        // part of it, and the spans stay on character boundaries.
        let text = "Überweisung an ÄDE89370400440532013000ö für Zoë, Karte 4111 1111 1111 1111ü, \
                    SSN 123-45-6789é";
        assert_eq!(
            kinds(text),
            vec![
                ("IBAN_CODE", "DE89370400440532013000"),
                ("CREDIT_CARD", "4111 1111 1111 1111"),
                ("US_SSN", "123-45-6789")
            ]
        );
    }

    #[test]
    fn luhn_rejects_invalid_card() {
        assert!(kinds("order 4111 1111 1111 1112 shipped")
            .iter()
            .all(|(k, _)| *k != "CREDIT_CARD"));
    }

    #[test]
    fn iban_mod97() {
        assert!(iban_valid("GB82 WEST 1234 5698 7654 32"));
        assert!(iban_valid("DE89370400440532013000"));
        assert!(!iban_valid("DE89370400440532013001"));
        assert_eq!(
            kinds("pay to GB82 WEST 1234 5698 7654 32 today"),
            vec![("IBAN_CODE", "GB82 WEST 1234 5698 7654 32")]
        );
    }

    #[test]
    fn ssn_rules() {
        assert_eq!(kinds("ssn 123-45-6789."), vec![("US_SSN", "123-45-6789")]);
        assert!(kinds("ssn 666-45-6789").iter().all(|(k, _)| *k != "US_SSN"));
        assert!(kinds("ssn 123-00-6789").iter().all(|(k, _)| *k != "US_SSN"));
        assert!(kinds("ssn 123-45 6789").iter().all(|(k, _)| *k != "US_SSN"));
    }

    #[test]
    fn ip_addresses_are_parsed() {
        assert_eq!(
            kinds("from 192.168.1.20 ok"),
            vec![("IP_ADDRESS", "192.168.1.20")]
        );
        assert!(kinds("from 999.1.1.1")
            .iter()
            .all(|(k, _)| *k != "IP_ADDRESS"));
        assert_eq!(
            kinds("v6 2001:db8::1 ok"),
            vec![("IP_ADDRESS", "2001:db8::1")]
        );
    }

    #[test]
    fn phone_numbers() {
        assert_eq!(
            kinds("call (555) 123-4567"),
            vec![("PHONE_NUMBER", "(555) 123-4567")]
        );
        assert_eq!(
            kinds("call +44 20 7946 0958"),
            vec![("PHONE_NUMBER", "+44 20 7946 0958")]
        );
        assert!(kinds("in 2024-01-15 we met").is_empty());
        assert_eq!(
            kinds("APO AA 61487\n416 60 039 office, 07700 063 966 mobile"),
            vec![
                ("PHONE_NUMBER", "416 60 039"),
                ("PHONE_NUMBER", "07700 063 966")
            ]
        );
        assert_eq!(
            kinds("ligne 01.84.17.61.18 ou 0489 25 37 29"),
            vec![
                ("PHONE_NUMBER", "01.84.17.61.18"),
                ("PHONE_NUMBER", "0489 25 37 29")
            ]
        );
        // Timestamps, tables of decimals and the tail of a longer token ("AB1234 567 890",
        // "17151 2450 Crown St") are not phones.
        assert!(kinds("logged at 2018-01-14 03:12:55").is_empty());
        assert!(kinds("| 13.4425 11.7056 | 16.0104 14.0462 |").is_empty());
        assert!(kinds("ref AB1234 567 890").is_empty());
        assert!(kinds("at 17151 2450 Crown St").is_empty());
        assert!(kinds("speeds of 180 120 60 30 km/h").is_empty());
        assert!(kinds("mass 238.0508 u, then 234.0437 u").is_empty());
        assert!(kinds("during the years 1837-1843 it grew").is_empty());
        assert_eq!(
            kinds("call 555-1234 or 555.123.4567"),
            vec![
                ("PHONE_NUMBER", "555-1234"),
                ("PHONE_NUMBER", "555.123.4567")
            ]
        );
    }

    #[test]
    fn twelve_digit_cards_and_cued_phones() {
        assert_eq!(
            kinds("What is the limit for card 501864667909?"),
            vec![("CREDIT_CARD", "501864667909")]
        );
        // Luhn-valid, but no card word before it.
        assert!(kinds("order 501864667909 shipped")
            .iter()
            .all(|(k, _)| *k != "CREDIT_CARD"));
        assert_eq!(
            kinds("Fax: 9498777106"),
            vec![("PHONE_NUMBER", "9498777106")]
        );
        assert_eq!(
            kinds("Can someone call me on 450 0840? Thanks"),
            vec![("PHONE_NUMBER", "450 0840")]
        );
        assert_eq!(
            kinds("085 175 7641-Office, 3660170548-Fax"),
            vec![
                ("PHONE_NUMBER", "085 175 7641"),
                ("PHONE_NUMBER", "3660170548")
            ]
        );
        // No phone word: a number of 10 digits is no phone.
        assert!(kinds("the total was 9498777106 units").is_empty());
    }

    #[test]
    fn cards_with_dots_or_underscores() {
        for card in [
            "4111_1111_1111_1111",
            "4111.1111.1111.1111",
            "4111111111111111",
        ] {
            assert_eq!(
                kinds(&format!("card {card} ok")),
                vec![("CREDIT_CARD", card)],
                "{card}"
            );
        }
        // A long decimal number, or mixed dots and underscores, is no card.
        assert!(kinds("pi is 3.14159265358979 ok").is_empty());
        assert!(kinds("id 4111.1111_1111.1111 ok")
            .iter()
            .all(|(k, _)| *k != "CREDIT_CARD"));
    }

    #[test]
    fn lowercase_ibans_need_a_registered_country_and_length() {
        assert_eq!(
            kinds("iban de89 3704 0044 0532 0130 00 thanks"),
            vec![("IBAN_CODE", "de89 3704 0044 0532 0130 00")]
        );
        assert_eq!(
            kinds("send to gb82west12345698765432"),
            vec![("IBAN_CODE", "gb82west12345698765432")]
        );
        // Followed by a word of four letters, which the shape takes as a group.
        assert_eq!(
            kinds("iban be68 5390 0754 7034 then"),
            vec![("IBAN_CODE", "be68 5390 0754 7034")]
        );
        assert_eq!(
            kinds("IBAN BE68 5390 0754 7034 THEN"),
            vec![("IBAN_CODE", "BE68 5390 0754 7034")]
        );
        // Words and numbers in running text are no IBAN.
        assert!(kinds("we ab12 with cdef ghij klmn and more").is_empty());
        assert!(!iban_registered("xx89 3704 0044 0532 0130 00"));
        assert!(!iban_registered("de89 3704 0044 0532 0130 0012"));
        assert!(!iban_registered("de8 93 7040 0440 5320 1300 0"));
    }

    #[test]
    fn spelled_out_email_addresses() {
        for (text, email) in [
            (
                "write to jane.doe [at] example [dot] com today",
                "jane.doe [at] example [dot] com",
            ),
            ("mail jane(at)example.co.uk", "jane(at)example.co.uk"),
            ("JANE {AT} EXAMPLE {DOT} ORG", "JANE {AT} EXAMPLE {DOT} ORG"),
            ("reach me: jdoe@example dot com", "jdoe@example dot com"),
            (
                "jdoe at example [dot] net please",
                "jdoe at example [dot] net",
            ),
        ] {
            assert_eq!(kinds(text), vec![("EMAIL_ADDRESS", email)], "{text}");
        }
        for text in [
            "look at this dot com bubble",
            "meet me at home. Then we go",
            "the cat sat at the mat dot org",
        ] {
            assert!(kinds(text).is_empty(), "{text}");
        }
    }

    #[test]
    fn international_phones_and_lists_of_numbers() {
        for phone in [
            "+49 30 1234567",
            "+49 (0)30 1234567",
            "+33612345678",
            "+1-903-140-4508",
        ] {
            assert_eq!(
                kinds(&format!("call {phone} now")),
                vec![("PHONE_NUMBER", phone)],
                "{phone}"
            );
        }
        assert!(kinds("What is the sum of 12 34 56 78 90 11 22?").is_empty());
        // Two phones in a list are still phones.
        assert_eq!(kinds("call 555-123-4567, 555-987-6543").len(), 2);
    }

    #[test]
    fn never_panics_on_odd_unicode() {
        let _ = find("😀 4111\u{00a0}1111 ١٢٣ 𝟗𝟗𝟗 ::: ::1 @@ a@b.c");
    }
}
