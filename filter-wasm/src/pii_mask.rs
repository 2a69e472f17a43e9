//! PII masking of request bodies: detected values replaced by typed placeholders.
//!
//! The daemon reports PII entities as byte spans into the text the filter sent it (the
//! compressed prompt and scan text). [`MaskTable::from_entities`] turns those of the
//! types to mask into values, each with a placeholder such as `<EMAIL_ADDRESS_1>`
//! (numbered per type in order of first detection; one value, one placeholder).
//! [`MaskTable::edits`] then finds *every* occurrence of every value in every string of
//! the whole body (values and object keys), so that a value is masked also
//! where compression dropped the sentence that carried it, and returns raw byte ranges to
//! replace by the placeholder (plain ASCII, valid inside a JSON string as it is): the body
//! stays valid JSON and every other byte is unchanged. Matching is exact on decoded text (escapes such as
//! `\u0040` are decoded first, and the edit covers the escape's raw bytes) and respects
//! word boundaries: a value that starts (ends) with a letter or digit does not match
//! after (before) one.
//!
//! The table is the only place the original values live; it stays in the filter's
//! per-stream state for the restore ([`crate::pii_restore`]) and is dropped with it.

use std::ops::Range;

use semroute_proto::v1::PiiEntity;

use crate::json_strings::{decode, decode_text, object_keys, string_values};

/// Values shorter than this (bytes, after trimming) are not masked: one or two
/// characters would match all over ordinary text.
pub const MIN_VALUE_BYTES: usize = 3;

/// One masked value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaskEntry {
    /// Entity type as the daemon names it, upper case (`EMAIL_ADDRESS`).
    pub kind: String,
    /// The original text.
    pub value: String,
    /// What replaces it upstream (`<EMAIL_ADDRESS_1>`).
    pub placeholder: String,
}

/// The values of one request to mask, longest first (so that a value inside a longer
/// one does not split it).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MaskTable {
    entries: Vec<MaskEntry>,
}

/// One occurrence to mask: a raw byte range of the body and the entry whose value it
/// holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MaskEdit {
    /// Raw byte range of the body.
    pub range: Range<usize>,
    /// Index into [`MaskTable::entries`].
    pub entry: usize,
}

/// `t` as placeholder text: upper case ASCII letters, digits and `_`.
fn placeholder_kind(t: &str) -> String {
    t.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect()
}

fn word_char(c: Option<char>) -> bool {
    c.is_some_and(char::is_alphanumeric)
}

impl MaskTable {
    /// The values of `entities` whose type is in `types` (case-insensitive) and whose
    /// score is at least `min_score`. `texts` are what the daemon was sent: `text`,
    /// `scan_text` and `pattern_text`; a span indexes the one its entity names
    /// ([`PiiEntity::in_scan_text`], [`PiiEntity::in_pattern_text`]). Spans that are out of
    /// range or not on character boundaries are skipped.
    pub fn from_entities(
        entities: &[PiiEntity],
        texts: [&str; 3],
        types: &[String],
        min_score: f32,
    ) -> Self {
        let [text, scan_text, pattern_text] = texts;
        let mut entries: Vec<MaskEntry> = Vec::new();
        let mut numbers: Vec<(String, u32)> = Vec::new();
        for e in entities {
            if e.score < min_score || !types.iter().any(|t| t.eq_ignore_ascii_case(&e.r#type)) {
                continue;
            }
            let source = if e.in_pattern_text {
                pattern_text
            } else if e.in_scan_text {
                scan_text
            } else {
                text
            };
            let (Ok(start), Ok(end)) = (usize::try_from(e.start), usize::try_from(e.end)) else {
                continue;
            };
            let Some(value) = source.get(start..end).map(str::trim) else {
                continue;
            };
            if value.len() < MIN_VALUE_BYTES || entries.iter().any(|m| m.value == value) {
                continue;
            }
            let kind = placeholder_kind(&e.r#type);
            let n = match numbers.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    numbers.push((kind.clone(), 1));
                    1
                }
            };
            entries.push(MaskEntry {
                placeholder: format!("<{kind}_{n}>"),
                kind,
                value: value.to_string(),
            });
        }
        entries.sort_by_key(|e| std::cmp::Reverse(e.value.len()));
        MaskTable { entries }
    }

