//! Filter cost per body size, natively, through the same code path as in
//! Envoy: the per-request state machine ([`HttpFilter`]) behind its
//! [`Host`] trait, fed the body in chunks the way Envoy delivers it.
//!
//! ```text
//! cargo run --release -p semroute-e2e --bin filter-bench -- [options]
//!   --sizes 2048,65536,524288,1048576,4194304   body sizes in bytes
//!   --chunk BYTES                       body chunk size (default 16384, Envoy's usual read size)
//!   --runs N                            timed requests per size, after 2 warm-up runs (default 40)
//!   --max-seconds S                     stop a size early after S seconds of runs (default 20)
//! ```
//!
//! Per request and body size it measures, in microseconds of wall-clock time
//! on one thread (the filter does no I/O, so this is its CPU time):
//!
//! - **last byte → dispatch**: from the start of the body callback carrying
//!   the end of the stream to the `Classify` dispatch (0 when the call was
//!   dispatched in an earlier callback, before the last byte);
//! - **filter CPU**: the sum of every filter callback of the request
//!   (headers, each body chunk, the gRPC reply that applies the route and
//!   splices `model`).
//!
//! Baseline measured in the same run (the buffered design): copy every chunk
//! into one buffer, then at the last byte `serde_json::from_slice` the whole
//! body, take the last user message, compress it with the same
//! [`PromptBuilder`] and budget, join earlier user turns as scan text (same
//! cap), and encode the `ClassifyRequest`. The
//! "parse only" column is the `serde_json` parse and extraction alone.
//!
//! Body shapes, both `{"model":"auto","messages":[...],"temperature":0.2}`
//! with generated prose, sized to the requested length: **long last turn**
//! (system + one user turn holding a long pasted document and a final
//! question: its sentences are analysed per chunk, and the final selection
//! ranks a bounded number of candidates) and **long history** (user /
//! assistant turns of about 2 KB, then a short question; all earlier user
//! turns are analysed as each message ends and compressed as the scan text,
//! while the buffered baseline sends up to `limits.max_scan_text_bytes` of
//! them raw). Keys come in
//! `serde_json`'s sorted order, so `content` precedes `role`: the filter cannot
//! know a message is the user's until it has read it. The filter
//! configuration is the one embedded in the repository's `envoy.yaml`.
//!
//! **PII restore in answers**: a request whose e-mail address was masked, then its
//! answer fed to the response callbacks in body chunks: an SSE stream of generated prose
//! in token-sized deltas (4 characters per event, the placeholder once in about 80 words,
//! often split across events) and a JSON answer of the same text. Measured per MiB of
//! answer: the filter with restore against the same filter with `pii.restore: false`
//! (which leaves the answer alone), in the same run.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use prost::Message;
use semroute_buffered_baseline::extract::{earlier_user_text, last_user_text};
use semroute_e2e::bench::{
    history_body, instant_reply, last_turn_body, quantile, size_name, timing, Prose,
};
use semroute_e2e::default_filter_config;
use semroute_filter::classify_request::{classify_request, ClassifyParts};
use semroute_filter::compression::{PromptBuilder, TokenCalibration};
use semroute_filter::config::FilterConfig;
use semroute_filter::filter::{Action, Host, HostError, HttpFilter};
use semroute_filter::testing::MockHost;
use semroute_proto::v1::PiiEntity;
use serde_json::{json, Value};

/// The streaming filter against the buffered design, natively.
#[derive(Debug, clap::Parser)]
#[command(name = "filter-bench")]
struct Args {
    /// Body sizes, in bytes.
    #[arg(long, value_delimiter = ',', default_values_t = [2048, 65536, 524_288, 1_048_576, 4_194_304])]
    sizes: Vec<usize>,
    /// Bytes per body chunk handed to the filter.
    #[arg(long, default_value_t = 16384,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    chunk: usize,
    /// Timed runs per size.
    #[arg(long, default_value_t = 40,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    runs: usize,
    /// Stop a size early after this many seconds.
    #[arg(long, default_value_t = 20.0)]
    max_seconds: f64,
}

fn usage(msg: &str) -> ! {
    eprintln!("filter-bench: {msg}");
    std::process::exit(2)
}

/// The filter configuration embedded in `envoy.yaml`, as JSON bytes.
fn envoy_filter_config() -> Vec<u8> {
    match default_filter_config() {
        Ok(v) => v.to_string().into_bytes(),
        Err(e) => usage(&format!("envoy.yaml filter configuration: {e}")),
    }
}

