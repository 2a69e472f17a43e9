//! The AMX kernel: `Q K^T` and `P V` as bfloat16 tile products with fp32
//! accumulation (`tdpbf16ps`), the online softmax in fp32 with AVX-512; head
//! dimensions of 32 and 64.
//!
//! # Algorithm
//!
//! Before the tasks run, [`pack_head`] converts each head's keys and values to
//! bfloat16 once, in the layouts the tile product reads as its second operand
//! (pairs of consecutive reduction elements side by side in 32-bit units, the
//! "VNNI" layout of Intel's Architecture Instruction Set Extensions
//! Programming Reference, chapter 3):
//!
//! * keys in blocks of 16 keys x 32 features: tile row `p` holds, for each key
//!   `n`, features `2p` and `2p + 1`;
//! * values in blocks of 32 keys x 16 features: tile row `p` holds, for each
//!   feature `n`, keys `2p` and `2p + 1`.
//!
//! Keys are padded with zeros to a multiple of [`KEY_GROUP`]. A task walks its
//! query rows in groups of 16 (one tile's rows) and the group's keys in chunks
//! of up to [`KEY_CHUNK`]; per chunk it
//!
//! 1. computes the scores of 16 rows x 64 keys at a time in four accumulator
//!    tiles (queries pre-scaled, in bfloat16) and stores them to a strip of
//!    `16 x KEY_CHUNK` floats;
//! 2. adds the key bias, masks keys outside each row's window and past the
//!    sequence, and runs the online softmax of Milakov & Gimelshein (2018)
//!    across chunks in fp32, writing the probabilities in bfloat16 beside the
//!    strip;
//! 3. accumulates `P V` into the group's outputs (`16 x head_dim` floats,
//!    `head_dim / 16` accumulator tiles), 32 keys per tile product.
//!
//! # Numerics
//!
//! Queries (scaled), keys, probabilities and values are rounded to bfloat16
//! (8 significant bits, round to nearest even); products and sums are fp32.
//! Outputs differ from the fp32 kernels by about 1e-2 relative, which is why
//! this kernel runs only where a graph asks for it (the `bf16_products`
//! attribute of the ONNX op) and never under [`KernelIsa::Auto`](super::KernelIsa).
//!
//! # Tile state
//!
//! A task saves the thread's tile configuration, loads its own (palette 1,
//! eight tiles of 16 rows x 64 bytes) where it differs, and puts the saved one
//! back at the end (releasing the tiles where none was configured), so that
//! ONNX Runtime's int8 AMX matmuls, which configure each thread once, find the
//! configuration they left.

use std::arch::asm;
use std::arch::x86_64::*;
use std::cell::Cell;
use std::sync::OnceLock;

use super::avx512::{column_mask, exp_ps_taylor};
use super::intrinsics::EXP_TAYLOR;
use super::intrinsics::{Ranges, Task};
use super::{exp_nonpositive, Problem, LANES};

/// Query rows per group: the rows of one tile.
const ROWS: usize = 16;
/// Keys per strip (a multiple of [`KEY_GROUP`]).
pub(super) const KEY_CHUNK: usize = 512;
/// Keys whose scores one pass of the four accumulator tiles computes; packed
/// keys and values are padded to a multiple of it.
pub(super) const KEY_GROUP: usize = 64;

/// Whether this kernel handles `head_dim`.
pub(super) fn supports(head_dim: usize) -> bool {
    head_dim == 32 || head_dim == 64
}

/// Whether the CPU has AMX-TILE and AMX-BF16 (CPUID leaf 7, EDX bits 24 and
/// 22) and the kernel granted this process the tile data state
/// (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, Linux 5.16+).
/// Asked once per process.
pub(super) fn available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        // CPUID leaf 7 is read only where the maximum leaf reaches it.
        let leaf7 = __cpuid(0).eax >= 7 && {
            let r = __cpuid_count(7, 0);
            r.edx & (1 << 24) != 0 && r.edx & (1 << 22) != 0
        };
        leaf7 && request_tile_data()
    })
}

