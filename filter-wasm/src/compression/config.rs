//! The compression settings: budget, scoring profile and weights, risk context, limits;
//! validated at load ([`CompressionConfig::validate`]).

use serde::Deserialize;

use super::{rank, TokenCalibration, DEFAULT_BUDGET_TOKENS};

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
    /// (default 256, [`DEFAULT_BUDGET_TOKENS`]). Text that fits
    /// `budget_tokens - reserved_tokens` is sent unchanged.
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
    /// injection cue ([`crate::risk::RiskFlags::INJECTION`]; a weak [`crate::risk::RiskFlags::FRAMING`] cue and a
    /// [`crate::risk::RiskFlags::HARMFUL_REQUEST`] get none),
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
    /// left after the last body byte stays bounded whatever the prompt's length.
    /// Risk-flagged and pinned sentences are never pruned; prompts with fewer sentences are
    /// ranked exactly as without the cap.
    ///
    /// The cap trades that work against ranking quality. 1024 keeps the domain agreement
    /// with the whole prompt of a cap of 2048 (0.972 on 72 prompts of 2K-32K tokens,
    /// `scripts/eval_compression.py --signals domain --per-cell 6`) at about 1 ms from the
    /// last body byte to the dispatch inside Envoy for prompts of 512 KiB to 4 MiB
    /// (`router-bench --mode filter`); 512 loses agreement on prompts of the MMLU-Pro "other"
    /// category, whose whole-prompt label has itself a confidence of 0.6-0.7.
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
    pub(super) fn params(&self) -> rank::Params {
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
