//! The request path as an upstream server may read it, for choosing which API a
//! request belongs to.
//!
//! Servers decode percent-escapes, merge repeated slashes, resolve `.` and `..`
//! segments and often ignore a trailing slash or letter case
//! (`/v1/chat/complet%69ons`, `//v1/chat/completions/`, `/V1/./chat/completions`).
//! A request whose path a server reads as one of the APIs the filter classifies
//! must not pass unread because its bytes differ, so paths are compared in this
//! canonical form (RFC 3986 section 6.2.2: case, percent-encoding and path-segment
//! normalization), lowercased.

/// `path` (the `:path` header, query and fragment included or not) in canonical
/// form: query and fragment cut, percent-escapes decoded once (an invalid escape
/// is kept as written; decoded bytes that are not UTF-8 are replaced), repeated
/// slashes merged, `.` and `..` segments resolved, a trailing slash removed, ASCII
/// lowercased. Always starts with `/`.
pub fn canonical(path: &str) -> String {
    let end = path.find(['?', '#']).unwrap_or(path.len());
    let raw = path.get(..end).unwrap_or_default().as_bytes();
    let mut decoded = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        let hex = |k: usize| raw.get(k).and_then(|&h| (h as char).to_digit(16));
        match (b, hex(i + 1), hex(i + 2)) {
            (b'%', Some(hi), Some(lo)) => {
                decoded.push((hi * 16 + lo) as u8);
                i += 3;
            }
            _ => {
                decoded.push(b);
                i += 1;
            }
        }
    }
    let text = String::from_utf8_lossy(&decoded).to_ascii_lowercase();
    let mut segments: Vec<&str> = Vec::new();
    for seg in text.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    let mut out = String::with_capacity(text.len() + 1);
    for seg in &segments {
        out.push('/');
        out.push_str(seg);
    }
    if out.is_empty() {
        out.push('/');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::canonical;

    #[test]
    fn variants_of_one_path_meet() {
        for p in [
            "/v1/chat/completions",
            "/v1/chat/completions?x=1",
            "/v1/chat/completions/",
            "//v1//chat/completions",
            "/v1/./chat/completions",
            "/v1/x/../chat/completions",
            "/V1/Chat/Completions",
            "/v1/chat/complet%69ons",
            "/v1%2Fchat%2fcompletions",
            "/v1/chat/completions#frag",
        ] {
            assert_eq!(canonical(p), "/v1/chat/completions", "{p}");
        }
    }

    #[test]
    fn other_paths_stay_apart() {
        assert_eq!(canonical("/v1/models"), "/v1/models");
        assert_eq!(canonical("/"), "/");
        assert_eq!(canonical(""), "/");
        assert_eq!(canonical("/../.."), "/");
        assert_eq!(canonical("/v1/chat/completions2"), "/v1/chat/completions2");
        // Invalid escapes are kept; bytes that are not UTF-8 do not panic.
        assert_eq!(canonical("/a%zz%4"), "/a%zz%4");
        assert_eq!(canonical("/a%ff%fe"), "/a\u{FFFD}\u{FFFD}");
    }
}
