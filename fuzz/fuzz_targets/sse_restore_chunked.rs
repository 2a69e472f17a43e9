//! Fuzz target: PII restore over a server-sent event stream (event cutting, `data:`
//! payloads read as JSON, placeholders restored and joined across events) fed in chunks
//! chosen by the input.
//!
//! Input layout: byte 0 is the chunk size in bytes (0 = 1); the rest is the stream.
//!
//! Checks, for every input:
//! - no panic (also in the whole-answer JSON restore of the same bytes);
//! - chunked == one-shot: the same bytes out;
//! - a stream without `<` and without `\` (so without a placeholder, escaped or not)
//!   comes out byte for byte.

#![no_main]

use libfuzzer_sys::fuzz_target;
use semroute_filter::pii_restore::{Restorer, SseRestore};

fn restorer() -> Restorer {
    Restorer::new(vec![
        ("<EMAIL_ADDRESS_1>".into(), "a\"b@x.io".into()),
        ("<US_SSN_1>".into(), "123-45-6789".into()),
        ("<PERSON_2>".into(), "Zoë \\ Ng\n".into()),
    ])
}

fn run(stream: &[u8], chunk: usize) -> Vec<u8> {
    let mut s = SseRestore::new(restorer(), 1 << 20);
    let mut out = Vec::new();
    let mut pieces = stream.chunks(chunk).peekable();
    if pieces.peek().is_none() {
        out.extend(s.feed(&[], true));
    }
    while let Some(p) = pieces.next() {
        out.extend(s.feed(p, pieces.peek().is_none()));
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Some((&c, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(c).max(1);
    let whole = run(stream, stream.len().max(1));
    let chunked = run(stream, chunk);
    assert_eq!(chunked, whole, "chunking changed the output");
    if !stream.iter().any(|b| *b == b'<' || *b == b'\\') {
        assert_eq!(whole, stream, "a stream without placeholders changed");
    }
    let _ = restorer().restore_json(stream);
});
