//! `mask-eval`: the share of planted personal data that never reaches the upstream under
//! `envoy.yaml`'s masking policy, through the real Envoy, filter and daemon.
//!
//! ```text
//! cargo run --release -p semroute-e2e --bin mask-eval -- [--limit N] [--seed S] [--show-leaks] [--grep TEXT]
//! ```
//!
//! Every record of `$EVAL_DIR/pii/presidio_synth_v2.jsonl` (synthetic text with labelled
//! entities; never seen by any training or threshold choice) that holds an entity of a
//! type `envoy.yaml`'s `pii.mask` lists is planted as one paragraph at a random place in a prompt of real prose
//! (`benign/documents.jsonl` passages, 2K–16K tokens), between two marker sentences: in
//! the last user turn, or (every third record) in an earlier user turn. The upstream's `GET /last-request` then shows
//! what left the proxy. Per entity type:
//!
//! - **protected**: no word of the value (a run of three or more letters or digits that
//!   the rest of the record does not also hold) is a word of the planted paragraph as the
//!   upstream received it;
//! - **verbatim**: the whole value reached the upstream unchanged.
//!
//! Pattern-validated types (e-mail, phone, SSN, card, IBAN, IP) and the model-detected
//! street address are reported apart. The daemon's deadline is raised to 10 s so that
//! no request falls back unclassified (fallbacks are counted).

use std::collections::BTreeMap;
use std::time::Instant;

use semroute_e2e::bench::{bench_eval_dir, ProsePrompts};
use semroute_e2e::http_client::Conn;
use semroute_e2e::{default_filter_config, http_get, Router, RouterOptions};
use serde_json::{json, Value};

/// Paragraphs around each planted record (no personal data in them).
const BEGIN: &str = "Reference block follows.";
const END: &str = "End of reference block.";

/// Types the daemon finds with validated patterns (the others come from the model).
const PATTERN: [&str; 6] = [
    "EMAIL_ADDRESS",
    "PHONE_NUMBER",
    "US_SSN",
    "CREDIT_CARD",
    "IBAN_CODE",
    "IP_ADDRESS",
];

fn die(msg: &str) -> ! {
    eprintln!("mask-eval: {msg}");
    std::process::exit(1)
}

/// PII masking measured end to end: planted values that reach the upstream.
#[derive(Debug, clap::Parser)]
#[command(name = "mask-eval")]
struct Args {
    /// Records at most.
    #[arg(long, default_value_t = usize::MAX, hide_default_value = true)]
    limit: usize,
    /// Seed of the prose drawn around each record.
    #[arg(long, default_value_t = 28)]
    seed: u64,
    /// Print each value (synthetic data) that was not protected, and each refused request's
    /// decision, on stderr.
    #[arg(long)]
    show_leaks: bool,
    /// Only the records whose text contains this.
    #[arg(long)]
    grep: Option<String>,
}

/// One labelled record: its text and the values of its masked entities with their types.
struct Record {
    text: String,
    values: Vec<(String, String)>,
}

/// Records with a value of a `masked` type (the data's type names are the daemon's for
/// every type `envoy.yaml` masks).
fn load_records(path: &std::path::Path, masked: &[String]) -> Vec<Record> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| die(&format!("{}: {e}; set EVAL_DIR", path.display())));
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| die(&e.to_string()));
        let values: Vec<(String, String)> = v["entities"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|e| {
                let kind = e["type"].as_str()?;
                let value = e["value"].as_str()?.trim();
                (masked.iter().any(|m| m == kind) && !value.is_empty())
                    .then(|| (kind.to_string(), value.to_string()))
            })
            .collect();
        if !values.is_empty() {
            let text = v["text"].as_str().unwrap_or_default().to_string();
            out.push(Record { text, values });
        }
    }
    out
}

/// Runs of three or more letters or digits.
fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(str::to_string)
        .collect()
}

