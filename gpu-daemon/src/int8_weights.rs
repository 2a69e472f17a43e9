//! Int8 weights of a quantized graph rewritten as uint8, for x86 CPUs without VNNI.
//!
//! A dynamically quantized graph multiplies uint8 activations by int8 weights
//! (`MatMulInteger(A: uint8, B: int8, a_zero_point, b_zero_point)`). On x86 without VNNI,
//! ONNX Runtime's kernels for that pair sum two neighbouring products in saturating 16-bit
//! arithmetic (`VPMADDUBSW`: 255 × 127 × 2 = 64,770 is clamped to 32,767), and the graph's
//! outputs drift from its fp32 source. ONNX Runtime's own remedy, the session entry
//! `session.x64quantprecision`, converts the weights at load but does not reach nodes
//! inside subgraphs whose weights are initializers of an outer graph: the prepared graphs'
//! padding branch (one `If` whose branches share the outer graph's weights) keeps
//! saturating with it.
//!
//! [`weights_as_uint8`] does the conversion on the whole model, subgraphs included: each
//! int8 weight and weight zero point of a `MatMulInteger` becomes uint8 shifted by 128
//! (a missing zero point becomes 128). `(a - a_zero) × (b - b_zero)` is unchanged, so the
//! products are the int8 graph's, computed by the uint8 × uint8 kernels, which widen to 16
//! bits before they multiply and are exact.

use std::collections::{HashMap, HashSet};

use semroute_kernels::onnx::{
    dtype, GraphProto, ModelProto, NodeProto, TensorProto, DATA_LOCATION_EXTERNAL,
};

/// `MatMulInteger` input slots: weight and weight zero point.
const WEIGHT: usize = 1;
const WEIGHT_ZERO_POINT: usize = 3;

/// Why a model was left as it is.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Int8WeightsError {
    /// An initializer lives in an external data file: the model is loaded from its path
    /// as written.
    #[error("initializer {0} is stored as external data")]
    ExternalData(String),
}

/// Rewrites the int8 weights (and weight zero points) of every `MatMulInteger` in
/// `model`, in every graph and subgraph, to uint8 shifted by 128; returns the nodes
/// rewritten (0: nothing to do). A node is left alone where its weight is not an int8
/// initializer, its zero point is neither absent nor an int8 initializer, or either is
/// also read by a node that is not in that slot of a `MatMulInteger`.
pub fn weights_as_uint8(model: &mut ModelProto) -> Result<usize, Int8WeightsError> {
    let Some(graph) = model.graph.as_mut() else {
        return Ok(0);
    };
    let mut survey = Survey::default();
    survey.graph(graph)?;

    // A tensor may change when it is an int8 initializer read only as a MatMulInteger
    // weight or weight zero point; a weight is shifted when every node that reads it can
    // take the shift (its zero point absent or able to change as well), and a zero point
    // when every node that reads it has its weight shifted.
    let may_change = |name: &str| {
        survey.inits.get(name) == Some(&dtype::INT8)
            && survey
                .reads
                .get(name)
                .is_some_and(|&(all, in_slots)| all == in_slots)
    };
    let mut weights: HashSet<&str> = survey
        .nodes
        .iter()
        .map(|(w, _)| w.as_str())
        .filter(|w| may_change(w))
        .collect();
    loop {
        let before = weights.len();
        for (w, zp) in &survey.nodes {
            let Some(zp) = zp else { continue };
            let shifted = weights.contains(w.as_str());
            // Every reader of this zero point must agree on shifting it.
            let conflict = !may_change(zp)
                || survey.nodes.iter().any(|(w2, zp2)| {
                    zp2.as_deref() == Some(zp) && weights.contains(w2.as_str()) != shifted
                });
            if conflict && shifted {
                weights.remove(w.as_str());
            }
        }
        if weights.len() == before {
            break;
        }
    }
    let mut shift: HashSet<String> = weights.iter().map(|w| w.to_string()).collect();
    let mut missing_zero_point = false;
    for (w, zp) in &survey.nodes {
        if weights.contains(w.as_str()) {
            match zp {
                Some(zp) => {
                    shift.insert(zp.clone());
                }
                None => missing_zero_point = true,
            }
        }
    }
    if shift.is_empty() {
        return Ok(0);
    }
    let zero_point = unique_name(&survey.inits, "int8_weights_as_uint8/zero_point");
    let rewritten = rewrite(graph, &shift, &zero_point);
    if missing_zero_point {
        graph.initializer.push(TensorProto {
            name: Some(zero_point),
            data_type: Some(dtype::UINT8),
            raw_data: Some(vec![128]),
            ..Default::default()
        });
    }
    Ok(rewritten)
}

