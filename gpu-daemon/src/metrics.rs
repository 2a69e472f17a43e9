//! Prometheus metrics (prometheus-client), served over HTTP at `/metrics`.

use std::net::SocketAddr;
use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

/// Label set naming a signal.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SignalLabel {
    /// `domain`, `jailbreak` or `pii`.
    pub signal: String,
}

/// Label set naming a stage of a Classify call.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StageLabel {
    /// `queue`, `tokenize`, `inference` or `postprocess`.
    pub stage: String,
}

/// Label set naming a gRPC status code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    /// gRPC status code name, snake case (`ok`, `invalid_argument`, `cancelled`, ...).
    pub code: String,
}

/// Label set naming why a call was refused without being classified.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ShedLabel {
    /// `deadline` (refused at submit: estimated to finish past its deadline), `queue_full`
    /// or `expired` (dropped from the queue unrun: its deadline passed, or would before it
    /// could finish).
    pub reason: String,
}

/// Label set naming a model of the engine.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabel {
    /// `encoder` (the shared encoder or the sequence classifiers) or `pii`.
    pub model: String,
}

/// Label set naming the outcome of a configuration reload.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabel {
    /// `ok` (the new configuration and models serve) or `error` (the previous ones still
    /// do).
    pub result: String,
}

/// All daemon metrics.
pub struct Metrics {
    registry: Registry,
    /// Classify calls by result code.
    pub requests: Family<CodeLabel, Counter>,
    /// Signals requested.
    pub signal_requests: Family<SignalLabel, Counter>,
    /// Time of each answered Classify call in each stage, seconds, all its signals together
    /// (the engine times stages, not signals: domain and jailbreak share one encoder pass).
    /// `queue`: waiting for the engine; `tokenize` and `postprocess`: the call's share of its
    /// batch; `inference`: the model runs of the call's whole batch, which its requests share.
    pub stage_latency: Family<StageLabel, Histogram>,
    /// End-to-end Classify latency inside the daemon, seconds.
    pub request_latency: Histogram,
    /// Requests per engine batch.
    pub batch_size: Histogram,
    /// Requests whose input exceeded the window cap.
    pub truncated: Counter,
    /// Requests waiting for the engine.
    pub queue_depth: Gauge,
    /// Engine failures (model errors or panics), isolated per batch.
    pub engine_failures: Counter,
    /// Requests skipped because their caller had gone before the engine reached them.
    pub abandoned: Counter,
    /// Calls refused unclassified, by reason.
    pub shed: Family<ShedLabel, Counter>,
    /// Engine time per work unit (a call: one unit plus one per KiB of text) that admission
    /// plans with, seconds: the running mean plus the mean deviation.
    pub service_time_estimate: Gauge<f64, AtomicU64>,
    /// Estimated engine time of the work queued and running, seconds: how long a call
    /// arriving now would wait before the engine starts it.
    pub queued_work: Gauge<f64, AtomicU64>,
    /// Tokens each answered call ran through each model, special tokens included, over all
    /// its windows, sentences and readings (cache hits not counted): what a request costs.
    pub request_tokens: Family<ModelLabel, Histogram>,
    /// Model passes (a window or a sentence) answered from the result cache.
    pub cache_hits: Counter,
    /// Configuration reloads (SIGHUP or a changed config file), by result.
    pub config_reloads: Family<ReloadLabel, Counter>,
}

/// Token buckets: each bound twice the one before, from 16 to 65,536 tokens.
fn token_histogram() -> Histogram {
    Histogram::new(exponential_buckets(16.0, 2.0, 13))
}

/// Upper bound of the first latency bucket, seconds (0.5 ms).
const LATENCY_FIRST_BUCKET_S: f64 = 0.0005;
/// Latency buckets: each bound twice the one before, from 0.5 ms up to 65.536 s, so that
/// calls of several seconds (a daemon overloaded well past its callers' deadlines) still
/// land in distinct buckets, not all in `+Inf`.
const LATENCY_BUCKETS: u16 = 18;

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(
        LATENCY_FIRST_BUCKET_S,
        2.0,
        LATENCY_BUCKETS,
    ))
}

