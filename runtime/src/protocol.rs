//! The session protocol: submissions in ([`Op`]), events out ([`Event`]).
//!
//! Both are serde-tagged enums with no I/O. The text renderer, the
//! stream-json writer and the interactive shell are consumers of one event
//! stream; `docs/stream-json.md` documents the wire form of [`Event`], whose
//! version is [`STREAM_VERSION`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::mode::Mode;
use crate::permission::{Decision, Posture};
use crate::plan::lifecycle::{ModeIntent, QuestionnaireAnswer, QuestionnaireKind};
use crate::tool::ErrorCode;

mod forward;
mod observe;
mod sources;
mod status;

pub use crate::context::{CompactionKind, ContextUsage};
pub use forward::{FORWARDED_OUTPUT_BYTES, Nested};
pub use observe::TurnEvent;
pub use sources::{ModeSource, ModelSource};
pub use status::{
    Activity, AgentStatus, FailureCategory, InstructionsSummary, SessionOutcome, ToolStatus, Usage,
};

/// The stream-json version carried by `session.started`.
pub const STREAM_VERSION: u32 = 1;

/// A submission to a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
// Not `#[non_exhaustive]`: hosts build ops, and the agent actor's match over
// them must stay exhaustive, so a new op cannot go unhandled.
pub enum Op {
    /// A user message. Answered by `input.admitted` once it is stored, then
    /// (at once, or after the turns queued before it) `turn.started` and
    /// `turn.completed` or `turn.failed`; by `op.rejected` when refused.
    UserInput {
        /// The message.
        text: String,
        /// A mode change that takes effect with this message, in its
        /// admission transaction (PL1). Refused while a turn runs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        intent: Option<ModeIntent>,
    },
    /// Switch the mode. Answered by `mode.changed`, or `op.rejected` while a
    /// turn runs (M6).
    SetMode {
        /// The new mode.
        mode: Mode,
    },
    /// Cancel the running turn. Answered by `turn.failed` with category
    /// `cancelled`, or `op.rejected` when nothing runs.
    Cancel,
    /// Ask for the session's state. Answered by `session.status`.
    Status,
    /// Switch the permission posture. Answered by `posture.changed`, or
    /// `op.rejected` while a turn runs (M6).
    SetPosture {
        /// The new posture.
        posture: Posture,
    },
    /// Switch the model the next turns ask (a name the session's model
    /// client sends, such as `gpt-4.1-mini`). Answered by `model.changed`,
    /// or `op.rejected` while a turn runs (M6) or when the name is empty.
    SetModel {
        /// The model's name.
        model: String,
    },
    /// Answer an approval prompt. Answered by `approval.resolved`, or
    /// `op.rejected` when no prompt has that id.
    Approve {
        /// The id from `approval.requested`.
        id: String,
        /// The answer.
        decision: ApprovalDecision,
        /// What the person said with it (a denial's "do it this way
        /// instead"), which the model reads with the decision.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// Answer a plan questionnaire (PL5). Answered by
    /// `questionnaire.answered`, or `op.rejected` when no such questionnaire
    /// waits.
    Answer {
        /// The questionnaire's id (from `questionnaire.opened`).
        id: String,
        /// The answer.
        answer: QuestionnaireAnswer,
    },
    /// Plan mode by hand (PL1). `on` is answered by `plan.entered`, `off` by
    /// `mode.changed`, `status` by `plan.status`, `view` by `plan.view`;
    /// any of them by `op.rejected` when it cannot be done now.
    Plan {
        /// What to do.
        action: PlanAction,
    },
    /// Put the workspace back as a snapshot recorded it (ST4); the
    /// conversation is kept as it is. Answered by `workspace.restored`, or
    /// `op.rejected` while a turn runs or when there is no such snapshot.
    Restore {
        /// The snapshot's id, or a unique prefix of four or more characters.
        snapshot: String,
        /// Report what would change, and change nothing.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        dry_run: bool,
    },
    /// The session's goal (G1): set, show, pause, resume, edit, budget,
    /// mark, clear. Answered by `goal.updated` (`goal.cleared` for a
    /// clear), or `op.rejected` when the goal cannot do it.
    Goal {
        /// What to do.
        action: Box<crate::goal::GoalAction>,
    },
    /// Compact the conversation now (CX2, `/compact`): before the running
    /// turn's next model request, or before the next turn's first. Answered
    /// by `context.compacted` then (nothing when there is nothing to
    /// compact yet).
    Compact,
    /// Cancel whatever runs, drop the queue and stop the session. Answered
    /// by `session.stopped`.
    Shutdown,
}

/// A submission: an [`Op`] with the host's id for it. Every event the op
/// causes (its direct answer, and for a user message everything its turn
/// emits) carries the same id back in its [`Envelope`], so a host with many
/// requests in flight can tell whose events are whose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submission {
    /// The host's id for this submission; none when it does not care.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// What to do.
    #[serde(flatten)]
    pub op: Op,
}

