//! Int8 matrix products in the daemon's sessions are exact on every CPU.
//!
//! The prepared graphs multiply uint8 activations by int8 weights (`MatMulInteger`). On
//! x86 without VNNI, ONNX Runtime's kernels for that pair sum two neighbouring products in
//! saturating 16-bit arithmetic unless the session converts the weights
//! (`runtime::int8_products_saturate`). This test builds the smallest graph where that
//! clamp shows, 255 × 127 + 255 × 127 = 64,770 (clamped: 32,767), runs it through
//! `runtime::build_session` and wants the exact sum in every column: once at the top level,
//! once inside an `If` branch that reads the outer graph's weight, as the prepared graphs'
//! padding branch does.

mod support;

use ort::value::Tensor;
use semroute_daemon::config::RuntimeConfig;
use semroute_daemon::runtime;
use semroute_kernels::onnx::{
    self, attr_type, tensor_shape_proto, type_proto, AttributeProto, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
};

/// Reduction length of the product: long enough for the kernels' packed paths.
const K: usize = 64;
/// Output columns.
const N: usize = 16;

fn value_info(name: &str, elem_type: i32, dims: &[i64]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem_type),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| tensor_shape_proto::Dimension {
                            value: Some(tensor_shape_proto::dimension::Value::DimValue(d)),
                            denotation: None,
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `Y[1, N] int32 = MatMulInteger(A[1, K] uint8, W[K, N] int8)`, zero points 0, every
/// weight 127: the weight is an initializer, as in the prepared graphs. With `in_branch`
/// the product is the `then` branch of an `If` on input `C` (fed true; a constant
/// condition would be folded away at load), and `W` stays in the outer graph.
fn matmul_integer_model(in_branch: bool) -> Vec<u8> {
    let weight = TensorProto {
        name: Some("W".into()),
        dims: vec![K as i64, N as i64],
        data_type: Some(onnx::dtype::INT8),
        raw_data: Some(vec![127u8; K * N]),
        ..Default::default()
    };
    let product = |output: &str| NodeProto {
        op_type: Some("MatMulInteger".into()),
        input: vec!["A".into(), "W".into()],
        output: vec![output.into()],
        name: Some(format!("product {output}")),
        ..Default::default()
    };
    let branch = |output: &str, node: Vec<NodeProto>| GraphProto {
        name: Some(output.into()),
        node,
        output: vec![value_info(output, onnx::dtype::INT32, &[1, N as i64])],
        ..Default::default()
    };
    let (node, initializer) = if in_branch {
        let attr = |name: &str, g: GraphProto| AttributeProto {
            name: Some(name.into()),
            r#type: Some(attr_type::GRAPH),
            g: Some(g),
            ..Default::default()
        };
        let zeros = TensorProto {
            name: Some("Z".into()),
            dims: vec![1, N as i64],
            data_type: Some(onnx::dtype::INT32),
            int32_data: vec![0; N],
            ..Default::default()
        };
        let else_branch = NodeProto {
            op_type: Some("Identity".into()),
            input: vec!["Z".into()],
            output: vec!["Y_else".into()],
            ..Default::default()
        };
        let node = NodeProto {
            op_type: Some("If".into()),
            input: vec!["C".into()],
            output: vec!["Y".into()],
            attribute: vec![
                attr("then_branch", branch("Y_then", vec![product("Y_then")])),
                attr("else_branch", branch("Y_else", vec![else_branch])),
            ],
            ..Default::default()
        };
        (node, vec![weight, zeros])
    } else {
        (product("Y"), vec![weight])
    };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            name: Some("int8_products".into()),
            node: vec![node],
            initializer,
            input: [value_info("A", onnx::dtype::UINT8, &[1, K as i64])]
                .into_iter()
                .chain(in_branch.then(|| value_info("C", onnx::dtype::BOOL, &[])))
                .collect(),
            output: vec![value_info("Y", onnx::dtype::INT32, &[1, N as i64])],
            ..Default::default()
        }),
        ..Default::default()
    };
    onnx::encode_model(&model)
}

fn products(in_branch: bool) -> Vec<i32> {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("int8_products.onnx");
    std::fs::write(&path, matmul_integer_model(in_branch)).expect("write model");
    let config = RuntimeConfig {
        ort_library: Some(support::ort_library()),
        ..RuntimeConfig::default()
    };
    let (mut session, _) = runtime::build_session(&config, &path).expect("session");
    let a = Tensor::from_array((vec![1usize, K], vec![255u8; K])).expect("tensor");
    let outputs = if in_branch {
        let c = Tensor::from_array((Vec::<usize>::new(), vec![true])).expect("tensor");
        session.run(ort::inputs!["A" => a, "C" => c])
    } else {
        session.run(ort::inputs!["A" => a])
    }
    .expect("run");
    let (_, y) = outputs["Y"]
        .try_extract_tensor::<i32>()
        .expect("int32 output");
    y.to_vec()
}

#[test]
fn uint8_by_int8_products_do_not_saturate() {
    let exact = (K * 255 * 127) as i32;
    for in_branch in [false, true] {
        assert_eq!(
            products(in_branch),
            vec![exact; N],
            "uint8 x int8 products saturated (in an If branch: {in_branch}; this CPU: \
             int8_products_saturate = {})",
            runtime::int8_products_saturate()
        );
    }
}
