//! Request body rewrites once a route is applied: `model` spliced over its original bytes
//! (a prefix replacement, the cheap common case), or the whole body rewritten when values
//! are masked ([`crate::pii_mask`]) or the decision edits the request
//! ([`crate::request_edits`]). Every other byte stays as the client sent it.

use std::ops::Range;

use thiserror::Error;

use crate::filter::{Host, HostError};
use crate::json_strings::splice;
use crate::pii_mask::MaskTable;
use crate::request::{Api, ModelValue};
use crate::request_edits::{self, RequestEdits};

/// Why the body could not be rewritten.
#[derive(Debug, Error)]
pub enum RewriteError {
    /// A span the scanner reported lies outside the body read.
    #[error("a span outside the scanned body")]
    Span,
    /// The host did not give the whole body.
    #[error("cannot read the body")]
    Read,
    /// The model name cannot be written as JSON.
    #[error("cannot encode the model name")]
    Encode,
    /// The host refused the new body.
    #[error(transparent)]
    Host(#[from] HostError),
}

/// What the filter knows of the buffered body.
pub struct BodyState {
    /// Body bytes scanned (all of them, once the route is applied).
    pub scanned: usize,
    /// The top-level `model` as the scanner found it.
    pub model: Option<ModelValue>,
    /// The body's API.
    pub api: Api,
    /// The request has a `content-length` to correct.
    pub content_length: bool,
}

/// The raw span of the `model` string (quotes included) and its decoded value (`None`
/// when too long to keep).
type ModelSpan = (Range<usize>, Option<String>);

impl BodyState {
    /// The body's [`ModelSpan`], if it has a string `model`.
    fn model_span(&self) -> Result<Option<ModelSpan>, RewriteError> {
        let Some(ModelValue::String {
            name,
            raw_start,
            raw_end,
        }) = &self.model
        else {
            return Ok(None);
        };
        let start = usize::try_from(*raw_start).map_err(|_| RewriteError::Span)?;
        let end = usize::try_from(*raw_end).map_err(|_| RewriteError::Span)?;
        if end < start + 2 || end > self.scanned {
            return Err(RewriteError::Span);
        }
        Ok(Some((start..end, name.clone())))
    }
}

fn encoded(model: &str) -> Result<Vec<u8>, RewriteError> {
    serde_json::to_string(model)
        .map(String::into_bytes)
        .map_err(|_| RewriteError::Encode)
}

/// Splices `model` over the body's `model` value: the prefix up to the value's end is
/// replaced (Envoy replaces a prefix, not a middle range), the rest of the buffer is not
/// touched. Nothing happens when the body names no model or already this one.
pub fn model_only<H: Host>(
    host: &mut H,
    body: &BodyState,
    model: &str,
) -> Result<(), RewriteError> {
    let Some((span, name)) = body.model_span()? else {
        return Ok(());
    };
    if name.as_deref() == Some(model) {
        return Ok(());
    }
    let mut prefix = if span.start > 0 {
        host.request_body(0, span.start).ok_or(RewriteError::Read)?
    } else {
        Vec::new()
    };
    if prefix.len() != span.start {
        return Err(RewriteError::Read);
    }
    let value = encoded(model)?;
    prefix.extend_from_slice(&value);
    host.replace_body_prefix(span.end, &prefix)?;
    if body.content_length {
        let new_len = body.scanned - span.len() + value.len();
        host.set_request_header("content-length", &new_len.to_string());
    }
    Ok(())
}

/// Rewrites the whole body: `model` (when given) spliced in, the decision's request
/// `edits` made, and every value of `mask` replaced by its placeholder (except inside the
/// `model` string and inside a client value the edits replace; placeholders the body
/// already holds as text renumbered first, [`MaskTable::avoid_placeholders_in`]);
/// `content-length` fixed. Returns the values replaced per entity type.
pub fn whole_body<H: Host>(
    host: &mut H,
    body: &BodyState,
    model: Option<&str>,
    mask: &mut MaskTable,
    edits: &RequestEdits,
) -> Result<Vec<(String, u32)>, RewriteError> {
    let bytes = host
        .request_body(0, body.scanned)
        .ok_or(RewriteError::Read)?;
    if bytes.len() != body.scanned {
        return Err(RewriteError::Read);
    }
    mask.avoid_placeholders_in(&bytes)
        .ok_or(RewriteError::Span)?;
    let model_span = body.model_span()?;
    let keep = model_span.as_ref().map(|(r, _)| r.start + 1..r.end - 1);
    let mut masked = mask.edits(&bytes, keep).ok_or(RewriteError::Span)?;
    let mut out = request_edits::locate(&bytes, body.api, edits).ok_or(RewriteError::Span)?;
    if let (Some(model), Some((span, name))) = (model, model_span) {
        if name.as_deref() != Some(model) {
            out.push((span, encoded(model)?));
        }
    }
    // A client value the decision replaces goes away with its masked values.
    masked.retain(|m| {
        !out.iter()
            .any(|(r, _)| !r.is_empty() && r.start <= m.range.start && m.range.end <= r.end)
    });
    let per_kind = mask.count_by_kind(&masked);
    out.extend(masked.iter().map(|m| {
        let placeholder = mask.placeholder(m.entry).as_bytes().to_vec();
        (m.range.clone(), placeholder)
    }));
    out.sort_by_key(|(r, _)| (r.start, r.end));
    let new_body = splice(&bytes, &out).ok_or(RewriteError::Span)?;
    host.replace_body_prefix(bytes.len(), &new_body)?;
    if body.content_length {
        host.set_request_header("content-length", &new_body.len().to_string());
    }
    Ok(per_kind)
}
