//! `semroute-daemon model fuse-attention` on the transformers-exported tiny
//! ModernBERT fixtures (global and sliding-window layers).

use std::path::{Path, PathBuf};
use std::process::Command;

fn fixtures() -> PathBuf {
    std::env::var_os("SEMROUTE_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/fixtures/tiny_modernbert")
        })
}

#[test]
fn fuse_attention_rewrites_and_verifies_modernbert() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let input = fixtures().join("modernbert_tiny_seqcls_eager.onnx");
    assert!(
        input.exists(),
        "fixture missing at {} (set SEMROUTE_FIXTURES_DIR)",
        input.display()
    );
    let ort = std::env::var_os("ORT_DYLIB_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("build/onnxruntime/libonnxruntime.so"));
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("model.fused.onnx");
    let out = Command::new(env!("CARGO_BIN_EXE_semroute-daemon"))
        .args(["model", "fuse-attention"])
        .arg(&input)
        .arg(&output)
        .env("ORT_DYLIB_PATH", ort)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("fused 3 attention block(s)"), "{stdout}");
    assert_eq!(stdout.matches("window -64/+64").count(), 2, "{stdout}");
    assert!(stdout.contains("verified at"), "{stdout}");
    assert!(std::fs::metadata(&output).unwrap().len() > 0);
}

#[test]
fn fuse_attention_on_a_missing_file_fails_cleanly() {
    let out = Command::new(env!("CARGO_BIN_EXE_semroute-daemon"))
        .args([
            "model",
            "fuse-attention",
            "/nonexistent/model.onnx",
            "/tmp/out.onnx",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/model.onnx"));
}
