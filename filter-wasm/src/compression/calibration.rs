//! The token calibration: the ratio between the daemon's real token counts and the
//! filter's estimate, learned from the daemon's replies.

use super::Compressed;

/// Learns the ratio between the daemon's real token counts and this module's estimate.
///
/// Keep one per filter (root context) and feed it every reply:
/// `calibration.observe_reply(&compressed, reply.input_tokens)`, then start each request's
/// builder with `.with_token_ratio(calibration.ratio())`. The ratio is a running mean of
/// `actual / estimated` (exponential after 20 samples, weight 0.05), clamped to
/// [`TokenCalibration::MIN_RATIO`]..=[`TokenCalibration::MAX_RATIO`]; texts under 16
/// estimated tokens are ignored as too noisy.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenCalibration {
    ratio: f32,
    samples: u32,
}

impl TokenCalibration {
    /// Smallest ratio accepted.
    pub const MIN_RATIO: f32 = 0.25;
    /// Largest ratio accepted.
    pub const MAX_RATIO: f32 = 4.0;

    /// Starts from `initial_ratio` (for example [`super::CompressionConfig::token_ratio`]);
    /// non-finite values become 1.0.
    pub fn new(initial_ratio: f32) -> Self {
        TokenCalibration {
            ratio: clamp_ratio(initial_ratio),
            samples: 0,
        }
    }

    /// Current ratio (daemon tokens per estimated token).
    pub fn ratio(&self) -> f32 {
        self.ratio
    }

    /// Samples taken so far.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Adds one sample: `estimated` tokens by this module's estimator at ratio 1
    /// ([`Compressed::kept_tokens_raw`]), `actual` tokens counted by the daemon (the
    /// reply's `input_tokens`, special tokens excluded). Returns the new ratio.
    pub fn observe(&mut self, estimated: u32, actual: u32) -> f32 {
        if estimated < 16 || actual == 0 {
            return self.ratio;
        }
        let sample = clamp_ratio(actual as f32 / estimated as f32);
        self.samples = self.samples.saturating_add(1);
        let alpha = (1.0 / self.samples as f32).max(0.05);
        self.ratio = clamp_ratio(self.ratio + alpha * (sample - self.ratio));
        self.ratio
    }

    /// [`TokenCalibration::observe`] for the text of `sent`.
    pub fn observe_reply(&mut self, sent: &Compressed, input_tokens: u32) -> f32 {
        self.observe(sent.kept_tokens_raw, input_tokens)
    }
}

impl Default for TokenCalibration {
    fn default() -> Self {
        TokenCalibration::new(1.0)
    }
}

/// `r` within the accepted ratios; 1.0 for a non-finite `r`.
pub(super) fn clamp_ratio(r: f32) -> f32 {
    if r.is_finite() {
        r.clamp(TokenCalibration::MIN_RATIO, TokenCalibration::MAX_RATIO)
    } else {
        1.0
    }
}
