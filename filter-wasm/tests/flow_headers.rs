//! Request headers: which methods and paths are classified, and client-sent `x-semroute-*`
//! headers removed from every request.

mod common;

use common::flow::{filter, send_body, MATH};
use semroute_filter::filter::Action;
use semroute_filter::testing::MockHost;

#[test]
fn other_paths_and_methods_pass_through_but_lose_client_headers() {
    for (method, path) in [
        ("GET", "/v1/models"),
        ("GET", "/v1/chat/completions"),
        ("POST", "/v1/embeddings"),
    ] {
        let mut f = filter("");
        let mut h = MockHost::new(
            method,
            path,
            &[("x-semroute-decision", "forged"), ("X-Semroute-Model", "x")],
        );
        assert_eq!(f.on_request_headers(&mut h, false), Action::Continue);
        assert_eq!(f.on_request_body(&mut h, 10, true), Action::Continue);
        assert!(h
            .headers
            .iter()
            .all(|(k, _)| !k.to_ascii_lowercase().starts_with("x-semroute-")));
        assert!(h.calls.is_empty());
    }
    // Query strings do not hide the path.
    let mut f = filter("");
    let mut h = MockHost::new("POST", "/v1/chat/completions?api-version=1", &[]);
    assert_eq!(f.on_request_headers(&mut h, false), Action::Pause);
}

#[test]
fn path_variants_an_upstream_reads_as_the_api_are_classified() {
    for path in [
        "/v1/chat/complet%69ons",
        "/v1/chat/completions/",
        "//v1/./chat/completions",
        "/V1/chat/completions?x=1",
    ] {
        let mut f = filter("");
        let mut h = MockHost::new("POST", path, &[]);
        assert_eq!(f.on_request_headers(&mut h, false), Action::Pause, "{path}");
        send_body(&mut f, &mut h, MATH.as_bytes(), 1000);
        assert_eq!(h.calls.len(), 1, "{path}: not classified");
    }
    // Other paths pass through unread.
    let mut f = filter("");
    let mut h = MockHost::new("POST", "/v1/chat/completions2", &[]);
    assert_eq!(f.on_request_headers(&mut h, false), Action::Continue);
}
