//! Router benchmarks through real Envoy, each against the same Envoy without
//! the semroute filter, measured in one run (requests to the two alternate).
//!
//! ```text
//! cargo run --release -p semroute-e2e --bin router-bench -- [options]
//!   --mode overhead|filter|fairness|capacity|all   which table(s) (default all)
//!   --requests N                 timed requests per size and router (default 30; overhead:
//!                                15, 10 from 16K tokens)
//!   --warmup N                   untimed requests per size and router first (default 3)
//!   --tokens 100,500,2000,8000,16000   prompt sizes of the overhead table, in tokens
//!   --bytes 2048,65536,524288,1048576,4194304   body sizes of the filter table, in bytes
//!   --max-seconds S              stop a size early after S seconds (default 40)
//!   --pace-us N                  filter table: pause N µs after each 16 KiB of body
//!                                (default 200), so Envoy sees the body arrive in
//!                                chunks as over a network, not in one read
//!   --sweep-pace-us A,B,..       arrival-rate table: the long last turn again at
//!                                each of these pauses (default 1000,4000; 0: none)
//!   --concurrency 1,4,16,64      capacity table: closed-loop client counts
//!   --capacity-seconds S         capacity table: seconds per row (default 8)
//!   --capacity-tokens N          capacity table: prompt size in tokens (default 500)
//!   --think-ms N                 capacity table: a closed-loop client's pause between an
//!                                answer and its next request (default 500)
//! ```
//!
//! - **overhead**: the whole router (filter + the real daemon and models, all three
//!   signals) on the daemon's served configuration (`config/daemon.toml`) and on the
//!   baseline one (`config/daemon.shipped.toml`), against plain Envoy, the three measured
//!   in the same run: client-side latency p50 / p99 of `POST /v1/chat/completions` with
//!   `"model": "auto"`, sequential requests, each round a different prompt of real prose
//!   of about N tokens (0.75 words per token): passages of the evaluation data
//!   (`$EVAL_DIR/benign/documents.jsonl`, default `../shared/eval`, read at run time)
//!   drawn by a fixed seed, then a short question; the overhead (router p50 − plain p50)
//!   of each and their ratio, the daemon's time from `x-semroute-timing`, and each
//!   daemon's RSS after the load. Both daemons run with `runtime.spinning = false` there
//!   (two spinning pools would take the cores from each other), so a second table
//!   measures the served router alone with plain Envoy, on `config/daemon.toml` unchanged
//!   (spinning pool threads): the configuration a node runs.
//! - **capacity**: the whole router under load, with the filter's own daemon deadline
//!   (`daemon.timeout_ms` of `envoy.yaml`) and failure mode: closed-loop clients at each
//!   concurrency (each client pausing `--think-ms` between an answer and its next request, as
//!   a user reading it would: clients that resend at once the moment a fallback comes back
//!   would only measure how fast 2 cores spin through Envoy), then 16 clients sending back
//!   to back, whose classified requests per second are the capacity (16 pausing clients
//!   cannot offer more than 16 per pause), then open-loop arrivals at 4x that capacity,
//!   each request a different prompt of about N tokens
//!   (so no cache answers it). Per row: throughput, latency, the share classified and
//!   fallen back (`x-semroute-fallback`), and goodput: classified requests answered within
//!   the deadline per second; with the daemon's refusals by reason from its metrics.
//! - **fairness**: latency of short requests while two other clients keep the
//!   same Envoy worker busy with 6 MiB bodies, with the filter's per-callback scan
//!   bound (`limits.max_scan_bytes_per_callback` of `envoy.yaml`) and without one
//!   (instant fake daemon).
//! - **filter**: the filter alone inside Envoy: the daemon is replaced by an
//!   in-process gRPC server that answers `Classify` at once (math, no
//!   jailbreak, no PII), so the difference to plain Envoy is the filter's
//!   cost; the filter's own `x-semroute-timing` gives the time from the last
//!   body byte to the dispatch (`tail`) and its callback time (`filter`).
//!   A third Envoy runs the buffered design in the filter's place
//!   (`tests/buffered-baseline`, built by `make bench`:
//!   whole body, then `serde_json`, the same compression and the same call),
//!   so the streaming tail is compared with the buffered one inside V8.
//!   Two body shapes: one long last user turn (all of it compressed once
//!   complete) and a long history of ~2 KB turns ending with a short
//!   question.
//!
//! Both Envoys are rendered from the repository's `envoy.yaml` like the
//! end-to-end tests (the baseline with the wasm filter removed), one worker
//! each, each with its own local upstreams. Requests use one keep-alive
//! connection per router and a `content-length`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use semroute_e2e::bench::{
    bench_eval_dir, chat_body, history_body, instant_reply, last_turn_body, quantile, size_name,
    timing, Prose, ProsePrompts, QUESTION,
};
use semroute_e2e::http_client::{Answer, Conn, PACE_CHUNK};
use semroute_e2e::{default_filter_config, target_dir, Router, RouterOptions};
use semroute_proto::v1::classifier_server::{Classifier, ClassifierServer};
use semroute_proto::v1::{ClassifyRequest, ClassifyResponse};
use serde_json::{json, Value};

