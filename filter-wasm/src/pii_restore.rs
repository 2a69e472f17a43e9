//! PII restore in upstream answers: placeholders issued by the mask
//! ([`crate::pii_mask`]) turned back into the client's values.
//!
//! - [`Restorer::restore_json`]: a whole JSON answer (content, tool call arguments,
//!   Responses output text): every string value is decoded, its issued placeholders
//!   replaced, and re-encoded only where something changed.
//! - [`SseRestore`]: a server-sent event stream, fed body chunk by body chunk. Events are
//!   cut at their blank line; an event's single `data:` line is read as JSON and its
//!   string values restored. A placeholder split across events (`<EMAIL_` then
//!   `ADDRESS_1>`) is joined: when a text delta (`content`, `arguments`, `delta`,
//!   `text`, `refusal`, `reasoning_content`, `reasoning`) ends with a proper prefix of an
//!   issued placeholder, that event is held, and the events after it wait behind it (in
//!   order) until the next delta of the same field, in the same choice, tool call or
//!   output part: the prefix moves into that delta (the held event is sent without it).
//!   Events between the two (keep-alive comments, empty deltas, other choices' deltas)
//!   do not end the wait; [`MAX_QUEUED_EVENTS`] events do, and the end of the stream: the
//!   held event is then sent unchanged. Nothing else is held back, so the stream's timing
//!   is kept.
//!
//! A placeholder that was never issued is left as it is; text that is not JSON, events
//! without a single `data:` line, and `[DONE]` pass through byte for byte.

use std::collections::VecDeque;
use std::ops::Range;

use crate::json_strings::{decode_text, push_escaped, splice, string_values};

/// True when `raw` (JSON text) may hold a placeholder: it has a `<`, or an escape that
/// could be one (`\u003c`).
fn may_hold_placeholder(raw: &[u8]) -> bool {
    raw.iter().any(|b| *b == b'<' || *b == b'\\')
}

/// Fields of streamed events that carry text deltas.
const DELTA_FIELDS: [&str; 7] = [
    "content",
    "arguments",
    "delta",
    "text",
    "refusal",
    "reasoning_content",
    "reasoning",
];

/// Issued placeholders and their values.
#[derive(Debug, Clone, Default)]
pub struct Restorer {
    pairs: Vec<(String, String)>,
    longest: usize,
}

impl Restorer {
    /// A restorer for `(placeholder, value)` pairs; placeholders are `<...>` ASCII.
    pub fn new(pairs: Vec<(String, String)>) -> Self {
        let longest = pairs.iter().map(|(p, _)| p.len()).max().unwrap_or(0);
        Restorer { pairs, longest }
    }

    /// True when no placeholder was issued.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// `text` with every issued placeholder replaced by its value, and how many were.
    pub fn restore_text(&self, text: &str) -> (String, usize) {
        let mut out = String::with_capacity(text.len());
        let mut count = 0;
        let mut rest = text;
        while let Some(lt) = rest.find('<') {
            let (head, tail) = rest.split_at(lt);
            out.push_str(head);
            let hit = self
                .pairs
                .iter()
                .find(|(p, _)| tail.starts_with(p.as_str()));
            match hit {
                Some((p, v)) => {
                    out.push_str(v);
                    rest = tail.get(p.len()..).unwrap_or("");
                    count += 1;
                }
                None => {
                    out.push('<');
                    rest = tail.get(1..).unwrap_or("");
                }
            }
        }
        out.push_str(rest);
        (out, count)
    }

    /// Length (bytes) of the longest suffix of `text` that is a proper prefix of an
    /// issued placeholder (0 when none): text that may finish a placeholder in the next
    /// delta.
    pub fn partial_suffix(&self, text: &str) -> usize {
        let from = text.len().saturating_sub(self.longest);
        let Some(window) = (from..text.len()).find_map(|i| text.get(i..)) else {
            return 0;
        };
        let Some(lt) = window.rfind('<') else {
            return 0;
        };
        let tail = window.get(lt..).unwrap_or("");
        if self
            .pairs
            .iter()
            .any(|(p, _)| p.len() > tail.len() && p.starts_with(tail))
        {
            tail.len()
        } else {
            0
        }
    }

