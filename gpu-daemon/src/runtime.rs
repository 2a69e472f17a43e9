//! ONNX Runtime: loading the shared library and building sessions.
//!
//! The library is loaded dynamically (`ort`'s `load-dynamic`) from the
//! `onnxruntime` wheel unpacked by `make setup`, so no binary download is
//! needed at build time.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ort::environment::{Environment, GlobalThreadPoolOptions};
use ort::ep::ExecutionProvider;
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::session::Session;

use crate::config::{ExecutionProviderKind, RuntimeConfig, ThreadPoolKind};

/// Errors from the runtime layer.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// `libonnxruntime.so` was not found or could not be loaded.
    #[error(
        "cannot load ONNX Runtime from {path}: {message} (run `make setup`, or set ORT_DYLIB_PATH)"
    )]
    Library { path: PathBuf, message: String },
    /// Session creation or a run failed.
    #[error("ONNX Runtime error ({context}): {message}")]
    Ort { context: String, message: String },
}

impl RuntimeError {
    pub(crate) fn ort(context: impl Into<String>, e: impl std::fmt::Display) -> Self {
        RuntimeError::Ort {
            context: context.into(),
            message: e.to_string(),
        }
    }
}

static ENVIRONMENT: OnceLock<Result<Environment, String>> = OnceLock::new();

/// Resolves the ONNX Runtime library path: config, then `$ORT_DYLIB_PATH`,
/// then `build/onnxruntime/libonnxruntime.so`.
pub fn library_path(config: &RuntimeConfig) -> PathBuf {
    if let Some(p) = &config.ort_library {
        return p.clone();
    }
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH") {
        return PathBuf::from(p);
    }
    PathBuf::from("build/onnxruntime/libonnxruntime.so")
}

/// Loads the ONNX Runtime library once per process and returns the
/// process-wide environment.
pub fn environment(config: &RuntimeConfig) -> Result<&'static Environment, RuntimeError> {
    let path = library_path(config);
    let result = ENVIRONMENT.get_or_init(|| {
        if !path.exists() {
            return Err("file not found".to_string());
        }
        let builder = ort::init_from(&path)
            .map_err(|e| e.to_string())?
            .with_name("semroute")
            .with_telemetry(false);
        let builder = match config.thread_pool {
            ThreadPoolKind::PerSession => builder,
            // One pool for every session, which take turns on all of its threads.
            ThreadPoolKind::Shared => {
                let pool = GlobalThreadPoolOptions::default()
                    .with_intra_threads(intra_threads(config))
                    .and_then(|p| p.with_inter_threads(config.inter_threads))
                    .and_then(|p| p.with_spin_control(config.spinning))
                    .map_err(|e| e.to_string())?;
                builder.with_global_thread_pool(pool)
            }
        };
        builder.build().map_err(|e| e.to_string())
    });
    match result {
        Ok(env) => Ok(env),
        Err(message) => Err(RuntimeError::Library {
            path,
            message: message.clone(),
        }),
    }
}

/// The execution provider actually in use after fallback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActiveProvider {
    /// Requested provider registered.
    Requested(ExecutionProviderKind),
    /// Requested provider unavailable; running on CPU.
    CpuFallback(ExecutionProviderKind),
}

/// Models that run side by side in one batch: the shared encoder and the PII model.
const CONCURRENT_MODELS: usize = 2;

/// Intra-op threads of a pool: the configured number, or for 0 one per core (shared pool)
/// or the cores shared out between the models that run side by side (per-session pools;
/// at least one).
pub fn intra_threads(config: &RuntimeConfig) -> usize {
    if config.intra_threads != 0 {
        return config.intra_threads;
    }
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    match config.thread_pool {
        ThreadPoolKind::Shared => cores,
        ThreadPoolKind::PerSession => (cores / CONCURRENT_MODELS).max(1),
    }
}

/// Builds a session for `model` on the process-wide thread pool with the
/// configured provider.
///
/// Settings follow the measurements in the design: sequential execution,
/// all graph optimisations, memory arena on; idle threads spin only with `runtime.spinning`.
pub fn build_session(
    config: &RuntimeConfig,
    model: &Path,
) -> Result<(Session, ActiveProvider), RuntimeError> {
    session_with_profile(config, model, None)
}

