//! `bash`: one shell command in the workspace.
//!
//! The command runs under the sandbox (`crate::sandbox`): its walls
//! (namespaces, Landlock, seccomp, limits) confine it by the call's mode
//! and posture, it starts from an
//! allow-listed environment, its output is kept as a bounded head and tail,
//! and it runs in its own process group, killed when the command ends, when
//! it prints past the limit, and when the call is dropped (timeout,
//! cancel), so a call leaves no process behind.

use serde_json::{Value, json};

use super::{MAX_OUTPUT, required_str};
use crate::permission::classify::classify_command;
use crate::sandbox::{CommandSpec, Finished, OutputLimits, Policy, Reach, run, session_tmp};
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
            let tmp = session_tmp(&ctx.session_dir);
            let root = ctx.workspace.root();
            let policy = Policy::resolve(ctx.mode(), ctx.posture(), root, &tmp, &ctx.sandbox);
            let finished = run(CommandSpec {
                script: command,
                cwd: root,
                policy: &policy,
                env: &ctx.sandbox.env,
                tmp: &tmp,
                limits: OutputLimits {
                    head: MAX_OUTPUT / 4,
                    tail: MAX_OUTPUT / 4,
                    kill_after: ctx.sandbox.max_output,
                },
            })
            .await
            .map_err(|e| ToolError::failed(e.to_string()))?;
            let text = report(&finished, &policy, ctx.sandbox.max_output);
            if finished.status.success() && !finished.killed_for_output {
                Ok(text)
            } else {
                Err(ToolError::failed(text))
            }
        })
    }
}

/// What the model reads of a finished command: its exit, its output (head
/// and tail of each stream), and what cadre did to it.
fn report(finished: &Finished, policy: &Policy, max_output: u64) -> String {
    let code = finished
        .status
        .code()
        .map_or_else(|| "killed by a signal".to_string(), |c| c.to_string());
    let mut text = format!("exit code: {code}\n");
    if !finished.stdout.is_empty() {
        text.push_str(&finished.stdout.render());
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if !finished.stderr.is_empty() {
        text.push_str("[stderr]\n");
        text.push_str(&finished.stderr.render());
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    if finished.killed_for_output {
        text.push_str(&format!(
            "[cadre: the command printed more than {} MiB in all ({} bytes seen); its process \
             group was killed]\n",
            max_output / (1024 * 1024),
            finished.stdout.total() + finished.stderr.total(),
        ));
    }
    if finished.output_abandoned {
        text.push_str(
            "[cadre: a process that left the command's process group still held its output \
             open; reading stopped]\n",
        );
    }
    // Say where a refusal may come from, only when one shows.
    let refused = [
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
    ]
    .iter()
    .any(|m| text.contains(m));
    if finished.confined && !finished.status.success() && refused {
        text.push_str(&format!(
            "[sandbox: {}; the refusal above may come from it]\n",
            describe(policy)
        ));
    }
    text
}

/// The sandbox in one phrase, for the model.
fn describe(policy: &Policy) -> &'static str {
    match policy.reach {
        Reach::ReadOnly => {
            "read-only: nothing is writable but /dev/null and $TMPDIR, and there is no network"
        }
        Reach::Workspace => {
            "workspace-write: only the workspace (but .git and .cadre), $TMPDIR and the \
             configured writable roots are writable"
        }
        Reach::Everywhere => {
            "full access: everything is writable but the workspace's .git and .cadre and \
             cadre's configuration and data directories"
        }
    }
}
