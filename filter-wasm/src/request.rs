//! OpenAI request extraction on top of the JSON scanner.
//!
//! [`Extractor`] is a [`Sink`] that interprets scanner events for the Chat
//! Completions API (`messages`) and the Responses API (`input`, with
//! `instructions` ignored) and collects what the router needs:
//!
//! - the top-level `model` value and the byte span of its raw JSON string, so
//!   the body can be spliced without re-serialisation;
//! - `stream`;
//! - the **prompt**: the text of the last user turn (string content, or the
//!   `text` of each content part; each string is one segment);
//! - the **scan text**: earlier user turns and tool output (`tool` /
//!   `function` messages, Responses `function_call_output` items), scanned by
//!   the daemon for jailbreaks and PII only.
//!
//! As it reads, the extractor hands every piece of text to a [`TextSink`] (the filter's
//! is [`crate::prompt_texts::PromptTexts`], which compresses it as it arrives): the
//! fragments of each message with what is known of its role, the end of each message, and
//! the scan text. The sink decides what to analyse when; the extractor knows nothing of
//! compression.
//!
//! System, developer and assistant text is not classified. Responses items
//! without a role (tool and reasoning items) count as tool output: their
//! `content`, `output`, `outputs`, `results`, `summary` and `text` are scan
//! text (with the `stdout`, `stderr` and `logs` of output parts). Shapes the APIs do
//! not allow are refused rather than forwarded unread: a chat body without
//! `messages`, a message without a role or with a role the APIs do not have, a
//! content part that is not an object, a part `text` that is not a string.
//! Other unknown fields are skipped (the scanner still validates them).

use thiserror::Error;

use crate::json_scan::{Event, Sink};

/// Longest `model` value kept, bytes; longer values count as unknown models.
pub const MAX_MODEL_BYTES: usize = 256;

/// Which OpenAI API the body belongs to (chosen from the request path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/chat/completions`: text from `messages`.
    ChatCompletions,
    /// `POST /v1/responses`: text from `input`.
    Responses,
    /// `POST /v1/completions` (legacy): text from `prompt`, a string or an array of
    /// strings (a batch of prompts: the last is classified as the prompt, the others as
    /// earlier turns). Token-id prompts are refused: the router cannot read them.
    Completions,
}

/// A body the extractor rejects although it is valid JSON.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ExtractError {
    /// The top-level value is not an object.
    #[error("request body must be a JSON object")]
    NotAnObject,
    /// A key the router reads appears twice in one object; upstream parsers
    /// disagree on which copy wins, so such bodies are refused.
    #[error("duplicate key {0:?}")]
    DuplicateKey(&'static str),
    /// A field the router reads has a JSON type the API does not allow (for example
    /// `messages` as an object); such a body is refused rather than forwarded unread.
    #[error("`{field}` must be {expected}")]
    WrongType {
        /// The field, as the API names it.
        field: &'static str,
        /// What the API allows, in words.
        expected: &'static str,
    },
    /// A field the API requires is absent (for example a chat body without `messages`).
    #[error("`{0}` is required")]
    Missing(&'static str),
}

/// The top-level `model` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelValue {
    /// A JSON string; `raw_start..raw_end` spans it including the quotes.
    String {
        /// Decoded value, `None` when longer than [`MAX_MODEL_BYTES`].
        name: Option<String>,
        /// Offset of the opening quote.
        raw_start: u64,
        /// Offset one past the closing quote.
        raw_end: u64,
    },
    /// Any other JSON type.
    Other,
}

/// Everything extracted from one body, apart from the prompt builder.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Extracted {
    /// The `model` field, once its value has been read.
    pub model: Option<ModelValue>,
    /// `stream: true` was present.
    pub stream: bool,
    /// Segments of the last user turn, decoded.
    pub prompt_segments: Vec<String>,
    /// Earlier user turns and tool output, joined by blank lines: a verbatim copy of at
    /// most the extractor's `max_scan_text` bytes (the scan builder reads all of it).
    pub scan_text: String,
    /// Bytes left out of the copy `scan_text` because of its limit.
    pub scan_text_dropped: u64,
    /// The conversation (`messages` / `input`) has been read completely.
    pub texts_complete: bool,
}

