//! The fused kernel against the reference attention on random inputs:
//! padding (shared, per batch row, `-inf`, `finfo.min`, `-1e4`), sliding and
//! one-sided windows, odd lengths, head dims 32/64/128; directly and through
//! ONNX Runtime as the `com.semroute::FlashAttention` custom op.

mod support;

use ort::session::Session;
use ort::value::Tensor;
use semroute_kernels::onnx::{
    self, type_proto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TypeProto,
    ValueInfoProto,
};
use semroute_kernels::{
    flash_attention, flash_attention_in, flash_attention_with_isa, naive_attention,
    AttentionParams, AttentionShape, KernelIsa, KeyBias, Layout, ScopedThreads, Sequential, Window,
};
use support::{rel_err, Rng};

const TOL: f32 = 1e-4;
/// The AMX variant rounds queries, keys, probabilities and values to
/// bfloat16 (8 significant bits): its error against the fp32 reference, as a
/// share of the largest output, stays below this on these inputs.
const TOL_BF16: f32 = 1e-2;

/// The shape `[batch, heads, seq_q | seq_kv, head_dim]` and random Q and K (in ±2) and V
/// (in ±1) for it, drawn from `seed` in that order.
fn attention_inputs(
    batch: usize,
    heads: usize,
    seq_q: usize,
    seq_kv: usize,
    head_dim: usize,
    seed: u64,
) -> (AttentionShape, Vec<f32>, Vec<f32>, Vec<f32>) {
    let shape = AttentionShape {
        batch,
        heads,
        seq_q,
        seq_kv,
        head_dim,
    };
    let mut rng = Rng(seed);
    let q = rng.vec(batch * heads * seq_q * head_dim, 2.0);
    let k = rng.vec(batch * heads * seq_kv * head_dim, 2.0);
    let v = rng.vec(batch * heads * seq_kv * head_dim, 1.0);
    (shape, q, k, v)
}

#[derive(Clone, Copy, Debug)]
enum Pad {
    None,
    Shared(f32),
    PerRow(f32),
}

fn bias_for(pad: Pad, batch: usize, seq: usize) -> Option<(Vec<f32>, usize)> {
    let padded =
        |b: usize, j: usize| j >= seq - (b * seq / 3).min(seq - 1) || (b == 1 && j == seq / 2);
    match pad {
        Pad::None => None,
        Pad::Shared(v) => Some((
            (0..seq)
                .map(|j| if j + 1 == seq && seq > 1 { v } else { 0.0 })
                .collect(),
            0,
        )),
        Pad::PerRow(v) => Some((
            (0..batch)
                .flat_map(|b| (0..seq).map(move |j| if b > 0 && padded(b, j) { v } else { 0.0 }))
                .collect(),
            seq,
        )),
    }
}

fn available_isas() -> Vec<KernelIsa> {
    [KernelIsa::Portable, KernelIsa::Avx2, KernelIsa::Avx512]
        .into_iter()
        .filter(|i| i.is_available())
        .collect()
}

fn check(shape: AttentionShape, window: Window, pad: Pad, seed: u64) {
    check_isa(shape, window, pad, seed, None)
}

