//! Check-digit rules of personal-data numbers, the one definition the filter's risk scan
//! and the daemon's pattern detector share. No dependencies and no allocation, so the
//! proxy-wasm filter can use it.
//!
//! - [`luhn_valid`]: payment card numbers (ISO/IEC 7812-1, Annex B).
//! - [`iban_valid`]: IBANs (ISO 13616-1: the first four characters moved to the end,
//!   letters as 10 to 35, the number modulo 97 must be 1).
//! - [`ssn_valid`]: US Social Security Numbers as the SSA issues them (area not 000, 666
//!   or 900-999; group not 00; serial not 0000).
//! - [`phone_cue_before`], [`phone_cue_after`], [`card_cue_before`]: the words that make a
//!   looser digit run a phone or card number ("Fax: 9498777106", "card 501864667909").
//! - [`ascii_form`]: the characters both read as ASCII before the patterns run (fullwidth
//!   forms, other scripts' decimal digits, tag characters), so that `４１１１ …` or
//!   `٤١١١ …` is the same card to both.
//! - [`tags`]: Unicode tag characters, the ASCII they spell and the text they hide.

#![no_std]

pub mod tags;

/// Whether `digits`, digit values 0 to 9 from the first (most significant) to the last (the
/// check digit), pass the Luhn check: from the right, every second digit doubled (minus 9
/// when above 9), the sum a multiple of 10. An empty sequence passes; callers check length.
pub fn luhn_valid<I>(digits: I) -> bool
where
    I: IntoIterator<Item = u8>,
    I::IntoIter: DoubleEndedIterator,
{
    let mut sum = 0u32;
    for (i, d) in digits.into_iter().rev().enumerate() {
        let mut v = u32::from(d);
        if i % 2 == 1 {
            v *= 2;
            if v > 9 {
                v -= 9;
            }
        }
        sum += v;
    }
    sum.is_multiple_of(10)
}

/// Whether `chars`, an IBAN's ASCII letters and digits without separators (either case),
/// is 15 to 34 characters long and passes the ISO 13616 mod-97 check.
pub fn iban_valid(chars: &[u8]) -> bool {
    if !(15..=34).contains(&chars.len()) || !chars.iter().all(u8::is_ascii_alphanumeric) {
        return false;
    }
    let (head, bban) = chars.split_at(4);
    let mut rem = 0u32;
    for &x in bban.iter().chain(head) {
        rem = if x.is_ascii_digit() {
            (rem * 10 + u32::from(x - b'0')) % 97
        } else {
            (rem * 100 + u32::from(x.to_ascii_uppercase() - b'A') + 10) % 97
        };
    }
    rem == 1
}

/// The zero of each block of ten decimal digits (Unicode category Nd) that the patterns
/// read as ASCII digits: fullwidth, Arabic-Indic, Extended Arabic-Indic, Devanagari,
/// Bengali, Gurmukhi, Gujarati, Oriya, Tamil, Telugu, Kannada, Malayalam, Thai, Lao,
/// Tibetan, Myanmar, Khmer, Mongolian, and the five mathematical digit styles.
const DIGIT_ZEROS: [u32; 23] = [
    0xFF10, 0x0660, 0x06F0, 0x0966, 0x09E6, 0x0A66, 0x0AE6, 0x0B66, 0x0BE6, 0x0C66, 0x0CE6, 0x0D66,
    0x0E50, 0x0ED0, 0x0F20, 0x1040, 0x17E0, 0x1810, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6,
];

/// The ASCII form of `c` for the personal-data patterns: a fullwidth form (U+FF01..=U+FF5E)
/// or the ideographic space as ASCII, a decimal digit of another script ([`DIGIT_ZEROS`])
/// as its ASCII digit, a tag character (U+E0020..=U+E007E) as the ASCII it encodes; `None`
/// for every other character.
pub fn ascii_form(c: char) -> Option<char> {
    let u = c as u32;
    match u {
        // ASCII, Latin, Greek, Cyrillic, Hebrew: below the first folded block, at once.
        ..0x0660 => None,
        0x3000 => Some(' '),
        0xE0020..=0xE007E => tags::tag_ascii(c),
        0xFF01..=0xFF5E => char::from_u32(u - 0xFEE0),
        _ => DIGIT_ZEROS
            .iter()
            .find(|&&zero| (zero..zero + 10).contains(&u))
            .and_then(|&zero| char::from_digit(u - zero, 10)),
    }
}

/// Whether an SSN's area (3 digits), group (2) and serial (4), as numbers, follow the SSA's
/// issuing rules.
pub fn ssn_valid(area: u32, group: u32, serial: u32) -> bool {
    area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
}

/// Words that make a digit run right after them a phone number, lower case: "Phone:",
/// "Tel.", "Mobile", "Fax", "Desk:", "call me on", "you can call", "dial", "messages to",
/// "not answering at", "my registered".
pub const PHONE_CUES_BEFORE: [&[u8]; 19] = [
    b"phone",
    // "my number is", "reach me on", "ring 5739 3185", "contact: 45364052".
    b"number is",
    b"reach",
    b" ring ",
    b"contact",
    b"tel",
    b"mobile",
    b"fax",
    b"desk",
    b"cell",
    // "call me on", "you can call 428 0427", "dial 9175 3554".
    b"call ",
    b"dial",
    b"text me",
    // "not answering at 96 190351", "stop receiving messages to 388 4893", "send an SMS to"
    // (not "message" alone: "the message had 512 7730 bits").
    b"answering",
    b"message to",
    b"messages to",
    b"sms",
    b"whatsapp",
    // "no message on my registered 668 5702": the number an account is registered to.
    b"registered",
];

