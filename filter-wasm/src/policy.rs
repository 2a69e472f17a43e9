//! Routing, jailbreak and PII policy: turns the daemon's reply (or its
//! absence) into a [`Verdict`].
//!
//! Order: the jailbreak policy first (a block ends evaluation), then the
//! routing decision (auto requests only: the first matching rule, else the
//! default model; other requests keep the model they named), then the PII
//! policy with the allow and mask lists of the chosen rule (or the global ones):
//! a type on either list does not block or re-route, and masked types go upstream as
//! placeholders ([`Route::mask`]).

use semroute_proto::signal;
use semroute_proto::v1::{ClassifyResponse, JailbreakResult};

use crate::config::{
    Conditions, FailureMode, FilterConfig, JailbreakAction, JailbreakPolicy, PiiAction,
};
use crate::error_response::ErrorResponse;
use crate::request_edits::RequestEdits;
use crate::risk::RiskFlags;

/// Why the daemon's answer could not be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackReason {
    /// The call could not even be started (unknown cluster, host refusal).
    DispatchFailed,
    /// gRPC UNAVAILABLE: socket absent, connection refused, daemon overloaded.
    Unavailable,
    /// gRPC DEADLINE_EXCEEDED: no answer within `daemon.timeout_ms`.
    Timeout,
    /// Any other gRPC status.
    Error,
    /// A reply that is not a valid `ClassifyResponse`.
    BadReply,
}

impl FallbackReason {
    /// Value of the `x-semroute-fallback` header.
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackReason::DispatchFailed => "dispatch-failed",
            FallbackReason::Unavailable => "daemon-unavailable",
            FallbackReason::Timeout => "daemon-timeout",
            FallbackReason::Error => "daemon-error",
            FallbackReason::BadReply => "daemon-bad-reply",
        }
    }

    /// Maps a gRPC status code (non-zero) to a reason.
    pub fn from_grpc_status(code: u32) -> Self {
        match code {
            GRPC_DEADLINE_EXCEEDED => FallbackReason::Timeout,
            GRPC_UNAVAILABLE => FallbackReason::Unavailable,
            _ => FallbackReason::Error,
        }
    }
}

/// What the client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestFacts<'a> {
    /// The body's `model` when it is a string.
    pub requested_model: Option<&'a str>,
    /// The requested model asks the router to choose.
    pub auto: bool,
    /// The filter's risk scan flagged a jailbreak cue in the text or the scan text (a
    /// kind in [`crate::compression::SCORED_ALONE`]); see
    /// [`crate::config::JailbreakPolicy::fail_closed_on_cue`].
    pub jailbreak_cue: bool,
    /// The kinds the risk scan found in the text and the scan text; an instruction override
    /// or a harmful request lowers the jailbreak threshold
    /// ([`crate::config::JailbreakPolicy::threshold_for`]) of a daemon score that is not
    /// given per text.
    pub risk: RiskFlags,
    /// The same kinds per text the daemon scores: each text's jailbreak score is compared
    /// with the threshold its own cues call for.
    pub text_risk: TextRisk,
    /// Entity types of the values the filter's risk scan found with a validated pattern
    /// (`EMAIL_ADDRESS`, `PHONE_NUMBER`, `CREDIT_CARD`, `IBAN_CODE`, `US_SSN`,
    /// `IP_ADDRESS`); see [`crate::config::PiiPolicy::fail_closed_on_pattern`].
    pub pattern_pii: &'a [&'static str],
}

/// The risk kinds the filter's scan found in each text of a `Classify` request
/// ([`crate::classify_request::text_risk`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TextRisk {
    /// In `ClassifyRequest.text`.
    pub text: RiskFlags,
    /// In `ClassifyRequest.scan_text`.
    pub scan_text: RiskFlags,
}

/// A request that goes on to an upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct Route {
    /// Value of `x-semroute-model` (the route key); `None` leaves it unset.
    pub model: Option<String>,
    /// Write `model` into the body's `model` field.
    pub rewrite_body: bool,
    /// Name for `x-semroute-decision`.
    pub decision: String,
    /// Domain category and its confidence, when classified.
    pub category: Option<(String, f32)>,
    /// Jailbreak score at or above the threshold under the `mark` action.
    pub jailbreak_mark: Option<f32>,
    /// Why the daemon's answer was not used.
    pub fallback: Option<FallbackReason>,
    /// PII entity types to mask in the body sent upstream (`pii.mask`, or the chosen
    /// rule's `pii_mask`); empty without a daemon reply.
    pub mask: Vec<String>,
    /// The chosen rule's reasoning effort and system prompt; empty for every other route.
    pub edits: RequestEdits,
}

