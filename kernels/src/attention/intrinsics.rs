//! What the kernels share: a task's inputs, sliced and checked, and its
//! queries transposed per row group (all kernels); a row group's visible key
//! ranges and the `exp` polynomial (the intrinsics kernels, `avx2` and
//! `avx512`).
//!
//! They walk a task's query rows in groups of `N` rows; a group's keys are
//! the union of its rows' windows.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

use std::ops::Range;

use super::{AttentionShape, Layout, Problem, QUERY_BLOCK};

/// Coefficients of `e^r`'s degree-7 Taylor polynomial, highest degree first,
/// for Horner's rule: the polynomial of
/// [`exp_nonpositive`](super::exp_nonpositive).
pub(super) const EXP_TAYLOR: [f32; 8] = [
    1.0 / 5040.0,
    1.0 / 720.0,
    1.0 / 120.0,
    1.0 / 24.0,
    1.0 / 6.0,
    0.5,
    1.0,
    1.0,
];

/// The inputs of one task, sliced and checked.
pub(super) struct Task<'a> {
    pub(super) d: usize,
    pub(super) seq_kv: usize,
    /// First query row of the task, rows in it.
    pub(super) i0: usize,
    pub(super) rows: usize,
    /// The task's query rows: row `r` at `r * q_stride`, `d` floats.
    pub(super) q: &'a [f32],
    /// Floats from one query row to the next: `d` in `Layout::Bhsd`, `heads * d`
    /// in `Layout::Bshd`.
    pub(super) q_stride: usize,
    /// The key bias of the task's batch row, `seq_kv` floats.
    pub(super) bias: Option<&'a [f32]>,
}

impl<'a> Task<'a> {
    /// Task `block` of head `bh` (query rows `block * QUERY_BLOCK ..`); `None`
    /// when it has no rows, `out_len` cannot hold them, or an input is short.
    pub(super) fn new(p: &Problem<'a>, bh: usize, block: usize, out_len: usize) -> Option<Self> {
        let AttentionShape {
            heads,
            seq_q,
            seq_kv,
            head_dim: d,
            ..
        } = p.shape;
        let i0 = block * QUERY_BLOCK;
        let rows = QUERY_BLOCK.min(seq_q.saturating_sub(i0));
        if rows == 0 || out_len < rows * d {
            return None;
        }
        let b = bh / heads;
        let (start, q_stride) = match p.layout {
            Layout::Bhsd => ((bh * seq_q + i0) * d, d),
            Layout::Bshd => (((b * seq_q + i0) * heads + bh % heads) * d, heads * d),
        };
        let q = p.q.get(start..start + (rows - 1) * q_stride + d)?;
        let bias = match p.bias {
            Some(kb) => Some(
                kb.data
                    .get(b * kb.batch_stride..b * kb.batch_stride + seq_kv)?,
            ),
            None => None,
        };
        Some(Task {
            d,
            seq_kv,
            i0,
            rows,
            q,
            q_stride,
            bias,
        })
    }
}

impl Task<'_> {
    /// The queries of the group of `N` rows from `r0`, scaled by `scale` and
    /// transposed into `qs[f * N + r]` (zeros for rows past the task), so that
    /// a kernel broadcasts one row's feature `f` from consecutive floats.
    pub(super) fn group_queries<const N: usize>(&self, r0: usize, scale: f32, qs: &mut [f32]) {
        let nr = N.min(self.rows.saturating_sub(r0));
        for r in 0..N {
            for f in 0..self.d {
                let x = if r < nr {
                    self.q
                        .get((r0 + r) * self.q_stride + f)
                        .map_or(0.0, |&x| x * scale)
                } else {
                    0.0
                };
                if let Some(slot) = qs.get_mut(f * N + r) {
                    *slot = x;
                }
            }
        }
    }
}

/// A group of `N` rows' visible key ranges (`lo[r]..hi[r]`, empty for rows
/// past the task) and their union `g_lo..g_hi`.
pub(super) struct Ranges<const N: usize> {
    pub(super) lo: [usize; N],
    pub(super) hi: [usize; N],
    pub(super) g_lo: usize,
    pub(super) g_hi: usize,
}

impl<const N: usize> Ranges<N> {
    /// The ranges of the `nr` rows from `r0` of task `t`.
    pub(super) fn of(p: &Problem<'_>, t: &Task<'_>, r0: usize, nr: usize) -> Self {
        let mut lo = [0usize; N];
        let mut hi = [0usize; N];
        for r in 0..nr.min(N) {
            (lo[r], hi[r]) = p.params.window.key_range(t.i0 + r0 + r, t.seq_kv);
        }
        let nr = nr.min(N);
        Ranges {
            lo,
            hi,
            g_lo: lo[..nr].iter().copied().min().unwrap_or(0),
            g_hi: hi[..nr].iter().copied().max().unwrap_or(0),
        }
    }

    /// Keys every row of a full group (`nr == N`) sees, so that a key tile
    /// inside them needs no masks (global attention: all tiles but the last);
    /// empty for a partial group.
    pub(super) fn seen_by_all(&self, nr: usize) -> Range<usize> {
        if nr == N {
            let lo = self.lo.iter().copied().max().unwrap_or(0);
            let hi = self.hi.iter().copied().min().unwrap_or(0);
            lo..hi
        } else {
            0..0
        }
    }
}
