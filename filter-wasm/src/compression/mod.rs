//! Classical prompt compression: cut any prompt to a token budget before it is sent to the
//! daemon, without a neural model, while keeping what the routing decisions depend on.
//!
//! This is stage 2 of the paper "98x Faster LLM Routing Without a Dedicated GPU: Flash
//! Attention, Prompt Compression, and Near-Streaming for the vLLM Semantic Router"
//! (arXiv 2603.12646): extractive sentence selection by TextRank, position weighting,
//! TF-IDF and novelty, each input cut to about 512 tokens. It fixes the paper's known
//! weakness (compression changed many jailbreak decisions, so the paper exempted jailbreak
//! and PII from it) by never dropping the sentences that cheap risk detectors flag
//! ([`risk`]) nor the end of the pinned segments (the final user question).
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
//! without the tokenizer (see `text`); a ratio learned from the daemon's reported
//! `input_tokens` ([`TokenCalibration`]) corrects the estimate over time.

mod lexicon;
mod rank;
pub mod risk;
mod segment;
#[cfg(test)]
mod tests;
mod text;

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use serde::Deserialize;

pub use risk::RiskFlags;

use segment::{Segmenter, Span};
use text::PreHashedBuild;

/// Default token budget: the encoder window of BERT-class models (MiniLM, ModernBERT
/// classifiers as used by the paper).
pub const DEFAULT_BUDGET_TOKENS: u32 = 512;

/// The risk kinds whose sentences are reported in [`Compressed::flagged_sentences`]: the
/// strong jailbreak cues ([`RiskFlags::INJECTION`]) and plain harmful requests
/// ([`RiskFlags::HARMFUL_REQUEST`]).
pub const SCORED_ALONE: RiskFlags = RiskFlags::INJECTION.union(RiskFlags::HARMFUL_REQUEST);

/// Most sentences reported in [`Compressed::flagged_sentences`]; the daemon reads no more
/// per text (`ClassifyRequest.flagged_sentences`).
pub use semroute_proto::MAX_FLAGGED_SENTENCES;

/// Largest [`Compressed::pattern_text`], bytes (`ClassifyRequest.pattern_text`).
pub use semroute_proto::MAX_PATTERN_TEXT_BYTES;

/// The end of the pinned segments may use at most 1 / `PINNED_SHARE` of the text budget
/// (their last sentences are kept even beyond it); the rest is left to the risk-flagged
/// sentences and the ranking. A content part or message of any length may be the final
/// one: kept whole, a long one would leave the risk-flagged sentences of the rest of the
/// prompt no room.
pub const PINNED_SHARE: u64 = 2;

/// A named set of scoring weights and position-curve parameters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// TextRank 0.45, position 0.30, TF-IDF 0.20, novelty 0.05; U-shaped position curve of
    /// depth 0.5. Centrality weighs more than in [`Profile::Reference`]: the sentences that
    /// best represent the whole prompt keep the domain decision of the whole prompt.
    /// Measured with `scripts/eval_compression.py` (MMLU-Pro questions in 2K-32K tokens
    /// of same-category filler, 288 prompts over three seeds): domain agreement 0.972
    /// against 0.944 for the reference weights, jailbreak and PII decisions unchanged.
    #[default]
    Default,
    /// The vLLM Semantic Router defaults: TextRank 0.20, position 0.40, TF-IDF 0.35,
    /// novelty 0.05; depth 0.5.
    Reference,
    /// Code-heavy prompts: rare identifiers carry the topic, so TF-IDF weighs more
    /// (TextRank 0.15, position 0.30, TF-IDF 0.45, novelty 0.10; depth 0.4, slight recency).
    Coding,
    /// Security-sensitive routes: a flatter position curve so that text hidden in the middle
    /// is not starved, and more novelty for coverage (0.15 / 0.25 / 0.35 / 0.25; depth 0.2).
    Security,
    /// Conversations: recent turns matter most (0.15 / 0.45 / 0.30 / 0.10; depth 0.5,
    /// recency tilt 0.4).
    MultiTurn,
}

