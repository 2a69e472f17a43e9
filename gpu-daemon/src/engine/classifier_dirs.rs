//! The domain and jailbreak signals with classifier directories of their own
//! ([`HfClassifier`], sequence classification) instead of heads on the shared encoder:
//! each request is planned, run and aggregated on its own, with the classifier's own
//! tokenizer and windows.
//!
//! - **plan** ([`texts_to_score`]): the domain reads `text`; the jailbreak also
//!   `scan_text`, their readings, and the filter's flagged sentences with their readings
//!   and pieces.
//! - **run** and **aggregate** ([`score_texts`]): each text in windows, logits per
//!   window; the domain is the mean of the windows' probabilities, the jailbreak the
//!   highest window's probability of the positive label.

use std::borrow::Cow;
use std::time::Instant;

use super::domain_ngrams::domain_probabilities;
use super::readings::{flagged_variants, jailbreak_readings};
use super::sequence::SequenceSignals;
use super::windows::{byte_span, flagged_pieces, plan_windows};
use super::{
    domain_output, ClassifyInput, ClassifyOutput, EngineError, JailbreakOutput, Part,
    SequenceModel, MAX_FLAGGED_JOBS,
};
use crate::config::LimitsConfig;
use crate::models::head::softmax;
use crate::models::hf_dir::HfClassifier;
use crate::passes::{run_sorted, BatchLimits};

/// A text a classifier directory scores: its part, the offset of its first byte there,
/// and the text.
type ScoredText<'a> = (Part, usize, Cow<'a, str>);

/// What a classifier gave over the texts of one request.
struct TextScores {
    /// Sum over the windows of the label probabilities `[labels]`.
    probs_sum: Vec<f32>,
    /// The probability of the positive label, highest per text and over both.
    jailbreak: JailbreakOutput,
    /// Windows scored.
    windows: u32,
}

impl SequenceSignals {
    /// The signals with a classifier directory, for each request asking for them.
    pub(super) fn run_classifier_dirs(
        &mut self,
        inputs: &[ClassifyInput],
        outputs: &mut [ClassifyOutput],
    ) -> Result<(), EngineError> {
        let positive = self.jailbreak_positive;
        for (is_domain, model) in [(true, &mut self.domain), (false, &mut self.jailbreak)] {
            let SequenceModel::Classifier(c) = model else {
                continue;
            };
            for (req, input) in inputs.iter().enumerate() {
                let wanted = if is_domain {
                    input.signals.domain
                } else {
                    input.signals.jailbreak
                };
                if !wanted {
                    continue;
                }
                let t0 = Instant::now();
                let texts = texts_to_score(c, input, is_domain, self.limits.max_readings)?;
                let scores = score_texts(
                    c,
                    &texts,
                    &self.limits,
                    self.batch,
                    positive,
                    &mut outputs[req],
                )?;
                if is_domain {
                    let n = scores.windows.max(1) as f32;
                    let mean: Vec<f32> = scores.probs_sum.iter().map(|v| v / n).collect();
                    let ngrams = self.domain_ngrams.as_ref();
                    let probs = domain_probabilities(ngrams, &input.text, mean);
                    outputs[req].domain = Some(domain_output(&c.id2label, probs));
                } else if scores.jailbreak.windows > 0 {
                    outputs[req].jailbreak = Some(scores.jailbreak);
                }
                outputs[req].timings.inference_us += t0.elapsed().as_micros() as u64;
            }
        }
        Ok(())
    }
}

