//! Int8 matrix products in the daemon's sessions are exact on every CPU.
//!
//! The prepared graphs multiply uint8 activations by int8 weights (`MatMulInteger`). On
//! x86 without VNNI, ONNX Runtime's kernels for that pair sum two neighbouring products in
//! saturating 16-bit arithmetic unless the session converts the weights
//! (`runtime::int8_products_saturate`). This test builds the smallest graph where that
//! clamp shows, 255 × 127 + 255 × 127 = 64,770 (clamped: 32,767), runs it through
//! `runtime::build_session` and wants the exact sum in every column.

mod support;

use ort::value::Tensor;
use semroute_daemon::config::RuntimeConfig;
use semroute_daemon::runtime;
use semroute_kernels::onnx::{
    self, tensor_shape_proto, type_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto,
    TensorProto, TensorShapeProto, TypeProto, ValueInfoProto,
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
/// weight 127: the weight is an initializer, as in the prepared graphs.
fn matmul_integer_model() -> Vec<u8> {
    let weight = TensorProto {
        name: Some("W".into()),
        dims: vec![K as i64, N as i64],
        data_type: Some(onnx::dtype::INT8),
        raw_data: Some(vec![127u8; K * N]),
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            name: Some("int8_products".into()),
            node: vec![NodeProto {
                op_type: Some("MatMulInteger".into()),
                input: vec!["A".into(), "W".into()],
                output: vec!["Y".into()],
                name: Some("product".into()),
                ..Default::default()
            }],
            initializer: vec![weight],
            input: vec![value_info("A", onnx::dtype::UINT8, &[1, K as i64])],
            output: vec![value_info("Y", onnx::dtype::INT32, &[1, N as i64])],
            ..Default::default()
        }),
        ..Default::default()
    };
    onnx::encode_model(&model)
}

#[test]
fn uint8_by_int8_products_do_not_saturate() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("int8_products.onnx");
    std::fs::write(&path, matmul_integer_model()).expect("write model");
    let config = RuntimeConfig {
        ort_library: Some(support::ort_library()),
        ..RuntimeConfig::default()
    };
    let (mut session, _) = runtime::build_session(&config, &path).expect("session");
    let a = Tensor::from_array((vec![1usize, K], vec![255u8; K])).expect("tensor");
    let outputs = session.run(ort::inputs!["A" => a]).expect("run");
    let (_, y) = outputs["Y"]
        .try_extract_tensor::<i32>()
        .expect("int32 output");
    let exact = (K * 255 * 127) as i32;
    assert_eq!(
        y,
        &[exact; N][..],
        "uint8 x int8 products saturated (this CPU: int8_products_saturate = {})",
        runtime::int8_products_saturate()
    );
}
