//! Classical prompt compression: cut any prompt to a token budget before it is sent to the
//! daemon, without a neural model, while keeping what the routing decisions depend on.
//!
//! This is stage 2 of the paper "98x Faster LLM Routing Without a Dedicated GPU: Flash
//! Attention, Prompt Compression, and Near-Streaming for the vLLM Semantic Router"
//! (arXiv 2603.12646): extractive sentence selection by TextRank, position weighting,
//! TF-IDF and novelty, each input cut to about 512 tokens. It fixes the paper's known
//! weakness (compression changed many jailbreak decisions, so the paper exempted jailbreak
//! and PII from it) by never dropping the sentences that cheap risk detectors flag
//! ([`crate::risk`]) nor the end of the pinned segments (the final user question).
//!
//! Pipeline, per request:
//!
//! 1. [`PromptBuilder::push_str`] receives decoded message text as the body streams in,
//!    split anywhere. Sentences are segmented incrementally (abbreviations, decimals, code
//!    blocks, lists, CJK / Arabic / Devanagari punctuation); each completed sentence is
//!    analysed once: its token estimate, its scoring terms (document frequencies are
//!    updated) and its risk flags. [`PromptBuilder::end_segment`] closes one message or
//!    content part.
//! 2. [`PromptBuilder::finish`] (or [`PromptBuilder::compress`] for more than one budget)
//!    returns the text unchanged when it fits; otherwise it keeps the end of the pinned
//!    segments (at most half the budget, the last sentence always), then the risk-flagged
//!    sentences, then fills the rest of the budget by score (see `rank`), and joins the
//!    kept sentences in their original order.
//!
//! Budgets are in the daemon's encoder tokens (BERT WordPiece, MiniLM uncased), estimated
//! without the tokenizer (see [`crate::text`]); a ratio learned from the daemon's reported
//! `input_tokens` ([`TokenCalibration`]) corrects the estimate over time.

mod calibration;
mod config;
mod rank;
mod select;
#[cfg(test)]
mod tests;

use crate::risk;
use crate::text::{self, segment};

use std::collections::{HashMap, HashSet};
use std::ops::Range;

pub use crate::risk::RiskFlags;
use calibration::clamp_ratio;
pub use calibration::TokenCalibration;
pub use config::*;

use segment::{Segmenter, Span};
use text::PreHashedBuild;

/// Default token budget: half the encoder window of BERT-class models (512 tokens).
///
/// The router encoder's heads are trained on texts of at most 256 tokens
/// (`scripts/train_classifiers.py --max-len`), and an encoder pass costs about twice as
/// much at 512 tokens as at 256 (linear layers plus attention that grows with the square
/// of the length), which on two CPU cores is the router's whole overhead for a prompt
/// that long. Measured with `make eval` on the validation split, 256 against 512: the
/// same domain accuracy, jailbreak AUC, recall and false blocks, and no long benign
/// prompt blocked; see README ("Why 256 tokens reach the daemon"). Raise it for
/// encoders trained on longer inputs.
pub const DEFAULT_BUDGET_TOKENS: u32 = 256;

/// The risk kinds whose sentences are reported in [`Compressed::flagged_sentences`]: the
/// strong jailbreak cues ([`RiskFlags::INJECTION`]) and plain harmful requests
/// ([`RiskFlags::HARMFUL_REQUEST`]).
pub const SCORED_ALONE: RiskFlags = RiskFlags::INJECTION.union(RiskFlags::HARMFUL_REQUEST);

/// Most sentences reported in [`Compressed::flagged_sentences`]; the daemon reads no more
/// per text (`ClassifyRequest.flagged_sentences`).
pub use semroute_proto::MAX_FLAGGED_SENTENCES;

/// Largest [`Compressed::pattern_text`], bytes (`ClassifyRequest.pattern_text`).
pub use semroute_proto::MAX_PATTERN_TEXT_BYTES;

/// Appends `sentence` to a pattern text (sentences joined by `\n`) when the result stays
/// within [`MAX_PATTERN_TEXT_BYTES`]; false when it would not (nothing is appended).
pub fn push_pattern_sentence(pattern_text: &mut String, sentence: &str) -> bool {
    let sep = usize::from(!pattern_text.is_empty());
    if pattern_text.len() + sep + sentence.len() > MAX_PATTERN_TEXT_BYTES {
        return false;
    }
    if sep == 1 {
        pattern_text.push('\n');
    }
    pattern_text.push_str(sentence);
    true
}