/// Plan: the texts classifier `c` scores for one request: `text` for the domain; for the
/// jailbreak also `scan_text` (when not empty), the readings of both (at most
/// `max_readings` each), and the flagged sentences with their readings and pieces.
fn texts_to_score<'a>(
    c: &HfClassifier,
    input: &'a ClassifyInput,
    is_domain: bool,
    max_readings: usize,
) -> Result<Vec<ScoredText<'a>>, EngineError> {
    let mut texts: Vec<ScoredText<'_>> = if is_domain || input.scan_text.is_empty() {
        vec![(Part::Text, 0, Cow::Borrowed(input.text.as_str()))]
    } else {
        vec![
            (Part::Text, 0, Cow::Borrowed(input.text.as_str())),
            (Part::ScanText, 0, Cow::Borrowed(input.scan_text.as_str())),
        ]
    };
    if !is_domain {
        // The jailbreak also scores each text's other readings (invisible
        // characters as spaces, look-alike letters as Latin, encoded payloads
        // decoded; offsets unchanged), where there are any, and the filter's
        // flagged sentences alone.
        let max = max_readings;
        let spaced: Vec<ScoredText<'_>> = texts
            .iter()
            .flat_map(|(part, _, t)| {
                jailbreak_readings(t, max)
                    .into_iter()
                    .map(|s| (*part, 0, Cow::Owned(s)))
            })
            .collect();
        texts.extend(spaced);
        // The flagged sentences as written first, then their readings and
        // pieces, at most MAX_FLAGGED_JOBS texts in all.
        let mut extra: Vec<(u8, ScoredText<'_>)> = Vec::new();
        for part in [Part::Text, Part::ScanText] {
            for (r, sentence) in input.flagged(part) {
                for (v, variant) in flagged_variants(sentence, max).into_iter().enumerate() {
                    let tok = c.tokenizer.tokenize(&variant)?;
                    let n = tok.ids.len();
                    let mut pieces = flagged_pieces(&tok, &variant, n, 0);
                    // The whole sentence is windowed below like any text.
                    pieces.retain(|p| p.len() < n);
                    for p in pieces {
                        let (a, b) = byte_span(&tok, p, variant.len());
                        if let Some(t) = variant.get(a..b) {
                            let t = Cow::Owned(t.to_string());
                            extra.push((1 + u8::from(v > 0), (part, r.start + a, t)));
                        }
                    }
                    extra.push((u8::from(v > 0), (part, r.start, variant)));
                }
            }
        }
        extra.sort_by_key(|(tier, _)| *tier);
        texts.extend(extra.into_iter().take(MAX_FLAGGED_JOBS).map(|(_, t)| t));
    }
    Ok(texts)
}

/// Run and aggregate: each of `texts` in windows of at most the classifier's positions
/// (and `limits.max_seq_len`) through `c`, one text at a time; adds `truncated` and the
/// tokens run to `out`.
fn score_texts(
    c: &mut HfClassifier,
    texts: &[ScoredText<'_>],
    limits: &LimitsConfig,
    batch: BatchLimits,
    positive: usize,
    out: &mut ClassifyOutput,
) -> Result<TextScores, EngineError> {
    let content = c
        .max_positions
        .min(limits.max_seq_len)
        .saturating_sub(2)
        .max(1);
    let mut scores = TextScores {
        probs_sum: vec![0f32; c.id2label.len()],
        jailbreak: JailbreakOutput::empty(),
        windows: 0,
    };
    for (part, base, text) in texts {
        let (part, base, text) = (*part, *base, text.as_ref());
        let tok = c.tokenizer.tokenize(text)?;
        let plan = plan_windows(
            tok.ids.len(),
            content,
            limits.window_overlap,
            limits.max_windows,
        );
        out.truncated |= plan.truncated;
        let seqs: Vec<&[u32]> = plan.windows.iter().map(|w| &tok.ids[w.clone()]).collect();
        out.encoder_tokens += seqs.iter().map(|q| q.len() as u32 + 2).sum::<u32>();
        let logits = run_sorted(&seqs, batch, |b| {
            let l = c.logits(b)?;
            Ok(l.outer_iter()
                .map(|r| r.iter().copied().collect::<Vec<f32>>())
                .collect())
        })?;
        for (w, l) in plan.windows.iter().zip(logits) {
            let p = softmax(&l);
            scores.windows += 1;
            scores
                .probs_sum
                .iter_mut()
                .zip(&p)
                .for_each(|(s, v)| *s += v);
            let score = p.get(positive).copied().unwrap_or(0.0);
            let span = byte_span(&tok, w.clone(), text.len());
            scores
                .jailbreak
                .record(part, (base + span.0, base + span.1), score);
        }
    }
    Ok(scores)
}
