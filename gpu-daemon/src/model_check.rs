//! `semroute-daemon model check`: compares a candidate ONNX graph (a prepared,
//! fused or quantized model) with a reference graph on a file of texts.
//!
//! Both graphs run through [`crate::runtime::build_session`], so graphs with
//! the fused attention op (`com.semroute::FlashAttention`) load. Each text is
//! tokenised once ([`WindowTokenizer`], wrapped in CLS ... SEP, cut to the
//! model's length) and fed to both graphs as a batch of one.
//!
//! - [`CheckKind::Embedding`]: the first output is `[batch, seq, hidden]`;
//!   each text's embedding is the mean over all attended positions, CLS and
//!   SEP included (as the daemon's sentence encoder pools); reported: the
//!   cosine of reference and candidate, min and mean over the texts. Short
//!   texts move most under int8 weights and activations (few tokens to
//!   average the error out), so the smallest cosine and the mean have
//!   separate thresholds.
//! - [`CheckKind::TokenClassification`]: the first output is
//!   `[batch, seq, labels]`; over the text tokens (not CLS/SEP): the share
//!   whose argmax label agrees, the same over the tokens either graph labels
//!   as something other than the background label (the reference's most
//!   frequent one, `O` for PII models: most tokens are background, so the
//!   overall share alone hides a model that misses entities), and the
//!   largest absolute logit difference.
//!
//! With `--padded-batches N` the candidate also runs on batches of `N`
//! consecutive texts, padded to the longest (the path a graph that branches on
//! padding takes only then), and each row is compared with the same text run
//! alone through the candidate: the cosine (embedding) or the argmax agreement
//! of the text tokens (token classification). A graph that attends to padding
//! scores a cosine of 0.1-0.35 here.
//!
//! The check fails (each failure named in [`CheckReport::failures`]) when the
//! smallest or mean cosine or either agreement is below its threshold, or when
//! an output holds a non-finite value.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use ort::session::Session;
use ort::value::Tensor;
use serde::Serialize;

use crate::config::RuntimeConfig;
use crate::models::tokenizer::WindowTokenizer;
use crate::runtime;

/// What the compared graphs compute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum CheckKind {
    /// Sentence encoder: `last_hidden_state`, compared after mean pooling.
    Embedding,
    /// Token classifier: per-token logits, compared by argmax label.
    TokenClassification,
}

/// Settings of [`run_check`], also the command line of `semroute-daemon model check`.
#[derive(Debug, Clone, clap::Args)]
pub struct CheckOptions {
    /// What the graphs compute.
    #[arg(long, value_enum)]
    pub kind: CheckKind,
    /// Reference ONNX graph.
    #[arg(long)]
    pub reference: PathBuf,
    /// Candidate ONNX graph.
    #[arg(long)]
    pub candidate: PathBuf,
    /// The model's `tokenizer.json`.
    #[arg(long)]
    pub tokenizer: PathBuf,
    /// Texts, one per line.
    #[arg(long, default_value = "models/check_texts.txt")]
    pub texts: PathBuf,
    /// Smallest accepted cosine of mean-pooled embeddings of any one text
    /// (embedding).
    #[arg(long, default_value_t = 0.97)]
    pub min_cosine: f64,
    /// Smallest accepted mean over the texts of that cosine (embedding).
    #[arg(long, default_value_t = 0.99)]
    pub min_mean_cosine: f64,
    /// Smallest accepted share of tokens with the same argmax label
    /// (token-classification).
    #[arg(long, default_value_t = 0.99)]
    pub min_argmax_agreement: f64,
    /// Smallest accepted share of the same argmax label over the tokens
    /// either graph labels as non-background (token-classification).
    #[arg(long, default_value_t = 0.95)]
    pub min_entity_agreement: f64,
    /// Longest input, special tokens included (longer texts are cut).
    #[arg(long, default_value_t = 512)]
    pub max_tokens: usize,
    /// Timed runs per graph at the longest text (0: no timing).
    #[arg(long, default_value_t = 5)]
    pub timing_runs: usize,
    /// Also time both graphs at these input lengths (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub time_lengths: Vec<usize>,
    /// Also run the candidate on padded batches of this many consecutive texts and
    /// compare each row with the text run alone (0: off).
    #[arg(long, default_value_t = 0)]
    pub padded_batches: usize,
    /// Smallest accepted agreement of a padded row with its text run alone: the
    /// cosine of any one row (embedding) or the share of text tokens with the same
    /// argmax label over all rows (token classification).
    #[arg(long, default_value_t = 0.98)]
    pub min_padded_agreement: f64,
}