    /// `text` (a JSON text) with issued placeholders restored in its string values.
    /// `None` when nothing was restored or the text's strings cannot be read.
    pub fn restore_json(&self, text: &[u8]) -> Option<Vec<u8>> {
        let mut edits = Vec::new();
        for v in string_values(text)? {
            let Some(raw) = text.get(v.value.clone()) else {
                continue;
            };
            if !may_hold_placeholder(raw) {
                continue;
            }
            let Some(decoded) = decode_text(raw) else {
                continue;
            };
            let (restored, n) = self.restore_text(&decoded);
            if n > 0 {
                let mut raw = Vec::with_capacity(restored.len() + 8);
                push_escaped(&mut raw, &restored);
                edits.push((v.value, raw));
            }
        }
        if edits.is_empty() {
            return None;
        }
        splice(text, &edits)
    }
}

/// The `data:` payload of one event: its raw range in the event.
fn data_payload(event: &[u8]) -> Option<Range<usize>> {
    let mut found = None;
    let mut at = 0;
    for line in event.split_inclusive(|b| *b == b'\n') {
        let start = at;
        at += line.len();
        let content_end = start + line.len()
            - line
                .iter()
                .rev()
                .take_while(|b| **b == b'\n' || **b == b'\r')
                .count();
        if let Some(rest) = line.strip_prefix(b"data:") {
            if found.is_some() {
                return None;
            }
            let skip = 5 + usize::from(rest.first() == Some(&b' '));
            found = Some((start + skip).min(content_end)..content_end);
        }
    }
    found
}

/// Which stream of deltas an event belongs to: the chat chunk's choice and tool call
/// (`choices[0].index`, `choices[0].delta.tool_calls[0].index`), or the Responses event's
/// output item, content part and summary part (`output_index`, `content_index`,
/// `summary_index`); `u64::MAX` where absent. Deltas of different choices or tool calls
/// interleave in one stream (`n` > 1, parallel tool calls), and a placeholder split across
/// events must be joined within its own.
type StreamKey = [u64; 5];

/// The [`StreamKey`] of the event whose `data:` payload is `payload`.
fn stream_key(payload: &[u8]) -> StreamKey {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(payload) else {
        return [u64::MAX; 5];
    };
    [
        "/choices/0/index",
        "/choices/0/delta/tool_calls/0/index",
        "/output_index",
        "/content_index",
        "/summary_index",
    ]
    .map(|at| {
        v.pointer(at)
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(u64::MAX)
    })
}

/// A delta field's identity: the stream of deltas it belongs to, its key, and which
/// occurrence of that key in its event.
type FieldId = (StreamKey, Vec<u8>, usize);

/// Events queued behind a held one, at most: past it the oldest held event is sent with
/// its partial placeholder as it is.
pub const MAX_QUEUED_EVENTS: usize = 16;

/// An event held because a delta ends with the start of a placeholder.
#[derive(Debug)]
struct Held {
    event: Vec<u8>,
    /// Edits of the event's other strings.
    edits: Vec<(Range<usize>, Vec<u8>)>,
    field: FieldId,
    /// Raw range of the held string's contents in `event`.
    range: Range<usize>,
    /// The held string restored up to its partial placeholder.
    head: String,
    /// The partial placeholder.
    tail: String,
}

impl Held {
    /// The event's bytes, with its partial placeholder (`with_tail`) or without it (the
    /// next delta of its field took it).
    fn emit(self, with_tail: bool) -> Vec<u8> {
        let mut text = self.head;
        if with_tail {
            text.push_str(&self.tail);
        }
        let mut raw = Vec::new();
        push_escaped(&mut raw, &text);
        let mut edits = self.edits;
        edits.push((self.range, raw));
        edits.sort_by_key(|(r, _)| r.start);
        splice(&self.event, &edits).unwrap_or(self.event)
    }
}

/// An event on its way out, in stream order.
#[derive(Debug)]
enum Queued {
    /// To send as it is.
    Ready(Vec<u8>),
    /// Waiting for the next delta of its field.
    Held(Held),
}

