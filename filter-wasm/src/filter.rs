//! The per-request state machine, written against the small [`Host`] trait so
//! it runs natively in tests; `shim` binds it to proxy-wasm.
//!
//! Request flow for `POST` to the Chat Completions or Responses path:
//! 1. headers: client-sent `x-semroute-*` headers are removed (on every
//!    request, before anything else); a `content-length` over the limit gets
//!    413; the request pauses.
//! 2. each body chunk: only the new bytes are read and fed to the scanner
//!    (bodies whose `content-length` is at most `limits.small_body_bytes` are
//!    scanned in one pass at end of stream); invalid JSON gets 400. At most
//!    `limits.max_scan_bytes_per_callback` bytes are scanned per callback; the
//!    rest is continued by [`HttpFilter::on_backlog`] from outside the stream's
//!    callbacks.
//! 3. as soon as the conversation has been read and `model` is known (or the
//!    body ended), the prompt is compressed and `Classify` is dispatched,
//!    while the rest of the body may still be arriving.
//! 4. the reply (or failure) becomes a [`Verdict`]. A rejection is answered at
//!    once; a route is applied once the body is complete: route headers,
//!    `model` spliced into the body, `content-length` corrected, resume. When the route
//!    masks PII types, the values the daemon found are replaced by placeholders in the
//!    whole body ([`crate::pii_mask`]) and `x-semroute-pii-masked` counts them.
//! 5. response: the route's headers; with masked values, the placeholders in the answer
//!    are restored ([`crate::response_restore`]).

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use prost::Message;
use semroute_proto::v1::{ClassifyResponse, Timings};
use thiserror::Error;

use crate::body_rewrite::{self, BodyState, RewriteError};
use crate::classify_request::{classify_request, reduction, text_risk, ClassifyParts};
use crate::compression::{RiskFlags, TokenCalibration, SCORED_ALONE};
use crate::config::{FilterConfig, PiiModelPass};
use crate::error_response::ErrorResponse;
use crate::json_scan::{FeedError, ScanErrorKind, Scanner};
use crate::pii_mask::MaskTable;
use crate::pii_restore::Restorer;
use crate::policy::{self, FallbackReason, RequestFacts, Route, TextRisk, Verdict};
use crate::prompt_texts::PromptTexts;
use crate::request::{Api, ExtractError, Extractor, ModelValue};
use crate::request_edits::RequestEdits;
use crate::request_path;
use crate::response_restore::ResponseRestore;

/// Prefix of the per-type counters of masked values (`semroute.pii_masked.EMAIL_ADDRESS`).
pub const MASKED_COUNTER_PREFIX: &str = "semroute.pii_masked.";

/// What the host should do with the stream after a callback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Go on (headers / body forwarded).
    Continue,
    /// Stop iteration; for body callbacks, buffer what arrived.
    Pause,
}

/// A host call that failed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("host call {call} failed with status {status}")]
pub struct HostError {
    /// Name of the call.
    pub call: &'static str,
    /// Status the host returned.
    pub status: u32,
}

/// The proxy-wasm host operations the filter needs.
pub trait Host {
    /// A request header value (`:method`, `:path` and other pseudo-headers too).
    fn request_header(&self, name: &str) -> Option<String>;
    /// Names of all request headers.
    fn request_header_names(&self) -> Vec<String>;
    /// Sets (replaces) a request header.
    fn set_request_header(&mut self, name: &str, value: &str);
    /// Removes a request header.
    fn remove_request_header(&mut self, name: &str);
    /// Sets (replaces) a response header.
    fn set_response_header(&mut self, name: &str, value: &str);
    /// A response header value.
    fn response_header(&self, name: &str) -> Option<String>;
    /// Removes a response header.
    fn remove_response_header(&mut self, name: &str);
    /// Up to `len` bytes of the buffered response body from `start`.
    fn response_body(&self, start: usize, len: usize) -> Option<Vec<u8>>;
    /// Replaces `len` bytes of the buffered response body from `start` with `bytes`.
    fn set_response_body(
        &mut self,
        start: usize,
        len: usize,
        bytes: &[u8],
    ) -> Result<(), HostError>;
    /// Adds `by` to the counter `name` (created on first use).
    fn increment_counter(&mut self, name: &str, by: u64);
    /// Up to `len` bytes of the buffered request body from `start`.
    fn request_body(&self, start: usize, len: usize) -> Option<Vec<u8>>;
    /// Replaces the first `drain` bytes of the buffered request body with
    /// `prefix` (Envoy supports replacing a prefix, not a middle range).
    fn replace_body_prefix(&mut self, drain: usize, prefix: &[u8]) -> Result<(), HostError>;
    /// Starts a unary gRPC call `semroute.v1.Classifier/Classify`.
    fn dispatch_classify(
        &mut self,
        cluster: &str,
        message: &[u8],
        timeout: Duration,
    ) -> Result<u32, HostError>;
    /// The reply message of the finished gRPC call, `len` bytes.
    fn grpc_response_body(&self, len: usize) -> Option<Vec<u8>>;
    /// The status message of the finished gRPC call, when the host gives one (Envoy:
    /// `upstream request timeout{response_timeout}` when the call's timeout ended it).
    fn grpc_status_message(&self) -> Option<String> {
        None
    }
    /// Sends a local reply instead of forwarding.
    fn send_response(&mut self, status: u16, headers: &[(&str, &str)], body: &[u8]);
    /// Resumes a paused request.
    fn resume_request(&mut self);
    /// Current time in microseconds (any epoch).
    fn now_us(&self) -> u64;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not a request the filter inspects.
    Bypass,
    /// Reading the body / waiting for the classification.
    Scanning,
    /// Forwarded upstream.
    Forwarded,
    /// A local reply was sent.
    Replied,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    NotYet,
    InFlight { token: u32, since_us: u64 },
    Done,
}

