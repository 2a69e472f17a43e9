//! Model passes over many token sequences: batched by length, each distinct sequence run
//! once per batch, and answered from the [`ResultCache`] where the exact sequence was run
//! before.

use std::collections::HashMap;

use crate::cache::ResultCache;
use crate::models::ModelError;

/// Where a sequence's output came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Run through the model in this call.
    Computed,
    /// Found in the result cache.
    Cached,
    /// The same sequence appears earlier in this call; its output is shared.
    Repeated,
}

/// One output row per input sequence, in input order, with where each came from.
#[derive(Debug, Default)]
pub struct Passes {
    /// Output rows (`f32`, the model's shape per sequence, flattened).
    pub rows: Vec<Vec<f32>>,
    /// Source of each row.
    pub sources: Vec<Source>,
}

/// What one model run may take: at most `sequences` sequences and at most `tokens` token
/// slots (sequences × the longest one, `[CLS]`/`[SEP]` included, since a batch is padded to
/// its longest). The token bound keeps ONNX Runtime's largest activations small (attention
/// scores are `[batch, heads, seq, seq]`: 8 windows of 512 tokens hold 100 MB per layer in
/// MiniLM) and with them its memory arena, which keeps its peak for the process's life;
/// short sequences still fill a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most sequences per run (`batching.max_sequences_per_run`).
    pub sequences: usize,
    /// Most token slots per run (`batching.max_batch_tokens`).
    pub tokens: usize,
}

impl BatchLimits {
    /// Splits `order` (indices of `seqs` by ascending length) into runs within the limits;
    /// a sequence longer than the token bound runs alone.
    fn runs(&self, seqs: &[&[u32]], order: &[usize]) -> Vec<std::ops::Range<usize>> {
        let mut runs = Vec::new();
        let mut start = 0;
        for (k, &i) in order.iter().enumerate() {
            let n = k - start;
            let width = seqs[i].len() + 2;
            if n > 0 && (n >= self.sequences.max(1) || (n + 1) * width > self.tokens) {
                runs.push(start..k);
                start = k;
            }
        }
        if start < order.len() {
            runs.push(start..order.len());
        }
        runs
    }
}