#[cfg(target_os = "linux")]
fn request_tile_data() -> bool {
    const SYS_ARCH_PRCTL: i64 = 158;
    const ARCH_REQ_XCOMP_PERM: i64 = 0x1023;
    const XFEATURE_XTILEDATA: i64 = 18;
    let ret: i64;
    // SAFETY: the arch_prctl system call with these arguments only changes the
    // process's permitted extended state; it touches no memory of ours.
    unsafe {
        asm!(
            "syscall",
            inlateout("rax") SYS_ARCH_PRCTL => ret,
            in("rdi") ARCH_REQ_XCOMP_PERM,
            in("rsi") XFEATURE_XTILEDATA,
            lateout("rcx") _,
            lateout("r11") _,
            options(nostack),
        );
    }
    ret == 0
}

#[cfg(not(target_os = "linux"))]
fn request_tile_data() -> bool {
    false
}

/// bfloat16 elements of one head's packed keys or values, for `seq_kv` keys.
pub(super) fn packed_len(seq_kv: usize, head_dim: usize) -> usize {
    seq_kv.div_ceil(KEY_GROUP) * KEY_GROUP * head_dim
}

/// Rounds 16 floats to bfloat16 (nearest, ties to even): each 32-bit lane
/// holds the result in its upper 16 bits.
#[inline]
#[target_feature(enable = "avx512f")]
fn round_bf16(x: __m512) -> __m512i {
    let bits = _mm512_castps_si512(x);
    let odd = _mm512_and_si512(_mm512_srli_epi32::<16>(bits), _mm512_set1_epi32(1));
    _mm512_add_epi32(bits, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd))
}

/// 32 floats (`lo`: the first 16, `hi`: the next 16) as 32 bfloat16 in order,
/// scaled by `scale`.
#[inline]
#[target_feature(enable = "avx512f,avx512bw")]
fn bf16x32(lo: __m512, hi: __m512, scale: f32) -> __m512i {
    let sc = _mm512_set1_ps(scale);
    let (lo, hi) = (
        round_bf16(_mm512_mul_ps(lo, sc)),
        round_bf16(_mm512_mul_ps(hi, sc)),
    );
    // The upper halves of the 32 lanes of `lo` and `hi`, in order.
    let idx = _mm512_set_epi16(
        63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25, 23, 21, 19,
        17, 15, 13, 11, 9, 7, 5, 3, 1,
    );
    _mm512_permutex2var_epi16(lo, idx, hi)
}

/// Packs one head's keys and values into `kp` and `vp` ([`packed_len`] elements
/// each, see the module doc; padding keys are zeros): key and value `j` are the
/// `d` floats of `k` and `v` from `first + j * stride`, `j < seq_kv`. The caller
/// checked [`available`]. False when a row lies outside `k` or `v` or a packed
/// buffer is short.
#[allow(clippy::too_many_arguments)]
pub(super) fn pack_head(
    k: &[f32],
    v: &[f32],
    first: usize,
    stride: usize,
    seq_kv: usize,
    d: usize,
    kp: &mut [u16],
    vp: &mut [u16],
) -> bool {
    let end = match seq_kv.checked_sub(1) {
        None => first,
        Some(last) => first + last * stride + d,
    };
    if !supports(d)
        || end > k.len()
        || end > v.len()
        || kp.len() < packed_len(seq_kv, d)
        || vp.len() < kp.len()
    {
        return false;
    }
    // SAFETY: AVX-512 F/BW are part of `available()`'s requirements (checked
    // by the caller); every row read lies below `end`, checked above.
    unsafe { pack_head_avx512(k, v, first, stride, seq_kv, d, kp, vp) };
    true
}

