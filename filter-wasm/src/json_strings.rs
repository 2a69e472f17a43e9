//! String tokens of a complete JSON text, for in-place rewrites of string values.
//!
//! [`string_values`] finds the string *values* of a JSON text held whole in memory, as
//! raw byte ranges between their quotes ([`object_keys`] the keys); [`decode`] turns one into
//! its text with a map back to raw offsets, so that a match found in decoded text (which
//! may come from `\uXXXX` escapes or surrogate pairs) names the exact raw bytes to
//! replace; [`push_escaped`] writes text as the inside of a JSON string. Used by the PII
//! mask (request bodies the incremental scanner has already validated) and the restore
//! (upstream answers, not validated: every function here returns `None` instead of
//! guessing on malformed input, and never panics).

use std::ops::Range;

/// One string value of a JSON text: raw byte ranges of its contents (between the
/// quotes) and of the contents of the key it belongs to (`None` for array elements and
/// a top-level string).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StringValue {
    /// The key's contents, raw.
    pub key: Option<Range<usize>>,
    /// The value's contents, raw.
    pub value: Range<usize>,
}

/// Every string value of `text`, in order; object keys are reported only as the
/// [`StringValue::key`] of their value. `None` when a string is unterminated.
///
/// Only strings are tokenised: the text is assumed to be JSON (or is treated as having
/// no strings to rewrite when it is not), so numbers, literals and structure are skipped
/// byte by byte.
pub fn string_values(text: &[u8]) -> Option<Vec<StringValue>> {
    walk(text, None)
}

/// Raw byte ranges of the contents of every object key of `text`, in order. `None` when
/// a string is unterminated.
pub fn object_keys(text: &[u8]) -> Option<Vec<Range<usize>>> {
    let mut keys = Vec::new();
    walk(text, Some(&mut keys))?;
    Some(keys)
}

/// The string values of `text`; with `keys`, its object keys are collected there too.
fn walk(text: &[u8], mut keys: Option<&mut Vec<Range<usize>>>) -> Option<Vec<StringValue>> {
    let mut out = Vec::new();
    let mut last_key: Option<Range<usize>> = None;
    // The last byte outside strings and whitespace was the `:` after `last_key`.
    let mut after_colon = false;
    let mut i = 0;
    while i < text.len() {
        match text.get(i) {
            Some(b'"') => {}
            Some(b' ' | b'\t' | b'\n' | b'\r') => {
                i += 1;
                continue;
            }
            Some(b':') => {
                after_colon = last_key.is_some();
                i += 1;
                continue;
            }
            _ => {
                after_colon = false;
                i += 1;
                continue;
            }
        }
        let start = i + 1;
        let mut j = start;
        loop {
            match text.get(j)? {
                b'\\' => j += 2,
                b'"' => break,
                _ => j += 1,
            }
        }
        let end = j;
        let mut k = end + 1;
        while matches!(text.get(k), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            k += 1;
        }
        if text.get(k) == Some(&b':') {
            if let Some(keys) = keys.as_deref_mut() {
                keys.push(start..end);
            }
            last_key = Some(start..end);
            after_colon = false;
        } else {
            let key = if after_colon { last_key.take() } else { None };
            out.push(StringValue {
                key,
                value: start..end,
            });
            after_colon = false;
        }
        i = end + 1;
    }
    Some(out)
}

/// A JSON string's decoded text and where each of its bytes came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    /// The decoded text.
    pub text: String,
    /// For each byte of `text`, the raw offset (relative to the string's contents) at
    /// which the escape or UTF-8 sequence of its character starts; one more entry, the
    /// raw length, closes the map.
    pub raw_at: Vec<usize>,
}

impl Decoded {
    /// The raw range (relative to the string's contents) of the decoded byte range
    /// `r`, whose ends must be character boundaries.
    pub fn raw_range(&self, r: Range<usize>) -> Option<Range<usize>> {
        Some(*self.raw_at.get(r.start)?..*self.raw_at.get(r.end)?)
    }
}