/// Semantic context of one open container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Root,
    /// The `messages` / `input` array.
    Conversation,
    /// One message / input item.
    Message,
    /// A content (or function output) parts array.
    Parts,
    /// One content part.
    Part,
    /// Anything the router does not read.
    Ignored,
}

/// What the next value (after a key) means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Ignore,
    Model,
    Stream,
    Conversation,
    Role,
    ItemType,
    Content,
    Output,
    PartText,
    /// A Responses item's own `text` string (an `input_text` item given bare).
    ItemText,
}

/// Where the string value being read goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StrTarget {
    None,
    Model,
    Role,
    ItemType,
    /// Message text (content string, part text, function output, input string).
    Text,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Unknown,
    User,
    Tool,
    Other,
}

/// The message being read.
#[derive(Debug, Default)]
struct MessageAcc {
    role: Option<Role>,
    role_text: String,
    /// The role string was longer than any role name.
    role_overlong: bool,
    type_text: String,
    segments: Vec<String>,
    current: String,
    /// Bytes of text in `segments` and `current`.
    text_bytes: usize,
}

/// The text of the message being read, as a [`TextSink`] sees it with each fragment.
#[derive(Debug, Clone, Copy)]
pub struct MessageText<'a> {
    /// The message's complete strings so far (its segments).
    pub segments: &'a [String],
    /// The string being read, the new fragment included.
    pub current: &'a str,
    /// Bytes of text in `segments` and `current`.
    pub bytes: usize,
    /// The message is, or may still turn out to be, a user turn (`role` can come after
    /// `content`).
    pub may_be_prompt: bool,
}