/// What [`weights_as_uint8`] needs to know of a model, gathered over its graph and
/// subgraphs.
#[derive(Default)]
struct Survey {
    /// Every initializer's `data_type`.
    inits: HashMap<String, i32>,
    /// Per tensor name: reads by any node, and reads in slot 1 or 3 of a `MatMulInteger`.
    reads: HashMap<String, (usize, usize)>,
    /// Every `MatMulInteger`'s weight and weight zero point (when it has one).
    nodes: Vec<(String, Option<String>)>,
}

impl Survey {
    fn graph(&mut self, graph: &GraphProto) -> Result<(), Int8WeightsError> {
        for t in &graph.initializer {
            let name = t.name.clone().unwrap_or_default();
            if t.data_location == Some(DATA_LOCATION_EXTERNAL) {
                return Err(Int8WeightsError::ExternalData(name));
            }
            self.inits.insert(name, t.data_type.unwrap_or(0));
        }
        for node in &graph.node {
            let is_mmi = is_matmul_integer(node);
            for (slot, input) in node.input.iter().enumerate() {
                if input.is_empty() {
                    continue;
                }
                let r = self.reads.entry(input.clone()).or_default();
                r.0 += 1;
                if is_mmi && (slot == WEIGHT || slot == WEIGHT_ZERO_POINT) {
                    r.1 += 1;
                }
            }
            if is_mmi {
                if let Some(w) = node.input.get(WEIGHT).filter(|w| !w.is_empty()) {
                    let zp = node.input.get(WEIGHT_ZERO_POINT).filter(|z| !z.is_empty());
                    self.nodes.push((w.clone(), zp.cloned()));
                }
            }
            for attr in &node.attribute {
                for sub in attr.g.iter().chain(attr.graphs.iter()) {
                    self.graph(sub)?;
                }
            }
        }
        Ok(())
    }
}

fn is_matmul_integer(node: &NodeProto) -> bool {
    node.op_type.as_deref() == Some("MatMulInteger")
        && node.domain.as_deref().unwrap_or("").is_empty()
}

/// Shifts the initializers named in `shift` and gives each `MatMulInteger` whose weight
/// was shifted and that has no weight zero point the one named `zero_point`; returns the
/// `MatMulInteger` nodes whose weight was shifted.
fn rewrite(graph: &mut GraphProto, shift: &HashSet<String>, zero_point: &str) -> usize {
    for t in &mut graph.initializer {
        if t.name.as_deref().is_some_and(|n| shift.contains(n)) {
            shift_to_uint8(t);
        }
    }
    let mut rewritten = 0;
    for node in &mut graph.node {
        if is_matmul_integer(node) && node.input.get(WEIGHT).is_some_and(|w| shift.contains(w)) {
            rewritten += 1;
            let has_zero_point = node
                .input
                .get(WEIGHT_ZERO_POINT)
                .is_some_and(|zp| !zp.is_empty());
            if !has_zero_point {
                node.input.resize(WEIGHT_ZERO_POINT, String::new());
                node.input.push(zero_point.to_string());
            }
        }
        for attr in &mut node.attribute {
            for sub in attr.g.iter_mut().chain(attr.graphs.iter_mut()) {
                rewritten += rewrite(sub, shift, zero_point);
            }
        }
    }
    rewritten
}

/// An int8 tensor as uint8 + 128: in two's complement that is the top bit flipped.
fn shift_to_uint8(t: &mut TensorProto) {
    t.data_type = Some(dtype::UINT8);
    if let Some(raw) = t.raw_data.as_mut() {
        for b in raw.iter_mut() {
            *b ^= 0x80;
        }
    }
    // Without raw data, int8 and uint8 values are both stored one per int32.
    for v in &mut t.int32_data {
        *v += 128;
    }
}