/// [`check`] with one instruction-set variant (two threads), or with the
/// variant and thread count chosen by `seed` (`None`).
fn check_isa(shape: AttentionShape, window: Window, pad: Pad, seed: u64, isa: Option<KernelIsa>) {
    let mut rng = Rng(seed);
    let AttentionShape {
        batch,
        heads,
        seq_q,
        seq_kv,
        head_dim,
    } = shape;
    let q = rng.vec(batch * heads * seq_q * head_dim, 2.0);
    let k = rng.vec(batch * heads * seq_kv * head_dim, 2.0);
    let v = rng.vec(batch * heads * seq_kv * head_dim, 1.0);
    let bias = bias_for(pad, batch, seq_kv);
    let kb = bias.as_ref().map(|(data, stride)| KeyBias {
        data,
        batch_stride: *stride,
    });
    let params = AttentionParams {
        scale: 1.0 / (head_dim as f32).sqrt(),
        window,
    };
    let reference = naive_attention(&q, &k, &v, kb, shape, params).expect("reference");
    // Rows whose visible keys are all padded with a moderate finite bias
    // (-1e4) hold outputs at padded positions whose values hinge on fp32
    // rounding of `score + bias` (ulp(1e4) ~ 1e-3); they are excluded. With
    // -inf or finfo.min such rows are exact (zeros / uniform average) and
    // compared like all others.
    let moderate = matches!(pad, Pad::PerRow(x) | Pad::Shared(x) if x.is_finite() && x > -1e30);
    let keep_row = |b: usize, i: usize| {
        !moderate
            || (0..seq_kv).any(|j| {
                window.allows(i, j)
                    && bias
                        .as_ref()
                        .is_none_or(|(data, stride)| data[b * stride + j] == 0.0)
            })
    };
    let select = |xs: &[f32]| -> Vec<f32> {
        let mut out = Vec::new();
        for b in 0..batch {
            for h in 0..heads {
                for i in 0..seq_q {
                    if keep_row(b, i) {
                        let at = ((b * heads + h) * seq_q + i) * head_dim;
                        out.extend_from_slice(&xs[at..at + head_dim]);
                    }
                }
            }
        }
        out
    };
    let reference = select(&reference);
    let (isa, threads) = match isa {
        Some(isa) => (isa, 2),
        // Alternate between one, two and three worker threads, and between
        // the instruction-set variants this CPU runs, across cases.
        None => {
            let isas = available_isas();
            (
                isas[(seed as usize / 3) % isas.len()],
                1 + (seed % 3) as usize,
            )
        }
    };
    let mut out = vec![f32::NAN; batch * heads * seq_q * head_dim];
    let runner = ScopedThreads { threads };
    flash_attention_with_isa(isa, &q, &k, &v, kb, shape, params, &mut out, &runner).expect("fused");
    let err = rel_err(&select(&out), &reference);
    let tol = if isa == KernelIsa::AmxBf16 {
        TOL_BF16
    } else {
        TOL
    };
    assert!(
        err <= tol,
        "relative error {err:e} for {shape:?} {window:?} {pad:?} threads {threads} {isa:?}"
    );
}

#[test]
fn fused_matches_reference_on_random_inputs() {
    let windows = [
        Window::GLOBAL,
        Window::symmetric(16),
        Window {
            left: Some(5),
            right: Some(40),
        },
        Window {
            left: None,
            right: Some(0),
        },
    ];
    let pads = [
        Pad::None,
        Pad::Shared(f32::NEG_INFINITY),
        Pad::PerRow(f32::NEG_INFINITY),
        Pad::PerRow(f32::MIN),
        Pad::PerRow(-1e4),
    ];
    let mut seed = 1;
    for head_dim in [32, 64, 128] {
        for seq in [1, 7, 63, 65, 130] {
            for window in windows {
                for pad in pads {
                    seed += 1;
                    let shape = AttentionShape {
                        batch: 2,
                        heads: 3,
                        seq_q: seq,
                        seq_kv: seq,
                        head_dim,
                    };
                    check(shape, window, pad, seed);
                }
            }
        }
        // Longer sequences (several key tiles and query blocks), fewer combinations.
        for (window, pad) in [
            (Window::GLOBAL, Pad::PerRow(f32::NEG_INFINITY)),
            (Window::symmetric(16), Pad::PerRow(f32::MIN)),
        ] {
            seed += 1;
            let shape = AttentionShape {
                batch: 2,
                heads: 2,
                seq_q: 301,
                seq_kv: 301,
                head_dim,
            };
            check(shape, window, pad, seed);
        }
    }
}

#[test]
fn fused_matches_reference_with_odd_head_dims_and_cross_lengths() {
    for (i, (head_dim, seq_q, seq_kv)) in [
        (16, 33, 33),
        (24, 70, 70),
        (48, 129, 129),
        (64, 40, 300),
        (32, 200, 9),
    ]
    .into_iter()
    .enumerate()
    {
        let shape = AttentionShape {
            batch: 2,
            heads: 2,
            seq_q,
            seq_kv,
            head_dim,
        };
        check(shape, Window::GLOBAL, Pad::PerRow(f32::MIN), 100 + i as u64);
        check(
            shape,
            Window::symmetric(20),
            Pad::PerRow(f32::NEG_INFINITY),
            200 + i as u64,
        );
    }
}