/// Median milliseconds per forward of both graphs at one input length.
#[derive(Debug, Clone, Serialize)]
pub struct Timing {
    /// Input tokens, special tokens included.
    pub tokens: usize,
    /// Reference graph, ms per forward (median).
    pub reference_ms: f64,
    /// Candidate graph, ms per forward (median).
    pub candidate_ms: f64,
}

/// Result of [`run_check`].
#[derive(Debug, Clone, Serialize)]
pub struct CheckReport {
    /// What was compared.
    pub kind: CheckKind,
    /// Reference graph.
    pub reference: PathBuf,
    /// Candidate graph.
    pub candidate: PathBuf,
    /// Texts compared.
    pub texts: usize,
    /// Texts cut to `max_tokens`.
    pub truncated_texts: usize,
    /// Tokens fed to each graph, special tokens included, over all texts.
    pub tokens: usize,
    /// Embedding: smallest cosine over the texts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_cosine: Option<f64>,
    /// Embedding: mean cosine over the texts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_cosine: Option<f64>,
    /// Embedding: line number (1-based) of the text with the smallest cosine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub worst_line: Option<usize>,
    /// Token classification: share of text tokens whose argmax label agrees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argmax_agreement: Option<f64>,
    /// Token classification: text tokens whose label differs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argmax_disagreements: Option<usize>,
    /// Token classification: text tokens either graph labels as non-background.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entity_tokens: Option<usize>,
    /// Token classification: share of those tokens whose label agrees (1 when
    /// there are none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entity_agreement: Option<f64>,
    /// Token classification: largest `|candidate - reference|` over the logits of text tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_abs_logit_diff: Option<f64>,
    /// Padded batches: rows compared with their text run alone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub padded_rows: Option<usize>,
    /// Padded batches: smallest row cosine (embedding) or argmax agreement over the
    /// rows' text tokens (token classification).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub padded_agreement: Option<f64>,
    /// Thresholds applied.
    pub thresholds: Thresholds,
    /// Timing at the longest text, then at `time_lengths`.
    pub timings: Vec<Timing>,
    /// Why the check failed; empty when it passed.
    pub failures: Vec<String>,
    /// Whether every threshold was met.
    pub passed: bool,
}

/// Thresholds a [`CheckReport`] was judged by.
#[derive(Debug, Clone, Serialize)]
pub struct Thresholds {
    /// Smallest accepted cosine of any one text (embedding).
    pub min_cosine: f64,
    /// Smallest accepted mean cosine (embedding).
    pub min_mean_cosine: f64,
    /// Smallest accepted argmax agreement (token classification).
    pub min_argmax_agreement: f64,
    /// Smallest accepted agreement on non-background tokens (token classification).
    pub min_entity_agreement: f64,
    /// Smallest accepted agreement of padded rows with their texts run alone.
    pub min_padded_agreement: f64,
}

