//! The domain's second reading: the hashed n-gram model ([`NgramScorer`],
//! `models.domain.ngrams`, one logit per domain label), whose log-probabilities are added
//! to the domain model's ([`NgramScorer::combine_distribution`]).
//!
//! The model reads what the domain model reads, the request's `text` (its first
//! [`MAX_NGRAM_BYTES`](crate::models::ngrams::MAX_NGRAM_BYTES)); the sum is taken on the
//! domain model's probabilities in label order, before they are sorted into the reply's
//! distribution ([`domain_probabilities`]). A subject's vocabulary (a statute, a reagent,
//! a tax form) is in the text's words and word pairs as much as in the encoder's pooled
//! vector, and the two disagree on different questions: on MMLU-Pro's calib bucket, held
//! out of both models' training for the measurement, accuracy 0.830 for the encoder
//! alone, 0.800 for the n-gram model alone and 0.840 for the sum
//! (`scripts/train_ngrams.py`).

use std::path::Path;

use crate::models::ngrams::{prefix, NgramScorer};
use crate::models::ModelError;

/// A domain n-gram model and, for each of its logits, the index of the same label among
/// the domain model's labels.
pub(super) struct DomainNgrams {
    scorer: NgramScorer,
    /// `order[i]`: the domain model's index of the n-gram model's label `i`.
    order: Vec<usize>,
}

impl DomainNgrams {
    /// Pairs `scorer` (loaded from `path`) with the domain model's `labels`: it must have
    /// one logit per label and name the same labels, in any order, or
    /// [`ModelError::Invalid`].
    pub(super) fn new(
        scorer: NgramScorer,
        labels: &[String],
        path: &Path,
    ) -> Result<Self, ModelError> {
        let mismatch = || ModelError::Invalid {
            path: path.to_owned(),
            message: format!(
                "labels {:?} are not the domain model's {labels:?}",
                scorer.labels
            ),
        };
        if scorer.classes() != labels.len() || scorer.labels.len() != labels.len() {
            return Err(mismatch());
        }
        let mut order = Vec::with_capacity(labels.len());
        for l in &scorer.labels {
            let i = labels.iter().position(|x| x == l).ok_or_else(mismatch)?;
            if order.contains(&i) {
                return Err(mismatch());
            }
            order.push(i);
        }
        Ok(Self { scorer, order })
    }

    /// The model's version, reported with the models.
    pub(super) fn version(&self) -> &str {
        &self.scorer.version
    }

    /// `probs` (in the domain model's label order) combined with the n-gram model's
    /// logits for `text` ([`NgramScorer::combine_distribution`]), in the same order.
    fn combine(&self, text: &str, probs: &[f32]) -> Vec<f32> {
        let mut logits = vec![0f32; probs.len()];
        for (logit, &i) in self
            .scorer
            .logits(prefix(text))
            .into_iter()
            .zip(&self.order)
        {
            logits[i] = logit;
        }
        NgramScorer::combine_distribution(probs, &logits)
    }
}

/// The domain probabilities of a request whose `text` the domain model gave `probs` (in its
/// label order): combined with the n-gram model's logits where one is configured.
pub(super) fn domain_probabilities(
    ngrams: Option<&DomainNgrams>,
    text: &str,
    probs: Vec<f32>,
) -> Vec<f32> {
    match ngrams {
        Some(n) => n.combine(text, &probs),
        None => probs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn committed() -> NgramScorer {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/ngrams");
        NgramScorer::load(&dir.join("domain.safetensors")).unwrap()
    }

    const LAW: &str = "Under the Fourth Amendment, is a warrantless search of a car lawful?";

    #[test]
    fn pairs_labels_in_any_order_and_refuses_others() {
        let scorer = committed();
        let path = Path::new("domain.safetensors");
        let mut labels = scorer.labels.clone();
        labels.reverse();
        let n = DomainNgrams::new(scorer.clone(), &labels, path).unwrap();
        assert_eq!(n.order[0], labels.len() - 1);
        // Uniform encoder probabilities: the n-gram model decides, in the domain order.
        let uniform = vec![1.0 / labels.len() as f32; labels.len()];
        let p = n.combine(LAW, &uniform);
        let best = p
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap()
            .0;
        assert_eq!(labels[best], "law", "{p:?}");
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        labels[0] = "astrology".into();
        let err = DomainNgrams::new(scorer.clone(), &labels, path)
            .err()
            .unwrap();
        assert!(err.to_string().contains("domain.safetensors"), "{err}");
        assert!(DomainNgrams::new(scorer.clone(), &labels[1..], path).is_err());
        let mut dup = scorer.clone();
        dup.labels[1] = dup.labels[0].clone();
        assert!(DomainNgrams::new(dup, &scorer.labels, path).is_err());
    }
}
