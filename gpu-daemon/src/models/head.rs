//! Linear classification heads on the shared encoder's pooled embedding.
//!
//! A head is a JSON file written by `scripts/train_heads.py`:
//! `{"name", "version", "labels": [C], "weights": [C][D], "bias": [C],
//! "normalize": bool}`; logits = W · e + b over the (optionally
//! L2-normalised) mean-pooled embedding `e` of size D, probabilities by
//! softmax.

use std::path::Path;

use serde::Deserialize;

use super::ModelError;

/// A multinomial logistic-regression head.
#[derive(Debug, Clone, Deserialize)]
pub struct LinearHead {
    /// Head name, e.g. `domain`.
    pub name: String,
    /// Version string (training data and date), reported in responses.
    pub version: String,
    /// Class labels, index-aligned with `weights` rows (`id2label`).
    pub labels: Vec<String>,
    /// `[classes][hidden]` weights.
    pub weights: Vec<Vec<f32>>,
    /// `[classes]` bias.
    pub bias: Vec<f32>,
    /// Whether the embedding is L2-normalised before the head.
    #[serde(default = "yes")]
    pub normalize: bool,
}

fn yes() -> bool {
    true
}

impl LinearHead {
    /// Loads and checks a head for an encoder of `hidden` dimensions.
    pub fn load(path: &Path, hidden: usize) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::File {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let head: LinearHead = serde_json::from_str(&text).map_err(|e| ModelError::Invalid {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        let invalid = |message: String| ModelError::Invalid {
            path: path.to_owned(),
            message,
        };
        if head.labels.len() < 2 {
            return Err(invalid("needs at least 2 labels".into()));
        }
        if head.weights.len() != head.labels.len() || head.bias.len() != head.labels.len() {
            return Err(invalid("weights/bias rows must match labels".into()));
        }
        if let Some(row) = head.weights.iter().find(|r| r.len() != hidden) {
            return Err(invalid(format!(
                "weight rows have {} columns, the encoder has {hidden}",
                row.len()
            )));
        }
        Ok(head)
    }

    /// Class probabilities `[classes]` for one pooled embedding `[hidden]`.
    pub fn probabilities(&self, embedding: &[f32]) -> Vec<f32> {
        let mut e = embedding.to_vec();
        if self.normalize {
            super::encoder::l2_normalize(&mut e);
        }
        let logits: Vec<f32> = self
            .weights
            .iter()
            .zip(&self.bias)
            .map(|(w, b)| w.iter().zip(&e).map(|(a, x)| a * x).sum::<f32>() + b)
            .collect();
        softmax(&logits)
    }

    /// Index of `label`, if present.
    pub fn label_index(&self, label: &str) -> Option<usize> {
        self.labels.iter().position(|l| l == label)
    }
}

/// Numerically stable softmax.
pub fn softmax(logits: &[f32]) -> Vec<f32> {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let exps: Vec<f32> = logits.iter().map(|l| (l - max).exp()).collect();
    let sum: f32 = exps.iter().sum();
    if sum > 0.0 && sum.is_finite() {
        exps.into_iter().map(|e| e / sum).collect()
    } else {
        vec![1.0 / logits.len().max(1) as f32; logits.len()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn softmax_sums_to_one_and_is_stable() {
        let p = softmax(&[1000.0, 1000.0, -1000.0]);
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        assert!((p[0] - 0.5).abs() < 1e-6);
    }

    #[test]
    fn head_rejects_wrong_width() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("h.json");
        std::fs::write(
            &p,
            r#"{"name":"t","version":"1","labels":["a","b"],"weights":[[1,2],[3,4]],"bias":[0,0]}"#,
        )
        .unwrap();
        assert!(LinearHead::load(&p, 3).is_err());
        let h = LinearHead::load(&p, 2).unwrap();
        let probs = h.probabilities(&[1.0, 0.0]);
        assert!(probs[1] > probs[0]);
    }
}
