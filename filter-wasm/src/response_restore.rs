//! The response side of the PII mask: restores placeholders in the upstream's answer
//! before the client sees it, driven by the response callbacks of one stream.
//!
//! - `application/json` (or any `+json` / `json` type): the answer is buffered to its
//!   end (at most `pii.max_restore_bytes`), restored with [`Restorer::restore_json`] and
//!   written back; `content-length` is removed at the headers so the new length holds.
//! - `text/event-stream`: each body chunk is replaced by what [`SseRestore::feed`]
//!   returns; nothing is buffered beyond one incomplete event (and the events waiting
//!   behind a held one, at most [`MAX_QUEUED_EVENTS`](crate::pii_restore::MAX_QUEUED_EVENTS)).
//! - anything else, or a `content-encoding` other than identity: passed through untouched
//!   (counted in `semroute.pii_restore_skipped`). The masked request asks for
//!   `accept-encoding: identity`, so an upstream that honours it never encodes.
//!
//! A JSON answer or SSE event larger than the limit is passed through unrestored (also
//! counted), never truncated.

use crate::filter::{Action, Host};
use crate::pii_restore::{Restorer, SseRestore};

/// Counter of answers (or streams) passed through without restore although
/// placeholders were issued.
pub const SKIPPED_COUNTER: &str = "semroute.pii_restore_skipped";

enum Mode {
    /// Response headers not seen yet.
    Pending(Restorer),
    Json(Restorer),
    Sse(SseRestore),
    Off,
}

/// Restore state of one stream; holds the only copy of the mask's values, freed with
/// the stream.
pub struct ResponseRestore {
    mode: Mode,
    limit: usize,
}

impl ResponseRestore {
    /// Restore with `restorer`, buffering at most `limit` bytes.
    pub fn new(restorer: Restorer, limit: usize) -> Self {
        ResponseRestore {
            mode: Mode::Pending(restorer),
            limit,
        }
    }

    fn skip<H: Host>(&mut self, host: &mut H, why: &str) {
        log::info!("semroute: answer passed through without PII restore: {why}");
        host.increment_counter(SKIPPED_COUNTER, 1);
        self.mode = Mode::Off;
    }

    /// Response headers arrived: choose how the body is restored.
    pub fn on_headers<H: Host>(&mut self, host: &mut H) {
        let Mode::Pending(restorer) = std::mem::replace(&mut self.mode, Mode::Off) else {
            return;
        };
        let encoding = host.response_header("content-encoding").unwrap_or_default();
        let encoding = encoding.trim();
        if !encoding.is_empty() && !encoding.eq_ignore_ascii_case("identity") {
            return self.skip(host, "encoded answer");
        }
        let ctype = host
            .response_header("content-type")
            .unwrap_or_default()
            .to_ascii_lowercase();
        let essence = ctype.split(';').next().unwrap_or("").trim();
        if essence == "text/event-stream" {
            self.mode = Mode::Sse(SseRestore::new(restorer, self.limit));
        } else if essence.ends_with("/json") || essence.ends_with("+json") {
            let length = host
                .response_header("content-length")
                .and_then(|v| v.trim().parse::<u64>().ok());
            if length.is_some_and(|n| n > self.limit as u64) {
                return self.skip(host, "answer larger than pii.max_restore_bytes");
            }
            self.mode = Mode::Json(restorer);
        } else {
            // Not an answer format that can carry placeholders as text.
            return;
        }
        host.remove_response_header("content-length");
    }

    /// A response body chunk arrived; `body_size` is the size of the buffered response
    /// body (the chunk itself unless earlier chunks were held with `Pause`).
    pub fn on_body<H: Host>(
        &mut self,
        host: &mut H,
        body_size: usize,
        end_of_stream: bool,
    ) -> Action {
        match &mut self.mode {
            Mode::Pending(_) | Mode::Off => Action::Continue,
            Mode::Json(restorer) => {
                if body_size > self.limit {
                    self.skip(host, "answer larger than pii.max_restore_bytes");
                    return Action::Continue;
                }
                if !end_of_stream {
                    return Action::Pause;
                }
                let body = host.response_body(0, body_size).unwrap_or_default();
                if let Some(restored) = restorer.restore_json(&body) {
                    if let Err(e) = host.set_response_body(0, body_size, &restored) {
                        log::warn!("semroute: cannot write the restored answer: {e}");
                    }
                }
                self.mode = Mode::Off;
                Action::Continue
            }
            Mode::Sse(sse) => {
                let chunk = host.response_body(0, body_size).unwrap_or_default();
                let out = sse.feed(&chunk, end_of_stream);
                let gave_up = sse.gave_up();
                if out != chunk {
                    if let Err(e) = host.set_response_body(0, body_size, &out) {
                        log::warn!("semroute: cannot write the restored event stream: {e}");
                    }
                }
                if gave_up {
                    self.skip(host, "event larger than pii.max_restore_bytes");
                }
                Action::Continue
            }
        }
    }
}
