//! What the code reading an agent's events takes from them: the agent's
//! turn (its answers, calls and end), read by the verifier, a workflow
//! step and a remote child's recorder; a sub-agent's status and the events
//! its parent passes on, read by its pump; and what a transcript keeps.
//! Each lists every event, so a new one is a decision here (`Event` is
//! `#[non_exhaustive]`, so a match in another crate cannot be closed), and
//! a new part of a turn is a decision in each reader of [`TurnEvent`].

use serde_json::Value;

use super::{AgentStatus, Event, FailureCategory, ToolStatus, Usage};
use crate::tool::ErrorCode;

/// One of the events an agent's turn is made of, as its readers take it:
/// see [`Event::turn_event`]. Closed, so each reader answers every part.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TurnEvent<'a> {
    /// The model's complete text of one response (`assistant.message`):
    /// the last one of a turn is its answer.
    Answer(&'a str),
    /// A call the model asked for (`tool.call`).
    Call {
        /// The call id, which its result carries.
        call_id: &'a str,
        /// The tool name as the model sent it.
        name: &'a str,
        /// The arguments: the parsed object, or the raw text.
        arguments: &'a Value,
    },
    /// A call's result (`tool.result`).
    Result {
        /// The call it answers.
        call_id: &'a str,
        /// `ok` or `error`.
        status: ToolStatus,
        /// Set exactly when `status` is `error`.
        error_code: Option<ErrorCode>,
        /// The output or error message, as shown (it may be cut).
        output: &'a str,
    },
    /// The turn ended with a final answer (`turn.completed`).
    Completed {
        /// Tokens its model requests used.
        usage: Usage,
    },
    /// The turn ended without one (`turn.failed`).
    Failed {
        /// Why, for machines.
        category: FailureCategory,
        /// Why, for people.
        message: &'a str,
        /// Whether retrying later may succeed.
        retryable: bool,
        /// Tokens used before the failure.
        usage: Usage,
    },
}

