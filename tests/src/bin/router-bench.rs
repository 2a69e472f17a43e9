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
//!   daemon's RSS after the load.
//! - **capacity**: the whole router under load, with the filter's own daemon deadline
//!   (`daemon.timeout_ms` of `envoy.yaml`) and failure mode: closed-loop clients at each
//!   concurrency (each client pausing `--think-ms` between an answer and its next request, as
//!   a user reading it would: clients that resend at once the moment a fallback comes back
//!   would only measure how fast 2 cores spin through Envoy), then open-loop arrivals at 4x the capacity measured at concurrency 16
//!   (classified requests per second), each request a different prompt of about N tokens
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
//!   (`filter-wasm/examples/buffered_baseline.rs`, built by `make bench`:
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

struct Args {
    mode: String,
    requests: usize,
    /// `--requests` was given (the overhead table has its own default otherwise).
    requests_given: bool,
    warmup: usize,
    tokens: Vec<usize>,
    bytes: Vec<usize>,
    max_seconds: f64,
    pace_us: u64,
    sweep_pace_us: Vec<usize>,
    concurrency: Vec<usize>,
    capacity_seconds: f64,
    capacity_tokens: usize,
    think_ms: u64,
}

fn usage(msg: &str) -> ! {
    eprintln!("router-bench: {msg}");
    eprintln!(
        "usage: router-bench [--mode overhead|filter|fairness|capacity|all] [--requests N] \
         [--warmup N] [--tokens A,B,..] [--bytes A,B,..] [--max-seconds S] [--pace-us N] \
         [--sweep-pace-us A,B,..] [--concurrency A,B,..] [--capacity-seconds S] \
         [--capacity-tokens N] [--think-ms N]"
    );
    std::process::exit(2)
}

/// Stops the benchmark with a runtime error. A panic, so that the routers
/// already started are dropped (their processes stopped) while unwinding.
fn die(msg: &str) -> ! {
    panic!("router-bench: {msg}")
}

fn list(v: &str) -> Vec<usize> {
    v.split(',')
        .map(|s| s.trim().parse().unwrap_or_else(|_| usage("bad list")))
        .collect()
}

fn parse_args() -> Args {
    let mut a = Args {
        mode: "all".into(),
        requests: 30,
        requests_given: false,
        warmup: 3,
        tokens: vec![100, 500, 2000, 8000, 16000],
        bytes: vec![2048, 65536, 524_288, 1_048_576, 4_194_304],
        max_seconds: 40.0,
        pace_us: 200,
        sweep_pace_us: vec![1000, 4000],
        concurrency: vec![1, 4, 16, 64],
        capacity_seconds: 8.0,
        capacity_tokens: 500,
        think_ms: 500,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .unwrap_or_else(|| usage(&format!("{flag} needs a value")))
        };
        match flag.as_str() {
            "--mode" => a.mode = value(),
            "--requests" => {
                a.requests = value().parse().unwrap_or_else(|_| usage("bad N"));
                a.requests_given = true;
            }
            "--warmup" => a.warmup = value().parse().unwrap_or_else(|_| usage("bad N")),
            "--tokens" => a.tokens = list(&value()),
            "--bytes" => a.bytes = list(&value()),
            "--max-seconds" => a.max_seconds = value().parse().unwrap_or_else(|_| usage("bad S")),
            "--pace-us" => a.pace_us = value().parse().unwrap_or_else(|_| usage("bad µs")),
            "--sweep-pace-us" => {
                a.sweep_pace_us = list(&value()).into_iter().filter(|&p| p > 0).collect()
            }
            "--concurrency" => a.concurrency = list(&value()),
            "--capacity-seconds" => {
                a.capacity_seconds = value().parse().unwrap_or_else(|_| usage("bad S"))
            }
            "--capacity-tokens" => {
                a.capacity_tokens = value().parse().unwrap_or_else(|_| usage("bad N"))
            }
            "--think-ms" => a.think_ms = value().parse().unwrap_or_else(|_| usage("bad ms")),
            "-h" | "--help" => usage("help"),
            other => usage(&format!("unknown option {other}")),
        }
    }
    if !["overhead", "filter", "fairness", "capacity", "all"].contains(&a.mode.as_str())
        || a.requests == 0
    {
        usage("bad --mode or --requests");
    }
    if a.concurrency.contains(&0) || a.capacity_seconds.is_nan() || a.capacity_seconds <= 0.0 {
        usage("bad --concurrency or --capacity-seconds");
    }
    a
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
        "tail",
        "filter",
        "total",
    ] {
        if let Some(v) = timing(t, name) {
            out.push((name.to_string(), v));
        }
    }
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

/// The routers of the overhead table: plain Envoy, the router with the daemon on its
/// served configuration, the router with the daemon on the baseline configuration.
const OVERHEAD_ROUTERS: usize = 3;
/// Daemon configurations of the overhead table's two routers (served, baseline).
const SERVED_DAEMON_CONFIG: &str = "config/daemon.toml";
const BASELINE_DAEMON_CONFIG: &str = "config/daemon.shipped.toml";
/// Seed of the overhead table's prompt draw, so that runs send the same prompts.
const OVERHEAD_SEED: u64 = 0x5eed_0f0e_4d5e;

