//! The shared sentence encoder (all-MiniLM-L6-v2 by default): one forward
//! pass yields mean-pooled embeddings that both the domain and the jailbreak
//! heads read.

use std::path::Path;

use ndarray::Array2;
use ort::session::Session;
use ort::value::Tensor;

use super::tokenizer::WindowTokenizer;
use super::ModelError;
use crate::config::RuntimeConfig;
use crate::runtime::{self, ActiveProvider, RuntimeError};

/// A BERT-class encoder with output `last_hidden_state` `[batch, seq, hidden]`.
pub struct SentenceEncoder {
    session: Session,
    /// Tokenizer of the encoder.
    pub tokenizer: WindowTokenizer,
    /// Hidden size (384 for MiniLM-L6).
    pub hidden: usize,
    /// Provider in use after fallback.
    pub provider: ActiveProvider,
    /// Model name for responses and logs.
    pub name: String,
    /// Largest sequence the model accepts, special tokens included: `max_position_embeddings`
    /// of `config.json` when the directory has one, else 512 (BERT).
    pub max_positions: usize,
}

/// `max_position_embeddings` of a Hugging Face `config.json`, when present.
#[derive(serde::Deserialize)]
struct EncoderConfig {
    max_position_embeddings: Option<usize>,
}

impl SentenceEncoder {
    /// Loads `dir/model.onnx` and `dir/tokenizer.json`.
    pub fn load(dir: &Path, runtime: &RuntimeConfig) -> Result<Self, ModelError> {
        let model = dir.join("model.onnx");
        if !model.exists() {
            return Err(ModelError::File {
                path: model,
                message: "not found (run `make setup`)".into(),
            });
        }
        let tokenizer = WindowTokenizer::from_file(&dir.join("tokenizer.json"))?;
        let (session, provider) = runtime::build_session(runtime, &model)?;
        let hidden = session
            .outputs()
            .first()
            .and_then(|o| o.dtype().tensor_shape().and_then(|s| s.last().copied()))
            .filter(|&h| h > 0)
            .map(|h| h as usize)
            .ok_or_else(|| ModelError::Invalid {
                path: model.clone(),
                message: "first output is not [batch, seq, hidden] with a fixed hidden size".into(),
            })?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "encoder".into());
        let config_path = dir.join("config.json");
        let max_positions = match std::fs::read(&config_path) {
            Ok(bytes) => serde_json::from_slice::<EncoderConfig>(&bytes)
                .map_err(|e| ModelError::Invalid {
                    path: config_path,
                    message: e.to_string(),
                })?
                .max_position_embeddings
                .unwrap_or(512),
            Err(_) => 512,
        };
        Ok(Self {
            session,
            tokenizer,
            hidden,
            provider,
            name,
            max_positions,
        })
    }

    /// Mean-pooled embeddings `[batch, hidden]` (not normalised) of token
    /// sequences given without special tokens. Pooling averages over all
    /// attended positions, CLS and SEP included (sentence-transformers).
    pub fn embed(&mut self, seqs: &[&[u32]]) -> Result<Array2<f32>, ModelError> {
        let [ids, mask, types] = self.tokenizer.batch_inputs(seqs);
        let lens: Vec<usize> = seqs.iter().map(|s| s.len() + 2).collect();
        let err = |e: ort::Error| ModelError::Runtime(RuntimeError::ort("encoder run", e));
        let outputs = self
            .session
            .run(ort::inputs![
                "input_ids" => Tensor::from_array(ids).map_err(err)?,
                "attention_mask" => Tensor::from_array(mask).map_err(err)?,
                "token_type_ids" => Tensor::from_array(types).map_err(err)?,
            ])
            .map_err(err)?;
        let (shape, data) = outputs[0].try_extract_tensor::<f32>().map_err(err)?;
        let dims: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
        if dims.len() != 3 || dims[0] != seqs.len() || dims[2] != self.hidden {
            return Err(ModelError::Invalid {
                path: self.name.clone().into(),
                message: format!("unexpected encoder output shape {dims:?}"),
            });
        }
        let (width, hidden) = (dims[1], dims[2]);
        let mut pooled = Array2::<f32>::zeros((seqs.len(), hidden));
        for (b, &len) in lens.iter().enumerate() {
            let len = len.min(width);
            let mut row = pooled.row_mut(b);
            let Some(acc) = row.as_slice_mut() else {
                continue;
            };
            let base = b * width * hidden;
            for t in 0..len {
                let Some(tok) = data.get(base + t * hidden..base + (t + 1) * hidden) else {
                    break;
                };
                acc.iter_mut().zip(tok).for_each(|(a, v)| *a += v);
            }
            let n = len.max(1) as f32;
            acc.iter_mut().for_each(|v| *v /= n);
        }
        Ok(pooled)
    }
}

/// L2-normalises a vector in place (no-op for the zero vector).
pub fn l2_normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}
