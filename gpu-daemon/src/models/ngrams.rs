//! The router's second scorers: logistic regressions on hashed byte and word n-grams of
//! a text, trained by `scripts/train_ngrams.py` (which documents the data), one per signal.
//!
//! - **Jailbreak** (one logit): added to the router encoder's jailbreak log-odds (see
//!   [`NgramScorer::combine`]).
//! - **Domain** (one logit per label, `labels` in the file): its log-probabilities are
//!   added to the encoder's (see [`NgramScorer::combine_distribution`]).
//!
//! The encoder reads a text through an English WordPiece vocabulary and one pooled
//! vector, these models read the bytes, so that templates, payload spellings, a subject's
//! vocabulary and text in other languages leave a trace in one or the other.
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
//! `logits[c] = sum(weight[i][c] for each index i) / sqrt(indices) + bias[c]`. Cost:
//! linear in the text's bytes, about 3.5 hashes (17 FNV rounds) per byte (microseconds
//! for the filter's 256-token texts).

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
/// Table sizes accepted from a weights file: 2^10 to 2^24 rows (of `classes` weights each;
/// the file's size is bounded by [`MAX_FILE_BYTES`]).
const BITS_RANGE: std::ops::RangeInclusive<u32> = 10..=24;

/// Largest number of classes (logits per text) accepted.
const MAX_CLASSES: usize = 64;
/// Largest weights file accepted: 64 MiB of weights and 1 MiB of header.
const MAX_FILE_BYTES: u64 = (64 << 20) + (1 << 20);
/// Largest weight magnitude accepted (trained weights stay below 10).
const MAX_WEIGHT: f32 = 1e4;

/// Bytes of each text the n-gram models read, its first ones ([`prefix`]): 64 KiB, about
/// 16K tokens of prose. The filter sends its compressed text, far shorter.
pub const MAX_NGRAM_BYTES: usize = 64 * 1024;

