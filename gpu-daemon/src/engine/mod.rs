//! The classification engine: runs every requested signal for a batch of
//! requests, sharing one encoder pass between the domain and jailbreak heads
//! and batching windows across requests.
//!
//! [`Engine::classify_batch`] runs the sequence signals (domain and jailbreak,
//! `sequence`) and the PII signal (`pii`): side by side on two threads when each
//! session has its own thread pool, one after the other when they share one pool
//! (each then runs on every core). Each reads in three phases:
//!
//! - **plan**: the list of model passes for the batch: which token sequences go to which
//!   model, for which request, text ([`Part`]) and byte span, and why (a window of the
//!   text, of one of its readings (`readings`), anchored at a flagged sentence, a
//!   sentence of a suspicious window, a flagged sentence or a piece of one). What a
//!   window or a sentence is lives in `windows`.
//! - **run**: the model passes, batched by length, each distinct sequence once, through
//!   the result caches ([`crate::passes`]).
//! - **aggregate**: per signal: the domain is the mean over the windows of `text` (of the
//!   embeddings, weighted by tokens, for the head; of the probabilities for a classifier
//!   directory), the jailbreak score the maximum over every window and sentence, the PII
//!   entities the token labels (each token's from the window where it has the most
//!   context) decoded, then merged with the validated patterns.
//!
//! The jailbreak signal plans, runs and aggregates twice: the windows first, then, while
//! no window is decisive (`limits.jailbreak_refine_below`), the sentences to refine.
//! Signals with classifier directories of their own run in `classifier_dirs`.
//! Where configured, the hashed n-gram models add their reading of the text: to the
//! domain's log-probabilities as the domain is aggregated (`domain_ngrams`), and, last,
//! to the jailbreak score's log-odds (`jailbreak_ngrams`).

mod classifier_dirs;
mod domain_ngrams;
mod jailbreak_ngrams;
mod jailbreak_score;
mod pii;
mod readings;
mod sequence;
mod windows;

use std::ops::Range;
use std::sync::Arc;

use semroute_proto::signal;

use self::domain_ngrams::DomainNgrams;
use self::pii::PiiSignal;
use self::sequence::SequenceSignals;
use self::windows::plan_windows;
use crate::cache::{CacheStats, ResultCache};
use crate::config::{DaemonConfig, LimitsConfig, SequenceSignalConfig, ThreadPoolKind};
use crate::models::encoder::SentenceEncoder;
use crate::models::head::LinearHead;
use crate::models::hf_dir::HfClassifier;
use crate::models::ngrams::NgramScorer;
use crate::models::tokenizer::WindowTokenizer;
use crate::models::ModelError;
use crate::passes::{run_sorted, BatchLimits, Source};
use crate::pii::Entity;
use crate::runtime::ActiveProvider;

/// Which signals a request wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SignalSet {
    /// Domain category.
    pub domain: bool,
    /// Jailbreak score.
    pub jailbreak: bool,
    /// PII entities.
    pub pii: bool,
}

/// A signal name that is not one of [`semroute_proto::signal::ALL`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown signal {0:?}: expected domain, jailbreak or pii")]
pub struct UnknownSignal(pub String);

impl SignalSet {
    /// All signals.
    pub const ALL: SignalSet = SignalSet {
        domain: true,
        jailbreak: true,
        pii: true,
    };

    /// Parses signal names; an empty list means all.
    ///
    /// Errors with the offending name when it is not one of
    /// `domain`, `jailbreak`, `pii`.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, UnknownSignal> {
        if names.is_empty() {
            return Ok(Self::ALL);
        }
        let mut set = SignalSet::default();
        for n in names {
            match n.as_ref().trim() {
                signal::DOMAIN => set.domain = true,
                signal::JAILBREAK => set.jailbreak = true,
                signal::PII => set.pii = true,
                other => return Err(UnknownSignal(other.to_string())),
            }
        }
        Ok(set)
    }
}

