use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::tool::{Safety, builtin_definitions};

#[test]
fn a_pre_tool_use_event() {
    let def = builtin_definitions()
        .iter()
        .find(|d| d.name == "write_file")
        .expect("write_file");
    let args = json!({"path": "src/../migrations/1.sql", "content": "x"});
    let call = Call::new(def, &args, Safety::SideEffect, Path::new("/ws"));
    let who = Who {
        session_id: "s1",
        agent: "1.2",
        role: "coder",
        step: Some("build"),
        mode: Mode::Work,
        posture: Posture::Auto,
        cwd: Path::new("/ws"),
    };
    assert_eq!(
        tool_event(HookEvent::PreToolUse, &who, &call),
        json!({
            "event": "pre_tool_use",
            "session_id": "s1",
            "agent": "1.2",
            "role": "coder",
            "step": "build",
            "mode": "work",
            "posture": "auto",
            "cwd": "/ws",
            "tool": "write_file",
            "arguments": {"path": "src/../migrations/1.sql", "content": "x"},
            "paths": [{"written": "src/../migrations/1.sql", "path": "/ws/migrations/1.sql"}],
        })
    );
}

#[test]
fn other_events_add_their_fields() {
    let who = Who {
        session_id: "s1",
        agent: "main",
        role: "main",
        step: None,
        mode: Mode::Plan,
        posture: Posture::Suggest,
        cwd: Path::new("/ws"),
    };
    assert_eq!(
        with(base(HookEvent::Stop, &who), json!({"message": "done"})),
        json!({
            "event": "stop",
            "session_id": "s1",
            "agent": "main",
            "role": "main",
            "step": null,
            "mode": "plan",
            "posture": "suggest",
            "cwd": "/ws",
            "message": "done",
        })
    );
}
