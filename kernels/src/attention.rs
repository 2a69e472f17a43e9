//! The CPU attention kernel: tiled scaled-dot-product attention with an online
//! softmax, so that no `seq x seq` score matrix is ever held in memory.
//!
//! # Algorithm
//!
//! For every query row `i` the kernel walks the key axis in tiles of
//! [`KEY_TILE`] columns and keeps three running quantities: the row maximum
//! `m`, the softmax denominator `l` and the un-normalised output `o`
//! (`head_dim` floats). For a tile with scores `s_j` (already scaled and
//! biased) it computes `m' = max(m, max_j s_j)`, rescales `l` and `o` by
//! `exp(m - m')`, and adds `sum_j exp(s_j - m')` to `l` and
//! `sum_j exp(s_j - m') * v_j` to `o`. After the last tile `o / l` is the exact
//! softmax-weighted average. This is the *online softmax* of Milakov &
//! Gimelshein, "Online normalizer calculation for softmax" (2018), organised in
//! query and key tiles as in Dao et al., "FlashAttention: Fast and
//! Memory-Efficient Exact Attention with IO-Awareness" (NeurIPS 2022).
//!
//! Memory: besides the inputs and the output, each worker holds one key tile
//! transposed (`head_dim x KEY_TILE` floats), one score row (`KEY_TILE`
//! floats) and the output accumulator of its query block (`QUERY_BLOCK x
//! head_dim` floats): `O(seq)` overall, independent of `seq x seq`.
//!
//! Work is split into tasks of [`QUERY_BLOCK`] query rows of one
//! `(batch, head)` pair; tasks run on a [`Parallel`] runner (ONNX Runtime's
//! intra-op thread pool inside a session, scoped threads elsewhere).
//!
//! Sliding windows are handled by never visiting key tiles outside a query
//! block's window, so windowed layers cost `O(seq x window)`.
//!
//! # Numerics
//!
//! fp32 inputs, fp32 accumulation. `exp` is a branch-free polynomial
//! ([`exp_nonpositive`], relative error below 3e-7) that LLVM vectorises; the
//! inner loops are written over fixed-width lanes so that they vectorise
//! without reassociating floating-point sums. On x86-64 the kernel is compiled
//! three times (baseline, AVX2+FMA, AVX-512) and the widest one the CPU
//! supports is chosen at run time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

pub use self::layout::Layout;
use self::layout::{bhsd_into_bshd, bshd_into_bhsd, OutRows};
pub use self::parallel::{Parallel, ScopedThreads, Sequential};
pub use self::reference::naive_attention;

/// Query rows per task (and per output accumulator block).
pub const QUERY_BLOCK: usize = 64;
/// Key columns per tile, at most (32 on AVX2 and portable builds).
pub const KEY_TILE: usize = 64;
/// Floats per lane group: one AVX-512 register, two AVX2 or four SSE ones.
const LANES: usize = 16;

/// Errors from the attention kernels. All are caused by inconsistent inputs.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AttentionError {
    /// A buffer does not have the length the shape implies.
    #[error("{what} has {actual} elements, expected {expected} for shape {shape:?}")]
    Length {
        /// Which buffer (`"q"`, `"k"`, `"v"`, `"bias"`, `"out"`).
        what: &'static str,
        /// Elements found.
        actual: usize,
        /// Elements the shape requires.
        expected: usize,
        /// The attention shape the lengths were checked against.
        shape: AttentionShape,
    },
    /// The shape itself is unusable (for example `head_dim == 0`).
    #[error("invalid attention shape {shape:?}: {reason}")]
    Shape {
        /// The rejected shape.
        shape: AttentionShape,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A scale that is not a finite number.
    #[error("attention scale must be finite, got {0}")]
    Scale(String),
    /// The parallel runner failed (for example ONNX Runtime's thread pool).
    #[error("parallel runner failed: {0}")]
    Parallel(String),
    /// A worker panicked or a result slot was poisoned.
    #[error("attention worker failed: {0}")]
    Worker(&'static str),
    /// The requested instruction-set variant does not run on this CPU.
    #[error("kernel variant {0:?} is not supported by this CPU")]
    Unsupported(KernelIsa),
}

/// Instruction-set variant of the CPU kernel. [`KernelIsa::Auto`] (what
/// [`flash_attention`] uses) picks the widest one the CPU supports; the
/// others exist so that every variant can be tested and measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KernelIsa {
    /// The widest supported variant.
    Auto,
    /// Baseline x86-64 (SSE2) or non-x86 code, one query row at a time.
    Portable,
    /// AVX2 + FMA, two query rows per register block.
    Avx2,
    /// AVX-512 (F, VL, DQ, BW), four query rows per register block.
    Avx512,
    /// AMX tile products in bfloat16 (head dims 32 and 64; others run
    /// [`KernelIsa::Avx512`]), on top of AVX-512. Less precise than the fp32
    /// variants (about 1e-2 relative): never chosen by [`KernelIsa::Auto`].
    AmxBf16,
}

