//! Turning an in-graph attention mask (`[batch, 1, seq, seq]`, computed from
//! `attention_mask` and, for sliding-window layers, from positions) into a
//! key-padding bias plus window attributes.
//!
//! Exporters express the mask in many ways (ModernBERT's eager export builds
//! `Where(|i - j| <= 64 & key_mask, 0, finfo.min)`, its SDPA export the
//! same with `-inf`, BERT `(1 - mask) * finfo.min` as `[batch, 1, 1, seq]`),
//! so instead of matching each construction the rewrite *evaluates* the mask
//! sub-graph: it runs the nodes the mask depends on, on a synthetic batch of
//! two rows (row 0 unpadded, row 1 padded at the end and at one inner
//! position) of `probe_len` tokens, and checks that the result is exactly
//!
//! ```text
//! mask[b, i, j] = 0            if key_mask[b, j] and i - left <= j <= i + right
//!               = c (<= -1e4)  otherwise
//! ```
//!
//! for one constant `c` and one window, or the same without the key mask.
//! Anything else (relative-position biases, ALiBi, causal masks that depend on
//! other inputs) is reported and left unfused. A window wider than the probe
//! (`left` or `right` >= `probe_len - 1`) cannot be told from global
//! attention: choose `probe_len` above twice the widest window, or pass the
//! model configuration (see `FuseOptions::from_hf_config`), which sets it and
//! cross-checks the windows found.

use std::collections::{HashMap, HashSet};

use ort::environment::Environment;
use prost::Message;

use super::graph::{subgraph_refs, GraphIndex};
use super::runtime::{make_feeds, run, FetchedData, PadPattern};
use super::FuseError;
use crate::attention::Window;
use crate::onnx::{self, type_proto, GraphProto, ModelProto, TypeProto, ValueInfoProto};

/// How a block's mask maps onto the fused op.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Padding {
    /// The mask does not depend on padding: no bias input.
    None,
    /// Bias built from the graph input `input`: 0 where it is non-zero,
    /// `masked_value` elsewhere.
    FromInput { input: String, masked_value: f32 },
    /// The mask already is a `[batch, 1, 1, seq]` bias: fed as is.
    Direct,
}

/// What a mask tensor means.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MaskAnalysis {
    pub window: Window,
    pub padding: Padding,
}

/// Structural identity of tensors, so that masks recomputed per layer from
/// the same inputs (as in SDPA exports) are probed once.
#[derive(Hash, PartialEq, Eq)]
enum Key {
    Input(String),
    Const(Vec<u8>),
    Node {
        op: String,
        domain: String,
        attrs: Vec<u8>,
        inputs: Vec<usize>,
        slot: usize,
    },
    Opaque(String),
}

struct Interner<'a, 'g> {
    ix: &'a GraphIndex<'g>,
    memo: HashMap<String, usize>,
    ids: HashMap<Key, usize>,
}

impl Interner<'_, '_> {
    fn id(&mut self, tensor: &str, depth: usize) -> usize {
        if let Some(&id) = self.memo.get(tensor) {
            return id;
        }
        let key = self.key(tensor, depth);
        let next = self.ids.len();
        let id = *self.ids.entry(key).or_insert(next);
        self.memo.insert(tensor.to_string(), id);
        id
    }

    fn key(&mut self, tensor: &str, depth: usize) -> Key {
        let ix = self.ix;
        if tensor.is_empty() {
            return Key::Input(String::new());
        }
        if ix.graph_inputs.contains(tensor) {
            return Key::Input(tensor.to_string());
        }
        if let Some(t) = ix.initializers.get(tensor) {
            let mut t = (*t).clone();
            t.name = None;
            t.doc_string = None;
            return Key::Const(t.encode_to_vec());
        }
        let Some((_, node)) = ix.producer_node(tensor) else {
            return Key::Opaque(tensor.to_string());
        };
        if depth > 256 || !subgraph_refs(node).is_empty() {
            return Key::Opaque(tensor.to_string());
        }
        let mut attrs = Vec::new();
        for a in &node.attribute {
            let mut a = a.clone();
            if let Some(t) = a.t.as_mut() {
                t.name = None;
                t.doc_string = None;
            }
            a.doc_string = None;
            a.encode(&mut attrs).unwrap_or_default();
        }
        let inputs = node.input.iter().map(|i| self.id(i, depth + 1)).collect();
        Key::Node {
            op: node.op_type().to_string(),
            domain: node.domain().to_string(),
            attrs,
            inputs,
            slot: node.output.iter().position(|o| o == tensor).unwrap_or(0),
        }
    }
}

