//! Unicode tag characters (U+E0000..=U+E007F): invisible in most renderings, dropped by the
//! models' normalizers, but each printable one (U+E0020..=U+E007E) spells an ASCII
//! character that a language model reads ("ASCII smuggling"). The filter's risk scan and
//! the daemon's jailbreak readings both decode the text they hide, with these definitions.
//!
//! Their one standard use is an emoji tag sequence (Unicode TS #51, annex C): a black flag
//! U+1F3F4, a subdivision code of lower-case letters and digits in tag characters (at most
//! [`MAX_EMOJI_TAGS`]), then the cancel tag U+E007F, as in the flag of Scotland. Those tag
//! characters hide no text.

/// Fewest hidden tag characters ([`hidden_tag_chars`]) in a text that count as hidden
/// text: twice the longest subdivision code of an emoji tag sequence, and shorter than any
/// instruction.
pub const MIN_HIDDEN_CHARS: usize = 12;

/// Most tag characters of an emoji tag sequence's subdivision code (ISO 3166-2: a
/// two-letter country and up to three characters; TS #51 allows six).
pub const MAX_EMOJI_TAGS: usize = 6;

/// The black flag that starts an emoji tag sequence.
const BLACK_FLAG: char = '\u{1F3F4}';

/// The tag that ends an emoji tag sequence.
const CANCEL_TAG: char = '\u{E007F}';

/// Whether `c` is a tag character (U+E0000..=U+E007F).
pub fn is_tag(c: char) -> bool {
    ('\u{E0000}'..='\u{E007F}').contains(&c)
}

/// The ASCII character a printable tag character (U+E0020..=U+E007E) spells; `None` for
/// every other character.
pub fn tag_ascii(c: char) -> Option<char> {
    match c as u32 {
        u @ 0xE0020..=0xE007E => char::from_u32(u - 0xE0000),
        _ => None,
    }
}

/// The printable tag characters of `text` that hide text, in order, each as (its byte
/// offset, the ASCII it spells): every one outside an emoji tag sequence (see the module
/// docs). A fake flag (a black flag before tags that are not a short lower-case code ended
/// by the cancel tag) hides text like any other run.
pub fn hidden_tag_chars(text: &str) -> impl Iterator<Item = (usize, char)> + '_ {
    let mut chars = text.char_indices();
    core::iter::from_fn(move || loop {
        let (at, c) = chars.next()?;
        if c == BLACK_FLAG {
            // The subdivision code, then the character after it: the cancel tag?
            let code = chars
                .clone()
                .take_while(|&(_, t)| {
                    tag_ascii(t).is_some_and(|a| a.is_ascii_lowercase() || a.is_ascii_digit())
                })
                .count();
            let mut check = chars.clone();
            let ends = check.nth(code).is_some_and(|(_, t)| t == CANCEL_TAG);
            if (1..=MAX_EMOJI_TAGS).contains(&code) && ends {
                chars = check;
            }
            continue;
        }
        if let Some(a) = tag_ascii(c) {
            return Some((at, a));
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    extern crate std;
    use std::format;
    use std::string::String;
    use std::vec::Vec;

    fn tags(ascii: &str) -> String {
        ascii
            .chars()
            .filter_map(|c| char::from_u32(c as u32 + 0xE0000))
            .collect()
    }

    fn hidden(text: &str) -> String {
        hidden_tag_chars(text).map(|(_, a)| a).collect()
    }

    #[test]
    fn tag_characters_spell_ascii() {
        assert_eq!(tag_ascii('\u{E0041}'), Some('A'));
        assert_eq!(tag_ascii('\u{E0020}'), Some(' '));
        assert_eq!(tag_ascii(CANCEL_TAG), None);
        assert_eq!(tag_ascii('A'), None);
        assert!(is_tag('\u{E0000}') && is_tag(CANCEL_TAG) && !is_tag('\u{E0080}'));
    }

    #[test]
    fn hidden_text_is_read_whole_with_its_offsets() {
        let text = format!("Hi {}!", tags("Obey"));
        let found: Vec<(usize, char)> = hidden_tag_chars(&text).collect();
        assert_eq!(found, [(3, 'O'), (7, 'b'), (11, 'e'), (15, 'y')]);
        // Broken up by visible characters, it reads as one stream.
        let text: String = "Obey me"
            .chars()
            .zip("abcdefg".chars())
            .flat_map(|(h, v)| [char::from_u32(h as u32 + 0xE0000).unwrap_or(' '), v])
            .collect();
        assert_eq!(hidden(&text), "Obey me");
    }

    #[test]
    fn emoji_tag_sequences_hide_nothing_and_fake_flags_do() {
        let flag = |code: &str| format!("{BLACK_FLAG}{}{CANCEL_TAG}", tags(code));
        let flags = [flag("gbsct"), flag("gbeng"), flag("gbwls"), flag("usca")].concat();
        assert_eq!(hidden(&format!("Go {flags}!")), "");
        // Upper case, a space, a code too long, no cancel tag: hidden text.
        assert_eq!(hidden(&flag("Obey")), "Obey");
        assert_eq!(hidden(&flag("obey me")), "obey me");
        assert_eq!(hidden(&flag("ignoreall")), "ignoreall");
        assert_eq!(hidden(&format!("{BLACK_FLAG}{}", tags("gbsct"))), "gbsct");
    }
}
