//! What the benchmarks (`router-bench`, `filter-bench`) share: the generated request
//! bodies (the same deterministic prose and final question, so both tables describe the
//! same bodies), the instant daemon's `Classify` reply, and table helpers.

use semroute_proto::v1::{ClassifyResponse, DomainResult, JailbreakResult, PiiResult};
use serde_json::{json, Value};

/// The final question of every generated prompt (a math question, so `auto` routes it).
pub const QUESTION: &str =
    "Given the notes above, what is the derivative of x^3 + 2x with respect to x?";

/// Deterministic prose (xorshift64 PRNG): sentences of 8 to 21 words, about one in seven
/// ending a paragraph. Two words in five are among 48 common ones; the others come from a
/// long tail of [`Prose::TAIL`] generated words, rank `r` with probability about
/// proportional to `1 / (r + 1)` (log-uniform ranks, Zipf's law with exponent 1), so that
/// as in real text most terms are rare and a few are frequent: the compressor's term
/// tables grow with the text and its similarity graph has edges.
pub struct Prose(pub u64);

impl Prose {
    const WORDS: [&'static str; 48] = [
        "the",
        "system",
        "report",
        "quarterly",
        "revenue",
        "analysis",
        "of",
        "and",
        "customer",
        "network",
        "latency",
        "model",
        "policy",
        "review",
        "contract",
        "clause",
        "energy",
        "market",
        "growth",
        "team",
        "service",
        "migration",
        "database",
        "schema",
        "index",
        "query",
        "storage",
        "budget",
        "forecast",
        "risk",
        "audit",
        "compliance",
        "shipment",
        "warehouse",
        "supplier",
        "invoice",
        "payment",
        "schedule",
        "meeting",
        "summary",
        "protein",
        "experiment",
        "sample",
        "result",
        "method",
        "in",
        "for",
        "with",
    ];

    /// Words in the generated long tail.
    pub const TAIL: usize = 4096;

    /// Appends a word: a common one, or one of the long tail (see [`Prose`]).
    fn push_word(&mut self, out: &mut String, capital: bool) {
        let start = out.len();
        if self.next() % 5 < 2 {
            out.push_str(Self::WORDS[(self.next() % Self::WORDS.len() as u64) as usize]);
        } else {
            let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
            let rank = ((u * ((Self::TAIL + 1) as f64).ln()).exp() as usize).saturating_sub(1);
            Self::tail_word(rank.min(Self::TAIL - 1), out);
        }
        if capital {
            if let Some(first) = out.get_mut(start..start + 1) {
                first.make_ascii_uppercase();
            }
        }
    }