impl std::fmt::Display for CheckReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{} vs {}: {} texts, {} tokens ({} cut to the model length)",
            self.candidate.display(),
            self.reference.display(),
            self.texts,
            self.tokens,
            self.truncated_texts
        )?;
        if let (Some(min), Some(mean)) = (self.min_cosine, self.mean_cosine) {
            writeln!(
                f,
                "  cosine of mean-pooled embeddings: min {min:.6} (line {}; threshold {}), mean {mean:.6} (threshold {})",
                self.worst_line.unwrap_or(0),
                self.thresholds.min_cosine,
                self.thresholds.min_mean_cosine
            )?;
        }
        if let Some(a) = self.argmax_agreement {
            writeln!(
                f,
                "  argmax agreement: {:.4}% ({} of {} tokens differ; threshold {}%), max |logit diff| {:.3e}",
                a * 100.0,
                self.argmax_disagreements.unwrap_or(0),
                self.tokens.saturating_sub(2 * self.texts),
                self.thresholds.min_argmax_agreement * 100.0,
                self.max_abs_logit_diff.unwrap_or(f64::NAN)
            )?;
        }
        if let (Some(a), Some(n)) = (self.entity_agreement, self.entity_tokens) {
            writeln!(
                f,
                "  agreement on the {n} tokens labelled non-background by either graph: {:.4}% (threshold {}%)",
                a * 100.0,
                self.thresholds.min_entity_agreement * 100.0
            )?;
        }
        if let (Some(a), Some(n)) = (self.padded_agreement, self.padded_rows) {
            writeln!(
                f,
                "  padded batches: {n} rows against their texts alone, agreement {a:.6} (threshold {})",
                self.thresholds.min_padded_agreement
            )?;
        }
        for t in &self.timings {
            writeln!(
                f,
                "  {} tokens: reference {:.2} ms, candidate {:.2} ms per forward",
                t.tokens, t.reference_ms, t.candidate_ms
            )?;
        }
        if self.passed {
            write!(f, "  PASSED")
        } else {
            write!(f, "  FAILED: {}", self.failures.join("; "))
        }
    }
}

/// One loaded graph.
struct Graph {
    session: Session,
    path: PathBuf,
    token_type_ids: bool,
}

impl Graph {
    fn load(runtime: &RuntimeConfig, path: &Path) -> anyhow::Result<Self> {
        if !path.exists() {
            bail!("model {} not found", path.display());
        }
        let (session, _) = runtime::build_session(runtime, path)?;
        let token_type_ids = session
            .inputs()
            .iter()
            .any(|i| i.name() == "token_type_ids");
        Ok(Self {
            session,
            path: path.to_owned(),
            token_type_ids,
        })
    }

    /// First output of the graph for one sequence (special tokens included
    /// by `tokenizer`): `(dims, values)`.
    fn run(
        &mut self,
        tokenizer: &WindowTokenizer,
        content: &[u32],
    ) -> anyhow::Result<(Vec<usize>, Vec<f32>)> {
        self.run_batch(tokenizer, &[content])
    }

    /// First output of the graph for a batch of sequences padded to the longest:
    /// `(dims [batch, longest + 2, n], values)`.
    fn run_batch(
        &mut self,
        tokenizer: &WindowTokenizer,
        contents: &[&[u32]],
    ) -> anyhow::Result<(Vec<usize>, Vec<f32>)> {
        let [ids, mask, types] = tokenizer.batch_inputs(contents);
        let ctx = || format!("running {}", self.path.display());
        let mut inputs = ort::inputs![
            "input_ids" => Tensor::from_array(ids).with_context(ctx)?,
            "attention_mask" => Tensor::from_array(mask).with_context(ctx)?,
        ];
        if self.token_type_ids {
            inputs.push((
                "token_type_ids".into(),
                Tensor::from_array(types).with_context(ctx)?.into(),
            ));
        }
        let outputs = self.session.run(inputs).with_context(ctx)?;
        let (shape, data) = outputs[0].try_extract_tensor::<f32>().with_context(ctx)?;
        let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
        let width = contents.iter().map(|c| c.len()).max().unwrap_or(0) + 2;
        if dims.len() != 3 || dims[0] != contents.len() || dims[1] != width {
            bail!(
                "{}: first output has shape {dims:?}, expected [{}, {width}, n]",
                self.path.display(),
                contents.len()
            );
        }
        Ok((dims, data.to_vec()))
    }

    /// Median ms per forward over `runs` runs, after one warm-up run.
    fn time(
        &mut self,
        tokenizer: &WindowTokenizer,
        content: &[u32],
        runs: usize,
    ) -> anyhow::Result<f64> {
        self.run(tokenizer, content)?;
        let mut ms = Vec::with_capacity(runs.max(1));
        for _ in 0..runs.max(1) {
            let t = Instant::now();
            self.run(tokenizer, content)?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        ms.sort_by(f64::total_cmp);
        Ok(ms[ms.len() / 2])
    }
}

/// The texts of a check file: one per line, blank lines skipped. Returns
/// `(line number, text)`.
pub fn read_texts(path: &Path) -> anyhow::Result<Vec<(usize, String)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let texts: Vec<(usize, String)> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| (i + 1, l.to_string()))
        .collect();
    if texts.is_empty() {
        bail!("{} holds no text", path.display());
    }
    Ok(texts)
}