/// One request's input.
#[derive(Debug, Clone, Default)]
pub struct ClassifyInput {
    /// Text for all signals.
    pub text: String,
    /// Text for jailbreak and PII only.
    pub scan_text: String,
    /// Requested signals.
    pub signals: SignalSet,
    /// Byte ranges of `text` (valid, on character boundaries) that the jailbreak signal
    /// also scores alone: the sentences the filter's risk scan flagged with a jailbreak
    /// cue. At most [`MAX_FLAGGED_SENTENCES`] are read.
    pub flagged_sentences: Vec<Range<usize>>,
    /// The same for `scan_text`.
    pub scan_flagged_sentences: Vec<Range<usize>>,
    /// Sentences that compression left out but that hold a validated personal-data
    /// pattern: scanned by the PII patterns only (`ClassifyRequest.pattern_text`).
    pub pattern_text: String,
    /// Estimated tokens of the prompt before the filter compressed it into `text`
    /// (`ClassifyRequest.reduction.original_tokens`); 0 when unknown (then `text`'s own
    /// tokens count).
    pub original_tokens: u32,
    /// The same for `scan_text` (`ClassifyRequest.scan_reduction.original_tokens`).
    pub scan_original_tokens: u32,
    /// The PII signal runs its validated patterns only, not the model
    /// (`ClassifyRequest.pii_patterns_only`: the filter's risk scan found no
    /// personal-data cue in the request).
    pub pii_patterns_only: bool,
    /// Byte ranges of `text` (valid, on character boundaries) that the PII model reads
    /// when the request carries any here or in `scan_pii_sentences`: the sentences with
    /// a personal-data cue, with their record lines (`ClassifyRequest.pii_sentences`). At
    /// most [`MAX_FLAGGED_SENTENCES`] are read. None in either: the model reads both
    /// texts whole.
    pub pii_sentences: Vec<Range<usize>>,
    /// The same for `scan_text`.
    pub scan_pii_sentences: Vec<Range<usize>>,
}

/// Most flagged sentences the jailbreak signal scores alone per text
/// ([`ClassifyInput::flagged_sentences`]); the filter sends no more than this either.
pub use semroute_proto::MAX_FLAGGED_SENTENCES;

/// A span of a request that is not a range of character boundaries of its text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}[{index}] = {start}..{end} is not a range of character boundaries in a text of {text_bytes} bytes")]
pub struct SpanError {
    /// The request field holding the spans (`flagged_sentences`, ...).
    pub field: &'static str,
    /// Index of the span in that field.
    pub index: usize,
    /// Start of the span, bytes.
    pub start: usize,
    /// End of the span, bytes.
    pub end: usize,
    /// Length of the text, bytes.
    pub text_bytes: usize,
}

/// Byte spans `(start, end)` as ranges of `text`, for [`ClassifyInput::flagged_sentences`].
/// Errors: the first span (`field[index]`) that is not a range of character boundaries
/// of `text`.
pub fn text_ranges(
    field: &'static str,
    spans: impl IntoIterator<Item = (usize, usize)>,
    text: &str,
) -> Result<Vec<Range<usize>>, SpanError> {
    spans
        .into_iter()
        .enumerate()
        .map(|(index, (start, end))| {
            text.get(start..end).map(|_| start..end).ok_or(SpanError {
                field,
                index,
                start,
                end,
                text_bytes: text.len(),
            })
        })
        .collect()
}

impl ClassifyInput {
    /// The text of `part`.
    fn part_text(&self, part: Part) -> &str {
        match part {
            Part::Text => &self.text,
            Part::ScanText => &self.scan_text,
            Part::PatternText => &self.pattern_text,
        }
    }

    /// The flagged sentences of `part` that the jailbreak signal scores alone: at most
    /// [`MAX_FLAGGED_SENTENCES`], non-empty, inside the text and on character boundaries
    /// (others are skipped; the server rejects them before they get here).
    fn flagged(&self, part: Part) -> impl Iterator<Item = (Range<usize>, &str)> {
        let (text, spans) = match part {
            Part::Text => (&self.text, &self.flagged_sentences[..]),
            Part::ScanText => (&self.scan_text, &self.scan_flagged_sentences[..]),
            // No jailbreak scoring there.
            Part::PatternText => (&self.pattern_text, &[][..]),
        };
        spans
            .iter()
            .filter_map(move |r| {
                let s = text.get(r.clone())?;
                (!s.trim().is_empty()).then(|| (r.clone(), s))
            })
            .take(MAX_FLAGGED_SENTENCES)
    }

    /// The byte ranges of the flagged sentences of `part` ([`ClassifyInput::flagged`]) that
    /// overlap the byte span `(start, end)` of a window.
    fn flagged_within(
        &self,
        part: Part,
        (start, end): (usize, usize),
    ) -> impl Iterator<Item = Range<usize>> + '_ {
        self.flagged(part)
            .map(|(r, _)| r)
            .filter(move |r| r.start < end && start < r.end)
    }
}

