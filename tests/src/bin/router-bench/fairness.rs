//! The fairness table: short requests beside clients sending large bodies on the same Envoy worker.

use super::*;

/// Body of each large request of the fairness table, bytes (under `max_body_bytes`).
const FAIRNESS_LARGE: usize = 6 << 20;
/// Clients sending large bodies in the fairness table.
const FAIRNESS_LARGE_CLIENTS: usize = 2;

/// Latency of short requests while other clients keep the same Envoy worker busy with
/// large bodies, with the filter's per-callback scan bound from `envoy.yaml` and with no
/// bound (`max_scan_bytes_per_callback: 0`); each router alone on the machine in turn.
pub(super) fn fairness(args: &Args) {
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
        while loaded.len() < args.requests()
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
