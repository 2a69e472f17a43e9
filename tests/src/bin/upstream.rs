//! `semroute-upstream`: a local OpenAI-compatible server standing in for one
//! model backend.
//!
//! `semroute-upstream --model NAME --port P` answers
//! - `POST /v1/chat/completions` (JSON, or SSE with `stream: true`),
//! - `POST /v1/responses` (JSON, or SSE events with `stream: true`),
//! - `POST /v1/completions` (JSON; the legacy text completions API),
//! - `GET /v1/models`, `GET /health`, and `GET /stats` (`{"requests": N}`:
//!   completions and responses answered so far),
//! - `GET /last-request`: the last body received by the three `POST` paths, byte for
//!   byte (404 before the first), so a user can see what left the proxy.
//!
//! The answer's text is a summary of the request (which model served it, the `model`
//! the body carried, the `x-semroute-*` headers that arrived), then the last user
//! message echoed (`You said: ...`, at most 64 KiB), so that a user sees what came back
//! through the proxy. With `stream: true` the summary goes out four words per event, each
//! event after 5 ms (or the request header `x-upstream-event-delay-ms`, at most 10 s),
//! then the echo in deltas of 3 characters (or `x-upstream-delta-chars`, 1 to 64) without
//! further delay, at most 4 KiB of it.
//!
//! Every answer also carries a `semroute` JSON field (`served_by`, `received_model`, `headers`,
//! `body_bytes`, `content_length`, and `received_body` for bodies up to
//! 256 KiB), so users and tests see where a request went and what reached
//! the upstream. A body that is not valid JSON gets 400.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Largest request body accepted, bytes.
const MAX_BODY_BYTES: usize = 256 * 1024 * 1024;

use anyhow::Context;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Parser;
use futures_util::stream::{self, StreamExt};
use serde_json::{json, Value};

/// Largest received body echoed back verbatim, bytes.
const ECHO_LIMIT: usize = 256 * 1024;
/// Longest last user message echoed in an answer, bytes.
const ECHO_TEXT_LIMIT: usize = 64 * 1024;
/// Longest last user message echoed in a streamed answer, bytes.
const STREAM_ECHO_LIMIT: usize = 4 * 1024;

#[derive(Parser, Debug)]
#[command(
    name = "semroute-upstream",
    about = "Local OpenAI-compatible upstream that reports what it received"
)]
struct Args {
    /// Name of the model this server stands in for.
    #[arg(long)]
    model: String,
    /// TCP port to listen on.
    #[arg(long)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
}

#[derive(Clone)]
struct AppState {
    model: String,
    requests: Arc<AtomicU64>,
    /// The last body received by a `POST` path.
    last_request: Arc<Mutex<Option<Bytes>>>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn error(status: StatusCode, message: &str, code: &str) -> Response {
    let body =
        json!({"error": {"message": message, "type": "invalid_request_error", "code": code}});
    (status, Json(body)).into_response()
}

/// What arrived, echoed in every answer.
struct Received {
    body: Value,
    report: Value,
    summary: String,
    /// The last user message (chat `messages`, Responses `input`, legacy `prompt`).
    echo: Option<String>,
}

/// The text of a message `content` (a string, or the `text` of its parts).
fn content_text(content: &Value) -> Option<String> {
    match content {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join(""),
        ),
        _ => None,
    }
}

/// The API a request came in on: which field holds its prompt.
#[derive(Debug, Clone, Copy)]
enum Api {
    /// `/v1/chat/completions`: `messages`.
    Chat,
    /// `/v1/responses`: `input`.
    Responses,
    /// `/v1/completions`: `prompt`.
    Completions,
}

/// The last user message of a body on `api`, read from that API's field alone, as a real
/// server reads it (a `messages` field sent to `/v1/responses` is no prompt there).
fn last_user_message(body: &Value, api: Api) -> Option<String> {
    let last_user = |items: &Vec<Value>| {
        items
            .iter()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))
            .and_then(|m| m.get("content"))
            .and_then(content_text)
    };
    match (
        api,
        body.get(match api {
            Api::Chat => "messages",
            Api::Responses => "input",
            Api::Completions => "prompt",
        })?,
    ) {
        (Api::Chat, Value::Array(messages)) => last_user(messages),
        (Api::Responses, Value::String(s)) => Some(s.clone()),
        (Api::Responses, Value::Array(items)) => last_user(items),
        (Api::Completions, Value::String(s)) => Some(s.clone()),
        (Api::Completions, Value::Array(p)) => p.last()?.as_str().map(str::to_string),
        _ => None,
    }
}

