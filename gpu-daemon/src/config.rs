//! Daemon configuration: a TOML (or YAML-free) file, validated at load.
//!
//! Every field has a default that serves the embedded setup (`make run`):
//! models under `build/models`, CPU execution provider, socket
//! `/tmp/semroute/daemon.sock`. Unknown fields are rejected so that a typo
//! never silently falls back to a default.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Errors loading or validating the configuration. Each names the field.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown / mistyped fields.
    #[error("invalid config file {path}: {message}")]
    Parse { path: PathBuf, message: String },
    /// A value is out of range.
    #[error("invalid config field `{field}`: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
}

fn invalid(field: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field,
        message: message.into(),
    }
}

/// ONNX Runtime execution provider. Unavailable providers fall back to CPU
/// with a logged warning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum ExecutionProviderKind {
    /// ONNX Runtime's default CPU provider.
    #[default]
    Cpu,
    /// NVIDIA CUDA (needs the `onnxruntime-gpu` library).
    Cuda,
    /// AMD ROCm.
    Rocm,
    /// AMD MIGraphX.
    Migraphx,
}

/// How ONNX Runtime sessions get their intra-op threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ThreadPoolKind {
    /// Each session has its own pool of `runtime.intra_threads` threads (0: the cores
    /// shared out between the encoder and the PII model, which run side by side). On two
    /// cores each model then runs on a core of its own, with no thread hand-offs, and a
    /// request that needs only the encoder leaves the other core idle.
    PerSession,
    /// One process-wide pool of `runtime.intra_threads` threads (0: one per core) for all
    /// sessions, which run one after the other, each on every core: a request that needs
    /// only the encoder (the filter sends most with `pii_patterns_only`) gets both cores.
    #[default]
    Shared,
}

/// Top-level daemon configuration.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// Unix socket path the gRPC server listens on.
    pub socket: PathBuf,
    /// Permission bits of the socket file (octal in TOML: `0o660`).
    pub socket_mode: u32,
    /// Group id the socket file is given after bind (the gateway's group, so that with
    /// `socket_mode = 0o660` exactly the daemon's user and that group may connect); none:
    /// the group it is created with (the daemon's, or the directory's when the directory
    /// is set-group-ID). The daemon must be a member of the group, or root.
    pub socket_group: Option<u32>,
    /// Prometheus metrics listen address (TCP).
    pub metrics_addr: SocketAddr,
    /// ONNX Runtime settings.
    pub runtime: RuntimeConfig,
    /// Input limits.
    pub limits: LimitsConfig,
    /// Cross-request batching.
    pub batching: BatchingConfig,
    /// Models per signal.
    pub models: ModelsConfig,
    /// Result cache of model passes.
    pub cache: CacheConfig,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        Self {
            socket: PathBuf::from("/tmp/semroute/daemon.sock"),
            socket_mode: 0o660,
            socket_group: None,
            metrics_addr: SocketAddr::from(([127, 0, 0, 1], 9190)),
            runtime: RuntimeConfig::default(),
            limits: LimitsConfig::default(),
            batching: BatchingConfig::default(),
            models: ModelsConfig::default(),
            cache: CacheConfig::default(),
        }
    }
}

/// ONNX Runtime session settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeConfig {
    /// Path of `libonnxruntime.so`; defaults to `$ORT_DYLIB_PATH`, then
    /// `build/onnxruntime/libonnxruntime.so`.
    pub ort_library: Option<PathBuf>,
    /// Execution provider.
    pub execution_provider: ExecutionProviderKind,
    /// Device id for GPU providers.
    pub device_id: i32,
    /// Intra-op threads per session (0 = number of cores).
    pub intra_threads: usize,
    /// Inter-op threads per session.
    pub inter_threads: usize,
    /// Per-session or one shared intra-op thread pool.
    pub thread_pool: ThreadPoolKind,
    /// Whether idle intra-op threads spin (busy-wait) for the next piece of work instead
    /// of sleeping (default true). Spinning saves the wake-ups within and between model
    /// runs, but an idle daemon's threads then take cores from other processes for a
    /// while after each run. The shared pool takes it at startup only (a reload keeps the
    /// first value).
    pub spinning: bool,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        Self {
            ort_library: None,
            execution_provider: ExecutionProviderKind::Cpu,
            device_id: 0,
            intra_threads: 0,
            inter_threads: 1,
            thread_pool: ThreadPoolKind::Shared,
            spinning: true,
        }
    }
}