/// One prompt size of the overhead table, every router measured on the same prompts.
#[derive(Default)]
struct OverheadRow {
    tokens: usize,
    /// Body bytes of each prompt sent.
    bytes: Vec<usize>,
    /// Client latency, ms, per router (plain, served, baseline).
    ms: [Vec<f64>; OVERHEAD_ROUTERS],
    /// `x-semroute-timing` entries per router with the filter (served, baseline).
    timings: [Vec<(String, f64)>; 2],
    /// Served router: upstream model (or the block) per request.
    routed: std::collections::BTreeMap<String, usize>,
    /// Fallbacks per router with the filter (served, baseline).
    fallbacks: [usize; 2],
}

/// Sends each router in turn a prompt of about `tokens` tokens, a new one per round
/// (the same prompt to the three routers of a round): `warmup` untimed rounds, then up
/// to `requests` timed rounds within `max_seconds`.
fn measure_overhead(
    conns: &mut [Conn; OVERHEAD_ROUTERS],
    prompts: &mut ProsePrompts,
    tokens: usize,
    warmup: usize,
    requests: usize,
    max_seconds: f64,
) -> OverheadRow {
    const NAMES: [&str; OVERHEAD_ROUTERS] = ["plain", "served", "baseline"];
    let mut row = OverheadRow {
        tokens,
        ..Default::default()
    };
    let started = Instant::now();
    for i in 0..warmup + requests {
        if i >= warmup && started.elapsed().as_secs_f64() > max_seconds && row.ms[1].len() >= 5 {
            break;
        }
        let body = chat_body(&prompts.next(tokens)).into_bytes();
        if i >= warmup {
            row.bytes.push(body.len());
        }
        // Rotate which router goes first, so drift hits all alike.
        for k in 0..OVERHEAD_ROUTERS {
            let r = (i + k) % OVERHEAD_ROUTERS;
            let t = Instant::now();
            let a = conns[r]
                .post("/v1/chat/completions", &body)
                .unwrap_or_else(|e| die(&format!("request failed: {e}")));
            let ms = t.elapsed().as_secs_f64() * 1e3;
            // 403: the router blocked the prompt (a jailbreak score or personal data the
            // policy does not allow); it was classified all the same.
            if a.status != 200 && !(a.status == 403 && r > 0) {
                die(&format!(
                    "status {} from the {} router: {}",
                    a.status,
                    NAMES[r],
                    String::from_utf8_lossy(&a.body)
                ));
            }
            if i < warmup {
                continue;
            }
            row.ms[r].push(ms);
            if r == 0 {
                continue;
            }
            if a.header("x-semroute-fallback").is_some() {
                row.fallbacks[r - 1] += 1;
            }
            if let Some(t) = upstream_timing(&a) {
                push_timings(&mut row.timings[r - 1], &t);
            }
            if r == 1 {
                let to = match a.status {
                    200 => served_by(&a),
                    s => format!(
                        "{s} {}",
                        a.header("x-semroute-decision").unwrap_or("blocked")
                    ),
                };
                *row.routed.entry(to).or_default() += 1;
            }
        }
    }
    row
}

