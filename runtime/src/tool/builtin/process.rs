//! `process`: long-running commands cadre supervises (PR1): a dev server,
//! a database for the tests, a watcher.
//!
//! `start` runs a command line like `bash` does (the same sandbox of the
//! call's mode and posture, the same environment) but returns while it
//! runs; `list`, `output` and `wait` read what it printed, from a ring of
//! its last bytes, and `stop` ends it. `start` and `stop` change the world:
//! they pass the permission path of a `bash` call (rules on the command
//! line, the floor, the posture), and Plan and `never` refuse them; `list`,
//! `output` and `wait` only read, so a verifier may use them.
//! `docs/processes.md`.

use std::time::Duration;

use regex::Regex;
use serde_json::{Value, json};

use super::bash::command_environment;
use super::required_str;
use crate::process::{
    Chunk, Entry, ProcessError, ProcessScope, StartRequest, State, WaitOutcome, name, parse_name,
};
use crate::sandbox::{Policy, session_tmp};
use crate::tool::definition::{Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};

/// The tool's name.
pub const PROCESS_TOOL: &str = "process";

/// The longest a `start` waits for readiness or a `wait` waits, in seconds.
const MAX_WAIT_SECS: u64 = 300;

/// A `start` with a `ready` pattern and no timeout waits this long.
const DEFAULT_READY_SECS: u64 = 30;

/// A `wait` with no timeout waits this long.
const DEFAULT_WAIT_SECS: u64 = 30;

/// The most output one `output` returns; the tail shown by `start`,
/// `wait` and `stop` is smaller.
const MAX_READ: usize = 16 * 1024;
const TAIL: usize = 2 * 1024;

/// Starts, lists, reads, waits for and stops managed processes.
pub struct Process(ToolDefinition);

impl Process {
    /// The tool, with a timeout above its longest wait.
    pub fn new() -> Self {
        let definition = ToolDefinition::new(
            PROCESS_TOOL,
            "Run a long-lived command in the background (a dev server, a database, a watcher) \
             and work with it while it runs. Actions: `start` (`command`; optional `ready`, a \
             regex to wait for in its output, and `timeout_secs`) returns its id (p1, p2, …); \
             `list`; `output` (`id`; optional `cursor` from an earlier read, `max_bytes`) \
             reads what it printed; `wait` (`id`; optional `until` regex, `cursor`, \
             `timeout_secs`) waits until the pattern appears or the process exits; `stop` \
             (`id`). Processes are stopped when the agent that started them ends. Use `bash` \
             for commands that finish; never background a command in `bash` with `&`.",
            json!({
                "type": "object",
                "properties": {
                    "action": {"type": "string", "enum": ["start", "list", "output", "wait", "stop"]},
                    "command": {"type": "string", "description": "start: the command line"},
                    "ready": {"type": "string", "description": "start: a regex its output matches once it is ready"},
                    "id": {"type": "string", "description": "output, wait, stop: the process (p1)"},
                    "until": {"type": "string", "description": "wait: a regex to wait for"},
                    "cursor": {"type": "integer", "minimum": 0, "description": "output, wait: read on from here (the `next cursor` of an earlier answer)"},
                    "max_bytes": {"type": "integer", "minimum": 1},
                    "timeout_secs": {"type": "integer", "minimum": 1, "maximum": MAX_WAIT_SECS}
                },
                "required": ["action"],
                "additionalProperties": false
            }),
            Safety::SideEffect,
        );
        Self(
            definition
                .classifying_calls()
                .as_shell()
                .with_timeout(Duration::from_secs(MAX_WAIT_SECS + 30))
                .with_plan_note(
                    "Plan mode: only `list`, `output` and `wait`; `start` and `stop` are refused.",
                ),
        )
    }
}

impl Tool for Process {
    fn definition(&self) -> &ToolDefinition {
        &self.0
    }

    /// `list`, `output` and `wait` only read; `start`, `stop` and anything
    /// unreadable may change the world.
    fn classify(&self, args: &Value) -> Safety {
        match args.get("action").and_then(Value::as_str) {
            Some("list" | "output" | "wait") => Safety::ReadOnly,
            _ => Safety::SideEffect,
        }
    }

    fn unproven_because(&self, args: &Value) -> Option<String> {
        let action = args.get("action").and_then(Value::as_str).unwrap_or("?");
        Some(format!("`process {action}` starts or stops a process"))
    }

    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let Some(scope) = ctx.processes.as_ref() else {
                return Err(ToolError::failed(
                    "managed processes are not available to this agent",
                ));
            };
            match required_str(&args, "action")? {
                "start" => start(&args, ctx, scope).await,
                "list" => Ok(list(scope)),
                "output" => output(&args, scope),
                "wait" => wait(&args, scope).await,
                "stop" => stop(&args, scope).await,
                other => Err(ToolError::invalid(format!("unknown action '{other}'"))),
            }
        })
    }
}

fn failed(err: ProcessError) -> ToolError {
    ToolError::failed(err.to_string())
}

fn id_of(args: &Value) -> Result<u64, ToolError> {
    let text = required_str(args, "id")?;
    parse_name(text).ok_or_else(|| ToolError::invalid(format!("'{text}' is not a process id (p1)")))
}

fn regex(args: &Value, name: &str) -> Result<Option<Regex>, ToolError> {
    args.get(name)
        .and_then(Value::as_str)
        .map(|p| Regex::new(p).map_err(|e| ToolError::invalid(format!("'{name}': {e}"))))
        .transpose()
}

