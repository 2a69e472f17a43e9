//! The classification engine: runs every requested signal for a batch of
//! requests, sharing one encoder pass between the domain and jailbreak heads
//! and batching windows across requests.

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;
use std::time::Instant;

use crate::cache::{CacheStats, ResultCache};
use crate::config::{DaemonConfig, LimitsConfig, PiiConfig, SequenceSignalConfig};
use crate::confusable::{ascii_forms, latin_reading};
use crate::encoded::encoded_reading;
use crate::invisible::{blank_invisible, spaced_readings};
use crate::models::encoder::{l2_normalize, SentenceEncoder};
use crate::models::head::{softmax, LinearHead};
use crate::models::hf_dir::HfClassifier;
use crate::models::windows::{plan_windows, TokenizedText, WindowTokenizer};
use crate::models::ModelError;
use crate::passes::{run_cached, run_sorted, Passes, Source};
use crate::pii::{self, bio, Entity};
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
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        if names.is_empty() {
            return Ok(Self::ALL);
        }
        let mut set = SignalSet::default();
        for n in names {
            match n.as_ref().trim() {
                "domain" => set.domain = true,
                "jailbreak" => set.jailbreak = true,
                "pii" => set.pii = true,
                other => {
                    return Err(format!(
                        "unknown signal {other:?}: expected domain, jailbreak or pii"
                    ))
                }
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
}

/// Most flagged sentences the jailbreak signal scores alone per text
/// ([`ClassifyInput::flagged_sentences`]); the filter sends no more than this either.
pub const MAX_FLAGGED_SENTENCES: usize = 64;

/// Byte spans `(start, end)` as ranges of `text`, for [`ClassifyInput::flagged_sentences`].
/// Errors: a message naming the first span (`{field}[{i}]`) that is not a range of
/// character boundaries of `text`.
pub fn text_ranges(
    field: &str,
    spans: impl IntoIterator<Item = (usize, usize)>,
    text: &str,
) -> Result<Vec<Range<usize>>, String> {
    spans
        .into_iter()
        .enumerate()
        .map(|(i, (a, b))| {
            text.get(a..b).map(|_| a..b).ok_or_else(|| {
                format!(
                    "{field}[{i}] = {a}..{b} is not a range of character boundaries in a text of {} bytes",
                    text.len()
                )
            })
        })
        .collect()
}

impl ClassifyInput {
    /// The flagged sentences of `part` that the jailbreak signal scores alone: at most
    /// [`MAX_FLAGGED_SENTENCES`], non-empty, inside the text and on character boundaries
    /// (others are skipped; the server rejects them before they get here).
    fn flagged(&self, part: Part) -> impl Iterator<Item = (Range<usize>, &str)> {
        let (text, spans) = match part {
            Part::Text => (&self.text, &self.flagged_sentences),
            Part::ScanText => (&self.scan_text, &self.scan_flagged_sentences),
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

/// Jailbreak result.
#[derive(Debug, Clone)]
pub struct JailbreakOutput {
    /// Highest window probability.
    pub score: f32,
    /// Windows scored.
    pub windows: u32,
    /// Byte span of the riskiest window and the text it lies in.
    pub window: (usize, usize, Part),
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

/// Names of the loaded models per signal.
#[derive(Debug, Clone, Default)]
pub struct ModelNames {
    /// (signal, model) pairs.
    pub entries: Vec<(&'static str, String)>,
}

/// Loaded models and limits. The sequence signals (domain and jailbreak, on the shared
/// encoder) and the PII signal own disjoint models, so one batch runs both side by side
/// (see [`Engine::classify_batch`]).
pub struct Engine {
    seq: SequenceSignals,
    pii: PiiSignal,
    /// Model names for responses.
    pub names: ModelNames,
}

/// The domain and jailbreak signals: the shared encoder with linear heads, or classifier
/// directories of their own.
struct SequenceSignals {
    encoder: Option<SentenceEncoder>,
    domain: SequenceModel,
    jailbreak: SequenceModel,
    jailbreak_positive: usize,
    limits: LimitsConfig,
    max_batch: usize,
    /// Pooled encoder embeddings `[hidden]` per exact window or sentence.
    cache: ResultCache,
}

/// The PII signal: the token classifier and the validated patterns.
struct PiiSignal {
    pii_model: Option<HfClassifier>,
    pii: PiiConfig,
    limits: LimitsConfig,
    max_batch: usize,
    /// Token-classifier logits `[tokens * labels]` per exact window.
    cache: ResultCache,
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
        let labels = match &jailbreak {
            SequenceModel::Head(h) => h.labels.clone(),
            SequenceModel::Classifier(c) => c.id2label.clone(),
        };
        let jailbreak_positive = labels
            .iter()
            .position(|l| l.eq_ignore_ascii_case(positive))
            .ok_or_else(|| ModelError::Invalid {
                path: "models.jailbreak".into(),
                message: format!("positive_label {positive:?} is not among labels {labels:?}"),
            })?;
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
        for (signal, model) in [("domain", &domain), ("jailbreak", &jailbreak)] {
            names.entries.push((
                signal,
                match model {
                    SequenceModel::Head(h) => format!("{enc_name}+{}@{}", h.name, h.version),
                    SequenceModel::Classifier(c) => c.name.clone(),
                },
            ));
        }
        names.entries.push((
            "pii",
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
                limits: config.limits.clone(),
                max_batch: config.batching.max_batch,
                cache: ResultCache::new(config.cache.encoder_bytes),
            },
            pii: PiiSignal {
                pii_model,
                pii: m.pii.clone(),
                limits: config.limits.clone(),
                max_batch: config.batching.max_batch,
                cache: ResultCache::new(config.cache.pii_bytes),
            },
            names,
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
    /// The PII model runs on a second thread while the encoder runs on this one, so a
    /// request's latency is the longer of the two passes, not their sum. A panic on
    /// either side is passed on to the caller.
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
        let (seq_result, pii_result) = if wants_pii && wants_seq {
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
        let concurrent = wants_pii && wants_seq;
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
}

impl SequenceSignals {
    fn run(
        &mut self,
        inputs: &[ClassifyInput],
        outputs: &mut [ClassifyOutput],
    ) -> Result<(), EngineError> {
        // Encoder jobs: windows of `text` (domain + jailbreak) and of
        // `scan_text` (jailbreak only), batched across requests.
        // For the jailbreak also their invisible-character variants (see
        // `crate::invisible`).
        struct Job {
            req: usize,
            part: Part,
            span: (usize, usize),
            ids: Vec<u32>,
            /// A variant scored for the jailbreak only.
            jailbreak_only: bool,
            /// A window starting at a flagged sentence ([`anchored_windows`]): the text as
            /// written, scored for the jailbreak only.
            anchored: bool,
            /// Index of the tokenized text in `toks`, and the window's token range in it.
            tok: usize,
            range: Range<usize>,
        }
        let content = self.limits.max_seq_len - 2;
        let overlap = self.limits.window_overlap;
        let max_windows = self.limits.max_windows;
        let uses_head = matches!(self.domain, SequenceModel::Head(_))
            || matches!(self.jailbreak, SequenceModel::Head(_));
        if let Some(encoder) = self.encoder.as_mut().filter(|_| uses_head) {
            let t0 = Instant::now();
            let mut jobs = Vec::new();
            // Tokenized texts and the text tokenized (the input, or one of its readings,
            // which has the input's length and offsets), by `Job::tok`.
            let mut toks: Vec<(TokenizedText, Cow<'_, str>)> = Vec::new();
            for (req, input) in inputs.iter().enumerate() {
                let want_domain =
                    input.signals.domain && matches!(self.domain, SequenceModel::Head(_));
                let want_jb =
                    input.signals.jailbreak && matches!(self.jailbreak, SequenceModel::Head(_));
                let text_tok = encoder.tokenizer.tokenize(&input.text)?;
                outputs[req].input_tokens = text_tok.ids.len() as u32;
                let mut parts: Vec<(Part, Cow<'_, str>, TokenizedText, bool)> = Vec::new();
                if want_domain || want_jb {
                    parts.push((Part::Text, Cow::Borrowed(&input.text), text_tok, false));
                }
                if want_jb && !input.scan_text.is_empty() {
                    parts.push((
                        Part::ScanText,
                        Cow::Borrowed(&input.scan_text),
                        encoder.tokenizer.tokenize(&input.scan_text)?,
                        false,
                    ));
                }
                if want_jb {
                    for (part, text) in [
                        (Part::Text, &input.text),
                        (Part::ScanText, &input.scan_text),
                    ] {
                        for reading in jailbreak_readings(text, self.limits.max_readings) {
                            let tok = encoder.tokenizer.tokenize(&reading)?;
                            parts.push((part, Cow::Owned(reading), tok, true));
                        }
                    }
                }
                for (part, text, tok, jailbreak_only) in parts {
                    let plan = plan_windows(tok.ids.len(), content, overlap, max_windows);
                    outputs[req].truncated |= plan.truncated;
                    let anchored = if want_jb && !jailbreak_only {
                        let starts: Vec<usize> =
                            input.flagged(part).map(|(r, _)| r.start).collect();
                        anchored_windows(
                            &tok,
                            &starts,
                            content,
                            &plan.windows,
                            self.limits.anchored_windows,
                        )
                    } else {
                        Vec::new()
                    };
                    let windows = plan.windows.into_iter().map(|w| (w, false));
                    for (w, anchored) in windows.chain(anchored.into_iter().map(|w| (w, true))) {
                        jobs.push(Job {
                            req,
                            part,
                            span: byte_span(&tok, w.clone(), text.len()),
                            ids: tok.ids[w.clone()].to_vec(),
                            jailbreak_only,
                            anchored,
                            tok: toks.len(),
                            range: w,
                        });
                    }
                    toks.push((tok, text));
                }
            }
            let tokenize_us = t0.elapsed().as_micros() as u64;
            let t1 = Instant::now();
            let seqs: Vec<&[u32]> = jobs.iter().map(|j| j.ids.as_slice()).collect();
            let passes = embed_all(encoder, &mut self.cache, &seqs, self.max_batch)?;
            for (job, &source) in jobs.iter().zip(&passes.sources) {
                let o = &mut outputs[job.req];
                count_pass(
                    source,
                    job.ids.len(),
                    &mut o.encoder_tokens,
                    &mut o.cached_passes,
                );
            }
            let embeddings = passes.rows;
            let inference_us = t1.elapsed().as_micros() as u64;
            let t2 = Instant::now();
            let hidden = encoder.hidden;
            let mut domain_sum: Vec<(Vec<f32>, f32)> =
                inputs.iter().map(|_| (vec![0f32; hidden], 0.0)).collect();
            // Per request: the job of its best jailbreak window; per job: its jailbreak score.
            let mut best: Vec<Option<usize>> = vec![None; inputs.len()];
            let mut job_score: Vec<f32> = vec![f32::NAN; jobs.len()];
            for (j, (job, emb)) in jobs.iter().zip(&embeddings).enumerate() {
                let input = &inputs[job.req];
                if job.part == Part::Text
                    && !job.jailbreak_only
                    && !job.anchored
                    && input.signals.domain
                {
                    let w = (job.ids.len() + 2) as f32;
                    let (sum, total) = &mut domain_sum[job.req];
                    sum.iter_mut().zip(emb).for_each(|(s, v)| *s += v * w);
                    *total += w;
                }
                if input.signals.jailbreak {
                    if let SequenceModel::Head(h) = &self.jailbreak {
                        let score = head_score(h, emb.clone(), self.jailbreak_positive);
                        if let Some(x) = job_score.get_mut(j) {
                            *x = score;
                        }
                        let out = outputs[job.req].jailbreak.get_or_insert(JailbreakOutput {
                            score: -1.0,
                            windows: 0,
                            window: (0, 0, Part::Text),
                        });
                        out.windows += 1;
                        if score > out.score {
                            out.score = score;
                            out.window = (job.span.0, job.span.1, job.part);
                            best[job.req] = Some(j);
                        }
                    }
                }
            }
            // The sentences of each request's suspicious windows (`windows_to_refine`), each
            // alone: one more encoder pass, for those only.
            struct SentenceJob {
                req: usize,
                part: Part,
                span: (usize, usize),
                ids: Vec<u32>,
            }
            // Per request: its windows already score at least `jailbreak_refine_below`, so
            // the passes below, which can only raise the maximum, cannot change its decision.
            let refine_below = self.limits.jailbreak_refine_below;
            let decided: Vec<bool> = outputs
                .iter()
                .map(|o| {
                    o.jailbreak
                        .as_ref()
                        .is_some_and(|j| j.score >= refine_below)
                })
                .collect();
            let mut sentence_jobs: Vec<SentenceJob> = Vec::new();
            if let SequenceModel::Head(_) = &self.jailbreak {
                let from = self.limits.jailbreak_sentences_from;
                // Per request: (job, score, holds a flagged sentence) of its windows.
                let mut windows: Vec<Vec<(usize, f32, bool)>> = vec![Vec::new(); inputs.len()];
                for (j, job) in jobs.iter().enumerate() {
                    let Some(&score) = job_score.get(j).filter(|s| !s.is_nan()) else {
                        continue;
                    };
                    let holds_flagged = !job.jailbreak_only
                        && inputs[job.req]
                            .flagged_within(job.part, job.span)
                            .next()
                            .is_some();
                    windows[job.req].push((j, score, holds_flagged));
                }
                let refine: Vec<Vec<usize>> = windows
                    .iter()
                    .zip(&best)
                    .enumerate()
                    .map(|(req, (w, &b))| {
                        if decided[req] {
                            Vec::new()
                        } else {
                            windows_to_refine(b, w, from)
                        }
                    })
                    .collect();
                let mut seen: HashSet<(usize, Part, (usize, usize))> = HashSet::new();
                for (req, windows) in refine.iter().enumerate() {
                    for &j in windows {
                        let Some(job) = jobs.get(j) else {
                            continue;
                        };
                        let Some((tok, text)) = toks.get(job.tok) else {
                            continue;
                        };
                        // A window holding flagged sentences gives the sentences nearest
                        // them; any other its first ones.
                        let flagged: Vec<Range<usize>> = if job.jailbreak_only {
                            Vec::new()
                        } else {
                            inputs[req].flagged_within(job.part, job.span).collect()
                        };
                        // (token range, byte span) of each sentence of at least MIN_SENTENCE_WORDS words.
                        let mut sentences: Vec<(Range<usize>, (usize, usize))> =
                            window_sentences(tok, text, job.range.clone(), usize::MAX, content)
                                .into_iter()
                                .map(|r| {
                                    let span = byte_span(tok, r.clone(), text.len());
                                    (r, span)
                                })
                                .filter(|(_, (a, b))| {
                                    text.get(*a..*b).map_or(0, words) >= MIN_SENTENCE_WORDS
                                })
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
                        for (r, span) in sentences {
                            if !seen.insert((req, job.part, span)) {
                                continue;
                            }
                            sentence_jobs.push(SentenceJob {
                                req,
                                part: job.part,
                                span,
                                ids: tok.ids[r].to_vec(),
                            });
                        }
                    }
                }
            }
            // The filter's flagged sentences, each alone, whatever the windows scored: as
            // written and in their other readings, each in full and, where the daemon's own
            // rule finds several sentences or clauses in it, each of those too (see
            // `flagged_pieces`); at most MAX_FLAGGED_JOBS per request, and not again where
            // the pass above already has the same span.
            let passed: HashSet<(usize, Part, (usize, usize))> = sentence_jobs
                .iter()
                .map(|g| (g.req, g.part, g.span))
                .collect();
            for (req, input) in inputs.iter().enumerate() {
                if !(input.signals.jailbreak && matches!(self.jailbreak, SequenceModel::Head(_)))
                    || decided[req]
                {
                    continue;
                }
                // (tier, job): first each sentence's first window as written, then its
                // readings' first windows and its pieces, then the readings' pieces; so that
                // many long or encoded decoys cannot crowd out a later sentence.
                let mut candidates: Vec<(u8, SentenceJob)> = Vec::new();
                for part in [Part::Text, Part::ScanText] {
                    for (r, sentence) in input.flagged(part) {
                        let variants = flagged_variants(sentence, self.limits.max_readings);
                        for (v, variant) in variants.iter().enumerate() {
                            let tok = encoder.tokenizer.tokenize(variant)?;
                            let pieces = flagged_pieces(&tok, variant, content, overlap);
                            for (k, piece) in pieces.into_iter().enumerate() {
                                let (a, b) = byte_span(&tok, piece.clone(), variant.len());
                                let span = (r.start + a, r.start + b);
                                if passed.contains(&(req, part, span)) {
                                    continue;
                                }
                                let tier = u8::from(v > 0) + u8::from(k > 0);
                                candidates.push((
                                    tier,
                                    SentenceJob {
                                        req,
                                        part,
                                        span,
                                        ids: tok.ids[piece].to_vec(),
                                    },
                                ));
                            }
                        }
                    }
                }
                candidates.sort_by_key(|(tier, _)| *tier);
                sentence_jobs.extend(
                    candidates
                        .into_iter()
                        .take(MAX_FLAGGED_JOBS)
                        .map(|(_, job)| job),
                );
            }
            // Encoder time of the sentence pass, counted as inference, not postprocessing.
            let mut refine_us = 0u64;
            if !sentence_jobs.is_empty() {
                let t3 = Instant::now();
                let seqs: Vec<&[u32]> = sentence_jobs.iter().map(|g| g.ids.as_slice()).collect();
                let passes = embed_all(encoder, &mut self.cache, &seqs, self.max_batch)?;
                for (g, &source) in sentence_jobs.iter().zip(&passes.sources) {
                    let o = &mut outputs[g.req];
                    count_pass(
                        source,
                        g.ids.len(),
                        &mut o.encoder_tokens,
                        &mut o.cached_passes,
                    );
                }
                let embeddings = passes.rows;
                if let SequenceModel::Head(h) = &self.jailbreak {
                    for (g, emb) in sentence_jobs.iter().zip(embeddings) {
                        let score = head_score(h, emb, self.jailbreak_positive);
                        if let Some(out) = outputs[g.req].jailbreak.as_mut() {
                            out.windows += 1;
                            if score > out.score {
                                out.score = score;
                                out.window = (g.span.0, g.span.1, g.part);
                            }
                        }
                    }
                }
                refine_us = t3.elapsed().as_micros() as u64;
                for o in outputs.iter_mut() {
                    o.timings.inference_us += refine_us;
                }
            }
            if let SequenceModel::Head(h) = &self.domain {
                for (req, (sum, total)) in domain_sum.into_iter().enumerate() {
                    if inputs[req].signals.domain && total > 0.0 {
                        let mean: Vec<f32> = sum.iter().map(|v| v / total).collect();
                        outputs[req].domain =
                            Some(domain_output(&h.labels, h.probabilities(&mean)));
                    }
                }
            }
            let postprocess_us = (t2.elapsed().as_micros() as u64).saturating_sub(refine_us);
            for o in outputs.iter_mut() {
                o.timings.tokenize_us += tokenize_us / inputs.len().max(1) as u64;
                o.timings.inference_us += inference_us;
                o.timings.postprocess_us += postprocess_us / inputs.len().max(1) as u64;
            }
        }
        // Classifier directories: each runs its own tokenizer and windows.
        let positive = self.jailbreak_positive;
        for (is_domain, model) in [(true, &mut self.domain), (false, &mut self.jailbreak)] {
            let SequenceModel::Classifier(c) = model else {
                continue;
            };
            for (req, input) in inputs.iter().enumerate() {
                let wanted = if is_domain {
                    input.signals.domain
                } else {
                    input.signals.jailbreak
                };
                if !wanted {
                    continue;
                }
                let t0 = Instant::now();
                let mut texts: Vec<ScoredText<'_>> = if is_domain || input.scan_text.is_empty() {
                    vec![(Part::Text, 0, Cow::Borrowed(input.text.as_str()))]
                } else {
                    vec![
                        (Part::Text, 0, Cow::Borrowed(input.text.as_str())),
                        (Part::ScanText, 0, Cow::Borrowed(input.scan_text.as_str())),
                    ]
                };
                if !is_domain {
                    // The jailbreak also scores each text's other readings (invisible
                    // characters as spaces, look-alike letters as Latin, encoded payloads
                    // decoded; offsets unchanged), where there are any, and the filter's
                    // flagged sentences alone.
                    let max = self.limits.max_readings;
                    let spaced: Vec<ScoredText<'_>> = texts
                        .iter()
                        .flat_map(|(part, _, t)| {
                            jailbreak_readings(t, max)
                                .into_iter()
                                .map(|s| (*part, 0, Cow::Owned(s)))
                        })
                        .collect();
                    texts.extend(spaced);
                    // The flagged sentences as written first, then their readings and
                    // pieces, at most MAX_FLAGGED_JOBS texts in all.
                    let mut extra: Vec<(u8, ScoredText<'_>)> = Vec::new();
                    for part in [Part::Text, Part::ScanText] {
                        for (r, sentence) in input.flagged(part) {
                            for (v, variant) in
                                flagged_variants(sentence, max).into_iter().enumerate()
                            {
                                let tok = c.tokenizer.tokenize(&variant)?;
                                let n = tok.ids.len();
                                let mut pieces = flagged_pieces(&tok, &variant, n, 0);
                                // The whole sentence is windowed below like any text.
                                pieces.retain(|p| p.len() < n);
                                for p in pieces {
                                    let (a, b) = byte_span(&tok, p, variant.len());
                                    if let Some(t) = variant.get(a..b) {
                                        let t = Cow::Owned(t.to_string());
                                        extra.push((1 + u8::from(v > 0), (part, r.start + a, t)));
                                    }
                                }
                                extra.push((u8::from(v > 0), (part, r.start, variant)));
                            }
                        }
                    }
                    extra.sort_by_key(|(tier, _)| *tier);
                    texts.extend(extra.into_iter().take(MAX_FLAGGED_JOBS).map(|(_, t)| t));
                }
                let content = c
                    .max_positions
                    .min(self.limits.max_seq_len)
                    .saturating_sub(2)
                    .max(1);
                let mut probs_sum = vec![0f32; c.id2label.len()];
                let mut best: Option<JailbreakOutput> = None;
                let mut windows = 0u32;
                for (part, base, text) in &texts {
                    let (part, base, text) = (*part, *base, text.as_ref());
                    let tok = c.tokenizer.tokenize(text)?;
                    let plan = plan_windows(tok.ids.len(), content, overlap, max_windows);
                    outputs[req].truncated |= plan.truncated;
                    let seqs: Vec<&[u32]> =
                        plan.windows.iter().map(|w| &tok.ids[w.clone()]).collect();
                    outputs[req].encoder_tokens +=
                        seqs.iter().map(|q| q.len() as u32 + 2).sum::<u32>();
                    let logits = run_sorted(&seqs, self.max_batch, |b| {
                        let l = c.logits(b)?;
                        Ok(l.outer_iter()
                            .map(|r| r.iter().copied().collect::<Vec<f32>>())
                            .collect())
                    })?;
                    for (w, l) in plan.windows.iter().zip(logits) {
                        let p = softmax(&l);
                        windows += 1;
                        probs_sum.iter_mut().zip(&p).for_each(|(s, v)| *s += v);
                        let score = p.get(positive).copied().unwrap_or(0.0);
                        if best.as_ref().is_none_or(|b| score > b.score) {
                            let span = byte_span(&tok, w.clone(), text.len());
                            best = Some(JailbreakOutput {
                                score,
                                windows: 0,
                                window: (base + span.0, base + span.1, part),
                            });
                        }
                    }
                }
                if is_domain {
                    let n = windows.max(1) as f32;
                    let mean: Vec<f32> = probs_sum.iter().map(|v| v / n).collect();
                    outputs[req].domain = Some(domain_output(&c.id2label, mean));
                } else if let Some(mut b) = best {
                    b.windows = windows;
                    outputs[req].jailbreak = Some(b);
                }
                outputs[req].timings.inference_us += t0.elapsed().as_micros() as u64;
            }
        }
        Ok(())
    }
}

impl PiiSignal {
    fn run(
        &mut self,
        inputs: &[ClassifyInput],
        outputs: &mut [ClassifyOutput],
    ) -> Result<(), EngineError> {
        let t0 = Instant::now();
        // Model entities, windows batched across requests.
        let mut model_entities: Vec<Vec<PiiOutput>> = inputs.iter().map(|_| Vec::new()).collect();
        if let Some(model) = self.pii_model.as_mut() {
            struct Doc<'a> {
                req: usize,
                part: Part,
                text: &'a str,
                tok: TokenizedText,
                windows: Vec<Range<usize>>,
            }
            let content = model
                .max_positions
                .min(self.limits.max_seq_len)
                .saturating_sub(2)
                .max(1);
            let mut docs = Vec::new();
            for (req, input) in inputs.iter().enumerate() {
                if !input.signals.pii {
                    continue;
                }
                for (part, text) in [
                    (Part::Text, input.text.as_str()),
                    (Part::ScanText, input.scan_text.as_str()),
                ] {
                    if text.is_empty() {
                        continue;
                    }
                    let tok = model.tokenizer.tokenize(text)?;
                    let plan = plan_windows(
                        tok.ids.len(),
                        content,
                        self.limits.window_overlap,
                        self.limits.max_windows,
                    );
                    outputs[req].truncated |= plan.truncated;
                    docs.push(Doc {
                        req,
                        part,
                        text,
                        tok,
                        windows: plan.windows,
                    });
                }
            }
            let tokenize_us = t0.elapsed().as_micros() as u64;
            let seqs: Vec<&[u32]> = docs
                .iter()
                .flat_map(|d| d.windows.iter().map(|w| &d.tok.ids[w.clone()]))
                .collect();
            let t1 = Instant::now();
            let n_labels = model.id2label.len();
            let passes = run_cached(&mut self.cache, &seqs, self.max_batch, |b| {
                let l = model.logits(b)?;
                let mut rows = Vec::with_capacity(b.len());
                for (i, seq) in b.iter().enumerate() {
                    // Skip CLS; keep one row of labels per content token.
                    let mut r = Vec::with_capacity(seq.len() * n_labels);
                    for t in 0..seq.len() {
                        for k in 0..n_labels {
                            r.push(l[[i, t + 1, k]]);
                        }
                    }
                    rows.push(r);
                }
                Ok(rows)
            })?;
            let inference_us = t1.elapsed().as_micros() as u64;
            let mut sources = passes.sources.iter();
            for d in &docs {
                let o = &mut outputs[d.req];
                for w in &d.windows {
                    if let Some(&source) = sources.next() {
                        count_pass(source, w.len(), &mut o.pii_tokens, &mut o.cached_passes);
                    }
                }
            }
            let mut it = passes.rows.into_iter();
            for d in &docs {
                // Per token: the label from the window where it sits farthest
                // from an edge (most context on both sides).
                let n = d.tok.ids.len();
                let mut best: Vec<(usize, usize, f32)> = vec![(usize::MAX, 0, 0.0); n]; // (edge distance as key, label, prob)
                let mut have = vec![false; n];
                for w in &d.windows {
                    let Some(rows) = it.next() else { break };
                    for (j, t) in w.clone().enumerate() {
                        let dist = (t - w.start).min(w.end - 1 - t);
                        let Some(row) = rows.get(j * n_labels..(j + 1) * n_labels) else {
                            continue;
                        };
                        if !have[t] || dist > best[t].0 {
                            let p = softmax(row);
                            let (k, pk) =
                                p.iter().enumerate().fold((0, f32::MIN), |acc, (k, &v)| {
                                    if v > acc.1 {
                                        (k, v)
                                    } else {
                                        acc
                                    }
                                });
                            best[t] = (dist, k, pk);
                            have[t] = true;
                        }
                    }
                }
                let labels: Vec<bio::TokenLabel<'_>> = (0..n)
                    .filter(|&t| have[t])
                    .map(|t| bio::TokenLabel {
                        span: d.tok.offsets[t],
                        label: model
                            .id2label
                            .get(best[t].1)
                            .map(String::as_str)
                            .unwrap_or("O"),
                        score: best[t].2,
                    })
                    .collect();
                let ents = bio::group_addresses(bio::decode(&labels, d.text), d.text);
                model_entities[d.req].extend(
                    ents.into_iter()
                        .filter(|e| e.score >= self.pii.min_score)
                        .filter(|e| !pii::in_machine_identifier(d.text, e.start, e.end))
                        .map(|entity| PiiOutput {
                            entity,
                            part: d.part,
                        }),
                );
            }
            for (req, o) in outputs.iter_mut().enumerate() {
                if inputs[req].signals.pii {
                    o.timings.tokenize_us += tokenize_us / inputs.len().max(1) as u64;
                    o.timings.inference_us += inference_us;
                }
            }
        }
        let t2 = Instant::now();
        for (req, input) in inputs.iter().enumerate() {
            if !input.signals.pii {
                continue;
            }
            let mut all = Vec::new();
            for (part, text) in [
                (Part::Text, input.text.as_str()),
                (Part::ScanText, input.scan_text.as_str()),
            ] {
                let mut ents: Vec<Entity> = model_entities[req]
                    .iter()
                    .filter(|e| e.part == part)
                    .map(|e| e.entity.clone())
                    .collect();
                if self.pii.patterns {
                    let blanked = blank_invisible(text);
                    ents.extend(pii::patterns::find(&blanked));
                    // Fullwidth forms, other scripts' digits and tag characters, read as
                    // ASCII (before the other invisible characters are blanked, which
                    // keeps every offset).
                    if let Some((folded, map)) = ascii_forms(text) {
                        let folded = blank_invisible(&folded);
                        ents.extend(pii::patterns::find(&folded).into_iter().filter_map(
                            |mut e| {
                                e.start = *map.get(e.start)?;
                                e.end = *map.get(e.end)?;
                                Some(e)
                            },
                        ));
                    }
                }
                all.extend(
                    pii::merge(ents)
                        .into_iter()
                        .map(|entity| PiiOutput { entity, part }),
                );
            }
            outputs[req].pii = Some(all);
            outputs[req].timings.postprocess_us += t2.elapsed().as_micros() as u64;
        }
        Ok(())
    }
}

/// Mean-pooled encoder embedding of each text (window embeddings averaged,
/// weighted by window tokens), exactly as the domain head sees it. Used to
/// train and evaluate heads. Shape: `[texts][hidden]`.
pub fn embed_texts(
    encoder: &mut SentenceEncoder,
    limits: &LimitsConfig,
    max_batch: usize,
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
    let embeddings = run_sorted(&seqs, max_batch, |b| {
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

/// Byte span of token range `w` (empty range: an empty span at 0).
/// Pooled encoder embeddings `[seqs][hidden]` of `seqs`, in their order, through the
/// result cache.
fn embed_all(
    encoder: &mut SentenceEncoder,
    cache: &mut ResultCache,
    seqs: &[&[u32]],
    max_batch: usize,
) -> Result<Passes, ModelError> {
    run_cached(cache, seqs, max_batch, |b| {
        encoder
            .embed(b)
            .map(|a| a.outer_iter().map(|r| r.to_vec()).collect())
    })
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

/// Probability of class `positive` under head `h` for a pooled embedding (normalised
/// here, as the heads were trained).
fn head_score(h: &LinearHead, mut embedding: Vec<f32>, positive: usize) -> f32 {
    l2_normalize(&mut embedding);
    h.probabilities(&embedding)
        .get(positive)
        .copied()
        .unwrap_or(0.0)
}

/// A text a classifier directory scores: its part, the offset of its first byte there,
/// and the text.
type ScoredText<'a> = (Part, usize, Cow<'a, str>);

/// Most encoder jobs per request for the filter's flagged sentences (each sentence in full,
/// in its readings, and its pieces; see [`flagged_pieces`]).
const MAX_FLAGGED_JOBS: usize = 2 * MAX_FLAGGED_SENTENCES;

/// A flagged sentence as written, then its other readings (at most `max_readings`; see
/// [`jailbreak_readings`]): an encoded payload or look-alike letters in a flagged sentence
/// are read alone, not only inside a window of the text around them.
fn flagged_variants(sentence: &str, max_readings: usize) -> Vec<Cow<'_, str>> {
    let mut out = vec![Cow::Borrowed(sentence)];
    out.extend(
        jailbreak_readings(sentence, max_readings)
            .into_iter()
            .map(Cow::Owned),
    );
    out
}

/// The token ranges of `tok` (a flagged sentence, `text`) to score alone: the sentence in
/// windows of at most `content` tokens (one window unless it is longer), then, when the
/// daemon's own rule splits it into several sentences or clauses, each of those (at most
/// [`MAX_WINDOW_SENTENCES`], cut to `content` tokens). The filter's segmenter keeps text
/// together that this rule splits (a stop followed by a lowercase word, `;` between
/// clauses, a run of `!`), and the prose after an injection in the same filter sentence
/// would dilute it again.
fn flagged_pieces(
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
fn anchored_windows(
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
fn windows_to_refine(best: Option<usize>, windows: &[(usize, f32, bool)], from: f32) -> Vec<usize> {
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

/// The readings of `text` the jailbreak signal scores besides the text as written, at most
/// `max` of them, each with the same length and byte offsets. Each comes from a base (the
/// text with every invisible character as spaces, the text as written, then the text with
/// each kind of invisible character alone as spaces: see [`spaced_readings`]) with its
/// look-alike letters folded ([`latin_reading`]) and its encoded payloads decoded
/// ([`encoded_reading`]), so that the tricks together are undone too; bases that read as
/// the text itself are left out. Empty for plain text.
fn jailbreak_readings(text: &str, max: usize) -> Vec<String> {
    if max == 0 {
        return Vec::new();
    }
    let mut spaced = spaced_readings(text).into_iter();
    let all_spaced = spaced.next();
    let bases = all_spaced
        .into_iter()
        .map(Cow::Owned)
        .chain(std::iter::once(Cow::Borrowed(text)))
        .chain(spaced.map(Cow::Owned));
    let mut readings: Vec<String> = Vec::new();
    for base in bases {
        let folded = latin_reading(&base).map_or(base, Cow::Owned);
        let read = encoded_reading(&folded).map_or(folded, Cow::Owned);
        if read != text && !readings.iter().any(|r| *r == *read) {
            readings.push(read.into_owned());
            if readings.len() == max {
                break;
            }
        }
    }
    readings
}

fn byte_span(tok: &TokenizedText, w: Range<usize>, text_len: usize) -> (usize, usize) {
    if w.is_empty() {
        return (0, 0);
    }
    let start = tok.offsets.get(w.start).map(|o| o.0).unwrap_or(0);
    let end = tok.offsets.get(w.end - 1).map(|o| o.1).unwrap_or(text_len);
    (start, end)
}

/// Tokenizer accessor for tools (token counting).
impl Engine {
    /// The encoder's tokenizer, when an encoder is loaded.
    pub fn encoder_tokenizer(&self) -> Option<&WindowTokenizer> {
        self.seq.encoder.as_ref().map(|e| &e.tokenizer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn signal_names_parse() {
        assert_eq!(SignalSet::parse::<&str>(&[]).unwrap(), SignalSet::ALL);
        let s = SignalSet::parse(&["pii"]).unwrap();
        assert!(s.pii && !s.domain && !s.jailbreak);
        let e = SignalSet::parse(&["domian"]).unwrap_err();
        assert!(e.contains("domian"));
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
