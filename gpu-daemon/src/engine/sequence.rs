//! The domain and jailbreak signals on the shared encoder with linear heads: two encoder
//! passes per batch, each planned, run and aggregated in turn ([`SequenceSignals::run`]).
//!
//! 1. **plan the windows** ([`plan_window_pass`]): per request, `text` (domain and
//!    jailbreak) and `scan_text` (jailbreak only) in windows of `limits.max_seq_len`
//!    tokens, their readings ([`jailbreak_readings`]) where they differ from the text
//!    ([`changed_windows`]) and the windows anchored at flagged sentences
//!    ([`anchored_windows`]), for the jailbreak only.
//! 2. **run** them through the encoder ([`run_pass`]), batched across requests, through
//!    the result cache: one pooled embedding `[hidden]` per window.
//! 3. **aggregate** ([`score_windows`]): the domain sum (window embeddings of `text`
//!    weighted by their tokens) and each window's jailbreak score, the best one kept.
//! 4. **plan the refinement** ([`plan_refinement`]), for requests whose best score is
//!    below `limits.jailbreak_refine_below` only: the sentences of the windows to refine
//!    ([`windows_to_refine`], [`sentences_to_score`]) and the filter's flagged sentences
//!    with their readings and pieces ([`flagged_sentence_jobs`]).
//! 5. **run** those ([`run_pass`]) and **aggregate** them ([`score_sentences`]): the highest
//!    jailbreak score counts; then the domain mean through the domain head
//!    ([`domain_outputs`]).
//!
//! Domain and jailbreak signals with classifier directories of their own run in
//! `super::classifier_dirs`.

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::Range;
use std::time::Instant;

use super::domain_ngrams::{domain_probabilities, DomainNgrams};
use super::jailbreak_ngrams::ngram_logit;
use super::jailbreak_score::SCORED_PARTS;
use super::readings::{flagged_variants, jailbreak_readings};
use super::windows::{
    anchored_windows, byte_span, changed_windows, flagged_pieces, plan_windows, sentences_to_score,
    windows_to_refine,
};
use super::{
    count_pass, domain_output, ClassifyInput, ClassifyOutput, EngineError, JailbreakOutput, Part,
    SequenceModel, MAX_FLAGGED_JOBS,
};
use crate::cache::ResultCache;
use crate::config::LimitsConfig;
use crate::models::encoder::{l2_normalize, SentenceEncoder};
use crate::models::head::LinearHead;
use crate::models::ngrams::NgramScorer;
use crate::models::tokenizer::{TokenizedText, WindowTokenizer};
use crate::models::ModelError;
use crate::passes::{run_cached, BatchLimits, Passes};

/// The domain and jailbreak signals: the shared encoder with linear heads, or classifier
/// directories of their own.
pub(super) struct SequenceSignals {
    pub(super) encoder: Option<SentenceEncoder>,
    pub(super) domain: SequenceModel,
    pub(super) jailbreak: SequenceModel,
    pub(super) jailbreak_positive: usize,
    /// Hashed n-gram model whose logit is added to the jailbreak score's log-odds.
    pub(super) jailbreak_ngrams: Option<NgramScorer>,
    /// Hashed n-gram model whose log-probabilities are added to the domain's.
    pub(super) domain_ngrams: Option<DomainNgrams>,
    pub(super) limits: LimitsConfig,
    pub(super) batch: BatchLimits,
    /// Pooled encoder embeddings `[hidden]` per exact window or sentence.
    pub(super) cache: ResultCache,
}

/// The linear heads in use: a signal with a classifier directory has none here.
struct Heads<'m> {
    domain: Option<&'m LinearHead>,
    jailbreak: Option<&'m LinearHead>,
    /// Index of the jailbreak head's positive label.
    positive: usize,
}

/// One encoder input: the token ids `ids` (no special tokens) of request `req`, lying at
/// byte span `span` of its text `part`.
struct EncoderJob {
    req: usize,
    part: Part,
    span: (usize, usize),
    ids: Vec<u32>,
}

/// A window of the first encoder pass.
struct Window {
    job: EncoderJob,
    /// A window of a reading ([`jailbreak_readings`]), scored for the jailbreak only.
    jailbreak_only: bool,
    /// A window starting at a flagged sentence ([`anchored_windows`]): the text as
    /// written, scored for the jailbreak only.
    anchored: bool,
    /// Index of the tokenized text in [`WindowPass::texts`], and the window's token range
    /// in it.
    tok: usize,
    range: Range<usize>,
}