fn mib(kib: Option<u64>) -> String {
    kib.map_or("-".into(), |k| format!("{:.0}", k as f64 / 1024.0))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn overhead(args: &Args) {
    let eval_dir = bench_eval_dir();
    let mut prompts = ProsePrompts::load(&eval_dir, OVERHEAD_SEED).unwrap_or_else(|e| die(&e));
    let filter = bench_filter_config();
    // The default policy asks for all three signals of an `auto` request.
    if filter["auto_model"] != "auto"
        || filter["jailbreak"]["enabled"] != true
        || filter["pii"]["enabled"] != true
    {
        die("the filter configuration of envoy.yaml no longer asks for domain, jailbreak and pii");
    }
    let load_before = load_average();
    eprintln!(
        "router-bench: starting plain Envoy and the router twice (daemon on {SERVED_DAEMON_CONFIG}, \
         daemon on {BASELINE_DAEMON_CONFIG})"
    );
    let with_daemon = |config: &str| RouterOptions {
        daemon: true,
        daemon_config: Some(PathBuf::from(config)),
        filter_config: Some(filter.clone()),
        ..Default::default()
    };
    let (plain, served, baseline) = std::thread::scope(|s| {
        let plain = s.spawn(|| {
            start(RouterOptions {
                without_filter: true,
                ..Default::default()
            })
        });
        let served = s.spawn(|| start(with_daemon(SERVED_DAEMON_CONFIG)));
        let baseline = s.spawn(|| start(with_daemon(BASELINE_DAEMON_CONFIG)));
        let join = |h: std::thread::ScopedJoinHandle<'_, Router>| {
            h.join().unwrap_or_else(|_| die("a router failed to start"))
        };
        (join(plain), join(served), join(baseline))
    });
    let mut conns = [&plain, &served, &baseline].map(|r| Conn::new(r.layout.port, Duration::ZERO));
    warm_daemon(&mut conns[1]);
    warm_daemon(&mut conns[2]);
    let rss_start = [served.daemon_rss_kib(), baseline.daemon_rss_kib()];
    let mut rows = Vec::new();
    for &tokens in &args.tokens {
        let requests = match args.requests_given {
            true => args.requests,
            false if tokens >= 16_000 => 10,
            false => 15,
        };
        let row = measure_overhead(
            &mut conns,
            &mut prompts,
            tokens,
            args.warmup,
            requests,
            args.max_seconds,
        );
        eprintln!(
            "router-bench: overhead ~{tokens} tokens done ({} requests per router)",
            row.ms[1].len()
        );
        rows.push(row);
    }
    let rss_end = [served.daemon_rss_kib(), baseline.daemon_rss_kib()];
    let peak = [&served, &baseline].map(|r| {
        r.daemon
            .as_ref()
            .and_then(|d| d.id())
            .and_then(|pid| semroute_e2e::proc_status_kib(pid, "VmHWM"))
    });
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    println!();
    println!("## Router overhead through Envoy (real daemon and models, real prose)");
    println!();
    println!(
        "- client latency in ms of sequential `POST /v1/chat/completions` with `\"model\": \"auto\"` \
         (domain, jailbreak and pii asked of the daemon); three routers measured in the same run, \
         each round sending one prompt to each in turn: **plain** = the same Envoy without the \
         semroute filter, **served** = the router with the daemon on `{SERVED_DAEMON_CONFIG}`, \
         **baseline** = the router with the daemon on `{BASELINE_DAEMON_CONFIG}` (models as \
         shipped, 256-token windows, extra jailbreak passes always, one shared pool, no cache)"
    );
    println!(
        "- overhead = router p50 − plain p50; ratio = baseline overhead / served overhead; \
         filter daemon timeout raised to 10 s (no fallback skews the numbers)"
    );
    println!(
        "- prompts: passages of {} concatenated to about N tokens (0.75 words per token), then a \
         short question; a different prompt every round (seed {OVERHEAD_SEED:#x}), so no result \
         cache answers one; {} warm-up rounds per size",
        prompts.describe(),
        args.warmup
    );
    println!(
        "- {cores} cores; clients, the three Envoys (one worker each), upstreams and both daemons \
         share them; load average at the start {load_before}, at the end {}",
        load_average()
    );
    println!();
    println!("| prompt | body (mean) | n | plain p50 | plain p99 | served p50 | served p99 | baseline p50 | baseline p99 | overhead served p50 | overhead baseline p50 | ratio p50 |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        let p50 = |r: usize| quantile(&row.ms[r], 0.5);
        let p99 = |r: usize| quantile(&row.ms[r], 0.99);
        let (served_over, baseline_over) = (p50(1) - p50(0), p50(2) - p50(0));
        let mean_bytes = row.bytes.iter().sum::<usize>() / row.bytes.len().max(1);
        println!(
            "| ~{} tokens | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.tokens,
            size_name(mean_bytes),
            row.ms[1].len(),
            f2(p50(0)),
            f2(p99(0)),
            f2(p50(1)),
            f2(p99(1)),
            f2(p50(2)),
            f2(p99(2)),
            f2(served_over),
            f2(baseline_over),
            if served_over > 0.0 {
                format!("{:.2}x", baseline_over / served_over)
            } else {
                "-".into()
            }
        );
    }
    println!();
    println!(
        "Where the time goes (ms, p50, from the filter's `x-semroute-timing` that the upstream \
         echoes): `daemon call` = the filter's Classify call, dispatch to reply; `inference` = \
         the daemon's own time for the request (its reply's timings); `filter` = the filter's \
         callbacks. Blocked requests (403) have no upstream and give no timings."
    );
    println!();
    println!("| prompt | daemon call served | daemon call baseline | inference served | inference baseline | filter served | compress served | fallbacks served / baseline | served: routed to |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|");
    for row in &rows {
        let t = |r: usize, name: &str| f2(quantile(&named(&row.timings[r], name), 0.5));
        let routed: Vec<String> = row
            .routed
            .iter()
            .map(|(m, n)| format!("{m} x{n}"))
            .collect();
        println!(
            "| ~{} tokens | {} | {} | {} | {} | {} | {} | {} / {} | {} |",
            row.tokens,
            t(0, "daemon"),
            t(1, "daemon"),
            t(0, "inference"),
            t(1, "inference"),
            t(0, "filter"),
            t(0, "compress"),
            row.fallbacks[0],
            row.fallbacks[1],
            routed.join(", ")
        );
    }
    println!();
    println!(
        "Daemon RSS (`VmRSS` of /proc/<pid>/status, MiB): served {} after warm-up, {} after the \
         load (peak `VmHWM` {}); baseline {} after warm-up, {} after the load (peak {}).",
        mib(rss_start[0]),
        mib(rss_end[0]),
        mib(peak[0]),
        mib(rss_start[1]),
        mib(rss_end[1]),
        mib(peak[1]),
    );
}

/// The buffered baseline module (`filter-wasm/examples/buffered_baseline.rs`).
fn buffered_baseline_wasm() -> PathBuf {
    let path = target_dir().join("wasm32-wasip1/release/examples/buffered_baseline.wasm");
    if !path.is_file() {
        die(&format!(
            "{} not found: cargo build --release -p semroute-filter --example buffered_baseline \
             --target wasm32-wasip1 (make bench builds it)",
            path.display()
        ));
    }
    path
}