#[test]
fn every_variant_matches_reference_across_key_chunks() {
    // 2,100 keys: three key chunks of the AVX-512 kernel (1,024 keys each)
    // and dozens of key tiles of the others; head dims of both AVX-512
    // kernels (16-64: intrinsics; 24 and 128: the generic one).
    let windows = [
        Window::GLOBAL,
        Window::symmetric(700),
        Window {
            left: None,
            right: Some(0),
        },
    ];
    let mut seed = 300;
    for isa in available_isas() {
        for head_dim in [16, 24, 32, 48, 64, 128] {
            for window in windows {
                seed += 1;
                let shape = AttentionShape {
                    batch: 2,
                    heads: 1,
                    seq_q: 260,
                    seq_kv: 2100,
                    head_dim,
                };
                check_isa(
                    shape,
                    window,
                    Pad::PerRow(f32::NEG_INFINITY),
                    seed,
                    Some(isa),
                );
            }
        }
    }
}

#[test]
fn amx_bf16_matches_reference_within_bfloat16_rounding() {
    if !KernelIsa::AmxBf16.is_available() {
        // Without AMX the variant is refused, never silently replaced.
        let shape = AttentionShape {
            batch: 1,
            heads: 1,
            seq_q: 1,
            seq_kv: 1,
            head_dim: 32,
        };
        let x = vec![0.0; 32];
        let mut out = vec![0.0; 32];
        let params = AttentionParams {
            scale: 1.0,
            window: Window::GLOBAL,
        };
        let err = flash_attention_with_isa(
            KernelIsa::AmxBf16,
            &x,
            &x,
            &x,
            None,
            shape,
            params,
            &mut out,
            &Sequential,
        );
        assert!(matches!(
            err,
            Err(semroute_kernels::AttentionError::Unsupported(
                KernelIsa::AmxBf16
            ))
        ));
        return;
    }
    let windows = [
        Window::GLOBAL,
        Window::symmetric(16),
        Window {
            left: None,
            right: Some(0),
        },
    ];
    let pads = [
        Pad::None,
        Pad::PerRow(f32::NEG_INFINITY),
        Pad::PerRow(f32::MIN),
        Pad::PerRow(-1e4),
    ];
    let mut seed = 500;
    // Head dims 32 and 64 run the tile kernel, 48 and 128 its AVX-512 fallback;
    // 1,100 keys cross the tile kernel's 512-key chunks.
    for head_dim in [32, 64, 48, 128] {
        for (seq_q, seq_kv) in [
            (1, 1),
            (7, 7),
            (63, 63),
            (65, 65),
            (130, 130),
            (256, 256),
            (40, 300),
            (70, 1100),
        ] {
            for window in windows {
                for pad in pads {
                    seed += 1;
                    let shape = AttentionShape {
                        batch: 2,
                        heads: 2,
                        seq_q,
                        seq_kv,
                        head_dim,
                    };
                    check_isa(shape, window, pad, seed, Some(KernelIsa::AmxBf16));
                }
            }
        }
    }
}

#[test]
fn fully_masked_rows_follow_the_documented_convention() {
    // Every key of batch row 0 padded with -inf: zeros; with finfo.min: the
    // uniform average of the visible values.
    let shape = AttentionShape {
        batch: 1,
        heads: 1,
        seq_q: 5,
        seq_kv: 5,
        head_dim: 4,
    };
    let mut rng = Rng(7);
    let q = rng.vec(20, 1.0);
    let k = rng.vec(20, 1.0);
    let v = rng.vec(20, 1.0);
    let params = AttentionParams {
        scale: 0.5,
        window: Window::GLOBAL,
    };
    let mut out = vec![1.0; 20];
    let neg_inf = vec![f32::NEG_INFINITY; 5];
    let kb = KeyBias {
        data: &neg_inf,
        batch_stride: 5,
    };
    flash_attention(&q, &k, &v, Some(kb), shape, params, &mut out, &Sequential).expect("run");
    assert!(out.iter().all(|&x| x == 0.0));
    let min = vec![f32::MIN; 5];
    let kb = KeyBias {
        data: &min,
        batch_stride: 5,
    };
    flash_attention(&q, &k, &v, Some(kb), shape, params, &mut out, &Sequential).expect("run");
    for t in 0..4 {
        let mean: f32 = (0..5).map(|j| v[j * 4 + t]).sum::<f32>() / 5.0;
        assert!((out[t] - mean).abs() < 1e-6);
    }
}

/// A session of `model` with the fused attention op registered.
fn op_session(env: &ort::environment::Environment, model: &[u8]) -> Session {
    let builder = Session::builder(env).expect("builder");
    semroute_kernels::register(builder)
        .expect("register")
        .commit_from_memory(model)
        .expect("session")
}

