//! The texts to classify, compressed as the extractor reads them.
//!
//! [`PromptTexts`] is the [`TextSink`] the filter hands its [`crate::request::Extractor`]:
//! it owns the compression [`PromptBuilder`]s, one for the last user turn (the prompt) and
//! one for the scan text (earlier user turns and tool output), and decides when a message
//! is worth analysing as it arrives ([`STREAM_PROMPT_BYTES`]). The extractor only reports
//! text; it knows nothing of compression.

use crate::compression::{CompressionConfig, PromptBuilder};
use crate::request::{MessageText, TextSink};

/// Message text (bytes) from which a message that may be the user's is analysed for
/// compression as it arrives. Shorter messages are analysed only if they turn out to be the
/// last user turn, once it is known (at most this much text, well under a millisecond), so
/// conversation history costs no analysis; longer ones are analysed per body chunk, so
/// that when the body's last byte arrives little is left to do.
pub const STREAM_PROMPT_BYTES: usize = 8 * 1024;

/// The prompt builders of one request body.
#[derive(Debug)]
pub struct PromptTexts {
    compression: CompressionConfig,
    token_ratio: Option<f32>,
    /// Once the text of the message being read reaches [`STREAM_PROMPT_BYTES`] while it is,
    /// or may still turn out to be, the user's (`role` can come after `content`): a builder
    /// fed all of its text, then each fragment as it arrives. It becomes the prompt's if
    /// this is the last user turn, so a long turn's sentences are analysed per body chunk
    /// whatever the key order.
    message: Option<PromptBuilder>,
    /// The last user turn's builder, when it was streamed into one.
    prompt: Option<PromptBuilder>,
    /// Fed with the scan text as it is appended (one segment), so that the scan text is
    /// compressed like the prompt, without a second read.
    scan: Option<PromptBuilder>,
}

impl PromptTexts {
    /// Builders with the `compression` settings.
    pub fn new(compression: &CompressionConfig) -> Self {
        PromptTexts {
            compression: compression.clone(),
            token_ratio: None,
            message: None,
            prompt: None,
            scan: None,
        }
    }

    /// Starts every builder with `ratio` daemon tokens per estimated token (from the
    /// filter's running [`crate::compression::TokenCalibration`]).
    pub fn with_token_ratio(mut self, ratio: f32) -> Self {
        self.token_ratio = Some(ratio);
        self
    }

    fn new_builder(&self) -> PromptBuilder {
        let b = PromptBuilder::new(&self.compression);
        match self.token_ratio {
            Some(r) => b.with_token_ratio(r),
            None => b,
        }
    }

    /// Takes the builder holding the last user turn, whose segments are `segments`
    /// ([`crate::request::Extracted::prompt_segments`]): the one streamed into when it saw
    /// every segment, else a fresh one fed from `segments`.
    pub fn take_prompt(&mut self, segments: &[String]) -> PromptBuilder {
        match self.prompt.take() {
            Some(b) if b.segment_count() == segments.len() => b,
            _ => {
                let mut b = self.new_builder();
                for s in segments {
                    b.push_str(s);
                    b.end_segment();
                }
                b
            }
        }
    }

    /// Takes the builder holding the scan text (all earlier user turns and tool output,
    /// joined by blank lines, as one segment); `None` when there is none.
    pub fn take_scan(&mut self) -> Option<PromptBuilder> {
        self.scan.take()
    }

    /// True when the last user turn, of `segments` segments, was analysed as it arrived
    /// (whatever the order of `role` and `content`), so [`PromptTexts::take_prompt`] will
    /// not re-read its text.
    pub fn prompt_streamed(&self, segments: usize) -> bool {
        self.prompt
            .as_ref()
            .is_some_and(|b| b.segment_count() == segments)
    }
}

impl TextSink for PromptTexts {
    fn message_start(&mut self) {
        self.message = None;
    }

    fn message_not_prompt(&mut self) {
        self.message = None;
    }

    fn message_fragment(&mut self, fragment: &str, message: &MessageText<'_>) {
        if let Some(b) = self.message.as_mut() {
            b.push_str(fragment);
            return;
        }
        if !message.may_be_prompt || message.bytes < STREAM_PROMPT_BYTES {
            return;
        }
        // Starts with the text read so far (the fragment included).
        let mut b = self.new_builder();
        for seg in message.segments {
            b.push_str(seg);
            b.end_segment();
        }
        b.push_str(message.current);
        self.message = Some(b);
    }

    fn message_segment_end(&mut self) {
        if let Some(b) = self.message.as_mut() {
            b.end_segment();
        }
    }

    fn message_end(&mut self, is_prompt: bool) {
        let b = self.message.take();
        if is_prompt {
            // A builder that saw every segment; otherwise one is rebuilt from the segments
            // when needed.
            self.prompt = b;
        }
    }

    fn prompt_start(&mut self) {
        self.message = None;
        self.prompt = Some(self.new_builder());
    }

    fn prompt_fragment(&mut self, fragment: &str) {
        if let Some(b) = self.prompt.as_mut() {
            b.push_str(fragment);
        }
    }

    fn prompt_segment_end(&mut self) {
        if let Some(b) = self.prompt.as_mut() {
            b.end_segment();
        }
    }

    fn scan_text(&mut self, text: &str) {
        match self.scan.as_mut() {
            Some(b) => {
                b.push_str("\n\n");
                b.push_str(text);
            }
            None => {
                let mut b = self.new_builder();
                b.push_str(text);
                self.scan = Some(b);
            }
        }
    }
}
