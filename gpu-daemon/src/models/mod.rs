//! Model wrappers over ONNX Runtime sessions: the shared sentence encoder,
//! linear heads on it, and classifier directories in the vLLM Semantic
//! Router format (sequence and token classification), and the jailbreak signal's hashed
//! n-gram scorer.

pub mod encoder;
pub mod head;
pub mod hf_dir;
pub mod ngrams;
pub mod tokenizer;

use std::path::PathBuf;

/// Errors loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A model file is missing or unreadable.
    #[error("model file {path}: {message}")]
    File { path: PathBuf, message: String },
    /// A model file has an unexpected shape or content.
    #[error("invalid model {path}: {message}")]
    Invalid { path: PathBuf, message: String },
    /// The tokenizer failed on an input.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// ONNX Runtime failed.
    #[error(transparent)]
    Runtime(#[from] crate::runtime::RuntimeError),
}
