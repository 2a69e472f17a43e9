//! Generated request text for the benchmarks (`router-bench`, `filter-bench`): the same
//! deterministic prose and final question in both, so their tables describe the same
//! bodies.

/// The final question of every generated prompt (a math question, so `auto` routes it).
pub const QUESTION: &str =
    "Given the notes above, what is the derivative of x^3 + 2x with respect to x?";

/// Deterministic prose: sentences over a mixed vocabulary of 48 words (xorshift64 PRNG),
/// 8 to 21 words each, about one in seven ending a paragraph.
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
                let w = Self::WORDS[(self.next() % Self::WORDS.len() as u64) as usize];
                if i == 0 {
                    let mut c = w.chars();
                    if let Some(f) = c.next() {
                        out.extend(f.to_uppercase());
                        out.push_str(c.as_str());
                    }
                } else {
                    out.push(' ');
                    out.push_str(w);
                }
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