fn unique_name(inits: &HashMap<String, i32>, base: &str) -> String {
    let mut name = base.to_string();
    let mut i = 1;
    while inits.contains_key(&name) {
        name = format!("{base}_{i}");
        i += 1;
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;
    use semroute_kernels::onnx::{attr_type, AttributeProto};

    fn int8(name: &str, values: &[i8]) -> TensorProto {
        TensorProto {
            name: Some(name.into()),
            dims: vec![values.len() as i64],
            data_type: Some(dtype::INT8),
            raw_data: Some(values.iter().map(|&v| v as u8).collect()),
            ..Default::default()
        }
    }

    fn node(op: &str, inputs: &[&str], output: &str) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![output.into()],
            ..Default::default()
        }
    }

    fn model(graph: GraphProto) -> ModelProto {
        ModelProto {
            graph: Some(graph),
            ..Default::default()
        }
    }

    fn init<'a>(g: &'a GraphProto, name: &str) -> &'a TensorProto {
        g.initializer
            .iter()
            .find(|t| t.name.as_deref() == Some(name))
            .expect("initializer")
    }

    #[test]
    fn weights_and_zero_points_shift_by_128_inside_subgraphs_too() {
        let branch = GraphProto {
            node: vec![node("MatMulInteger", &["a", "w", "", "wz"], "y")],
            ..Default::default()
        };
        let mut m = model(GraphProto {
            node: vec![
                node("MatMulInteger", &["a", "v"], "x"),
                NodeProto {
                    op_type: Some("If".into()),
                    input: vec!["c".into()],
                    output: vec!["y".into()],
                    // Both branches read the outer graph's weight, as in the padding branch.
                    attribute: ["then_branch", "else_branch"]
                        .map(|name| AttributeProto {
                            name: Some(name.into()),
                            r#type: Some(attr_type::GRAPH),
                            g: Some(branch.clone()),
                            ..Default::default()
                        })
                        .to_vec(),
                    ..Default::default()
                },
            ],
            initializer: vec![
                int8("w", &[-128, -1, 0, 127]),
                int8("wz", &[0]),
                int8("v", &[5]),
            ],
            ..Default::default()
        });
        assert_eq!(weights_as_uint8(&mut m), Ok(3));
        let g = m.graph.as_ref().expect("graph");
        assert_eq!(init(g, "w").data_type, Some(dtype::UINT8));
        assert_eq!(
            init(g, "w").raw_data.as_deref(),
            Some(&[0u8, 127, 128, 255][..])
        );
        assert_eq!(init(g, "wz").raw_data.as_deref(), Some(&[128u8][..]));
        assert_eq!(init(g, "v").raw_data.as_deref(), Some(&[133u8][..]));
        // The node without a zero point gets one of 128.
        let zp = &g.node[0].input[WEIGHT_ZERO_POINT];
        assert_eq!(g.node[0].input[2], "");
        assert_eq!(init(g, zp).raw_data.as_deref(), Some(&[128u8][..]));
        assert_eq!(init(g, zp).data_type, Some(dtype::UINT8));
    }

    #[test]
    fn a_weight_read_elsewhere_or_already_uint8_is_left_alone() {
        let mut shared = model(GraphProto {
            node: vec![
                node("MatMulInteger", &["a", "w"], "x"),
                node("Cast", &["w"], "wf"),
            ],
            initializer: vec![int8("w", &[1, 2])],
            ..Default::default()
        });
        assert_eq!(weights_as_uint8(&mut shared), Ok(0));
        let g = shared.graph.as_ref().expect("graph");
        assert_eq!(init(g, "w").data_type, Some(dtype::INT8));

        let mut unsigned = model(GraphProto {
            node: vec![node("MatMulInteger", &["a", "w"], "x")],
            initializer: vec![TensorProto {
                data_type: Some(dtype::UINT8),
                ..int8("w", &[1, 2])
            }],
            ..Default::default()
        });
        assert_eq!(weights_as_uint8(&mut unsigned), Ok(0));
    }

    #[test]
    fn external_data_is_refused() {
        let mut m = model(GraphProto {
            node: vec![node("MatMulInteger", &["a", "w"], "x")],
            initializer: vec![TensorProto {
                data_location: Some(DATA_LOCATION_EXTERNAL),
                ..int8("w", &[1])
            }],
            ..Default::default()
        });
        assert_eq!(
            weights_as_uint8(&mut m),
            Err(Int8WeightsError::ExternalData("w".into()))
        );
    }
}
