//! The ONNX Runtime custom operator `com.semroute::FlashAttention` (CPU, fp32).
//!
//! # Contract
//!
//! | | name | shape | type |
//! |---|---|---|---|
//! | input 0 | `Q` | `[batch, heads, seq_q, head_dim]` or `[batch, seq_q, heads * head_dim]` | float |
//! | input 1 | `K` | `[batch, heads, seq_kv, head_dim]` or `[batch, seq_kv, heads * head_dim]` | float |
//! | input 2 | `V` | as `K` | float |
//! | input 3 (optional) | `key_bias` | `[batch or 1, 1, 1, seq_kv]` (or `[batch or 1, seq_kv]`) | float |
//! | output 0 | `Y` | as `Q` | float |
//!
//! Rank-3 inputs (the projections' own layout, [`Layout::Bshd`]: no head
//! transposes around the node) need the `heads` attribute.
//!
//! Attributes (all optional):
//!
//! * `scale` (float): multiplier of `Q K^T`; default `1 / sqrt(head_dim)`.
//! * `window_left`, `window_right` (int): query `i` sees key `j` iff
//!   `i - window_left <= j <= i + window_right`; a negative value or an absent
//!   attribute means unbounded (global attention).
//! * `heads` (int): the number of heads of rank-3 inputs.
//! * `bf16_products` (int): 1 runs the products `Q K^T` and `P V` in bfloat16
//!   on AMX tiles where the CPU has them (`KernelIsa::AmxBf16`: head dims 32
//!   and 64, about 1e-2 relative error against fp32); elsewhere, and with 0
//!   (the default), the fp32 kernels.
//!
//! `Y = softmax(scale * Q K^T + key_bias, restricted to the window) V`,
//! computed by [`crate::attention::flash_attention`] on ONNX Runtime's intra-op
//! thread pool, without materialising `seq x seq` scores.

use ort::operator::{
    ComputeContext, Kernel, KernelContext, Operator, OperatorDomain, OperatorInput, OperatorOutput,
    ShapeInferenceContext,
};
use ort::session::builder::SessionBuilder;
use ort::value::TensorElementType;

use crate::attention::{
    flash_attention_in, AttentionError, AttentionParams, AttentionShape, KernelIsa, KeyBias,
    Layout, Parallel, Window,
};

/// The operator domain of the fused attention op.
pub const DOMAIN: &str = "com.semroute";
/// The operator type of the fused attention op.
pub const OP_TYPE: &str = "FlashAttention";
/// The opset version of [`DOMAIN`] that graphs import.
pub const DOMAIN_VERSION: i64 = 1;

/// The CPU implementation of `com.semroute::FlashAttention` for
/// [`ort::operator::OperatorDomain::add`].
#[derive(Debug, Clone, Copy, Default)]
pub struct FlashAttentionOp;

/// A kernel instance of [`FlashAttentionOp`]: the node's attributes, parsed
/// once when the session is created.
#[derive(Debug, Clone, Copy)]
pub struct FlashAttentionKernel {
    scale: Option<f32>,
    window: Window,
    /// The kernel variant: [`KernelIsa::AmxBf16`] where the node asks for
    /// bfloat16 products and the CPU runs them, else [`KernelIsa::Auto`].
    isa: KernelIsa,
    /// Heads of rank-3 inputs (the `heads` attribute).
    heads: Option<usize>,
}

fn window_side(value: Option<i64>) -> Option<usize> {
    value.and_then(|v| usize::try_from(v).ok())
}

impl Operator for FlashAttentionOp {
    type Kernel<'attr> = FlashAttentionKernel;

    fn name(&self) -> &str {
        OP_TYPE
    }

    fn inputs(&self) -> impl IntoIterator<Item = OperatorInput> {
        [
            OperatorInput::required(TensorElementType::Float32),
            OperatorInput::required(TensorElementType::Float32),
            OperatorInput::required(TensorElementType::Float32),
            OperatorInput::optional(TensorElementType::Float32),
        ]
    }

