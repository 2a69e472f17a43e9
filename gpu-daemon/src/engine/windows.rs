//! Windowing: which token ranges of a text the models see. A long text is cut into
//! overlapping windows ([`plan_windows`]) so that it is scored whole instead of being
//! silently cut at the model's position limit; the jailbreak signal adds windows that
//! start at flagged sentences ([`anchored_windows`]), and scores alone the sentences of
//! its suspicious windows ([`windows_to_refine`], [`window_sentences`],
//! [`sentences_to_score`]) and the pieces of the filter's flagged sentences
//! ([`flagged_pieces`]). Ranges are token indices into a [`TokenizedText`]; spans are
//! byte offsets into its text ([`byte_span`]).

use std::ops::Range;

use crate::models::tokenizer::TokenizedText;

/// Window layout over a token sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowPlan {
    /// Token ranges, in order; consecutive ranges overlap by `overlap` tokens.
    pub windows: Vec<Range<usize>>,
    /// True when the text had more tokens than `max_windows` windows cover.
    pub truncated: bool,
}

/// Splits `n_tokens` tokens into windows of at most `content_len` tokens
/// that overlap by `overlap` tokens, at most `max_windows` of them.
///
/// An empty input yields one empty window (the model still sees
/// `[CLS] [SEP]`). Panics never: `overlap >= content_len` is treated as
/// `content_len - 1`.
pub fn plan_windows(
    n_tokens: usize,
    content_len: usize,
    overlap: usize,
    max_windows: usize,
) -> WindowPlan {
    let content_len = content_len.max(1);
    let stride = content_len - overlap.min(content_len - 1);
    let mut windows = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + content_len).min(n_tokens);
        windows.push(start..end);
        if end >= n_tokens {
            return WindowPlan {
                windows,
                truncated: false,
            };
        }
        if windows.len() >= max_windows.max(1) {
            return WindowPlan {
                windows,
                truncated: true,
            };
        }
        start += stride;
    }
}

/// Windows of `tok` over the tokens that `spans` (byte ranges of its text, in any order)
/// touch: the token range of each span, ranges that overlap or adjoin merged, each then
/// cut into windows as [`plan_windows`] cuts a text. What the PII model reads of a text
/// when the filter names the sentences with a personal-data cue. Empty for no spans or
/// spans that touch no token; `truncated` when a range needed more than `max_windows`.
pub fn span_windows(
    tok: &TokenizedText,
    spans: &[Range<usize>],
    content_len: usize,
    overlap: usize,
    max_windows: usize,
) -> WindowPlan {
    let ranges = spans.iter().map(|s| token_range(tok, s)).collect();
    windows_over(merge_ranges(ranges, 0), content_len, overlap, max_windows)
}

/// Windows of `reading` (tokenized as `tok`) over where it differs from `text`: each run of
/// differing bytes as the tokens it touches (a run that became whitespace: the tokens either
/// side of it), widened by `context` tokens on each side, ranges
/// closer than `context` tokens merged, each then cut into windows as [`plan_windows`] cuts
/// a text. A reading has the length and byte offsets of its text (see
/// `super::readings::jailbreak_readings`), so the rest of it is the text as written, which
/// its own windows already score: a folded e-mail address or version number in a long
/// prompt costs one short window instead of a second pass over every token. A reading of
/// another length (not expected) is planned whole.
pub fn changed_windows(
    tok: &TokenizedText,
    text: &str,
    reading: &str,
    context: usize,
    content_len: usize,
    overlap: usize,
    max_windows: usize,
) -> WindowPlan {
    if text.len() != reading.len() {
        return plan_windows(tok.ids.len(), content_len, overlap, max_windows);
    }
    let n = tok.ids.len();
    let ranges = changed_bytes(text.as_bytes(), reading.as_bytes())
        .map(|s| {
            let r = token_range(tok, &s);
            if r.is_empty() {
                // Whitespace in the reading (an invisible character read as a space) covers
                // no token, but it splits what the text as written glued together: the
                // tokens either side changed.
                r.start.saturating_sub(1)..(r.start + 1).min(n)
            } else {
                r
            }
        })
        .filter(|r| !r.is_empty())
        .map(|r| r.start.saturating_sub(context)..(r.end + context).min(n))
        .collect();
    windows_over(
        merge_ranges(ranges, context),
        content_len,
        overlap,
        max_windows,
    )
}