/// The outcome for one request.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Forward (possibly re-routed).
    Route(Route),
    /// Answer locally with an error; `decision` names the policy.
    Reject {
        /// The reply.
        error: ErrorResponse,
        /// Name for `x-semroute-decision`.
        decision: &'static str,
    },
}

/// Signals worth asking the daemon for.
pub fn signals_needed(config: &FilterConfig, auto: bool) -> Vec<String> {
    let mut s = Vec::new();
    let rules_use_pii = config
        .decisions
        .iter()
        .any(|d| !d.when.pii_types.is_empty());
    let rules_use_jailbreak = config
        .decisions
        .iter()
        .any(|d| d.when.min_jailbreak_score.is_some() || d.when.max_jailbreak_score.is_some());
    if auto {
        s.push(signal::DOMAIN.to_string());
    }
    if config.jailbreak.enabled || (auto && rules_use_jailbreak) {
        s.push(signal::JAILBREAK.to_string());
    }
    if config.pii.enabled || (auto && rules_use_pii) {
        s.push(signal::PII.to_string());
    }
    s
}

/// gRPC DEADLINE_EXCEEDED.
const GRPC_DEADLINE_EXCEEDED: u32 = 4;
/// gRPC OUT_OF_RANGE: the daemon refuses the request as larger than it takes
/// (`limits.max_text_bytes`, or its gRPC message limit).
const GRPC_OUT_OF_RANGE: u32 = 11;
/// gRPC UNAVAILABLE.
const GRPC_UNAVAILABLE: u32 = 14;

/// Verdict after a `Classify` call that failed with gRPC `status` (non-zero); `timed_out`:
/// it failed at the filter's deadline, whatever the status says (Envoy reports its own call
/// timeout as UNAVAILABLE).
///
/// OUT_OF_RANGE (the daemon refused the text as too large) is a 413 whatever the failure
/// mode: the size is the client's doing, not an outage, and the filter's compaction of the
/// text it sends (`classify_request`) keeps it under the daemon's default limit, so only a
/// daemon configured with a lower one refuses. Every other status is a daemon failure for
/// the failure mode ([`without_classification`]).
pub fn after_failed_call(
    config: &FilterConfig,
    facts: RequestFacts<'_>,
    status: u32,
    timed_out: bool,
) -> Verdict {
    let reason = match status {
        GRPC_OUT_OF_RANGE => {
            return Verdict::Reject {
                error: ErrorResponse::prompt_too_large(),
                decision: "prompt-too-large",
            }
        }
        _ if timed_out => FallbackReason::Timeout,
        _ => FallbackReason::from_grpc_status(status),
    };
    without_classification(config, facts, Some(reason))
}

/// Verdict without a classification: no text to classify, nothing to ask, or
/// (with `fallback`) the daemon failed and the failure mode decides.
pub fn without_classification(
    config: &FilterConfig,
    facts: RequestFacts<'_>,
    fallback: Option<FallbackReason>,
) -> Verdict {
    if let (Some(reason), FailureMode::Closed) = (fallback, config.failure_mode) {
        return Verdict::Reject {
            error: ErrorResponse::unavailable(reason.as_str()),
            decision: "fail-closed",
        };
    }
    let jb = &config.jailbreak;
    if let Some(reason) = fallback.filter(|_| {
        facts.jailbreak_cue
            && jb.enabled
            && jb.action == JailbreakAction::Block
            && jb.fail_closed_on_cue
    }) {
        // Overloading the daemon must not let a suspected injection through.
        return Verdict::Reject {
            error: ErrorResponse::unavailable(reason.as_str()),
            decision: "fail-closed-cue",
        };
    }
    let pii = &config.pii;
    let masked = |t: &&str| {
        pii.mask.iter().any(|m| m.eq_ignore_ascii_case(t))
            || config.decisions.iter().any(|d| {
                d.pii_mask
                    .iter()
                    .flatten()
                    .any(|m| m.eq_ignore_ascii_case(t))
            })
    };
    if let Some(reason) = fallback.filter(|_| {
        pii.enabled && pii.fail_closed_on_pattern && facts.pattern_pii.iter().any(masked)
    }) {
        // Without the daemon's spans nothing can be masked: the values must not go
        // upstream as they are.
        return Verdict::Reject {
            error: ErrorResponse::unavailable(reason.as_str()),
            decision: "fail-closed-pii",
        };
    }
    let (model, rewrite_body, decision) = if facts.auto {
        (
            Some(config.default_model.clone()),
            true,
            if fallback.is_some() {
                "fallback"
            } else {
                "default"
            },
        )
    } else {
        (
            facts.requested_model.map(str::to_string),
            false,
            "passthrough",
        )
    };
    Verdict::Route(Route {
        model,
        rewrite_body,
        decision: decision.into(),
        category: None,
        jailbreak_mark: None,
        fallback,
        mask: Vec::new(),
        edits: RequestEdits::default(),
    })
}