/// The first [`MAX_NGRAM_BYTES`] of `text`, cut on a character boundary: what the daemon
/// gives an n-gram model to read, so that a request's cost stays bounded.
pub fn prefix(text: &str) -> &str {
    if text.len() <= MAX_NGRAM_BYTES {
        return text;
    }
    let mut end = MAX_NGRAM_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// A hashed n-gram logistic regression: `weight` `[2^bits, classes]`, `bias` `[classes]`.
#[derive(Debug, Clone)]
pub struct NgramScorer {
    /// Row-major `[2^bits, classes]`.
    weight: Vec<f32>,
    bias: Vec<f32>,
    bits: u32,
    /// Label of each logit (from the file's `labels`); empty for a single-logit model.
    pub labels: Vec<String>,
    /// Version from the file's metadata, reported with the models.
    pub version: String,
}

impl NgramScorer {
    /// Loads a weights file written by `scripts/train_ngrams.py`: safetensors with
    /// `weight` (f32 or f16, `[2^bits]` for one logit or `[2^bits, classes]`) and `bias`
    /// (f32 `[classes]`), metadata `bits`, `version`, and with more than one class
    /// `labels` (a JSON array of `classes` names).
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        let file_error = |e: std::io::Error| ModelError::File {
            path: path.to_owned(),
            message: e.to_string(),
        };
        let size = std::fs::metadata(path).map_err(file_error)?.len();
        if size > MAX_FILE_BYTES {
            return Err(ModelError::Invalid {
                path: path.to_owned(),
                message: format!("{size} bytes, more than the largest accepted, {MAX_FILE_BYTES}"),
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
        let tensor = |name: &str| {
            tensors
                .tensor(name)
                .map_err(|e| invalid(format!("tensor {name}: {e}")))
        };
        let weight = tensor("weight")?;
        let rows = 1usize << bits;
        let classes = match weight.shape() {
            [n] if *n == rows => 1,
            [n, c] if *n == rows && (1..=MAX_CLASSES).contains(c) => *c,
            shape => {
                return Err(invalid(format!(
                    "tensor weight: shape {shape:?}, expected [{rows}] or [{rows}, classes <= {MAX_CLASSES}]"
                )))
            }
        };
        let weight = match weight.dtype() {
            Dtype::F32 => weight
                .data()
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect::<Vec<f32>>(),
            Dtype::F16 => weight
                .data()
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
            other => {
                return Err(invalid(format!(
                    "tensor weight: {other:?}, expected F32 or F16"
                )))
            }
        };
        let bias = tensor("bias")?;
        if bias.dtype() != Dtype::F32 || bias.shape() != [classes] {
            return Err(invalid(format!(
                "tensor bias: {:?} {:?}, expected F32 [{classes}]",
                bias.dtype(),
                bias.shape()
            )));
        }
        let bias: Vec<f32> = bias
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        // Bounded, so that a sum over a text's features stays finite in f32.
        let bounded = |w: &f32| w.is_finite() && w.abs() <= MAX_WEIGHT;
        if !bias.iter().all(bounded) || !weight.iter().all(bounded) {
            return Err(invalid(format!(
                "weights must be finite, at most {MAX_WEIGHT} in magnitude"
            )));
        }
        let labels: Vec<String> = match info.get("labels") {
            Some(l) => {
                serde_json::from_str(l).map_err(|e| invalid(format!("metadata `labels`: {e}")))?
            }
            None => Vec::new(),
        };
        // One logit may come without labels; otherwise each logit has its label.
        if (classes > 1 || !labels.is_empty()) && labels.len() != classes {
            return Err(invalid(format!(
                "metadata `labels`: {} names for {classes} classes",
                labels.len()
            )));
        }
        Ok(Self {
            weight,
            bias,
            bits,
            labels,
            version,
        })
    }

    /// Number of logits per text.
    pub fn classes(&self) -> usize {
        self.bias.len()
    }

    /// The model's logits for `text`, `[classes]`.
    pub fn logits(&self, text: &str) -> Vec<f32> {
        let classes = self.classes();
        let idx = features(text, self.bits);
        let mut sum = vec![0f64; classes];
        for &i in &idx {
            let row = &self.weight[i as usize * classes..(i as usize + 1) * classes];
            for (s, &w) in sum.iter_mut().zip(row) {
                *s += f64::from(w);
            }
        }
        let norm = (idx.len().max(1) as f64).sqrt();
        sum.iter()
            .zip(&self.bias)
            .map(|(s, &b)| (s / norm + f64::from(b)) as f32)
            .collect()
    }

    /// The first logit for `text`: a single-logit model's log-odds (of a jailbreak).
    pub fn logit(&self, text: &str) -> f32 {
        self.logits(text)[0]
    }

    /// The encoder's jailbreak probability `score` with `logit` added to its log-odds:
    /// `sigmoid(ln(p / (1 - p)) + logit)`, `p` clamped to `[1e-7, 1 - 1e-7]`.
    pub fn combine(score: f32, logit: f32) -> f32 {
        let p = f64::from(score).clamp(1e-7, 1.0 - 1e-7);
        let z = (p / (1.0 - p)).ln() + f64::from(logit);
        (1.0 / (1.0 + (-z).exp())) as f32
    }

    /// An encoder's class probabilities `probs` with `logits` (of the same classes, in the
    /// same order) added to their logarithms, renormalized:
    /// `softmax(ln(max(p, 1e-9)) + logits)` (the n-gram model's log-softmax differs from
    /// its logits by a constant, which the softmax removes).
    pub fn combine_distribution(probs: &[f32], logits: &[f32]) -> Vec<f32> {
        let z: Vec<f64> = probs
            .iter()
            .zip(logits)
            .map(|(&p, &l)| f64::from(p).max(1e-9).ln() + f64::from(l))
            .collect();
        let max = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = z.iter().map(|v| (v - max).exp()).collect();
        let total: f64 = e.iter().sum();
        e.iter().map(|v| (v / total) as f32).collect()
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
    fn prefix_cuts_on_a_character_boundary() {
        assert_eq!(prefix("short"), "short");
        let long = "é".repeat(MAX_NGRAM_BYTES);
        let p = prefix(&long);
        assert!(p.len() <= MAX_NGRAM_BYTES && p.len() > MAX_NGRAM_BYTES - 4);
        assert!(p.chars().all(|c| c == 'é'));
    }

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

    /// The committed models' logits on `models/check_texts.txt`, as the training script
    /// computed them (`models/ngrams/TASK.reference.json`): the same features and sums here.
    #[test]
    fn committed_models_reproduce_reference_logits() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/ngrams");
        for (task, classes) in [("jailbreak", 1), ("domain", 14)] {
            let scorer = NgramScorer::load(&dir.join(format!("{task}.safetensors"))).unwrap();
            assert_eq!(scorer.classes(), classes, "{task}");
            let reference: serde_json::Value = serde_json::from_slice(
                &std::fs::read(dir.join(format!("{task}.reference.json"))).unwrap(),
            )
            .unwrap();
            assert_eq!(reference["version"].as_str(), Some(scorer.version.as_str()));
            let labels: Vec<String> =
                serde_json::from_value(reference["labels"].clone()).unwrap_or_default();
            assert_eq!(labels, scorer.labels, "{task}");
            let outputs = reference["outputs"].as_array().unwrap();
            assert!(outputs.len() >= 40);
            for o in outputs {
                let text = o["text"].as_str().unwrap();
                assert_eq!(
                    features(text, scorer.bits).len() as u64,
                    o["features"].as_u64().unwrap(),
                    "{text}"
                );
                let want: Vec<f32> = serde_json::from_value(o["logits"].clone()).unwrap();
                let got = scorer.logits(text);
                assert_eq!(got.len(), want.len(), "{task}: {text}");
                for (g, w) in got.iter().zip(&want) {
                    assert!(
                        (g - w).abs() < 1e-4,
                        "{task}: {text}: {got:?} against {want:?}"
                    );
                }
            }
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

    /// A weights file: `weight` of `shape` (every value `w`, stored as `dtype`), `bias`
    /// of `bias_len` zeros, metadata `bits` and, when given, `labels`.
    fn weights_file(
        dir: &Path,
        bits: &str,
        shape: &[usize],
        w: f32,
        dtype: Dtype,
        labels: Option<&str>,
    ) -> std::path::PathBuf {
        use safetensors::tensor::TensorView;
        let len: usize = shape.iter().product();
        let data: Vec<u8> = match dtype {
            Dtype::F16 => std::iter::repeat_n(half::f16::from_f32(w).to_le_bytes(), len)
                .flatten()
                .collect(),
            Dtype::F32 => std::iter::repeat_n(w.to_le_bytes(), len)
                .flatten()
                .collect(),
            // Another dtype: zero bytes of its size.
            other => vec![0; len * other.bitsize() / 8],
        };
        let bias_len = shape.get(1).copied().unwrap_or(1);
        let bias: Vec<u8> = std::iter::repeat_n(0f32.to_le_bytes(), bias_len)
            .flatten()
            .collect();
        let weight = TensorView::new(dtype, shape.to_vec(), &data).unwrap();
        let bias = TensorView::new(Dtype::F32, vec![bias_len], &bias).unwrap();
        let mut meta = vec![
            ("bits".to_string(), bits.to_string()),
            ("version".to_string(), "t".to_string()),
        ];
        if let Some(l) = labels {
            meta.push(("labels".to_string(), l.to_string()));
        }
        let bytes = safetensors::serialize(
            [("weight", weight), ("bias", bias)],
            Some(meta.into_iter().collect()),
        )
        .unwrap();
        let p = dir.join(format!(
            "w-{bits}-{shape:?}-{w}-{dtype:?}-{}.safetensors",
            labels.map(|l| l.len()).unwrap_or(0)
        ));
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn rejects_weights_of_the_wrong_kind_shape_or_value() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let ok = NgramScorer::load(&weights_file(d, "10", &[1024], 0.5, Dtype::F32, None)).unwrap();
        // Every weight 0.5, bias 0: 0.5 * sqrt(indices).
        let n = features("abc", 10).len() as f32;
        assert!((ok.logit("abc") - 0.5 * n.sqrt()).abs() < 1e-5);
        let f16 = weights_file(d, "10", &[1024], 0.5, Dtype::F16, None);
        assert!((NgramScorer::load(&f16).unwrap().logit("abc") - 0.5 * n.sqrt()).abs() < 1e-5);
        let two = weights_file(d, "10", &[1024, 2], 0.25, Dtype::F16, Some(r#"["a","b"]"#));
        let two = NgramScorer::load(&two).unwrap();
        assert_eq!(two.labels, ["a", "b"]);
        let l = two.logits("abc");
        assert!(
            l.len() == 2 && (l[1] - 0.25 * n.sqrt()).abs() < 1e-5,
            "{l:?}"
        );
        for bad in [
            weights_file(d, "10", &[1000], 0.5, Dtype::F32, None),
            weights_file(d, "9", &[512], 0.5, Dtype::F32, None),
            weights_file(d, "25", &[1024], 0.5, Dtype::F32, None),
            weights_file(d, "x", &[1024], 0.5, Dtype::F32, None),
            weights_file(d, "10", &[1024], f32::NAN, Dtype::F32, None),
            weights_file(d, "10", &[1024], 1e9, Dtype::F32, None),
            weights_file(d, "10", &[1024], 2e4, Dtype::F16, None),
            weights_file(d, "10", &[1024], 0.5, Dtype::BF16, None),
            weights_file(d, "10", &[1024, 1, 1], 0.5, Dtype::F32, None),
            weights_file(d, "10", &[1024, 65], 0.5, Dtype::F16, None),
            // More than one class: the labels must name each.
            weights_file(d, "10", &[1024, 2], 0.5, Dtype::F16, None),
            weights_file(d, "10", &[1024, 2], 0.5, Dtype::F16, Some(r#"["a"]"#)),
            weights_file(d, "10", &[1024, 2], 0.5, Dtype::F16, Some("a,b")),
            weights_file(d, "10", &[1024], 0.5, Dtype::F32, Some(r#"["a","b"]"#)),
        ] {
            assert!(
                matches!(NgramScorer::load(&bad), Err(ModelError::Invalid { .. })),
                "{}",
                bad.display()
            );
        }
    }

    #[test]
    fn combine_distribution_adds_log_probabilities() {
        let p = NgramScorer::combine_distribution(&[0.5, 0.5], &[0.0, 0.0]);
        assert!((p[0] - 0.5).abs() < 1e-6 && (p[1] - 0.5).abs() < 1e-6);
        // ln(0.6 / 0.4) = 0.405: a logit margin of 1 in favour of the second class wins.
        let p = NgramScorer::combine_distribution(&[0.6, 0.4], &[3.0, 4.0]);
        assert!(p[1] > p[0] && (p[0] + p[1] - 1.0).abs() < 1e-6, "{p:?}");
        let want = 0.6 * (-1f64).exp() / (0.6 * (-1f64).exp() + 0.4);
        assert!((f64::from(p[0]) - want).abs() < 1e-6, "{p:?}");
        // A zero probability is floored, not a NaN.
        let p = NgramScorer::combine_distribution(&[0.0, 1.0], &[50.0, 0.0]);
        assert!(p.iter().all(|v| v.is_finite()) && p[0] > 0.99, "{p:?}");
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
