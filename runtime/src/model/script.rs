//! The scripted model (LLM4): answers from a file, with no network.
//!
//! A script is a TOML (or JSON, by extension) list of `[[response]]`
//! entries. Each entry may name the `role`, `mode`, `turn` and `iteration` it
//! answers; an absent key matches anything. Every agent (of every session)
//! keeps its own cursor:
//! a request gets the first entry, in file order, that matches it and that
//! this agent has not used yet; `repeat = true` entries are never used up.
//! So concurrent sub-agents each follow their own script. Strings may use
//! `${plan_file}`, `${workspace}`, `${session_id}`, `${role}`, `${agent_id}`,
//! `${turn}` and `${iteration}`. The format is documented in
//! `docs/model-script.md`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;

use super::{
    ModelClient, ModelError, ModelEvent, ModelRequest, ModelResponse, ModelStream, ProviderUsage,
    RequestContext,
};
use crate::message::{Message, ToolCall};
use crate::mode::Mode;

/// The built-in demo script the `cadre` binary runs when no model is configured.
pub const DEMO_SCRIPT: &str = include_str!("demo.toml");

/// A script that could not be read or makes no sense.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{origin}: {message}")]
pub struct ScriptError {
    /// The file (or `built-in demo script`).
    pub origin: String,
    /// What is wrong and where.
    pub message: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    #[serde(default)]
    response: Vec<Entry>,
}

/// One scripted answer.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    role: Option<String>,
    mode: Option<Mode>,
    turn: Option<u64>,
    iteration: Option<u32>,
    /// Matches only a turn whose latest user message holds this text.
    prompt: Option<String>,
    #[serde(default)]
    repeat: bool,
    #[serde(default)]
    text: String,
    #[serde(default)]
    delay_ms: u64,
    #[serde(default)]
    tool_calls: Vec<ScriptedCall>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptedCall {
    name: String,
    /// Arguments as a table; serialized to JSON when answered.
    arguments: Option<toml::Value>,
    /// Arguments sent verbatim, for scripting malformed calls.
    raw_arguments: Option<String>,
}

impl Entry {
    fn matches(&self, ctx: &RequestContext, prompt: &str) -> bool {
        self.role.as_deref().is_none_or(|r| r == &*ctx.role)
            && self.mode.is_none_or(|m| m == ctx.mode)
            && self.turn.is_none_or(|t| t == ctx.turn)
            && self.iteration.is_none_or(|i| i == ctx.iteration)
            && self.prompt.as_deref().is_none_or(|p| prompt.contains(p))
    }
}

/// A parsed script.
#[derive(Debug, Clone)]
pub struct Script {
    entries: Arc<[Entry]>,
}

impl Script {
    /// Parses a TOML script; `origin` names it in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Self, ScriptError> {
        let file: ScriptFile = toml::from_str(text).map_err(|e| ScriptError {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        Self::checked(file, origin)
    }

    /// Parses a JSON script (`{"response": [...]}`); `origin` names it in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Self, ScriptError> {
        let file: ScriptFile = serde_json::from_str(text).map_err(|e| ScriptError {
            origin: origin.to_string(),
            message: format!("line {}, column {}: {e}", e.line(), e.column()),
        })?;
        Self::checked(file, origin)
    }

    /// Reads a script file: JSON when it ends in `.json`, TOML otherwise.
    pub fn load(path: &Path) -> Result<Self, ScriptError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScriptError {
            origin: origin.clone(),
            message: format!("cannot read the script: {e}"),
        })?;
        if path.extension().is_some_and(|ext| ext == "json") {
            Self::from_json(&text, &origin)
        } else {
            Self::from_toml(&text, &origin)
        }
    }

    /// The built-in demo script.
    pub fn demo() -> Result<Self, ScriptError> {
        Self::from_toml(DEMO_SCRIPT, "built-in demo script")
    }

    fn checked(file: ScriptFile, origin: &str) -> Result<Self, ScriptError> {
        if file.response.is_empty() {
            return Err(ScriptError {
                origin: origin.to_string(),
                message: "the script has no [[response]] entries".into(),
            });
        }
        for (n, entry) in file.response.iter().enumerate() {
            let place = |message: String| ScriptError {
                origin: origin.to_string(),
                message: format!("response #{} : {message}", n + 1),
            };
            if entry.text.is_empty() && entry.tool_calls.is_empty() {
                return Err(place("needs `text`, `tool_calls`, or both".into()));
            }
            for call in &entry.tool_calls {
                if call.name.is_empty() {
                    return Err(place("a tool call has an empty `name`".into()));
                }
                if call.arguments.is_some() && call.raw_arguments.is_some() {
                    return Err(place(format!(
                        "tool call '{}' sets both `arguments` and `raw_arguments`",
                        call.name
                    )));
                }
            }
        }
        Ok(Self {
            entries: file.response.into(),
        })
    }

    /// How many entries the script has.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the script has no entries (never true for a parsed script).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// An agent of a session: (session id, agent id).
type AgentKey = (Arc<str>, Arc<str>);

/// A model that answers from a [`Script`].
pub struct ScriptedModel {
    script: Script,
    name: String,
    /// Per agent, which entries it has used.
    used: Mutex<HashMap<AgentKey, Vec<bool>>>,
}

impl ScriptedModel {
    /// A model answering from `script`, shown as `name`.
    pub fn new(script: Script, name: impl Into<String>) -> Self {
        Self {
            script,
            name: name.into(),
            used: Mutex::new(HashMap::new()),
        }
    }

