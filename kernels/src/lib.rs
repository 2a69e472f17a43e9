//! Fused (flash) attention for long-context encoder classifiers.
//!
//! Exported encoders (BERT, ModernBERT, ...) compute attention as
//! `MatMul(Q, K^T) -> scale -> Add(mask) -> Softmax -> MatMul(V)`, which
//! materialises `batch x heads x seq x seq` scores plus a `[batch, 1, seq,
//! seq]` mask: quadratic memory that makes 8K-32K-token inputs impractical.
//! This crate replaces that block with one operator whose memory grows
//! linearly with the sequence length:
//!
//! * [`attention`]: the CPU kernel (tiled online softmax; FlashAttention, Dao
//!   et al. 2022; online softmax, Milakov & Gimelshein 2018), usable directly
//!   on slices.
//! * [`op`]: the ONNX Runtime custom operator `com.semroute::FlashAttention`
//!   wrapping it, and [`register`] to make a session builder accept it.
//! * [`fuse`]: the graph rewrite ([`fuse_attention`]) that finds the
//!   attention blocks of an exported model and substitutes the fused op,
//!   turning in-graph masks into a key-padding bias and window attributes.
//! * [`onnx`]: the ONNX model format as prost messages (lossless round trip).
//!
//! A CUDA kernel with the same contract (fp16/bf16 in, fp32 accumulation)
//! lives in `cuda/` with its own build script and validation harness; it is
//! built only where `nvcc` exists.

#![warn(missing_docs)]

pub mod attention;
pub mod fuse;
pub mod onnx;
pub mod op;

pub use attention::{
    flash_attention, flash_attention_in, flash_attention_with_isa, naive_attention, AttentionError,
    AttentionParams, AttentionShape, KernelIsa, KeyBias, Layout, Parallel, ScopedThreads,
    Sequential, Window,
};
pub use fuse::{
    fuse_attention, FuseError, FuseOptions, FuseReport, FusedBlock, KeyBiasSource, SkippedBlock,
    Verification, VerifyOptions,
};
pub use op::{operator_domain, register, FlashAttentionOp, DOMAIN, OP_TYPE};
