//! What a session's events become for the editor: `session/update`
//! notifications, and the questions cadre asks the client
//! (`session/request_permission`). Pure: the server sends what this
//! returns.

use std::path::{Path, PathBuf};

use cadre_runtime::Mode;
use cadre_runtime::permission::Posture;
use cadre_runtime::plan::lifecycle::QuestionnaireKind;
use cadre_runtime::protocol::{Event, ToolStatus};
use serde_json::{Value, json};

/// The id of the posture option (`session/set_config_option`).
pub const POSTURE_OPTION: &str = "posture";
/// The id of the mode option, beside the session modes.
pub const MODE_OPTION: &str = "mode";

/// The permission options of an approval, and what each answers.
pub const APPROVAL_OPTIONS: [(&str, &str, &str); 3] = [
    ("allow_once", "Allow once", "allow_once"),
    ("allow_session", "Allow for this session", "allow_always"),
    ("deny", "Deny", "reject_once"),
];

/// The options of a plan questionnaire: approve it, or leave it waiting.
pub const PLAN_OPTIONS: [(&str, &str, &str); 2] = [
    ("approve", "Approve", "allow_once"),
    ("defer", "Not now", "reject_once"),
];

/// Something to send to the client.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// A `session/update` carrying this `update` object.
    Update(Value),
    /// Ask a person about a held call; the answer becomes `Op::Approve`
    /// with `approval` (the session routes it, a sub-agent's or a
    /// workflow step's included).
    Approval {
        /// The approval id from `approval.requested`.
        approval: String,
        /// The request's `toolCall`.
        tool_call: Value,
    },
    /// Ask a person to answer a plan questionnaire (approve a plan, or let
    /// the model enter Plan); the answer becomes `Op::Answer`.
    Questionnaire {
        /// The questionnaire's id.
        id: String,
        /// The request's `toolCall`.
        tool_call: Value,
        /// It asks to enter Plan (declining withdraws it), not to approve
        /// a plan (declining defers it).
        entry: bool,
    },
}

/// One session's view: the state its updates depend on.
#[derive(Debug, Clone)]
pub struct Mapper {
    /// Where relative paths in arguments lead (locations are absolute).
    workspace: PathBuf,
    /// Deltas of the current response were sent, so its whole text is not
    /// sent again.
    streamed: bool,
    /// The mode and posture the client was last told.
    pub mode: Mode,
    /// The session's posture.
    pub posture: Posture,
    /// The widest posture the editor may choose: the one `cadre acp` was
    /// started with.
    pub ceiling: Posture,
}

impl Mapper {
    /// A session in `workspace`, in `mode` and `posture`.
    pub fn new(workspace: &Path, mode: Mode, posture: Posture, ceiling: Posture) -> Self {
        Self {
            workspace: workspace.to_path_buf(),
            streamed: false,
            mode,
            posture,
            ceiling,
        }
    }

