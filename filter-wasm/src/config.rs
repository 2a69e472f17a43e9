//! Filter configuration: the JSON in Envoy's wasm `configuration` (or an Istio
//! WasmPlugin's `pluginConfig`).
//!
//! [`FilterConfig::from_json`] is the only constructor: it rejects unknown
//! fields and values out of range with a message that names the field, so a
//! bad configuration fails at load (`on_configure` returns false) instead of
//! on the first request.
//!
//! Minimal example (every other field has a default):
//! ```json
//! { "default_model": "general-model" }
//! ```

use serde::Deserialize;
use thiserror::Error;

use crate::compression::CompressionConfig;
use crate::request_edits::{ClientValues, RequestEdits};
use crate::risk::RiskFlags;

/// A configuration that could not be loaded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ConfigError {
    /// Not JSON, a missing required field, an unknown field or a wrong type
    /// (serde's message names the field).
    #[error("invalid filter configuration: {0}")]
    Parse(String),
    /// A field with a value out of range.
    #[error("invalid filter configuration: field `{field}`: {reason}")]
    Invalid {
        /// Dotted path of the field, e.g. `decisions[2].model`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

fn invalid(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        reason: reason.into(),
    }
}

/// What happens when the daemon cannot classify a request in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureMode {
    /// Route to the default model and add `x-semroute-fallback`.
    #[default]
    Open,
    /// Answer 503 with an OpenAI-style error.
    Closed,
}

/// How the daemon is reached.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DaemonConfig {
    /// Envoy cluster of the daemon's Unix socket (HTTP/2).
    pub cluster: String,
    /// Deadline of one Classify call, milliseconds (1..=60000).
    pub timeout_ms: u64,
}

impl Default for DaemonConfig {
    fn default() -> Self {
        DaemonConfig {
            cluster: "semroute_daemon".into(),
            timeout_ms: 300,
        }
    }
}

/// Size and shape limits on request bodies.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// Largest body accepted, bytes; larger bodies get 413.
    pub max_body_bytes: u64,
    /// Deepest JSON nesting accepted; deeper bodies get 400.
    pub max_depth: usize,
    /// Bodies whose `content-length` is at most this many bytes are scanned
    /// in one pass at end of stream instead of chunk by chunk.
    pub small_body_bytes: u64,
    /// Most bytes of earlier user turns and tool output kept as a verbatim copy while the
    /// body is read. All of that text, however long (bodies are bounded by
    /// `max_body_bytes`), is analysed as it arrives and compressed to
    /// `compression.budget_tokens` before it is sent as `scan_text`, so a jailbreak or
    /// personal data late in a long history is not left unread.
    pub max_scan_text_bytes: usize,
    /// Most body bytes scanned in one callback, so that one large body does not hold its
    /// Envoy worker (and every other stream on it) for long: at about 12 MB/s in V8, the
    /// default 128 KiB is about 10 ms. A body callback that brings more leaves the rest
    /// buffered and the filter scans it in further steps from the root context's tick
    /// (1 ms), between the worker's other events. 0: no bound, a callback scans all it
    /// is handed.
    pub max_scan_bytes_per_callback: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 8 * 1024 * 1024,
            max_depth: 64,
            small_body_bytes: 16 * 1024,
            max_scan_text_bytes: 64 * 1024,
            max_scan_bytes_per_callback: 128 * 1024,
        }
    }
}

/// Conditions of one decision rule; all present conditions must hold.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Conditions {
    /// Domain categories (any of; case-insensitive). Empty: any category.
    pub categories: Vec<String>,
    /// Minimum domain confidence, 0..=1.
    pub min_confidence: Option<f32>,
    /// Minimum jailbreak score, 0..=1.
    pub min_jailbreak_score: Option<f32>,
    /// Maximum jailbreak score, 0..=1.
    pub max_jailbreak_score: Option<f32>,
    /// PII entity types of which at least one must be present.
    pub pii_types: Vec<String>,
    /// Requested `model` values (the auto name or one of its aliases).
    pub requested_models: Vec<String>,
}