/// Input size limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Largest `text` + `scan_text` accepted, bytes. Larger: INVALID_ARGUMENT.
    pub max_text_bytes: usize,
    /// Tokens per encoder window, special tokens included (<= 512 for
    /// BERT-class models).
    pub max_seq_len: usize,
    /// Tokens shared by consecutive windows.
    pub window_overlap: usize,
    /// Most windows scored per text; beyond it the response says
    /// `truncated` and the truncation counter grows.
    pub max_windows: usize,
    /// Jailbreak: when a text's best window scores at least this (and below 1), the
    /// sentences of that window are scored too, each alone (at most 24), and the highest
    /// score counts. A jailbreak next to harmless text is diluted in a window (the README's
    /// jailbreak scores 0.95 alone, 0.68 after "Can you help me with my homework?"); its
    /// own sentences are not. So are the sentences of up to 3 more windows that hold a
    /// sentence the filter flagged, whatever they score (those nearest it; see
    /// `engine::windows::windows_to_refine`). Texts without flagged sentences that score
    /// below it cost no extra encoder pass. 1 (the default): off, for both. With the
    /// router encoder (models/router) these pieces, each scored alone with the maximum
    /// taken, block benign text (short pieces of policies and security documents score
    /// near 1) and catch no jailbreak its windows miss; they serve heads trained on
    /// whole sentences of a generic embedding.
    pub jailbreak_sentences_from: f32,
    /// Jailbreak: the extra passes (sentences scored alone, the filter's flagged sentences
    /// alone) run only while the text's best score is below this. They can only raise the
    /// maximum, so past the block threshold they cannot change the decision. When used,
    /// keep it at or above the filter's `jailbreak.threshold`; 1 (the default): always run
    /// them (the flagged sentences within the next two limits; a window's sentences only
    /// under `jailbreak_sentences_from`); 0: never. It compares the windows' score
    /// before an n-gram model's logit is added (`models.jailbreak.ngrams`), so with one
    /// configured only 0 and 1 keep that promise.
    pub jailbreak_refine_below: f32,
    /// Jailbreak: the extra passes run only while the windows' score with the n-gram
    /// model's logit added (`models.jailbreak.ngrams`; without one, the windows' score) is
    /// at least this (0..=1; 0: any score). Plainly benign text scores far below it, and
    /// a sentence scored alone costs a pass: on the calibration split, of the prompts of
    /// at most 1,024 tokens with a flagged sentence, 0.01 keeps 126 of 127 jailbreaks and
    /// 23 of 60 benign ones.
    pub jailbreak_refine_from: f32,
    /// Jailbreak: the filter's flagged sentences are scored alone (under
    /// `jailbreak_refine_below`) only in a text of at most this many tokens before
    /// compression (`ClassifyRequest.reduction.original_tokens` for `text`,
    /// `scan_reduction.original_tokens` for `scan_text`, else the text's own). An
    /// instruction override among a few ordinary sentences is diluted in its window, not
    /// alone; in a long document a flagged sentence is most often a quoted attack (a
    /// security guide, a paper on jailbreaks), which alone can score as high as a live one.
    pub jailbreak_flagged_alone_max_tokens: u32,
    /// Jailbreak: the filter's flagged sentences are scored alone only in a text with
    /// at most this many of them (0..=64; 0: never): a text dense with cues already holds
    /// them in its windows, and each sentence alone costs a pass.
    pub jailbreak_flagged_alone_max_sentences: usize,
    /// Jailbreak: most other readings of each text scored besides the text as written
    /// (0..=8), each scored only in windows over what it changed, with 64 tokens of context
    /// on each side: the text with invisible characters as spaces, then as written, each
    /// with look-alike letters folded and encoded payloads decoded, then each kind of
    /// invisible character spaced alone. A text
    /// with none of these has no other reading; the bound keeps a text that holds all of
    /// them from costing more than `1 + max_readings` times a plain one.
    pub max_readings: usize,
    /// Jailbreak: most extra windows per text that start where a sentence the filter
    /// flagged starts (0..=8; 0: none). Regular windows fall every `max_seq_len - 2 -
    /// window_overlap` tokens from the text's start, so where they cut a long template (a
    /// persona, then a list of rules) depends on the text before it; compression changes
    /// that text. A window from the template's first flagged sentence scores the same
    /// opening, compressed or not. Texts without flagged sentences cost nothing more.
    /// Default 0: with the router encoder they changed no decision on held-out data.
    pub anchored_windows: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            max_text_bytes: 1 << 20,
            max_seq_len: 512,
            window_overlap: 64,
            max_windows: 64,
            jailbreak_sentences_from: 1.0,
            jailbreak_refine_below: 1.0,
            jailbreak_refine_from: 0.01,
            jailbreak_flagged_alone_max_tokens: 1024,
            jailbreak_flagged_alone_max_sentences: 4,
            max_readings: 3,
            anchored_windows: 0,
        }
    }
}

