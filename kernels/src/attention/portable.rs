//! The register-blocked generic kernel: one task's online softmax written over
//! fixed-width lane groups ([`Lanes`]) that LLVM vectorises, compiled for the
//! baseline target and, on x86-64, for AVX2 + FMA and AVX-512 (the variants
//! that run where the intrinsics kernels of `avx2.rs` and `avx512.rs` do not
//! take the head dimension).

use super::intrinsics::Task;
use super::{exp_nonpositive, Lanes, Problem, LANES};

pub(super) fn task_portable(p: &Problem<'_>, bh: usize, block: usize, out: &mut [f32]) {
    // 16 xmm registers: one row, 32-column tiles, no FMA.
    attention_task::<1, 2, false>(p, bh, block, out)
}

#[cfg(target_arch = "x86_64")]
pub(super) mod x86 {
    //! The same task compiled for wider vector units. Selected only after
    //! run-time detection of the features (see `select_kernel`).
    use super::{attention_task, Problem};

    /// 16 ymm registers: two rows, 32-column tiles.
    #[target_feature(enable = "avx2,fma")]
    fn task_avx2_impl(p: &Problem<'_>, bh: usize, block: usize, out: &mut [f32]) {
        attention_task::<2, 2, true>(p, bh, block, out)
    }

    /// 32 zmm registers: four rows, 64-column tiles.
    #[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
    fn task_avx512_impl(p: &Problem<'_>, bh: usize, block: usize, out: &mut [f32]) {
        attention_task::<4, 4, true>(p, bh, block, out)
    }

    pub(in crate::attention) fn task_avx2(
        p: &Problem<'_>,
        bh: usize,
        block: usize,
        out: &mut [f32],
    ) {
        // SAFETY: `select_kernel` hands out this function only after
        // `KernelIsa::is_available` (`is_x86_feature_detected!`) confirmed
        // AVX2 and FMA on this CPU.
        unsafe { task_avx2_impl(p, bh, block, out) }
    }

    pub(in crate::attention) fn task_avx512(
        p: &Problem<'_>,
        bh: usize,
        block: usize,
        out: &mut [f32],
    ) {
        // SAFETY: `select_kernel` hands out this function only after
        // `KernelIsa::is_available` (`is_x86_feature_detected!`) confirmed
        // AVX-512 F/VL/DQ/BW, AVX2 and FMA on this CPU.
        unsafe { task_avx512_impl(p, bh, block, out) }
    }
}

/// `a * b + c`, as one fused multiply-add where the instantiation targets
/// FMA hardware (`FMA = true`), as a multiply and an add otherwise (so that
/// the portable build never calls the slow software `fmaf`).
#[inline(always)]
fn fmadd<const FMA: bool>(a: f32, b: f32, c: f32) -> f32 {
    if FMA {
        a.mul_add(b, c)
    } else {
        a * b + c
    }
}

/// `acc + a * b`, lane-wise.
#[inline(always)]
fn fma_lanes<const FMA: bool>(acc: Lanes, a: f32, b: &Lanes) -> Lanes {
    let mut r = acc;
    for l in 0..LANES {
        r[l] = fmadd::<FMA>(a, b[l], r[l]);
    }
    r
}

/// `x + bias` for columns `first + l` inside `lo..hi`, `-inf` elsewhere.
#[inline(always)]
fn bias_and_mask(x: Lanes, bias: &Lanes, first: usize, lo: usize, hi: usize) -> Lanes {
    let mut r = x;
    for l in 0..LANES {
        let c = first + l;
        r[l] = if c >= lo && c < hi {
            x[l] + bias[l]
        } else {
            f32::NEG_INFINITY
        };
    }
    r
}

#[inline(always)]
fn max_lanes(a: Lanes, b: &Lanes) -> Lanes {
    let mut r = a;
    for l in 0..LANES {
        r[l] = if b[l] > a[l] { b[l] } else { a[l] };
    }
    r
}

#[inline(always)]
fn add_lanes(a: Lanes, b: &Lanes) -> Lanes {
    let mut r = a;
    for l in 0..LANES {
        r[l] = a[l] + b[l];
    }
    r
}

/// `exp(x - m)`, lane-wise.
#[inline(always)]
fn exp_lanes(x: Lanes, m: f32) -> Lanes {
    let mut r = x;
    for l in 0..LANES {
        r[l] = exp_nonpositive(x[l] - m);
    }
    r
}

#[inline(always)]
fn scale_lanes(x: &[f32], s: f32) -> Lanes {
    let mut r = [0.0; LANES];
    for l in 0..LANES {
        r[l] = x[l] * s;
    }
    r
}