mod capacity;
mod fairness;
mod filter;
mod overhead;

use capacity::capacity;
use fairness::fairness;
use filter::filter;
use overhead::overhead;

/// Which tables to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Mode {
    Overhead,
    Filter,
    Fairness,
    Capacity,
    All,
}

/// Router benchmarks through real Envoy, each against the same Envoy without the filter.
#[derive(Debug, clap::Parser)]
#[command(name = "router-bench")]
struct Args {
    /// Which table(s).
    #[arg(long, value_enum, default_value_t = Mode::All)]
    mode: Mode,
    /// Timed requests per size and router (default 30; overhead: 15, 10 from 16K tokens).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    requests: Option<u64>,
    /// Untimed requests per size and router first.
    #[arg(long, default_value_t = 3)]
    warmup: usize,
    /// Prompt sizes of the overhead table, in tokens.
    #[arg(long, value_delimiter = ',', default_values_t = [100, 500, 2000, 8000, 16000])]
    tokens: Vec<usize>,
    /// Body sizes of the filter table, in bytes.
    #[arg(long, value_delimiter = ',', default_values_t = [2048, 65536, 524_288, 1_048_576, 4_194_304])]
    bytes: Vec<usize>,
    /// Stop a size early after this many seconds.
    #[arg(long, default_value_t = 40.0)]
    max_seconds: f64,
    /// Filter table: pause this many µs after each 16 KiB of body, so that Envoy sees the
    /// body arrive in chunks as over a network.
    #[arg(long, default_value_t = 200)]
    pace_us: u64,
    /// Arrival-rate table: the long last turn again at each of these pauses (0: none).
    #[arg(long, value_delimiter = ',', default_values_t = [1000, 4000])]
    sweep_pace_us: Vec<usize>,
    /// Capacity table: closed-loop client counts.
    #[arg(long, value_delimiter = ',', default_values_t = [1, 4, 16, 64],
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    concurrency: Vec<usize>,
    /// Capacity table: seconds per row.
    #[arg(long, default_value_t = 8.0, value_parser = positive_seconds)]
    capacity_seconds: f64,
    /// Capacity table: prompt size in tokens.
    #[arg(long, default_value_t = 500)]
    capacity_tokens: usize,
    /// Capacity table: a closed-loop client's pause between an answer and its next request.
    #[arg(long, default_value_t = 500)]
    think_ms: u64,
}

impl Args {
    /// Whether the tables of `mode` are to be printed.
    fn runs(&self, mode: Mode) -> bool {
        self.mode == mode || self.mode == Mode::All
    }
    /// Timed requests per size and router (the filter and fairness tables).
    fn requests(&self) -> usize {
        self.requests.map_or(30, |n| n as usize)
    }
}

fn positive_seconds(v: &str) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() => Ok(s),
        _ => Err(format!("{v:?} is not a positive number of seconds")),
    }
}

/// Stops the benchmark with a runtime error. A panic, so that the routers
/// already started are dropped (their processes stopped) while unwinding.
fn die(msg: &str) -> ! {
    panic!("router-bench: {msg}")
}

// ------------------------------------------------------------------ client

// --------------------------------------------------------------- prompts

/// Builds a request body of about the given size in bytes.
type MakeBody = fn(usize) -> Vec<u8>;

// ------------------------------------------------------------ fake daemon

/// Answers every `Classify` at once: math, no jailbreak, no personal data.
struct InstantDaemon;

#[tonic::async_trait]
impl Classifier for InstantDaemon {
    async fn classify(
        &self,
        request: tonic::Request<ClassifyRequest>,
    ) -> Result<tonic::Response<ClassifyResponse>, tonic::Status> {
        let req = request.into_inner();
        Ok(tonic::Response::new(instant_reply(req.request_id, 512)))
    }
}

