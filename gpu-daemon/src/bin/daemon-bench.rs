//! `daemon-bench`: daemon latency per signal, sequence length and batch
//! size, with baselines measured in the same run:
//!
//! - shared encoder pass (domain + jailbreak in one call) vs one call per
//!   signal (how a router with one model per classifier runs);
//! - batch of 8 vs 8 single calls (cross-request batching);
//! - gRPC over the Unix socket (the real daemon process) vs in-process.
//!
//! Before those: each model's graph as shipped vs as prepared (ms and fidelity), and
//! where the router encoder's time goes per operator group (ONNX Runtime's profiler),
//! served graph beside the fused-attention graph.
//!
//! Run from the repository root after `make build`: `make bench`.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use ort::value::Tensor;
use semroute_daemon::config::DaemonConfig;
use semroute_daemon::engine::{ClassifyInput, Engine, SignalSet};
use semroute_daemon::models::tokenizer::WindowTokenizer;
use semroute_daemon::runtime::build_profiling_session;

const LENGTHS: [usize; 4] = [32, 128, 256, 512];
const CORPUS: &str = "The committee reviewed the quarterly budget and asked for a detailed \
breakdown of travel costs. Photosynthesis converts light energy into chemical energy stored in glucose. \
A binary search tree keeps its keys in sorted order so lookups take logarithmic time. \
The court held that the contract was void because one party lacked capacity. \
Inflation erodes purchasing power when wages do not keep pace with prices. \
Newton's second law relates force, mass and acceleration. Please summarise the main argument \
of the essay in three sentences and list any assumptions the author makes. ";

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<f64>().ok())
            })
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

/// Text of exactly `n` encoder tokens (no special tokens).
fn text_of_tokens(engine: &Engine, n: usize) -> anyhow::Result<String> {
    let tok = engine.encoder_tokenizer().context("no encoder")?;
    let mut text = CORPUS.repeat(n / 40 + 2);
    let t = tok.tokenize(&text)?;
    anyhow::ensure!(t.ids.len() >= n, "corpus too short");
    text.truncate(t.offsets[n - 1].1);
    Ok(text)
}

/// Times `f` for at least `min_iters` iterations or `budget`, after warm-up.
fn time_it(
    mut f: impl FnMut() -> anyhow::Result<()>,
    min_iters: usize,
    budget: Duration,
) -> anyhow::Result<Vec<f64>> {
    for _ in 0..2 {
        f()?;
    }
    let mut samples = Vec::new();
    let start = Instant::now();
    while samples.len() < min_iters || (start.elapsed() < budget && samples.len() < 200) {
        let t = Instant::now();
        f()?;
        samples.push(t.elapsed().as_secs_f64() * 1e3);
        if start.elapsed() > budget * 3 {
            break;
        }
    }
    samples.sort_by(f64::total_cmp);
    Ok(samples)
}

fn signals(name: &str) -> SignalSet {
    match name {
        "domain" => SignalSet {
            domain: true,
            ..Default::default()
        },
        "jailbreak" => SignalSet {
            jailbreak: true,
            ..Default::default()
        },
        "pii" => SignalSet {
            pii: true,
            ..Default::default()
        },
        "domain+jailbreak" => SignalSet {
            domain: true,
            jailbreak: true,
            pii: false,
        },
        _ => SignalSet::ALL,
    }
}

/// The default configuration with the result caches off: every call of a table repeats
/// the same text, and the tables measure the models, not cache hits.
fn bench_config() -> DaemonConfig {
    let mut config = DaemonConfig::default();
    config.cache.encoder_bytes = 0;
    config.cache.pii_bytes = 0;
    config
}

