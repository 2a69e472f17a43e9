//! Helpers shared by the filter's integration tests.
#![allow(dead_code)]

pub mod flow;

use std::path::PathBuf;

use semroute_filter::json_scan::{FeedError, Scanner};
pub use semroute_filter::testing::{Ev, Recorder};
use serde_json::Value;

/// The ends of the pieces of a `len`-byte body cut at `splits` (any order; cuts outside
/// `1..len` and repeats ignored), the last one `len`.
pub fn cut_points(splits: &[usize], len: usize) -> Vec<usize> {
    let mut cuts: Vec<usize> = splits
        .iter()
        .copied()
        .filter(|&s| s > 0 && s < len)
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts.push(len);
    cuts
}

/// Scans `body` split at `splits` (sorted offsets); returns the events or the
/// syntax error.
pub fn scan_split(body: &[u8], splits: &[usize], max_depth: usize) -> Result<Vec<Ev>, String> {
    let mut scanner = Scanner::new(max_depth);
    let mut rec = Recorder::default();
    let mut prev = 0;
    let cuts = cut_points(splits, body.len());
    for cut in cuts {
        scanner.feed(&body[prev..cut], &mut rec).map_err(err)?;
        prev = cut;
    }
    scanner.finish(&mut rec).map_err(err)?;
    Ok(rec.events)
}

fn err(e: FeedError<std::convert::Infallible>) -> String {
    e.to_string()
}

/// Rebuilds a JSON value from events (checks the scanner's decoding against
/// serde_json's).
pub fn rebuild(body: &[u8], events: &[Ev]) -> Value {
    fn value(body: &[u8], it: &mut std::slice::Iter<'_, Ev>) -> Value {
        match it.next().expect("truncated events") {
            Ev::ObjectStart(_) => {
                let mut m = serde_json::Map::new();
                loop {
                    match it.clone().next() {
                        Some(Ev::ObjectEnd(_)) => {
                            it.next();
                            return Value::Object(m);
                        }
                        Some(Ev::Key(k)) => {
                            let k = k.clone().unwrap_or_else(|| "<long>".into());
                            it.next();
                            let v = value(body, it);
                            m.insert(k, v);
                        }
                        other => panic!("unexpected {other:?}"),
                    }
                }
            }
            Ev::ArrayStart(_) => {
                let mut a = Vec::new();
                loop {
                    if let Some(Ev::ArrayEnd(_)) = it.clone().next() {
                        it.next();
                        return Value::Array(a);
                    }
                    a.push(value(body, it));
                }
            }
            Ev::Str { text, .. } => Value::String(text.clone()),
            Ev::Number(s, e) => {
                serde_json::from_slice(&body[*s as usize..*e as usize]).expect("number")
            }
            Ev::Bool(b, _, _) => Value::Bool(*b),
            Ev::Null(_, _) => Value::Null,
            other => panic!("unexpected {other:?}"),
        }
    }
    value(body, &mut events.iter())
}

/// Serialises like Python's `json.dumps` default: every non-ASCII character
/// as `\uXXXX` (surrogate pairs above the BMP), `/` escaped at random-ish
/// positions to exercise more escapes.
pub fn to_ascii_json(v: &Value) -> String {
    let mut out = String::new();
    write_ascii(v, &mut out);
    out
}

fn write_ascii(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            out.push('{');
            for (i, (k, v)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_ascii_str(k, out);
                out.push_str(": ");
                write_ascii(v, out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, v) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_ascii(v, out);
            }
            out.push(']');
        }
        Value::String(s) => write_ascii_str(s, out),
        other => out.push_str(&other.to_string()),
    }
}

fn write_ascii_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for u in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The evaluation request bodies: `$SEMROUTE_EVAL_DIR/requests` or
/// `<workspace>/../shared/eval/requests`.
pub fn eval_requests_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("SEMROUTE_EVAL_DIR") {
        return PathBuf::from(d).join("requests");
    }
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/eval/requests")
}

/// All evaluation request bodies as (file name, bytes); panics when the
/// directory is missing (the evaluation data must be present).
pub fn eval_requests() -> Vec<(String, Vec<u8>)> {
    let dir = eval_requests_dir();
    let mut out = Vec::new();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| {
        panic!(
            "evaluation requests not found at {} ({e}); set SEMROUTE_EVAL_DIR",
            dir.display()
        )
    });
    for e in entries {
        let p = e.expect("dir entry").path();
        if p.extension().is_some_and(|x| x == "json") {
            let name = p.file_name().expect("name").to_string_lossy().to_string();
            out.push((name, std::fs::read(&p).expect("read request")));
        }
    }
    out.sort();
    assert!(!out.is_empty(), "no *.json in {}", dir.display());
    out
}
