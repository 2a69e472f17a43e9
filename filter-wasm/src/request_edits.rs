//! Per-decision request edits: the reasoning effort and a system prompt, spliced into
//! the body as raw byte edits (never re-serialised).
//!
//! | edit | Chat Completions | Responses |
//! |---|---|---|
//! | reasoning effort | top-level `reasoning_effort` | `reasoning.effort` |
//! | system prompt | a `system` message before the first message | `instructions` |
//!
//! With [`ClientValues::Keep`] (the default) a value the client set is left as it is and
//! the decision's is not added (for the system prompt: a first message whose role is
//! `system` or `developer`); with [`ClientValues::Replace`] the decision's value replaces
//! the client's (the first message's `content`). Where the client set nothing, the
//! decision's value is added. Legacy completions bodies have neither field and are not
//! edited.
//!
//! [`locate`] reads the few places these edits touch from the whole body, which the
//! incremental scanner has already validated; every step returns `None` instead of
//! guessing when the body does not have the expected shape.

use std::ops::Range;

use serde::Deserialize;

use crate::json_strings::{decode, push_escaped};
use crate::request::Api;

/// Whether a value the client set is kept or replaced by the decision's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientValues {
    /// The client's value wins; the decision's is added only where the client set none.
    #[default]
    Keep,
    /// The decision's value replaces the client's.
    Replace,
}

/// Edits a decision makes to the requests it routes (from the decision's
/// `reasoning_effort`, `system_prompt` and `client_values`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RequestEdits {
    /// Reasoning effort (`minimal`, `low`, `medium`, `high`...).
    pub reasoning_effort: Option<String>,
    /// System prompt text.
    pub system_prompt: Option<String>,
    /// Keep or replace values the client set.
    pub client_values: ClientValues,
}

impl RequestEdits {
    /// True when the decision edits nothing.
    pub fn is_empty(&self) -> bool {
        self.reasoning_effort.is_none() && self.system_prompt.is_none()
    }
}

/// The index of the first byte at or after `i` that is not JSON whitespace.
fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r')) {
        i += 1;
    }
    i
}

/// The end (exclusive) of the string whose opening quote is at `i`.
fn skip_string(b: &[u8], i: usize) -> Option<usize> {
    let mut j = i + 1;
    loop {
        match b.get(j)? {
            b'\\' => j += 2,
            b'"' => return Some(j + 1),
            _ => j += 1,
        }
    }
}

/// The end (exclusive) of the JSON value starting at `i`.
fn skip_value(b: &[u8], i: usize) -> Option<usize> {
    match b.get(i)? {
        b'"' => skip_string(b, i),
        b'{' | b'[' => {
            let mut depth = 0usize;
            let mut j = i;
            loop {
                match b.get(j)? {
                    b'"' => {
                        j = skip_string(b, j)?;
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth -= 1;
                        if depth == 0 {
                            return Some(j + 1);
                        }
                    }
                    _ => {}
                }
                j += 1;
            }
        }
        _ => {
            let mut j = i;
            while !matches!(
                b.get(j),
                None | Some(b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            ) {
                j += 1;
            }
            (j > i).then_some(j)
        }
    }
}

/// One member of an object: its decoded key and the raw range of its value.
struct Member {
    key: String,
    value: Range<usize>,
}

/// The members of the object whose `{` is at `open`.
fn members(b: &[u8], open: usize) -> Option<Vec<Member>> {
    if b.get(open) != Some(&b'{') {
        return None;
    }
    let mut out = Vec::new();
    let mut i = skip_ws(b, open + 1);
    if b.get(i) == Some(&b'}') {
        return Some(out);
    }
    loop {
        let key_end = skip_string(b, i)?;
        let key = decode(b.get(i + 1..key_end - 1)?)?.text;
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let start = skip_ws(b, i + 1);
        let end = skip_value(b, start)?;
        out.push(Member {
            key,
            value: start..end,
        });
        i = skip_ws(b, end);
        match b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b'}' => return Some(out),
            _ => return None,
        }
    }
}

fn member<'a>(ms: &'a [Member], key: &str) -> Option<&'a Member> {
    ms.iter().find(|m| m.key == key)
}

