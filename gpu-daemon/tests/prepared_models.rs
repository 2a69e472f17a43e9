//! The prepared models of `make setup` (`build/models/prepared/*`: fused
//! attention, int8 weights) against their fp32 source graphs, through
//! `semroute-daemon model check`; and the same check failing on a source graph
//! with one weight matrix zeroed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use semroute_kernels::onnx;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn build_dir() -> PathBuf {
    std::env::var_os("SEMROUTE_BUILD_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("build"))
}

/// A prepared model directory, with the files the check needs.
struct Prepared {
    model: PathBuf,
    reference: PathBuf,
    tokenizer: PathBuf,
}

fn prepared(name: &str) -> Prepared {
    let dir = build_dir().join("models/prepared").join(name);
    let p = Prepared {
        model: dir.join("model.onnx"),
        reference: dir.join("reference/model.fp32.onnx"),
        tokenizer: dir.join("tokenizer.json"),
    };
    for f in [
        &p.model,
        &p.reference,
        &p.tokenizer,
        &dir.join("PREPARED.json"),
    ] {
        assert!(
            f.exists(),
            "{} is missing: run `make setup` (it prepares the models)",
            f.display()
        );
    }
    p
}

fn ort_library() -> PathBuf {
    std::env::var_os("ORT_DYLIB_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| build_dir().join("onnxruntime/libonnxruntime.so"))
}

fn check(kind: &str, reference: &Path, candidate: &Path, tokenizer: &Path, texts: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_semroute-daemon"))
        .args(["model", "check", "--kind", kind, "--timing-runs", "0"])
        .arg("--reference")
        .arg(reference)
        .arg("--candidate")
        .arg(candidate)
        .arg("--tokenizer")
        .arg(tokenizer)
        .arg("--texts")
        .arg(texts)
        .env("ORT_DYLIB_PATH", ort_library())
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

fn text_of(out: &Output) -> String {
    format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Writes a copy of `model` with the weight of its middle weight `MatMul`
/// (a query projection in the middle layer of these encoders) set to zero.
fn zero_one_weight(model: &Path, out: &Path) -> String {
    let mut m = onnx::decode_model(&std::fs::read(model).unwrap()).unwrap();
    let graph = m.graph.as_mut().unwrap();
    let weights: Vec<String> = graph
        .node
        .iter()
        .filter(|n| n.op_type() == "MatMul")
        .filter_map(|n| n.input.get(1).cloned())
        .filter(|b| graph.initializer.iter().any(|t| t.name() == b))
        .collect();
    assert!(weights.len() > 2, "{}: no weight MatMuls", model.display());
    let name = weights[weights.len() / 2].clone();
    let t = graph
        .initializer
        .iter_mut()
        .find(|t| t.name() == name)
        .unwrap();
    match t.raw_data.as_mut() {
        Some(raw) => raw.iter_mut().for_each(|b| *b = 0),
        None => t.float_data.iter_mut().for_each(|v| *v = 0.0),
    }
    std::fs::write(out, onnx::encode_model(&m)).unwrap();
    name
}

fn check_model(name: &str, kind: &str) {
    let p = prepared(name);
    let texts = root().join("models/check_texts.txt");

    let out = check(kind, &p.reference, &p.model, &p.tokenizer, &texts);
    let text = text_of(&out);
    assert!(
        out.status.success(),
        "{name}: prepared model fails its check:\n{text}"
    );
    assert!(text.contains("PASSED"), "{text}");

    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken.onnx");
    let weight = zero_one_weight(&p.reference, &broken);
    let out = check(kind, &p.reference, &broken, &p.tokenizer, &texts);
    let text = text_of(&out);
    assert!(
        !out.status.success(),
        "{name}: the check passed a graph with {weight} zeroed:\n{text}"
    );
    assert!(text.contains("FAILED"), "{text}");
    assert!(text.contains("check failed"), "{text}");
}

#[test]
fn prepared_minilm_matches_its_source_and_a_broken_graph_does_not() {
    check_model("minilm", "embedding");
}

#[test]
fn prepared_rampart_matches_its_source_and_a_broken_graph_does_not() {
    check_model("rampart", "token-classification");
}