/// Serves [`InstantDaemon`] on `socket` from a background runtime.
fn start_instant_daemon(socket: &Path) -> tokio::runtime::Runtime {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| die(&format!("tokio: {e}")));
    let _ = std::fs::remove_file(socket);
    let listener = {
        let _guard = rt.enter();
        tokio::net::UnixListener::bind(socket)
            .unwrap_or_else(|e| die(&format!("bind {}: {e}", socket.display())))
    };
    rt.spawn(async move {
        let incoming = tokio_stream::wrappers::UnixListenerStream::new(listener);
        if let Err(e) = tonic::transport::Server::builder()
            .add_service(ClassifierServer::new(InstantDaemon))
            .serve_with_incoming(incoming)
            .await
        {
            eprintln!("router-bench: instant daemon stopped: {e}");
        }
    });
    rt
}

// ------------------------------------------------------------- measuring

fn upstream_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap_or_else(|e| die(&format!("current_exe: {e}")));
    let bin = exe.with_file_name("semroute-upstream");
    if !bin.is_file() {
        die(&format!(
            "{} not found: cargo build --release -p semroute-e2e --bins",
            bin.display()
        ));
    }
    bin
}

fn start(options: RouterOptions) -> Router {
    Router::start(&upstream_bin(), options)
        .unwrap_or_else(|e| die(&format!("cannot start the router: {e}")))
}

/// The filter configuration of `envoy.yaml` with a daemon deadline that
/// tolerates a loaded machine (a fallback would skew the numbers).
fn bench_filter_config() -> Value {
    let mut c = default_filter_config().unwrap_or_else(|e| die(&e));
    c["daemon"]["timeout_ms"] = json!(10_000);
    c
}

/// The `x-semroute-timing` header the upstream received (echoed in its
/// `semroute.headers` report).
fn upstream_timing(a: &Answer) -> Option<String> {
    let v: Value = serde_json::from_slice(&a.body).ok()?;
    v["semroute"]["headers"]["x-semroute-timing"]
        .as_str()
        .map(str::to_string)
}