/// Bounds of the result caches: model outputs per exact model input (a window or a
/// sentence as token ids), least recently used evicted first. 0 turns a cache off.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Bytes of pooled encoder embeddings (about 1.5 KiB plus the ids per entry).
    pub encoder_bytes: usize,
    /// Bytes of PII token-classifier logits (tokens x labels x 4 bytes plus the ids per
    /// entry: about 70 KiB for a 512-token window of Rampart's 35 labels).
    pub pii_bytes: usize,
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            encoder_bytes: 8 << 20,
            pii_bytes: 24 << 20,
        }
    }
}

/// Cross-request batching: requests waiting together are run as one batch.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BatchingConfig {
    /// Most requests the engine takes together (one batch: their model passes planned
    /// together, identical windows run once).
    pub max_batch: usize,
    /// Most sequences per ONNX Runtime run (1..=256). The served int8 graphs quantize
    /// activations with one scale per tensor, computed over the whole run, so a sequence's
    /// outputs depend on the other sequences (and the padding) in its run: the same prompt
    /// scored 0.974 in one batch and 0.992 in another against a 0.99 threshold. At 1 every
    /// sequence's outputs are its own, a decision does not depend on the traffic beside it,
    /// and a cache hit equals a miss; every run is also unpadded (see `make setup`'s padding
    /// branch). On two cores a run of several sequences is no faster per token than one at
    /// a time (100-token prompts, 16 clients back to back: 171 req/s at 1, 166 at 8).
    pub max_sequences_per_run: usize,
    /// Most token slots per ONNX Runtime run: sequences × the longest, `[CLS]`/`[SEP]`
    /// included (see [`crate::passes::BatchLimits`]). Bounds the runtime's activation
    /// memory: 512 is one 512-token window or four of 128. On two cores a batch of long
    /// windows runs no faster per window than one window at a time.
    pub max_batch_tokens: usize,
    /// Longest a request waits for others to join its batch, microseconds.
    pub max_wait_us: u64,
    /// Requests queued beyond this are refused with UNAVAILABLE.
    pub queue_capacity: usize,
    /// Deadline-based admission and expiry: a call that by the running estimate of engine
    /// time would be answered past its `grpc-timeout` is refused at submit, one whose
    /// deadline passes (or would before it could finish) while queued is dropped unrun, and
    /// a batch grows only while every call in it can finish in time. `false`: a plain FIFO
    /// queue that runs every call it admitted (only calls whose caller has gone are
    /// skipped), the behaviour before admission existed; kept as a benchmark baseline.
    pub admission: bool,
}

impl BatchingConfig {
    /// The bounds of one model run.
    pub fn limits(&self) -> crate::passes::BatchLimits {
        crate::passes::BatchLimits {
            sequences: self.max_sequences_per_run,
            tokens: self.max_batch_tokens,
        }
    }
}

impl Default for BatchingConfig {
    fn default() -> Self {
        Self {
            max_batch: 8,
            max_sequences_per_run: 1,
            max_batch_tokens: 512,
            max_wait_us: 0,
            queue_capacity: 1024,
            admission: true,
        }
    }
}