/// [`build_session`] with ONNX Runtime's profiler on: every run's node timings go to a
/// JSON trace named from `profile_prefix`, whose path [`Session::end_profiling`] returns.
/// For benchmarks: where a model's time goes under the served settings.
pub fn build_profiling_session(
    config: &RuntimeConfig,
    model: &Path,
    profile_prefix: &Path,
) -> Result<(Session, ActiveProvider), RuntimeError> {
    session_with_profile(config, model, Some(profile_prefix))
}

fn session_with_profile(
    config: &RuntimeConfig,
    model: &Path,
    profile_prefix: Option<&Path>,
) -> Result<(Session, ActiveProvider), RuntimeError> {
    let env = environment(config)?;
    let ctx = || format!("session for {}", model.display());
    let mut builder = Session::builder(env)
        .map_err(|e| RuntimeError::ort(ctx(), e))?
        .with_optimization_level(GraphOptimizationLevel::All)
        .map_err(|e| RuntimeError::ort(ctx(), e))?
        .with_parallel_execution(false)
        .map_err(|e| RuntimeError::ort(ctx(), e))?
        .with_memory_pattern(true)
        .map_err(|e| RuntimeError::ort(ctx(), e))?
        .with_config_entry(DISABLED_OPTIMIZERS, "SkipLayerNormFusion")
        .map_err(|e| RuntimeError::ort(ctx(), e))?;
    let saturate = int8_products_saturate();
    if saturate {
        builder = builder
            .with_config_entry(X64_QUANT_PRECISION, "1")
            .map_err(|e| RuntimeError::ort(ctx(), e))?;
    }
    if config.thread_pool == ThreadPoolKind::PerSession {
        builder = builder
            .with_independent_thread_pool()
            .map_err(|e| RuntimeError::ort(ctx(), e))?
            .with_intra_threads(intra_threads(config))
            .map_err(|e| RuntimeError::ort(ctx(), e))?
            .with_inter_threads(config.inter_threads)
            .map_err(|e| RuntimeError::ort(ctx(), e))?
            .with_intra_op_spinning(config.spinning)
            .map_err(|e| RuntimeError::ort(ctx(), e))?;
    }
    // The fused attention op (`com.semroute::FlashAttention`), so that models
    // rewritten by `semroute-daemon model fuse-attention` load.
    builder = semroute_kernels::register(builder).map_err(|e| RuntimeError::ort(ctx(), e))?;
    if let Some(prefix) = profile_prefix {
        builder = builder
            .with_profiling(prefix)
            .map_err(|e| RuntimeError::ort(ctx(), e))?;
    }
    let provider = register_provider(config, &mut builder);
    // The rewrite is for ONNX Runtime's CPU kernels; a GPU provider's int8 kernels take
    // the graph as prepared.
    let rewritten = if saturate && config.execution_provider == ExecutionProviderKind::Cpu {
        int8_weights_rewritten(model)
    } else {
        None
    };
    let session = {
        let _one_at_a_time = SESSION_CREATION.lock().unwrap_or_else(|e| e.into_inner());
        match &rewritten {
            Some(bytes) => builder.commit_from_memory(bytes),
            None => builder.commit_from_file(model),
        }
        .map_err(|e| RuntimeError::ort(ctx(), e))?
    };
    Ok((session, provider))
}

/// ONNX Runtime's session entry (`kOrtSessionOptionsDisableSpecifiedOptimizers`) naming
/// graph rewrites to leave out. The daemon leaves out `SkipLayerNormFusion`: its
/// `SkipLayerNormalization` kernel ran slower than the `Add` and `LayerNormalization` it
/// replaces (router encoder with fused attention, 256 tokens, two threads: 3.4 ms against
/// 1.1 ms per pass in ONNX Runtime's profile). ONNX Runtime applies the rewrite only where
/// it knows both inputs' shapes: in the served graphs' padding branch it did not, beside
/// the fused attention op (whose output shape it infers) it did.
const DISABLED_OPTIMIZERS: &str = "optimization.disable_specified_optimizers";

