//! semroute proxy-wasm HTTP filter.
//!
//! All logic lives in plain modules tested natively. Text processing layers as
//! [`text`] → [`risk`] → [`compression`] → request and filter (no module imports from a
//! layer above it):
//! - [`text`]: the shared text layer: character classes and reader, one hash, the token
//!   estimate, the scoring terms, the lexicon and sentence segmentation;
//! - [`risk`]: the cheap risk detectors (personal-data patterns, context cues, encoded
//!   payloads, injection cues) that decide which sentences compression keeps;
//! - [`compression`]: the prompt builder and its selection to a token budget;
//! - [`json_scan`]: incremental, resumable JSON scanner with byte offsets;
//! - [`json_strings`]: string values of a whole JSON text, decoded with raw offsets, for
//!   in-place rewrites;
//! - [`pii_mask`] and [`pii_restore`]: PII placeholders in request bodies, and the values
//!   put back in JSON and streamed (SSE) answers ([`response_restore`] drives the latter
//!   from the response callbacks);
//! - [`request`]: OpenAI request extraction (model, stream, prompt, scan text), handing
//!   the text it reads to a [`request::TextSink`];
//! - [`prompt_texts`]: that sink for the filter: the prompt and scan-text builders,
//!   compressed as the body arrives;
//! - [`classify_request`]: the daemon's `Classify` request, built in one place from the
//!   compressed texts;
//! - [`config`]: the validated filter configuration;
//! - [`request_edits`]: a decision's reasoning effort and system prompt spliced into the body;
//! - [`policy`]: routing, jailbreak and PII decisions;
//! - [`error_response`]: OpenAI-style error replies;
//! - [`filter`]: the per-request state machine behind the [`filter::Host`] trait;
//! - [`body_rewrite`]: `model` spliced in, or the whole body rewritten (mask, edits);
//! - [`header_map`]: the proxy-wasm header map serialisation;
//! - `testing` (feature `testing`): the mock host and the scanner event recorder that the
//!   tests, benchmarks and fuzz targets share.
//!
//! `shim` is the thin layer that talks to the proxy-wasm host (compiled only
//! for `wasm32`, with the default feature `module`). A panic in a wasm filter kills the VM for every request on
//! that worker, so the crate denies `unwrap`, `expect`, indexing and explicit
//! panics outside its tests.

#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub mod body_rewrite;
pub mod classify_request;
pub mod compression;
pub mod config;
pub mod error_response;
pub mod filter;
pub mod header_map;
pub mod json_scan;
pub mod json_strings;
pub mod pii_mask;
pub mod pii_restore;
pub mod policy;
pub mod prompt_texts;

pub mod request;
pub mod request_edits;
pub mod request_path;
pub mod response_restore;
pub mod risk;
#[cfg(any(test, feature = "testing"))]
#[allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::panic
)]
pub mod testing;
pub mod text;

#[cfg(all(target_arch = "wasm32", feature = "module"))]
mod shim;
