//! The `Classify` request, built in one place from what compression made of a request's
//! texts. The streaming filter, the buffered baseline (`tests/buffered-baseline`) and
//! the benchmarks all call [`classify_request`], so they send the daemon the same message
//! for the same texts.

use std::ops::Range;

use semroute_proto::signal;
use semroute_proto::v1::{ClassifyRequest, Reduction, TextSpan};

use crate::compression::{push_pattern_sentence, Compressed};
use crate::text::compact::compact;

/// The parts of one `Classify` request.
#[derive(Debug)]
pub struct ClassifyParts {
    /// Echoed in the daemon's logs.
    pub request_id: String,
    /// The signals to compute (`semroute_proto::signal` names).
    pub signals: Vec<String>,
    /// The last user turn, compressed to the daemon's budget.
    pub prompt: Compressed,
    /// Earlier turns and tool output: the text the jailbreak and PII signals also scan.
    pub scan_text: String,
    /// Byte ranges in `scan_text` of the sentences the jailbreak signal scores alone.
    pub scan_flagged: Vec<Range<usize>>,
    /// Byte ranges in `scan_text` of the sentences the PII model reads
    /// ([`Compressed::pii_sentences`] of the scan text).
    pub scan_pii: Vec<Range<usize>>,
    /// Sentences of the scan text with validated-pattern personal data that compression
    /// dropped, one per line ([`Compressed::pattern_text`] of the scan text).
    pub scan_pattern_text: String,
    /// The PII signal runs the daemon's validated patterns only, not its model.
    pub pii_patterns_only: bool,
}

/// The `Classify` request for `parts`, or `None` when there is nothing to classify (no
/// signal, or no text).
///
/// With no user turn (an empty prompt), the domain signal is dropped and the scan text
/// takes the prompt's place. Both texts are compacted ([`compact`]: runs of characters
/// the encoder drops and over-long words cut), their spans mapped to match. The pattern text (the prompt's, then the scan text's, whole
/// sentences within `semroute_proto::MAX_PATTERN_TEXT_BYTES`) is sent only with the PII
/// signal.
pub fn classify_request(parts: ClassifyParts) -> Option<ClassifyRequest> {
    let ClassifyParts {
        request_id,
        mut signals,
        prompt,
        mut scan_text,
        mut scan_flagged,
        mut scan_pii,
        scan_pattern_text,
        pii_patterns_only,
    } = parts;
    let reduction = reduction(&prompt);
    let pattern_text = if signals.iter().any(|s| s == signal::PII) {
        join_pattern_text(prompt.pattern_text, &scan_pattern_text)
    } else {
        String::new()
    };
    let mut text = prompt.text;
    let mut flagged = prompt.flagged_sentences;
    let mut pii = prompt.pii_sentences;
    if text.trim().is_empty() {
        // No user turn: domain cannot be classified; scan what there is.
        signals.retain(|s| s != signal::DOMAIN);
        text = std::mem::take(&mut scan_text);
        flagged = std::mem::take(&mut scan_flagged);
        pii = std::mem::take(&mut scan_pii);
    }
    if signals.is_empty() || text.trim().is_empty() {
        return None;
    }
    // The sentences the PII model reads, only where it reads any.
    if pii_patterns_only || !signals.iter().any(|s| s == signal::PII) {
        pii.clear();
        scan_pii.clear();
    }
    // What the encoder never reads cut, so that the size follows the tokens (see
    // `text::compact`); the spans follow.
    let (text, scan_text) = (compact(&text), compact(&scan_text));
    let (flagged, pii) = (text.map_ranges(&flagged), text.map_ranges(&pii));
    let scan_flagged = scan_text.map_ranges(&scan_flagged);
    let scan_pii = scan_text.map_ranges(&scan_pii);
    Some(ClassifyRequest {
        request_id,
        text: text.text.into_bytes(),
        signals,
        reduction: Some(reduction),
        scan_text: scan_text.text.into_bytes(),
        flagged_sentences: text_spans(&flagged),
        scan_flagged_sentences: text_spans(&scan_flagged),
        pattern_text: pattern_text.into_bytes(),
        pii_patterns_only,
        pii_sentences: text_spans(&pii),
        scan_pii_sentences: text_spans(&scan_pii),
    })
}

/// `text` and each list of its sentence spans (`span_lists`: flagged, PII, ...) compacted
/// as the `Classify` request carries them ([`compact`]): for tools that show what the
/// filter sends.
pub fn compact_text(
    text: &str,
    span_lists: &[&[Range<usize>]],
) -> (String, Vec<Vec<Range<usize>>>) {
    let c = compact(text);
    let spans = span_lists.iter().map(|s| c.map_ranges(s)).collect();
    (c.text, spans)
}

/// The `Classify` request's account of a compression: original and kept tokens, original
/// bytes, and whether anything was cut.
pub fn reduction(c: &Compressed) -> Reduction {
    Reduction {
        original_tokens: c.original_tokens,
        kept_tokens: c.kept_tokens,
        original_bytes: c.original_bytes,
        compressed: c.compressed,
    }
}

/// Byte ranges as `TextSpan`s (offsets in bytes); a range past `u32` is left out.
pub fn text_spans(ranges: &[Range<usize>]) -> Vec<TextSpan> {
    ranges
        .iter()
        .filter_map(|r| {
            Some(TextSpan {
                start: u32::try_from(r.start).ok()?,
                end: u32::try_from(r.end).ok()?,
            })
        })
        .collect()
}

/// The prompt's and the scan text's pattern texts joined, whole sentences only, within the
/// pattern text's limit.
fn join_pattern_text(mut prompt: String, scan: &str) -> String {
    for sentence in scan.split('\n').filter(|s| !s.is_empty()) {
        if !push_pattern_sentence(&mut prompt, sentence) {
            break;
        }
    }
    prompt
}
