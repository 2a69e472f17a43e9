//! The selection behind [`PromptBuilder::compress`]: risk-flagged sentences first (with
//! their context and record lines), then the pinned end, then TextRank-ranked sentences
//! to the budget; and the assembly of the kept sentences into the text sent.

use super::*;

/// Longest line (centi-tokens) that personal-data context reaches across a blank line (a
/// line holding one short sentence).
const SHORT_LINE_CENTI: u32 = 1600;
/// A sentence of at most this many centi-tokens (4 tokens) inside a line of a personal-data
/// record is a fragment of it ("18." in "Belgrád rkp. 18. Apt. 417").
const FRAGMENT_CENTI: u32 = 400;

/// Longest sentence (bytes) that counts as a line of a personal-data record (about 16
/// tokens, as [`SHORT_LINE_CENTI`]) when a PII cue sentence is widened to its neighbours.
const RECORD_LINE_BYTES: usize = 64;

/// How one step of the risk-first selection picks sentences of its tier.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// The flagged sentences themselves ([`PromptBuilder::risk_order`]).
    Flagged,
    /// Neighbours of the kept flagged sentences ([`PromptBuilder::context_order`]).
    Context,
    /// The short lines of a kept personal-data sentence's record.
    RecordLines,
}

/// One sentence of the text sent: its byte range there and its risk kinds.
#[derive(Debug, Clone)]
pub(super) struct Mark {
    pub(super) range: Range<usize>,
    pub(super) risk: RiskFlags,
    /// Directly follows the sentence before it in the text sent in the prompt too (the
    /// next sentence: none dropped between them).
    pub(super) follows: bool,
}

