//! Sentence scoring and budgeted selection.
//!
//! Four scores per sentence, combined linearly (the paper "98x Faster LLM Routing Without a
//! Dedicated GPU", arXiv 2603.12646, stage 2; weights from the vLLM Semantic Router
//! defaults):
//!
//! - **TextRank** (Mihalcea and Tarau, 2004): PageRank (damping 0.85, Brin and Page 1998)
//!   over a sentence graph weighted by TF-IDF cosine similarity. The graph is sparse: edges
//!   come from an inverted index over terms, terms in more than
//!   [`GRAPH_TERM_MAX_SENTENCES`] of the ranked sentences are left out of it (their IDF is
//!   low anyway), and each sentence keeps only its `max_neighbors` most similar neighbours. Iteration stops when the L1 change falls
//!   under `tolerance` or after `max_iterations`.
//! - **Position**: a U-shaped curve over the sentence's relative position `p` in `[0, 1]`,
//!   `1 - depth * 4p(1 - p)`, so the start (primacy) and the end (recency) weigh most and
//!   the middle least ("lost in the middle", Liu et al. 2023); an optional tilt favours
//!   the end (`tilt > 0`) or the start.
//! - **TF-IDF**: the sum of the sentence's term weights `(1 + ln tf) * idf`, with
//!   `idf = 1 + ln((N + 1) / (df + 1))`, divided by the square root of its term count.
//! - **Novelty**: `1 - max cosine similarity` to the sentences already selected (maximal
//!   marginal relevance, Carbonell and Goldstein 1998), updated after every pick.
//!
//! TextRank and TF-IDF are normalised to `[0, 1]` by their maximum. Selection is greedy
//! by combined score among the sentences that still fit the budget; because novelty can
//! only fall as more is selected, a lazy priority queue re-scores a sentence only when it
//! reaches the top, which keeps selection near `O(N log N)`.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashSet};
use std::ops::Range;

/// Scoring parameters (already validated).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    pub textrank: f32,
    pub position: f32,
    pub tfidf: f32,
    pub novelty: f32,
    pub depth: f32,
    pub tilt: f32,
    pub damping: f32,
    pub max_iterations: u32,
    pub tolerance: f32,
    pub max_neighbors: usize,
    pub min_similarity: f32,
}

/// The sentences to rank: per-sentence term ranges into `arena` (`(term id, tf)` pairs,
/// each term once per sentence, in any order), document frequencies by term id and costs.
///
/// The sentences may be a subset of the prompt (the candidates left after pruning, see
/// `PromptBuilder`): `positions` gives each one's index in the prompt and `total` the
/// prompt's sentence count, which is also the document count behind `df`.
pub(crate) struct Input<'a> {
    pub arena: &'a [(u32, u16)],
    pub ranges: &'a [Range<usize>],
    pub df: &'a [u32],
    pub centi: &'a [u32],
    /// Index of each sentence in the prompt, ascending.
    pub positions: &'a [u32],
    /// Sentences in the prompt (at least `ranges.len()`).
    pub total: usize,
    /// Content fingerprints: a sentence whose fingerprint is already kept is not selected
    /// again (exact repeats add nothing).
    pub fingerprints: &'a [u64],
}

/// A term links sentences in the TextRank graph only if it occurs in at most this many of
/// the ranked sentences (and in two at least).
///
/// Each sentence's similarities cost one pass over the postings of its graph terms, so the
/// graph costs at most `N * terms per sentence * 16` steps: linear in the `N` sentences
/// ranked; a bound that grows with `N` (such as `2 sqrt(N)`) makes the graph grow as
/// `N^1.5`, the largest part of the work left after the last body byte on long prompts. A
/// term in more than 16 of about a thousand sentences is a common word of the prompt, whose
/// weight (`idf`) is low, so the fixed bound loses little ranking signal.
pub(crate) const GRAPH_TERM_MAX_SENTENCES: u32 = 16;

/// `v[r]`, or an empty slice when `r` is out of bounds.
fn slice<T>(v: &[T], r: Range<usize>) -> &[T] {
    v.get(r).unwrap_or_default()
}

/// Slot `i` of `v`, which grows with NaN (not yet computed) to hold it; `None` only past
/// what a table of document frequencies can need (more than 2^24 sentences).
fn grow_to(v: &mut Vec<f32>, i: usize) -> Option<&mut f32> {
    if i >= 1 << 24 {
        return None;
    }
    if v.len() <= i {
        v.resize(i + 1, f32::NAN);
    }
    v.get_mut(i)
}

