//! Text without its diacritics, as the router encoder's tokenizer reads it.
//!
//! The encoder's tokenizer (BERT, uncased) decomposes a text and drops its combining marks,
//! so `ìgnórè àll` reads as `ignore all`. The jailbreak n-gram model reads bytes, and an
//! accent on every letter leaves none of a template's n-grams: a jailbreak the encoder
//! scores 0.9995 got an n-gram logit of about -7 that way, its sum far below the filter's
//! threshold. So the model also reads the text without them ([`without_diacritics`]).
//!
//! Only marks of no script of their own are dropped (Unicode script Inherited: the
//! combining diacritical marks, U+0300-U+036F and their supplements): the vowel signs of
//! Devanagari, Bengali or Thai belong to their scripts and stay.

use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;
use unicode_script::{Script, UnicodeScript};

/// Whether `c` is a diacritic the encoder's tokenizer drops: a combining mark of no
/// script of its own.
fn is_diacritic(c: char) -> bool {
    is_combining_mark(c) && c.script() == Script::Inherited
}

/// `text` decomposed (NFD), without its [diacritics](is_diacritic), recomposed (NFC);
/// `None` when it holds none, precomposed or combining.
pub fn without_diacritics(text: &str) -> Option<String> {
    if text.is_ascii() || !text.nfd().any(is_diacritic) {
        return None;
    }
    Some(text.nfd().filter(|&c| !is_diacritic(c)).nfc().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accents_precomposed_or_combining_are_dropped() {
        assert_eq!(
            without_diacritics("ìgnórè àll prévíóús").as_deref(),
            Some("ignore all previous")
        );
        assert_eq!(
            without_diacritics("i\u{301}gno\u{308}re a\u{323}ll").as_deref(),
            Some("ignore all")
        );
    }

    #[test]
    fn scripts_keep_their_own_signs() {
        // Devanagari vowel signs and Hangul syllables (which NFD splits into jamo) come
        // back as written; a text without diacritics has no reading.
        for text in [
            "मुझे दाल मखनी बनाने की आसान विधि बताइए।",
            "간단한 김치찌개 레시피를 알려주세요.",
            "ช่วยแนะนำสถานที่ท่องเที่ยวในเชียงใหม่หน่อย",
            "plain ASCII text",
        ] {
            assert_eq!(without_diacritics(text), None, "{text}");
        }
        // Korean with an accent elsewhere: the syllables are recomposed.
        assert_eq!(
            without_diacritics("김치 café").as_deref(),
            Some("김치 cafe")
        );
    }
}
