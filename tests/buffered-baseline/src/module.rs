//! The buffered design as a proxy-wasm module: the baseline of `router-bench`'s filter
//! table inside Envoy, measured in the same run as the streaming filter.
//!
//! Every body callback before `end_of_stream` returns `StopIterationAndBuffer`, so Envoy
//! buffers the whole body. At `end_of_stream` the module copies the body out of Envoy,
//! parses it with `serde_json::from_slice`, takes the last user message's text (string
//! content, or its text parts joined by blank lines) and compresses it with the same
//! [`PromptBuilder`] and budget as the filter, joins the earlier user turns as scan text (at
//! most `limits.max_scan_text_bytes`), encodes the `ClassifyRequest` and dispatches the same
//! gRPC `Classify` call to the daemon cluster. The request resumes when the reply comes. It
//! makes no routing decision: the request keeps its route, so what it adds over plain Envoy
//! is the cost of the buffered design alone (the same as `filter-bench`'s native baseline).
//!
//! It reads the filter's configuration (the same plugin configuration JSON) and reports
//! `x-semroute-timing` on the request it forwards, with the filter's meaning: `tail` is the
//! time from the start of the body callback that delivered the last body bytes to the
//! dispatch, `filter` the time spent in this stream's callbacks, `scan` the copy, parse and
//! extraction, `compress` the compression; all in ms from the host's clock.
//!
//! A body that is not a JSON object gets a 400 reply; a failed body read or dispatch is
//! logged and the request goes on unchanged. A benchmark tool, not a filter to deploy: it
//! uses the SDK's host calls, some of which abort the VM on an unexpected host status.

use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};

use crate::extract::{earlier_user_text, last_user_text};
use prost::Message;
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, LogLevel, MapType};
use semroute_filter::classify_request::{classify_request, ClassifyParts};
use semroute_filter::compression::PromptBuilder;
use semroute_filter::config::FilterConfig;
use semroute_filter::policy::signals_needed;
use semroute_proto::{CLASSIFIER_SERVICE, CLASSIFY_METHOD};
use serde_json::Value;

proxy_wasm::main! {{
    proxy_wasm::set_log_level(LogLevel::Info);
    proxy_wasm::set_root_context(|_| -> Box<dyn RootContext> { Box::new(BaselineRoot { config: None }) });
}}

/// Host time in µs since the Unix epoch (0 when the host cannot say).
fn now_us() -> u64 {
    hostcalls::get_current_time()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_micros() as u64)
}

fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

struct BaselineRoot {
    config: Option<Rc<FilterConfig>>,
}

impl Context for BaselineRoot {}

impl RootContext for BaselineRoot {
    fn on_configure(&mut self, _plugin_configuration_size: usize) -> bool {
        let bytes = match hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX) {
            Ok(Some(b)) => b,
            other => {
                log::error!("buffered baseline: no plugin configuration ({other:?})");
                return false;
            }
        };
        match FilterConfig::from_json(&bytes) {
            Ok(c) => {
                self.config = Some(Rc::new(c));
                true
            }
            Err(e) => {
                log::error!("buffered baseline: invalid configuration: {e}");
                false
            }
        }
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }

    fn create_http_context(&self, _context_id: u32) -> Option<Box<dyn HttpContext>> {
        let config = self.config.clone()?;
        Some(Box::new(BufferedStream {
            config,
            received: 0,
            last_data_at_us: 0,
            callbacks_us: 0,
            scan_us: 0,
            compress_us: 0,
            dispatched_at_us: None,
        }))
    }
}

/// One request: buffers its body, then does all the work at `end_of_stream`.
struct BufferedStream {
    config: Rc<FilterConfig>,
    /// Body bytes Envoy has buffered so far.
    received: usize,
    /// Start of the body callback that delivered the last new bytes, µs.
    last_data_at_us: u64,
    /// Time spent in this stream's callbacks, µs.
    callbacks_us: u64,
    scan_us: u64,
    compress_us: u64,
    dispatched_at_us: Option<u64>,
}

/// Why a body could not be classified.
enum Failure {
    /// The body is not a JSON object: 400.
    BadRequest(String),
    /// A host call failed: the request goes on unchanged.
    Host(String),
}