/// One routing rule: when the conditions hold, route to `model`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decision {
    /// Name reported in `x-semroute-decision`.
    pub name: String,
    /// Target model: goes into `x-semroute-model` and the body's `model`.
    pub model: String,
    /// When the rule applies.
    #[serde(default)]
    pub when: Conditions,
    /// PII entity types allowed for requests routed by this rule; overrides
    /// `pii.allow` when present.
    #[serde(default)]
    pub pii_allow: Option<Vec<String>>,
    /// PII entity types masked for requests routed by this rule; overrides `pii.mask`
    /// when present.
    #[serde(default)]
    pub pii_mask: Option<Vec<String>>,
    /// Reasoning effort set on requests routed by this rule (`reasoning_effort` for
    /// chat, `reasoning.effort` for Responses); see [`crate::request_edits`].
    #[serde(default)]
    pub reasoning_effort: Option<String>,
    /// System prompt added to requests routed by this rule (a first `system` message for
    /// chat, `instructions` for Responses).
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Whether a reasoning effort or system prompt the client set is kept (default) or
    /// replaced.
    #[serde(default)]
    pub client_values: ClientValues,
}

/// The personal-data cues the daemon's validated patterns settle alone: an e-mail address,
/// a Luhn-valid card number, a mod-97-valid IBAN, an SSN and an IP address are found by
/// the daemon's patterns wherever the filter's risk scan finds them (the same validations;
/// the patterns run on every request that asks for PII, over the sentences compression
/// dropped too), so such a cue alone does not make the PII model read its sentences. A
/// phone number is not among them: its formats vary more than the patterns cover.
const PATTERN_SETTLED: RiskFlags = RiskFlags::EMAIL
    .union(RiskFlags::CARD)
    .union(RiskFlags::IBAN)
    .union(RiskFlags::SSN)
    .union(RiskFlags::IP);

/// Longest `system_prompt` accepted, bytes.
pub const MAX_SYSTEM_PROMPT_BYTES: usize = 64 * 1024;

impl Decision {
    /// The request edits of this rule.
    pub fn request_edits(&self) -> RequestEdits {
        RequestEdits {
            reasoning_effort: self.reasoning_effort.clone(),
            system_prompt: self.system_prompt.clone(),
            client_values: self.client_values,
        }
    }
}

/// What to do with a detected jailbreak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JailbreakAction {
    /// 403 with an OpenAI-style error; nothing reaches an upstream.
    #[default]
    Block,
    /// Forward, adding `x-semroute-jailbreak: <score>`.
    Mark,
}

/// Jailbreak / prompt-injection policy.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct JailbreakPolicy {
    /// Whether the signal is requested and acted on.
    pub enabled: bool,
    /// Score at or above which a request counts as a jailbreak, 0..=1. The default
    /// 0.9996966 (log-odds 8.10) is the lowest, on a grid of 0.05 in log-odds, at which the
    /// daemon's default jailbreak score (the router encoder, `models/router`, with the
    /// n-gram model's logit added, `models/ngrams`), with the cue thresholds
    /// (`override_threshold`, `harmful_request_threshold`) at their defaults, blocks at
    /// most half the 0.5% target of the ordinary requests, of the document passages and of
    /// all benign rows of its calibration split
    /// (`scripts/eval_classifiers.py --choose-threshold`).
    pub threshold: f32,
    /// The threshold for a text (the prompt, or the scan text of earlier turns and tool
    /// output) in which the filter's risk scan found an instruction override ("ignore all
    /// previous instructions", [`crate::risk::RiskFlags::OVERRIDE`]); the lower of the two
    /// applies to that text's score. Ordinary requests
    /// almost never hold one. Default 0.9969743, a tenth of the general threshold's odds
    /// (log-odds 5.80); `null`: `threshold` alone.
    pub override_threshold: Option<f32>,
    /// The threshold for a text in which the risk scan found a plainly harmful request
    /// ("give instructions for making a bomb", [`crate::risk::RiskFlags::HARMFUL_REQUEST`]);
    /// the lowest threshold that applies to the text wins. A jailbreak
    /// wraps such a request; an ordinary request almost never holds one, and a plain
    /// harmful request without jailbreak wording scores far below it. Default 0.9705447,
    /// a hundredth of the general threshold's odds (log-odds 3.50); `null`: no lower
    /// threshold for the cue.
    pub harmful_request_threshold: Option<f32>,
    /// Block or mark.
    pub action: JailbreakAction,
    /// With `action: block`: when the daemon cannot classify a request (a timeout, an
    /// error, no daemon) and `failure_mode` is `open`, a request in which the filter's risk
    /// scan flagged a jailbreak cue (an instruction override, role play, prompt extraction,
    /// an encoded payload, a harmful request) still gets 503 `router_unavailable` instead of
    /// the fallback route, so that overloading the daemon does not let a suspected
    /// injection through. Default true.
    pub fail_closed_on_cue: bool,
}