    fn pick(&self, ctx: &RequestContext, prompt: &str) -> Option<Entry> {
        let mut used = self
            .used
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let mine = used
            .entry((ctx.session_id.clone(), ctx.agent_id.clone()))
            .or_insert_with(|| vec![false; self.script.entries.len()]);
        let (n, entry) = self
            .script
            .entries
            .iter()
            .enumerate()
            .find(|(n, entry)| !mine[*n] && entry.matches(ctx, prompt))?;
        if !entry.repeat {
            mine[n] = true;
        }
        Some(entry.clone())
    }
}

impl ModelClient for ScriptedModel {
    fn model(&self) -> &str {
        &self.name
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        if is_summary_request(&request) {
            // A compaction's summary is cadre's request, not the agent's
            // step: it uses no entry, so the script's steps stay in place.
            let response = ModelResponse {
                text: "(The scripted model keeps no summary; the state below is cadre's.)".into(),
                ..ModelResponse::default()
            };
            return Box::pin(futures::stream::iter([Ok(ModelEvent::Completed(response))]));
        }
        let ctx = &request.context;
        let prompt = request
            .messages()
            .filter_map(|m| match m {
                Message::User { content } => Some(content.as_str()),
                Message::Assistant { .. } | Message::Tool { .. } | Message::Compaction(_) => None,
            })
            .last()
            .unwrap_or_default();
        let Some(entry) = self.pick(ctx, prompt) else {
            let message = format!(
                "the model script has no response left for role '{}' in {} mode, turn {}, iteration {}",
                ctx.role, ctx.mode, ctx.turn, ctx.iteration
            );
            return Box::pin(futures::stream::once(async move {
                Err(ModelError::Script(message))
            }));
        };
        let response = answer(&entry, &request);
        let delay = Duration::from_millis(entry.delay_ms);
        let mut events: Vec<Result<ModelEvent, ModelError>> = pieces(&response.text)
            .into_iter()
            .map(|piece| Ok(ModelEvent::TextDelta(piece)))
            .collect();
        events.push(Ok(ModelEvent::Completed(response)));
        Box::pin(
            futures::stream::once(async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                futures::stream::iter(events)
            })
            .flatten(),
        )
    }
}

/// A compaction's summary request (`context::SUMMARY_TAG`, no tools).
fn is_summary_request(request: &ModelRequest) -> bool {
    request.tools.is_empty()
        && request.messages().any(|m| {
            matches!(m, Message::User { content } if content.starts_with(crate::context::SUMMARY_TAG))
        })
}

fn answer(entry: &Entry, request: &ModelRequest) -> ModelResponse {
    let ctx = &request.context;
    let text = expand(&entry.text, ctx);
    let tool_calls: Vec<ToolCall> = entry
        .tool_calls
        .iter()
        .enumerate()
        .map(|(n, call)| ToolCall {
            id: format!(
                "call_{}_{}_{}_{}",
                ctx.agent_id,
                ctx.turn,
                ctx.iteration,
                n + 1
            ),
            name: call.name.clone(),
            arguments: match (&call.raw_arguments, &call.arguments) {
                (Some(raw), _) => expand(raw, ctx),
                (None, Some(args)) => expand_value(toml_to_json(args), ctx).to_string(),
                (None, None) => "{}".to_string(),
            },
        })
        .collect();
    let prompt_chars: usize = request.system.len()
        + request
            .messages()
            .map(|m| match m {
                Message::User { content } | Message::Tool { content, .. } => content.len(),
                Message::Assistant {
                    content,
                    tool_calls,
                } => content.len() + tool_calls.iter().map(|c| c.arguments.len()).sum::<usize>(),
                Message::Compaction(record) => record.render().len(),
            })
            .sum::<usize>();
    let completion_chars = text.len() + tool_calls.iter().map(|c| c.arguments.len()).sum::<usize>();
    let usage = ProviderUsage {
        prompt_tokens: (prompt_chars / 4) as u64,
        completion_tokens: (completion_chars / 4).max(1) as u64,
        total_tokens: ((prompt_chars + completion_chars) / 4) as u64,
        ..ProviderUsage::default()
    };
    ModelResponse {
        finish_reason: Some(
            if tool_calls.is_empty() {
                "stop"
            } else {
                "tool_calls"
            }
            .into(),
        ),
        text,
        reasoning: None,
        tool_calls,
        usage: Some(usage),
    }
}

/// Splits text into a few deltas at word boundaries, as a server would stream it.
fn pieces(text: &str) -> Vec<String> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut current = String::new();
    for word in text.split_inclusive(' ') {
        current.push_str(word);
        if current.len() >= 24 {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

fn expand(text: &str, ctx: &RequestContext) -> String {
    if !text.contains("${") {
        return text.to_string();
    }
    text.replace("${plan_file}", &ctx.plan_file)
        .replace("${workspace}", &ctx.workspace)
        .replace("${session_id}", &ctx.session_id)
        .replace("${role}", &ctx.role)
        .replace("${agent_id}", &ctx.agent_id)
        .replace("${turn}", &ctx.turn.to_string())
        .replace("${iteration}", &ctx.iteration.to_string())
}

fn expand_value(value: Value, ctx: &RequestContext) -> Value {
    match value {
        Value::String(s) => Value::String(expand(&s, ctx)),
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| expand_value(v, ctx)).collect())
        }
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k, expand_value(v, ctx)))
                .collect(),
        ),
        other => other,
    }
}

fn toml_to_json(value: &toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => Value::from(*f),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.iter().map(toml_to_json).collect()),
        toml::Value::Table(table) => Value::Object(
            table
                .iter()
                .map(|(k, v)| (k.clone(), toml_to_json(v)))
                .collect(),
        ),
    }
}
