//! The ONNX model format as prost messages, generated at build time from
//! `proto/onnx_wire.proto`, plus the few helpers the graph rewrite needs.
//!
//! The schema describes every field of every message, so
//! `encode_model(&decode_model(bytes)?)` reproduces a model losslessly
//! (byte-identical for files written by the reference serializer, which also
//! emits fields in field-number order).

#[allow(missing_docs, clippy::all, clippy::pedantic)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

pub use generated::*;
use prost::Message;

/// `TensorProto.data_type` codes used by the rewrite.
pub mod dtype {
    /// 32-bit float.
    pub const FLOAT: i32 = 1;
    /// Unsigned byte.
    pub const UINT8: i32 = 2;
    /// Signed byte.
    pub const INT8: i32 = 3;
    /// 32-bit signed integer.
    pub const INT32: i32 = 6;
    /// 64-bit signed integer.
    pub const INT64: i32 = 7;
    /// Boolean (one byte per element in raw data).
    pub const BOOL: i32 = 9;
    /// IEEE half precision.
    pub const FLOAT16: i32 = 10;
    /// 64-bit float.
    pub const DOUBLE: i32 = 11;
    /// bfloat16.
    pub const BFLOAT16: i32 = 16;
}

/// `AttributeProto.type` codes used by the rewrite.
pub mod attr_type {
    /// A single float (`f`).
    pub const FLOAT: i32 = 1;
    /// A single integer (`i`).
    pub const INT: i32 = 2;
    /// A tensor (`t`).
    pub const TENSOR: i32 = 4;
    /// A graph (`g`), such as an `If` node's branch.
    pub const GRAPH: i32 = 5;
    /// A list of integers (`ints`).
    pub const INTS: i32 = 7;
}

/// `TensorProto.data_location` value of tensors stored in external files.
pub const DATA_LOCATION_EXTERNAL: i32 = 1;

/// Decodes an `.onnx` file.
///
/// Errors: [`prost::DecodeError`] for bytes that are not a valid ModelProto.
pub fn decode_model(bytes: &[u8]) -> Result<ModelProto, prost::DecodeError> {
    ModelProto::decode(bytes)
}

/// Encodes a model into `.onnx` bytes.
pub fn encode_model(model: &ModelProto) -> Vec<u8> {
    model.encode_to_vec()
}

fn half_to_f32(h: u16) -> f32 {
    let sign = if h & 0x8000 != 0 { -1.0f32 } else { 1.0 };
    let exp = i32::from((h >> 10) & 0x1f);
    let frac = f32::from(h & 0x3ff);
    match exp {
        0 => sign * frac * (2.0f32).powi(-24),
        31 if frac == 0.0 => sign * f32::INFINITY,
        31 => f32::NAN,
        _ => sign * (1.0 + frac / 1024.0) * (2.0f32).powi(exp - 15),
    }
}

/// The elements of a numeric tensor as f64 (float, double, fp16, bf16 and the
/// integer and bool types), from its typed fields or its raw data. `None` for
/// strings, external data, unsupported types or malformed payloads.
pub fn tensor_values(t: &TensorProto) -> Option<Vec<f64>> {
    if t.data_location() == DATA_LOCATION_EXTERNAL {
        return None;
    }
    let dt = t.data_type();
    if let Some(raw) = t.raw_data.as_deref() {
        let chunks = |n: usize| {
            if raw.len() % n == 0 {
                Some(raw.chunks_exact(n))
            } else {
                None
            }
        };
        let v: Vec<f64> = match dt {
            dtype::FLOAT => chunks(4)?
                .map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
            dtype::DOUBLE => chunks(8)?
                .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
            dtype::INT32 => chunks(4)?
                .map(|c| f64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
            dtype::INT64 => chunks(8)?
                .map(|c| {
                    i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f64
                })
                .collect(),
            dtype::FLOAT16 => chunks(2)?
                .map(|c| f64::from(half_to_f32(u16::from_le_bytes([c[0], c[1]]))))
                .collect(),
            dtype::BFLOAT16 => chunks(2)?
                .map(|c| {
                    f64::from(f32::from_bits(
                        u32::from(u16::from_le_bytes([c[0], c[1]])) << 16,
                    ))
                })
                .collect(),
            dtype::BOOL | dtype::UINT8 => raw.iter().map(|&b| f64::from(b)).collect(),
            dtype::INT8 => raw.iter().map(|&b| f64::from(b as i8)).collect(),
            _ => return None,
        };
        return Some(v);
    }
    match dt {
        dtype::FLOAT => Some(t.float_data.iter().map(|&x| f64::from(x)).collect()),
        dtype::DOUBLE => Some(t.double_data.clone()),
        dtype::INT64 => Some(t.int64_data.iter().map(|&x| x as f64).collect()),
        dtype::INT32 | dtype::BOOL | dtype::INT8 | dtype::UINT8 => {
            Some(t.int32_data.iter().map(|&x| f64::from(x)).collect())
        }
        dtype::FLOAT16 => Some(
            t.int32_data
                .iter()
                .map(|&x| f64::from(half_to_f32(x as u16)))
                .collect(),
        ),
        _ => None,
    }
}

/// A scalar (0-d, or one-element) float32 tensor with an optional name.
pub fn scalar_f32(name: Option<String>, value: f32) -> TensorProto {
    TensorProto {
        name,
        data_type: Some(dtype::FLOAT),
        raw_data: Some(value.to_le_bytes().to_vec()),
        ..Default::default()
    }
}

/// A 1-d int64 tensor.
pub fn ints_i64(name: Option<String>, values: &[i64]) -> TensorProto {
    TensorProto {
        name,
        dims: vec![values.len() as i64],
        data_type: Some(dtype::INT64),
        raw_data: Some(values.iter().flat_map(|v| v.to_le_bytes()).collect()),
        ..Default::default()
    }
}

/// An `INT` attribute.
pub fn attr_int(name: &str, value: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(attr_type::INT),
        i: Some(value),
        ..Default::default()
    }
}

/// A `FLOAT` attribute.
pub fn attr_float(name: &str, value: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(attr_type::FLOAT),
        f: Some(value),
        ..Default::default()
    }
}

/// An `INTS` attribute.
pub fn attr_ints(name: &str, values: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.to_string()),
        r#type: Some(attr_type::INTS),
        ints: values.to_vec(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversion() {
        assert_eq!(half_to_f32(0x3c00), 1.0);
        assert_eq!(half_to_f32(0xc000), -2.0);
        assert_eq!(half_to_f32(0x3800), 0.5);
        assert_eq!(half_to_f32(0xfc00), f32::NEG_INFINITY);
    }

    #[test]
    fn scalar_roundtrip() {
        let t = scalar_f32(Some("x".into()), -0.25);
        assert_eq!(tensor_values(&t), Some(vec![-0.25]));
        let bytes = t.encode_to_vec();
        assert_eq!(TensorProto::decode(bytes.as_slice()).ok(), Some(t));
        let i = ints_i64(None, &[1, -2]);
        assert_eq!(tensor_values(&i), Some(vec![1.0, -2.0]));
    }
}
