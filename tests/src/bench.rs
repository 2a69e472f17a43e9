//! What the benchmarks (`router-bench`, `filter-bench`) share: the generated request
//! bodies (the same deterministic prose and final question, so both tables describe the
//! same bodies), prompts of real prose from the evaluation data, the instant daemon's
//! `Classify` reply, and table helpers.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

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

/// The evaluation data directory of the benchmarks: `$EVAL_DIR` (as `make eval` takes
/// it), else [`crate::eval_dir`] (`$SEMROUTE_EVAL_DIR`, default `../shared/eval` next to
/// the workspace).
pub fn bench_eval_dir() -> PathBuf {
    std::env::var_os("EVAL_DIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(crate::eval_dir)
}

/// Short questions that end the real-prose prompts, one drawn per prompt.
pub const PROSE_QUESTIONS: [&str; 6] = [
    "Summarize the main points of the text above in three sentences.",
    "What are the key facts stated in the text above?",
    "Write a short title for the text above and explain your choice.",
    "Which part of the text above would a newcomer find hardest to follow, and why?",
    "List the open questions the text above leaves unanswered.",
    "Explain the text above to a colleague who has not read it.",
];

/// Passages of real prose read from the evaluation data (`benign/documents.jsonl`: one
/// JSON object per line with `text`, `kind` and `words`), never copied anywhere, and a
/// seeded draw of prompts made of them: [`ProsePrompts::next`] concatenates passages
/// drawn at random to about the asked size and ends with one of [`PROSE_QUESTIONS`]. No
/// two prompts of one [`ProsePrompts`] start with the same passage, so none is a repeat
/// that a result cache could answer.
pub struct ProsePrompts {
    passages: Vec<(String, usize)>,
    kinds: usize,
    source: PathBuf,
    rng: u64,
    used_first: HashSet<usize>,
}

/// Document kinds left out of the prose prompts: source code is not prose.
const NOT_PROSE: [&str; 1] = ["code"];

impl ProsePrompts {
    /// Reads `benign/documents.jsonl` under `eval_dir`; `seed` fixes the draw. An error
    /// that names the file and `EVAL_DIR` when it is missing or holds no passage.
    pub fn load(eval_dir: &Path, seed: u64) -> Result<Self, String> {
        let source = eval_dir.join("benign/documents.jsonl");
        let text = std::fs::read_to_string(&source).map_err(|e| {
            format!(
                "cannot read the prose passages {}: {e}; set EVAL_DIR to the evaluation data                  directory (default ../shared/eval)",
                source.display()
            )
        })?;
        let mut passages = Vec::new();
        let mut kinds = HashSet::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let v: Value = serde_json::from_str(line)
                .map_err(|e| format!("{} line {}: {e}", source.display(), i + 1))?;
            let kind = v["kind"].as_str().unwrap_or("");
            let Some(text) = v["text"].as_str() else {
                continue;
            };
            let words = text.split_whitespace().count();
            if words == 0 || NOT_PROSE.contains(&kind) {
                continue;
            }
            kinds.insert(kind.to_string());
            passages.push((text.trim().to_string(), words));
        }
        if passages.is_empty() {
            return Err(format!(
                "{} holds no prose passage; set EVAL_DIR to the evaluation data directory",
                source.display()
            ));
        }
        Ok(Self {
            passages,
            kinds: kinds.len(),
            source,
            rng: seed | 1,
            used_first: HashSet::new(),
        })
    }

    /// The file read, the passages kept and their kinds, for a benchmark's setup line.
    pub fn describe(&self) -> String {
        format!(
            "{} ({} passages of {} kinds, {} left out)",
            self.source.display(),
            self.passages.len(),
            self.kinds,
            NOT_PROSE.join(", ")
        )
    }

    fn next_u64(&mut self) -> u64 {
        // splitmix64
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn draw(&mut self) -> usize {
        (self.next_u64() % self.passages.len() as u64) as usize
    }

    /// The next prompt: passages to about `tokens` tokens (0.75 words per token, the
    /// question included), the last one cut at a word, then a blank line and a question.
    pub fn next(&mut self, tokens: usize) -> String {
        let question = PROSE_QUESTIONS[(self.next_u64() % PROSE_QUESTIONS.len() as u64) as usize];
        let want = (tokens * 3 / 4)
            .saturating_sub(question.split_whitespace().count())
            .max(1);
        let mut first = self.draw();
        if self.used_first.len() < self.passages.len() {
            while !self.used_first.insert(first) {
                first = (first + 1) % self.passages.len();
            }
        }
        let mut out = String::new();
        let mut words = 0;
        let mut i = first;
        while words < want {
            let (text, n) = &self.passages[i];
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            out.push_str(first_words(text, want - words));
            words += (*n).min(want - words);
            i = self.draw();
        }
        out.push_str("\n\n");
        out.push_str(question);
        out
    }
}

/// The prefix of `text` holding its first `n` whitespace-separated words.
fn first_words(text: &str, n: usize) -> &str {
    let mut seen = 0;
    let mut in_word = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if in_word {
                seen += 1;
                if seen == n {
                    return &text[..i];
                }
            }
            in_word = false;
        } else {
            in_word = true;
        }
    }
    text
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

/// The `name;dur=X` entry of an `x-semroute-timing` value (`name;dur=X, ...`), ms.
pub fn timing(value: &str, name: &str) -> Option<f64> {
    value.split(',').find_map(|p| {
        let (n, d) = p.trim().split_once(";dur=")?;
        (n == name).then(|| d.parse().ok()).flatten()
    })
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
    fn first_words_cuts_at_a_word() {
        assert_eq!(first_words("one two  three\nfour", 2), "one two");
        assert_eq!(first_words("one two  three\nfour", 3), "one two  three");
        assert_eq!(first_words("one two", 5), "one two");
        assert_eq!(first_words("  one two", 1), "  one");
    }

    #[test]
    fn prose_prompts_reach_the_size_differ_and_repeat_by_seed() {
        let dir = std::env::temp_dir().join(format!("semroute-prose-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("benign")).unwrap();
        let mut lines = String::new();
        for i in 0..50 {
            let text: Vec<String> = (0..40).map(|w| format!("w{i}x{w}")).collect();
            let kind = if i % 10 == 0 { "code" } else { "news" };
            lines.push_str(&json!({"text": text.join(" "), "kind": kind, "words": 40}).to_string());
            lines.push('\n');
        }
        std::fs::write(dir.join("benign/documents.jsonl"), lines).unwrap();
        let mut a = ProsePrompts::load(&dir, 7).unwrap();
        let mut b = ProsePrompts::load(&dir, 7).unwrap();
        assert_eq!(a.passages.len(), 45, "code left out");
        let mut seen = HashSet::new();
        for tokens in [40, 100, 400] {
            for _ in 0..5 {
                let p = a.next(tokens);
                assert_eq!(p, b.next(tokens));
                let words = p.split_whitespace().count();
                assert!(
                    words.abs_diff(tokens * 3 / 4) <= 1,
                    "{words} words for {tokens}"
                );
                assert!(PROSE_QUESTIONS.iter().any(|q| p.ends_with(q)));
                assert!(seen.insert(p));
            }
        }
        let err = ProsePrompts::load(&dir.join("missing"), 7).err().unwrap();
        assert!(err.contains("EVAL_DIR"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
