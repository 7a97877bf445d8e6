//! Assembling answers from what real OpenAI-compatible servers send.
//!
//! Chunks are read as loose JSON, not async-openai's strict types, because
//! real servers omit `id`/`created`/`model`, send tool calls without `index`,
//! finish with `"eos"` or `""`, put reasoning in three different fields,
//! send `content` as typed parts, and report errors inside a 200 stream.
//! The rules (also in `docs/model-clients.md`):
//!
//! - text: every `delta.content` string, or the `text` parts of a content array;
//! - reasoning: `reasoning_content`, else `reasoning`, else
//!   `reasoning_details[].text`, per chunk; `thinking` content parts too;
//! - tool calls merge by `index`; a delta without `index` continues the
//!   previous call unless it brings a new id; an empty id or name never
//!   overwrites a real one; calls without a usable id get one made up;
//! - finish reason: the last non-empty one, as sent;
//! - usage: the last non-empty `usage` object, with cached and reasoning
//!   tokens from every detail shape the captured servers send;
//! - an `error` object (or string) anywhere at the top level is an error;
//! - past the content limit ([`ResponseLimits::max_bytes`] of text,
//!   reasoning and tool-call arguments together) the answer is an error.

use serde_json::Value;

use super::{ModelError, ModelResponse, ProviderUsage, ResponseLimits};
use crate::message::ToolCall;

#[derive(Debug, Default)]
struct PartialCall {
    index: Option<i64>,
    id: String,
    name: String,
    arguments: String,
}

/// Folds streamed chunks into a [`ModelResponse`].
#[derive(Debug, Default)]
pub struct Assembler {
    text: String,
    reasoning: Option<String>,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<ProviderUsage>,
    /// Bytes of text, reasoning and arguments so far.
    size: usize,
    /// The bound on `size`; none for an assembler made with `new`.
    limits: Option<ResponseLimits>,
}

/// The text and reasoning one chunk added, for live display.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ChunkDelta {
    /// New visible text.
    pub text: String,
    /// New reasoning.
    pub reasoning: String,
}

impl Assembler {
    /// An empty assembler with no size limit.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty assembler that fails once the answer carries more than
    /// `limits.max_bytes` of text, reasoning and tool-call arguments.
    pub fn limited(limits: ResponseLimits) -> Self {
        Self {
            limits: Some(limits),
            ..Self::default()
        }
    }

    /// Adds one chunk. An error the chunk carries ends the answer.
    pub fn push(&mut self, chunk: &Value) -> Result<ChunkDelta, ModelError> {
        if let Some(message) = error_message(chunk) {
            return Err(ModelError::Provider(message));
        }
        if let Some(usage) = usage(chunk) {
            self.usage = Some(usage);
        }
        let mut delta = ChunkDelta::default();
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Ok(delta);
        };
        for choice in choices.iter().filter(|c| is_first_choice(c)) {
            if let Some(reason) = finish_reason(choice) {
                self.finish_reason = Some(reason);
            }
            let Some(d) = choice.get("delta").or_else(|| choice.get("message")) else {
                continue;
            };
            let (text, reasoning) = content_parts(d);
            delta.text.push_str(&text);
            delta.reasoning.push_str(&reasoning);
            if let Some(calls) = d.get("tool_calls").and_then(Value::as_array) {
                for call in calls {
                    self.size += self.merge_call(call);
                }
            }
        }
        self.size += delta.text.len() + delta.reasoning.len();
        if let Some(limits) = self.limits
            && self.size > limits.max_bytes
        {
            return Err(limits.too_large());
        }
        self.text.push_str(&delta.text);
        if !delta.reasoning.is_empty() {
            self.reasoning
                .get_or_insert_with(String::new)
                .push_str(&delta.reasoning);
        }
        Ok(delta)
    }

    /// Merges one tool-call delta; returns the argument bytes it added.
    fn merge_call(&mut self, call: &Value) -> usize {
        let index = call.get("index").and_then(Value::as_i64);
        let id = non_empty(call.get("id"));
        let function = call.get("function");
        let name = non_empty(function.and_then(|f| f.get("name")));
        let arguments = function
            .and_then(|f| f.get("arguments"))
            .map(arguments_text);

        let position = match index {
            Some(i) => self.calls.iter().position(|c| c.index == Some(i)),
            None => match (&id, self.calls.last()) {
                (Some(id), Some(last)) if !last.id.is_empty() && &last.id != id => None,
                (_, Some(_)) => Some(self.calls.len() - 1),
                (_, None) => None,
            },
        };
        let target = match position {
            Some(p) => &mut self.calls[p],
            None => {
                self.calls.push(PartialCall {
                    index,
                    ..Default::default()
                });
                let last = self.calls.len() - 1;
                &mut self.calls[last]
            }
        };
        if let Some(id) = id
            && target.id.is_empty()
        {
            target.id = id;
        }
        if let Some(name) = name
            && target.name.is_empty()
        {
            target.name = name;
        }
        let added = arguments.as_ref().map_or(0, String::len);
        if let Some(arguments) = arguments {
            target.arguments.push_str(&arguments);
        }
        added
    }

    /// The answer so far, with ids made up for calls that had none.
    pub fn finish(self) -> ModelResponse {
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(n, call)| ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{}_{}", n, uuid::Uuid::new_v4().simple())
                } else {
                    call.id
                },
                name: call.name,
                arguments: call.arguments,
            })
            .collect();
        ModelResponse {
            text: self.text,
            reasoning: self.reasoning,
            tool_calls,
            finish_reason: self.finish_reason,
            usage: self.usage,
        }
    }
}

