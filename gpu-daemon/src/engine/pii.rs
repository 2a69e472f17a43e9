//! The PII signal: the token classifier and the validated patterns.
//!
//! - **plan**: each requested text (`text`, `scan_text`) tokenised with the model's
//!   tokenizer and cut into windows ([`plan_windows`]), or, where the filter named the
//!   sentences with a personal-data cue (`pii_sentences`), only those sentences
//!   ([`span_windows`]); one [`Doc`] per text read.
//! - **run**: every window of the batch in one cached pass ([`run_cached`]): logits
//!   `[tokens * labels]` per window, CLS left out.
//! - **aggregate**: per token, the label from the window where it sits farthest from an
//!   edge; BIO labels decoded into entities ([`bio::decode`], [`bio::group_addresses`]);
//!   then the validated patterns, and the two merged ([`pii::merge`]), the pattern winning.

use std::ops::Range;
use std::time::Instant;

use super::windows::{plan_windows, span_windows};
use super::{
    count_pass, ClassifyInput, ClassifyOutput, EngineError, Part, PiiOutput, MAX_FLAGGED_SENTENCES,
};
use crate::cache::ResultCache;
use crate::config::{LimitsConfig, PiiConfig};
use crate::confusable::ascii_forms;
use crate::invisible::blank_invisible;
use crate::models::head::softmax;
use crate::models::hf_dir::HfClassifier;
use crate::models::tokenizer::TokenizedText;
use crate::models::ModelError;
use crate::passes::{run_cached, BatchLimits};
use crate::pii::{self, bio, Entity};

/// The PII signal: the token classifier and the validated patterns.
pub(super) struct PiiSignal {
    pub(super) pii_model: Option<HfClassifier>,
    pub(super) pii: PiiConfig,
    pub(super) limits: LimitsConfig,
    pub(super) batch: BatchLimits,
    /// Token-classifier logits `[tokens * labels]` per exact window.
    pub(super) cache: ResultCache,
}

/// One text the PII model reads: request `req`'s `part`, tokenised, with its windows.
struct Doc<'a> {
    req: usize,
    part: Part,
    text: &'a str,
    tok: TokenizedText,
    windows: Vec<Range<usize>>,
}

impl PiiSignal {
    /// Adds the PII entities of each request asking for them to `outputs`, with
    /// `truncated`, the PII tokens run, cache hits and timings.
    pub(super) fn run(
        &mut self,
        inputs: &[ClassifyInput],
        outputs: &mut [ClassifyOutput],
    ) -> Result<(), EngineError> {
        let t0 = Instant::now();
        // Model entities, windows batched across requests.
        let mut model_entities: Vec<Vec<PiiOutput>> = inputs.iter().map(|_| Vec::new()).collect();
        if let Some(model) = self.pii_model.as_mut() {
            let docs = plan(model, &self.limits, inputs, outputs)?;
            let tokenize_us = t0.elapsed().as_micros() as u64;
            let t1 = Instant::now();
            let rows = run(model, &mut self.cache, self.batch, &docs, outputs)?;
            let inference_us = t1.elapsed().as_micros() as u64;
            let mut rows = rows.into_iter();
            for d in &docs {
                model_entities[d.req].extend(
                    decode(model, d, &mut rows)
                        .into_iter()
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
                    ents.extend(pattern_entities(text));
                }
                all.extend(
                    pii::merge(ents)
                        .into_iter()
                        .map(|entity| PiiOutput { entity, part }),
                );
            }
            // Sentences compression left out: the validated patterns only.
            if self.pii.patterns && !input.pattern_text.is_empty() {
                all.extend(
                    pii::merge(pattern_entities(&input.pattern_text))
                        .into_iter()
                        .map(|entity| PiiOutput {
                            entity,
                            part: Part::PatternText,
                        }),
                );
            }
            outputs[req].pii = Some(all);
            outputs[req].timings.postprocess_us += t2.elapsed().as_micros() as u64;
        }
        Ok(())
    }
}