fn pii_types_present(config: &FilterConfig, reply: &ClassifyResponse) -> Vec<String> {
    let mut types: Vec<String> = Vec::new();
    if let Some(p) = &reply.pii {
        for e in &p.entities {
            let t = e.r#type.to_ascii_uppercase();
            if e.score >= config.pii.min_score && !t.is_empty() && !types.contains(&t) {
                types.push(t);
            }
        }
    }
    types
}

fn matches(
    when: &Conditions,
    facts: RequestFacts<'_>,
    reply: &ClassifyResponse,
    pii: &[String],
) -> bool {
    if !when.categories.is_empty() {
        let Some(d) = &reply.domain else { return false };
        if !when
            .categories
            .iter()
            .any(|c| c.eq_ignore_ascii_case(&d.label))
        {
            return false;
        }
    }
    if let Some(min) = when.min_confidence {
        match &reply.domain {
            Some(d) if d.confidence >= min => {}
            _ => return false,
        }
    }
    let jb = reply.jailbreak.as_ref().map(|j| j.score);
    if let Some(min) = when.min_jailbreak_score {
        if !jb.is_some_and(|s| s >= min) {
            return false;
        }
    }
    if let Some(max) = when.max_jailbreak_score {
        if !jb.is_some_and(|s| s <= max) {
            return false;
        }
    }
    if !when.pii_types.is_empty()
        && !when
            .pii_types
            .iter()
            .any(|t| pii.iter().any(|p| p.eq_ignore_ascii_case(t)))
    {
        return false;
    }
    if !when.requested_models.is_empty()
        && !facts
            .requested_model
            .is_some_and(|m| when.requested_models.iter().any(|r| r == m))
    {
        return false;
    }
    true
}

/// The jailbreak score's two readings for the block log, where the daemon sums them
/// (an n-gram model configured): ` (encoder 0.9998765, n-grams +3.21)`; empty otherwise.
fn readings(j: &JailbreakResult) -> String {
    match j.ngram_logit {
        Some(logit) => format!(" (encoder {:.7}, n-grams {logit:+.2})", j.encoder_score),
        None => String::new(),
    }
}

/// The jailbreak score at or over its threshold, with that threshold, if any. Each text's
/// own score (`text_score`, `scan_text_score`) is compared with the threshold its own cues
/// call for, as the thresholds were chosen on single texts: an instruction override in an
/// earlier turn does not lower the bar for the last one. A reply without per-text scores
/// has its `score` compared with the threshold the cues of both texts call for.
fn over_threshold(
    policy: &JailbreakPolicy,
    facts: &RequestFacts<'_>,
    j: &JailbreakResult,
) -> Option<(f32, f32)> {
    let per_text = [
        (j.text_score, facts.text_risk.text),
        (j.scan_text_score, facts.text_risk.scan_text),
    ];
    if per_text.iter().all(|(score, _)| score.is_none()) {
        let threshold = policy.threshold_for(facts.risk);
        return (j.score >= threshold).then_some((j.score, threshold));
    }
    per_text
        .into_iter()
        .filter_map(|(score, risk)| Some((score?, policy.threshold_for(risk))))
        .find(|(score, threshold)| score >= threshold)
}