/// Runs `f` over `seqs` in batches within `limits`, grouping sequences of similar length to
/// limit padding, and returns one output per sequence in the original order.
///
/// Errors: whatever `f` returns, or [`ModelError::Invalid`] when `f` returns a number of
/// rows other than its batch's size.
pub fn run_sorted<T, F>(
    seqs: &[&[u32]],
    limits: BatchLimits,
    mut f: F,
) -> Result<Vec<T>, ModelError>
where
    F: FnMut(&[&[u32]]) -> Result<Vec<T>, ModelError>,
{
    let mut order: Vec<usize> = (0..seqs.len()).collect();
    order.sort_by_key(|&i| seqs[i].len());
    let mut out: Vec<Option<T>> = (0..seqs.len()).map(|_| None).collect();
    for run in limits.runs(seqs, &order) {
        let chunk = &order[run];
        let batch: Vec<&[u32]> = chunk.iter().map(|&i| seqs[i]).collect();
        let results = f(&batch)?;
        if results.len() != chunk.len() {
            return Err(ModelError::Invalid {
                path: "batch".into(),
                message: format!(
                    "model returned {} rows for {} inputs",
                    results.len(),
                    chunk.len()
                ),
            });
        }
        for (&i, r) in chunk.iter().zip(results) {
            out[i] = Some(r);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// Like [`run_sorted`], but a sequence found in `cache` is not run, a sequence repeated in
/// `seqs` is run once, and every computed output is stored in `cache`. A hit returns
/// exactly the row that was stored on the miss.
pub fn run_cached<F>(
    cache: &mut ResultCache,
    seqs: &[&[u32]],
    limits: BatchLimits,
    f: F,
) -> Result<Passes, ModelError>
where
    F: FnMut(&[&[u32]]) -> Result<Vec<Vec<f32>>, ModelError>,
{
    let mut rows: Vec<Option<Vec<f32>>> = vec![None; seqs.len()];
    let mut sources = vec![Source::Computed; seqs.len()];
    // First index of each sequence to run, and the sequences to run in that order.
    let mut first: HashMap<&[u32], usize> = HashMap::new();
    let mut todo: Vec<usize> = Vec::new();
    let mut repeats: Vec<(usize, usize)> = Vec::new();
    for (i, &seq) in seqs.iter().enumerate() {
        if let Some(&j) = first.get(seq) {
            sources[i] = Source::Repeated;
            repeats.push((i, j));
        } else if let Some(row) = cache.get(seq) {
            rows[i] = Some(row.to_vec());
            sources[i] = Source::Cached;
            first.insert(seq, i);
        } else {
            first.insert(seq, i);
            todo.push(i);
        }
    }
    let batch: Vec<&[u32]> = todo.iter().map(|&i| seqs[i]).collect();
    let computed = run_sorted(&batch, limits, f)?;
    for (&i, row) in todo.iter().zip(computed) {
        cache.put(seqs[i], &row);
        rows[i] = Some(row);
    }
    for (i, j) in repeats {
        rows[i] = rows[j].clone();
    }
    Ok(Passes {
        rows: rows.into_iter().map(Option::unwrap_or_default).collect(),
        sources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(sequences: usize, tokens: usize) -> BatchLimits {
        BatchLimits { sequences, tokens }
    }

    #[test]
    fn run_sorted_keeps_order() {
        let a: &[u32] = &[1, 2, 3];
        let b: &[u32] = &[1];
        let c: &[u32] = &[1, 2];
        let out = run_sorted(&[a, b, c], limits(2, 1 << 20), |batch| {
            Ok(batch.iter().map(|s| s.len()).collect())
        })
        .unwrap();
        assert_eq!(out, vec![3, 1, 2]);
    }

    #[test]
    fn runs_stay_within_the_token_bound() {
        let long = vec![1u32; 510];
        let short = vec![1u32; 30];
        let seqs: Vec<&[u32]> = vec![&long, &short, &long, &short, &long, &short, &long];
        let mut shapes = Vec::new();
        run_sorted(&seqs, limits(8, 1024), |batch| {
            shapes.push((
                batch.len(),
                batch.iter().map(|s| s.len() + 2).max().unwrap(),
            ));
            Ok(vec![0; batch.len()])
        })
        .unwrap();
        // The three short ones together (3 x 32 slots), the long ones two by two
        // (2 x 512 = 1024 slots), never more than 1024 slots in one run.
        assert_eq!(shapes, vec![(3, 32), (2, 512), (2, 512)]);
        // A sequence above the bound still runs, alone.
        let mut sizes = Vec::new();
        run_sorted(&[&long[..], &long[..]], limits(8, 100), |batch| {
            sizes.push(batch.len());
            Ok(vec![0; batch.len()])
        })
        .unwrap();
        assert_eq!(sizes, vec![1, 1]);
    }

    #[test]
    fn cached_and_repeated_sequences_are_not_run_again() {
        let mut cache = ResultCache::new(1 << 20);
        let mut runs: Vec<Vec<u32>> = Vec::new();
        let mut model = |batch: &[&[u32]]| -> Result<Vec<Vec<f32>>, ModelError> {
            runs.extend(batch.iter().map(|s| s.to_vec()));
            Ok(batch
                .iter()
                .map(|s| vec![s.len() as f32, s[0] as f32])
                .collect())
        };
        let (a, b): (&[u32], &[u32]) = (&[5, 6], &[7]);
        let first = run_cached(&mut cache, &[a, b, a], limits(8, 4096), &mut model).unwrap();
        assert_eq!(
            first.sources,
            [Source::Computed, Source::Computed, Source::Repeated]
        );
        assert_eq!(
            first.rows,
            vec![vec![2.0, 5.0], vec![1.0, 7.0], vec![2.0, 5.0]]
        );
        let second = run_cached(&mut cache, &[b, a], limits(8, 4096), &mut model).unwrap();
        assert_eq!(second.sources, [Source::Cached, Source::Cached]);
        assert_eq!(second.rows, vec![vec![1.0, 7.0], vec![2.0, 5.0]]);
        assert_eq!(runs, vec![vec![7], vec![5, 6]], "each sequence ran once");
    }

    #[test]
    fn a_failing_model_fails_the_call() {
        let mut cache = ResultCache::new(1 << 20);
        let err = run_cached(&mut cache, &[&[1u32][..]], limits(8, 4096), |_| {
            Ok(Vec::new())
        });
        assert!(err.is_err());
        assert!(cache.get(&[1]).is_none());
    }
}