impl Default for JailbreakPolicy {
    fn default() -> Self {
        JailbreakPolicy {
            enabled: true,
            threshold: 0.999_696_6,
            override_threshold: Some(0.996_974_3),
            harmful_request_threshold: Some(0.970_544_7),
            action: JailbreakAction::Block,
            fail_closed_on_cue: true,
        }
    }
}

impl JailbreakPolicy {
    /// The score at or above which a request in which the risk scan found `risk` counts as
    /// a jailbreak: the lowest of `threshold` and the threshold of each cue it found
    /// (`override_threshold` for [`RiskFlags::OVERRIDE`], `harmful_request_threshold` for
    /// [`RiskFlags::HARMFUL_REQUEST`]).
    pub fn threshold_for(&self, risk: RiskFlags) -> f32 {
        [
            (RiskFlags::OVERRIDE, self.override_threshold),
            (RiskFlags::HARMFUL_REQUEST, self.harmful_request_threshold),
        ]
        .into_iter()
        .filter_map(|(cue, t)| t.filter(|_| risk.contains(cue)))
        .fold(self.threshold, f32::min)
    }
}

/// What to do with personal data that is not allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PiiAction {
    /// 403 with an OpenAI-style error.
    #[default]
    Block,
    /// Route to `pii.route_model` (e.g. a model served locally).
    Route,
}

/// When the daemon's PII model reads a request's texts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PiiModelPass {
    /// Only when a sentence that compression kept holds a personal-data cue of the
    /// filter's risk scan that the daemon's patterns do not settle alone (a phone number,
    /// an address or identity context, or a name in context where the policy acts on
    /// `PERSON`: [`FilterConfig::pii_model_cues`]); the model then reads those sentences,
    /// with their neighbours where they are lines of a record. Otherwise the daemon runs
    /// its validated patterns alone (`ClassifyRequest.pii_patterns_only`), over the
    /// sentences compression dropped too (`ClassifyRequest.pattern_text`).
    #[default]
    OnCue,
    /// On every request with the PII signal.
    Always,
}

/// PII policy.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PiiPolicy {
    /// Whether the signal is requested and acted on.
    pub enabled: bool,
    /// Entity types allowed everywhere unless a decision overrides them
    /// (case-insensitive, e.g. `DATE_TIME`).
    pub allow: Vec<String>,
    /// Entities scoring below this are ignored, 0..=1.
    pub min_score: f32,
    /// Block or route.
    pub action: PiiAction,
    /// Model for [`PiiAction::Route`].
    pub route_model: Option<String>,
    /// Entity types replaced by placeholders (`<EMAIL_ADDRESS_1>`) in the body sent
    /// upstream instead of being blocked or routed (case-insensitive); see
    /// [`crate::pii_mask`].
    pub mask: Vec<String>,
    /// Put the masked values back into the upstream's answer (JSON or SSE); see
    /// [`crate::pii_restore`]. Default true.
    pub restore: bool,
    /// Largest answer restored, bytes: a JSON answer (or one SSE event) past it is
    /// passed through unrestored, never truncated. Default 8 MiB.
    pub max_restore_bytes: u64,
    /// When the daemon cannot classify a request (a timeout, an error, no daemon) and
    /// `failure_mode` is `open`, a request in which the filter's risk scan found a value of
    /// a masked type with a validated pattern (e-mail, phone, card, IBAN, SSN, IP address)
    /// gets 503 `router_unavailable` instead of the fallback route, which would carry the
    /// value upstream unmasked. Default true.
    pub fail_closed_on_pattern: bool,
    /// When the daemon's PII model reads the request ([`FilterConfig::pii_model_cues`]).
    /// Default `on_cue`.
    pub model_pass: PiiModelPass,
}

