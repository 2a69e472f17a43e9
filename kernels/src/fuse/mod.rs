//! The graph rewrite: replaces the unfused attention blocks of an exported
//! encoder with `com.semroute::FlashAttention`.
//!
//! For every `MatMul(Q, K^T) -> scale -> [Add(mask)] -> Softmax -> MatMul(V)`
//! block (the shapes recognised are listed in `pattern.rs`) the rewrite
//!
//! 1. collects the constant scale factors (post-scaling of the scores and
//!    pre-scaling of Q and K^T) into the `scale` attribute;
//! 2. interprets the additive mask by evaluating its sub-graph on a synthetic
//!    padded batch (see `mask.rs`): a `[batch, 1, seq, seq]` mask built from
//!    `attention_mask` and positions becomes a `[batch, 1, 1, seq]` key-padding
//!    bias computed from `attention_mask` (`Where(Cast<bool>(mask), 0, c)`,
//!    shared by all layers) plus `window_left`/`window_right` attributes;
//! 3. replaces `MatMul(P, V)` by the fused node (same output name), and
//!    removes every node that no longer contributes to a graph output, which
//!    includes the `seq x seq` mask construction;
//! 4. optionally runs the original and the fused model on the same synthetic
//!    input and compares their outputs.
//!
//! Only fp32 attention is fused; blocks that do not match are reported in
//! [`FuseReport::skipped`] and left as they are.

mod graph;
mod mask;
mod pattern;
mod runtime;

use std::collections::{BTreeMap, HashMap, HashSet};

use ort::environment::Environment;

use self::graph::{remove_dead_nodes, GraphIndex};
use self::mask::{MaskAnalysis, Padding};
use self::pattern::{Block, KSource};
use crate::attention::Window;
use crate::onnx::{self, dtype, ModelProto, NodeProto, OperatorSetIdProto, TensorProto};
use crate::op::{DOMAIN, DOMAIN_VERSION, OP_TYPE};

/// Settings of [`fuse_attention`].
#[derive(Debug, Clone, PartialEq)]
pub struct FuseOptions {
    /// Tokens per row of the synthetic batch on which in-graph masks are
    /// evaluated. Sliding windows reaching `mask_probe_len - 1` positions or
    /// more on a side are indistinguishable from global attention, so this
    /// must exceed twice the widest window. Default 1024.
    pub mask_probe_len: usize,
    /// The sliding window the model is known to use (from its configuration):
    /// every windowed block found must have exactly this window, or the
    /// rewrite fails with [`FuseError::ConfigMismatch`].
    pub expected_window: Option<Window>,
    /// Expected numbers of (global, windowed) attention blocks, from the
    /// configuration's layer types; checked when set.
    pub expected_layers: Option<(usize, usize)>,
    /// Compare the fused model with the original after rewriting; `None`
    /// skips the check.
    pub verify: Option<VerifyOptions>,
}

impl Default for FuseOptions {
    fn default() -> Self {
        FuseOptions {
            mask_probe_len: 1024,
            expected_window: None,
            expected_layers: None,
            verify: Some(VerifyOptions::default()),
        }
    }
}

/// Settings of the before/after comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VerifyOptions {
    /// Tokens per row of the synthetic two-row batch. Default 256.
    pub seq_len: usize,
    /// Largest accepted `max |fused - original|`, relative to
    /// `max(1, max |original|)` over all outputs. Default 1e-3.
    pub tolerance: f32,
}

impl Default for VerifyOptions {
    fn default() -> Self {
        VerifyOptions {
            seq_len: 256,
            tolerance: 1e-3,
        }
    }
}

