//! Test support shared by the filter's tests, the benchmarks and the fuzz targets (feature
//! `testing`): [`MockHost`], a proxy-wasm host for one stream, and [`Recorder`], the JSON
//! scanner's events as owned values; [`classify_reply`], a daemon answer.

mod mock_host;
mod recorder;

pub use mock_host::{LocalReply, MockHost};
pub use recorder::{Ev, Recorder};

use semroute_proto::v1::{ClassifyResponse, DomainResult, JailbreakResult, PiiEntity, PiiResult};

/// A daemon answer with all three signals: domain `label` at `confidence`, jailbreak score
/// `jailbreak`, one entity of each of `pii` types (no span) at `pii_score`.
pub fn classify_reply(
    label: &str,
    confidence: f32,
    jailbreak: f32,
    pii: &[&str],
    pii_score: f32,
) -> ClassifyResponse {
    ClassifyResponse {
        domain: Some(DomainResult {
            label: label.into(),
            confidence,
            distribution: vec![],
        }),
        jailbreak: Some(JailbreakResult {
            score: jailbreak,
            ..Default::default()
        }),
        pii: Some(PiiResult {
            entities: pii
                .iter()
                .map(|t| PiiEntity {
                    r#type: (*t).into(),
                    score: pii_score,
                    ..Default::default()
                })
                .collect(),
        }),
        ..Default::default()
    }
}