fn filter(args: &Args) {
    eprintln!(
        "router-bench: starting Envoy with the filter, Envoy with the buffered baseline (each \
         with an instant daemon), and plain Envoy"
    );
    let router = start(RouterOptions {
        daemon: false,
        filter_config: Some(bench_filter_config()),
        ..Default::default()
    });
    let _daemon = start_instant_daemon(&router.layout.socket);
    let baseline = start(RouterOptions {
        daemon: false,
        filter_config: Some(bench_filter_config()),
        wasm_module: Some(buffered_baseline_wasm()),
        ..Default::default()
    });
    let _baseline_daemon = start_instant_daemon(&baseline.layout.socket);
    let plain = start(RouterOptions {
        without_filter: true,
        ..Default::default()
    });
    let pace = Duration::from_micros(args.pace_us);
    let mut with = Conn::new(router.layout.port, pace);
    let mut without = Conn::new(plain.layout.port, pace);
    let mut buffered = Conn::new(baseline.layout.port, pace);
    warm_daemon(&mut with);
    let mut rows = Vec::new();
    let shapes: [(&str, MakeBody); 2] = [
        ("long last turn", last_turn_body),
        ("long history", history_body),
    ];
    for (shape, make) in shapes {
        for &bytes in &args.bytes {
            let body = make(bytes);
            let s = measure(
                &mut with,
                &mut without,
                Some(&mut buffered),
                &body,
                args.warmup,
                args.requests,
                args.max_seconds,
            );
            eprintln!(
                "router-bench: filter {shape} {} done ({} requests)",
                size_name(bytes),
                s.with.len()
            );
            rows.push((shape, bytes, s));
        }
    }
    println!();
    println!("## The filter inside Envoy (instant fake daemon)");
    println!();
    println!(
        "ms. `tail` = last body byte → Classify dispatch and `filter` = time in the filter's \
         callbacks, both from the filter's `x-semroute-timing` (V8, host calls included); \
         latencies are client-side from the first byte sent, baseline = the same Envoy without \
         the filter; bodies sent with a {} µs pause after each {} KiB.",
        args.pace_us,
        PACE_CHUNK / 1024
    );
    println!();
    println!("| shape | body | n | tail p50 | tail p99 | filter p50 | filter p99 | scan p50 | compress p50 | plain p50 | plain p99 | with filter p50 | with filter p99 | added p50 | ratio p50 |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (shape, bytes, s) in &rows {
        let (w, p) = (quantile(&s.with, 0.5), quantile(&s.without, 0.5));
        println!(
            "| {shape} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} |",
            size_name(*bytes),
            s.with.len(),
            f2(quantile(&s.timing("tail"), 0.5)),
            f2(quantile(&s.timing("tail"), 0.99)),
            f2(quantile(&s.timing("filter"), 0.5)),
            f2(quantile(&s.timing("filter"), 0.99)),
            f2(quantile(&s.timing("scan"), 0.5)),
            f2(quantile(&s.timing("compress"), 0.5)),
            f2(p),
            f2(quantile(&s.without, 0.99)),
            f2(w),
            f2(quantile(&s.with, 0.99)),
            f2(w - p),
            w / p
        );
    }
    println!();
    println!("## The filter against the buffered baseline inside Envoy (same run)");
    println!();
    println!(
        "ms, p50. The buffered baseline is a proxy-wasm module in the filter's place (same V8, \
         configuration and instant daemon): Envoy buffers the whole body, then at the last \
         byte it parses it with `serde_json`, compresses the last user turn with the same \
         compressor and budget, and dispatches the same Classify call \
         (`filter-wasm/examples/buffered_baseline.rs`). `tail` and `filter` as above, from \
         each module's `x-semroute-timing`; `client` = client-side latency."
    );
    println!();
    println!("| shape | body | n | tail filter | tail buffered | tail buffered / filter | filter CPU | buffered CPU | client filter | client buffered | client plain |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (shape, bytes, s) in &rows {
        let (tf, tb) = (
            quantile(&s.timing("tail"), 0.5),
            quantile(&s.buffered_timing("tail"), 0.5),
        );
        let ratio = if tf > 0.0 {
            format!("{:.1}x", tb / tf)
        } else {
            "dispatched before the last byte".into()
        };
        println!(
            "| {shape} | {} | {} | {} | {} | {ratio} | {} | {} | {} | {} | {} |",
            size_name(*bytes),
            s.buffered.len().min(s.with.len()),
            f2(tf),
            f2(tb),
            f2(quantile(&s.timing("filter"), 0.5)),
            f2(quantile(&s.buffered_timing("filter"), 0.5)),
            f2(quantile(&s.with, 0.5)),
            f2(quantile(&s.buffered, 0.5)),
            f2(quantile(&s.without, 0.5)),
        );
    }
    arrival_sweep(args, &mut with, &mut without);
}