impl KernelIsa {
    /// Whether this variant can run on the current CPU.
    pub fn is_available(self) -> bool {
        match self {
            KernelIsa::Auto | KernelIsa::Portable => true,
            #[cfg(target_arch = "x86_64")]
            KernelIsa::Avx2 => {
                std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            KernelIsa::Avx512 => {
                std::arch::is_x86_feature_detected!("avx512f")
                    && std::arch::is_x86_feature_detected!("avx512vl")
                    && std::arch::is_x86_feature_detected!("avx512dq")
                    && std::arch::is_x86_feature_detected!("avx512bw")
                    && std::arch::is_x86_feature_detected!("avx2")
                    && std::arch::is_x86_feature_detected!("fma")
            }
            #[cfg(target_arch = "x86_64")]
            KernelIsa::AmxBf16 => KernelIsa::Avx512.is_available() && amx::available(),
            #[cfg(not(target_arch = "x86_64"))]
            KernelIsa::Avx2 | KernelIsa::Avx512 | KernelIsa::AmxBf16 => false,
        }
    }

    /// The variant [`KernelIsa::Auto`] resolves to on this CPU.
    pub fn detect() -> KernelIsa {
        [KernelIsa::Avx512, KernelIsa::Avx2]
            .into_iter()
            .find(|isa| isa.is_available())
            .unwrap_or(KernelIsa::Portable)
    }
}

/// A sliding attention window in key positions relative to the query position.
///
/// Query `i` may attend to key `j` iff `i - left <= j <= i + right`; `None`
/// means unbounded on that side. ModernBERT's local attention of 128 tokens is
/// `Window { left: Some(64), right: Some(64) }`; global attention is
/// [`Window::GLOBAL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Window {
    /// Keys at most this many positions before the query are visible.
    pub left: Option<usize>,
    /// Keys at most this many positions after the query are visible.
    pub right: Option<usize>,
}

impl Window {
    /// No window: every key is visible (subject to the padding bias).
    pub const GLOBAL: Window = Window {
        left: None,
        right: None,
    };

    /// A window of `half` positions on each side of the query.
    pub const fn symmetric(half: usize) -> Window {
        Window {
            left: Some(half),
            right: Some(half),
        }
    }

    /// Whether this window is unbounded on both sides.
    pub const fn is_global(&self) -> bool {
        self.left.is_none() && self.right.is_none()
    }

    /// Whether query position `i` may attend to key position `j`.
    pub fn allows(&self, i: usize, j: usize) -> bool {
        let left_ok = self.left.is_none_or(|l| j + l >= i);
        let right_ok = self.right.is_none_or(|r| j <= i + r);
        left_ok && right_ok
    }

    /// The half-open range of key positions visible from query `i` among
    /// `0..seq_kv`.
    pub fn key_range(&self, i: usize, seq_kv: usize) -> (usize, usize) {
        let lo = self.left.map_or(0, |l| i.saturating_sub(l));
        let hi = self.right.map_or(seq_kv, |r| {
            i.saturating_add(r).saturating_add(1).min(seq_kv)
        });
        (lo.min(seq_kv), hi)
    }
}