fn tensor_input(name: &str, rank: usize) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(onnx::dtype::FLOAT),
                shape: Some(onnx::TensorShapeProto {
                    dim: (0..rank)
                        .map(|i| onnx::tensor_shape_proto::Dimension {
                            value: Some(onnx::tensor_shape_proto::dimension::Value::DimParam(
                                format!("{name}_{i}"),
                            )),
                            denotation: None,
                        })
                        .collect(),
                }),
            })),
            denotation: None,
        }),
        ..Default::default()
    }
}

/// A one-node model: Y = FlashAttention(Q, K, V[, B]).
fn single_op_model(with_bias: bool, scale: Option<f32>, window: Window) -> Vec<u8> {
    single_op_model_with(with_bias, scale, window, false, 4, None)
}

/// The single-node model with Q, K, V and Y of rank `rank`, and the `heads`
/// attribute where given.
fn single_op_model_with(
    with_bias: bool,
    scale: Option<f32>,
    window: Window,
    bf16_products: bool,
    rank: usize,
    heads: Option<usize>,
) -> Vec<u8> {
    let mut inputs = vec!["Q".to_string(), "K".into(), "V".into()];
    let mut graph_inputs = vec![
        tensor_input("Q", rank),
        tensor_input("K", rank),
        tensor_input("V", rank),
    ];
    if with_bias {
        inputs.push("B".into());
        graph_inputs.push(tensor_input("B", 4));
    }
    let mut attrs = Vec::new();
    if let Some(s) = scale {
        attrs.push(onnx::attr_float("scale", s));
    }
    if let Some(l) = window.left {
        attrs.push(onnx::attr_int("window_left", l as i64));
    }
    if let Some(r) = window.right {
        attrs.push(onnx::attr_int("window_right", r as i64));
    }
    if bf16_products {
        attrs.push(onnx::attr_int("bf16_products", 1));
    }
    if let Some(h) = heads {
        attrs.push(onnx::attr_int("heads", h as i64));
    }
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![
            OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(17),
            },
            OperatorSetIdProto {
                domain: Some(semroute_kernels::DOMAIN.into()),
                version: Some(1),
            },
        ],
        graph: Some(GraphProto {
            name: Some("single".into()),
            node: vec![NodeProto {
                op_type: Some(semroute_kernels::OP_TYPE.into()),
                domain: Some(semroute_kernels::DOMAIN.into()),
                input: inputs,
                output: vec!["Y".into()],
                attribute: attrs,
                ..Default::default()
            }],
            input: graph_inputs,
            output: vec![tensor_input("Y", rank)],
            ..Default::default()
        }),
        ..Default::default()
    };
    onnx::encode_model(&model)
}

#[test]
fn custom_op_in_onnx_runtime_matches_reference() {
    let env = support::ort_env();
    let cases = [
        (64, 1, 4, 300, Window::GLOBAL, true, Some(0.125)),
        (32, 2, 3, 131, Window::symmetric(20), true, None),
        (
            128,
            2,
            2,
            97,
            Window {
                left: Some(3),
                right: Some(0),
            },
            false,
            Some(0.05),
        ),
        (64, 2, 2, 700, Window::symmetric(64), true, Some(0.125)),
    ];
    for (i, (head_dim, batch, heads, seq, window, with_bias, scale)) in
        cases.into_iter().enumerate()
    {
        let (shape, q, k, v) = attention_inputs(batch, heads, seq, seq, head_dim, 1000 + i as u64);
        let bias: Vec<f32> = (0..batch)
            .flat_map(|b| {
                (0..seq).map(move |j| {
                    if b == 1 && j >= seq * 3 / 4 {
                        f32::MIN
                    } else {
                        0.0
                    }
                })
            })
            .collect();
        let kb = with_bias.then_some(KeyBias {
            data: &bias,
            batch_stride: seq,
        });
        let params = AttentionParams {
            scale: scale.unwrap_or(1.0 / (head_dim as f32).sqrt()),
            window,
        };
        let reference = naive_attention(&q, &k, &v, kb, shape, params).expect("reference");

        let model = single_op_model(with_bias, scale, window);
        let mut session = op_session(env, &model);
        let dims = vec![batch, heads, seq, head_dim];
        let t = |data: &Vec<f32>| Tensor::from_array((dims.clone(), data.clone())).expect("tensor");
        let mut feeds = vec![
            ("Q".to_string(), t(&q).into_dyn()),
            ("K".to_string(), t(&k).into_dyn()),
            ("V".to_string(), t(&v).into_dyn()),
        ];
        if with_bias {
            feeds.push((
                "B".to_string(),
                Tensor::from_array((vec![batch, 1, 1, seq], bias.clone()))
                    .expect("tensor")
                    .into_dyn(),
            ));
        }
        let outputs = session.run(feeds).expect("run");
        let (out_shape, out) = outputs["Y"].try_extract_tensor::<f32>().expect("Y");
        assert_eq!(
            **out_shape,
            [batch as i64, heads as i64, seq as i64, head_dim as i64]
        );
        let err = rel_err(out, &reference);
        assert!(err <= TOL, "case {i}: relative error {err:e}");
    }
}