/// The filter's `MockHost` for the request side, but for what a timing must not count as
/// the filter's work: it reads the real clock, keeps the dispatched message undecoded, and
/// replaces the body's prefix lazily as Envoy does (no copy of the rest of the body).
struct BenchHost {
    host: MockHost,
    /// Prefix replacement (drained bytes, new prefix), kept instead of applied.
    replaced: Option<(usize, Vec<u8>)>,
    /// When the `Classify` call was dispatched.
    dispatched: Option<Instant>,
    /// The dispatched message, undecoded.
    request: Vec<u8>,
    epoch: Instant,
}

impl BenchHost {
    fn new(content_length: usize, reply: Vec<u8>) -> Self {
        let length = content_length.to_string();
        let mut host = MockHost::new(
            "POST",
            "/v1/chat/completions",
            &[
                ("content-type", "application/json"),
                ("content-length", &length),
                ("x-request-id", "bench"),
            ],
        );
        host.body = Vec::with_capacity(content_length);
        host.reply = Some(reply);
        BenchHost {
            host,
            replaced: None,
            dispatched: None,
            request: Vec::new(),
            epoch: Instant::now(),
        }
    }
}

impl Host for BenchHost {
    fn request_header(&self, name: &str) -> Option<String> {
        self.host.request_header(name)
    }
    fn request_header_names(&self) -> Vec<String> {
        self.host.request_header_names()
    }
    fn set_request_header(&mut self, name: &str, value: &str) {
        self.host.set_request_header(name, value)
    }
    fn remove_request_header(&mut self, name: &str) {
        self.host.remove_request_header(name)
    }
    fn set_response_header(&mut self, name: &str, value: &str) {
        self.host.set_response_header(name, value)
    }
    fn response_header(&self, name: &str) -> Option<String> {
        self.host.response_header(name)
    }
    fn remove_response_header(&mut self, name: &str) {
        self.host.remove_response_header(name)
    }
    fn response_body(&self, start: usize, len: usize) -> Option<Vec<u8>> {
        self.host.response_body(start, len)
    }
    fn set_response_body(
        &mut self,
        start: usize,
        len: usize,
        bytes: &[u8],
    ) -> Result<(), HostError> {
        self.host.set_response_body(start, len, bytes)
    }
    fn increment_counter(&mut self, name: &str, by: u64) {
        self.host.increment_counter(name, by)
    }
    fn request_body(&self, start: usize, len: usize) -> Option<Vec<u8>> {
        self.host.request_body(start, len)
    }
    fn replace_body_prefix(&mut self, drain: usize, prefix: &[u8]) -> Result<(), HostError> {
        self.replaced = Some((drain, prefix.to_vec()));
        Ok(())
    }
    fn dispatch_classify(
        &mut self,
        _cluster: &str,
        message: &[u8],
        _timeout: Duration,
    ) -> Result<u32, HostError> {
        self.dispatched = Some(Instant::now());
        self.request = message.to_vec();
        Ok(1)
    }
    fn grpc_response_body(&self, len: usize) -> Option<Vec<u8>> {
        self.host.grpc_response_body(len)
    }
    fn send_response(&mut self, status: u16, headers: &[(&str, &str)], body: &[u8]) {
        self.host.send_response(status, headers, body)
    }
    fn resume_request(&mut self) {
        self.host.resume_request()
    }
    fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }
}

/// Where the bulk of a generated body is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// One long last user turn (a pasted document, then the question): the
    /// whole text must be compressed once it is complete.
    LastTurn,
    /// A long conversation (user / assistant turns of about 2 KB) ending
    /// with a short question: the bulk is history; all its user turns are
    /// analysed as each message ends and compressed as the scan text at
    /// dispatch.
    History,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::LastTurn => "long last turn",
            Shape::History => "long history",
        }
    }
}

/// A chat request body of about `size` bytes.
fn body_of_size(size: usize, shape: Shape) -> Vec<u8> {
    match shape {
        Shape::LastTurn => last_turn_body(size),
        Shape::History => history_body(size),
    }
}

fn classify_reply() -> Vec<u8> {
    instant_reply(String::new(), 500).encode_to_vec()
}