/// Plan: the texts of the requests asking for PII, each tokenised by `model` and cut into
/// windows of at most the model's positions (and `limits.max_seq_len`); marks `truncated`
/// in `outputs` where `limits.max_windows` did not cover a text.
fn plan<'a>(
    model: &HfClassifier,
    limits: &LimitsConfig,
    inputs: &'a [ClassifyInput],
    outputs: &mut [ClassifyOutput],
) -> Result<Vec<Doc<'a>>, EngineError> {
    let content = model
        .max_positions
        .min(limits.max_seq_len)
        .saturating_sub(2)
        .max(1);
    let mut docs = Vec::new();
    for (req, input) in inputs.iter().enumerate() {
        if !input.signals.pii || input.pii_patterns_only {
            continue;
        }
        // The sentences named by the filter, when it names any; else every text whole.
        let named = !input.pii_sentences.is_empty() || !input.scan_pii_sentences.is_empty();
        for (part, text, spans) in [
            (Part::Text, input.text.as_str(), &input.pii_sentences),
            (
                Part::ScanText,
                input.scan_text.as_str(),
                &input.scan_pii_sentences,
            ),
        ] {
            if text.is_empty() || (named && spans.is_empty()) {
                continue;
            }
            let tok = model.tokenizer.tokenize(text)?;
            let plan = if named {
                let spans = &spans[..spans.len().min(MAX_FLAGGED_SENTENCES)];
                span_windows(
                    &tok,
                    spans,
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
            docs.push(Doc {
                req,
                part,
                text,
                tok,
                windows: plan.windows,
            });
        }
    }
    Ok(docs)
}

/// Run: every window of `docs`, in order, through `model` (via the result cache): one row
/// of logits `[tokens * labels]` per window, a row of labels per content token (CLS left
/// out). Counts each pass in its request's `pii_tokens` or `cached_passes`.
fn run(
    model: &mut HfClassifier,
    cache: &mut ResultCache,
    batch: BatchLimits,
    docs: &[Doc<'_>],
    outputs: &mut [ClassifyOutput],
) -> Result<Vec<Vec<f32>>, ModelError> {
    let seqs: Vec<&[u32]> = docs
        .iter()
        .flat_map(|d| d.windows.iter().map(|w| &d.tok.ids[w.clone()]))
        .collect();
    let n_labels = model.id2label.len();
    let passes = run_cached(cache, &seqs, batch, |b| {
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
    let mut sources = passes.sources.iter();
    for d in docs {
        let o = &mut outputs[d.req];
        for w in &d.windows {
            if let Some(&source) = sources.next() {
                count_pass(source, w.len(), &mut o.pii_tokens, &mut o.cached_passes);
            }
        }
    }
    Ok(passes.rows)
}

/// Aggregate: the entities `model` finds in `d`, from the rows of its windows (taken from
/// `rows`, one per window, as [`run`] returns them). Per token: the label from the window
/// where it sits farthest from an edge (most context on both sides).
fn decode(
    model: &HfClassifier,
    d: &Doc<'_>,
    rows: &mut impl Iterator<Item = Vec<f32>>,
) -> Vec<Entity> {
    let n_labels = model.id2label.len();
    let n = d.tok.ids.len();
    let mut best: Vec<(usize, usize, f32)> = vec![(usize::MAX, 0, 0.0); n]; // (edge distance as key, label, prob)
    let mut have = vec![false; n];
    for w in &d.windows {
        let Some(rows) = rows.next() else { break };
        for (j, t) in w.clone().enumerate() {
            let dist = (t - w.start).min(w.end - 1 - t);
            let Some(row) = rows.get(j * n_labels..(j + 1) * n_labels) else {
                continue;
            };
            if !have[t] || dist > best[t].0 {
                let p = softmax(row);
                let (k, pk) =
                    p.iter().enumerate().fold(
                        (0, f32::MIN),
                        |acc, (k, &v)| {
                            if v > acc.1 {
                                (k, v)
                            } else {
                                acc
                            }
                        },
                    );
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
    bio::group_addresses(bio::decode(&labels, d.text), d.text)
}

/// The validated patterns' entities in `text`, spans into `text` as sent: found with the
/// invisible characters blanked, and again in its ASCII reading.
fn pattern_entities(text: &str) -> Vec<Entity> {
    let blanked = blank_invisible(text);
    let mut ents = pii::patterns::find(&blanked);
    // Fullwidth forms, other scripts' digits and tag characters, read as
    // ASCII (before the other invisible characters are blanked, which
    // keeps every offset).
    if let Some((folded, map)) = ascii_forms(text) {
        let folded = blank_invisible(&folded);
        ents.extend(
            pii::patterns::find(&folded)
                .into_iter()
                .filter_map(|mut e| {
                    e.start = *map.get(e.start)?;
                    e.end = *map.get(e.end)?;
                    Some(e)
                }),
        );
    }
    ents
}