impl Event {
    /// What this event is of the agent's own turn: a response's text, a
    /// call, its result, the turn's end; `None` for the rest, which no
    /// reader of a turn needs (the agent's session, plan, goal and prompts,
    /// and its sub-agents' events).
    pub fn turn_event(&self) -> Option<TurnEvent<'_>> {
        Some(match self {
            Event::AssistantMessage { text, .. } => TurnEvent::Answer(text),
            Event::ToolCall {
                call_id,
                name,
                arguments,
                ..
            } => TurnEvent::Call {
                call_id,
                name,
                arguments,
            },
            Event::ToolResult {
                call_id,
                status,
                error_code,
                output,
                ..
            } => TurnEvent::Result {
                call_id,
                status: *status,
                error_code: *error_code,
                output,
            },
            Event::TurnCompleted { usage, .. } => TurnEvent::Completed { usage: *usage },
            Event::TurnFailed {
                category,
                message,
                retryable,
                usage,
                ..
            } => TurnEvent::Failed {
                category: *category,
                message,
                retryable: *retryable,
                usage: *usage,
            },
            // A turn's start and its live or passing parts: what the turn
            // did is in its messages, calls and end.
            Event::TurnStarted { .. }
            | Event::AssistantDelta { .. }
            | Event::AssistantReasoning { .. }
            | Event::ModelRetry { .. }
            | Event::ModelParamDropped { .. }
            | Event::ContextCompacted { .. }
            // The prompts and decisions its calls met, its sub-agents and
            // their calls: they pass outward (`forward.rs`), and what the
            // turn did is in its calls' results.
            | Event::AgentToolCall { .. }
            | Event::AgentToolResult { .. }
            | Event::PermissionDecision { .. }
            | Event::ApprovalRequested { .. }
            | Event::ApprovalResolved { .. }
            | Event::AutonomyPaused { .. }
            | Event::AgentSpawned { .. }
            | Event::AgentStatusChanged { .. }
            | Event::AgentCompleted { .. }
            // The session around the turns, its plan, goal and runs.
            | Event::SessionStarted { .. }
            | Event::InputAdmitted { .. }
            | Event::PostureChanged { .. }
            | Event::ModelChanged { .. }
            | Event::PlanEntered { .. }
            | Event::QuestionnaireOpened { .. }
            | Event::QuestionnaireAnswered { .. }
            | Event::PlanStatus { .. }
            | Event::PlanView { .. }
            | Event::WorkspaceRestored { .. }
            | Event::SessionIdle { .. }
            | Event::ModeChanged { .. }
            | Event::OpRejected { .. }
            | Event::SessionStatus { .. }
            | Event::SessionStopped { .. }
            | Event::WorkflowStarted { .. }
            | Event::StepState { .. }
            | Event::StepOutput { .. }
            | Event::WorkflowCompleted { .. }
            | Event::GoalUpdated { .. }
            | Event::GoalVerification { .. }
            | Event::GoalContinuation { .. }
            | Event::GoalCleared { .. }
            | Event::SessionCompleted { .. } => return None,
        })
    }

    /// The status the parent of the sub-agent `agent` reports for it
    /// (`agent.status`) on one of its events: running when a turn starts
    /// or a prompt of its own is answered, waiting for a person when it
    /// asks one itself. Its sub-agents' prompts are theirs.
    pub fn child_status(&self, agent: &str) -> Option<AgentStatus> {
        match self {
            Event::TurnStarted { .. } => Some(AgentStatus::Running),
            Event::ApprovalRequested { agent_id, .. } => {
                (agent_id == agent).then_some(AgentStatus::WaitingForUser)
            }
            Event::ApprovalResolved { id, .. } => id
                .strip_prefix("agent:")
                .and_then(|rest| rest.strip_prefix(agent))
                .is_some_and(|rest| rest.starts_with(':'))
                .then_some(AgentStatus::Running),
            // A turn's end is its report (`agent.completed`), and nothing
            // else changes whether it runs or waits.
            Event::SessionStarted { .. }
            | Event::InputAdmitted { .. }
            | Event::AssistantDelta { .. }
            | Event::AssistantMessage { .. }
            | Event::AssistantReasoning { .. }
            | Event::ToolCall { .. }
            | Event::ToolResult { .. }
            | Event::AgentToolCall { .. }
            | Event::AgentToolResult { .. }
            | Event::ModelRetry { .. }
            | Event::ModelParamDropped { .. }
            | Event::TurnCompleted { .. }
            | Event::ContextCompacted { .. }
            | Event::TurnFailed { .. }
            | Event::PermissionDecision { .. }
            | Event::PostureChanged { .. }
            | Event::ModelChanged { .. }
            | Event::AutonomyPaused { .. }
            | Event::AgentSpawned { .. }
            | Event::AgentStatusChanged { .. }
            | Event::AgentCompleted { .. }
            | Event::PlanEntered { .. }
            | Event::QuestionnaireOpened { .. }
            | Event::QuestionnaireAnswered { .. }
            | Event::PlanStatus { .. }
            | Event::PlanView { .. }
            | Event::WorkspaceRestored { .. }
            | Event::SessionIdle { .. }
            | Event::ModeChanged { .. }
            | Event::OpRejected { .. }
            | Event::SessionStatus { .. }
            | Event::SessionStopped { .. }
            | Event::WorkflowStarted { .. }
            | Event::StepState { .. }
            | Event::StepOutput { .. }
            | Event::WorkflowCompleted { .. }
            | Event::GoalUpdated { .. }
            | Event::GoalVerification { .. }
            | Event::GoalContinuation { .. }
            | Event::GoalCleared { .. }
            | Event::SessionCompleted { .. } => None,
        }
    }

    /// Whether a sub-agent's event reaches its parent's host as it is:
    /// its prompts and their answers (a person answers them there), its
    /// automatic decisions, its own sub-agents and their calls, and its
    /// compactions. Its own calls reach it as `agent.tool_call` (see
    /// [`Event::forwarded_call`]), its turns as its report.
    pub fn passes_to_parent(&self) -> bool {
        match self {
            Event::ApprovalRequested { .. }
            | Event::ApprovalResolved { .. }
            | Event::PermissionDecision { .. }
            | Event::AutonomyPaused { .. }
            | Event::AgentSpawned { .. }
            | Event::AgentStatusChanged { .. }
            | Event::AgentCompleted { .. }
            | Event::AgentToolCall { .. }
            | Event::AgentToolResult { .. }
            | Event::ContextCompacted { .. } => true,
            // Its session, turns, plan, goal and state: the parent reads
            // them and reports in its own terms (a status, a report).
            Event::SessionStarted { .. }
            | Event::InputAdmitted { .. }
            | Event::TurnStarted { .. }
            | Event::AssistantDelta { .. }
            | Event::AssistantMessage { .. }
            | Event::AssistantReasoning { .. }
            | Event::ToolCall { .. }
            | Event::ToolResult { .. }
            | Event::ModelRetry { .. }
            | Event::ModelParamDropped { .. }
            | Event::TurnCompleted { .. }
            | Event::TurnFailed { .. }
            | Event::PostureChanged { .. }
            | Event::ModelChanged { .. }
            | Event::PlanEntered { .. }
            | Event::QuestionnaireOpened { .. }
            | Event::QuestionnaireAnswered { .. }
            | Event::PlanStatus { .. }
            | Event::PlanView { .. }
            | Event::SessionIdle { .. }
            | Event::ModeChanged { .. }
            | Event::OpRejected { .. }
            | Event::SessionStatus { .. }
            | Event::SessionStopped { .. }
            | Event::GoalUpdated { .. }
            | Event::GoalVerification { .. }
            | Event::GoalContinuation { .. }
            | Event::GoalCleared { .. }
            // Runs, restores and a host's completion: only a host starts
            // them, and it reports them itself.
            | Event::WorkflowStarted { .. }
            | Event::StepState { .. }
            | Event::StepOutput { .. }
            | Event::WorkflowCompleted { .. }
            | Event::WorkspaceRestored { .. }
            | Event::SessionCompleted { .. } => false,
        }
    }

    /// Whether an agent's transcript keeps this event: all but a streamed
    /// piece of text, whose whole follows in `assistant.message`, and
    /// another agent's forwarded call, which that agent's own transcript
    /// holds whole.
    pub fn transcribed(&self) -> bool {
        match self {
            Event::AssistantDelta { .. }
            | Event::AgentToolCall { .. }
            | Event::AgentToolResult { .. } => false,
            Event::SessionStarted { .. }
            | Event::InputAdmitted { .. }
            | Event::TurnStarted { .. }
            | Event::AssistantMessage { .. }
            | Event::AssistantReasoning { .. }
            | Event::ToolCall { .. }
            | Event::ToolResult { .. }
            | Event::ModelRetry { .. }
            | Event::ModelParamDropped { .. }
            | Event::TurnCompleted { .. }
            | Event::ContextCompacted { .. }
            | Event::TurnFailed { .. }
            | Event::PermissionDecision { .. }
            | Event::ApprovalRequested { .. }
            | Event::ApprovalResolved { .. }
            | Event::PostureChanged { .. }
            | Event::ModelChanged { .. }
            | Event::AutonomyPaused { .. }
            | Event::AgentSpawned { .. }
            | Event::AgentStatusChanged { .. }
            | Event::AgentCompleted { .. }
            | Event::PlanEntered { .. }
            | Event::QuestionnaireOpened { .. }
            | Event::QuestionnaireAnswered { .. }
            | Event::PlanStatus { .. }
            | Event::PlanView { .. }
            | Event::WorkspaceRestored { .. }
            | Event::SessionIdle { .. }
            | Event::ModeChanged { .. }
            | Event::OpRejected { .. }
            | Event::SessionStatus { .. }
            | Event::SessionStopped { .. }
            | Event::WorkflowStarted { .. }
            | Event::StepState { .. }
            | Event::StepOutput { .. }
            | Event::WorkflowCompleted { .. }
            | Event::GoalUpdated { .. }
            | Event::GoalVerification { .. }
            | Event::GoalContinuation { .. }
            | Event::GoalCleared { .. }
            | Event::SessionCompleted { .. } => true,
        }
    }
}

#[cfg(test)]
mod tests;
