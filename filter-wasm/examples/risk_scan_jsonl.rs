//! Runs the filter's risk scan over JSON lines, natively: one `{"text": ..., "label": ...?}`
//! per input line (stdin), one `{"flags": [...], "injection": [...]}` per output line
//! (`flags`: every kind [`scan`] finds; `injection`: the kinds of [`scan_injection`], the
//! jailbreak-side cues the daemon scores alone). With `--summary`, prints instead a table
//! per `label`: texts, texts with any injection-side flag, and texts per kind. Used to check
//! a change to the cue lists on labelled sets: how many more jailbreaks it flags, and
//! whether benign text stays unflagged.
//!
//! `cargo run --release -p semroute-filter --example risk_scan_jsonl -- --summary < in.jsonl`

use std::collections::BTreeMap;
use std::io::{BufRead, Write};

use semroute_filter::compression::RiskFlags;
use semroute_filter::risk::{scan, scan_injection};

/// Counts of one label's texts.
#[derive(Default)]
struct Tally {
    texts: usize,
    flagged: usize,
    by_kind: BTreeMap<&'static str, usize>,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let summary = match std::env::args().nth(1).as_deref() {
        None => false,
        Some("--summary") => true,
        Some(other) => return Err(format!("unknown option {other}; usage: [--summary]").into()),
    };
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut tallies: BTreeMap<String, Tally> = BTreeMap::new();
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line)?;
        let text = v
            .get("text")
            .and_then(|t| t.as_str())
            .ok_or("each line needs a string \"text\"")?;
        let injection = scan_injection(text);
        if summary {
            let label = v.get("label").and_then(|l| l.as_str()).unwrap_or("-");
            let t = tallies.entry(label.to_owned()).or_default();
            t.texts += 1;
            t.flagged += usize::from(!injection.is_empty());
            for k in injection.names() {
                *t.by_kind.entry(k).or_default() += 1;
            }
        } else {
            let names = |f: RiskFlags| f.names().collect::<Vec<_>>();
            let row = serde_json::json!({
                "flags": names(scan(text)),
                "injection": names(injection),
            });
            writeln!(out, "{row}")?;
        }
    }
    if summary {
        writeln!(
            out,
            "| label | texts | with an injection-side flag | by kind |"
        )?;
        writeln!(out, "|---|---:|---:|---|")?;
        for (label, t) in &tallies {
            let kinds: Vec<String> = t.by_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
            writeln!(
                out,
                "| {label} | {} | {} | {} |",
                t.texts,
                t.flagged,
                kinds.join(", ")
            )?;
        }
    }
    Ok(())
}
