//! Running (sub-)models in ONNX Runtime for the rewrite: synthetic inputs,
//! mask probing and the before/after verification.

use ort::environment::Environment;
use ort::session::Session;
use ort::value::{DynValue, Tensor};

use super::{FuseError, Verification, VerifyOptions};
use crate::onnx::{dtype, type_proto, ValueInfoProto};

/// Element data of a synthetic input.
pub(crate) enum Data {
    I64(Vec<i64>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
}

/// One synthetic input `[batch, seq]`.
pub(crate) struct Feed {
    pub name: String,
    pub shape: [usize; 2],
    pub data: Data,
}

/// Which key positions of batch row 1 are padding (row 0 never is).
#[derive(Debug, Clone, Copy)]
pub(crate) struct PadPattern {
    /// Number of padded positions at the end.
    pub tail: usize,
    /// One padded position inside the sequence.
    pub hole: Option<usize>,
}

/// Synthetic inputs of a probe: the feeds, the name of the attention-mask
/// input (if any) and the key mask of each of the two batch rows.
pub(crate) struct Feeds {
    pub feeds: Vec<Feed>,
    pub mask_input: Option<String>,
    pub keymask: [Vec<bool>; 2],
}

fn elem_type(v: &ValueInfoProto) -> Option<(i32, usize)> {
    match v.r#type.as_ref()?.value.as_ref()? {
        type_proto::Value::TensorType(t) => {
            Some((t.elem_type(), t.shape.as_ref().map_or(0, |s| s.dim.len())))
        }
        _ => None,
    }
}

/// Builds batch-2 inputs of length `n` for `inputs`: the attention mask
/// (the input named `attention_mask`, else the first whose name contains
/// "mask") follows `pad`; position inputs count up; token-type inputs are
/// zero; anything else (token ids) gets small ids from 3 to 52.
pub(crate) fn make_feeds(
    inputs: &[&ValueInfoProto],
    n: usize,
    pad: PadPattern,
) -> Result<Feeds, FuseError> {
    let lower = |v: &ValueInfoProto| v.name().to_ascii_lowercase();
    let mask_input = inputs
        .iter()
        .find(|v| v.name() == "attention_mask")
        .or_else(|| inputs.iter().find(|v| lower(v).contains("mask")))
        .map(|v| v.name().to_string());
    let mut row1 = vec![true; n];
    row1[n.saturating_sub(pad.tail)..].fill(false);
    if let Some(h) = pad.hole.filter(|&h| h < n) {
        row1[h] = false;
    }
    let keymask = if mask_input.is_some() {
        [vec![true; n], row1]
    } else {
        [vec![true; n], vec![true; n]]
    };
    let mut feeds = Vec::new();
    for v in inputs {
        let name = v.name().to_string();
        let (et, rank) = elem_type(v).ok_or_else(|| FuseError::UnsupportedInput {
            input: name.clone(),
            reason: "not a tensor".into(),
        })?;
        if rank != 2 {
            return Err(FuseError::UnsupportedInput {
                input: name,
                reason: format!("rank {rank}; only [batch, seq] inputs can be synthesised"),
            });
        }
        let lname = name.to_ascii_lowercase();
        let values: Vec<i64> = if Some(&name) == mask_input.as_ref() {
            keymask.iter().flatten().map(|&b| i64::from(b)).collect()
        } else if lname.contains("position") {
            (0..2).flat_map(|_| 0..n as i64).collect()
        } else if lname.contains("token_type") || lname.contains("segment") {
            vec![0; 2 * n]
        } else {
            (0..2)
                .flat_map(|b| (0..n).map(move |j| ((j * 7 + b * 3) % 50) as i64 + 3))
                .collect()
        };
        let data = match et {
            dtype::INT64 => Data::I64(values),
            dtype::INT32 => Data::I32(values.iter().map(|&x| x as i32).collect()),
            dtype::FLOAT => Data::F32(values.iter().map(|&x| x as f32).collect()),
            dtype::BOOL => Data::Bool(values.iter().map(|&x| x != 0).collect()),
            other => {
                return Err(FuseError::UnsupportedInput {
                    input: name,
                    reason: format!("element type {other}"),
                })
            }
        };
        feeds.push(Feed {
            name,
            shape: [2, n],
            data,
        });
    }
    Ok(Feeds {
        feeds,
        mask_input,
        keymask,
    })
}

/// A fetched output.
pub(crate) struct Fetched {
    pub name: String,
    pub shape: Vec<i64>,
    pub data: FetchedData,
}

/// Output element data (fp32 and int64 are compared; others are ignored).
pub(crate) enum FetchedData {
    F32(Vec<f32>),
    I64(Vec<i64>),
    Other,
}