/// The end of the pinned segments may use at most 1 / `PINNED_SHARE` of the text budget
/// (their last sentences are kept even beyond it); the rest is left to the risk-flagged
/// sentences and the ranking. A content part or message of any length may be the final
/// one: kept whole, a long one would leave the risk-flagged sentences of the rest of the
/// prompt no room.
pub const PINNED_SHARE: u64 = 2;

/// A monotonic clock in microseconds; `None` when no clock is available.
pub type Clock = fn() -> Option<u64>;

/// The default [`Clock`]: `std::time::Instant` natively and on `wasm32-wasip1` (WASI
/// `clock_time_get`, which Envoy implements); `None` on other wasm targets, where
/// `Instant` is unavailable.
pub fn default_clock() -> Option<u64> {
    #[cfg(all(target_arch = "wasm32", not(target_os = "wasi")))]
    {
        None
    }
    #[cfg(not(all(target_arch = "wasm32", not(target_os = "wasi"))))]
    {
        use std::sync::OnceLock;
        use std::time::Instant;
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        let origin = ORIGIN.get_or_init(Instant::now);
        u64::try_from(origin.elapsed().as_micros()).ok()
    }
}

/// Estimated encoder tokens of `text` (BERT WordPiece, MiniLM uncased; special tokens
/// excluded) at ratio 1.0: what [`Compressed::original_tokens`] would count for it. Linear
/// time, no allocation; see the estimator's calibration in the module docs of `text`.
pub fn estimate_tokens(text: &str) -> u32 {
    text::centi_to_tokens(u64::from(text::estimate_centi(text)), 1.0)
}

/// The result of compression.
#[derive(Debug, Clone, PartialEq)]
pub struct Compressed {
    /// The text to send: the original text when it fits (segments joined by `\n`), else the
    /// kept sentences in their original order, separated by their original whitespace when
    /// adjacent and by a single space or line break (a line break between segments) when
    /// not.
    pub text: String,
    /// Estimated encoder tokens of the whole original text (special tokens excluded).
    pub original_tokens: u32,
    /// Estimated encoder tokens of `text` (special tokens excluded).
    pub kept_tokens: u32,
    /// Bytes of the original text (all pushed text).
    pub original_bytes: u64,
    /// True when sentences were dropped.
    pub compressed: bool,
    /// Risk-flagged sentences in `text`.
    pub risk_flagged_sentences: u32,
    /// Byte ranges in `text` of the first [`MAX_FLAGGED_SENTENCES`] sentences flagged with a
    /// [`SCORED_ALONE`] kind, in text order: what the daemon's jailbreak signal scores
    /// alone (`ClassifyRequest.flagged_sentences`), so that such a sentence weighs the same
    /// whether the text around it was dropped or not.
    pub flagged_sentences: Vec<Range<usize>>,
    /// Byte ranges in `text` of the sentences flagged with a kind of the builder's PII
    /// cues ([`PromptBuilder::set_pii_cues`]), each widened to the sentence before and
    /// after it where that one was its neighbour in the prompt too and one of the two is a
    /// short line of a record (an address block's lines), merged where they touch, in text
    /// order, at most [`MAX_FLAGGED_SENTENCES`]: what the daemon's PII model reads
    /// (`ClassifyRequest.pii_sentences`). Empty without cues.
    pub pii_sentences: Vec<Range<usize>>,
    /// Microseconds spent in this builder: incremental work in `push_str` / `end_segment`
    /// plus this compression (0 when no clock is available).
    pub elapsed_us: u64,
    /// Microseconds spent in this compression call alone.
    pub finish_us: u64,
    /// Text budget used: the budget minus the reserved tokens.
    pub budget_tokens: u32,
    /// True when `kept_tokens` exceeds `budget_tokens`: the last sentences of the pinned
    /// segments alone do not fit (they are kept anyway), or risk-flagged sentences used
    /// `risk_overflow_tokens`.
    pub overflow: bool,
    /// Sentences in the original text.
    pub sentences: u32,
    /// Sentences kept.
    pub kept_sentences: u32,
    /// Distinct risk-flagged sentences (by normalised content) with no copy in `text`:
    /// non-zero only when flagged content exceeds the budget.
    pub risk_dropped_sentences: u32,
    /// Union of the risk kinds found anywhere in the original text.
    pub risk: RiskFlags,
    /// The dropped sentences flagged with a validated personal-data pattern
    /// ([`RiskFlags::VALIDATED_PII`]), each once, in text order, joined by `\n`; at most
    /// [`MAX_PATTERN_TEXT_BYTES`] (whole sentences): what the daemon scans with its
    /// patterns alone (`ClassifyRequest.pattern_text`), so that such values are found
    /// however much of the prompt compression dropped.
    pub pattern_text: String,
    /// Calibration ratio applied to the estimates.
    pub token_ratio: f32,
    /// `kept_tokens` before the calibration ratio, for [`TokenCalibration::observe`].
    pub kept_tokens_raw: u32,
    /// Sentences pruned while the prompt streamed in (never ranked); see
    /// [`CompressionConfig::max_ranked_sentences`].
    pub pruned_sentences: u32,
}

