//! The capacity table: closed-loop clients at each concurrency, then open-loop arrivals at 4x capacity.

use super::*;

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

/// Clients of the row that defines the capacity.
const CAPACITY_CLIENTS: usize = 16;

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

/// The back-to-back row of [`CAPACITY_CLIENTS`] clients and the open-loop row at `rate`
/// (when given) again, on a router whose daemon runs `config/daemon.toml` with
/// `batching.admission = false`.
fn capacity_baseline(
    args: &Args,
    filter: &Value,
    rate: Option<f64>,
    next: &Counter,
) -> Vec<CapacityRow> {
    let dir = semroute_e2e::tempfile_dir::TempDir::new("semroute-bench")
        .unwrap_or_else(|e| die(&format!("temporary directory: {e}")));
    let config = daemon_config_with(
        "config/daemon.toml",
        dir.path(),
        "daemon-fifo.toml",
        "batching",
        "admission",
        "false",
    );
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
    let label = format!("{FIFO_BASELINE} ");
    let mut rows = vec![back_to_back_row(&router, &label, args, next)];
    if let Some(rate) = rate {
        rows.push(open_loop_row(&router, &label, rate, args, next));
    }
    rows
}

/// The row that defines the capacity: [`CAPACITY_CLIENTS`] closed-loop clients sending
/// back to back; `label` goes before its load.
fn back_to_back_row(router: &Router, label: &str, args: &Args, next: &Counter) -> CapacityRow {
    let port = router.layout.port;
    capacity_row(
        router,
        format!("{label}closed loop, {CAPACITY_CLIENTS} clients back to back (no pause)"),
        || {
            closed_loop(
                port,
                CAPACITY_CLIENTS,
                args.capacity_seconds,
                Duration::ZERO,
                args.capacity_tokens,
                next,
            )
        },
    )
}

/// Open-loop arrivals at `rate` per second; `label` goes before its load.
fn open_loop_row(
    router: &Router,
    label: &str,
    rate: f64,
    args: &Args,
    next: &Counter,
) -> CapacityRow {
    let port = router.layout.port;
    capacity_row(
        router,
        format!("{label}open loop, {rate:.1} req/s (4x capacity)"),
        || {
            open_loop(
                port,
                rate,
                args.capacity_seconds,
                args.capacity_tokens,
                next,
            )
        },
    )
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

pub(super) fn capacity(args: &Args) {
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
    // Capacity: classified requests per second of 16 clients that send back to back (with
    // a pause of `think`, 16 clients cannot offer more than 16 / think requests per second
    // however fast the router is), else the best row.
    let back_to_back = (think > Duration::ZERO).then(|| {
        rows.push(back_to_back_row(&router, "", args, &next));
        rows.len() - 1
    });
    let classified_rate = |r: &CapacityRow| r.count(Outcome::classified) as f64 / r.seconds;
    let capacity = back_to_back
        .or_else(|| args.concurrency.iter().position(|&c| c == CAPACITY_CLIENTS))
        .map(|i| classified_rate(&rows[i]))
        .filter(|&r| r > 0.0)
        .unwrap_or_else(|| rows.iter().map(classified_rate).fold(0.0, f64::max));
    if capacity > 0.0 {
        rows.push(open_loop_row(&router, "", 4.0 * capacity, args, &next));
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
        "- capacity = classified requests per second of {CAPACITY_CLIENTS} clients sending back to back: {capacity:.2}; \
         goodput = classified requests answered within the {deadline_ms} ms deadline per second"
    );
    println!(
        "- baseline rows: the same daemon configuration with `batching.admission = false` \
         (no deadline-based refusal or expiry: a FIFO queue that runs every call it admitted, \
         skipping only callers that have gone), on a fresh router started after the rows above \
         (16 clients back to back and the open-loop rate, same prompt size)"
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
