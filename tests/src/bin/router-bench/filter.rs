//! The filter table: the filter alone inside Envoy (instant daemon) against plain Envoy
//! and the buffered design, and the arrival-rate sweep.

use super::*;

/// The buffered baseline module (`tests/buffered-baseline`).
fn buffered_baseline_wasm() -> PathBuf {
    let path = target_dir().join("wasm32-wasip1/release/semroute_buffered_baseline.wasm");
    if !path.is_file() {
        die(&format!(
            "{} not found: cargo build --release -p semroute-buffered-baseline \
             --target wasm32-wasip1 (make bench builds it)",
            path.display()
        ));
    }
    path
}

pub(super) fn filter(args: &Args) {
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
                args.requests(),
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
         (`tests/buffered-baseline`). `tail` and `filter` as above, from \
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
                args.requests(),
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