/// Weights of the four sentence scores. They need not sum to one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScoreWeights {
    /// TextRank (PageRank over sentence similarity).
    pub textrank: f32,
    /// U-shaped position weight (primacy and recency).
    pub position: f32,
    /// TF-IDF salience.
    pub tfidf: f32,
    /// Novelty against the sentences already selected.
    pub novelty: f32,
}

impl Profile {
    /// Weights, position depth and recency tilt of the profile.
    pub fn preset(self) -> (ScoreWeights, f32, f32) {
        let w = |textrank, position, tfidf, novelty| ScoreWeights {
            textrank,
            position,
            tfidf,
            novelty,
        };
        match self {
            Profile::Default => (w(0.45, 0.30, 0.20, 0.05), 0.5, 0.0),
            Profile::Reference => (w(0.20, 0.40, 0.35, 0.05), 0.5, 0.0),
            Profile::Coding => (w(0.15, 0.30, 0.45, 0.10), 0.4, 0.1),
            Profile::Security => (w(0.15, 0.25, 0.35, 0.25), 0.2, 0.0),
            Profile::MultiTurn => (w(0.15, 0.45, 0.30, 0.10), 0.5, 0.4),
        }
    }
}

/// Per-weight overrides of the profile's weights (JSON object with any of the four keys).
#[derive(Debug, Clone, Copy, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WeightOverrides {
    /// Overrides [`ScoreWeights::textrank`].
    pub textrank: Option<f32>,
    /// Overrides [`ScoreWeights::position`].
    pub position: Option<f32>,
    /// Overrides [`ScoreWeights::tfidf`].
    pub tfidf: Option<f32>,
    /// Overrides [`ScoreWeights::novelty`].
    pub novelty: Option<f32>,
}