impl Metrics {
    /// Creates and registers every metric under the `semroute_daemon` prefix.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("semroute_daemon");
        let requests = Family::<CodeLabel, Counter>::default();
        let signal_requests = Family::<SignalLabel, Counter>::default();
        let stage_latency = Family::<StageLabel, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let request_latency = latency_histogram();
        let batch_size = Histogram::new([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]);
        let truncated = Counter::default();
        let queue_depth = Gauge::default();
        let engine_failures = Counter::default();
        let abandoned = Counter::default();
        let shed = Family::<ShedLabel, Counter>::default();
        let service_time_estimate = Gauge::<f64, AtomicU64>::default();
        let queued_work = Gauge::<f64, AtomicU64>::default();
        let request_tokens = Family::<ModelLabel, Histogram>::new_with_constructor(
            token_histogram as fn() -> Histogram,
        );
        let cache_hits = Counter::default();
        let config_reloads = Family::<ReloadLabel, Counter>::default();
        registry.register(
            "classify_requests",
            "Classify calls by gRPC status code",
            requests.clone(),
        );
        registry.register(
            "signal_requests",
            "Signals requested",
            signal_requests.clone(),
        );
        registry.register(
            "stage_latency_seconds",
            "Time of answered Classify calls per stage, all requested signals together: queue (waiting for the engine), tokenize and postprocess (the call's share of its batch), inference (model runs of the call's whole batch)",
            stage_latency.clone(),
        );
        registry.register(
            "request_latency_seconds",
            "Classify latency inside the daemon, queueing included; calls whose caller gave up count up to when it did",
            request_latency.clone(),
        );
        registry.register(
            "batch_size",
            "Requests per engine batch",
            batch_size.clone(),
        );
        registry.register(
            "truncated_inputs",
            "Requests with text beyond the window cap",
            truncated.clone(),
        );
        registry.register(
            "queue_depth",
            "Requests waiting for the engine",
            queue_depth.clone(),
        );
        registry.register(
            "engine_failures",
            "Engine batches that failed (model error or panic)",
            engine_failures.clone(),
        );
        registry.register(
            "abandoned_requests",
            "Requests skipped because their caller had gone (deadline passed or call cancelled) before the engine reached them",
            abandoned.clone(),
        );
        registry.register(
            "shed_requests",
            "Calls refused without being classified: deadline (estimated to finish past the call's deadline, refused at once), queue_full, expired (dropped from the queue unrun: the deadline passed, or would before the call could finish)",
            shed.clone(),
        );
        registry.register(
            "service_time_estimate_seconds",
            "Engine time per work unit (one per call plus one per KiB of its text) that admission plans with: running mean plus mean deviation",
            service_time_estimate.clone(),
        );
        registry.register(
            "queued_work_seconds",
            "Estimated engine time of the work queued and running: the wait of a call arriving now before the engine starts it",
            queued_work.clone(),
        );
        registry.register(
            "request_tokens",
            "Tokens each answered call ran through each model (encoder, pii), special tokens included, over all its windows, sentences and readings; cache hits not counted",
            request_tokens.clone(),
        );
        registry.register(
            "cache_hits",
            "Model passes (a window or a sentence) answered from the result cache",
            cache_hits.clone(),
        );
        registry.register(
            "config_reloads",
            "Configuration reloads (SIGHUP or a changed config file) by result: ok (the new configuration and models serve) or error (the previous ones still do)",
            config_reloads.clone(),
        );
        Arc::new(Self {
            registry,
            requests,
            signal_requests,
            stage_latency,
            request_latency,
            batch_size,
            truncated,
            queue_depth,
            engine_failures,
            abandoned,
            shed,
            service_time_estimate,
            queued_work,
            request_tokens,
            cache_hits,
            config_reloads,
        })
    }

    /// Text exposition format.
    pub fn render(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

/// Serves `/metrics` on `addr` until the process exits.
pub async fn serve(addr: SocketAddr, metrics: Arc<Metrics>) -> anyhow::Result<()> {
    use axum::routing::get;
    let app = axum::Router::new().route(
        "/metrics",
        get(move || {
            let m = metrics.clone();
            async move {
                (
                    [(
                        axum::http::header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    m.render(),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bucket bounds (`le`) of `metric`'s histogram in the exposition text, in order.
    fn bucket_bounds(text: &str, metric: &str) -> Vec<String> {
        let prefix = format!("{metric}_bucket{{");
        text.lines()
            .filter(|l| l.starts_with(&prefix))
            .filter_map(|l| l.split("le=\"").nth(1)?.split('"').next())
            .map(str::to_string)
            .collect()
    }

    /// Cumulative count of the bucket `le` of `metric`.
    fn bucket_count(text: &str, metric: &str, le: &str) -> Option<u64> {
        let needle = format!("le=\"{le}\"}} ");
        text.lines()
            .filter(|l| l.starts_with(&format!("{metric}_bucket{{")))
            .find_map(|l| l.split(&needle).nth(1)?.trim().parse().ok())
    }

    #[test]
    fn latency_buckets_reach_past_a_minute_in_distinct_steps() {
        let m = Metrics::new();
        for s in [0.0003, 0.9, 1.5, 9.0, 30.0, 50.0, 120.0] {
            m.request_latency.observe(s);
        }
        let text = m.render();
        let name = "semroute_daemon_request_latency_seconds";
        let bounds = bucket_bounds(&text, name);
        assert_eq!(bounds.len(), 19, "{text}");
        assert_eq!(bounds.first().map(String::as_str), Some("0.0005"));
        assert_eq!(bounds.last().map(String::as_str), Some("+Inf"));
        let secs: Vec<f64> = bounds[..18].iter().map(|b| b.parse().unwrap()).collect();
        assert!((secs[17] - 65.536).abs() < 1e-9, "{bounds:?}");
        assert!(secs.windows(2).all(|w| (w[1] / w[0] - 2.0).abs() < 1e-9));
        // 30 s lies between 16.384 s and 32.768 s; 50 s above that; 120 s only in +Inf.
        let le = |b: f64| {
            let label = &bounds[secs.iter().position(|s| (s - b).abs() < 1e-6).unwrap()];
            bucket_count(&text, name, label).unwrap()
        };
        assert_eq!(le(1.024), 2);
        assert_eq!(le(2.048), 3);
        assert_eq!(le(16.384), 4);
        assert_eq!(le(32.768), 5);
        assert_eq!(le(65.536), 6);
        assert_eq!(bucket_count(&text, name, "+Inf"), Some(7));
    }
}