/// Per-sentence columns of a ranking input (reused buffers).
#[derive(Debug, Default)]
struct RankColumns {
    ranges: Vec<Range<usize>>,
    centi: Vec<u32>,
    fingerprints: Vec<u64>,
    positions: Vec<u32>,
}

/// One sentence of the pushed text.
#[derive(Debug, Clone)]
struct Sentence {
    start: usize,
    end: usize,
    ws_end: usize,
    segment: u32,
    centi: u32,
    terms: Range<usize>,
    risk: RiskFlags,
    fingerprint: u64,
    /// The whitespace after the sentence contains a line break.
    ws_newline: bool,
    /// The whitespace after the sentence contains a blank line (a paragraph ends).
    ws_blank: bool,
}

#[derive(Debug, Clone)]
struct SegmentRec {
    start: usize,
    end: usize,
    sentences: Range<usize>,
}

/// Pushed text waits until this many bytes have come before it is segmented and analysed
/// (or until its segment ends): decoded JSON arrives in fragments cut at every escape
/// sequence, often a few bytes each, and each analysis step reads the host's clock twice.
pub const FEED_BYTES: usize = 4096;

/// Accumulates a prompt as it streams in and compresses it to a token budget.
///
/// Memory: the pushed text plus about 60 bytes per sentence, 8 bytes per distinct term of
/// each sentence and about 24 bytes per distinct term of the prompt. Time: linear in the pushed text for `push_str` (plus, for prompts of more
/// than [`CompressionConfig::max_ranked_sentences`] sentences, one bounded pruning step per
/// half of that many sentences); `finish` ranks at most that many candidates (sparse
/// similarity graph, bounded neighbours and iterations), so its cost does not grow with the
/// prompt beyond that point, apart from linear bookkeeping over the sentences.
#[derive(Debug)]
pub struct PromptBuilder {
    cfg: CompressionConfig,
    params: rank::Params,
    ratio: f32,
    text: String,
    seg: Segmenter,
    spans: Vec<Span>,
    open_start: usize,
    open_first_sentence: usize,
    open_dirty: bool,
    /// Bytes of `text` given to the segmenter so far.
    fed: usize,
    segments: Vec<SegmentRec>,
    sentences: Vec<Sentence>,
    arena: Vec<(u32, u16)>,
    term_ids: HashMap<u64, u32, PreHashedBuild>,
    df: Vec<u32>,
    /// Per term id: the index in `arena` of its latest entry.
    last_entry: Vec<u32>,
    scratch: Vec<u64>,
    /// The word being folded by the analysis (kept between sentences).
    word_buf: Vec<u8>,
    risk: RiskFlags,
    total_centi: u64,
    /// Candidates for ranking: indices of the sentences that are neither risk-flagged nor
    /// pruned, ascending.
    pool: Vec<u32>,
    /// Indices of the risk-flagged sentences, ascending (the selection's risk steps read
    /// these, not every sentence).
    flagged: Vec<u32>,
    /// Sentences pruned so far.
    pruned: u32,
    clock: Clock,
    busy_us: u64,
    /// Risk kinds whose sentences [`Compressed::pii_sentences`] reports.
    pii_cues: RiskFlags,
}