#[inline(always)]
fn lanes_of(x: &[f32]) -> Option<&Lanes> {
    <&Lanes>::try_from(x).ok()
}

/// `o[r][..] = o[r][..] * corr[r] + sum_c p[r][c] * v[c][..]` over the
/// columns `c_lo..c_hi` of one key tile, for the `R` rows of a group and the
/// output columns `col0 .. col0 + DC * LANES`, kept in registers.
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
fn accumulate_pv<const R: usize, const CH: usize, const DC: usize, const FMA: bool>(
    o: &mut [f32],
    d: usize,
    col0: usize,
    corr: &[f32; R],
    probs: &[[Lanes; CH]; R],
    v: &[f32],
    c_lo: usize,
    c_hi: usize,
) {
    let mut acc = [[[0.0f32; LANES]; DC]; R];
    for r in 0..R {
        for k in 0..DC {
            let at = r * d + col0 + k * LANES;
            acc[r][k] = scale_lanes(&o[at..at + LANES], corr[r]);
        }
    }
    for c in c_lo..c_hi {
        let base = c * d + col0;
        let mut vrow = [[0.0f32; LANES]; DC];
        for k in 0..DC {
            match lanes_of(&v[base + k * LANES..base + (k + 1) * LANES]) {
                Some(x) => vrow[k] = *x,
                None => return,
            }
        }
        for r in 0..R {
            let pc = probs[r][c / LANES][c % LANES];
            for k in 0..DC {
                acc[r][k] = fma_lanes::<FMA>(acc[r][k], pc, &vrow[k]);
            }
        }
    }
    for r in 0..R {
        for k in 0..DC {
            let at = r * d + col0 + k * LANES;
            o[at..at + LANES].copy_from_slice(&acc[r][k]);
        }
    }
}