/// The long last turn again at slower arrival rates: the tail stays flat while the body
/// arrives no faster than the filter processes it, and grows with the body beyond that.
fn arrival_sweep(args: &Args, with: &mut Conn, without: &mut Conn) {
    if args.sweep_pace_us.is_empty() {
        return;
    }
    let mut rows = Vec::new();
    for &pace_us in &args.sweep_pace_us {
        with.pace = Duration::from_micros(pace_us as u64);
        without.pace = with.pace;
        for &bytes in &args.bytes {
            let body = last_turn_body(bytes);
            let s = measure(
                with,
                without,
                None,
                &body,
                args.warmup,
                args.requests,
                args.max_seconds,
            );
            eprintln!(
                "router-bench: arrival sweep {pace_us} µs {} done ({} requests)",
                size_name(bytes),
                s.with.len()
            );
            rows.push((pace_us, bytes, s));
        }
    }
    println!();
    println!("## Tail against arrival rate (long last turn)");
    println!();
    println!(
        "ms. The same bodies with a longer pause after each {} KiB: `arrival` is the body's \
         rate into plain Envoy (body bytes / its client-side p50), `filter rate` the body \
         bytes over the filter's callback time p50. The tail stays flat while the arrival \
         rate is below the filter rate; the default table above sends at about {:.0} MB/s.",
        PACE_CHUNK / 1024,
        PACE_CHUNK as f64 / args.pace_us.max(1) as f64
    );
    println!();
    println!("| pause per 16 KiB (µs) | body | n | arrival (MB/s) | filter rate (MB/s) | tail p50 | tail p99 | filter p50 | plain p50 | with filter p50 |");
    println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (pace_us, bytes, s) in &rows {
        let plain = quantile(&s.without, 0.5);
        let filter = quantile(&s.timing("filter"), 0.5);
        let rate = |ms: f64| {
            if ms > 0.0 {
                format!("{:.1}", *bytes as f64 / 1e3 / ms)
            } else {
                "-".into()
            }
        };
        println!(
            "| {pace_us} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            size_name(*bytes),
            s.with.len(),
            rate(plain),
            rate(filter),
            f2(quantile(&s.timing("tail"), 0.5)),
            f2(quantile(&s.timing("tail"), 0.99)),
            f2(filter),
            f2(plain),
            f2(quantile(&s.with, 0.5)),
        );
    }
}

/// Body of each large request of the fairness table, bytes (under `max_body_bytes`).
const FAIRNESS_LARGE: usize = 6 << 20;
/// Clients sending large bodies in the fairness table.
const FAIRNESS_LARGE_CLIENTS: usize = 2;

