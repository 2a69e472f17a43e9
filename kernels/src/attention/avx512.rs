//! The AVX-512 kernel for head dimensions of 16, 32, 48 and 64, written with
//! explicit intrinsics.
//!
//! # Algorithm
//!
//! A task (one `(batch, head)` pair, [`QUERY_BLOCK`](super::QUERY_BLOCK) query rows) walks its
//! rows in groups of [`ROWS`]. For a group it visits the keys in chunks of up
//! to [`KEY_CHUNK`] and, per chunk:
//!
//! 1. computes the scaled, biased and window-masked scores of the group's rows
//!    against every key of the chunk into a strip (`ROWS x KEY_CHUNK` floats,
//!    24 KiB: it stays in L1), from the key tiles that
//!    [`flash_attention_with_isa`](super::flash_attention_with_isa) transposed
//!    once per head (64 columns per tile, 6 x 4 accumulators in registers);
//! 2. takes each row's maximum over the chunk, rescales the row's running sum
//!    and output by `exp(m_old - m_new)` (the online softmax of Milakov &
//!    Gimelshein 2018, here across chunks instead of across 64-key tiles),
//!    and replaces the strip by `exp(s - m_new)` with a vectorised `exp`;
//! 3. accumulates `P V` for the chunk into the group's outputs, held in
//!    registers (`ROWS x head_dim / 16` vectors).
//!
//! Every key is read once per row group; memory beyond the inputs stays
//! linear in the sequence length (the strip and the key tiles). Against the
//! generic kernel's online softmax over 64-key tiles, the row maximum, the rescaling and the
//! horizontal reductions run once per chunk rather than once per tile, and
//! `P V` broadcasts each probability from the strip instead of extracting it
//! from a register.
//!
//! # Numerics
//!
//! fp32 inputs, products and accumulation, as the generic kernel; `exp` uses
//! the reduction and degree-7 polynomial of
//! [`exp_nonpositive`](super::exp_nonpositive) (relative error below 3e-7)
//! with `vscalefps` for the power of two. bfloat16 products (`vdpbf16ps`)
//! are not used: on the AVX512_BF16 CPU this was measured on, `vdpbf16ps`
//! (32 products) issued at a quarter of the rate of fp32 FMAs (16 products),
//! so they were slower as well as less precise.

use std::arch::x86_64::*;
use std::cell::Cell;

use super::intrinsics::{Ranges, Task, EXP_TAYLOR};
use super::{exp_nonpositive, Lanes, Problem, EXP_FLOOR, LANES, LN2_HI, LN2_LO};

/// Query rows whose scores share each key load.
const ROWS: usize = 6;
/// Vectors of 16 columns per key tile (the key tile is 64 columns wide).
const TILE_VECTORS: usize = 4;
/// Key columns per tile, as laid out by the caller.
pub(super) const TILE: usize = TILE_VECTORS * LANES;
/// Keys per strip (a multiple of [`TILE`]).
pub(super) const KEY_CHUNK: usize = 1024;

thread_local! {
    /// Each worker thread's strip (`ROWS x KEY_CHUNK` floats, 24 KiB), kept between its
    /// tasks instead of allocated and zeroed for each.
    static STRIP: Cell<Vec<Lanes>> = const { Cell::new(Vec::new()) };
}

/// Whether this kernel handles `head_dim` (the output of a row group must fit
/// in registers: at most 4 vectors of 16 per row).
pub(super) fn supports(head_dim: usize) -> bool {
    head_dim.is_multiple_of(LANES) && (LANES..=4 * LANES).contains(&head_dim)
}

/// Runs one task; `p.tile` must be [`TILE`] and `head_dim` [`supports`]ed.
pub(super) fn task(p: &Problem<'_>, bh: usize, block: usize, out: &mut [f32]) {
    if p.tile != TILE {
        return;
    }
    // SAFETY: `select_kernel` hands out this kernel only after
    // `KernelIsa::is_available` (`is_x86_feature_detected!`) confirmed
    // AVX-512 F/VL/DQ/BW, AVX2 and FMA on this CPU.
    unsafe {
        match p.shape.head_dim / LANES {
            1 => task_f32::<1>(p, bh, block, out),
            2 => task_f32::<2>(p, bh, block, out),
            3 => task_f32::<3>(p, bh, block, out),
            4 => task_f32::<4>(p, bh, block, out),
            _ => {}
        }
    }
}

