//! The AVX2 + FMA kernel for head dimensions of 16, 32, 48 and 64, written
//! with explicit intrinsics (16 ymm registers of 8 floats).
//!
//! # Algorithm
//!
//! The same three steps per key chunk as the AVX-512 kernel (`avx512.rs`:
//! scores of a group of [`ROWS`] query rows into an L1 strip, an online softmax
//! across chunks, `P V` accumulated per chunk), blocked for half as many and
//! half as wide registers:
//!
//! 1. scores: key tiles of 16 columns (two ymm per feature), 6 rows x 2
//!    accumulators, so that each broadcast query value feeds two FMAs and each
//!    key load six (the register shape of the classic 6 x 16 AVX2 SGEMM
//!    micro-kernel: 12 accumulators, 2 key vectors, 1 broadcast);
//! 2. the row maxima, the rescaling by `exp(m_old - m_new)` (Milakov &
//!    Gimelshein 2018) and `exp(s - m_new)` over the strip, vectorised;
//! 3. `P V`: the outputs of a group (`ROWS x head_dim` floats) live in memory
//!    between chunks and in registers within one: [`pv_rows`] rows at a time,
//!    as many as fit beside the broadcast probability.
//!
//! Tiles that every row of the group sees whole (global attention: all but
//! the last) take the vector path; tiles cut by the sequence end or a window
//! are masked lane by lane.
//!
//! # Numerics
//!
//! fp32 inputs, products and accumulation; `exp` is the reduction and
//! degree-7 polynomial of [`exp_nonpositive`](super::exp_nonpositive)
//! (relative error below 3e-7), with the power of two built from the exponent
//! bits.

use std::arch::x86_64::*;
use std::cell::Cell;

use super::intrinsics::{Ranges, Task, EXP_TAYLOR};
use super::{exp_nonpositive, Lanes, Problem, EXP_FLOOR, LANES, LN2_HI, LN2_LO};

/// Query rows whose scores share each key load.
const ROWS: usize = 6;
/// Floats per ymm register.
const W: usize = 8;
/// Key columns per tile, as laid out by the caller (one [`Lanes`] per feature).
pub(super) const TILE: usize = LANES;
/// Keys per strip (a multiple of [`TILE`]).
const KEY_CHUNK: usize = 1024;
/// The widest head this kernel takes, in floats.
const MAX_DIM: usize = 4 * LANES;

thread_local! {
    /// Each worker thread's strip (`ROWS x KEY_CHUNK` floats, 24 KiB), kept between its
    /// tasks instead of allocated and zeroed for each.
    static STRIP: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// Whether this kernel handles `head_dim`.
pub(super) fn supports(head_dim: usize) -> bool {
    head_dim.is_multiple_of(LANES) && (LANES..=MAX_DIM).contains(&head_dim)
}

/// Rows of a group whose `P V` accumulators (`head_dim / 8` ymm each) fit in
/// registers beside the broadcast probability: 6 / 3 / 2 / 1 for head
/// dimensions 16 / 32 / 48 / 64.
const fn pv_rows(dc: usize) -> usize {
    match dc {
        2 => 6,
        4 => 3,
        6 => 2,
        _ => 1,
    }
}

/// Runs one task; `p.tile` must be [`TILE`] and `head_dim` [`supports`]ed.
pub(super) fn task(p: &Problem<'_>, bh: usize, block: usize, out: &mut [f32]) {
    if p.tile != TILE {
        return;
    }
    // SAFETY: `select_kernel` hands out this kernel only after
    // `KernelIsa::is_available` (`is_x86_feature_detected!`) confirmed AVX2
    // and FMA on this CPU.
    unsafe {
        match p.shape.head_dim / W {
            2 => task_f32::<2, { pv_rows(2) }>(p, bh, block, out),
            4 => task_f32::<4, { pv_rows(4) }>(p, bh, block, out),
            6 => task_f32::<6, { pv_rows(6) }>(p, bh, block, out),
            8 => task_f32::<8, { pv_rows(8) }>(p, bh, block, out),
            _ => {}
        }
    }
}

/// `exp(x)` lane-wise for `x <= 0` (and `-inf`); inputs below -87 give 0.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp_ps(x: __m256) -> __m256 {
    let floor = _mm256_set1_ps(EXP_FLOOR);
    let keep = _mm256_cmp_ps::<_CMP_GT_OQ>(x, floor);
    let xc = _mm256_max_ps(x, floor);
    let n = _mm256_round_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(_mm256_mul_ps(
        xc,
        _mm256_set1_ps(std::f32::consts::LOG2_E),
    ));
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_HI), xc);
    let r = _mm256_fnmadd_ps(n, _mm256_set1_ps(LN2_LO), r);
    let mut poly = _mm256_set1_ps(EXP_TAYLOR[0]);
    for &c in &EXP_TAYLOR[1..] {
        poly = _mm256_fmadd_ps(poly, r, _mm256_set1_ps(c));
    }
    // 2^n from the exponent bits: n >= -126 after the floor, a normal number.
    let bits = _mm256_slli_epi32::<23>(_mm256_add_epi32(
        _mm256_cvtps_epi32(n),
        _mm256_set1_epi32(127),
    ));
    _mm256_and_ps(_mm256_mul_ps(poly, _mm256_castsi256_ps(bits)), keep)
}