/// An event as a host receives it: the event, and the id of the submission
/// that caused it when the host gave one. On the wire (stream-json) the id
/// is an `op_id` field beside the event's own, absent when there is none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// The id of the submission that caused the event.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op_id: Option<String>,
    /// The event.
    #[serde(flatten)]
    pub event: Event,
}

impl Op {
    /// A user message with no mode intent.
    pub fn user(text: impl Into<String>) -> Op {
        Op::UserInput {
            text: text.into(),
            intent: None,
        }
    }
}

/// `/plan on|off|status|view`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanAction {
    /// Enter Plan mode now.
    On,
    /// Leave Plan mode (back to Work); a pending plan questionnaire is withdrawn.
    Off,
    /// Report the mode, the plan file and any pending questionnaire.
    Status,
    /// Show the plan file.
    View,
}

/// A person's answer to an approval prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run this call.
    AllowOnce,
    /// Run this call, and the same call again without asking, for the rest
    /// of the session.
    AllowSession,
    /// Do not run it.
    Deny,
}

/// How an approval prompt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalOutcome {
    /// Allowed once.
    AllowOnce,
    /// Allowed for the session.
    AllowSession,
    /// Denied.
    Deny,
    /// The turn ended (cancel, crash) before anyone answered.
    Withdrawn,
}

/// The plan lines a `questionnaire.opened` carries for the person who
/// answers it (the whole plan is in its file and `/plan view`).
pub const QUESTION_HEAD_LINES: usize = 40;