#[test]
fn custom_op_with_bf16_products_runs_the_amx_variant_where_the_cpu_has_it() {
    let env = support::ort_env();
    let (batch, heads, seq, head_dim) = (2, 3, 200, 32);
    let (shape, q, k, v) = attention_inputs(batch, heads, seq, seq, head_dim, 77);
    let n = q.len();
    let bias: Vec<f32> = (0..batch * seq)
        .map(|i| if i >= seq + 150 { f32::MIN } else { 0.0 })
        .collect();
    let kb = KeyBias {
        data: &bias,
        batch_stride: seq,
    };
    let params = AttentionParams {
        scale: 1.0 / (head_dim as f32).sqrt(),
        window: Window::GLOBAL,
    };
    let reference = naive_attention(&q, &k, &v, Some(kb), shape, params).expect("reference");
    // What the node must compute: the AMX variant where the CPU runs it, else the fp32 one.
    let (isa, tol) = if KernelIsa::AmxBf16.is_available() {
        (KernelIsa::AmxBf16, TOL_BF16)
    } else {
        (KernelIsa::Auto, TOL)
    };
    let mut direct = vec![0.0f32; n];
    flash_attention_with_isa(
        isa,
        &q,
        &k,
        &v,
        Some(kb),
        shape,
        params,
        &mut direct,
        &ScopedThreads { threads: 2 },
    )
    .expect("direct");

    let model = single_op_model_with(true, None, Window::GLOBAL, true, 4, None);
    let mut session = op_session(env, &model);
    let dims = vec![batch, heads, seq, head_dim];
    let t = |data: &Vec<f32>| Tensor::from_array((dims.clone(), data.clone())).expect("tensor");
    let feeds = vec![
        ("Q".to_string(), t(&q).into_dyn()),
        ("K".to_string(), t(&k).into_dyn()),
        ("V".to_string(), t(&v).into_dyn()),
        (
            "B".to_string(),
            Tensor::from_array((vec![batch, 1, 1, seq], bias.clone()))
                .expect("tensor")
                .into_dyn(),
        ),
    ];
    let outputs = session.run(feeds).expect("run");
    let (_, out) = outputs["Y"].try_extract_tensor::<f32>().expect("Y");
    // Every task computes its rows alone, so the node's output is the variant's, bit for bit.
    assert_eq!(out, direct.as_slice(), "{isa:?}");
    let err = rel_err(out, &reference);
    assert!(err <= tol, "{isa:?}: relative error {err:e}");
}

/// `x` (`[batch, heads, seq, d]`) as `[batch, seq, heads * d]`.
fn to_bshd(x: &[f32], batch: usize, heads: usize, seq: usize, d: usize) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    for b in 0..batch {
        for h in 0..heads {
            for i in 0..seq {
                let src = ((b * heads + h) * seq + i) * d;
                let dst = ((b * seq + i) * heads + h) * d;
                out[dst..dst + d].copy_from_slice(&x[src..src + d]);
            }
        }
    }
    out
}

