//! Local replies in the OpenAI error format:
//! `{"error":{"message":"...","type":"...","code":"..."}}`.

use serde::Serialize;

/// A local reply the filter sends instead of forwarding the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorResponse {
    /// HTTP status (400, 403, 413 or 503).
    pub status: u16,
    /// Human-readable message.
    pub message: String,
    /// OpenAI error type, e.g. `invalid_request_error`.
    pub error_type: &'static str,
    /// Machine-readable code, e.g. `invalid_json`.
    pub code: &'static str,
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    message: &'a str,
    #[serde(rename = "type")]
    error_type: &'a str,
    code: &'a str,
}

impl ErrorResponse {
    /// 400: the body is not valid JSON or not a usable request.
    pub fn bad_request(message: impl Into<String>, code: &'static str) -> Self {
        ErrorResponse {
            status: 400,
            message: message.into(),
            error_type: "invalid_request_error",
            code,
        }
    }

    /// 403: blocked by the jailbreak or PII policy.
    pub fn blocked(message: impl Into<String>, code: &'static str) -> Self {
        ErrorResponse {
            status: 403,
            message: message.into(),
            error_type: "invalid_request_error",
            code,
        }
    }

    /// 413: the body is larger than `limit` bytes.
    pub fn too_large(limit: u64) -> Self {
        ErrorResponse {
            status: 413,
            message: format!("request body is larger than the router's limit of {limit} bytes"),
            error_type: "invalid_request_error",
            code: "request_too_large",
        }
    }

    /// 413: the daemon refused the text to classify as larger than it takes (gRPC
    /// OUT_OF_RANGE). The text is the client's, so forwarding it unclassified under the
    /// failure mode would let a client skip the policies at will by padding its prompt.
    pub fn prompt_too_large() -> Self {
        ErrorResponse {
            status: 413,
            message: "the prompt's text is larger than the semantic router can classify".into(),
            error_type: "invalid_request_error",
            code: "prompt_too_large",
        }
    }

    /// 503: the classifier is unavailable and the router fails closed.
    pub fn unavailable(reason: &str) -> Self {
        ErrorResponse {
            status: 503,
            message: format!("the semantic router cannot classify this request ({reason})"),
            error_type: "server_error",
            code: "router_unavailable",
        }
    }

    /// 503: the PII policy asks for values to be masked and the body could not be
    /// rewritten; the request is not forwarded with the values in it.
    pub fn mask_failed() -> Self {
        ErrorResponse {
            status: 503,
            message: "the semantic router could not mask personal data in this request".into(),
            error_type: "server_error",
            code: "pii_mask_failed",
        }
    }

    /// The JSON body.
    pub fn body(&self) -> Vec<u8> {
        let body = Body {
            error: Inner {
                message: &self.message,
                error_type: self.error_type,
                code: self.code,
            },
        };
        serde_json::to_vec(&body).unwrap_or_else(|_| {
            br#"{"error":{"message":"error","type":"server_error","code":"internal"}}"#.to_vec()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_is_openai_shaped() {
        let e = ErrorResponse::bad_request("bad \"json\"", "invalid_json");
        let v: serde_json::Value = serde_json::from_slice(&e.body()).unwrap();
        assert_eq!(v["error"]["message"], "bad \"json\"");
        assert_eq!(v["error"]["type"], "invalid_request_error");
        assert_eq!(v["error"]["code"], "invalid_json");
        assert_eq!(ErrorResponse::too_large(10).status, 413);
        assert_eq!(ErrorResponse::unavailable("daemon-timeout").status, 503);
    }
}
