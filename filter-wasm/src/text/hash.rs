//! One hash for the whole text layer: FNV-1a over folded bytes ([`Fnv`]), and a pass-through
//! hasher for maps keyed by those hashes.

use super::*;

/// 64-bit FNV-1a, used to hash terms and sentence fingerprints.
#[derive(Clone, Copy)]
pub(crate) struct Fnv(u64);

impl Fnv {
    pub(crate) const fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    #[inline]
    pub(crate) fn byte(&mut self, b: u8) {
        self.0 ^= u64::from(b);
        self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
    }
    pub(crate) fn bytes(&mut self, bs: &[u8]) {
        for &b in bs {
            self.byte(b);
        }
    }
    #[inline]
    pub(crate) fn char(&mut self, c: char) {
        if c.is_ascii() {
            return self.byte(c as u8);
        }
        let mut buf = [0u8; 4];
        self.bytes(c.encode_utf8(&mut buf).as_bytes());
    }
    pub(crate) fn finish(self) -> u64 {
        // Final avalanche so that low bits are usable as hash-table buckets.
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }
}

/// Hasher for keys that are already well-mixed 64-bit hashes.
#[derive(Default)]
pub(crate) struct PreHashed(u64);

impl Hasher for PreHashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = Fnv::new();
        h.bytes(bytes);
        self.0 = h.finish();
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// `HashMap` builder for pre-hashed `u64` keys.
pub(crate) type PreHashedBuild = BuildHasherDefault<PreHashed>;