#[target_feature(enable = "avx512f,avx512bw")]
#[allow(clippy::too_many_arguments)]
unsafe fn pack_head_avx512(
    k: &[f32],
    v: &[f32],
    first: usize,
    stride: usize,
    seq_kv: usize,
    d: usize,
    kp: &mut [u16],
    vp: &mut [u16],
) {
    let (kc, vc) = (d / 32, d / 16);
    let padded = seq_kv.div_ceil(KEY_GROUP) * KEY_GROUP;
    let zero = _mm512_setzero_ps();
    let row = |x: &[f32], j: usize, f: usize| {
        if j < seq_kv {
            _mm512_loadu_ps(x.as_ptr().add(first + j * stride + f))
        } else {
            zero
        }
    };
    // Keys: per block of 16 keys and chunk of 32 features, tile row `p`, u32
    // column `n` = features 2p, 2p + 1 of key n: a 16 x 16 transpose of the
    // keys' feature pairs.
    let mut pairs = [[0u32; 16]; 16];
    for kb in 0..padded / 16 {
        for c in 0..kc {
            for (n, pr) in pairs.iter_mut().enumerate() {
                let j = kb * 16 + n;
                let packed = bf16x32(row(k, j, c * 32), row(k, j, c * 32 + 16), 1.0);
                _mm512_storeu_si512(pr.as_mut_ptr().cast(), packed);
            }
            let tile = kp.as_mut_ptr().add((kb * kc + c) * 16 * 32).cast::<u32>();
            for p in 0..16 {
                for (n, pr) in pairs.iter().enumerate() {
                    tile.add(p * 16 + n).write_unaligned(pr[p]);
                }
            }
        }
    }
    // Values: per block of 32 keys and chunk of 16 features, tile row `p` =
    // keys 2p and 2p + 1 interleaved feature by feature.
    let high = _mm512_set1_epi32(0xffff_0000u32 as i32);
    for vb in 0..padded / 32 {
        for c in 0..vc {
            for p in 0..16 {
                let j = vb * 32 + 2 * p;
                let even = _mm512_srli_epi32::<16>(round_bf16(row(v, j, c * 16)));
                let odd = _mm512_and_si512(round_bf16(row(v, j + 1, c * 16)), high);
                let dst = vp.as_mut_ptr().add(((vb * vc + c) * 16 + p) * 32);
                _mm512_storeu_si512(dst.cast(), _mm512_or_si512(even, odd));
            }
        }
    }
}

/// A worker's buffers, kept between its tasks, 64-byte aligned.
#[repr(C, align(64))]
struct Scratch {
    /// Scores, then (in place) fp32 probabilities: `ROWS x KEY_CHUNK`.
    strip: [f32; ROWS * KEY_CHUNK],
    /// Probabilities in bfloat16: `ROWS x KEY_CHUNK`.
    probs: [u16; ROWS * KEY_CHUNK],
    /// The group's scaled queries in bfloat16: `ROWS x 64`.
    queries: [u16; ROWS * 64],
    /// The group's un-normalised outputs: `ROWS x 64`.
    out: [f32; ROWS * 64],
}

thread_local! {
    static SCRATCH: Cell<Option<Box<Scratch>>> = const { Cell::new(None) };
}

/// The 64-byte tile configuration of this kernel: palette 1, tiles 0-7 of 16
/// rows x 64 bytes.
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

impl TileConfig {
    fn ours() -> Self {
        let mut b = [0u8; 64];
        b[0] = 1;
        for t in 0..8 {
            b[16 + 2 * t] = 64;
            b[48 + t] = ROWS as u8;
        }
        TileConfig(b)
    }
}

/// Loads this kernel's tile configuration for the life of the guard, then
/// restores the thread's previous one.
struct TileGuard {
    saved: TileConfig,
    changed: bool,
}

