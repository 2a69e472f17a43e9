//! Read-only index over a top-level ONNX graph: who produces and who consumes
//! each tensor, constant values, attribute accessors; plus dead-node removal.

use std::collections::{HashMap, HashSet};

use crate::onnx::{self, AttributeProto, GraphProto, ModelProto, NodeProto, TensorProto};

/// Producer/consumer maps of a graph.
pub(crate) struct GraphIndex<'g> {
    pub graph: &'g GraphProto,
    /// Tensor name -> index of the node that produces it.
    pub producer: HashMap<&'g str, usize>,
    /// Tensor name -> indices of the nodes that read it (once per node).
    pub consumers: HashMap<&'g str, Vec<usize>>,
    pub initializers: HashMap<&'g str, &'g TensorProto>,
    pub graph_inputs: HashSet<&'g str>,
    pub graph_outputs: HashSet<&'g str>,
    /// Version of the default (`ai.onnx`) operator set.
    pub default_opset: i64,
}

impl<'g> GraphIndex<'g> {
    pub fn new(model: &'g ModelProto, graph: &'g GraphProto) -> Self {
        let mut producer = HashMap::new();
        let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, node) in graph.node.iter().enumerate() {
            for out in node.output.iter().filter(|o| !o.is_empty()) {
                producer.insert(out.as_str(), i);
            }
            let mut seen = HashSet::new();
            let reads = node
                .input
                .iter()
                .map(String::as_str)
                .chain(subgraph_refs(node));
            for inp in reads.filter(|s| !s.is_empty()) {
                if seen.insert(inp) {
                    consumers.entry(inp).or_default().push(i);
                }
            }
        }
        let default_opset = model
            .opset_import
            .iter()
            .find(|o| matches!(o.domain(), "" | "ai.onnx"))
            .map_or(1, |o| o.version());
        GraphIndex {
            graph,
            producer,
            consumers,
            initializers: graph.initializer.iter().map(|t| (t.name(), t)).collect(),
            graph_inputs: graph.input.iter().map(|v| v.name()).collect(),
            graph_outputs: graph.output.iter().map(|v| v.name()).collect(),
            default_opset,
        }
    }

    pub fn producer_node(&self, tensor: &str) -> Option<(usize, &'g NodeProto)> {
        let &i = self.producer.get(tensor)?;
        Some((i, self.graph.node.get(i)?))
    }

    pub fn consumers_of(&self, tensor: &str) -> &[usize] {
        self.consumers.get(tensor).map_or(&[], Vec::as_slice)
    }

    /// Whether `tensor` is read by exactly one node and is not a graph output.
    pub fn single_use(&self, tensor: &str) -> bool {
        self.consumers_of(tensor).len() == 1 && !self.graph_outputs.contains(tensor)
    }

    /// The value of a constant tensor: an initializer that is not also a graph
    /// input (which a caller could override), or the output of a `Constant`
    /// node. Returns `(data_type, values)`.
    pub fn constant(&self, tensor: &str) -> Option<(i32, Vec<f64>)> {
        if let Some(t) = self.initializers.get(tensor) {
            if self.graph_inputs.contains(tensor) {
                return None;
            }
            return Some((t.data_type(), onnx::tensor_values(t)?));
        }
        let (_, node) = self.producer_node(tensor)?;
        if node.op_type() != "Constant" || !matches!(node.domain(), "" | "ai.onnx") {
            return None;
        }
        let a = node.attribute.first()?;
        match a.name() {
            "value" => {
                let t = a.t.as_ref()?;
                Some((t.data_type(), onnx::tensor_values(t)?))
            }
            "value_float" => Some((onnx::dtype::FLOAT, vec![f64::from(a.f())])),
            "value_floats" => Some((
                onnx::dtype::FLOAT,
                a.floats.iter().map(|&x| f64::from(x)).collect(),
            )),
            "value_int" => Some((onnx::dtype::INT64, vec![a.i() as f64])),
            "value_ints" => Some((
                onnx::dtype::INT64,
                a.ints.iter().map(|&x| x as f64).collect(),
            )),
            _ => None,
        }
    }

    /// A constant with exactly one element.
    pub fn scalar(&self, tensor: &str) -> Option<(i32, f64)> {
        match self.constant(tensor)? {
            (dt, v) if v.len() == 1 => Some((dt, v[0])),
            _ => None,
        }
    }
}

/// Whether a node is in the default operator set.
pub(crate) fn is_onnx(node: &NodeProto) -> bool {
    matches!(node.domain(), "" | "ai.onnx")
}

pub(crate) fn attr<'a>(node: &'a NodeProto, name: &str) -> Option<&'a AttributeProto> {
    node.attribute.iter().find(|a| a.name() == name)
}

pub(crate) fn attr_i(node: &NodeProto, name: &str) -> Option<i64> {
    attr(node, name).and_then(|a| a.i)
}

pub(crate) fn attr_ints<'a>(node: &'a NodeProto, name: &str) -> Option<&'a [i64]> {
    attr(node, name).map(|a| a.ints.as_slice())
}

/// Names read inside a node's subgraph attributes (`If`, `Loop`, `Scan`
/// bodies): conservatively every input of every nested node, so that values
/// captured from the enclosing scope stay alive.
pub(crate) fn subgraph_refs(node: &NodeProto) -> Vec<&str> {
    fn walk<'a>(g: &'a GraphProto, out: &mut Vec<&'a str>) {
        for n in &g.node {
            out.extend(n.input.iter().map(String::as_str));
            for a in &n.attribute {
                for sub in a.g.iter().chain(a.graphs.iter()) {
                    walk(sub, out);
                }
            }
        }
    }
    let mut out = Vec::new();
    for a in &node.attribute {
        for sub in a.g.iter().chain(a.graphs.iter()) {
            walk(sub, &mut out);
        }
    }
    out
}

/// Removes nodes none of whose outputs reaches a graph output, then
/// initializers and `value_info` entries nothing refers to any more.
/// Returns the number of nodes removed.
pub(crate) fn remove_dead_nodes(graph: &mut GraphProto) -> usize {
    let mut needed: HashSet<String> = graph.output.iter().map(|o| o.name().to_string()).collect();
    let mut keep = vec![false; graph.node.len()];
    for (i, node) in graph.node.iter().enumerate().rev() {
        if node.output.iter().any(|o| needed.contains(o)) {
            keep[i] = true;
            needed.extend(node.input.iter().filter(|s| !s.is_empty()).cloned());
            needed.extend(subgraph_refs(node).into_iter().map(str::to_string));
        }
    }
    let before = graph.node.len();
    let mut flags = keep.into_iter();
    graph.node.retain(|_| flags.next().unwrap_or(true));
    let removed = before - graph.node.len();
    let inputs: HashSet<String> = graph.input.iter().map(|i| i.name().to_string()).collect();
    graph
        .initializer
        .retain(|t| needed.contains(t.name()) || inputs.contains(t.name()));
    graph
        .sparse_initializer
        .retain(|t| t.values.as_ref().is_none_or(|v| needed.contains(v.name())));
    let produced: HashSet<&str> = graph
        .node
        .iter()
        .flat_map(|n| n.output.iter().map(String::as_str))
        .collect();
    graph.value_info.retain(|v| produced.contains(v.name()));
    removed
}
