//! semroute inference daemon: classification signals (domain, jailbreak,
//! PII) over gRPC on a Unix socket, with ONNX Runtime models.

pub mod batcher;
pub mod cache;
pub mod client;
pub mod config;
pub mod confusable;
pub mod diacritics;
pub mod encoded;
pub mod engine;
pub mod int8_weights;
pub mod invisible;
pub mod metrics;
pub mod mixed_script;
pub mod model_check;
pub mod models;
pub mod passes;
pub mod pii;
pub mod reload;
pub mod runtime;
pub mod server;
pub mod socket_dir;
pub mod symbol_noise;