    fn outputs(&self) -> impl IntoIterator<Item = OperatorOutput> {
        [OperatorOutput::required(TensorElementType::Float32)]
    }

    fn create_kernel<'attr>(&self, ctx: &KernelContext<'attr>) -> ort::Result<Self::Kernel<'attr>> {
        let scale = ctx.get::<f32>("scale");
        if let Some(s) = scale {
            if !s.is_finite() {
                return Err(ort::Error::new(format!(
                    "{OP_TYPE}: attribute scale must be finite, got {s}"
                )));
            }
        }
        let bf16 = ctx.get::<i64>("bf16_products").unwrap_or(0) != 0;
        let isa = if bf16 && KernelIsa::AmxBf16.is_available() {
            KernelIsa::AmxBf16
        } else {
            KernelIsa::Auto
        };
        let heads = match ctx.get::<i64>("heads") {
            None => None,
            Some(h) => match usize::try_from(h) {
                Ok(h) if h > 0 => Some(h),
                _ => {
                    return Err(ort::Error::new(format!(
                        "{OP_TYPE}: attribute heads must be positive, got {h}"
                    )))
                }
            },
        };
        Ok(FlashAttentionKernel {
            scale,
            isa,
            heads,
            window: Window {
                left: window_side(ctx.get::<i64>("window_left")),
                right: window_side(ctx.get::<i64>("window_right")),
            },
        })
    }

    fn infer_shape(&self, ctx: &mut ShapeInferenceContext) -> ort::Result<()> {
        let inputs = ctx.inputs();
        match inputs.first() {
            Some(q) => ctx.set_output(0, q),
            None => Err(ort::Error::new(format!("{OP_TYPE}: missing input Q"))),
        }
    }
}

/// Runs kernel tasks on ONNX Runtime's intra-op thread pool.
struct OrtPool<'a>(&'a ComputeContext);

impl Parallel for OrtPool<'_> {
    fn for_each(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) -> Result<(), AttentionError> {
        if tasks <= 1 {
            (0..tasks).for_each(f);
            return Ok(());
        }
        self.0
            .par_for(tasks, tasks, f)
            .map_err(|e| AttentionError::Parallel(e.to_string()))
    }
}

/// `[batch, heads, seq, head_dim]` of an input: its own dims when it has rank 4;
/// for rank 3 (`[batch, seq, heads * head_dim]`), `heads` splits the last one.
fn dims(shape: &[i64], what: &str, heads: Option<usize>) -> ort::Result<[usize; 4]> {
    let dims: Vec<usize> = shape
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<_, _>>()
        .map_err(|_| ort::Error::new(format!("{OP_TYPE}: {what} has a negative dimension")))?;
    match (dims.as_slice(), heads) {
        (&[b, h, s, d], _) => Ok([b, h, s, d]),
        (&[b, s, hd], Some(h)) if hd % h == 0 => Ok([b, h, s, hd / h]),
        (&[_, _, _], Some(h)) => Err(ort::Error::new(format!(
            "{OP_TYPE}: {what} has shape {shape:?}, whose last dimension is not a multiple of heads = {h}"
        ))),
        (&[_, _, _], None) => Err(ort::Error::new(format!(
            "{OP_TYPE}: {what} has rank 3 ({shape:?}): the node needs the heads attribute"
        ))),
        _ => Err(ort::Error::new(format!(
            "{OP_TYPE}: {what} must be [batch, heads, seq, head_dim] or [batch, seq, heads * head_dim], got shape {shape:?}"
        ))),
    }
}

