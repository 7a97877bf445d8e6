use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::*;

fn event(value: Value) -> Event {
    serde_json::from_value(value).expect("an event")
}

#[track_caller]
fn check(value: Value, expected: Option<bool>) {
    assert_eq!(waiting(&event(value.clone())), expected, "{value}");
}

#[test]
fn a_request_going_out_starts_the_wait_and_an_answer_or_an_end_stops_it() {
    let tool_result = json!({"type": "tool.result", "turn_id": 1, "call_id": "c", "name": "bash", "status": "ok", "output": ""});
    check(
        json!({"type": "turn.started", "turn_id": 1, "mode": "work"}),
        Some(true),
    );
    check(tool_result, Some(true));
    check(
        json!({"type": "model.retry", "turn_id": 1, "attempt": 1, "delay_ms": 10, "reason": "503"}),
        Some(true),
    );
    check(
        json!({"type": "assistant.delta", "turn_id": 1, "text": "hi"}),
        Some(false),
    );
    check(
        json!({"type": "tool.call", "turn_id": 1, "call_id": "c", "name": "bash", "arguments": {}}),
        Some(false),
    );
    check(json!({"type": "session.idle", "turns": 1}), Some(false));
    check(json!({"type": "mode.changed", "mode": "plan"}), None);
}

#[test]
fn it_starts_only_at_the_start_of_a_line_and_stops_before_text() {
    let started = event(json!({"type": "turn.started", "turn_id": 1, "mode": "work"}));
    let mut spinner = Spinner::new(true);
    spinner.after(&started);
    assert!(spinner.bar.is_some(), "waits at the start of a line");
    spinner.before_write("streamed, no line end");
    assert!(spinner.bar.is_none(), "cleared before text");
    spinner.after(&started);
    assert!(spinner.bar.is_none(), "must not clear a half-written line");
    spinner.before_write(" and its end\n");
    spinner.after(&started);
    assert!(spinner.bar.is_some());

    let mut off = Spinner::new(false);
    off.after(&started);
    assert!(off.bar.is_none(), "off when not enabled");
}

#[test]
fn a_running_tool_is_said_with_its_name_and_the_model_wait_after_it() {
    let doing_after = |value: Value| doing(&event(value));
    assert_eq!(
        doing_after(
            json!({"type": "tool.call", "turn_id": 1, "call_id": "c", "name": "bash", "arguments": {}})
        ),
        Some(Some("running bash".to_string()))
    );
    assert_eq!(
        doing_after(
            json!({"type": "tool.result", "turn_id": 1, "call_id": "c", "name": "bash", "status": "ok", "output": ""})
        ),
        Some(Some(WAITING.to_string()))
    );
    assert_eq!(
        doing_after(
            json!({"type": "turn.completed", "turn_id": 1, "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "iterations": 1})
        ),
        Some(None)
    );
    assert_eq!(
        doing_after(json!({"type": "mode.changed", "mode": "plan"})),
        None
    );
    // The spinner keeps turning through a tool call, relabelled.
    let mut spinner = Spinner::new(true);
    spinner.after(&event(
        json!({"type": "turn.started", "turn_id": 1, "mode": "work"}),
    ));
    spinner.after(&event(
        json!({"type": "tool.call", "turn_id": 1, "call_id": "c", "name": "bash", "arguments": {}}),
    ));
    let bar = spinner.bar.as_ref().expect("still turning");
    assert_eq!(bar.message(), "running bash");
}