/// Sparse TF-IDF model with an inverted index over the graph terms.
struct Model {
    /// Term weights of the ranked sentences, concatenated; sentence `i`'s are `w[wr[i]]`,
    /// parallel to its arena entries.
    w: Vec<f32>,
    wr: Vec<Range<usize>>,
    norm: Vec<f32>,
    /// Postings of graph term `t`: `post[post_start[t]..post_end[t]]`, by ascending
    /// sentence (an empty range for the other terms).
    post_start: Vec<u32>,
    post_end: Vec<u32>,
    post: Vec<(u32, f32)>,
    /// Scratch accumulator, all zero between uses.
    acc: Vec<f32>,
    touched: Vec<u32>,
}

impl Model {
    /// The full model: term weights and the similarity graph's postings.
    fn build(inp: &Input<'_>) -> Model {
        let mut m = Model::weights_only(inp);
        m.index(inp);
        m
    }

    /// Term weights only (`w`, `wr`): all that TF-IDF scores read. The norms and postings
    /// stay empty, so [`Model::similar`] finds nothing; only for scoring without TextRank.
    fn weights_only(inp: &Input<'_>) -> Model {
        let n = inp.ranges.len();
        let docs = inp.total.max(n) as f32;
        // Only the ranked sentences' entries are weighted: after pruning they are a bounded
        // part of the arena.
        let idf = |d: u32| 1.0 + ((docs + 1.0) / (d as f32 + 1.0)).ln();
        let tf_weight = |tf: u16| 1.0 + f32::from(tf.max(1)).ln();
        // The factors are computed once per document frequency (a logarithm each): most
        // terms are rare, and the common ones share a few large frequencies. Most counts
        // are small.
        let mut idf_by_df: Vec<f32> = (0..64).map(idf).collect();
        let tf_small: [f32; 16] = std::array::from_fn(|tf| tf_weight(tf as u16));
        let mut w: Vec<f32> = Vec::new();
        let mut wr: Vec<Range<usize>> = Vec::with_capacity(n);
        for r in inp.ranges {
            let a = w.len();
            w.extend(slice(inp.arena, r.clone()).iter().map(|&(t, tf)| {
                let d = inp.df.get(t as usize).copied().unwrap_or(0);
                let i = match idf_by_df.get(d as usize) {
                    Some(&x) if !x.is_nan() => x,
                    _ => {
                        let x = idf(d);
                        if let Some(slot) = grow_to(&mut idf_by_df, d as usize) {
                            *slot = x;
                        }
                        x
                    }
                };
                let f = tf_small
                    .get(usize::from(tf))
                    .copied()
                    .unwrap_or_else(|| tf_weight(tf));
                f * i
            }));
            wr.push(a..w.len());
        }
        Model {
            w,
            wr,
            norm: Vec::new(),
            post_start: Vec::new(),
            post_end: Vec::new(),
            post: Vec::new(),
            acc: vec![0.0; n],
            touched: Vec::new(),
        }
    }

    /// Adds the sentence norms and the postings of the graph terms to a weights-only model.
    fn index(&mut self, inp: &Input<'_>) {
        let (w, wr) = (&self.w, &self.wr);
        let norm: Vec<f32> = wr
            .iter()
            .map(|r| {
                slice(w, r.clone())
                    .iter()
                    .map(|x| x * x)
                    .sum::<f32>()
                    .sqrt()
            })
            .collect();

        // Document frequencies within these sentences (the whole prompt's unless pruned),
        // and their distinct terms: the work below is per term of these sentences, not per
        // term of the prompt (whose vocabulary grows with its length).
        let vocab = inp.df.len();
        let mut local_df = vec![0u32; vocab];
        let mut terms: Vec<u32> = Vec::new();
        for r in inp.ranges {
            for &(t, _) in slice(inp.arena, r.clone()) {
                if let Some(d) = local_df.get_mut(t as usize) {
                    if *d == 0 {
                        terms.push(t);
                    }
                    *d += 1;
                }
            }
        }
        let cap = GRAPH_TERM_MAX_SENTENCES;
        let graph_df = |t: u32| {
            let d = local_df.get(t as usize).copied().unwrap_or(0);
            if (2..=cap).contains(&d) {
                d
            } else {
                0
            }
        };
        // Each graph term's postings get a range of `post`; `post_end` is its fill cursor.
        let mut post_start = vec![0u32; vocab];
        let mut post_end = vec![0u32; vocab];
        let mut total = 0u32;
        for &t in &terms {
            let d = graph_df(t);
            if let (true, Some(a), Some(b)) = (
                d > 0,
                post_start.get_mut(t as usize),
                post_end.get_mut(t as usize),
            ) {
                *a = total;
                *b = total;
                total = total.saturating_add(d);
            }
        }
        let mut post = vec![(0u32, 0f32); total as usize];
        for (s, (r, rw)) in inp.ranges.iter().zip(wr).enumerate() {
            let terms = slice(inp.arena, r.clone());
            for (&(t, _), &wk) in terms.iter().zip(slice(w, rw.clone())) {
                if graph_df(t) == 0 {
                    continue;
                }
                if let Some(cur) = post_end.get_mut(t as usize) {
                    if let Some(slot) = post.get_mut(*cur as usize) {
                        *slot = (s as u32, wk);
                        *cur += 1;
                    }
                }
            }
        }
        self.norm = norm;
        self.post_start = post_start;
        self.post_end = post_end;
        self.post = post;
    }

