//! The prompt-compression interface the filter uses: the compression
//! module's incremental [`PromptBuilder`].

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub use crate::compression::{Compressed, CompressionConfig, PromptBuilder, TokenCalibration};