/// One request through the filter: (last byte → dispatch, filter CPU,
/// compression as the filter reports it in `x-semroute-timing`), µs.
fn run_filter(
    config: &Rc<FilterConfig>,
    body: &[u8],
    chunk: usize,
    reply: &[u8],
) -> (f64, f64, f64) {
    let calibration = Rc::new(Cell::new(TokenCalibration::default()));
    let mut f = HttpFilter::new(Rc::clone(config), calibration);
    let mut host = BenchHost::new(body.len(), reply.to_vec());
    let mut cpu = Duration::ZERO;
    let t = Instant::now();
    let a = f.on_request_headers(&mut host, false);
    cpu += t.elapsed();
    assert_eq!(a, Action::Pause, "the filter did not pause on headers");
    let mut last_start = None;
    let n = body.len().div_ceil(chunk);
    for (i, part) in body.chunks(chunk).enumerate() {
        host.host.body.extend_from_slice(part);
        let eos = i + 1 == n;
        let t = Instant::now();
        if eos {
            last_start = Some(t);
        }
        let buffered = host.host.body.len();
        f.on_request_body(&mut host, buffered, eos);
        // A chunk over `limits.max_scan_bytes_per_callback` leaves a backlog, which Envoy
        // continues from the root context's tick.
        while f.has_backlog() {
            f.on_backlog(&mut host);
        }
        cpu += t.elapsed();
    }
    let (Some(dispatched), Some(last)) = (host.dispatched, last_start) else {
        let status = host.host.sent.as_ref().map(|(status, _, _)| *status);
        panic!("no Classify dispatch (local reply {status:?})");
    };
    let to_dispatch = dispatched.saturating_duration_since(last);
    let t = Instant::now();
    f.on_grpc_response(&mut host, 1, 0, reply.len());
    cpu += t.elapsed();
    assert_eq!(host.host.resumed, 1, "the request was not resumed");
    assert_eq!(
        f.applied_route().and_then(|r| r.model.as_deref()),
        Some("math-model"),
        "unexpected route"
    );
    assert!(
        host.replaced.is_some(),
        "model was not spliced into the body"
    );
    let compress_ms = host
        .request_header("x-semroute-timing")
        .and_then(|t| timing(&t, "compress"))
        .unwrap_or(f64::NAN);
    (micros(to_dispatch), micros(cpu), compress_ms * 1000.0)
}

/// The buffered baseline: (last byte → request built, total CPU, parse and
/// extraction only), µs.
fn run_baseline(config: &FilterConfig, body: &[u8], chunk: usize) -> (f64, f64, f64) {
    let mut buffered = Vec::new();
    let mut cpu = Duration::ZERO;
    for part in body.chunks(chunk) {
        let t = Instant::now();
        buffered.extend_from_slice(part);
        cpu += t.elapsed();
    }
    let t = Instant::now();
    let v: Value = serde_json::from_slice(&buffered).expect("body is JSON");
    let text = last_user_text(&v);
    let scan_text = earlier_user_text(&v, config.limits.max_scan_text_bytes);
    let parsed = t.elapsed();
    let mut b = PromptBuilder::new(&config.compression);
    b.push_str(&text);
    b.end_segment();
    let compressed = b.compress_to_budget(&[]);
    let request = classify_request(ClassifyParts {
        request_id: "bench".into(),
        signals: vec!["domain".into(), "jailbreak".into(), "pii".into()],
        prompt: compressed,
        scan_text,
        scan_flagged: Vec::new(),
        scan_pii: Vec::new(),
        scan_pattern_text: String::new(),
        scan_reduction: None,
        pii_patterns_only: false,
    })
    .expect("the bench prompt is not empty")
    .encode_to_vec();
    let built = t.elapsed();
    std::hint::black_box(request);
    cpu += built;
    (micros(built), micros(cpu), micros(parsed))
}

/// The e-mail address masked in the restore benchmark's request.
const EMAIL: &str = "jane.doe@example.com";