/// Compression settings, read from the filter's JSON configuration (every field optional).
///
/// ```json
/// {"budget_tokens": 512, "profile": "coding", "weights": {"novelty": 0.1}}
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CompressionConfig {
    /// Encoder tokens the daemon may receive per request, special tokens included
    /// (default 512). Text that fits `budget_tokens - reserved_tokens` is sent unchanged.
    pub budget_tokens: u32,
    /// Tokens the encoder adds around the text (`[CLS]` and `[SEP]` for BERT: default 2).
    pub reserved_tokens: u32,
    /// Named scoring weights (default: [`Profile::Default`]).
    pub profile: Profile,
    /// Overrides of individual profile weights.
    pub weights: WeightOverrides,
    /// Depth of the U-shaped position curve in `[0, 1]`: the middle sentence weighs
    /// `1 - depth` (profile default when absent).
    pub position_depth: Option<f32>,
    /// Tilt of the position curve in `[-1, 1]`: positive favours the end (recency),
    /// negative the start (profile default when absent).
    pub recency_tilt: Option<f32>,
    /// PageRank damping factor in `(0, 1)` (default 0.85, Brin and Page 1998).
    pub damping: f32,
    /// TextRank iteration cap, 1..=1000 (default 50).
    pub max_iterations: u32,
    /// TextRank convergence threshold on the L1 change of the scores (default 1e-4).
    pub tolerance: f32,
    /// Neighbours kept per sentence in the similarity graph, 1..=256 (default 20).
    pub max_neighbors: u32,
    /// Cosine similarity below which no graph edge is made, in `[0, 1)` (default 0.05).
    pub min_similarity: f32,
    /// Initial daemon-tokens per estimated token, in `[0.25, 4]` (default 1.0); see
    /// [`TokenCalibration`].
    pub token_ratio: f32,
    /// Keep every risk-flagged sentence (default true). Flagged sentences that do not all
    /// fit are kept most severe kind first and the rest reported as dropped.
    pub keep_risk_flagged: bool,
    /// Tokens that risk-flagged sentences may use beyond the budget (default 0: the budget
    /// is a hard cap for everything but the last sentence of a pinned segment).
    pub risk_overflow_tokens: u32,
    /// Estimated tokens of surrounding text kept on each side of a sentence with an
    /// injection cue ([`RiskFlags::INJECTION`]; a weak [`RiskFlags::FRAMING`] cue and a
    /// [`RiskFlags::HARMFUL_REQUEST`] get none),
    /// nearest sentences first, within its segment, while the budget allows
    /// (default 160; at most 4096). A persona, fiction or rule-list setup spreads over many
    /// sentences and short lines, the cue words sit in only some of them, and the daemon's
    /// jailbreak signal scores them together.
    pub risk_context_tokens: u32,
    /// Estimated tokens of surrounding text kept on each side of a sentence with a
    /// personal-data cue, nearest sentences first, within its paragraph (across a blank
    /// line only to a line of at most 16 tokens), while the budget allows (default 48; at
    /// most 4096): the other lines of an address, the name above it, the answer after a
    /// question, the words that tell a PII model what a number is. The unbroken run of short
    /// lines around a sentence with a personal-data cue other than a name (the rest of its
    /// record, with a short sentence that starts or ends a longer line at either end of it)
    /// is kept before the sentences flagged only as names; the rest comes after them.
    pub pii_context_tokens: u32,
    /// Soft cap on sentence length in bytes, 64..=65536 (default 480): longer sentences are
    /// cut at the next whitespace, whitespace-free runs after a third of it.
    pub max_sentence_bytes: u32,
    /// Candidate sentences ranked when the prompt is complete, at most; 64..=65536 (default
    /// 1024, about 22K tokens of prose). A longer prompt is pruned while it streams in:
    /// whenever more candidates than this have arrived, the first eighth of the prompt and
    /// the newest quarter stay, and of the candidates in between only an eighth of the cap
    /// is kept, the best by TF-IDF among what has arrived (TextRank joins in the final
    /// ranking only: its similarity graph, rebuilt at every prune, cost a fifth of the
    /// filter's time on a 1 MiB prompt). Each prune scores this many sentences, so the work
    /// left after the last body byte stays bounded whatever the prompt's length. Risk-flagged and pinned sentences are never
    /// pruned; prompts with fewer sentences are ranked exactly as without the cap.
    ///
    /// The cap trades that work against ranking quality. Measured with `router-bench
    /// --mode filter` (last body byte to dispatch inside Envoy, p50, long-tailed prose of
    /// 512 KiB / 1 MiB / 4 MiB) and `scripts/eval_compression.py --signals domain
    /// --per-cell 6` (domain agreement with the whole prompt, 72 prompts of 2K-32K
    /// tokens), with the earlier similarity graph whose term bound grew as `2 sqrt(N)`:
    /// 2048: 2.7 / 3.7 / 2.9 ms, 0.972; 1024: 1.7 / 1.8 / 1.3 ms, 0.958; 512: 1.3 / 1.2 /
    /// 1.2 ms, 0.944 (the lost agreements are prompts of the MMLU-Pro "other" category,
    /// whose whole-prompt label itself has a confidence of 0.6-0.7). With the graph's term
    /// bound fixed at 16 sentences (`rank::GRAPH_TERM_MAX_SENTENCES`), 1024 (the default)
    /// gives 0.95 / 1.03 / 1.08 ms and 0.972.
    pub max_ranked_sentences: u32,
}

impl Default for CompressionConfig {
    fn default() -> Self {
        CompressionConfig {
            budget_tokens: DEFAULT_BUDGET_TOKENS,
            reserved_tokens: 2,
            profile: Profile::Default,
            weights: WeightOverrides::default(),
            position_depth: None,
            recency_tilt: None,
            damping: 0.85,
            max_iterations: 50,
            tolerance: 1e-4,
            max_neighbors: 20,
            min_similarity: 0.05,
            token_ratio: 1.0,
            keep_risk_flagged: true,
            risk_overflow_tokens: 0,
            risk_context_tokens: 160,
            pii_context_tokens: 48,
            max_sentence_bytes: 480,
            max_ranked_sentences: 1024,
        }
    }
}

/// An invalid compression setting: `field` is its JSON path relative to the compression
/// object (for example `weights.tfidf`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid compression setting `{field}`: {message}")]
pub struct ConfigError {
    /// JSON path of the offending field.
    pub field: String,
    /// What is wrong and what is allowed.
    pub message: String,
}

fn err(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError {
        field: field.into(),
        message: message.into(),
    }
}