fn mean_pool(dims: &[usize], data: &[f32]) -> Vec<f64> {
    let (seq, hidden) = (dims[1], dims[2]);
    let mut acc = vec![0.0f64; hidden];
    for t in 0..seq {
        for (a, v) in acc.iter_mut().zip(&data[t * hidden..(t + 1) * hidden]) {
            *a += f64::from(*v);
        }
    }
    acc.iter_mut().for_each(|a| *a /= seq.max(1) as f64);
    acc
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f64>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f64>().sqrt();
    if na == 0.0 || nb == 0.0 {
        return if na == nb { 1.0 } else { 0.0 };
    }
    dot / (na * nb)
}

/// Whether a measured value fails its lower bound (NaN always does).
fn below(value: f64, bound: f64) -> bool {
    value.is_nan() || value < bound
}

/// The most frequent value (the smallest among ties; 0 for none).
fn most_frequent(values: impl Iterator<Item = usize>) -> usize {
    let mut counts = std::collections::BTreeMap::new();
    for v in values {
        *counts.entry(v).or_insert(0usize) += 1;
    }
    counts
        .iter()
        .fold(
            (0, 0),
            |(bv, bn), (&v, &n)| if n > bn { (v, n) } else { (bv, bn) },
        )
        .0
}

fn argmax(row: &[f32]) -> usize {
    row.iter()
        .enumerate()
        .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, &v)| {
            if v > bv {
                (i, v)
            } else {
                (bi, bv)
            }
        })
        .0
}

