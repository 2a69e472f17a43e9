//! `semroute-daemon`: the inference daemon's command line.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use semroute_daemon::batcher::Batcher;
use semroute_daemon::config::{ConfigError, DaemonConfig, ExecutionProviderKind};
use semroute_daemon::engine::{
    embed_texts, text_ranges, ClassifyInput, ClassifyOutput, Engine, Part, SignalSet, SpanError,
};
use semroute_daemon::metrics::{self, Metrics};
use semroute_daemon::model_check::{run_check, CheckOptions};
use semroute_daemon::models::encoder::SentenceEncoder;
use semroute_daemon::pii::Source;
use semroute_daemon::reload;
use semroute_daemon::server::{self, ClassifierService};
use serde_json::json;

/// semroute inference daemon: domain, jailbreak and PII classification over
/// gRPC on a Unix socket.
#[derive(Parser)]
#[command(name = "semroute-daemon", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Clone)]
struct ConfigArgs {
    /// Config file (TOML). Without it, built-in defaults (models under build/).
    #[arg(long, short, env = "SEMROUTE_DAEMON_CONFIG")]
    config: Option<PathBuf>,
    /// Execution provider, overriding the config (falls back to CPU when unavailable).
    #[arg(long, value_enum)]
    execution_provider: Option<ExecutionProviderKind>,
}

impl ConfigArgs {
    fn load(&self) -> anyhow::Result<DaemonConfig> {
        Ok(self.load_config()?)
    }

    fn load_config(&self) -> Result<DaemonConfig, ConfigError> {
        let mut c = match &self.config {
            Some(p) => DaemonConfig::load(p)?,
            None => DaemonConfig::default(),
        };
        if let Some(ep) = self.execution_provider {
            c.runtime.execution_provider = ep;
        }
        Ok(c)
    }
}