impl BufferedStream {
    /// Parses the buffered body, compresses and dispatches `Classify`; true when it did (the
    /// request then waits for its reply), false when there was nothing to classify.
    fn classify(&mut self) -> Result<bool, Failure> {
        let t0 = now_us();
        let body = hostcalls::get_buffer(BufferType::HttpRequestBody, 0, self.received)
            .map_err(|s| Failure::Host(format!("cannot read the body: {s:?}")))?
            .unwrap_or_default();
        let v: Value = serde_json::from_slice(&body)
            .map_err(|e| Failure::BadRequest(format!("request body is not valid JSON: {e}")))?;
        if !v.is_object() {
            return Err(Failure::BadRequest(
                "request body must be a JSON object".into(),
            ));
        }
        let text = last_user_text(&v);
        let scan_text = earlier_user_text(&v, self.config.limits.max_scan_text_bytes);
        let t1 = now_us();
        self.scan_us = t1.saturating_sub(t0);
        let mut builder = PromptBuilder::new(&self.config.compression);
        builder.push_str(&text);
        builder.end_segment();
        let compressed = builder.compress_to_budget(&[]);
        self.compress_us = now_us().saturating_sub(t1);
        let auto = v["model"].as_str().is_some_and(|m| self.config.is_auto(m));
        let Some(request) = classify_request(ClassifyParts {
            request_id: String::new(),
            signals: signals_needed(&self.config, auto),
            prompt: compressed,
            scan_text,
            scan_flagged: Vec::new(),
            scan_pii: Vec::new(),
            scan_pattern_text: String::new(),
            scan_reduction: None,
            pii_patterns_only: false,
        }) else {
            // Nothing to classify: the request goes on unchanged.
            return Ok(false);
        };
        hostcalls::dispatch_grpc_call(
            &self.config.daemon.cluster,
            CLASSIFIER_SERVICE,
            CLASSIFY_METHOD,
            Vec::new(),
            Some(&request.encode_to_vec()),
            Duration::from_millis(self.config.daemon.timeout_ms),
        )
        .map_err(|s| Failure::Host(format!("cannot dispatch Classify: {s:?}")))?;
        self.dispatched_at_us = Some(now_us());
        Ok(true)
    }

    fn timing(&self) -> String {
        let mut parts = vec![
            format!("scan;dur={}", ms(self.scan_us)),
            format!("compress;dur={}", ms(self.compress_us)),
        ];
        if let Some(d) = self.dispatched_at_us {
            parts.push(format!(
                "tail;dur={}",
                ms(d.saturating_sub(self.last_data_at_us))
            ));
        }
        parts.push(format!("filter;dur={}", ms(self.callbacks_us)));
        parts.join(", ")
    }
}

impl Context for BufferedStream {
    fn on_grpc_call_response(&mut self, _token_id: u32, _status_code: u32, _response_size: usize) {
        let t0 = now_us();
        // The reply is not read: the baseline measures the buffered design, not a decision.
        let _ = hostcalls::set_map_value(
            MapType::HttpRequestHeaders,
            "x-semroute-timing",
            Some(&self.timing()),
        );
        self.callbacks_us += now_us().saturating_sub(t0);
        if let Err(s) = hostcalls::resume_http_request() {
            log::warn!("buffered baseline: cannot resume the request: {s:?}");
        }
    }
}

impl HttpContext for BufferedStream {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        // Headers wait for the body, as with the filter: `x-semroute-timing` is added to
        // them once the reply comes.
        if end_of_stream {
            Action::Continue
        } else {
            Action::Pause
        }
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        let t0 = now_us();
        if body_size > self.received {
            self.received = body_size;
            self.last_data_at_us = t0;
        }
        if !end_of_stream {
            self.callbacks_us += now_us().saturating_sub(t0);
            return Action::Pause;
        }
        let action = match self.classify() {
            Ok(true) => Action::Pause,
            Ok(false) => Action::Continue,
            Err(Failure::BadRequest(message)) => {
                let body = serde_json::json!({"error": {
                    "message": message, "type": "invalid_request_error", "code": "invalid_json"}});
                let _ = hostcalls::send_http_response(
                    400,
                    vec![("content-type", "application/json")],
                    Some(body.to_string().as_bytes()),
                );
                Action::Pause
            }
            Err(Failure::Host(message)) => {
                log::warn!("buffered baseline: {message}");
                Action::Continue
            }
        };
        self.callbacks_us += now_us().saturating_sub(t0);
        action
    }
}
