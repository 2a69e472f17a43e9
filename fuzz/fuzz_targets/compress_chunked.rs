//! Fuzz target: prompt compression (sentence segmentation, risk detectors,
//! pruning while streaming, ranking and selection) on arbitrary text fed in
//! chunks chosen by the input.
//!
//! Input layout: byte 0 picks the budget (`16 + 8 * (b & 63)` tokens) and, with
//! its top bit, a small candidate cap (64 sentences, so pruning runs on short
//! inputs); byte 1 is the chunk size in bytes (0 = 1); the rest is the text,
//! decoded lossily as UTF-8, where each `\x1e` byte ends a segment (the last
//! segment is pinned when there are several).
//!
//! Checks, for every input:
//! - no panic;
//! - chunked == one-shot: the same sentences counted and the same output;
//! - the output fits the budget unless it reports `overflow`, holds no more
//!   text than went in, and is unchanged text when nothing was dropped;
//! - the flagged sentences sent with it are in order, at most
//!   `MAX_FLAGGED_SENTENCES`, and ranges of character boundaries of the output.

#![no_main]

use libfuzzer_sys::fuzz_target;
use semroute_filter::compression::{CompressionConfig, PromptBuilder, MAX_FLAGGED_SENTENCES};

fn build(cfg: &CompressionConfig, segments: &[&str], chunk: usize) -> PromptBuilder {
    let mut b = PromptBuilder::new(cfg);
    for seg in segments {
        let mut rest: &str = seg;
        while !rest.is_empty() {
            let mut cut = chunk.min(rest.len());
            while !rest.is_char_boundary(cut) {
                cut += 1;
            }
            let (piece, tail) = rest.split_at(cut);
            b.push_str(piece);
            rest = tail;
        }
        b.end_segment();
    }
    b
}

fuzz_target!(|data: &[u8]| {
    let [conf, chunk, text @ ..] = data else {
        return;
    };
    let budget = 16 + 8 * u32::from(conf & 63);
    let mut cfg = CompressionConfig {
        budget_tokens: budget,
        ..CompressionConfig::default()
    };
    if conf & 0x80 != 0 {
        cfg.max_ranked_sentences = 64;
    }
    let chunk = usize::from(*chunk).max(1);
    let text = String::from_utf8_lossy(text);
    let segments: Vec<&str> = text.split('\u{1e}').collect();
    let pinned: Vec<usize> = if segments.len() > 1 {
        vec![segments.len() - 1]
    } else {
        Vec::new()
    };

    let whole = build(&cfg, &segments, usize::MAX);
    let parts = build(&cfg, &segments, chunk);
    assert_eq!(whole.sentence_count(), parts.sentence_count());
    let a = whole.finish(&pinned);
    let b = parts.finish(&pinned);
    assert_eq!(a.text, b.text);
    assert_eq!(a.kept_tokens, b.kept_tokens);
    assert_eq!(a.pruned_sentences, b.pruned_sentences);
    assert_eq!(a.flagged_sentences, b.flagged_sentences);
    assert!(a.flagged_sentences.len() <= MAX_FLAGGED_SENTENCES);
    assert!(a.flagged_sentences.windows(2).all(|w| w[0].end <= w[1].start));
    for r in &a.flagged_sentences {
        assert!(r.start < r.end && a.text.get(r.clone()).is_some(), "{r:?}");
    }

    if !a.overflow {
        assert!(a.kept_tokens <= a.budget_tokens, "{a:?}");
    }
    let joined_len = segments.iter().map(|s| s.len()).sum::<usize>() + segments.len();
    assert!(a.text.len() <= joined_len);
    if !a.compressed {
        assert_eq!(a.text, segments.join("\n"));
    }
});