/// Which of the two texts a span refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Part {
    /// `ClassifyInput::text`.
    Text,
    /// `ClassifyInput::scan_text`.
    ScanText,
    /// `ClassifyInput::pattern_text` (PII patterns only).
    PatternText,
}

/// Domain result.
#[derive(Debug, Clone)]
pub struct DomainOutput {
    /// Best label.
    pub label: String,
    /// Its probability.
    pub confidence: f32,
    /// All labels with probabilities, highest first.
    pub distribution: Vec<(String, f32)>,
}

/// Jailbreak result: each text's own reading ([`JailbreakOutput::parts`]) and the higher
/// of them, which decides (see `jailbreak_score.rs`).
#[derive(Debug, Clone)]
pub struct JailbreakOutput {
    /// The decision's probability: the higher of the texts' scores ([`PartScore::score`]).
    pub score: f32,
    /// The encoder's (or the classifier's) probability of the text that gave `score`.
    pub encoder_score: f32,
    /// The n-gram model's logit added for that text, where one is configured.
    pub ngram_logit: Option<f32>,
    /// Windows and sentences scored, over both texts.
    pub windows: u32,
    /// Byte span of the riskiest window of that text, and the text.
    pub window: (usize, usize, Part),
    /// The reading of `text` and of `scan_text`, each alone; `None` for a text with
    /// nothing scored.
    pub parts: [Option<PartScore>; 2],
}

/// One text's jailbreak reading, as the thresholds were calibrated on single texts: its
/// highest window or sentence probability with its own n-gram logit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PartScore {
    /// `encoder_score` with `ngram_logit` (at least the floor) added to its log-odds;
    /// `encoder_score` without an n-gram model.
    pub score: f32,
    /// The highest probability over the text's windows and sentences.
    pub encoder_score: f32,
    /// The n-gram model's logit for the text, its readings and flagged sentences.
    pub ngram_logit: Option<f32>,
    /// Byte span of the riskiest window.
    pub window: (usize, usize),
}

/// One PII entity with the text it lies in.
#[derive(Debug, Clone)]
pub struct PiiOutput {
    /// The entity.
    pub entity: Entity,
    /// Which text the span is into.
    pub part: Part,
}

/// Per-request timings, microseconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct StageTimings {
    /// Tokenisation.
    pub tokenize_us: u64,
    /// Model runs (shared by the batch), wall time: the encoder and the PII model run side
    /// by side, so this is the longer of [`Self::encoder_us`] and [`Self::pii_us`] when both
    /// ran.
    pub inference_us: u64,
    /// Encoder (or sequence classifier) runs.
    pub encoder_us: u64,
    /// PII token-classifier runs.
    pub pii_us: u64,
    /// Heads, decoding and patterns.
    pub postprocess_us: u64,
}

/// One request's result.
#[derive(Debug, Clone, Default)]
pub struct ClassifyOutput {
    /// Present when requested.
    pub domain: Option<DomainOutput>,
    /// Present when requested.
    pub jailbreak: Option<JailbreakOutput>,
    /// Present when requested.
    pub pii: Option<Vec<PiiOutput>>,
    /// Some text went unseen by some model (window cap).
    pub truncated: bool,
    /// Encoder tokens of `text`.
    pub input_tokens: u32,
    /// Tokens this request ran through the encoder or the sequence classifiers, special
    /// tokens included, over every window, sentence and reading (cache hits and sequences
    /// repeated within the batch not counted): what the request cost.
    pub encoder_tokens: u32,
    /// The same for the PII token classifier.
    pub pii_tokens: u32,
    /// Model passes answered from the result cache.
    pub cached_passes: u32,
    /// Stage timings.
    pub timings: StageTimings,
    /// The models that computed this result (after a reload, the new ones as soon as the
    /// engine runs on them).
    pub models: Arc<ModelNames>,
}

/// Errors classifying a batch.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A model failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A requested signal has no model configured.
    #[error("signal {0} is not configured")]
    NotConfigured(&'static str),
}

enum SequenceModel {
    Head(LinearHead),
    Classifier(Box<HfClassifier>),
}