/// Runs both graphs on every text and judges the candidate (see the module
/// documentation). Errors only when a file cannot be read or a graph cannot
/// run; a failed comparison is a report with `passed == false`.
pub fn run_check(options: &CheckOptions, runtime: &RuntimeConfig) -> anyhow::Result<CheckReport> {
    let texts = read_texts(&options.texts)?;
    let tokenizer = WindowTokenizer::from_file(&options.tokenizer)?;
    let mut reference = Graph::load(runtime, &options.reference)?;
    let mut candidate = Graph::load(runtime, &options.candidate)?;
    let content_max = options.max_tokens.saturating_sub(2).max(1);

    let mut failures = Vec::new();
    let mut truncated = 0;
    let mut tokens = 0;
    let mut cosines: Vec<(usize, f64)> = Vec::new();
    let mut labels_found: Vec<(usize, usize)> = Vec::new();
    let mut max_diff = 0.0f64;
    let mut longest: Vec<u32> = Vec::new();
    let mut pool: Vec<u32> = Vec::new();
    // Each text's ids and the candidate's output for it alone, for the padded batches.
    let mut alone: Vec<(Vec<u32>, Vec<f32>)> = Vec::new();
    for (line, text) in &texts {
        let mut ids = tokenizer.tokenize(text)?.ids;
        if ids.len() > content_max {
            ids.truncate(content_max);
            truncated += 1;
        }
        tokens += ids.len() + 2;
        let (rd, r) = reference.run(&tokenizer, &ids)?;
        let (cd, c) = candidate.run(&tokenizer, &ids)?;
        if rd != cd {
            bail!(
                "line {line}: reference output shape {rd:?}, candidate {cd:?}: the graphs do not compute the same thing"
            );
        }
        if c.iter().any(|v| !v.is_finite()) {
            failures.push(format!(
                "line {line}: candidate output holds NaN or infinity"
            ));
        }
        match options.kind {
            CheckKind::Embedding => {
                cosines.push((*line, cosine(&mean_pool(&rd, &r), &mean_pool(&cd, &c))));
            }
            CheckKind::TokenClassification => {
                let labels = rd[2];
                // Text tokens only: CLS (position 0) and SEP (last) carry no label.
                for t in 1..rd[1] - 1 {
                    let (rr, cr) = (
                        &r[t * labels..(t + 1) * labels],
                        &c[t * labels..(t + 1) * labels],
                    );
                    labels_found.push((argmax(rr), argmax(cr)));
                    for (a, b) in rr.iter().zip(cr) {
                        max_diff = max_diff.max(f64::from((a - b).abs()));
                    }
                }
            }
        }
        if ids.len() > longest.len() {
            longest = ids.clone();
        }
        pool.extend_from_slice(&ids);
        if options.padded_batches > 1 {
            alone.push((ids, c));
        }
    }
    let padded = if options.padded_batches > 1 {
        Some(padded_agreement(
            &mut candidate,
            &tokenizer,
            options.kind,
            &alone,
            options.padded_batches,
        )?)
    } else {
        None
    };

    let mut report = CheckReport {
        kind: options.kind,
        reference: options.reference.clone(),
        candidate: options.candidate.clone(),
        texts: texts.len(),
        truncated_texts: truncated,
        tokens,
        min_cosine: None,
        mean_cosine: None,
        worst_line: None,
        argmax_agreement: None,
        argmax_disagreements: None,
        entity_tokens: None,
        entity_agreement: None,
        max_abs_logit_diff: None,
        padded_rows: padded.map(|p| p.0),
        padded_agreement: padded.map(|p| p.1),
        thresholds: Thresholds {
            min_cosine: options.min_cosine,
            min_mean_cosine: options.min_mean_cosine,
            min_argmax_agreement: options.min_argmax_agreement,
            min_entity_agreement: options.min_entity_agreement,
            min_padded_agreement: options.min_padded_agreement,
        },
        timings: Vec::new(),
        failures: Vec::new(),
        passed: false,
    };
    match options.kind {
        CheckKind::Embedding => {
            let (worst_line, min) = cosines
                .iter()
                .copied()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap_or((0, f64::NAN));
            let mean = cosines.iter().map(|c| c.1).sum::<f64>() / cosines.len().max(1) as f64;
            if below(min, options.min_cosine) {
                failures.push(format!(
                    "embedding cosine {min:.6} on line {worst_line} is below {}",
                    options.min_cosine
                ));
            }
            if below(mean, options.min_mean_cosine) {
                failures.push(format!(
                    "mean embedding cosine {mean:.6} is below {}",
                    options.min_mean_cosine
                ));
            }
            report.min_cosine = Some(min);
            report.mean_cosine = Some(mean);
            report.worst_line = Some(worst_line);
        }
        CheckKind::TokenClassification => {
            let compared = labels_found.len();
            let differ = labels_found.iter().filter(|(r, c)| r != c).count();
            let background = most_frequent(labels_found.iter().map(|&(r, _)| r));
            let entities: Vec<_> = labels_found
                .iter()
                .filter(|&&(r, c)| r != background || c != background)
                .collect();
            let entity_agreement = if entities.is_empty() {
                1.0
            } else {
                entities.iter().filter(|(r, c)| r == c).count() as f64 / entities.len() as f64
            };
            if below(entity_agreement, options.min_entity_agreement) {
                failures.push(format!(
                    "agreement on non-background tokens {:.4}% (of {}) is below {}%",
                    entity_agreement * 100.0,
                    entities.len(),
                    options.min_entity_agreement * 100.0
                ));
            }
            report.entity_tokens = Some(entities.len());
            report.entity_agreement = Some(entity_agreement);
            let agreement = if compared == 0 {
                f64::NAN
            } else {
                (compared - differ) as f64 / compared as f64
            };
            if below(agreement, options.min_argmax_agreement) {
                failures.push(format!(
                    "argmax agreement {:.4}% ({differ} of {compared} tokens differ) is below {}%",
                    agreement * 100.0,
                    options.min_argmax_agreement * 100.0
                ));
            }
            report.argmax_agreement = Some(agreement);
            report.argmax_disagreements = Some(differ);
            report.max_abs_logit_diff = Some(max_diff);
        }
    }

    if let Some((rows, agreement)) = padded {
        if below(agreement, options.min_padded_agreement) {
            failures.push(format!(
                "padded batches of {}: agreement {agreement:.6} over {rows} rows with their texts alone is below {}",
                options.padded_batches, options.min_padded_agreement
            ));
        }
    }

    if options.timing_runs > 0 {
        report.timings.push(Timing {
            tokens: longest.len() + 2,
            reference_ms: reference.time(&tokenizer, &longest, options.timing_runs)?,
            candidate_ms: candidate.time(&tokenizer, &longest, options.timing_runs)?,
        });
        for &n in &options.time_lengths {
            let want = n.saturating_sub(2).max(1);
            let seq: Vec<u32> = pool.iter().copied().cycle().take(want).collect();
            if seq.len() < want {
                continue;
            }
            report.timings.push(Timing {
                tokens: n,
                reference_ms: reference.time(&tokenizer, &seq, options.timing_runs)?,
                candidate_ms: candidate.time(&tokenizer, &seq, options.timing_runs)?,
            });
        }
    }
    report.passed = failures.is_empty();
    report.failures = failures;
    Ok(report)
}

