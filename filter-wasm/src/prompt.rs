//! The prompt-compression interface the filter uses: the compression
//! module's incremental [`PromptBuilder`], and how its result goes into a
//! `Classify` request.

pub use crate::compression::{Compressed, CompressionConfig, PromptBuilder, TokenCalibration};

use semroute_proto::v1::{Reduction, TextSpan};

/// The `Classify` request's account of a compression: original and kept tokens, original
/// bytes, and whether anything was cut.
pub fn reduction(c: &Compressed) -> Reduction {
    Reduction {
        original_tokens: c.original_tokens,
        kept_tokens: c.kept_tokens,
        original_bytes: c.original_bytes,
        compressed: c.compressed,
    }
}

/// Byte ranges as `TextSpan`s (offsets in bytes); a range past `u32` is left out.
pub fn text_spans(ranges: &[std::ops::Range<usize>]) -> Vec<TextSpan> {
    ranges
        .iter()
        .filter_map(|r| {
            Some(TextSpan {
                start: u32::try_from(r.start).ok()?,
                end: u32::try_from(r.end).ok()?,
            })
        })
        .collect()
}