fn served_by(a: &Answer) -> String {
    serde_json::from_slice::<Value>(&a.body)
        .ok()
        .and_then(|v| v["semroute"]["served_by"].as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Per size: client latencies (ms) with and without the filter (and through the
/// buffered baseline, when measured), and the timings (ms) by name that the filter and
/// the baseline report.
#[derive(Default)]
struct Sample {
    with: Vec<f64>,
    without: Vec<f64>,
    buffered: Vec<f64>,
    timings: Vec<(String, f64)>,
    buffered_timings: Vec<(String, f64)>,
    routed: std::collections::BTreeMap<String, usize>,
    fallbacks: usize,
}

/// `name`'s values among `timings`.
fn named(timings: &[(String, f64)], name: &str) -> Vec<f64> {
    timings
        .iter()
        .filter(|(n, _)| n == name)
        .map(|(_, v)| *v)
        .collect()
}

impl Sample {
    fn timing(&self, name: &str) -> Vec<f64> {
        named(&self.timings, name)
    }

    fn buffered_timing(&self, name: &str) -> Vec<f64> {
        named(&self.buffered_timings, name)
    }
}

/// The routers a measurement alternates between.
#[derive(Clone, Copy, PartialEq)]
enum Target {
    /// Envoy with the semroute filter.
    Filter,
    /// The same Envoy without it.
    Plain,
    /// The same Envoy with the buffered baseline module in the filter's place.
    Buffered,
}

/// The `x-semroute-timing` entries of `t` pushed onto `out`.
fn push_timings(out: &mut Vec<(String, f64)>, t: &str) {
    for name in [
        "scan",
        "compress",
        "daemon",
        "inference",
        "encoder",
        "pii",
        "tail",
        "filter",
        "total",
    ] {
        if let Some(v) = timing(t, name) {
            out.push((name.to_string(), v));
        }
    }
}

/// A copy of the daemon configuration `src` (relative to the workspace root) written to
/// `dir/name`, with `key = value` in its `[section]`: the line replaced where the section
/// sets the key, added after the section's header otherwise. The copy's relative paths
/// still resolve, since the daemon starts in the workspace root.
fn daemon_config_with(
    src: &str,
    dir: &Path,
    name: &str,
    section: &str,
    key: &str,
    value: &str,
) -> PathBuf {
    let path = semroute_e2e::workspace_root().join(src);
    let toml =
        std::fs::read_to_string(&path).unwrap_or_else(|e| die(&format!("{}: {e}", path.display())));
    let header = format!("[{section}]");
    let setting = format!("{key} = {value}");
    let (mut in_section, mut header_at, mut set) = (false, None, false);
    let mut lines: Vec<String> = Vec::new();
    for line in toml.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            in_section = trimmed.starts_with(&header);
            if in_section {
                header_at = Some(lines.len());
            }
        } else if in_section
            && trimmed
                .split_once('=')
                .is_some_and(|(k, _)| k.trim() == key)
        {
            lines.push(setting.clone());
            set = true;
            continue;
        }
        lines.push(line.to_string());
    }
    match (set, header_at) {
        (true, _) => {}
        (false, Some(at)) => lines.insert(at + 1, setting),
        (false, None) => die(&format!("{src} has no {header} section")),
    }
    let out = dir.join(name);
    std::fs::write(&out, lines.join("\n") + "\n")
        .unwrap_or_else(|e| die(&format!("{}: {e}", out.display())));
    out
}

/// Sends `body` to the routers in turn (with the filter, without it, and through the
/// buffered baseline when given): `warmup` untimed rounds, then up to `requests` timed
/// rounds within `max_seconds`.
fn measure(
    with: &mut Conn,
    without: &mut Conn,
    mut buffered: Option<&mut Conn>,
    body: &[u8],
    warmup: usize,
    requests: usize,
    max_seconds: f64,
) -> Sample {
    let mut s = Sample::default();
    let started = Instant::now();
    let mut targets = vec![Target::Filter, Target::Plain];
    if buffered.is_some() {
        targets.push(Target::Buffered);
    }
    for i in 0..warmup + requests {
        if i >= warmup && started.elapsed().as_secs_f64() > max_seconds && s.with.len() >= 5 {
            break;
        }
        // Rotate which router goes first, so drift hits all alike.
        for k in 0..targets.len() {
            let target = targets[(i + k) % targets.len()];
            let conn = match (target, buffered.as_deref_mut()) {
                (Target::Filter, _) => &mut *with,
                (Target::Plain, _) => &mut *without,
                (Target::Buffered, Some(b)) => b,
                (Target::Buffered, None) => continue,
            };
            let t = Instant::now();
            let a = conn
                .post("/v1/chat/completions", body)
                .unwrap_or_else(|e| die(&format!("request failed: {e}")));
            let ms = t.elapsed().as_secs_f64() * 1e3;
            if a.status != 200 {
                die(&format!(
                    "status {} from the {} router: {}",
                    a.status,
                    match target {
                        Target::Filter => "filtered",
                        Target::Plain => "plain",
                        Target::Buffered => "buffered baseline",
                    },
                    String::from_utf8_lossy(&a.body)
                ));
            }
            if i < warmup {
                continue;
            }
            match target {
                Target::Filter => {
                    s.with.push(ms);
                    *s.routed.entry(served_by(&a)).or_default() += 1;
                    if a.header("x-semroute-fallback").is_some() {
                        s.fallbacks += 1;
                    }
                    if let Some(t) = upstream_timing(&a) {
                        push_timings(&mut s.timings, &t);
                    }
                }
                Target::Plain => s.without.push(ms),
                Target::Buffered => {
                    s.buffered.push(ms);
                    if let Some(t) = upstream_timing(&a) {
                        push_timings(&mut s.buffered_timings, &t);
                    }
                }
            }
        }
    }
    s
}

fn f2(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else {
        format!("{v:.2}")
    }
}

/// Waits until the real daemon answers through Envoy (models loaded).
fn warm_daemon(conn: &mut Conn) {
    let body = chat_body("warm-up: what is 1 + 1?");
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        if let Ok(a) = conn.post("/v1/chat/completions", body.as_bytes()) {
            if a.status == 200 && a.header("x-semroute-fallback").is_none() {
                return;
            }
        }
        if Instant::now() > deadline {
            die("the daemon never answered through Envoy within 180 s");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// POSTs `body` to the chat path; any status but 200 ends the bench.
fn post_ok(conn: &mut Conn, body: &[u8]) {
    let a = conn
        .post("/v1/chat/completions", body)
        .unwrap_or_else(|e| die(&format!("request failed: {e}")));
    if a.status != 200 {
        die(&format!(
            "status {}: {}",
            a.status,
            String::from_utf8_lossy(&a.body)
        ));
    }
}

fn main() {
    let mut args = <Args as clap::Parser>::parse();
    args.sweep_pace_us.retain(|&p| p > 0);
    if let Err(e) = semroute_e2e::envoy_bin() {
        die(&e);
    }
    println!(
        "# router-bench: Envoy from envoy.yaml (one worker each), {} timed requests per size and \
         router{} after {} warm-up, at most {} s per size",
        args.requests(),
        if args.requests.is_some() {
            ""
        } else {
            " (overhead: 15, 10 from 16K tokens)"
        },
        args.warmup,
        args.max_seconds
    );
    if args.runs(Mode::Filter) {
        filter(&args);
    }
    if args.runs(Mode::Fairness) {
        fairness(&args);
    }
    if args.runs(Mode::Overhead) {
        overhead(&args);
    }
    if args.runs(Mode::Capacity) {
        capacity(&args);
    }
}