impl TileGuard {
    /// # Safety
    /// The CPU must support AMX and the process hold the tile data permission ([`available`]).
    unsafe fn enter() -> Self {
        let mut saved = TileConfig([0; 64]);
        let ours = TileConfig::ours();
        asm!("sttilecfg [{0}]", in(reg) saved.0.as_mut_ptr(), options(nostack));
        let changed = saved.0 != ours.0;
        if changed {
            asm!("ldtilecfg [{0}]", in(reg) ours.0.as_ptr(), options(nostack));
        }
        TileGuard { saved, changed }
    }
}

impl Drop for TileGuard {
    fn drop(&mut self) {
        if !self.changed {
            return;
        }
        // SAFETY: `enter` ran, so AMX is usable; the saved configuration came
        // from `sttilecfg` on this thread.
        unsafe {
            if self.saved.0[0] == 0 {
                asm!("tilerelease", options(nostack));
            } else {
                asm!("ldtilecfg [{0}]", in(reg) self.saved.0.as_ptr(), options(nostack));
            }
        }
    }
}

/// `tmm{acc} += tmm{a} · tmm{b}` after loading tile `b` from `ptr` (row stride `stride` bytes).
macro_rules! load_dp {
    ($acc:literal, $a:literal, $b:literal, $ptr:expr, $stride:expr) => {
        asm!(
            concat!("tileloadd tmm", $b, ", [{p} + {s}*1]"),
            concat!("tdpbf16ps tmm", $acc, ", tmm", $a, ", tmm", $b),
            p = in(reg) $ptr, s = in(reg) $stride,
            options(nostack),
        )
    };
}

/// Loads tile `t` from `ptr`, or stores it there (row stride `stride` bytes).
macro_rules! tile_op {
    (load $t:literal, $ptr:expr, $stride:expr) => {
        asm!(
            concat!("tileloadd tmm", $t, ", [{p} + {s}*1]"),
            p = in(reg) $ptr, s = in(reg) $stride,
            options(nostack),
        )
    };
    (store $t:literal, $ptr:expr, $stride:expr) => {
        asm!(
            concat!("tilestored [{p} + {s}*1], tmm", $t),
            p = in(reg) $ptr, s = in(reg) $stride,
            options(nostack),
        )
    };
}

/// Runs one task; the caller checked [`available`] and [`supports`], and
/// packed every head with [`pack_head`] into `p.kp` / `p.vp`.
pub(super) fn task(p: &Problem<'_>, bh: usize, block: usize, out: &mut [f32]) {
    let d = p.shape.head_dim;
    let per_head = packed_len(p.shape.seq_kv, d);
    if !supports(d) || p.kp.len() < (bh + 1) * per_head || p.vp.len() < (bh + 1) * per_head {
        return;
    }
    let Some(t) = Task::new(p, bh, block, out.len()) else {
        return;
    };
    let kp = &p.kp[bh * per_head..(bh + 1) * per_head];
    let vp = &p.vp[bh * per_head..(bh + 1) * per_head];
    let mut scratch = SCRATCH.take().unwrap_or_else(|| {
        Box::new(Scratch {
            strip: [0.0; ROWS * KEY_CHUNK],
            probs: [0; ROWS * KEY_CHUNK],
            queries: [0; ROWS * 64],
            out: [0.0; ROWS * 64],
        })
    });
    // SAFETY: `select_kernel` hands out this kernel only after `available()`
    // (AMX-TILE, AMX-BF16, the tile data permission) and `KernelIsa::Avx512`'s
    // feature checks; every tile load and store below stays inside `kp`, `vp`
    // (lengths checked above, keys padded to KEY_GROUP) or `scratch`.
    unsafe {
        let _tiles = TileGuard::enter();
        if d == 32 {
            task_groups::<1>(p, &t, kp, vp, &mut scratch, out);
        } else {
            task_groups::<2>(p, &t, kp, vp, &mut scratch, out);
        }
    }
    SCRATCH.set(Some(scratch));
}