/// Restore over a server-sent event stream (see the module documentation).
#[derive(Debug)]
pub struct SseRestore {
    restorer: Restorer,
    /// Bytes of an event not yet complete.
    pending: Vec<u8>,
    /// Events not yet sent: a held one first, then those that came after it.
    queue: VecDeque<Queued>,
    /// Largest incomplete event buffered, bytes; past it the stream passes through.
    limit: usize,
    gave_up: bool,
}

/// End of the first event in `buf` (after its blank line: `\n\n` or `\r\n\r\n`), found
/// in one pass.
fn event_end(buf: &[u8]) -> Option<usize> {
    let mut from = 0;
    while let Some(p) = buf.get(from..)?.iter().position(|b| *b == b'\n') {
        let lf = from + p;
        match buf.get(lf + 1) {
            Some(b'\n') => return Some(lf + 2),
            Some(b'\r')
                if buf.get(lf + 2) == Some(&b'\n') && lf > 0 && buf.get(lf - 1) == Some(&b'\r') =>
            {
                return Some(lf + 3)
            }
            _ => from = lf + 1,
        }
    }
    None
}

impl SseRestore {
    /// A stream restorer that buffers at most `limit` bytes of one incomplete event.
    pub fn new(restorer: Restorer, limit: usize) -> Self {
        SseRestore {
            restorer,
            pending: Vec::new(),
            queue: VecDeque::new(),
            limit,
            gave_up: false,
        }
    }

    /// True once an event outgrew the limit: the rest of the stream passed through.
    pub fn gave_up(&self) -> bool {
        self.gave_up
    }

    /// Feeds one body chunk; returns the bytes to send in its place. With
    /// `end_of_stream`, everything still held or buffered is sent too.
    pub fn feed(&mut self, chunk: &[u8], end_of_stream: bool) -> Vec<u8> {
        let mut out = Vec::with_capacity(chunk.len() + 64);
        if self.gave_up {
            out.extend_from_slice(chunk);
            return out;
        }
        self.pending.extend_from_slice(chunk);
        let pending = std::mem::take(&mut self.pending);
        let mut at = 0;
        while let Some(end) = pending.get(at..).and_then(event_end) {
            let event = pending.get(at..at + end).unwrap_or_default();
            self.event(event, &mut out);
            at += end;
        }
        self.pending = pending;
        self.pending.drain(..at);
        if self.pending.len() > self.limit {
            self.gave_up = true;
            self.release_all(&mut out);
            out.append(&mut self.pending);
        }
        if end_of_stream {
            let rest = std::mem::take(&mut self.pending);
            if !rest.is_empty() {
                self.event(&rest, &mut out);
            }
            self.release_all(&mut out);
        }
        out
    }

    /// Sends every queued event, the held ones with their partial placeholders.
    fn release_all(&mut self, out: &mut Vec<u8>) {
        for q in self.queue.drain(..) {
            match q {
                Queued::Ready(bytes) => out.extend_from_slice(&bytes),
                Queued::Held(h) => out.extend_from_slice(&h.emit(true)),
            }
        }
    }

    /// Sends the queued events up to the first one still held; past
    /// [`MAX_QUEUED_EVENTS`], the oldest held event goes with its partial placeholder.
    fn flush(&mut self, out: &mut Vec<u8>) {
        loop {
            match self.queue.pop_front() {
                Some(Queued::Ready(bytes)) => out.extend_from_slice(&bytes),
                Some(Queued::Held(h)) if self.queue.len() >= MAX_QUEUED_EVENTS => {
                    out.extend_from_slice(&h.emit(true));
                }
                Some(held) => {
                    self.queue.push_front(held);
                    return;
                }
                None => return,
            }
        }
    }

    /// Takes the partial placeholder of the event held for `field`, which is then ready
    /// to send without it; `None` when no event is held for it.
    fn take_held(&mut self, field: &FieldId) -> Option<String> {
        let slot = self
            .queue
            .iter_mut()
            .find(|q| matches!(q, Queued::Held(h) if &h.field == field))?;
        let Queued::Held(h) = std::mem::replace(slot, Queued::Ready(Vec::new())) else {
            return None;
        };
        let tail = h.tail.clone();
        *slot = Queued::Ready(h.emit(false));
        Some(tail)
    }

