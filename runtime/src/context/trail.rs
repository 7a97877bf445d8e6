//! What a compaction record re-states from the conversation itself (CX3):
//! the todo list, the files changed, the recent commands, the latest user
//! message. A [`Trail`] takes each message as it is recorded and keeps
//! only what a record names — the last [`CHANGED_FILES`] files, the last
//! [`RECENT_COMMANDS`] commands, the last list, the last message — and the
//! calls still waiting for their answers: its size does not grow with the
//! conversation, and it says what a scan of every stored message would.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::message::{Message, ToolCall};
use crate::tool::TodoItem;

/// Commands a record lists, most recent last.
pub const RECENT_COMMANDS: usize = 10;

/// Changed files a record lists, most recent last.
pub const CHANGED_FILES: usize = 30;

/// The most calls kept waiting for an answer: every call is answered
/// (a crash's by the resume), so only a store written otherwise reaches
/// it; the oldest is dropped then.
const OPEN_CALLS: usize = 256;

/// The bounded records a compaction re-states, kept message by message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Trail {
    /// Calls seen so far: each call's number is its place among them, so
    /// answers that come out of order still rank by when the call was made.
    calls: u64,
    /// `todo_write`, `write_file` and `edit_file` calls waiting for their
    /// answer, by id.
    open: HashMap<String, Open>,
    /// The list of the latest successful `todo_write`, by call number.
    todo: Option<(u64, Vec<TodoItem>)>,
    /// Changed paths with the number of the latest successful call that
    /// changed each, in that order, at most [`CHANGED_FILES`].
    files: Vec<(u64, String)>,
    /// The last [`RECENT_COMMANDS`] `bash` calls, oldest first.
    commands: VecDeque<Command>,
    /// The latest user message.
    user: Option<Arc<Message>>,
}

/// A call whose success decides what it adds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Open {
    n: u64,
    adds: Adds,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Adds {
    Todo(Vec<TodoItem>),
    File(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Command {
    call_id: String,
    /// The command, on one line, cut to 200 bytes.
    line: String,
    /// How it ended: `None` until answered.
    ended: Option<String>,
}

impl Trail {
    /// The trail of `raw`, every stored message in order.
    pub fn of(raw: &[Arc<Message>]) -> Self {
        let mut trail = Self::default();
        for message in raw {
            trail.push(message);
        }
        trail
    }

    /// Takes the next stored message.
    pub fn push(&mut self, message: &Arc<Message>) {
        match message.as_ref() {
            Message::User { .. } => self.user = Some(message.clone()),
            Message::Assistant { tool_calls, .. } => {
                for call in tool_calls {
                    self.call(call);
                }
            }
            Message::Tool { call_id, content } => self.answer(call_id, content),
            Message::Compaction(_) => {}
        }
    }

    fn call(&mut self, call: &ToolCall) {
        let n = self.calls;
        self.calls += 1;
        let args = || serde_json::from_str::<serde_json::Value>(&call.arguments).ok();
        let adds = match call.name.as_str() {
            "bash" => {
                let command = args()
                    .and_then(|v| v.get("command")?.as_str().map(str::to_string))
                    .unwrap_or_else(|| call.arguments.clone());
                let line = crate::tool::truncate_middle(&command.replace('\n', " "), 200);
                if self.commands.len() == RECENT_COMMANDS {
                    self.commands.pop_front();
                }
                self.commands.push_back(Command {
                    call_id: call.id.clone(),
                    line,
                    ended: None,
                });
                None
            }
            "todo_write" => args()
                .and_then(|v| serde_json::from_value(v.get("todos")?.clone()).ok())
                .map(Adds::Todo),
            "write_file" | "edit_file" => args()
                .and_then(|v| v.get("path")?.as_str().map(str::to_string))
                .map(Adds::File),
            _ => None,
        };
        if let Some(adds) = adds {
            if self.open.len() == OPEN_CALLS
                && let Some(oldest) = self
                    .open
                    .iter()
                    .min_by_key(|(_, o)| o.n)
                    .map(|(id, _)| id.clone())
            {
                self.open.remove(&oldest);
            }
            self.open.insert(call.id.clone(), Open { n, adds });
        }
    }

    fn answer(&mut self, call_id: &str, content: &str) {
        let failed = is_error(content);
        if let Some(command) = self.commands.iter_mut().find(|c| c.call_id == call_id) {
            command.ended = Some(match failed {
                true => content.lines().next().unwrap_or("error").to_string(),
                false => content
                    .lines()
                    .next()
                    .filter(|l| l.starts_with("exit code"))
                    .unwrap_or("ran")
                    .to_string(),
            });
        }
        let Some(Open { n, adds }) = self.open.remove(call_id) else {
            return;
        };
        if failed {
            return;
        }
        match adds {
            Adds::Todo(list) => {
                if self.todo.as_ref().is_none_or(|(at, _)| *at < n) {
                    self.todo = Some((n, list));
                }
            }
            Adds::File(path) => {
                if let Some(at) = self.files.iter().position(|(_, p)| *p == path) {
                    if self.files[at].0 > n {
                        return;
                    }
                    self.files.remove(at);
                }
                let at = self.files.partition_point(|(m, _)| *m < n);
                self.files.insert(at, (n, path));
                if self.files.len() > CHANGED_FILES {
                    self.files.remove(0);
                }
            }
        }
    }

    /// The list the last successful `todo_write` set; `None` when none did.
    pub fn todo_list(&self) -> Option<&[TodoItem]> {
        self.todo.as_ref().map(|(_, list)| list.as_slice())
    }

    /// The paths `write_file` and `edit_file` changed (answered without an
    /// error), each once, the last [`CHANGED_FILES`] in the order last
    /// changed.
    pub fn changed_files(&self) -> Vec<&str> {
        self.files.iter().map(|(_, p)| p.as_str()).collect()
    }

    /// The last [`RECENT_COMMANDS`] `bash` commands and how they ended,
    /// oldest first.
    pub fn recent_commands(&self) -> Vec<String> {
        self.commands
            .iter()
            .map(|c| {
                let ended = c.ended.as_deref().unwrap_or("no result");
                format!("`{}` → {ended}", c.line)
            })
            .collect()
    }

    /// The latest user message.
    pub fn latest_user(&self) -> Option<&str> {
        match self.user.as_deref() {
            Some(Message::User { content }) => Some(content),
            Some(Message::Assistant { .. } | Message::Tool { .. } | Message::Compaction(_))
            | None => None,
        }
    }
}

/// A result the turn machine wrote for a failed call (`error (code): …`).
fn is_error(answer: &str) -> bool {
    answer.starts_with("error (")
}
