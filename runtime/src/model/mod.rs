//! Model clients (LLM1–LLM4): one streaming trait, an OpenAI-compatible
//! client, a retry policy of cadre's own, and a scripted model.
//!
//! # Layout
//! - `assemble`: turns provider chunks (as loose JSON) into a [`ModelResponse`],
//!   tolerating the deviations of real OpenAI-compatible servers.
//! - `limits`: [`ResponseLimits`], how large and how long one response may be.
//! - `openai`: [`OpenAiClient`], async-openai over any base URL.
//! - `overflow`: recognising a context-window error from any known server.
//! - `params`: [`ModelParams`], what a model choice sends besides its name.
//! - `providers`: named model servers and their keys ([`providers::Providers`]).
//! - `retry`: [`RetryPolicy`] and [`Retrying`], the only place retries happen.
//! - `script`: [`Script`] and [`ScriptedModel`], scripted responses with no network.
//!
//! **Invariant:** only `openai` speaks HTTP.

mod assemble;
mod limits;
mod openai;
mod overflow;
pub mod params;
pub mod providers;
mod retry;
mod script;

#[cfg(test)]
mod tests;

use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt};
use serde::{Deserialize, Serialize};

pub use assemble::{Assembler, parse_completion};
pub use limits::ResponseLimits;
pub use openai::{OpenAiClient, OpenAiConfig};
pub use params::{Effort, MaxTokensField, ModelParams};
pub use retry::{RetryPolicy, Retrying};
pub use script::{DEMO_SCRIPT, Script, ScriptError, ScriptedModel};

use crate::message::{Message, ToolCall};
use crate::mode::Mode;
use crate::protocol::Usage;
use crate::tool::ToolSpec;

/// Who is asking, and where in its work it is. Real models ignore it; the
/// scripted model selects responses by it.
#[derive(Debug, Clone)]
pub struct RequestContext {
    /// The asking agent's id; each agent follows its own script cursor.
    pub agent_id: Arc<str>,
    /// The agent's role (`main` for a session's own turns).
    pub role: Arc<str>,
    /// The mode the request is made in.
    pub mode: Mode,
    /// The turn number within the agent's session (1-based).
    pub turn: u64,
    /// The request number within the turn (1-based).
    pub iteration: u32,
    /// The session id.
    pub session_id: Arc<str>,
    /// The workspace root.
    pub workspace: Arc<str>,
    /// The canonical plan file.
    pub plan_file: Arc<str>,
}

/// One chat-completion request.
///
/// The history is shared, not copied: a turn's requests borrow the session's
/// conversation and add only the turn's own messages.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// The system prompt.
    pub system: Arc<str>,
    /// The conversation before this turn.
    pub history: Arc<[Arc<Message>]>,
    /// The messages of this turn so far.
    pub turn: Vec<Arc<Message>>,
    /// A reminder sent after the conversation and never stored in it (M7).
    pub reminder: Option<Arc<str>>,
    /// The tools offered (after the definition gate).
    pub tools: Arc<[ToolSpec]>,
    /// Who asks.
    pub context: RequestContext,
    /// Overrides the client's model name for this request (the guardian's
    /// model, a role's model on a shared server).
    pub model: Option<Arc<str>>,
    /// Make exactly one attempt: [`Retrying`] passes it through untouched
    /// (the permission guardian must send exactly one review request).
    pub single_attempt: bool,
}

impl ModelRequest {
    /// The conversation, history first.
    pub fn messages(&self) -> impl Iterator<Item = &Message> {
        self.history
            .iter()
            .chain(self.turn.iter())
            .map(AsRef::as_ref)
    }
}

/// Token counts exactly as a provider reported them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct ProviderUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// As sent, even where it is not the sum.
    pub total_tokens: u64,
    /// Of the prompt tokens, those read from the server's prompt cache
    /// (`prompt_tokens_details.cached_tokens`, DeepSeek's
    /// `prompt_cache_hit_tokens`, Mistral's `num_cached_tokens`, Together's
    /// top-level `cached_tokens`).
    #[serde(default)]
    pub cached_tokens: u64,
    /// Of the completion tokens, those spent reasoning
    /// (`completion_tokens_details.reasoning_tokens`).
    #[serde(default)]
    pub reasoning_tokens: u64,
}

impl From<ProviderUsage> for Usage {
    /// Most servers count reasoning within `completion_tokens`; xAI counts
    /// it apart (its total is prompt + completion + reasoning). Either way
    /// `Usage::completion_tokens` includes it, so budgets count every token
    /// the model produced.
    fn from(u: ProviderUsage) -> Self {
        let apart = u.reasoning_tokens > u.completion_tokens
            || (u.reasoning_tokens > 0
                && u.total_tokens == u.prompt_tokens + u.completion_tokens + u.reasoning_tokens);
        Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: match apart {
                true => u.completion_tokens + u.reasoning_tokens,
                false => u.completion_tokens,
            },
            cached_tokens: u.cached_tokens,
            reasoning_tokens: u.reasoning_tokens,
        }
    }
}

/// One complete model answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelResponse {
    /// The visible text.
    pub text: String,
    /// Reasoning, when the provider sends it separately.
    pub reasoning: Option<String>,
    /// Tool calls, in order of first appearance; every one has a non-empty id.
    pub tool_calls: Vec<ToolCall>,
    /// The last finish reason the provider sent, as sent.
    pub finish_reason: Option<String>,
    /// The provider's usage, when it sent one.
    pub usage: Option<ProviderUsage>,
}