/// The first encoder pass of a batch: the windows of every request's texts and readings.
struct WindowPass<'a> {
    windows: Vec<Window>,
    /// Tokenized texts and the text tokenized (the input, or one of its readings, which
    /// has the input's length and offsets), by [`Window::tok`].
    texts: Vec<(TokenizedText, Cow<'a, str>)>,
    /// Per request: the tokens of its `scan_text` (0 when it has none or it was not
    /// read).
    scan_tokens: Vec<u32>,
}

/// What the first pass gave, before the refinement.
struct WindowScores {
    /// Per request: the sum of its domain windows' embeddings `[hidden]`, each weighted by
    /// its tokens (special tokens included), and the sum of the weights.
    domain_sum: Vec<(Vec<f32>, f32)>,
    /// Per request: the window (index into [`WindowPass::windows`]) of its best jailbreak
    /// score.
    best: Vec<Option<usize>>,
    /// Per window: its jailbreak score (NaN when not scored).
    window_score: Vec<f32>,
}

impl SequenceSignals {
    /// Adds the domain and jailbreak results of each request asking for them to
    /// `outputs`, with `input_tokens`, `truncated`, the encoder tokens run, cache hits and
    /// timings.
    pub(super) fn run(
        &mut self,
        inputs: &[ClassifyInput],
        outputs: &mut [ClassifyOutput],
    ) -> Result<(), EngineError> {
        self.run_heads(inputs, outputs)?;
        // Classifier directories: each runs its own tokenizer and windows.
        self.run_classifier_dirs(inputs, outputs)?;
        self.add_ngram_logits(inputs, outputs);
        Ok(())
    }

    /// The signals on the shared encoder: plan, run and aggregate the windows, then the
    /// sentences to refine.
    fn run_heads(
        &mut self,
        inputs: &[ClassifyInput],
        outputs: &mut [ClassifyOutput],
    ) -> Result<(), EngineError> {
        let heads = Heads {
            domain: head(&self.domain),
            jailbreak: head(&self.jailbreak),
            positive: self.jailbreak_positive,
        };
        let uses_head = heads.domain.is_some() || heads.jailbreak.is_some();
        let Some(encoder) = self.encoder.as_mut().filter(|_| uses_head) else {
            return Ok(());
        };
        let limits = &self.limits;
        let t0 = Instant::now();
        let first = plan_window_pass(&encoder.tokenizer, &heads, limits, inputs, outputs)?;
        let tokenize_us = t0.elapsed().as_micros() as u64;
        let t1 = Instant::now();
        let jobs = first.windows.iter().map(|w| &w.job);
        let embeddings = run_pass(encoder, &mut self.cache, self.batch, jobs, outputs)?;
        let inference_us = t1.elapsed().as_micros() as u64;
        let t2 = Instant::now();
        let scores = score_windows(&first, &embeddings, &heads, encoder.hidden, inputs, outputs);
        // The n-gram model's logit, read now: the refinement's floor compares the score
        // with it (a window the encoder finds ambiguous may be plainly benign to both).
        if let Some(scorer) = &self.jailbreak_ngrams {
            for (input, out) in inputs.iter().zip(outputs.iter_mut()) {
                if let Some(j) = out.jailbreak.as_mut() {
                    j.read_ngrams(|part| {
                        Some(ngram_logit(scorer, input, part, limits.max_readings))
                    });
                }
            }
        }
        let sentences = plan_refinement(
            &encoder.tokenizer,
            &heads,
            limits,
            inputs,
            outputs,
            &first,
            &scores,
        )?;
        // Encoder time of the sentence pass, counted as inference, not postprocessing.
        let mut refine_us = 0u64;
        if !sentences.is_empty() {
            let t3 = Instant::now();
            let embeddings = run_pass(encoder, &mut self.cache, self.batch, &sentences, outputs)?;
            score_sentences(&sentences, embeddings, &heads, outputs);
            refine_us = t3.elapsed().as_micros() as u64;
            for o in outputs.iter_mut() {
                o.timings.inference_us += refine_us;
            }
        }
        let ngrams = self.domain_ngrams.as_ref();
        domain_outputs(scores.domain_sum, &heads, ngrams, inputs, outputs);
        let postprocess_us = (t2.elapsed().as_micros() as u64).saturating_sub(refine_us);
        for o in outputs.iter_mut() {
            o.timings.tokenize_us += tokenize_us / inputs.len().max(1) as u64;
            o.timings.inference_us += inference_us;
            o.timings.postprocess_us += postprocess_us / inputs.len().max(1) as u64;
        }
        Ok(())
    }
}

