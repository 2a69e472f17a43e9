//! Fuzz target: the incremental JSON scanner (and the OpenAI request
//! extractor on top of it) fed in chunks chosen by the input.
//!
//! Input layout: byte 0 = `n | depth << 4`; the next `n` (0..=15) bytes are
//! chunk sizes in bytes (0 = an empty chunk, used cyclically); the rest is the
//! body. `depth` picks the nesting limit (0 = 64, else `2 * depth`).
//!
//! Checks, for every input:
//! - no panic;
//! - chunked == one-shot: the same events (string fragments merged, offsets
//!   into the whole body), the same error (kind and offset), and the same
//!   extracted request (model and its span, stream, prompt segments, scan
//!   text, completeness);
//! - agreement with `serde_json`: what the scanner accepts, `serde_json`
//!   accepts; what `serde_json` accepts, the scanner accepts unless the
//!   nesting limit was hit (no verdict when `serde_json` stops at a number
//!   beyond f64 range, which is valid JSON).

#![no_main]

use libfuzzer_sys::fuzz_target;
use semroute_filter::compression::CompressionConfig;
use semroute_filter::json_scan::{FeedError, ScanErrorKind, Scanner, Sink};
use semroute_filter::testing::Recorder;
use semroute_filter::prompt_texts::PromptTexts;
use semroute_filter::request::{Api, Extractor};

/// Splits `body` into chunks of the given sizes (cyclically).
fn chunks<'a>(body: &'a [u8], sizes: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    if sizes.is_empty() || sizes.iter().all(|&s| s == 0) {
        out.extend(body.chunks(1));
        return out;
    }
    let mut at = 0;
    for &s in sizes.iter().cycle() {
        if at >= body.len() {
            break;
        }
        let end = (at + usize::from(s)).min(body.len());
        out.push(&body[at..end]);
        at = end;
    }
    out
}

/// Feeds `parts` to a scanner and `sink`, stopping at the first error.
fn scan<S: Sink>(parts: &[&[u8]], depth: usize, sink: &mut S) -> Result<(), FeedError<S::Error>> {
    let mut scanner = Scanner::new(depth);
    for p in parts {
        scanner.feed(p, sink)?;
    }
    scanner.finish(sink)
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let n = usize::from(head & 0x0f).min(rest.len());
    let (sizes, body) = rest.split_at(n);
    let depth = match head >> 4 {
        0 => 64,
        d => usize::from(d) * 2,
    };
    let parts = chunks(body, sizes);

    // Scanner events: chunked == one-shot.
    let mut whole = Recorder::default();
    let one_shot = scan(&[body], depth, &mut whole);
    let mut split = Recorder::default();
    let chunked = scan(&parts, depth, &mut split);
    assert_eq!(one_shot, chunked, "result differs with chunking");
    if one_shot.is_ok() {
        assert_eq!(whole.events, split.events, "events differ with chunking");
        assert!(!whole.in_string(), "unterminated string accepted");
    }

    // Differential check against serde_json.
    // serde_json stops at a number out of f64 range (valid JSON): no
    // verdict from it then.
    let serde_ok = match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(_) => Some(true),
        Err(e) if e.to_string().starts_with("number out of range") => None,
        Err(_) => Some(false),
    };
    match (&one_shot, serde_ok) {
        (_, None) => {}
        (Ok(()), Some(ok)) => assert!(ok, "scanner accepted what serde_json rejects"),
        (Err(FeedError::Syntax(e)), Some(ok)) => assert!(
            !ok || matches!(e.kind, ScanErrorKind::TooDeep(_)),
            "scanner rejected what serde_json accepts: {e}"
        ),
        (Err(FeedError::Sink(never)), _) => match *never {},
    }

    // Request extraction: chunked == one-shot, for both APIs.
    let compression = CompressionConfig::default();
    for api in [Api::ChatCompletions, Api::Responses] {
        let mut a = Extractor::new(api, PromptTexts::new(&compression), 4096);
        let ra = scan(&[body], depth, &mut a);
        let mut b = Extractor::new(api, PromptTexts::new(&compression), 4096);
        let rb = scan(&parts, depth, &mut b);
        assert_eq!(ra, rb, "extraction result differs with chunking");
        assert_eq!(
            a.extracted(),
            b.extracted(),
            "extracted request differs with chunking"
        );
    }
});