impl FuseOptions {
    /// Options from a Hugging Face `config.json` (the file next to an exported
    /// model). Understood keys: ModernBERT's `local_attention` (total window
    /// width, split evenly left and right) with `layer_types` or
    /// `global_attn_every_n_layers` + `num_hidden_layers`. The probe length is
    /// raised to cover the window. Configurations without these keys give
    /// the defaults.
    ///
    /// Errors: [`FuseError::Config`] for text that is not a JSON object.
    pub fn from_hf_config(json: &str) -> Result<Self, FuseError> {
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| FuseError::Config(e.to_string()))?;
        let obj = v
            .as_object()
            .ok_or_else(|| FuseError::Config("not a JSON object".into()))?;
        let mut opts = FuseOptions::default();
        let Some(local) = obj
            .get("local_attention")
            .and_then(serde_json::Value::as_u64)
        else {
            return Ok(opts);
        };
        let half = (local / 2) as usize;
        opts.expected_window = Some(Window::symmetric(half));
        opts.mask_probe_len = opts.mask_probe_len.max(4 * half + 64);
        let layer_types: Option<Vec<&str>> = obj
            .get("layer_types")
            .and_then(serde_json::Value::as_array)
            .map(|a| a.iter().filter_map(serde_json::Value::as_str).collect());
        if let Some(types) = layer_types {
            let global = types.iter().filter(|t| t.contains("full")).count();
            let sliding = types.iter().filter(|t| t.contains("sliding")).count();
            opts.expected_layers = Some((global, sliding));
        } else if let (Some(every), Some(layers)) = (
            obj.get("global_attn_every_n_layers")
                .and_then(serde_json::Value::as_u64),
            obj.get("num_hidden_layers")
                .and_then(serde_json::Value::as_u64),
        ) {
            if every > 0 {
                let global = (0..layers).filter(|l| l % every == 0).count();
                opts.expected_layers = Some((global, layers as usize - global));
            }
        }
        Ok(opts)
    }
}

/// Where a fused block's key-padding bias comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyBiasSource {
    /// No bias: the block's mask did not depend on padding (or there was no
    /// mask).
    None,
    /// Computed from the graph input `input`: 0 for non-zero entries,
    /// `masked_value` for zeros.
    FromInput {
        /// The attention-mask graph input.
        input: String,
        /// Bias of padded keys (the value the original mask used).
        masked_value: f32,
    },
    /// The original mask tensor, already `[batch, 1, 1, seq]`.
    Tensor(String),
}

/// One attention block replaced by the fused op.
#[derive(Debug, Clone, PartialEq)]
pub struct FusedBlock {
    /// Name of the block's Softmax node in the original graph.
    pub softmax: String,
    /// The block's output tensor (now produced by the fused node).
    pub output: String,
    /// Scale applied to `Q K^T`.
    pub scale: f32,
    /// Sliding window found in the mask.
    pub window: Window,
    /// Key-padding bias input of the fused node.
    pub key_bias: KeyBiasSource,
}

/// A softmax that was not fused, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedBlock {
    /// Name of the Softmax node.
    pub softmax: String,
    /// Why it was left alone.
    pub reason: String,
}

/// Result of the before/after comparison.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verification {
    /// Tokens per row of the synthetic batch.
    pub seq_len: usize,
    /// Largest absolute difference over all fp32 outputs.
    pub max_abs_diff: f32,
    /// Largest absolute value of the original outputs.
    pub max_abs_ref: f32,
}

/// What [`fuse_attention`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct FuseReport {
    /// Blocks replaced, in graph order.
    pub fused: Vec<FusedBlock>,
    /// Softmaxes left unfused.
    pub skipped: Vec<SkippedBlock>,
    /// Nodes added (fused ops, bias construction, transposes).
    pub nodes_added: usize,
    /// Nodes removed (attention internals and dead mask construction).
    pub nodes_removed: usize,
    /// The comparison, when requested.
    pub verification: Option<Verification>,
}

impl std::fmt::Display for FuseReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "fused {} attention block(s); {} node(s) added, {} removed",
            self.fused.len(),
            self.nodes_added,
            self.nodes_removed
        )?;
        for b in &self.fused {
            let window = match (b.window.left, b.window.right) {
                (None, None) => "global".to_string(),
                (l, r) => format!(
                    "window -{}/+{}",
                    l.map_or("inf".into(), |x| x.to_string()),
                    r.map_or("inf".into(), |x| x.to_string())
                ),
            };
            let bias = match &b.key_bias {
                KeyBiasSource::None => "no padding bias".to_string(),
                KeyBiasSource::FromInput {
                    input,
                    masked_value,
                } => format!("padding bias from {input} ({masked_value:e})"),
                KeyBiasSource::Tensor(t) => format!("padding bias {t}"),
            };
            writeln!(f, "  {}: scale {}, {window}, {bias}", b.softmax, b.scale)?;
        }
        for s in &self.skipped {
            writeln!(f, "  skipped {}: {}", s.softmax, s.reason)?;
        }
        if let Some(v) = &self.verification {
            writeln!(
                f,
                "  verified at {} tokens: max |fused - original| = {:e} (max |original| = {})",
                v.seq_len, v.max_abs_diff, v.max_abs_ref
            )?;
        }
        Ok(())
    }
}

