//! Hooks (H1): commands the user configures to run at points of an
//! agent's life, at every hop of the tree (a session, its sub-agents, its
//! verifier, workflow steps, steps on nodes).
//!
//! A hook gets one JSON object on stdin (the event) and answers with its
//! exit code and optional JSON on stdout. A `pre_tool_use` hook is a layer
//! of the permission order, after the rules and before the floor: it may
//! deny a call or have a person asked, never allow what another layer
//! refuses (`permission::engine::evaluate_with_hook`). `docs/hooks.md`.
//!
//! # Layout
//! - `config`: [`HookSet`], `[[hooks.EVENT]]` in config, and
//!   [`HookEvent`].
//! - `event`: the JSON a hook reads ([`Who`], [`tool_event`]).
//! - `matcher`: which calls a hook's `matcher` names (rule syntax).
//! - `answer`: what a hook's exit code and stdout say ([`HookOutcome`]),
//!   and several hooks' answers merged ([`HookVerdict`], [`continuation`]).
//! - `pre`: the `pre_tool_use` layer of one call.
//! - `prompt`: what `user_prompt_submit` hooks conclude about a person's
//!   message ([`PromptVerdict`]), and context added to a message.
//! - `run`: a hook's command under the sandbox, with its timeout.

mod answer;
mod config;
mod event;
mod matcher;
mod pre;
mod prompt;
mod run;

pub use answer::{
    HookAnswer, HookDecision, HookOutcome, HookVerdict, additional_context, continuation,
    read_answer, report_failures, verdict,
};
pub use config::{DEFAULT_HOOK_TIMEOUT_SECS, HookEvent, HookSet, HookSpec};
pub use event::{Who, base, tool_event, with};
pub use matcher::{MatcherError, matches};
pub use pre::{matching, pre_tool_use};
pub use prompt::{PromptVerdict, prompt_verdict, with_context};
pub use run::{HookEnv, run_hook, run_hooks};

/// What the turn's hooks answer: a message or a context for the model, or
/// nothing.
pub type HookFuture = std::pin::Pin<Box<dyn std::future::Future<Output = Option<String>> + Send>>;

/// The hooks a turn runs itself, given to it by its agent's host (a session
/// actor): the stop hooks after a final answer, the `post_tool_use` hooks
/// after each call.
pub trait TurnHooks: Send + Sync + 'static {
    /// The agent answered without calling a tool: the message its stop
    /// hooks (`stop`, `subagent_stop` or `step_stop`, by what the agent is)
    /// send back to keep it working, or `None` to let it stop.
    fn stop(&self, answer: String) -> HookFuture;

    /// A call ran (or failed): the `additional_context` its matching
    /// `post_tool_use` hooks give the model, if any.
    fn after_tool(
        &self,
        tool: std::sync::Arc<dyn crate::tool::Tool>,
        args: serde_json::Value,
        safety: crate::tool::Safety,
        result: Result<String, crate::tool::ToolError>,
    ) -> HookFuture;

    /// The conversation is about to be compacted with a summary: its
    /// `pre_compact` hooks run (and are reported) before the summary is
    /// asked for; they cannot stop it. `tokens` is the conversation's
    /// estimate, `window` the model's context window.
    fn pre_compact(&self, tokens: u64, window: u64) -> HookFuture {
        let _ = (tokens, window);
        Box::pin(async { None })
    }
}

impl std::fmt::Debug for dyn TurnHooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnHooks")
    }
}

/// How many times stop hooks may keep one turn going after a final answer
/// (the breaker): past it the answer stands.
pub const MAX_STOP_CONTINUATIONS: u32 = 8;