/// Where the extractor hands the text it reads, as it reads it.
///
/// A message's fragments come between [`TextSink::message_start`] and
/// [`TextSink::message_end`]; a prompt given as one string (the Responses API's `input`,
/// a completion `prompt`) comes as [`TextSink::prompt_start`] and its fragments; earlier
/// turns and tool output come whole to [`TextSink::scan_text`] once their message ends.
pub trait TextSink {
    /// A message begins (any earlier message's state is dropped).
    fn message_start(&mut self);
    /// The current message's role is known and it is not the user's.
    fn message_not_prompt(&mut self);
    /// `fragment` of the current message's text was read.
    fn message_fragment(&mut self, fragment: &str, message: &MessageText<'_>);
    /// One string (segment) of the current message ended.
    fn message_segment_end(&mut self);
    /// The current message ended; `is_prompt`: it is the last user turn so far.
    fn message_end(&mut self, is_prompt: bool);
    /// A prompt given as one string begins; it is the last user turn so far.
    fn prompt_start(&mut self);
    /// `fragment` of that prompt was read.
    fn prompt_fragment(&mut self, fragment: &str);
    /// That prompt's string ended.
    fn prompt_segment_end(&mut self);
    /// One earlier user turn or tool output (not empty), whole.
    fn scan_text(&mut self, text: &str);
}

/// Scanner sink that extracts an OpenAI request. See the module docs.
#[derive(Debug)]
pub struct Extractor<S: TextSink> {
    api: Api,
    /// Where the text goes as it is read.
    texts: S,
    max_scan_text: usize,
    stack: Vec<Ctx>,
    /// Per open container (parallel to `stack`): the keys read so far that the router
    /// reads, as bits of [`read_key_bit`], so that a second copy is refused.
    read_keys: Vec<u16>,
    slot: Slot,
    target: StrTarget,
    model_buf: String,
    model_overlong: bool,
    model_start: u64,
    seen_model: bool,
    seen_conversation: bool,
    msg: MessageAcc,
    /// The input string of the Responses API is being read.
    input_string: bool,
    /// Some scan text was appended.
    seen_scan_text: bool,
    out: Extracted,
}

fn content_type() -> ExtractError {
    ExtractError::WrongType {
        field: "content",
        expected: "a string, an array of content parts or null",
    }
}

fn role_type() -> ExtractError {
    ExtractError::WrongType {
        field: "role",
        expected: "a string",
    }
}

/// The role named by `text`, in any ASCII case (an upstream that accepts "User" must not
/// receive a turn the router did not classify); `None` for a role neither API has, which
/// an upstream might still accept and which the router would not read.
fn role_of(text: &str) -> Option<Role> {
    let is = |name: &str| text.eq_ignore_ascii_case(name);
    if is("user") {
        Some(Role::User)
    } else if is("tool") || is("function") {
        Some(Role::Tool)
    } else if is("system") || is("developer") || is("assistant") {
        Some(Role::Other)
    } else {
        None
    }
}

fn role_value() -> ExtractError {
    ExtractError::WrongType {
        field: "role",
        expected: "one of system, developer, user, assistant, tool, function",
    }
}

fn part_type() -> ExtractError {
    ExtractError::WrongType {
        field: "content[]",
        expected: "a content part object",
    }
}

fn part_text_type() -> ExtractError {
    ExtractError::WrongType {
        field: "content[].text",
        expected: "a string",
    }
}

impl<S: TextSink> Extractor<S> {
    /// An extractor for one body of `api` that hands its text to `texts`, keeping a
    /// verbatim copy of at most `max_scan_text` bytes of scan text
    /// ([`Extracted::scan_text`]).
    pub fn new(api: Api, texts: S, max_scan_text: usize) -> Self {
        Extractor {
            api,
            texts,
            max_scan_text,
            stack: Vec::new(),
            read_keys: Vec::new(),
            slot: Slot::Ignore,
            target: StrTarget::None,
            model_buf: String::new(),
            model_overlong: false,
            model_start: 0,
            seen_model: false,
            seen_conversation: false,
            msg: MessageAcc::default(),
            input_string: false,
            seen_scan_text: false,
            out: Extracted::default(),
        }
    }

    /// What has been extracted so far.
    pub fn extracted(&self) -> &Extracted {
        &self.out
    }

    /// Checks, once the whole body has been read, what only its end can tell: a chat
    /// body must have `messages`.
    pub fn check_complete(&self) -> Result<(), ExtractError> {
        if !self.seen_conversation {
            match self.api {
                Api::ChatCompletions => return Err(ExtractError::Missing("messages")),
                Api::Completions => return Err(ExtractError::Missing("prompt")),
                Api::Responses => {}
            }
        }
        Ok(())
    }

    /// True when the text to classify is known and so is `model` (or the
    /// body has ended): the classification can be dispatched.
    pub fn ready(&self, end_of_stream: bool) -> bool {
        end_of_stream || (self.out.texts_complete && self.out.model.is_some())
    }

    /// The text sink and what has been extracted so far.
    pub fn texts_and_extracted(&mut self) -> (&mut S, &Extracted) {
        (&mut self.texts, &self.out)
    }

    /// Consumes the extractor, returning the result.
    pub fn into_extracted(self) -> Extracted {
        self.out
    }

