//! PII masking end to end under `envoy.yaml`'s policy (e-mail, phone, SSN, card, IBAN,
//! IP and street address masked, restore on): through the real Envoy, filter and daemon,
//! the upstream (`GET /last-request`) never receives an original value, the body it got
//! differs from the client's only in the masked strings, and the client reads its own
//! values back in the upstream's echo: JSON and streamed answers (1–3 character deltas),
//! content arrays and tool messages, the Responses API and legacy completions. A
//! decision's reasoning effort and system prompt arrive with the requests it routes and
//! with no others.

mod common;

use common::{post, sse_data, start, Reply};
use semroute_e2e::{http_get, Router, RouterOptions};
use serde_json::{json, Value};

const EMAIL: &str = "maria.lopez@example.org";
const SSN: &str = "123-45-6789";
const CARD: &str = "4111 1111 1111 1111";
const PHONE: &str = "+1 415 555 0173";

fn user_text() -> String {
    format!(
        "Please draft a short note to {EMAIL} confirming the refund to card {CARD}. \
         My social security number is {SSN} and my phone is {PHONE}; quote \"both\" \\ é."
    )
}

/// What the upstream that served `r` received last, raw.
fn last_request(router: &Router, r: &Reply) -> String {
    let served = r.header("x-semroute-model").expect("routed").to_string();
    let port = router
        .upstream_port(&served)
        .expect("upstream of the model");
    let (status, body) = http_get(port, "/last-request").expect("GET /last-request");
    assert_eq!(status, 200);
    body
}

/// The upstream got no original value, parses as JSON, and equals `sent` once its
/// placeholders are put back and `model` is restored.
fn check_upstream_body(router: &Router, r: &Reply, sent: &Value) {
    assert_eq!(
        r.status,
        200,
        "{}\n{}",
        String::from_utf8_lossy(&r.body),
        router.logs()
    );
    let got = last_request(router, r);
    for value in [EMAIL, SSN, CARD, PHONE] {
        assert!(!got.contains(value), "{value} reached the upstream: {got}");
    }
    let masked: u32 = upstream_report(r)["headers"]["x-semroute-pii-masked"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    assert!(masked >= 4, "x-semroute-pii-masked: {masked}");
    let mut upstream: Value = serde_json::from_str(&got).expect("the upstream got JSON");
    upstream["model"] = sent["model"].clone();
    let mut text = upstream.to_string();
    for (value, placeholder) in [
        (EMAIL, "<EMAIL_ADDRESS_1>"),
        (SSN, "<US_SSN_1>"),
        (CARD, "<CREDIT_CARD_1>"),
        (PHONE, "<PHONE_NUMBER_1>"),
    ] {
        assert!(text.contains(placeholder), "{placeholder} missing: {got}");
        text = text.replace(placeholder, value);
    }
    let back: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(
        &back, sent,
        "the upstream's body differs beyond the masked strings"
    );
}

/// The upstream's report (`semroute`) of a JSON or streamed answer.
fn upstream_report(r: &Reply) -> Value {
    if r.header("content-type")
        .is_some_and(|c| c.starts_with("text/event-stream"))
    {
        return sse_data(&r.body)
            .iter()
            .filter_map(|d| serde_json::from_str::<Value>(d).ok())
            .find_map(|v| {
                [&v["semroute"], &v["response"]["semroute"]]
                    .into_iter()
                    .find(|s| s.is_object())
                    .cloned()
            })
            .unwrap_or(Value::Null);
    }
    r.report()
}

fn streamed_text(r: &Reply, field: fn(&Value) -> Option<&str>) -> String {
    sse_data(&r.body)
        .iter()
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| field(&v).map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masked_upstream_restored_client() {
    let mut config = semroute_e2e::default_filter_config().expect("envoy.yaml");
    // A loaded machine must not turn classified requests into fallbacks (which mask
    // nothing).
    config["daemon"]["timeout_ms"] = json!(10_000);
    let law = config["decisions"]
        .as_array_mut()
        .and_then(|d| d.iter_mut().find(|d| d["name"] == "law"))
        .expect("a law decision in envoy.yaml");
    law["reasoning_effort"] = json!("high");
    law["system_prompt"] = json!("Cite the statute and say \"not legal advice\".");
    let router = start(RouterOptions {
        daemon: true,
        filter_config: Some(config),
        ..Default::default()
    });
    let user = user_text();
    let echo = format!("You said: {user}");

    // Chat: a content array, a tool call and a tool message repeating the e-mail.
    let chat = json!({"model": "auto", "messages": [
        {"role": "system", "content": "You write short notes."},
        {"role": "user", "content": [{"type": "text", "text": user}]},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "lookup", "arguments": format!("{{\"email\":\"{EMAIL}\"}}")}}]},
        {"role": "tool", "tool_call_id": "c1", "content": format!("account {EMAIL} found")},
        {"role": "user", "content": [{"type": "text", "text": user}]}
    ]});
    let r = post(&router, "/v1/chat/completions", chat.to_string(), &[]).await;
    check_upstream_body(&router, &r, &chat);
    let content = r.json()["choices"][0]["message"]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(content.ends_with(&echo), "{content}");

    for delta in ["1", "2", "3"] {
        let mut streamed = chat.clone();
        streamed["stream"] = json!(true);
        let r = post(
            &router,
            "/v1/chat/completions",
            streamed.to_string(),
            &[("x-upstream-delta-chars", delta)],
        )
        .await;
        check_upstream_body(&router, &r, &streamed);
        let text = streamed_text(&r, |v| v["choices"][0]["delta"]["content"].as_str());
        assert!(text.ends_with(&echo), "deltas of {delta}: {text}");
    }

    // Responses API, JSON and streamed.
    let responses =
        json!({"model": "auto", "instructions": format!("Reply to {EMAIL}."), "input": user});
    let r = post(&router, "/v1/responses", responses.to_string(), &[]).await;
    check_upstream_body(&router, &r, &responses);
    let text = r.json()["output"][0]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(text.ends_with(&echo), "{text}");
    let mut streamed = responses.clone();
    streamed["stream"] = json!(true);
    let r = post(
        &router,
        "/v1/responses",
        streamed.to_string(),
        &[("x-upstream-delta-chars", "2")],
    )
    .await;
    check_upstream_body(&router, &r, &streamed);
    let text = streamed_text(&r, |v| {
        (v["type"] == "response.output_text.delta")
            .then(|| v["delta"].as_str())
            .flatten()
    });
    assert!(text.ends_with(&echo), "{text}");

    // Legacy completions.
    let completions = json!({"model": "auto", "prompt": user});
    let r = post(&router, "/v1/completions", completions.to_string(), &[]).await;
    check_upstream_body(&router, &r, &completions);
    let text = r.json()["choices"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(text.ends_with(&echo), "{text}");

    request_edits_follow_the_decision(&router).await;
}

