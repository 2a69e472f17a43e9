//! The jailbreak signal's second scorer: a logistic regression on hashed byte and word
//! n-grams of a text, trained by `scripts/train_ngrams.py` (which documents the data).
//!
//! Its logit is added to the router encoder's jailbreak log-odds (see
//! [`NgramScorer::combine`]): the encoder reads a text through an English WordPiece
//! vocabulary and one pooled vector, this model reads the bytes, so that templates,
//! payload spellings and injections in other languages leave a trace in one or the other.
//!
//! Features, as the training script computes them (its `features`):
//! - the text's UTF-8 bytes, ASCII letters lowercased, every run of ASCII whitespace
//!   (space, `\t`, `\n`, `\r`, `\x0b`, `\x0c`) one space, none at either end, then one
//!   space added at each end;
//! - every byte 3-, 4- and 5-gram of those bytes, every word (a maximal run of `[a-z0-9]`
//!   or of bytes `>= 0x80`) and every pair of neighbouring words;
//! - each hashed by 64-bit FNV-1a (Fowler, Noll, Vo) over one tag byte (the n-gram's
//!   length; 1 for a word; 2 for a pair, its words joined by one space) and the bytes,
//!   the index being the hash's top `bits` bits; each index counted once.
//!
//! `logit = sum(weight[i] for each index i) / sqrt(indices) + bias`. Cost: linear in the
//! text's bytes, about 3.5 hashes (17 FNV rounds) per byte (microseconds for the filter's
//! 256-token texts).

use std::path::Path;

use safetensors::{Dtype, SafeTensors};

use super::ModelError;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
/// Byte n-gram lengths.
const ORDERS: [usize; 3] = [3, 4, 5];
/// Tag byte of a word's hash (byte n-grams use their length).
const TAG_WORD: u8 = 1;
/// Tag byte of a word pair's hash.
const TAG_PAIR: u8 = 2;
/// Table sizes accepted from a weights file: 2^10 to 2^24 weights (4 KiB to 64 MiB).
const BITS_RANGE: std::ops::RangeInclusive<u32> = 10..=24;

/// Largest weights file accepted: the largest table (2^24 fp32 weights) and 1 MiB of header.
const MAX_FILE_BYTES: u64 = (4 << 24) + (1 << 20);
/// Largest weight magnitude accepted (trained weights stay below 10).
const MAX_WEIGHT: f32 = 1e4;

/// A hashed n-gram logistic regression: `weight` `[2^bits]`, `bias`.
#[derive(Debug, Clone)]
pub struct NgramScorer {
    weight: Vec<f32>,
    bias: f32,
    bits: u32,
    /// Version from the file's metadata, reported with the models.
    pub version: String,
}

impl NgramScorer {
    /// Loads a weights file written by `scripts/train_ngrams.py`: safetensors with
    /// `weight` (f32 `[2^bits]`) and `bias` (f32 `[1]`), metadata `bits` and `version`.
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        let file_error = |e: std::io::Error| ModelError::File {
            path: path.to_owned(),
            message: e.to_string(),
        };
        let size = std::fs::metadata(path).map_err(file_error)?.len();
        if size > MAX_FILE_BYTES {
            return Err(ModelError::Invalid {
                path: path.to_owned(),
                message: format!("{size} bytes, more than the largest table's {MAX_FILE_BYTES}"),
            });
        }
        let bytes = std::fs::read(path).map_err(file_error)?;
        let invalid = |message: String| ModelError::Invalid {
            path: path.to_owned(),
            message,
        };
        let (_, meta) =
            SafeTensors::read_metadata(&bytes).map_err(|e| invalid(format!("safetensors: {e}")))?;
        let info = meta.metadata().clone().unwrap_or_default();
        let bits: u32 = info
            .get("bits")
            .and_then(|b| b.parse().ok())
            .filter(|b| BITS_RANGE.contains(b))
            .ok_or_else(|| invalid(format!("metadata `bits` missing or outside {BITS_RANGE:?}")))?;
        let version = info
            .get("version")
            .filter(|v| !v.is_empty())
            .cloned()
            .ok_or_else(|| invalid("metadata `version` missing".into()))?;
        let tensors =
            SafeTensors::deserialize(&bytes).map_err(|e| invalid(format!("safetensors: {e}")))?;
        let read = |name: &str, len: usize| -> Result<Vec<f32>, ModelError> {
            let t = tensors
                .tensor(name)
                .map_err(|e| invalid(format!("tensor {name}: {e}")))?;
            if t.dtype() != Dtype::F32 || t.shape() != [len] {
                return Err(invalid(format!(
                    "tensor {name}: {:?} {:?}, expected F32 [{len}]",
                    t.dtype(),
                    t.shape()
                )));
            }
            Ok(t.data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        };
        let weight = read("weight", 1usize << bits)?;
        let bias = read("bias", 1)?[0];
        // Bounded, so that a sum over a text's features stays finite in f32.
        let bounded = |w: &f32| w.is_finite() && w.abs() <= MAX_WEIGHT;
        if !bounded(&bias) || !weight.iter().all(bounded) {
            return Err(invalid(format!(
                "weights must be finite, at most {MAX_WEIGHT} in magnitude"
            )));
        }
        Ok(Self {
            weight,
            bias,
            bits,
            version,
        })
    }

