//! `semroute.v1`: the messages exchanged between the Envoy filter and the
//! inference daemon, generated from `proto/semroute/v1/classifier.proto`.
//!
//! With the `grpc` feature the tonic `classifier_server` and
//! `classifier_client` modules are generated too.

#![allow(clippy::all)]

/// Generated `semroute.v1` types.
pub mod v1 {
    include!(concat!(env!("OUT_DIR"), "/semroute.v1.rs"));
}

/// Fully qualified gRPC service name, as used in `dispatch_grpc_call`.
pub const CLASSIFIER_SERVICE: &str = "semroute.v1.Classifier";
/// Method name of the classification call.
pub const CLASSIFY_METHOD: &str = "Classify";

/// Most flagged sentences per text part (`ClassifyRequest.flagged_sentences`, and the same
/// for `scan_flagged_sentences`): the filter sends no more, the daemon scores no more alone.
pub const MAX_FLAGGED_SENTENCES: usize = 64;

/// Largest `ClassifyRequest.pattern_text`, bytes: the filter sends no more, the daemon
/// refuses more.
pub const MAX_PATTERN_TEXT_BYTES: usize = 32 * 1024;

/// Signal names accepted in `ClassifyRequest.signals`.
pub mod signal {
    /// Domain / intent category.
    pub const DOMAIN: &str = "domain";
    /// Jailbreak / prompt-injection probability.
    pub const JAILBREAK: &str = "jailbreak";
    /// Personal data entities.
    pub const PII: &str = "pii";
    /// All known signal names.
    pub const ALL: [&str; 3] = [DOMAIN, JAILBREAK, PII];
}