    /// Appends one earlier turn or tool output: all of it to the text sink (a jailbreak
    /// or personal data late in a long history must not go unread), and up to
    /// `max_scan_text` bytes in all to the verbatim copy [`Extracted::scan_text`].
    fn append_scan_text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.texts.scan_text(text);
        let first = !self.seen_scan_text;
        self.seen_scan_text = true;
        let out = &mut self.out;
        let sep = if first { 0 } else { 2 };
        let room = self.max_scan_text.saturating_sub(out.scan_text.len() + sep);
        if room == 0 {
            out.scan_text_dropped = out.scan_text_dropped.saturating_add(text.len() as u64);
            return;
        }
        if sep > 0 {
            out.scan_text.push_str("\n\n");
        }
        let mut cut = room.min(text.len());
        while cut > 0 && !text.is_char_boundary(cut) {
            cut -= 1;
        }
        out.scan_text.push_str(text.get(..cut).unwrap_or_default());
        out.scan_text_dropped = out
            .scan_text_dropped
            .saturating_add((text.len() - cut) as u64);
    }

    fn begin_message(&mut self) {
        self.msg = MessageAcc::default();
        self.texts.message_start();
    }

    /// The role is known: a message that is not the user's is no prompt.
    fn role_known(&mut self) {
        if self.msg.role != Some(Role::User) {
            self.texts.message_not_prompt();
        }
    }

    fn end_message(&mut self) -> Result<(), ExtractError> {
        let msg = std::mem::take(&mut self.msg);
        let role = match (msg.role, self.api) {
            _ if msg.type_text == "function_call_output" => Role::Tool,
            (Some(role), _) => role,
            (None, Api::ChatCompletions | Api::Completions) => {
                self.texts.message_end(false);
                return Err(ExtractError::Missing("messages[].role"));
            }
            // Responses items without a role are tool calls, their output and reasoning:
            // whatever text they hold reaches the model like tool output.
            (None, Api::Responses) => Role::Tool,
        };
        match role {
            Role::User => {
                let previous = std::mem::replace(&mut self.out.prompt_segments, msg.segments);
                let joined = previous.join("\n");
                self.append_scan_text(&joined);
                self.texts.message_end(true);
            }
            Role::Tool => {
                self.texts.message_end(false);
                let joined = msg.segments.join("\n");
                self.append_scan_text(&joined);
            }
            Role::Unknown | Role::Other => self.texts.message_end(false),
        }
        Ok(())
    }

    fn text_fragment(&mut self, s: &str) {
        self.msg.current.push_str(s);
        if self.input_string {
            self.texts.prompt_fragment(s);
            return;
        }
        self.msg.text_bytes = self.msg.text_bytes.saturating_add(s.len());
        let msg = &self.msg;
        let message = MessageText {
            segments: &msg.segments,
            current: &msg.current,
            bytes: msg.text_bytes,
            may_be_prompt: matches!(msg.role, None | Some(Role::User))
                && msg.type_text != "function_call_output",
        };
        self.texts.message_fragment(s, &message);
    }

    fn text_end(&mut self) {
        let seg = std::mem::take(&mut self.msg.current);
        if self.input_string {
            self.input_string = false;
            self.texts.prompt_segment_end();
            // A batch of completion prompts: the ones before the last are read like
            // earlier turns; the array's end completes the texts.
            let previous = std::mem::replace(&mut self.out.prompt_segments, vec![seg]);
            if !previous.is_empty() {
                self.append_scan_text(&previous.join("\n"));
            }
            if self.stack.last() != Some(&Ctx::Conversation) {
                self.out.texts_complete = true;
            }
            return;
        }
        self.msg.segments.push(seg);
        self.texts.message_segment_end();
    }

    /// Opens a container of context `ctx`.
    fn open(&mut self, ctx: Ctx) {
        if ctx == Ctx::Message {
            self.begin_message();
        }
        self.stack.push(ctx);
        self.read_keys.push(0);
    }

