//! Helpers of the filter's request-flow tests (`flow_*.rs`): the filter under a test
//! configuration, a daemon reply, and bodies delivered in chunks as Envoy does.

use std::cell::Cell;
use std::rc::Rc;

use prost::Message;
use semroute_filter::compression::TokenCalibration;
use semroute_filter::config::FilterConfig;
use semroute_filter::filter::{Action, HttpFilter};
use semroute_filter::testing::{classify_reply, MockHost};
use semroute_proto::v1::{ClassifyRequest, ClassifyResponse};
use serde_json::{json, Value};

pub const CONFIG: &str = r#"{
  "default_model": "general-model",
  "daemon": {"cluster": "semroute_daemon", "timeout_ms": 250},
  "decisions": [
    {"name": "math", "model": "math-model", "when": {"categories": ["math"], "min_confidence": 0.3}}
  ],
  "pii": {"allow": ["PERSON"], "action": "route", "route_model": "local-pii-model"},
  "limits": {"max_body_bytes": 4096, "small_body_bytes": 0}
}"#;

pub fn filter(extra: &str) -> HttpFilter {
    let mut v: Value = serde_json::from_str(CONFIG).unwrap();
    let e: Value = serde_json::from_str(if extra.is_empty() { "{}" } else { extra }).unwrap();
    for (k, x) in e.as_object().unwrap() {
        v[k] = x.clone();
    }
    let c = FilterConfig::from_json(v.to_string().as_bytes()).unwrap();
    HttpFilter::new(Rc::new(c), Rc::new(Cell::new(TokenCalibration::default())))
}

pub fn reply(label: &str, jailbreak: f32, pii: &[&str]) -> Vec<u8> {
    ClassifyResponse {
        input_tokens: 12,
        ..classify_reply(label, 0.9, jailbreak, pii, 0.99)
    }
    .encode_to_vec()
}

/// Calls `on_request_body` with the whole buffered size.
pub fn body_now(f: &mut HttpFilter, h: &mut MockHost, end_of_stream: bool) -> Action {
    let n = h.body.len();
    f.on_request_body(h, n, end_of_stream)
}

/// Delivers `body` in chunks like Envoy: the buffer grows, `body_size` is
/// the whole buffered size. Returns the action of the last chunk.
pub fn send_body(f: &mut HttpFilter, h: &mut MockHost, body: &[u8], chunk: usize) -> Action {
    let mut last = Action::Pause;
    let mut off = 0;
    while off < body.len() {
        let end = (off + chunk).min(body.len());
        h.body.extend_from_slice(&body[off..end]);
        off = end;
        let n = h.body_len();
        last = f.on_request_body(h, n, off == body.len());
        if h.sent.is_some() {
            break;
        }
    }
    last
}

pub const MATH: &str = r#"{"messages":[{"role":"system","content":"be brief"},{"role":"user","content":"What is the derivative of x^3 + 2x?"}],"model":"auto","stream":false}"#;

/// Runs one request through the filter with the body cut at `splits`;
/// returns the Classify request sent (if any) and the final body.
pub fn run_split(
    path: &str,
    body: &[u8],
    splits: &[usize],
) -> (Option<ClassifyRequest>, Vec<u8>, Option<u16>) {
    run_split_bounded(path, body, splits, 0)
}

/// [`run_split`] with `limits.max_scan_bytes_per_callback` = `bound`: backlogs are
/// continued (as the root context's tick does) until none is left.
pub fn run_split_bounded(
    path: &str,
    body: &[u8],
    splits: &[usize],
    bound: usize,
) -> (Option<ClassifyRequest>, Vec<u8>, Option<u16>) {
    let mut f = filter(&format!(
        r#"{{"limits": {{"small_body_bytes": 0, "max_body_bytes": 1048576, "max_scan_bytes_per_callback": {bound}}}}}"#
    ));
    let mut h = MockHost::new("POST", path, &[]);
    f.on_request_headers(&mut h, false);
    let cuts = super::cut_points(splits, body.len());
    let mut prev = 0;
    for c in cuts {
        h.body.extend_from_slice(&body[prev..c]);
        prev = c;
        body_now(&mut f, &mut h, c == body.len());
        while f.has_backlog() && h.sent.is_none() {
            f.on_backlog(&mut h);
        }
        if h.sent.is_some() {
            break;
        }
    }
    let call = h.calls.first().map(|c| c.1.clone());
    if call.is_some() && h.sent.is_none() {
        h.reply = Some(reply("math", 0.0, &[]));
        f.on_grpc_response(&mut h, 1, 0, 10);
    }
    (call, h.body.clone(), h.sent_status())
}

/// A body of about `kib` KiB: a long user turn of prose, then the question.
pub fn long_turn(kib: usize) -> String {
    let prose = "The committee reviewed the quarterly figures and noted steady growth. ";
    let text = prose.repeat(kib * 1024 / prose.len()) + "What is the derivative of x^3 + 2x?";
    json!({"model": "auto", "messages": [{"role": "user", "content": text}]}).to_string()
}

/// A chat request under config `cfg` whose whole `body` is buffered before the first
/// body callback (as when Envoy hands over a large read at once).
pub fn buffered(cfg: &str, body: &str) -> (HttpFilter, MockHost) {
    let mut f = filter(cfg);
    let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
    f.on_request_headers(&mut h, false);
    h.body = body.as_bytes().to_vec();
    (f, h)
}

/// Continues `f`'s backlog as the root context's tick does, until none is left.
pub fn drain_backlog(f: &mut HttpFilter, h: &mut MockHost) {
    while f.has_backlog() {
        f.on_backlog(h);
    }
}
