//! The gRPC server: `semroute.v1.Classifier` and `grpc.health.v1` on a Unix
//! domain socket.

use std::ops::Range;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use semroute_proto::v1::classifier_server::{Classifier, ClassifierServer};
use semroute_proto::v1::{
    ClassifyRequest, ClassifyResponse, DomainResult, JailbreakResult, LabelScore, ModelCost,
    ModelInfo, PiiEntity, PiiResult, PiiSource, TextSpan, Timings,
};
use semroute_proto::MAX_PATTERN_TEXT_BYTES;
use tokio::net::UnixListener;
use tokio_stream::wrappers::UnixListenerStream;
use tonic::{Request, Response, Status};

use crate::batcher::{BatchError, Batcher};
use crate::engine::{text_ranges, ClassifyInput, ClassifyOutput, Part, SignalSet};
use crate::metrics::{CodeLabel, Metrics, ModelLabel, SignalLabel, StageLabel};
use crate::pii::Source;

/// The Classifier service.
pub struct ClassifierService {
    batcher: Batcher,
    metrics: Arc<Metrics>,
    /// `limits.max_text_bytes`, shared with the reload that may change it.
    max_text_bytes: Arc<AtomicUsize>,
}

impl ClassifierService {
    /// Creates the service over a running batcher.
    pub fn new(batcher: Batcher, metrics: Arc<Metrics>, max_text_bytes: Arc<AtomicUsize>) -> Self {
        Self {
            batcher,
            metrics,
            max_text_bytes,
        }
    }
}