#[inline]
#[target_feature(enable = "avx2")]
fn reduce_max(x: __m256) -> f32 {
    let m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps::<1>(x));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let m = _mm_max_ss(m, _mm_shuffle_ps::<0b01>(m, m));
    _mm_cvtss_f32(m)
}

#[inline]
#[target_feature(enable = "avx2")]
fn reduce_add(x: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps::<1>(x));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_shuffle_ps::<0b01>(s, s));
    _mm_cvtss_f32(s)
}

/// One row group's state across the key chunks: running maxima, sums and
/// unnormalised outputs (`ROWS x MAX_DIM` floats, the first `head_dim` of each
/// row used).
struct Group {
    m: [f32; ROWS],
    l: [f32; ROWS],
    o: [[f32; MAX_DIM]; ROWS],
}

/// Step 2 for a chunk of `cols` strip columns per row: new maxima, rescaled
/// sums and outputs, probabilities in the strip (zeros for rows with nothing
/// visible yet).
#[inline]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::needless_range_loop)] // Register-blocked arrays: see `Lanes` in the parent module.
fn softmax_chunk(strip: &mut [f32], cols: usize, cmax: &[__m256; ROWS], g: &mut Group, d: usize) {
    for r in 0..ROWS {
        let m_new = g.m[r].max(reduce_max(cmax[r]));
        let Some(row) = strip.get_mut(r * KEY_CHUNK..r * KEY_CHUNK + cols) else {
            return;
        };
        if m_new == f32::NEG_INFINITY {
            row.fill(0.0);
            continue;
        }
        let corr = exp_nonpositive(g.m[r] - m_new);
        g.o[r].iter_mut().take(d).for_each(|x| *x *= corr);
        let m_v = _mm256_set1_ps(m_new);
        let mut sum = _mm256_setzero_ps();
        for x in row.chunks_exact_mut(W) {
            // SAFETY: `x` is 8 floats.
            unsafe {
                let e = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x.as_ptr()), m_v));
                sum = _mm256_add_ps(sum, e);
                _mm256_storeu_ps(x.as_mut_ptr(), e);
            }
        }
        g.l[r] = g.l[r] * corr + reduce_add(sum);
        g.m[r] = m_new;
    }
}

/// Step 3 for the keys `j0..j1` of the chunk starting at `c0`: `o += P V` for
/// the group's first `nr` rows (those in the task), `PR` rows at a time with
/// their `DC` output vectors in registers.
///
/// # Safety
/// AVX2 and FMA are available; `v` holds the rows `j0..j1` of `DC * 8` floats
/// each and `strip` the columns `j0 - c0 .. j1 - c0` of each of its rows.
#[inline]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::needless_range_loop)] // Register-blocked arrays: see `Lanes` in the parent module.
unsafe fn accumulate_pv<const DC: usize, const PR: usize>(
    g: &mut Group,
    strip: &[f32],
    v: *const f32,
    c0: usize,
    j0: usize,
    j1: usize,
    nr: usize,
) {
    let d = DC * W;
    let probs = strip.as_ptr();
    let nr = nr.min(ROWS);
    for r0 in (0..nr).step_by(PR) {
        let pr = PR.min(nr - r0);
        let mut acc = [[_mm256_setzero_ps(); DC]; PR];
        for r in 0..pr {
            for k in 0..DC {
                acc[r][k] = _mm256_loadu_ps(g.o[r0 + r].as_ptr().add(k * W));
            }
        }
        for j in j0..j1 {
            let vrow = v.add(j * d);
            for r in 0..pr {
                let p = _mm256_set1_ps(*probs.add((r0 + r) * KEY_CHUNK + j - c0));
                for k in 0..DC {
                    acc[r][k] = _mm256_fmadd_ps(p, _mm256_loadu_ps(vrow.add(k * W)), acc[r][k]);
                }
            }
        }
        for r in 0..pr {
            for k in 0..DC {
                _mm256_storeu_ps(g.o[r0 + r].as_mut_ptr().add(k * W), acc[r][k]);
            }
        }
    }
}

