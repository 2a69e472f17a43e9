//! The jailbreak score's second reading: the hashed n-gram model
//! ([`NgramScorer`], `models.jailbreak.ngrams`), whose logit for a text is added to the
//! log-odds of that text's highest window probability (see `jailbreak_score.rs`).
//!
//! The model reads each text the encoder reads for the jailbreak (`text`, `scan_text`)
//! with its other readings ([`jailbreak_readings`]: invisible characters as spaces,
//! look-alike letters as Latin, encoded payloads decoded), and each sentence the filter's
//! risk scan flagged in it, alone, with its readings; the highest of those logits is the
//! text's. A text that holds invisible characters is also read with them left out, as the
//! encoder's tokenizer reads it; each text without its diacritics ([`without_diacritics`],
//! as that tokenizer reads them); and each text or reading that mixes writing systems once
//! per system ([`per_script_texts`]: ordinary text in a script the model has learned as
//! benign does not dilute a jailbreak in another). So an invisible character never lowers
//! the score (between the words, the spaced reading scores like the plain text; inside
//! them, the text without it does), and a flagged sentence scored alone keeps an
//! instruction override buried in a paragraph of prose from being averaged away by the
//! paragraph's n-grams.
//!
//! The logit counts from [`NGRAM_LOGIT_FLOOR`] up, so that no text around a jailbreak can
//! outvote an encoder that is certain of it. Each text is read up to
//! [`MAX_NGRAM_BYTES`](crate::models::ngrams::MAX_NGRAM_BYTES), and at most
//! [`MAX_FLAGGED_JOBS`] flagged sentences and their readings per text, so a request's cost
//! stays bounded whatever its size and its flagged spans.

use std::borrow::Cow;
use std::time::Instant;

use super::readings::{flagged_variants, jailbreak_readings};
use super::sequence::SequenceSignals;
use super::{ClassifyInput, ClassifyOutput, Part, MAX_FLAGGED_JOBS};
use crate::diacritics::without_diacritics;
use crate::invisible::is_invisible;
use crate::mixed_script::per_script_texts;
use crate::models::ngrams::{prefix, NgramScorer};

/// Lowest n-gram logit added to the encoder's log-odds. An encoder score at its ceiling
/// (`1 - 1e-7`, log-odds 16.1, [`NgramScorer::combine`]) then stays above log-odds 8.10,
/// the filter's default threshold, however benign the text padded around the jailbreak reads.
/// On the validation split no decision changes with it.
pub const NGRAM_LOGIT_FLOOR: f32 = -6.0;

/// `score` with the n-gram model's `logit` (at least [`NGRAM_LOGIT_FLOOR`]) added to its
/// log-odds.
pub(super) fn with_ngram_logit(score: f32, logit: f32) -> f32 {
    NgramScorer::combine(score, logit.max(NGRAM_LOGIT_FLOOR))
}

impl SequenceSignals {
    /// With an n-gram model configured, reads each scored text's logit ([`ngram_logit`]),
    /// unless it was read before the refinement; then each text's score and the request's
    /// ([`JailbreakOutput::combine`](super::JailbreakOutput::combine)). Its time counts as
    /// postprocessing.
    pub(super) fn add_ngram_logits(
        &self,
        inputs: &[ClassifyInput],
        outputs: &mut [ClassifyOutput],
    ) {
        for (input, out) in inputs.iter().zip(outputs.iter_mut()) {
            let Some(j) = out.jailbreak.as_mut() else {
                continue;
            };
            let t0 = Instant::now();
            let max_readings = self.limits.max_readings;
            let scorer = self.jailbreak_ngrams.as_ref();
            j.read_ngrams(|part| scorer.map(|s| ngram_logit(s, input, part, max_readings)));
            j.combine();
            out.timings.postprocess_us += t0.elapsed().as_micros() as u64;
        }
    }
}

/// The highest n-gram logit over the text of `part` (`text` or `scan_text`), its readings
/// (at most `max_readings`, and the text without its diacritics, [`without_diacritics`]),
/// each of those once per writing system where it mixes systems ([`per_script_texts`]),
/// and its flagged sentences, each alone with its readings (at most [`MAX_FLAGGED_JOBS`]
/// such texts, each sentence as written first).
pub(super) fn ngram_logit(
    scorer: &NgramScorer,
    input: &ClassifyInput,
    part: Part,
    max_readings: usize,
) -> f32 {
    let mut best = f32::NEG_INFINITY;
    let text = prefix(input.part_text(part));
    let readings = jailbreak_readings(text, max_readings)
        .into_iter()
        .chain(without_diacritics(text));
    for read in std::iter::once(Cow::Borrowed(text)).chain(readings.map(Cow::Owned)) {
        best = best.max(read_logit(scorer, &read));
        for one_script in per_script_texts(&read) {
            best = best.max(read_logit(scorer, &one_script));
        }
    }
    let mut flagged: Vec<&str> = Vec::new();
    for (_, sentence) in input.flagged(part) {
        let sentence = prefix(sentence);
        if !flagged.contains(&sentence) {
            flagged.push(sentence);
        }
    }
    let variants = flagged
        .iter()
        .flat_map(|s| flagged_variants(s, max_readings))
        .take(MAX_FLAGGED_JOBS);
    for variant in variants {
        best = best.max(read_logit(scorer, &variant));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_keeps_a_certain_encoder_above_the_default_threshold() {
        let z = |p: f32| ((p as f64) / (1.0 - p as f64)).ln();
        let certain = NgramScorer::combine(1.0, NGRAM_LOGIT_FLOOR);
        assert!(z(certain) >= 10.0, "{certain}");
    }
}
