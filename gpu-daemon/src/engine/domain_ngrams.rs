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

use std::path::Path;
use std::time::Instant;

use super::jailbreak_ngrams::prefix;
use super::sequence::SequenceSignals;
use super::{ClassifyInput, ClassifyOutput, DomainOutput};
use crate::models::ngrams::NgramScorer;
use crate::models::ModelError;

/// A domain n-gram model and, for each of its logits, the index of the same label among
/// the domain model's labels.
pub(super) struct DomainNgrams {
    scorer: NgramScorer,
    /// The domain model's labels, in the order of its outputs.
    labels: Vec<String>,
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
        Ok(Self {
            scorer,
            labels: labels.to_vec(),
            order,
        })
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

    /// Adds the model's log-probabilities for `text` to the domain result `d`: its
    /// distribution (sorted highest first, as [`super::domain_output`] writes it) is read
    /// back into label order, combined ([`NgramScorer::combine_distribution`]) and sorted
    /// again; `label` and `confidence` are its first entry. A label `d` lacks counts as
    /// probability 0.
    fn apply(&self, text: &str, d: &mut DomainOutput) {
        let mut probs = vec![0f32; self.labels.len()];
        for (label, p) in &d.distribution {
            if let Some(i) = self.labels.iter().position(|l| l == label) {
                probs[i] = *p;
            }
        }
        let combined = self.combine(text, &probs);
        let mut distribution: Vec<(String, f32)> =
            self.labels.iter().cloned().zip(combined).collect();
        distribution.sort_by(|a, b| b.1.total_cmp(&a.1));
        if let Some((label, confidence)) = distribution.first().cloned() {
            d.label = label;
            d.confidence = confidence;
        }
        d.distribution = distribution;
    }
}

impl SequenceSignals {
    /// With a domain n-gram model configured, adds its log-probabilities for each
    /// request's `text` to its domain result ([`DomainNgrams::apply`]); the time counts as
    /// postprocessing.
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
            ngrams.apply(&input.text, d);
            out.timings.postprocess_us += t0.elapsed().as_micros() as u64;
        }
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

    /// The distribution arrives sorted by probability, not in label order: each label
    /// keeps its own probability through the combination, and the result is sorted with
    /// `label` / `confidence` its first entry.
    #[test]
    fn apply_reads_the_sorted_distribution_back_by_label() {
        let scorer = committed();
        let labels = scorer.labels.clone();
        let n = DomainNgrams::new(scorer, &labels, Path::new("d")).unwrap();
        // Probabilities rising with the label index, so the sorted order is the reverse.
        let total: f32 = (1..=labels.len()).map(|i| i as f32).sum();
        let probs: Vec<f32> = (1..=labels.len()).map(|i| i as f32 / total).collect();
        let mut sorted: Vec<(String, f32)> = labels.iter().cloned().zip(probs.clone()).collect();
        sorted.sort_by(|a, b| b.1.total_cmp(&a.1));
        let mut d = DomainOutput {
            label: sorted[0].0.clone(),
            confidence: sorted[0].1,
            distribution: sorted,
        };
        n.apply(LAW, &mut d);
        let want = n.combine(LAW, &probs);
        assert_eq!(d.distribution.len(), labels.len());
        for (label, p) in &d.distribution {
            let i = labels.iter().position(|l| l == label).unwrap();
            assert!(
                (p - want[i]).abs() < 1e-7,
                "{label}: {p} against {}",
                want[i]
            );
        }
        assert!(d.distribution.windows(2).all(|w| w[0].1 >= w[1].1));
        assert_eq!(
            (d.label.as_str(), d.confidence),
            (d.distribution[0].0.as_str(), d.distribution[0].1)
        );
        assert_eq!(d.label, "law");
    }
}