/// `exp(x)` lane-wise for `x <= 0` (and `-inf`): the reduction and polynomial
/// of [`exp_nonpositive`](super::exp_nonpositive), `2^n` by `vscalefps`.
/// Inputs below -87 give 0.
#[inline]
#[target_feature(enable = "avx512f")]
fn exp_ps(x: __m512) -> __m512 {
    exp_ps_taylor(x, &EXP_TAYLOR)
}

/// [`exp_ps`] with the Taylor polynomial of `e^r` whose Horner coefficients
/// (highest degree first) are `taylor`, a tail of [`EXP_TAYLOR`]: degree 7
/// (relative error below 3e-7) down to degree 5 (below 3e-6, for results
/// rounded to bfloat16 next).
#[inline]
#[target_feature(enable = "avx512f")]
pub(super) fn exp_ps_taylor(x: __m512, taylor: &[f32]) -> __m512 {
    let floor = _mm512_set1_ps(EXP_FLOOR);
    let keep = _mm512_cmp_ps_mask::<_CMP_GT_OQ>(x, floor);
    let xc = _mm512_max_ps(x, floor);
    let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_ps(xc, _mm512_set1_ps(std::f32::consts::LOG2_E)),
    );
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_HI), xc);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(LN2_LO), r);
    let Some((&first, rest)) = taylor.split_first() else {
        return _mm512_setzero_ps();
    };
    let mut poly = _mm512_set1_ps(first);
    for &c in rest {
        poly = _mm512_fmadd_ps(poly, r, _mm512_set1_ps(c));
    }
    _mm512_maskz_mov_ps(keep, _mm512_scalef_ps(poly, n))
}

/// Lanes `l` of the 16 columns starting at `col` with `lo <= col + l < hi`.
#[inline(always)]
pub(super) fn column_mask(col: usize, lo: usize, hi: usize) -> __mmask16 {
    let from = lo.saturating_sub(col).min(LANES);
    let to = hi.saturating_sub(col).min(LANES);
    if from >= to {
        return 0;
    }
    let upto = |n: usize| {
        if n >= LANES {
            u16::MAX
        } else {
            (1u16 << n) - 1
        }
    };
    upto(to) & !upto(from)
}

/// Step 2 for a chunk of `vectors` strip vectors per row: new maxima,
/// rescaled sums and outputs, probabilities in the strip (zeros for rows
/// with nothing visible yet).
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
#[allow(clippy::needless_range_loop)]
fn softmax_chunk<const DC: usize>(
    strip: &mut [Lanes],
    vectors: usize,
    cmax: &[__m512; ROWS],
    m: &mut [f32; ROWS],
    l: &mut [f32; ROWS],
    o: &mut [[__m512; DC]; ROWS],
) {
    let strip_row = KEY_CHUNK / LANES;
    for r in 0..ROWS {
        let m_new = m[r].max(_mm512_reduce_max_ps(cmax[r]));
        let Some(row) = strip.get_mut(r * strip_row..r * strip_row + vectors) else {
            return;
        };
        if m_new == f32::NEG_INFINITY {
            row.iter_mut().for_each(|x| *x = [0.0; LANES]);
            continue;
        }
        let corr = exp_nonpositive(m[r] - m_new);
        let corr_v = _mm512_set1_ps(corr);
        for k in 0..DC {
            o[r][k] = _mm512_mul_ps(o[r][k], corr_v);
        }
        let m_v = _mm512_set1_ps(m_new);
        let mut sum = _mm512_setzero_ps();
        for x in row.iter_mut() {
            // SAFETY: `x` is 16 floats.
            unsafe {
                let e = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x.as_ptr()), m_v));
                sum = _mm512_add_ps(sum, e);
                _mm512_storeu_ps(x.as_mut_ptr(), e);
            }
        }
        l[r] = l[r] * corr + _mm512_reduce_add_ps(sum);
        m[r] = m_new;
    }
}