/// What a model stream yields: deltas for live display, then exactly one
/// `Completed` (or an error), then the end.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelEvent {
    /// Visible text as it arrives.
    TextDelta(String),
    /// Reasoning as it arrives.
    ReasoningDelta(String),
    /// The attempt failed and will be retried: discard the deltas seen so far.
    Retrying {
        /// The attempt that failed (1-based).
        attempt: u32,
        /// The wait before the next one.
        delay: Duration,
        /// What failed.
        reason: String,
    },
    /// The server rejected a parameter (a 400 naming it): the request was
    /// sent once more without it, and the client leaves it out from now on.
    ParamDropped {
        /// The body field left out (`reasoning_effort`, `temperature`, …).
        param: String,
        /// The server's error, shortened.
        reason: String,
    },
    /// The whole answer.
    Completed(ModelResponse),
}

/// A model failure. Each variant says whether retrying may help.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// The server answered with an error status. Retryable for 408, 409,
    /// 429 (unless the quota is exhausted) and 5xx.
    #[error("HTTP {status}: {message}")]
    Http {
        /// The status code.
        status: u16,
        /// The server's message.
        message: String,
        /// The server's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
        /// The error type or code the server sent, if any.
        kind: Option<String>,
    },
    /// The connection failed or timed out. Retryable.
    #[error("connection failed: {0}")]
    Transport(String),
    /// The stream broke off mid-way. Retryable.
    #[error("stream interrupted: {0}")]
    Interrupted(String),
    /// The provider reported an error inside a successful response. Not retryable.
    #[error("provider error: {0}")]
    Provider(String),
    /// The response could not be understood. Not retryable.
    #[error("malformed response: {0}")]
    Malformed(String),
    /// The scripted model has no response for this request. Not retryable.
    #[error("{0}")]
    Script(String),
    /// The request could not be built. Not retryable.
    #[error("invalid request: {0}")]
    Request(String),
    /// The response went past a [`ResponseLimits`] bound (its size or its
    /// wall time) and was abandoned. Not retryable: the same request would
    /// likely do it again.
    #[error("response limit: {0}")]
    Limit(String),
    /// Retryable failures went on past the retry policy. Not retryable again.
    #[error("gave up after {attempts} attempts: {last}")]
    RetriesExhausted {
        /// Requests made.
        attempts: u32,
        /// The last failure.
        last: Box<ModelError>,
    },
}

impl ModelError {
    /// Whether another attempt may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Http { status, kind, .. } => match status {
                408 | 409 | 500..=599 => true,
                429 => kind.as_deref() != Some("insufficient_quota"),
                _ => false,
            },
            ModelError::Transport(_) | ModelError::Interrupted(_) => true,
            ModelError::Provider(_)
            | ModelError::Malformed(_)
            | ModelError::Script(_)
            | ModelError::Request(_)
            | ModelError::Limit(_)
            | ModelError::RetriesExhausted { .. } => false,
        }
    }

    /// Whether the server refused the request as longer than the model's
    /// context window (`model/overflow.rs`): the turn compacts and retries
    /// once (CX2); a request that still does not fit is the task's failure,
    /// never the infrastructure's.
    pub fn is_context_overflow(&self) -> bool {
        match self {
            ModelError::Http {
                status,
                message,
                kind,
                ..
            } => {
                matches!(status, 400 | 413 | 422)
                    && overflow::is_overflow(Some(*status), kind.as_deref(), message)
            }
            ModelError::Provider(message) => overflow::is_overflow(None, None, message),
            ModelError::RetriesExhausted { last, .. } => last.is_context_overflow(),
            ModelError::Transport(_)
            | ModelError::Interrupted(_)
            | ModelError::Malformed(_)
            | ModelError::Script(_)
            | ModelError::Request(_)
            | ModelError::Limit(_) => false,
        }
    }

    /// The context window an overflow error states, when it states one.
    pub fn stated_window(&self) -> Option<u64> {
        match self {
            ModelError::Http { message, .. } | ModelError::Provider(message) => {
                overflow::stated_window(message)
            }
            ModelError::RetriesExhausted { last, .. } => last.stated_window(),
            ModelError::Transport(_)
            | ModelError::Interrupted(_)
            | ModelError::Malformed(_)
            | ModelError::Script(_)
            | ModelError::Request(_)
            | ModelError::Limit(_) => None,
        }
    }

    /// Whether this is an infrastructure failure that retrying later may
    /// fix (exit code 75), as opposed to one that needs a change first.
    pub fn is_transient(&self) -> bool {
        match self {
            ModelError::RetriesExhausted { last, .. } => last.is_retryable(),
            other => other.is_retryable(),
        }
    }
}

/// The stream a model returns.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelEvent, ModelError>> + Send>>;

/// A chat model with tool calling (LLM1).
///
/// `stream` starts lazily: nothing is sent until the stream is polled, and
/// dropping the stream abandons the request (closing the connection).
pub trait ModelClient: Send + Sync + 'static {
    /// The model's name, for display.
    fn model(&self) -> &str;

    /// Streams one completion.
    fn stream(&self, request: ModelRequest) -> ModelStream;
}

/// Drains a stream into its final response, ignoring deltas.
pub async fn complete(mut stream: ModelStream) -> Result<ModelResponse, ModelError> {
    while let Some(event) = stream.next().await {
        match event? {
            ModelEvent::Completed(response) => return Ok(response),
            ModelEvent::TextDelta(_)
            | ModelEvent::ReasoningDelta(_)
            | ModelEvent::Retrying { .. }
            | ModelEvent::ParamDropped { .. } => {}
        }
    }
    Err(ModelError::Malformed(
        "the model stream ended without a response".into(),
    ))
}
