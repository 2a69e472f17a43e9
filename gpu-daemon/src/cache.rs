//! A bounded result cache for model passes: the output of one model on one exact input
//! sequence (a window or a sentence, as token ids), so that text repeated across requests
//! (retries, templates, the same system prompt or flagged sentence turn after turn) is not
//! run through the model again.
//!
//! Keys are the model's slot and the token ids themselves: a hit compares the stored ids,
//! so it returns exactly the value the miss stored (a hash collision is a miss). Entries are
//! evicted least recently used first once their bytes (ids plus values, plus a fixed
//! per-entry overhead) exceed the configured bound.

use std::hash::BuildHasher;

use lru::LruCache;

/// Bytes counted per entry on top of its ids and values: the LRU node, the key and the two
/// boxed slices' headers.
const ENTRY_OVERHEAD: usize = 96;

struct Entry {
    ids: Box<[u32]>,
    value: Box<[f32]>,
}

impl Entry {
    fn bytes(&self) -> usize {
        ENTRY_OVERHEAD + self.ids.len() * 4 + self.value.len() * 4
    }
}

/// Hits and lookups since the cache was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found the exact input.
    pub hits: u64,
    /// All lookups.
    pub lookups: u64,
    /// Bytes held now.
    pub bytes: usize,
}

/// An LRU map from token sequences to model outputs (`f32` rows), bounded in bytes.
pub struct ResultCache {
    entries: LruCache<u64, Entry>,
    hasher: std::collections::hash_map::RandomState,
    bytes: usize,
    max_bytes: usize,
    stats: CacheStats,
}

impl ResultCache {
    /// A cache holding at most `max_bytes` (0: caching off, every lookup misses).
    pub fn new(max_bytes: usize) -> Self {
        Self {
            entries: LruCache::unbounded(),
            hasher: std::collections::hash_map::RandomState::new(),
            bytes: 0,
            max_bytes,
            stats: CacheStats::default(),
        }
    }

    fn key(&self, ids: &[u32]) -> u64 {
        self.hasher.hash_one(ids)
    }

    /// The stored output for exactly `ids`, marked as recently used.
    pub fn get(&mut self, ids: &[u32]) -> Option<&[f32]> {
        if self.max_bytes == 0 {
            return None;
        }
        self.stats.lookups += 1;
        let key = self.key(ids);
        let entry = self.entries.get(&key).filter(|e| *e.ids == *ids)?;
        self.stats.hits += 1;
        Some(&entry.value)
    }

    /// Stores `value` for `ids`, evicting the least recently used entries beyond the bound.
    /// A value larger than the whole bound is not stored.
    pub fn put(&mut self, ids: &[u32], value: &[f32]) {
        let entry = Entry {
            ids: ids.into(),
            value: value.into(),
        };
        let size = entry.bytes();
        if size > self.max_bytes {
            return;
        }
        let key = self.key(ids);
        if let Some(old) = self.entries.put(key, entry) {
            self.bytes -= old.bytes();
        }
        self.bytes += size;
        while self.bytes > self.max_bytes {
            match self.entries.pop_lru() {
                Some((_, old)) => self.bytes -= old.bytes(),
                None => break,
            }
        }
        self.stats.bytes = self.bytes;
    }

    /// Hits, lookups and bytes held.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            bytes: self.bytes,
            ..self.stats
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_returns_what_was_stored() {
        let mut c = ResultCache::new(1 << 20);
        assert!(c.get(&[1, 2, 3]).is_none());
        c.put(&[1, 2, 3], &[0.5, -1.0]);
        assert_eq!(c.get(&[1, 2, 3]), Some(&[0.5, -1.0][..]));
        assert!(c.get(&[1, 2]).is_none());
        assert_eq!(
            c.stats(),
            CacheStats {
                hits: 1,
                lookups: 3,
                bytes: ENTRY_OVERHEAD + 12 + 8
            }
        );
    }

    #[test]
    fn least_recently_used_is_evicted_at_the_bound() {
        let one = ENTRY_OVERHEAD + 4 + 4;
        let mut c = ResultCache::new(2 * one);
        c.put(&[1], &[1.0]);
        c.put(&[2], &[2.0]);
        assert!(c.get(&[1]).is_some());
        c.put(&[3], &[3.0]);
        assert!(c.get(&[2]).is_none(), "the least recently used entry goes");
        assert!(c.get(&[1]).is_some());
        assert!(c.get(&[3]).is_some());
        assert!(c.stats().bytes <= 2 * one);
    }

    #[test]
    fn zero_bound_caches_nothing_and_oversized_values_are_skipped() {
        let mut off = ResultCache::new(0);
        off.put(&[1], &[1.0]);
        assert!(off.get(&[1]).is_none());
        let mut small = ResultCache::new(ENTRY_OVERHEAD + 8);
        small.put(&[1], &[1.0; 16]);
        assert!(small.get(&[1]).is_none());
        assert_eq!(small.stats().bytes, 0);
    }

    #[test]
    fn replacing_an_entry_keeps_the_byte_count() {
        let mut c = ResultCache::new(1 << 20);
        c.put(&[7, 7], &[1.0, 2.0]);
        c.put(&[7, 7], &[3.0, 4.0]);
        assert_eq!(c.get(&[7, 7]), Some(&[3.0, 4.0][..]));
        assert_eq!(c.stats().bytes, ENTRY_OVERHEAD + 8 + 8);
    }
}
