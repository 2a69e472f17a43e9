//! The buffered design's extraction: the whole body parsed with `serde_json`, then the
//! texts read from the value. It is not on the request path; it is the baseline the
//! streaming filter is measured against, natively by `filter-bench` and inside Envoy by
//! the `module` of this crate, so that both measure the same work.

use serde_json::Value;

/// The `messages` of a chat body whose `role` is `user`, in order.
fn user_messages(body: &Value) -> impl Iterator<Item = &Value> {
    body.get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|m| m.get("role").and_then(Value::as_str) == Some("user"))
}

/// The last user message's text: its string content, or its text parts joined by blank
/// lines; empty when there is none.
pub fn last_user_text(body: &Value) -> String {
    let Some(m) = user_messages(body).last() else {
        return String::new();
    };
    match m.get("content") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n\n"),
        _ => String::new(),
    }
}

/// The earlier user turns' string contents joined by blank lines, at most `limit` bytes
/// (whole turns: the first that would pass the limit ends the text).
pub fn earlier_user_text(body: &Value, limit: usize) -> String {
    let users: Vec<&Value> = user_messages(body).collect();
    let mut out = String::new();
    for m in users.iter().take(users.len().saturating_sub(1)) {
        let Some(s) = m.get("content").and_then(Value::as_str) else {
            continue;
        };
        if out.len() + s.len() + 2 > limit {
            break;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        out.push_str(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn texts_of_user_turns() {
        let body = json!({"messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "first"},
            {"role": "assistant", "content": "reply"},
            {"role": "user", "content": "second"},
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, {"type": "text", "text": "b"}]},
        ]});
        assert_eq!(last_user_text(&body), "a\n\nb");
        assert_eq!(earlier_user_text(&body, 1000), "first\n\nsecond");
        assert_eq!(earlier_user_text(&body, 8), "first");
        assert_eq!(last_user_text(&json!({"messages": 3})), "");
        assert_eq!(earlier_user_text(&json!({}), 10), "");
    }
}
