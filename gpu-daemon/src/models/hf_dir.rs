//! Classifier directories in the vLLM Semantic Router / Hugging Face export
//! format: `config.json` (with `id2label`), `tokenizer.json`, and
//! `model.onnx` or `onnx/*.onnx`. Used for user-supplied sequence
//! classifiers (e.g. ModernBERT/mmBERT) and token classifiers (PII).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ndarray::ArrayD;
use ort::session::Session;
use ort::value::Tensor;
use serde::Deserialize;

use super::tokenizer::WindowTokenizer;
use super::ModelError;
use crate::config::RuntimeConfig;
use crate::runtime::{self, ActiveProvider, RuntimeError};

#[derive(Deserialize)]
struct HfConfig {
    id2label: BTreeMap<String, String>,
    #[serde(default)]
    max_position_embeddings: Option<usize>,
}

/// A loaded classifier directory.
pub struct HfClassifier {
    session: Session,
    /// Tokenizer of the model.
    pub tokenizer: WindowTokenizer,
    /// Labels by class index.
    pub id2label: Vec<String>,
    /// Largest sequence the model accepts (special tokens included).
    pub max_positions: usize,
    /// Provider in use after fallback.
    pub provider: ActiveProvider,
    /// Directory name, for responses.
    pub name: String,
    input_names: Vec<String>,
}

/// Finds the ONNX file of a classifier directory: a fused-attention model
/// (`model.fused.onnx`, written by `semroute-daemon model fuse-attention`)
/// when present, then `model.onnx`, then the first `onnx/*.onnx` by name.
pub fn find_onnx(dir: &Path) -> Result<PathBuf, ModelError> {
    for candidate in [
        dir.join("model.fused.onnx"),
        dir.join("onnx/model.fused.onnx"),
        dir.join("model.onnx"),
    ] {
        if candidate.exists() {
            return Ok(candidate);
        }
    }
    let sub = dir.join("onnx");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&sub)
        .map_err(|e| ModelError::File {
            path: dir.to_owned(),
            message: format!("no model.onnx and no onnx/ folder: {e} (run `make setup`)"),
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "onnx"))
        .collect();
    found.sort();
    // Prefer a plain `model.onnx`, then the first file by name.
    found
        .iter()
        .find(|p| p.file_name().is_some_and(|n| n == "model.onnx"))
        .or_else(|| found.first())
        .cloned()
        .ok_or_else(|| ModelError::File {
            path: sub,
            message: "no .onnx file".into(),
        })
}

impl HfClassifier {
    /// Loads a classifier directory.
    pub fn load(dir: &Path, runtime: &RuntimeConfig) -> Result<Self, ModelError> {
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path).map_err(|e| ModelError::File {
            path: config_path.clone(),
            message: format!("{e} (run `make setup`)"),
        })?;
        let config: HfConfig = serde_json::from_str(&text).map_err(|e| ModelError::Invalid {
            path: config_path.clone(),
            message: e.to_string(),
        })?;
        let mut id2label = vec![String::new(); config.id2label.len()];
        for (k, v) in config.id2label {
            let i: usize = k
                .parse()
                .ok()
                .filter(|&i| i < id2label.len())
                .ok_or_else(|| ModelError::Invalid {
                    path: config_path.clone(),
                    message: format!(
                        "id2label key {k:?} is not an index below {}",
                        id2label.len()
                    ),
                })?;
            id2label[i] = v;
        }
        let tokenizer = WindowTokenizer::from_file(&dir.join("tokenizer.json"))?;
        let model = find_onnx(dir)?;
        let (session, provider) = runtime::build_session(runtime, &model)?;
        let input_names = session
            .inputs()
            .iter()
            .map(|i| i.name().to_string())
            .collect();
        Ok(Self {
            session,
            tokenizer,
            id2label,
            max_positions: config.max_position_embeddings.unwrap_or(512),
            provider,
            name: dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "classifier".into()),
            input_names,
        })
    }

    /// Runs the model on token sequences given without special tokens and
    /// returns its logits: `[batch, labels]` for sequence classification or
    /// `[batch, seq + 2, labels]` for token classification.
    pub fn logits(&mut self, seqs: &[&[u32]]) -> Result<ArrayD<f32>, ModelError> {
        let [ids, mask, types] = self.tokenizer.batch_inputs(seqs);
        let err = |e: ort::Error| ModelError::Runtime(RuntimeError::ort("classifier run", e));
        let mut inputs = ort::inputs![
            "input_ids" => Tensor::from_array(ids).map_err(err)?,
            "attention_mask" => Tensor::from_array(mask).map_err(err)?,
        ];
        if self.input_names.iter().any(|n| n == "token_type_ids") {
            inputs.push((
                "token_type_ids".into(),
                Tensor::from_array(types).map_err(err)?.into(),
            ));
        }
        let outputs = self.session.run(inputs).map_err(err)?;
        let view = outputs[0].try_extract_array::<f32>().map_err(err)?;
        let shape = view.shape().to_vec();
        if shape.last() != Some(&self.id2label.len()) {
            return Err(ModelError::Invalid {
                path: self.name.clone().into(),
                message: format!(
                    "output shape {shape:?} does not end in {} labels",
                    self.id2label.len()
                ),
            });
        }
        Ok(view.to_owned())
    }
}