    /// What `event` becomes.
    pub fn event(&mut self, event: &Event) -> Vec<Action> {
        match event {
            Event::AssistantDelta { text, .. } => {
                self.streamed = true;
                vec![chunk("agent_message_chunk", text)]
            }
            Event::AssistantMessage { text, .. } => {
                let streamed = std::mem::replace(&mut self.streamed, false);
                if streamed || text.is_empty() {
                    Vec::new()
                } else {
                    vec![chunk("agent_message_chunk", text)]
                }
            }
            Event::AssistantReasoning { text, .. } => vec![chunk("agent_thought_chunk", text)],
            Event::ToolCall {
                call_id,
                name,
                arguments,
                ..
            } => {
                let mut update = self.tool_call("main", call_id, name, arguments);
                update["sessionUpdate"] = json!("tool_call");
                update["status"] = json!("pending");
                let mut actions = vec![Action::Update(update)];
                if let Some(plan) = plan(name, arguments) {
                    actions.push(Action::Update(plan));
                }
                actions
            }
            // Another agent's calls are shown too (its plan is its own).
            Event::AgentToolCall {
                agent_id,
                call_id,
                name,
                arguments,
            } => {
                let mut update = self.tool_call(agent_id, call_id, name, arguments);
                update["sessionUpdate"] = json!("tool_call");
                update["status"] = json!("pending");
                vec![Action::Update(update)]
            }
            Event::ToolResult {
                call_id,
                status,
                output,
                ..
            } => vec![result("main", call_id, *status, output)],
            Event::AgentToolResult {
                agent_id,
                call_id,
                status,
                output,
                ..
            } => vec![result(agent_id, call_id, *status, output)],
            Event::ApprovalRequested {
                id,
                agent_id,
                call_id,
                tool,
                arguments,
                reason,
                preview,
            } => {
                // The call was shown already, under the same id.
                let mut tool_call = self.tool_call(agent_id, call_id, tool, arguments);
                let mut content = vec![text_content(reason)];
                content.extend(preview.iter().map(|p| text_content(p)));
                tool_call["content"] = json!(content);
                vec![Action::Approval {
                    approval: id.clone(),
                    tool_call,
                }]
            }
            Event::QuestionnaireOpened {
                id,
                kind,
                plan_path,
                head,
                ..
            } => {
                let title = match kind {
                    QuestionnaireKind::PlanApproval => "Approve the plan and implement it",
                    QuestionnaireKind::PlanEntry => "Enter Plan mode",
                };
                let mut content = Vec::new();
                if !head.is_empty() {
                    content.push(text_content(head));
                }
                vec![Action::Questionnaire {
                    id: id.clone(),
                    entry: *kind == QuestionnaireKind::PlanEntry,
                    tool_call: json!({
                        "toolCallId": format!("questionnaire:{id}"),
                        "title": title,
                        "kind": "switch_mode",
                        "content": content,
                        "locations": [{"path": plan_path}],
                    }),
                }]
            }
            Event::ModeChanged { mode } | Event::QuestionnaireAnswered { mode, .. } => {
                self.mode_update(*mode)
            }
            Event::SessionStatus { mode, posture, .. } => {
                let mut actions = self.mode_update(*mode);
                actions.extend(self.posture_update(*posture));
                actions
            }
            Event::PostureChanged { posture } => self.posture_update(*posture),
            Event::TurnCompleted {
                context: Some(context),
                ..
            } => vec![Action::Update(json!({
                "sessionUpdate": "usage_update",
                "used": context.used,
                "size": context.window,
            }))],
            Event::AgentSpawned { agent_id, role, .. } => vec![chunk(
                "agent_thought_chunk",
                &format!("sub-agent {agent_id} ({role}) started\n"),
            )],
            Event::AgentCompleted {
                agent_id, status, ..
            } => vec![chunk(
                "agent_thought_chunk",
                &format!("sub-agent {agent_id} {status}\n"),
            )],
            Event::AutonomyPaused { reason, .. } => vec![chunk(
                "agent_message_chunk",
                &format!("\ncadre paused autonomy: {reason}\n"),
            )],
            _ => Vec::new(),
        }
    }

    /// The updates of a mode change the client has not seen yet.
    fn mode_update(&mut self, mode: Mode) -> Vec<Action> {
        if mode == self.mode {
            return Vec::new();
        }
        self.mode = mode;
        vec![
            Action::Update(json!({
                "sessionUpdate": "current_mode_update",
                "currentModeId": mode.as_str(),
            })),
            Action::Update(json!({
                "sessionUpdate": "config_option_update",
                "configOptions": self.config_options(),
            })),
        ]
    }

    fn posture_update(&mut self, posture: Posture) -> Vec<Action> {
        if posture == self.posture {
            return Vec::new();
        }
        self.posture = posture;
        vec![Action::Update(json!({
            "sessionUpdate": "config_option_update",
            "configOptions": self.config_options(),
        }))]
    }

    /// A tool call as ACP shows it: a title, a kind, the raw input, and
    /// the file it touches.
    fn tool_call(&self, agent: &str, call_id: &str, name: &str, arguments: &Value) -> Value {
        let title = match agent {
            "main" => title(name, arguments),
            agent => format!("agent {agent}: {}", title(name, arguments)),
        };
        let mut call = json!({
            "toolCallId": shown_id(agent, call_id),
            "title": title,
            "kind": kind(name),
            "rawInput": arguments,
        });
        if let Some(path) = arguments.get("path").and_then(Value::as_str) {
            let mut location = json!({"path": self.workspace.join(path)});
            if let Some(line) = arguments.get("offset").and_then(Value::as_u64) {
                location["line"] = json!(line);
            }
            call["locations"] = json!([location]);
        }
        call
    }

    /// The session's modes as ACP's `modes` state.
    pub fn modes(&self) -> Value {
        json!({
            "currentModeId": self.mode.as_str(),
            "availableModes": [
                {"id": "plan", "name": "Plan", "description": "Investigate and write a plan; nothing else changes"},
                {"id": "work", "name": "Work", "description": "Change the workspace under the posture's approvals"},
                {"id": "operate", "name": "Operate", "description": "Work, and delegate to workflows"},
            ],
        })
    }