/// Tokens of context on each side of what a reading changed, in the windows that score it
/// (see [`changed_windows`]): a folded word is read in its sentence and the ones around it,
/// as a flagged sentence is; a text folded throughout is read whole.
const READING_CONTEXT_TOKENS: usize = 64;

/// The linear head of a signal, when it has one.
fn head(model: &SequenceModel) -> Option<&LinearHead> {
    match model {
        SequenceModel::Head(h) => Some(h),
        SequenceModel::Classifier(_) => None,
    }
}

/// Plan of the first pass: encoder jobs for the windows of `text` (domain + jailbreak) and
/// of `scan_text` (jailbreak only), batched across requests; for the jailbreak also the
/// windows of their readings (see [`jailbreak_readings`]) and the windows anchored at
/// flagged sentences. Sets `input_tokens` and `truncated` in `outputs`.
fn plan_window_pass<'a>(
    tokenizer: &WindowTokenizer,
    heads: &Heads<'_>,
    limits: &LimitsConfig,
    inputs: &'a [ClassifyInput],
    outputs: &mut [ClassifyOutput],
) -> Result<WindowPass<'a>, EngineError> {
    let content = limits.max_seq_len - 2;
    let mut pass = WindowPass {
        windows: Vec::new(),
        texts: Vec::new(),
        scan_tokens: vec![0; inputs.len()],
    };
    for (req, input) in inputs.iter().enumerate() {
        let want_domain = input.signals.domain && heads.domain.is_some();
        let want_jb = input.signals.jailbreak && heads.jailbreak.is_some();
        let text_tok = tokenizer.tokenize(&input.text)?;
        outputs[req].input_tokens = text_tok.ids.len() as u32;
        // (part, text, its tokens, a reading scored for the jailbreak only)
        let mut parts: Vec<(Part, Cow<'_, str>, TokenizedText, bool)> = Vec::new();
        if want_domain || want_jb {
            parts.push((Part::Text, Cow::Borrowed(&input.text), text_tok, false));
        }
        if want_jb && !input.scan_text.is_empty() {
            let tok = tokenizer.tokenize(&input.scan_text)?;
            pass.scan_tokens[req] = tok.ids.len() as u32;
            parts.push((Part::ScanText, Cow::Borrowed(&input.scan_text), tok, false));
        }
        if want_jb {
            for (part, text) in [
                (Part::Text, &input.text),
                (Part::ScanText, &input.scan_text),
            ] {
                for reading in jailbreak_readings(text, limits.max_readings) {
                    let tok = tokenizer.tokenize(&reading)?;
                    parts.push((part, Cow::Owned(reading), tok, true));
                }
            }
        }
        for (part, text, tok, jailbreak_only) in parts {
            let plan = if jailbreak_only {
                changed_windows(
                    &tok,
                    input.part_text(part),
                    &text,
                    READING_CONTEXT_TOKENS,
                    content,
                    limits.window_overlap,
                    limits.max_windows,
                )
            } else {
                plan_windows(
                    tok.ids.len(),
                    content,
                    limits.window_overlap,
                    limits.max_windows,
                )
            };
            outputs[req].truncated |= plan.truncated;
            let anchored = if want_jb && !jailbreak_only {
                let starts: Vec<usize> = input.flagged(part).map(|(r, _)| r.start).collect();
                anchored_windows(
                    &tok,
                    &starts,
                    content,
                    &plan.windows,
                    limits.anchored_windows,
                )
            } else {
                Vec::new()
            };
            let windows = plan.windows.into_iter().map(|w| (w, false));
            for (w, anchored) in windows.chain(anchored.into_iter().map(|w| (w, true))) {
                pass.windows.push(Window {
                    job: EncoderJob {
                        req,
                        part,
                        span: byte_span(&tok, w.clone(), text.len()),
                        ids: tok.ids[w.clone()].to_vec(),
                    },
                    jailbreak_only,
                    anchored,
                    tok: pass.texts.len(),
                    range: w,
                });
            }
            pass.texts.push((tok, text));
        }
    }
    Ok(pass)
}