fn hex4(raw: &[u8], at: usize) -> Option<u32> {
    let digits = raw.get(at..at + 4)?;
    let s = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(s, 16).ok()
}

/// Decodes the contents of a JSON string (the bytes between its quotes). `None` on an
/// invalid escape, a lone surrogate, invalid UTF-8 or a raw control character.
pub fn decode(raw: &[u8]) -> Option<Decoded> {
    let mut raw_at = Vec::with_capacity(raw.len() + 1);
    let text = decode_into(raw, Some(&mut raw_at))?;
    Some(Decoded { text, raw_at })
}

/// [`decode`] without the map back to raw offsets.
pub fn decode_text(raw: &[u8]) -> Option<String> {
    decode_into(raw, None)
}

fn decode_into(raw: &[u8], mut raw_at: Option<&mut Vec<usize>>) -> Option<String> {
    let mut text = String::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        // A run of bytes that decode to themselves, validated and copied at once (it ends
        // at an ASCII byte, so never inside a UTF-8 sequence).
        let rest = raw.get(i..)?;
        let run = rest
            .iter()
            .position(|b| *b == b'\\' || *b < 0x20)
            .unwrap_or(rest.len());
        if run > 0 {
            let plain = std::str::from_utf8(rest.get(..run)?).ok()?;
            if let Some(map) = raw_at.as_deref_mut() {
                for (k, c) in plain.char_indices() {
                    map.extend(std::iter::repeat_n(i + k, c.len_utf8()));
                }
            }
            text.push_str(plain);
            i += run;
            continue;
        }
        let b = *raw.get(i)?;
        let (c, len) = if b == b'\\' {
            match raw.get(i + 1)? {
                b'"' => ('"', 2),
                b'\\' => ('\\', 2),
                b'/' => ('/', 2),
                b'b' => ('\u{8}', 2),
                b'f' => ('\u{c}', 2),
                b'n' => ('\n', 2),
                b'r' => ('\r', 2),
                b't' => ('\t', 2),
                b'u' => {
                    let hi = hex4(raw, i + 2)?;
                    if (0xd800..0xdc00).contains(&hi) {
                        if raw.get(i + 6..i + 8)? != b"\\u" {
                            return None;
                        }
                        let lo = hex4(raw, i + 8)?;
                        if !(0xdc00..0xe000).contains(&lo) {
                            return None;
                        }
                        let code = 0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00);
                        (char::from_u32(code)?, 12)
                    } else {
                        (char::from_u32(hi)?, 6)
                    }
                }
                _ => return None,
            }
        } else if b < 0x20 {
            return None;
        } else {
            let width = match b {
                0x00..=0x7f => 1,
                0xc0..=0xdf => 2,
                0xe0..=0xef => 3,
                _ => 4,
            };
            let s = std::str::from_utf8(raw.get(i..i + width)?).ok()?;
            (s.chars().next()?, width)
        };
        if let Some(map) = raw_at.as_deref_mut() {
            map.extend(std::iter::repeat_n(i, c.len_utf8()));
        }
        text.push(c);
        i += len;
    }
    if let Some(map) = raw_at {
        map.push(raw.len());
    }
    Some(text)
}

