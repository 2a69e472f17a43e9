//! Shared test helpers: the ONNX Runtime environment, the fixture directory,
//! a reader for `.npz` reference files and a small deterministic RNG.
//!
//! Missing prerequisites (the ONNX Runtime library, the fixtures) fail the
//! tests with a message that says what to provide; they never skip.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::environment::Environment;

/// The workspace root (the parent of this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crate has a parent directory")
        .to_path_buf()
}

/// `$SEMROUTE_FIXTURES_DIR`, else `../shared/fixtures/tiny_modernbert`
/// relative to the workspace root. Panics if it does not exist.
pub fn fixtures_dir() -> PathBuf {
    let dir = std::env::var_os("SEMROUTE_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/fixtures/tiny_modernbert"));
    assert!(
        dir.join("modernbert_tiny_seqcls_eager.onnx").is_file(),
        "tiny ModernBERT fixtures not found in {} (set SEMROUTE_FIXTURES_DIR to the directory holding modernbert_tiny_*.onnx)",
        dir.display()
    );
    dir
}

/// The process-wide ONNX Runtime environment, loaded from `$ORT_DYLIB_PATH`
/// or `build/onnxruntime/libonnxruntime.so` under the workspace root.
/// Panics with instructions if the library is missing.
pub fn ort_env() -> &'static Environment {
    static ENV: OnceLock<Environment> = OnceLock::new();
    ENV.get_or_init(|| {
        let path = std::env::var_os("ORT_DYLIB_PATH")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join("build/onnxruntime/libonnxruntime.so"));
        assert!(
            path.is_file(),
            "ONNX Runtime library not found at {} (set ORT_DYLIB_PATH or run the Makefile's ONNX Runtime setup)",
            path.display()
        );
        ort::init_from(&path)
            .unwrap_or_else(|e| panic!("cannot load ONNX Runtime from {}: {e}", path.display()))
            .with_name("semroute-kernels-tests")
            .with_telemetry(false)
            .build()
            .expect("ONNX Runtime environment")
    })
}

/// An array read from an `.npy` member.
#[derive(Debug, Clone)]
pub struct Npy {
    pub shape: Vec<usize>,
    pub data: NpyData,
}

#[derive(Debug, Clone)]
pub enum NpyData {
    F32(Vec<f32>),
    I64(Vec<i64>),
}

impl Npy {
    pub fn f32(&self) -> &[f32] {
        match &self.data {
            NpyData::F32(v) => v,
            NpyData::I64(_) => panic!("expected float32 array"),
        }
    }

    pub fn i64(&self) -> &[i64] {
        match &self.data {
            NpyData::I64(v) => v,
            NpyData::F32(_) => panic!("expected int64 array"),
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> usize {
    u16::from_le_bytes([b[at], b[at + 1]]) as usize
}

fn u32_at(b: &[u8], at: usize) -> usize {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) as usize
}

fn parse_npy(bytes: &[u8]) -> Npy {
    assert!(bytes.starts_with(b"\x93NUMPY"), "not an .npy member");
    let major = bytes[6];
    let (hlen, start) = if major == 1 {
        (u16_at(bytes, 8), 10)
    } else {
        (u32_at(bytes, 8), 12)
    };
    let header = std::str::from_utf8(&bytes[start..start + hlen]).expect("npy header");
    let body = &bytes[start + hlen..];
    let field = |key: &str| {
        let at = header
            .find(key)
            .unwrap_or_else(|| panic!("npy header lacks {key}"));
        &header[at + key.len()..]
    };
    assert!(field("'fortran_order':").trim_start().starts_with("False"));
    let descr = field("'descr':").trim_start();
    let shape_text = field("'shape':");
    let open = shape_text.find('(').expect("shape tuple");
    let close = shape_text.find(')').expect("shape tuple");
    let shape: Vec<usize> = shape_text[open + 1..close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("shape dimension"))
        .collect();
    let data = if descr.starts_with("'<f4'") {
        NpyData::F32(
            body.chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        )
    } else if descr.starts_with("'<i8'") {
        NpyData::I64(
            body.chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        )
    } else {
        panic!("unsupported npy dtype {descr}")
    };
    Npy { shape, data }
}

/// Reads an uncompressed `.npz` (what `numpy.savez` writes): the central
/// directory of the zip, then each stored member as `.npy`.
pub fn read_npz(path: &Path) -> HashMap<String, Npy> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let eocd = (0..bytes.len().saturating_sub(21))
        .rev()
        .find(|&i| bytes[i..i + 4] == [0x50, 0x4b, 0x05, 0x06])
        .expect("zip end of central directory");
    let entries = u16_at(&bytes, eocd + 10);
    let mut at = u32_at(&bytes, eocd + 16);
    let mut out = HashMap::new();
    for _ in 0..entries {
        assert_eq!(
            bytes[at..at + 4],
            [0x50, 0x4b, 0x01, 0x02],
            "zip central entry"
        );
        let method = u16_at(&bytes, at + 10);
        let size = u32_at(&bytes, at + 20);
        let name_len = u16_at(&bytes, at + 28);
        let extra_len = u16_at(&bytes, at + 30);
        let comment_len = u16_at(&bytes, at + 32);
        let local = u32_at(&bytes, at + 42);
        let name = String::from_utf8_lossy(&bytes[at + 46..at + 46 + name_len]).into_owned();
        assert_eq!(
            method, 0,
            "{name}: compressed npz members are not supported"
        );
        let data_at = local + 30 + u16_at(&bytes, local + 26) + u16_at(&bytes, local + 28);
        let member = &bytes[data_at..data_at + size];
        out.insert(name.trim_end_matches(".npy").to_string(), parse_npy(member));
        at += 46 + name_len + extra_len + comment_len;
    }
    out
}

/// SplitMix64: deterministic test data without extra dependencies.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    pub fn vec(&mut self, n: usize, amplitude: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform() * amplitude).collect()
    }
}

/// `max |a - b| / max |b|` (with `max |b|` floored at 1e-6).
pub fn rel_err(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "length mismatch");
    let diff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    let scale = b.iter().map(|x| x.abs()).fold(0.0f32, f32::max).max(1e-6);
    if a.iter().any(|x| x.is_nan()) {
        return f32::INFINITY;
    }
    diff / scale
}
