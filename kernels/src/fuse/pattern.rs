//! Recognition of unfused attention blocks in exported encoders:
//!
//! ```text
//! Q --[Mul/Div by c]--+
//!                     MatMul --[Mul/Div by c]-- [Add(mask)] -- Softmax(-1) --+
//! K^T --[Mul/Div c]--+                                                        | [Cast(float) | Identity |
//!                                                                             |  Dropout | Where(IsNaN(p), 0, p)]*
//!                                                                V ---------- MatMul --> output
//! ```
//!
//! This covers transformers' eager exports (`MatMul -> Mul(scale) -> Add(mask)
//! -> Softmax -> MatMul`), BERT's (`Div(sqrt(d))`), and the SDPA export (scale
//! split as `sqrt(scale)` onto Q and K^T, `-inf` masks and the
//! `Where(IsNaN)` guard). K^T is usually `Transpose(K, [0, 1, 3, 2])`; other
//! permutations are composed into one transpose of the source tensor.

use super::graph::{attr, attr_i, attr_ints, is_onnx, GraphIndex};
use super::SkippedBlock;
use crate::onnx::dtype;

/// Where the fused op's K input (`[batch, heads, seq, head_dim]`) comes from.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum KSource {
    /// An existing tensor already in the right layout.
    Direct(String),
    /// `Transpose(input, perm)` must be inserted.
    Transposed { input: String, perm: Vec<i64> },
}

/// One recognised attention block.
#[derive(Debug, Clone)]
pub(crate) struct Block {
    pub softmax_name: String,
    pub q: String,
    pub k: KSource,
    pub v: String,
    /// The additive mask tensor, if the scores go through `Add`.
    pub mask: Option<String>,
    /// Product of all constant scale factors.
    pub scale: f64,
    /// Index of the final `MatMul(P, V)` node, replaced by the fused op.
    pub final_matmul: usize,
    /// Output tensor of that MatMul (kept as the fused op's output name).
    pub output: String,
}

/// A constant scale factor found on a Mul/Div: `(other input, factor)`.
fn scale_step(ix: &GraphIndex<'_>, tensor: &str) -> Result<Option<(String, f64)>, String> {
    let Some((_, node)) = ix.producer_node(tensor) else {
        return Ok(None);
    };
    if !is_onnx(node) || node.input.len() != 2 {
        return Ok(None);
    }
    let (a, b) = (&node.input[0], &node.input[1]);
    let check = |dt: i32| {
        if dt == dtype::FLOAT {
            Ok(())
        } else {
            Err(format!(
                "scale constant of {tensor} has element type {dt}: only fp32 attention is fused"
            ))
        }
    };
    match node.op_type() {
        "Mul" => {
            if let Some((dt, c)) = ix.scalar(b) {
                check(dt)?;
                return Ok(Some((a.clone(), c)));
            }
            if let Some((dt, c)) = ix.scalar(a) {
                check(dt)?;
                return Ok(Some((b.clone(), c)));
            }
            Ok(None)
        }
        "Div" => match ix.scalar(b) {
            Some((dt, c)) if c != 0.0 => {
                check(dt)?;
                Ok(Some((a.clone(), 1.0 / c)))
            }
            _ => Ok(None),
        },
        _ => Ok(None),
    }
}

/// Strips constant scale factors from `tensor`: returns the source tensor and
/// the product of the factors.
fn strip_scales(ix: &GraphIndex<'_>, tensor: &str) -> Result<(String, f64), String> {
    let mut t = tensor.to_string();
    let mut scale = 1.0;
    for _ in 0..8 {
        match scale_step(ix, &t)? {
            Some((src, c)) => {
                scale *= c;
                t = src;
            }
            None => break,
        }
    }
    Ok((t, scale))
}

/// From a score tensor back to `MatMul(Q, K^T)` through single-use
/// `Mul`/`Div` by constants. Returns `(matmul node index, scale)`.
fn scores_source(ix: &GraphIndex<'_>, tensor: &str) -> Result<Option<(usize, f64)>, String> {
    let mut t = tensor.to_string();
    let mut scale = 1.0;
    for _ in 0..8 {
        if !ix.single_use(&t) {
            return Ok(None);
        }
        let Some((i, node)) = ix.producer_node(&t) else {
            return Ok(None);
        };
        if is_onnx(node) && node.op_type() == "MatMul" {
            return Ok(Some((i, scale)));
        }
        match scale_step(ix, &t)? {
            Some((src, c)) => {
                scale *= c;
                t = src;
            }
            None => return Ok(None),
        }
    }
    Ok(None)
}

