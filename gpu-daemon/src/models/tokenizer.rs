//! Tokenisation without special tokens, keeping each token's byte offsets (which the
//! windowing in `crate::engine::windows` works on), and the batched model inputs with
//! CLS ... SEP added.

use std::path::Path;

use ndarray::Array2;
use tokenizers::Tokenizer;

use super::ModelError;

/// A text tokenised without special tokens.
#[derive(Debug, Clone, Default)]
pub struct TokenizedText {
    /// Token ids.
    pub ids: Vec<u32>,
    /// Byte span of each token in the source text.
    pub offsets: Vec<(usize, usize)>,
}

/// A WordPiece/BPE tokenizer with the ids of its special tokens.
pub struct WindowTokenizer {
    tokenizer: Tokenizer,
    cls: i64,
    sep: i64,
    pad: i64,
}

impl WindowTokenizer {
    /// Loads `tokenizer.json`, with padding and truncation turned off (the
    /// MiniLM file pads to 128 by default).
    pub fn from_file(path: &Path) -> Result<Self, ModelError> {
        let mut tokenizer = Tokenizer::from_file(path).map_err(|e| ModelError::File {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        tokenizer.with_padding(None);
        tokenizer
            .with_truncation(None)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let id = |names: &[&str]| -> Result<i64, ModelError> {
            names
                .iter()
                .find_map(|n| tokenizer.token_to_id(n))
                .map(i64::from)
                .ok_or_else(|| ModelError::Invalid {
                    path: path.to_owned(),
                    message: format!("tokenizer has none of the special tokens {names:?}"),
                })
        };
        let cls = id(&["[CLS]", "<s>", "<cls>"])?;
        let sep = id(&["[SEP]", "</s>", "<sep>"])?;
        let pad = id(&["[PAD]", "<pad>"])?;
        Ok(Self {
            tokenizer,
            cls,
            sep,
            pad,
        })
    }

    /// Tokenises `text` without special tokens; offsets are byte offsets.
    pub fn tokenize(&self, text: &str) -> Result<TokenizedText, ModelError> {
        let enc = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        Ok(TokenizedText {
            ids: enc.get_ids().to_vec(),
            offsets: enc.get_offsets().to_vec(),
        })
    }

    /// Builds `input_ids`, `attention_mask` and `token_type_ids`, each
    /// `[batch, longest + 2]` int64, wrapping each sequence in CLS ... SEP
    /// and right-padding.
    pub fn batch_inputs(&self, seqs: &[&[u32]]) -> [Array2<i64>; 3] {
        let width = seqs.iter().map(|s| s.len()).max().unwrap_or(0) + 2;
        let mut ids = Array2::from_elem((seqs.len(), width), self.pad);
        let mut mask = Array2::zeros((seqs.len(), width));
        let types = Array2::zeros((seqs.len(), width));
        for (row, seq) in seqs.iter().enumerate() {
            ids[[row, 0]] = self.cls;
            for (i, &t) in seq.iter().enumerate() {
                ids[[row, i + 1]] = i64::from(t);
            }
            ids[[row, seq.len() + 1]] = self.sep;
            for j in 0..seq.len() + 2 {
                mask[[row, j]] = 1;
            }
        }
        [ids, mask, types]
    }
}
