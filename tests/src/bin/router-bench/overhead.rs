//! The overhead table: the whole router against plain Envoy, served and baseline daemon configurations.

use super::*;

/// Daemon configurations of the overhead table's two routers (served, baseline).
const SERVED_DAEMON_CONFIG: &str = "config/daemon.toml";
const BASELINE_DAEMON_CONFIG: &str = "config/daemon.shipped.toml";
/// Seed of the overhead table's prompt draw, so that runs send the same prompts.
const OVERHEAD_SEED: u64 = 0x5eed_0f0e_4d5e;
/// Seed of the default-configuration table's prompt draw.
const DEFAULT_CONFIG_SEED: u64 = 0x5eed_0f0e_4d5f;

/// One prompt size, every router measured on the same prompts. Router 0 is plain
/// Envoy; the others run the filter.
#[derive(Default)]
struct OverheadRow {
    tokens: usize,
    /// Body bytes of each prompt sent.
    bytes: Vec<usize>,
    /// Client latency, ms, per router.
    ms: Vec<Vec<f64>>,
    /// `x-semroute-timing` entries per router (empty for plain Envoy).
    timings: Vec<Vec<(String, f64)>>,
    /// Router 1: upstream model (or the block) per request.
    routed: std::collections::BTreeMap<String, usize>,
    /// Fallbacks per router.
    fallbacks: Vec<usize>,
}