impl PromptBuilder {
    /// A builder for one request. `config` should have passed
    /// [`CompressionConfig::validate`]; out-of-range values are clamped, never fatal.
    pub fn new(config: &CompressionConfig) -> Self {
        PromptBuilder {
            cfg: config.clone(),
            params: config.params(),
            ratio: clamp_ratio(config.token_ratio),
            text: String::new(),
            seg: Segmenter::new(config.max_sentence_bytes.clamp(64, 65536) as usize),
            spans: Vec::new(),
            open_start: 0,
            open_first_sentence: 0,
            open_dirty: false,
            fed: 0,
            segments: Vec::new(),
            sentences: Vec::new(),
            arena: Vec::new(),
            term_ids: HashMap::default(),
            df: Vec::new(),
            last_entry: Vec::new(),
            scratch: Vec::new(),
            word_buf: Vec::new(),
            risk: RiskFlags::empty(),
            total_centi: 0,
            pool: Vec::new(),
            flagged: Vec::new(),
            pruned: 0,
            clock: default_clock,
            busy_us: 0,
            pii_cues: RiskFlags::empty(),
        }
    }

    /// Reports in [`Compressed::pii_sentences`] the sentences flagged with a kind of
    /// `cues` (the personal-data kinds that call for the daemon's PII model); none by
    /// default.
    pub fn set_pii_cues(&mut self, cues: RiskFlags) {
        self.pii_cues = cues;
    }

    /// Uses `ratio` (daemon tokens per estimated token, from [`TokenCalibration::ratio`])
    /// instead of the configured `token_ratio`.
    pub fn with_token_ratio(mut self, ratio: f32) -> Self {
        self.ratio = clamp_ratio(ratio);
        self
    }

    /// Uses `clock` for the timings instead of [`default_clock`] (for example the proxy-wasm
    /// host's time).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// Appends decoded text; `text` may be split anywhere (mid-word, mid-sentence) between
    /// calls. Completed sentences are analysed as soon as [`FEED_BYTES`] of text wait
    /// (token estimate, terms, risk flags), so `finish` does not re-tokenize the text and
    /// has at most that much left to read.
    pub fn push_str(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.text.push_str(text);
        self.open_dirty = true;
        if self.text.len() - self.fed >= FEED_BYTES {
            let t0 = (self.clock)();
            self.feed_pending();
            self.account(t0);
        }
    }

    /// Segments and analyses the text pushed since the last call.
    fn feed_pending(&mut self) {
        let base = self.fed;
        if base >= self.text.len() {
            return;
        }
        let mut spans = std::mem::take(&mut self.spans);
        spans.clear();
        self.seg
            .feed(self.text.get(base..).unwrap_or_default(), base, &mut spans);
        self.fed = self.text.len();
        for sp in spans.drain(..) {
            self.add_sentence(sp);
        }
        self.spans = spans;
    }

    /// Ends the current segment (one message or content part); the next push starts a new
    /// sentence. Ending an empty segment is allowed and counts.
    pub fn end_segment(&mut self) {
        let t0 = (self.clock)();
        self.close_segment();
        self.account(t0);
    }

    /// Number of segments ended so far.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// Number of completed sentences analysed so far (the last [`FEED_BYTES`] pushed may
    /// wait until more text comes or the segment ends).
    pub fn sentence_count(&self) -> usize {
        self.sentences.len()
    }

    /// Estimated encoder tokens of the sentences analysed so far (at the current ratio).
    pub fn estimated_tokens(&self) -> u32 {
        text::centi_to_tokens(self.total_centi, self.ratio)
    }

    /// Bytes pushed so far.
    pub fn byte_len(&self) -> usize {
        self.text.len()
    }

    /// Risk kinds found so far in the sentences analysed.
    pub fn risk_flags(&self) -> RiskFlags {
        self.risk
    }

    /// Compresses to the configured budget; see [`PromptBuilder::compress`].
    pub fn finish(mut self, pinned_segments: &[usize]) -> Compressed {
        self.compress_to_budget(pinned_segments)
    }

    /// [`PromptBuilder::finish`] that keeps the builder, so that the caller can free it
    /// (the whole prompt and its tables) where the time does not count, after the dispatch.
    pub fn compress_to_budget(&mut self, pinned_segments: &[usize]) -> Compressed {
        let budget = self.cfg.budget_tokens;
        self.compress(pinned_segments, budget)
    }

