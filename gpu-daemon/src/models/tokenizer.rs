//! Tokenisation into overlapping windows, so that long inputs are scored
//! whole instead of being silently cut at the model's position limit.

use std::ops::Range;
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

/// Window layout over a token sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WindowPlan {
    /// Token ranges, in order; consecutive ranges overlap by `overlap` tokens.
    pub windows: Vec<Range<usize>>,
    /// True when the text had more tokens than `max_windows` windows cover.
    pub truncated: bool,
}

/// Splits `n_tokens` tokens into windows of at most `content_len` tokens
/// that overlap by `overlap` tokens, at most `max_windows` of them.
///
/// An empty input yields one empty window (the model still sees
/// `[CLS] [SEP]`). Panics never: `overlap >= content_len` is treated as
/// `content_len - 1`.
pub fn plan_windows(
    n_tokens: usize,
    content_len: usize,
    overlap: usize,
    max_windows: usize,
) -> WindowPlan {
    let content_len = content_len.max(1);
    let stride = content_len - overlap.min(content_len - 1);
    let mut windows = Vec::new();
    let mut start = 0;
    loop {
        let end = (start + content_len).min(n_tokens);
        windows.push(start..end);
        if end >= n_tokens {
            return WindowPlan {
                windows,
                truncated: false,
            };
        }
        if windows.len() >= max_windows.max(1) {
            return WindowPlan {
                windows,
                truncated: true,
            };
        }
        start += stride;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_input_is_one_window() {
        let p = plan_windows(10, 254, 64, 4);
        assert_eq!(p.windows, vec![0..10]);
        assert!(!p.truncated);
    }

    #[test]
    fn empty_input_is_one_empty_window() {
        assert_eq!(plan_windows(0, 254, 64, 4).windows, vec![0..0]);
    }

    #[test]
    fn long_input_covers_every_token_with_overlap() {
        let p = plan_windows(1000, 254, 64, 100);
        assert!(!p.truncated);
        assert_eq!(p.windows.first().unwrap().start, 0);
        assert_eq!(p.windows.last().unwrap().end, 1000);
        for w in p.windows.windows(2) {
            assert_eq!(w[0].end - w[1].start, 64);
        }
    }

    #[test]
    fn window_cap_reports_truncation() {
        let p = plan_windows(10_000, 254, 64, 3);
        assert_eq!(p.windows.len(), 3);
        assert!(p.truncated);
    }
}