/// Parses a whole non-streaming chat completion, within `limits` when given.
pub fn parse_completion(
    body: &Value,
    limits: Option<ResponseLimits>,
) -> Result<ModelResponse, ModelError> {
    let mut assembler = limits.map_or_else(Assembler::new, Assembler::limited);
    assembler.push(body)?;
    if body.get("choices").and_then(Value::as_array).is_none() {
        return Err(ModelError::Malformed(
            "the response has no 'choices' array".into(),
        ));
    }
    Ok(assembler.finish())
}

/// The message of an `error` the value carries, if any: an object with
/// `message`, a string, or a JSON array whose first element has one.
pub(crate) fn error_message(value: &Value) -> Option<String> {
    if let Some(first) = value.as_array().and_then(|a| a.first()) {
        return error_message(first);
    }
    match value.get("error")? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Object(obj) => Some(match obj.get("message") {
            Some(Value::String(m)) => m.clone(),
            _ => Value::Object(obj.clone()).to_string(),
        }),
        other => Some(other.to_string()),
    }
}

/// `error.type` or `error.code`, when a value carries them.
pub(crate) fn error_kind(value: &Value) -> Option<String> {
    if let Some(first) = value.as_array().and_then(|a| a.first()) {
        return error_kind(first);
    }
    let error = value.get("error")?;
    ["type", "code", "status"]
        .iter()
        .find_map(|key| error.get(*key).and_then(Value::as_str).map(str::to_string))
}

fn usage(chunk: &Value) -> Option<ProviderUsage> {
    let u = chunk.get("usage")?.as_object()?;
    if u.is_empty() {
        return None;
    }
    let field = |name: &str| u.get(name).and_then(Value::as_u64);
    let detail = |outer: &str, name: &str| {
        u.get(outer)
            .and_then(|d| d.get(name))
            .and_then(Value::as_u64)
    };
    let prompt = field("prompt_tokens");
    let completion = field("completion_tokens");
    if prompt.is_none() && completion.is_none() {
        return None;
    }
    let (prompt, completion) = (prompt.unwrap_or(0), completion.unwrap_or(0));
    let cached = detail("prompt_tokens_details", "cached_tokens")
        .or_else(|| field("prompt_cache_hit_tokens"))
        .or_else(|| field("num_cached_tokens"))
        .or_else(|| field("cached_tokens"))
        .unwrap_or(0);
    let reasoning = detail("completion_tokens_details", "reasoning_tokens").unwrap_or(0);
    Some(ProviderUsage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        total_tokens: field("total_tokens").unwrap_or(prompt + completion),
        // Never more than the prompt it is part of. Reasoning is not
        // capped: xAI counts it apart from `completion_tokens` (its total
        // is the sum of all three), which `Usage` accounts for.
        cached_tokens: cached.min(prompt),
        reasoning_tokens: reasoning,
    })
}

fn is_first_choice(choice: &Value) -> bool {
    choice.get("index").and_then(Value::as_i64).unwrap_or(0) == 0
}

fn finish_reason(choice: &Value) -> Option<String> {
    choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .filter(|r| !r.is_empty())
        .map(str::to_string)
}

fn non_empty(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Arguments are a string on the wire, but some servers send the object.
fn arguments_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The visible text and the reasoning of one delta (or message).
fn content_parts(delta: &Value) -> (String, String) {
    let mut text = String::new();
    let mut reasoning = String::new();
    match delta.get("content") {
        Some(Value::String(s)) => text.push_str(s),
        Some(Value::Array(parts)) => {
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("thinking") => collect_text(part.get("thinking"), &mut reasoning),
                    Some("text") | None => collect_text(part.get("text"), &mut text),
                    Some(_) => {}
                }
            }
        }
        _ => {}
    }
    if let Some(r) = delta.get("reasoning_content").and_then(Value::as_str) {
        reasoning.push_str(r);
    } else if let Some(r) = delta.get("reasoning").and_then(Value::as_str) {
        reasoning.push_str(r);
    } else if let Some(details) = delta.get("reasoning_details").and_then(Value::as_array) {
        for detail in details {
            collect_text(detail.get("text"), &mut reasoning);
        }
    }
    (text, reasoning)
}

/// Appends a string, or the `text` of each element of an array of parts.
fn collect_text(value: Option<&Value>, out: &mut String) {
    match value {
        Some(Value::String(s)) => out.push_str(s),
        Some(Value::Array(parts)) => {
            for part in parts {
                collect_text(part.get("text"), out);
            }
        }
        _ => {}
    }
}