#[derive(Subcommand)]
enum Command {
    /// Serve semroute.v1.Classifier and grpc.health.v1 on a Unix socket.
    Serve {
        #[command(flatten)]
        config: ConfigArgs,
        /// Socket path (overrides the config; default /tmp/semroute/daemon.sock).
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Prometheus metrics address (overrides the config; default 127.0.0.1:9190).
        #[arg(long)]
        metrics_addr: Option<SocketAddr>,
        /// Serve even when running as root (refused otherwise: the daemon parses
        /// untrusted text and needs no privilege; run it as a dedicated user).
        #[arg(long, env = "SEMROUTE_DAEMON_ALLOW_ROOT")]
        allow_root: bool,
    },
    /// Classify JSON lines `{"text": ..., "scan_text": ..., "flagged_sentences":
    /// [[start, end], ...]}` (from --input or stdin) or one --text, printing one JSON result
    /// per line.
    Classify {
        #[command(flatten)]
        config: ConfigArgs,
        /// Comma-separated signals: domain,jailbreak,pii (default: all).
        #[arg(long, value_delimiter = ',')]
        signals: Vec<String>,
        /// JSON-lines input file (default: stdin).
        #[arg(long, conflicts_with = "text")]
        input: Option<PathBuf>,
        /// One text to classify.
        #[arg(long)]
        text: Option<String>,
    },
    /// Offline model preparation.
    Model {
        #[command(subcommand)]
        command: ModelCommand,
    },
    /// Load and validate a config file (TOML); exit non-zero naming the field when it
    /// is invalid. Model files are not opened.
    CheckConfig {
        /// Config file (TOML).
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Ask a running daemon `grpc.health.v1.Health/Check` over its socket; exit 0
    /// when it serves (a Kubernetes exec probe), non-zero otherwise.
    Health {
        /// Socket path (default: the config's `socket`).
        #[arg(long)]
        socket: Option<PathBuf>,
        #[command(flatten)]
        config: ConfigArgs,
        /// Service to ask about ("" = the server as a whole).
        #[arg(long, default_value = semroute_daemon::client::CLASSIFIER_SERVICE)]
        service: String,
        /// Give up after this many ms (connection included).
        #[arg(long, default_value_t = 2000)]
        timeout_ms: u64,
    },
    /// Create the socket directory shared with the gateway and hand it to the daemon's
    /// user and the gateway's group (an init container, as root with only CAP_CHOWN).
    SocketDir {
        /// Directory to prepare.
        path: PathBuf,
        /// Owner: the daemon's uid.
        #[arg(long)]
        uid: u32,
        /// Group: the gateway's gid (Istio's proxy: 1337).
        #[arg(long)]
        gid: u32,
        /// Permission bits, octal (default 2770: set-group-ID, rwx for owner and group).
        #[arg(long, default_value = "2770", value_parser = parse_octal_mode)]
        mode: u32,
    },
    /// Write the pooled encoder embedding of each input line's "text" as
    /// little-endian f32 rows `[lines, hidden]` (for training heads).
    Embed {
        #[command(flatten)]
        config: ConfigArgs,
        /// JSON-lines input with a "text" field.
        #[arg(long)]
        input: PathBuf,
        /// Output file of raw f32 rows.
        #[arg(long)]
        output: PathBuf,
    },
}

#[derive(Subcommand)]
enum ModelCommand {
    /// Replace each attention block of an exported encoder (BERT, ModernBERT
    /// global and sliding-window layers) with the fused
    /// `com.semroute::FlashAttention` op, and check the result against the
    /// original on a synthetic batch.
    FuseAttention {
        /// Input ONNX model.
        input: PathBuf,
        /// Output ONNX model (name it `model.fused.onnx` inside a classifier
        /// directory and the daemon prefers it).
        output: PathBuf,
        /// Hugging Face `config.json` of the model (default: `config.json` or
        /// `<stem>_config.json` next to the input, when present), for the
        /// sliding window and layer types.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Tokens of the synthetic batch used to read in-graph masks.
        #[arg(long)]
        probe_len: Option<usize>,
        /// Skip the before/after comparison.
        #[arg(long)]
        no_verify: bool,
    },
    /// Compare a candidate graph (prepared, fused, quantized) with a reference
    /// graph on a file of texts; exit non-zero, naming the failure, when it is
    /// below the thresholds.
    Check {
        #[command(flatten)]
        options: CheckOptions,
        /// Intra-op threads.
        #[arg(long, default_value_t = 2)]
        intra_threads: usize,
        /// Write the report as JSON to this file.
        #[arg(long)]
        report: Option<PathBuf>,
    },
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,ort=warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> anyhow::Result<()> {
    init_tracing();
    let cli = Cli::parse();
    match cli.command {
        Command::Serve {
            config,
            socket,
            metrics_addr,
            allow_root,
        } => {
            let mut c = config.load()?;
            // SAFETY: geteuid has no preconditions and cannot fail.
            if unsafe { libc::geteuid() } == 0 && !allow_root {
                anyhow::bail!(
                    "refusing to serve as root: run semroute-daemon as an unprivileged user \
                     (the DaemonSet uses uid 65532), or pass --allow-root \
                     (SEMROUTE_DAEMON_ALLOW_ROOT=1) to accept the risk"
                );
            }
            if let Some(s) = socket {
                c.socket = s;
            }
            if let Some(a) = metrics_addr {
                c.metrics_addr = a;
            }
            serve(c, config)
        }
        Command::Classify {
            config,
            signals,
            input,
            text,
        } => classify(config.load()?, &signals, input, text),
        Command::Embed {
            config,
            input,
            output,
        } => embed(config.load()?, &input, &output),
        Command::CheckConfig { config } => {
            DaemonConfig::load(&config)?;
            println!("{}: valid", config.display());
            Ok(())
        }
        Command::Health {
            socket,
            config,
            service,
            timeout_ms,
        } => health(
            socket.map_or_else(|| config.load().map(|c| c.socket), Ok)?,
            &service,
            Duration::from_millis(timeout_ms),
        ),
        Command::SocketDir {
            path,
            uid,
            gid,
            mode,
        } => {
            semroute_daemon::socket_dir::prepare(&path, uid, gid, mode)?;
            println!("{}: owner {uid}:{gid}, mode {mode:o}", path.display());
            Ok(())
        }
        Command::Model {
            command:
                ModelCommand::FuseAttention {
                    input,
                    output,
                    config,
                    probe_len,
                    no_verify,
                },
        } => fuse_attention(&input, &output, config, probe_len, no_verify),
        Command::Model {
            command:
                ModelCommand::Check {
                    options,
                    intra_threads,
                    report,
                },
        } => model_check(&options, intra_threads, report),
    }
}

fn parse_octal_mode(s: &str) -> Result<u32, String> {
    u32::from_str_radix(s.trim_start_matches("0o"), 8)
        .map_err(|e| format!("{s:?} is not an octal mode: {e}"))
}

fn health(socket: PathBuf, service: &str, timeout: Duration) -> anyhow::Result<()> {
    use tonic_health::pb::health_check_response::ServingStatus;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let status = runtime.block_on(semroute_daemon::client::check_health(
        &socket, service, timeout,
    ))?;
    if status != ServingStatus::Serving {
        anyhow::bail!(
            "{}: {service:?} is {}",
            socket.display(),
            status.as_str_name()
        );
    }
    println!("{}: {service:?} SERVING", socket.display());
    Ok(())
}

fn load_engine(config: &DaemonConfig) -> anyhow::Result<Engine> {
    let t = Instant::now();
    let engine = Engine::load(config).context("loading models")?;
    for (model, provider) in engine.providers() {
        tracing::info!(model, ?provider, "model loaded");
    }
    tracing::info!(ms = t.elapsed().as_millis() as u64, "models ready");
    Ok(engine)
}

/// Serves `config` (read from `source`, with `socket` and `metrics_addr` overridden by the
/// command line), reloading on SIGHUP and when the config file changes
/// (`semroute_daemon::reload`).
fn serve(config: DaemonConfig, source: ConfigArgs) -> anyhow::Result<()> {
    let engine = load_engine(&config)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let metrics = Metrics::new();
        let (reloads, reloaded) = std::sync::mpsc::channel();
        let batcher = Batcher::start(engine, reloaded, &config.batching, metrics.clone());
        let max_text_bytes = Arc::new(AtomicUsize::new(config.limits.max_text_bytes));
        let watch = source.config.clone();
        let load: Arc<reload::LoadConfig> = Arc::new(move || source.load_config());
        tokio::spawn(reload::run(
            load,
            watch,
            reloads,
            metrics.clone(),
            max_text_bytes.clone(),
        ));
        let socket =
            server::bind_socket(&config.socket, config.socket_mode, config.socket_group).await?;
        let metrics_addr = config.metrics_addr;
        let m = metrics.clone();
        tokio::spawn(async move {
            if let Err(e) = metrics::serve(metrics_addr, m).await {
                tracing::error!(addr = %metrics_addr, error = %e, "metrics server failed");
            }
        });
        let service = ClassifierService::new(batcher, metrics, max_text_bytes);
        tracing::info!(socket = %config.socket.display(), metrics = %metrics_addr, "serving");
        server::serve(socket, service, shutdown_signal()).await?;
        tracing::info!("stopped");
        Ok(())
    })
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down: draining in-flight calls");
}

