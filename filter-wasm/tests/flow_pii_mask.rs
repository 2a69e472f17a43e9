//! PII masking through the filter's callbacks: values the daemon found replaced by
//! placeholders in the body sent upstream, the count header and counters, and the values
//! put back into JSON and streamed answers.

mod common;

use common::flow::{filter, send_body};
use proptest::prelude::*;
use prost::Message;
use semroute_filter::filter::{Action, HttpFilter};
use semroute_filter::testing::{classify_reply, MockHost};
use semroute_proto::v1::{ClassifyResponse, PiiEntity};
use serde_json::{json, Value};

const MASK: &str = r#"{"pii": {"allow": [], "mask": ["EMAIL_ADDRESS", "US_SSN", "PERSON"], "action": "block"},
  "limits": {"max_body_bytes": 1048576, "small_body_bytes": 0}}"#;

/// A daemon reply that reports each `(type, value)` at its first place in the text (or
/// scan text) of the `Classify` request the filter sent.
fn reply_for(h: &MockHost, found: &[(&str, &str)]) -> Vec<u8> {
    let req = &h.calls[0].1;
    let text = String::from_utf8_lossy(&req.text).into_owned();
    let scan = String::from_utf8_lossy(&req.scan_text).into_owned();
    let patterns = String::from_utf8_lossy(&req.pattern_text).into_owned();
    let entities = found
        .iter()
        .map(|(kind, value)| {
            let (at, in_scan, in_patterns) = match (text.find(value), scan.find(value)) {
                (Some(at), _) => (at, false, false),
                (None, Some(at)) => (at, true, false),
                (None, None) => (
                    patterns.find(value).expect("value sent to the daemon"),
                    false,
                    true,
                ),
            };
            PiiEntity {
                r#type: (*kind).into(),
                start: at as u32,
                end: (at + value.len()) as u32,
                score: 1.0,
                in_scan_text: in_scan,
                in_pattern_text: in_patterns,
                ..Default::default()
            }
        })
        .collect();
    let mut r: ClassifyResponse = classify_reply("math", 0.9, 0.0, &[], 1.0);
    r.pii.as_mut().unwrap().entities = entities;
    r.encode_to_vec()
}

/// Sends `body` in `chunk`-byte pieces and answers `Classify` with `found`.
fn masked(f: &mut HttpFilter, body: &str, chunk: usize, found: &[(&str, &str)]) -> MockHost {
    let len = body.len().to_string();
    let mut h = MockHost::new("POST", "/v1/chat/completions", &[("content-length", &len)]);
    f.on_request_headers(&mut h, false);
    send_body(f, &mut h, body.as_bytes(), chunk);
    h.reply = Some(reply_for(&h, found));
    f.on_grpc_response(&mut h, 1, 0, 10);
    h
}

fn chat(user: &str) -> String {
    json!({"model": "auto", "messages": [
        {"role": "system", "content": "Reply to jane@corp.example if needed."},
        {"role": "user", "content": [{"type": "text", "text": user}]},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "send", "arguments": "{\"to\":\"jane@corp.example\"}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "sent to jane@corp.example"}
    ]})
    .to_string()
}

#[test]
fn values_are_masked_everywhere_in_the_body() {
    let mut f = filter(MASK);
    let body = chat("Mail jane@corp.example about SSN 123-45-6789, \"quoted\" é.");
    let h = masked(
        &mut f,
        &body,
        7,
        &[
            ("EMAIL_ADDRESS", "jane@corp.example"),
            ("US_SSN", "123-45-6789"),
        ],
    );
    assert_eq!(h.resumed, 1, "{:?}", h.sent);
    let sent = String::from_utf8(h.body.clone()).unwrap();
    let expected = body
        .replace("\"auto\"", "\"math-model\"")
        .replace("jane@corp.example", "<EMAIL_ADDRESS_1>")
        .replace("123-45-6789", "<US_SSN_1>");
    assert_eq!(sent, expected, "only the values and the model changed");
    serde_json::from_str::<Value>(&sent).unwrap();
    assert_eq!(h.header("x-semroute-pii-masked"), Some("5"));
    assert_eq!(
        h.header("accept-encoding"),
        Some("identity"),
        "answers come unencoded"
    );
    assert_eq!(h.header("x-semroute-decision"), Some("math"));
    assert_eq!(
        h.header("content-length"),
        Some(sent.len().to_string().as_str())
    );
    assert!(h
        .counters
        .contains(&("semroute.pii_masked.EMAIL_ADDRESS".into(), 4)));
    assert!(h
        .counters
        .contains(&("semroute.pii_masked.US_SSN".into(), 1)));
}