/// The task's row groups for a head dimension of `32 * KC`.
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma")]
unsafe fn task_groups<const KC: usize>(
    p: &Problem<'_>,
    t: &Task<'_>,
    kp: &[u16],
    vp: &[u16],
    s: &mut Scratch,
    out: &mut [f32],
) {
    let d = 32 * KC;
    let seq_kv = t.seq_kv;
    let padded = seq_kv.div_ceil(KEY_GROUP) * KEY_GROUP;
    let scale = p.params.scale;
    for r0 in (0..t.rows).step_by(ROWS) {
        let nr = ROWS.min(t.rows - r0);
        // Scaled queries in bfloat16, row stride `d` elements (zeros past the task).
        for r in 0..ROWS {
            for c in 0..KC {
                let dst = s.queries.as_mut_ptr().add(r * d + c * 32);
                let at = (r0 + r) * t.q_stride + c * 32;
                let packed = match t.q.get(at..at + 32) {
                    Some(x) if r < nr => bf16x32(
                        _mm512_loadu_ps(x.as_ptr()),
                        _mm512_loadu_ps(x.as_ptr().add(16)),
                        scale,
                    ),
                    _ => _mm512_setzero_si512(),
                };
                _mm512_storeu_si512(dst.cast(), packed);
            }
        }
        s.out[..ROWS * d].fill(0.0);
        let ranges = Ranges::<ROWS>::of(p, t, r0, nr);
        let mut m = [f32::NEG_INFINITY; ROWS];
        let mut l = [0.0f32; ROWS];
        let mut c0 = ranges.g_lo - ranges.g_lo % KEY_GROUP;
        while c0 < ranges.g_hi {
            let c1 = (c0 + KEY_CHUNK).min(ranges.g_hi);
            let cols = (c1 - c0).div_ceil(KEY_GROUP) * KEY_GROUP;
            if c0 + cols > padded {
                return;
            }
            scores::<KC>(s, kp, c0, cols);
            softmax_chunk(t, &ranges, s, c0, c1, cols, d, &mut m, &mut l);
            pv::<KC>(s, vp, c0, cols);
            c0 = c1;
        }
        for (r, &sum) in l.iter().enumerate().take(nr) {
            let inv = if sum > 0.0 { 1.0 / sum } else { 0.0 };
            let Some(orow) = out.get_mut((r0 + r) * d..(r0 + r + 1) * d) else {
                return;
            };
            for (o, &x) in orow.iter_mut().zip(&s.out[r * d..(r + 1) * d]) {
                *o = x * inv;
            }
        }
    }
}

/// Step 1: scores of the 16 rows against keys `c0 .. c0 + cols` into the
/// strip. Tiles 0-3 accumulate four blocks of 16 keys; the queries sit in
/// tiles 4 and 6 (feature chunks), the key blocks alternate between tiles 5
/// and 7 so that a load need not wait for the previous product to read its tile.
#[inline]
unsafe fn scores<const KC: usize>(s: &mut Scratch, kp: &[u16], c0: usize, cols: usize) {
    let q_stride = 64 * KC;
    let strip_stride = KEY_CHUNK * 4;
    const TILE_BYTES: usize = 64;
    let q = s.queries.as_ptr();
    tile_op!(load "4", q, q_stride);
    if KC == 2 {
        tile_op!(load "6", q.add(32), q_stride);
    }
    for g in 0..cols / KEY_GROUP {
        let kb0 = (c0 + g * KEY_GROUP) / 16;
        let block = |i: usize, c: usize| kp.as_ptr().add(((kb0 + i) * KC + c) * 16 * 32);
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            options(nostack)
        );
        load_dp!("0", "4", "5", block(0, 0), TILE_BYTES);
        load_dp!("1", "4", "7", block(1, 0), TILE_BYTES);
        load_dp!("2", "4", "5", block(2, 0), TILE_BYTES);
        load_dp!("3", "4", "7", block(3, 0), TILE_BYTES);
        if KC == 2 {
            load_dp!("0", "6", "5", block(0, 1), TILE_BYTES);
            load_dp!("1", "6", "7", block(1, 1), TILE_BYTES);
            load_dp!("2", "6", "5", block(2, 1), TILE_BYTES);
            load_dp!("3", "6", "7", block(3, 1), TILE_BYTES);
        }
        let dst = s.strip.as_mut_ptr().add(g * KEY_GROUP);
        tile_op!(store "0", dst, strip_stride);
        tile_op!(store "1", dst.add(16), strip_stride);
        tile_op!(store "2", dst.add(32), strip_stride);
        tile_op!(store "3", dst.add(48), strip_stride);
    }
}