/// Maximal runs `[start, end)` of positions where `a` and `b` (the same length) differ.
fn changed_bytes<'a>(a: &'a [u8], b: &'a [u8]) -> impl Iterator<Item = Range<usize>> + 'a {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < a.len() && a[i] == b[i] {
            i += 1;
        }
        if i >= a.len() {
            return None;
        }
        let start = i;
        while i < a.len() && a[i] != b[i] {
            i += 1;
        }
        Some(start..i)
    })
}

/// The tokens of `tok` that byte span `s` of its text touches (tokens are in text order:
/// the first ending after the span's start, up to the first starting at or after its end);
/// empty where it touches none.
fn token_range(tok: &TokenizedText, s: &Range<usize>) -> Range<usize> {
    let a = tok.offsets.partition_point(|o| o.1 <= s.start);
    let b = tok.offsets.partition_point(|o| o.0 < s.end);
    a..b.max(a)
}

/// `ranges` (any order) sorted, empty ones dropped, and those less than `gap` tokens apart
/// (0: overlapping or adjoining) merged.
fn merge_ranges(mut ranges: Vec<Range<usize>>, gap: usize) -> Vec<Range<usize>> {
    ranges.retain(|r| !r.is_empty());
    ranges.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(ranges.len());
    for r in ranges {
        match merged.last_mut() {
            Some(last) if r.start <= last.end + gap => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    merged
}

/// Each of `ranges` cut into windows as [`plan_windows`] cuts a text.
fn windows_over(
    ranges: Vec<Range<usize>>,
    content_len: usize,
    overlap: usize,
    max_windows: usize,
) -> WindowPlan {
    let mut plan = WindowPlan {
        windows: Vec::new(),
        truncated: false,
    };
    for r in ranges {
        let p = plan_windows(r.len(), content_len, overlap, max_windows);
        plan.truncated |= p.truncated;
        plan.windows.extend(
            p.windows
                .into_iter()
                .map(|w| r.start + w.start..r.start + w.end),
        );
    }
    plan
}

/// Byte span of token range `w` (empty range: an empty span at 0).
pub(super) fn byte_span(tok: &TokenizedText, w: Range<usize>, text_len: usize) -> (usize, usize) {
    if w.is_empty() {
        return (0, 0);
    }
    let start = tok.offsets.get(w.start).map(|o| o.0).unwrap_or(0);
    let end = tok.offsets.get(w.end - 1).map(|o| o.1).unwrap_or(text_len);
    (start, end)
}

/// Extra windows of `tok` (`content` tokens each, or to the text's end) that start where a
/// flagged sentence starts (`starts`: byte offsets, in any order; a window starts at the
/// token holding the offset), at most `max` (`limits.anchored_windows`): the first flagged
/// sentence starts one, and each flagged sentence past the end of the last one starts the
/// next. None where one of `windows` (the text's regular windows) already holds the whole
/// span. Regular windows fall every `content - overlap` tokens from the text's start, so
/// where they cut a jailbreak depends on how much text comes before it: a long template (a
/// persona, then a list of rules) can score 0.98 in one window of the whole prompt and
/// under 0.8 split over two windows of the compressed one. A window that starts at the
/// template's first flagged sentence holds the same opening in both.
pub(super) fn anchored_windows(
    tok: &TokenizedText,
    starts: &[usize],
    content: usize,
    windows: &[Range<usize>],
    max: usize,
) -> Vec<Range<usize>> {
    let n = tok.ids.len().min(tok.offsets.len());
    if max == 0 {
        return Vec::new();
    }
    let mut starts: Vec<usize> = starts.to_vec();
    starts.sort_unstable();
    let mut out: Vec<Range<usize>> = Vec::new();
    let mut covered = 0;
    for s in starts {
        let t = tok.offsets[..n].partition_point(|&(_, b)| b <= s);
        if t >= n || t < covered {
            continue;
        }
        let w = t..n.min(t.saturating_add(content));
        covered = w.end;
        if windows.iter().any(|x| x.start <= w.start && w.end <= x.end) {
            continue;
        }
        out.push(w);
        if out.len() == max {
            break;
        }
    }
    out
}

/// Most windows per request whose sentences are scored alone: the best window and those
/// holding a flagged sentence (see [`windows_to_refine`]).
const MAX_REFINED_WINDOWS: usize = 4;

/// The windows of one request whose sentences the jailbreak signal scores alone, best
/// first. `windows` are the request's windows as `(job, score, holds a flagged sentence)`
/// and `best` the job of the highest score. The best window qualifies when its score is
/// in `[from, 1)` (`limits.jailbreak_sentences_from`); any window, the best one included,
/// qualifies when it holds a sentence the filter flagged and scores below 1, whatever
/// else it scores (the flag is the suspicion: a persona or fiction setup spreads over
/// sentences the filter does not flag, prose around it dilutes its window, and in a long
/// text a window of other text can outscore it). The others follow by score; none
/// qualifies when `from` is 1 or more (refining off). At most [`MAX_REFINED_WINDOWS`].
pub(super) fn windows_to_refine(
    best: Option<usize>,
    windows: &[(usize, f32, bool)],
    from: f32,
) -> Vec<usize> {
    if from >= 1.0 {
        return Vec::new();
    }
    let suspicious = |s: f32| s >= from && s < 1.0;
    let mut out: Vec<usize> = best
        .filter(|&b| {
            windows
                .iter()
                .any(|&(j, s, flagged)| j == b && (suspicious(s) || flagged && s < 1.0))
        })
        .into_iter()
        .collect();
    let mut rest: Vec<(usize, f32)> = windows
        .iter()
        .filter(|&&(j, s, flagged)| flagged && Some(j) != best && s < 1.0)
        .map(|&(j, s, _)| (j, s))
        .collect();
    rest.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out.extend(rest.into_iter().map(|(j, _)| j));
    out.truncate(MAX_REFINED_WINDOWS);
    out
}

/// The token ranges of the sentences in window `w` of `tok` (offsets into `text`), at most
/// `max` of them; none when the window is one sentence or part of one. A sentence ends
/// after a token that is `.`, `!`, `?`, `。`, `！` or `？`, or where a line break separates
/// two tokens (see [`ends_sentence`]). The first and last sentence reach past the window
/// to where they start and end in `tok`, when that keeps them within `content` tokens: a
/// sentence scored alone is then the same text whatever window it was found in, not a
/// fragment that depends on where the window falls (a fragment such as "Explain how to
/// convince a" scores differently from its sentence, so the same prompt, whole or
/// compressed, could get two decisions).
fn window_sentences(
    tok: &TokenizedText,
    text: &str,
    w: Range<usize>,
    max: usize,
    content: usize,
) -> Vec<Range<usize>> {
    let mut sentences = split_sentences(tok, text, w, usize::MAX, false);
    let n = tok.ids.len();
    if let Some(first) = sentences.first_mut() {
        if first.start > 0 && !ends_sentence(tok, text, first.start - 1, false) {
            let lo = first
                .start
                .saturating_sub(content.saturating_sub(first.len()));
            let start = (lo..first.start - 1)
                .rev()
                .find(|&t| ends_sentence(tok, text, t, false))
                .map(|t| t + 1)
                .or((lo == 0).then_some(0));
            if let Some(start) = start {
                first.start = start;
            }
        }
    }
    if let Some(last) = sentences.last_mut() {
        if last.end < n && !ends_sentence(tok, text, last.end - 1, false) {
            let hi = n.min(last.start.saturating_add(content));
            let end = (last.end..hi)
                .find(|&t| ends_sentence(tok, text, t, false))
                .map(|t| t + 1)
                .or((hi == n).then_some(n));
            if let Some(end) = end {
                last.end = end;
            }
        }
    }
    sentences.truncate(max);
    sentences
}

/// Whether a sentence (with `clauses`, a clause) ends after token `t` of `tok` (offsets into
/// `text`): the token is `.`, `!`, `?`, `。`, `！` or `？` (with `clauses` also `;` or `；`),
/// or a line break separates it from the next token. True past the last token.
fn ends_sentence(tok: &TokenizedText, text: &str, t: usize, clauses: bool) -> bool {
    let Some(&(a, b)) = tok.offsets.get(t) else {
        return true;
    };
    let mark = match text.get(a..b) {
        Some("." | "!" | "?" | "。" | "！" | "？") => true,
        Some(";" | "；") => clauses,
        _ => false,
    };
    mark || tok
        .offsets
        .get(t + 1)
        .and_then(|&(next, _)| text.get(b..next))
        .is_some_and(|gap| gap.contains('\n'))
}

/// The token ranges, within window `w` of `tok`, of its sentences (with `clauses`, also
/// ending a piece after `;` or `；`; see [`ends_sentence`]), at most `max` of them; none
/// when the window is one piece.
fn split_sentences(
    tok: &TokenizedText,
    text: &str,
    w: Range<usize>,
    max: usize,
    clauses: bool,
) -> Vec<Range<usize>> {
    let mut sentences: Vec<Range<usize>> = Vec::new();
    let mut start = w.start;
    for t in w.clone() {
        if t >= tok.offsets.len() {
            break;
        }
        if ends_sentence(tok, text, t, clauses) {
            sentences.push(start..t + 1);
            start = t + 1;
        }
    }
    if start < w.end {
        sentences.push(start..w.end);
    }
    if sentences.len() < 2 {
        return Vec::new();
    }
    sentences.retain(|r| !r.is_empty());
    sentences.truncate(max);
    sentences
}

/// Most sentences scored per window refined by `limits.jailbreak_sentences_from` (of a
/// window holding flagged sentences, those nearest them).
const MAX_WINDOW_SENTENCES: usize = 24;

/// Fewest words ([`words`]) of a window's sentence scored alone: shorter pieces, such as a
/// line of code (`DISPLAY "odd"`) or a heading, are not sentences the jailbreak head was
/// trained on (its single sentences have at least 3 words; `scripts/heads.py`), and score
/// erratically. A short sentence the filter flagged is still scored alone.
const MIN_SENTENCE_WORDS: usize = 3;

/// The words of `text` as [`MIN_SENTENCE_WORDS`] counts them: runs of letters and digits
/// (an apostrophe or hyphen between two of them joins the run: "don't", "role-play"), each
/// Han, kana or Hangul character a word of its own (those scripts write no spaces).
fn words(text: &str) -> usize {
    #[derive(PartialEq)]
    enum At {
        Gap,
        Word,
        Joiner,
    }
    let mut n = 0;
    let mut at = At::Gap;
    for c in text.chars() {
        let wide = matches!(c,
            '\u{3040}'..='\u{30FF}' | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}'
            | '\u{AC00}'..='\u{D7AF}' | '\u{F900}'..='\u{FAFF}' | '\u{20000}'..='\u{2FFFF}');
        at = if wide {
            n += 1;
            At::Gap
        } else if c.is_alphanumeric() {
            n += usize::from(at == At::Gap);
            At::Word
        } else if at == At::Word && matches!(c, '\'' | '\u{2019}' | '-') {
            At::Joiner
        } else {
            At::Gap
        };
    }
    n
}

/// The token ranges of `tok` (a flagged sentence, `text`) to score alone: the sentence in
/// windows of at most `content` tokens (one window unless it is longer), then, when the
/// daemon's own rule splits it into several sentences or clauses, each of those (at most
/// [`MAX_WINDOW_SENTENCES`], cut to `content` tokens). The filter's segmenter keeps text
/// together that this rule splits (a stop followed by a lowercase word, `;` between
/// clauses, a run of `!`), and the prose after an injection in the same filter sentence
/// would dilute it again.
pub(super) fn flagged_pieces(
    tok: &TokenizedText,
    text: &str,
    content: usize,
    overlap: usize,
) -> Vec<Range<usize>> {
    let n = tok.ids.len();
    if n == 0 {
        return Vec::new();
    }
    let mut out = plan_windows(n, content, overlap, MAX_WINDOW_SENTENCES).windows;
    for r in split_sentences(tok, text, 0..n, MAX_WINDOW_SENTENCES, true) {
        let cut = r.start..r.end.min(r.start.saturating_add(content));
        let (a, b) = byte_span(tok, cut.clone(), text.len());
        let wordy = text
            .get(a..b)
            .is_some_and(|t| t.chars().any(char::is_alphanumeric));
        if !cut.is_empty() && wordy && !out.contains(&cut) {
            out.push(cut);
        }
    }
    out
}

/// The sentences of window `w` of `tok` (offsets into `text`) that the jailbreak signal
/// scores alone, as `(token range, byte span)`: those of [`window_sentences`] (reaching
/// at most `content` tokens past the window) with at least [`MIN_SENTENCE_WORDS`] words,
/// at most [`MAX_WINDOW_SENTENCES`]. A window holding flagged sentences (`flagged`: their
/// byte ranges) gives the sentences nearest them; any other its first ones.
pub(super) fn sentences_to_score(
    tok: &TokenizedText,
    text: &str,
    w: Range<usize>,
    content: usize,
    flagged: &[Range<usize>],
) -> Vec<(Range<usize>, (usize, usize))> {
    let mut sentences: Vec<(Range<usize>, (usize, usize))> =
        window_sentences(tok, text, w, usize::MAX, content)
            .into_iter()
            .map(|r| {
                let span = byte_span(tok, r.clone(), text.len());
                (r, span)
            })
            .filter(|(_, (a, b))| text.get(*a..*b).map_or(0, words) >= MIN_SENTENCE_WORDS)
            .collect();
    if !flagged.is_empty() {
        let gap = |&(_, (a, b)): &(Range<usize>, (usize, usize))| {
            flagged
                .iter()
                .map(|f| f.start.saturating_sub(b).max(a.saturating_sub(f.end)))
                .min()
                .unwrap_or(usize::MAX)
        };
        sentences.sort_by_key(gap);
    }
    sentences.truncate(MAX_WINDOW_SENTENCES);
    sentences
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_input_is_one_window() {
        let p = plan_windows(10, 254, 64, 4);
        assert_eq!(p.windows, vec![0..10]);
        assert!(!p.truncated);
    }

    #[test]
    fn empty_input_is_one_empty_window() {
        assert_eq!(plan_windows(0, 254, 64, 4).windows, vec![0..0]);
    }

    #[test]
    fn long_input_covers_every_token_with_overlap() {
        let p = plan_windows(1000, 254, 64, 100);
        assert!(!p.truncated);
        assert_eq!(p.windows.first().unwrap().start, 0);
        assert_eq!(p.windows.last().unwrap().end, 1000);
        for w in p.windows.windows(2) {
            assert_eq!(w[0].end - w[1].start, 64);
        }
    }

    #[test]
    fn window_cap_reports_truncation() {
        let p = plan_windows(10_000, 254, 64, 3);
        assert_eq!(p.windows.len(), 3);
        assert!(p.truncated);
    }

    #[test]
    fn refined_windows_are_the_best_then_the_flagged_ones_by_score() {
        // (job, score, holds a flagged sentence)
        let windows = [
            (0, 0.40, false),
            (1, 0.72, false), // best
            (2, 0.55, true),
            (3, 0.65, true),
            (4, 0.20, true),  // under `from`, but flagged
            (5, 0.70, false), // suspicious, nothing flagged
        ];
        assert_eq!(windows_to_refine(Some(1), &windows, 0.3), vec![1, 3, 2, 4]);
        // The best window holding the flagged sentence is refined once.
        assert_eq!(windows_to_refine(Some(3), &windows, 0.3), vec![3, 2, 4]);
        // A best window under `from` is not refined, the flagged ones still are (the best
        // one too); `from` 1 turns refining off; a certain best window needs no refining.
        assert_eq!(windows_to_refine(Some(1), &windows, 0.8), vec![3, 2, 4]);
        assert_eq!(windows_to_refine(Some(3), &windows, 0.8), vec![3, 2, 4]);
        assert!(windows_to_refine(Some(1), &windows, 1.0).is_empty());
        assert_eq!(
            windows_to_refine(Some(9), &[(9, 1.0, true), (2, 0.5, true)], 0.3),
            vec![2]
        );
        // At most MAX_REFINED_WINDOWS.
        let many: Vec<(usize, f32, bool)> =
            (0..10).map(|j| (j, 0.5 + j as f32 * 0.01, true)).collect();
        let got = windows_to_refine(Some(9), &many, 0.3);
        assert_eq!(got, vec![9, 8, 7, 6]);
        assert_eq!(got.len(), MAX_REFINED_WINDOWS);
    }

    /// Tokens with these byte offsets, numbered from 0.
    fn tokens(offsets: Vec<(usize, usize)>) -> TokenizedText {
        TokenizedText {
            ids: (0..offsets.len() as u32).collect(),
            offsets,
        }
    }

    /// Tokens of "Hi there. Go now!\nOk".
    fn hi_there() -> TokenizedText {
        tokens(vec![
            (0, 2),
            (3, 8),
            (8, 9),
            (10, 12),
            (13, 16),
            (16, 17),
            (18, 20),
        ])
    }

    #[test]
    fn span_windows_cover_the_tokens_a_span_touches_merged() {
        let tok = hi_there();
        // "there." (3..9) and "Go" (10..12) adjoin: one range; "Ok" (18..20) apart.
        let plan = span_windows(&tok, &[18..20, 3..9, 10..12], 510, 64, 64);
        assert_eq!(plan.windows, vec![1..4, 6..7]);
        assert!(!plan.truncated);
        // A span inside one token, and one between tokens that touches none.
        let plan = span_windows(&tok, &[4..5, 9..10], 510, 64, 64);
        assert_eq!(plan.windows, vec![1..2]);
        // No spans: no windows.
        assert!(span_windows(&tok, &[], 510, 64, 64).windows.is_empty());
        // A long range is cut like a text.
        let whole = std::slice::from_ref(&(0..20));
        let plan = span_windows(&tok, whole, 3, 1, 64);
        assert_eq!(plan.windows, vec![0..3, 2..5, 4..7]);
        assert!(span_windows(&tok, whole, 3, 1, 2).truncated);
    }

    #[test]
    fn changed_windows_cover_what_a_reading_changed_with_context() {
        let text = "Hi there. Go now!\nOk";
        let tok = hi_there();
        // Nothing changed: no windows.
        let plan = changed_windows(&tok, text, text, 1, 510, 64, 64);
        assert!(plan.windows.is_empty());
        // "Go" (token 3) changed: it and one token of context on each side.
        let plan = changed_windows(&tok, text, "Hi there. G0 now!\nOk", 1, 510, 64, 64);
        assert_eq!(plan.windows, vec![2..5]);
        // "Hi" and "Ok" changed: two ranges, too far apart to merge with no context...
        let both = "H1 there. Go now!\n0k";
        let plan = changed_windows(&tok, text, both, 0, 510, 64, 64);
        assert_eq!(plan.windows, vec![0..1, 6..7]);
        // ...and one range when their context meets.
        let plan = changed_windows(&tok, text, both, 3, 510, 64, 64);
        assert_eq!(plan.windows, vec![0..7]);
        // A long range is cut like a text; a reading of another length is planned whole.
        let plan = changed_windows(&tok, text, both, 3, 3, 1, 64);
        assert_eq!(plan.windows, vec![0..3, 2..5, 4..7]);
        let plan = changed_windows(&tok, text, "Hi", 0, 510, 64, 64);
        assert_eq!(plan.windows, vec![0..7]);
        // An invisible character read as a space changes no token of the reading, but the
        // words either side of it ("Go", "now") were one word as written.
        let plan = changed_windows(&tok, "Hi there. Go\u{0}now!\nOk", text, 0, 510, 64, 64);
        assert_eq!(plan.windows, vec![3..5]);
    }

    #[test]
    fn window_sentences_split_at_end_marks_and_line_breaks() {
        let (text, tok) = ("Hi there. Go now!\nOk", hi_there());
        let all = 0..tok.ids.len();
        assert_eq!(
            window_sentences(&tok, text, all.clone(), 24, 254),
            vec![0..3, 3..6, 6..7]
        );
        assert_eq!(window_sentences(&tok, text, all, 2, 254), vec![0..3, 3..6]);
        // A window holding one sentence (or part of one) has none.
        assert!(window_sentences(&tok, text, 0..2, 24, 254).is_empty());
        // A window starting inside "Go now!" gives the whole sentence, not "now!"...
        assert_eq!(
            window_sentences(&tok, text, 4..7, 24, 254),
            vec![3..6, 6..7]
        );
        // ... and one ending inside it too, not "Go".
        assert_eq!(
            window_sentences(&tok, text, 0..4, 24, 254),
            vec![0..3, 3..6]
        );
        // Both ends at once, and back to the start of the text.
        assert_eq!(
            window_sentences(&tok, text, 2..4, 24, 254),
            vec![0..3, 3..6]
        );
        // Not when that would make it longer than `content` tokens: then the window cuts it.
        assert_eq!(window_sentences(&tok, text, 4..7, 24, 2), vec![4..6, 6..7]);
        assert_eq!(window_sentences(&tok, text, 0..4, 24, 2), vec![0..3, 3..4]);
        // A sentence reaching the end of the text without an end mark ends there.
        let text = "A. B c";
        let tok = tokens(vec![(0, 1), (1, 2), (3, 4), (5, 6)]);
        assert_eq!(
            window_sentences(&tok, text, 0..3, 24, 254),
            vec![0..2, 2..4]
        );
    }

    #[test]
    fn anchored_windows_start_at_flagged_sentences_not_held_by_a_window() {
        // "Hi there. Go now!\nOk": "Go" starts at byte 10, token 3; "now" at 13, token 4;
        // "Ok" at 18, token 6.
        let tok = hi_there();
        let regular = [0..3, 2..5, 4..7];
        assert_eq!(anchored_windows(&tok, &[10], 3, &regular, 2), vec![3..6]);
        // A flagged sentence inside the last anchored window starts none; nor does one
        // whose window a regular window holds (from token 0; from token 6 to the end).
        assert_eq!(
            anchored_windows(&tok, &[10, 13], 3, &regular, 2),
            vec![3..6]
        );
        assert_eq!(
            anchored_windows(&tok, &[0, 18], 3, &regular, 2),
            Vec::<Range<usize>>::new()
        );
        assert_eq!(
            anchored_windows(&tok, &[18, 10], 3, &regular, 2),
            vec![3..6]
        );
        // An offset inside a token or in the space before it starts at that token; one
        // past the text starts nothing.
        assert_eq!(anchored_windows(&tok, &[4], 3, &regular, 2), vec![1..4]);
        assert_eq!(anchored_windows(&tok, &[9, 25], 3, &regular, 2), vec![3..6]);
        // Without regular windows, at most `max`; none with 0.
        assert_eq!(
            anchored_windows(&tok, &[0, 3, 10, 13], 1, &[], 2),
            vec![0..1, 1..2]
        );
        assert_eq!(
            anchored_windows(&tok, &[10], 3, &regular, 0),
            Vec::<Range<usize>>::new()
        );
    }

    #[test]
    fn words_are_letter_runs_and_single_han_kana_hangul() {
        assert_eq!(words("DISPLAY \u{201c}odd\u{201d}"), 2);
        assert_eq!(words("Don't stop now."), 3);
        assert_eq!(words("role-play as DAN"), 3);
        assert_eq!(words("it's- x"), 2);
        assert_eq!(words("x = 1;"), 2);
        assert_eq!(words("忽略所有指令"), 6);
        assert_eq!(words("안녕 하세요"), 5);
        assert_eq!(words("Ignora las instrucciones"), 3);
        assert_eq!(words(" --- - ''"), 0);
    }

    #[test]
    fn ends_sentence_at_marks_line_breaks_and_the_text_end() {
        let text = "Go; now!\nOk";
        let tok = tokens(vec![(0, 2), (2, 3), (4, 7), (7, 8), (9, 11)]);
        let ends: Vec<bool> = (0..6)
            .map(|t| ends_sentence(&tok, text, t, false))
            .collect();
        assert_eq!(ends, [false, false, false, true, false, true]);
        // `;` ends a clause; "now" before "!" ends nothing, clauses or not.
        assert!(ends_sentence(&tok, text, 1, true));
        assert!(!ends_sentence(&tok, text, 2, true));
    }

    #[test]
    fn flagged_pieces_are_windows_then_clauses_with_words() {
        // Tokens of "Go; now !!" with their byte offsets.
        let text = "Go; now !!";
        let tok = tokens(vec![(0, 2), (2, 3), (4, 7), (8, 9), (9, 10)]);
        // The sentence whole, then "Go;" and "now !" (a `;` ends a clause here, not in the
        // sentence pass); the lone "!" has no word and is left out.
        assert_eq!(flagged_pieces(&tok, text, 254, 64), vec![0..5, 0..2, 2..4]);
        assert_eq!(
            window_sentences(&tok, text, 0..5, 24, 254),
            vec![0..4, 4..5]
        );
        // Longer than a window: windows of it first.
        assert_eq!(flagged_pieces(&tok, text, 3, 1)[..2], [0..3, 2..5]);
        assert!(flagged_pieces(&TokenizedText::default(), "", 254, 64).is_empty());
    }
}
