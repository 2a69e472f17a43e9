//! A decision's request edits (reasoning effort, system prompt) through the filter's
//! callbacks: made for the requests that decision routes and for no others, with the
//! body's other bytes unchanged and `content-length` fixed.

mod common;

use common::flow::{body_now, filter, reply};
use semroute_filter::testing::MockHost;
use serde_json::{json, Value};

const EDITS: &str = r#"{"decisions": [
    {"name": "math", "model": "math-model", "when": {"categories": ["math"]},
     "reasoning_effort": "high", "system_prompt": "Show each step."},
    {"name": "law", "model": "law-model", "when": {"categories": ["law"]},
     "system_prompt": "Cite the statute.", "client_values": "replace"}],
  "pii": {"mask": ["EMAIL_ADDRESS"], "action": "route", "route_model": "local-pii-model"},
  "limits": {"max_body_bytes": 1048576, "small_body_bytes": 0}}"#;

/// Runs `body` on `path` with the daemon answering `label` (and `pii` types); returns
/// the host afterwards.
fn run(path: &str, body: &Value, label: &str, pii: &[&str]) -> MockHost {
    let mut f = filter(EDITS);
    let raw = body.to_string();
    let len = raw.len().to_string();
    let mut h = MockHost::new("POST", path, &[("content-length", &len)]);
    f.on_request_headers(&mut h, false);
    h.body = raw.into_bytes();
    body_now(&mut f, &mut h, true);
    h.reply = Some(reply(label, 0.0, pii));
    f.on_grpc_response(&mut h, 1, 0, 10);
    assert_eq!(h.resumed, 1, "{:?}", h.sent);
    assert_eq!(
        h.header("content-length"),
        Some(h.body.len().to_string().as_str())
    );
    h
}

#[test]
fn edits_arrive_for_the_decision_that_sets_them() {
    let body = json!({"model": "auto", "messages": [{"role": "user", "content": "What is 2+2?"}]});
    let h = run("/v1/chat/completions", &body, "math", &[]);
    let sent = h.body_json();
    assert_eq!(sent["reasoning_effort"], "high");
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Show each step."})
    );
    assert_eq!(sent["messages"][1], body["messages"][0]);
    assert_eq!(sent["model"], "math-model");

    let responses = json!({"model": "auto", "input": "What is 2+2?", "instructions": "Be brief."});
    let h = run("/v1/responses", &responses, "math", &[]);
    let sent = h.body_json();
    assert_eq!(sent["reasoning"], json!({"effort": "high"}));
    assert_eq!(
        sent["instructions"], "Be brief.",
        "the client's value is kept"
    );
}

#[test]
fn no_edits_for_other_routes() {
    let body = json!({"model": "auto", "messages": [{"role": "user", "content": "Hello"}]});
    for (label, pii) in [("history", &[][..]), ("math", &["US_SSN"][..])] {
        let h = run("/v1/chat/completions", &body, label, pii);
        let sent = h.body_json();
        assert!(sent.get("reasoning_effort").is_none(), "{label}: {sent}");
        assert_eq!(sent["messages"].as_array().unwrap().len(), 1);
    }
    let named = json!({"model": "math-model", "messages": [{"role": "user", "content": "2+2?"}]});
    let h = run("/v1/chat/completions", &named, "math", &[]);
    assert_eq!(
        h.body,
        named.to_string().into_bytes(),
        "a named model passes through"
    );
}

#[test]
fn a_replaced_client_system_message_and_masking_together() {
    let body = json!({"model": "auto", "messages": [
        {"role": "system", "content": "Mail copies to ann@firm.example"},
        {"role": "user", "content": "Is this contract valid? Reply to ann@firm.example"}]});
    let mut f = filter(EDITS);
    let raw = body.to_string();
    let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
    f.on_request_headers(&mut h, false);
    h.body = raw.clone().into_bytes();
    body_now(&mut f, &mut h, true);
    let text = String::from_utf8_lossy(&h.calls[0].1.text).into_owned();
    let at = text.find("ann@firm.example").unwrap() as u32;
    let mut r = semroute_filter::testing::classify_reply("law", 0.9, 0.0, &["EMAIL_ADDRESS"], 1.0);
    let e = &mut r.pii.as_mut().unwrap().entities[0];
    e.start = at;
    e.end = at + "ann@firm.example".len() as u32;
    h.reply = Some(prost::Message::encode_to_vec(&r));
    f.on_grpc_response(&mut h, 1, 0, 10);
    let sent = h.body_json();
    assert_eq!(
        sent["messages"][0],
        json!({"role": "system", "content": "Cite the statute."})
    );
    assert_eq!(
        sent["messages"][1]["content"],
        "Is this contract valid? Reply to <EMAIL_ADDRESS_1>"
    );
    assert_eq!(h.header("x-semroute-pii-masked"), Some("1"));
}
