//! The memory layouts the kernels read and write (`[batch, heads, seq, d]` and
//! `[batch, seq, heads * d]`), the copies between them, and the writer a
//! `Layout::Bshd` call's tasks put their rows out through.

use super::{AttentionShape, QUERY_BLOCK};

/// Memory layout of Q, K, V and the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Layout {
    /// `[batch, heads, seq, head_dim]`, each head's rows contiguous.
    #[default]
    Bhsd,
    /// `[batch, seq, heads * head_dim]`: the layout the Q, K and V projections
    /// produce and the output projection reads, so that a graph needs no head
    /// transposes around the op. The AMX variant reads and writes it in place;
    /// the others run on copies in [`Layout::Bhsd`].
    Bshd,
}

/// The output of a [`Layout::Bshd`] call, written row by row from the tasks:
/// the row of query `i` of head `h` in batch row `b` starts at
/// `((b * seq_q + i) * heads + h) * head_dim`.
pub(super) struct OutRows {
    pub(super) ptr: *mut f32,
    pub(super) len: usize,
}

// SAFETY: `OutRows` is shared by the tasks of one call, each of which writes only
// the rows of its own `(batch, head)` pair and query block (`write_task`), so no
// two threads write the same element; the call outlives the tasks.
unsafe impl Send for OutRows {}
unsafe impl Sync for OutRows {}

impl OutRows {
    /// Copies task `(bh, block)`'s rows (`rows x d` floats in `slot`) to their
    /// places; rows outside the buffer are skipped.
    pub(super) fn write_task(&self, shape: &AttentionShape, bh: usize, block: usize, slot: &[f32]) {
        let (d, heads) = (shape.head_dim, shape.heads.max(1));
        let (b, h) = (bh / heads, bh % heads);
        for (r, row) in slot.chunks_exact(d).enumerate() {
            let i = block * QUERY_BLOCK + r;
            if i >= shape.seq_q {
                break;
            }
            let at = ((b * shape.seq_q + i) * heads + h) * d;
            if at + d > self.len {
                return;
            }
            // SAFETY: `at + d <= len` keeps the write inside the buffer `ptr`
            // points to, and only this task writes row `(b, i, h)` (see the
            // `Send`/`Sync` impls).
            unsafe { std::ptr::copy_nonoverlapping(row.as_ptr(), self.ptr.add(at), d) };
        }
    }
}

/// `x` (`[batch, seq, heads * d]`) into `out` as `[batch, heads, seq, d]` (`out`
/// resized to `x`'s length; every element is written).
pub(super) fn bshd_into_bhsd(x: &[f32], out: &mut Vec<f32>, seq: usize, heads: usize, d: usize) {
    out.resize(x.len(), 0.0);
    for (row, src) in x.chunks_exact(d).enumerate() {
        let (b, i, h) = (row / (seq * heads), row / heads % seq, row % heads);
        if let Some(dst) =
            out.get_mut(((b * heads + h) * seq + i) * d..((b * heads + h) * seq + i + 1) * d)
        {
            dst.copy_from_slice(src);
        }
    }
}

/// `x` (`[batch, heads, seq, d]`) written into `out` as `[batch, seq, heads * d]`.
pub(super) fn bhsd_into_bshd(x: &[f32], out: &mut [f32], seq: usize, heads: usize, d: usize) {
    for (row, src) in x.chunks_exact(d).enumerate() {
        let (bh, i) = (row / seq, row % seq);
        let (b, h) = (bh / heads, bh % heads);
        if let Some(dst) =
            out.get_mut(((b * seq + i) * heads + h) * d..((b * seq + i) * heads + h + 1) * d)
        {
            dst.copy_from_slice(src);
        }
    }
}