impl PromptBuilder {
    pub(super) fn select(&self, pinned: &[usize], budget_tokens: u32) -> (Compressed, Vec<usize>) {
        let ratio = self.ratio;
        let text_budget = budget_tokens.saturating_sub(self.cfg.reserved_tokens);
        let budget_centi = text::tokens_to_centi_floor(text_budget, ratio);
        let n = self.sentences.len();
        let original_bytes = self
            .segments
            .iter()
            .map(|s| (s.end - s.start) as u64)
            .sum::<u64>();
        let mut out = Compressed {
            text: String::new(),
            original_tokens: text::centi_to_tokens(self.total_centi, ratio),
            kept_tokens: 0,
            original_bytes,
            compressed: false,
            risk_flagged_sentences: 0,
            flagged_sentences: Vec::new(),
            pii_sentences: Vec::new(),
            elapsed_us: 0,
            finish_us: 0,
            budget_tokens: text_budget,
            overflow: false,
            sentences: n as u32,
            kept_sentences: 0,
            risk_dropped_sentences: 0,
            risk: self.risk,
            pattern_text: String::new(),
            token_ratio: ratio,
            kept_tokens_raw: 0,
            pruned_sentences: self.pruned,
        };

        if self.total_centi <= budget_centi {
            out.text = self.original_text();
            (out.flagged_sentences, out.pii_sentences) = self.marked(&self.original_marks());
            out.kept_tokens = out.original_tokens;
            out.kept_tokens_raw = text::centi_to_tokens(self.total_centi, 1.0);
            out.kept_sentences = n as u32;
            out.risk_flagged_sentences = self.flagged.len() as u32;
            return (out, (0..n).collect());
        }

        let mut sel = vec![false; n];
        let mut used: u64 = 0;
        for i in self.pinned_sentences(pinned, budget_centi) {
            if let (Some(f), Some(s)) = (sel.get_mut(i), self.sentences.get(i)) {
                *f = true;
                used += u64::from(s.centi);
            }
        }

        if self.cfg.keep_risk_flagged {
            let limit = budget_centi.saturating_add(text::tokens_to_centi_floor(
                self.cfg.risk_overflow_tokens,
                ratio,
            ));
            // Jailbreak cues and harmful requests (no context of their own: the sentence is
            // the request), then personal data other than bare names, then weak jailbreak
            // cues (fiction framings: no context of their own), then the context of the
            // jailbreak cues (a setup the jailbreak signal must see whole), then the rest of
            // each personal-data record (the short lines around it: the name, city and
            // country lines of an address block), then names (the noisiest cue), then the
            // neighbours of each personal-data sentence.
            let strong_pii = RiskFlags::PII.difference(RiskFlags::NAME);
            let steps = [
                (
                    RiskFlags::INJECTION.union(RiskFlags::HARMFUL_REQUEST),
                    Step::Flagged,
                ),
                (strong_pii, Step::Flagged),
                (RiskFlags::FRAMING, Step::Flagged),
                (strong_pii, Step::RecordLines),
                (RiskFlags::INJECTION, Step::Context),
                (RiskFlags::NAME, Step::Flagged),
                (RiskFlags::PII, Step::Context),
            ];
            for (tier, step) in steps {
                let (order, cap) = match step {
                    Step::Flagged => (self.risk_order(&sel, tier), limit),
                    Step::Context => (self.context_order(&sel, tier, false), budget_centi),
                    Step::RecordLines => (self.context_order(&sel, tier, true), budget_centi),
                };
                for i in order {
                    if let (Some(f), Some(s)) = (sel.get_mut(i), self.sentences.get(i)) {
                        let c = u64::from(s.centi);
                        if !*f && used + c <= cap {
                            *f = true;
                            used += c;
                        }
                    }
                }
            }
        }

        if used < budget_centi {
            // Rank every sentence, or for a prompt longer than the cap the candidates left
            // after pruning plus what is already kept (for novelty).
            let idx: Vec<usize> = if n > self.max_ranked() {
                let mut v: Vec<usize> = self.pool.iter().map(|&i| i as usize).collect();
                v.extend(sel.iter().enumerate().filter_map(|(i, &k)| k.then_some(i)));
                v.sort_unstable();
                v.dedup();
                v
            } else {
                (0..n).collect()
            };
            let mut cols = RankColumns::default();
            let inp = self.rank_input(&idx, &mut cols);
            let mut sub: Vec<bool> = idx
                .iter()
                .map(|&i| sel.get(i).copied().unwrap_or(false))
                .collect();
            used += rank::select(&inp, &mut sub, budget_centi - used, &self.params);
            for (&i, &k) in idx.iter().zip(&sub) {
                if let Some(f) = sel.get_mut(i) {
                    *f |= k;
                }
            }
        }

        let kept: Vec<usize> = sel
            .iter()
            .enumerate()
            .filter_map(|(i, &k)| k.then_some(i))
            .collect();
        out.compressed = kept.len() < n;
        let marks;
        (out.text, marks) = if out.compressed {
            self.assemble(&kept)
        } else {
            // Everything is pinned: send it as it came.
            (self.original_text(), self.original_marks())
        };
        (out.flagged_sentences, out.pii_sentences) = self.marked(&marks);
        out.kept_tokens = text::centi_to_tokens(used, ratio);
        out.kept_tokens_raw = text::centi_to_tokens(used, 1.0);
        out.kept_sentences = kept.len() as u32;
        out.overflow = used > budget_centi;
        let flagged = || {
            self.flagged_sentences()
                .map(|(i, s)| (s, sel.get(i).unwrap_or(&false)))
        };
        out.risk_flagged_sentences = flagged().filter(|(_, &k)| k).count() as u32;
        let kept_fp: HashSet<u64> = flagged()
            .filter(|(_, &k)| k)
            .map(|(s, _)| s.fingerprint)
            .collect();
        let dropped: HashSet<u64> = flagged()
            .filter(|(s, &k)| !k && !kept_fp.contains(&s.fingerprint))
            .map(|(s, _)| s.fingerprint)
            .collect();
        out.risk_dropped_sentences = dropped.len() as u32;
        let mut queued: HashSet<u64> = kept_fp;
        for (s, _) in flagged().filter(|(s, &k)| !k && s.risk.intersects(RiskFlags::VALIDATED_PII))
        {
            let Some(t) = self.text.get(s.start..s.end) else {
                continue;
            };
            if queued.contains(&s.fingerprint) {
                continue;
            }
            if !push_pattern_sentence(&mut out.pattern_text, t) {
                break;
            }
            queued.insert(s.fingerprint);
        }
        (out, kept)
    }

