//! Recognising a provider's "the request does not fit the context window"
//! answer, whatever server sent it.
//!
//! Servers agree on nothing here (see `docs/context.md`): OpenAI, Azure and
//! Groq send `code: "context_length_exceeded"`, llama.cpp
//! `type: "exceed_context_size_error"`, vLLM and DeepSeek only a message,
//! Mistral sometimes a bare 413. The classifier is the union the notes list
//! (the one opencode ships), read from the status, the error kind and the
//! message, so a new server phrasing one of the known sentences is caught.

use std::sync::LazyLock;

use regex::Regex;

/// Error kinds (`error.code` or `error.type`) that name an overflow.
const KINDS: &[&str] = &["context_length_exceeded", "exceed_context_size_error"];

/// Message patterns that name an overflow, lower-cased.
static PATTERNS: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"prompt is too long|input is too long for requested model|exceeds the context window",
        r"|input token count.*exceeds the maximum|maximum prompt length is \d+",
        r"|reduce the length of the messages|maximum context length is \d+",
        r"|exceeds the limit of \d+|exceeds the available context size",
        r"|greater than the context length|context window exceeds limit",
        r"|exceeded model token limit|too large for model with \d+ maximum context length",
        r"|context[_ ]length[_ ]exceeded|context length is only \d+ tokens",
        r"|input length.*exceeds.*context length|prompt is longer than the context length",
        r"|input tokens exceed the configured limit",
    ))
    .ok()
});

/// Numbers that state the window in a known message.
static WINDOW: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(concat!(
        r"maximum context length is (\d+)|available context size \((\d+) tokens\)",
        r"|context length of only (\d+)|configured limit of (\d+)",
        r"|maximum number of tokens allowed \((\d+)\)|(\d+) maximum context length",
    ))
    .ok()
});

/// Whether an error answer says the request is longer than the model's
/// context window. `status` is the HTTP status when there was one (a
/// mid-stream error has none).
pub fn is_overflow(status: Option<u16>, kind: Option<&str>, message: &str) -> bool {
    if status == Some(413) {
        return true;
    }
    if kind.is_some_and(|k| KINDS.contains(&k)) {
        return true;
    }
    let lower = message.to_lowercase();
    PATTERNS.as_ref().is_some_and(|re| re.is_match(&lower))
}

/// The window an overflow message states, when it states one
/// ("maximum context length is 4097 tokens", "available context size (8192
/// tokens)"): the turn then knows the real window, not the configured one.
pub fn stated_window(message: &str) -> Option<u64> {
    let lower = message.to_lowercase();
    let captures = WINDOW.as_ref()?.captures(&lower)?;
    captures
        .iter()
        .skip(1)
        .flatten()
        .find_map(|m| m.as_str().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (status, kind, message, overflow?, stated window).
    type Case<'a> = (Option<u16>, Option<&'a str>, &'a str, bool, Option<u64>);

    /// Bodies from `notes/context-acp-mcp.md` §1.1.
    #[test]
    fn known_providers_overflow_answers_are_recognised() {
        let cases: &[Case] = &[
            (
                Some(400),
                Some("invalid_request_error"),
                "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens. Please reduce the length of the messages.",
                true,
                Some(4097),
            ),
            (
                Some(400),
                Some("context_length_exceeded"),
                "Your input exceeds the context window of this model. Please adjust your input and try again.",
                true,
                None,
            ),
            (
                Some(400),
                Some("BadRequestError"),
                "This model's maximum context length is 8192 tokens. However, your prompt contains at least 9000 input tokens, which exceeds this limit even without any output tokens.",
                true,
                Some(8192),
            ),
            (
                Some(400),
                Some("exceed_context_size_error"),
                "request (9739 tokens) exceeds the available context size (8192 tokens), try increasing it",
                true,
                Some(8192),
            ),
            (
                Some(400),
                None,
                "the request exceeds the available context size, try increasing it",
                true,
                None,
            ),
            (
                Some(400),
                Some("invalid_request_error"),
                "Please reduce the length of the messages or completion.",
                true,
                None,
            ),
            (
                Some(400),
                Some("INVALID_ARGUMENT"),
                "The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).",
                true,
                Some(1048576),
            ),
            (
                Some(400),
                None,
                "prompt is too long: 213462 tokens > 200000 maximum",
                true,
                None,
            ),
            (
                Some(400),
                None,
                "the prompt is longer than the context length currently available to the model",
                true,
                None,
            ),
            (Some(413), None, "", true, None),
            (
                Some(400),
                Some("invalid_request_error"),
                "Invalid schema for function 'x'",
                false,
                None,
            ),
            (
                Some(429),
                Some("rate_limit_exceeded"),
                "Rate limit reached",
                false,
                None,
            ),
            (None, None, "tool_use_failed", false, None),
        ];
        for (status, kind, message, overflow, window) in cases {
            assert_eq!(is_overflow(*status, *kind, message), *overflow, "{message}");
            assert_eq!(stated_window(message), *window, "{message}");
        }
    }
}