/// Something that happened in a session. One JSON object per line in
/// stream-json, tagged by `type`. New events are added within a version, so
/// hosts match with a fallback arm (`#[non_exhaustive]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum Event {
    /// The session is ready. Always first.
    #[serde(rename = "session.started")]
    SessionStarted {
        /// The stream-json version ([`STREAM_VERSION`]).
        version: u32,
        /// The session id.
        session_id: String,
        /// The starting mode.
        mode: Mode,
        /// The permission posture.
        posture: Posture,
        /// The workspace root.
        workspace: String,
        /// The model the session talks to.
        model: String,
        /// What confines `bash` commands: `landlock-abi-<n>` (with
        /// ` (partial)` when the kernel lacks some rights), or
        /// `unavailable: <why>` when only the reader decides (P9).
        sandbox: String,
        /// Each wall of the sandbox and how far it holds on this host
        /// (`enforced`, `partial`, `unavailable`), with what builds it or
        /// why it is missing; absent from a host that does not report them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        sandbox_walls: Vec<crate::sandbox::WallReport>,
        /// Where the starting mode came from. The session cannot tell a
        /// flag from a saved default, so the host that chose the mode fills
        /// it in (the `cadre` binary always does); absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode_source: Option<ModeSource>,
        /// Where the model came from; filled in by the host, like
        /// `mode_source`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        model_source: Option<ModelSource>,
        /// The project instructions (`AGENTS.md`) the session read at this
        /// start (CX5); absent when there were none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        instructions: Option<InstructionsSummary>,
    },
    /// A user message was admitted (stored, in a session with a store).
    #[serde(rename = "input.admitted")]
    InputAdmitted {
        /// Messages waiting for a turn, this one included; 0 when its turn
        /// starts at once.
        queue_length: usize,
    },
    /// A turn began.
    #[serde(rename = "turn.started")]
    TurnStarted {
        /// The turn id (1, 2, … within the session).
        turn_id: u64,
        /// The mode the turn runs in.
        mode: Mode,
    },
    /// A piece of streamed assistant text, for live display. The complete
    /// text follows in `assistant.message`.
    #[serde(rename = "assistant.delta")]
    AssistantDelta {
        /// The turn.
        turn_id: u64,
        /// The new text.
        text: String,
    },
    /// The model's complete text of one response.
    #[serde(rename = "assistant.message")]
    AssistantMessage {
        /// The turn.
        turn_id: u64,
        /// The text.
        text: String,
    },
    /// The model's reasoning of one response, when the provider sends it.
    #[serde(rename = "assistant.reasoning")]
    AssistantReasoning {
        /// The turn.
        turn_id: u64,
        /// The reasoning text.
        text: String,
    },
    /// The model asked for a tool call.
    #[serde(rename = "tool.call")]
    ToolCall {
        /// The turn.
        turn_id: u64,
        /// The call id; `tool.result` carries the same.
        call_id: String,
        /// The tool name as the model sent it.
        name: String,
        /// The arguments: the parsed object, or the raw text when it is not JSON.
        arguments: Value,
    },
    /// A tool call finished, was refused, or failed.
    #[serde(rename = "tool.result")]
    ToolResult {
        /// The turn.
        turn_id: u64,
        /// The call this answers.
        call_id: String,
        /// The tool name.
        name: String,
        /// `ok` or `error`.
        status: ToolStatus,
        /// Set exactly when `status` is `error`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_code: Option<ErrorCode>,
        /// The output or error message, truncated for display.
        output: String,
    },
    /// A tool call of another agent of the tree (a sub-agent, a goal's
    /// verifier), forwarded to the host so a person sees what it does; its
    /// own `tool.call` stays in its own stream, which builds its report.
    #[serde(rename = "agent.tool_call")]
    AgentToolCall {
        /// The agent that made the call (`1`, `1.2`).
        agent_id: String,
        /// The call id; `agent.tool_result` carries the same.
        call_id: String,
        /// The tool name as the model sent it.
        name: String,
        /// The arguments, as in `tool.call`.
        arguments: Value,
    },
    /// The result of an `agent.tool_call`, its output cut to
    /// [`FORWARDED_OUTPUT_BYTES`].
    #[serde(rename = "agent.tool_result")]
    AgentToolResult {
        /// The agent that made the call.
        agent_id: String,
        /// The call this answers.
        call_id: String,
        /// The tool name.
        name: String,
        /// `ok` or `error`.
        status: ToolStatus,
        /// Set exactly when `status` is `error`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error_code: Option<ErrorCode>,
        /// The start of the output or error message.
        output: String,
    },
    /// A model request failed in a way worth retrying; it is retried after `delay_ms`.
    #[serde(rename = "model.retry")]
    ModelRetry {
        /// The turn.
        turn_id: u64,
        /// The attempt that failed (1-based).
        attempt: u32,
        /// The wait before the next attempt.
        delay_ms: u64,
        /// What failed.
        reason: String,
    },
    /// The server rejected a model parameter (a 400 naming it): the
    /// request was sent again without it, and later requests leave it out
    /// (LLM7).
    #[serde(rename = "model.param_dropped")]
    ModelParamDropped {
        /// The turn.
        turn_id: u64,
        /// The body field left out (`reasoning_effort`, `temperature`, …).
        param: String,
        /// The server's error, shortened.
        reason: String,
    },
    /// The turn ended with a final answer.
    #[serde(rename = "turn.completed")]
    TurnCompleted {
        /// The turn.
        turn_id: u64,
        /// Tokens used by the turn's model requests.
        usage: Usage,
        /// Model requests the turn made.
        iterations: u32,
        /// How full the agent's context window is now (CX1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        context: Option<ContextUsage>,
    },
    /// The agent's conversation was compacted to fit its context window
    /// (CX2): what is sent from now on is a compaction record and the
    /// recent messages; everything stays stored.
    #[serde(rename = "context.compacted")]
    ContextCompacted {
        /// The agent (`main`, `1`, `1.2`).
        agent: String,
        /// The estimated tokens of the conversation before.
        tokens_before: u64,
        /// The estimated tokens after.
        tokens_after: u64,
        /// A model-written summary, or the deterministic fallback.
        kind: CompactionKind,
    },
    /// The turn ended without a final answer.
    #[serde(rename = "turn.failed")]
    TurnFailed {
        /// The turn.
        turn_id: u64,
        /// Why, for machines.
        category: FailureCategory,
        /// Why, for people.
        message: String,
        /// Whether retrying later may succeed (a retryable infrastructure failure).
        retryable: bool,
        /// Tokens used before the failure.
        usage: Usage,
        /// Model requests made before the failure.
        iterations: u32,
    },
    /// A permission decision not made by a person (P6); `line` is its
    /// transcript form, e.g. `Auto-Review allowed 'bash' (low risk, model guardian): …`.
    #[serde(rename = "permission.decision")]
    PermissionDecision {
        /// The agent whose call it was (`main` for the session itself).
        agent_id: String,
        /// The call.
        call_id: String,
        /// The tool.
        tool: String,
        /// The decision and who made it.
        #[serde(flatten)]
        decision: Decision,
        /// The one-line transcript form.
        line: String,
    },
    /// A call waits for a person's answer ([`Op::Approve`]).
    #[serde(rename = "approval.requested")]
    ApprovalRequested {
        /// Stable id: `approval:<n>`, or `agent:<id>:approval:<n>` for a sub-agent's.
        id: String,
        /// The asking agent.
        agent_id: String,
        /// The call.
        call_id: String,
        /// The tool.
        tool: String,
        /// The exact arguments.
        arguments: Value,
        /// Why a person is asked.
        reason: String,
        /// What the call would change, for a person to judge: a file
        /// tool's unified diff (bounded, with its line counts); absent for
        /// a tool that has none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        preview: Option<String>,
    },
    /// An approval prompt ended.
    #[serde(rename = "approval.resolved")]
    ApprovalResolved {
        /// The prompt's id.
        id: String,
        /// How it ended.
        outcome: ApprovalOutcome,
    },
    /// The posture changed (by the user, or by the denial ledger's fallback).
    #[serde(rename = "posture.changed")]
    PostureChanged {
        /// The new posture.
        posture: Posture,
    },
    /// The model the next turns ask changed.
    #[serde(rename = "model.changed")]
    ModelChanged {
        /// The model's name.
        model: String,
    },
    /// The denial ledger paused autonomy (P8).
    #[serde(rename = "autonomy.paused")]
    AutonomyPaused {
        /// Why.
        reason: String,
        /// Ask, when the host fell back to it; absent when the turn ends instead.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fallback: Option<Posture>,
    },
    /// A sub-agent started.
    #[serde(rename = "agent.spawned")]
    AgentSpawned {
        /// Its id (`1`, `2`, … under the session; `1.1` under agent `1`).
        agent_id: String,
        /// Its role.
        role: String,
        /// Its model.
        model: String,
        /// Its posture (never wider than its parent's).
        posture: Posture,
        /// Its depth (1 for the session's own sub-agents).
        depth: u32,
    },
    /// A sub-agent's state changed.
    #[serde(rename = "agent.status")]
    AgentStatusChanged {
        /// The agent.
        agent_id: String,
        /// `running` or `waiting_for_user`.
        status: AgentStatus,
    },
    /// A sub-agent's run ended.
    #[serde(rename = "agent.completed")]
    AgentCompleted {
        /// The agent.
        agent_id: String,
        /// `completed`, `failed`, `cancelled` or `paused_by_denials`.
        status: String,
        /// Its final answer.
        summary: String,
        /// False when it changed files without running a check.
        verified: bool,
    },
    /// Plan mode was entered; an earlier plan was moved to `backup`.
    #[serde(rename = "plan.entered")]
    PlanEntered {
        /// The canonical plan file.
        plan_path: String,
        /// Where an earlier plan went, if there was one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        backup: Option<String>,
    },
    /// A questionnaire waits for a person (`Op::Answer`): approve a frozen
    /// plan, or confirm entering Plan.
    #[serde(rename = "questionnaire.opened")]
    QuestionnaireOpened {
        /// Its id.
        id: String,
        /// What it asks.
        kind: QuestionnaireKind,
        /// The canonical plan file.
        plan_path: String,
        /// The frozen snapshot's SHA-256 (empty for an entry confirmation).
        sha256: String,
        /// Whether the snapshot was cut at 512 KiB.
        truncated: bool,
        /// The snapshot's size in bytes.
        bytes: usize,
        /// What a person needs to answer it: the plan's first lines (at
        /// most [`QUESTION_HEAD_LINES`]) for an approval, the model's
        /// reason for an entry.
        #[serde(default, skip_serializing_if = "String::is_empty")]
        head: String,
    },
    /// A questionnaire was answered.
    #[serde(rename = "questionnaire.answered")]
    QuestionnaireAnswered {
        /// Its id.
        id: String,
        /// The answer.
        answer: QuestionnaireAnswer,
        /// The session's mode now.
        mode: Mode,
    },
    /// Answer to `/plan status`.
    #[serde(rename = "plan.status")]
    PlanStatus {
        /// The mode.
        mode: Mode,
        /// The canonical plan file.
        plan_path: String,
        /// Whether it exists.
        exists: bool,
        /// The questionnaire waiting for an answer, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pending: Option<String>,
    },
    /// Answer to `/plan view`.
    #[serde(rename = "plan.view")]
    PlanView {
        /// The canonical plan file.
        plan_path: String,
        /// Its text, when it exists.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// The workspace was put back as a snapshot recorded it (or, in a dry
    /// run, would be). Paths are relative to the workspace.
    #[serde(rename = "workspace.restored")]
    WorkspaceRestored {
        /// The snapshot's full id.
        snapshot: String,
        /// The snapshot taken just before, which undoes this restore;
        /// absent in a dry run.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        before: Option<String>,
        /// Nothing was changed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        dry_run: bool,
        /// Files changed since the snapshot, put back.
        restored: Vec<String>,
        /// Files deleted since the snapshot, recreated.
        recreated: Vec<String>,
        /// Files created since the snapshot, removed.
        removed: Vec<String>,
        /// Paths that could not be put back, each with why (`path: why`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        skipped: Vec<String>,
    },
    /// Nothing runs and nothing is queued.
    #[serde(rename = "session.idle")]
    SessionIdle {
        /// Turns run so far.
        turns: u64,
    },
    /// The mode changed.
    #[serde(rename = "mode.changed")]
    ModeChanged {
        /// The new mode.
        mode: Mode,
    },
    /// A submission was refused; nothing changed.
    #[serde(rename = "op.rejected")]
    OpRejected {
        /// The refused submission's type.
        op: String,
        /// Why, and what to do instead.
        message: String,
        /// The refusal came from the infrastructure (the store could not
        /// record the submission): trying again later may succeed. Absent
        /// (false) for refusals of the request itself.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        retryable: bool,
    },
    /// The session's state, answering [`Op::Status`].
    #[serde(rename = "session.status")]
    SessionStatus {
        /// Idle or running.
        activity: Activity,
        /// The mode.
        mode: Mode,
        /// The effective posture.
        posture: Posture,
        /// Messages waiting for a turn.
        queue_length: usize,
        /// Turns run so far.
        turns: u64,
    },
    /// The session actor stopped.
    #[serde(rename = "session.stopped")]
    SessionStopped {
        /// Turns run.
        turns: u64,
    },
    /// A workflow run started (`cadre workflow run`, `/workflow`, or the
    /// Operate `workflow` tool).
    #[serde(rename = "workflow.started")]
    WorkflowStarted {
        /// The run's id (`cadre workflow resume RUN`).
        run_id: String,
        /// The workflow's name.
        workflow: String,
        /// Its steps, in file order.
        steps: Vec<String>,
    },
    /// A step instance changed state: `pending`, `dispatched`,
    /// `finalized`, `verified`, `failed`, `blocked` or `cancelled`.
    #[serde(rename = "step.state")]
    StepState {
        /// The run.
        run_id: String,
        /// The step.
        step: String,
        /// The item's index in a fan-out; absent for a step without
        /// `for_each`, and for a fan-out blocked before it had items.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u64>,
        /// The fan-out item.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        item: Option<Value>,
        /// The new state.
        state: crate::store::InstanceState,
        /// The agent working on it (dispatched and later).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        agent_id: Option<String>,
        /// The node its attempt runs on; absent when it runs in the
        /// coordinator's process.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        /// Why: for failed, blocked, cancelled, retried and restored instances.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Tokens its agents spent so far.
        tokens: u64,
    },
    /// A step instance's answer was accepted (it is handed forward once
    /// verified, or at once when the step has no check).
    #[serde(rename = "step.output")]
    StepOutput {
        /// The run.
        run_id: String,
        /// The step.
        step: String,
        /// The item's index in a fan-out.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u64>,
        /// The output (JSON text for a JSON step), cut to about 2000
        /// characters; the whole is in the store.
        output: String,
    },
    /// A workflow run ended.
    #[serde(rename = "workflow.completed")]
    WorkflowCompleted {
        /// The run's id, which `cadre workflow resume` takes.
        run_id: String,
        /// `completed` (every step has a result), `failed` or `cancelled`;
        /// never `running`.
        status: crate::store::RunStatus,
        /// Instances per state.
        counts: std::collections::BTreeMap<String, u64>,
    },
    /// The session's goal was set or changed, or a host asked for it.
    #[serde(rename = "goal.updated")]
    GoalUpdated {
        /// The objective.
        objective: String,
        /// `active`, `paused`, `blocked`, `budget_limited`,
        /// `usage_limited` or `complete`.
        status: crate::goal::GoalStatus,
        /// Why, from a closed set (`verifier_met`, `no_progress`, …).
        reason: crate::goal::StatusReason,
        /// Bumped by every change a person makes.
        revision: u64,
        /// What the goal used.
        usage: crate::goal::GoalUsage,
        /// Its limits.
        budgets: crate::goal::Budgets,
    },
    /// The verifier (or the check command) answered a completion claim.
    #[serde(rename = "goal.verification")]
    GoalVerification {
        /// `pass`, `fail`, `partial`, `unparseable` or `unavailable`.
        verdict: String,
        /// What remains, for `fail` and `partial` (or why the verifier
        /// was unavailable).
        gaps: Vec<String>,
        /// Tokens the verifier spent (counted toward the goal's budget).
        verifier_tokens: u64,
    },
    /// A continuation was admitted to the queue.
    #[serde(rename = "goal.continuation")]
    GoalContinuation {
        /// Its number within the goal (1 is the first).
        n: u64,
    },
    /// The session's goal was cleared.
    #[serde(rename = "goal.cleared")]
    GoalCleared {},
    /// The host is done with the session. Always last.
    #[serde(rename = "session.completed")]
    SessionCompleted {
        /// `success`, `failed`, `error`, `cancelled`, `paused_by_denials`
        /// or `unfinished`.
        status: SessionOutcome,
        /// The process exit code the host returns.
        exit_code: i32,
    },
}