/// Step 3: `out += P V` over keys `c0 .. c0 + cols` (a multiple of 64). Head
/// dim 32: two accumulator pairs (tiles 0-1 for even 32-key steps, 2-3 for
/// odd ones, summed at the end) so that consecutive products do not wait on
/// each other; head dim 64: tiles 0-3, one per 16 features.
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn pv<const KC: usize>(s: &mut Scratch, vp: &[u16], c0: usize, cols: usize) {
    let d = 32 * KC;
    let o_stride = d * 4;
    let p_stride = KEY_CHUNK * 2;
    const TILE_BYTES: usize = 64;
    let vc = 2 * KC;
    let probs = s.probs.as_ptr();
    let block = |js: usize, c: usize| vp.as_ptr().add((((c0 / 32 + js) * vc) + c) * 16 * 32);
    if KC == 1 {
        asm!(
            "tilezero tmm0",
            "tilezero tmm1",
            "tilezero tmm2",
            "tilezero tmm3",
            options(nostack)
        );
        for js in (0..cols / 32).step_by(2) {
            tile_op!(load "4", probs.add(js * 32), p_stride);
            tile_op!(load "6", probs.add(js * 32 + 32), p_stride);
            load_dp!("0", "4", "5", block(js, 0), TILE_BYTES);
            load_dp!("2", "6", "7", block(js + 1, 0), TILE_BYTES);
            load_dp!("1", "4", "5", block(js, 1), TILE_BYTES);
            load_dp!("3", "6", "7", block(js + 1, 1), TILE_BYTES);
        }
        let mut parts = [0.0f32; 4 * 256];
        let pp = parts.as_mut_ptr();
        tile_op!(store "0", pp, TILE_BYTES);
        tile_op!(store "1", pp.add(256), TILE_BYTES);
        tile_op!(store "2", pp.add(512), TILE_BYTES);
        tile_op!(store "3", pp.add(768), TILE_BYTES);
        for r in 0..ROWS {
            for c in 0..2 {
                let even = _mm512_loadu_ps(pp.add(c * 256 + r * 16));
                let odd = _mm512_loadu_ps(pp.add(512 + c * 256 + r * 16));
                let o = s.out.as_mut_ptr().add(r * d + c * 16);
                _mm512_storeu_ps(
                    o,
                    _mm512_add_ps(_mm512_loadu_ps(o), _mm512_add_ps(even, odd)),
                );
            }
        }
    } else {
        let o = s.out.as_mut_ptr();
        tile_op!(load "0", o, o_stride);
        tile_op!(load "1", o.add(16), o_stride);
        tile_op!(load "2", o.add(32), o_stride);
        tile_op!(load "3", o.add(48), o_stride);
        for js in 0..cols / 32 {
            tile_op!(load "4", probs.add(js * 32), p_stride);
            load_dp!("0", "4", "5", block(js, 0), TILE_BYTES);
            load_dp!("1", "4", "7", block(js, 1), TILE_BYTES);
            load_dp!("2", "4", "5", block(js, 2), TILE_BYTES);
            load_dp!("3", "4", "7", block(js, 3), TILE_BYTES);
        }
        tile_op!(store "0", o, o_stride);
        tile_op!(store "1", o.add(16), o_stride);
        tile_op!(store "2", o.add(32), o_stride);
        tile_op!(store "3", o.add(48), o_stride);
    }
}