fn timeout(args: &Value, default: u64) -> Duration {
    let secs = args
        .get("timeout_secs")
        .and_then(Value::as_u64)
        .unwrap_or(default);
    Duration::from_secs(secs.clamp(1, MAX_WAIT_SECS))
}

async fn start(args: &Value, ctx: &ToolContext, scope: &ProcessScope) -> Result<String, ToolError> {
    let command = required_str(args, "command")?;
    let ready = regex(args, "ready")?;
    let tmp = session_tmp(&ctx.session_dir);
    let root = ctx.workspace.root();
    let policy = Policy::resolve(ctx.mode(), ctx.posture(), root, &tmp, &ctx.sandbox);
    let env = command_environment(command, &ctx.sandbox.env);
    let started = scope
        .processes
        .start(StartRequest {
            owner: &scope.owner,
            session_id: &scope.session_id,
            command,
            cwd: root,
            policy: &policy,
            env: &env,
            tmp: &tmp,
            limits: ctx.sandbox.processes,
        })
        .await
        .map_err(failed)?;
    let id = name(started.id);
    let head = format!("started {id} (pid {}): {command}\n", started.pid);
    let Some(pattern) = ready else {
        return Ok(head);
    };
    let limit = timeout(args, DEFAULT_READY_SECS);
    let outcome = scope
        .processes
        .wait(started.id, Some(&pattern), 0, limit)
        .await
        .map_err(failed)?;
    match outcome {
        WaitOutcome::Matched { line, next } => Ok(format!(
            "{head}ready: its output matched `{pattern}`: {line}\nnext cursor: {next}\n"
        )),
        WaitOutcome::Ended(state) => Err(ToolError::failed(format!(
            "{head}it {} before its output matched `{pattern}`\n{}",
            state.describe(),
            tail(scope, started.id)
        ))),
        WaitOutcome::TimedOut => {
            let state = scope.processes.stop(started.id).await.map_err(failed)?;
            Err(ToolError::failed(format!(
                "{head}its output did not match `{pattern}` within {} s; it was {}\n{}",
                limit.as_secs(),
                state.describe(),
                tail(scope, started.id)
            )))
        }
    }
}

fn list(scope: &ProcessScope) -> String {
    let all = scope.processes.list();
    if all.is_empty() {
        return "no processes\n".into();
    }
    all.iter()
        .map(|p| {
            format!(
                "{}\t{}\tpid {}\t{} bytes printed\tstarted by {}\t{}\n",
                name(p.id),
                p.entry.state.describe(),
                p.entry.pid.unwrap_or_default(),
                p.printed,
                p.entry.owner,
                p.entry.command
            )
        })
        .collect()
}

fn render(id: u64, chunk: &Chunk, entry: &Entry) -> String {
    let mut text = format!(
        "{} {} ({})\n",
        name(id),
        entry.state.describe(),
        entry.command
    );
    if chunk.skipped > 0 {
        text.push_str(&format!(
            "[{} earlier bytes are no longer kept]\n",
            chunk.skipped
        ));
    }
    text.push_str(&format!("[output bytes {}..{}]\n", chunk.from, chunk.next));
    text.push_str(&chunk.text);
    if !chunk.text.is_empty() && !chunk.text.ends_with('\n') {
        text.push('\n');
    }
    if chunk.more > 0 {
        text.push_str(&format!("[{} more bytes after this]\n", chunk.more));
    }
    text.push_str(&format!("next cursor: {}\n", chunk.next));
    text
}

fn tail(scope: &ProcessScope, id: u64) -> String {
    scope.processes.output(id, None, TAIL).map_or_else(
        |e| e.to_string(),
        |(chunk, entry)| render(id, &chunk, &entry),
    )
}

fn output(args: &Value, scope: &ProcessScope) -> Result<String, ToolError> {
    let id = id_of(args)?;
    let max = args
        .get("max_bytes")
        .and_then(Value::as_u64)
        .map_or(MAX_READ, |m| (m as usize).clamp(1, MAX_READ));
    let cursor = args.get("cursor").and_then(Value::as_u64);
    let (chunk, entry) = scope.processes.output(id, cursor, max).map_err(failed)?;
    Ok(render(id, &chunk, &entry))
}

async fn wait(args: &Value, scope: &ProcessScope) -> Result<String, ToolError> {
    let id = id_of(args)?;
    let until = regex(args, "until")?;
    let cursor = args.get("cursor").and_then(Value::as_u64).unwrap_or(0);
    let limit = timeout(args, DEFAULT_WAIT_SECS);
    let outcome = scope
        .processes
        .wait(id, until.as_ref(), cursor, limit)
        .await
        .map_err(failed)?;
    Ok(match outcome {
        WaitOutcome::Matched { line, next } => {
            format!("{}: matched: {line}\nnext cursor: {next}\n", name(id))
        }
        WaitOutcome::Ended(state) => {
            format!("{}: {}\n{}", name(id), state.describe(), tail(scope, id))
        }
        WaitOutcome::TimedOut => format!(
            "{}: still running after {} s\n{}",
            name(id),
            limit.as_secs(),
            tail(scope, id)
        ),
    })
}

async fn stop(args: &Value, scope: &ProcessScope) -> Result<String, ToolError> {
    let id = id_of(args)?;
    let state = match scope.processes.state(id).map_err(failed)? {
        State::Running => scope.processes.stop(id).await.map_err(failed)?,
        ended @ (State::Exited(_) | State::Stopped) => ended,
    };
    Ok(format!(
        "{}: {}\n{}",
        name(id),
        state.describe(),
        tail(scope, id)
    ))
}