/// Words that make a digit run right before them a phone number, as in a signature block
/// ("781 1704 office", "3660170548-Fax").
pub const PHONE_CUES_AFTER: [&[u8]; 5] = [b"office", b"fax", b"mobile", b"cell", b"home"];

/// Words that make a 12-digit Luhn-valid run right after them a card number (ISO/IEC
/// 7812 numbers are 12 to 19 digits; 12-digit ones, such as some Maestro cards, are read
/// as cards only next to one of these), lower case.
pub const CARD_CUES_BEFORE: [&[u8]; 6] =
    [b"card", b"cc ", b"maestro", b"visa", b"debit", b"credit"];

/// Bytes before a digit run searched for a cue word.
pub const CUE_WINDOW: usize = 16;

fn contains(window: &[u8], words: &[&[u8]]) -> bool {
    words
        .iter()
        .any(|w| window.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w)))
}

/// Whether `before` (the [`CUE_WINDOW`] bytes before a digit run, any case) holds a phone
/// word.
pub fn phone_cue_before(before: &[u8]) -> bool {
    contains(before, &PHONE_CUES_BEFORE)
}

/// Whether `after` (the text right after a digit run) starts, past spaces, hyphens,
/// parentheses and commas, with a phone word that ends there.
pub fn phone_cue_after(after: &[u8]) -> bool {
    let start = after
        .iter()
        .position(|x| !matches!(x, b' ' | b'-' | b'(' | b','))
        .unwrap_or(after.len());
    let after = after.get(start..).unwrap_or_default();
    PHONE_CUES_AFTER.iter().any(|w| {
        after
            .get(..w.len())
            .is_some_and(|x| x.eq_ignore_ascii_case(w))
            && !after.get(w.len()).is_some_and(|x| x.is_ascii_alphabetic())
    })
}

/// Whether `before` (the [`CUE_WINDOW`] bytes before a digit run, any case) holds a card
/// word.
pub fn card_cue_before(before: &[u8]) -> bool {
    contains(before, &CARD_CUES_BEFORE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digits(s: &str) -> impl DoubleEndedIterator<Item = u8> + '_ {
        s.bytes().filter(u8::is_ascii_digit).map(|b| b - b'0')
    }

    #[test]
    fn luhn_accepts_test_card_numbers_and_rejects_one_digit_off() {
        for card in [
            "4111 1111 1111 1111",
            "5500 0000 0000 0004",
            "3400 0000 0000 009",
            "79927398713",
        ] {
            assert!(luhn_valid(digits(card)), "{card}");
        }
        for card in ["4111 1111 1111 1112", "79927398710", "1234 5678 9012 3456"] {
            assert!(!luhn_valid(digits(card)), "{card}");
        }
    }

    #[test]
    fn iban_mod97_accepts_published_examples_in_either_case() {
        for iban in [
            &b"GB82WEST12345698765432"[..],
            b"DE89370400440532013000",
            b"gb82west12345698765432",
        ] {
            assert!(iban_valid(iban));
        }
        assert!(!iban_valid(b"DE89370400440532013001"));
        assert!(
            !iban_valid(b"GB82 WEST 1234 5698 7654 32"),
            "separators are the caller's"
        );
        assert!(!iban_valid(b"DE8937040044"), "too short");
    }

    #[test]
    fn ssn_rules() {
        assert!(ssn_valid(123, 45, 6789));
        for (a, g, s) in [
            (0, 45, 6789),
            (666, 45, 6789),
            (900, 45, 6789),
            (123, 0, 6789),
            (123, 45, 0),
        ] {
            assert!(!ssn_valid(a, g, s), "{a}-{g}-{s}");
        }
    }

    #[test]
    fn cue_words() {
        assert!(phone_cue_before(b"\nFax: "));
        assert!(phone_cue_before(b"call me on "));
        assert!(!phone_cue_before(b"the year "));
        assert!(phone_cue_after(b"-Fax\n"));
        assert!(phone_cue_after(b" office"));
        assert!(!phone_cue_after(b" officer"));
        assert!(card_cue_before(b"for this card: "));
        assert!(card_cue_before(b"amount for cc "));
        assert!(!card_cue_before(b"order number "));
    }

    #[test]
    fn ascii_forms() {
        for (c, a) in [
            ('\u{ff14}', '4'),
            ('\u{ff20}', '@'),
            ('\u{664}', '4'),
            ('\u{6f9}', '9'),
            ('\u{96a}', '4'),
            ('\u{1d7d2}', '4'),
            ('\u{3000}', ' '),
            ('\u{e0041}', 'A'),
        ] {
            assert_eq!(ascii_form(c), Some(a), "{c:?}");
        }
        for c in ['4', 'a', '\u{e9}', '\u{200b}', '\u{e007f}', '\u{663f}'] {
            assert_eq!(ascii_form(c), None, "{c:?}");
        }
    }
}
