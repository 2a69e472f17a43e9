//! Scanner tests: fixed cases, and properties over generated JSON split into
//! arbitrary chunks.

mod common;

use common::{rebuild, scan_split, to_ascii_json, Ev};
use proptest::prelude::*;
use serde_json::Value;

fn one_shot(body: &str) -> Result<Vec<Ev>, String> {
    scan_split(body.as_bytes(), &[], 64)
}

fn every_byte(body: &[u8]) -> Result<Vec<Ev>, String> {
    let splits: Vec<usize> = (1..body.len()).collect();
    scan_split(body, &splits, 64)
}

#[test]
fn offsets_cover_whole_values() {
    let body = r#"{"a": "x\"y", "model" : "auto", "n": -1.5e3, "t": true, "z": null}"#;
    let ev = one_shot(body).unwrap();
    let model = ev
        .iter()
        .find_map(|e| match e {
            Ev::Str { start, text, end } if text == "auto" => Some((*start, *end)),
            _ => None,
        })
        .unwrap();
    assert_eq!(&body[model.0 as usize..model.1 as usize], "\"auto\"");
    assert!(ev.contains(&Ev::Str {
        start: 6,
        text: "x\"y".into(),
        end: 12
    }));
    let n = ev
        .iter()
        .find_map(|e| {
            if let Ev::Number(s, e) = e {
                Some((*s, *e))
            } else {
                None
            }
        })
        .unwrap();
    assert_eq!(&body[n.0 as usize..n.1 as usize], "-1.5e3");
}

#[test]
fn escapes_and_surrogate_pairs_decode_across_any_split() {
    let body = r#"{"k\u00e9y": "a\ud83d\ude00b\n\t\/\\\u20ac€😀"}"#;
    let expected = one_shot(body).unwrap();
    assert!(expected.contains(&Ev::Key(Some("kéy".into()))));
    assert!(matches!(&expected[2], Ev::Str { text, .. } if text == "a😀b\n\t/\\€€😀"));
    assert_eq!(every_byte(body.as_bytes()).unwrap(), expected);
}

#[test]
fn rejects_invalid_json() {
    let bad = [
        "",
        "   ",
        "{",
        "{\"a\"}",
        "{\"a\":}",
        "{\"a\":1,}",
        "[1,]",
        "[01]",
        "[1.]",
        "[-]",
        "[1e]",
        "[.5]",
        "[tru]",
        "[truex]",
        "[nul]",
        "{\"a\":1}x",
        "{\"a\":1}{}",
        "\"\\x\"",
        "\"\\u12g4\"",
        "\"\\ud83d\"",
        "\"\\ud83dx\"",
        "\"\\ud83d\\n\"",
        "\"\\ude00\"",
        "\"\\ud83d\\u0041\"",
        "\"a\u{1}b\"",
        "{'a':1}",
        "{\"a\" 1}",
        "[1 2]",
        "{,}",
        "[,1]",
    ];
    for b in bad {
        assert!(one_shot(b).is_err(), "accepted {b:?}");
        assert!(
            every_byte(b.as_bytes()).is_err(),
            "accepted {b:?} byte by byte"
        );
    }
}

#[test]
fn rejects_invalid_utf8() {
    let cases: [&[u8]; 6] = [
        b"\"\xff\"",
        b"\"\xc3\"",
        b"\"\xc3(\"",
        b"\"\xed\xa0\x80\"",     // UTF-8-encoded surrogate
        b"\"\xc0\xaf\"",         // overlong
        b"\"\xf4\x90\x80\x80\"", // above U+10FFFF
    ];
    for b in cases {
        assert!(scan_split(b, &[], 8).is_err(), "accepted {b:?}");
        let splits: Vec<usize> = (1..b.len()).collect();
        assert!(
            scan_split(b, &splits, 8).is_err(),
            "accepted {b:?} byte by byte"
        );
    }
}

#[test]
fn depth_limit() {
    let ok = "[[[[1]]]]";
    assert!(scan_split(ok.as_bytes(), &[], 4).is_ok());
    let err = scan_split(ok.as_bytes(), &[], 3).unwrap_err();
    assert!(err.contains("nesting deeper than 3"), "{err}");
}

#[test]
fn top_level_scalars_and_numbers_at_end() {
    assert_eq!(one_shot("12").unwrap(), vec![Ev::Number(0, 2)]);
    assert_eq!(every_byte(b" -0.5e+7 ").unwrap(), vec![Ev::Number(1, 8)]);
    assert!(one_shot("1 2").is_err());
}

#[test]
fn long_keys_are_reported_as_none() {
    let key = "k".repeat(100);
    let body = format!("{{\"{key}\": 1}}");
    let ev = one_shot(&body).unwrap();
    assert_eq!(ev[1], Ev::Key(None));
}