/// The dimensions of one attention call.
///
/// Q and the output are `[batch, heads, seq_q, head_dim]`; K and V are
/// `[batch, heads, seq_kv, head_dim]`, all dense row-major fp32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AttentionShape {
    /// Batch size.
    pub batch: usize,
    /// Attention heads.
    pub heads: usize,
    /// Query positions.
    pub seq_q: usize,
    /// Key/value positions.
    pub seq_kv: usize,
    /// Features per head.
    pub head_dim: usize,
}

impl AttentionShape {
    fn q_len(&self) -> Option<usize> {
        self.batch
            .checked_mul(self.heads)?
            .checked_mul(self.seq_q)?
            .checked_mul(self.head_dim)
    }

    fn kv_len(&self) -> Option<usize> {
        self.batch
            .checked_mul(self.heads)?
            .checked_mul(self.seq_kv)?
            .checked_mul(self.head_dim)
    }
}

/// Scale and window of an attention call.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionParams {
    /// Multiplier of `q . k` before the bias is added, usually
    /// `1 / sqrt(head_dim)`.
    pub scale: f32,
    /// Sliding window; [`Window::GLOBAL`] for full attention.
    pub window: Window,
}

/// An additive key-padding bias, broadcast over heads and query rows: the
/// logical shape is `[batch, 1, 1, seq_kv]` (or `[1, 1, 1, seq_kv]` when
/// `batch_stride == 0`). Typical values are `0` for real tokens and a large
/// negative number (or `-inf`) for padding.
#[derive(Debug, Clone, Copy)]
pub struct KeyBias<'a> {
    /// The bias values, `seq_kv` per batch row.
    pub data: &'a [f32],
    /// Distance between batch rows in `data`: `seq_kv`, or `0` to share one
    /// row across the batch.
    pub batch_stride: usize,
}

/// Validated inputs shared by all tasks of one call.
struct Problem<'a> {
    /// Queries in `layout`.
    q: &'a [f32],
    layout: Layout,
    /// K transposed tile by tile: for head `bh`, tile `ti`, feature `t`:
    /// `kt[((bh * tiles + ti) * head_dim + t) * CH + ch][l] = k[bh][ti * tile + ch * LANES + l][t]`
    /// (zero past the end), so that each task reads key tiles ready for the
    /// register-blocked `Q K^T`.
    kt: &'a [Lanes],
    tile: usize,
    /// Keys and values per head in the AMX kernel's bfloat16 tile layouts
    /// (`amx::pack_head`, `amx::packed_len` elements per head); empty for the
    /// other kernels.
    kp: &'a [u16],
    vp: &'a [u16],
    v: &'a [f32],
    bias: Option<KeyBias<'a>>,
    shape: AttentionShape,
    params: AttentionParams,
}

fn validate(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    bias: Option<&KeyBias<'_>>,
    shape: AttentionShape,
    params: &AttentionParams,
    out_len: usize,
) -> Result<(), AttentionError> {
    if !params.scale.is_finite() {
        return Err(AttentionError::Scale(params.scale.to_string()));
    }
    let (Some(q_len), Some(kv_len)) = (shape.q_len(), shape.kv_len()) else {
        return Err(AttentionError::Shape {
            shape,
            reason: "element count overflows usize",
        });
    };
    let check = |what, actual, expected| {
        if actual == expected {
            Ok(())
        } else {
            Err(AttentionError::Length {
                what,
                actual,
                expected,
                shape,
            })
        }
    };
    check("q", q.len(), q_len)?;
    check("k", k.len(), kv_len)?;
    check("v", v.len(), kv_len)?;
    check("out", out_len, q_len)?;
    if let Some(b) = bias {
        if b.batch_stride != 0 && b.batch_stride != shape.seq_kv {
            return Err(AttentionError::Shape {
                shape,
                reason: "bias batch stride must be 0 or seq_kv",
            });
        }
        let expected = if b.batch_stride == 0 {
            shape.seq_kv
        } else {
            shape.batch.saturating_mul(shape.seq_kv)
        };
        check("bias", b.data.len(), expected)?;
    }
    Ok(())
}