/// Appends `s` as the contents of a JSON string: `"` and `\` escaped, control
/// characters as `\n`, `\r`, `\t`, `\b`, `\f` or `\u00XX`, everything else verbatim
/// (non-ASCII as UTF-8).
pub fn push_escaped(out: &mut Vec<u8>, s: &str) {
    let mut rest = s;
    while !rest.is_empty() {
        // Characters written as they are, copied at once.
        let run = rest
            .bytes()
            .position(|b| b == b'"' || b == b'\\' || b < 0x20)
            .unwrap_or(rest.len());
        let (plain, tail) = rest.split_at(run);
        out.extend_from_slice(plain.as_bytes());
        let mut chars = tail.chars();
        let Some(c) = chars.next() else {
            break;
        };
        rest = chars.as_str();
        match c {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            '\n' => out.extend_from_slice(b"\\n"),
            '\r' => out.extend_from_slice(b"\\r"),
            '\t' => out.extend_from_slice(b"\\t"),
            '\u{8}' => out.extend_from_slice(b"\\b"),
            '\u{c}' => out.extend_from_slice(b"\\f"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes());
            }
            c => {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
}

/// `text` with each `(range, replacement)` put in place of its range. The ranges must be
/// sorted and disjoint; `None` otherwise.
pub fn splice(text: &[u8], edits: &[(Range<usize>, Vec<u8>)]) -> Option<Vec<u8>> {
    let added: usize = edits.iter().map(|(_, r)| r.len()).sum();
    let mut out = Vec::with_capacity(text.len() + added);
    let mut at = 0;
    for (range, replacement) in edits {
        out.extend_from_slice(text.get(at..range.start)?);
        out.extend_from_slice(replacement);
        at = range.end;
    }
    out.extend_from_slice(text.get(at..)?);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn values(s: &str) -> Vec<&str> {
        string_values(s.as_bytes())
            .unwrap()
            .into_iter()
            .map(|v| &s[v.value])
            .collect()
    }

    #[test]
    fn keys_are_left_out() {
        assert_eq!(
            values(r#"{"a" : "x", "b":["y", {"c\"":"z\\"}], "n": 1}"#),
            vec!["x", "y", "z\\\\"]
        );
        assert_eq!(string_values(br#"{"a":"x"#), None);
        assert_eq!(values("data: [DONE]"), Vec::<&str>::new());
        let s = r#"{"a" : {"b\"": [1, "c"]}, "d": "e"}"#;
        let keys: Vec<&str> = object_keys(s.as_bytes())
            .unwrap()
            .into_iter()
            .map(|r| &s[r])
            .collect();
        assert_eq!(keys, vec!["a", "b\\\"", "d"]);
        let s = r#"{"k": "v", "a": ["w"]}"#;
        let v = string_values(s.as_bytes()).unwrap();
        assert_eq!(&s[v[0].key.clone().unwrap()], "k");
        assert_eq!(&s[v[1].value.clone()], "w");
        assert_eq!(v[1].key, None);
    }

    #[test]
    fn decode_maps_escapes_to_raw_offsets() {
        let raw = r#"a\"\u00e9\ud83d\ude00b"#;
        let d = decode(raw.as_bytes()).unwrap();
        assert_eq!(d.text, "a\"é😀b");
        let b = d.text.find('b').unwrap();
        assert_eq!(d.raw_range(b..b + 1), Some(raw.len() - 1..raw.len()));
        let smile = d.text.find('😀').unwrap();
        assert_eq!(
            &raw[d.raw_range(smile..smile + 4).unwrap()],
            r"\ud83d\ude00"
        );
        assert_eq!(decode(br"\ud83d"), None);
        assert_eq!(decode(br"\x"), None);
        assert_eq!(decode(b"a\nb"), None);
    }

    proptest! {
        #[test]
        fn escape_then_decode_round_trips(s in any::<String>()) {
            let mut raw = Vec::new();
            push_escaped(&mut raw, &s);
            let d = decode(&raw).unwrap();
            prop_assert_eq!(&d.text, &s);
            let json = format!("\"{}\"", String::from_utf8(raw).unwrap());
            let parsed: String = serde_json::from_str(&json).unwrap();
            prop_assert_eq!(parsed, s);
        }

        #[test]
        fn decodes_what_serde_json_writes(s in any::<String>()) {
            let json = serde_json::to_string(&s).unwrap();
            let r = string_values(json.as_bytes()).unwrap();
            prop_assert_eq!(r.len(), 1);
            let d = decode(&json.as_bytes()[r[0].value.clone()]).unwrap();
            prop_assert_eq!(d.text, s);
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Some(ranges) = string_values(&bytes) {
                for v in ranges {
                    let _ = decode(&bytes[v.value]);
                }
            }
        }
    }
}