/// Longest line (centi-tokens) that personal-data context reaches across a blank line (a
/// line holding one short sentence).
const SHORT_LINE_CENTI: u32 = 1600;
/// A sentence of at most this many centi-tokens (4 tokens) inside a line of a personal-data
/// record is a fragment of it ("18." in "Belgrád rkp. 18. Apt. 417").
const FRAGMENT_CENTI: u32 = 400;

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

/// Smallest accepted budget: room for a short question after the reserved tokens.
pub const MIN_BUDGET_TOKENS: u32 = 16;
/// Largest accepted budget.
pub const MAX_BUDGET_TOKENS: u32 = 1 << 20;

impl CompressionConfig {
    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let budget = |field: &str, v: u32| -> Result<(), ConfigError> {
            if !(MIN_BUDGET_TOKENS..=MAX_BUDGET_TOKENS).contains(&v) {
                return Err(err(
                    field,
                    format!("must be between {MIN_BUDGET_TOKENS} and {MAX_BUDGET_TOKENS} tokens, got {v}"),
                ));
            }
            if v <= self.reserved_tokens {
                return Err(err(
                    field,
                    format!("must exceed reserved_tokens ({})", self.reserved_tokens),
                ));
            }
            Ok(())
        };
        if self.reserved_tokens > 64 {
            return Err(err("reserved_tokens", "must be at most 64"));
        }
        budget("budget_tokens", self.budget_tokens)?;
        let unit = |field: &str, v: Option<f32>, lo: f32, hi: f32| -> Result<(), ConfigError> {
            match v {
                Some(x) if !x.is_finite() || x < lo || x > hi => Err(err(
                    field,
                    format!("must be a number between {lo} and {hi}, got {x}"),
                )),
                _ => Ok(()),
            }
        };
        unit("weights.textrank", self.weights.textrank, 0.0, 10.0)?;
        unit("weights.position", self.weights.position, 0.0, 10.0)?;
        unit("weights.tfidf", self.weights.tfidf, 0.0, 10.0)?;
        unit("weights.novelty", self.weights.novelty, 0.0, 10.0)?;
        let (w, _, _) = self.effective();
        if w.textrank + w.position + w.tfidf + w.novelty <= 0.0 {
            return Err(err("weights", "at least one weight must be positive"));
        }
        unit("position_depth", self.position_depth, 0.0, 1.0)?;
        unit("recency_tilt", self.recency_tilt, -1.0, 1.0)?;
        if !(self.damping.is_finite() && self.damping > 0.0 && self.damping < 1.0) {
            return Err(err(
                "damping",
                format!("must be in (0, 1), got {}", self.damping),
            ));
        }
        if !(1..=1000).contains(&self.max_iterations) {
            return Err(err("max_iterations", "must be between 1 and 1000"));
        }
        if !(self.tolerance.is_finite() && self.tolerance > 0.0 && self.tolerance <= 1.0) {
            return Err(err("tolerance", "must be in (0, 1]"));
        }
        if !(1..=256).contains(&self.max_neighbors) {
            return Err(err("max_neighbors", "must be between 1 and 256"));
        }
        if !(self.min_similarity.is_finite() && (0.0..1.0).contains(&self.min_similarity)) {
            return Err(err("min_similarity", "must be in [0, 1)"));
        }
        unit(
            "token_ratio",
            Some(self.token_ratio),
            TokenCalibration::MIN_RATIO,
            TokenCalibration::MAX_RATIO,
        )?;
        if self.risk_overflow_tokens > MAX_BUDGET_TOKENS {
            return Err(err(
                "risk_overflow_tokens",
                format!("must be at most {MAX_BUDGET_TOKENS}"),
            ));
        }
        if !(64..=65536).contains(&self.max_sentence_bytes) {
            return Err(err("max_sentence_bytes", "must be between 64 and 65536"));
        }
        if self.risk_context_tokens > 4096 {
            return Err(err("risk_context_tokens", "must be at most 4096"));
        }
        if self.pii_context_tokens > 4096 {
            return Err(err("pii_context_tokens", "must be at most 4096"));
        }
        if !(64..=65536).contains(&self.max_ranked_sentences) {
            return Err(err("max_ranked_sentences", "must be between 64 and 65536"));
        }
        Ok(())
    }

    /// Effective weights, position depth and tilt: the profile with overrides applied.
    pub fn effective(&self) -> (ScoreWeights, f32, f32) {
        let (mut w, depth, tilt) = self.profile.preset();
        let o = &self.weights;
        w.textrank = o.textrank.unwrap_or(w.textrank);
        w.position = o.position.unwrap_or(w.position);
        w.tfidf = o.tfidf.unwrap_or(w.tfidf);
        w.novelty = o.novelty.unwrap_or(w.novelty);
        (
            w,
            self.position_depth.unwrap_or(depth),
            self.recency_tilt.unwrap_or(tilt),
        )
    }

    /// Scoring parameters, clamped so that even an unvalidated configuration cannot make
    /// compression panic or loop.
    fn params(&self) -> rank::Params {
        let (w, depth, tilt) = self.effective();
        let clean = |x: f32, lo: f32, hi: f32, dflt: f32| {
            if x.is_finite() {
                x.clamp(lo, hi)
            } else {
                dflt
            }
        };
        // A value that is not a number falls back to the default profile's.
        let (dw, d_depth, d_tilt) = Profile::Default.preset();
        rank::Params {
            textrank: clean(w.textrank, 0.0, 10.0, dw.textrank),
            position: clean(w.position, 0.0, 10.0, dw.position),
            tfidf: clean(w.tfidf, 0.0, 10.0, dw.tfidf),
            novelty: clean(w.novelty, 0.0, 10.0, dw.novelty),
            depth: clean(depth, 0.0, 1.0, d_depth),
            tilt: clean(tilt, -1.0, 1.0, d_tilt),
            damping: clean(self.damping, 0.01, 0.99, 0.85),
            max_iterations: self.max_iterations.clamp(1, 1000),
            tolerance: clean(self.tolerance, 1e-9, 1.0, 1e-4),
            max_neighbors: self.max_neighbors.clamp(1, 256) as usize,
            min_similarity: clean(self.min_similarity, 0.0, 0.999, 0.05),
        }
    }
}