    /// The model's logit for `text` (log-odds of a jailbreak).
    pub fn logit(&self, text: &str) -> f32 {
        let idx = features(text, self.bits);
        let sum: f64 = idx
            .iter()
            .map(|&i| f64::from(self.weight[i as usize]))
            .sum();
        (sum / (idx.len().max(1) as f64).sqrt() + f64::from(self.bias)) as f32
    }

    /// The encoder's jailbreak probability `score` with `logit` added to its log-odds:
    /// `sigmoid(ln(p / (1 - p)) + logit)`, `p` clamped to `[1e-7, 1 - 1e-7]`.
    pub fn combine(score: f32, logit: f32) -> f32 {
        let p = f64::from(score).clamp(1e-7, 1.0 - 1e-7);
        let z = (p / (1.0 - p)).ln() + f64::from(logit);
        (1.0 / (1.0 + (-z).exp())) as f32
    }
}

/// FNV-1a 64 over `tag` and then each of `parts`.
fn fnv1a(tag: u8, parts: &[&[u8]]) -> u64 {
    let mut h = (FNV_OFFSET ^ u64::from(tag)).wrapping_mul(FNV_PRIME);
    for p in parts {
        for &b in *p {
            h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
    }
    h
}

/// The bytes n-grams are taken from (see the module doc).
fn normalized(text: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len() + 2);
    out.push(b' ');
    let mut pending_space = false;
    for &b in text.as_bytes() {
        if matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            pending_space = out.len() > 1;
            continue;
        }
        if pending_space {
            out.push(b' ');
            pending_space = false;
        }
        out.push(b.to_ascii_lowercase());
    }
    out.push(b' ');
    out
}

/// Word class of a byte: 1 for `[a-z0-9]`, 2 for `>= 0x80`, 0 otherwise.
fn word_class(b: u8) -> u8 {
    match b {
        b'a'..=b'z' | b'0'..=b'9' => 1,
        0x80.. => 2,
        _ => 0,
    }
}

