//! Peak memory and latency of one classifier forward pass, original graph vs
//! the graph with fused attention, at growing sequence lengths.
//!
//! ```text
//! cargo run --release -p semroute-kernels --bin attention-bench -- \
//!     [--model M.onnx] [--config M_config.json] [--lengths 512,2048,8192,16384,32768]
//!     [--batch 1] [--threads 2] [--runs N] [--max-original-gb 10] [--timeout-s 150]
//! cargo run --release -p semroute-kernels --bin attention-bench -- \
//!     --kernel SEQ HEADS HEAD_DIM WINDOW THREADS [portable|avx2|avx512|amx-bf16]
//! ```
//!
//! `--kernel` times the CPU kernel alone on random data (best of `$KERNEL_RUNS`
//! calls, default 3; ms and GFLOP/s).
//!
//! The default model is the tiny ModernBERT sequence classifier from the
//! fixtures (`$SEMROUTE_FIXTURES_DIR`, else `../shared/fixtures/tiny_modernbert`
//! next to the workspace): hidden 64, 4 heads of 16, 3 layers (one global, two
//! with a 128-token window), dynamic sequence axis with in-graph RoPE, so it
//! accepts any length. The rewrite runs first (with verification); then every
//! (length, variant) pair runs in a child process of its own, which reports
//! its peak resident memory (`VmHWM` from `/proc/self/status`), its resident
//! memory once the session is ready, and the forward latency (minimum over
//! the runs). The parent watches each child's resident memory and kills it
//! above `--max-original-gb`; lengths at which the original graph is
//! predicted (quadratic extrapolation of its measured growth) to exceed that
//! limit are skipped and marked so.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

#[derive(Debug, Clone)]
struct Args {
    model: PathBuf,
    config: Option<PathBuf>,
    lengths: Vec<usize>,
    batch: usize,
    threads: usize,
    runs: Option<usize>,
    max_original_gb: f64,
    timeout_s: u64,
}

fn usage() -> ! {
    eprintln!(
        "usage: attention-bench [--model M.onnx] [--config config.json] [--lengths 512,2048,...]\n\
         \t[--batch 1] [--threads 2] [--runs N] [--max-original-gb 10] [--timeout-s 150]"
    );
    std::process::exit(2)
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}

fn default_model() -> PathBuf {
    std::env::var_os("SEMROUTE_FIXTURES_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("../shared/fixtures/tiny_modernbert"))
        .join("modernbert_tiny_seqcls_eager.onnx")
}

fn parse_args(mut it: impl Iterator<Item = String>) -> Args {
    let mut a = Args {
        model: default_model(),
        config: None,
        lengths: vec![512, 2048, 8192, 16384, 32768],
        batch: 1,
        threads: 2,
        runs: None,
        max_original_gb: 10.0,
        timeout_s: 150,
    };
    while let Some(flag) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| usage());
        match flag.as_str() {
            "--model" => a.model = PathBuf::from(value()),
            "--config" => a.config = Some(PathBuf::from(value())),
            "--lengths" => {
                a.lengths = value()
                    .split(',')
                    .map(|s| s.trim().parse().unwrap_or_else(|_| usage()))
                    .collect()
            }
            "--batch" => a.batch = value().parse().unwrap_or_else(|_| usage()),
            "--threads" => a.threads = value().parse().unwrap_or_else(|_| usage()),
            "--runs" => a.runs = Some(value().parse().unwrap_or_else(|_| usage())),
            "--max-original-gb" => a.max_original_gb = value().parse().unwrap_or_else(|_| usage()),
            "--timeout-s" => a.timeout_s = value().parse().unwrap_or_else(|_| usage()),
            _ => usage(),
        }
    }
    a
}