/// Learns the ratio between the daemon's real token counts and this module's estimate.
///
/// Keep one per filter (root context) and feed it every reply:
/// `calibration.observe_reply(&compressed, reply.input_tokens)`, then start each request's
/// builder with `.with_token_ratio(calibration.ratio())`. The ratio is a running mean of
/// `actual / estimated` (exponential after 20 samples, weight 0.05), clamped to
/// [`TokenCalibration::MIN_RATIO`]..=[`TokenCalibration::MAX_RATIO`]; texts under 16
/// estimated tokens are ignored as too noisy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenCalibration {
    ratio: f32,
    samples: u32,
}

impl TokenCalibration {
    /// Smallest ratio accepted.
    pub const MIN_RATIO: f32 = 0.25;
    /// Largest ratio accepted.
    pub const MAX_RATIO: f32 = 4.0;

    /// Starts from `initial_ratio` (for example [`CompressionConfig::token_ratio`]);
    /// non-finite values become 1.0.
    pub fn new(initial_ratio: f32) -> Self {
        TokenCalibration {
            ratio: clamp_ratio(initial_ratio),
            samples: 0,
        }
    }

    /// Current ratio (daemon tokens per estimated token).
    pub fn ratio(&self) -> f32 {
        self.ratio
    }

    /// Samples taken so far.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Adds one sample: `estimated` tokens by this module's estimator at ratio 1
    /// ([`Compressed::kept_tokens_raw`]), `actual` tokens counted by the daemon (the
    /// reply's `input_tokens`, special tokens excluded). Returns the new ratio.
    pub fn observe(&mut self, estimated: u32, actual: u32) -> f32 {
        if estimated < 16 || actual == 0 {
            return self.ratio;
        }
        let sample = clamp_ratio(actual as f32 / estimated as f32);
        self.samples = self.samples.saturating_add(1);
        let alpha = (1.0 / self.samples as f32).max(0.05);
        self.ratio = clamp_ratio(self.ratio + alpha * (sample - self.ratio));
        self.ratio
    }

