//! The domain's second reading: the hashed n-gram model ([`NgramScorer`],
//! `models.domain.ngrams`, one logit per domain label), whose log-probabilities are added
//! to the domain model's ([`NgramScorer::combine_distribution`]).
//!
//! The model reads what the domain model reads, the request's `text` (its first
//! [`MAX_NGRAM_BYTES`](super::jailbreak_ngrams::MAX_NGRAM_BYTES)). A subject's
//! vocabulary (a statute, a reagent, a tax form) is in the text's words and word pairs as
//! much as in the encoder's pooled vector, and the two disagree on different questions:
//! on MMLU-Pro's calib bucket, held out of both models' training for the measurement,
//! accuracy 0.830 for the encoder alone, 0.800 for the n-gram model alone and 0.840 for
//! the sum (`scripts/train_ngrams.py`).

use std::time::Instant;

use super::jailbreak_ngrams::prefix;
use super::sequence::SequenceSignals;
use super::{ClassifyInput, ClassifyOutput};
use crate::models::ngrams::NgramScorer;
use crate::models::ModelError;

/// A domain n-gram model and, for each of its logits, the index of the same label among
/// the domain model's labels.
pub(super) struct DomainNgrams {
    scorer: NgramScorer,
    /// `order[i]`: the domain model's index of the n-gram model's label `i`.
    order: Vec<usize>,
}

impl DomainNgrams {
    /// Pairs `scorer` with the domain model's `labels`: each must name the same labels
    /// (in any order), or [`ModelError::Invalid`].
    pub(super) fn new(scorer: NgramScorer, labels: &[String]) -> Result<Self, ModelError> {
        let mismatch = || ModelError::Invalid {
            path: "models.domain.ngrams".into(),
            message: format!(
                "labels {:?} are not the domain model's {labels:?}",
                scorer.labels
            ),
        };
        if scorer.labels.len() != labels.len() {
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
    /// logits for `text`.
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

impl SequenceSignals {
    /// With a domain n-gram model configured, adds its log-probabilities for each
    /// request's `text` to its domain distribution, which stays sorted highest first (and
    /// `label` / `confidence` its first entry); the time counts as postprocessing.
    pub(super) fn add_domain_ngrams(
        &self,
        inputs: &[ClassifyInput],
        outputs: &mut [ClassifyOutput],
    ) {
        let Some(ngrams) = &self.domain_ngrams else {
            return;
        };
        for (input, out) in inputs.iter().zip(outputs.iter_mut()) {
            let Some(d) = out.domain.as_mut() else {
                continue;
            };
            let t0 = Instant::now();
            // The distribution is sorted by probability: back into the label order.
            let labels = self.domain.labels();
            let mut probs = vec![0f32; labels.len()];
            for (label, p) in &d.distribution {
                if let Some(i) = labels.iter().position(|l| l == label) {
                    probs[i] = *p;
                }
            }
            let combined = ngrams.combine(&input.text, &probs);
            let mut distribution: Vec<(String, f32)> =
                labels.iter().cloned().zip(combined).collect();
            distribution.sort_by(|a, b| b.1.total_cmp(&a.1));
            if let Some((label, confidence)) = distribution.first().cloned() {
                d.label = label;
                d.confidence = confidence;
            }
            d.distribution = distribution;
            out.timings.postprocess_us += t0.elapsed().as_micros() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_labels_in_any_order_and_refuses_others() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/ngrams");
        let scorer = NgramScorer::load(&dir.join("domain.safetensors")).unwrap();
        let mut labels = scorer.labels.clone();
        labels.reverse();
        let n = DomainNgrams::new(scorer.clone(), &labels).unwrap();
        assert_eq!(n.order[0], labels.len() - 1);
        // Uniform encoder probabilities: the n-gram model decides, in the domain order.
        let uniform = vec![1.0 / labels.len() as f32; labels.len()];
        let text = "Under the Fourth Amendment, is a warrantless search of a car lawful?";
        let p = n.combine(text, &uniform);
        let best = p
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .unwrap()
            .0;
        assert_eq!(labels[best], "law", "{p:?}");
        assert!((p.iter().sum::<f32>() - 1.0).abs() < 1e-5);
        labels[0] = "astrology".into();
        assert!(DomainNgrams::new(scorer.clone(), &labels).is_err());
        assert!(DomainNgrams::new(scorer.clone(), &labels[1..]).is_err());
        let mut twice = scorer.labels.clone();
        twice[1] = twice[0].clone();
        let mut dup = scorer.clone();
        dup.labels = twice.clone();
        assert!(DomainNgrams::new(dup, &scorer.labels).is_err());
    }
}