/// Every string value of `v`, joined by newlines.
fn strings(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(o) => o.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

#[derive(Default)]
struct Tally {
    planted: usize,
    protected: usize,
    verbatim: usize,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn main() {
    let args = <Args as clap::Parser>::parse();
    let eval_dir = bench_eval_dir();
    let mut config = default_filter_config().unwrap_or_else(|e| die(&e));
    let masked: Vec<String> = config["pii"]["mask"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t.as_str().map(str::to_ascii_uppercase))
        .collect();
    if masked.is_empty() {
        die("envoy.yaml's filter configuration masks no PII type");
    }
    let records = load_records(&eval_dir.join("pii/presidio_synth_v2.jsonl"), &masked);
    let mut prose = ProsePrompts::load(&eval_dir, args.seed).unwrap_or_else(|e| die(&e));
    config["daemon"]["timeout_ms"] = json!(10_000);
    let mut router = Router::start(
        &semroute_e2e::target_dir().join("release/semroute-upstream"),
        RouterOptions {
            daemon: true,
            filter_config: Some(config),
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| die(&e));
    let mut conn = Conn::new(router.layout.port, std::time::Duration::ZERO);
    let mut rng = Rng(args.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut tally: BTreeMap<String, Tally> = BTreeMap::new();
    let (mut requests, mut fallbacks, mut failures) = (0usize, 0usize, 0usize);
    let mut tokens_total = 0usize;
    let started = Instant::now();
    let chosen = records.iter().filter(|r| {
        args.grep
            .as_ref()
            .is_none_or(|g| r.text.contains(g.as_str()))
    });
    for record in chosen.take(args.limit) {
        let tokens = 2048 + (rng.next() % (16384 - 2048)) as usize;
        tokens_total += tokens;
        let filler = prose.next(tokens);
        let breaks: Vec<usize> = filler.match_indices("\n\n").map(|(i, _)| i).collect();
        let at = match breaks.len() {
            0 => 0,
            n => breaks[(rng.next() % n as u64) as usize],
        };
        let (before, after) = filler.split_at(at);
        // Markers around the record find it again in what the upstream received.
        let planted = format!("{before}\n\n{BEGIN}\n\n{}\n\n{END}\n\n{after}", record.text);
        let earlier = requests % 3 == 2;
        let messages = if earlier {
            json!([{"role": "user", "content": planted},
                   {"role": "assistant", "content": "Noted."},
                   {"role": "user", "content": "Summarize what I sent you before."}])
        } else {
            json!([{"role": "user", "content": planted}])
        };
        let body = json!({"model": "auto", "messages": messages}).to_string();
        requests += 1;
        let answer = match conn.post("/v1/chat/completions", body.as_bytes()) {
            Ok(a) if a.status == 200 => a,
            Ok(a) => {
                failures += 1;
                eprintln!(
                    "mask-eval: status {} ({}) for request {requests}",
                    a.status,
                    a.header("x-semroute-decision").unwrap_or("no decision")
                );
                continue;
            }
            Err(e) => {
                failures += 1;
                eprintln!("mask-eval: {e}");
                conn = Conn::new(router.layout.port, std::time::Duration::ZERO);
                continue;
            }
        };
        if answer.header("x-semroute-fallback").is_some() {
            fallbacks += 1;
        }
        let model = answer.header("x-semroute-model").unwrap_or("general-model");
        let port = router
            .upstream_port(model)
            .unwrap_or_else(|| die(&format!("no upstream for {model}")));
        let received = http_get(port, "/last-request")
            .map(|(_, b)| b)
            .unwrap_or_default();
        let mut seen = String::new();
        match serde_json::from_str::<Value>(&received) {
            Ok(v) => strings(&v, &mut seen),
            Err(_) => {
                failures += 1;
                continue;
            }
        }
        // The planted paragraph as the upstream got it: between the markers.
        let region = match (seen.find(BEGIN), seen.find(END)) {
            (Some(a), Some(b)) if a + BEGIN.len() <= b => &seen[a + BEGIN.len()..b],
            _ => {
                failures += 1;
                eprintln!("mask-eval: the markers of request {requests} did not arrive");
                continue;
            }
        };
        for (kind, value) in &record.values {
            let t = tally.entry(kind.clone()).or_default();
            t.planted += 1;
            if region.contains(value.as_str()) {
                t.verbatim += 1;
            }
            let rest = record.text.replacen(value.as_str(), " ", 1);
            let others = words(&rest);
            let received = words(region);
            let leaked = words(value)
                .iter()
                .filter(|w| !others.contains(w))
                .any(|w| received.contains(w));
            if !leaked {
                t.protected += 1;
            } else if args.show_leaks {
                eprintln!(
                    "mask-eval: not protected: {kind} {value:?} in {:?} ({}, {}); the upstream got {:?}",
                    record.text,
                    if earlier { "earlier turn" } else { "last turn" },
                    answer.header("x-semroute-decision").unwrap_or("no decision"),
                    region.get(..region.len().min(400)).unwrap_or(region)
                );
            }
        }
        if requests % 50 == 0 {
            eprintln!("mask-eval: {requests} requests");
        }
    }
    let secs = started.elapsed().as_secs_f64();
    router.stop_daemon();
    println!("## PII masking: planted values that never reach the upstream\n");
    println!(
        "- {requests} requests through Envoy, the filter and the daemon (envoy.yaml's policy, daemon \
         deadline 10 s), each a presidio_synth_v2 record with a masked type planted as one paragraph \
         in {:.0}K tokens of prose on average (2K–16K), a third of them in an earlier user turn; \
         {fallbacks} fell back unclassified, {failures} failed; {secs:.0} s",
        tokens_total as f64 / requests.max(1) as f64 / 1000.0
    );
    println!(
        "- protected: no word of the value in the planted paragraph the upstream received; \
         verbatim: the whole value reached the upstream\n"
    );
    println!("| type | detected by | planted | protected | verbatim |");
    println!("|---|---|---:|---:|---:|");
    let mut groups: [(usize, usize); 2] = [(0, 0); 2];
    for (kind, t) in &tally {
        let pattern = PATTERN.contains(&kind.as_str());
        let g = &mut groups[usize::from(!pattern)];
        g.0 += t.planted;
        g.1 += t.protected;
        println!(
            "| {kind} | {} | {} | {:.3} | {:.3} |",
            if pattern { "pattern" } else { "model" },
            t.planted,
            t.protected as f64 / t.planted.max(1) as f64,
            t.verbatim as f64 / t.planted.max(1) as f64,
        );
    }
    for (name, (planted, protected)) in ["pattern-validated types", "model-detected types"]
        .iter()
        .zip(groups)
    {
        println!(
            "| **{name}** | | {planted} | **{:.3}** | |",
            protected as f64 / planted.max(1) as f64
        );
    }
}
