//! The conversation: what was said, by whom, and which tool calls it answered.
//!
//! Messages are immutable once made and shared as `Arc<Message>`, so a model
//! request borrows the history instead of copying it.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// One tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id (or one cadre made up when the provider sent none);
    /// the tool result answers it.
    pub id: String,
    /// The tool's routing name, exactly as the model sent it.
    pub name: String,
    /// The arguments as the model sent them: a JSON text that may be invalid.
    pub arguments: String,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// What the user (or the host on the user's behalf) said.
    User {
        /// The text.
        content: String,
    },
    /// What the model answered: text, tool calls, or both.
    Assistant {
        /// The visible text; empty when the model only called tools.
        content: String,
        /// The calls, in the order the model made them.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
    },
    /// The observation that answers one tool call.
    Tool {
        /// The id of the call this answers.
        call_id: String,
        /// What the model reads: the tool's output or a coded error.
        content: String,
    },
    /// A compaction (CX4): from here on a request sends this record and
    /// the recent messages it keeps instead of what came before
    /// (`context::view`). What it replaces stays stored.
    Compaction(Box<crate::context::Compaction>),
}

impl Message {
    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Message::User {
            content: content.into(),
        }
    }
}

/// The ids of calls made in `messages` that no later tool message answers,
/// in the order they were made.
///
/// A conversation sent to a provider must answer every call, so a host that
/// ends a turn early (cancel, crash) closes these with a synthetic result.
pub fn unanswered_calls(messages: &[Arc<Message>]) -> Vec<ToolCall> {
    let mut open: Vec<ToolCall> = Vec::new();
    for message in messages {
        match message.as_ref() {
            Message::Assistant { tool_calls, .. } => open.extend(tool_calls.iter().cloned()),
            Message::Tool { call_id, .. } => open.retain(|call| &call.id != call_id),
            Message::User { .. } | Message::Compaction(_) => {}
        }
    }
    open
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn unanswered_calls_lists_only_open_ones_in_order() {
        let messages: Vec<Arc<Message>> = vec![
            Arc::new(Message::user("go")),
            Arc::new(Message::Assistant {
                content: String::new(),
                tool_calls: vec![call("a"), call("b"), call("c")],
            }),
            Arc::new(Message::Tool {
                call_id: "b".into(),
                content: "ok".into(),
            }),
        ];
        let open: Vec<String> = unanswered_calls(&messages)
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(open, vec!["a".to_string(), "c".to_string()]);
    }
}