/// `exp(x)` lane-wise for `x <= 0` (and `-inf`), for probabilities rounded to
/// bfloat16 next: the degree-5 Taylor polynomial (relative error below 3e-6,
/// against bfloat16's 4e-3).
#[inline]
#[target_feature(enable = "avx512f")]
fn exp_ps(x: __m512) -> __m512 {
    exp_ps_taylor(x, &EXP_TAYLOR[2..])
}

/// Step 2: bias and masks on the strip's scores, the online softmax across
/// chunks (rescaling each row's outputs and sum), probabilities into
/// `s.probs` in bfloat16 (zeros where masked and past `c1`).
#[inline]
#[target_feature(enable = "avx512f,avx512vl,avx512dq,avx512bw")]
#[allow(clippy::too_many_arguments)]
fn softmax_chunk(
    t: &Task<'_>,
    ranges: &Ranges<ROWS>,
    s: &mut Scratch,
    c0: usize,
    c1: usize,
    cols: usize,
    d: usize,
    m: &mut [f32; ROWS],
    l: &mut [f32; ROWS],
) {
    let neg_inf = _mm512_set1_ps(f32::NEG_INFINITY);
    for r in 0..ROWS {
        let (lo, hi) = (ranges.lo[r].max(c0), ranges.hi[r].min(c1));
        let row = &mut s.strip[r * KEY_CHUNK..r * KEY_CHUNK + cols];
        let prow = &mut s.probs[r * KEY_CHUNK..r * KEY_CHUNK + cols];
        // Bias and masks, the chunk's row maximum.
        let mut cmax = neg_inf;
        for (vi, x) in row.chunks_exact_mut(LANES).enumerate() {
            let col = c0 + vi * LANES;
            let mask = if lo <= col && col + LANES <= hi {
                u16::MAX
            } else {
                column_mask(col, lo, hi)
            };
            // SAFETY: `x` is 16 floats; the bias holds `seq_kv >= hi` floats and
            // the masked load reads only lanes below `hi`.
            unsafe {
                let bias_v = match t.bias {
                    Some(bias) if mask != 0 => {
                        _mm512_maskz_loadu_ps(mask, bias.as_ptr().wrapping_add(col))
                    }
                    _ => _mm512_setzero_ps(),
                };
                let sv = _mm512_mask_add_ps(neg_inf, mask, _mm512_loadu_ps(x.as_ptr()), bias_v);
                cmax = _mm512_max_ps(cmax, sv);
                _mm512_storeu_ps(x.as_mut_ptr(), sv);
            }
        }
        let m_new = m[r].max(_mm512_reduce_max_ps(cmax));
        if m_new == f32::NEG_INFINITY {
            prow.fill(0);
            continue;
        }
        let corr = exp_nonpositive(m[r] - m_new);
        for o in &mut s.out[r * d..(r + 1) * d] {
            *o *= corr;
        }
        let m_v = _mm512_set1_ps(m_new);
        let mut sum = _mm512_setzero_ps();
        for (x, pb) in row.chunks_exact(LANES).zip(prow.chunks_exact_mut(LANES)) {
            // SAFETY: `x` is 16 floats, `pb` 16 u16.
            unsafe {
                let e = exp_ps(_mm512_sub_ps(_mm512_loadu_ps(x.as_ptr()), m_v));
                sum = _mm512_add_ps(sum, e);
                let rounded = _mm512_srli_epi32::<16>(round_bf16(e));
                _mm256_storeu_si256(pb.as_mut_ptr().cast(), _mm512_cvtepi32_epi16(rounded));
            }
        }
        l[r] = l[r] * corr + _mm512_reduce_add_ps(sum);
        m[r] = m_new;
    }
}
