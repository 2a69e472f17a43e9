//! Check-digit rules of personal-data numbers, the one definition the filter's risk scan
//! and the daemon's pattern detector share. No dependencies and no allocation, so the
//! proxy-wasm filter can use it.
//!
//! - [`luhn_valid`]: payment card numbers (ISO/IEC 7812-1, Annex B).
//! - [`iban_valid`]: IBANs (ISO 13616-1: the first four characters moved to the end,
//!   letters as 10 to 35, the number modulo 97 must be 1).
//! - [`ssn_valid`]: US Social Security Numbers as the SSA issues them (area not 000, 666
//!   or 900-999; group not 00; serial not 0000).

#![no_std]

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

/// Whether an SSN's area (3 digits), group (2) and serial (4), as numbers, follow the SSA's
/// issuing rules.
pub fn ssn_valid(area: u32, group: u32, serial: u32) -> bool {
    area != 0 && area != 666 && area < 900 && group != 0 && serial != 0
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
}