/// Verdict from a daemon reply.
pub fn decide(config: &FilterConfig, facts: RequestFacts<'_>, reply: &ClassifyResponse) -> Verdict {
    let mut jailbreak_mark = None;
    let over = reply
        .jailbreak
        .as_ref()
        .filter(|_| config.jailbreak.enabled)
        .and_then(|j| Some((j, over_threshold(&config.jailbreak, &facts, j)?)));
    if let Some((j, (score, threshold))) = over {
        match config.jailbreak.action {
            JailbreakAction::Block => {
                // The daemon's two readings are those of its highest text.
                let readings = if score == j.score {
                    readings(j)
                } else {
                    String::new()
                };
                log::info!(
                    "semroute: blocked: jailbreak score {score:.7} >= threshold {threshold:.7}{readings}",
                );
                return Verdict::Reject {
                    error: ErrorResponse::blocked(
                        "this request was blocked by the router's prompt-injection policy",
                        "jailbreak_detected",
                    ),
                    decision: "jailbreak-block",
                };
            }
            JailbreakAction::Mark => jailbreak_mark = Some(score),
        }
    }
    let pii = pii_types_present(config, reply);
    let category = reply
        .domain
        .as_ref()
        .filter(|d| !d.label.is_empty())
        .map(|d| (d.label.clone(), d.confidence));
    let mut allow = &config.pii.allow;
    let mut mask = &config.pii.mask;
    let mut route = if facts.auto {
        match config
            .decisions
            .iter()
            .find(|d| matches(&d.when, facts, reply, &pii))
        {
            Some(d) => {
                if let Some(a) = &d.pii_allow {
                    allow = a;
                }
                if let Some(m) = &d.pii_mask {
                    mask = m;
                }
                Route {
                    model: Some(d.model.clone()),
                    rewrite_body: true,
                    decision: d.name.clone(),
                    category,
                    jailbreak_mark,
                    fallback: None,
                    mask: Vec::new(),
                    edits: d.request_edits(),
                }
            }
            None => Route {
                model: Some(config.default_model.clone()),
                rewrite_body: true,
                decision: "default".into(),
                category,
                jailbreak_mark,
                fallback: None,
                mask: Vec::new(),
                edits: RequestEdits::default(),
            },
        }
    } else {
        Route {
            model: facts.requested_model.map(str::to_string),
            rewrite_body: false,
            decision: "passthrough".into(),
            category,
            jailbreak_mark,
            fallback: None,
            mask: Vec::new(),
            edits: RequestEdits::default(),
        }
    };
    if config.pii.enabled {
        // Masked types leave the request without their values: they are not denied.
        route.mask = mask.clone();
        let denied: Vec<&str> = pii
            .iter()
            .filter(|t| {
                !allow
                    .iter()
                    .chain(mask.iter())
                    .any(|a| a.eq_ignore_ascii_case(t))
            })
            .map(String::as_str)
            .collect();
        if !denied.is_empty() {
            match (config.pii.action, &config.pii.route_model) {
                (PiiAction::Route, Some(local)) => {
                    route.model = Some(local.clone());
                    route.rewrite_body = true;
                    route.decision = "pii-route".into();
                    route.edits = RequestEdits::default();
                }
                _ => {
                    return Verdict::Reject {
                        error: ErrorResponse::blocked(
                            format!(
                                "this request contains personal data the router does not allow: {}",
                                denied.join(", ")
                            ),
                            "pii_not_allowed",
                        ),
                        decision: "pii-block",
                    };
                }
            }
        }
    }
    Verdict::Route(route)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_log_gives_both_readings_where_the_daemon_sums_them() {
        let mut j = JailbreakResult {
            score: 0.99999,
            encoder_score: 0.9987,
            ..Default::default()
        };
        assert_eq!(readings(&j), "");
        j.ngram_logit = Some(3.214);
        assert_eq!(readings(&j), " (encoder 0.9987000, n-grams +3.21)");
        j.ngram_logit = Some(-6.5);
        assert_eq!(readings(&j), " (encoder 0.9987000, n-grams -6.50)");
    }

    fn config(extra: &str) -> FilterConfig {
        let json = format!(
            r#"{{"default_model":"general-model",
                "decisions":[
                  {{"name":"math","model":"math-model","when":{{"categories":["math"],"min_confidence":0.4}}}},
                  {{"name":"law","model":"law-model","when":{{"categories":["law"]}},"pii_allow":["PERSON"]}}
                ]{extra}}}"#
        );
        FilterConfig::from_json(json.as_bytes()).unwrap()
    }

    fn reply(label: &str, conf: f32, jb: f32, pii: &[&str]) -> ClassifyResponse {
        crate::testing::classify_reply(label, conf, jb, pii, 0.9)
    }

    const AUTO: RequestFacts<'static> = RequestFacts {
        requested_model: Some("auto"),
        auto: true,
        jailbreak_cue: false,
        risk: RiskFlags::empty(),
        text_risk: TextRisk {
            text: RiskFlags::empty(),
            scan_text: RiskFlags::empty(),
        },
        pattern_pii: &[],
    };

    fn route(v: Verdict) -> Route {
        match v {
            Verdict::Route(r) => r,
            Verdict::Reject { error, .. } => panic!("rejected: {error:?}"),
        }
    }

    #[test]
    fn first_matching_rule_wins() {
        let c = config("");
        let r = route(decide(&c, AUTO, &reply("math", 0.9, 0.0, &[])));
        assert_eq!(r.model.as_deref(), Some("math-model"));
        assert_eq!(r.decision, "math");
        assert!(r.rewrite_body);
        assert_eq!(r.category, Some(("math".into(), 0.9)));
        // Below the confidence minimum: default.
        let r = route(decide(&c, AUTO, &reply("math", 0.2, 0.0, &[])));
        assert_eq!(r.model.as_deref(), Some("general-model"));
        assert_eq!(r.decision, "default");
    }

    #[test]
    fn non_auto_passes_through() {
        let c = config("");
        let facts = RequestFacts {
            requested_model: Some("gpt-x"),
            auto: false,
            jailbreak_cue: false,
            risk: RiskFlags::empty(),
            text_risk: TextRisk::default(),
            pattern_pii: &[],
        };
        let r = route(decide(&c, facts, &reply("math", 0.9, 0.0, &[])));
        assert_eq!(r.model.as_deref(), Some("gpt-x"));
        assert!(!r.rewrite_body);
        assert_eq!(r.decision, "passthrough");
    }

    fn blocked(v: Verdict) -> bool {
        match v {
            Verdict::Reject { error, decision } => {
                assert_eq!(error.status, 403);
                assert_eq!(decision, "jailbreak-block");
                true
            }
            Verdict::Route(_) => false,
        }
    }

    #[test]
    fn jailbreak_blocks_or_marks() {
        let c = config("");
        assert!(blocked(decide(&c, AUTO, &reply("math", 0.9, 0.99999, &[]))));
        // Below the default threshold (0.9996966).
        assert!(!blocked(decide(&c, AUTO, &reply("math", 0.9, 0.9995, &[]))));
        let c = config(r#","jailbreak":{"action":"mark"}"#);
        let r = route(decide(&c, AUTO, &reply("math", 0.9, 0.99999, &[])));
        assert_eq!(r.jailbreak_mark, Some(0.99999));
        let r = route(decide(&c, AUTO, &reply("math", 0.9, 0.9995, &[])));
        assert_eq!(r.jailbreak_mark, None);
    }

    #[test]
    fn an_instruction_override_lowers_the_threshold() {
        let over = RequestFacts {
            risk: RiskFlags::OVERRIDE,
            ..AUTO
        };
        // Between the two defaults (0.9969743 and 0.9996966).
        let c = config("");
        assert!(blocked(decide(&c, over, &reply("math", 0.9, 0.9995, &[]))));
        assert!(!blocked(decide(&c, over, &reply("math", 0.9, 0.996, &[]))));
        assert!(!blocked(decide(&c, AUTO, &reply("math", 0.9, 0.9995, &[]))));
        let c = config(r#","jailbreak":{"action":"mark"}"#);
        let r = route(decide(&c, over, &reply("math", 0.9, 0.9995, &[])));
        assert_eq!(r.jailbreak_mark, Some(0.9995));
        // `null`: the general threshold alone.
        let c = config(r#","jailbreak":{"override_threshold":null}"#);
        assert!(!blocked(decide(&c, over, &reply("math", 0.9, 0.9995, &[]))));
        // The lower of the two applies.
        let c = config(r#","jailbreak":{"threshold":0.9,"override_threshold":0.95}"#);
        assert!(blocked(decide(&c, over, &reply("math", 0.9, 0.92, &[]))));
        assert!(blocked(decide(&c, AUTO, &reply("math", 0.9, 0.92, &[]))));
    }

    #[test]
    fn a_harmful_request_lowers_the_threshold_further() {
        let harmful = RequestFacts {
            risk: RiskFlags::HARMFUL_REQUEST,
            ..AUTO
        };
        let both = RequestFacts {
            risk: RiskFlags::OVERRIDE | RiskFlags::HARMFUL_REQUEST,
            ..AUTO
        };
        // Between the harmful-request default (0.9705447) and the override one (0.9969743).
        let c = config("");
        assert!(blocked(decide(&c, harmful, &reply("math", 0.9, 0.99, &[]))));
        assert!(blocked(decide(&c, both, &reply("math", 0.9, 0.99, &[]))));
        assert!(!blocked(decide(
            &c,
            harmful,
            &reply("math", 0.9, 0.97, &[])
        )));
        let over = RequestFacts {
            risk: RiskFlags::OVERRIDE,
            ..AUTO
        };
        assert!(!blocked(decide(&c, over, &reply("math", 0.9, 0.99, &[]))));
        assert!(!blocked(decide(&c, AUTO, &reply("math", 0.9, 0.99, &[]))));
        // `null`: the cue lowers nothing.
        let c = config(r#","jailbreak":{"harmful_request_threshold":null}"#);
        assert!(!blocked(decide(
            &c,
            harmful,
            &reply("math", 0.9, 0.99, &[])
        )));
        // The lowest threshold that applies wins, never a higher one.
        let c = config(r#","jailbreak":{"threshold":0.9,"harmful_request_threshold":0.95}"#);
        assert!(blocked(decide(&c, harmful, &reply("math", 0.9, 0.92, &[]))));
    }

    /// A reply whose jailbreak score is given per text.
    fn per_text_reply(text: f32, scan_text: Option<f32>) -> ClassifyResponse {
        let mut r = reply("math", 0.9, text.max(scan_text.unwrap_or(0.0)), &[]);
        if let Some(j) = r.jailbreak.as_mut() {
            j.text_score = Some(text);
            j.scan_text_score = scan_text;
        }
        r
    }

    #[test]
    fn each_text_is_held_to_the_threshold_of_its_own_cues() {
        let c = config("");
        // A harmful request in an earlier turn: the last turn keeps the general threshold.
        let earlier = RequestFacts {
            risk: RiskFlags::HARMFUL_REQUEST,
            text_risk: TextRisk {
                text: RiskFlags::empty(),
                scan_text: RiskFlags::HARMFUL_REQUEST,
            },
            ..AUTO
        };
        // Between the harmful-request default (0.9705447) and the general one.
        assert!(!blocked(decide(
            &c,
            earlier,
            &per_text_reply(0.99, Some(0.2))
        )));
        assert!(blocked(decide(
            &c,
            earlier,
            &per_text_reply(0.2, Some(0.99))
        )));
        assert!(blocked(decide(
            &c,
            earlier,
            &per_text_reply(0.99995, Some(0.2))
        )));
        // The same cue in the last turn lowers its threshold, not the earlier turns'.
        let last = RequestFacts {
            text_risk: TextRisk {
                text: RiskFlags::HARMFUL_REQUEST,
                scan_text: RiskFlags::empty(),
            },
            ..earlier
        };
        assert!(blocked(decide(&c, last, &per_text_reply(0.99, Some(0.2)))));
        assert!(!blocked(decide(&c, last, &per_text_reply(0.2, Some(0.99)))));
        // A text at its threshold blocks though the other is higher: marked with its score.
        let c = config(r#","jailbreak":{"action":"mark"}"#);
        let r = route(decide(&c, last, &per_text_reply(0.99, Some(0.9995))));
        assert_eq!(r.jailbreak_mark, Some(0.99));
        // A daemon without per-text scores: its score against the cues of both texts.
        let c = config("");
        assert!(blocked(decide(&c, earlier, &reply("math", 0.9, 0.99, &[]))));
    }

    #[test]
    fn pii_allow_lists_and_actions() {
        let c = config(r#","pii":{"allow":["DATE_TIME"]}"#);
        assert!(matches!(
            decide(&c, AUTO, &reply("math", 0.9, 0.0, &["EMAIL_ADDRESS"])),
            Verdict::Reject { .. }
        ));
        route(decide(&c, AUTO, &reply("math", 0.9, 0.0, &["DATE_TIME"])));
        // Per-decision allow-list overrides the global one.
        route(decide(&c, AUTO, &reply("law", 0.9, 0.0, &["PERSON"])));
        let c = config(r#","pii":{"action":"route","route_model":"local-pii-model"}"#);
        let r = route(decide(&c, AUTO, &reply("math", 0.9, 0.0, &["US_SSN"])));
        assert_eq!(r.model.as_deref(), Some("local-pii-model"));
        assert_eq!(r.decision, "pii-route");
        let facts = RequestFacts {
            requested_model: Some("gpt-x"),
            auto: false,
            jailbreak_cue: false,
            risk: RiskFlags::empty(),
            text_risk: TextRisk::default(),
            pattern_pii: &[],
        };
        let r = route(decide(&c, facts, &reply("math", 0.9, 0.0, &["US_SSN"])));
        assert_eq!(r.model.as_deref(), Some("local-pii-model"));
        assert!(r.rewrite_body);
    }

    #[test]
    fn failure_modes() {
        let c = config("");
        let r = route(without_classification(
            &c,
            AUTO,
            Some(FallbackReason::Timeout),
        ));
        assert_eq!(r.model.as_deref(), Some("general-model"));
        assert_eq!(r.fallback, Some(FallbackReason::Timeout));
        let c = config(r#","failure_mode":"closed""#);
        match without_classification(&c, AUTO, Some(FallbackReason::Unavailable)) {
            Verdict::Reject { error, .. } => assert_eq!(error.status, 503),
            v => panic!("{v:?}"),
        }
        // Nothing to classify is not a failure.
        route(without_classification(&c, AUTO, None));
        // Fail-open, but the risk scan flagged a jailbreak cue: 503.
        let cue = RequestFacts {
            jailbreak_cue: true,
            ..AUTO
        };
        let c = config("");
        match without_classification(&c, cue, Some(FallbackReason::Timeout)) {
            Verdict::Reject { error, decision } => {
                assert_eq!(error.status, 503);
                assert_eq!(decision, "fail-closed-cue");
            }
            v => panic!("{v:?}"),
        }
        route(without_classification(&c, cue, None));
        for off in [
            r#","jailbreak":{"fail_closed_on_cue":false}"#,
            r#","jailbreak":{"action":"mark"}"#,
            r#","jailbreak":{"enabled":false}"#,
        ] {
            let c = config(off);
            let r = route(without_classification(
                &c,
                cue,
                Some(FallbackReason::Timeout),
            ));
            assert_eq!(r.fallback, Some(FallbackReason::Timeout), "{off}");
        }
        // Fail-open, but the risk scan found a value of a masked type: 503; of a type
        // nobody masks, or with the switch off: the fallback route.
        let card = RequestFacts {
            pattern_pii: &["CREDIT_CARD"],
            ..AUTO
        };
        let c = config(r#","pii":{"mask":["CREDIT_CARD"]}"#);
        match without_classification(&c, card, Some(FallbackReason::Unavailable)) {
            Verdict::Reject { error, decision } => {
                assert_eq!(error.status, 503);
                assert_eq!(decision, "fail-closed-pii");
            }
            v => panic!("{v:?}"),
        }
        route(without_classification(&c, card, None));
        for other in [
            r#","pii":{"mask":["EMAIL_ADDRESS"]}"#,
            r#","pii":{"mask":["CREDIT_CARD"],"fail_closed_on_pattern":false}"#,
            r#","pii":{"mask":["CREDIT_CARD"],"enabled":false}"#,
        ] {
            let c = config(other);
            let r = route(without_classification(
                &c,
                card,
                Some(FallbackReason::Timeout),
            ));
            assert_eq!(r.fallback, Some(FallbackReason::Timeout), "{other}");
        }
        let c = FilterConfig::from_json(
            br#"{"default_model":"d","decisions":[{"name":"m","model":"m","pii_mask":["CREDIT_CARD"]}]}"#,
        )
        .unwrap();
        assert!(matches!(
            without_classification(&c, card, Some(FallbackReason::Timeout)),
            Verdict::Reject { .. }
        ));
    }

    #[test]
    fn signals_follow_the_request() {
        let c = config("");
        assert_eq!(signals_needed(&c, true), vec!["domain", "jailbreak", "pii"]);
        assert_eq!(signals_needed(&c, false), vec!["jailbreak", "pii"]);
        let c = config(r#","jailbreak":{"enabled":false},"pii":{"enabled":false}"#);
        assert!(signals_needed(&c, false).is_empty());
    }
}