#[test]
fn values_in_sentences_compression_dropped_are_found_and_masked() {
    let mut f = filter(
        r#"{"pii": {"mask": ["EMAIL_ADDRESS"]}, "compression": {"budget_tokens": 64},
          "limits": {"max_body_bytes": 1048576, "small_body_bytes": 0}}"#,
    );
    let user: String = (0..120)
        .map(|i| format!("Contact person{i}@example.com about invoice {i}. "))
        .collect();
    let body =
        json!({"model": "auto", "messages": [{"role": "user", "content": user}]}).to_string();
    let len = body.len().to_string();
    let mut h = MockHost::new("POST", "/v1/chat/completions", &[("content-length", &len)]);
    f.on_request_headers(&mut h, false);
    send_body(&mut f, &mut h, body.as_bytes(), 4096);
    let req = &h.calls[0].1;
    let sent = String::from_utf8_lossy(&req.text).into_owned();
    let dropped = (0..120)
        .map(|i| format!("person{i}@example.com"))
        .find(|e| !sent.contains(e.as_str()))
        .expect("compression dropped some");
    assert!(String::from_utf8_lossy(&req.pattern_text).contains(&dropped));
    h.reply = Some(reply_for(&h, &[("EMAIL_ADDRESS", dropped.as_str())]));
    f.on_grpc_response(&mut h, 1, 0, 10);
    assert_eq!(h.header("x-semroute-pii-masked"), Some("1"));
    assert!(!String::from_utf8_lossy(&h.body).contains(&format!(" {dropped}")));
}

#[test]
fn a_masked_value_never_takes_the_fail_open_route() {
    // The daemon is down: nothing can be masked. A body with an e-mail address gets 503;
    // one without personal data takes the fail-open route.
    for (user, status) in [
        ("Mail jane@corp.example the results", Some(503)),
        ("What is the derivative of x^3?", None),
    ] {
        let mut f = filter(MASK);
        let body = chat(user).replace("jane@corp.example\"}", "someone\"}");
        let body = body.replace("Reply to jane@corp.example", "Reply briefly");
        let body = body.replace("sent to jane@corp.example", "sent");
        let mut h = MockHost::new("POST", "/v1/chat/completions", &[]);
        f.on_request_headers(&mut h, false);
        send_body(&mut f, &mut h, body.as_bytes(), 64);
        f.on_grpc_response(&mut h, 1, 14, 0);
        assert_eq!(h.sent_status(), status, "{user}");
        if status.is_some() {
            assert_eq!(h.sent_json()["error"]["code"], "router_unavailable");
            assert_eq!(h.resumed, 0);
        } else {
            assert_eq!(h.header("x-semroute-fallback"), Some("daemon-unavailable"));
        }
    }
}

#[test]
fn a_type_not_masked_is_still_blocked() {
    let mut f = filter(MASK);
    let body = chat("Call +1 555 010 9999 or mail jane@corp.example");
    let h = masked(
        &mut f,
        &body,
        64,
        &[
            ("EMAIL_ADDRESS", "jane@corp.example"),
            ("PHONE_NUMBER", "+1 555 010 9999"),
        ],
    );
    assert_eq!(h.sent_status(), Some(403));
    assert_eq!(h.header("x-semroute-pii-masked"), None);
}

#[test]
fn a_decision_may_mask_other_types() {
    let mut f = filter(
        r#"{"decisions": [{"name": "math", "model": "math-model", "when": {"categories": ["math"]},
            "pii_mask": ["PHONE_NUMBER"]}],
          "pii": {"mask": ["EMAIL_ADDRESS"], "action": "route", "route_model": "local-pii-model"},
          "limits": {"max_body_bytes": 1048576, "small_body_bytes": 0}}"#,
    );
    let body = chat("Call +1 555 010 9999 about x^2");
    let h = masked(&mut f, &body, 64, &[("PHONE_NUMBER", "+1 555 010 9999")]);
    assert_eq!(h.header("x-semroute-decision"), Some("math"));
    assert_eq!(h.header("x-semroute-pii-masked"), Some("1"));
    assert!(String::from_utf8_lossy(&h.body).contains("Call <PHONE_NUMBER_1> about"));
}

fn answer_headers(h: &mut MockHost, content_type: &str, length: usize) {
    h.response_headers = vec![
        ("content-type".into(), content_type.into()),
        ("content-length".into(), length.to_string()),
    ];
}