/// Runs `jobs` through the encoder, in their order, through the result cache: pooled
/// embeddings `[jobs][hidden]`. Counts each pass in its request's `encoder_tokens` or
/// `cached_passes`.
fn run_pass<'j>(
    encoder: &mut SentenceEncoder,
    cache: &mut ResultCache,
    batch: BatchLimits,
    jobs: impl IntoIterator<Item = &'j EncoderJob>,
    outputs: &mut [ClassifyOutput],
) -> Result<Vec<Vec<f32>>, ModelError> {
    let jobs: Vec<&EncoderJob> = jobs.into_iter().collect();
    let seqs: Vec<&[u32]> = jobs.iter().map(|j| j.ids.as_slice()).collect();
    let passes = embed_all(encoder, cache, &seqs, batch)?;
    for (job, &source) in jobs.iter().zip(&passes.sources) {
        let o = &mut outputs[job.req];
        count_pass(
            source,
            job.ids.len(),
            &mut o.encoder_tokens,
            &mut o.cached_passes,
        );
    }
    Ok(passes.rows)
}

/// Aggregates the first pass (`embeddings`, one per window of `pass`): each request's
/// domain sum, and the jailbreak score of each window, the highest kept in `outputs`.
fn score_windows(
    pass: &WindowPass<'_>,
    embeddings: &[Vec<f32>],
    heads: &Heads<'_>,
    hidden: usize,
    inputs: &[ClassifyInput],
    outputs: &mut [ClassifyOutput],
) -> WindowScores {
    let mut scores = WindowScores {
        domain_sum: inputs.iter().map(|_| (vec![0f32; hidden], 0.0)).collect(),
        best: vec![None; inputs.len()],
        window_score: vec![f32::NAN; pass.windows.len()],
    };
    for (j, (window, emb)) in pass.windows.iter().zip(embeddings).enumerate() {
        let job = &window.job;
        let input = &inputs[job.req];
        if job.part == Part::Text
            && !window.jailbreak_only
            && !window.anchored
            && input.signals.domain
        {
            let w = (job.ids.len() + 2) as f32;
            let (sum, total) = &mut scores.domain_sum[job.req];
            sum.iter_mut().zip(emb).for_each(|(s, v)| *s += v * w);
            *total += w;
        }
        if input.signals.jailbreak {
            if let Some(h) = heads.jailbreak {
                let score = head_score(h, emb.clone(), heads.positive);
                if let Some(x) = scores.window_score.get_mut(j) {
                    *x = score;
                }
                let out = outputs[job.req]
                    .jailbreak
                    .get_or_insert_with(JailbreakOutput::empty);
                if out.record(job.part, job.span, score) {
                    scores.best[job.req] = Some(j);
                }
            }
        }
    }
    scores
}