    /// Renumbers each placeholder that a string of `body` (a complete JSON text: values and
    /// object keys, escapes decoded) already holds as text, to the next number of its type
    /// that neither a string nor another entry holds: a client's own `<EMAIL_ADDRESS_1>`
    /// (a template variable, a quoted earlier answer) stays its own, and the restore does
    /// not turn it into the value. `None` when the body's strings cannot be read.
    pub fn avoid_placeholders_in(&mut self, body: &[u8]) -> Option<()> {
        // A `<` as it is or escaped (`\u003c`): without one, no string holds a placeholder
        // and the body's strings are not walked a second time (`edits` walks them).
        let escaped_lt = |w: &[u8]| w.eq_ignore_ascii_case(b"\\u003c");
        if self.is_empty() || !(body.contains(&b'<') || body.windows(6).any(escaped_lt)) {
            return Some(());
        }
        let values = string_values(body)?.into_iter().map(|v| v.value);
        let mut strings = Vec::new();
        for range in values.chain(object_keys(body)?) {
            let raw = body.get(range)?;
            if raw.contains(&b'<') || raw.contains(&b'\\') {
                strings.push(decode_text(raw)?);
            }
        }
        let held = |p: &str| strings.iter().any(|s| s.contains(p));
        for i in 0..self.entries.len() {
            let Some(entry) = self.entries.get(i) else {
                break;
            };
            if !held(&entry.placeholder) {
                continue;
            }
            let kind = entry.kind.clone();
            let free = (1u32..)
                .map(|n| format!("<{kind}_{n}>"))
                .find(|p| !held(p) && !self.entries.iter().any(|e| &e.placeholder == p));
            if let (Some(p), Some(entry)) = (free, self.entries.get_mut(i)) {
                entry.placeholder = p;
            }
        }
        Some(())
    }

    /// True when there is nothing to mask.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The masked values.
    pub fn entries(&self) -> &[MaskEntry] {
        &self.entries
    }

    /// Matches of the table's values in `text`: decoded byte ranges with the index of
    /// their entry, sorted and disjoint (longer values claim their bytes first).
    fn matches(&self, text: &str) -> Vec<(Range<usize>, usize)> {
        let mut found: Vec<(Range<usize>, usize)> = Vec::new();
        for (i, m) in self.entries.iter().enumerate() {
            let first = m.value.chars().next();
            let last = m.value.chars().next_back();
            for (at, _) in text.match_indices(m.value.as_str()) {
                let end = at + m.value.len();
                let before = text.get(..at).and_then(|s| s.chars().next_back());
                let after = text.get(end..).and_then(|s| s.chars().next());
                if (word_char(first) && word_char(before)) || (word_char(last) && word_char(after))
                {
                    continue;
                }
                if found.iter().any(|(r, _)| r.start < end && at < r.end) {
                    continue;
                }
                found.push((at..end, i));
            }
        }
        found.sort_by_key(|(r, _)| r.start);
        found
    }

    /// Every occurrence of the table's values in the strings (values and object keys) of
    /// `body` (a complete JSON text), sorted and disjoint, leaving out the string whose
    /// contents span `keep` (the `model` value). `None` when the body's strings cannot be read.
    pub fn edits(&self, body: &[u8], keep: Option<Range<usize>>) -> Option<Vec<MaskEdit>> {
        let mut out = Vec::new();
        if self.is_empty() {
            return Some(out);
        }
        let values = string_values(body)?.into_iter().map(|v| v.value);
        for string in values.chain(object_keys(body)?) {
            if keep.as_ref() == Some(&string) {
                continue;
            }
            let raw = body.get(string.clone())?;
            let decoded = decode(raw)?;
            for (range, entry) in self.matches(&decoded.text) {
                let r = decoded.raw_range(range)?;
                out.push(MaskEdit {
                    range: string.start + r.start..string.start + r.end,
                    entry,
                });
            }
        }
        out.sort_by_key(|e| e.range.start);
        Some(out)
    }

    /// The placeholder of entry `i` (empty when out of range).
    pub fn placeholder(&self, i: usize) -> &str {
        self.entries.get(i).map_or("", |e| e.placeholder.as_str())
    }