fn arb_string() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z ]{0,12}",
        any::<String>(),
        Just("😀é\u{7f}\u{0}\u{1f}\"\\/€\u{10ffff}".to_string()),
    ]
}

/// Keys short enough to be reported by name (at most 12 chars of 4 bytes).
fn arb_key() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z_]{0,10}",
        prop::collection::vec(any::<char>(), 0..12).prop_map(|c| c.into_iter().collect())
    ]
}

fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        (-1e12f64..1e12)
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        arb_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(arb_key(), inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn serialise(v: &Value, style: u8) -> String {
    match style % 3 {
        0 => serde_json::to_string(v).unwrap(),
        1 => serde_json::to_string_pretty(v).unwrap(),
        _ => to_ascii_json(v),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any valid JSON, any split: the same events as one pass, and the
    /// events rebuild the value serde_json parses.
    #[test]
    fn chunking_never_changes_events(v in arb_json(), style in 0u8..3, splits in prop::collection::vec(0usize..4096, 0..24)) {
        let body = serialise(&v, style);
        let bytes = body.as_bytes();
        let whole = scan_split(bytes, &[], 64).unwrap();
        let splits: Vec<usize> = splits.into_iter().map(|s| s % (bytes.len() + 1)).collect();
        let chunked = scan_split(bytes, &splits, 64).unwrap();
        prop_assert_eq!(&whole, &chunked);
        let parsed: Value = serde_json::from_slice(bytes).unwrap();
        prop_assert_eq!(rebuild(bytes, &whole), parsed);
    }

    /// One-byte chunks (every split inside every escape and UTF-8 sequence).
    #[test]
    fn one_byte_chunks(v in arb_json(), style in 0u8..3) {
        let body = serialise(&v, style);
        let bytes = body.as_bytes();
        prop_assert_eq!(scan_split(bytes, &[], 64).unwrap(), every_byte(bytes).unwrap());
    }

    /// Corrupted documents: the scanner accepts exactly what serde_json accepts.
    #[test]
    fn agrees_with_serde_json_on_corruption(v in arb_json(), style in 0u8..3, pos in any::<usize>(), byte in any::<u8>(), mode in 0u8..3) {
        let mut bytes = serialise(&v, style).into_bytes();
        let p = pos % (bytes.len() + 1);
        match mode {
            0 => bytes.insert(p, byte),
            1 => { if p < bytes.len() { bytes[p] = byte; } }
            _ => bytes.truncate(p),
        }
        let serde = serde_json::from_slice::<Value>(&bytes);
        let ours = scan_split(&bytes, &[], 1000);
        let ours_split = scan_split(&bytes, &[p, p + 1, p + 2], 1000);
        prop_assert_eq!(ours.is_ok(), ours_split.is_ok());
        match serde {
            Ok(_) => prop_assert!(ours.is_ok(), "serde accepted, scanner rejected: {:?}", ours),
            Err(e) if e.to_string().contains("recursion limit") || e.to_string().contains("out of range") => {}
            Err(e) => prop_assert!(ours.is_err(), "serde rejected ({}), scanner accepted {:?}", e, String::from_utf8_lossy(&bytes)),
        }
    }
}

/// Invalid UTF-8 is reported at the first byte of the bad sequence whether
/// or not a chunk boundary splits it (found by the fuzz target).
#[test]
fn invalid_utf8_offset_does_not_depend_on_chunking() {
    let cases: [&[u8]; 11] = [
        b"{\"co\xe5nt\": 1}",
        b"[\"ab\xc3(\"]",
        b"[\"ab\xe0\x80\x80\"]",
        b"[\"ab\xed\xa0\x80\"]",
        b"[\"ab\xf0\x9f\x98\"]",
        b"[\"ab\xf4\x90\x80\x80\"]",
        b"[\"ab\xe2\x82x\"]",
        // The body ends inside a prefix no ending can make valid: invalid, not truncated.
        b"[\"ab\xed\xa2",
        b"[\"ab\xe0\x80",
        b"[\"ab\xf4\x90",
        b"[\"ab\xf0\x80\x80",
    ];
    for b in cases {
        let whole = scan_split(b, &[], 8).expect_err("invalid UTF-8 accepted");
        assert!(
            whole.contains("at byte 4") || whole.contains("at byte 5"),
            "{whole}"
        );
        for cut in 1..b.len() {
            assert_eq!(
                scan_split(b, &[cut], 8).unwrap_err(),
                whole,
                "split at {cut}"
            );
        }
        let splits: Vec<usize> = (1..b.len()).collect();
        assert_eq!(
            scan_split(b, &splits, 8).unwrap_err(),
            whole,
            "byte by byte"
        );
    }
}