fn ort_err(context: &str) -> impl Fn(ort::Error) -> FuseError + '_ {
    move |e| FuseError::Runtime {
        context: context.to_string(),
        message: e.to_string(),
    }
}

fn to_value(feed: &Feed, context: &str) -> Result<DynValue, FuseError> {
    let shape = feed.shape.to_vec();
    let value = match &feed.data {
        Data::I64(v) => Tensor::from_array((shape, v.clone())).map(Tensor::into_dyn),
        Data::I32(v) => Tensor::from_array((shape, v.clone())).map(Tensor::into_dyn),
        Data::F32(v) => Tensor::from_array((shape, v.clone())).map(Tensor::into_dyn),
        Data::Bool(v) => Tensor::from_array((shape, v.clone())).map(Tensor::into_dyn),
    };
    value.map_err(ort_err(context))
}

/// Runs `model` once on `feeds` and returns all of its outputs.
/// `with_ops` registers the `com.semroute` domain first.
pub(crate) fn run(
    env: &Environment,
    model: &[u8],
    with_ops: bool,
    feeds: &[Feed],
    context: &str,
) -> Result<Vec<Fetched>, FuseError> {
    let err = ort_err(context);
    let mut builder = Session::builder(env).map_err(&err)?;
    if with_ops {
        builder = crate::op::register(builder).map_err(&err)?;
    }
    let mut session = builder.commit_from_memory(model).map_err(&err)?;
    let inputs = feeds
        .iter()
        .map(|f| Ok((f.name.clone(), to_value(f, context)?)))
        .collect::<Result<Vec<(String, DynValue)>, FuseError>>()?;
    let outputs = session.run(inputs).map_err(&err)?;
    let mut fetched = Vec::new();
    for (name, value) in outputs.iter() {
        let (shape, data) = if let Ok((s, d)) = value.try_extract_tensor::<f32>() {
            (s.to_vec(), FetchedData::F32(d.to_vec()))
        } else if let Ok((s, d)) = value.try_extract_tensor::<i64>() {
            (s.to_vec(), FetchedData::I64(d.to_vec()))
        } else {
            (Vec::new(), FetchedData::Other)
        };
        fetched.push(Fetched {
            name: name.to_string(),
            shape,
            data,
        });
    }
    Ok(fetched)
}

/// Runs the original and the fused model on the same synthetic input and
/// compares every fp32 (and int64) output.
pub(crate) fn verify(
    env: &Environment,
    original: &[u8],
    fused: &[u8],
    inputs: &[&ValueInfoProto],
    options: VerifyOptions,
) -> Result<Verification, FuseError> {
    let n = options.seq_len.max(2);
    let pad = PadPattern {
        tail: (n / 8).clamp(1, 5),
        hole: Some(n / 3),
    };
    let feeds = make_feeds(inputs, n, pad)?;
    let reference = run(
        env,
        original,
        false,
        &feeds.feeds,
        "verification (original)",
    )?;
    let candidate = run(env, fused, true, &feeds.feeds, "verification (fused)")?;
    let mut max_abs_diff = 0.0f32;
    let mut max_abs_ref = 0.0f32;
    for r in &reference {
        let c =
            candidate
                .iter()
                .find(|c| c.name == r.name)
                .ok_or_else(|| FuseError::Verification {
                    output: r.name.clone(),
                    detail: "missing from the fused model".into(),
                })?;
        if c.shape != r.shape {
            return Err(FuseError::Verification {
                output: r.name.clone(),
                detail: format!("shape {:?} instead of {:?}", c.shape, r.shape),
            });
        }
        match (&r.data, &c.data) {
            (FetchedData::F32(a), FetchedData::F32(b)) => {
                for (&x, &y) in a.iter().zip(b) {
                    if x.is_nan() != y.is_nan() {
                        return Err(FuseError::Verification {
                            output: r.name.clone(),
                            detail: "NaN in one model only".into(),
                        });
                    }
                    if x.is_finite() {
                        max_abs_diff = max_abs_diff.max((x - y).abs());
                        max_abs_ref = max_abs_ref.max(x.abs());
                    }
                }
            }
            (FetchedData::I64(a), FetchedData::I64(b)) if a != b => {
                return Err(FuseError::Verification {
                    output: r.name.clone(),
                    detail: "integer output differs".into(),
                });
            }
            _ => {}
        }
    }
    let limit = options.tolerance * max_abs_ref.max(1.0);
    if max_abs_diff > limit {
        return Err(FuseError::Verification {
            output: "(all)".into(),
            detail: format!(
                "max |fused - original| = {max_abs_diff:e} exceeds {limit:e} (tolerance {} x max(1, max |original| = {max_abs_ref}))",
                options.tolerance
            ),
        });
    }
    Ok(Verification {
        seq_len: n,
        max_abs_diff,
        max_abs_ref,
    })
}