fn ort_library() -> PathBuf {
    std::env::var_os("ORT_DYLIB_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("build/onnxruntime/libonnxruntime.so"))
}

fn environment() -> Result<ort::environment::Environment, String> {
    let lib = ort_library();
    if !lib.is_file() {
        return Err(format!(
            "ONNX Runtime library not found at {} (set ORT_DYLIB_PATH)",
            lib.display()
        ));
    }
    ort::init_from(&lib)
        .map_err(|e| e.to_string())?
        .with_name("attention-bench")
        .with_telemetry(false)
        .build()
        .map_err(|e| e.to_string())
}

fn status_kib(pid: &str, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Child mode: one session, `runs` forwards, one result line on stdout.
fn child(
    model: &Path,
    fused: bool,
    len: usize,
    batch: usize,
    threads: usize,
    runs: usize,
) -> Result<(), String> {
    let env = environment()?;
    let e = |e: ort::Error| e.to_string();
    let mut builder = Session::builder(&env)
        .map_err(e)?
        .with_optimization_level(GraphOptimizationLevel::Level3)
        .map_err(|e| e.to_string())?
        .with_intra_threads(threads)
        .map_err(|e| e.to_string())?
        .with_inter_threads(1)
        .map_err(|e| e.to_string())?;
    if fused {
        builder = semroute_kernels::register(builder).map_err(e)?;
    }
    let mut session = builder.commit_from_file(model).map_err(e)?;
    let ready_kib = status_kib("self", "VmRSS:").unwrap_or(0);
    let names: Vec<String> = session
        .inputs()
        .iter()
        .map(|i| i.name().to_string())
        .collect();
    let mut best = f64::INFINITY;
    for _ in 0..runs.max(1) {
        let mut feeds = Vec::new();
        for name in &names {
            let data: Vec<i64> = if name.contains("mask") {
                vec![1; batch * len]
            } else if name.contains("type") {
                vec![0; batch * len]
            } else if name.contains("position") {
                (0..batch).flat_map(|_| 0..len as i64).collect()
            } else {
                (0..batch * len).map(|j| (j * 7 % 50) as i64 + 3).collect()
            };
            let t = Tensor::from_array((vec![batch, len], data)).map_err(e)?;
            feeds.push((name.clone(), t.into_dyn()));
        }
        let start = Instant::now();
        let out = session.run(feeds).map_err(e)?;
        best = best.min(start.elapsed().as_secs_f64() * 1e3);
        drop(out);
    }
    let peak_kib = status_kib("self", "VmHWM:").unwrap_or(0);
    println!("RESULT {best:.3} {peak_kib} {ready_kib}");
    Ok(())
}

#[derive(Debug, Clone)]
enum Outcome {
    Ok {
        ms: f64,
        peak_gib: f64,
        ready_gib: f64,
    },
    Skipped(String),
    Failed(String),
}

impl Outcome {
    fn activation_gib(&self) -> Option<f64> {
        match self {
            Outcome::Ok {
                peak_gib,
                ready_gib,
                ..
            } => Some((peak_gib - ready_gib).max(0.0)),
            _ => None,
        }
    }
}

/// Runs one configuration in a child process, killing it above
/// `limit_gib` resident memory or after `timeout`.
fn measure(args: &Args, model: &Path, fused: bool, len: usize, limit_gib: f64) -> Outcome {
    let exe = match std::env::current_exe() {
        Ok(p) => p,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let runs = args.runs.unwrap_or(if len <= 2048 { 3 } else { 1 });
    let mut cmd = Command::new(exe);
    cmd.arg("--child")
        .arg(model)
        .arg(if fused { "fused" } else { "original" })
        .arg(len.to_string())
        .arg(args.batch.to_string())
        .arg(args.threads.to_string())
        .arg(runs.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let pid = child.id().to_string();
    let start = Instant::now();
    let mut worst_kib = 0u64;
    let killed = loop {
        match child.try_wait() {
            Ok(Some(_)) => break None,
            Ok(None) => {}
            Err(e) => break Some(e.to_string()),
        }
        if let Some(rss) = status_kib(&pid, "VmRSS:") {
            worst_kib = worst_kib.max(rss);
            if rss as f64 * 1024.0 / GIB > limit_gib {
                let _ = child.kill();
                let _ = child.wait();
                break Some(format!("killed above {limit_gib:.1} GiB resident"));
            }
        }
        if start.elapsed() > Duration::from_secs(args.timeout_s) {
            let _ = child.kill();
            let _ = child.wait();
            break Some(format!("killed after {} s", args.timeout_s));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if let Some(reason) = killed {
        return Outcome::Failed(reason);
    }
    let mut result = None;
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(rest) = line.strip_prefix("RESULT ") {
                let f: Vec<f64> = rest
                    .split_whitespace()
                    .filter_map(|x| x.parse().ok())
                    .collect();
                if let [ms, peak, ready] = f[..] {
                    result = Some(Outcome::Ok {
                        ms,
                        peak_gib: peak * 1024.0 / GIB,
                        ready_gib: ready * 1024.0 / GIB,
                    });
                }
            }
        }
    }
    result.unwrap_or_else(|| {
        let mut msg = String::new();
        if let Some(err) = child.stderr.take() {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                msg = line;
            }
        }
        Outcome::Failed(if msg.is_empty() {
            "no result".into()
        } else {
            msg
        })
    })
}

fn cell(o: &Outcome) -> (String, String) {
    match o {
        Outcome::Ok {
            ms,
            peak_gib,
            ready_gib,
        } => (
            format!("{ms:.1}"),
            format!(
                "{:.0} (+{:.0})",
                peak_gib * 1024.0,
                (peak_gib - ready_gib).max(0.0) * 1024.0
            ),
        ),
        Outcome::Skipped(why) | Outcome::Failed(why) => ("-".into(), why.clone()),
    }
}

fn tokens(n: usize) -> String {
    if n >= 1024 && (n / 1024) * 1024 == n {
        format!("{}K", n / 1024)
    } else {
        n.to_string()
    }
}

fn main() {
    let mut argv = std::env::args().skip(1).peekable();
    if argv.peek().map(String::as_str) == Some("--child") {
        let v: Vec<String> = argv.skip(1).collect();
        let parsed = (|| {
            let model = PathBuf::from(v.first()?);
            let fused = v.get(1)? == "fused";
            let n = |i: usize| v.get(i)?.parse::<usize>().ok();
            Some((model, fused, n(2)?, n(3)?, n(4)?, n(5)?))
        })();
        let Some((model, fused, len, batch, threads, runs)) = parsed else {
            usage()
        };
        if let Err(e) = child(&model, fused, len, batch, threads, runs) {
            eprintln!("{e}");
            std::process::exit(1);
        }
        return;
    }
    if argv.peek().map(String::as_str) == Some("--kernel") {
        let words: Vec<String> = argv.skip(1).collect();
        let v: Vec<usize> = words.iter().filter_map(|x| x.parse().ok()).collect();
        let isa = match words.last().map(String::as_str) {
            Some("portable") => semroute_kernels::KernelIsa::Portable,
            Some("avx2") => semroute_kernels::KernelIsa::Avx2,
            Some("avx512") => semroute_kernels::KernelIsa::Avx512,
            Some("amx-bf16") => semroute_kernels::KernelIsa::AmxBf16,
            _ => semroute_kernels::KernelIsa::Auto,
        };
        let [seq, heads, head_dim, window, threads, ..] = v[..] else {
            eprintln!(
                "usage: attention-bench --kernel SEQ HEADS HEAD_DIM WINDOW(0 = global) THREADS [portable|avx2|avx512|amx-bf16]"
            );
            std::process::exit(2)
        };
        kernel_bench(seq, heads, head_dim, window, threads, isa);
        return;
    }
    let args = parse_args(argv);
    if let Err(e) = run(&args) {
        eprintln!("attention-bench: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), String> {
    let bytes =
        std::fs::read(&args.model).map_err(|e| format!("read {}: {e}", args.model.display()))?;
    let config_path = args.config.clone().or_else(|| {
        let stem = args.model.file_stem()?.to_string_lossy().into_owned();
        let sibling = args.model.with_file_name(format!("{stem}_config.json"));
        let plain = args.model.with_file_name("config.json");
        [sibling, plain].into_iter().find(|p| p.is_file())
    });
    let options = match &config_path {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).map_err(|e| format!("read {}: {e}", p.display()))?;
            semroute_kernels::FuseOptions::from_hf_config(&text).map_err(|e| e.to_string())?
        }
        None => semroute_kernels::FuseOptions::default(),
    };
    let env = environment()?;
    let start = Instant::now();
    let (fused, report) =
        semroute_kernels::fuse_attention(&env, &bytes, &options).map_err(|e| e.to_string())?;
    let fuse_s = start.elapsed().as_secs_f64();
    drop(env);

    let dir = std::env::temp_dir().join(format!("attention-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let original_path = dir.join("original.onnx");
    let fused_path = dir.join("fused.onnx");
    std::fs::write(&original_path, &bytes).map_err(|e| e.to_string())?;
    std::fs::write(&fused_path, &fused).map_err(|e| e.to_string())?;

    println!(
        "# attention-bench: one classifier forward, original graph vs fused attention (same run)"
    );
    println!(
        "model: {} ({} bytes); batch {}; {} intra-op thread(s); ORT CPU, graph optimisation level 3",
        args.model.file_name().map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
        bytes.len(),
        args.batch,
        args.threads
    );
    println!(
        "cpu: {}; {} logical CPU(s)",
        std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|t| t
                .lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| { l.split(':').nth(1).unwrap_or("").trim().to_string() }))
            .unwrap_or_else(|| "unknown".into()),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    print!("rewrite ({fuse_s:.1} s): {report}");
    println!(
        "peak = VmHWM of a child process per cell (MiB); (+X) = peak minus resident memory once the session was ready, i.e. the forward pass; latency = min over {} run(s) (ms)",
        args.runs.map_or_else(|| "3 (<= 2K tokens) or 1".to_string(), |r| r.to_string())
    );
    println!();
    println!("| tokens | original ms | original peak MiB | fused ms | fused peak MiB | forward memory original / fused |");
    println!("|---:|---:|---:|---:|---:|---:|");

    let mut last_original: Option<(usize, f64)> = None;
    let mut largest_original = None;
    let mut ratio_8k = None;
    for &len in &args.lengths {
        let predicted = last_original.map(|(l0, act0)| act0 * (len as f64 / l0 as f64).powi(2));
        let original = match predicted {
            Some(p) if p > args.max_original_gb => Outcome::Skipped(format!(
                "skipped: predicted {p:.0} GiB > {} GiB limit",
                args.max_original_gb
            )),
            _ => measure(args, &original_path, false, len, args.max_original_gb),
        };
        if let Some(act) = original.activation_gib() {
            last_original = Some((len, act));
            largest_original = Some(len);
        }
        let fused_outcome = measure(args, &fused_path, true, len, args.max_original_gb.max(8.0));
        let ratio = match (original.activation_gib(), fused_outcome.activation_gib()) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.1}x", a / b),
            _ => "-".into(),
        };
        if len == 8192 {
            ratio_8k = Some(ratio.clone());
        }
        let (om, op) = cell(&original);
        let (fm, fp) = cell(&fused_outcome);
        println!("| {} | {om} | {op} | {fm} | {fp} | {ratio} |", tokens(len));
    }
    println!();
    if let Some(r) = ratio_8k {
        println!("forward-pass memory ratio at 8K tokens (original / fused): {r}");
    }
    match largest_original {
        Some(l) => println!(
            "largest length the original graph handled within {} GiB: {} tokens",
            args.max_original_gb,
            tokens(l)
        ),
        None => println!("the original graph handled none of the lengths"),
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

/// Kernel-only mode: the fused CPU kernel on random data, in GFLOP/s
/// (counting `4 * visible pairs * head_dim` flops for QK^T and PV).
fn kernel_bench(
    seq: usize,
    heads: usize,
    head_dim: usize,
    window: usize,
    threads: usize,
    isa: semroute_kernels::KernelIsa,
) {
    use semroute_kernels::{
        flash_attention_with_isa, AttentionParams, AttentionShape, ScopedThreads, Window,
    };
    let shape = AttentionShape {
        batch: 1,
        heads,
        seq_q: seq,
        seq_kv: seq,
        head_dim,
    };
    let n = heads * seq * head_dim;
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    let q: Vec<f32> = (0..n).map(|_| rnd()).collect();
    let k: Vec<f32> = (0..n).map(|_| rnd()).collect();
    let v: Vec<f32> = (0..n).map(|_| rnd()).collect();
    let mut out = vec![0.0f32; n];
    let w = if window == 0 {
        Window::GLOBAL
    } else {
        Window::symmetric(window / 2)
    };
    let params = AttentionParams {
        scale: 1.0 / (head_dim as f32).sqrt(),
        window: w,
    };
    let pairs: f64 = (0..seq)
        .map(|i| {
            let (lo, hi) = w.key_range(i, seq);
            (hi - lo) as f64
        })
        .sum();
    let runner = ScopedThreads { threads };
    let mut best = f64::INFINITY;
    let runs: usize = std::env::var("KERNEL_RUNS")
        .ok()
        .and_then(|x| x.parse().ok())
        .unwrap_or(3);
    for _ in 0..runs {
        let start = Instant::now();
        if let Err(e) =
            flash_attention_with_isa(isa, &q, &k, &v, None, shape, params, &mut out, &runner)
        {
            eprintln!("{e}");
            std::process::exit(1);
        }
        best = best.min(start.elapsed().as_secs_f64());
    }
    let gflops = 4.0 * pairs * head_dim as f64 * heads as f64 / best / 1e9;
    println!(
        "seq {seq} heads {heads} head_dim {head_dim} window {window} threads {threads} {isa:?}: {:.1} ms, {gflops:.1} GFLOP/s",
        best * 1e3
    );
}