#[test]
fn a_json_answer_is_restored() {
    let mut f = filter(MASK);
    let mut h = masked(
        &mut f,
        &chat("Mail jane@corp.example"),
        64,
        &[("EMAIL_ADDRESS", "jane@corp.example")],
    );
    let answer = json!({"choices": [{"message": {"content": "Sent to <EMAIL_ADDRESS_1>, not <EMAIL_ADDRESS_2>.",
        "tool_calls": [{"function": {"arguments": "{\"to\": \"<EMAIL_ADDRESS_1>\"}"}}]}}]})
    .to_string();
    answer_headers(&mut h, "application/json; charset=utf-8", answer.len());
    f.on_response_headers(&mut h);
    assert_eq!(h.response_header_value("content-length"), None);
    let (a, b) = answer.as_bytes().split_at(20);
    h.response_body = a.to_vec();
    assert_eq!(f.on_response_body(&mut h, a.len(), false), Action::Pause);
    h.response_body.extend_from_slice(b);
    assert_eq!(
        f.on_response_body(&mut h, answer.len(), true),
        Action::Continue
    );
    let v: Value = serde_json::from_slice(&h.response_body).unwrap();
    let m = &v["choices"][0]["message"];
    assert_eq!(
        m["content"],
        "Sent to jane@corp.example, not <EMAIL_ADDRESS_2>."
    );
    assert_eq!(
        m["tool_calls"][0]["function"]["arguments"],
        "{\"to\": \"jane@corp.example\"}"
    );
}

#[test]
fn a_placeholder_the_client_wrote_keeps_its_meaning() {
    // The client's own text holds `<EMAIL_ADDRESS_1>` (a template variable, written once
    // as it is and once with JSON escapes): the real address gets the next free number, and
    // the answer's literal placeholder is not turned into the address.
    let mut f = filter(MASK);
    let user = "Keep <EMAIL_ADDRESS_1> literal in the template; my address is jane@corp.example.";
    let body = chat(user).replace(
        "Reply to jane@corp.example if needed.",
        "Fill \\u003cEMAIL_ADDRESS_2\\u003e too.",
    );
    let mut h = masked(&mut f, &body, 64, &[("EMAIL_ADDRESS", "jane@corp.example")]);
    let sent: Value = h.body_json();
    let text = sent["messages"][1]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        text,
        "Keep <EMAIL_ADDRESS_1> literal in the template; my address is <EMAIL_ADDRESS_3>."
    );
    assert_eq!(
        sent["messages"][2]["tool_calls"][0]["function"]["arguments"],
        "{\"to\":\"<EMAIL_ADDRESS_3>\"}"
    );
    assert_eq!(
        sent["messages"][0]["content"],
        "Fill <EMAIL_ADDRESS_2> too."
    );
    let answer = json!({"choices": [{"message": {"content": "Wrote <EMAIL_ADDRESS_1>, <EMAIL_ADDRESS_2> for <EMAIL_ADDRESS_3>."}}]})
        .to_string();
    answer_headers(&mut h, "application/json", answer.len());
    f.on_response_headers(&mut h);
    h.response_body = answer.as_bytes().to_vec();
    assert_eq!(
        f.on_response_body(&mut h, answer.len(), true),
        Action::Continue
    );
    let v: Value = serde_json::from_slice(&h.response_body).unwrap();
    assert_eq!(
        v["choices"][0]["message"]["content"],
        "Wrote <EMAIL_ADDRESS_1>, <EMAIL_ADDRESS_2> for jane@corp.example."
    );
}

#[test]
fn other_answers_pass_through_untouched() {
    for (ctype, encoding) in [("text/plain", None), ("application/json", Some("gzip"))] {
        let mut f = filter(MASK);
        let mut h = masked(
            &mut f,
            &chat("Mail jane@corp.example"),
            64,
            &[("EMAIL_ADDRESS", "jane@corp.example")],
        );
        let answer = b"\"<EMAIL_ADDRESS_1>\"".to_vec();
        answer_headers(&mut h, ctype, answer.len());
        if let Some(e) = encoding {
            h.response_headers
                .push(("content-encoding".into(), e.into()));
        }
        f.on_response_headers(&mut h);
        assert!(h.response_header_value("content-length").is_some());
        h.response_body = answer.clone();
        assert_eq!(
            f.on_response_body(&mut h, answer.len(), true),
            Action::Continue
        );
        assert_eq!(h.response_body, answer);
    }
}

