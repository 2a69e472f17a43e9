//! A [`Sink`] that records the scanner's events as owned values, string fragments merged,
//! so that event sequences from different chunkings of one body compare equal. It panics on
//! a malformed sequence (a fragment outside a string, a string end without a start): the
//! scanner must never emit one.

use crate::json_scan::{Event, Sink};

/// An owned scanner event; byte offsets are into the whole body.
#[derive(Debug, Clone, PartialEq)]
pub enum Ev {
    ObjectStart(u64),
    ObjectEnd(u64),
    ArrayStart(u64),
    ArrayEnd(u64),
    Key(Option<String>),
    Str { start: u64, text: String, end: u64 },
    Number(u64, u64),
    Bool(bool, u64, u64),
    Null(u64, u64),
}

/// Records events.
#[derive(Default, Debug)]
pub struct Recorder {
    pub events: Vec<Ev>,
    open: Option<(u64, String)>,
}

impl Recorder {
    /// Whether a string has started and not ended (after a complete document: never).
    pub fn in_string(&self) -> bool {
        self.open.is_some()
    }
}

impl Sink for Recorder {
    type Error = std::convert::Infallible;
    fn event(&mut self, e: Event<'_>) -> Result<(), Self::Error> {
        match e {
            Event::ObjectStart { offset } => self.events.push(Ev::ObjectStart(offset)),
            Event::ObjectEnd { offset } => self.events.push(Ev::ObjectEnd(offset)),
            Event::ArrayStart { offset } => self.events.push(Ev::ArrayStart(offset)),
            Event::ArrayEnd { offset } => self.events.push(Ev::ArrayEnd(offset)),
            Event::Key(k) => self.events.push(Ev::Key(k.map(str::to_string))),
            Event::StringStart { offset } => {
                assert!(self.open.is_none(), "string start inside a string");
                self.open = Some((offset, String::new()));
            }
            Event::StringFragment(s) => match self.open.as_mut() {
                Some((_, t)) => t.push_str(s),
                None => panic!("string fragment outside a string"),
            },
            Event::StringEnd { end } => match self.open.take() {
                Some((start, text)) => self.events.push(Ev::Str { start, text, end }),
                None => panic!("string end without start"),
            },
            Event::Number { start, end } => self.events.push(Ev::Number(start, end)),
            Event::Bool { value, start, end } => self.events.push(Ev::Bool(value, start, end)),
            Event::Null { start, end } => self.events.push(Ev::Null(start, end)),
        }
        Ok(())
    }
}
