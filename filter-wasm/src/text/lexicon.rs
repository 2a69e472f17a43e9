//! Word lists looked up in one probe.
//!
//! The risk scanners compare every word of user text with a few hundred cue words (titles,
//! street words, injection cues, ...). A chain of slice comparisons per list costs a
//! `memcmp` per candidate of the same length, several lists per word; this table packs a
//! folded word of up to `MAX_WORD` bytes into one `u128` and finds it with a single
//! multiplicative hash and, almost always, one probe of an open-addressing table. Most
//! words of a text are in no list: a 4096-bit filter (one bit per held word, a Bloom
//! filter with one hash) turns most of them away before the probe. Lookups give exactly
//! the answer of the lists they are built from.

/// Longest word (in folded bytes) a table can hold; longer words are never found.
pub(crate) const MAX_WORD: usize = 16;

/// Packs `w` (1 to [`MAX_WORD`] bytes, none of them zero) into a key; `None` for an empty
/// or longer word. Zero padding keeps keys of different lengths apart because cue words hold
/// no zero byte.
#[inline]
pub(crate) fn pack(w: &[u8]) -> Option<u128> {
    // Fixed-size loads that overlap instead of a copy of variable length (which compiles
    // to a call of `memcpy`): for 4 to 8 bytes, the first 4 and the last 4; for 9 to 16,
    // the first 8 and the last 8. The bytes read twice are the same, so OR keeps them.
    let n = w.len();
    let (lo, hi) = match n {
        1..=3 => {
            let mut x = 0u64;
            for (k, &b) in w.iter().enumerate() {
                x |= u64::from(b) << (8 * k);
            }
            (x, 0)
        }
        4..=8 => {
            let head = u64::from(u32::from_le_bytes(*w.first_chunk::<4>()?));
            let tail = u64::from(u32::from_le_bytes(*w.last_chunk::<4>()?));
            (head | tail << (8 * (n - 4)), 0)
        }
        9..=MAX_WORD => {
            let head = u64::from_le_bytes(*w.first_chunk::<8>()?);
            let tail = u64::from_le_bytes(*w.last_chunk::<8>()?);
            // Bytes 8.. of the word, from the last 8 (which start at byte n - 8).
            (head, tail >> (8 * (16 - n)))
        }
        _ => return None,
    };
    Some(u128::from(lo) | u128::from(hi) << 64)
}

/// The words of a word list read at compile time (`include_str!`): one word per line,
/// surrounding whitespace trimmed; blank lines, `[section]` lines and lines starting with
/// `#` are not words.
pub(crate) fn list_words(data: &'static str) -> impl Iterator<Item = &'static str> {
    list_sections(data).map(|(_, w)| w)
}

/// The words of a word list with sections, as `(section, word)`: a `[name]` line starts
/// section `name`; words before the first such line are in section `""`. Otherwise as
/// [`list_words`].
pub(crate) fn list_sections(
    data: &'static str,
) -> impl Iterator<Item = (&'static str, &'static str)> {
    let mut section = "";
    data.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(
            move |l| match l.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
                Some(name) => {
                    section = name;
                    None
                }
                None => Some((section, l)),
            },
        )
}

/// An immutable set of words, each with a value; built once from static lists.
pub(crate) struct WordTable<V: Copy> {
    /// Packed words; 0 marks an empty slot (no packed word is 0). Apart from the values,
    /// so that a probe, most often for a word the table does not hold, reads 16 bytes a
    /// slot (a `(u128, V)` pair takes 32 with the key's alignment).
    keys: Vec<u128>,
    /// The value of the word in the same slot of `keys`.
    values: Vec<V>,
    /// log2 of the slot count.
    bits: u32,
    /// One bit per [`WordTable::filter_bit`] of the words held: a clear bit answers
    /// "not held" from 512 bytes that stay in cache, before the probe.
    filter: [u64; 64],
}

impl<V: Copy + Default> WordTable<V> {
    /// Builds a table from `(word, value)` entries; a word listed twice gets
    /// `merge(old, new)`. Entries that do not pack (empty, longer than [`MAX_WORD`]) are
    /// skipped, so no lookup can find them either.
    pub(crate) fn new<'a>(
        entries: impl IntoIterator<Item = (&'a [u8], V)>,
        merge: impl Fn(V, V) -> V,
    ) -> Self {
        let entries: Vec<(u128, V)> = entries
            .into_iter()
            .filter_map(|(w, v)| pack(w).map(|k| (k, v)))
            .collect();
        // At most a quarter full: probes stay short.
        let mut bits = 4;
        while (1usize << bits) < entries.len().saturating_mul(4) {
            bits += 1;
        }
        let mut table = WordTable {
            keys: vec![0; 1 << bits],
            values: vec![V::default(); 1 << bits],
            bits,
            filter: [0; 64],
        };
        for (k, v) in entries {
            let bit = Self::filter_bit(k);
            if let Some(word) = table.filter.get_mut(bit / 64) {
                *word |= 1 << (bit % 64);
            }
            let mask = table.keys.len() - 1;
            let mut i = table.slot(k);
            while let (Some(key), Some(value)) = (table.keys.get_mut(i), table.values.get_mut(i)) {
                if *key == 0 {
                    (*key, *value) = (k, v);
                    break;
                }
                if *key == k {
                    *value = merge(*value, v);
                    break;
                }
                i = (i + 1) & mask;
            }
        }
        table
    }