/// An answer of about `bytes` bytes of prose with the placeholder in it: an SSE stream
/// of 4-character deltas (`sse`) or one JSON chat completion.
fn answer_of_size(bytes: usize, sse: bool) -> Vec<u8> {
    let mut prose = Prose(7);
    let mut text = String::new();
    // The SSE framing multiplies the text about 25 times at 4 characters per event.
    let want = if sse { bytes / 25 } else { bytes };
    while text.len() < want {
        text.push_str(&prose.text(80, usize::MAX));
        text.push_str(" <EMAIL_ADDRESS_1> ");
    }
    if !sse {
        let answer = json!({"object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]});
        return answer.to_string().into_bytes();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    for piece in chars.chunks(4) {
        let piece: String = piece.iter().collect();
        let event = json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "math-model",
            "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]});
        out.push_str(&format!("data: {event}\n\n"));
    }
    out.push_str("data: [DONE]\n\n");
    out.into_bytes()
}

/// One masked request, then `answer` through the response callbacks in `chunk`-byte
/// body chunks (a JSON answer is buffered by the filter, as Envoy does when it pauses):
/// the filter's time in the response body callbacks, µs.
fn run_restore(config: &Rc<FilterConfig>, answer: &[u8], sse: bool, chunk: usize) -> f64 {
    let body = json!({"model": "auto", "messages": [{"role": "user",
        "content": format!("What is the integral of x^2? Mail the answer to {EMAIL}.")}]})
    .to_string();
    let calibration = Rc::new(Cell::new(TokenCalibration::default()));
    let mut f = HttpFilter::new(Rc::clone(config), calibration);
    // The request side is not timed: the filter's own mock host serves it.
    let mut host = MockHost::new("POST", "/v1/chat/completions", &[]);
    f.on_request_headers(&mut host, false);
    host.body.extend_from_slice(body.as_bytes());
    let len = host.body.len();
    f.on_request_body(&mut host, len, true);
    let sent = &host.calls.first().expect("Classify request").1;
    let text = String::from_utf8_lossy(&sent.text);
    let at = text.find(EMAIL).expect("the e-mail address was sent") as u32;
    let mut reply = instant_reply(String::new(), 20);
    if let Some(p) = reply.pii.as_mut() {
        p.entities.push(PiiEntity {
            r#type: "EMAIL_ADDRESS".into(),
            start: at,
            end: at + EMAIL.len() as u32,
            score: 1.0,
            ..Default::default()
        });
    }
    let reply = reply.encode_to_vec();
    let reply_len = reply.len();
    host.reply = Some(reply);
    f.on_grpc_response(&mut host, 1, 0, reply_len);
    assert_eq!(host.resumed, 1, "the request was not resumed");
    let ctype = if sse {
        "text/event-stream"
    } else {
        "application/json"
    };
    host.response_headers = vec![("content-type".into(), ctype.into())];
    f.on_response_headers(&mut host);
    let mut spent = Duration::ZERO;
    let n = answer.len().div_ceil(chunk);
    for (i, part) in answer.chunks(chunk).enumerate() {
        if sse {
            host.response_body.clear();
        }
        host.response_body.extend_from_slice(part);
        let buffered = host.response_body.len();
        let t = Instant::now();
        f.on_response_body(&mut host, buffered, i + 1 == n);
        spent += t.elapsed();
    }
    micros(spent)
}

/// The envoy.yaml configuration with `pii.restore` set to `restore`.
fn restore_config(restore: bool) -> Rc<FilterConfig> {
    let mut v = default_filter_config().unwrap_or_else(|e| usage(&format!("envoy.yaml: {e}")));
    v["pii"]["restore"] = json!(restore);
    match FilterConfig::from_json(v.to_string().as_bytes()) {
        Ok(c) => Rc::new(c),
        Err(e) => usage(&format!("envoy.yaml filter configuration: {e}")),
    }
}

/// The PII restore table: per answer kind and size, the filter's time per MiB with and
/// without restore.
fn restore_table(args: &Args) {
    let with = restore_config(true);
    let without = restore_config(false);
    println!();
    println!("## PII restore in answers: filter time in the response body callbacks (native)");
    println!();
    println!("| answer | size | chunks | runs | restore p50 | restore per MiB (p50) | restore p99 | no restore p50 | no restore per MiB (p50) |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for sse in [true, false] {
        for size in [1 << 20, 4 << 20] {
            let answer = answer_of_size(size, sse);
            for _ in 0..2 {
                run_restore(&with, &answer, sse, args.chunk);
            }
            let (mut on, mut off) = (Vec::new(), Vec::new());
            let started = Instant::now();
            while on.len() < args.runs && started.elapsed().as_secs_f64() < args.max_seconds {
                on.push(run_restore(&with, &answer, sse, args.chunk));
                off.push(run_restore(&without, &answer, sse, args.chunk));
            }
            let mib = answer.len() as f64 / (1 << 20) as f64;
            let (p_on, p_off) = (quantile(&on, 0.5), quantile(&off, 0.5));
            println!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                if sse {
                    "SSE, 4-character deltas"
                } else {
                    "JSON"
                },
                size_name(answer.len()),
                answer.len().div_ceil(args.chunk),
                on.len(),
                fmt_us(p_on),
                fmt_us(p_on / mib),
                fmt_us(quantile(&on, 0.99)),
                fmt_us(p_off),
                fmt_us(p_off / mib),
            );
        }
    }
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn fmt_us(us: f64) -> String {
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.1} µs")
    }
}

struct Row {
    shape: Shape,
    target: usize,
    size: usize,
    chunks: usize,
    runs: usize,
    tail: Vec<f64>,
    cpu: Vec<f64>,
    compress: Vec<f64>,
    base_tail: Vec<f64>,
    base_cpu: Vec<f64>,
    base_parse: Vec<f64>,
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    let config = match FilterConfig::from_json(&envoy_filter_config()) {
        Ok(c) => Rc::new(c),
        Err(e) => usage(&format!("envoy.yaml filter configuration: {e}")),
    };
    let reply = classify_reply();
    println!(
        "# filter-bench: semroute filter natively (HttpFilter behind its Host trait), \
         {} B chunks, up to {} runs per size after 2 warm-up runs, compression budget {} tokens, \
         configuration from envoy.yaml (small_body_bytes {})",
        args.chunk, args.runs, config.compression.budget_tokens, config.limits.small_body_bytes
    );
    println!(
        "# baseline: buffer every chunk, then serde_json::from_slice + last user message + \
         the same PromptBuilder compression + ClassifyRequest encoding"
    );
    let mut rows = Vec::new();
    for (shape, &size) in [Shape::LastTurn, Shape::History]
        .into_iter()
        .flat_map(|sh| args.sizes.iter().map(move |s| (sh, s)))
    {
        let body = body_of_size(size, shape);
        serde_json::from_slice::<Value>(&body).expect("generated body is JSON");
        for _ in 0..2 {
            run_filter(&config, &body, args.chunk, &reply);
            run_baseline(&config, &body, args.chunk);
        }
        let mut row = Row {
            shape,
            target: size,
            size: body.len(),
            chunks: body.len().div_ceil(args.chunk),
            runs: 0,
            tail: Vec::new(),
            cpu: Vec::new(),
            compress: Vec::new(),
            base_tail: Vec::new(),
            base_cpu: Vec::new(),
            base_parse: Vec::new(),
        };
        let started = Instant::now();
        while row.runs < args.runs && started.elapsed().as_secs_f64() < args.max_seconds {
            let (tail, cpu, compress) = run_filter(&config, &body, args.chunk, &reply);
            let (btail, bcpu, bparse) = run_baseline(&config, &body, args.chunk);
            row.tail.push(tail);
            row.cpu.push(cpu);
            row.compress.push(compress);
            row.base_tail.push(btail);
            row.base_cpu.push(bcpu);
            row.base_parse.push(bparse);
            row.runs += 1;
        }
        eprintln!(
            "filter-bench: {} {} done ({} runs)",
            shape.name(),
            size_name(size),
            row.runs
        );
        rows.push(row);
    }

    println!();
    println!("## Last body byte → Classify dispatch (native)");
    println!();
    println!("| shape | body | chunks | runs | filter p50 | filter p99 | of which compression p50 | buffered p50 | buffered p99 | of which serde_json parse p50 | buffered / filter (p50) |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let (f50, b50) = (quantile(&r.tail, 0.5), quantile(&r.base_tail, 0.5));
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.shape.name(),
            size_name(r.target),
            r.chunks,
            r.runs,
            fmt_us(f50),
            fmt_us(quantile(&r.tail, 0.99)),
            fmt_us(quantile(&r.compress, 0.5)),
            fmt_us(b50),
            fmt_us(quantile(&r.base_tail, 0.99)),
            fmt_us(quantile(&r.base_parse, 0.5)),
            if f50 < 1.0 {
                "dispatched before the last byte".to_string()
            } else {
                format!("{:.1}x", b50 / f50)
            }
        );
    }
    println!();
    println!("## Filter CPU time per request (native, all callbacks)");
    println!();
    println!("| shape | body | filter p50 | filter p99 | filter per MiB (p50) | buffered p50 | buffered p99 | filter / buffered (p50) |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        let (f50, b50) = (quantile(&r.cpu, 0.5), quantile(&r.base_cpu, 0.5));
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} |",
            r.shape.name(),
            size_name(r.target),
            fmt_us(f50),
            fmt_us(quantile(&r.cpu, 0.99)),
            fmt_us(f50 * (1 << 20) as f64 / r.size as f64),
            fmt_us(b50),
            fmt_us(quantile(&r.base_cpu, 0.99)),
            f50 / b50.max(0.1)
        );
    }
    restore_table(&args);
}