    /// Compresses to `budget_tokens` (special tokens included, like
    /// [`CompressionConfig::budget_tokens`]). Can be called more than once, for different
    /// budgets. An open segment is ended first. `pinned_segments` are indices of ended
    /// segments whose end is kept whatever its score (unknown indices are ignored): the
    /// last sentence of each, and the sentences before it while they fit in half the
    /// budget ([`PINNED_SHARE`]); the rest of such a segment is ranked like any other
    /// text. If the last sentences alone exceed the budget, the result reports `overflow`.
    pub fn compress(&mut self, pinned_segments: &[usize], budget_tokens: u32) -> Compressed {
        let t0 = (self.clock)();
        if self.open_dirty {
            self.close_segment();
        }
        let (mut out, _) = self.select(pinned_segments, budget_tokens);
        let t1 = (self.clock)();
        let finish = match (t0, t1) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        self.busy_us = self.busy_us.saturating_add(finish);
        out.finish_us = finish;
        out.elapsed_us = self.busy_us;
        out
    }

    fn account(&mut self, t0: Option<u64>) {
        if let (Some(a), Some(b)) = (t0, (self.clock)()) {
            self.busy_us = self.busy_us.saturating_add(b.saturating_sub(a));
        }
    }

    fn close_segment(&mut self) {
        self.feed_pending();
        let end = self.text.len();
        let mut spans = std::mem::take(&mut self.spans);
        spans.clear();
        self.seg.finish(end, &mut spans);
        for sp in spans.drain(..) {
            self.add_sentence(sp);
        }
        self.spans = spans;
        self.segments.push(SegmentRec {
            start: self.open_start,
            end,
            sentences: self.open_first_sentence..self.sentences.len(),
        });
        self.open_start = end;
        self.open_first_sentence = self.sentences.len();
        self.open_dirty = false;
    }

    fn add_sentence(&mut self, sp: Span) {
        let Some(s) = self.text.get(sp.start..sp.end) else {
            return;
        };
        self.scratch.clear();
        // One pass for the analysis and the risk scan (the lead is read below).
        let mut pass = (
            text::TermScan::new(&mut self.scratch, &mut self.word_buf),
            (risk::WordScan::new(), risk::ByteScan::default()),
        );
        text::read_chars(s, &mut pass);
        let (terms, (words, bytes)) = pass;
        let a = terms.finish();
        // The end of the previous line in the same segment: a phone word there ("Phone:"
        // on the line above) counts for a number at the start of this sentence.
        let mut from = self.open_start.max(sp.start.saturating_sub(16));
        while from < sp.start && !self.text.is_char_boundary(from) {
            from += 1;
        }
        let lead = self.text.get(from..sp.start).unwrap_or("");
        let risk = risk::flags_after(s, lead, words, bytes.summary());
        // Terms grouped in their order of first occurrence: `last_entry[id]` is where the
        // term's latest arena entry is, so a repeat within this sentence adds to it.
        let t0 = self.arena.len();
        for &h in &self.scratch {
            let next_id = self.df.len() as u32;
            let id = *self.term_ids.entry(h).or_insert(next_id);
            if id == next_id {
                self.df.push(0);
                self.last_entry.push(0);
            }
            let (Some(d), Some(last)) = (
                self.df.get_mut(id as usize),
                self.last_entry.get_mut(id as usize),
            ) else {
                continue;
            };
            match self.arena.get_mut(*last as usize) {
                Some(e) if *last as usize >= t0 && e.0 == id => e.1 = e.1.saturating_add(1),
                _ => {
                    *last = self.arena.len() as u32;
                    self.arena.push((id, 1));
                    *d += 1;
                }
            }
        }
        let newlines = self
            .text
            .get(sp.end..sp.ws_end)
            .map_or(0, |w| w.bytes().filter(|&b| b == b'\n').count());
        self.risk |= risk;
        self.total_centi += u64::from(a.centi);
        if risk.is_empty() {
            self.pool.push(self.sentences.len() as u32);
        } else {
            self.flagged.push(self.sentences.len() as u32);
        }
        self.sentences.push(Sentence {
            start: sp.start,
            end: sp.end,
            ws_end: sp.ws_end,
            segment: self.segments.len() as u32,
            centi: a.centi,
            terms: t0..self.arena.len(),
            risk,
            fingerprint: a.fingerprint,
            ws_newline: newlines > 0,
            ws_blank: newlines > 1,
        });
        if self.pool.len() > self.max_ranked() {
            self.prune();
        }
    }