    /// Cosine similarities of sentence `i` to every sentence sharing a graph term; calls
    /// `f(j, sim)` for each, in a deterministic order.
    fn similar(&mut self, inp: &Input<'_>, i: usize, mut f: impl FnMut(usize, f32)) {
        self.touched.clear();
        let r = inp.ranges.get(i).cloned().unwrap_or(0..0);
        let rw = self.wr.get(i).cloned().unwrap_or(0..0);
        for (&(t, _), &wi) in slice(inp.arena, r).iter().zip(slice(&self.w, rw)) {
            let t = t as usize;
            let (Some(&a), Some(&b)) = (self.post_start.get(t), self.post_end.get(t)) else {
                continue;
            };
            for &(j, wj) in slice(&self.post, a as usize..b as usize) {
                if j as usize == i {
                    continue;
                }
                if let Some(x) = self.acc.get_mut(j as usize) {
                    if *x == 0.0 {
                        self.touched.push(j);
                    }
                    *x += wi * wj;
                }
            }
        }
        let ni = self.norm.get(i).copied().unwrap_or(0.0);
        for &j in &self.touched {
            let j = j as usize;
            let nj = self.norm.get(j).copied().unwrap_or(0.0);
            if let Some(x) = self.acc.get_mut(j) {
                let d = ni * nj;
                let sim = if d > 0.0 { *x / d } else { 0.0 };
                *x = 0.0;
                f(j, sim.min(1.0));
            }
        }
    }
}

/// Combined score with ordering for the selection heap (higher first, then lower index).
#[derive(Clone, Copy, PartialEq)]
struct Cand {
    score: f32,
    idx: u32,
}

impl Eq for Cand {}

impl Ord for Cand {
    fn cmp(&self, o: &Self) -> Ordering {
        self.score
            .total_cmp(&o.score)
            .then_with(|| o.idx.cmp(&self.idx))
    }
}

