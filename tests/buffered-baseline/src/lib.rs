//! The buffered design of the filter: the baseline the streaming filter is measured
//! against, never on the request path.
//!
//! - [`extract`]: the whole body parsed with `serde_json`, then the texts read from the
//!   value; `filter-bench` times it natively against the streaming filter.
//! - `module` (wasm targets only): the same design as a proxy-wasm module, the baseline of
//!   `router-bench`'s filter table inside Envoy:
//!
//! ```text
//! cargo build --release -p semroute-buffered-baseline --target wasm32-wasip1
//! # -> target/wasm32-wasip1/release/semroute_buffered_baseline.wasm
//! ```

pub mod extract;

#[cfg(target_family = "wasm")]
mod module;