/// At most `limit` bytes of `text`, cut at a character boundary.
fn clip(text: &str, limit: usize) -> &str {
    let mut end = text.len().min(limit);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

fn inspect(
    state: &AppState,
    headers: &HeaderMap,
    raw: &Bytes,
    api: Api,
) -> Result<Received, Box<Response>> {
    state.requests.fetch_add(1, Ordering::Relaxed);
    if let Ok(mut last) = state.last_request.lock() {
        *last = Some(raw.clone());
    }
    let body: Value = serde_json::from_slice(raw).map_err(|e| {
        Box::new(error(
            StatusCode::BAD_REQUEST,
            &format!("upstream received invalid JSON: {e}"),
            "invalid_json",
        ))
    })?;
    let mut semroute_headers = BTreeMap::new();
    for (name, value) in headers {
        if name.as_str().starts_with("x-semroute-") {
            semroute_headers.insert(
                name.as_str().to_string(),
                value.to_str().unwrap_or("<non-ascii>").to_string(),
            );
        }
    }
    let received_model = body.get("model").cloned().unwrap_or(Value::Null);
    let content_length = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut report = json!({
        "served_by": state.model,
        "received_model": received_model,
        "headers": semroute_headers,
        "body_bytes": raw.len(),
        "content_length": content_length,
    });
    if raw.len() <= ECHO_LIMIT {
        if let (Some(obj), Ok(text)) = (report.as_object_mut(), std::str::from_utf8(raw)) {
            obj.insert("received_body".into(), Value::String(text.to_string()));
        }
    }
    let header_text = semroute_headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join("; ");
    let summary = format!(
        "[served by {}] request model: {}; semroute headers: {}",
        state.model,
        received_model,
        if header_text.is_empty() {
            "none".to_string()
        } else {
            header_text
        }
    );
    let echo = last_user_message(&body, api);
    Ok(Received {
        body,
        report,
        summary,
        echo,
    })
}

impl Received {
    /// The answer's whole text: the summary, then the echo.
    fn text(&self) -> String {
        match &self.echo {
            Some(e) => format!("{}\n\nYou said: {}", self.summary, clip(e, ECHO_TEXT_LIMIT)),
            None => self.summary.clone(),
        }
    }

    /// The streamed text's deltas with the pause before each: the summary four words
    /// per event after `delay`, then the echo in `chars`-character deltas at once.
    fn deltas(&self, headers: &HeaderMap) -> Vec<(String, Duration)> {
        let delay = event_delay(headers);
        let mut out: Vec<(String, Duration)> = pieces(&self.summary)
            .into_iter()
            .map(|p| (p, delay))
            .collect();
        if let Some(e) = &self.echo {
            let chars = headers
                .get("x-upstream-delta-chars")
                .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
                .map_or(3, |n| n.clamp(1, 64));
            out.push(("\n\nYou said: ".to_string(), Duration::ZERO));
            let echo: Vec<char> = clip(e, STREAM_ECHO_LIMIT).chars().collect();
            for piece in echo.chunks(chars) {
                out.push((piece.iter().collect(), Duration::ZERO));
            }
        }
        out
    }
}

/// Pause before each SSE event: 5 ms, or the request's `x-upstream-event-delay-ms` (at
/// most 10 s), so that a test can keep a stream open long enough to break it midway.
fn event_delay(headers: &HeaderMap) -> Duration {
    let ms = headers
        .get("x-upstream-event-delay-ms")
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .map_or(5, |ms| ms.min(10_000));
    Duration::from_millis(ms)
}

/// An SSE answer: each event sent after its pause.
fn sse(events: Vec<(String, Duration)>) -> Response {
    let s = stream::iter(events).then(move |(e, delay)| async move {
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        Ok::<_, Infallible>(Bytes::from(e))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(s))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Splits text into a few pieces for streaming.
fn pieces(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_inclusive(' ').collect();
    words.chunks(4).map(|c| c.concat()).collect()
}

async fn chat(State(state): State<AppState>, headers: HeaderMap, raw: Bytes) -> Response {
    let r = match inspect(&state, &headers, &raw, Api::Chat) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    let id = format!("chatcmpl-{}-{}", state.model, now());
    if r.body.get("stream").and_then(Value::as_bool) == Some(true) {
        let delay = event_delay(&headers);
        let mut events = Vec::new();
        for (i, (piece, pause)) in r.deltas(&headers).into_iter().enumerate() {
            let delta = if i == 0 {
                json!({"role": "assistant", "content": piece})
            } else {
                json!({"content": piece})
            };
            let mut chunk = json!({
                "id": id, "object": "chat.completion.chunk", "created": now(), "model": state.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": null}],
            });
            if i == 0 {
                chunk["semroute"] = r.report.clone();
            }
            events.push((format!("data: {chunk}\n\n"), pause));
        }
        let last = json!({
            "id": id, "object": "chat.completion.chunk", "created": now(), "model": state.model,
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        });
        events.push((format!("data: {last}\n\n"), delay));
        events.push(("data: [DONE]\n\n".to_string(), Duration::ZERO));
        return sse(events);
    }
    let words = r.summary.split_whitespace().count();
    Json(json!({
        "id": id,
        "object": "chat.completion",
        "created": now(),
        "model": state.model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": r.text(), "refusal": null},
            "finish_reason": "stop",
        }],
        "usage": {"prompt_tokens": r.report["body_bytes"].as_u64().unwrap_or(0) / 4, "completion_tokens": words,
                  "total_tokens": r.report["body_bytes"].as_u64().unwrap_or(0) / 4 + words as u64},
        "semroute": r.report,
    }))
    .into_response()
}

async fn responses(State(state): State<AppState>, headers: HeaderMap, raw: Bytes) -> Response {
    let r = match inspect(&state, &headers, &raw, Api::Responses) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    let id = format!("resp_{}_{}", state.model, now());
    let message = json!({
        "type": "message", "id": format!("msg_{}", now()), "status": "completed", "role": "assistant",
        "content": [{"type": "output_text", "text": r.text(), "annotations": []}],
    });
    let full = json!({
        "id": id, "object": "response", "created_at": now(), "status": "completed", "model": state.model,
        "output": [message], "semroute": r.report,
    });
    if r.body.get("stream").and_then(Value::as_bool) == Some(true) {
        let delay = event_delay(&headers);
        let mut events = Vec::new();
        let created = json!({"type": "response.created", "response": {
            "id": id, "object": "response", "status": "in_progress", "model": state.model}});
        events.push((
            format!("event: response.created\ndata: {created}\n\n"),
            delay,
        ));
        for (piece, pause) in r.deltas(&headers) {
            let delta = json!({"type": "response.output_text.delta", "output_index": 0, "content_index": 0, "delta": piece});
            events.push((
                format!("event: response.output_text.delta\ndata: {delta}\n\n"),
                pause,
            ));
        }
        let done = json!({"type": "response.completed", "response": full});
        events.push((
            format!("event: response.completed\ndata: {done}\n\n"),
            delay,
        ));
        return sse(events);
    }
    Json(full).into_response()
}

async fn completions(State(state): State<AppState>, headers: HeaderMap, raw: Bytes) -> Response {
    let r = match inspect(&state, &headers, &raw, Api::Completions) {
        Ok(r) => r,
        Err(resp) => return *resp,
    };
    Json(json!({
        "id": format!("cmpl_{}_{}", state.model, now()), "object": "text_completion",
        "created": now(), "model": state.model,
        "choices": [{"index": 0, "text": r.text(), "finish_reason": "stop", "logprobs": null}],
        "semroute": r.report,
    }))
    .into_response()
}

async fn models(State(state): State<AppState>) -> Response {
    Json(json!({"object": "list", "data": [{"id": state.model, "object": "model", "created": 0, "owned_by": "semroute"}]}))
        .into_response()
}

async fn stats(State(state): State<AppState>) -> Response {
    Json(json!({"model": state.model, "requests": state.requests.load(Ordering::Relaxed)}))
        .into_response()
}

async fn last_request(State(state): State<AppState>) -> Response {
    let last = state.last_request.lock().ok().and_then(|l| l.clone());
    match last {
        Some(body) => ([(header::CONTENT_TYPE, "application/json")], body).into_response(),
        None => error(
            StatusCode::NOT_FOUND,
            "no request received yet",
            "not_found",
        ),
    }
}

async fn health() -> &'static str {
    "ok"
}

async fn not_found() -> Response {
    error(StatusCode::NOT_FOUND, "unknown path", "not_found")
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let state = AppState {
        model: args.model.clone(),
        requests: Arc::new(AtomicU64::new(0)),
        last_request: Arc::new(Mutex::new(None)),
    };
    let app = Router::new()
        .route("/v1/chat/completions", post(chat))
        .route("/v1/responses", post(responses))
        .route("/v1/completions", post(completions))
        .route("/v1/models", get(models))
        .route("/health", get(health))
        .route("/stats", get(stats))
        .route("/last-request", get(last_request))
        .fallback(not_found)
        // Bodies up to the largest `limits.max_body_bytes` the filter accepts (256 MiB), above
        // axum's 2 MiB default, so every body the router accepts reaches the model.
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state);
    let addr: SocketAddr = format!("{}:{}", args.host, args.port).parse()?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    eprintln!(
        "semroute-upstream: model {} listening on http://{addr}",
        args.model
    );
    axum::serve(listener, app).await?;
    Ok(())
}