    /// Occurrences per entity type among `edits`, in table order of first appearance.
    pub fn count_by_kind(&self, edits: &[MaskEdit]) -> Vec<(String, u32)> {
        let mut counts: Vec<(String, u32)> = Vec::new();
        for e in edits {
            let Some(entry) = self.entries.get(e.entry) else {
                continue;
            };
            match counts.iter_mut().find(|(k, _)| *k == entry.kind) {
                Some((_, n)) => *n += 1,
                None => counts.push((entry.kind.clone(), 1)),
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_strings::splice;
    use semroute_proto::v1::PiiSource;

    fn entity(kind: &str, text: &str, value: &str, score: f32) -> PiiEntity {
        let start = text.find(value).unwrap() as u32;
        PiiEntity {
            r#type: kind.into(),
            start,
            end: start + value.len() as u32,
            score,
            source: PiiSource::Pattern as i32,
            in_scan_text: false,
            in_pattern_text: false,
        }
    }

    fn table(text: &str, found: &[(&str, &str)]) -> MaskTable {
        let entities: Vec<PiiEntity> = found.iter().map(|(k, v)| entity(k, text, v, 1.0)).collect();
        let types = vec!["EMAIL_ADDRESS".into(), "US_SSN".into(), "PERSON".into()];
        MaskTable::from_entities(&entities, [text, "", ""], &types, 0.5)
    }

    fn apply(t: &MaskTable, body: &str, keep: Option<Range<usize>>) -> (String, u32) {
        let m = t.edits(body.as_bytes(), keep).unwrap();
        let edits: Vec<(Range<usize>, Vec<u8>)> = m
            .iter()
            .map(|e| (e.range.clone(), t.placeholder(e.entry).as_bytes().to_vec()))
            .collect();
        let out = splice(body.as_bytes(), &edits).unwrap();
        let total = t.count_by_kind(&m).iter().map(|(_, n)| n).sum();
        (String::from_utf8(out).unwrap(), total)
    }

    fn mask(t: &MaskTable, body: &str) -> (String, u32) {
        apply(t, body, None)
    }

    #[test]
    fn placeholders_are_numbered_per_type_and_value() {
        let text = "mail a@x.io or b@x.io, again a@x.io; ssn 123-45-6789";
        let t = table(
            text,
            &[
                ("EMAIL_ADDRESS", "a@x.io"),
                ("EMAIL_ADDRESS", "b@x.io"),
                ("email_address", "a@x.io"),
                ("US_SSN", "123-45-6789"),
                ("PHONE_NUMBER", "or b"),
            ],
        );
        let names: Vec<(&str, &str)> = t
            .entries()
            .iter()
            .map(|e| (e.value.as_str(), e.placeholder.as_str()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("123-45-6789", "<US_SSN_1>"),
                ("a@x.io", "<EMAIL_ADDRESS_1>"),
                ("b@x.io", "<EMAIL_ADDRESS_2>")
            ]
        );
    }

    #[test]
    fn every_occurrence_in_every_string_value_is_masked() {
        let t = table("write to a@x.io", &[("EMAIL_ADDRESS", "a@x.io")]);
        let body = r#"{"model":"m","messages":[{"role":"user","content":"a@x.io"},{"role":"tool","content":[{"type":"text","text":"cc: a\u0040x.io, a@x.io"}]}],"a@x.io":1}"#;
        let (out, n) = mask(&t, body);
        assert_eq!(n, 4);
        assert_eq!(
            out,
            r#"{"model":"m","messages":[{"role":"user","content":"<EMAIL_ADDRESS_1>"},{"role":"tool","content":[{"type":"text","text":"cc: <EMAIL_ADDRESS_1>, <EMAIL_ADDRESS_1>"}]}],"<EMAIL_ADDRESS_1>":1}"#
        );
        serde_json::from_str::<serde_json::Value>(&out).unwrap();
    }

    #[test]
    fn word_boundaries_and_longest_value_first() {
        let text = "Ann wrote Ann Lee about Annual plans";
        let t = table(text, &[("PERSON", "Ann"), ("PERSON", "Ann Lee")]);
        let (out, n) = mask(&t, r#"{"p":"Ann wrote Ann Lee about Annual plans, Ann."}"#);
        assert_eq!(
            out,
            r#"{"p":"<PERSON_1> wrote <PERSON_2> about Annual plans, <PERSON_1>."}"#
        );
        assert_eq!(n, 3);
    }

    #[test]
    fn bad_spans_and_low_scores_are_skipped() {
        let text = "é a@x.io";
        let mut e = entity("EMAIL_ADDRESS", text, "a@x.io", 0.4);
        let types = vec!["EMAIL_ADDRESS".to_string()];
        assert!(MaskTable::from_entities(&[e.clone()], [text, "", ""], &types, 0.5).is_empty());
        e.score = 0.9;
        e.start = 1;
        assert!(MaskTable::from_entities(&[e.clone()], [text, "", ""], &types, 0.5).is_empty());
        e.start = 0;
        e.end = 1000;
        assert!(MaskTable::from_entities(&[e], [text, "", ""], &types, 0.5).is_empty());
    }

    #[test]
    fn the_model_value_is_kept() {
        let t = table("to a@x.io", &[("EMAIL_ADDRESS", "a@x.io")]);
        let body = r#"{"model":"a@x.io","prompt":"a@x.io"}"#;
        let (out, n) = apply(&t, body, Some(10..16));
        assert_eq!(out, r#"{"model":"a@x.io","prompt":"<EMAIL_ADDRESS_1>"}"#);
        assert_eq!(n, 1);
    }
}
