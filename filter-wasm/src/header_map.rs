//! The proxy-wasm serialisation of a header map: a little-endian `u32` count, then a key
//! length and a value length (`u32` each) per pair, then each key and each value followed by
//! a NUL byte (proxy-wasm ABI 0.2.1, `proxy_get_header_map_pairs`).
//!
//! Pure functions over bytes, so that they are tested natively; the wasm shim calls them.

/// Serialises `headers` (for `proxy_send_local_response` and friends).
pub fn serialize(headers: &[(&str, &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(&(headers.len() as u32).to_le_bytes());
    for (k, v) in headers {
        out.extend_from_slice(&(k.len() as u32).to_le_bytes());
        out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    }
    for (k, v) in headers {
        out.extend_from_slice(k.as_bytes());
        out.push(0);
        out.extend_from_slice(v.as_bytes());
        out.push(0);
    }
    out
}

/// The header names of serialised map `map`, in order. Values are skipped unread, so a value
/// that is not UTF-8 (HTTP/1.1 `obs-text`, RFC 9110 section 5.5, which any client can send)
/// costs nothing; names are decoded lossily (the proxy admits only token characters in
/// them). A truncated or inconsistent map yields the names read before the fault; never
/// panics.
pub fn names(map: &[u8]) -> Vec<String> {
    let u32_at = |at: usize| -> Option<usize> {
        let b = map.get(at..at.checked_add(4)?)?;
        Some(u32::from_le_bytes(b.try_into().ok()?) as usize)
    };
    let mut names = Vec::new();
    let Some(count) = u32_at(0) else {
        return names;
    };
    let Some(mut p) = count.checked_mul(8).and_then(|n| n.checked_add(4)) else {
        return names;
    };
    for n in 0..count {
        let s = 4 + n * 8;
        let (Some(klen), Some(vlen)) = (u32_at(s), u32_at(s + 4)) else {
            break;
        };
        let Some(key) = p.checked_add(klen).and_then(|end| map.get(p..end)) else {
            break;
        };
        names.push(String::from_utf8_lossy(key).into_owned());
        match p
            .checked_add(klen)
            .and_then(|q| q.checked_add(vlen))
            .and_then(|q| q.checked_add(2))
        {
            Some(next) => p = next,
            None => break,
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        let map = serialize(&[
            (":method", "POST"),
            ("x-semroute-model", "a"),
            ("empty", ""),
        ]);
        assert_eq!(names(&map), vec![":method", "x-semroute-model", "empty"]);
        assert!(names(&serialize(&[])).is_empty());
    }

    #[test]
    fn values_that_are_not_utf8_are_skipped() {
        // One pair, "x-note": [0xff, 0xfe], built by hand (serialize takes &str).
        let mut map = Vec::new();
        map.extend_from_slice(&1u32.to_le_bytes());
        map.extend_from_slice(&6u32.to_le_bytes());
        map.extend_from_slice(&2u32.to_le_bytes());
        map.extend_from_slice(b"x-note\0\xff\xfe\0");
        assert_eq!(names(&map), vec!["x-note"]);
    }

    #[test]
    fn malformed_maps_never_panic() {
        let good = serialize(&[("a", "1"), ("bb", "22")]);
        for cut in 0..good.len() {
            let got = names(good.get(..cut).unwrap_or_default());
            assert!(got.len() <= 2);
        }
        let mut huge = Vec::new();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(names(&huge).is_empty());
        assert!(names(&[]).is_empty());
        assert!(names(&[1, 0]).is_empty());
    }
}