/// Follows the attention probabilities forward to `MatMul(P, V)`.
fn probs_sink(ix: &GraphIndex<'_>, probs: &str) -> Result<(usize, String), String> {
    let nodes = &ix.graph.node;
    let mut t = probs.to_string();
    for _ in 0..8 {
        if ix.graph_outputs.contains(t.as_str()) {
            return Err(format!("attention probabilities {t} are a graph output"));
        }
        let cons = ix.consumers_of(&t);
        match cons {
            [c] => {
                let node = &nodes[*c];
                if !is_onnx(node) {
                    return Err(format!(
                        "probabilities consumed by custom op {}",
                        node.op_type()
                    ));
                }
                match node.op_type() {
                    "Cast" if attr_i(node, "to") == Some(i64::from(dtype::FLOAT)) => {
                        t = node.output[0].clone();
                    }
                    "Cast" => return Err("probabilities cast away from fp32".into()),
                    "Identity" => t = node.output[0].clone(),
                    "Dropout"
                        if node
                            .output
                            .iter()
                            .skip(1)
                            .all(|o| o.is_empty() || ix.consumers_of(o).is_empty()) =>
                    {
                        t = node.output[0].clone();
                    }
                    "MatMul"
                        if node.input.len() == 2 && node.input[0] == t && node.input[1] != t =>
                    {
                        return Ok((*c, node.input[1].clone()));
                    }
                    other => return Err(format!("probabilities feed {other}, not MatMul(P, V)")),
                }
            }
            [a, b] => {
                // Where(IsNaN(p), 0, p): the guard of SDPA exports.
                let (na, nb) = (&nodes[*a], &nodes[*b]);
                let (isnan, wh) = match (na.op_type(), nb.op_type()) {
                    ("IsNaN", "Where") => (na, nb),
                    ("Where", "IsNaN") => (nb, na),
                    _ => return Err("attention probabilities have several consumers".into()),
                };
                let flag = isnan.output.first().map(String::as_str).unwrap_or("");
                let zero = wh.input.get(1).and_then(|z| ix.scalar(z)).map(|(_, v)| v);
                if wh.input.len() != 3
                    || wh.input[0] != flag
                    || wh.input[2] != t
                    || zero != Some(0.0)
                    || !ix.single_use(flag)
                {
                    return Err("unrecognised guard on attention probabilities".into());
                }
                t = wh.output[0].clone();
            }
            [] => return Err("attention probabilities are unused".into()),
            _ => return Err("attention probabilities have several consumers".into()),
        }
    }
    Err("no MatMul(P, V) after the softmax".into())
}

/// K source from the tensor fed to `MatMul(Q, .)` as K^T.
fn k_source(ix: &GraphIndex<'_>, kt: &str) -> KSource {
    if let Some((_, node)) = ix.producer_node(kt) {
        if is_onnx(node) && node.op_type() == "Transpose" {
            if let Some(p) = attr_ints(node, "perm").filter(|p| p.len() == 4) {
                // K = Transpose(K^T, [0, 1, 3, 2]) = Transpose(src, p o [0, 1, 3, 2]).
                let perm = vec![p[0], p[1], p[3], p[2]];
                let src = node.input[0].clone();
                return if perm == [0, 1, 2, 3] {
                    KSource::Direct(src)
                } else {
                    KSource::Transposed { input: src, perm }
                };
            }
        }
    }
    KSource::Transposed {
        input: kt.to_string(),
        perm: vec![0, 1, 3, 2],
    }
}

fn match_softmax(ix: &GraphIndex<'_>, si: usize) -> Result<Block, String> {
    let softmax = &ix.graph.node[si];
    let default_axis = if ix.default_opset >= 13 { -1 } else { 1 };
    let axis = attr(softmax, "axis")
        .and_then(|a| a.i)
        .unwrap_or(default_axis);
    if axis != -1 && axis != 3 {
        return Err(format!("softmax over axis {axis}, not the key axis"));
    }
    let x = softmax.input.first().ok_or("softmax without input")?;
    if !ix.single_use(x) {
        return Err("softmax input has other consumers".into());
    }
    // Add(scores, mask) or bare scores.
    let (scores, mask) = match ix.producer_node(x) {
        Some((_, add)) if is_onnx(add) && add.op_type() == "Add" && add.input.len() == 2 => {
            let (a, b) = (&add.input[0], &add.input[1]);
            match (scores_source(ix, a)?, scores_source(ix, b)?) {
                (Some(_), None) => (a.clone(), Some(b.clone())),
                (None, Some(_)) => (b.clone(), Some(a.clone())),
                (Some(_), Some(_)) => return Err("both Add inputs look like scores".into()),
                (None, None) => return Err("no MatMul(Q, K^T) before the softmax".into()),
            }
        }
        _ => (x.clone(), None),
    };
    let (mm, post_scale) =
        scores_source(ix, &scores)?.ok_or("no MatMul(Q, K^T) before the softmax")?;
    let mm_node = &ix.graph.node[mm];
    if mm_node.input.len() != 2 {
        return Err("malformed MatMul".into());
    }
    let (q, q_scale) = strip_scales(ix, &mm_node.input[0])?;
    let (kt, k_scale) = strip_scales(ix, &mm_node.input[1])?;
    let mut k = k_source(ix, &kt);
    let mut pre_k = 1.0;
    if let KSource::Direct(src) = &k {
        let (src2, s) = strip_scales(ix, src)?;
        pre_k = s;
        k = KSource::Direct(src2);
    }
    let (final_matmul, v) = probs_sink(ix, &softmax.output[0])?;
    let output = ix.graph.node[final_matmul]
        .output
        .first()
        .cloned()
        .ok_or("MatMul(P, V) without output")?;
    let scale = post_scale * q_scale * k_scale * pre_k;
    if !scale.is_finite() || scale == 0.0 {
        return Err(format!("unusable scale {scale}"));
    }
    Ok(Block {
        softmax_name: if softmax.name().is_empty() {
            format!("Softmax#{si}")
        } else {
            softmax.name().to_string()
        },
        q,
        k,
        v,
        mask,
        scale,
        final_matmul,
        output,
    })
}

/// All attention blocks of the graph, and the softmaxes that were not
/// recognised (with the reason).
pub(crate) fn find_blocks(ix: &GraphIndex<'_>) -> (Vec<Block>, Vec<SkippedBlock>) {
    let mut blocks = Vec::new();
    let mut skipped = Vec::new();
    for (i, node) in ix.graph.node.iter().enumerate() {
        if !is_onnx(node) || node.op_type() != "Softmax" {
            continue;
        }
        match match_softmax(ix, i) {
            Ok(b) => blocks.push(b),
            Err(reason) => skipped.push(SkippedBlock {
                softmax: if node.name().is_empty() {
                    format!("Softmax#{i}")
                } else {
                    node.name().to_string()
                },
                reason,
            }),
        }
    }
    (blocks, skipped)
}