    /// The session's options: the mode, and the posture up to the ceiling.
    pub fn config_options(&self) -> Value {
        let postures: Vec<Value> = [
            (Posture::Never, "Read only", "Only calls proven read-only run"),
            (Posture::Suggest, "Ask", "Ask before anything not proven safe"),
            (Posture::Auto, "Auto-review", "A model reviews what is not proven safe"),
            (Posture::Bypass, "Full access", "Ordinary calls run; hard blocks hold"),
        ]
        .into_iter()
        .filter(|(p, _, _)| *p <= self.ceiling)
        .map(|(p, name, description)| {
            json!({"value": p.as_str(), "name": name, "description": description})
        })
        .collect();
        json!([
            {
                "id": MODE_OPTION,
                "name": "Mode",
                "category": "mode",
                "type": "select",
                "currentValue": self.mode.as_str(),
                "options": [
                    {"value": "plan", "name": "Plan"},
                    {"value": "work", "name": "Work"},
                    {"value": "operate", "name": "Operate"},
                ],
            },
            {
                "id": POSTURE_OPTION,
                "name": "Permissions",
                "description": "How much cadre does without asking; never wider than it was started with",
                "type": "select",
                "currentValue": self.posture.as_str(),
                "options": postures,
            },
        ])
    }
}

/// The permission options of a request, as ACP spells them.
pub fn options(options: &[(&str, &str, &str)]) -> Value {
    options
        .iter()
        .map(|(id, name, kind)| json!({"optionId": id, "name": name, "kind": kind}))
        .collect()
}

/// A call's id as the editor knows it: the session's own as it is,
/// another agent's under its agent (ids are only unique per agent).
fn shown_id(agent: &str, call_id: &str) -> String {
    match agent {
        "main" => call_id.to_string(),
        agent => format!("{agent}/{call_id}"),
    }
}

/// A call's end.
fn result(agent: &str, call_id: &str, status: ToolStatus, output: &str) -> Action {
    Action::Update(json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": shown_id(agent, call_id),
        "status": match status {
            ToolStatus::Ok => "completed",
            ToolStatus::Error => "failed",
        },
        "content": [text_content(output)],
    }))
}

fn chunk(kind: &str, text: &str) -> Action {
    Action::Update(json!({
        "sessionUpdate": kind,
        "content": {"type": "text", "text": text},
    }))
}

fn text_content(text: &str) -> Value {
    json!({"type": "content", "content": {"type": "text", "text": text}})
}

/// `todo_write`'s list as the editor's plan.
fn plan(name: &str, arguments: &Value) -> Option<Value> {
    if name != "todo_write" {
        return None;
    }
    let entries: Vec<Value> = arguments
        .get("todos")?
        .as_array()?
        .iter()
        .filter_map(|todo| {
            let content = todo.get("content")?.as_str()?;
            let status = match todo.get("status").and_then(Value::as_str) {
                Some("in_progress") => "in_progress",
                Some("completed") => "completed",
                _ => "pending",
            };
            Some(json!({"content": content, "priority": "medium", "status": status}))
        })
        .collect();
    Some(json!({"sessionUpdate": "plan", "entries": entries}))
}

/// A short title: the tool and what it is about.
fn title(name: &str, arguments: &Value) -> String {
    let about = ["command", "path", "pattern", "prompt"]
        .iter()
        .find_map(|key| arguments.get(*key).and_then(Value::as_str));
    match about {
        Some(about) => {
            let line = about.lines().next().unwrap_or_default();
            let short: String = line.chars().take(80).collect();
            let cut = short.len() < about.len();
            format!("{name} {short}{}", if cut { "…" } else { "" })
        }
        None => name.to_string(),
    }
}

/// The icon an editor shows; display only (what a call may do is decided
/// by its definition's marks, never by this).
fn kind(name: &str) -> &'static str {
    match name {
        "read_file" => "read",
        "list_dir" | "glob" | "grep" => "search",
        "write_file" | "edit_file" => "edit",
        "bash" => "execute",
        "todo_write" => "think",
        "enter_plan_mode" | "exit_plan_mode" => "switch_mode",
        _ => "other",
    }
}

/// The mode an ACP mode id names.
pub fn mode(id: &str) -> Option<Mode> {
    id.parse().ok()
}