impl Default for PiiPolicy {
    fn default() -> Self {
        PiiPolicy {
            enabled: true,
            allow: Vec::new(),
            min_score: 0.5,
            action: PiiAction::Block,
            route_model: None,
            mask: Vec::new(),
            restore: true,
            max_restore_bytes: 8 * 1024 * 1024,
            fail_closed_on_pattern: true,
            model_pass: PiiModelPass::OnCue,
        }
    }
}

/// The request paths the filter inspects (POST only), in canonical form once parsed
/// ([`crate::request_path::canonical`]).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Paths {
    /// Chat Completions API path.
    pub chat_completions: String,
    /// Responses API path.
    pub responses: String,
    /// Completions API path (legacy `prompt` bodies).
    pub completions: String,
}

impl Default for Paths {
    fn default() -> Self {
        Paths {
            chat_completions: "/v1/chat/completions".into(),
            responses: "/v1/responses".into(),
            completions: "/v1/completions".into(),
        }
    }
}

/// The validated filter configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FilterConfig {
    /// [`FilterConfig::pii_model_cues`], derived from the policy once, at load.
    #[serde(skip)]
    pii_model_cues: RiskFlags,
    /// Daemon cluster and timeout.
    #[serde(default)]
    pub daemon: DaemonConfig,
    /// Fail open or closed when the daemon does not answer.
    #[serde(default)]
    pub failure_mode: FailureMode,
    /// Requested `model` value that asks the router to choose.
    #[serde(default = "default_auto_model")]
    pub auto_model: String,
    /// Further `model` values treated like `auto_model`.
    #[serde(default)]
    pub auto_aliases: Vec<String>,
    /// Model for auto requests no rule matches, and for fail-open.
    pub default_model: String,
    /// Ordered rules; the first that matches wins.
    #[serde(default)]
    pub decisions: Vec<Decision>,
    /// Jailbreak policy.
    #[serde(default)]
    pub jailbreak: JailbreakPolicy,
    /// PII policy.
    #[serde(default)]
    pub pii: PiiPolicy,
    /// Body limits.
    #[serde(default)]
    pub limits: Limits,
    /// Prompt compression settings, passed to the compression module.
    #[serde(default)]
    pub compression: CompressionConfig,
    /// Prefix of every header the filter sets (and strips from clients).
    #[serde(default = "default_header_prefix")]
    pub header_prefix: String,
    /// Paths inspected.
    #[serde(default)]
    pub paths: Paths,
}

fn default_auto_model() -> String {
    "auto".into()
}

fn default_header_prefix() -> String {
    "x-semroute-".into()
}

fn check_unit(field: String, v: Option<f32>) -> Result<(), ConfigError> {
    match v {
        Some(x) if !(0.0..=1.0).contains(&x) => Err(invalid(field, "must be between 0 and 1")),
        _ => Ok(()),
    }
}

/// A model name must be usable as a header value.
fn check_model(field: String, name: &str) -> Result<(), ConfigError> {
    if name.is_empty() {
        return Err(invalid(field, "must not be empty"));
    }
    if name.len() > 256 || !name.bytes().all(|b| (0x21..0x7f).contains(&b)) {
        return Err(invalid(
            field,
            "must be at most 256 visible ASCII characters",
        ));
    }
    Ok(())
}

