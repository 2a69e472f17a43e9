//! A request's jailbreak score from the readings of its two texts.
//!
//! The filter's thresholds were chosen on single texts: a text's highest window or
//! sentence probability, with the n-gram model's logit for that same text added to its
//! log-odds. A request holds two texts, the prompt (`text`) and the earlier turns and tool
//! output (`scan_text`). Each is read as such a text alone ([`PartScore`]) and the higher
//! decides. One text's encoder probability is never paired with the other's n-gram logit:
//! such a pair is a score no threshold was chosen for: a short follow-up that the encoder
//! reads as likely extraction (0.93, say) paired with the n-gram logit of a long security
//! document before it (+1.6) crosses a lowered threshold that neither text crosses alone.

use super::jailbreak_ngrams::with_ngram_logit;
use super::{JailbreakOutput, Part, PartScore};

/// The texts the jailbreak signal scores, in [`JailbreakOutput::parts`] order.
pub(super) const SCORED_PARTS: [Part; 2] = [Part::Text, Part::ScanText];

/// Index of `part` in [`JailbreakOutput::parts`]; `None` for the pattern text, which only
/// the PII patterns read.
pub(super) fn part_index(part: Part) -> Option<usize> {
    match part {
        Part::Text => Some(0),
        Part::ScanText => Some(1),
        Part::PatternText => None,
    }
}

impl JailbreakOutput {
    /// A result with nothing scored yet (every score below any probability).
    pub(super) fn empty() -> Self {
        JailbreakOutput {
            score: -1.0,
            encoder_score: -1.0,
            ngram_logit: None,
            windows: 0,
            window: (0, 0, Part::Text),
            parts: [None, None],
        }
    }

    /// Counts one more window or sentence of `part` (bytes `span` of it) with jailbreak
    /// probability `p`, and keeps the highest per text and over both (`score`, `window`,
    /// until [`JailbreakOutput::combine`]). True when `p` is the new highest over both.
    pub(super) fn record(&mut self, part: Part, span: (usize, usize), p: f32) -> bool {
        self.windows += 1;
        if let Some(slot) = part_index(part).and_then(|i| self.parts.get_mut(i)) {
            match slot {
                Some(s) if p <= s.encoder_score => {}
                Some(s) => {
                    s.encoder_score = p;
                    s.score = p;
                    s.window = span;
                }
                None => {
                    *slot = Some(PartScore {
                        score: p,
                        encoder_score: p,
                        ngram_logit: None,
                        window: span,
                    })
                }
            }
        }
        if p > self.score {
            self.score = p;
            self.encoder_score = p;
            self.window = (span.0, span.1, part);
            true
        } else {
            false
        }
    }

    /// Sets the n-gram logit of each scored text that has none yet to `logit(part)` (the
    /// model's reading of that text; `None` without a model).
    pub(super) fn read_ngrams(&mut self, mut logit: impl FnMut(Part) -> Option<f32>) {
        for (part, slot) in SCORED_PARTS.into_iter().zip(self.parts.iter_mut()) {
            if let Some(s) = slot.as_mut() {
                if s.ngram_logit.is_none() {
                    s.ngram_logit = logit(part);
                }
            }
        }
    }

    /// The highest text score with the n-gram logits read so far
    /// ([`JailbreakOutput::read_ngrams`]), as [`JailbreakOutput::combine`] would make it
    /// now; `score` where no text was scored.
    pub(super) fn combined(&self) -> f32 {
        self.parts
            .iter()
            .flatten()
            .map(part_score)
            .reduce(f32::max)
            .unwrap_or(self.score)
    }

    /// Each text's score (its highest probability with its own n-gram logit, see
    /// [`with_ngram_logit`]), and the request's from the higher text: `score`,
    /// `encoder_score`, `ngram_logit` and `window` become that text's (the prompt's on a
    /// tie).
    pub(super) fn combine(&mut self) {
        let mut best: Option<(Part, PartScore)> = None;
        for (part, slot) in SCORED_PARTS.into_iter().zip(self.parts.iter_mut()) {
            let Some(s) = slot.as_mut() else {
                continue;
            };
            s.score = part_score(s);
            if best.is_none_or(|(_, b)| s.score > b.score) {
                best = Some((part, *s));
            }
        }
        if let Some((part, s)) = best {
            self.score = s.score;
            self.encoder_score = s.encoder_score;
            self.ngram_logit = s.ngram_logit;
            self.window = (s.window.0, s.window.1, part);
        }
    }