/// Latency of short requests while other clients keep the same Envoy worker busy with
/// large bodies, with the filter's per-callback scan bound from `envoy.yaml` and with no
/// bound (`max_scan_bytes_per_callback: 0`); each router alone on the machine in turn.
fn fairness(args: &Args) {
    let bounded = bench_filter_config();
    let bound = bounded["limits"]["max_scan_bytes_per_callback"].clone();
    let mut unbounded = bounded.clone();
    unbounded["limits"]["max_scan_bytes_per_callback"] = json!(0);
    let large = last_turn_body(FAIRNESS_LARGE);
    let short = last_turn_body(2048);
    let mut rows = Vec::new();
    for (name, config) in [(bound.to_string(), bounded), ("0".to_string(), unbounded)] {
        eprintln!("router-bench: fairness, max_scan_bytes_per_callback {name}");
        let router = start(RouterOptions {
            daemon: false,
            filter_config: Some(config),
            ..Default::default()
        });
        let _daemon = start_instant_daemon(&router.layout.socket);
        let port = router.layout.port;
        let mut conn = Conn::new(port, Duration::ZERO);
        warm_daemon(&mut conn);
        let mut idle = Vec::new();
        for _ in 0..args.warmup.max(5) {
            let t = Instant::now();
            post_ok(&mut conn, &short);
            idle.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let loaders: Vec<_> = (0..FAIRNESS_LARGE_CLIENTS)
            .map(|_| {
                let (stop, body) = (std::sync::Arc::clone(&stop), large.clone());
                std::thread::spawn(move || {
                    let mut conn = Conn::new(port, Duration::ZERO);
                    let mut times = Vec::new();
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let t = Instant::now();
                        post_ok(&mut conn, &body);
                        times.push(t.elapsed().as_secs_f64() * 1e3);
                    }
                    times
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        let started = Instant::now();
        let mut loaded = Vec::new();
        while loaded.len() < args.requests
            && (started.elapsed().as_secs_f64() < args.max_seconds || loaded.len() < 5)
        {
            let t = Instant::now();
            post_ok(&mut conn, &short);
            loaded.push(t.elapsed().as_secs_f64() * 1e3);
            std::thread::sleep(Duration::from_millis(20));
        }
        let window = started.elapsed().as_secs_f64();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let large_times: Vec<f64> = loaders
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        rows.push((name, idle, loaded, large_times, window));
    }
    println!();
    println!("## Short requests beside large bodies on one Envoy worker (instant fake daemon)");
    println!();
    println!(
        "ms. {FAIRNESS_LARGE_CLIENTS} clients send {} bodies (long last turn) back to back \
         while a third sends 2 KiB requests, 20 ms apart; `large per s` = large requests \
         completed per second while the short ones ran. The filter scans at most \
         `limits.max_scan_bytes_per_callback` bytes per callback and continues from the root \
         context's tick (0: no bound, a callback scans all Envoy hands it).",
        size_name(FAIRNESS_LARGE)
    );
    println!();
    println!("| max_scan_bytes_per_callback | short, idle p50 | n | short p50 | short p99 | short max | large per s | large p50 |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for (name, idle, loaded, large, window) in &rows {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} |",
            f2(quantile(idle, 0.5)),
            loaded.len(),
            f2(quantile(loaded, 0.5)),
            f2(quantile(loaded, 0.99)),
            f2(quantile(loaded, 1.0)),
            f2(large.len() as f64 / window),
            f2(quantile(large, 0.5)),
        );
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
    let args = parse_args();
    if let Err(e) = semroute_e2e::envoy_bin() {
        die(&e);
    }
    println!(
        "# router-bench: Envoy from envoy.yaml (one worker each), {} timed requests per size and \
         router{} after {} warm-up, at most {} s per size",
        args.requests,
        if args.requests_given {
            ""
        } else {
            " (overhead: 15, 10 from 16K tokens)"
        },
        args.warmup,
        args.max_seconds
    );
    if args.mode == "filter" || args.mode == "all" {
        filter(&args);
    }
    if args.mode == "fairness" || args.mode == "all" {
        fairness(&args);
    }
    if args.mode == "overhead" || args.mode == "all" {
        overhead(&args);
    }
    if args.mode == "capacity" || args.mode == "all" {
        capacity(&args);
    }
}

// -------------------------------------------------------------- capacity

/// One request of the capacity table.
struct Outcome {
    /// Client latency, ms (open loop: from the request's scheduled time).
    ms: f64,
    /// HTTP status; 0 when the request failed at the connection.
    status: u16,
    /// `x-semroute-fallback`, when the router fell back.
    fallback: Option<String>,
}

impl Outcome {
    fn classified(&self) -> bool {
        self.status == 200 && self.fallback.is_none()
    }
}

/// A chat body whose user turn is about `tokens` tokens of prose, different for each
/// `n`, so that the daemon computes every request (no result cache answers it).
fn capacity_body(tokens: usize, n: u64) -> Vec<u8> {
    let words = (tokens * 3 / 4).saturating_sub(QUESTION.split_whitespace().count());
    let seed = 0x2545_f491_4f6c_dd1d ^ (n + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let doc = Prose(seed | 1).text(words, usize::MAX);
    chat_body(&format!("{doc}\n\n{QUESTION}")).into_bytes()
}

fn send_one(conn: &mut Conn, body: &[u8], since: Instant) -> Outcome {
    match conn.post("/v1/chat/completions", body) {
        Ok(a) => Outcome {
            ms: since.elapsed().as_secs_f64() * 1e3,
            status: a.status,
            fallback: a.header("x-semroute-fallback").map(str::to_string),
        },
        Err(_) => Outcome {
            ms: since.elapsed().as_secs_f64() * 1e3,
            status: 0,
            fallback: None,
        },
    }
}

/// A shared source of distinct prompt numbers.
type Counter = std::sync::Arc<std::sync::atomic::AtomicU64>;

/// `clients` clients, each sending its next request `think` after the last is answered,
/// for `seconds`. Returns the outcomes and the seconds until the last answer.
fn closed_loop(
    port: u16,
    clients: usize,
    seconds: f64,
    think: Duration,
    tokens: usize,
    next: &Counter,
) -> (Vec<Outcome>, f64) {
    use std::sync::atomic::Ordering;
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(seconds);
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let next = next.clone();
            std::thread::spawn(move || {
                let mut conn = Conn::new(port, Duration::ZERO);
                let mut out = Vec::new();
                while Instant::now() < end {
                    let body = capacity_body(tokens, next.fetch_add(1, Ordering::Relaxed));
                    out.push(send_one(&mut conn, &body, Instant::now()));
                    std::thread::sleep(think.min(end.saturating_duration_since(Instant::now())));
                }
                out
            })
        })
        .collect();
    let outcomes = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap_or_default())
        .collect();
    (outcomes, started.elapsed().as_secs_f64())
}

/// Requests arriving at `rate` per second for `seconds`, whether or not earlier ones have
/// been answered (up to [`OPEN_LOOP_CLIENTS`] in flight); latency counts from each
/// request's scheduled time, so a request that waits for a free client counts its wait.
fn open_loop(
    port: u16,
    rate: f64,
    seconds: f64,
    tokens: usize,
    next: &Counter,
) -> (Vec<Outcome>, f64) {
    use std::sync::atomic::{AtomicU64, Ordering};
    let total = (rate * seconds).ceil() as u64;
    let scheduled = std::sync::Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let threads: Vec<_> = (0..OPEN_LOOP_CLIENTS)
        .map(|_| {
            let (next, scheduled) = (next.clone(), scheduled.clone());
            std::thread::spawn(move || {
                let mut conn = Conn::new(port, Duration::ZERO);
                let mut out = Vec::new();
                loop {
                    let i = scheduled.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        return out;
                    }
                    let at = started + Duration::from_secs_f64(i as f64 / rate);
                    let body = capacity_body(tokens, next.fetch_add(1, Ordering::Relaxed));
                    if let Some(wait) = at.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                    out.push(send_one(&mut conn, &body, at));
                }
            })
        })
        .collect();
    let outcomes = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap_or_default())
        .collect();
    (outcomes, started.elapsed().as_secs_f64())
}

/// Most requests in flight in the open-loop row.
const OPEN_LOOP_CLIENTS: usize = 128;