#[test]
fn a_json_answer_past_the_limit_passes_through_and_is_counted() {
    let mut f = filter(
        r#"{"pii": {"mask": ["EMAIL_ADDRESS"], "max_restore_bytes": 32},
          "limits": {"max_body_bytes": 1048576, "small_body_bytes": 0}}"#,
    );
    let mut h = masked(
        &mut f,
        &chat("Mail jane@corp.example"),
        64,
        &[("EMAIL_ADDRESS", "jane@corp.example")],
    );
    h.response_headers = vec![("content-type".into(), "application/json".into())];
    f.on_response_headers(&mut h);
    let answer =
        json!({"content": "<EMAIL_ADDRESS_1> and a long answer past the limit"}).to_string();
    h.response_body = answer.clone().into_bytes();
    assert_eq!(
        f.on_response_body(&mut h, answer.len(), false),
        Action::Continue
    );
    assert_eq!(h.response_body, answer.as_bytes());
    assert!(h
        .counters
        .contains(&("semroute.pii_restore_skipped".into(), 1)));
}

/// The SSE answer of an upstream that echoes `text` in deltas of `delta` characters.
fn echo_stream(text: &str, delta: usize) -> Vec<u8> {
    let chars: Vec<char> = text.chars().collect();
    let mut s = String::new();
    for piece in chars.chunks(delta) {
        let piece: String = piece.iter().collect();
        let e = json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": piece}}]});
        s.push_str(&format!("data: {e}\n\n"));
    }
    s.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
    s.into_bytes()
}

fn streamed_content(stream: &[u8]) -> String {
    let text = String::from_utf8(stream.to_vec()).unwrap();
    text.split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| {
            v["choices"][0]["delta"]["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect()
}

/// Masks `user` (with `found` reported), echoes the masked user text back as a stream in
/// `delta`-character deltas cut into body chunks at `cuts`, and returns what the client
/// reads.
fn round_trip(user: &str, found: &[(&str, &str)], delta: usize, cuts: &[usize]) -> String {
    let mut f = filter(MASK);
    let mut h = masked(&mut f, &chat(user), 13, found);
    let sent: Value = serde_json::from_slice(&h.body).unwrap();
    let upstream_saw = sent["messages"][1]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_string();
    for (_, v) in found {
        assert!(!upstream_saw.contains(v), "{upstream_saw}");
    }
    let stream = echo_stream(&upstream_saw, delta);
    h.response_headers = vec![("content-type".into(), "text/event-stream".into())];
    f.on_response_headers(&mut h);
    let mut cuts: Vec<usize> = cuts.iter().map(|c| c % (stream.len() + 1)).collect();
    cuts.sort_unstable();
    cuts.push(stream.len());
    let mut client = Vec::new();
    let mut at = 0;
    for c in cuts {
        h.response_body = stream[at..c].to_vec();
        let eos = c == stream.len();
        assert_eq!(f.on_response_body(&mut h, c - at, eos), Action::Continue);
        client.extend_from_slice(&h.response_body);
        at = c;
    }
    streamed_content(&client)
}

#[test]
fn a_placeholder_split_at_every_byte_is_restored() {
    let user = "Write to jane@corp.example today";
    let found = [("EMAIL_ADDRESS", "jane@corp.example")];
    for delta in 1..=3 {
        let stream_len = echo_stream("Write to <EMAIL_ADDRESS_1> today", delta).len();
        for cut in 0..=stream_len {
            assert_eq!(
                round_trip(user, &found, delta, &[cut]),
                user,
                "delta {delta} cut {cut}"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn mask_echo_restore_gives_the_client_its_text(
        before in "[a-zA-Z ,.\"\\\\é<>_\t]{0,20}",
        after in "[a-zA-Z ,.\"\\\\é<>_\n]{0,20}",
        local in "[a-z]{1,8}(\\.[a-z]{1,5})?",
        delta in 1usize..4,
        cuts in proptest::collection::vec(0usize..4000, 0..5),
    ) {
        let email = format!("{local}@mail.example");
        let user = format!("{before} {email} {after} {email}.");
        let got = round_trip(&user, &[("EMAIL_ADDRESS", email.as_str())], delta, &cuts);
        prop_assert_eq!(got, user);
    }

    /// Values with quotes, backslashes, control characters and non-ASCII text: masked in
    /// their escaped form, restored as JSON inside the streamed JSON strings.
    #[test]
    fn odd_values_are_escaped_both_ways(
        value in "[A-Z][a-z\"\\\t\n\u{1}é😀 ']{2,12}[a-z]",
        delta in 1usize..4,
        cuts in proptest::collection::vec(0usize..4000, 0..4),
    ) {
        let user = format!("Dear {value}, thanks. Regards to {value}!");
        let got = round_trip(&user, &[("PERSON", value.as_str())], delta, &cuts);
        prop_assert_eq!(got, user);
    }
}
