//! `bash`: one shell command in the workspace.
//!
//! The command runs in its own process group. When the call is dropped
//! before the command finishes (timeout, cancel) the whole group is killed,
//! so a cancelled turn leaves no process behind.

use std::process::Stdio;

use serde_json::{Value, json};

use super::{MAX_OUTPUT, required_str, truncate_middle};
use crate::permission::classify::classify_command;
use crate::tool::definition::{Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};

/// Runs a shell command.
pub struct Bash(ToolDefinition);

impl Bash {
    pub fn new() -> Self {
        let definition = ToolDefinition::new(
            "bash",
            "Run a shell command with `bash -c` in the workspace root and return its exit \
             code, stdout and stderr. A non-zero exit is reported as an error.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line"}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
            Safety::SideEffect,
        );
        Self(definition.classifying_calls().as_shell())
    }
}

/// Kills a process group when dropped, unless disarmed.
struct GroupKill(Option<rustix::process::Pid>);

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(pid) = self.0.take() {
            // The group may already be gone; nothing to do then.
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
}

impl Tool for Bash {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    /// Read-only when `classify_command` proves the command read-only;
    /// a call without a string `command` is side-effect.
    fn classify(&self, args: &Value) -> Safety {
        args.get("command")
            .and_then(Value::as_str)
            .map_or(Safety::SideEffect, |command| {
                classify_command(command).safety
            })
    }

    fn unproven_because(&self, args: &Value) -> Option<String> {
        let command = args.get("command").and_then(Value::as_str)?;
        let classified = classify_command(command);
        (classified.safety == Safety::SideEffect).then_some(classified.reason)
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let command = required_str(&args, "command")?;
            let child = tokio::process::Command::new("bash")
                .arg("-c")
                .arg(command)
                .current_dir(ctx.workspace.root())
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .kill_on_drop(true)
                .spawn()
                .map_err(|e| ToolError::failed(format!("could not start bash: {e}")))?;
            // pid 1 would mean "every process"; a child is never pid 1.
            let group = child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .filter(|&id| id > 1)
                .and_then(rustix::process::Pid::from_raw);
            let mut guard = GroupKill(group);
            let output = child
                .wait_with_output()
                .await
                .map_err(|e| ToolError::failed(format!("bash failed: {e}")))?;
            guard.0 = None;
            let stdout = String::from_utf8_lossy(&output.stdout);
            let stderr = String::from_utf8_lossy(&output.stderr);
            let code = output
                .status
                .code()
                .map_or_else(|| "killed by a signal".to_string(), |c| c.to_string());
            let mut text = format!("exit code: {code}\n");
            if !stdout.is_empty() {
                text.push_str(&truncate_middle(&stdout, MAX_OUTPUT / 2));
                if !stdout.ends_with('\n') {
                    text.push('\n');
                }
            }
            if !stderr.is_empty() {
                text.push_str("[stderr]\n");
                text.push_str(&truncate_middle(&stderr, MAX_OUTPUT / 2));
            }
            if output.status.success() {
                Ok(text)
            } else {
                Err(ToolError::failed(text))
            }
        })
    }
}