    /// Context for a container value starting now.
    fn container_ctx(&mut self, is_object: bool) -> Result<Ctx, ExtractError> {
        let slot = std::mem::replace(&mut self.slot, Slot::Ignore);
        let Some(&parent) = self.stack.last() else {
            return if is_object {
                Ok(Ctx::Root)
            } else {
                Err(ExtractError::NotAnObject)
            };
        };
        Ok(match (parent, slot, is_object) {
            (Ctx::Root, Slot::Conversation, false) => Ctx::Conversation,
            (Ctx::Root, Slot::Conversation, true) => return Err(self.conversation_type()),
            (Ctx::Conversation, _, _) if self.api == Api::Completions => {
                return Err(self.item_type())
            }
            (Ctx::Conversation, _, true) => Ctx::Message,
            (Ctx::Conversation, _, false) => return Err(self.item_type()),
            (Ctx::Message, Slot::Content, true) => return Err(content_type()),
            (Ctx::Message, Slot::Role, _) => return Err(role_type()),
            (Ctx::Message, Slot::Content | Slot::Output, false) => Ctx::Parts,
            // One output object (a computer call's output): read like a content part.
            (Ctx::Message, Slot::Output, true) if self.api == Api::Responses => Ctx::Part,
            (Ctx::Parts, _, true) => Ctx::Part,
            (Ctx::Parts, _, false) => return Err(part_type()),
            (Ctx::Part, Slot::PartText, _) => return Err(part_text_type()),
            _ => Ctx::Ignored,
        })
    }

    /// The error for a `messages` / `input` value of the wrong type.
    fn conversation_type(&self) -> ExtractError {
        match self.api {
            Api::ChatCompletions => ExtractError::WrongType {
                field: "messages",
                expected: "an array of message objects",
            },
            Api::Responses => ExtractError::WrongType {
                field: "input",
                expected: "a string or an array of input items",
            },
            Api::Completions => ExtractError::WrongType {
                field: "prompt",
                expected: "a string or an array of strings",
            },
        }
    }

    /// The error for an item of `messages` / `input` that is not an object.
    fn item_type(&self) -> ExtractError {
        match self.api {
            Api::ChatCompletions => ExtractError::WrongType {
                field: "messages[]",
                expected: "an object",
            },
            Api::Responses => ExtractError::WrongType {
                field: "input[]",
                expected: "an object",
            },
            Api::Completions => ExtractError::WrongType {
                field: "prompt[]",
                expected: "a string (token ids cannot be classified)",
            },
        }
    }

    /// A scalar value (not a string) in the current slot: `null` (`value` `None` and
    /// `null` true), a number (`None`) or a boolean.
    fn scalar(&mut self, value: Option<bool>, null: bool) -> Result<(), ExtractError> {
        let slot = std::mem::replace(&mut self.slot, Slot::Ignore);
        match self.stack.last() {
            Some(Ctx::Conversation) => return Err(self.item_type()),
            Some(Ctx::Parts) => return Err(part_type()),
            _ => {}
        }
        match slot {
            Slot::Model => self.out.model = Some(ModelValue::Other),
            Slot::Stream => self.out.stream = value == Some(true),
            // `null` is an absent conversation; a number or boolean is not one.
            Slot::Conversation if null => self.out.texts_complete = true,
            Slot::Conversation => return Err(self.conversation_type()),
            // `null` content is allowed (an assistant turn with `tool_calls`).
            Slot::Content if !null => return Err(content_type()),
            Slot::Role => return Err(role_type()),
            Slot::PartText => return Err(part_text_type()),
            _ => {}
        }
        Ok(())
    }