    /// Sentences flagged with a kind in `tier` not yet selected, in the order they are kept:
    /// first one sentence of each kind (most severe kind first; of its sentences, the one
    /// flagged with most kinds, then the earliest), then the rest by number of kinds,
    /// severity and position. Sentences whose normalised content is already kept or queued are
    /// skipped (repeating a cue does not make it more necessary).
    pub(super) fn risk_order(&self, sel: &[bool], tier: RiskFlags) -> Vec<usize> {
        let kept = |i: usize| sel.get(i).copied().unwrap_or(false);
        let mut seen: HashSet<u64> = self
            .flagged_sentences()
            .filter(|&(i, _)| kept(i))
            .map(|(_, s)| s.fingerprint)
            .collect();
        let flagged: Vec<(usize, &Sentence)> = self
            .flagged_sentences()
            .filter(|&(i, s)| !kept(i) && s.risk.intersects(tier))
            .collect();
        let mut order = Vec::new();
        let mut queued = vec![false; flagged.len()];
        // Sentences flagged with several kinds first: a personal-data record (a name, an
        // address and a phone number together) is likelier real than one cue in prose
        // (an age in a clinical vignette, a number in a word problem).
        let kinds = |s: &Sentence| s.risk.bits().count_ones();
        for (kind, _) in RiskFlags::KINDS
            .into_iter()
            .filter(|(k, _)| tier.contains(*k))
        {
            let best = queued
                .iter()
                .zip(&flagged)
                .enumerate()
                .filter(|(_, (q, (_, s)))| {
                    !**q && s.risk.contains(kind) && !seen.contains(&s.fingerprint)
                })
                .max_by_key(|(k, (_, (_, s)))| (kinds(s), std::cmp::Reverse(*k)))
                .map(|(k, _)| k);
            if let Some(k) = best {
                if let (Some(q), Some(&(i, s))) = (queued.get_mut(k), flagged.get(k)) {
                    *q = true;
                    seen.insert(s.fingerprint);
                    order.push(i);
                }
            }
        }
        let mut rest: Vec<(usize, &Sentence)> = flagged
            .iter()
            .zip(&queued)
            .filter(|(_, &q)| !q)
            .map(|(&x, _)| x)
            .collect();
        // Then, within a kind, shorter sentences first: more of them fit, and a personal
        // statement ("Hello, this is Dr. Ito.") is shorter than the exam-question narrative
        // a name also appears in.
        rest.sort_by_key(|&(i, s)| {
            (
                std::cmp::Reverse(kinds(s)),
                s.risk.severity_rank(),
                s.centi,
                i,
            )
        });
        for (i, s) in rest {
            if seen.insert(s.fingerprint) {
                order.push(i);
            }
        }
        order
    }