#[target_feature(enable = "avx2,fma")]
#[allow(clippy::needless_range_loop)]
unsafe fn task_f32<const DC: usize, const PR: usize>(
    p: &Problem<'_>,
    bh: usize,
    block: usize,
    out: &mut [f32],
) {
    let Some(t) = Task::new(p, bh, block, out.len()) else {
        return;
    };
    let (d, seq_kv) = (t.d, t.seq_kv);
    if d != DC * W {
        return;
    }
    let tiles = seq_kv.div_ceil(TILE);
    let (Some(v), Some(kt)) = (
        p.v.get(bh * seq_kv * d..(bh + 1) * seq_kv * d),
        p.kt.get(bh * tiles * d..(bh + 1) * tiles * d),
    ) else {
        return;
    };
    let kt = kt.as_flattened();
    let scale = p.params.scale;
    let neg_inf = _mm256_set1_ps(f32::NEG_INFINITY);
    // This thread's strip from its last task (zeroed when first allocated): every value
    // a group reads, step 1 has written for that group first.
    let mut strip = STRIP.take();
    strip.resize(ROWS * KEY_CHUNK, 0.0);
    // Pre-scaled queries of a group, transposed: qs[f * ROWS + r].
    let mut qs = [0.0f32; MAX_DIM * ROWS];

    for r0 in (0..t.rows).step_by(ROWS) {
        let nr = ROWS.min(t.rows - r0);
        t.group_queries::<ROWS>(r0, scale, &mut qs);
        let ranges = Ranges::<ROWS>::of(p, &t, r0, nr);
        let seen_by_all = ranges.seen_by_all(nr);
        let Ranges { lo, hi, g_lo, g_hi } = ranges;
        let mut g = Group {
            m: [f32::NEG_INFINITY; ROWS],
            l: [0.0; ROWS],
            o: [[0.0; MAX_DIM]; ROWS],
        };
        let mut c0 = g_lo - g_lo % TILE;
        while c0 < g_hi {
            let c1 = (c0 + KEY_CHUNK).min(g_hi);
            let chunk_tiles = (c1 - c0).div_ceil(TILE);

            // 1. Scores into the strip.
            let mut cmax = [neg_inf; ROWS];
            for tt in 0..chunk_tiles {
                let ti = c0 / TILE + tt;
                // `kt` holds `tiles * d * TILE` floats and `ti < tiles`.
                let tile = kt.as_ptr().add(ti * d * TILE);
                let mut acc = [[_mm256_setzero_ps(); 2]; ROWS];
                for f in 0..d {
                    let k0 = _mm256_loadu_ps(tile.add(f * TILE));
                    let k1 = _mm256_loadu_ps(tile.add(f * TILE + W));
                    for r in 0..ROWS {
                        let qb = _mm256_set1_ps(*qs.get_unchecked(f * ROWS + r));
                        acc[r][0] = _mm256_fmadd_ps(qb, k0, acc[r][0]);
                        acc[r][1] = _mm256_fmadd_ps(qb, k1, acc[r][1]);
                    }
                }
                let col0 = ti * TILE;
                let at = tt * TILE;
                if seen_by_all.start <= col0 && col0 + TILE <= seen_by_all.end {
                    for h in 0..2 {
                        let bias_v = match t.bias {
                            // SAFETY: the tile lies inside `0..seq_kv`.
                            Some(bias) => _mm256_loadu_ps(bias.as_ptr().add(col0 + h * W)),
                            None => _mm256_setzero_ps(),
                        };
                        for r in 0..ROWS {
                            let s = _mm256_add_ps(acc[r][h], bias_v);
                            cmax[r] = _mm256_max_ps(cmax[r], s);
                            _mm256_storeu_ps(strip.as_mut_ptr().add(r * KEY_CHUNK + at + h * W), s);
                        }
                    }
                } else {
                    // Cut by the sequence end or a window: lane by lane.
                    for r in 0..ROWS {
                        let mut s = [0.0f32; TILE];
                        _mm256_storeu_ps(s.as_mut_ptr(), acc[r][0]);
                        _mm256_storeu_ps(s.as_mut_ptr().add(W), acc[r][1]);
                        for (c, x) in s.iter_mut().enumerate() {
                            let col = col0 + c;
                            *x = if col >= lo[r] && col < hi[r] {
                                *x + t.bias.and_then(|b| b.get(col)).copied().unwrap_or(0.0)
                            } else {
                                f32::NEG_INFINITY
                            };
                        }
                        let row = &mut strip[r * KEY_CHUNK + at..r * KEY_CHUNK + at + TILE];
                        row.copy_from_slice(&s);
                        cmax[r] = _mm256_max_ps(cmax[r], _mm256_loadu_ps(s.as_ptr()));
                        cmax[r] = _mm256_max_ps(cmax[r], _mm256_loadu_ps(s.as_ptr().add(W)));
                    }
                }
            }

            // 2. Online softmax across chunks.
            softmax_chunk(&mut strip, chunk_tiles * TILE, &cmax, &mut g, d);

            // 3. P V over the chunk's visible keys (`c0.max(g_lo) .. c1`, all
            // inside `0..seq_kv`; the strip holds their columns).
            accumulate_pv::<DC, PR>(&mut g, &strip, v.as_ptr(), c0, c0.max(g_lo), c1, nr);
            c0 = c1;
        }
        for r in 0..nr {
            let inv = if g.l[r] > 0.0 { 1.0 / g.l[r] } else { 0.0 };
            let Some(orow) = out.get_mut((r0 + r) * d..(r0 + r + 1) * d) else {
                break;
            };
            for (dst, &x) in orow.iter_mut().zip(&g.o[r]) {
                *dst = x * inv;
            }
        }
    }
    STRIP.set(strip);
}

/// The lane type the caller lays key tiles out in must be one tile wide.
const _: () = assert!(std::mem::size_of::<Lanes>() == TILE * std::mem::size_of::<f32>());
