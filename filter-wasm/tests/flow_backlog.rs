//! The per-callback scan bound: a large chunk scanned in steps continued from the root
//! context's tick, and replies, errors and trailers arriving while a backlog is left.

mod common;

use common::flow::{body_now, buffered, drain_backlog, filter, long_turn, reply, run_split};
use semroute_filter::filter::Action;
use semroute_filter::testing::MockHost;
use serde_json::{json, Value};

#[test]
fn a_large_chunk_is_scanned_in_bounded_steps() {
    let body = long_turn(40);
    let cfg = r#"{"limits": {"small_body_bytes": 0, "max_body_bytes": 1048576, "max_scan_bytes_per_callback": 4096}}"#;
    let (mut f, mut h) = buffered(cfg, &body);
    // The whole body in one callback: one step is scanned, the rest is a backlog.
    assert_eq!(body_now(&mut f, &mut h, true), Action::Pause);
    assert!(f.has_backlog());
    assert_eq!(*h.reads.borrow(), vec![(0, 4096)]);
    assert!(
        h.calls.is_empty(),
        "nothing dispatched before the text is read"
    );
    let mut steps = 1;
    while f.has_backlog() {
        f.on_backlog(&mut h);
        steps += 1;
        assert!(steps < 100, "the backlog does not shrink");
    }
    assert_eq!(steps, body.len().div_ceil(4096));
    let reads = h.reads.borrow().clone();
    assert!(reads.iter().all(|(a, b)| b - a <= 4096), "{reads:?}");
    assert_eq!(reads.last().map(|r| r.1), Some(body.len()));
    // The same Classify request as a filter that scans the chunk at once.
    let (unbounded, _, _) = run_split("/v1/chat/completions", body.as_bytes(), &[]);
    assert_eq!(h.calls.len(), 1);
    assert_eq!(Some(&h.calls[0].1), unbounded.as_ref());
    // The backlog is done: the reply resumes the request.
    h.reply = Some(reply("math", 0.01, &[]));
    f.on_grpc_response(&mut h, 1, 0, 10);
    assert_eq!(h.resumed, 1);
    assert_eq!(h.header("x-semroute-model"), Some("math-model"));
    assert_eq!(h.body_json()["model"], "math-model");
}

#[test]
fn a_reply_before_the_backlog_is_scanned_waits_for_it() {
    // The messages close early; the rest of the body (a long tool list) is a backlog.
    let tools: Vec<Value> = (0..400)
        .map(|i| json!({"type": "function", "function": {"name": format!("tool_{i}"), "description": "looks things up in the archive"}}))
        .collect();
    let body = json!({"messages": [{"role": "user", "content": "What is the derivative of x^3 + 2x?"}], "model": "auto", "tools": tools}).to_string();
    let cfg = r#"{"limits": {"small_body_bytes": 0, "max_body_bytes": 1048576, "max_scan_bytes_per_callback": 1024}}"#;
    let (mut f, mut h) = buffered(cfg, &body);
    assert_eq!(body_now(&mut f, &mut h, true), Action::Pause);
    assert_eq!(h.calls.len(), 1, "dispatched in the first step");
    assert!(f.has_backlog());
    h.reply = Some(reply("math", 0.01, &[]));
    f.on_grpc_response(&mut h, 1, 0, 10);
    assert_eq!(h.resumed, 0, "not resumed before the body is scanned");
    drain_backlog(&mut f, &mut h);
    assert_eq!(h.resumed, 1, "resumed by the step that ends the body");
    assert_eq!(h.header("x-semroute-model"), Some("math-model"));
    let mut expected: Value = serde_json::from_str(&body).unwrap();
    expected["model"] = json!("math-model");
    assert_eq!(h.body_json(), expected);
    // A jailbreak verdict does not wait for the backlog.
    let (mut f, mut h) = buffered(cfg, &body);
    body_now(&mut f, &mut h, true);
    h.reply = Some(reply("math", 0.99999, &[]));
    f.on_grpc_response(&mut h, 1, 0, 10);
    assert_eq!(h.sent_status(), Some(403));
    assert!(!f.has_backlog(), "a replied stream has no backlog");
}

#[test]
fn errors_and_trailers_in_a_backlog() {
    let cfg = r#"{"limits": {"small_body_bytes": 0, "max_body_bytes": 1048576, "max_scan_bytes_per_callback": 1024}}"#;
    // Invalid JSON past the first step: 400 from a later step.
    let body = long_turn(8).replace(r#""}],"model""#, r#""},],"model""#);
    assert!(body.contains(",],"));
    let (mut f, mut h) = buffered(cfg, &body);
    body_now(&mut f, &mut h, true);
    assert!(f.has_backlog());
    drain_backlog(&mut f, &mut h);
    assert_eq!(h.sent_status(), Some(400));
    assert_eq!(h.sent_json()["error"]["code"], "invalid_json");
    assert!(h.calls.is_empty());
    // The body ends with trailers: the backlog is read to its end.
    let body = long_turn(8);
    let (mut f, mut h) = buffered(cfg, &body);
    body_now(&mut f, &mut h, false);
    assert!(f.has_backlog());
    f.on_request_trailers(&mut h);
    drain_backlog(&mut f, &mut h);
    let (unbounded, _, _) = run_split("/v1/chat/completions", body.as_bytes(), &[]);
    assert_eq!(h.calls.first().map(|c| &c.1), unbounded.as_ref());
    h.reply = Some(reply("math", 0.01, &[]));
    f.on_grpc_response(&mut h, 1, 0, 10);
    assert_eq!(h.resumed, 1);
    // No bound (0): a callback scans all it is handed.
    let mut f = filter(
        r#"{"limits": {"small_body_bytes": 0, "max_body_bytes": 1048576, "max_scan_bytes_per_callback": 0}}"#,
    );
    let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
    f.on_request_headers(&mut h, false);
    h.body = long_turn(40).into_bytes();
    body_now(&mut f, &mut h, true);
    assert!(!f.has_backlog());
    assert_eq!(h.calls.len(), 1);
}
