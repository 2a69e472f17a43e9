//! Decoding BIO token labels into entity spans, and grouping address parts.

use super::{canonical_model_type, Entity, Source};

/// Internal address-part types, grouped into `STREET_ADDRESS` by
/// [`group_addresses`].
pub const BUILDING_NUMBER: &str = "BUILDING_NUMBER";
/// Street name part.
pub const STREET_NAME: &str = "STREET_NAME";
/// Apartment / suite part.
pub const SECONDARY_ADDRESS: &str = "SECONDARY_ADDRESS";

/// One token's best label.
#[derive(Debug, Clone)]
pub struct TokenLabel<'a> {
    /// Byte span of the token in the text.
    pub span: (usize, usize),
    /// Label such as `B-EMAIL`, `I-EMAIL` or `O`.
    pub label: &'a str,
    /// Softmax probability of the label.
    pub score: f32,
}

/// Turns per-token labels into entities. A `B-`/`I-` token of the type of
/// the open entity extends it when it is an `I-` token or touches the
/// previous token (a sub-word piece); any other labelled token opens a new
/// entity; `O` closes. Scores are the mean token probability.
pub fn decode(tokens: &[TokenLabel<'_>], text: &str) -> Vec<Entity> {
    struct Open {
        kind: &'static str,
        start: usize,
        end: usize,
        sum: f32,
        n: u32,
    }
    let mut out = Vec::new();
    let mut open: Option<Open> = None;
    let mut prev_end = usize::MAX;
    let close = |o: Open, out: &mut Vec<Entity>| {
        out.push(Entity {
            kind: o.kind,
            start: o.start,
            end: o.end,
            score: o.sum / o.n.max(1) as f32,
            source: Source::Model,
        })
    };
    for t in tokens {
        let (prefix, base) = match t.label.split_once('-') {
            Some((p, b)) if p == "B" || p == "I" => (p, b),
            _ => ("O", ""),
        };
        let kind = if prefix == "O" {
            None
        } else {
            canonical_model_type(base).map(|k| (k, base))
        };
        match kind {
            None => {
                if let Some(o) = open.take() {
                    close(o, &mut out);
                }
            }
            Some((k, _)) => {
                let touches = t.span.0 == prev_end;
                let gap_is_space = open.as_ref().is_some_and(|o| {
                    text.get(o.end..t.span.0)
                        .is_some_and(|g| g.chars().all(char::is_whitespace) && g.len() <= 2)
                });
                let extend = open
                    .as_ref()
                    .is_some_and(|o| o.kind == k && (touches || (prefix == "I" && gap_is_space)));
                if extend {
                    if let Some(o) = open.as_mut() {
                        o.end = t.span.1;
                        o.sum += t.score;
                        o.n += 1;
                    }
                } else {
                    if let Some(o) = open.take() {
                        close(o, &mut out);
                    }
                    open = Some(Open {
                        kind: k,
                        start: t.span.0,
                        end: t.span.1,
                        sum: t.score,
                        n: 1,
                    });
                }
            }
        }
        prev_end = t.span.1;
    }
    if let Some(o) = open.take() {
        close(o, &mut out);
    }
    merge_adjacent_persons(out, text)
}

/// Joins given name and surname entities separated only by spaces.
fn merge_adjacent_persons(entities: Vec<Entity>, text: &str) -> Vec<Entity> {
    let mut out: Vec<Entity> = Vec::with_capacity(entities.len());
    for e in entities {
        if let Some(last) = out.last_mut() {
            let gap = text.get(last.end..e.start).unwrap_or("x");
            if last.kind == "PERSON"
                && e.kind == "PERSON"
                && gap.len() <= 2
                && gap.chars().all(|c| c == ' ')
            {
                last.score = (last.score + e.score) / 2.0;
                last.end = e.end;
                continue;
            }
        }
        out.push(e);
    }
    out
}

fn is_address_part(kind: &str) -> bool {
    matches!(
        kind,
        BUILDING_NUMBER
            | STREET_NAME
            | SECONDARY_ADDRESS
            | "LOCATION"
            | "ZIP_CODE"
            | "STREET_ADDRESS"
    )
}

fn is_street_part(kind: &str) -> bool {
    matches!(
        kind,
        BUILDING_NUMBER | STREET_NAME | SECONDARY_ADDRESS | "STREET_ADDRESS"
    )
}

/// Groups runs of address parts (building number, street, apartment, city,
/// state, zip) separated by at most 4 bytes of spaces, commas or newlines.
/// A run with a street part becomes one `STREET_ADDRESS`; other parts keep
/// their own type (`LOCATION`, `ZIP_CODE`); lone street parts become
/// `STREET_ADDRESS`.
pub fn group_addresses(entities: Vec<Entity>, text: &str) -> Vec<Entity> {
    let mut out = Vec::with_capacity(entities.len());
    let mut run: Vec<Entity> = Vec::new();
    let flush = |run: &mut Vec<Entity>, out: &mut Vec<Entity>| {
        if run.iter().any(|e| is_street_part(e.kind)) {
            let start = run.iter().map(|e| e.start).min().unwrap_or(0);
            let end = run.iter().map(|e| e.end).max().unwrap_or(0);
            let score = run.iter().map(|e| e.score).sum::<f32>() / run.len().max(1) as f32;
            out.push(Entity {
                kind: "STREET_ADDRESS",
                start,
                end,
                score,
                source: Source::Model,
            });
        } else {
            out.append(run);
        }
        run.clear();
    };
    for e in entities {
        if is_address_part(e.kind) {
            let joins = run.last().is_some_and(|last| {
                text.get(last.end..e.start).is_some_and(|g| {
                    g.len() <= 4 && g.chars().all(|c| c.is_whitespace() || c == ',')
                })
            });
            if !joins {
                flush(&mut run, &mut out);
            }
            run.push(e);
        } else {
            flush(&mut run, &mut out);
            out.push(e);
        }
    }
    flush(&mut run, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tl(span: (usize, usize), label: &str) -> TokenLabel<'_> {
        TokenLabel {
            span,
            label,
            score: 0.9,
        }
    }

    #[test]
    fn subword_pieces_and_names_merge() {
        let text = "Call Jane Doe at jane@x.io";
        let toks = vec![
            tl((0, 4), "O"),
            tl((5, 9), "B-GIVEN_NAME"),
            tl((10, 13), "B-SURNAME"),
            tl((14, 16), "O"),
            tl((17, 21), "B-EMAIL"),
            tl((21, 22), "I-EMAIL"),
            tl((22, 26), "B-EMAIL"),
        ];
        let e = decode(&toks, text);
        assert_eq!(e.len(), 2);
        assert_eq!(
            (e[0].kind, &text[e[0].start..e[0].end]),
            ("PERSON", "Jane Doe")
        );
        assert_eq!(
            (e[1].kind, &text[e[1].start..e[1].end]),
            ("EMAIL_ADDRESS", "jane@x.io")
        );
    }

    #[test]
    fn address_parts_group_into_street_address() {
        let text = "at 12 Main St, Springfield, 62704 now";
        let toks = vec![
            tl((3, 5), "B-BUILDING_NUMBER"),
            tl((6, 10), "B-STREET_NAME"),
            tl((11, 13), "I-STREET_NAME"),
            tl((15, 26), "B-CITY"),
            tl((28, 33), "B-ZIP_CODE"),
            tl((34, 37), "O"),
        ];
        let e = group_addresses(decode(&toks, text), text);
        assert_eq!(e.len(), 1, "{e:?}");
        assert_eq!(e[0].kind, "STREET_ADDRESS");
        assert_eq!(
            &text[e[0].start..e[0].end],
            "12 Main St, Springfield, 62704"
        );
    }

    #[test]
    fn lone_city_stays_location() {
        let text = "I live in Paris";
        let e = group_addresses(decode(&[tl((10, 15), "B-CITY")], text), text);
        assert_eq!(e[0].kind, "LOCATION");
    }
}