impl PartialOrd for Cand {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// Position weight of sentence `i` of `n`; see the module docs.
pub(crate) fn position_weight(i: usize, n: usize, depth: f32, tilt: f32) -> f32 {
    let p = if n <= 1 {
        0.0
    } else {
        i as f32 / (n - 1) as f32
    };
    let u = 1.0 - depth * 4.0 * p * (1.0 - p);
    let t = (1.0 + tilt * (2.0 * p - 1.0)) / (1.0 + tilt.abs());
    (u * t).clamp(0.0, 1.0)
}

/// TextRank scores: PageRank over the sparse similarity graph.
fn textrank(inp: &Input<'_>, m: &mut Model, p: &Params) -> Vec<f32> {
    let n = inp.ranges.len();
    let k = p.max_neighbors.max(1);
    let mut edge_off = Vec::with_capacity(n + 1);
    let mut edges: Vec<(u32, f32)> = Vec::new();
    let mut buf: Vec<(u32, f32)> = Vec::new();
    edge_off.push(0usize);
    for i in 0..n {
        buf.clear();
        m.similar(inp, i, |j, s| {
            if s >= p.min_similarity {
                buf.push((j as u32, s));
            }
        });
        if buf.len() > k {
            let by_sim = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
            buf.select_nth_unstable_by(k - 1, by_sim);
            buf.truncate(k);
        }
        edges.extend_from_slice(&buf);
        edge_off.push(edges.len());
    }
    let out_edges = |i: usize| match (edge_off.get(i), edge_off.get(i + 1)) {
        (Some(&a), Some(&b)) => slice(&edges, a..b),
        _ => &[],
    };
    let out_sum: Vec<f32> = (0..n)
        .map(|i| out_edges(i).iter().map(|e| e.1).sum())
        .collect();
    let nf = n as f32;
    let d = p.damping;
    let mut score = vec![1.0 / nf; n];
    let mut next = vec![0.0f32; n];
    for _ in 0..p.max_iterations.max(1) {
        let mut dangling = 0.0f32;
        next.fill(0.0);
        for (i, (&sc, &os)) in score.iter().zip(&out_sum).enumerate() {
            if os > 0.0 {
                let share = sc / os;
                for &(j, s) in out_edges(i) {
                    if let Some(x) = next.get_mut(j as usize) {
                        *x += share * s;
                    }
                }
            } else {
                dangling += sc;
            }
        }
        let base = (1.0 - d) / nf + d * dangling / nf;
        let mut diff = 0.0f32;
        for (sc, &nx) in score.iter_mut().zip(&next) {
            let v = base + d * nx;
            diff += (v - *sc).abs();
            *sc = v;
        }
        if diff < p.tolerance {
            break;
        }
    }
    score
}

/// Combined TextRank, position and TF-IDF score of each sentence (novelty left out: it
/// depends on what is selected).
fn base_scores(inp: &Input<'_>, m: &mut Model, p: &Params) -> Vec<f32> {
    let n = inp.ranges.len();
    let tr = if p.textrank > 0.0 {
        textrank(inp, m, p)
    } else {
        vec![0.0; n]
    };
    let tfidf: Vec<f32> =
        m.wr.iter()
            .map(|r| {
                let len = r.len().max(1) as f32;
                slice(&m.w, r.clone()).iter().sum::<f32>() / len.sqrt()
            })
            .collect();
    let max_of = |v: &[f32]| v.iter().copied().fold(0.0f32, f32::max);
    let (tr_max, tf_max) = (max_of(&tr), max_of(&tfidf));
    let norm = |x: f32, mx: f32| if mx > 0.0 { x / mx } else { 0.0 };
    let total = inp.total.max(n);
    tr.iter()
        .zip(&tfidf)
        .enumerate()
        .map(|(i, (&t, &f))| {
            let pos = inp.positions.get(i).map_or(i, |&x| x as usize);
            p.textrank * norm(t, tr_max)
                + p.position * position_weight(pos, total, p.depth, p.tilt)
                + p.tfidf * norm(f, tf_max)
        })
        .collect()
}

/// [`base_scores`] of every sentence of `inp`: what pruning ranks candidates by while the
/// prompt still streams in.
pub(crate) fn scores(inp: &Input<'_>, p: &Params) -> Vec<f32> {
    if inp.ranges.is_empty() {
        return Vec::new();
    }
    // Without TextRank only the term weights are read: the graph is not built.
    let mut m = if p.textrank > 0.0 {
        Model::build(inp)
    } else {
        Model::weights_only(inp)
    };
    base_scores(inp, &mut m, p)
}

/// Selects sentences for the remaining budget `budget` (centi-tokens): `selected` holds the
/// sentences already kept (pinned and risk-flagged) and receives the new picks. Returns the
/// centi-tokens added.
pub(crate) fn select(inp: &Input<'_>, selected: &mut [bool], budget: u64, p: &Params) -> u64 {
    let n = inp.ranges.len();
    if n == 0
        || selected.len() != n
        || inp.centi.len() != n
        || inp.fingerprints.len() != n
        || inp.positions.len() != n
    {
        return 0;
    }
    let fits_any = selected
        .iter()
        .zip(inp.centi)
        .any(|(&s, &c)| !s && u64::from(c) <= budget);
    if !fits_any {
        return 0;
    }
    let mut m = Model::build(inp);
    let base = base_scores(inp, &mut m, p);

    // Novelty against what is already kept.
    let mut max_sim = vec![0.0f32; n];
    let raise = |max_sim: &mut Vec<f32>, j: usize, sim: f32| {
        if let Some(x) = max_sim.get_mut(j) {
            if sim > *x {
                *x = sim;
            }
        }
    };
    let already: Vec<usize> = selected
        .iter()
        .enumerate()
        .filter_map(|(i, &k)| k.then_some(i))
        .collect();
    if p.novelty > 0.0 {
        for &s in &already {
            m.similar(inp, s, |j, sim| raise(&mut max_sim, j, sim));
        }
    }
    let score = |i: usize, max_sim: &[f32]| {
        base.get(i).copied().unwrap_or(0.0)
            + p.novelty * (1.0 - max_sim.get(i).copied().unwrap_or(0.0))
    };

    let mut kept_fp: HashSet<u64> = already
        .iter()
        .filter_map(|&i| inp.fingerprints.get(i).copied())
        .collect();
    let mut heap: BinaryHeap<Cand> = selected
        .iter()
        .zip(inp.centi.iter().zip(inp.fingerprints))
        .enumerate()
        .filter(|(_, (&s, (&c, fp)))| !s && u64::from(c) <= budget && !kept_fp.contains(fp))
        .map(|(i, _)| Cand {
            score: score(i, &max_sim),
            idx: i as u32,
        })
        .collect();
    let mut left = budget;
    // Candidates met that can no longer be picked, since the last sweep.
    let mut dead = 0usize;
    while let Some(top) = heap.pop() {
        let i = top.idx as usize;
        let (Some(&c), Some(&fp)) = (inp.centi.get(i), inp.fingerprints.get(i)) else {
            continue;
        };
        let cost = u64::from(c);
        if cost > left || kept_fp.contains(&fp) {
            // Once the budget is nearly used, most candidates are too long for what is
            // left: rather than popping them one by one, sweep them out of the heap once
            // they are met often (a sweep costs the heap's size, paid for by the pops it
            // saves). The picks do not change: `left` only falls, and the pop order of the
            // rest depends only on their scores (`Cand` is totally ordered).
            dead += 1;
            if dead >= (heap.len() / 8).max(32) {
                heap.retain(|c| {
                    inp.centi
                        .get(c.idx as usize)
                        .is_some_and(|&k| u64::from(k) <= left)
                });
                dead = 0;
            }
            continue;
        }
        let cur = Cand {
            score: score(i, &max_sim),
            idx: top.idx,
        };
        if heap.peek().is_some_and(|next| cur < *next) {
            // Its novelty fell since it was queued: requeue with the fresh score.
            heap.push(cur);
            continue;
        }
        if let Some(x) = selected.get_mut(i) {
            *x = true;
        }
        kept_fp.insert(fp);
        left -= cost;
        if p.novelty > 0.0 {
            m.similar(inp, i, |j, sim| raise(&mut max_sim, j, sim));
        }
    }
    budget - left
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_curve_is_u_shaped() {
        let n = 101;
        let w: Vec<f32> = (0..n).map(|i| position_weight(i, n, 0.5, 0.0)).collect();
        assert!((w[0] - 1.0).abs() < 1e-6 && (w[100] - 1.0).abs() < 1e-6);
        assert!((w[50] - 0.5).abs() < 1e-6);
        assert!(w[25] > w[50] && w[25] < w[0]);
        let tilted: Vec<f32> = (0..n).map(|i| position_weight(i, n, 0.5, 0.4)).collect();
        assert!(tilted[100] > tilted[0]);
        assert_eq!(position_weight(0, 1, 0.5, 0.0), 1.0);
    }

    fn params() -> Params {
        Params {
            textrank: 0.2,
            position: 0.4,
            tfidf: 0.35,
            novelty: 0.05,
            depth: 0.5,
            tilt: 0.0,
            damping: 0.85,
            max_iterations: 50,
            tolerance: 1e-4,
            max_neighbors: 20,
            min_similarity: 0.01,
        }
    }

    #[test]
    fn central_sentence_wins_textrank() {
        // Sentence 1 shares terms with all others; 3 shares nothing.
        let arena = vec![
            (0, 1),
            (1, 1), // s0: a b
            (0, 1),
            (1, 1),
            (2, 1),
            (3, 1), // s1: a b c d
            (2, 1),
            (3, 1), // s2: c d
            (4, 1), // s3: e
        ];
        let ranges = vec![0..2, 2..6, 6..8, 8..9];
        let df = vec![2, 2, 2, 2, 1];
        let centi = vec![100; 4];
        let fps = vec![1, 2, 3, 4];
        let positions = vec![0, 1, 2, 3];
        let inp = Input {
            arena: &arena,
            ranges: &ranges,
            df: &df,
            centi: &centi,
            fingerprints: &fps,
            positions: &positions,
            total: 4,
        };
        let mut m = Model::build(&inp);
        let tr = textrank(&inp, &mut m, &params());
        assert!(tr[1] > tr[0] && tr[1] > tr[2] && tr[1] > tr[3], "{tr:?}");
        let sum: f32 = tr.iter().sum();
        assert!((sum - 1.0).abs() < 1e-3, "{sum}");

        let mut sel = vec![false; 4];
        let used = select(&inp, &mut sel, 200, &params());
        assert_eq!(used, 200);
        assert_eq!(sel.iter().filter(|&&x| x).count(), 2);
    }
}