#[derive(serde::Deserialize)]
struct InputLine {
    text: String,
    #[serde(default)]
    scan_text: String,
    /// `[start, end]` byte ranges of `text` scored alone by the jailbreak signal (what the
    /// filter sends as `flagged_sentences`).
    #[serde(default)]
    flagged_sentences: Vec<[usize; 2]>,
    /// The same for `scan_text`.
    #[serde(default)]
    scan_flagged_sentences: Vec<[usize; 2]>,
    /// Text scanned by the PII patterns only (what the filter sends as `pattern_text`).
    #[serde(default)]
    pattern_text: String,
    /// PII by the validated patterns only, not the model (what the filter sends as
    /// `pii_patterns_only` when its risk scan found no personal-data cue).
    #[serde(default)]
    pii_patterns_only: bool,
    /// `[start, end]` byte ranges of `text` that the PII model reads (what the filter sends
    /// as `pii_sentences`: the sentences with a personal-data cue and their neighbours).
    #[serde(default)]
    pii_sentences: Vec<[usize; 2]>,
    /// The same for `scan_text`.
    #[serde(default)]
    scan_pii_sentences: Vec<[usize; 2]>,
    /// Estimated tokens of the prompt before compression (what the filter sends as
    /// `reduction.original_tokens`); 0: `text`'s own tokens.
    #[serde(default)]
    original_tokens: u32,
    /// The same for `scan_text` (`scan_reduction.original_tokens`).
    #[serde(default)]
    scan_original_tokens: u32,
}

/// The engine's input for one `classify` line. Errors: a span that is not a range of
/// character boundaries of its text.
fn classify_input(l: InputLine, signals: SignalSet) -> Result<ClassifyInput, SpanError> {
    let ranges = |field, spans: &[[usize; 2]], text: &str| {
        text_ranges(field, spans.iter().map(|&[a, b]| (a, b)), text)
    };
    Ok(ClassifyInput {
        flagged_sentences: ranges("flagged_sentences", &l.flagged_sentences, &l.text)?,
        scan_flagged_sentences: ranges(
            "scan_flagged_sentences",
            &l.scan_flagged_sentences,
            &l.scan_text,
        )?,
        pii_sentences: ranges("pii_sentences", &l.pii_sentences, &l.text)?,
        scan_pii_sentences: ranges("scan_pii_sentences", &l.scan_pii_sentences, &l.scan_text)?,
        pattern_text: l.pattern_text,
        pii_patterns_only: l.pii_patterns_only,
        original_tokens: l.original_tokens,
        scan_original_tokens: l.scan_original_tokens,
        text: l.text,
        scan_text: l.scan_text,
        signals,
    })
}