/// Per-request filter state. Create one per HTTP stream.
pub struct HttpFilter {
    config: Rc<FilterConfig>,
    calibration: Rc<Cell<TokenCalibration>>,
    /// Estimated tokens of the text sent (for calibration).
    sent_tokens_raw: u32,
    phase: Phase,
    scanner: Scanner,
    extractor: Option<Extractor<PromptTexts>>,
    /// Body bytes scanned so far.
    scanned: usize,
    /// Body bytes the host reported buffered so far (`body_size` of the latest body
    /// callback).
    received: usize,
    /// The host reported the end of the body (`end_of_stream`, or trailers).
    received_end: bool,
    /// Trailers arrived: the body is complete but its size was not reported with them.
    trailers: bool,
    /// Buffered bytes are waiting to be scanned: the latest step stopped at
    /// `limits.max_scan_bytes_per_callback`.
    backlog: bool,
    small_body: bool,
    /// The whole body has been scanned (received to its end, and no backlog).
    end_of_stream: bool,
    content_length: Option<u64>,
    request_id: String,
    started_us: u64,
    scan_us: u64,
    compress_us: u64,
    daemon_us: Option<u64>,
    /// The risk scan flagged a jailbreak cue in the text or the scan text
    /// ([`RequestFacts::jailbreak_cue`]).
    jailbreak_cue: bool,
    /// What the risk scan found in the text and the scan text ([`RequestFacts::risk`]).
    risk: RiskFlags,
    /// The same per text the daemon scores ([`RequestFacts::text_risk`]).
    text_risk: TextRisk,
    /// Entity types the risk scan found with a validated pattern
    /// ([`RequestFacts::pattern_pii`]).
    pattern_pii: Vec<&'static str>,
    daemon_timings: Option<Timings>,
    /// Time spent in this stream's callbacks so far, µs.
    cpu_us: u64,
    /// Start of the callback being run, µs (host clock).
    callback_start_us: u64,
    /// Start of the latest body callback that delivered body bytes, µs
    /// (once the stream has ended: the one with the last body byte).
    last_data_at_us: Option<u64>,
    /// When `Classify` was dispatched, µs.
    dispatch_at_us: Option<u64>,
    call: Call,
    verdict: Option<Verdict>,
    applied: Option<Route>,
    /// The text and scan text sent to the daemon, kept (only when some request may be
    /// masked) to read the values of the PII entities it reports.
    sent_text: String,
    sent_scan_text: String,
    sent_pattern_text: String,
    /// Values to mask in the body, from the daemon's reply.
    mask: MaskTable,
    /// Restore of the masked values in the answer.
    restore: Option<ResponseRestore>,
    /// The API of the body, once the headers named an inspected path.
    api: Option<Api>,
}