fn main() -> anyhow::Result<()> {
    let config = bench_config();
    graph_table(&config)?;
    operator_table(&config)?;
    let t = Instant::now();
    let mut engine = Engine::load(&config)?;
    let load_s = t.elapsed().as_secs_f64();
    let rss_after_load = peak_rss_mib();
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!("# semroute daemon benchmark");
    println!();
    println!("setup: {threads} cores, ONNX Runtime CPU execution provider, intra-op threads {threads}, models: {:?}", engine.names.entries);
    println!("models loaded in {load_s:.1} s; window {} tokens; times are ms per call (median of repeated calls)", config.limits.max_seq_len);
    println!();
    println!("## In-process engine latency per signal");
    println!();
    println!("| signal | tokens | batch | p50 ms | p99 ms | ms per request | requests/s |");
    println!("|---|---|---|---|---|---|---|");
    let budget = Duration::from_millis(1500);
    let mut shared = Vec::new();
    for &n in &LENGTHS {
        let text = text_of_tokens(&engine, n)?;
        for sig in ["domain", "jailbreak", "pii", "domain+jailbreak", "all"] {
            for batch in [1usize, 8] {
                let inputs: Vec<ClassifyInput> = (0..batch)
                    .map(|_| ClassifyInput {
                        text: text.clone(),
                        scan_text: String::new(),
                        signals: signals(sig),
                        ..Default::default()
                    })
                    .collect();
                let s = time_it(
                    || {
                        engine
                            .classify_batch(&inputs)
                            .map(|_| ())
                            .map_err(Into::into)
                    },
                    5,
                    budget,
                )?;
                let p50 = percentile(&s, 0.5);
                println!(
                    "| {sig} | {n} | {batch} | {p50:.2} | {:.2} | {:.2} | {:.0} |",
                    percentile(&s, 0.99),
                    p50 / batch as f64,
                    1e3 * batch as f64 / p50
                );
                if batch == 1
                    && (sig == "domain" || sig == "jailbreak" || sig == "domain+jailbreak")
                {
                    shared.push((n, sig, p50));
                }
            }
        }
    }
    println!();
    println!(
        "## Shared encoder pass vs one pass per signal (baseline: one model run per classifier)"
    );
    println!();
    println!("| tokens | domain alone | jailbreak alone | baseline: sum | shared: domain+jailbreak | speed-up |");
    println!("|---|---|---|---|---|---|");
    for &n in &LENGTHS {
        let get = |s: &str| {
            shared
                .iter()
                .find(|(m, sig, _)| *m == n && *sig == s)
                .map(|x| x.2)
                .unwrap_or(f64::NAN)
        };
        let (d, j, both) = (get("domain"), get("jailbreak"), get("domain+jailbreak"));
        println!(
            "| {n} | {d:.2} | {j:.2} | {:.2} | {both:.2} | {:.2}x |",
            d + j,
            (d + j) / both
        );
    }
    let rss_engine = peak_rss_mib();
    drop(engine);

    // gRPC round trip through the real daemon process vs in-process.
    println!();
    println!("## gRPC over the Unix socket (real daemon process), all signals, batch 1");
    println!();
    grpc_table(&config)?;
    println!();
    println!("peak RSS of this benchmark process: {rss_after_load:.0} MiB after loading models, {rss_engine:.0} MiB after all runs");
    Ok(())
}