/// Sends each router in turn a prompt of about `tokens` tokens, a new one per round
/// (the same prompt to every router of a round): `warmup` untimed rounds, then up
/// to `requests` timed rounds within `max_seconds`. `conns[0]` is plain Envoy.
fn measure_overhead(
    conns: &mut [Conn],
    names: &[&str],
    prompts: &mut ProsePrompts,
    tokens: usize,
    warmup: usize,
    requests: usize,
    max_seconds: f64,
) -> OverheadRow {
    let n = conns.len();
    let mut row = OverheadRow {
        tokens,
        ms: vec![Vec::new(); n],
        timings: vec![Vec::new(); n],
        fallbacks: vec![0; n],
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
        for k in 0..n {
            let r = (i + k) % n;
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
                    names[r],
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
                row.fallbacks[r] += 1;
            }
            if let Some(t) = upstream_timing(&a) {
                push_timings(&mut row.timings[r], &t);
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

pub(super) fn overhead(args: &Args) {
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
    // Two daemons share the cores here: idle threads of one that spin for work would take
    // the cores from the other's model runs, so neither spins in this table.
    let dir = semroute_e2e::tempfile_dir::TempDir::new("semroute-bench")
        .unwrap_or_else(|e| die(&format!("temporary directory: {e}")));
    let quiet = |config: &str, name: &str| {
        daemon_config_with(config, dir.path(), name, "runtime", "spinning", "false")
    };
    let (served_config, baseline_config) = (
        quiet(SERVED_DAEMON_CONFIG, "served.toml"),
        quiet(BASELINE_DAEMON_CONFIG, "baseline.toml"),
    );
    let with_daemon = |config: &Path| RouterOptions {
        daemon: true,
        daemon_config: Some(config.to_path_buf()),
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
        let served = s.spawn(|| start(with_daemon(&served_config)));
        let baseline = s.spawn(|| start(with_daemon(&baseline_config)));
        let join = |h: std::thread::ScopedJoinHandle<'_, Router>| {
            h.join().unwrap_or_else(|_| die("a router failed to start"))
        };
        (join(plain), join(served), join(baseline))
    });
    let mut conns = [&plain, &served, &baseline].map(|r| Conn::new(r.layout.port, Duration::ZERO));
    warm_daemon(&mut conns[1]);
    warm_daemon(&mut conns[2]);
    let rss_start = [served.daemon_rss_kib(), baseline.daemon_rss_kib()];
    let rows = measure_sizes(
        args,
        &mut conns,
        &["plain", "served", "baseline"],
        &mut prompts,
        "overhead",
    );
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
         shipped, 256-token windows, extra jailbreak passes always, one shared pool, no cache); \
         both daemons with `runtime.spinning = false`, so that the idle threads of one do not \
         take the cores from the other's model runs"
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
         the daemon's own time for the request (its reply's timings), `encoder` and `PII model` \
         its runs of each model on the served daemon, `PII model ran` the share of requests it \
         read (the filter sends the others with `pii_patterns_only`); `filter` = the filter's \
         callbacks. Blocked requests (403) have no upstream and give no timings."
    );
    println!();
    println!("| prompt | daemon call served | daemon call baseline | inference served | inference baseline | encoder served | PII model served | PII model ran | filter served | compress served | fallbacks served / baseline | served: routed to |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for row in &rows {
        let t = |r: usize, name: &str| f2(quantile(&named(&row.timings[r], name), 0.5));
        let routed: Vec<String> = row
            .routed
            .iter()
            .map(|(m, n)| format!("{m} x{n}"))
            .collect();
        let pii = named(&row.timings[1], "pii");
        let pii_ran = pii.iter().filter(|&&ms| ms > 0.0).count();
        println!(
            "| ~{} tokens | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} / {} | {} |",
            row.tokens,
            t(1, "daemon"),
            t(2, "daemon"),
            t(1, "inference"),
            t(2, "inference"),
            t(1, "encoder"),
            t(1, "pii"),
            pii_ran,
            pii.len(),
            t(1, "filter"),
            t(1, "compress"),
            row.fallbacks[1],
            row.fallbacks[2],
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
    drop(conns);
    drop((served, baseline));
    default_config(args, &plain, filter, &eval_dir);
}

/// The served router alone with plain Envoy, its daemon on `config/daemon.toml` as it
/// ships (ONNX Runtime's pool threads spin for work between runs): the configuration the
/// overhead targets are stated for. The table above cannot measure it, because there
/// the spinning threads of one daemon would take the cores from the other's runs.
fn default_config(args: &Args, plain: &Router, filter: Value, eval_dir: &Path) {
    let mut prompts = ProsePrompts::load(eval_dir, DEFAULT_CONFIG_SEED).unwrap_or_else(|e| die(&e));
    eprintln!(
        "router-bench: starting the router with the daemon on {SERVED_DAEMON_CONFIG} as it ships"
    );
    let served = start(RouterOptions {
        daemon: true,
        daemon_config: Some(PathBuf::from(SERVED_DAEMON_CONFIG)),
        filter_config: Some(filter),
        ..Default::default()
    });
    let mut conns = [plain, &served].map(|r| Conn::new(r.layout.port, Duration::ZERO));
    warm_daemon(&mut conns[1]);
    let rows = measure_sizes(
        args,
        &mut conns,
        &["plain", "served"],
        &mut prompts,
        "default configuration",
    );
    let rss = served.daemon_rss_kib();
    println!();
    println!("## Router overhead on the default daemon configuration");
    println!();
    println!(
        "- the served router alone with plain Envoy (the baseline router stopped), its daemon on \
         `{SERVED_DAEMON_CONFIG}` unchanged, so its pool threads spin for work between model runs \
         as in production; same method as above, prompts drawn with seed {DEFAULT_CONFIG_SEED:#x}; \
         load average at the end {}",
        load_average()
    );
    println!();
    println!("| prompt | n | plain p50 | served p50 | served p99 | overhead p50 | overhead p99 | inference | encoder | PII model | filter | fallbacks |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in &rows {
        let q = |r: usize, q: f64| quantile(&row.ms[r], q);
        let t = |name: &str| f2(quantile(&named(&row.timings[1], name), 0.5));
        println!(
            "| ~{} tokens | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.tokens,
            row.ms[1].len(),
            f2(q(0, 0.5)),
            f2(q(1, 0.5)),
            f2(q(1, 0.99)),
            f2(q(1, 0.5) - q(0, 0.5)),
            f2(q(1, 0.99) - q(0, 0.99)),
            t("inference"),
            t("encoder"),
            t("pii"),
            t("filter"),
            row.fallbacks[1],
        );
    }
    println!();
    println!("Daemon RSS after the load: {} MiB.", mib(rss));
}

/// One [`measure_overhead`] row per prompt size of `args.tokens`.
fn measure_sizes(
    args: &Args,
    conns: &mut [Conn],
    names: &[&str],
    prompts: &mut ProsePrompts,
    table: &str,
) -> Vec<OverheadRow> {
    let mut rows = Vec::new();
    for &tokens in &args.tokens {
        let requests = match args.requests {
            Some(n) => n as usize,
            None if tokens >= 16_000 => 10,
            None => 15,
        };
        let row = measure_overhead(
            conns,
            names,
            prompts,
            tokens,
            args.warmup,
            requests,
            args.max_seconds,
        );
        eprintln!(
            "router-bench: {table} ~{tokens} tokens done ({} requests per router)",
            row.ms[1].len()
        );
        rows.push(row);
    }
    rows
}