impl Kernel for FlashAttentionKernel {
    fn compute(&mut self, ctx: &ComputeContext) -> ort::Result<()> {
        let input = |idx: usize, what: &str| {
            ctx.input(idx)?
                .ok_or_else(|| ort::Error::new(format!("{OP_TYPE}: missing input {what}")))
        };
        let q = input(0, "Q")?;
        let k = input(1, "K")?;
        let v = input(2, "V")?;
        let bias = if ctx.num_inputs()? > 3 {
            ctx.input(3)?
        } else {
            None
        };
        let (q_shape, q_data) = q.try_extract_tensor::<f32>()?;
        let (k_shape, k_data) = k.try_extract_tensor::<f32>()?;
        let (v_shape, v_data) = v.try_extract_tensor::<f32>()?;
        let layout = if q_shape.len() == 3 {
            Layout::Bshd
        } else {
            Layout::Bhsd
        };
        let [batch, heads, seq_q, head_dim] = dims(q_shape, "Q", self.heads)?;
        let [kb, kh, seq_kv, kd] = dims(k_shape, "K", self.heads)?;
        let vdims = dims(v_shape, "V", self.heads)?;
        if [kb, kh, kd] != [batch, heads, head_dim]
            || vdims != [kb, kh, seq_kv, kd]
            || k_shape.len() != q_shape.len()
            || v_shape.len() != q_shape.len()
        {
            return Err(ort::Error::new(format!(
                "{OP_TYPE}: K {k_shape:?} and V {v_shape:?} must match Q {q_shape:?} in batch, heads and head_dim, and each other"
            )));
        }
        let shape = AttentionShape {
            batch,
            heads,
            seq_q,
            seq_kv,
            head_dim,
        };
        let bias_view = match &bias {
            None => None,
            Some(b) => {
                let (b_shape, b_data) = b.try_extract_tensor::<f32>()?;
                let ok_layout = match **b_shape {
                    [b0, 1, 1, s] | [b0, s] => {
                        s as usize == seq_kv && (b0 == 1 || b0 as usize == batch)
                    }
                    _ => false,
                };
                if !ok_layout {
                    return Err(ort::Error::new(format!(
                        "{OP_TYPE}: key_bias must be [batch or 1, 1, 1, {seq_kv}], got {b_shape:?}"
                    )));
                }
                let batch_stride = if b_shape[0] == 1 && batch != 1 {
                    0
                } else {
                    seq_kv
                };
                Some(KeyBias {
                    data: b_data,
                    batch_stride,
                })
            }
        };
        let scale = self
            .scale
            .unwrap_or_else(|| 1.0 / (head_dim.max(1) as f32).sqrt());
        let params = AttentionParams {
            scale,
            window: self.window,
        };
        let mut out = ctx
            .output(0, q_shape.to_vec())?
            .ok_or_else(|| ort::Error::new(format!("{OP_TYPE}: output Y unavailable")))?;
        let (_, out_data) = out.try_extract_tensor_mut::<f32>()?;
        flash_attention_in(
            self.isa,
            layout,
            q_data,
            k_data,
            v_data,
            bias_view,
            shape,
            params,
            out_data,
            &OrtPool(ctx),
        )
        .map_err(|e| ort::Error::new(format!("{OP_TYPE}: {e}")))
    }
}

/// The `com.semroute` operator domain holding the CPU `FlashAttention`
/// kernel. Pass it to [`SessionBuilder::with_operators`] before committing a
/// model produced by [`crate::fuse::fuse_attention`].
///
/// Errors: ONNX Runtime's, if the domain cannot be created (for example when
/// the ONNX Runtime library is not loaded).
pub fn operator_domain() -> ort::Result<OperatorDomain> {
    OperatorDomain::new(DOMAIN)?.add(FlashAttentionOp)
}

/// Registers the `com.semroute` domain (see [`operator_domain`]) with a
/// session builder, so that fused models load:
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let env = ort::init_from("libonnxruntime.so")?.build()?;
/// let builder = ort::session::Session::builder(&env)?;
/// let session = semroute_kernels::register(builder)?.commit_from_file("model.fused.onnx")?;
/// # drop(session);
/// # Ok(())
/// # }
/// ```
///
/// Errors: ONNX Runtime's, if the domain cannot be created or registered.
pub fn register(builder: SessionBuilder) -> ort::Result<SessionBuilder> {
    builder
        .with_operators(operator_domain()?)
        .map_err(ort::Error::from)
}