/// Models serving each signal.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelsConfig {
    /// Directory holding the shared sentence encoder (`model.onnx`,
    /// `tokenizer.json`).
    pub encoder_dir: PathBuf,
    /// Domain signal.
    pub domain: SequenceSignalConfig,
    /// Jailbreak signal.
    pub jailbreak: SequenceSignalConfig,
    /// PII signal.
    pub pii: PiiConfig,
}

impl Default for ModelsConfig {
    fn default() -> Self {
        Self {
            encoder_dir: PathBuf::from("build/models/prepared/router"),
            domain: SequenceSignalConfig {
                head: Some(PathBuf::from("models/router/domain.json")),
                classifier_dir: None,
                positive_label: None,
                ngrams: Some(PathBuf::from("models/ngrams/domain.safetensors")),
            },
            jailbreak: SequenceSignalConfig {
                head: Some(PathBuf::from("models/router/jailbreak.json")),
                classifier_dir: None,
                positive_label: Some("jailbreak".into()),
                ngrams: Some(PathBuf::from("models/ngrams/jailbreak.safetensors")),
            },
            pii: PiiConfig::default(),
        }
    }
}

/// A sequence-classification signal: either a linear head on the shared
/// encoder, or a classifier directory in the vLLM Semantic Router format
/// (`config.json` with `id2label`, `tokenizer.json`, `model.onnx` or
/// `onnx/*.onnx`).
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct SequenceSignalConfig {
    /// Linear head JSON file (format in `models/router/README.md`).
    pub head: Option<PathBuf>,
    /// Classifier directory; wins over `head` when both are set.
    pub classifier_dir: Option<PathBuf>,
    /// For binary signals (jailbreak): the label whose probability is the score.
    pub positive_label: Option<String>,
    /// A hashed n-gram model (`scripts/train_ngrams.py`): for the jailbreak
    /// (`models/ngrams/jailbreak.safetensors`, one logit) its logit is added to the score's
    /// log-odds; for the domain (`models/ngrams/domain.safetensors`, one logit per label,
    /// the same labels as the domain model's) its log-probabilities are added to the
    /// domain model's. `None`: the encoder's reading alone (also for a table that does
    /// not name it; the built-in default names both).
    pub ngrams: Option<PathBuf>,
}

/// PII signal settings.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PiiConfig {
    /// Token-classification directory (Rampart by default, or any
    /// vLLM Semantic Router token classifier). `None`: patterns only.
    pub model_dir: Option<PathBuf>,
    /// Minimum entity score reported from the model.
    pub min_score: f32,
    /// Run the validated patterns (cards, IBAN, SSN, email, phone, IP).
    pub patterns: bool,
}

impl Default for PiiConfig {
    fn default() -> Self {
        Self {
            model_dir: Some(PathBuf::from("build/models/prepared/rampart")),
            min_score: 0.5,
            patterns: true,
        }
    }
}