    fn event(&mut self, event: &[u8], out: &mut Vec<u8>) {
        if self.queue.is_empty() && !may_hold_placeholder(event) {
            out.extend_from_slice(event);
            return;
        }
        let strings = data_payload(event).and_then(|p| {
            let payload = event.get(p.clone())?;
            let values = string_values(payload)?;
            Some((p, values))
        });
        let Some((payload, values)) = strings else {
            self.queue.push_back(Queued::Ready(event.to_vec()));
            self.flush(out);
            return;
        };
        let base = payload.start;
        // Parsed only where a delta meets a held event or is held itself: most events
        // that reach this point hold an escape, not a placeholder.
        let payload = event.get(payload).unwrap_or_default();
        let mut stream: Option<StreamKey> = None;
        let mut stream_of = || *stream.get_or_insert_with(|| stream_key(payload));
        let mut edits = Vec::new();
        let mut counts: Vec<(Vec<u8>, usize)> = Vec::new();
        let mut hold: Option<(FieldId, Range<usize>, String, String)> = None;
        for v in values {
            let range = base + v.value.start..base + v.value.end;
            let Some(decoded) = event.get(range.clone()).and_then(decode_text) else {
                continue;
            };
            let key = v
                .key
                .and_then(|k| event.get(base + k.start..base + k.end))
                .unwrap_or_default()
                .to_vec();
            let delta = DELTA_FIELDS.iter().any(|f| f.as_bytes() == key.as_slice());
            let ordinal = match counts.iter_mut().find(|(k, _)| *k == key) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    counts.push((key.clone(), 0));
                    0
                }
            };
            let mut text = decoded;
            let mut changed = false;
            let waiting = self.queue.iter().any(|q| matches!(q, Queued::Held(_)));
            if delta && waiting {
                if let Some(tail) = self.take_held(&(stream_of(), key.clone(), ordinal)) {
                    text.insert_str(0, &tail);
                    changed = true;
                }
            }
            let partial = if delta && hold.is_none() {
                self.restorer.partial_suffix(&text)
            } else {
                0
            };
            let split = text.len() - partial;
            let (head, tail) = text.split_at(split);
            let (restored, n) = self.restorer.restore_text(head);
            if partial > 0 {
                hold = Some((
                    (stream_of(), key, ordinal),
                    range,
                    restored,
                    tail.to_string(),
                ));
                continue;
            }
            if n > 0 || changed {
                let mut raw = Vec::new();
                push_escaped(&mut raw, &restored);
                edits.push((range, raw));
            }
        }
        self.queue.push_back(match hold {
            Some((field, range, head, tail)) => Queued::Held(Held {
                event: event.to_vec(),
                edits,
                field,
                range,
                head,
                tail,
            }),
            None => Queued::Ready(splice(event, &edits).unwrap_or_else(|| event.to_vec())),
        });
        self.flush(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn restorer() -> Restorer {
        Restorer::new(vec![
            ("<EMAIL_ADDRESS_1>".into(), "jo\"e@x.io".into()),
            ("<US_SSN_1>".into(), "123-45-6789".into()),
        ])
    }

    #[test]
    fn restores_issued_placeholders_only() {
        let r = restorer();
        let (t, n) = r.restore_text("to <EMAIL_ADDRESS_1> <EMAIL_ADDRESS_2> <<US_SSN_1>");
        assert_eq!(t, "to jo\"e@x.io <EMAIL_ADDRESS_2> <123-45-6789");
        assert_eq!(n, 2);
        assert_eq!(r.partial_suffix("hi <EMAIL_AD"), 9);
        assert_eq!(r.partial_suffix("hi <EMAIL_ADDRESS_1>"), 0);
        assert_eq!(r.partial_suffix("hi <b"), 0);
        assert_eq!(r.partial_suffix("a <"), 1);
    }

    #[test]
    fn json_answers_are_restored_as_json() {
        let body = br#"{"choices":[{"message":{"content":"Mail <EMAIL_ADDRESS_1>","tool_calls":[{"function":{"arguments":"{\"to\":\"<EMAIL_ADDRESS_1>\"}"}}]}}]}"#;
        let out = restorer().restore_json(body).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["choices"][0]["message"]["content"], "Mail jo\"e@x.io");
        assert_eq!(
            v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
            "{\"to\":\"jo\"e@x.io\"}"
        );
        assert_eq!(restorer().restore_json(b"{\"a\":\"none\"}"), None);
        assert_eq!(restorer().restore_json(b"not json <US_SSN_1>"), None);
    }

    fn chat_event(content: &str) -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"choices":[{"index":0,"delta":{"content":content}}]})
        )
    }

    fn contents(stream: &[u8]) -> String {
        let s = String::from_utf8(stream.to_vec()).unwrap();
        let mut text = String::new();
        for event in s.split("\n\n") {
            let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
                continue;
            };
            if let Some(c) = v["choices"][0]["delta"]["content"].as_str() {
                text.push_str(c);
            }
            if let Some(c) = v["delta"].as_str() {
                text.push_str(c);
            }
        }
        text
    }

    #[test]
    fn a_placeholder_split_across_events_is_joined() {
        let mut s = SseRestore::new(restorer(), 1 << 20);
        let mut out = Vec::new();
        out.extend(s.feed(chat_event("Hi <EMAIL_").as_bytes(), false));
        assert!(out.is_empty(), "the partial placeholder is held");
        out.extend(s.feed(chat_event("ADDRE").as_bytes(), false));
        out.extend(s.feed(chat_event("SS_1> bye <U").as_bytes(), false));
        out.extend(s.feed(
            b"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n",
            true,
        ));
        assert_eq!(contents(&out), "Hi jo\"e@x.io bye <U");
        let text = String::from_utf8(out).unwrap();
        assert_eq!(text.matches("data: ").count(), 5);
        assert!(text.ends_with("data: [DONE]\n\n"));
    }

    /// The text of choice `index`'s `field` deltas in `stream`.
    fn choice_text(stream: &[u8], index: u64, field: &str) -> String {
        let s = String::from_utf8(stream.to_vec()).unwrap();
        s.split("\n\n")
            .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
            .filter_map(|d| serde_json::from_str::<serde_json::Value>(d).ok())
            .filter(|v| v["choices"][0]["index"].as_u64() == Some(index))
            .filter_map(|v| v["choices"][0]["delta"][field].as_str().map(str::to_string))
            .collect()
    }

    fn delta_event(index: u64, field: &str, text: &str) -> String {
        let delta = serde_json::json!({ field: text });
        let e = serde_json::json!({"choices": [{"index": index, "delta": delta}]});
        format!("data: {e}\n\n")
    }

    #[test]
    fn events_between_the_halves_wait_behind_the_held_one() {
        for between in [
            ": ping\n\n".to_string(),
            "data: {\"choices\":[{\"index\":0,\"delta\":{}}]}\n\n".to_string(),
            delta_event(0, "reasoning_content", "thinking"),
            delta_event(1, "content", "other choice"),
        ] {
            let stream = [
                delta_event(0, "content", "Mail <EMAIL"),
                between.clone(),
                delta_event(0, "content", "_ADDRESS_1> now"),
                "data: [DONE]\n\n".to_string(),
            ]
            .concat();
            let mut s = SseRestore::new(restorer(), 1 << 20);
            let out = s.feed(stream.as_bytes(), true);
            assert_eq!(
                choice_text(&out, 0, "content"),
                "Mail jo\"e@x.io now",
                "{between:?}"
            );
            // Nothing reordered: the event between comes out between.
            let text = String::from_utf8(out).unwrap();
            let at = text.find(between.trim_end()).unwrap_or(usize::MAX);
            assert!(
                text.find("Mail").unwrap() < at && at < text.find("now").unwrap(),
                "{text}"
            );
        }
    }

    #[test]
    fn interleaved_choices_are_joined_each_in_its_own() {
        // n = 2: both choices split the same placeholder, their halves interleaved.
        let stream = [
            delta_event(0, "content", "A: <EMAIL"),
            delta_event(1, "content", "B: <US_S"),
            delta_event(0, "content", "_ADDRESS_1>."),
            delta_event(1, "content", "SN_1> done."),
            delta_event(0, "reasoning_content", "so <US_SSN"),
            delta_event(0, "reasoning_content", "_1>"),
        ]
        .concat();
        let mut out = Vec::new();
        let mut s = SseRestore::new(restorer(), 1 << 20);
        for piece in stream.as_bytes().chunks(7) {
            out.extend(s.feed(piece, false));
        }
        out.extend(s.feed(b"", true));
        assert_eq!(choice_text(&out, 0, "content"), "A: jo\"e@x.io.");
        assert_eq!(choice_text(&out, 1, "content"), "B: 123-45-6789 done.");
        assert_eq!(choice_text(&out, 0, "reasoning_content"), "so 123-45-6789");
    }

    #[test]
    fn a_held_event_waits_for_a_bounded_number_of_events() {
        let mut s = SseRestore::new(restorer(), 1 << 20);
        let mut out = s.feed(delta_event(0, "content", "x <EMAIL").as_bytes(), false);
        for _ in 0..MAX_QUEUED_EVENTS - 1 {
            out.extend(s.feed(b": ping\n\n", false));
        }
        assert!(out.is_empty(), "held while fewer events wait");
        out.extend(s.feed(b": ping\n\n", false));
        // Sent unchanged, and the events behind it in order.
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.starts_with(&delta_event(0, "content", "x <EMAIL")),
            "{text}"
        );
        assert_eq!(text.matches(": ping").count(), MAX_QUEUED_EVENTS);
    }

    #[test]
    fn events_end_at_a_blank_line() {
        assert_eq!(event_end(b"data: a\n\ndata: b"), Some(9));
        assert_eq!(event_end(b"data: a\r\n\r\ndata: b"), Some(11));
        assert_eq!(event_end(b"data: a\n\r\n"), None);
        assert_eq!(event_end(b"data: a\r\n"), None);
    }

    #[test]
    fn other_events_pass_byte_for_byte() {
        let stream = b": comment\n\nevent: ping\ndata: {\"a\": 1}\n\ndata: not json <US_SSN_1>\n\n";
        let mut s = SseRestore::new(restorer(), 1 << 20);
        assert_eq!(s.feed(stream, true), stream.to_vec());
    }

    #[test]
    fn an_event_past_the_limit_passes_through() {
        let mut s = SseRestore::new(restorer(), 16);
        let big = chat_event("<US_SSN_1> and a long tail of text");
        let out = s.feed(big.as_bytes().get(..40).unwrap(), false);
        assert!(s.gave_up());
        let mut all = out;
        all.extend(s.feed(big.as_bytes().get(40..).unwrap(), true));
        assert_eq!(all, big.as_bytes());
    }

    proptest! {
        #[test]
        fn any_chunking_and_any_delta_split_restores(
            words in proptest::collection::vec(
                prop_oneof![
                    Just("<EMAIL_ADDRESS_1>".to_string()),
                    Just("<US_SSN_1>".to_string()),
                    Just("<EMAIL_ADDRESS_9>".to_string()),
                    "[a-z <>_é\"\\\\]{0,6}",
                ],
                0..8,
            ),
            delta_len in 1usize..4,
            cuts in proptest::collection::vec(0usize..10_000, 0..6),
            responses in any::<bool>(),
        ) {
            let text: String = words.concat();
            let chars: Vec<char> = text.chars().collect();
            let mut stream = String::new();
            for piece in chars.chunks(delta_len) {
                let piece: String = piece.iter().collect();
                if responses {
                    let e = serde_json::json!({"type":"response.output_text.delta","delta":piece});
                    stream.push_str(&format!("event: response.output_text.delta\ndata: {e}\n\n"));
                } else {
                    stream.push_str(&chat_event(&piece));
                }
            }
            stream.push_str("data: [DONE]\n\n");
            let bytes = stream.as_bytes();
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut s = SseRestore::new(restorer(), 1 << 20);
            let mut out = Vec::new();
            let mut at = 0;
            for c in cuts {
                out.extend(s.feed(&bytes[at..c], false));
                at = c;
            }
            out.extend(s.feed(&bytes[at..], true));
            let (want, _) = restorer().restore_text(&text);
            prop_assert_eq!(contents(&out), want);
        }
    }
}