/// True when `v` can be sent as a header value: 1..=256 visible ASCII
/// characters or spaces.
/// Byte ranges as `ClassifyRequest` spans (ranges past `u32` are left out: the daemon's
/// byte limit is far below).
fn header_value_ok(v: &str) -> bool {
    !v.is_empty() && v.len() <= 256 && v.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// The daemon's entity types of the validated-pattern kinds in `risk`.
fn pattern_types(risk: RiskFlags) -> Vec<&'static str> {
    [
        (RiskFlags::EMAIL, "EMAIL_ADDRESS"),
        (RiskFlags::PHONE, "PHONE_NUMBER"),
        (RiskFlags::CARD, "CREDIT_CARD"),
        (RiskFlags::IBAN, "IBAN_CODE"),
        (RiskFlags::SSN, "US_SSN"),
        (RiskFlags::IP, "IP_ADDRESS"),
    ]
    .into_iter()
    .filter(|(f, _)| risk.intersects(*f))
    .map(|(_, t)| t)
    .collect()
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

fn ms(us: u64) -> String {
    format!("{}.{:02}", us / 1000, (us % 1000) / 10)
}

impl HttpFilter {
    /// A filter for one stream under `config`. `calibration` is shared by
    /// all streams of a worker: replies refine the token estimate.
    pub fn new(config: Rc<FilterConfig>, calibration: Rc<Cell<TokenCalibration>>) -> Self {
        let depth = config.limits.max_depth;
        HttpFilter {
            config,
            calibration,
            sent_tokens_raw: 0,
            phase: Phase::Bypass,
            scanner: Scanner::new(depth),
            extractor: None,
            scanned: 0,
            received: 0,
            received_end: false,
            trailers: false,
            backlog: false,
            small_body: false,
            end_of_stream: false,
            content_length: None,
            request_id: String::new(),
            started_us: 0,
            scan_us: 0,
            compress_us: 0,
            daemon_us: None,
            jailbreak_cue: false,
            risk: RiskFlags::empty(),
            text_risk: TextRisk::default(),
            pattern_pii: Vec::new(),
            daemon_timings: None,
            cpu_us: 0,
            callback_start_us: 0,
            last_data_at_us: None,
            dispatch_at_us: None,
            call: Call::NotYet,
            verdict: None,
            applied: None,
            sent_text: String::new(),
            sent_scan_text: String::new(),
            sent_pattern_text: String::new(),
            mask: MaskTable::default(),
            restore: None,
            api: None,
        }
    }

    /// The route applied to the forwarded request, if any.
    pub fn applied_route(&self) -> Option<&Route> {
        self.applied.as_ref()
    }

    fn reply<H: Host>(&mut self, host: &mut H, error: &ErrorResponse, decision: &str) -> Action {
        let decision_header = self.config.header("decision");
        let headers = [
            ("content-type", "application/json"),
            (decision_header.as_str(), decision),
        ];
        host.send_response(error.status, &headers, &error.body());
        self.phase = Phase::Replied;
        Action::Pause
    }

    /// Request headers arrived.
    pub fn on_request_headers<H: Host>(&mut self, host: &mut H, end_of_stream: bool) -> Action {
        self.enter(host);
        let action = self.request_headers(host, end_of_stream);
        self.leave(host);
        action
    }

    /// Marks the start of a callback (for the `filter` timing).
    fn enter<H: Host>(&mut self, host: &H) {
        self.callback_start_us = host.now_us();
    }

    /// Adds the time since [`Self::enter`] to the callback total.
    fn leave<H: Host>(&mut self, host: &H) {
        let spent = host.now_us().saturating_sub(self.callback_start_us);
        self.cpu_us = self.cpu_us.saturating_add(spent);
    }

    fn request_headers<H: Host>(&mut self, host: &mut H, end_of_stream: bool) -> Action {
        for name in host.request_header_names() {
            if lower(&name).starts_with(&self.config.header_prefix) {
                host.remove_request_header(&name);
            }
        }
        let method = host.request_header(":method").unwrap_or_default();
        // Compared as an upstream may read it: `/v1/chat/complet%69ons/` is the chat API.
        let path = request_path::canonical(&host.request_header(":path").unwrap_or_default());
        let api = if path == self.config.paths.chat_completions {
            Api::ChatCompletions
        } else if path == self.config.paths.responses {
            Api::Responses
        } else if path == self.config.paths.completions {
            Api::Completions
        } else {
            return Action::Continue;
        };
        if method != "POST" {
            return Action::Continue;
        }
        if end_of_stream {
            let e = ErrorResponse::bad_request("a JSON request body is required", "missing_body");
            return self.reply(host, &e, "invalid-request");
        }
        let limits = &self.config.limits;
        self.content_length = host
            .request_header("content-length")
            .and_then(|v| v.trim().parse::<u64>().ok());
        if let Some(cl) = self.content_length {
            if cl > limits.max_body_bytes {
                let e = ErrorResponse::too_large(limits.max_body_bytes);
                return self.reply(host, &e, "too-large");
            }
            self.small_body = cl <= limits.small_body_bytes;
        }
        self.request_id = host.request_header("x-request-id").unwrap_or_default();
        self.api = Some(api);
        let ratio = self.calibration.get().ratio();
        self.extractor = Some(Extractor::new(
            api,
            PromptTexts::new(&self.config.compression).with_token_ratio(ratio),
            limits.max_scan_text_bytes,
        ));
        self.started_us = host.now_us();
        self.phase = Phase::Scanning;
        Action::Pause
    }

    /// A body chunk arrived; `body_size` is the size of the whole buffered
    /// body so far (proxy-wasm semantics).
    pub fn on_request_body<H: Host>(
        &mut self,
        host: &mut H,
        body_size: usize,
        end_of_stream: bool,
    ) -> Action {
        self.enter(host);
        let action = self.body(host, Some(body_size), end_of_stream);
        self.leave(host);
        action
    }

    /// Request trailers arrived: the body is complete.
    pub fn on_request_trailers<H: Host>(&mut self, host: &mut H) -> Action {
        self.enter(host);
        let action = self.body(host, None, true);
        self.leave(host);
        action
    }

    fn body<H: Host>(
        &mut self,
        host: &mut H,
        body_size: Option<usize>,
        end_of_stream: bool,
    ) -> Action {
        match self.phase {
            Phase::Bypass | Phase::Forwarded => return Action::Continue,
            Phase::Replied => return Action::Pause,
            Phase::Scanning => {}
        }
        let max = self.config.limits.max_body_bytes;
        match body_size {
            Some(n) if n as u64 > max => {
                return self.reply(host, &ErrorResponse::too_large(max), "too-large");
            }
            Some(n) if n > self.received => {
                self.received = n;
                self.last_data_at_us = Some(self.callback_start_us);
            }
            Some(_) => {}
            None => self.trailers = true,
        }
        self.received_end |= end_of_stream;
        if self.small_body && !self.received_end {
            return Action::Pause;
        }
        self.step(host)
    }

    /// Scans the next buffered bytes (at most `limits.max_scan_bytes_per_callback` of
    /// them), dispatches `Classify` once its input is known, and applies a verdict once
    /// possible. Returns `Continue` when the request may go on.
    fn step<H: Host>(&mut self, host: &mut H) -> Action {
        let max = self.config.limits.max_body_bytes;
        let all = if self.trailers {
            // Trailers do not report the body's size: read up to one byte past the limit.
            usize::try_from(max)
                .unwrap_or(usize::MAX)
                .saturating_add(1)
                .saturating_sub(self.scanned)
        } else {
            self.received.saturating_sub(self.scanned)
        };
        let want = match self.config.limits.max_scan_bytes_per_callback {
            0 => all,
            bound => all.min(bound),
        };
        let chunk = if want > 0 {
            host.request_body(self.scanned, want).unwrap_or_default()
        } else {
            Vec::new()
        };
        // Fewer bytes than asked for: the host has no more buffered.
        self.backlog = want < all && chunk.len() == want;
        if (self.scanned + chunk.len()) as u64 > max {
            return self.reply(host, &ErrorResponse::too_large(max), "too-large");
        }
        self.end_of_stream = self.received_end && !self.backlog;
        if let Err(e) = self.scan(host, &chunk) {
            return self.reply(host, &e, "invalid-request");
        }
        self.maybe_dispatch(host);
        self.progress(host, true)
    }

    /// Continues a backlog left by a body callback that reached
    /// `limits.max_scan_bytes_per_callback`: one more bounded step. The host calls this
    /// from outside the stream's own callbacks (proxy-wasm: the root context's tick, with
    /// this stream as the effective context) while [`Self::has_backlog`] holds, and
    /// resumes nothing itself: when the step completes the request, the filter calls
    /// [`Host::resume_request`].
    pub fn on_backlog<H: Host>(&mut self, host: &mut H) {
        if !self.has_backlog() {
            return;
        }
        self.enter(host);
        if self.step(host) == Action::Continue {
            host.resume_request();
        }
        self.leave(host);
    }

    /// True while buffered body bytes wait to be scanned (see [`Self::on_backlog`]).
    pub fn has_backlog(&self) -> bool {
        self.phase == Phase::Scanning && self.backlog
    }

    /// Token of the `Classify` call in flight, if any.
    pub fn call_in_flight(&self) -> Option<u32> {
        match self.call {
            Call::InFlight { token, .. } => Some(token),
            _ => None,
        }
    }

    fn scan<H: Host>(&mut self, host: &H, chunk: &[u8]) -> Result<(), ErrorResponse> {
        let Some(extractor) = self.extractor.as_mut() else {
            return Ok(());
        };
        let t0 = host.now_us();
        let mut result = self.scanner.feed(chunk, extractor);
        self.scanned += chunk.len();
        if result.is_ok() && self.end_of_stream {
            result = self.scanner.finish(extractor);
            if result.is_ok() {
                result = extractor.check_complete().map_err(FeedError::Sink);
            }
        }
        self.scan_us += host.now_us().saturating_sub(t0);
        result.map_err(|e| match e {
            FeedError::Syntax(s) if s.kind == ScanErrorKind::Empty => {
                ErrorResponse::bad_request("a JSON request body is required", "missing_body")
            }
            FeedError::Syntax(s) => {
                let code = if matches!(s.kind, ScanErrorKind::TooDeep(_)) {
                    "nesting_too_deep"
                } else {
                    "invalid_json"
                };
                ErrorResponse::bad_request(format!("request body is not valid JSON: {s}"), code)
            }
            FeedError::Sink(ExtractError::NotAnObject) => {
                ErrorResponse::bad_request("request body must be a JSON object", "invalid_request")
            }
            FeedError::Sink(e @ ExtractError::DuplicateKey(_)) => {
                ErrorResponse::bad_request(format!("invalid request body: {e}"), "invalid_request")
            }
            FeedError::Sink(e @ ExtractError::WrongType { .. }) => {
                ErrorResponse::bad_request(format!("invalid request body: {e}"), "invalid_type")
            }
            FeedError::Sink(e @ ExtractError::Missing(_)) => {
                ErrorResponse::bad_request(format!("invalid request body: {e}"), "invalid_request")
            }
        })
    }

    fn facts_model(&self) -> Option<String> {
        match self.extractor.as_ref()?.extracted().model.as_ref()? {
            ModelValue::String { name, .. } => name.clone(),
            ModelValue::Other => None,
        }
    }

    fn maybe_dispatch<H: Host>(&mut self, host: &mut H) {
        if self.call != Call::NotYet || self.verdict.is_some() {
            return;
        }
        let Some(extractor) = self.extractor.as_mut() else {
            return;
        };
        if !extractor.ready(self.end_of_stream) {
            return;
        }
        let requested = match extractor.extracted().model.as_ref() {
            Some(ModelValue::String { name, .. }) => name.clone(),
            _ => None,
        };
        let auto = requested.as_deref().is_some_and(|m| self.config.is_auto(m));
        let mut facts = RequestFacts {
            requested_model: requested.as_deref(),
            auto,
            jailbreak_cue: false,
            risk: RiskFlags::empty(),
            text_risk: TextRisk::default(),
            pattern_pii: &[],
        };
        let signals = policy::signals_needed(&self.config, auto);
        let t0 = host.now_us();
        // The builders hold the whole prompt: they are freed when this returns, after the
        // dispatch, not before it.
        let (texts, extracted) = extractor.texts_and_extracted();
        let mut builder = texts.take_prompt(&extracted.prompt_segments);
        let count = builder.segment_count();
        // Pin the final segment (typically the question after a pasted
        // document) when the turn has several; a single segment stays
        // compressible.
        let pinned: Vec<usize> = if count > 1 {
            vec![count - 1]
        } else {
            Vec::new()
        };
        // Under `on_cue` the PII model reads only the sentences with a cue, and the
        // neighbours of record lines (`pii_sentences`), so a long prompt with one address in it costs a
        // pass over a few sentences, not over the whole budget. Where compression kept no
        // such sentence (a long document whose cue sentences lost their place to
        // jailbreak cues), the model has nothing to read: the daemon runs its patterns,
        // over the dropped sentences too (`pattern_text`).
        let pii_cues = match self.config.pii.model_pass {
            PiiModelPass::OnCue => self.config.pii_model_cues(),
            PiiModelPass::Always => RiskFlags::empty(),
        };
        builder.set_pii_cues(pii_cues);
        let compressed = builder.compress_to_budget(&pinned);
        // Earlier turns and tool output go to the same budget, their risk-flagged sentences
        // first, so that the daemon's cost stays bounded whatever the history's length (a
        // long history must not push the call past its deadline and into the fail-open
        // route).
        let mut scan_builder = texts.take_scan();
        let scan = scan_builder.as_mut().map(|b| {
            b.set_pii_cues(pii_cues);
            b.compress_to_budget(&[])
        });
        let risk = compressed
            .risk
            .union(scan.as_ref().map_or(RiskFlags::empty(), |c| c.risk));
        self.jailbreak_cue = risk.intersects(SCORED_ALONE);
        facts.jailbreak_cue = self.jailbreak_cue;
        self.risk = risk;
        facts.risk = risk;
        self.text_risk = text_risk(&compressed, scan.as_ref());
        facts.text_risk = self.text_risk;
        let pattern_pii = pattern_types(risk);
        self.pattern_pii = pattern_pii.clone();
        facts.pattern_pii = &pattern_pii;
        self.compress_us = host.now_us().saturating_sub(t0);
        self.sent_tokens_raw = compressed.kept_tokens_raw;
        let scan_reduction = scan.as_ref().map(reduction);
        let (scan_text, scan_flagged, scan_pii, scan_pattern_text) = scan
            .map(|c| (c.text, c.flagged_sentences, c.pii_sentences, c.pattern_text))
            .unwrap_or_default();
        let pii_patterns_only = self.config.pii.model_pass == PiiModelPass::OnCue
            && compressed.pii_sentences.is_empty()
            && scan_pii.is_empty();
        let request = classify_request(ClassifyParts {
            request_id: self.request_id.clone(),
            signals,
            prompt: compressed,
            scan_text,
            scan_flagged,
            scan_pii,
            scan_pattern_text,
            scan_reduction,
            pii_patterns_only,
        });
        let Some(mut request) = request else {
            self.call = Call::Done;
            self.verdict = Some(policy::without_classification(&self.config, facts, None));
            return;
        };
        let message = request.encode_to_vec();
        if self.config.may_mask() {
            // Kept (moved back out of the request, not copied) to read the values of the
            // entities the reply names.
            let text = |b: &mut Vec<u8>| String::from_utf8(std::mem::take(b)).unwrap_or_default();
            self.sent_text = text(&mut request.text);
            self.sent_scan_text = text(&mut request.scan_text);
            self.sent_pattern_text = text(&mut request.pattern_text);
        }
        let timeout = Duration::from_millis(self.config.daemon.timeout_ms);
        match host.dispatch_classify(&self.config.daemon.cluster, &message, timeout) {
            Ok(token) => {
                let now = host.now_us();
                self.dispatch_at_us = Some(now);
                self.call = Call::InFlight {
                    token,
                    since_us: now,
                }
            }
            Err(e) => {
                log::warn!(
                    "semroute: cannot dispatch Classify to {}: {e}",
                    self.config.daemon.cluster
                );
                self.call = Call::Done;
                self.verdict = Some(policy::without_classification(
                    &self.config,
                    facts,
                    Some(FallbackReason::DispatchFailed),
                ));
            }
        }
    }

    /// The gRPC call `token` finished with `status_code` (0 = OK) and a reply
    /// of `response_size` bytes.
    pub fn on_grpc_response<H: Host>(
        &mut self,
        host: &mut H,
        token: u32,
        status_code: u32,
        response_size: usize,
    ) {
        self.enter(host);
        self.grpc_response(host, token, status_code, response_size);
        self.leave(host);
    }

    fn grpc_response<H: Host>(
        &mut self,
        host: &mut H,
        token: u32,
        status_code: u32,
        response_size: usize,
    ) {
        let Call::InFlight {
            token: expected,
            since_us,
        } = self.call
        else {
            return;
        };
        if expected != token || self.phase != Phase::Scanning {
            return;
        }
        self.call = Call::Done;
        self.daemon_us = Some(host.now_us().saturating_sub(since_us));
        let requested = self.facts_model();
        let auto = requested.as_deref().is_some_and(|m| self.config.is_auto(m));
        let facts = RequestFacts {
            requested_model: requested.as_deref(),
            auto,
            jailbreak_cue: self.jailbreak_cue,
            risk: self.risk,
            text_risk: self.text_risk,
            pattern_pii: &self.pattern_pii,
        };
        let verdict = if status_code != 0 {
            // Envoy reports its own call timeout as UNAVAILABLE (the 504 of
            // its router maps to gRPC 14), naming it in the status message: a
            // failure so named, or at the deadline, is a timeout whatever the
            // status says.
            let deadline_us = self.config.daemon.timeout_ms.saturating_mul(1000);
            let timed_out = host
                .grpc_status_message()
                .is_some_and(|m| m.contains("response_timeout"))
                || self.daemon_us.unwrap_or(0).saturating_mul(20) >= deadline_us.saturating_mul(19);
            log::warn!(
                "semroute: Classify failed with gRPC status {status_code} (timed out: {timed_out})"
            );
            policy::after_failed_call(&self.config, facts, status_code, timed_out)
        } else {
            let body = host.grpc_response_body(response_size).unwrap_or_default();
            match ClassifyResponse::decode(body.as_slice()) {
                Ok(reply) => {
                    self.daemon_timings = reply.timings;
                    let mut c = self.calibration.get();
                    c.observe(self.sent_tokens_raw, reply.input_tokens);
                    self.calibration.set(c);
                    let verdict = policy::decide(&self.config, facts, &reply);
                    if let (Verdict::Route(route), Some(pii)) = (&verdict, &reply.pii) {
                        self.mask = MaskTable::from_entities(
                            &pii.entities,
                            [
                                &self.sent_text,
                                &self.sent_scan_text,
                                &self.sent_pattern_text,
                            ],
                            &route.mask,
                            self.config.pii.min_score,
                        );
                    }
                    verdict
                }
                Err(e) => {
                    log::warn!("semroute: undecodable Classify reply: {e}");
                    policy::without_classification(
                        &self.config,
                        facts,
                        Some(FallbackReason::BadReply),
                    )
                }
            }
        };
        self.sent_text = String::new();
        self.sent_scan_text = String::new();
        self.sent_pattern_text = String::new();
        self.verdict = Some(verdict);
        if self.progress(host, false) == Action::Continue {
            host.resume_request();
        }
    }

    /// Applies the verdict once possible. Returns `Continue` when the request
    /// may go on.
    fn progress<H: Host>(&mut self, host: &mut H, _in_body_callback: bool) -> Action {
        match self.verdict.take() {
            None => Action::Pause,
            Some(Verdict::Reject { error, decision }) => self.reply(host, &error, decision),
            Some(Verdict::Route(route)) => {
                if !self.end_of_stream {
                    self.verdict = Some(Verdict::Route(route));
                    return Action::Pause;
                }
                if !self.apply(host, route) {
                    return Action::Pause;
                }
                self.phase = Phase::Forwarded;
                Action::Continue
            }
        }
    }

    /// Applies a route to the request; false when a local reply was sent instead.
    fn apply<H: Host>(&mut self, host: &mut H, mut route: Route) -> bool {
        let cfg = Rc::clone(&self.config);
        // Values from the body or the daemon become header values only when
        // they are safe as such (no CR/LF or other control bytes).
        if route.model.as_deref().is_some_and(|m| !header_value_ok(m)) {
            log::info!(
                "semroute: requested model is not a valid header value; using the default route"
            );
            route.model = None;
        }
        if route
            .category
            .as_ref()
            .is_some_and(|(l, _)| !header_value_ok(l))
        {
            route.category = None;
        }
        let model = route.model.clone().filter(|_| route.rewrite_body);
        if !self.mask.is_empty() || !route.edits.is_empty() {
            match self.rewrite_whole_body(host, model.as_deref(), &route.edits) {
                Ok(masked) => {
                    if masked > 0 {
                        host.set_request_header(&cfg.header("pii-masked"), &masked.to_string());
                    }
                    if self.restore.is_some() {
                        // The answer must come as text for its placeholders to be restored;
                        // a compressor filter after this one may still encode it for the
                        // client.
                        host.set_request_header("accept-encoding", "identity");
                    }
                }
                Err(e) if !self.mask.is_empty() => {
                    // The body cannot go upstream with the values in it.
                    log::warn!("semroute: cannot mask the body: {e}");
                    self.reply(host, &ErrorResponse::mask_failed(), "pii-mask-failed");
                    return false;
                }
                Err(e) => {
                    log::warn!("semroute: cannot apply the decision's request edits: {e}");
                    route.fallback = route.fallback.or(Some(FallbackReason::Error));
                }
            }
        } else if let Some(model) = model.as_deref() {
            if let Err(e) = self.rewrite_model(host, model) {
                log::warn!("semroute: cannot rewrite the body's model: {e}");
                route.fallback = route.fallback.or(Some(FallbackReason::Error));
            }
        }
        if let Some(model) = &route.model {
            host.set_request_header(&cfg.header("model"), model);
        }
        host.set_request_header(&cfg.header("decision"), &route.decision);
        if let Some((label, confidence)) = &route.category {
            host.set_request_header(&cfg.header("category"), label);
            host.set_request_header(&cfg.header("confidence"), &format!("{confidence:.3}"));
        }
        if let Some(reason) = route.fallback {
            host.set_request_header(&cfg.header("fallback"), reason.as_str());
        }
        if let Some(score) = route.jailbreak_mark {
            host.set_request_header(&cfg.header("jailbreak"), &format!("{score:.7}"));
        }
        host.set_request_header(&cfg.header("timing"), &self.timing(host.now_us()));
        self.applied = Some(route);
        true
    }

    /// `x-semroute-timing`: Server-Timing style durations in milliseconds.
    /// `inference` is the daemon's time for the call, `encoder` and `pii` its runs of
    /// each model (0 for a model that did not run); `tail` is the time from the start of
    /// the body callback that delivered the last body bytes to the `Classify` dispatch
    /// (0 when the call was dispatched before those bytes arrived; absent without a
    /// call); `filter` is the time spent in this stream's callbacks up to now.
    fn timing(&self, now_us: u64) -> String {
        let mut parts = vec![
            format!("scan;dur={}", ms(self.scan_us)),
            format!("compress;dur={}", ms(self.compress_us)),
        ];
        if let Some(d) = self.daemon_us {
            parts.push(format!("daemon;dur={}", ms(d)));
        }
        if let Some(t) = &self.daemon_timings {
            parts.push(format!("inference;dur={}", ms(t.total_us)));
            parts.push(format!("encoder;dur={}", ms(t.encoder_us)));
            parts.push(format!("pii;dur={}", ms(t.pii_us)));
        }
        if let Some(dispatched) = self.dispatch_at_us {
            let tail = self
                .last_data_at_us
                .map_or(0, |last| dispatched.saturating_sub(last));
            parts.push(format!("tail;dur={}", ms(tail)));
        }
        let in_callback = now_us.saturating_sub(self.callback_start_us);
        parts.push(format!(
            "filter;dur={}",
            ms(self.cpu_us.saturating_add(in_callback))
        ));
        parts.push(format!(
            "total;dur={}",
            ms(now_us.saturating_sub(self.started_us))
        ));
        parts.join(", ")
    }

    /// Rewrites the whole body ([`body_rewrite::whole_body`]) and sets up the restore of
    /// the answer. Returns the number of values replaced.
    fn rewrite_whole_body<H: Host>(
        &mut self,
        host: &mut H,
        model: Option<&str>,
        request_edits: &RequestEdits,
    ) -> Result<u32, RewriteError> {
        let state = self.body_state();
        let per_kind =
            body_rewrite::whole_body(host, &state, model, &mut self.mask, request_edits)?;
        for (kind, n) in &per_kind {
            host.increment_counter(&format!("{MASKED_COUNTER_PREFIX}{kind}"), u64::from(*n));
        }
        let mask = std::mem::take(&mut self.mask);
        if self.config.pii.restore && !per_kind.is_empty() {
            let pairs = mask
                .entries()
                .iter()
                .map(|e| (e.placeholder.clone(), e.value.clone()))
                .collect();
            let limit = usize::try_from(self.config.pii.max_restore_bytes).unwrap_or(usize::MAX);
            self.restore = Some(ResponseRestore::new(Restorer::new(pairs), limit));
        }
        Ok(per_kind.iter().map(|(_, n)| n).sum())
    }

    fn rewrite_model<H: Host>(&mut self, host: &mut H, model: &str) -> Result<(), RewriteError> {
        body_rewrite::model_only(host, &self.body_state(), model)
    }

    /// What [`body_rewrite`] needs to know of the buffered body.
    fn body_state(&self) -> BodyState {
        BodyState {
            scanned: self.scanned,
            model: self
                .extractor
                .as_ref()
                .and_then(|e| e.extracted().model.clone()),
            api: self.api.unwrap_or(Api::ChatCompletions),
            content_length: self.content_length.is_some(),
        }
    }

    /// Response headers arrived: tell the client where the request went.
    pub fn on_response_headers<H: Host>(&mut self, host: &mut H) -> Action {
        if self.phase != Phase::Forwarded {
            return Action::Continue;
        }
        if let Some(route) = &self.applied {
            if let Some(model) = &route.model {
                host.set_response_header(&self.config.header("model"), model);
            }
            host.set_response_header(&self.config.header("decision"), &route.decision);
            if let Some(reason) = route.fallback {
                host.set_response_header(&self.config.header("fallback"), reason.as_str());
            }
        }
        if let Some(r) = self.restore.as_mut() {
            r.on_headers(host);
        }
        Action::Continue
    }

    /// A response body chunk arrived (`body_size`: the buffered response body's size):
    /// placeholders of masked values are restored.
    pub fn on_response_body<H: Host>(
        &mut self,
        host: &mut H,
        body_size: usize,
        end_of_stream: bool,
    ) -> Action {
        match self.restore.as_mut() {
            Some(r) => {
                let action = r.on_body(host, body_size, end_of_stream);
                if end_of_stream {
                    // The values live no longer than the stream needs them.
                    self.restore = None;
                }
                action
            }
            None => Action::Continue,
        }
    }
}