impl DaemonConfig {
    /// Loads a TOML file and validates it; relative model paths are taken
    /// relative to the current directory.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let config: DaemonConfig = toml::from_str(&text).map_err(|e| ConfigError::Parse {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        config.validate()?;
        Ok(config)
    }

    /// Checks ranges and cross-field constraints.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.socket.as_os_str().is_empty() {
            return Err(invalid("socket", "must not be empty"));
        }
        if self.socket_mode > 0o777 {
            return Err(invalid("socket_mode", "must be permission bits (<= 0o777)"));
        }
        let l = &self.limits;
        if !(8..=8192).contains(&l.max_seq_len) {
            return Err(invalid("limits.max_seq_len", "must be in 8..=8192"));
        }
        if l.window_overlap >= l.max_seq_len - 2 {
            return Err(invalid(
                "limits.window_overlap",
                "must be smaller than limits.max_seq_len - 2",
            ));
        }
        if l.max_windows == 0 {
            return Err(invalid("limits.max_windows", "must be at least 1"));
        }
        if l.max_text_bytes == 0 {
            return Err(invalid("limits.max_text_bytes", "must be at least 1"));
        }
        if !(0.0..=1.0).contains(&l.jailbreak_refine_below) {
            return Err(invalid("limits.jailbreak_refine_below", "must be in 0..=1"));
        }
        if !(0.0..=1.0).contains(&l.jailbreak_refine_from) {
            return Err(invalid("limits.jailbreak_refine_from", "must be in 0..=1"));
        }
        if !(0.0..=1.0).contains(&l.jailbreak_sentences_from) {
            return Err(invalid(
                "limits.jailbreak_sentences_from",
                "must be in 0..=1 (1: off)",
            ));
        }
        if l.jailbreak_flagged_alone_max_sentences > semroute_proto::MAX_FLAGGED_SENTENCES {
            return Err(invalid(
                "limits.jailbreak_flagged_alone_max_sentences",
                "must be in 0..=64",
            ));
        }
        if l.max_readings > 8 {
            return Err(invalid("limits.max_readings", "must be in 0..=8"));
        }
        if l.anchored_windows > 8 {
            return Err(invalid("limits.anchored_windows", "must be in 0..=8"));
        }
        let b = &self.batching;
        if b.max_batch == 0 || b.max_batch > 256 {
            return Err(invalid("batching.max_batch", "must be in 1..=256"));
        }
        if b.max_sequences_per_run == 0 || b.max_sequences_per_run > 256 {
            return Err(invalid(
                "batching.max_sequences_per_run",
                "must be in 1..=256",
            ));
        }
        if b.max_batch_tokens < 16 {
            return Err(invalid("batching.max_batch_tokens", "must be at least 16"));
        }
        if b.queue_capacity == 0 {
            return Err(invalid("batching.queue_capacity", "must be at least 1"));
        }
        if b.max_wait_us > 100_000 {
            return Err(invalid(
                "batching.max_wait_us",
                "must be at most 100000 (100 ms)",
            ));
        }
        if self.runtime.inter_threads == 0 {
            return Err(invalid("runtime.inter_threads", "must be at least 1"));
        }
        for (field, s) in [
            ("models.domain", &self.models.domain),
            ("models.jailbreak", &self.models.jailbreak),
        ] {
            if s.head.is_none() && s.classifier_dir.is_none() {
                return Err(invalid(field, "needs `head` or `classifier_dir`"));
            }
        }
        if !(0.0..=1.0).contains(&self.models.pii.min_score) {
            return Err(invalid("models.pii.min_score", "must be in 0..=1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        DaemonConfig::default().validate().unwrap();
    }

    #[test]
    fn shipped_example_config_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/daemon.toml");
        let c = DaemonConfig::load(&path).unwrap();
        assert_eq!(c.socket_mode, 0o660);
        assert_eq!(
            c.limits.max_seq_len,
            DaemonConfig::default().limits.max_seq_len
        );
        assert_eq!(
            c.models.encoder_dir,
            DaemonConfig::default().models.encoder_dir
        );
    }

    #[test]
    fn shipped_baseline_config_is_valid() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/daemon.shipped.toml");
        let c = DaemonConfig::load(&path).unwrap();
        assert_eq!(c.models.encoder_dir, Path::new("build/models/minilm"));
        assert_eq!(c.cache.encoder_bytes, 0);
    }

    #[test]
    fn admission_is_on_by_default_and_can_be_turned_off() {
        assert!(DaemonConfig::default().batching.admission);
        let c: DaemonConfig = toml::from_str("[batching]\nadmission = false").unwrap();
        c.validate().unwrap();
        assert!(!c.batching.admission);
        let err = toml::from_str::<DaemonConfig>("[batching]\nadmission = \"off\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("admission"), "{err}");
    }

    #[test]
    fn unknown_field_is_rejected_with_its_name() {
        let err = toml::from_str::<DaemonConfig>("sockett = \"/x\"").unwrap_err();
        assert!(err.to_string().contains("sockett"), "{err}");
    }

    #[test]
    fn out_of_range_names_the_field() {
        let c: DaemonConfig = toml::from_str("[limits]\nmax_seq_len = 4").unwrap();
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("limits.max_seq_len"), "{err}");
        let err = toml::from_str::<DaemonConfig>("[runtime]\nexecution_provider = \"tpu\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("execution_provider"), "{err}");
    }
}
