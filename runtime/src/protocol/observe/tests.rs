use std::collections::{BTreeMap, BTreeSet};

use serde_json::json;

use super::*;
use crate::context::{CompactionKind, ContextUsage};
use crate::goal::{Budgets, GoalStatus, GoalUsage, StatusReason};
use crate::mode::Mode;
use crate::permission::{Decision, Layer, Posture, Verdict};
use crate::plan::lifecycle::{QuestionnaireAnswer, QuestionnaireKind};
use crate::protocol::{Activity, ApprovalOutcome, SessionOutcome};
use crate::store::{InstanceState, RunStatus};

/// The sub-agent whose events the samples are (`1`, under the session).
const AGENT: &str = "1";

fn usage(prompt_tokens: u64) -> Usage {
    Usage {
        prompt_tokens,
        completion_tokens: 5,
        ..Usage::default()
    }
}

fn asked(id: &str, agent_id: &str) -> Event {
    Event::ApprovalRequested {
        id: id.into(),
        agent_id: agent_id.into(),
        call_id: "c1".into(),
        tool: "bash".into(),
        arguments: json!({"command": "make"}),
        reason: "it writes".into(),
        preview: None,
    }
}

fn answered(id: &str) -> Event {
    Event::ApprovalResolved {
        id: id.into(),
        outcome: ApprovalOutcome::AllowOnce,
    }
}