impl SequenceModel {
    /// The model's labels, in the order of its outputs.
    fn labels(&self) -> &[String] {
        match self {
            SequenceModel::Head(h) => &h.labels,
            SequenceModel::Classifier(c) => &c.id2label,
        }
    }
}

/// Names of the loaded models per signal.
#[derive(Debug, Clone, Default)]
pub struct ModelNames {
    /// (signal, model) pairs.
    pub entries: Vec<(&'static str, String)>,
}

/// Loaded models and limits. The sequence signals (domain and jailbreak, on the shared
/// encoder) and the PII signal own disjoint models, so one batch can run both side by
/// side (see [`Engine::classify_batch`]).
pub struct Engine {
    seq: SequenceSignals,
    pii: PiiSignal,
    /// Run the two signals' models on two threads at once: true with a thread pool per
    /// session (`runtime.thread_pool = "per_session"`, a core each); false with one
    /// shared pool, where two runs at once would contend for the same threads and each
    /// model runs fastest alone on every core.
    side_by_side: bool,
    /// Model names for responses.
    pub names: Arc<ModelNames>,
}

fn load_sequence(
    cfg: &SequenceSignalConfig,
    encoder: &Option<SentenceEncoder>,
    config: &DaemonConfig,
) -> Result<SequenceModel, ModelError> {
    if let Some(dir) = &cfg.classifier_dir {
        return Ok(SequenceModel::Classifier(Box::new(HfClassifier::load(
            dir,
            &config.runtime,
        )?)));
    }
    let path = cfg.head.as_ref().ok_or_else(|| ModelError::Invalid {
        path: "models".into(),
        message: "signal needs `head` or `classifier_dir`".into(),
    })?;
    let hidden = encoder.as_ref().map(|e| e.hidden).unwrap_or(0);
    Ok(SequenceModel::Head(LinearHead::load(path, hidden)?))
}

/// `scorer`, when it has one logit (a jailbreak n-gram model), or [`ModelError::Invalid`].
fn single_logit(scorer: NgramScorer, path: &std::path::Path) -> Result<NgramScorer, ModelError> {
    if scorer.classes() != 1 {
        return Err(ModelError::Invalid {
            path: path.to_owned(),
            message: format!(
                "{} logits: models.jailbreak.ngrams needs a single-logit model",
                scorer.classes()
            ),
        });
    }
    Ok(scorer)
}

impl Engine {
    /// Loads every configured model.
    pub fn load(config: &DaemonConfig) -> Result<Self, ModelError> {
        let m = &config.models;
        let needs_encoder =
            m.domain.classifier_dir.is_none() || m.jailbreak.classifier_dir.is_none();
        let encoder = if needs_encoder {
            Some(SentenceEncoder::load(&m.encoder_dir, &config.runtime)?)
        } else {
            None
        };
        let domain = load_sequence(&m.domain, &encoder, config)?;
        let jailbreak = load_sequence(&m.jailbreak, &encoder, config)?;
        let positive = m.jailbreak.positive_label.as_deref().unwrap_or("jailbreak");
        let labels = jailbreak.labels();
        let jailbreak_positive = labels
            .iter()
            .position(|l| l.eq_ignore_ascii_case(positive))
            .ok_or_else(|| ModelError::Invalid {
                path: "models.jailbreak".into(),
                message: format!("positive_label {positive:?} is not among labels {labels:?}"),
            })?;
        let jailbreak_ngrams = match &m.jailbreak.ngrams {
            Some(path) => Some(single_logit(NgramScorer::load(path)?, path)?),
            None => None,
        };
        let domain_ngrams = match &m.domain.ngrams {
            Some(path) => Some(DomainNgrams::new(
                NgramScorer::load(path)?,
                domain.labels(),
                path,
            )?),
            None => None,
        };
        let pii_model = match &m.pii.model_dir {
            Some(dir) => Some(HfClassifier::load(dir, &config.runtime)?),
            None => None,
        };
        // A window longer than a model's position table fails every long input at run time
        // (and the filter would fail open on each): refuse it at load.
        let mut positions: Vec<(&str, usize)> = Vec::new();
        if let Some(e) = &encoder {
            positions.push((&e.name, e.max_positions));
        }
        for model in [&domain, &jailbreak] {
            if let SequenceModel::Classifier(c) = model {
                positions.push((&c.name, c.max_positions));
            }
        }
        if let Some(p) = &pii_model {
            positions.push((&p.name, p.max_positions));
        }
        if let Some((name, max)) = positions
            .iter()
            .find(|(_, max)| config.limits.max_seq_len > *max)
        {
            return Err(ModelError::Invalid {
                path: "limits.max_seq_len".into(),
                message: format!(
                    "{} tokens is above the {max} positions of model {name}",
                    config.limits.max_seq_len
                ),
            });
        }
        let mut names = ModelNames::default();
        let enc_name = encoder.as_ref().map(|e| e.name.clone()).unwrap_or_default();
        for (signal, model) in [(signal::DOMAIN, &domain), (signal::JAILBREAK, &jailbreak)] {
            let mut name = match model {
                SequenceModel::Head(h) => format!("{enc_name}+{}@{}", h.name, h.version),
                SequenceModel::Classifier(c) => c.name.clone(),
            };
            let ngrams = match signal {
                signal::JAILBREAK => jailbreak_ngrams.as_ref().map(|n| n.version.as_str()),
                signal::DOMAIN => domain_ngrams.as_ref().map(|n| n.version()),
                _ => None,
            };
            if let Some(version) = ngrams {
                name = format!("{name}+{version}");
            }
            names.entries.push((signal, name));
        }
        names.entries.push((
            signal::PII,
            match &pii_model {
                Some(c) => format!("{}+patterns", c.name),
                None => "patterns".into(),
            },
        ));
        Ok(Self {
            seq: SequenceSignals {
                encoder,
                domain,
                jailbreak,
                jailbreak_positive,
                jailbreak_ngrams,
                domain_ngrams,
                limits: config.limits.clone(),
                batch: config.batching.limits(),
                cache: ResultCache::new(config.cache.encoder_bytes),
            },
            pii: PiiSignal {
                pii_model,
                pii: m.pii.clone(),
                limits: config.limits.clone(),
                batch: config.batching.limits(),
                cache: ResultCache::new(config.cache.pii_bytes),
            },
            names: Arc::new(names),
            side_by_side: config.runtime.thread_pool == ThreadPoolKind::PerSession,
        })
    }