/// Fused attention: `out = softmax(scale * q k^T + bias, masked to the window) v`.
///
/// * `q`, `out`: `[batch, heads, seq_q, head_dim]`; `k`, `v`:
///   `[batch, heads, seq_kv, head_dim]`; dense row-major fp32.
/// * `bias`: optional key-padding bias `[batch | 1, 1, 1, seq_kv]`.
/// * Query position `i` and key position `j` are compared directly for the
///   window (self-attention alignment).
///
/// A query row whose visible keys all carry a bias of `-inf` gets an output
/// of zeros (the convention of PyTorch's SDPA exports). With a finite large
/// negative bias such a row averages the visible keys uniformly.
///
/// Errors: [`AttentionError`] when buffer lengths do not match `shape`, the
/// scale is not finite, or the parallel runner fails.
#[allow(clippy::too_many_arguments)]
pub fn flash_attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    bias: Option<KeyBias<'_>>,
    shape: AttentionShape,
    params: AttentionParams,
    out: &mut [f32],
    runner: &dyn Parallel,
) -> Result<(), AttentionError> {
    flash_attention_with_isa(KernelIsa::Auto, q, k, v, bias, shape, params, out, runner)
}

/// [`flash_attention`] with an explicit instruction-set variant.
///
/// Errors: as [`flash_attention`], plus [`AttentionError::Unsupported`] when
/// the CPU lacks the variant's instructions.
#[allow(clippy::too_many_arguments)]
pub fn flash_attention_with_isa(
    isa: KernelIsa,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    bias: Option<KeyBias<'_>>,
    shape: AttentionShape,
    params: AttentionParams,
    out: &mut [f32],
    runner: &dyn Parallel,
) -> Result<(), AttentionError> {
    flash_attention_in(isa, Layout::Bhsd, q, k, v, bias, shape, params, out, runner)
}

/// [`flash_attention_with_isa`] with Q, K, V and the output in `layout`
/// (the same element counts in either).
///
/// Errors: as [`flash_attention_with_isa`].
#[allow(clippy::too_many_arguments)]
pub fn flash_attention_in(
    isa: KernelIsa,
    layout: Layout,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    bias: Option<KeyBias<'_>>,
    shape: AttentionShape,
    params: AttentionParams,
    out: &mut [f32],
    runner: &dyn Parallel,
) -> Result<(), AttentionError> {
    if !isa.is_available() {
        return Err(AttentionError::Unsupported(isa));
    }
    validate(q, k, v, bias.as_ref(), shape, &params, out.len())?;
    if out.is_empty() {
        return Ok(());
    }
    if shape.head_dim == 0 {
        return Err(AttentionError::Shape {
            shape,
            reason: "head_dim must be positive",
        });
    }
    let d = shape.head_dim;
    let kernel = select_kernel(isa, d);
    let mut ws = WORKSPACE.take();
    let result = if layout == Layout::Bshd && !kernel.bf16 {
        // The fp32 kernels read each head's rows contiguously: they run on copies
        // in Layout::Bhsd, kept in the workspace like the other buffers.
        let mut copies = std::mem::take(&mut ws.copies);
        let [qt, kt, vt, ot] = &mut copies;
        bshd_into_bhsd(q, qt, shape.seq_q, shape.heads, d);
        bshd_into_bhsd(k, kt, shape.seq_kv, shape.heads, d);
        bshd_into_bhsd(v, vt, shape.seq_kv, shape.heads, d);
        ot.resize(out.len(), 0.0);
        let result = run_tasks(
            kernel,
            Layout::Bhsd,
            qt,
            kt,
            vt,
            bias,
            shape,
            params,
            ot,
            runner,
            &mut ws,
        );
        if result.is_ok() {
            bhsd_into_bshd(ot, out, shape.seq_q, shape.heads, d);
        }
        ws.copies = copies;
        result
    } else {
        run_tasks(
            kernel, layout, q, k, v, bias, shape, params, out, runner, &mut ws,
        )
    };
    if ws.bytes() <= WORKSPACE_KEEP_BYTES {
        WORKSPACE.set(ws);
    }
    result
}