impl FilterConfig {
    /// Parses and validates a configuration.
    ///
    /// # Errors
    /// [`ConfigError::Parse`] for malformed JSON, unknown or missing fields;
    /// [`ConfigError::Invalid`] naming the first field out of range.
    pub fn from_json(bytes: &[u8]) -> Result<Self, ConfigError> {
        let mut config: FilterConfig =
            serde_json::from_slice(bytes).map_err(|e| ConfigError::Parse(e.to_string()))?;
        config.validate()?;
        // Compared with each request's canonical path: canonical once, here.
        for p in [
            &mut config.paths.chat_completions,
            &mut config.paths.responses,
            &mut config.paths.completions,
        ] {
            *p = crate::request_path::canonical(p);
        }
        let cues = RiskFlags::PII.difference(PATTERN_SETTLED);
        config.pii_model_cues = if config.acts_on_pii_type("PERSON") {
            cues
        } else {
            cues.difference(RiskFlags::NAME)
        };
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.daemon.cluster.is_empty() {
            return Err(invalid("daemon.cluster", "must not be empty"));
        }
        if !(1..=60_000).contains(&self.daemon.timeout_ms) {
            return Err(invalid("daemon.timeout_ms", "must be between 1 and 60000"));
        }
        check_model("auto_model".into(), &self.auto_model)?;
        for (i, a) in self.auto_aliases.iter().enumerate() {
            check_model(format!("auto_aliases[{i}]"), a)?;
        }
        check_model("default_model".into(), &self.default_model)?;
        let mut names: Vec<&str> = Vec::new();
        for (i, d) in self.decisions.iter().enumerate() {
            if d.name.is_empty()
                || d.name.len() > 128
                || !d.name.bytes().all(|b| (0x21..0x7f).contains(&b))
            {
                return Err(invalid(
                    format!("decisions[{i}].name"),
                    "must be 1..=128 visible ASCII characters",
                ));
            }
            if names.contains(&d.name.as_str()) {
                return Err(invalid(
                    format!("decisions[{i}].name"),
                    format!("duplicate decision name {:?}", d.name),
                ));
            }
            names.push(&d.name);
            check_model(format!("decisions[{i}].model"), &d.model)?;
            check_unit(
                format!("decisions[{i}].when.min_confidence"),
                d.when.min_confidence,
            )?;
            check_unit(
                format!("decisions[{i}].when.min_jailbreak_score"),
                d.when.min_jailbreak_score,
            )?;
            check_unit(
                format!("decisions[{i}].when.max_jailbreak_score"),
                d.when.max_jailbreak_score,
            )?;
            if let Some(e) = &d.reasoning_effort {
                if e.is_empty()
                    || e.len() > 32
                    || !e.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                {
                    return Err(invalid(
                        format!("decisions[{i}].reasoning_effort"),
                        "must be 1..=32 lower-case letters or '_' (e.g. \"high\")",
                    ));
                }
            }
            if d.system_prompt
                .as_ref()
                .is_some_and(|p| p.is_empty() || p.len() > MAX_SYSTEM_PROMPT_BYTES)
            {
                return Err(invalid(
                    format!("decisions[{i}].system_prompt"),
                    format!("must be 1..={MAX_SYSTEM_PROMPT_BYTES} bytes"),
                ));
            }
        }
        if !(self.jailbreak.threshold > 0.0 && self.jailbreak.threshold <= 1.0) {
            return Err(invalid(
                "jailbreak.threshold",
                "must be greater than 0 and at most 1",
            ));
        }
        for (field, t) in [
            (
                "jailbreak.override_threshold",
                self.jailbreak.override_threshold,
            ),
            (
                "jailbreak.harmful_request_threshold",
                self.jailbreak.harmful_request_threshold,
            ),
        ] {
            if t.is_some_and(|t| !(t > 0.0 && t <= 1.0)) {
                return Err(invalid(field, "must be greater than 0 and at most 1"));
            }
        }
        check_unit("pii.min_score".into(), Some(self.pii.min_score))?;
        match (&self.pii.action, &self.pii.route_model) {
            (PiiAction::Route, None) => {
                return Err(invalid(
                    "pii.route_model",
                    "required when pii.action is \"route\"",
                ));
            }
            (_, Some(m)) => check_model("pii.route_model".into(), m)?,
            _ => {}
        }
        let l = &self.limits;
        if !(1..=(256 * 1024 * 1024)).contains(&l.max_body_bytes) {
            return Err(invalid(
                "limits.max_body_bytes",
                "must be between 1 and 268435456",
            ));
        }
        if !(2..=1024).contains(&l.max_depth) {
            return Err(invalid("limits.max_depth", "must be between 2 and 1024"));
        }
        if l.max_scan_text_bytes > 16 * 1024 * 1024 {
            return Err(invalid(
                "limits.max_scan_text_bytes",
                "must be at most 16777216",
            ));
        }
        if l.max_scan_bytes_per_callback != 0 && l.max_scan_bytes_per_callback < 1024 {
            return Err(invalid(
                "limits.max_scan_bytes_per_callback",
                "must be 0 (no bound) or at least 1024",
            ));
        }
        if let Err(e) = self.compression.validate() {
            return Err(invalid(format!("compression.{}", e.field), e.message));
        }
        let p = &self.header_prefix;
        if p.is_empty()
            || p.len() > 64
            || !p.ends_with('-')
            || !p
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err(invalid(
                "header_prefix",
                "must be lowercase letters, digits and '-', ending in '-'",
            ));
        }
        for (field, path) in [
            ("paths.chat_completions", &self.paths.chat_completions),
            ("paths.responses", &self.paths.responses),
            ("paths.completions", &self.paths.completions),
        ] {
            if !path.starts_with('/') {
                return Err(invalid(field, "must start with '/'"));
            }
        }
        Ok(())
    }

    /// True when some request may have PII masked (`pii.mask` or a decision's
    /// `pii_mask` is not empty, and the PII signal is enabled).
    pub fn may_mask(&self) -> bool {
        self.pii.enabled
            && (!self.pii.mask.is_empty()
                || self
                    .decisions
                    .iter()
                    .any(|d| d.pii_mask.as_ref().is_some_and(|m| !m.is_empty())))
    }

    /// Whether some request may be acted on for holding an entity of type `entity`
    /// (case-insensitive): a decision rule's `pii_types` names it, or, with the PII signal
    /// enabled, it is masked or missing from an allow list (the global one or a decision's
    /// own).
    pub fn acts_on_pii_type(&self, entity: &str) -> bool {
        let names = |list: &[String]| list.iter().any(|t| t.eq_ignore_ascii_case(entity));
        if self.decisions.iter().any(|d| names(&d.when.pii_types)) {
            return true;
        }
        self.pii.enabled
            && (!names(&self.pii.allow)
                || names(&self.pii.mask)
                || self.decisions.iter().any(|d| {
                    d.pii_allow.as_deref().is_some_and(|a| !names(a))
                        || d.pii_mask.as_deref().is_some_and(names)
                }))
    }

    /// The risk-scan kinds that make the daemon's PII model read a request under
    /// `pii.model_pass: on_cue`: every personal-data kind ([`RiskFlags::PII`]) but those
    /// the daemon's validated patterns settle alone (`PATTERN_SETTLED`: e-mail, card,
    /// IBAN, SSN, IP address), and but a name in context where no request can be acted
    /// on for a `PERSON` (the name is allowed everywhere).
    pub fn pii_model_cues(&self) -> RiskFlags {
        self.pii_model_cues
    }

    /// True when `model` asks the router to choose.
    pub fn is_auto(&self, model: &str) -> bool {
        model == self.auto_model || self.auto_aliases.iter().any(|a| a == model)
    }

    /// Full name of a header the filter sets, e.g. `header("model")` is
    /// `x-semroute-model` with the default prefix.
    pub fn header(&self, suffix: &str) -> String {
        format!("{}{}", self.header_prefix, suffix)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minimal_config_gets_defaults() {
        let c = FilterConfig::from_json(br#"{"default_model":"general-model"}"#).unwrap();
        assert_eq!(c.auto_model, "auto");
        assert_eq!(c.daemon.cluster, "semroute_daemon");
        assert_eq!(c.failure_mode, FailureMode::Open);
        assert!(c.is_auto("auto"));
        assert_eq!(c.header("model"), "x-semroute-model");
    }

    #[test]
    fn a_name_calls_for_the_pii_model_only_where_a_person_may_be_acted_on() {
        let cues = |json: &str| {
            FilterConfig::from_json(json.as_bytes())
                .unwrap()
                .pii_model_cues()
        };
        let every = RiskFlags::PII.difference(PATTERN_SETTLED);
        // No allow list: a PERSON is denied, so a name is a cue.
        assert_eq!(cues(r#"{"default_model":"m"}"#), every);
        // Allowed everywhere: the other personal-data kinds only.
        let allowed = cues(r#"{"default_model":"m","pii":{"allow":["person"]}}"#);
        assert!(!allowed.contains(RiskFlags::NAME));
        assert!(allowed.contains(RiskFlags::ADDRESS | RiskFlags::IDENTITY | RiskFlags::PHONE));
        // Masked, denied by a decision's own allow list, or named by a rule: a cue again.
        for json in [
            r#"{"default_model":"m","pii":{"allow":["PERSON"],"mask":["PERSON"]}}"#,
            r#"{"default_model":"m","pii":{"allow":["PERSON"]},
                "decisions":[{"name":"d","model":"x","pii_allow":["EMAIL_ADDRESS"]}]}"#,
            r#"{"default_model":"m","pii":{"enabled":false,"allow":["PERSON"]},
                "decisions":[{"name":"d","model":"x","when":{"pii_types":["PERSON"]}}]}"#,
        ] {
            assert_eq!(cues(json), every, "{json}");
        }
    }

    #[test]
    fn a_cue_the_daemon_patterns_settle_does_not_call_for_the_pii_model() {
        let cues = FilterConfig::from_json(br#"{"default_model":"m"}"#)
            .unwrap()
            .pii_model_cues();
        for kind in [
            RiskFlags::EMAIL,
            RiskFlags::CARD,
            RiskFlags::IBAN,
            RiskFlags::SSN,
            RiskFlags::IP,
        ] {
            assert!(!cues.intersects(kind), "{kind:?}");
        }
        // A phone number's formats vary more than the patterns cover: the model reads it.
        assert!(cues.contains(RiskFlags::PHONE));
    }

    #[test]
    fn unknown_field_is_named() {
        let e = FilterConfig::from_json(br#"{"default_model":"m","bogus":1}"#).unwrap_err();
        assert!(e.to_string().contains("bogus"), "{e}");
        let e = FilterConfig::from_json(br#"{"default_model":"m","jailbreak":{"treshold":0.5}}"#)
            .unwrap_err();
        assert!(e.to_string().contains("treshold"), "{e}");
    }

    #[test]
    fn missing_default_model_is_named() {
        let e = FilterConfig::from_json(b"{}").unwrap_err();
        assert!(e.to_string().contains("default_model"), "{e}");
    }

    #[test]
    fn out_of_range_values_are_named() {
        let cases: &[(&str, &str)] = &[
            (
                r#"{"default_model":"m","daemon":{"timeout_ms":0}}"#,
                "daemon.timeout_ms",
            ),
            (
                r#"{"default_model":"m","jailbreak":{"threshold":1.5}}"#,
                "jailbreak.threshold",
            ),
            (
                r#"{"default_model":"m","jailbreak":{"override_threshold":0}}"#,
                "jailbreak.override_threshold",
            ),
            (
                r#"{"default_model":"m","jailbreak":{"harmful_request_threshold":1.01}}"#,
                "jailbreak.harmful_request_threshold",
            ),
            (
                r#"{"default_model":"m","pii":{"action":"route"}}"#,
                "pii.route_model",
            ),
            (
                r#"{"default_model":"m","decisions":[{"name":"a","model":"x","reasoning_effort":"High!"}]}"#,
                "decisions[0].reasoning_effort",
            ),
            (
                r#"{"default_model":"m","decisions":[{"name":"a","model":"x","system_prompt":""}]}"#,
                "decisions[0].system_prompt",
            ),
            (
                r#"{"default_model":"m","decisions":[{"name":"a","model":""}]}"#,
                "decisions[0].model",
            ),
            (
                r#"{"default_model":"m","decisions":[{"name":"a","model":"x"},{"name":"a","model":"y"}]}"#,
                "decisions[1].name",
            ),
            (
                r#"{"default_model":"m","decisions":[{"name":"a","model":"x","when":{"min_confidence":2}}]}"#,
                "min_confidence",
            ),
            (
                r#"{"default_model":"m","header_prefix":"X-Bad"}"#,
                "header_prefix",
            ),
            (
                r#"{"default_model":"m","limits":{"max_depth":1}}"#,
                "limits.max_depth",
            ),
            (r#"{"default_model":"bad model"}"#, "default_model"),
        ];
        for (json, field) in cases {
            let e = FilterConfig::from_json(json.as_bytes()).unwrap_err();
            assert!(e.to_string().contains(field), "{json}: {e}");
        }
    }

    #[test]
    fn failure_mode_and_actions_parse() {
        let c = FilterConfig::from_json(
            br#"{"default_model":"m","failure_mode":"closed","jailbreak":{"action":"mark"},
                "pii":{"action":"route","route_model":"local"}}"#,
        )
        .unwrap();
        assert_eq!(c.failure_mode, FailureMode::Closed);
        assert_eq!(c.jailbreak.action, JailbreakAction::Mark);
        assert_eq!(c.pii.route_model.as_deref(), Some("local"));
    }
}
