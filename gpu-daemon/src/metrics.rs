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

/// Label set naming a signal.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SignalLabel {
    /// `domain`, `jailbreak` or `pii`.
    pub signal: String,
}

/// Label set naming a gRPC status code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CodeLabel {
    /// gRPC status code name (`ok`, `invalid_argument`, ...).
    pub code: String,
}

/// All daemon metrics.
pub struct Metrics {
    registry: Registry,
    /// Classify calls by result code.
    pub requests: Family<CodeLabel, Counter>,
    /// Signals requested.
    pub signal_requests: Family<SignalLabel, Counter>,
    /// Per-signal model latency, seconds.
    pub signal_latency: Family<SignalLabel, Histogram>,
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
}

fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.0005, 2.0, 16))
}

impl Metrics {
    /// Creates and registers every metric under the `semroute_daemon` prefix.
    pub fn new() -> Arc<Self> {
        let mut registry = Registry::with_prefix("semroute_daemon");
        let requests = Family::<CodeLabel, Counter>::default();
        let signal_requests = Family::<SignalLabel, Counter>::default();
        let signal_latency = Family::<SignalLabel, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        let request_latency = latency_histogram();
        let batch_size = Histogram::new([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]);
        let truncated = Counter::default();
        let queue_depth = Gauge::default();
        let engine_failures = Counter::default();
        let abandoned = Counter::default();
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
            "signal_latency_seconds",
            "Model time per signal (tokenize + inference + postprocess)",
            signal_latency.clone(),
        );
        registry.register(
            "request_latency_seconds",
            "Classify latency inside the daemon, queueing included",
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
        Arc::new(Self {
            registry,
            requests,
            signal_requests,
            signal_latency,
            request_latency,
            batch_size,
            truncated,
            queue_depth,
            engine_failures,
            abandoned,
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
