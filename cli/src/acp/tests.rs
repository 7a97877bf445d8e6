//! The pure parts of `cadre acp`: framing, the event mapping, prompts,
//! excerpts of the editor's files.

use std::path::Path;

use cadre_runtime::Mode;
use cadre_runtime::permission::Posture;
use cadre_runtime::protocol::{Event, ToolStatus};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::files::excerpt;
use super::rpc::{Incoming, parse};
use super::updates::{Action, Mapper};
use super::{prompt_text, replay};

fn mapper() -> Mapper {
    Mapper::new(
        Path::new("/ws"),
        Mode::Work,
        Posture::Suggest,
        Posture::Auto,
    )
}

/// What each event becomes, in order, from a fresh session.
fn check(events: &[Event], expected: &[Value]) {
    let mut mapper = mapper();
    let got: Vec<Value> = events
        .iter()
        .flat_map(|e| mapper.event(e))
        .map(|action| match action {
            Action::Update(update) => update,
            Action::Approval {
                approval,
                tool_call,
            } => json!({"ask": approval, "toolCall": tool_call}),
            Action::Questionnaire {
                id,
                tool_call,
                entry,
            } => json!({"questionnaire": id, "entry": entry, "toolCall": tool_call}),
        })
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn streamed_text_is_sent_once_and_whole_text_when_nothing_streamed() {
    check(
        &[
            Event::AssistantDelta {
                turn_id: 1,
                text: "he".into(),
            },
            Event::AssistantDelta {
                turn_id: 1,
                text: "llo".into(),
            },
            Event::AssistantMessage {
                turn_id: 1,
                text: "hello".into(),
            },
            Event::AssistantMessage {
                turn_id: 1,
                text: "whole".into(),
            },
        ],
        &[
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "he"}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "llo"}}),
            json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "whole"}}),
        ],
    );
}

#[test]
fn a_tool_call_has_a_kind_a_location_and_its_result_a_status() {
    check(
        &[
            Event::ToolCall {
                turn_id: 1,
                call_id: "c1".into(),
                name: "read_file".into(),
                arguments: json!({"path": "src/lib.rs", "offset": 10}),
            },
            Event::ToolResult {
                turn_id: 1,
                call_id: "c1".into(),
                name: "read_file".into(),
                status: ToolStatus::Error,
                error_code: None,
                output: "no such file".into(),
            },
        ],
        &[
            json!({
                "sessionUpdate": "tool_call", "toolCallId": "c1", "title": "read_file src/lib.rs",
                "kind": "read", "status": "pending",
                "rawInput": {"path": "src/lib.rs", "offset": 10},
                "locations": [{"path": "/ws/src/lib.rs", "line": 10}],
            }),
            json!({
                "sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "failed",
                "content": [{"type": "content", "content": {"type": "text", "text": "no such file"}}],
            }),
        ],
    );
}

#[test]
fn todo_write_is_the_editors_plan() {
    let arguments = json!({"todos": [
        {"content": "read", "status": "completed"},
        {"content": "fix", "status": "in_progress"},
        {"content": "test", "status": "pending"},
    ]});
    let mut mapper = mapper();
    let actions = mapper.event(&Event::ToolCall {
        turn_id: 1,
        call_id: "c".into(),
        name: "todo_write".into(),
        arguments,
    });
    assert_eq!(
        actions.last(),
        Some(&Action::Update(
            json!({"sessionUpdate": "plan", "entries": [
                {"content": "read", "priority": "medium", "status": "completed"},
                {"content": "fix", "priority": "medium", "status": "in_progress"},
                {"content": "test", "priority": "medium", "status": "pending"},
            ]})
        ))
    );
}