/// ONNX Runtime's session entry (`kOrtSessionOptionsAvx2PrecisionMode`) that multiplies
/// the int8 weights of quantized graphs as uint8 (shifted by 128, the shift taken back out
/// of the sums) instead of int8.
///
/// The prepared graphs multiply uint8 activations by int8 weights. On an x86 CPU without
/// VNNI, ONNX Runtime's kernels for that pair sum two neighbouring products in saturating
/// 16-bit arithmetic (`VPMADDUBSW`: 255 × 127 × 2 = 64,770 is clamped to 32,767), and the
/// prepared MiniLM's pooled embeddings drift from its fp32 source (AVX2-only AMD EPYC,
/// `model check` on `models/check_texts.txt`: cosine 0.966 worst, 0.989 mean, against
/// 0.980 / 0.992 with VNNI). The uint8 × uint8 kernels widen to 16 bits before they
/// multiply and are exact. This entry covers the quantized ops of any graph at the top
/// level; `MatMulInteger` weights are also rewritten before the session is built
/// ([`crate::int8_weights`]), since the entry does not reach the prepared graphs' padding
/// branch.
const X64_QUANT_PRECISION: &str = "session.x64quantprecision";

/// The model at `path` with its int8 `MatMulInteger` weights as uint8
/// ([`crate::int8_weights`]), for a CPU whose int8 products saturate: the session entry
/// above does not reach the prepared graphs' padding branch. `None` where nothing changes
/// or the model cannot be rewritten (then it loads from its path as written, and ONNX
/// Runtime reports what is wrong with it).
fn int8_weights_rewritten(path: &Path) -> Option<Vec<u8>> {
    let bytes = std::fs::read(path).ok()?;
    let mut model = semroute_kernels::onnx::decode_model(&bytes).ok()?;
    match crate::int8_weights::weights_as_uint8(&mut model) {
        Ok(0) => None,
        Ok(nodes) => {
            tracing::info!(
                model = %path.display(),
                nodes,
                "int8 weights loaded as uint8 (x86 without VNNI: exact products)"
            );
            Some(semroute_kernels::onnx::encode_model(&model))
        }
        Err(e) => {
            tracing::warn!(
                model = %path.display(),
                error = %e,
                "int8 weights left as they are; on this CPU their products may saturate"
            );
            None
        }
    }
}

/// Whether this CPU's int8 products saturate (x86 without VNNI): see [`X64_QUANT_PRECISION`].
/// On a CPU with AVX-512 VNNI or AVX-VNNI the entry stays off: ONNX Runtime would convert
/// there too, and its uint8 × int8 VNNI kernels are both exact and the fastest it has.
pub fn int8_products_saturate() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        !(std::arch::is_x86_feature_detected!("avx512vnni")
            || std::arch::is_x86_feature_detected!("avxvnni"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Held while a session is created. Creating a session registers its custom op domains
/// (`com.semroute`) in ONNX Runtime's process-wide schema registry, and two registrations
/// at once can fail ("the domain is already exist"): engines loaded side by side (tests in
/// parallel threads, a reload beside a running engine) create their sessions one at a time.
static SESSION_CREATION: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn register_provider(config: &RuntimeConfig, builder: &mut SessionBuilder) -> ActiveProvider {
    let kind = config.execution_provider;
    let result = match kind {
        ExecutionProviderKind::Cpu => return ActiveProvider::Requested(kind),
        ExecutionProviderKind::Cuda => ort::ep::CUDA::default()
            .with_device_id(config.device_id)
            .register(builder),
        ExecutionProviderKind::Rocm => ort::ep::ROCm::default()
            .with_device_id(config.device_id)
            .register(builder),
        ExecutionProviderKind::Migraphx => ort::ep::MIGraphX::default()
            .with_device_id(config.device_id)
            .register(builder),
    };
    match result {
        Ok(()) => ActiveProvider::Requested(kind),
        Err(e) => {
            tracing::warn!(provider = ?kind, error = %e, "execution provider unavailable, falling back to CPU");
            ActiveProvider::CpuFallback(kind)
        }
    }
}