fn output_json(out: &ClassifyOutput, total_ms: f64) -> serde_json::Value {
    let mut v = json!({
        "truncated": out.truncated,
        "input_tokens": out.input_tokens,
        "cost": {
            "encoder_tokens": out.encoder_tokens,
            "pii_tokens": out.pii_tokens,
            "cached_passes": out.cached_passes,
        },
        "timing_ms": {
            "tokenize": out.timings.tokenize_us as f64 / 1e3,
            "inference": out.timings.inference_us as f64 / 1e3,
            "encoder": out.timings.encoder_us as f64 / 1e3,
            "pii": out.timings.pii_us as f64 / 1e3,
            "postprocess": out.timings.postprocess_us as f64 / 1e3,
            "total": total_ms,
        },
    });
    if let Some(d) = &out.domain {
        v["domain"] = json!({
            "label": d.label,
            "confidence": d.confidence,
            "distribution": d.distribution.iter().map(|(l, s)| json!({"label": l, "score": s})).collect::<Vec<_>>(),
        });
    }
    if let Some(j) = &out.jailbreak {
        v["jailbreak"] = json!({
            "score": j.score.max(0.0),
            "encoder_score": j.encoder_score.max(0.0),
            "ngram_logit": j.ngram_logit,
            "windows": j.windows,
            "window": [j.window.0, j.window.1],
            "in_scan_text": j.window.2 == Part::ScanText,
            "text_score": j.part_score(Part::Text),
            "scan_text_score": j.part_score(Part::ScanText),
        });
    }
    if let Some(p) = &out.pii {
        v["pii"] = p
            .iter()
            .map(|e| {
                json!({
                    "type": e.entity.kind,
                    "start": e.entity.start,
                    "end": e.entity.end,
                    "score": e.entity.score,
                    "source": match e.entity.source { Source::Model => "model", Source::Pattern => "pattern" },
                    "in_scan_text": e.part == Part::ScanText,
                    "in_pattern_text": e.part == Part::PatternText,
                })
            })
            .collect();
    }
    v
}

/// `classify`: [`classify_lines`], ending quietly when the reader of the output closes
/// it (`semroute-daemon classify ... | head`), as Unix filters do.
fn classify(
    config: DaemonConfig,
    signals: &[String],
    input: Option<PathBuf>,
    text: Option<String>,
) -> anyhow::Result<()> {
    match classify_lines(config, signals, input, text) {
        Err(e)
            if e.downcast_ref::<std::io::Error>()
                .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe) =>
        {
            Ok(())
        }
        other => other,
    }
}

/// Classifies `text`, or each JSON line of `input` (stdin without it), printing one JSON
/// result per line. Errors: the engine cannot load, the output cannot be written, or
/// some inputs could not be classified (each also answered on its own line).
fn classify_lines(
    config: DaemonConfig,
    signals: &[String],
    input: Option<PathBuf>,
    text: Option<String>,
) -> anyhow::Result<()> {
    let signals = SignalSet::parse(signals)?;
    let mut engine = load_engine(&config)?;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut failed = 0usize;
    let mut run = |line: Result<InputLine, String>| -> anyhow::Result<()> {
        let v = match line {
            Err(e) => json!({ "error": e }),
            Ok(l) if l.text.trim().is_empty() && l.scan_text.trim().is_empty() => {
                json!({"error": "text is empty"})
            }
            Ok(l) if l.text.len() + l.scan_text.len() > config.limits.max_text_bytes => {
                json!({"error": format!("text above the limit of {} bytes", config.limits.max_text_bytes)})
            }
            Ok(l) if l.pattern_text.len() > semroute_proto::MAX_PATTERN_TEXT_BYTES => {
                json!({"error": format!("pattern_text above the limit of {} bytes", semroute_proto::MAX_PATTERN_TEXT_BYTES)})
            }
            Ok(l) => {
                let t = Instant::now();
                match classify_input(l, signals) {
                    Err(e) => json!({ "error": e.to_string() }),
                    Ok(input) => match engine.classify_batch(std::slice::from_ref(&input)) {
                        Ok(mut o) => match o.pop() {
                            Some(o) => output_json(&o, t.elapsed().as_secs_f64() * 1e3),
                            None => json!({"error": "no result"}),
                        },
                        Err(e) => json!({ "error": e.to_string() }),
                    },
                }
            }
        };
        if v.get("error").is_some() {
            failed += 1;
        }
        writeln!(out, "{v}")?;
        Ok(())
    };
    if let Some(t) = text {
        run(Ok(InputLine {
            text: t,
            scan_text: String::new(),
            flagged_sentences: Vec::new(),
            scan_flagged_sentences: Vec::new(),
            pattern_text: String::new(),
            pii_patterns_only: false,
            pii_sentences: Vec::new(),
            scan_pii_sentences: Vec::new(),
            original_tokens: 0,
            scan_original_tokens: 0,
        }))?;
    } else {
        let reader: Box<dyn BufRead> = match input {
            Some(p) => Box::new(std::io::BufReader::new(
                std::fs::File::open(&p).with_context(|| format!("opening {}", p.display()))?,
            )),
            None => Box::new(std::io::stdin().lock()),
        };
        for (n, line) in reader.lines().enumerate() {
            let line = line.with_context(|| format!("reading line {}", n + 1))?;
            if line.trim().is_empty() {
                continue;
            }
            run(serde_json::from_str::<InputLine>(&line)
                .map_err(|e| format!("line {}: {e}", n + 1)))?;
        }
    }
    if failed > 0 {
        // Each failure is on its line of the output; the exit status says there were some.
        anyhow::bail!("{failed} input(s) could not be classified");
    }
    Ok(())
}

