//! Another agent's tool calls, as its parent's host sees them.

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
            _ => None,
        }
    }
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
}