/// One task: query rows `block * QUERY_BLOCK ..` of head `bh` (flattened
/// `batch * heads + head`), written to `out` (`rows * head_dim` floats).
///
/// Register blocking: `R` query rows share each key load, key tiles are
/// `CH * LANES` columns wide, and the scores of the `R` rows (`R * CH` lane
/// groups) stay in vector registers while the `head_dim` reduction runs.
/// The instantiations pick `R` and `CH` to fit the register file (32 zmm for
/// AVX-512, 16 ymm for AVX2, 16 xmm for the portable build).
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn attention_task<const R: usize, const CH: usize, const FMA: bool>(
    p: &Problem<'_>,
    bh: usize,
    block: usize,
    out: &mut [f32],
) {
    let Some(task) = Task::new(p, bh, block, out.len()) else {
        return;
    };
    let (d, seq_kv, i0, rows, bias) = (task.d, task.seq_kv, task.i0, task.rows, task.bias);
    let Some(v) = p.v.get(bh * seq_kv * d..(bh + 1) * seq_kv * d) else {
        return;
    };
    let tile = CH * LANES;
    let window = p.params.window;
    let groups = rows.div_ceil(R);

    // Pre-scaled queries, transposed per group: qt[(g * d + t) * R + r].
    let mut qt = vec![0.0f32; groups * d * R];
    for (g, qs) in qt.chunks_exact_mut(d * R).enumerate() {
        task.group_queries::<R>(g * R, p.params.scale, qs);
    }
    // Output accumulators (rows padded to whole groups) and softmax state.
    let mut acc = vec![0.0f32; groups * R * d];
    let mut row_max = vec![f32::NEG_INFINITY; groups * R];
    let mut row_sum = vec![0.0f32; groups * R];
    if p.tile != tile {
        return;
    }
    let tiles = seq_kv.div_ceil(tile);
    let mut bias_tile = [[0.0f32; LANES]; CH];
    let full_chunks = d / LANES;

    let (j_lo, _) = window.key_range(i0, seq_kv);
    let (_, j_hi) = window.key_range(i0 + rows - 1, seq_kv);
    let mut j0 = j_lo - j_lo % tile;
    while j0 < j_hi {
        let cols = tile.min(seq_kv - j0);
        // Bias tile; a fully `-inf` tile contributes exactly nothing.
        for c in 0..tile {
            bias_tile[c / LANES][c % LANES] = match bias {
                Some(bias) if c < cols => bias[j0 + c],
                _ => 0.0,
            };
        }
        if bias.is_some()
            && bias_tile
                .iter()
                .flatten()
                .take(cols)
                .all(|&x| x == f32::NEG_INFINITY)
        {
            j0 += tile;
            continue;
        }
        // Transposed key tile: kt[t * CH + ch][l] = k[j0 + ch * LANES + l][t].
        let kt_at = ((bh * tiles + j0 / tile) * d) * CH;
        let kt = &p.kt[kt_at..kt_at + d * CH];
        let vt = &v[j0 * d..(j0 + cols) * d];

        for g in 0..groups {
            // Visible column range of each row of the group within the tile.
            let mut ranges = [(0usize, 0usize); R];
            let mut any = false;
            for (r, range) in ranges.iter_mut().enumerate() {
                let i = i0 + g * R + r;
                if i >= i0 + rows {
                    continue;
                }
                let (lo, hi) = window.key_range(i, seq_kv);
                let c_lo = lo.max(j0) - j0;
                let c_hi = hi.min(j0 + cols).saturating_sub(j0);
                if c_lo < c_hi {
                    *range = (c_lo, c_hi);
                    any = true;
                }
            }
            if !any {
                continue;
            }

            // scores[r] = (scale q_r) . K_tile^T, accumulated in registers
            // (`sacc` is only indexed by constants, so it is never spilled).
            let mut sacc = [[[0.0f32; LANES]; CH]; R];
            let qg = &qt[g * d * R..(g + 1) * d * R];
            for t in 0..d {
                let Ok(kr) = <&[Lanes; CH]>::try_from(&kt[t * CH..(t + 1) * CH]) else {
                    return;
                };
                let Ok(qv) = <&[f32; R]>::try_from(&qg[t * R..(t + 1) * R]) else {
                    return;
                };
                for r in 0..R {
                    for ch in 0..CH {
                        sacc[r][ch] = fma_lanes::<FMA>(sacc[r][ch], qv[r], &kr[ch]);
                    }
                }
            }
            let mut s = sacc;

            // Online softmax update per row.
            let mut corr = [1.0f32; R];
            let (mut u_lo, mut u_hi) = (tile, 0);
            for r in 0..R {
                let (c_lo, c_hi) = ranges[r];
                let mut m = [f32::NEG_INFINITY; LANES];
                for ch in 0..CH {
                    s[r][ch] = bias_and_mask(s[r][ch], &bias_tile[ch], ch * LANES, c_lo, c_hi);
                    m = max_lanes(m, &s[r][ch]);
                }
                let t_max = m
                    .iter()
                    .fold(f32::NEG_INFINITY, |a, &x| if x > a { x } else { a });
                let slot = g * R + r;
                let m_old = row_max[slot];
                let m_new = if t_max > m_old { t_max } else { m_old };
                if m_new == f32::NEG_INFINITY {
                    // Nothing visible yet, or everything -inf: weights 0.
                    s[r] = [[0.0; LANES]; CH];
                    continue;
                }
                let mut sum = [0.0f32; LANES];
                for ch in 0..CH {
                    s[r][ch] = exp_lanes(s[r][ch], m_new);
                    sum = add_lanes(sum, &s[r][ch]);
                }
                corr[r] = exp_nonpositive(m_old - m_new);
                row_sum[slot] = row_sum[slot] * corr[r] + sum.iter().sum::<f32>();
                row_max[slot] = m_new;
                if c_lo < c_hi {
                    u_lo = u_lo.min(c_lo);
                    u_hi = u_hi.max(c_hi);
                }
            }
            if u_lo >= u_hi {
                // No weights: only the rescaling (a no-op unless the maximum moved).
                if corr.iter().all(|&c| c == 1.0) {
                    continue;
                }
            }

            // acc[rows of g] = acc * corr + P . V_tile
            let o = &mut acc[g * R * d..(g + 1) * R * d];
            let mut col = 0;
            while col + 2 * LANES <= full_chunks * LANES {
                accumulate_pv::<R, CH, 2, FMA>(o, d, col, &corr, &s, vt, u_lo, u_hi);
                col += 2 * LANES;
            }
            if col < full_chunks * LANES {
                accumulate_pv::<R, CH, 1, FMA>(o, d, col, &corr, &s, vt, u_lo, u_hi);
                col += LANES;
            }
            for t in col..d {
                for r in 0..R {
                    let mut x = o[r * d + t] * corr[r];
                    for c in u_lo..u_hi {
                        x = fmadd::<FMA>(s[r][c / LANES][c % LANES], vt[c * d + t], x);
                    }
                    o[r * d + t] = x;
                }
            }
        }
        j0 += tile;
    }

    for (row, orow) in out.chunks_exact_mut(d).take(rows).enumerate() {
        let inv = if row_sum[row] > 0.0 {
            1.0 / row_sum[row]
        } else {
            0.0
        };
        for (o, &a) in orow.iter_mut().zip(&acc[row * d..(row + 1) * d]) {
            *o = a * inv;
        }
    }
}