    /// The score of `part`'s text when it was scored.
    pub fn part_score(&self, part: Part) -> Option<f32> {
        part_index(part)
            .and_then(|i| self.parts.get(i))
            .and_then(|s| s.as_ref())
            .map(|s| s.score)
    }
}

/// `s`'s probability with its n-gram logit added (its probability alone without one).
fn part_score(s: &PartScore) -> f32 {
    s.ngram_logit
        .map_or(s.encoder_score, |l| with_ngram_logit(s.encoder_score, l))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_text_keeps_its_own_highest_window() {
        let mut j = JailbreakOutput::empty();
        assert!(j.record(Part::Text, (0, 10), 0.2));
        assert!(j.record(Part::ScanText, (5, 40), 0.7));
        assert!(!j.record(Part::Text, (10, 20), 0.5));
        assert!(!j.record(Part::ScanText, (50, 60), 0.1));
        assert_eq!(j.windows, 4);
        let [text, scan] = j.parts;
        let (text, scan) = (text.unwrap(), scan.unwrap());
        assert_eq!((text.encoder_score, text.window), (0.5, (10, 20)));
        assert_eq!((scan.encoder_score, scan.window), (0.7, (5, 40)));
        assert_eq!(j.window, (5, 40, Part::ScanText));
    }

    #[test]
    fn a_text_is_never_paired_with_the_other_texts_ngram_logit() {
        // The follow-up the encoder finds suspicious, the document the n-gram model does.
        let mut j = JailbreakOutput::empty();
        j.record(Part::Text, (0, 33), 0.933);
        j.record(Part::ScanText, (0, 800), 0.05);
        j.read_ngrams(|part| Some(if part == Part::Text { -1.3 } else { 1.62 }));
        let before = j.combined();
        j.combine();
        assert_eq!(j.combined(), before);
        let text = with_ngram_logit(0.933, -1.3);
        let scan = with_ngram_logit(0.05, 1.62);
        let mixed = with_ngram_logit(0.933, 1.62);
        assert_eq!(j.part_score(Part::Text), Some(text));
        assert_eq!(j.part_score(Part::ScanText), Some(scan));
        assert_eq!(j.score, text.max(scan));
        assert!(j.score < mixed - 0.01, "{} against {mixed}", j.score);
        assert_eq!((j.encoder_score, j.ngram_logit), (0.933, Some(-1.3)));
        assert_eq!(j.window, (0, 33, Part::Text));
    }

    #[test]
    fn the_higher_text_decides_and_a_logit_read_early_is_kept() {
        let mut j = JailbreakOutput::empty();
        j.record(Part::Text, (0, 20), 0.4);
        j.record(Part::ScanText, (3, 9), 0.3);
        j.read_ngrams(|part| (part == Part::ScanText).then_some(4.0));
        // A later sentence pass raises the scan text's probability; its logit stays.
        j.record(Part::ScanText, (4, 8), 0.35);
        j.read_ngrams(|_| Some(-9.0));
        j.combine();
        assert_eq!(j.parts[1].unwrap().ngram_logit, Some(4.0));
        assert_eq!(j.parts[0].unwrap().ngram_logit, Some(-9.0));
        assert_eq!(j.window, (4, 8, Part::ScanText));
        assert_eq!(j.score, with_ngram_logit(0.35, 4.0));
    }

    #[test]
    fn without_an_ngram_model_the_scores_are_the_probabilities() {
        let mut j = JailbreakOutput::empty();
        j.record(Part::Text, (0, 5), 0.25);
        j.read_ngrams(|_| None);
        j.combine();
        assert_eq!(
            (j.score, j.encoder_score, j.ngram_logit),
            (0.25, 0.25, None)
        );
        assert_eq!(j.part_score(Part::ScanText), None);
    }
}
