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

/// Runs `f` over `seqs` in batches of at most `max_batch`, grouping sequences of similar
/// length to limit padding, and returns one output per sequence in the original order.
///
/// Errors: whatever `f` returns, or [`ModelError::Invalid`] when `f` returns a number of
/// rows other than its batch's size.
pub fn run_sorted<T, F>(seqs: &[&[u32]], max_batch: usize, mut f: F) -> Result<Vec<T>, ModelError>
where
    F: FnMut(&[&[u32]]) -> Result<Vec<T>, ModelError>,
{
    let mut order: Vec<usize> = (0..seqs.len()).collect();
    order.sort_by_key(|&i| seqs[i].len());
    let mut out: Vec<Option<T>> = (0..seqs.len()).map(|_| None).collect();
    for chunk in order.chunks(max_batch.max(1)) {
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
    max_batch: usize,
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
    let computed = run_sorted(&batch, max_batch, f)?;
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

    #[test]
    fn run_sorted_keeps_order() {
        let a: &[u32] = &[1, 2, 3];
        let b: &[u32] = &[1];
        let c: &[u32] = &[1, 2];
        let out = run_sorted(&[a, b, c], 2, |batch| {
            Ok(batch.iter().map(|s| s.len()).collect())
        })
        .unwrap();
        assert_eq!(out, vec![3, 1, 2]);
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
        let first = run_cached(&mut cache, &[a, b, a], 8, &mut model).unwrap();
        assert_eq!(
            first.sources,
            [Source::Computed, Source::Computed, Source::Repeated]
        );
        assert_eq!(
            first.rows,
            vec![vec![2.0, 5.0], vec![1.0, 7.0], vec![2.0, 5.0]]
        );
        let second = run_cached(&mut cache, &[b, a], 8, &mut model).unwrap();
        assert_eq!(second.sources, [Source::Cached, Source::Cached]);
        assert_eq!(second.rows, vec![vec![1.0, 7.0], vec![2.0, 5.0]]);
        assert_eq!(runs, vec![vec![7], vec![5, 6]], "each sequence ran once");
    }

    #[test]
    fn a_failing_model_fails_the_call() {
        let mut cache = ResultCache::new(1 << 20);
        let err = run_cached(&mut cache, &[&[1u32][..]], 8, |_| Ok(Vec::new()));
        assert!(err.is_err());
        assert!(cache.get(&[1]).is_none());
    }
}