/// Validates a request and turns it into engine input.
///
/// Errors: OUT_OF_RANGE for more than `max_text_bytes` bytes of text and scan text in
/// total (as tonic answers a message over its size limit: the caller's text is too large,
/// which the filter answers with 413 instead of its failure mode); INVALID_ARGUMENT for
/// empty text, text, scan_text or pattern_text not UTF-8, a pattern_text over
/// [`MAX_PATTERN_TEXT_BYTES`], unknown signal names, a flagged-sentence span that is not a
/// range of character boundaries of its text.
pub fn validate(req: ClassifyRequest, max_text_bytes: usize) -> Result<ClassifyInput, Status> {
    let total = req.text.len() + req.scan_text.len();
    if total > max_text_bytes {
        return Err(Status::out_of_range(format!(
            "text is {total} bytes, above the limit of {max_text_bytes} bytes"
        )));
    }
    if req.pattern_text.len() > MAX_PATTERN_TEXT_BYTES {
        return Err(Status::invalid_argument(format!(
            "pattern_text is {} bytes, above the limit of {MAX_PATTERN_TEXT_BYTES} bytes",
            req.pattern_text.len()
        )));
    }
    let pattern_text = String::from_utf8(req.pattern_text).map_err(|e| {
        Status::invalid_argument(format!(
            "pattern_text is not valid UTF-8 (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let text = String::from_utf8(req.text).map_err(|e| {
        Status::invalid_argument(format!(
            "text is not valid UTF-8 (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let scan_text = String::from_utf8(req.scan_text).map_err(|e| {
        Status::invalid_argument(format!(
            "scan_text is not valid UTF-8 (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    if text.trim().is_empty() && scan_text.trim().is_empty() {
        return Err(Status::invalid_argument("text is empty"));
    }
    let signals =
        SignalSet::parse(&req.signals).map_err(|e| Status::invalid_argument(e.to_string()))?;
    let flagged_sentences = spans("flagged_sentences", &req.flagged_sentences, &text)?;
    let scan_flagged_sentences = spans(
        "scan_flagged_sentences",
        &req.scan_flagged_sentences,
        &scan_text,
    )?;
    let pii_sentences = spans("pii_sentences", &req.pii_sentences, &text)?;
    let scan_pii_sentences = spans("scan_pii_sentences", &req.scan_pii_sentences, &scan_text)?;
    Ok(ClassifyInput {
        text,
        scan_text,
        signals,
        flagged_sentences,
        scan_flagged_sentences,
        pattern_text,
        pii_patterns_only: req.pii_patterns_only,
        original_tokens: req.reduction.map_or(0, |r| r.original_tokens),
        scan_original_tokens: req.scan_reduction.map_or(0, |r| r.original_tokens),
        pii_sentences,
        scan_pii_sentences,
    })
}

/// `spans` as byte ranges of `text` (see [`text_ranges`]); errors are INVALID_ARGUMENT.
fn spans(field: &'static str, spans: &[TextSpan], text: &str) -> Result<Vec<Range<usize>>, Status> {
    let pairs = spans.iter().map(|s| (s.start as usize, s.end as usize));
    text_ranges(field, pairs, text).map_err(|e| Status::invalid_argument(e.to_string()))
}

/// Converts engine output to the wire response.
pub fn to_response(
    request_id: String,
    out: ClassifyOutput,
    queue_us: u64,
    total_us: u64,
) -> ClassifyResponse {
    ClassifyResponse {
        request_id,
        domain: out.domain.map(|d| DomainResult {
            label: d.label,
            confidence: d.confidence,
            distribution: d
                .distribution
                .into_iter()
                .map(|(label, score)| LabelScore { label, score })
                .collect(),
        }),
        jailbreak: out.jailbreak.map(|j| JailbreakResult {
            score: j.score.max(0.0),
            windows: j.windows,
            window_start: j.window.0 as u32,
            window_end: j.window.1 as u32,
            in_scan_text: j.window.2 == Part::ScanText,
            encoder_score: j.encoder_score.max(0.0),
            ngram_logit: j.ngram_logit,
            text_score: j.part_score(Part::Text).map(|s| s.max(0.0)),
            scan_text_score: j.part_score(Part::ScanText).map(|s| s.max(0.0)),
        }),
        pii: out.pii.map(|entities| PiiResult {
            entities: entities
                .into_iter()
                .map(|p| PiiEntity {
                    r#type: p.entity.kind.to_string(),
                    start: p.entity.start as u32,
                    end: p.entity.end as u32,
                    score: p.entity.score,
                    source: match p.entity.source {
                        Source::Model => PiiSource::Model,
                        Source::Pattern => PiiSource::Pattern,
                    } as i32,
                    in_scan_text: p.part == Part::ScanText,
                    in_pattern_text: p.part == Part::PatternText,
                })
                .collect(),
        }),
        truncated: out.truncated,
        input_tokens: out.input_tokens,
        models: out
            .models
            .entries
            .iter()
            .map(|(signal, name)| ModelInfo {
                signal: signal.to_string(),
                name: name.clone(),
            })
            .collect(),
        timings: Some(Timings {
            queue_us,
            tokenize_us: out.timings.tokenize_us,
            inference_us: out.timings.inference_us,
            postprocess_us: out.timings.postprocess_us,
            total_us,
            encoder_us: out.timings.encoder_us,
            pii_us: out.timings.pii_us,
        }),
        cost: Some(ModelCost {
            encoder_tokens: out.encoder_tokens,
            pii_tokens: out.pii_tokens,
            cached_passes: out.cached_passes,
        }),
    }
}

/// The gRPC status of a call the batcher did not answer: UNAVAILABLE for work refused
/// (queue full, or estimated to finish past the call's deadline: the caller applies its
/// failure mode at once) or an engine that has stopped, DEADLINE_EXCEEDED for a call
/// dropped from the queue once it could no longer be answered in time, INTERNAL for a
/// model failure.
fn batch_status(e: BatchError) -> Status {
    match e {
        BatchError::QueueFull(_) | BatchError::WouldMissDeadline { .. } | BatchError::Stopped => {
            Status::unavailable(e.to_string())
        }
        BatchError::Expired => Status::deadline_exceeded(e.to_string()),
        BatchError::Engine(_) => Status::internal(e.to_string()),
    }
}

/// Parses a `grpc-timeout` header value (gRPC over HTTP/2: 1 to 8 ASCII digits, then the
/// unit `H`, `M`, `S`, `m`, `u` or `n`). `None` for anything else.
pub fn parse_grpc_timeout(value: &str) -> Option<Duration> {
    let digits = value.get(..value.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match &value[digits.len()..] {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// The deadline of a call received at `now`: `now` plus its `grpc-timeout` (which Envoy
/// sends for a gRPC call with a timeout, such as the filter's `daemon.timeout_ms`). `None`
/// when the header is absent or malformed (tonic then enforces no timeout either).
pub fn call_deadline(metadata: &tonic::metadata::MetadataMap, now: Instant) -> Option<Instant> {
    let timeout = parse_grpc_timeout(metadata.get("grpc-timeout")?.to_str().ok()?)?;
    now.checked_add(timeout)
}

/// The `code` label of a gRPC status code: its name in the gRPC specification, lowercase
/// (`ok`, `invalid_argument`, `deadline_exceeded`, ...).
fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "ok",
        Code::Cancelled => "cancelled",
        Code::Unknown => "unknown",
        Code::InvalidArgument => "invalid_argument",
        Code::DeadlineExceeded => "deadline_exceeded",
        Code::NotFound => "not_found",
        Code::AlreadyExists => "already_exists",
        Code::PermissionDenied => "permission_denied",
        Code::ResourceExhausted => "resource_exhausted",
        Code::FailedPrecondition => "failed_precondition",
        Code::Aborted => "aborted",
        Code::OutOfRange => "out_of_range",
        Code::Unimplemented => "unimplemented",
        Code::Internal => "internal",
        Code::Unavailable => "unavailable",
        Code::DataLoss => "data_loss",
        Code::Unauthenticated => "unauthenticated",
    }
}

/// One Classify call's entry in the metrics: its status code in `classify_requests` and its
/// time inside the daemon in `request_latency_seconds`, recorded exactly once.
///
/// A call whose caller gives up (Envoy cancels it at its deadline, or tonic's `grpc-timeout`
/// expires) has its handler future dropped at the next await, mid-inference or queued, and
/// never reaches [`CallRecord::finish`]; the drop records it as `cancelled`, the code tonic
/// answers an expired deadline with.
struct CallRecord<'a> {
    metrics: &'a Metrics,
    request_id: String,
    /// When the handler started.
    started: Instant,
    finished: bool,
}

impl<'a> CallRecord<'a> {
    fn start(metrics: &'a Metrics, request_id: String) -> Self {
        Self {
            metrics,
            request_id,
            started: Instant::now(),
            finished: false,
        }
    }

    /// Records the call as answered with `code`.
    fn finish(mut self, code: tonic::Code) {
        self.record(code);
        self.finished = true;
    }

    fn record(&self, code: tonic::Code) {
        self.metrics
            .requests
            .get_or_create(&CodeLabel {
                code: code_name(code).to_string(),
            })
            .inc();
        self.metrics
            .request_latency
            .observe(self.started.elapsed().as_secs_f64());
    }
}

impl Drop for CallRecord<'_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        self.record(tonic::Code::Cancelled);
        tracing::debug!(
            request_id = self.request_id,
            us = self.started.elapsed().as_micros() as u64,
            "caller gone before the answer"
        );
    }
}

#[tonic::async_trait]
impl Classifier for ClassifierService {
    async fn classify(
        &self,
        request: Request<ClassifyRequest>,
    ) -> Result<Response<ClassifyResponse>, Status> {
        let deadline = call_deadline(request.metadata(), Instant::now());
        let req = request.into_inner();
        let request_id = req.request_id.clone();
        // Records the call's code and latency when it ends, also when tonic drops this
        // future unfinished (the caller cancelled the call or its deadline passed).
        let call = CallRecord::start(&self.metrics, request_id.clone());
        let started = call.started;
        let result = async {
            let input = validate(req, self.max_text_bytes.load(Ordering::Relaxed))?;
            let signals = input.signals;
            for (on, name) in [
                (signals.domain, semroute_proto::signal::DOMAIN),
                (signals.jailbreak, semroute_proto::signal::JAILBREAK),
                (signals.pii, semroute_proto::signal::PII),
            ] {
                if on {
                    self.metrics
                        .signal_requests
                        .get_or_create(&SignalLabel {
                            signal: name.into(),
                        })
                        .inc();
                }
            }
            let (out, queue_us) = self
                .batcher
                .classify(input, deadline)
                .await
                .map_err(batch_status)?;
            if out.truncated {
                self.metrics.truncated.inc();
            }
            for (model, tokens) in [("encoder", out.encoder_tokens), ("pii", out.pii_tokens)] {
                self.metrics
                    .request_tokens
                    .get_or_create(&ModelLabel {
                        model: model.into(),
                    })
                    .observe(f64::from(tokens));
            }
            self.metrics.cache_hits.inc_by(u64::from(out.cached_passes));
            for (stage, us) in [
                ("queue", queue_us),
                ("tokenize", out.timings.tokenize_us),
                ("inference", out.timings.inference_us),
                ("postprocess", out.timings.postprocess_us),
            ] {
                self.metrics
                    .stage_latency
                    .get_or_create(&StageLabel {
                        stage: stage.into(),
                    })
                    .observe(us as f64 / 1e6);
            }
            let total_us = started.elapsed().as_micros() as u64;
            Ok::<_, Status>(to_response(request_id.clone(), out, queue_us, total_us))
        }
        .await;
        call.finish(match &result {
            Ok(_) => tonic::Code::Ok,
            Err(s) => s.code(),
        });
        match &result {
            Ok(r) => {
                let t = r.timings.unwrap_or_default();
                let cost = r.cost.unwrap_or_default();
                tracing::debug!(
                    request_id,
                    truncated = r.truncated,
                    input_tokens = r.input_tokens,
                    encoder_tokens = cost.encoder_tokens,
                    pii_tokens = cost.pii_tokens,
                    cached_passes = cost.cached_passes,
                    queue_us = t.queue_us,
                    tokenize_us = t.tokenize_us,
                    inference_us = t.inference_us,
                    encoder_us = t.encoder_us,
                    pii_us = t.pii_us,
                    postprocess_us = t.postprocess_us,
                    us = started.elapsed().as_micros() as u64,
                    "classified"
                )
            }
            Err(s) => {
                tracing::info!(request_id, code = ?s.code(), message = s.message(), "rejected")
            }
        }
        result.map(Response::new)
    }
}

/// A bound Unix socket that is removed when dropped.
pub struct BoundSocket {
    /// The listener (taken by [`serve`]).
    pub listener: Option<UnixListener>,
    path: PathBuf,
}

impl Drop for BoundSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds `path` with permission bits `mode` and, when given, group `group`, creating its
/// directory.
///
/// A stale socket file (nothing accepting on it) is replaced; a live one
/// (another daemon answers) or a non-socket file is an error.
pub async fn bind_socket(
    path: &Path,
    mode: u32,
    group: Option<u32>,
) -> anyhow::Result<BoundSocket> {
    use std::os::unix::fs::FileTypeExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| {
            anyhow::anyhow!("cannot create socket directory {}: {e}", dir.display())
        })?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            anyhow::bail!(
                "{} exists and is not a socket; refusing to replace it",
                path.display()
            );
        }
        if tokio::net::UnixStream::connect(path).await.is_ok() {
            anyhow::bail!("{} is in use by a running daemon", path.display());
        }
        std::fs::remove_file(path)?;
        tracing::info!(socket = %path.display(), "replaced stale socket file");
    }
    let listener = UnixListener::bind(path)
        .map_err(|e| anyhow::anyhow!("cannot bind {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    if let Some(gid) = group {
        std::os::unix::fs::chown(path, None, Some(gid)).map_err(|e| {
            anyhow::anyhow!(
                "cannot give {} to group {gid} (socket_group; the daemon must be a member): {e}",
                path.display()
            )
        })?;
    }
    Ok(BoundSocket {
        listener: Some(listener),
        path: path.to_owned(),
    })
}

/// Serves until `shutdown` resolves, then drains in-flight calls and
/// removes the socket file.
pub async fn serve(
    mut socket: BoundSocket,
    service: ClassifierService,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    let (health_reporter, health_service) = tonic_health::server::health_reporter();
    health_reporter
        .set_serving::<ClassifierServer<ClassifierService>>()
        .await;
    let listener = socket
        .listener
        .take()
        .ok_or_else(|| anyhow::anyhow!("socket already served"))?;
    tonic::transport::Server::builder()
        .add_service(health_service)
        .add_service(ClassifierServer::new(service))
        .serve_with_incoming_shutdown(UnixListenerStream::new(listener), shutdown)
        .await?;
    drop(socket);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batcher::EngineFailure;

    #[test]
    fn code_labels_are_the_specification_names_in_snake_case() {
        let mut seen = std::collections::HashSet::new();
        for n in 0..=16 {
            let code = tonic::Code::from_i32(n);
            let snake: String = format!("{code:?}")
                .chars()
                .enumerate()
                .flat_map(|(i, c)| {
                    let sep = (i > 0 && c.is_ascii_uppercase()).then_some('_');
                    sep.into_iter().chain(c.to_lowercase())
                })
                .collect();
            assert_eq!(code_name(code), snake, "{code:?}");
            assert!(seen.insert(code_name(code)));
        }
        assert_eq!(code_name(tonic::Code::InvalidArgument), "invalid_argument");
    }

    #[test]
    fn grpc_timeouts_parse_in_every_unit_and_nothing_else_does() {
        for (value, want) in [
            ("1H", Duration::from_secs(3600)),
            ("2M", Duration::from_secs(120)),
            ("3S", Duration::from_secs(3)),
            ("1000m", Duration::from_millis(1000)),
            ("999984m", Duration::from_millis(999_984)),
            ("250u", Duration::from_micros(250)),
            ("7n", Duration::from_nanos(7)),
            ("0m", Duration::ZERO),
            ("00000001S", Duration::from_secs(1)),
            ("99999999H", Duration::from_secs(99_999_999 * 3600)),
        ] {
            assert_eq!(parse_grpc_timeout(value), Some(want), "{value}");
        }
        for bad in [
            "",
            "m",
            "S",
            "10",
            "10s",
            "10ms",
            "1.5S",
            "-1S",
            "+1S",
            " 1S",
            "1S ",
            "123456789m",
            "1x",
            "١S",
            "1mm",
        ] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn a_call_deadline_is_its_arrival_plus_its_grpc_timeout() {
        let now = Instant::now();
        let mut m = tonic::metadata::MetadataMap::new();
        assert_eq!(call_deadline(&m, now), None);
        m.insert("grpc-timeout", "1000m".parse().unwrap());
        assert_eq!(call_deadline(&m, now), Some(now + Duration::from_secs(1)));
        m.insert("grpc-timeout", "soon".parse().unwrap());
        assert_eq!(call_deadline(&m, now), None);
    }

    #[test]
    fn refusals_are_unavailable_and_expiry_deadline_exceeded() {
        use tonic::Code;
        for (e, code) in [
            (BatchError::QueueFull(4), Code::Unavailable),
            (
                BatchError::WouldMissDeadline {
                    estimate: Duration::from_millis(1500),
                    budget: Duration::from_millis(1000),
                },
                Code::Unavailable,
            ),
            (BatchError::Stopped, Code::Unavailable),
            (BatchError::Expired, Code::DeadlineExceeded),
            (BatchError::Engine(EngineFailure::Panicked), Code::Internal),
        ] {
            assert_eq!(batch_status(e).code(), code);
        }
        let m = batch_status(BatchError::WouldMissDeadline {
            estimate: Duration::from_millis(1500),
            budget: Duration::from_millis(1000),
        });
        assert!(m.message().contains("1500 ms"), "{}", m.message());
    }

    #[test]
    fn a_call_is_recorded_once_answered_or_dropped_unfinished() {
        let metrics = Metrics::new();
        CallRecord::start(&metrics, "a".into()).finish(tonic::Code::Ok);
        CallRecord::start(&metrics, "b".into()).finish(tonic::Code::Unavailable);
        drop(CallRecord::start(&metrics, "c".into()));
        let text = metrics.render();
        for line in [
            r#"semroute_daemon_classify_requests_total{code="ok"} 1"#,
            r#"semroute_daemon_classify_requests_total{code="unavailable"} 1"#,
            r#"semroute_daemon_classify_requests_total{code="cancelled"} 1"#,
            "semroute_daemon_request_latency_seconds_count 3",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}
