//! The small values events carry: a request's token usage, the project
//! instructions an agent was given, why a turn failed, a tool result's,
//! a sub-agent's and the session's status.

use serde::{Deserialize, Serialize};

/// Token counts as the provider reported them (LLM8). `prompt_tokens`
/// includes the cached ones and `completion_tokens` the reasoning ones, as
/// every OpenAI-compatible server counts them; the two details are shown
/// apart (and sent only when non-zero) so a reader can price them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the requests.
    pub prompt_tokens: u64,
    /// Tokens the model produced.
    pub completion_tokens: u64,
    /// Of `prompt_tokens`, those the server read from its prompt cache.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cached_tokens: u64,
    /// Of `completion_tokens`, those spent reasoning before the answer.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// What these tokens cost at the configured prices (`[prices."MODEL"]`),
    /// in dollars on the wire; sent only when some were priced.
    #[serde(default, skip_serializing_if = "crate::model::Cost::is_zero")]
    pub cost: crate::model::Cost,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Adds another request's usage.
    pub fn add(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_tokens += other.cached_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cost = self.cost + other.cost;
    }

    /// Every token, cached and reasoning ones included: what budgets count.
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// Which project instructions an agent was given, for `session.started`:
/// the files (not their text) and the text's hash, so a reader can tell
/// which version a session ran under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstructionsSummary {
    /// The files, in the order they were read.
    pub files: Vec<String>,
    /// SHA-256 of the text given, hex.
    pub sha256: String,
    /// The text's length in bytes.
    pub bytes: u64,
    /// Whether the cap cut it.
    pub truncated: bool,
}

impl InstructionsSummary {
    /// The summary of `instructions`; `None` when there are none.
    pub fn of(instructions: &crate::instructions::Instructions) -> Option<Self> {
        (!instructions.is_empty()).then(|| Self {
            files: instructions
                .files
                .iter()
                .map(|f| f.display().to_string())
                .collect(),
            sha256: instructions.sha256.clone(),
            bytes: instructions.text.len() as u64,
            truncated: instructions.truncated,
        })
    }
}

/// Why a turn failed; decides the exit code of a headless host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureCategory {
    /// The model server or the network failed.
    Infrastructure,
    /// The agent did not finish: iteration limit, a crash in the turn, a
    /// script that ran out.
    Agent,
    /// Someone cancelled the turn.
    Cancelled,
    /// The denial ledger paused autonomy in a host that cannot ask (P8).
    PausedByDenials,
}

/// The status of one tool result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The call ran and succeeded.
    Ok,
    /// The call was refused or failed; `error_code` says how.
    Error,
}

/// What a sub-agent is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AgentStatus {
    /// Working.
    Running,
    /// Waiting for a person to answer one of its approval prompts.
    WaitingForUser,
}

/// Whether the session is between turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activity {
    /// No turn runs.
    Idle,
    /// A turn runs.
    Running,
}

/// How a host ended its session, as `session.completed` (and `cadre exec`'s
/// JSON summary) says it: a word, with the exit code beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionOutcome {
    /// The work is done (a turn completed, or a goal was met).
    Success,
    /// The agent failed, a goal was blocked, or the host's own request was
    /// refused.
    Failed,
    /// The infrastructure failed (the model endpoint, the store), or a goal
    /// hit a usage limit.
    Error,
    /// A person cancelled the turn.
    Cancelled,
    /// Too many denials paused it.
    PausedByDenials,
    /// A goal is still open: active, paused or over its budget.
    Unfinished,
}

impl SessionOutcome {
    /// The word serialized and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            SessionOutcome::Success => "success",
            SessionOutcome::Failed => "failed",
            SessionOutcome::Error => "error",
            SessionOutcome::Cancelled => "cancelled",
            SessionOutcome::PausedByDenials => "paused_by_denials",
            SessionOutcome::Unfinished => "unfinished",
        }
    }
}

impl std::fmt::Display for SessionOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}