/// Sorted distinct feature indices of `text` for a table of `2^bits` weights (`bits` in
/// [`BITS_RANGE`], checked at load).
fn features(text: &str, bits: u32) -> Vec<u32> {
    debug_assert!(BITS_RANGE.contains(&bits));
    let b = normalized(text);
    let shift = 64 - bits;
    let mut idx: Vec<u32> = Vec::with_capacity(b.len() * (ORDERS.len() + 2));
    for n in ORDERS {
        for gram in b.windows(n) {
            idx.push((fnv1a(n as u8, &[gram]) >> shift) as u32);
        }
    }
    let mut words: Vec<&[u8]> = Vec::new();
    let mut start = 0;
    while start < b.len() {
        let class = word_class(b[start]);
        let mut end = start + 1;
        while end < b.len() && word_class(b[end]) == class {
            end += 1;
        }
        if class != 0 {
            words.push(&b[start..end]);
        }
        start = end;
    }
    for w in &words {
        idx.push((fnv1a(TAG_WORD, &[w]) >> shift) as u32);
    }
    for pair in words.windows(2) {
        idx.push((fnv1a(TAG_PAIR, &[pair[0], b" ", pair[1]]) >> shift) as u32);
    }
    idx.sort_unstable();
    idx.dedup();
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalization_matches_the_training_script() {
        assert_eq!(normalized(""), b"  ");
        assert_eq!(normalized(" \t\n "), b"  ");
        assert_eq!(normalized("  Hello \r\n\x0bWORLD\t"), b" hello world ");
        // Non-ASCII bytes stay as they are (no Unicode case folding).
        assert_eq!(normalized("Ä b"), " Ä b ".as_bytes());
    }

    #[test]
    fn fnv1a_known_values() {
        // FNV-1a 64 of "a" is af63dc4c8601ec8c; with the tag byte first, of [1, 'a'].
        let plain = {
            let mut h = FNV_OFFSET;
            for &b in b"a" {
                h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
            }
            h
        };
        assert_eq!(plain, 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b'a', &[]), plain);
        assert_eq!(fnv1a(1, &[b"ab"]), fnv1a(1, &[b"a", b"b"]));
    }

    #[test]
    fn words_are_runs_of_one_class() {
        // " ab1 é-x " (10 bytes) -> words "ab1", "é", "x": 3 words and 2 pairs, beside
        // 8 + 7 + 6 byte grams; 26 distinct indices in a table of 2^24.
        let text = "AB1 é-x";
        assert_eq!(normalized(text).len(), 10);
        let f = features(text, 24);
        assert_eq!(f.len(), 26);
        assert!(f.windows(2).all(|w| w[0] < w[1]));
        assert!(features("", 18).is_empty());
    }

    /// The committed model's logits on `models/check_texts.txt`, as the training script
    /// computed them (`models/ngrams/reference.json`): the same features and sums here.
    #[test]
    fn committed_model_reproduces_reference_logits() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/ngrams");
        let scorer = NgramScorer::load(&dir.join("jailbreak.safetensors")).unwrap();
        let reference: serde_json::Value =
            serde_json::from_slice(&std::fs::read(dir.join("reference.json")).unwrap()).unwrap();
        assert_eq!(reference["version"].as_str(), Some(scorer.version.as_str()));
        let outputs = reference["outputs"].as_array().unwrap();
        assert!(outputs.len() >= 40);
        for o in outputs {
            let text = o["text"].as_str().unwrap();
            assert_eq!(
                features(text, scorer.bits).len() as u64,
                o["features"].as_u64().unwrap(),
                "{text}"
            );
            let want = o["logit"].as_f64().unwrap() as f32;
            let got = scorer.logit(text);
            assert!((got - want).abs() < 1e-4, "{text}: {got} against {want}");
        }
    }

    #[test]
    fn rejects_files_that_are_not_its_weights() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("w.safetensors");
        std::fs::write(&p, b"not a safetensors file").unwrap();
        assert!(matches!(
            NgramScorer::load(&p),
            Err(ModelError::Invalid { .. })
        ));
        assert!(matches!(
            NgramScorer::load(&dir.path().join("missing")),
            Err(ModelError::File { .. })
        ));
    }

    /// A weights file with `weight` of `len` values (all `w`) and metadata `bits`.
    fn weights_file(
        dir: &Path,
        bits: &str,
        len: usize,
        w: f32,
        dtype: Dtype,
    ) -> std::path::PathBuf {
        use safetensors::tensor::TensorView;
        let data: Vec<u8> = std::iter::repeat_n(w.to_le_bytes(), len)
            .flatten()
            .collect();
        let bias = 0f32.to_le_bytes();
        let size = if dtype == Dtype::F32 { 4 } else { 2 };
        let weight = TensorView::new(dtype, vec![data.len() / size], &data).unwrap();
        let bias = TensorView::new(Dtype::F32, vec![1], &bias).unwrap();
        let meta = [
            ("bits".to_string(), bits.to_string()),
            ("version".to_string(), "t".to_string()),
        ];
        let bytes = safetensors::serialize(
            [("weight", weight), ("bias", bias)],
            Some(meta.into_iter().collect()),
        )
        .unwrap();
        let p = dir.join(format!("w-{bits}-{len}-{w}-{dtype:?}.safetensors"));
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn rejects_weights_of_the_wrong_kind_shape_or_value() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let ok = NgramScorer::load(&weights_file(d, "10", 1024, 0.5, Dtype::F32)).unwrap();
        // Every weight 0.5, bias 0: 0.5 * sqrt(indices).
        let n = features("abc", 10).len() as f32;
        assert!((ok.logit("abc") - 0.5 * n.sqrt()).abs() < 1e-5);
        for bad in [
            weights_file(d, "10", 1000, 0.5, Dtype::F32),
            weights_file(d, "9", 512, 0.5, Dtype::F32),
            weights_file(d, "25", 1024, 0.5, Dtype::F32),
            weights_file(d, "x", 1024, 0.5, Dtype::F32),
            weights_file(d, "10", 1024, f32::NAN, Dtype::F32),
            weights_file(d, "10", 1024, 1e9, Dtype::F32),
            weights_file(d, "10", 2048, 0.5, Dtype::F16),
        ] {
            assert!(
                matches!(NgramScorer::load(&bad), Err(ModelError::Invalid { .. })),
                "{}",
                bad.display()
            );
        }
    }

    #[test]
    fn combine_adds_log_odds() {
        assert!((NgramScorer::combine(0.5, 0.0) - 0.5).abs() < 1e-6);
        let p = NgramScorer::combine(0.5, 10.0);
        assert!((p - 0.999_954_6).abs() < 1e-6, "{p}");
        assert!(NgramScorer::combine(1.0, -40.0) < 1e-3);
        assert!(NgramScorer::combine(0.0, 40.0) > 0.999);
    }
}
