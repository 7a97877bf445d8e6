//! Another agent's events as the host above it sees them: its tool calls,
//! forwarded; a nested agent's (a workflow step's) events, renamed; and
//! which of a remote child's events a node may pass on. Each lists every
//! event, so a new one is a decision here (`Event` is `#[non_exhaustive]`,
//! so a match in another crate cannot be closed).

use super::Event;

/// How much of a forwarded result's output the host gets: enough for a
/// person to follow, not a second copy of every file a sub-agent read (the
/// whole output stays in the agent's own stream and transcript).
pub const FORWARDED_OUTPUT_BYTES: usize = 2_048;

impl Event {
    /// `agent`'s own `tool.call` or `tool.result` as its parent's host
    /// sees it: `agent.tool_call` / `agent.tool_result`, the output cut to
    /// [`FORWARDED_OUTPUT_BYTES`]. Any other event is not a call of its own.
    pub fn forwarded_call(&self, agent: &str) -> Option<Event> {
        match self {
            Event::ToolCall {
                call_id,
                name,
                arguments,
                ..
            } => Some(Event::AgentToolCall {
                agent_id: agent.to_string(),
                call_id: call_id.clone(),
                name: name.clone(),
                arguments: arguments.clone(),
            }),
            Event::ToolResult {
                call_id,
                name,
                status,
                error_code,
                output,
                ..
            } => Some(Event::AgentToolResult {
                agent_id: agent.to_string(),
                call_id: call_id.clone(),
                name: name.clone(),
                status: *status,
                error_code: *error_code,
                output: head(output, FORWARDED_OUTPUT_BYTES),
            }),
            // Nothing else is a call of its own (another agent's forwarded
            // calls are that agent's).
            Event::SessionStarted { .. }
            | Event::InputAdmitted { .. }
            | Event::TurnStarted { .. }
            | Event::AssistantDelta { .. }
            | Event::AssistantMessage { .. }
            | Event::AssistantReasoning { .. }
            | Event::AgentToolCall { .. }
            | Event::AgentToolResult { .. }
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
            | Event::SessionCompleted { .. } => None,
        }
    }