    /// Neighbours of the kept risk-flagged sentences, in the order they are kept: distance 1
    /// around every flagged sentence (earliest first), then distance 2, and so on, each side
    /// until its allowance is used; see [`CompressionConfig::risk_context_tokens`]. With
    /// `record_lines`, only the unbroken run of short lines around a personal-data sentence
    /// (the rest of its record: no blank line crossed, within `pii_context_tokens`); a
    /// short sentence that starts or ends a longer line, and a fragment of a few tokens
    /// inside a line, count as lines of the record.
    pub(super) fn context_order(
        &self,
        sel: &[bool],
        tier: RiskFlags,
        record_lines: bool,
    ) -> Vec<usize> {
        /// How far one side of an anchor may still grow: centi-tokens left, and whether it
        /// may cross blank lines.
        #[derive(Clone, Copy)]
        enum Side {
            Open { left: u64, cross_blank: bool },
            Closed,
        }
        let centi = |tokens: u32| text::tokens_to_centi_floor(tokens.min(4096), self.ratio);
        let (inj, pii) = (
            centi(self.cfg.risk_context_tokens),
            centi(self.cfg.pii_context_tokens),
        );
        let side_for = |s: &Sentence| {
            let (left, cross_blank) = if s.risk.intersects(RiskFlags::INJECTION) {
                (inj, true)
            } else if s.risk.intersects(RiskFlags::PII) {
                (pii, false)
            } else {
                (0, false)
            };
            let left = if record_lines && s.risk.intersects(RiskFlags::INJECTION) {
                0
            } else {
                left
            };
            if left > 0 {
                Side::Open { left, cross_blank }
            } else {
                Side::Closed
            }
        };
        // (anchor, left side, right side)
        let mut anchors: Vec<(usize, Side, Side)> = self
            .flagged_sentences()
            .filter(|&(i, s)| sel.get(i).copied().unwrap_or(false) && s.risk.intersects(tier))
            .map(|(i, s)| (i, side_for(s), side_for(s)))
            .filter(|(_, l, _)| !matches!(l, Side::Closed))
            .collect();
        // Sentences `i` and `i + 1` are adjacent for context of this side.
        // Whether context may step between sentences `i` and `i + 1` to reach sentence
        // `to` (one of the two). Personal-data context crosses a blank line only to a short
        // line: the name above an address block, the country line below it.
        // A sentence's token estimate, and whether it starts and ends its line.
        let line_edges = |t: usize| {
            let s = self.sentences.get(t)?;
            let starts = t
                .checked_sub(1)
                .and_then(|k| self.sentences.get(k))
                .is_none_or(|p| p.ws_newline || p.segment != s.segment);
            let ends = s.ws_newline
                || self
                    .sentences
                    .get(t + 1)
                    .is_none_or(|n| n.segment != s.segment);
            Some((s.centi, starts, ends))
        };
        let short_line = |t: usize| {
            line_edges(t).is_some_and(|(c, starts, ends)| c <= SHORT_LINE_CENTI && starts && ends)
        };
        // A piece of a record: a short line; a short sentence that starts or ends a longer
        // line ("It's in <street line>" above an address block, "New Zealand. Please call
        // me" below it); or a fragment inside a line, such as a number the segmenter split
        // off ("18." in "Belgrád rkp. 18. Apt. 417").
        let record_piece = |t: usize| {
            line_edges(t).is_some_and(|(c, starts, ends)| {
                c <= SHORT_LINE_CENTI && (starts || ends) || c <= FRAGMENT_CENTI
            })
        };
        let adjacent = |i: usize, to: usize, side: Side| match (
            self.sentences.get(i),
            self.sentences.get(i + 1),
        ) {
            (Some(a), Some(b)) if record_lines => {
                a.segment == b.segment
                    && !a.ws_blank
                    && record_piece(to)
                    && matches!(side, Side::Open { .. })
            }
            (Some(a), Some(b)) => {
                a.segment == b.segment
                    && matches!(side, Side::Open { cross_blank, .. }
                        if cross_blank || !a.ws_blank || short_line(to))
            }
            _ => false,
        };
        // Exact repeats of kept sentences and flagged sentences left out (they did not fit)
        // are passed over, not queued.
        let mut seen: HashSet<u64> = sel
            .iter()
            .enumerate()
            .filter(|(_, &k)| k)
            .filter_map(|(i, _)| self.sentences.get(i).map(|s| s.fingerprint))
            .collect();
        let mut order = Vec::new();
        // Takes sentence `i` into one side's context: returns the side's new state.
        let mut take = |i: usize, side: Side, order: &mut Vec<usize>| -> Side {
            let Some(s) = self.sentences.get(i) else {
                return Side::Closed;
            };
            let next = match side {
                Side::Open { left, cross_blank } if left >= u64::from(s.centi) => Side::Open {
                    left: left - u64::from(s.centi),
                    cross_blank,
                },
                _ => return Side::Closed,
            };
            // Record lines take a line flagged only as a name too (its own tier comes
            // later): "New Zealand." below an address block reads as a name.
            if !sel.get(i).copied().unwrap_or(true)
                && (s.risk.is_empty() || record_lines && s.risk == RiskFlags::NAME)
                && seen.insert(s.fingerprint)
            {
                order.push(i);
            }
            next
        };
        let mut d = 1;
        while anchors
            .iter()
            .any(|(_, l, r)| !matches!(l, Side::Closed) || !matches!(r, Side::Closed))
        {
            for (a, left, right) in anchors.iter_mut() {
                if !matches!(left, Side::Closed) {
                    *left = match a.checked_sub(d) {
                        Some(p) if adjacent(p, p, *left) => take(p, *left, &mut order),
                        _ => Side::Closed,
                    };
                }
                if !matches!(right, Side::Closed) {
                    let q = *a + d;
                    *right = if adjacent(q - 1, q, *right) {
                        take(q, *right, &mut order)
                    } else {
                        Side::Closed
                    };
                }
            }
            d += 1;
        }
        order
    }

    /// All pushed text, segments joined by a line break.
    pub(super) fn original_text(&self) -> String {
        let mut t = String::with_capacity(self.text.len() + self.segments.len());
        for (i, s) in self.segments.iter().enumerate() {
            if i > 0 {
                t.push('\n');
            }
            t.push_str(self.text.get(s.start..s.end).unwrap_or(""));
        }
        t
    }