    /// Long-tail word `rank`: one consonant-vowel syllable per base-80 digit of
    /// `rank + 80` (two digits for every rank), and a third syllable for one rank in three;
    /// distinct ranks give distinct words.
    fn tail_word(rank: usize, out: &mut String) {
        const ONSETS: &[u8; 16] = b"bcdfghklmnprstvz";
        const VOWELS: &[u8; 5] = b"aeiou";
        let mut syllable = |d: usize| {
            out.push(char::from(ONSETS[d / 5 % 16]));
            out.push(char::from(VOWELS[d % 5]));
        };
        let x = rank + 80;
        syllable(x / 80 % 80);
        syllable(x % 80);
        if rank.is_multiple_of(3) {
            syllable(rank / 3 % 80);
        }
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Sentences until `words` words or `bytes` bytes, whichever first (the last sentence
    /// is finished, so the text can be a little longer).
    pub fn text(&mut self, words: usize, bytes: usize) -> String {
        let mut out = String::new();
        let mut n = 0;
        while n < words && out.len() < bytes {
            let len = 8 + (self.next() % 14) as usize;
            for i in 0..len {
                if i > 0 {
                    out.push(' ');
                }
                self.push_word(&mut out, i == 0);
                n += 1;
            }
            out.push_str(if matches!(self.next() % 7, 0) {
                ".\n\n"
            } else {
                ". "
            });
        }
        out
    }
}

/// A chat body: a system turn, then `text` as the user turn.
pub fn chat_body(text: &str) -> String {
    json!({
        "model": "auto",
        "messages": [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": text}
        ],
        "temperature": 0.2
    })
    .to_string()
}

/// A chat body of about `bytes` bytes (at least the fixed parts): one long last user
/// turn, a pasted document then [`QUESTION`].
pub fn last_turn_body(bytes: usize) -> Vec<u8> {
    let fixed = chat_body(QUESTION).len() + 4;
    let mut doc = Prose(0x9e37_79b9_7f4a_7c15).text(usize::MAX, bytes.saturating_sub(fixed));
    // Escapes (`\n`) make the body longer than the text: trim to fit.
    loop {
        let body = chat_body(&format!("{doc}\n\n{QUESTION}"));
        let over = body.len().saturating_sub(bytes);
        if over == 0 || doc.is_empty() {
            return body.into_bytes();
        }
        doc.truncate(doc.len().saturating_sub(over));
    }
}

/// A conversation of about `bytes` bytes: user / assistant turns of about 2 KB, then
/// [`QUESTION`] as the last user turn.
pub fn history_body(bytes: usize) -> Vec<u8> {
    let mut prose = Prose(0x2545_f491_4f6c_dd1d);
    let mut messages = vec![json!({"role": "system", "content": "You are a helpful assistant."})];
    let last = json!({"role": "user", "content": QUESTION});
    let frame =
        |m: &[Value]| json!({"model": "auto", "messages": m, "temperature": 0.2}).to_string();
    let mut turn = 0;
    loop {
        let mut with_last = messages.clone();
        with_last.push(last.clone());
        let body = frame(&with_last);
        if body.len() + 64 >= bytes {
            return body.into_bytes();
        }
        let text = prose.text(usize::MAX, (bytes - body.len() - 40).min(2048));
        let role = if turn % 2 == 0 { "user" } else { "assistant" };
        messages.push(json!({"role": role, "content": text}));
        turn += 1;
    }
}

/// The benchmarks' instant daemon reply: math (confidence 0.9), jailbreak score 0.01,
/// no personal data, `input_tokens` encoder tokens.
pub fn instant_reply(request_id: String, input_tokens: u32) -> ClassifyResponse {
    ClassifyResponse {
        request_id,
        domain: Some(DomainResult {
            label: "math".into(),
            confidence: 0.9,
            distribution: vec![],
        }),
        jailbreak: Some(JailbreakResult {
            score: 0.01,
            ..Default::default()
        }),
        pii: Some(PiiResult::default()),
        input_tokens,
        ..Default::default()
    }
}

/// The `q`-quantile (nearest rank) of `v`; NaN when `v` is empty.
pub fn quantile(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    let i = ((q * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s.get(i).copied().unwrap_or(f64::NAN)
}

/// `bytes` as "2 KiB", "1 MiB" or "100 B".
pub fn size_name(bytes: usize) -> String {
    if bytes >= 1 << 20 && bytes.trailing_zeros() >= 20 {
        format!("{} MiB", bytes >> 20)
    } else if bytes >= 1024 {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn tail_words_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for rank in 0..Prose::TAIL {
            let mut w = String::new();
            Prose::tail_word(rank, &mut w);
            assert!(seen.insert(w.clone()), "rank {rank} repeats {w}");
            assert!(!Prose::WORDS.contains(&w.as_str()));
        }
    }

    #[test]
    fn prose_vocabulary_is_long_tailed() {
        let text = Prose(1).text(usize::MAX, 256 * 1024);
        let mut counts: HashMap<String, usize> = HashMap::new();
        for w in text
            .split(|c: char| !c.is_ascii_alphabetic())
            .filter(|w| !w.is_empty())
        {
            *counts.entry(w.to_ascii_lowercase()).or_default() += 1;
        }
        let once = counts.values().filter(|&&c| c == 1).count();
        // Thousands of distinct words, many of them seen once, and a few very frequent ones.
        assert!(counts.len() > 2000, "{} distinct words", counts.len());
        assert!(once > 100, "{once} words seen once");
        assert!(counts.values().any(|&c| c > 1000));
    }
}