/// Errors of [`fuse_attention`].
#[derive(Debug, thiserror::Error)]
pub enum FuseError {
    /// The bytes are not an ONNX model.
    #[error("not an ONNX model: {0}")]
    Decode(#[from] prost::DecodeError),
    /// The model has no graph.
    #[error("the model has no graph")]
    NoGraph,
    /// Weights in external files: the probe cannot load the model from bytes.
    #[error("tensor {0} is stored in an external file; embed the weights (models under 2 GB) before fusing")]
    ExternalData(String),
    /// Nothing could be fused.
    #[error("no fusable attention block found ({} softmax(es) skipped: {})", .skipped.len(), summary(.skipped))]
    NoAttention {
        /// Every softmax and why it did not match.
        skipped: Vec<SkippedBlock>,
    },
    /// A graph input the probe cannot synthesise.
    #[error("cannot synthesise graph input {input}: {reason}")]
    UnsupportedInput {
        /// Input name.
        input: String,
        /// Why.
        reason: String,
    },
    /// ONNX Runtime failed while probing or verifying.
    #[error("ONNX Runtime failed during {context}: {message}")]
    Runtime {
        /// What was running.
        context: String,
        /// ONNX Runtime's message.
        message: String,
    },
    /// The fused model's outputs differ from the original's.
    #[error("fused model disagrees with the original on output {output}: {detail}")]
    Verification {
        /// Output name.
        output: String,
        /// What differs.
        detail: String,
    },
    /// The blocks found contradict the model configuration.
    #[error("attention found in the graph contradicts the configuration: {0}")]
    ConfigMismatch(String),
    /// The configuration could not be read.
    #[error("invalid model configuration: {0}")]
    Config(String),
}

fn summary(skipped: &[SkippedBlock]) -> String {
    let mut reasons: BTreeMap<&str, usize> = BTreeMap::new();
    for s in skipped {
        *reasons.entry(s.reason.as_str()).or_default() += 1;
    }
    if reasons.is_empty() {
        return "the graph has no Softmax".into();
    }
    reasons
        .iter()
        .map(|(r, n)| format!("{n}x {r}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A block with everything needed to emit its fused node.
struct Plan {
    block: Block,
    window: Window,
    bias: KeyBiasSource,
}

/// Rewrites every recognised attention block of an fp32 ONNX encoder into
/// `com.semroute::FlashAttention` (see the module documentation).
///
/// `env` is the ONNX Runtime environment used to evaluate the mask
/// sub-graphs and, if `options.verify` is set, to compare the result with the
/// original. Returns the fused model's bytes (load them with the op
/// registered: [`crate::register`]) and a report of what was fused and
/// skipped.
///
/// Errors: see [`FuseError`]; a model in which no block can be fused is an
/// error ([`FuseError::NoAttention`]), a partly fused model is not.
pub fn fuse_attention(
    env: &Environment,
    model_bytes: &[u8],
    options: &FuseOptions,
) -> Result<(Vec<u8>, FuseReport), FuseError> {
    let model = onnx::decode_model(model_bytes)?;
    let graph = model.graph.as_ref().ok_or(FuseError::NoGraph)?;
    if let Some(t) = graph
        .initializer
        .iter()
        .find(|t| t.data_location() == onnx::DATA_LOCATION_EXTERNAL)
    {
        return Err(FuseError::ExternalData(t.name().to_string()));
    }
    let ix = GraphIndex::new(&model, graph);
    let (blocks, mut skipped) = pattern::find_blocks(&ix);
    if blocks.is_empty() {
        return Err(FuseError::NoAttention { skipped });
    }
    let mut masks: Vec<String> = blocks.iter().filter_map(|b| b.mask.clone()).collect();
    masks.sort();
    masks.dedup();
    let analyses = if masks.is_empty() {
        HashMap::new()
    } else {
        mask::analyse_masks(env, &model, &ix, &masks, options.mask_probe_len)?
    };

    let mut plans = Vec::new();
    for block in blocks {
        let analysis = match &block.mask {
            None => Ok(MaskAnalysis {
                window: Window::GLOBAL,
                padding: Padding::None,
            }),
            Some(m) => analyses
                .get(m)
                .cloned()
                .unwrap_or_else(|| Err("mask not analysed".into())),
        };
        match analysis {
            Ok(a) => {
                let bias = match a.padding {
                    Padding::None => KeyBiasSource::None,
                    Padding::Direct => match &block.mask {
                        Some(m) => KeyBiasSource::Tensor(m.clone()),
                        None => KeyBiasSource::None,
                    },
                    Padding::FromInput {
                        input,
                        masked_value,
                    } => KeyBiasSource::FromInput {
                        input,
                        masked_value,
                    },
                };
                plans.push(Plan {
                    block,
                    window: a.window,
                    bias,
                });
            }
            Err(reason) => skipped.push(SkippedBlock {
                softmax: block.softmax_name.clone(),
                reason,
            }),
        }
    }
    if plans.is_empty() {
        return Err(FuseError::NoAttention { skipped });
    }
    check_config(&plans, options)?;

    let (fused_model, added, removed) = apply(&model, &ix, &plans);
    let bytes = onnx::encode_model(&fused_model);
    let verification = match options.verify {
        Some(v) => {
            let inputs: Vec<_> = graph
                .input
                .iter()
                .filter(|i| !ix.initializers.contains_key(i.name()))
                .collect();
            Some(runtime::verify(env, model_bytes, &bytes, &inputs, v)?)
        }
        None => None,
    };
    let report = FuseReport {
        fused: plans
            .iter()
            .map(|p| FusedBlock {
                softmax: p.block.softmax_name.clone(),
                output: p.block.output.clone(),
                scale: p.block.scale as f32,
                window: p.window,
                key_bias: p.bias.clone(),
            })
            .collect(),
        skipped,
        nodes_added: added,
        nodes_removed: removed,
        verification,
    };
    Ok((bytes, report))
}

fn check_config(plans: &[Plan], options: &FuseOptions) -> Result<(), FuseError> {
    if let Some(expected) = options.expected_window {
        if let Some(p) = plans
            .iter()
            .find(|p| !p.window.is_global() && p.window != expected)
        {
            return Err(FuseError::ConfigMismatch(format!(
                "{} has window {:?}, the configuration says {:?}",
                p.block.softmax_name, p.window, expected
            )));
        }
    }
    if let Some((global, sliding)) = options.expected_layers {
        let found_global = plans.iter().filter(|p| p.window.is_global()).count();
        let found_sliding = plans.len() - found_global;
        if (found_global, found_sliding) != (global, sliding) {
            return Err(FuseError::ConfigMismatch(format!(
                "found {found_global} global and {found_sliding} windowed attention blocks, the configuration has {global} and {sliding} (a window wider than the probe looks global: raise mask_probe_len)"
            )));
        }
    }
    Ok(())
}

/// Fresh tensor/node names that do not collide with the graph's.
struct Names {
    taken: HashSet<String>,
}

impl Names {
    fn fresh(&mut self, base: &str) -> String {
        let mut name = base.to_string();
        let mut k = 1;
        while self.taken.contains(&name) {
            name = format!("{base}_{k}");
            k += 1;
        }
        self.taken.insert(name.clone());
        name
    }
}

fn node(op: &str, name: String, inputs: Vec<String>, outputs: Vec<String>) -> NodeProto {
    NodeProto {
        op_type: Some(op.to_string()),
        name: Some(name),
        input: inputs,
        output: outputs,
        ..Default::default()
    }
}

/// Builds the fused model. Returns it with the numbers of added and removed
/// nodes.
fn apply(model: &ModelProto, ix: &GraphIndex<'_>, plans: &[Plan]) -> (ModelProto, usize, usize) {
    let mut model = model.clone();
    let mut names = Names {
        taken: ix
            .graph
            .node
            .iter()
            .flat_map(|n| n.output.iter().chain(n.name.iter()).cloned())
            .chain(ix.graph.initializer.iter().map(|t| t.name().to_string()))
            .chain(ix.graph.input.iter().map(|t| t.name().to_string()))
            .collect(),
    };
    let mut prologue: Vec<NodeProto> = Vec::new();
    let mut new_inits: Vec<TensorProto> = Vec::new();
    let mut bias_cache: HashMap<(String, u32), String> = HashMap::new();
    let mut replacement: HashMap<usize, Vec<NodeProto>> = HashMap::new();
    let input_type = |name: &str| {
        ix.graph
            .input
            .iter()
            .find(|i| i.name() == name)
            .and_then(|i| i.r#type.as_ref())
            .and_then(|t| match t.value.as_ref() {
                Some(onnx::type_proto::Value::TensorType(tt)) => Some(tt.elem_type()),
                _ => None,
            })
    };

    for plan in plans {
        let b = &plan.block;
        let bias_name = match &plan.bias {
            KeyBiasSource::None => None,
            KeyBiasSource::Tensor(t) => Some(t.clone()),
            KeyBiasSource::FromInput {
                input,
                masked_value,
            } => {
                let key = (input.clone(), masked_value.to_bits());
                if let Some(name) = bias_cache.get(&key) {
                    Some(name.clone())
                } else {
                    let base = format!("semroute_fa/key_bias_{}", bias_cache.len());
                    let flag = if input_type(input) == Some(dtype::BOOL) {
                        input.clone()
                    } else {
                        let flag = names.fresh(&format!("{base}/is_token"));
                        let mut cast = node(
                            "Cast",
                            names.fresh(&format!("{base}/Cast")),
                            vec![input.clone()],
                            vec![flag.clone()],
                        );
                        cast.attribute
                            .push(onnx::attr_int("to", i64::from(dtype::BOOL)));
                        prologue.push(cast);
                        flag
                    };
                    let zero = names.fresh(&format!("{base}/zero"));
                    let masked = names.fresh(&format!("{base}/masked"));
                    new_inits.push(onnx::scalar_f32(Some(zero.clone()), 0.0));
                    new_inits.push(onnx::scalar_f32(Some(masked.clone()), *masked_value));
                    let flat = names.fresh(&format!("{base}/bias_2d"));
                    prologue.push(node(
                        "Where",
                        names.fresh(&format!("{base}/Where")),
                        vec![flag, zero, masked],
                        vec![flat.clone()],
                    ));
                    let out = names.fresh(&base);
                    let mut unsq = node(
                        "Unsqueeze",
                        names.fresh(&format!("{base}/Unsqueeze")),
                        vec![flat],
                        vec![out.clone()],
                    );
                    if ix.default_opset >= 13 {
                        let axes = names.fresh(&format!("{base}/axes"));
                        new_inits.push(onnx::ints_i64(Some(axes.clone()), &[1, 2]));
                        unsq.input.push(axes);
                    } else {
                        unsq.attribute.push(onnx::attr_ints("axes", &[1, 2]));
                    }
                    prologue.push(unsq);
                    bias_cache.insert(key, out.clone());
                    Some(out)
                }
            }
        };
        let mut nodes = Vec::new();
        let base = format!("{}/semroute_fa", b.softmax_name);
        let k = match &b.k {
            KSource::Direct(t) => t.clone(),
            KSource::Transposed { input, perm } => {
                let out = names.fresh(&format!("{base}/K"));
                let mut t = node(
                    "Transpose",
                    names.fresh(&format!("{base}/Transpose")),
                    vec![input.clone()],
                    vec![out.clone()],
                );
                t.attribute.push(onnx::attr_ints("perm", perm));
                nodes.push(t);
                out
            }
        };
        let mut inputs = vec![b.q.clone(), k, b.v.clone()];
        inputs.extend(bias_name);
        let mut fa = node(
            OP_TYPE,
            names.fresh(&format!("{base}/{OP_TYPE}")),
            inputs,
            vec![b.output.clone()],
        );
        fa.domain = Some(DOMAIN.to_string());
        fa.attribute.push(onnx::attr_float("scale", b.scale as f32));
        if let Some(l) = plan.window.left {
            fa.attribute.push(onnx::attr_int("window_left", l as i64));
        }
        if let Some(r) = plan.window.right {
            fa.attribute.push(onnx::attr_int("window_right", r as i64));
        }
        nodes.push(fa);
        replacement.entry(b.final_matmul).or_default().extend(nodes);
    }

    let added = prologue.len() + replacement.values().map(Vec::len).sum::<usize>();
    let Some(graph) = model.graph.as_mut() else {
        return (model, 0, 0);
    };
    let old = std::mem::take(&mut graph.node);
    let before = old.len();
    let mut nodes = prologue;
    for (i, n) in old.into_iter().enumerate() {
        match replacement.remove(&i) {
            Some(r) => nodes.extend(r),
            None => nodes.push(n),
        }
    }
    graph.node = nodes;
    graph.initializer.extend(new_inits);
    remove_dead_nodes(graph);
    let removed = (before + added).saturating_sub(graph.node.len());
    if !model.opset_import.iter().any(|o| o.domain() == DOMAIN) {
        model.opset_import.push(OperatorSetIdProto {
            domain: Some(DOMAIN.to_string()),
            version: Some(DOMAIN_VERSION),
        });
    }
    (model, added, removed)
}