/// The daemon's refusals and skips, from its metrics, by kind.
const DAEMON_COUNTS: [(&str, &str); 4] = [
    (
        "refused (deadline)",
        r#"semroute_daemon_shed_requests_total{reason="deadline"}"#,
    ),
    (
        "expired in queue",
        r#"semroute_daemon_shed_requests_total{reason="expired"}"#,
    ),
    (
        "caller gone",
        r#"semroute_daemon_classify_requests_total{code="cancelled"}"#,
    ),
    (
        "answered",
        r#"semroute_daemon_classify_requests_total{code="ok"}"#,
    ),
];

fn daemon_counts(router: &Router) -> Vec<f64> {
    DAEMON_COUNTS
        .iter()
        .map(|(_, series)| router.daemon_metric(series).unwrap_or(f64::NAN))
        .collect()
}

/// One row of the capacity table.
struct CapacityRow {
    load: String,
    outcomes: Vec<Outcome>,
    seconds: f64,
    daemon: Vec<f64>,
}

impl CapacityRow {
    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.outcomes.iter().filter(|o| f(o)).count()
    }

    /// Classified requests answered within `deadline_ms`, per second.
    fn goodput(&self, deadline_ms: f64) -> f64 {
        self.count(|o| o.classified() && o.ms <= deadline_ms) as f64 / self.seconds
    }
}

/// The setup lines of the capacity table: cores, CPU, the daemon's batching and runtime
/// configuration, the filter's deadline and failure mode.
fn capacity_setup(filter: &Value, args: &Args, body_bytes: usize) -> Vec<String> {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name")?.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let daemon_toml =
        std::fs::read_to_string(semroute_e2e::workspace_root().join("config/daemon.toml"))
            .unwrap_or_default();
    let settings: Vec<String> = daemon_toml
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| {
            [
                "max_batch",
                "max_wait_us",
                "queue_capacity",
                "intra_threads",
                "max_seq_len",
                "admission",
            ]
            .iter()
            .any(|k| l.starts_with(k))
        })
        .map(|l| l.replace(' ', ""))
        .collect();
    vec![
        format!("{cores} cores ({cpu}); clients, Envoy (one worker), upstreams and the daemon share them"),
        format!("daemon: config/daemon.toml ({})", settings.join(", ")),
        format!(
            "filter: daemon.timeout_ms {} (the deadline), failure_mode {}",
            filter["daemon"]["timeout_ms"], filter["failure_mode"]
        ),
        format!(
            "prompts: about {} tokens of prose ({} bytes of body), a different one per request; {} s per row; \
             closed-loop clients pause {} ms between an answer and their next request",
            args.capacity_tokens, body_bytes, args.capacity_seconds, args.think_ms
        ),
        format!(
            "load average at the start: {}",
            std::fs::read_to_string("/proc/loadavg")
                .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
                .unwrap_or_else(|_| "unknown".into())
        ),
    ]
}

/// Label prefix of the capacity rows measured with admission off.
const FIFO_BASELINE: &str = "baseline, admission off:";

/// The 16-client row and the open-loop row at `rate` (when given) again on a router whose
/// daemon runs `config/daemon.toml` with `batching.admission = false`.
fn capacity_baseline(
    args: &Args,
    filter: &Value,
    rate: Option<f64>,
    next: &Counter,
) -> Vec<CapacityRow> {
    let served = semroute_e2e::workspace_root().join("config/daemon.toml");
    let toml = std::fs::read_to_string(&served)
        .unwrap_or_else(|e| die(&format!("{}: {e}", served.display())));
    let mut replaced = false;
    let fifo: Vec<String> = toml
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("admission") {
                replaced = true;
                "admission = false".to_string()
            } else {
                l.to_string()
            }
        })
        .collect();
    if !replaced {
        die("config/daemon.toml has no `admission` line in [batching]");
    }
    let dir = semroute_e2e::tempfile_dir::TempDir::new("semroute-bench")
        .unwrap_or_else(|e| die(&format!("temporary directory: {e}")));
    let config = dir.path().join("daemon-fifo.toml");
    std::fs::write(&config, fifo.join("\n") + "\n")
        .unwrap_or_else(|e| die(&format!("{}: {e}", config.display())));
    eprintln!("router-bench: starting the router with admission off for the capacity baseline");
    let router = start(RouterOptions {
        daemon: true,
        daemon_config: Some(config),
        filter_config: Some(filter.clone()),
        ..Default::default()
    });
    let port = router.layout.port;
    warm_daemon(&mut Conn::new(port, Duration::ZERO));
    // Untimed, as for the rows above.
    let _ = closed_loop(port, 1, 2.0, Duration::ZERO, args.capacity_tokens, next);
    let think = Duration::from_millis(args.think_ms);
    let mut rows = vec![capacity_row(
        &router,
        format!("{FIFO_BASELINE} closed loop, 16 clients"),
        || {
            closed_loop(
                port,
                16,
                args.capacity_seconds,
                think,
                args.capacity_tokens,
                next,
            )
        },
    )];
    if let Some(rate) = rate {
        rows.push(capacity_row(
            &router,
            format!("{FIFO_BASELINE} open loop, {rate:.1} req/s (4x capacity)"),
            || {
                open_loop(
                    port,
                    rate,
                    args.capacity_seconds,
                    args.capacity_tokens,
                    next,
                )
            },
        ));
    }
    rows
}

