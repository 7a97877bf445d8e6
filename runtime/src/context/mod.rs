//! The context window (CX1–CX4), pure: how large an agent's window is, how
//! full a request is, and what compaction sends instead of the whole
//! conversation.
//!
//! The turn machine (`turn.rs`) asks these functions before every model
//! request; the actors only perform what it decides. `docs/context.md`
//! states the rules for users.
//!
//! # Layout
//! - this file: [`ContextBudget`] (the window and the threshold), the
//!   built-in table of known windows, the token estimate, and the stored
//!   [`Compaction`] record.
//! - `compact`: the conversation a request sends ([`view`]), where it may be
//!   cut without splitting a call from its result, the fallback's stubs, and
//!   the summary request's transcript.
//! - `pinned`: what a compaction re-states from cadre's own records (goal,
//!   gaps, todo list, recent commands, role and mode).
//! - `trail`: the part of it read from the messages themselves, kept as
//!   they are recorded, in bounded memory ([`Trail`]).
//! - `conversation`: what an agent holds of its stored conversation: the
//!   view its next request sends and the trail ([`Conversation`]).
//! - `history`: what became of each stored message ([`fates`]).

mod compact;
mod conversation;
mod history;
mod pinned;
mod trail;

#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

pub use compact::{
    SUMMARY_SYSTEM, SUMMARY_TAG, fit_by_stubs, keep_from, summary_instruction, transcript,
    valid_cuts, view,
};
pub use conversation::Conversation;
pub use history::{Fate, fates};
pub use pinned::{Pinned, goal_state};
pub use trail::{CHANGED_FILES, RECENT_COMMANDS, Trail};

use crate::message::Message;

/// The window assumed when neither the configuration nor the table knows
/// the model: today's common size for hosted models.
pub const DEFAULT_WINDOW: u64 = 128_000;

/// Compact before a request estimated past this share of the window.
pub const DEFAULT_THRESHOLD_PERCENT: u8 = 80;

/// The most bytes of a model-written summary that are kept: a summary is a
/// bounded record, not a second transcript.
pub const SUMMARY_MAX_BYTES: usize = 12_000;

/// An agent's context budget (CX1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextBudget {
    /// The model's context window, in tokens.
    pub window: u64,
    /// Compact before a request estimated past this percentage of it.
    pub threshold_percent: u8,
    /// The window is cadre's guess ([`DEFAULT_WINDOW`]): neither configured
    /// nor known for the model. A request still past it after compacting
    /// is sent anyway, and the server's answer decides; with a known window
    /// it ends the turn without asking.
    pub assumed: bool,
}

impl Default for ContextBudget {
    fn default() -> Self {
        Self {
            window: DEFAULT_WINDOW,
            threshold_percent: DEFAULT_THRESHOLD_PERCENT,
            assumed: true,
        }
    }
}

impl ContextBudget {
    /// The budget for `model`: the configured window, else the built-in
    /// table's, else [`DEFAULT_WINDOW`]; the threshold clamped to 10..=95.
    pub fn resolve(configured: Option<u64>, model: Option<&str>, threshold: Option<u8>) -> Self {
        let known = configured
            .filter(|w| *w > 0)
            .or_else(|| model.and_then(known_window));
        Self {
            window: known.unwrap_or(DEFAULT_WINDOW),
            assumed: known.is_none(),
            threshold_percent: threshold.unwrap_or(DEFAULT_THRESHOLD_PERCENT).clamp(10, 95),
        }
    }

    /// This budget with a window that is known (configured, or stated).
    pub fn with_window(self, window: u64) -> Self {
        Self {
            window,
            assumed: false,
            ..self
        }
    }

    /// The budget after a switch to `model` (`/model`): the table's window
    /// when it knows the model, else this one (the configured window was
    /// for the model configured with it, but nothing better is known).
    pub fn for_model(self, model: &str) -> Self {
        match known_window(model) {
            Some(window) => self.with_window(window),
            None => self,
        }
    }

    /// The estimate past which a request is compacted first.
    pub fn threshold(&self) -> u64 {
        self.window
            .saturating_mul(u64::from(self.threshold_percent))
            / 100
    }

    /// The tokens of recent conversation a model compaction keeps verbatim:
    /// a quarter of the window, so the record and what follows fit well
    /// under the threshold.
    pub fn keep_tokens(&self) -> u64 {
        self.window / 4
    }
}

