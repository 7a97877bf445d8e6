//! `todo_write`: the agent's own task list, kept in the session directory.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::tool::definition::{Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};

/// One entry of the agent's task list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TodoItem {
    /// What is to be done.
    pub content: String,
    /// `pending`, `in_progress` or `completed`.
    pub status: String,
}

/// Replaces the task list.
pub struct TodoWrite(ToolDefinition);

impl TodoWrite {
    pub fn new() -> Self {
        Self(ToolDefinition::new(
            "todo_write",
            "Replace your task list for this session. Keep exactly one item in_progress \
             while working; mark items completed as soon as they are done.",
            json!({
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": {"type": "string", "minLength": 1},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                            },
                            "required": ["content", "status"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["todos"],
                "additionalProperties": false
            }),
            Safety::SideEffect,
        )
        .touching_session_state_only())
    }
}

impl Tool for TodoWrite {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let todos: Vec<TodoItem> = serde_json::from_value(args["todos"].clone())
                .map_err(|e| ToolError::invalid(format!("'todos': {e}")))?;
            let path = ctx.session_dir.join("todos.json");
            tokio::fs::create_dir_all(&ctx.session_dir)
                .await
                .map_err(|e| ToolError::failed(format!("session directory: {e}")))?;
            let body = serde_json::to_vec_pretty(&todos)
                .map_err(|e| ToolError::failed(format!("encoding the list: {e}")))?;
            tokio::fs::write(&path, body)
                .await
                .map_err(|e| ToolError::failed(format!("{}: {e}", path.display())))?;
            if todos.is_empty() {
                return Ok("task list cleared".to_string());
            }
            let lines: Vec<String> = todos
                .iter()
                .map(|t| {
                    let mark = match t.status.as_str() {
                        "completed" => "[x]",
                        "in_progress" => "[>]",
                        _ => "[ ]",
                    };
                    format!("{mark} {}", t.content)
                })
                .collect();
            Ok(lines.join("\n"))
        })
    }
}
