//! Personal data detection: the token-classification model (Rampart by
//! default) plus validated patterns for what it cannot type.
//!
//! Entity types form one documented set (README, "PII entity types"):
//! `PERSON`, `EMAIL_ADDRESS`, `PHONE_NUMBER`, `URL`, `CREDIT_CARD`,
//! `IBAN_CODE`, `US_SSN`, `IP_ADDRESS`, `STREET_ADDRESS`, `LOCATION`,
//! `ZIP_CODE`, `TAX_ID`, `BANK_ACCOUNT`, `ROUTING_NUMBER`, `GOVERNMENT_ID`,
//! `PASSPORT`, `DRIVER_LICENSE`.

pub mod bio;
pub mod patterns;

/// Where an entity came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The token-classification model.
    Model,
    /// A validated pattern.
    Pattern,
}

/// One entity: a type and a byte span `[start, end)` into the scanned text.
#[derive(Debug, Clone, PartialEq)]
pub struct Entity {
    /// Canonical type (see module docs).
    pub kind: &'static str,
    /// Byte offset of the first byte.
    pub start: usize,
    /// Byte offset past the last byte.
    pub end: usize,
    /// Confidence 0..1 (1.0 for validated patterns).
    pub score: f32,
    /// Model or pattern.
    pub source: Source,
}

/// Canonical type for a model label without its BIO prefix; `None` for
/// labels that have no place in the set. Address parts map to themselves
/// here and are grouped by [`bio::group_addresses`].
pub fn canonical_model_type(label: &str) -> Option<&'static str> {
    Some(match label {
        "GIVEN_NAME" | "SURNAME" | "PERSON" | "NAME" | "FIRST_NAME" | "LAST_NAME" => "PERSON",
        "EMAIL" | "EMAIL_ADDRESS" => "EMAIL_ADDRESS",
        "PHONE" | "PHONE_NUMBER" | "TELEPHONE" => "PHONE_NUMBER",
        "URL" | "DOMAIN_NAME" => "URL",
        "TAX_ID" => "TAX_ID",
        "BANK_ACCOUNT" | "US_BANK_NUMBER" => "BANK_ACCOUNT",
        "ROUTING_NUMBER" => "ROUTING_NUMBER",
        "GOVERNMENT_ID" => "GOVERNMENT_ID",
        "PASSPORT" | "US_PASSPORT" => "PASSPORT",
        "DRIVERS_LICENSE" | "DRIVER_LICENSE" | "US_DRIVER_LICENSE" => "DRIVER_LICENSE",
        "BUILDING_NUMBER" => bio::BUILDING_NUMBER,
        "STREET_NAME" => bio::STREET_NAME,
        "SECONDARY_ADDRESS" => bio::SECONDARY_ADDRESS,
        "STREET_ADDRESS" | "ADDRESS" => "STREET_ADDRESS",
        "CITY" | "STATE" | "LOCATION" | "GPE" => "LOCATION",
        "ZIP_CODE" | "ZIPCODE" | "POSTCODE" => "ZIP_CODE",
        "CREDIT_CARD" | "CREDIT_CARD_NUMBER" => "CREDIT_CARD",
        "IBAN" | "IBAN_CODE" => "IBAN_CODE",
        "SSN" | "US_SSN" => "US_SSN",
        "IP_ADDRESS" => "IP_ADDRESS",
        _ => return None,
    })
}

/// Shortest run of hex digits read as a machine identifier by
/// [`in_machine_identifier`]: 16 digits, beyond any licence, passport or tax number format.
pub const MIN_IDENTIFIER_HEX_DIGITS: usize = 16;