    /// A nested agent's event as the host above it sees it, its ids
    /// renamed by `names`; `None` for an event that stays inside (the
    /// nested agent's own session and turns, which its supervisor reads
    /// itself), or one naming an agent or a prompt outside the nested
    /// agent, which it cannot have raised (a node must not be able to).
    /// Lists every event, so a new one is a decision here.
    pub fn nested(self, names: &Nested<'_>) -> Option<Event> {
        Some(match self {
            Event::ApprovalRequested {
                id,
                agent_id,
                call_id,
                tool,
                arguments,
                reason,
                preview,
            } => Event::ApprovalRequested {
                id: (names.approval)(&id)?,
                agent_id: (names.agent)(&agent_id)?,
                call_id,
                tool,
                arguments,
                reason,
                preview,
            },
            Event::ApprovalResolved { id, outcome } => Event::ApprovalResolved {
                id: (names.approval)(&id)?,
                outcome,
            },
            Event::PermissionDecision {
                agent_id,
                call_id,
                tool,
                decision,
                line,
            } => Event::PermissionDecision {
                agent_id: (names.agent)(&agent_id)?,
                call_id,
                tool,
                decision,
                line,
            },
            Event::AgentSpawned {
                agent_id,
                role,
                model,
                posture,
                depth,
            } => Event::AgentSpawned {
                agent_id: (names.agent)(&agent_id)?,
                role,
                model,
                posture,
                depth,
            },
            Event::AgentCompleted {
                agent_id,
                status,
                summary,
                verified,
            } => Event::AgentCompleted {
                agent_id: (names.agent)(&agent_id)?,
                status,
                summary,
                verified,
            },
            Event::AutonomyPaused { reason, fallback } => Event::AutonomyPaused {
                reason: format!("{}: {reason}", names.label),
                fallback,
            },
            Event::ContextCompacted {
                agent: inner,
                tokens_before,
                tokens_after,
                kind,
            } => Event::ContextCompacted {
                agent: (names.agent)(&inner)?,
                tokens_before,
                tokens_after,
                kind,
            },
            Event::AgentToolCall {
                agent_id,
                call_id,
                name,
                arguments,
            } => Event::AgentToolCall {
                agent_id: (names.agent)(&agent_id)?,
                call_id,
                name,
                arguments,
            },
            Event::AgentToolResult {
                agent_id,
                call_id,
                name,
                status,
                error_code,
                output,
            } => Event::AgentToolResult {
                agent_id: (names.agent)(&agent_id)?,
                call_id,
                name,
                status,
                error_code,
                output,
            },
            // The nested agent's own calls, under its outer name.
            own @ (Event::ToolCall { .. } | Event::ToolResult { .. }) => {
                own.forwarded_call(&(names.agent)(names.own)?)?
            }
            // Its session, turns, plan, goal and status, which its
            // supervisor reads and reports in its own terms; runs and
            // restores, which only a host starts.
            Event::SessionStarted { .. }
            | Event::InputAdmitted { .. }
            | Event::TurnStarted { .. }
            | Event::AssistantDelta { .. }
            | Event::AssistantMessage { .. }
            | Event::AssistantReasoning { .. }
            | Event::ModelRetry { .. }
            | Event::ModelParamDropped { .. }
            | Event::TurnCompleted { .. }
            | Event::TurnFailed { .. }
            | Event::PostureChanged { .. }
            | Event::ModelChanged { .. }
            | Event::AgentStatusChanged { .. }
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

    /// Whether a remote child's event names only the child `agent`: the
    /// node filter, which lists every event it lets through. A node could
    /// otherwise raise a prompt under the parent's id, or another child's,
    /// and have a person's answer reach it.
    pub fn is_own(&self, agent: &str) -> bool {
        let agent_ok = |id: &str| id == agent;
        let prompt_ok = |id: &str| {
            id.strip_prefix("agent:")
                .and_then(|rest| rest.strip_prefix(agent))
                .is_some_and(|rest| rest.starts_with(':'))
        };
        match self {
            Event::ApprovalRequested { id, agent_id, .. } => agent_ok(agent_id) && prompt_ok(id),
            Event::ApprovalResolved { id, .. } => prompt_ok(id),
            Event::PermissionDecision { agent_id, .. } => agent_ok(agent_id),
            // Its own compactions, so the coordinator's host sees them.
            Event::ContextCompacted { agent: who, .. } => agent_ok(who),
            // A remote child starts no children of its own, so it has no
            // other agent's status or calls to pass on.
            Event::AgentSpawned { .. }
            | Event::AgentStatusChanged { .. }
            | Event::AgentCompleted { .. }
            | Event::AgentToolCall { .. }
            | Event::AgentToolResult { .. } => false,
            // The child's own session and turns: they name no other agent,
            // and the parent's pump reads its report, status and conversation
            // from them.
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
            | Event::AutonomyPaused { .. }
            | Event::ModeChanged { .. }
            | Event::PlanEntered { .. }
            | Event::PlanStatus { .. }
            | Event::PlanView { .. }
            | Event::GoalUpdated { .. }
            | Event::GoalVerification { .. }
            | Event::GoalContinuation { .. }
            | Event::GoalCleared { .. }
            | Event::SessionIdle { .. }
            | Event::OpRejected { .. }
            | Event::SessionStatus { .. }
            | Event::SessionStopped { .. } => true,
            // A questionnaire is answered by id like an approval, and a node
            // sub-agent is never asked one; workflow events name a run of the
            // coordinator's; a restore and a host's completion are the host's
            // to report.
            Event::QuestionnaireOpened { .. }
            | Event::QuestionnaireAnswered { .. }
            | Event::WorkflowStarted { .. }
            | Event::StepState { .. }
            | Event::StepOutput { .. }
            | Event::WorkflowCompleted { .. }
            | Event::WorkspaceRestored { .. }
            | Event::SessionCompleted { .. } => false,
        }
    }
}

/// How a nested agent's ids read to the host above it (a workflow step's,
/// as its caller sees them): see [`Event::nested`].
pub struct Nested<'a> {
    /// An agent id inside (the nested agent's own, or its sub-agent's) as
    /// seen from above; `None` for an id outside it.
    pub agent: &'a dyn Fn(&str) -> Option<String>,
    /// An approval id raised inside, as seen from above; `None` for one
    /// raised outside it.
    pub approval: &'a dyn Fn(&str) -> Option<String>,
    /// The nested agent's own id inside, whose tool calls are forwarded
    /// under its outer name.
    pub own: &'a str,
    /// What a paused autonomy's reason is prefixed with (`step:x[0]`).
    pub label: &'a str,
}

/// The first `max` bytes of `text`, cut at a character boundary, with a
/// mark when something was cut.
fn head(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [{} more bytes]", &text[..end], text.len() - end)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::protocol::ToolStatus;

    #[test]
    fn a_call_and_its_result_are_forwarded_under_the_agent_and_the_output_is_cut() {
        let call = Event::ToolCall {
            turn_id: 3,
            call_id: "c1".into(),
            name: "read_file".into(),
            arguments: json!({"path": "a.txt"}),
        };
        assert_eq!(
            call.forwarded_call("1.2"),
            Some(Event::AgentToolCall {
                agent_id: "1.2".into(),
                call_id: "c1".into(),
                name: "read_file".into(),
                arguments: json!({"path": "a.txt"}),
            })
        );
        let long = "é".repeat(FORWARDED_OUTPUT_BYTES);
        let result = Event::ToolResult {
            turn_id: 3,
            call_id: "c1".into(),
            name: "read_file".into(),
            status: ToolStatus::Ok,
            error_code: None,
            output: long.clone(),
        };
        let Some(Event::AgentToolResult { output, .. }) = result.forwarded_call("1.2") else {
            panic!("not forwarded");
        };
        assert!(
            output.len() < FORWARDED_OUTPUT_BYTES + 32,
            "{}",
            output.len()
        );
        assert!(long.starts_with(output.split('…').next().unwrap_or_default()));
        assert!(output.ends_with(&format!(
            "[{} more bytes]",
            long.len() - FORWARDED_OUTPUT_BYTES
        )));
        assert_eq!(Event::SessionIdle { turns: 1 }.forwarded_call("1"), None);
    }

    #[test]
    fn a_nested_agents_prompt_is_renamed_and_one_from_outside_or_its_own_turn_stays_inside() {
        // The nested agent is `3`; seen from above it is `step:x[0]`.
        let agent = |inner: &str| match inner {
            "3" => Some("step:x[0]".to_string()),
            _ => None,
        };
        let approval = |inner: &str| {
            inner
                .strip_prefix("agent:3:approval:")
                .map(|n| format!("step:x[0]:approval:{n}"))
        };
        let names = Nested {
            agent: &agent,
            approval: &approval,
            own: "3",
            label: "step:x[0]",
        };
        let asked = |id: &str, agent_id: &str| Event::ApprovalRequested {
            id: id.into(),
            agent_id: agent_id.into(),
            call_id: "c".into(),
            tool: "bash".into(),
            arguments: json!({}),
            reason: String::new(),
            preview: None,
        };
        assert_eq!(
            asked("agent:3:approval:1", "3").nested(&names),
            Some(asked("step:x[0]:approval:1", "step:x[0]"))
        );
        assert_eq!(asked("approval:1", "3").nested(&names), None);
        assert_eq!(asked("agent:3:approval:1", "4").nested(&names), None);
        assert_eq!(Event::SessionIdle { turns: 1 }.nested(&names), None);
        let call = Event::ToolCall {
            turn_id: 1,
            call_id: "c1".into(),
            name: "read_file".into(),
            arguments: json!({}),
        };
        assert_eq!(
            call.clone().nested(&names),
            call.forwarded_call("step:x[0]")
        );
    }
}