    /// Execution providers in use, per model, for the startup log.
    pub fn providers(&self) -> Vec<(String, ActiveProvider)> {
        let mut v = Vec::new();
        if let Some(e) = &self.seq.encoder {
            v.push((e.name.clone(), e.provider));
        }
        for m in [&self.seq.domain, &self.seq.jailbreak] {
            if let SequenceModel::Classifier(c) = m {
                v.push((c.name.clone(), c.provider));
            }
        }
        if let Some(p) = &self.pii.pii_model {
            v.push((p.name.clone(), p.provider));
        }
        v
    }

    /// Classifies a batch of requests. Each request gets its own result;
    /// an error fails the whole batch (the caller retries requests singly).
    ///
    /// With a thread pool per session the PII model runs on a second thread while the
    /// encoder runs on this one, so a request's latency is the longer of the two passes,
    /// not their sum. With one shared pool they run one after the other, each split over
    /// every core. A panic on either side is passed on to the caller.
    pub fn classify_batch(
        &mut self,
        inputs: &[ClassifyInput],
    ) -> Result<Vec<ClassifyOutput>, EngineError> {
        let blank = || -> Vec<ClassifyOutput> {
            inputs.iter().map(|_| ClassifyOutput::default()).collect()
        };
        let mut outputs = blank();
        let mut pii_outputs = blank();
        let wants_pii = inputs.iter().any(|i| i.signals.pii);
        let wants_seq = inputs
            .iter()
            .any(|i| i.signals.domain || i.signals.jailbreak);
        let (seq, pii) = (&mut self.seq, &mut self.pii);
        let concurrent = wants_pii && wants_seq && self.side_by_side;
        let (seq_result, pii_result) = if concurrent {
            std::thread::scope(|s| {
                let pii_thread = s.spawn(|| pii.run(inputs, &mut pii_outputs));
                let seq_result = seq.run(inputs, &mut outputs);
                let pii_result = pii_thread
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (seq_result, pii_result)
            })
        } else {
            (
                seq.run(inputs, &mut outputs),
                pii.run(inputs, &mut pii_outputs),
            )
        };
        seq_result?;
        pii_result?;
        for (o, p) in outputs.iter_mut().zip(pii_outputs) {
            o.pii = p.pii;
            o.truncated |= p.truncated;
            o.pii_tokens = p.pii_tokens;
            o.cached_passes += p.cached_passes;
            let t = &mut o.timings;
            t.tokenize_us += p.timings.tokenize_us;
            t.encoder_us = t.inference_us;
            t.pii_us = p.timings.inference_us;
            t.inference_us = if concurrent {
                t.encoder_us.max(t.pii_us)
            } else {
                t.encoder_us + t.pii_us
            };
            t.postprocess_us += p.timings.postprocess_us;
            o.models = self.names.clone();
        }
        Ok(outputs)
    }