/// A JSON string literal, quotes included.
fn string_literal(s: &str) -> Vec<u8> {
    let mut out = vec![b'"'];
    push_escaped(&mut out, s);
    out.push(b'"');
    out
}

/// Where `bytes` go: inserted at an offset, or in place of a range.
fn insert_at(at: usize, bytes: Vec<u8>) -> (Range<usize>, Vec<u8>) {
    (at..at, bytes)
}

/// The raw edits that apply `edits` to `body` (a complete, valid JSON object) of `api`,
/// sorted and disjoint. `None` when the body does not have the shape the API gives it.
pub fn locate(body: &[u8], api: Api, edits: &RequestEdits) -> Option<Vec<(Range<usize>, Vec<u8>)>> {
    let mut out = Vec::new();
    if api == Api::Completions || edits.is_empty() {
        return Some(out);
    }
    let open = skip_ws(body, 0);
    let top = members(body, open)?;
    let replace = edits.client_values == ClientValues::Replace;
    // Top-level members are inserted right after the `{`, which has a member after it
    // (the conversation), so each insertion ends with a comma.
    let mut head = Vec::new();
    if let Some(effort) = &edits.reasoning_effort {
        let value = string_literal(effort);
        match api {
            Api::ChatCompletions => match member(&top, "reasoning_effort") {
                Some(m) if replace => out.push((m.value.clone(), value)),
                Some(_) => {}
                None => {
                    head.extend_from_slice(b"\"reasoning_effort\":");
                    head.extend_from_slice(&value);
                    head.push(b',');
                }
            },
            _ => match member(&top, "reasoning") {
                Some(r) if body.get(r.value.start) == Some(&b'{') => {
                    let inner = members(body, r.value.start)?;
                    match member(&inner, "effort") {
                        Some(m) if replace => out.push((m.value.clone(), value)),
                        Some(_) => {}
                        None => {
                            let mut b = b"\"effort\":".to_vec();
                            b.extend_from_slice(&value);
                            if !inner.is_empty() {
                                b.push(b',');
                            }
                            out.push(insert_at(r.value.start + 1, b));
                        }
                    }
                }
                Some(r) if replace => {
                    let mut b = b"{\"effort\":".to_vec();
                    b.extend_from_slice(&value);
                    b.push(b'}');
                    out.push((r.value.clone(), b));
                }
                Some(_) => {}
                None => {
                    head.extend_from_slice(b"\"reasoning\":{\"effort\":");
                    head.extend_from_slice(&value);
                    head.extend_from_slice(b"},");
                }
            },
        }
    }
    if let Some(prompt) = &edits.system_prompt {
        let value = string_literal(prompt);
        match api {
            Api::ChatCompletions => {
                let messages = member(&top, "messages")?;
                let open = messages.value.start;
                if body.get(open) != Some(&b'[') {
                    return None;
                }
                let first = skip_ws(body, open + 1);
                let client_system = if body.get(first) == Some(&b'{') {
                    let ms = members(body, first)?;
                    let role = member(&ms, "role")
                        .and_then(|m| body.get(m.value.start + 1..m.value.end.checked_sub(1)?))
                        .and_then(decode)
                        .map(|d| d.text);
                    matches!(role.as_deref(), Some("system" | "developer"))
                        .then(|| member(&ms, "content").map(|m| m.value.clone()))
                        .flatten()
                } else {
                    None
                };
                match client_system {
                    Some(content) if replace => out.push((content, value)),
                    Some(_) => {}
                    None => {
                        let mut b = b"{\"role\":\"system\",\"content\":".to_vec();
                        b.extend_from_slice(&value);
                        b.push(b'}');
                        if body.get(first) != Some(&b']') {
                            b.push(b',');
                        }
                        out.push(insert_at(open + 1, b));
                    }
                }
            }
            _ => match member(&top, "instructions") {
                Some(m) if replace => out.push((m.value.clone(), value)),
                Some(m) if body.get(m.value.start) == Some(&b'n') => {
                    // `"instructions": null` is no value.
                    out.push((m.value.clone(), value));
                }
                Some(_) => {}
                None => {
                    head.extend_from_slice(b"\"instructions\":");
                    head.extend_from_slice(&value);
                    head.push(b',');
                }
            },
        }
    }
    if !head.is_empty() {
        if top.is_empty() {
            return None;
        }
        out.push(insert_at(open + 1, head));
    }
    out.sort_by_key(|(r, _)| (r.start, r.end));
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json_strings::splice;
    use serde_json::{json, Value};

    fn edit(body: &Value, api: Api, edits: &RequestEdits) -> Value {
        let raw = body.to_string();
        let e = locate(raw.as_bytes(), api, edits).unwrap();
        let out = splice(raw.as_bytes(), &e).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    fn edits(effort: &str, prompt: &str, client_values: ClientValues) -> RequestEdits {
        RequestEdits {
            reasoning_effort: Some(effort.into()),
            system_prompt: Some(prompt.into()),
            client_values,
        }
    }

    #[test]
    fn chat_fields_are_added_where_the_client_set_none() {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}]});
        let e = edits("high", "Be \"exact\".\n", ClientValues::Keep);
        let out = edit(&body, Api::ChatCompletions, &e);
        assert_eq!(out["reasoning_effort"], "high");
        assert_eq!(
            out["messages"][0],
            json!({"role": "system", "content": "Be \"exact\".\n"})
        );
        assert_eq!(out["messages"][1], body["messages"][0]);
        let empty = json!({"messages": []});
        let out = edit(&empty, Api::ChatCompletions, &e);
        assert_eq!(out["messages"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn chat_client_values_are_kept_or_replaced() {
        let body = json!({"model": "m", "reasoning_effort": "low",
            "messages": [{"role": "developer", "content": [{"type": "text", "text": "mine"}]}, {"role": "user", "content": "hi"}]});
        let keep = edit(
            &body,
            Api::ChatCompletions,
            &edits("high", "ours", ClientValues::Keep),
        );
        assert_eq!(keep, body);
        let replaced = edit(
            &body,
            Api::ChatCompletions,
            &edits("high", "ours", ClientValues::Replace),
        );
        assert_eq!(replaced["reasoning_effort"], "high");
        assert_eq!(
            replaced["messages"][0],
            json!({"role": "developer", "content": "ours"})
        );
        assert_eq!(replaced["messages"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn responses_fields() {
        let body = json!({"model": "m", "input": "hi"});
        let out = edit(
            &body,
            Api::Responses,
            &edits("medium", "ours", ClientValues::Keep),
        );
        assert_eq!(out["reasoning"], json!({"effort": "medium"}));
        assert_eq!(out["instructions"], "ours");
        let body = json!({"model": "m", "input": "hi", "reasoning": {"summary": "auto"}, "instructions": "mine"});
        let out = edit(
            &body,
            Api::Responses,
            &edits("medium", "ours", ClientValues::Keep),
        );
        assert_eq!(
            out["reasoning"],
            json!({"effort": "medium", "summary": "auto"})
        );
        assert_eq!(out["instructions"], "mine");
        let body = json!({"input": "hi", "reasoning": {"effort": "low"}, "instructions": null});
        let out = edit(
            &body,
            Api::Responses,
            &edits("high", "ours", ClientValues::Keep),
        );
        assert_eq!(out["reasoning"]["effort"], "low");
        assert_eq!(out["instructions"], "ours");
        let out = edit(
            &body,
            Api::Responses,
            &edits("high", "ours", ClientValues::Replace),
        );
        assert_eq!(out["reasoning"]["effort"], "high");
        let body = json!({"input": "hi", "reasoning": {}});
        let out = edit(
            &body,
            Api::Responses,
            &edits("high", "ours", ClientValues::Keep),
        );
        assert_eq!(out["reasoning"], json!({"effort": "high"}));
    }

    #[test]
    fn legacy_completions_and_odd_shapes() {
        let e = edits("high", "ours", ClientValues::Keep);
        assert_eq!(
            locate(br#"{"prompt":"x"}"#, Api::Completions, &e),
            Some(vec![])
        );
        assert_eq!(
            locate(br#"{"messages":{}}"#, Api::ChatCompletions, &e),
            None
        );
        assert_eq!(locate(br#"{"messages":[1"#, Api::ChatCompletions, &e), None);
        assert_eq!(locate(b"[]", Api::ChatCompletions, &e), None);
    }
}
