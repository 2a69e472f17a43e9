//! Daemon failures: dispatch errors, gRPC statuses and deadlines mapped to the failure mode,
//! and stale replies ignored.

mod common;

use common::flow::{filter, send_body, MATH};
use semroute_filter::filter::Action;
use semroute_filter::testing::MockHost;

#[test]
fn daemon_failures_fail_open_or_closed() {
    for (status, reason) in [
        (14u32, "daemon-unavailable"),
        (4, "daemon-timeout"),
        (13, "daemon-error"),
    ] {
        let mut f = filter("");
        let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
        f.on_request_headers(&mut h, false);
        send_body(&mut f, &mut h, MATH.as_bytes(), 1000);
        f.on_grpc_response(&mut h, 1, status, 0);
        assert_eq!(h.resumed, 1);
        assert_eq!(h.header("x-semroute-fallback"), Some(reason));
        assert_eq!(h.header("x-semroute-model"), Some("general-model"));
        assert_eq!(h.body_json()["model"], "general-model");
        let mut f = filter(r#"{"failure_mode": "closed"}"#);
        let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
        f.on_request_headers(&mut h, false);
        send_body(&mut f, &mut h, MATH.as_bytes(), 1000);
        f.on_grpc_response(&mut h, 1, status, 0);
        assert_eq!(h.sent_status(), Some(503));
        assert_eq!(h.sent_json()["error"]["code"], "router_unavailable");
    }
    // Garbage reply.
    let mut f = filter("");
    let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
    f.on_request_headers(&mut h, false);
    send_body(&mut f, &mut h, MATH.as_bytes(), 1000);
    h.reply = Some(vec![0xff, 0xff, 0xff]);
    f.on_grpc_response(&mut h, 1, 0, 3);
    assert_eq!(h.header("x-semroute-fallback"), Some("daemon-bad-reply"));
    // Dispatch refused by the host.
    let mut f = filter("");
    let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
    h.dispatch_fails = true;
    f.on_request_headers(&mut h, false);
    assert_eq!(
        send_body(&mut f, &mut h, MATH.as_bytes(), 1000),
        Action::Continue
    );
    assert_eq!(h.header("x-semroute-fallback"), Some("dispatch-failed"));
}

#[test]
fn text_too_large_for_the_daemon_is_a_413_under_either_failure_mode() {
    // gRPC OUT_OF_RANGE: the daemon refused the text as larger than it takes. Forwarding
    // it under the failure mode would let a padded prompt skip every policy.
    for config in ["", r#"{"failure_mode": "closed"}"#] {
        let mut f = filter(config);
        let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
        f.on_request_headers(&mut h, false);
        send_body(&mut f, &mut h, MATH.as_bytes(), 1000);
        f.on_grpc_response(&mut h, 1, 11, 0);
        assert_eq!(h.sent_status(), Some(413), "{config}");
        assert_eq!(h.sent_json()["error"]["code"], "prompt_too_large");
        assert_eq!(h.sent_json()["error"]["type"], "invalid_request_error");
        assert_eq!(h.resumed, 0);
        assert_eq!(h.header("x-semroute-model"), None);
    }
}

#[test]
fn a_card_in_other_digits_fails_closed_without_the_daemon() {
    // The filter's own scan reads the digits the daemon's patterns read: fullwidth, those
    // of other scripts, groups joined by invisible characters. Without the daemon such a
    // card cannot be masked, so it must not go upstream.
    let cfg = r#"{"pii": {"allow": ["PERSON"], "mask": ["CREDIT_CARD"]}}"#;
    for card in [
        "\u{664}\u{661}\u{661}\u{661} \u{661}\u{661}\u{661}\u{661} \u{661}\u{661}\u{661}\u{661} \u{661}\u{661}\u{661}\u{661}",
        "\u{ff14}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}\u{ff11}",
        "4111\u{0}1111\u{0}1111\u{0}1111",
    ] {
        let text = format!("My card is {card}, charge it.");
        let body = serde_json::json!({"model": "auto", "messages": [{"role": "user", "content": text}]});
        let mut f = filter(cfg);
        let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
        f.on_request_headers(&mut h, false);
        send_body(&mut f, &mut h, body.to_string().as_bytes(), 1000);
        f.on_grpc_response(&mut h, 1, 14, 0);
        assert_eq!(h.sent_status(), Some(503), "{text:?}");
        assert_eq!(h.sent_json()["error"]["code"], "router_unavailable");
        assert_eq!(h.resumed, 0);
    }
}

#[test]
fn stale_grpc_tokens_are_ignored() {
    let mut f = filter("");
    let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
    f.on_request_headers(&mut h, false);
    send_body(&mut f, &mut h, MATH.as_bytes(), 1000);
    f.on_grpc_response(&mut h, 77, 0, 0);
    assert_eq!(h.resumed, 0);
    assert_eq!(h.header("x-semroute-model"), None);
}

#[test]
fn unavailable_at_the_deadline_is_a_timeout() {
    // Envoy turns its own call timeout into gRPC UNAVAILABLE.
    let mut f = filter("");
    let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
    f.on_request_headers(&mut h, false);
    send_body(&mut f, &mut h, MATH.as_bytes(), 1000);
    h.now.set(h.now.get() + 250_000);
    f.on_grpc_response(&mut h, 1, 14, 0);
    assert_eq!(h.header("x-semroute-fallback"), Some("daemon-timeout"));

    // Named as a timeout in the status message, even when the filter's clock says it
    // came early (a worker busy with other streams runs the callback late or early).
    for (message, reason) in [
        ("upstream request timeout{response_timeout}", "daemon-timeout"),
        (
            "upstream connect error or disconnect/reset before headers. reset reason: remote connection failure",
            "daemon-unavailable",
        ),
    ] {
        let mut f = filter("");
        let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
        f.on_request_headers(&mut h, false);
        send_body(&mut f, &mut h, MATH.as_bytes(), 1000);
        h.grpc_message = Some(message.into());
        h.now.set(h.now.get() + 10_000);
        f.on_grpc_response(&mut h, 1, 14, 0);
        assert_eq!(h.header("x-semroute-fallback"), Some(reason), "{message}");
    }
}