fn grpc_table(config: &DaemonConfig) -> anyhow::Result<()> {
    use semroute_proto::v1::classifier_client::ClassifierClient;
    use semroute_proto::v1::ClassifyRequest;
    let exe = std::env::current_exe()?;
    let daemon = exe.parent().context("exe dir")?.join("semroute-daemon");
    anyhow::ensure!(
        daemon.exists(),
        "{} missing: run `make build`",
        daemon.display()
    );
    let dir = std::env::temp_dir().join(format!("semroute-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let socket: PathBuf = dir.join("d.sock");
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let config_file = dir.join("daemon.toml");
    std::fs::write(&config_file, "[cache]\nencoder_bytes = 0\npii_bytes = 0\n")?;
    let mut child = Command::new(&daemon)
        .args(["serve", "--allow-root"])
        .arg("--config")
        .arg(&config_file)
        .arg("--socket")
        .arg(&socket)
        .args(["--metrics-addr", &format!("127.0.0.1:{port}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let result = (|| -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !socket.exists() {
            anyhow::ensure!(Instant::now() < deadline, "daemon did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let engine_cfg = config.clone();
        let mut engine = Engine::load(&engine_cfg)?;
        println!("| tokens | in-process p50 ms | gRPC p50 ms | gRPC p99 ms | transport + queue overhead ms |");
        println!("|---|---|---|---|---|");
        let channel = rt.block_on(semroute_daemon::client::connect(&socket))?;
        let mut client = ClassifierClient::new(channel);
        for &n in &LENGTHS {
            let text = text_of_tokens(&engine, n)?;
            let input = vec![ClassifyInput {
                text: text.clone(),
                scan_text: String::new(),
                signals: SignalSet::ALL,
                ..Default::default()
            }];
            let local = time_it(
                || {
                    engine
                        .classify_batch(&input)
                        .map(|_| ())
                        .map_err(Into::into)
                },
                5,
                Duration::from_millis(1000),
            )?;
            let remote = time_it(
                || {
                    rt.block_on(client.classify(ClassifyRequest {
                        request_id: "bench".into(),
                        text: text.as_bytes().to_vec(),
                        ..Default::default()
                    }))?;
                    Ok(())
                },
                5,
                Duration::from_millis(1000),
            )?;
            let (l, r) = (percentile(&local, 0.5), percentile(&remote, 0.5));
            println!(
                "| {n} | {l:.2} | {r:.2} | {:.2} | {:.2} |",
                percentile(&remote, 0.99),
                r - l
            );
        }
        Ok(())
    })();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// The served graphs against the graphs as the wheels ship them: one forward pass, batch 1,
/// each model alone with every core, at 128 / 256 / 512 tokens; and their fidelity: cosine of
/// the pooled embeddings (MiniLM) and share of equal token labels (Rampart) between the two,
/// measured here, beside what `make setup` measured against the fp32 source graphs
/// (`PREPARED.json`).
fn graph_table(config: &DaemonConfig) -> anyhow::Result<()> {
    use semroute_daemon::models::encoder::SentenceEncoder;
    use semroute_daemon::models::hf_dir::HfClassifier;
    let mut runtime = config.runtime.clone();
    runtime.intra_threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let shipped = |name: &str| PathBuf::from("build/models").join(name);
    let prepared = |name: &str| PathBuf::from("build/models/prepared").join(name);
    println!("## Model graphs: as shipped vs prepared (`make setup`: fp32 rebuild, fused attention, int8 weights)");
    println!();
    println!(
        "One forward pass, batch 1, one model alone on {} intra-op threads; ms, median.",
        runtime.intra_threads
    );
    println!();
    println!(
        "| model | tokens | shipped ms | prepared ms | speed-up | fidelity prepared vs shipped |"
    );
    println!("|---|---|---|---|---|---|");
    let budget = Duration::from_millis(800);
    let mut encoders = [
        SentenceEncoder::load(&shipped("minilm"), &runtime)?,
        SentenceEncoder::load(&prepared("minilm"), &runtime)?,
    ];
    let mut pii = [
        HfClassifier::load(&shipped("rampart"), &runtime)?,
        HfClassifier::load(&prepared("rampart"), &runtime)?,
    ];
    let tok = encoders[0].tokenizer.tokenize(&CORPUS.repeat(64))?;
    let pii_tok = pii[0].tokenizer.tokenize(&CORPUS.repeat(64))?;
    for n in [128usize, 256, 512] {
        let ids: Vec<u32> = tok.ids.iter().copied().take(n - 2).collect();
        let seqs = [ids.as_slice()];
        let mut ms = [0f64; 2];
        let mut rows = Vec::new();
        for (i, e) in encoders.iter_mut().enumerate() {
            let s = time_it(|| e.embed(&seqs).map(|_| ()).map_err(Into::into), 5, budget)?;
            ms[i] = percentile(&s, 0.5);
            rows.push(e.embed(&seqs)?.row(0).to_vec());
        }
        let cos = cosine(&rows[0], &rows[1]);
        println!(
            "| MiniLM-L6 encoder | {n} | {:.1} | {:.1} | {:.2}x | cosine {cos:.4} |",
            ms[0],
            ms[1],
            ms[0] / ms[1]
        );
        let pii_ids: Vec<u32> = pii_tok.ids.iter().copied().take(n - 2).collect();
        let seqs = [pii_ids.as_slice()];
        let mut labels = Vec::new();
        for (i, m) in pii.iter_mut().enumerate() {
            let s = time_it(
                || m.logits(&seqs).map(|_| ()).map_err(Into::into),
                5,
                budget,
            )?;
            ms[i] = percentile(&s, 0.5);
            let l = m.logits(&seqs)?;
            let per_token: Vec<usize> = l
                .outer_iter()
                .flat_map(|b| {
                    b.outer_iter()
                        .map(|t| {
                            t.iter()
                                .enumerate()
                                .fold((0, f32::MIN), |a, (k, &v)| if v > a.1 { (k, v) } else { a })
                                .0
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            labels.push(per_token);
        }
        let same = labels[0]
            .iter()
            .zip(&labels[1])
            .filter(|(a, b)| a == b)
            .count();
        println!(
            "| Rampart PII | {n} | {:.1} | {:.1} | {:.2}x | same token label {same}/{} |",
            ms[0],
            ms[1],
            ms[0] / ms[1],
            labels[0].len()
        );
    }
    println!();
    for name in ["minilm", "rampart"] {
        let path = prepared(name).join("PREPARED.json");
        let checks = std::fs::read(&path)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .and_then(|v| v.get("checks").cloned());
        for c in checks
            .as_ref()
            .and_then(|c| c.as_array())
            .into_iter()
            .flatten()
        {
            let get = |k: &str| {
                c.get(k)
                    .map(|v| v.to_string())
                    .unwrap_or_else(|| "-".into())
            };
            println!(
                "setup check, {name}: {} ({} texts): min cosine {}, argmax agreement {}, passed {}",
                c.get("what").and_then(|w| w.as_str()).unwrap_or("?"),
                get("texts"),
                get("min_cosine"),
                get("argmax_agreement"),
                get("passed")
            );
        }
    }
    println!();
    Ok(())
}

/// Tokens of the pass [`operator_table`] profiles: the filter's compression budget (256
/// tokens, [CLS]/[SEP] included), what the router encoder reads of any longer prompt.
const PROFILE_TOKENS: usize = 256;
/// Profiled runs per graph, after [`PROFILE_WARMUP`] runs left out of the sums.
const PROFILE_RUNS: usize = 20;
const PROFILE_WARMUP: usize = 3;

/// The operator groups of an encoder pass, in print order, by ONNX Runtime op type.
const OP_GROUPS: [(&str, &[&str]); 6] = [
    (
        "int8 matmuls: Q, K, V, output, FFN (with their dynamic activation quantization)",
        &[
            "DynamicQuantizeMatMul",
            "MatMulIntegerToFloat",
            "MatMulInteger",
            "DynamicQuantizeLinear",
        ],
    ),
    (
        "attention: scores, softmax, P V (fused op: bf16 products on AMX; ONNX Runtime: fp32)",
        &["FusedMatMul", "MatMul", "Softmax", "FlashAttention"],
    ),
    (
        "head split and merge: Transpose, Reshape",
        &["Transpose", "Reshape"],
    ),
    ("GELU", &["Gelu", "BiasGelu", "FastGelu", "Erf"]),
    (
        "layer norms and residual adds",
        &["LayerNormalization", "SkipLayerNormalization", "Add"],
    ),
    ("other", &[]),
];

/// Where the router encoder's time goes: ONNX Runtime's profiler over [`PROFILE_RUNS`]
/// passes of [`PROFILE_TOKENS`] tokens, node times summed per operator group, for the
/// served graph (fused attention with bfloat16 products) and the same int8 graph with
/// ONNX Runtime's own attention nodes (`prepare_models.py`), each on the daemon's session
/// settings and thread pool. The multiply-accumulates per pass come from the
/// model's `config.json` (`hidden_size`, `intermediate_size`, `num_hidden_layers`):
/// `layers * n * (4 h^2 + 2 h i)` in the int8 matmuls, `layers * 2 n^2 h` in attention.
fn operator_table(config: &DaemonConfig) -> anyhow::Result<()> {
    let dir = PathBuf::from("build/models/prepared/router");
    let graphs = [
        ("served", dir.join("model.onnx")),
        (
            "ONNX Runtime attention",
            dir.join("onnxruntime-attention/model.onnx"),
        ),
    ];
    let hf: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("config.json")).context("router config.json")?,
    )?;
    let dim = |k: &str| hf.get(k).and_then(|v| v.as_u64()).map(|v| v as f64);
    let (Some(h), Some(i), Some(layers)) = (
        dim("hidden_size"),
        dim("intermediate_size"),
        dim("num_hidden_layers"),
    ) else {
        anyhow::bail!(
            "router config.json lacks hidden_size, intermediate_size or num_hidden_layers"
        );
    };
    let n = PROFILE_TOKENS as f64;
    let macs = [
        layers * n * (4.0 * h * h + 2.0 * h * i),
        layers * 2.0 * n * n * h,
    ];
    let tokenizer = WindowTokenizer::from_file(&dir.join("tokenizer.json"))?;
    let tok = tokenizer.tokenize(&CORPUS.repeat(64))?;
    let ids: Vec<u32> = tok.ids.iter().copied().take(PROFILE_TOKENS - 2).collect();
    let [ids, mask, types] = tokenizer.batch_inputs(&[ids.as_slice()]);
    // The traces go to a directory of this process's own, removed at the end.
    let scratch = std::env::temp_dir().join(format!("semroute-op-profile-{}", std::process::id()));
    std::fs::create_dir_all(&scratch)?;
    let profile = || -> anyhow::Result<Vec<(&str, OpTimes)>> {
        let mut columns = Vec::new();
        for (name, path) in &graphs {
            if !path.exists() {
                continue;
            }
            let prefix = scratch.join(name.replace(' ', "-"));
            let (mut session, _) = build_profiling_session(&config.runtime, path, &prefix)?;
            for _ in 0..PROFILE_WARMUP + PROFILE_RUNS {
                session.run(ort::inputs![
                    "input_ids" => Tensor::from_array(ids.clone())?,
                    "attention_mask" => Tensor::from_array(mask.clone())?,
                    "token_type_ids" => Tensor::from_array(types.clone())?,
                ])?;
            }
            let trace = session.end_profiling()?;
            columns.push((*name, op_times(&std::fs::read(&trace)?)?));
        }
        Ok(columns)
    };
    let columns = profile();
    std::fs::remove_dir_all(&scratch)?;
    let columns = columns?;
    println!("## Where the router encoder's time goes (ONNX Runtime profiler)");
    println!();
    println!(
        "One pass of {PROFILE_TOKENS} tokens, batch 1, the daemon's session settings; ms per pass, mean of {PROFILE_RUNS} passes after {PROFILE_WARMUP} warm-up; GMAC/s = multiply-accumulates per pass / group time. Node times only: the pass total also holds the executor's own time."
    );
    println!();
    let names: Vec<&str> = columns.iter().map(|c| c.0).collect();
    println!("| operators | {} |", names.join(" | "));
    println!("|---|{}", "---:|".repeat(names.len()));
    for (g, (label, _)) in OP_GROUPS.iter().enumerate() {
        let cells: Vec<String> = columns
            .iter()
            .map(|(_, t)| match macs.get(g) {
                Some(m) if t.groups[g] > 0.0 => {
                    format!(
                        "{:.2} ms ({:.0} GMAC/s)",
                        t.groups[g],
                        m / t.groups[g] / 1e6
                    )
                }
                _ => format!("{:.2} ms", t.groups[g]),
            })
            .collect();
        println!("| {label} | {} |", cells.join(" | "));
    }
    let totals: Vec<String> = columns
        .iter()
        .map(|(_, t)| format!("**{:.2} ms**", t.pass))
        .collect();
    println!("| pass (model run) | {} |", totals.join(" | "));
    println!();
    Ok(())
}

/// Per-pass times (ms) from an ONNX Runtime profile: each [`OP_GROUPS`] group's node
/// time and the `model_run` time, over the runs after the first [`PROFILE_WARMUP`].
struct OpTimes {
    groups: [f64; OP_GROUPS.len()],
    pass: f64,
}

fn op_times(trace: &[u8]) -> anyhow::Result<OpTimes> {
    let events: Vec<serde_json::Value> = serde_json::from_slice(trace)?;
    let field = |e: &serde_json::Value, k: &str| e.get(k).and_then(|v| v.as_f64()).unwrap_or(0.0);
    // Runs in order of their start; node events from the first timed run's start count.
    let mut runs: Vec<(f64, f64)> = events
        .iter()
        .filter(|e| e.get("name").and_then(|n| n.as_str()) == Some("model_run"))
        .map(|e| (field(e, "ts"), field(e, "dur")))
        .collect();
    runs.sort_by(|a, b| a.0.total_cmp(&b.0));
    anyhow::ensure!(
        runs.len() > PROFILE_WARMUP,
        "profile holds {} runs",
        runs.len()
    );
    let from = runs[PROFILE_WARMUP].0;
    let timed = (runs.len() - PROFILE_WARMUP) as f64;
    let mut groups = [0f64; OP_GROUPS.len()];
    for e in &events {
        let is_node = e.get("cat").and_then(|c| c.as_str()) == Some("Node")
            && e.get("name")
                .and_then(|n| n.as_str())
                .is_some_and(|n| n.ends_with("_kernel_time"));
        let op = e
            .pointer("/args/op_name")
            .and_then(|o| o.as_str())
            .unwrap_or("");
        // `If` holds the graph's nodes (the padding branches): its own time counts them twice.
        if !is_node || field(e, "ts") < from || op == "If" {
            continue;
        }
        let g = OP_GROUPS
            .iter()
            .position(|(_, ops)| ops.contains(&op))
            .unwrap_or(OP_GROUPS.len() - 1);
        groups[g] += field(e, "dur") / 1e3 / timed;
    }
    let pass = runs[PROFILE_WARMUP..].iter().map(|r| r.1).sum::<f64>() / 1e3 / timed;
    Ok(OpTimes { groups, pass })
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb).max(f64::MIN_POSITIVE)
}