/// Writes the group's normalised outputs (`nr` rows from `r0`).
#[inline]
#[target_feature(enable = "avx512f")]
fn write_rows<const DC: usize>(
    o: &[[__m512; DC]; ROWS],
    l: &[f32; ROWS],
    r0: usize,
    nr: usize,
    out: &mut [f32],
) {
    let d = DC * LANES;
    for r in 0..nr {
        let inv = _mm512_set1_ps(if l[r] > 0.0 { 1.0 / l[r] } else { 0.0 });
        let Some(orow) = out.get_mut((r0 + r) * d..(r0 + r + 1) * d) else {
            return;
        };
        for (k, dst) in orow.chunks_exact_mut(LANES).enumerate().take(DC) {
            // SAFETY: `dst` is 16 floats.
            unsafe { _mm512_storeu_ps(dst.as_mut_ptr(), _mm512_mul_ps(o[r][k], inv)) };
        }
    }
}

#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
#[allow(clippy::needless_range_loop)]
unsafe fn task_f32<const DC: usize>(p: &Problem<'_>, bh: usize, block: usize, out: &mut [f32]) {
    let Some(t) = Task::new(p, bh, block, out.len()) else {
        return;
    };
    let (d, seq_kv) = (t.d, t.seq_kv);
    if d != DC * LANES {
        return;
    }
    let tiles = seq_kv.div_ceil(TILE);
    let (Some(v), Some(kt)) = (
        p.v.get(bh * seq_kv * d..(bh + 1) * seq_kv * d),
        p.kt.get(bh * tiles * d * TILE_VECTORS..(bh + 1) * tiles * d * TILE_VECTORS),
    ) else {
        return;
    };
    let scale = p.params.scale;
    let neg_inf = _mm512_set1_ps(f32::NEG_INFINITY);
    let strip_row = KEY_CHUNK / LANES;
    // This thread's strip from its last task (zeroed when first allocated): every value
    // a group reads, step 1 has written for that group first.
    let mut strip = STRIP.take();
    strip.resize(ROWS * KEY_CHUNK / LANES, [0.0; LANES]);
    // Pre-scaled queries of a group, transposed: qs[t * ROWS + r].
    let mut qs = [0.0f32; 4 * LANES * ROWS];

    for r0 in (0..t.rows).step_by(ROWS) {
        let nr = ROWS.min(t.rows - r0);
        t.group_queries::<ROWS>(r0, scale, &mut qs);
        let ranges = Ranges::<ROWS>::of(p, &t, r0, nr);
        let seen_by_all = ranges.seen_by_all(nr);
        let mut m = [f32::NEG_INFINITY; ROWS];
        let mut l = [0.0f32; ROWS];
        let mut o = [[_mm512_setzero_ps(); DC]; ROWS];
        let mut c0 = ranges.g_lo - ranges.g_lo % TILE;
        while c0 < ranges.g_hi {
            let c1 = (c0 + KEY_CHUNK).min(ranges.g_hi);
            let chunk_tiles = (c1 - c0).div_ceil(TILE);

            // 1. Scores into the strip.
            let mut cmax = [neg_inf; ROWS];
            for tt in 0..chunk_tiles {
                let ti = c0 / TILE + tt;
                // `kt` holds `tiles * d * TILE_VECTORS` vectors and `ti < tiles`.
                let tile = kt[ti * d * TILE_VECTORS..(ti + 1) * d * TILE_VECTORS].as_ptr();
                let mut acc = [[_mm512_setzero_ps(); TILE_VECTORS]; ROWS];
                for f in 0..d {
                    // SAFETY: `f * TILE_VECTORS + ch < d * TILE_VECTORS`, inside the
                    // tile; `qs` holds `4 * LANES * ROWS >= d * ROWS` floats.
                    let kv: [__m512; TILE_VECTORS] = std::array::from_fn(|ch| unsafe {
                        _mm512_loadu_ps(tile.add(f * TILE_VECTORS + ch).cast::<f32>())
                    });
                    for r in 0..ROWS {
                        let qb = _mm512_set1_ps(unsafe { *qs.get_unchecked(f * ROWS + r) });
                        for ch in 0..TILE_VECTORS {
                            acc[r][ch] = _mm512_fmadd_ps(qb, kv[ch], acc[r][ch]);
                        }
                    }
                }
                // Bias, window mask, into the strip (vectors `tt * 4 ..` of
                // each row), running row maxima.
                let col0 = ti * TILE;
                let whole = seen_by_all.start <= col0 && col0 + TILE <= seen_by_all.end;
                for ch in 0..TILE_VECTORS {
                    let col = col0 + ch * LANES;
                    let in_seq = if whole {
                        u16::MAX
                    } else {
                        column_mask(col, 0, seq_kv)
                    };
                    let bias_v = match t.bias {
                        // SAFETY: `bias` holds `seq_kv` floats and the masked
                        // load reads only the lanes below `seq_kv`.
                        Some(bias) if in_seq != 0 => {
                            _mm512_maskz_loadu_ps(in_seq, bias.as_ptr().wrapping_add(col))
                        }
                        _ => _mm512_setzero_ps(),
                    };
                    for r in 0..ROWS {
                        let mask = if whole {
                            u16::MAX
                        } else {
                            column_mask(col, ranges.lo[r], ranges.hi[r])
                        };
                        let s = _mm512_mask_add_ps(neg_inf, mask, acc[r][ch], bias_v);
                        cmax[r] = _mm512_max_ps(cmax[r], s);
                        if let Some(slot) = strip.get_mut(r * strip_row + tt * TILE_VECTORS + ch) {
                            // SAFETY: `slot` is 16 floats.
                            _mm512_storeu_ps(slot.as_mut_ptr(), s);
                        }
                    }
                }
            }

            // 2. Online softmax across chunks.
            softmax_chunk::<DC>(
                &mut strip,
                chunk_tiles * TILE_VECTORS,
                &cmax,
                &mut m,
                &mut l,
                &mut o,
            );

            // 3. P V over the chunk's visible keys: two keys per step into two
            // accumulator sets where both fit in registers (head dims 16 and
            // 32), then one key per step.
            let probs = strip.as_flattened().as_ptr();
            let vp = v.as_ptr();
            let mut j = c0.max(ranges.g_lo);
            let mut o2 = [[_mm512_setzero_ps(); DC]; ROWS];
            // SAFETY (both loops): `j < c1 <= seq_kv` (`j + 1 < c1` in the
            // first), so the rows of `v` (`seq_kv * d` floats) exist; the strip
            // holds `ROWS * KEY_CHUNK` floats and `j - c0 < c1 - c0 <= KEY_CHUNK`.
            while 2 * ROWS * DC <= 24 && j + 1 < c1 {
                let va: [__m512; DC] =
                    std::array::from_fn(|k| _mm512_loadu_ps(vp.add(j * d + k * LANES)));
                let vb: [__m512; DC] =
                    std::array::from_fn(|k| _mm512_loadu_ps(vp.add((j + 1) * d + k * LANES)));
                for r in 0..ROWS {
                    let at = probs.add(r * KEY_CHUNK + j - c0);
                    let pa = _mm512_set1_ps(*at);
                    let pb = _mm512_set1_ps(*at.add(1));
                    for k in 0..DC {
                        o[r][k] = _mm512_fmadd_ps(pa, va[k], o[r][k]);
                        o2[r][k] = _mm512_fmadd_ps(pb, vb[k], o2[r][k]);
                    }
                }
                j += 2;
            }
            while j < c1 {
                let va: [__m512; DC] =
                    std::array::from_fn(|k| _mm512_loadu_ps(vp.add(j * d + k * LANES)));
                for r in 0..ROWS {
                    let pa = _mm512_set1_ps(*probs.add(r * KEY_CHUNK + j - c0));
                    for k in 0..DC {
                        o[r][k] = _mm512_fmadd_ps(pa, va[k], o[r][k]);
                    }
                }
                j += 1;
            }
            for r in 0..ROWS {
                for k in 0..DC {
                    o[r][k] = _mm512_add_ps(o[r][k], o2[r][k]);
                }
            }
            c0 = c1;
        }
        write_rows::<DC>(&o, &l, r0, nr, out);
    }
    STRIP.set(strip);
}
