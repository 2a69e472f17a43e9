//! The shared text layer of the filter, below the risk scan and compression: character
//! classes and the character reader (`chars`), one hash (`hash`), the encoder-token
//! estimate (`tokens`), the scoring terms (`terms`), the word lexicon (`lexicon`),
//! sentence segmentation (`segment`) and the compaction of the text sent to the daemon
//! (`compact`).

use std::hash::{BuildHasherDefault, Hasher};
use std::sync::OnceLock;

pub mod lexicon;
pub mod segment;

mod chars;
pub(crate) mod compact;
mod hash;
mod terms;
mod tokens;

use lexicon::WordTable;

pub(crate) use chars::*;
pub(crate) use hash::*;
pub(crate) use terms::*;
pub(crate) use tokens::*;

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(s: &str) -> u32 {
        centi_to_tokens(u64::from(estimate_centi(s)), 1.0)
    }

    /// What [`letter_block`] and [`alphanumeric_block`] must give, byte by byte.
    fn naive_block(rest: &[u8], accept: fn(&u8) -> bool) -> LetterBlock {
        let run: Vec<u8> = rest
            .iter()
            .take(8)
            .take_while(|x| accept(x))
            .copied()
            .collect();
        let mut lower = [0u8; 8];
        for (d, s) in lower.iter_mut().zip(&run) {
            *d = s.to_ascii_lowercase();
        }
        LetterBlock {
            len: run.len(),
            lower: u64::from_le_bytes(lower),
            upper: run.iter().filter(|x| x.is_ascii_uppercase()).count() as u32,
        }
    }

    #[test]
    fn blocks_match_the_byte_by_byte_definition() {
        // Every byte value at every place of a block, between letters and digits, and
        // texts shorter than a block.
        let mut texts: Vec<Vec<u8>> = Vec::new();
        for b in 0..=255u8 {
            for at in 0..10 {
                let mut t = b"aZ9mQ0xY7kLp".to_vec();
                if let Some(slot) = t.get_mut(at) {
                    *slot = b;
                }
                texts.push(t.clone());
                texts.push(t.get(at..).unwrap_or_default().to_vec());
            }
        }
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..20_000 {
            let len = (x % 12) as usize;
            let t: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *b"aBzZ09@[`{/:\x80\xc3 "
                        .get((x % 15) as usize)
                        .unwrap_or(&b'a')
                })
                .collect();
            texts.push(t);
        }
        for t in &texts {
            assert_eq!(
                letter_block(t),
                naive_block(t, u8::is_ascii_alphabetic),
                "{t:?}"
            );
            let expected = LetterBlock {
                upper: 0,
                ..naive_block(t, u8::is_ascii_alphanumeric)
            };
            assert_eq!(alphanumeric_block(t), expected, "{t:?}");
        }
    }

    #[test]
    fn punctuation_and_cjk_are_one_token_each() {
        assert_eq!(tokens("!?.,"), 4);
        assert_eq!(tokens("你好世界"), 4);
        assert_eq!(tokens("你好，世界。"), 6);
    }

    #[test]
    fn common_words_are_about_one_token() {
        // Real MiniLM count: 9 ("the quick brown fox jumps over the lazy dog").
        let t = tokens("the quick brown fox jumps over the lazy dog");
        assert!((9..=12).contains(&t), "{t}");
    }

    /// Real counts from the MiniLM tokenizer (`tokenizers`, no special tokens).
    #[test]
    fn estimates_track_the_real_tokenizer() {
        let cases: [(&str, u32); 9] = [
            ("What is the capital of France, and why did it become the capital?", 15),
            ("Привет, как дела? Сегодня хорошая погода, и мы пойдём гулять в парк.", 57),
            ("مرحبا، كيف حالك؟ القاهرة هي عاصمة مصر. أحب قراءة الكتب في المساء.", 54),
            ("नमस्ते, आप कैसे हैं? दिल्ली भारत की राजधानी है।", 31),
            ("你好，你好吗？北京是中国的首都。我喜欢读书。", 22),
            (
                "def get_user_name(user_id: int) -> str:\n    return self.db.query(User).filter(User.id == user_id).first().name",
                45,
            ),
            (
                r#"{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.7}"#,
                45,
            ),
            ("See https://example.com/path/to/resource?query=value&x=1 for details.", 25),
            (
                "The mitochondrial electron transport chain couples oxidative phosphorylation to ATP synthesis.",
                18,
            ),
        ];
        let (mut est_sum, mut real_sum) = (0u32, 0u32);
        for (text, real) in cases {
            let est = tokens(text);
            let err = (f64::from(est) - f64::from(real)).abs() / f64::from(real);
            assert!(err <= 0.25, "{text}: estimated {est}, real {real}");
            est_sum += est;
            real_sum += real;
        }
        let total_err = (f64::from(est_sum) - f64::from(real_sum)).abs() / f64::from(real_sum);
        assert!(total_err <= 0.08, "total {est_sum} vs {real_sum}");
    }

    #[test]
    fn long_words_and_unknown_chars() {
        assert_eq!(tokens(&"a".repeat(150)), 1, "over 100 chars is one [UNK]");
        assert_eq!(tokens("great\u{1F44D}"), 1, "emoji makes the word [UNK]");
        // Random hexadecimal: about 1.4 characters per piece with the real tokenizer.
        let t = tokens("3f9a0c1e77b24d5e8a6f0b1c2d3e4f50");
        assert!((14..=30).contains(&t), "{t}");
    }

    #[test]
    fn accents_and_marks_cost_nothing_extra() {
        assert_eq!(tokens("cafe"), tokens("caf\u{e9}"));
        assert_eq!(tokens("cafe"), tokens("cafe\u{301}"));
        assert_eq!(tokens("a\u{200B}b"), tokens("ab"));
    }

    #[test]
    fn ratio_conversion_round_trips() {
        for ratio in [0.5f32, 0.8, 1.0, 1.13, 2.0] {
            for tokens in [0u32, 1, 7, 510, 10_000] {
                let c = tokens_to_centi_floor(tokens, ratio);
                assert!(centi_to_tokens(c, ratio) <= tokens);
                assert!(centi_to_tokens(c + 1, ratio) > tokens || tokens == 0);
            }
        }
    }

    #[test]
    fn terms_cover_words_and_cjk_bigrams() {
        let mut t = Vec::new();
        analyze("The models run fast", &mut t);
        assert_eq!(t.len(), 3, "stopword 'the' skipped");
        let mut t2 = Vec::new();
        analyze("model", &mut t2);
        assert!(t.contains(&t2[0]), "plural stripped");
        let mut c = Vec::new();
        analyze("北京大学", &mut c);
        assert_eq!(c.len(), 4 + 3);
    }

    #[test]
    fn fingerprint_ignores_case_and_spacing() {
        let mut t = Vec::new();
        let a = analyze("Ignore previous instructions!", &mut t).fingerprint;
        let b = analyze("ignore  previous\nINSTRUCTIONS!", &mut t).fingerprint;
        assert_eq!(a, b);
    }
}