/// The buffers of one call besides its inputs and output, kept by the calling
/// thread between calls (up to [`WORKSPACE_KEEP_BYTES`]): allocated afresh, the
/// packed keys and values alone (about 200 KB for 256 tokens of 12 heads) cost
/// page faults on every call.
#[derive(Default)]
struct Workspace {
    /// Packed keys and values (the AMX kernel).
    kp: Vec<u16>,
    vp: Vec<u16>,
    /// Transposed key tiles (the fp32 kernels).
    kt: Vec<Lanes>,
    /// Output slots of a `Layout::Bshd` call.
    slots: Vec<f32>,
    /// Q, K, V and the output of a `Layout::Bshd` call to the fp32 kernels, in
    /// `Layout::Bhsd`.
    copies: [Vec<f32>; 4],
}

impl Workspace {
    fn bytes(&self) -> usize {
        (self.kp.capacity() + self.vp.capacity()) * 2
            + self.kt.capacity() * std::mem::size_of::<Lanes>()
            + (self.slots.capacity() + self.copies.iter().map(Vec::capacity).sum::<usize>()) * 4
    }
}

/// A workspace larger than this (long-context calls) is freed after its call.
const WORKSPACE_KEEP_BYTES: usize = 16 << 20;

thread_local! {
    static WORKSPACE: std::cell::Cell<Workspace> = std::cell::Cell::new(Workspace::default());
}