/// One event of each kind, as sub-agent [`AGENT`] would emit them.
fn one_of_each() -> Vec<Event> {
    vec![
        Event::SessionStarted {
            version: crate::protocol::STREAM_VERSION,
            session_id: "s".into(),
            mode: Mode::Work,
            posture: Posture::default(),
            workspace: "/w".into(),
            model: "m".into(),
            sandbox: "landlock-abi-5".into(),
            sandbox_walls: Vec::new(),
            mode_source: None,
            model_source: None,
            instructions: None,
        },
        Event::InputAdmitted { queue_length: 0 },
        Event::TurnStarted {
            turn_id: 1,
            mode: Mode::Work,
        },
        Event::AssistantDelta {
            turn_id: 1,
            text: "the ans".into(),
        },
        Event::AssistantMessage {
            turn_id: 1,
            text: "the answer".into(),
        },
        Event::AssistantReasoning {
            turn_id: 1,
            text: "thinking".into(),
        },
        Event::ToolCall {
            turn_id: 1,
            call_id: "c1".into(),
            name: "read_file".into(),
            arguments: json!({"path": "a.txt"}),
        },
        Event::ToolResult {
            turn_id: 1,
            call_id: "c1".into(),
            name: "read_file".into(),
            status: ToolStatus::Error,
            error_code: Some(ErrorCode::NotFound),
            output: "no a.txt".into(),
        },
        Event::AgentToolCall {
            agent_id: "1.1".into(),
            call_id: "c9".into(),
            name: "read_file".into(),
            arguments: json!({"path": "b.txt"}),
        },
        Event::AgentToolResult {
            agent_id: "1.1".into(),
            call_id: "c9".into(),
            name: "read_file".into(),
            status: ToolStatus::Ok,
            error_code: None,
            output: "b".into(),
        },
        Event::ModelRetry {
            turn_id: 1,
            attempt: 1,
            delay_ms: 10,
            reason: "503".into(),
        },
        Event::ModelParamDropped {
            turn_id: 1,
            param: "temperature".into(),
            reason: "unsupported".into(),
        },
        Event::TurnCompleted {
            turn_id: 1,
            usage: usage(10),
            iterations: 2,
            context: Some(ContextUsage {
                used: 10,
                window: 100,
            }),
        },
        Event::ContextCompacted {
            agent: AGENT.into(),
            tokens_before: 90,
            tokens_after: 20,
            kind: CompactionKind::Model,
        },
        Event::TurnFailed {
            turn_id: 2,
            category: FailureCategory::Infrastructure,
            message: "the endpoint refused".into(),
            retryable: true,
            usage: usage(20),
            iterations: 1,
        },
        Event::PermissionDecision {
            agent_id: AGENT.into(),
            call_id: "c2".into(),
            tool: "bash".into(),
            decision: Decision::new(Verdict::Deny, Layer::Mode, "read-only"),
            line: "denied".into(),
        },
        asked("agent:1:approval:1", AGENT),
        answered("agent:1:approval:1"),
        Event::PostureChanged {
            posture: Posture::default(),
        },
        Event::ModelChanged { model: "m2".into() },
        Event::AutonomyPaused {
            reason: "denials".into(),
            fallback: None,
        },
        Event::AgentSpawned {
            agent_id: "1.1".into(),
            role: "explorer".into(),
            model: "m".into(),
            posture: Posture::default(),
            depth: 2,
        },
        Event::AgentStatusChanged {
            agent_id: "1.1".into(),
            status: AgentStatus::Running,
        },
        Event::AgentCompleted {
            agent_id: "1.1".into(),
            status: "completed".into(),
            summary: "done".into(),
            verified: true,
        },
        Event::PlanEntered {
            plan_path: "plan.md".into(),
            backup: None,
        },
        Event::QuestionnaireOpened {
            id: "q1".into(),
            kind: QuestionnaireKind::PlanApproval,
            plan_path: "plan.md".into(),
            sha256: String::new(),
            truncated: false,
            bytes: 0,
            head: String::new(),
        },
        Event::QuestionnaireAnswered {
            id: "q1".into(),
            answer: QuestionnaireAnswer::Approve,
            mode: Mode::Work,
        },
        Event::PlanStatus {
            mode: Mode::Plan,
            plan_path: "plan.md".into(),
            exists: false,
            pending: None,
        },
        Event::PlanView {
            plan_path: "plan.md".into(),
            text: None,
        },
        Event::WorkspaceRestored {
            snapshot: "abc".into(),
            before: None,
            dry_run: true,
            restored: Vec::new(),
            recreated: Vec::new(),
            removed: Vec::new(),
            skipped: Vec::new(),
        },
        Event::SessionIdle { turns: 2 },
        Event::ModeChanged { mode: Mode::Plan },
        Event::OpRejected {
            op: "plan".into(),
            message: "busy".into(),
            retryable: false,
        },
        Event::SessionStatus {
            activity: Activity::Idle,
            mode: Mode::Work,
            posture: Posture::default(),
            queue_length: 0,
            turns: 2,
        },
        Event::SessionStopped { turns: 2 },
        Event::WorkflowStarted {
            run_id: "r".into(),
            workflow: "w".into(),
            steps: vec!["x".into()],
        },
        Event::StepState {
            run_id: "r".into(),
            step: "x".into(),
            index: None,
            item: None,
            state: InstanceState::Pending,
            agent_id: None,
            node: None,
            reason: None,
            tokens: 0,
        },
        Event::StepOutput {
            run_id: "r".into(),
            step: "x".into(),
            index: None,
            output: "out".into(),
        },
        Event::WorkflowCompleted {
            run_id: "r".into(),
            status: RunStatus::Completed,
            counts: BTreeMap::new(),
        },
        Event::GoalUpdated {
            objective: "o".into(),
            status: GoalStatus::Active,
            reason: StatusReason::Created,
            revision: 1,
            usage: GoalUsage::default(),
            budgets: Budgets::default(),
        },
        Event::GoalVerification {
            verdict: "pass".into(),
            gaps: Vec::new(),
            verifier_tokens: 0,
        },
        Event::GoalContinuation { n: 1 },
        Event::GoalCleared {},
        Event::SessionCompleted {
            status: SessionOutcome::Success,
            exit_code: 0,
        },
    ]
}

/// The wire type of `event` (`tool.call`).
fn kind(event: &Event) -> String {
    let value = serde_json::to_value(event).unwrap_or_default();
    value["type"].as_str().unwrap_or_default().to_string()
}