fn embed(config: DaemonConfig, input: &PathBuf, output: &PathBuf) -> anyhow::Result<()> {
    let mut encoder = SentenceEncoder::load(&config.models.encoder_dir, &config.runtime)?;
    let text =
        std::fs::read_to_string(input).with_context(|| format!("reading {}", input.display()))?;
    let mut texts = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let l: InputLine = serde_json::from_str(line)
            .with_context(|| format!("{} line {}", input.display(), n + 1))?;
        texts.push(l.text);
    }
    let mut file = std::io::BufWriter::new(std::fs::File::create(output)?);
    let t = Instant::now();
    let mut hidden = 0;
    for (i, chunk) in texts.chunks(64).enumerate() {
        for row in embed_texts(
            &mut encoder,
            &config.limits,
            config.batching.limits(),
            chunk,
        )? {
            hidden = row.len();
            for v in row {
                file.write_all(&v.to_le_bytes())?;
            }
        }
        if i % 20 == 0 {
            tracing::info!(done = (i + 1) * 64, total = texts.len(), "embedding");
        }
    }
    file.flush()?;
    eprintln!(
        "wrote [{}, {hidden}] f32 to {} in {:.1}s",
        texts.len(),
        output.display(),
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

fn fuse_attention(
    input: &PathBuf,
    output: &PathBuf,
    config: Option<PathBuf>,
    probe_len: Option<usize>,
    no_verify: bool,
) -> anyhow::Result<()> {
    let config = config.or_else(|| {
        let dir = input.parent()?;
        let stem = input.file_stem()?.to_string_lossy().into_owned();
        [
            dir.join(format!("{stem}_config.json")),
            dir.join("config.json"),
        ]
        .into_iter()
        .find(|p| p.exists())
    });
    let mut options = match &config {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            semroute_kernels::FuseOptions::from_hf_config(&text)?
        }
        None => semroute_kernels::FuseOptions::default(),
    };
    if let Some(n) = probe_len {
        options.mask_probe_len = n;
    }
    if no_verify {
        options.verify = None;
    }
    // The model first: a wrong path is reported as such, before ONNX Runtime is looked for.
    let bytes = std::fs::read(input).with_context(|| format!("reading {}", input.display()))?;
    let env = semroute_daemon::runtime::environment(&Default::default())?;
    let t = Instant::now();
    let (fused, report) = semroute_kernels::fuse_attention(env, &bytes, &options)?;
    std::fs::write(output, fused).with_context(|| format!("writing {}", output.display()))?;
    println!("{report}");
    eprintln!(
        "wrote {} in {:.1}s{}",
        output.display(),
        t.elapsed().as_secs_f64(),
        config
            .map(|c| format!(" (config {})", c.display()))
            .unwrap_or_default()
    );
    Ok(())
}

fn model_check(
    options: &CheckOptions,
    intra_threads: usize,
    report_path: Option<PathBuf>,
) -> anyhow::Result<()> {
    let runtime = semroute_daemon::config::RuntimeConfig {
        intra_threads,
        ..Default::default()
    };
    let report = run_check(options, &runtime)?;
    println!("{report}");
    if let Some(p) = report_path {
        let json = serde_json::to_string_pretty(&report)?;
        std::fs::write(&p, json + "\n").with_context(|| format!("writing {}", p.display()))?;
    }
    if !report.passed {
        anyhow::bail!(
            "check failed: {} against {}: {}",
            options.candidate.display(),
            options.reference.display(),
            report.failures.join("; ")
        );
    }
    Ok(())
}