/// The tasks of a checked call with `kernel`, its buffers in `ws`.
#[allow(clippy::too_many_arguments)]
fn run_tasks(
    kernel: TaskKernel,
    layout: Layout,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    bias: Option<KeyBias<'_>>,
    shape: AttentionShape,
    params: AttentionParams,
    out: &mut [f32],
    runner: &dyn Parallel,
    ws: &mut Workspace,
) -> Result<(), AttentionError> {
    let d = shape.head_dim;
    let blocks_per_head = shape.seq_q.div_ceil(QUERY_BLOCK);
    // One output slot per task: the tasks' rows are contiguous and in order. In
    // Layout::Bshd the slots are a scratch buffer each task copies its rows out of.
    let Workspace {
        kp,
        vp,
        kt,
        slots: scratch,
        ..
    } = ws;
    if layout == Layout::Bshd {
        scratch.resize(out.len(), 0.0);
    }
    let out_rows = match layout {
        Layout::Bhsd => None,
        Layout::Bshd => Some(OutRows {
            ptr: out.as_mut_ptr(),
            len: out.len(),
        }),
    };
    let slot_buffer: &mut [f32] = match layout {
        Layout::Bhsd => out,
        Layout::Bshd => &mut scratch[..],
    };
    let slots: Vec<Mutex<&mut [f32]>> = slot_buffer
        .chunks_mut(shape.seq_q * d)
        .flat_map(|head| head.chunks_mut(QUERY_BLOCK * d))
        .map(Mutex::new)
        .collect();
    let failed = AtomicUsize::new(0);
    if kernel.bf16 {
        pack_bf16(k, v, layout, shape, runner, kp, vp)?;
    } else {
        kp.clear();
        vp.clear();
    }
    // Transpose K once per head (linear memory, the size of K).
    let tile = kernel.tile;
    let chunks = tile / LANES;
    let tiles = shape.seq_kv.div_ceil(tile);
    let per_head = if kernel.bf16 { 0 } else { tiles * d * chunks };
    // Zeros past the last key of each head: cleared, then resized.
    kt.clear();
    kt.resize(shape.batch * shape.heads * per_head, [0.0; LANES]);
    if per_head > 0 {
        let kt_slots: Vec<Mutex<&mut [Lanes]>> = kt.chunks_mut(per_head).map(Mutex::new).collect();
        let transpose = |bh: usize| {
            let Some(Ok(mut dst)) = kt_slots.get(bh).map(|s| s.lock()) else {
                failed.fetch_add(1, Ordering::Relaxed);
                return;
            };
            let src = &k[bh * shape.seq_kv * d..(bh + 1) * shape.seq_kv * d];
            for (j, krow) in src.chunks_exact(d).enumerate() {
                let (ti, c) = (j / tile, j % tile);
                for (t, &x) in krow.iter().enumerate() {
                    dst[(ti * d + t) * chunks + c / LANES][c % LANES] = x;
                }
            }
        };
        runner.for_each(kt_slots.len(), &transpose)?;
    }
    let problem = Problem {
        q,
        layout,
        kt,
        tile,
        kp,
        vp,
        v,
        bias,
        shape,
        params,
    };
    let task = |t: usize| {
        let bh = t / blocks_per_head;
        let block = t % blocks_per_head;
        match slots.get(t).map(|s| s.lock()) {
            Some(Ok(mut slot)) => {
                (kernel.task)(&problem, bh, block, &mut slot);
                if let Some(rows) = &out_rows {
                    rows.write_task(&shape, bh, block, &slot);
                }
            }
            _ => {
                failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    };
    runner.for_each(slots.len(), &task)?;
    if failed.load(Ordering::Relaxed) > 0 {
        return Err(AttentionError::Worker("output slot unavailable"));
    }
    Ok(())
}

/// Every head's keys and values in the AMX kernel's bfloat16 layouts
/// (`amx::pack_head`), packed on `runner`, one head per task.
#[cfg(target_arch = "x86_64")]
fn pack_bf16(
    k: &[f32],
    v: &[f32],
    layout: Layout,
    shape: AttentionShape,
    runner: &dyn Parallel,
    kp: &mut Vec<u16>,
    vp: &mut Vec<u16>,
) -> Result<(), AttentionError> {
    let d = shape.head_dim;
    let per_head = amx::packed_len(shape.seq_kv, d);
    let heads = shape.batch * shape.heads;
    // `pack_head` writes every element, padding included.
    kp.resize(heads * per_head, 0);
    vp.resize(heads * per_head, 0);
    if per_head == 0 {
        return Ok(());
    }
    let slots: Vec<Mutex<(&mut [u16], &mut [u16])>> = kp
        .chunks_mut(per_head)
        .zip(vp.chunks_mut(per_head))
        .map(Mutex::new)
        .collect();
    let failed = AtomicUsize::new(0);
    let pack = |bh: usize| {
        let Some(Ok(mut slot)) = slots.get(bh).map(|s| s.lock()) else {
            failed.fetch_add(1, Ordering::Relaxed);
            return;
        };
        // Where the head's first key row starts and the distance between its rows.
        let (first, stride) = match layout {
            Layout::Bhsd => (bh * shape.seq_kv * d, d),
            Layout::Bshd => {
                let (b, h) = (bh / shape.heads.max(1), bh % shape.heads.max(1));
                (b * shape.seq_kv * shape.heads * d + h * d, shape.heads * d)
            }
        };
        let (kd, vd) = &mut *slot;
        if !amx::pack_head(k, v, first, stride, shape.seq_kv, d, kd, vd) {
            failed.fetch_add(1, Ordering::Relaxed);
        }
    };
    runner.for_each(heads, &pack)?;
    drop(slots);
    if failed.load(Ordering::Relaxed) > 0 {
        return Err(AttentionError::Worker("packing slot unavailable"));
    }
    Ok(())
}

#[cfg(not(target_arch = "x86_64"))]
fn pack_bf16(
    _k: &[f32],
    _v: &[f32],
    _layout: Layout,
    _shape: AttentionShape,
    _runner: &dyn Parallel,
    _kp: &mut Vec<u16>,
    _vp: &mut Vec<u16>,
) -> Result<(), AttentionError> {
    Ok(())
}

type TaskFn = fn(&Problem<'_>, usize, usize, &mut [f32]);

/// A task function, the key tile width it was compiled for, and whether it
/// reads keys and values packed in bfloat16 (`Problem::kp`, `Problem::vp`).
struct TaskKernel {
    task: TaskFn,
    tile: usize,
    bf16: bool,
}

/// The task function of a variant for `head_dim`; callers have checked
/// [`KernelIsa::is_available`]. The AVX-512 and AVX2 variants run the
/// intrinsics kernels of `avx512` and `avx2` for the head dimensions they
/// support (16, 32, 48, 64), the register-blocked generic kernel for the others.
fn select_kernel(isa: KernelIsa, head_dim: usize) -> TaskKernel {
    let isa = match isa {
        KernelIsa::Auto => KernelIsa::detect(),
        other => other,
    };
    match isa {
        #[cfg(target_arch = "x86_64")]
        KernelIsa::AmxBf16 if amx::supports(head_dim) => TaskKernel {
            task: amx::task,
            tile: amx::KEY_GROUP,
            bf16: true,
        },
        #[cfg(target_arch = "x86_64")]
        KernelIsa::Avx512 | KernelIsa::AmxBf16 if avx512::supports(head_dim) => TaskKernel {
            task: avx512::task,
            tile: avx512::TILE,
            bf16: false,
        },
        #[cfg(target_arch = "x86_64")]
        KernelIsa::Avx512 | KernelIsa::AmxBf16 => TaskKernel {
            task: portable::x86::task_avx512,
            tile: 4 * LANES,
            bf16: false,
        },
        #[cfg(target_arch = "x86_64")]
        KernelIsa::Avx2 if avx2::supports(head_dim) => TaskKernel {
            task: avx2::task,
            tile: avx2::TILE,
            bf16: false,
        },
        #[cfg(target_arch = "x86_64")]
        KernelIsa::Avx2 => TaskKernel {
            task: portable::x86::task_avx2,
            tile: 2 * LANES,
            bf16: false,
        },
        _ => TaskKernel {
            task: portable::task_portable,
            tile: 2 * LANES,
            bf16: false,
        },
    }
}

/// `ln 2 = LN2_HI + LN2_LO` for the Cody-Waite reduction of the `exp`
/// kernels: `LN2_HI` has few significant bits, so that `n * LN2_HI` is exact
/// for `|n| <= 126`.
const LN2_HI: f32 = 0.693_359_4;
const LN2_LO: f32 = -2.121_944_4e-4;
/// Inputs of the `exp` kernels below this give 0 (`exp(-87)` is near the
/// smallest normal f32).
const EXP_FLOOR: f32 = -87.0;

/// `exp(x)` for `x <= 0` (and `-inf`), branch-free so that loops over it
/// vectorise: `x = n ln 2 + r` with integer `n` (Cody-Waite reduction with a
/// two-part `ln 2`, `|r| <= ln 2 / 2`), `e^r` from its degree-7 Taylor
/// polynomial and `2^n` built from the exponent bits. Relative error below
/// 3e-7 on `[-87, 0]`; inputs below -87 (and `-inf`) return 0.
#[inline(always)]
pub fn exp_nonpositive(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // 1.5 * 2^23: adding and subtracting it rounds to the nearest integer.
    const ROUND: f32 = 12_582_912.0;
    let keep = x > EXP_FLOOR;
    let xc = if keep { x } else { EXP_FLOOR };
    let n = (xc * LOG2E + ROUND) - ROUND;
    let r = (xc - n * LN2_HI) - n * LN2_LO;
    let poly = 1.0
        + r * (1.0
            + r * (1.0 / 2.0
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    let bits = ((n as i32 + 127) as u32) << 23;
    let v = poly * f32::from_bits(bits);
    if keep {
        v
    } else {
        0.0
    }
}

/// A vector-register-sized group of floats. The helpers below take and
/// return lane groups by value with constant-bound index loops: LLVM then
/// keeps them in vector registers (SROA + SLP) instead of stack arrays.
/// (Index loops over register-blocked arrays are deliberate in this file,
/// hence `allow(clippy::needless_range_loop)` on the kernels: iterator
/// chains over the same arrays measured 3-4x slower, the accumulators being
/// spilled to the stack.)
type Lanes = [f32; LANES];

#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
mod intrinsics;
mod layout;
mod parallel;
mod portable;
mod reference;
#[cfg(test)]
mod tests;
