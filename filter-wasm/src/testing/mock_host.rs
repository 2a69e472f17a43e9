//! A host that behaves like Envoy's proxy-wasm host for one HTTP stream: request headers,
//! a buffered request body with prefix replacement, `Classify` calls recorded (decoded) and
//! answered with a configured reply, local replies, and a fake clock that advances 100 µs
//! per reading. The filter's tests drive [`crate::filter::HttpFilter`] against it.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use prost::Message;
use semroute_proto::v1::ClassifyRequest;
use serde_json::Value;

use crate::filter::{Host, HostError};

/// Status, headers and body of a local reply.
pub type LocalReply = (u16, Vec<(String, String)>, Vec<u8>);

/// One HTTP stream's host side; tests set the inputs and read what the filter did.
#[derive(Default)]
pub struct MockHost {
    /// Request headers, pseudo-headers included, in order.
    pub headers: Vec<(String, String)>,
    /// Response headers: the upstream's (tests set them) and those the filter set.
    pub response_headers: Vec<(String, String)>,
    /// The buffered response body (tests put each chunk, or the chunks held so far, here
    /// before each response body callback).
    pub response_body: Vec<u8>,
    /// Counters the filter incremented.
    pub counters: Vec<(String, u64)>,
    /// The buffered request body (tests append chunks before each body callback).
    pub body: Vec<u8>,
    /// Every `(start, end)` range of the body the filter read.
    pub reads: RefCell<Vec<(usize, usize)>>,
    /// `Classify` calls: cluster, decoded request, timeout.
    pub calls: Vec<(String, ClassifyRequest, Duration)>,
    /// When set, `dispatch_classify` fails as a refused `grpc_call`.
    pub dispatch_fails: bool,
    /// The gRPC reply body handed to the filter.
    pub reply: Option<Vec<u8>>,
    /// The local reply the filter sent, if any (at most one).
    pub sent: Option<LocalReply>,
    /// How many times the request was resumed.
    pub resumed: u32,
    /// The fake clock, µs; each reading advances it by 100.
    pub now: Cell<u64>,
    /// The gRPC status message of a failed call.
    pub grpc_message: Option<String>,
}

impl MockHost {
    /// A stream whose request has `method`, `path` and the `extra` headers.
    pub fn new(method: &str, path: &str, extra: &[(&str, &str)]) -> Self {
        let mut h = MockHost::default();
        h.headers.push((":method".into(), method.into()));
        h.headers.push((":path".into(), path.into()));
        for (k, v) in extra {
            h.headers.push(((*k).into(), (*v).into()));
        }
        h
    }
    /// Bytes buffered so far, bytes.
    pub fn body_len(&self) -> usize {
        self.body.len()
    }
    /// A request header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    /// The request body as JSON. Panics when it is not JSON.
    pub fn body_json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("body is JSON")
    }
    /// A response header's value.
    pub fn response_header_value(&self, name: &str) -> Option<&str> {
        self.response_headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    /// The status of the local reply, if one was sent.
    pub fn sent_status(&self) -> Option<u16> {
        self.sent.as_ref().map(|s| s.0)
    }
    /// The local reply's body as JSON. Panics without a JSON local reply.
    pub fn sent_json(&self) -> Value {
        serde_json::from_slice(&self.sent.as_ref().expect("a local reply").2).expect("reply JSON")
    }
}

impl Host for MockHost {
    fn request_header(&self, name: &str) -> Option<String> {
        self.header(name).map(str::to_string)
    }
    fn request_header_names(&self) -> Vec<String> {
        self.headers.iter().map(|(k, _)| k.clone()).collect()
    }
    fn set_request_header(&mut self, name: &str, value: &str) {
        self.remove_request_header(name);
        self.headers.push((name.into(), value.into()));
    }
    fn remove_request_header(&mut self, name: &str) {
        self.headers.retain(|(k, _)| k != name);
    }
    fn set_response_header(&mut self, name: &str, value: &str) {
        self.remove_response_header(name);
        self.response_headers.push((name.into(), value.into()));
    }
    fn response_header(&self, name: &str) -> Option<String> {
        self.response_headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    }
    fn remove_response_header(&mut self, name: &str) {
        self.response_headers.retain(|(k, _)| k != name);
    }
    fn response_body(&self, start: usize, len: usize) -> Option<Vec<u8>> {
        let end = (start + len).min(self.response_body.len());
        Some(self.response_body.get(start..end)?.to_vec())
    }
    fn set_response_body(
        &mut self,
        start: usize,
        len: usize,
        bytes: &[u8],
    ) -> Result<(), HostError> {
        let end = (start + len).min(self.response_body.len());
        self.response_body.splice(start..end, bytes.iter().copied());
        Ok(())
    }
    fn increment_counter(&mut self, name: &str, by: u64) {
        match self.counters.iter_mut().find(|(k, _)| k == name) {
            Some((_, n)) => *n += by,
            None => self.counters.push((name.into(), by)),
        }
    }
    fn request_body(&self, start: usize, len: usize) -> Option<Vec<u8>> {
        let end = (start + len).min(self.body.len());
        self.reads.borrow_mut().push((start, end));
        Some(self.body.get(start..end)?.to_vec())
    }
    fn replace_body_prefix(&mut self, drain: usize, prefix: &[u8]) -> Result<(), HostError> {
        let mut b = prefix.to_vec();
        b.extend_from_slice(&self.body[drain..]);
        self.body = b;
        Ok(())
    }
    fn dispatch_classify(
        &mut self,
        cluster: &str,
        message: &[u8],
        timeout: Duration,
    ) -> Result<u32, HostError> {
        if self.dispatch_fails {
            return Err(HostError {
                call: "grpc_call",
                status: 2,
            });
        }
        self.calls.push((
            cluster.into(),
            ClassifyRequest::decode(message).expect("request decodes"),
            timeout,
        ));
        Ok(self.calls.len() as u32)
    }
    fn grpc_response_body(&self, _len: usize) -> Option<Vec<u8>> {
        self.reply.clone()
    }
    fn grpc_status_message(&self) -> Option<String> {
        self.grpc_message.clone()
    }
    fn send_response(&mut self, status: u16, headers: &[(&str, &str)], body: &[u8]) {
        assert!(self.sent.is_none(), "two local replies");
        self.sent = Some((
            status,
            headers
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            body.to_vec(),
        ));
    }
    fn resume_request(&mut self) {
        self.resumed += 1;
    }
    fn now_us(&self) -> u64 {
        self.now.set(self.now.get() + 100);
        self.now.get()
    }
}
