//! Client helpers shared by the end-to-end tests.
#![allow(dead_code)]

use std::time::Duration;

use semroute_e2e::{Router, RouterOptions};
use serde_json::Value;

/// Starts a router or fails the test with the reason (missing artifacts say
/// which make target builds them).
pub fn start(options: RouterOptions) -> Router {
    match Router::start(
        std::path::Path::new(env!("CARGO_BIN_EXE_semroute-upstream")),
        options,
    ) {
        Ok(r) => r,
        Err(e) => panic!("cannot start the router: {e}"),
    }
}

/// One HTTP exchange.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!(
                "reply is not JSON ({e}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
    }
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
    /// The upstream's report (`semroute` field) of a JSON reply.
    pub fn report(&self) -> Value {
        self.json()["semroute"].clone()
    }
    /// Asserts an OpenAI-style error with `status`.
    pub fn assert_openai_error(&self, status: u16) -> Value {
        assert_eq!(
            self.status,
            status,
            "{}",
            String::from_utf8_lossy(&self.body)
        );
        let v = self.json();
        let e = &v["error"];
        assert!(
            e["message"].is_string() && e["type"].is_string() && e["code"].is_string(),
            "not an OpenAI error: {v}"
        );
        v
    }
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .expect("client")
}

pub async fn post(
    router: &Router,
    path: &str,
    body: impl Into<reqwest::Body>,
    headers: &[(&str, &str)],
) -> Reply {
    let mut req = client()
        .post(format!("{}{path}", router.url()))
        .header("content-type", "application/json")
        .body(body);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req
        .send()
        .await
        .unwrap_or_else(|e| panic!("POST {path}: {e}\n{}", router.logs()));
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.bytes().await.expect("body").to_vec();
    Reply {
        status,
        headers,
        body,
    }
}

pub async fn chat(router: &Router, model: &str, content: &str) -> Reply {
    let body =
        serde_json::json!({"messages": [{"role": "user", "content": content}], "model": model});
    post(router, "/v1/chat/completions", body.to_string(), &[]).await
}

/// Parses an SSE body into its `data:` payloads.
pub fn sse_data(body: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(body);
    assert!(
        text.ends_with("\n\n"),
        "SSE stream does not end with a blank line: {text:?}"
    );
    text.split("\n\n")
        .filter(|e| !e.is_empty())
        .map(|event| {
            event
                .lines()
                .filter_map(|l| l.strip_prefix("data: "))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .collect()
}
