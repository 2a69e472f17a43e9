//! Compresses JSON lines with the filter's compressor, natively: one
//! `{"text": ..., "budget_tokens": N?, "config": {...}?, "pii_cues": [kind, ...]?}` per input
//! line (stdin; `config` is a `compression` object as in the filter's configuration,
//! budget_tokens overrides its budget, `pii_cues` names the risk kinds whose sentences the
//! daemon's PII model reads, as the filter sets them under `pii.model_pass: on_cue`), one
//! `{"text", "original_tokens", "kept_tokens", "compressed", "finish_us", ..., "risk",
//! "pii_sentences"}` per output line (`risk`: the kinds the risk scan found in the whole
//! text, as the filter's policy reads them; `pii_sentences`: byte ranges of `text` that the
//! PII model reads, empty without `pii_cues`). Used by `scripts/eval_compression.py` to compare
//! decisions with and without compression on the very text the filter would
//! send.
//!
//! `cargo run --release -p semroute-filter --example compress_jsonl < in.jsonl`

use std::io::{BufRead, Write};

use semroute_filter::classify_request::compact_text;
use semroute_filter::compression::{CompressionConfig, PromptBuilder};
use semroute_filter::risk::RiskFlags;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let stdin = std::io::stdin();
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in stdin.lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line)?;
        let text = v.get("text").and_then(|t| t.as_str()).unwrap_or_default();
        let mut config = match v.get("config") {
            Some(c) => serde_json::from_value::<CompressionConfig>(c.clone())?,
            None => CompressionConfig::default(),
        };
        if let Some(b) = v.get("budget_tokens").and_then(|b| b.as_u64()) {
            config.budget_tokens = u32::try_from(b)?;
        }
        config.validate()?;
        let mut builder = PromptBuilder::new(&config);
        let mut cues = RiskFlags::empty();
        for name in v
            .get("pii_cues")
            .and_then(|c| c.as_array())
            .into_iter()
            .flatten()
        {
            let name = name.as_str().unwrap_or_default();
            match RiskFlags::named(name) {
                Some(kind) => cues |= kind,
                None => return Err(format!("unknown risk kind {name:?} in pii_cues").into()),
            }
        }
        builder.set_pii_cues(cues);
        builder.push_str(text);
        builder.end_segment();
        let c = builder.finish(&[]);
        // Compacted as the filter's `Classify` request carries it.
        let (sent, spans) = compact_text(&c.text, &[&c.flagged_sentences, &c.pii_sentences]);
        let (flagged, pii) = (&spans[0], &spans[1]);
        let result = serde_json::json!({
            "text": sent,
            "original_tokens": c.original_tokens,
            "kept_tokens": c.kept_tokens,
            "compressed": c.compressed,
            "finish_us": c.finish_us,
            "sentences": c.sentences,
            "kept_sentences": c.kept_sentences,
            "risk_flagged_sentences": c.risk_flagged_sentences,
            "flagged_sentences": flagged.iter().map(|r| [r.start, r.end]).collect::<Vec<_>>(),
            "overflow": c.overflow,
            "risk": c.risk.names().collect::<Vec<_>>(),
            "pii_sentences": pii.iter().map(|r| [r.start, r.end]).collect::<Vec<_>>(),
        });
        writeln!(out, "{result}")?;
    }
    Ok(())
}