    /// Hits, lookups and bytes of the encoder's and the PII model's result caches.
    pub fn cache_stats(&self) -> [(&'static str, CacheStats); 2] {
        [
            ("encoder", self.seq.cache.stats()),
            ("pii", self.pii.cache.stats()),
        ]
    }

    /// The encoder's tokenizer, when an encoder is loaded: for tools (token counting).
    pub fn encoder_tokenizer(&self) -> Option<&WindowTokenizer> {
        self.seq.encoder.as_ref().map(|e| &e.tokenizer)
    }
}

/// Mean-pooled encoder embedding of each text (window embeddings averaged,
/// weighted by window tokens), exactly as the domain head sees it. Used to
/// train and evaluate heads. Shape: `[texts][hidden]`.
pub fn embed_texts(
    encoder: &mut SentenceEncoder,
    limits: &LimitsConfig,
    batch: BatchLimits,
    texts: &[String],
) -> Result<Vec<Vec<f32>>, EngineError> {
    let content = limits.max_seq_len - 2;
    let mut out = Vec::with_capacity(texts.len());
    let mut jobs: Vec<(usize, Vec<u32>)> = Vec::new();
    for (i, t) in texts.iter().enumerate() {
        let tok = encoder.tokenizer.tokenize(t)?;
        let plan = plan_windows(
            tok.ids.len(),
            content,
            limits.window_overlap,
            limits.max_windows,
        );
        for w in plan.windows {
            jobs.push((i, tok.ids[w].to_vec()));
        }
        out.push(vec![0f32; encoder.hidden]);
    }
    let mut weights = vec![0f32; texts.len()];
    let seqs: Vec<&[u32]> = jobs.iter().map(|(_, s)| s.as_slice()).collect();
    let embeddings = run_sorted(&seqs, batch, |b| {
        encoder
            .embed(b)
            .map(|a| a.outer_iter().map(|r| r.to_vec()).collect())
    })?;
    for ((i, seq), e) in jobs.iter().zip(embeddings) {
        let w = (seq.len() + 2) as f32;
        weights[*i] += w;
        for (o, v) in out[*i].iter_mut().zip(e) {
            *o += v * w;
        }
    }
    for (o, w) in out.iter_mut().zip(weights) {
        o.iter_mut().for_each(|v| *v /= w.max(1.0));
    }
    Ok(out)
}

fn domain_output(labels: &[String], probs: Vec<f32>) -> DomainOutput {
    let mut distribution: Vec<(String, f32)> = labels.iter().cloned().zip(probs).collect();
    distribution.sort_by(|a, b| b.1.total_cmp(&a.1));
    let (label, confidence) = distribution.first().cloned().unwrap_or_default();
    DomainOutput {
        label,
        confidence,
        distribution,
    }
}

/// Counts a pass of `len` tokens (special tokens excluded) in `tokens` when it was run,
/// or in `cached` when the cache answered it.
fn count_pass(source: Source, len: usize, tokens: &mut u32, cached: &mut u32) {
    match source {
        Source::Computed => *tokens += (len + 2) as u32,
        Source::Cached => *cached += 1,
        Source::Repeated => {}
    }
}

/// Most encoder jobs per request for the filter's flagged sentences (each sentence in full,
/// in its readings, and its pieces; see [`windows::flagged_pieces`]).
pub(super) const MAX_FLAGGED_JOBS: usize = 2 * MAX_FLAGGED_SENTENCES;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_names_parse() {
        assert_eq!(SignalSet::parse::<&str>(&[]).unwrap(), SignalSet::ALL);
        let s = SignalSet::parse(&["pii"]).unwrap();
        assert!(s.pii && !s.domain && !s.jailbreak);
        let e = SignalSet::parse(&["domian"]).unwrap_err();
        assert_eq!(e, UnknownSignal("domian".into()));
        assert!(e.to_string().contains("\"domian\""));
    }
}