    /// Every sentence of [`PromptBuilder::original_text`] (segments joined by line breaks)
    /// as its [`Mark`], in text order.
    pub(super) fn original_marks(&self) -> Vec<Mark> {
        let mut out = Vec::new();
        // Where the segment starts in the joined text.
        let mut base = 0usize;
        for seg in &self.segments {
            for s in self
                .sentences
                .get(seg.sentences.clone())
                .unwrap_or_default()
            {
                let a = base + s.start.saturating_sub(seg.start);
                out.push(Mark {
                    range: a..a + s.end.saturating_sub(s.start),
                    risk: s.risk,
                    follows: !out.is_empty(),
                });
            }
            base += seg.end - seg.start + 1;
        }
        out
    }

    /// [`Compressed::flagged_sentences`] and [`Compressed::pii_sentences`] of a text whose
    /// sentences are `marks` (in text order). A PII cue sentence is widened to the sentence
    /// before and after it where that sentence was its neighbour in the prompt too (a kept
    /// sentence from elsewhere in a long prompt is no context for the PII model, only
    /// tokens to read) and one of the two is a record line of at most
    /// [`RECORD_LINE_BYTES`]: the name, street, city and country lines of an address block
    /// are read together, while a long prose sentence holds its own address.
    pub(super) fn marked(&self, marks: &[Mark]) -> (Vec<Range<usize>>, Vec<Range<usize>>) {
        let flagged = marks
            .iter()
            .filter(|m| m.risk.intersects(SCORED_ALONE))
            .take(MAX_FLAGGED_SENTENCES)
            .map(|m| m.range.clone())
            .collect();
        let mut pii: Vec<Range<usize>> = Vec::new();
        if !self.pii_cues.is_empty() {
            for (i, m) in marks.iter().enumerate() {
                if !m.risk.intersects(self.pii_cues) {
                    continue;
                }
                let short = m.range.len() <= RECORD_LINE_BYTES;
                let near = |n: &&Mark| short || n.range.len() <= RECORD_LINE_BYTES;
                let before = i
                    .checked_sub(1)
                    .and_then(|k| marks.get(k))
                    .filter(|_| m.follows)
                    .filter(near);
                let after = marks.get(i + 1).filter(|a| a.follows).filter(near);
                let span = before.map_or(m.range.start, |b| b.range.start)
                    ..after.map_or(m.range.end, |a| a.range.end);
                let full = pii.len() == MAX_FLAGGED_SENTENCES;
                match pii.last_mut() {
                    Some(prev) if span.start <= prev.end => prev.end = prev.end.max(span.end),
                    _ if full => break,
                    _ => pii.push(span),
                }
            }
        }
        (flagged, pii)
    }

    /// Joins kept sentences (ascending indices); see [`Compressed::text`]. Also returns
    /// each kept sentence's [`Mark`] in the joined text.
    pub(super) fn assemble(&self, kept: &[usize]) -> (String, Vec<Mark>) {
        let cap: usize = kept
            .iter()
            .filter_map(|&i| self.sentences.get(i))
            .map(|s| s.ws_end.saturating_sub(s.start))
            .sum();
        let mut t = String::with_capacity(cap);
        let mut marks = Vec::with_capacity(kept.len());
        let mut prev: Option<(usize, &Sentence)> = None;
        for &i in kept {
            let Some(s) = self.sentences.get(i) else {
                continue;
            };
            if let Some((p, ps)) = prev {
                if ps.segment != s.segment {
                    t.push('\n');
                } else if i == p + 1 {
                    t.push_str(self.text.get(ps.end..ps.ws_end).unwrap_or(" "));
                } else {
                    let before = i
                        .checked_sub(1)
                        .and_then(|k| self.sentences.get(k))
                        .is_some_and(|x| x.ws_newline);
                    t.push(if ps.ws_newline || before { '\n' } else { ' ' });
                }
            }
            let at = t.len();
            t.push_str(self.text.get(s.start..s.end).unwrap_or(""));
            marks.push(Mark {
                range: at..t.len(),
                risk: s.risk,
                follows: prev.is_some_and(|(p, _)| i == p + 1),
            });
            prev = Some((i, s));
        }
        (t, marks)
    }
}