/// A model computing only `targets` (as fp32 outputs) from the graph inputs
/// they depend on.
fn cone_model(model: &ModelProto, ix: &GraphIndex<'_>, targets: &[String]) -> ModelProto {
    let graph = ix.graph;
    let mut needed: HashSet<&str> = targets.iter().map(String::as_str).collect();
    let mut keep = vec![false; graph.node.len()];
    for (i, node) in graph.node.iter().enumerate().rev() {
        if node.output.iter().any(|o| needed.contains(o.as_str())) {
            keep[i] = true;
            needed.extend(node.input.iter().map(String::as_str));
            needed.extend(subgraph_refs(node));
        }
    }
    let node = graph
        .node
        .iter()
        .zip(&keep)
        .filter(|(_, &k)| k)
        .map(|(n, _)| n.clone())
        .collect();
    let output = targets
        .iter()
        .map(|t| ValueInfoProto {
            name: Some(t.clone()),
            r#type: Some(TypeProto {
                value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                    elem_type: Some(onnx::dtype::FLOAT),
                    shape: None,
                })),
                denotation: None,
            }),
            ..Default::default()
        })
        .collect();
    ModelProto {
        ir_version: model.ir_version,
        opset_import: model.opset_import.clone(),
        functions: model.functions.clone(),
        graph: Some(GraphProto {
            node,
            name: Some("mask_probe".into()),
            initializer: graph
                .initializer
                .iter()
                .filter(|t| needed.contains(t.name()))
                .cloned()
                .collect(),
            input: graph
                .input
                .iter()
                .filter(|v| needed.contains(v.name()))
                .cloned()
                .collect(),
            output,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Probes each distinct mask tensor and interprets it. Per mask: the
/// analysis, or why it cannot be expressed as padding bias + window.
pub(crate) fn analyse_masks(
    env: &Environment,
    model: &ModelProto,
    ix: &GraphIndex<'_>,
    masks: &[String],
    probe_len: usize,
) -> Result<HashMap<String, Result<MaskAnalysis, String>>, FuseError> {
    let mut interner = Interner {
        ix,
        memo: HashMap::new(),
        ids: HashMap::new(),
    };
    let mut rep_of_id: HashMap<usize, String> = HashMap::new();
    let mut rep_of_mask: HashMap<String, String> = HashMap::new();
    for m in masks {
        let id = interner.id(m, 0);
        let rep = rep_of_id.entry(id).or_insert_with(|| m.clone()).clone();
        rep_of_mask.insert(m.clone(), rep);
    }
    let mut reps: Vec<String> = rep_of_id.into_values().collect();
    reps.sort();
    let sub = cone_model(model, ix, &reps);
    let inputs: Vec<&ValueInfoProto> = sub.graph.iter().flat_map(|g| g.input.iter()).collect();
    let n = probe_len.max(8);
    let feeds = make_feeds(
        &inputs,
        n,
        PadPattern {
            tail: n / 4,
            hole: Some(n / 3),
        },
    )?;
    let fetched = run(
        env,
        &onnx::encode_model(&sub),
        false,
        &feeds.feeds,
        "mask probe",
    )?;
    let mut by_rep = HashMap::new();
    for rep in &reps {
        let result = match fetched.iter().find(|f| &f.name == rep) {
            Some(f) => match &f.data {
                FetchedData::F32(data) => {
                    analyse(&f.shape, data, &feeds.keymask, n).map(|(window, padding)| {
                        let padding = match padding {
                            Pad::None => Padding::None,
                            Pad::Direct => Padding::Direct,
                            Pad::Masked(v) => match &feeds.mask_input {
                                Some(input) => Padding::FromInput {
                                    input: input.clone(),
                                    masked_value: v,
                                },
                                None => Padding::None,
                            },
                        };
                        MaskAnalysis { window, padding }
                    })
                }
                _ => Err("mask is not fp32".to_string()),
            },
            None => Err("mask probe produced no value".to_string()),
        };
        by_rep.insert(rep.clone(), result);
    }
    Ok(masks
        .iter()
        .map(|m| {
            let rep = rep_of_mask.get(m).unwrap_or(m);
            let r = by_rep
                .get(rep)
                .cloned()
                .unwrap_or_else(|| Err("mask was not probed".to_string()));
            (m.clone(), r)
        })
        .collect())
}

/// Padding interpretation before the input name is known.
#[derive(Debug, PartialEq)]
pub(crate) enum Pad {
    None,
    Direct,
    Masked(f32),
}

/// Interprets probed mask values. `keymask[b][j]` says whether key `j` of
/// batch row `b` was a real token in the probe.
pub(crate) fn analyse(
    shape: &[i64],
    data: &[f32],
    keymask: &[Vec<bool>; 2],
    n: usize,
) -> Result<(Window, Pad), String> {
    let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    let [bs, hs, rs, cs] = match dims.as_slice() {
        [b, h, r, c] => [*b, *h, *r, *c],
        [r, c] => [1, 1, *r, *c],
        _ => {
            return Err(format!(
                "mask of shape {shape:?} is not [batch, 1, seq, seq]"
            ))
        }
    };
    if cs != n || !(rs == 1 || rs == n) || !(bs == 1 || bs == 2) || hs == 0 {
        return Err(format!(
            "mask of shape {shape:?} does not broadcast as [batch, 1, {n}, {n}]"
        ));
    }
    if data.len() != bs * hs * rs * cs {
        return Err("mask data does not match its shape".into());
    }
    let plane = rs * cs;
    for b in 0..bs {
        let base = b * hs * plane;
        for h in 1..hs {
            if data[base + h * plane..base + (h + 1) * plane] != data[base..base + plane] {
                return Err("mask differs between heads".into());
            }
        }
    }
    let mut masked_value: Option<f32> = None;
    let mut allowed = Vec::with_capacity(bs * plane);
    for b in 0..bs {
        for &x in &data[b * hs * plane..b * hs * plane + plane] {
            if x == 0.0 {
                allowed.push(true);
            } else if x <= -1e4 {
                match masked_value {
                    None => masked_value = Some(x),
                    Some(m) if m == x => {}
                    Some(_) => return Err("mask uses several negative values".into()),
                }
                allowed.push(false);
            } else {
                return Err(format!(
                    "mask holds {x}, neither 0 nor a large negative constant (a position bias?)"
                ));
            }
        }
    }
    let at = |b: usize, i: usize, j: usize| {
        let b = b.min(bs - 1);
        let r = if rs == 1 { 0 } else { i };
        allowed[b * plane + r * cs + j]
    };
    // Window from the unpadded row 0.
    let window = if rs == 1 {
        Window::GLOBAL
    } else {
        let mut left = 0usize;
        let mut right = 0usize;
        let mut left_bounded = false;
        let mut right_bounded = false;
        for i in 0..n {
            let lo = (0..n).find(|&j| at(0, i, j));
            let hi = (0..n).rev().find(|&j| at(0, i, j));
            let (Some(lo), Some(hi)) = (lo, hi) else {
                return Err(format!("query {i} of an unpadded row sees no key"));
            };
            if lo > i || hi < i {
                return Err(format!("query {i} does not see its own position"));
            }
            left = left.max(i - lo);
            right = right.max(hi - i);
            left_bounded |= lo > 0;
            right_bounded |= hi < n - 1;
        }
        Window {
            left: left_bounded.then_some(left),
            right: right_bounded.then_some(right),
        }
    };
    let matches = |use_keys: bool| {
        (0..2).all(|b| {
            (0..n).all(|i| {
                (0..n).all(|j| {
                    let key_ok = !use_keys || keymask[b][j];
                    at(b, i, j) == (key_ok && window.allows(i, j))
                })
            })
        })
    };
    let key_dependent = keymask[1].iter().any(|&k| !k);
    if key_dependent && matches(true) {
        let v = masked_value.ok_or("padding mask without masked value")?;
        let direct = rs == 1 && hs == 1 && dims.len() == 4;
        Ok((window, if direct { Pad::Direct } else { Pad::Masked(v) }))
    } else if matches(false) {
        match masked_value {
            None => Ok((window, Pad::None)),
            // Window-only masks carry no padding information: the window
            // attribute replaces them completely.
            Some(_) if rs == n => Ok((window, Pad::None)),
            Some(_) => Err("constant mask over keys".into()),
        }
    } else {
        Err("mask is not key padding combined with a sliding window".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(n: usize, keymask: &[Vec<bool>; 2], window: Window, value: f32) -> Vec<f32> {
        let mut v = Vec::new();
        for keys in keymask {
            for i in 0..n {
                for (j, &k) in keys.iter().enumerate() {
                    v.push(if k && window.allows(i, j) { 0.0 } else { value });
                }
            }
        }
        v
    }

    #[test]
    fn recognises_padding_and_window() {
        let n = 40;
        let mut row1 = vec![true; n];
        row1[30..].iter_mut().for_each(|k| *k = false);
        row1[7] = false;
        let keymask = [vec![true; n], row1];
        for window in [
            Window::GLOBAL,
            Window::symmetric(5),
            Window {
                left: Some(3),
                right: Some(0),
            },
        ] {
            let data = build(n, &keymask, window, f32::MIN);
            let got = analyse(&[2, 1, n as i64, n as i64], &data, &keymask, n);
            assert_eq!(got, Ok((window, Pad::Masked(f32::MIN))));
        }
    }

    #[test]
    fn recognises_direct_bias_and_rejects_position_bias() {
        let n = 10;
        let keymask = [vec![true; n], (0..n).map(|j| j < 6).collect()];
        let data: Vec<f32> = keymask
            .iter()
            .flatten()
            .map(|&k| if k { 0.0 } else { -1e4 })
            .collect();
        assert_eq!(
            analyse(&[2, 1, 1, n as i64], &data, &keymask, n),
            Ok((Window::GLOBAL, Pad::Direct))
        );
        let mut bad = build(n, &keymask, Window::GLOBAL, f32::NEG_INFINITY);
        bad[3] = -0.5;
        assert!(analyse(&[2, 1, n as i64, n as i64], &bad, &keymask, n).is_err());
    }
}