/// Plan of the second pass: the sentences of each request's suspicious windows
/// ([`windows_to_refine`]), each alone, then the filter's flagged sentences
/// ([`flagged_sentence_jobs`]); none for a request whose windows already score at least
/// `limits.jailbreak_refine_below`, since these passes, which can only raise the maximum,
/// cannot change its decision.
fn plan_refinement(
    tokenizer: &WindowTokenizer,
    heads: &Heads<'_>,
    limits: &LimitsConfig,
    inputs: &[ClassifyInput],
    outputs: &[ClassifyOutput],
    first: &WindowPass<'_>,
    scores: &WindowScores,
) -> Result<Vec<EncoderJob>, EngineError> {
    let (from, below) = (limits.jailbreak_refine_from, limits.jailbreak_refine_below);
    // Decided by the windows (the encoder's score at `below` or above), or too plainly
    // benign for one sentence's pass to be worth its cost (the score with the n-gram
    // model's logit below `from`).
    let decided: Vec<bool> = outputs
        .iter()
        .map(|o| {
            o.jailbreak
                .as_ref()
                .is_some_and(|j| j.score >= below || j.combined() < from)
        })
        .collect();
    let mut jobs: Vec<EncoderJob> = Vec::new();
    if heads.jailbreak.is_some() {
        jobs = window_sentence_jobs(first, scores, inputs, &decided, limits);
    }
    // The filter's flagged sentences, not again where the pass above already has the same
    // span.
    let passed: HashSet<(usize, Part, (usize, usize))> =
        jobs.iter().map(|g| (g.req, g.part, g.span)).collect();
    for (req, input) in inputs.iter().enumerate() {
        if !(input.signals.jailbreak && heads.jailbreak.is_some()) || decided[req] {
            continue;
        }
        let parts: Vec<Part> = SCORED_PARTS
            .into_iter()
            .filter(|&part| {
                let own_tokens = match part {
                    Part::Text => outputs[req].input_tokens,
                    _ => first.scan_tokens.get(req).copied().unwrap_or(0),
                };
                flagged_alone_applies(input, part, own_tokens, limits)
            })
            .collect();
        jobs.extend(flagged_sentence_jobs(
            tokenizer, req, input, &parts, limits, &passed,
        )?);
    }
    Ok(jobs)
}

/// Whether the flagged sentences of `input`'s text `part` are scored alone: a text of at
/// most `limits.jailbreak_flagged_alone_max_tokens` before compression (the filter's
/// `original_tokens` for it; `own_tokens`, the text's own, where the filter did not say)
/// with at most `limits.jailbreak_flagged_alone_max_sentences` of them. Each text is
/// judged on its own length, as the limits were chosen on single texts: a short follow-up
/// after a long document does not open the document's sentences to the pass.
fn flagged_alone_applies(
    input: &ClassifyInput,
    part: Part,
    own_tokens: u32,
    limits: &LimitsConfig,
) -> bool {
    let original = match part {
        Part::Text => input.original_tokens,
        _ => input.scan_original_tokens,
    };
    let tokens = if original > 0 { original } else { own_tokens };
    let flagged = input.flagged(part).count();
    flagged > 0
        && tokens <= limits.jailbreak_flagged_alone_max_tokens
        && flagged <= limits.jailbreak_flagged_alone_max_sentences
}

/// The sentences of each undecided request's windows to refine ([`windows_to_refine`]),
/// each alone ([`sentences_to_score`]), each span once per request.
fn window_sentence_jobs(
    first: &WindowPass<'_>,
    scores: &WindowScores,
    inputs: &[ClassifyInput],
    decided: &[bool],
    limits: &LimitsConfig,
) -> Vec<EncoderJob> {
    let content = limits.max_seq_len - 2;
    let from = limits.jailbreak_sentences_from;
    // Per request: (window, score, holds a flagged sentence) of its windows.
    let mut windows: Vec<Vec<(usize, f32, bool)>> = vec![Vec::new(); inputs.len()];
    for (j, window) in first.windows.iter().enumerate() {
        let Some(&score) = scores.window_score.get(j).filter(|s| !s.is_nan()) else {
            continue;
        };
        let job = &window.job;
        let holds_flagged = !window.jailbreak_only
            && inputs[job.req]
                .flagged_within(job.part, job.span)
                .next()
                .is_some();
        windows[job.req].push((j, score, holds_flagged));
    }
    let refine: Vec<Vec<usize>> = windows
        .iter()
        .zip(&scores.best)
        .enumerate()
        .map(|(req, (w, &b))| {
            if decided[req] {
                Vec::new()
            } else {
                windows_to_refine(b, w, from)
            }
        })
        .collect();
    let mut jobs = Vec::new();
    let mut seen: HashSet<(usize, Part, (usize, usize))> = HashSet::new();
    for (req, windows) in refine.iter().enumerate() {
        for &j in windows {
            let Some(window) = first.windows.get(j) else {
                continue;
            };
            let Some((tok, text)) = first.texts.get(window.tok) else {
                continue;
            };
            let job = &window.job;
            let flagged: Vec<Range<usize>> = if window.jailbreak_only {
                Vec::new()
            } else {
                inputs[req].flagged_within(job.part, job.span).collect()
            };
            let sentences = sentences_to_score(tok, text, window.range.clone(), content, &flagged);
            for (r, span) in sentences {
                if !seen.insert((req, job.part, span)) {
                    continue;
                }
                jobs.push(EncoderJob {
                    req,
                    part: job.part,
                    span,
                    ids: tok.ids[r].to_vec(),
                });
            }
        }
    }
    jobs
}

