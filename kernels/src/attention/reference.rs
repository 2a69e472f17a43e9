//! The reference the fused kernels are tested against: attention by its
//! definition, in f64, with the whole score row of each query in memory.

use super::{validate, AttentionError, AttentionParams, AttentionShape, KeyBias};

/// Reference attention, one query row at a time in f64: the definition the
/// fused kernel is tested against. Same arguments and conventions as
/// [`flash_attention`](super::flash_attention) (rows whose visible keys are all `-inf` give zeros);
/// returns the output `[batch, heads, seq_q, head_dim]`.
///
/// Errors: [`AttentionError`] when buffer lengths do not match `shape`.
pub fn naive_attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    bias: Option<KeyBias<'_>>,
    shape: AttentionShape,
    params: AttentionParams,
) -> Result<Vec<f32>, AttentionError> {
    let AttentionShape {
        batch,
        heads,
        seq_q,
        seq_kv,
        head_dim: d,
    } = shape;
    let q_len = shape.q_len().ok_or(AttentionError::Shape {
        shape,
        reason: "element count overflows usize",
    })?;
    validate(q, k, v, bias.as_ref(), shape, &params, q_len)?;
    let mut out = vec![0.0f32; q_len];
    let mut scores = vec![0.0f64; seq_kv];
    let mut accum = vec![0.0f64; d];
    for b in 0..batch {
        for h in 0..heads {
            let bh = b * heads + h;
            for i in 0..seq_q {
                let qrow = &q[(bh * seq_q + i) * d..][..d];
                let mut max = f64::NEG_INFINITY;
                for (j, s) in scores.iter_mut().enumerate() {
                    if !params.window.allows(i, j) {
                        *s = f64::NEG_INFINITY;
                        continue;
                    }
                    let krow = &k[(bh * seq_kv + j) * d..][..d];
                    let dot: f64 = qrow
                        .iter()
                        .zip(krow)
                        .map(|(&a, &b)| a as f64 * b as f64)
                        .sum();
                    let bias_v = bias.map_or(0.0, |kb| kb.data[b * kb.batch_stride + j] as f64);
                    *s = dot * params.scale as f64 + bias_v;
                    max = max.max(*s);
                }
                if max == f64::NEG_INFINITY {
                    continue;
                }
                let mut sum = 0.0f64;
                for s in scores.iter_mut() {
                    *s = (*s - max).exp();
                    sum += *s;
                }
                accum.iter_mut().for_each(|a| *a = 0.0);
                for (j, &p) in scores.iter().enumerate() {
                    if p != 0.0 {
                        let vrow = &v[(bh * seq_kv + j) * d..][..d];
                        for (a, &x) in accum.iter_mut().zip(vrow) {
                            *a += p * x as f64;
                        }
                    }
                }
                let orow = &mut out[(bh * seq_q + i) * d..][..d];
                for (o, &a) in orow.iter_mut().zip(&accum) {
                    *o = (a / sum) as f32;
                }
            }
        }
    }
    Ok(out)
}