    /// The filter bit of a packed word (0..4096), from other hash bits than its slot.
    #[inline]
    fn filter_bit(k: u128) -> usize {
        let x = (k as u64).rotate_left(17) ^ ((k >> 64) as u64);
        (x.wrapping_mul(0xD6E8_FEB8_6659_FD93) >> 52) as usize
    }

    #[inline]
    fn slot(&self, k: u128) -> usize {
        let x = (k as u64) ^ ((k >> 64) as u64).rotate_left(29);
        (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - self.bits)) as usize
    }

    /// The value of `w`, or `V::default()` when it is not in the table.
    #[inline]
    pub(crate) fn get(&self, w: &[u8]) -> V {
        match pack(w) {
            Some(k) => self.get_packed(k),
            None => V::default(),
        }
    }

    /// The value of a packed word, or `V::default()`.
    #[inline]
    pub(crate) fn get_packed(&self, k: u128) -> V {
        let bit = Self::filter_bit(k);
        if self
            .filter
            .get(bit / 64)
            .is_none_or(|w| w & (1 << (bit % 64)) == 0)
        {
            return V::default();
        }
        let mask = self.keys.len() - 1;
        let mut i = self.slot(k);
        // The table is never full, so an empty slot ends every probe sequence; the bound
        // only guards against a logic error.
        for _ in 0..self.keys.len() {
            match self.keys.get(i) {
                Some(&key) if key == k => return self.values.get(i).copied().unwrap_or_default(),
                Some(0) | None => return V::default(),
                Some(_) => i = (i + 1) & mask,
            }
        }
        V::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_exactly_the_listed_words() {
        let words: [&[u8]; 5] = [b"a", b"ab", b"abc", b"sixteen_letters!", b"street"];
        let t = WordTable::new(words.iter().map(|&w| (w, 1u8)), |a, b| a | b);
        for w in words {
            assert_eq!(t.get(w), 1, "{:?}", String::from_utf8_lossy(w));
        }
        for w in [&b""[..], b"abcd", b"b", b"streets", b"sixteen_letters!!"] {
            assert_eq!(t.get(w), 0, "{:?}", String::from_utf8_lossy(w));
        }
    }

    #[test]
    fn pack_is_the_word_zero_padded() {
        let text: Vec<u8> = (1..=40u8).map(|k| k.wrapping_mul(37) | 1).collect();
        for start in 0..8 {
            for n in 0..=MAX_WORD + 1 {
                let Some(w) = text.get(start..start + n) else {
                    continue;
                };
                let mut b = [0u8; MAX_WORD];
                let fits = (1..=MAX_WORD).contains(&n);
                if fits {
                    b[..n].copy_from_slice(w);
                }
                let expected = fits.then_some(u128::from_le_bytes(b));
                assert_eq!(pack(w), expected, "start {start}, {n} bytes");
            }
        }
    }

    #[test]
    fn word_lists_skip_comments_blank_lines_and_sections() {
        let data = "# a comment\n\nfirst\n  second  \n[Drop]\nignore\n\n[Rules]\n# more\nrules\n";
        assert_eq!(
            list_words(data).collect::<Vec<_>>(),
            ["first", "second", "ignore", "rules"]
        );
        assert_eq!(
            list_sections(data).collect::<Vec<_>>(),
            [
                ("", "first"),
                ("", "second"),
                ("Drop", "ignore"),
                ("Rules", "rules")
            ]
        );
    }

    #[test]
    fn merges_repeated_words() {
        let t = WordTable::new([(&b"dr"[..], 1u8), (b"dr", 2), (b"st", 4)], |a, b| a | b);
        assert_eq!(t.get(b"dr"), 3);
        assert_eq!(t.get(b"st"), 4);
    }

    #[test]
    fn large_tables_have_no_lost_entries() {
        let words: Vec<String> = (0..5000).map(|i| format!("w{i}")).collect();
        let t = WordTable::new(
            words
                .iter()
                .enumerate()
                .map(|(i, w)| (w.as_bytes(), i as u32 + 1)),
            |_, b| b,
        );
        for (i, w) in words.iter().enumerate() {
            assert_eq!(t.get(w.as_bytes()), i as u32 + 1);
        }
        assert_eq!(t.get(b"w5000"), 0);
    }
}