/// The law decision's reasoning effort and system prompt reach the law model, on chat and
/// Responses; a request another decision routes arrives without them.
async fn request_edits_follow_the_decision(router: &Router) {
    const LAW: &str = "Under the doctrine of adverse possession, how many years of open and \
        continuous occupation does a claimant need before acquiring title to the land?";
    const MATH: &str = "What is the derivative of x^3 + 2x with respect to x?";
    let prompt = "Cite the statute and say \"not legal advice\".";
    let chat = |q: &str| json!({"model": "auto", "messages": [{"role": "user", "content": q}]});
    let r = post(router, "/v1/chat/completions", chat(LAW).to_string(), &[]).await;
    assert_eq!(
        r.header("x-semroute-decision"),
        Some("law"),
        "{}",
        r.report()
    );
    let got: Value = serde_json::from_str(&last_request(router, &r)).expect("JSON");
    assert_eq!(got["reasoning_effort"], "high");
    assert_eq!(
        got["messages"][0],
        json!({"role": "system", "content": prompt})
    );
    assert_eq!(got["messages"][1], chat(LAW)["messages"][0]);

    let responses = json!({"model": "auto", "input": LAW});
    let r = post(router, "/v1/responses", responses.to_string(), &[]).await;
    assert_eq!(r.header("x-semroute-decision"), Some("law"));
    let got: Value = serde_json::from_str(&last_request(router, &r)).expect("JSON");
    assert_eq!(got["reasoning"], json!({"effort": "high"}));
    assert_eq!(got["instructions"], prompt);

    let r = post(router, "/v1/chat/completions", chat(MATH).to_string(), &[]).await;
    assert_eq!(r.header("x-semroute-decision"), Some("math"));
    let got: Value = serde_json::from_str(&last_request(router, &r)).expect("JSON");
    assert!(got.get("reasoning_effort").is_none(), "{got}");
    assert_eq!(got["messages"].as_array().map(Vec::len), Some(1), "{got}");
}