/// The candidate on padded batches of `batch` consecutive texts against each text
/// run alone (`alone`: ids and output): `(rows, agreement)`, the agreement being the
/// smallest row cosine of mean-pooled embeddings (attended positions) or the share of
/// text tokens whose argmax label is the same.
fn padded_agreement(
    graph: &mut Graph,
    tokenizer: &WindowTokenizer,
    kind: CheckKind,
    alone: &[(Vec<u32>, Vec<f32>)],
    batch: usize,
) -> anyhow::Result<(usize, f64)> {
    let (mut rows, mut worst, mut same, mut compared) = (0usize, 1.0f64, 0usize, 0usize);
    for group in alone.chunks(batch) {
        // A batch whose texts are all as long as each other has no padding.
        if group.windows(2).all(|w| w[0].0.len() == w[1].0.len()) {
            continue;
        }
        let ids: Vec<&[u32]> = group.iter().map(|(ids, _)| ids.as_slice()).collect();
        let (dims, data) = graph.run_batch(tokenizer, &ids)?;
        let (width, n) = (dims[1], dims[2]);
        for (row, (ids, single)) in group.iter().enumerate() {
            let len = ids.len() + 2;
            let out = &data[row * width * n..(row * width + len) * n];
            rows += 1;
            match kind {
                CheckKind::Embedding => {
                    let d = [1, len, n];
                    worst = worst.min(cosine(&mean_pool(&d, out), &mean_pool(&d, single)));
                }
                CheckKind::TokenClassification => {
                    for t in 1..len - 1 {
                        compared += 1;
                        let (a, b) = (&out[t * n..(t + 1) * n], &single[t * n..(t + 1) * n]);
                        same += usize::from(argmax(a) == argmax(b));
                    }
                }
            }
        }
    }
    let agreement = match kind {
        CheckKind::Embedding => worst,
        CheckKind::TokenClassification if compared == 0 => 1.0,
        CheckKind::TokenClassification => same as f64 / compared as f64,
    };
    Ok((rows, agreement))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_of_parallel_and_orthogonal_vectors() {
        assert!((cosine(&[1.0, 2.0], &[2.0, 4.0]) - 1.0).abs() < 1e-12);
        assert!(cosine(&[1.0, 0.0], &[0.0, 3.0]).abs() < 1e-12);
        assert_eq!(cosine(&[0.0, 0.0], &[0.0, 0.0]), 1.0);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }

    #[test]
    fn mean_pool_averages_every_position() {
        let v = mean_pool(&[1, 2, 2], &[1.0, 2.0, 3.0, 6.0]);
        assert_eq!(v, vec![2.0, 4.0]);
    }

    #[test]
    fn most_frequent_value_is_the_background() {
        assert_eq!(most_frequent([3, 0, 0, 3, 0].into_iter()), 0);
        assert_eq!(most_frequent([2, 1].into_iter()), 1);
        assert_eq!(most_frequent(std::iter::empty()), 0);
    }

    #[test]
    fn argmax_takes_the_first_largest() {
        assert_eq!(argmax(&[0.1, 0.7, 0.7, -1.0]), 1);
        assert_eq!(argmax(&[f32::NEG_INFINITY, -5.0]), 1);
    }
}
