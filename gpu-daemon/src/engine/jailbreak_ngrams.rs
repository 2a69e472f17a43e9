//! The jailbreak score's second reading: the hashed n-gram model
//! ([`NgramScorer`], `models.jailbreak.ngrams`), whose logit is added to the log-odds of
//! the highest window's probability.
//!
//! The model reads what the encoder's windows read for the jailbreak, `text` and
//! `scan_text` with their other readings ([`jailbreak_readings`]: invisible characters
//! as spaces, look-alike letters as Latin, encoded payloads decoded), and each sentence
//! the filter's risk scan flagged in them, alone, with its readings; the highest of those
//! logits counts; a text that holds invisible characters is also read with them left
//! out, as the encoder's tokenizer reads it. So an invisible character never lowers the
//! score (between the words, the spaced reading scores like the plain text; inside them,
//! the text without it does), and a flagged sentence scored alone
//! keeps an instruction override buried in a paragraph of prose from being averaged away
//! by the paragraph's n-grams.

use super::readings::{flagged_variants, jailbreak_readings};
use super::sequence::SequenceSignals;
use super::{ClassifyInput, ClassifyOutput, Part};
use crate::invisible::is_invisible;
use crate::models::ngrams::NgramScorer;

impl SequenceSignals {
    /// Sets each jailbreak result's `encoder_score` to its score and, with an n-gram model
    /// configured, adds the model's logit ([`ngram_logit`]) to the score's log-odds.
    pub(super) fn add_ngram_logits(
        &self,
        inputs: &[ClassifyInput],
        outputs: &mut [ClassifyOutput],
    ) {
        for (input, out) in inputs.iter().zip(outputs.iter_mut()) {
            let Some(j) = out.jailbreak.as_mut() else {
                continue;
            };
            j.encoder_score = j.score;
            if let Some(scorer) = &self.jailbreak_ngrams {
                let logit = ngram_logit(scorer, input, self.limits.max_readings);
                j.ngram_logit = Some(logit);
                j.score = NgramScorer::combine(j.score, logit);
            }
        }
    }
}

/// The highest n-gram logit over `text`, `scan_text` (when not empty), their readings
/// (at most `max_readings` each), and the flagged sentences of both, each alone with its
/// readings.
fn ngram_logit(scorer: &NgramScorer, input: &ClassifyInput, max_readings: usize) -> f32 {
    let scan_text = Some(&input.scan_text).filter(|t| !t.is_empty());
    let mut best = f32::NEG_INFINITY;
    for text in std::iter::once(&input.text).chain(scan_text) {
        best = best.max(read_logit(scorer, text));
        for reading in jailbreak_readings(text, max_readings) {
            best = best.max(read_logit(scorer, &reading));
        }
    }
    for part in [Part::Text, Part::ScanText] {
        for (_, sentence) in input.flagged(part) {
            for variant in flagged_variants(sentence, max_readings) {
                best = best.max(read_logit(scorer, &variant));
            }
        }
    }
    best
}

/// The n-gram logit of `text`, or, where it holds [invisible](is_invisible) characters,
/// the higher of that and the logit of the text without them.
fn read_logit(scorer: &NgramScorer, text: &str) -> f32 {
    let logit = scorer.logit(text);
    if !text.chars().any(is_invisible) {
        return logit;
    }
    let visible: String = text.chars().filter(|c| !is_invisible(*c)).collect();
    logit.max(scorer.logit(&visible))
}
