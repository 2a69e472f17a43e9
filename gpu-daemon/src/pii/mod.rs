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