#[test]
fn a_sub_agents_approval_keeps_its_id_and_names_the_agent() {
    check(
        &[Event::ApprovalRequested {
            id: "agent:1:approval:2".into(),
            agent_id: "1".into(),
            call_id: "c9".into(),
            tool: "bash".into(),
            arguments: json!({"command": "make"}),
            reason: "not proven read-only".into(),
            preview: None,
        }],
        &[json!({"ask": "agent:1:approval:2", "toolCall": {
            "toolCallId": "1/c9", "title": "agent 1: bash make", "kind": "execute",
            "rawInput": {"command": "make"},
            "content": [{"type": "content", "content": {"type": "text", "text": "not proven read-only"}}],
        }})],
    );
}

#[test]
fn a_mode_change_is_told_once_and_the_posture_options_stop_at_the_ceiling() {
    let mut mapper = mapper();
    assert_eq!(mapper.event(&Event::ModeChanged { mode: Mode::Work }), []);
    let actions = mapper.event(&Event::ModeChanged { mode: Mode::Plan });
    assert_eq!(
        actions[0],
        Action::Update(json!({"sessionUpdate": "current_mode_update", "currentModeId": "plan"}))
    );
    let options = mapper.config_options();
    let postures: Vec<&str> = options[1]["options"]
        .as_array()
        .map(|o| o.iter().filter_map(|p| p["value"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(postures, ["never", "suggest", "auto"]);
}

#[test]
fn messages_parse_as_requests_notifications_and_responses() {
    let request = parse(r#"{"jsonrpc":"2.0","id":3,"method":"session/new","params":{"cwd":"/"}}"#);
    assert_eq!(
        request,
        Ok(Incoming::Request {
            id: json!(3),
            method: "session/new".into(),
            params: json!({"cwd": "/"})
        })
    );
    let cancel = parse(r#"{"jsonrpc":"2.0","method":"session/cancel","params":{}}"#);
    assert!(matches!(cancel, Ok(Incoming::Notification { .. })));
    let answer = parse(r#"{"jsonrpc":"2.0","id":"fs-1","error":{"code":-32002,"message":"gone"}}"#);
    assert!(matches!(answer, Ok(Incoming::Response { outcome: Err(e), .. }) if e.code == -32002));
    assert_eq!(parse("not json").map_err(|e| e.code), Err(-32700));
    assert_eq!(parse("[1]").map_err(|e| e.code), Err(-32600));
}

#[test]
fn a_prompt_joins_text_and_names_resources() {
    let prompt = json!([
        {"type": "text", "text": "look at"},
        {"type": "resource_link", "uri": "file:///ws/a.rs", "name": "a.rs"},
        {"type": "resource", "resource": {"uri": "file:///ws/b.rs", "text": "fn b() {}"}},
    ]);
    assert_eq!(
        prompt_text(&prompt).as_deref(),
        Ok("look at\n@file:///ws/a.rs\n@file:///ws/b.rs:\n```\nfn b() {}\n```")
    );
    assert!(prompt_text(&json!([{"type": "image", "data": ""}])).is_err());
    assert!(prompt_text(&json!([{"type": "text", "text": "  "}])).is_err());
}

#[test]
fn an_excerpt_says_when_the_file_goes_on_or_was_cut() {
    assert_eq!(excerpt("", 1, 10, 100), "(empty file)");
    assert_eq!(excerpt("a\nb\n", 1, 10, 100), "a\nb\n");
    assert_eq!(
        excerpt("a\nb\nc\n", 4, 2, 100),
        "a\nb\n[showing lines 4-5; the file goes on: read on with offset=6]"
    );
    assert_eq!(
        excerpt("aaaa\nbbbb\n", 1, 10, 7),
        "aaaa\n[cut at 7 bytes: showing lines 1-1; read on with offset=2]"
    );
    assert_eq!(
        excerpt("ééé\n", 1, 10, 3),
        "é\n[line 1 is longer than 3 bytes: showing its first 2 bytes; the next line is offset=2]"
    );
}

#[test]
fn a_loaded_session_replays_what_was_said() {
    let said = replay(&cadre_runtime::message::Message::user("hi"));
    assert_eq!(
        said,
        [json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "hi"}})]
    );
}