/// Whether the span `start..end` of `text` lies inside a machine identifier: a run of hex
/// digits and hyphens holding at least [`MIN_IDENTIFIER_HEX_DIGITS`] digits, a letter
/// `a`-`f` and a decimal digit, all letters in one case (a git commit, a SHA-256 digest, a
/// UUID, an API request id). The PII model reads such runs as licence, tax or account
/// numbers; a person's number is not written so. Patterns (cards, IBANs...) are not
/// filtered by this.
pub fn in_machine_identifier(text: &str, start: usize, end: usize) -> bool {
    let b = text.as_bytes();
    let part = |x: &u8| x.is_ascii_hexdigit() || *x == b'-';
    if start >= end || !b.get(start..end).is_some_and(|s| s.iter().all(part)) {
        return false;
    }
    let mut a = start;
    while a > 0 && b.get(a - 1).is_some_and(part) {
        a -= 1;
    }
    let mut z = end;
    while b.get(z).is_some_and(part) {
        z += 1;
    }
    // The run stands alone: not glued to other letters or digits.
    if a > 0 && b.get(a - 1).is_some_and(u8::is_ascii_alphanumeric)
        || b.get(z).is_some_and(u8::is_ascii_alphanumeric)
    {
        return false;
    }
    let run = b.get(a..z).unwrap_or_default();
    let digits = run.iter().filter(|x| x.is_ascii_hexdigit()).count();
    let lower = run.iter().any(|x| matches!(x, b'a'..=b'f'));
    let upper = run.iter().any(|x| matches!(x, b'A'..=b'F'));
    let decimal = run.iter().any(u8::is_ascii_digit);
    digits >= MIN_IDENTIFIER_HEX_DIGITS && (lower != upper) && decimal
}

/// Merges model and pattern entities: where spans overlap, a validated
/// pattern wins over the model, then the longer span wins. Output is sorted
/// by start offset and free of overlaps.
pub fn merge(mut entities: Vec<Entity>) -> Vec<Entity> {
    entities.sort_by(|a, b| {
        let rank = |e: &Entity| (e.source == Source::Pattern, e.end - e.start);
        rank(b).cmp(&rank(a)).then(a.start.cmp(&b.start))
    });
    let mut kept: Vec<Entity> = Vec::with_capacity(entities.len());
    for e in entities {
        if !kept.iter().any(|k| k.start < e.end && e.start < k.end) {
            kept.push(e);
        }
    }
    kept.sort_by_key(|e| (e.start, e.end));
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ent(kind: &'static str, start: usize, end: usize, source: Source) -> Entity {
        Entity {
            kind,
            start,
            end,
            score: 0.9,
            source,
        }
    }

    #[test]
    fn machine_identifiers_are_no_personal_numbers() {
        let at = |text: &str, part: &str| {
            let s = text.find(part).expect("part");
            in_machine_identifier(text, s, s + part.len())
        };
        let t = "revert 9fceb02d0ae598e95dc970b74767f19372d61af8 on main";
        assert!(at(t, "9fceb02d0ae598e95dc970b74767f19372d61af8"));
        assert!(at(t, "9fceb02d0ae598e9"), "part of the run");
        let t = "id 123e4567-e89b-12d3-a456-426614174000 failed";
        assert!(at(t, "123e4567-e89b-12d3"));
        // Licence, tax and account numbers: short, decimal only, or glued to letters.
        assert!(!at("licence D1234567 issued", "D1234567"));
        assert!(!at(
            "account 12345678901234567890 ok",
            "12345678901234567890"
        ));
        assert!(!at("ref X9fceb02d0ae598e95dc9 ok", "9fceb02d0ae598e95dc9"));
        assert!(!at("passport C01X00T47 ok", "C01X00T47"));
    }

    #[test]
    fn pattern_wins_over_overlapping_model_span() {
        let out = merge(vec![
            ent("PERSON", 0, 4, Source::Model),
            ent("EMAIL_ADDRESS", 0, 20, Source::Pattern),
            ent("LOCATION", 30, 35, Source::Model),
        ]);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].kind, "EMAIL_ADDRESS");
        assert_eq!(out[1].kind, "LOCATION");
    }
}