/// Runs one row's load, with the daemon's counts over it.
fn capacity_row(
    router: &Router,
    load: String,
    f: impl FnOnce() -> (Vec<Outcome>, f64),
) -> CapacityRow {
    let before = daemon_counts(router);
    let (outcomes, seconds) = f();
    let after = daemon_counts(router);
    eprintln!(
        "router-bench: capacity {load} done ({} requests)",
        outcomes.len()
    );
    CapacityRow {
        load,
        outcomes,
        seconds,
        daemon: after.iter().zip(&before).map(|(a, b)| a - b).collect(),
    }
}

fn capacity(args: &Args) {
    eprintln!(
        "router-bench: starting the router (daemon, Envoy with the filter) for the capacity table"
    );
    let filter = default_filter_config().unwrap_or_else(|e| die(&e));
    let deadline_ms = filter["daemon"]["timeout_ms"].as_f64().unwrap_or(1000.0);
    let setup = capacity_setup(&filter, args, capacity_body(args.capacity_tokens, 0).len());
    let router = start(RouterOptions {
        daemon: true,
        filter_config: Some(filter.clone()),
        ..Default::default()
    });
    let port = router.layout.port;
    warm_daemon(&mut Conn::new(port, Duration::ZERO));
    let next: Counter = Default::default();
    let think = Duration::from_millis(args.think_ms);
    // Untimed: the daemon measures its own speed.
    let _ = closed_loop(port, 1, 2.0, Duration::ZERO, args.capacity_tokens, &next);
    let mut rows: Vec<CapacityRow> = Vec::new();
    for &c in &args.concurrency {
        rows.push(capacity_row(
            &router,
            format!("closed loop, {c} clients"),
            || {
                closed_loop(
                    port,
                    c,
                    args.capacity_seconds,
                    think,
                    args.capacity_tokens,
                    &next,
                )
            },
        ));
    }
    // Capacity: classified requests per second at 16 clients (else the best row).
    let classified_rate = |r: &CapacityRow| r.count(Outcome::classified) as f64 / r.seconds;
    let capacity = args
        .concurrency
        .iter()
        .position(|&c| c == 16)
        .map(|i| classified_rate(&rows[i]))
        .filter(|&r| r > 0.0)
        .unwrap_or_else(|| rows.iter().map(classified_rate).fold(0.0, f64::max));
    if capacity > 0.0 {
        let rate = 4.0 * capacity;
        rows.push(capacity_row(
            &router,
            format!("open loop, {rate:.1} req/s (4x capacity)"),
            || {
                open_loop(
                    port,
                    rate,
                    args.capacity_seconds,
                    args.capacity_tokens,
                    &next,
                )
            },
        ));
    }
    drop(router);
    rows.extend(capacity_baseline(
        args,
        &filter,
        (capacity > 0.0).then_some(4.0 * capacity),
        &next,
    ));
    println!();
    println!("## Capacity through Envoy (real daemon and models, the filter's deadline)");
    println!();
    for line in setup {
        println!("- {line}");
    }
    println!(
        "- capacity = classified requests per second at 16 clients: {capacity:.2}; \
         goodput = classified requests answered within the {deadline_ms} ms deadline per second"
    );
    println!(
        "- baseline rows: the same daemon configuration with `batching.admission = false` \
         (no deadline-based refusal or expiry: a FIFO queue that runs every call it admitted, \
         skipping only callers that have gone), on a fresh router started after the rows above \
         (same prompt size, think time and open-loop rate)"
    );
    println!();
    println!(
        "| load | requests | req/s | p50 ms | p99 ms | classified | fallback | other | goodput/s | classified p50 ms | {} |",
        DAEMON_COUNTS.map(|(name, _)| format!("daemon: {name}")).join(" | ")
    );
    println!(
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|{}",
        "---:|".repeat(DAEMON_COUNTS.len())
    );
    for r in &rows {
        let n = r.outcomes.len().max(1) as f64;
        let ms: Vec<f64> = r.outcomes.iter().map(|o| o.ms).collect();
        let classified_ms: Vec<f64> = r
            .outcomes
            .iter()
            .filter(|o| o.classified())
            .map(|o| o.ms)
            .collect();
        let pct = |k: usize| format!("{:.0}%", 100.0 * k as f64 / n);
        let mut reasons = std::collections::BTreeMap::<&str, usize>::new();
        for o in &r.outcomes {
            if let (200, Some(f)) = (o.status, o.fallback.as_deref()) {
                *reasons.entry(f).or_default() += 1;
            }
        }
        let reasons: Vec<String> = reasons.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let fallback = r.count(|o| o.status == 200 && o.fallback.is_some());
        println!(
            "| {} | {} | {:.1} | {} | {} | {} | {}{} | {} | {:.2} | {} | {} |",
            r.load,
            r.outcomes.len(),
            r.outcomes.len() as f64 / r.seconds,
            f2(quantile(&ms, 0.5)),
            f2(quantile(&ms, 0.99)),
            pct(r.count(Outcome::classified)),
            pct(fallback),
            if reasons.is_empty() {
                String::new()
            } else {
                format!(" ({})", reasons.join(", "))
            },
            pct(r.count(|o| o.status != 200)),
            r.goodput(deadline_ms),
            f2(quantile(&classified_ms, 0.5)),
            r.daemon
                .iter()
                .map(|v| format!("{v:.0}"))
                .collect::<Vec<_>>()
                .join(" | ")
        );
    }
}