    /// The risk-flagged sentences with their indices, ascending.
    fn flagged_sentences(&self) -> impl Iterator<Item = (usize, &Sentence)> + '_ {
        self.flagged
            .iter()
            .filter_map(|&i| Some((i as usize, self.sentences.get(i as usize)?)))
    }

    fn max_ranked(&self) -> usize {
        self.cfg.max_ranked_sentences.clamp(64, 65536) as usize
    }

    /// The ranking input over the sentences `idx` (ascending indices); `ranges`,
    /// `centi`, `fingerprints` and `positions` are filled for it.
    fn rank_input<'a>(&'a self, idx: &[usize], cols: &'a mut RankColumns) -> rank::Input<'a> {
        cols.ranges.clear();
        cols.centi.clear();
        cols.fingerprints.clear();
        cols.positions.clear();
        for s in idx.iter().filter_map(|&i| self.sentences.get(i)) {
            cols.ranges.push(s.terms.clone());
            cols.centi.push(s.centi);
            cols.fingerprints.push(s.fingerprint);
        }
        cols.positions.extend(idx.iter().map(|&i| i as u32));
        rank::Input {
            arena: &self.arena,
            ranges: &cols.ranges,
            df: &self.df,
            centi: &cols.centi,
            fingerprints: &cols.fingerprints,
            positions: &cols.positions,
            total: self.sentences.len(),
        }
    }

    /// Cuts the candidate pool to half of `max_ranked_sentences`. The oldest eighth (the
    /// start of the prompt, which the position curve favours) and the newest quarter (which
    /// may turn out to be its end) stay; of the candidates in between, an eighth is kept,
    /// best first by TF-IDF among what has arrived so far. Position is left out (where they
    /// will sit in the final prompt is not known yet), and so is TextRank, whose graph would
    /// be rebuilt at every prune; both count in the final ranking.
    fn prune(&mut self) {
        let cap = self.max_ranked();
        let head = cap / 8;
        let recent = cap / 4;
        let keep_mid = (cap / 2).saturating_sub(head + recent);
        let pool = std::mem::take(&mut self.pool);
        let mid_end = pool.len().saturating_sub(recent).max(head);
        let idx: Vec<usize> = pool.iter().map(|&i| i as usize).collect();
        let mut cols = RankColumns::default();
        let params = rank::Params {
            position: 0.0,
            textrank: 0.0,
            ..self.params
        };
        let scores = rank::scores(&self.rank_input(&idx, &mut cols), &params);
        let mut mid: Vec<usize> = (head..mid_end).collect();
        let by_score = |a: &usize, b: &usize| {
            let sa = scores.get(*a).copied().unwrap_or(0.0);
            let sb = scores.get(*b).copied().unwrap_or(0.0);
            sb.total_cmp(&sa).then(a.cmp(b))
        };
        if mid.len() > keep_mid && keep_mid > 0 {
            mid.select_nth_unstable_by(keep_mid - 1, by_score);
        }
        mid.truncate(keep_mid);
        mid.sort_unstable();
        let mut next: Vec<u32> = pool.get(..head).unwrap_or_default().to_vec();
        next.extend(mid.iter().filter_map(|&k| pool.get(k).copied()));
        next.extend_from_slice(pool.get(mid_end..).unwrap_or_default());
        self.pruned = self.pruned.saturating_add((pool.len() - next.len()) as u32);
        self.pool = next;
    }

    /// The selection; also returns the kept sentence indices (for tests).
    /// The sentences of the pinned segments kept whatever their score, ascending: of each
    /// segment (the latest first) its last sentence, and the ones before it while all of
    /// them fit in [`PINNED_SHARE`] of `budget_centi`. A long final part (a document sent
    /// as the last content part) is otherwise ranked like the rest, so it cannot crowd the
    /// risk-flagged sentences out of the budget, nor make the text sent unbounded.
    pub(crate) fn pinned_sentences(&self, pinned: &[usize], budget_centi: u64) -> Vec<usize> {
        let cap = budget_centi / PINNED_SHARE;
        let mut segments: Vec<usize> = pinned.to_vec();
        segments.sort_unstable();
        segments.dedup();
        let mut out = Vec::new();
        let mut used = 0u64;
        for seg in segments.iter().rev().filter_map(|&p| self.segments.get(p)) {
            for (k, i) in seg.sentences.clone().rev().enumerate() {
                let c = self.sentences.get(i).map_or(0, |s| u64::from(s.centi));
                if k > 0 && used + c > cap {
                    break;
                }
                used += c;
                out.push(i);
            }
        }
        out.sort_unstable();
        out
    }
}