    /// [`TokenCalibration::observe`] for the text of `sent`.
    pub fn observe_reply(&mut self, sent: &Compressed, input_tokens: u32) -> f32 {
        self.observe(sent.kept_tokens_raw, input_tokens)
    }
}

impl Default for TokenCalibration {
    fn default() -> Self {
        TokenCalibration::new(1.0)
    }
}

fn clamp_ratio(r: f32) -> f32 {
    if r.is_finite() {
        r.clamp(TokenCalibration::MIN_RATIO, TokenCalibration::MAX_RATIO)
    } else {
        1.0
    }
}

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
            risk: RiskFlags::NONE,
            total_centi: 0,
            pool: Vec::new(),
            flagged: Vec::new(),
            pruned: 0,
            clock: default_clock,
            busy_us: 0,
        }
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

    fn select(&self, pinned: &[usize], budget_tokens: u32) -> (Compressed, Vec<usize>) {
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
            out.flagged_sentences = self.original_flagged();
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
            let strong_pii = RiskFlags::PII.without(RiskFlags::NAME);
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
        (out.text, out.flagged_sentences) = if out.compressed {
            self.assemble(&kept)
        } else {
            // Everything is pinned: send it as it came.
            (self.original_text(), self.original_flagged())
        };
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
            let sep = usize::from(!out.pattern_text.is_empty());
            if out.pattern_text.len() + sep + t.len() > MAX_PATTERN_TEXT_BYTES {
                break;
            }
            if queued.insert(s.fingerprint) {
                if sep == 1 {
                    out.pattern_text.push('\n');
                }
                out.pattern_text.push_str(t);
            }
        }
        (out, kept)
    }

    /// Sentences flagged with a kind in `tier` not yet selected, in the order they are kept:
    /// first one sentence of each kind (most severe kind first; of its sentences, the one
    /// flagged with most kinds, then the earliest), then the rest by number of kinds,
    /// severity and position. Sentences whose normalised content is already kept or queued are
    /// skipped (repeating a cue does not make it more necessary).
    fn risk_order(&self, sel: &[bool], tier: RiskFlags) -> Vec<usize> {
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
    fn context_order(&self, sel: &[bool], tier: RiskFlags, record_lines: bool) -> Vec<usize> {
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
    fn original_text(&self) -> String {
        let mut t = String::with_capacity(self.text.len() + self.segments.len());
        for (i, s) in self.segments.iter().enumerate() {
            if i > 0 {
                t.push('\n');
            }
            t.push_str(self.text.get(s.start..s.end).unwrap_or(""));
        }
        t
    }

    /// [`Compressed::flagged_sentences`] of [`PromptBuilder::original_text`] (segments
    /// joined by line breaks).
    fn original_flagged(&self) -> Vec<Range<usize>> {
        let mut out = Vec::new();
        // Where the segment starts in the joined text.
        let mut base = 0usize;
        for seg in &self.segments {
            for s in self
                .sentences
                .get(seg.sentences.clone())
                .unwrap_or_default()
            {
                if out.len() == MAX_FLAGGED_SENTENCES {
                    return out;
                }
                if s.risk.intersects(SCORED_ALONE) {
                    let a = base + s.start.saturating_sub(seg.start);
                    out.push(a..a + s.end.saturating_sub(s.start));
                }
            }
            base += seg.end - seg.start + 1;
        }
        out
    }

    /// Joins kept sentences (ascending indices); see [`Compressed::text`]. Also returns
    /// [`Compressed::flagged_sentences`] of the joined text.
    fn assemble(&self, kept: &[usize]) -> (String, Vec<Range<usize>>) {
        let cap: usize = kept
            .iter()
            .filter_map(|&i| self.sentences.get(i))
            .map(|s| s.ws_end.saturating_sub(s.start))
            .sum();
        let mut t = String::with_capacity(cap);
        let mut flagged = Vec::new();
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
            if s.risk.intersects(SCORED_ALONE) && flagged.len() < MAX_FLAGGED_SENTENCES {
                flagged.push(at..t.len());
            }
            prev = Some((i, s));
        }
        (t, flagged)
    }
}