/// The filter's flagged sentences of request `req` in its texts `parts`, each alone,
/// whatever the windows scored: as written and in their other readings ([`flagged_variants`]), each in full
/// and, where the daemon's own rule finds several sentences or clauses in it, each of
/// those too ([`flagged_pieces`]); at most [`MAX_FLAGGED_JOBS`], and none whose span is in
/// `passed` (already in the pass).
fn flagged_sentence_jobs(
    tokenizer: &WindowTokenizer,
    req: usize,
    input: &ClassifyInput,
    parts: &[Part],
    limits: &LimitsConfig,
    passed: &HashSet<(usize, Part, (usize, usize))>,
) -> Result<Vec<EncoderJob>, EngineError> {
    let content = limits.max_seq_len - 2;
    // (tier, job): first each sentence's first window as written, then its
    // readings' first windows and its pieces, then the readings' pieces; so that
    // many long or encoded decoys cannot crowd out a later sentence.
    let mut candidates: Vec<(u8, EncoderJob)> = Vec::new();
    for &part in parts {
        for (r, sentence) in input.flagged(part) {
            let variants = flagged_variants(sentence, limits.max_readings);
            for (v, variant) in variants.iter().enumerate() {
                let tok = tokenizer.tokenize(variant)?;
                let pieces = flagged_pieces(&tok, variant, content, limits.window_overlap);
                for (k, piece) in pieces.into_iter().enumerate() {
                    let (a, b) = byte_span(&tok, piece.clone(), variant.len());
                    let span = (r.start + a, r.start + b);
                    if passed.contains(&(req, part, span)) {
                        continue;
                    }
                    let tier = u8::from(v > 0) + u8::from(k > 0);
                    candidates.push((
                        tier,
                        EncoderJob {
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
    Ok(candidates
        .into_iter()
        .take(MAX_FLAGGED_JOBS)
        .map(|(_, job)| job)
        .collect())
}

/// Aggregates the second pass (`embeddings`, one per job): each sentence's jailbreak
/// score counts as one more window, the highest kept in `outputs`.
fn score_sentences(
    jobs: &[EncoderJob],
    embeddings: Vec<Vec<f32>>,
    heads: &Heads<'_>,
    outputs: &mut [ClassifyOutput],
) {
    let Some(h) = heads.jailbreak else {
        return;
    };
    for (g, emb) in jobs.iter().zip(embeddings) {
        let score = head_score(h, emb, heads.positive);
        if let Some(out) = outputs[g.req].jailbreak.as_mut() {
            out.record(g.part, g.span, score);
        }
    }
}

/// The domain of each request asking for it: the domain head on the weighted mean of its
/// window embeddings (`domain_sum`, see [`WindowScores::domain_sum`]), with the n-gram
/// model's reading where one is configured ([`domain_probabilities`]).
fn domain_outputs(
    domain_sum: Vec<(Vec<f32>, f32)>,
    heads: &Heads<'_>,
    ngrams: Option<&DomainNgrams>,
    inputs: &[ClassifyInput],
    outputs: &mut [ClassifyOutput],
) {
    let Some(h) = heads.domain else {
        return;
    };
    for (req, (sum, total)) in domain_sum.into_iter().enumerate() {
        if inputs[req].signals.domain && total > 0.0 {
            let mean: Vec<f32> = sum.iter().map(|v| v / total).collect();
            let probs = domain_probabilities(ngrams, &inputs[req].text, h.probabilities(&mean));
            outputs[req].domain = Some(domain_output(&h.labels, probs));
        }
    }
}

/// Pooled encoder embeddings `[seqs][hidden]` of `seqs`, in their order, through the
/// result cache.
fn embed_all(
    encoder: &mut SentenceEncoder,
    cache: &mut ResultCache,
    seqs: &[&[u32]],
    batch: BatchLimits,
) -> Result<Passes, ModelError> {
    run_cached(cache, seqs, batch, |b| {
        encoder
            .embed(b)
            .map(|a| a.outer_iter().map(|r| r.to_vec()).collect())
    })
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