/// What `read` takes from each sample that gives something, by wire type:
/// every sample left out gave nothing.
fn read_all<'a, T>(events: &'a [Event], read: impl Fn(&'a Event) -> Option<T>) -> Vec<(String, T)> {
    events
        .iter()
        .filter_map(|e| read(e).map(|taken| (kind(e), taken)))
        .collect()
}

/// Every event's wire type, as the type itself names them: serde's
/// refusal of an unknown type lists every one it knows.
fn every_kind() -> BTreeSet<String> {
    let refused = serde_json::from_value::<Event>(json!({"type": "?"}))
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    let listed = refused.split("expected one of").nth(1).unwrap_or_default();
    listed
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

#[test]
fn the_samples_are_one_of_each_event() {
    let events = one_of_each();
    let kinds: BTreeSet<String> = events.iter().map(kind).collect();
    assert_eq!(kinds.len(), events.len());
    assert!(kinds.len() > 40, "{kinds:?}");
    assert_eq!(kinds, every_kind());
}

#[test]
fn a_turn_is_its_answers_its_calls_and_results_and_its_end() {
    let events = one_of_each();
    let arguments = json!({"path": "a.txt"});
    assert_eq!(
        read_all(&events, Event::turn_event),
        vec![
            ("assistant.message".into(), TurnEvent::Answer("the answer")),
            (
                "tool.call".into(),
                TurnEvent::Call {
                    call_id: "c1",
                    name: "read_file",
                    arguments: &arguments,
                }
            ),
            (
                "tool.result".into(),
                TurnEvent::Result {
                    call_id: "c1",
                    status: ToolStatus::Error,
                    error_code: Some(ErrorCode::NotFound),
                    output: "no a.txt",
                }
            ),
            (
                "turn.completed".into(),
                TurnEvent::Completed { usage: usage(10) }
            ),
            (
                "turn.failed".into(),
                TurnEvent::Failed {
                    category: FailureCategory::Infrastructure,
                    message: "the endpoint refused",
                    retryable: true,
                    usage: usage(20),
                }
            ),
        ]
    );
}

#[test]
fn a_sub_agent_runs_when_a_turn_starts_or_its_prompt_is_answered_and_waits_on_its_own_prompt() {
    let events = one_of_each();
    assert_eq!(
        read_all(&events, |e| e.child_status(AGENT)),
        vec![
            ("turn.started".into(), AgentStatus::Running),
            ("approval.requested".into(), AgentStatus::WaitingForUser),
            ("approval.resolved".into(), AgentStatus::Running),
        ]
    );
    // Its own sub-agent's prompts, passed up through it, are not its own;
    // nor is agent 10's, whose id starts with its own.
    for (event, expected) in [
        (asked("agent:1.1:approval:1", "1.1"), None),
        (answered("agent:1.1:approval:1"), None),
        (asked("agent:10:approval:1", "10"), None),
        (answered("agent:10:approval:1"), None),
        (answered("approval:1"), None),
        (answered("agent:1:approval:7"), Some(AgentStatus::Running)),
    ] {
        assert_eq!(event.child_status(AGENT), expected, "{event:?}");
    }
}

#[test]
fn a_sub_agents_prompts_decisions_sub_agents_and_compactions_reach_its_parent_as_they_are() {
    let events = one_of_each();
    let passed: Vec<String> = read_all(&events, |e| e.passes_to_parent().then_some(()))
        .into_iter()
        .map(|(kind, ())| kind)
        .collect();
    assert_eq!(
        passed,
        [
            "agent.tool_call",
            "agent.tool_result",
            "context.compacted",
            "permission.decision",
            "approval.requested",
            "approval.resolved",
            "autonomy.paused",
            "agent.spawned",
            "agent.status",
            "agent.completed",
        ]
    );
}

#[test]
fn the_transcript_keeps_every_event_but_deltas_and_another_agents_calls() {
    let events = one_of_each();
    let left_out: Vec<String> = read_all(&events, |e| (!e.transcribed()).then_some(()))
        .into_iter()
        .map(|(kind, ())| kind)
        .collect();
    assert_eq!(
        left_out,
        ["assistant.delta", "agent.tool_call", "agent.tool_result"]
    );
}