    fn key(&mut self, name: Option<&str>) -> Result<(), ExtractError> {
        let name = name.unwrap_or("");
        // A key the router reads inside a message or part, given twice: upstream parsers
        // differ on which copy wins (most keep the last), so the text classified could
        // differ from the text the model reads.
        if let (Some(&ctx), Some(seen)) = (self.stack.last(), self.read_keys.last_mut()) {
            if let Some((bit, key)) = read_key_bit(ctx, name, self.api) {
                if *seen & bit != 0 {
                    return Err(ExtractError::DuplicateKey(key));
                }
                *seen |= bit;
            }
        }
        self.slot = match self.stack.last() {
            Some(Ctx::Root) => match (name, self.api) {
                ("model", _) => {
                    if self.seen_model {
                        return Err(ExtractError::DuplicateKey("model"));
                    }
                    self.seen_model = true;
                    Slot::Model
                }
                ("stream", _) => Slot::Stream,
                ("messages", Api::ChatCompletions)
                | ("input", Api::Responses)
                | ("prompt", Api::Completions) => {
                    if self.seen_conversation {
                        return Err(ExtractError::DuplicateKey(match self.api {
                            Api::ChatCompletions => "messages",
                            Api::Responses => "input",
                            Api::Completions => "prompt",
                        }));
                    }
                    self.seen_conversation = true;
                    Slot::Conversation
                }
                _ => Slot::Ignore,
            },
            Some(Ctx::Message) => match name {
                "role" => {
                    if self.msg.role.is_some() {
                        return Err(ExtractError::DuplicateKey("role"));
                    }
                    self.msg.role = Some(Role::Unknown);
                    Slot::Role
                }
                "type" => Slot::ItemType,
                "content" => Slot::Content,
                "output" => Slot::Output,
                // Responses items: a reasoning item's summary parts, a code interpreter's
                // outputs, file search results, and the text of an `input_text` item
                // given without a message around it.
                "summary" | "outputs" | "results" if self.api == Api::Responses => Slot::Output,
                "text" if self.api == Api::Responses => Slot::ItemText,
                _ => Slot::Ignore,
            },
            Some(Ctx::Part) => match name {
                "text" => Slot::PartText,
                // Tool output parts of the Responses API: shell output, code interpreter logs.
                "stdout" | "stderr" | "logs" if self.api == Api::Responses => Slot::ItemText,
                _ => Slot::Ignore,
            },
            _ => Slot::Ignore,
        };
        Ok(())
    }

    fn string_start(&mut self, offset: u64) -> Result<(), ExtractError> {
        let slot = std::mem::replace(&mut self.slot, Slot::Ignore);
        match self.stack.last() {
            // One prompt of a batch of completion prompts.
            Some(Ctx::Conversation) if self.api == Api::Completions => {
                self.input_string = true;
                self.msg = MessageAcc::default();
                self.texts.prompt_start();
                self.target = StrTarget::Text;
                return Ok(());
            }
            Some(Ctx::Conversation) => return Err(self.item_type()),
            Some(Ctx::Parts) => return Err(part_type()),
            _ => {}
        }
        self.target = match slot {
            Slot::Model => {
                self.model_buf.clear();
                self.model_overlong = false;
                self.model_start = offset;
                StrTarget::Model
            }
            Slot::Role => StrTarget::Role,
            Slot::ItemType => StrTarget::ItemType,
            Slot::Content | Slot::Output | Slot::PartText | Slot::ItemText => StrTarget::Text,
            Slot::Conversation if self.api == Api::ChatCompletions => {
                return Err(self.conversation_type());
            }
            Slot::Conversation => {
                // Responses API: `input` as a plain string is one user turn; so is a
                // completion `prompt` string.
                self.input_string = true;
                self.msg = MessageAcc::default();
                self.texts.prompt_start();
                StrTarget::Text
            }
            Slot::Ignore | Slot::Stream => StrTarget::None,
        };
        Ok(())
    }

    fn string_fragment(&mut self, s: &str) {
        match self.target {
            StrTarget::None => {}
            StrTarget::Model => {
                if self.model_buf.len() + s.len() <= MAX_MODEL_BYTES {
                    self.model_buf.push_str(s);
                } else {
                    self.model_overlong = true;
                }
            }
            StrTarget::Role => {
                if self.msg.role_text.len() + s.len() <= 32 {
                    self.msg.role_text.push_str(s);
                } else {
                    self.msg.role_overlong = true;
                }
            }
            StrTarget::ItemType => {
                if self.msg.type_text.len() + s.len() <= 64 {
                    self.msg.type_text.push_str(s);
                }
            }
            StrTarget::Text => self.text_fragment(s),
        }
    }

