//! The rewrite on transformers-exported tiny ModernBERT graphs (eager and
//! SDPA attention, sequence and token classification): lossless protobuf
//! round trip, the blocks and windows found, and the fused graphs against
//! PyTorch's reference logits at 16, 200 and 700 tokens (700 crosses the
//! 128-token local window).

mod support;

use std::path::Path;

use ort::session::Session;
use ort::value::Tensor;
use semroute_kernels::onnx;
use semroute_kernels::{fuse_attention, FuseOptions, KeyBiasSource, Window};

const MODELS: [&str; 4] = [
    "modernbert_tiny_seqcls_eager",
    "modernbert_tiny_seqcls_sdpa",
    "modernbert_tiny_tokcls_eager",
    "modernbert_tiny_tokcls_sdpa",
];
const LENGTHS: [usize; 3] = [16, 200, 700];
const TOL: f32 = 1e-4;

fn read(dir: &Path, file: &str) -> Vec<u8> {
    let path = dir.join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

#[test]
fn protobuf_round_trip_is_byte_identical() {
    let dir = support::fixtures_dir();
    for name in MODELS {
        let bytes = read(&dir, &format!("{name}.onnx"));
        let model = onnx::decode_model(&bytes).expect("decode");
        let again = onnx::encode_model(&model);
        assert!(
            again == bytes,
            "{name}: re-encoded model differs from the file"
        );
    }
}

fn options(dir: &Path, name: &str) -> FuseOptions {
    let config =
        String::from_utf8(read(dir, &format!("{name}_config.json"))).expect("utf-8 config");
    FuseOptions::from_hf_config(&config).expect("config")
}

/// Runs a model on the reference inputs of length `n`; returns the logits.
fn logits(session: &mut Session, ids: &support::Npy, mask: &support::Npy) -> (Vec<i64>, Vec<f32>) {
    let shape = ids.shape.clone();
    let outputs = session
        .run(vec![
            (
                "input_ids".to_string(),
                Tensor::from_array((shape.clone(), ids.i64().to_vec()))
                    .expect("ids")
                    .into_dyn(),
            ),
            (
                "attention_mask".to_string(),
                Tensor::from_array((shape, mask.i64().to_vec()))
                    .expect("mask")
                    .into_dyn(),
            ),
        ])
        .expect("run");
    let (s, data) = outputs["logits"]
        .try_extract_tensor::<f32>()
        .expect("logits");
    (s.to_vec(), data.to_vec())
}

/// Max abs error, for token logits on unpadded positions only.
fn max_err(got: &[f32], want: &[f32], shape: &[usize], mask: &[i64]) -> f32 {
    assert_eq!(got.len(), want.len());
    let mut worst = 0.0f32;
    if shape.len() == 3 {
        let (b, s, l) = (shape[0], shape[1], shape[2]);
        for bi in 0..b {
            for si in 0..s {
                if mask[bi * s + si] == 0 {
                    continue;
                }
                for li in 0..l {
                    let at = (bi * s + si) * l + li;
                    worst = worst.max((got[at] - want[at]).abs());
                }
            }
        }
    } else {
        for (g, w) in got.iter().zip(want) {
            worst = worst.max((g - w).abs());
        }
    }
    if got.iter().any(|x| x.is_nan()) {
        f32::INFINITY
    } else {
        worst
    }
}

#[test]
fn fused_fixtures_reproduce_reference_logits() {
    let env = support::ort_env();
    let dir = support::fixtures_dir();
    for name in MODELS {
        let original = read(&dir, &format!("{name}.onnx"));
        let opts = options(&dir, name);
        assert_eq!(opts.expected_window, Some(Window::symmetric(64)));
        let (fused, report) = fuse_attention(env, &original, &opts)
            .unwrap_or_else(|e| panic!("{name}: fuse failed: {e}"));
        eprintln!("{name}:\n{report}");
        assert_eq!(report.fused.len(), 3, "{name}: {report}");
        assert!(report.skipped.is_empty(), "{name}: {report}");
        let windows: Vec<Window> = report.fused.iter().map(|b| b.window).collect();
        assert_eq!(
            windows,
            [Window::GLOBAL, Window::symmetric(64), Window::symmetric(64)],
            "{name}"
        );
        for b in &report.fused {
            assert!((b.scale - 0.25).abs() < 1e-7, "{name}: scale {}", b.scale);
            assert!(
                matches!(&b.key_bias, KeyBiasSource::FromInput { input, .. } if input == "attention_mask"),
                "{name}: {:?}",
                b.key_bias
            );
        }
        let verification = report.verification.expect("verified");
        assert!(verification.max_abs_diff <= 1e-4 * verification.max_abs_ref.max(1.0));

        // No quadratic tensors are left: no softmax, no mask construction.
        let model = onnx::decode_model(&fused).expect("decode fused");
        let graph = model.graph.expect("graph");
        let count = |op: &str| graph.node.iter().filter(|n| n.op_type() == op).count();
        assert_eq!(count("Softmax"), 0, "{name}");
        assert_eq!(count("FlashAttention"), 3, "{name}");
        for op in ["Abs", "LessOrEqual", "And", "IsNaN"] {
            assert_eq!(count(op), 0, "{name}: {op} survived the rewrite");
        }

        let refs = support::read_npz(&dir.join(format!("{name}_ref.npz")));
        let mut fused_session = semroute_kernels::register(Session::builder(env).expect("builder"))
            .expect("register")
            .commit_from_memory(&fused)
            .expect("fused session");
        let mut original_session = Session::builder(env)
            .expect("builder")
            .commit_from_memory(&original)
            .expect("original session");
        for n in LENGTHS {
            let ids = &refs[&format!("ids_{n}")];
            let mask = &refs[&format!("mask_{n}")];
            let want = &refs[&format!("logits_{n}")];
            let (shape, got) = logits(&mut fused_session, ids, mask);
            let shape: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
            assert_eq!(shape, want.shape, "{name} n={n}");
            let err = max_err(&got, want.f32(), &shape, mask.i64());
            let (_, base) = logits(&mut original_session, ids, mask);
            let base_err = max_err(&base, want.f32(), &shape, mask.i64());
            eprintln!("{name} n={n}: fused max abs error {err:e} (original graph {base_err:e})");
            assert!(err <= TOL, "{name} n={n}: fused logits off by {err:e}");
        }
    }
}

#[test]
fn unfusable_model_is_reported() {
    let env = support::ort_env();
    let dir = support::fixtures_dir();
    // A graph without attention: the fused model itself.
    let original = read(&dir, "modernbert_tiny_seqcls_eager.onnx");
    let opts = FuseOptions {
        verify: None,
        ..FuseOptions::default()
    };
    let (fused, _) = fuse_attention(env, &original, &opts).expect("first pass");
    let err = fuse_attention(env, &fused, &opts).expect_err("nothing left to fuse");
    assert!(
        matches!(err, semroute_kernels::FuseError::NoAttention { .. }),
        "{err}"
    );
    let err = fuse_attention(env, b"not a model", &opts).expect_err("garbage");
    assert!(err.to_string().contains("ONNX"), "{err}");
}

#[test]
fn config_cross_check_catches_a_wrong_window() {
    let env = support::ort_env();
    let dir = support::fixtures_dir();
    let original = read(&dir, "modernbert_tiny_seqcls_sdpa.onnx");
    let opts = FuseOptions {
        expected_window: Some(Window::symmetric(32)),
        verify: None,
        ..FuseOptions::default()
    };
    let err = fuse_attention(env, &original, &opts).expect_err("window mismatch");
    assert!(
        matches!(err, semroute_kernels::FuseError::ConfigMismatch(_)),
        "{err}"
    );
    // A probe shorter than the window makes the sliding layers look global;
    // the layer count from the configuration catches it.
    let mut short = options(&dir, "modernbert_tiny_seqcls_sdpa");
    short.mask_probe_len = 60;
    short.expected_window = None;
    short.verify = None;
    let err = fuse_attention(env, &original, &short).expect_err("layer count mismatch");
    assert!(
        matches!(err, semroute_kernels::FuseError::ConfigMismatch(_)),
        "{err}"
    );
}