#[test]
fn bshd_layout_gives_the_bhsd_output_transposed() {
    let mut isas = available_isas();
    if KernelIsa::AmxBf16.is_available() {
        isas.push(KernelIsa::AmxBf16);
    }
    let cases = [
        (32, 70, 70, Window::GLOBAL, Pad::PerRow(f32::NEG_INFINITY)),
        (64, 130, 600, Window::symmetric(20), Pad::PerRow(f32::MIN)),
        (32, 1, 1, Window::GLOBAL, Pad::None),
        (48, 33, 33, Window::GLOBAL, Pad::None),
    ];
    for isa in isas {
        for (i, &(head_dim, seq_q, seq_kv, window, pad)) in cases.iter().enumerate() {
            let (batch, heads) = (2, 3);
            let (shape, q, k, v) =
                attention_inputs(batch, heads, seq_q, seq_kv, head_dim, 900 + i as u64);
            let bias = bias_for(pad, batch, seq_kv);
            let kb = bias.as_ref().map(|(data, stride)| KeyBias {
                data,
                batch_stride: *stride,
            });
            let params = AttentionParams {
                scale: 1.0 / (head_dim as f32).sqrt(),
                window,
            };
            let runner = ScopedThreads { threads: 2 };
            let mut bhsd = vec![0.0f32; q.len()];
            flash_attention_with_isa(isa, &q, &k, &v, kb, shape, params, &mut bhsd, &runner)
                .expect("bhsd");
            let mut bshd = vec![f32::NAN; q.len()];
            flash_attention_in(
                isa,
                Layout::Bshd,
                &to_bshd(&q, batch, heads, seq_q, head_dim),
                &to_bshd(&k, batch, heads, seq_kv, head_dim),
                &to_bshd(&v, batch, heads, seq_kv, head_dim),
                kb,
                shape,
                params,
                &mut bshd,
                &runner,
            )
            .expect("bshd");
            assert_eq!(
                bshd,
                to_bshd(&bhsd, batch, heads, seq_q, head_dim),
                "{isa:?} case {i}"
            );
        }
    }
}

#[test]
fn custom_op_takes_rank_3_inputs_with_the_heads_attribute() {
    let env = support::ort_env();
    let (batch, heads, seq, head_dim) = (2, 4, 90, 32);
    let (shape, q, k, v) = attention_inputs(batch, heads, seq, seq, head_dim, 31);
    let n = q.len();
    let params = AttentionParams {
        scale: 1.0 / (head_dim as f32).sqrt(),
        window: Window::GLOBAL,
    };
    let reference = naive_attention(&q, &k, &v, None, shape, params).expect("reference");
    for bf16 in [false, true] {
        let model = single_op_model_with(false, None, Window::GLOBAL, bf16, 3, Some(heads));
        let mut session = op_session(env, &model);
        let dims = vec![batch, seq, heads * head_dim];
        let t = |data: &[f32]| {
            Tensor::from_array((dims.clone(), to_bshd(data, batch, heads, seq, head_dim)))
                .expect("tensor")
                .into_dyn()
        };
        let feeds = vec![
            ("Q".to_string(), t(&q)),
            ("K".to_string(), t(&k)),
            ("V".to_string(), t(&v)),
        ];
        let outputs = session.run(feeds).expect("run");
        let (out_shape, out) = outputs["Y"].try_extract_tensor::<f32>().expect("Y");
        assert_eq!(
            **out_shape,
            [batch as i64, seq as i64, (heads * head_dim) as i64]
        );
        let tol = if bf16 && KernelIsa::AmxBf16.is_available() {
            TOL_BF16
        } else {
            TOL
        };
        let err = rel_err(out, &to_bshd(&reference, batch, heads, seq, head_dim));
        assert!(err <= tol, "bf16 {bf16}: relative error {err:e}");
    }
    // Rank 3 without the attribute is refused with a message, not guessed.
    let model = single_op_model_with(false, None, Window::GLOBAL, false, 3, None);
    let mut session = op_session(env, &model);
    let dims = vec![batch, seq, heads * head_dim];
    let t = || {
        Tensor::from_array((dims.clone(), vec![0.0f32; n]))
            .expect("tensor")
            .into_dyn()
    };
    let feeds = vec![
        ("Q".to_string(), t()),
        ("K".to_string(), t()),
        ("V".to_string(), t()),
    ];
    let err = session.run(feeds).expect_err("rank 3 without heads");
    assert!(err.to_string().contains("heads"), "{err}");
}

#[test]
fn custom_op_rejects_bad_shapes() {
    let env = support::ort_env();
    let model = single_op_model(false, None, Window::GLOBAL);
    let mut session = op_session(env, &model);
    let q = Tensor::from_array((vec![1usize, 2, 3, 4], vec![0.0f32; 24])).expect("tensor");
    let k = Tensor::from_array((vec![1usize, 2, 3, 8], vec![0.0f32; 48])).expect("tensor");
    let v = Tensor::from_array((vec![1usize, 2, 3, 8], vec![0.0f32; 48])).expect("tensor");
    let result = session.run(vec![
        ("Q".to_string(), q.into_dyn()),
        ("K".to_string(), k.into_dyn()),
        ("V".to_string(), v.into_dyn()),
    ]);
    let Err(err) = result else {
        panic!("mismatched head_dim must fail");
    };
    assert!(err.to_string().contains("FlashAttention"), "{err}");
}