/// Windows of well-known models, by name prefix (longest match wins).
/// Input windows as the providers document them; a configured
/// `context_window` overrides.
const KNOWN: &[(&str, u64)] = &[
    ("gpt-3.5-turbo", 16_385),
    ("gpt-4", 8_192),
    ("gpt-4-32k", 32_768),
    ("gpt-4-turbo", 128_000),
    ("gpt-4o", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4.5", 128_000),
    ("gpt-5", 272_000),
    ("gpt-oss", 131_072),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
    ("gemini", 1_048_576),
    ("deepseek", 128_000),
    ("qwen3", 262_144),
    ("qwen2.5", 32_768),
    ("llama-3", 128_000),
    ("llama3", 128_000),
    ("mistral-large", 128_000),
    ("codestral", 256_000),
    ("glm-4", 128_000),
    ("kimi-k2", 262_144),
    ("grok", 256_000),
];

/// The table's window for a model name (a provider prefix such as
/// `openai/` is ignored), when the name is known.
pub fn known_window(model: &str) -> Option<u64> {
    let name = model.rsplit('/').next().unwrap_or(model).to_lowercase();
    KNOWN
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, window)| *window)
}

/// Tokens for `bytes` of text: a quarter, rounded up. Real tokenizers give
/// 3–4.5 bytes a token for English and code; the provider's own count,
/// when it sent one, corrects the estimate (see the turn machine).
pub fn tokens_of(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

/// The bytes a message costs in a request: its text, its calls, and a
/// little for the wire's envelope.
pub fn message_bytes(message: &Message) -> usize {
    const ENVELOPE: usize = 16;
    ENVELOPE
        + match message {
            Message::User { content } | Message::Tool { content, .. } => content.len(),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                content.len()
                    + tool_calls
                        .iter()
                        .map(|c| c.name.len() + c.arguments.len() + c.id.len() + 32)
                        .sum::<usize>()
            }
            Message::Compaction(record) => record.render().len(),
        }
}

/// About how many bytes `value` takes as JSON, without writing it (a tool
/// schema is measured once per turn, for every agent).
pub fn json_bytes(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Null | Value::Bool(_) => 5,
        Value::Number(_) => 8,
        Value::String(s) => s.len() + 2,
        Value::Array(items) => 2 + items.iter().map(|v| json_bytes(v) + 1).sum::<usize>(),
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| k.len() + 4 + json_bytes(v))
                .sum::<usize>()
        }
    }
}

/// The estimated tokens of a conversation.
pub fn estimate<'a>(messages: impl IntoIterator<Item = &'a Message>) -> u64 {
    tokens_of(messages.into_iter().map(message_bytes).sum())
}

/// How full an agent's context is, as `turn.completed` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextUsage {
    /// Tokens the conversation takes now (the provider's count of the last
    /// request plus an estimate of what came after).
    pub used: u64,
    /// The model's window.
    pub window: u64,
}

impl ContextUsage {
    /// `used` as a whole percentage of the window.
    pub fn percent(&self) -> u64 {
        (self.used.saturating_mul(100))
            .checked_div(self.window)
            .unwrap_or(0)
    }
}

/// How a compaction was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionKind {
    /// The model summarised the replaced messages.
    Model,
    /// Deterministic: old tool outputs became one-line stubs (the summary
    /// request failed, or the window was already exceeded).
    Fallback,
}

impl CompactionKind {
    /// The name written to stream-json.
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionKind::Model => "model",
            CompactionKind::Fallback => "fallback",
        }
    }
}

/// One tool output replaced by a line naming its call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stub {
    /// The call whose output it replaces.
    pub call_id: String,
    /// What the model reads instead.
    pub line: String,
}

/// A compaction, stored in the conversation as one message (CX4).
///
/// From this message on, a request sends this record followed by the last
/// `keep` messages of the conversation as it was sent before it, with the
/// stubbed outputs replaced ([`view`]). The messages it replaces stay
/// stored: the full history is kept and forkable, and a resume rebuilds the
/// same compacted form from the same rows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Compaction {
    /// Model summary or fallback.
    pub kind: CompactionKind,
    /// The model's summary of what the record replaces; a fallback carries
    /// the previous record's forward.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// What cadre re-states from its own records ([`Pinned::render`]),
    /// never from the model's prose.
    pub pinned: String,
    /// How many messages before the record stay verbatim.
    pub keep: usize,
    /// Outputs replaced by stubs, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stubs: Vec<Stub>,
    /// The estimated tokens before.
    pub tokens_before: u64,
    /// The estimated tokens after.
    pub tokens_after: u64,
}

/// The first line of every compaction record, so a model (and a person
/// reading a transcript) knows what it is.
pub const RECORD_TAG: &str = "[cadre: context compacted]";

impl Compaction {
    /// The record as the model reads it (a user message).
    pub fn render(&self) -> String {
        let mut text = format!(
            "{RECORD_TAG} Earlier messages of this conversation were compacted to fit the \
             model's context window; they are stored, not lost. Continue the task from here.\n"
        );
        if let Some(summary) = &self.summary {
            text.push_str("\n## Summary of the earlier conversation\n");
            text.push_str(summary.trim());
            text.push('\n');
        }
        text.push_str("\n## State cadre keeps (authoritative)\n");
        text.push_str(&self.pinned);
        if !self.stubs.is_empty() {
            text.push_str(&format!(
                "\n{} older tool outputs below were shortened to one line; run the tool again if \
                 you need one.\n",
                self.stubs.len()
            ));
        }
        text
    }
}
