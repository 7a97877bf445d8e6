use cadre_runtime::message::{Message, ToolCall};
use cadre_runtime::protocol::{Event, ToolStatus, Usage};

use super::Recorder;

fn call(id: &str) -> Event {
    Event::ToolCall {
        turn_id: 1,
        call_id: id.into(),
        name: "read_file".into(),
        arguments: serde_json::json!({"path": "a"}),
    }
}

fn result(id: &str) -> Event {
    Event::ToolResult {
        turn_id: 1,
        call_id: id.into(),
        name: "read_file".into(),
        status: ToolStatus::Ok,
        error_code: None,
        output: format!("out {id}"),
    }
}

fn said(text: &str) -> Event {
    Event::AssistantMessage {
        turn_id: 1,
        text: text.into(),
    }
}

fn done() -> Event {
    Event::TurnCompleted {
        turn_id: 1,
        usage: Usage::default(),
        iterations: 2,
        context: None,
    }
}

fn check(events: Vec<Event>, expected: Vec<Message>) {
    let mut recorder = Recorder::default();
    let got: Vec<Message> = events.iter().flat_map(|e| recorder.push(e)).collect();
    assert_eq!(got, expected);
}

fn assistant(text: &str, calls: &[&str]) -> Message {
    Message::Assistant {
        content: text.into(),
        tool_calls: calls
            .iter()
            .map(|id| ToolCall {
                id: (*id).into(),
                name: "read_file".into(),
                arguments: r#"{"path":"a"}"#.into(),
            })
            .collect(),
    }
}

fn tool(id: &str) -> Message {
    Message::Tool {
        call_id: id.into(),
        content: format!("out {id}"),
    }
}

#[test]
fn a_remote_childs_events_become_its_conversation() {
    // A response with two calls, their results, then the answer.
    check(
        vec![
            said("looking"),
            call("a"),
            call("b"),
            result("a"),
            result("b"),
            said("done"),
            done(),
        ],
        vec![
            assistant("looking", &["a", "b"]),
            tool("a"),
            tool("b"),
            assistant("done", &[]),
        ],
    );
    // Calls with no text; a turn that ends on its answer alone.
    check(
        vec![call("a"), result("a"), said("ok"), done()],
        vec![assistant("", &["a"]), tool("a"), assistant("ok", &[])],
    );
    // Events that are no part of the conversation change nothing.
    check(
        vec![Event::AssistantDelta {
            turn_id: 1,
            text: "x".into(),
        }],
        vec![],
    );
}

#[test]
fn a_remote_childs_events_naming_another_agent_are_dropped() {
    let asked = |id: &str, agent: &str| Event::ApprovalRequested {
        id: id.into(),
        agent_id: agent.into(),
        call_id: "c".into(),
        tool: "bash".into(),
        arguments: serde_json::json!({}),
        reason: String::new(),
        preview: None,
    };
    let check = |event: Event, expected: bool| assert_eq!(event.is_own("1"), expected, "{event:?}");
    check(asked("agent:1:approval:1", "1"), true);
    // The parent's own prompt, another child's, a prefix of another id.
    check(asked("approval:1", "1"), false);
    check(asked("agent:2:approval:1", "1"), false);
    check(asked("agent:12:approval:1", "1"), false);
    check(asked("agent:1:approval:1", "2"), false);
    check(
        Event::ApprovalResolved {
            id: "approval:3".into(),
            outcome: cadre_runtime::protocol::ApprovalOutcome::AllowOnce,
        },
        false,
    );
    check(said("x"), true);
    // Its own compaction, not one under another agent's name.
    let compacted = |agent: &str| Event::ContextCompacted {
        agent: agent.into(),
        tokens_before: 10,
        tokens_after: 5,
        kind: cadre_runtime::protocol::CompactionKind::Model,
    };
    check(compacted("1"), true);
    check(compacted("main"), false);
    check(compacted("2"), false);
    // Another agent's forwarded calls never come from a remote child.
    check(
        Event::AgentToolCall {
            agent_id: "1".into(),
            call_id: "c".into(),
            name: "bash".into(),
            arguments: serde_json::json!({}),
        },
        false,
    );
}