    fn string_end(&mut self, end: u64) -> Result<(), ExtractError> {
        let target = std::mem::replace(&mut self.target, StrTarget::None);
        match target {
            StrTarget::None => {}
            StrTarget::Model => {
                let name = if self.model_overlong {
                    None
                } else {
                    Some(std::mem::take(&mut self.model_buf))
                };
                self.out.model = Some(ModelValue::String {
                    name,
                    raw_start: self.model_start,
                    raw_end: end,
                });
            }
            StrTarget::Role => {
                let role = role_of(&self.msg.role_text).filter(|_| !self.msg.role_overlong);
                self.msg.role = Some(role.ok_or_else(role_value)?);
                self.role_known();
            }
            StrTarget::ItemType => {}
            StrTarget::Text => self.text_end(),
        }
        Ok(())
    }
}

/// The bit and name of key `name` of the body, a message or a content part if the router
/// reads its value, or (a part's `type`) an upstream decides by it how to read the part
/// (`model`, `messages`, `input` and `role` have their own checks).
fn read_key_bit(ctx: Ctx, name: &str, api: Api) -> Option<(u16, &'static str)> {
    let responses = api == Api::Responses;
    Some(match (ctx, name) {
        (Ctx::Root, "stream") => (1 << 11, "stream"),
        (Ctx::Message, "type") => (1, "type"),
        (Ctx::Message, "content") => (1 << 1, "content"),
        (Ctx::Message, "output") => (1 << 2, "output"),
        (Ctx::Message, "summary") if responses => (1 << 3, "summary"),
        (Ctx::Message, "outputs") if responses => (1 << 4, "outputs"),
        (Ctx::Message, "results") if responses => (1 << 5, "results"),
        (Ctx::Message, "text") if responses => (1 << 6, "text"),
        (Ctx::Part, "text") => (1 << 7, "text"),
        (Ctx::Part, "type") => (1 << 12, "type"),
        (Ctx::Part, "stdout") if responses => (1 << 8, "stdout"),
        (Ctx::Part, "stderr") if responses => (1 << 9, "stderr"),
        (Ctx::Part, "logs") if responses => (1 << 10, "logs"),
        _ => return None,
    })
}

impl<S: TextSink> Sink for Extractor<S> {
    type Error = ExtractError;

    fn event(&mut self, event: Event<'_>) -> Result<(), ExtractError> {
        match event {
            Event::ObjectStart { .. } => {
                let ctx = self.container_ctx(true)?;
                self.open(ctx);
            }
            Event::ArrayStart { .. } => {
                let ctx = self.container_ctx(false)?;
                self.open(ctx);
            }
            Event::ObjectEnd { .. } | Event::ArrayEnd { .. } => {
                self.read_keys.pop();
                match self.stack.pop() {
                    Some(Ctx::Message) => self.end_message()?,
                    Some(Ctx::Conversation) => self.out.texts_complete = true,
                    _ => {}
                }
                self.slot = Slot::Ignore;
            }
            Event::Key(name) => self.key(name)?,
            Event::StringStart { offset } => {
                if self.stack.is_empty() {
                    return Err(ExtractError::NotAnObject);
                }
                self.string_start(offset)?;
            }
            Event::StringFragment(s) => self.string_fragment(s),
            Event::StringEnd { end } => self.string_end(end)?,
            Event::Number { .. } | Event::Null { .. } => {
                if self.stack.is_empty() {
                    return Err(ExtractError::NotAnObject);
                }
                self.scalar(None, matches!(event, Event::Null { .. }))?;
            }
            Event::Bool { value, .. } => {
                if self.stack.is_empty() {
                    return Err(ExtractError::NotAnObject);
                }
                self.scalar(Some(value), false)?;
            }
        }
        Ok(())
    }
}
