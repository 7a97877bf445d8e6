//! `cadre mcp serve`: cadre as an MCP server over stdio (E3), so another
//! agent can delegate to it.
//!
//! Two tools. `run` starts a session in a workspace with a prompt and
//! answers, once its turn ends, with the session's id, its final answer,
//! how it ended, the decisions made without a person, and what it changed
//! (from the workspace's snapshots). `workflow` takes the Operate
//! `workflow` tool's plan and answers with the run's report.
//!
//! The caller's posture is a ceiling under the configured one: the
//! narrower of the two holds, never the wider. No person can be asked, so
//! a call the posture would ask about is denied with the reason (P7), as
//! in `cadre exec`. Every run is a stored session (`cadre sessions show`,
//! resumable).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cadre_actors::EventSink;
use cadre_runtime::Mode;
use cadre_runtime::permission::Posture;
use cadre_runtime::protocol::{Envelope, Event, FailureCategory, Op};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::acp::Configs;
use crate::config::RunConfig;
use crate::exit::{self, CliError};
use crate::launch::{Launched, launch, session_options};

#[cfg(test)]
mod tests;

/// The submission id of a run's prompt.
const PROMPT_ID: &str = "mcp-run";
/// The submission id of the dry-run restore that lists a run's changes.
const CHANGES_ID: &str = "mcp-changes";

/// Serves until the client closes stdin; exits 0.
pub async fn run(configs: Configs, workspace: PathBuf) -> Result<u8, CliError> {
    let server = Server {
        configs: Arc::new(configs),
        workspace,
    };
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| CliError::internal(format!("the MCP handshake failed: {e}")))?;
    running
        .waiting()
        .await
        .map_err(|e| CliError::internal(format!("the MCP server stopped: {e}")))?;
    Ok(exit::SUCCESS)
}

struct Server {
    configs: Arc<Configs>,
    /// The workspace of a call that names none.
    workspace: PathBuf,
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("cadre", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "cadre runs coding tasks in a workspace: `run` for one prompt, `workflow` for \
                 named steps run by sub-agents. Each call is a stored cadre session or run; \
                 nothing asks a person, so what the posture would ask about is denied.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let outcome = match request.name.as_ref() {
            "run" => self.run_prompt(args).await,
            "workflow" => self.run_workflow(args).await,
            other => {
                return Err(ErrorData::invalid_params(
                    format!("no tool {other}: run or workflow"),
                    None,
                ));
            }
        };
        Ok(match outcome {
            Ok(value) => CallToolResult::structured(value),
            Err(why) => CallToolResult::error(vec![ContentBlock::text(why)]),
        }
        .into())
    }
}

/// What a call asks besides its task: where, and how much it may do.
struct Seat {
    workspace: PathBuf,
    mode: Option<Mode>,
    posture: Option<Posture>,
}

impl Seat {
    fn read(args: &Value, default: &Path) -> Result<Self, String> {
        let workspace = match args.get("workspace").and_then(Value::as_str) {
            Some(path) if Path::new(path).is_absolute() => PathBuf::from(path),
            Some(path) => return Err(format!("workspace {path}: an absolute path")),
            None => default.to_path_buf(),
        };
        if !workspace.is_dir() {
            return Err(format!(
                "workspace {}: not a directory",
                workspace.display()
            ));
        }
        let mode = match args.get("mode").and_then(Value::as_str) {
            Some(mode) => Some(mode.parse::<Mode>().map_err(|e| e.to_string())?),
            None => None,
        };
        let posture = match args.get("posture").and_then(Value::as_str) {
            Some(posture) => Some(posture.parse::<Posture>().map_err(|e| e.to_string())?),
            None => None,
        };
        Ok(Self {
            workspace,
            mode,
            posture,
        })
    }

    /// The run configuration: the workspace's, its posture narrowed to the
    /// caller's, its mode the caller's.
    fn config(&self, configs: &Configs) -> Result<RunConfig, String> {
        let mut config = configs(&self.workspace, None).map_err(|e| e.message)?;
        config.posture = ceiling(config.posture, self.posture);
        config.posture_given = true;
        if let Some(mode) = self.mode {
            config.mode = mode;
            config.mode_given = true;
        }
        Ok(config)
    }
}

/// The posture a call runs under: the configured one, narrowed by the
/// caller's when it asks for one; never wider.
pub fn ceiling(configured: Posture, asked: Option<Posture>) -> Posture {
    asked.map_or(configured, |asked| asked.narrower(configured))
}

impl Server {
    /// `run`: one prompt, one turn, in a new session.
    async fn run_prompt(&self, args: Value) -> Result<Value, String> {
        let prompt = args
            .get("prompt")
            .and_then(Value::as_str)
            .filter(|p| !p.trim().is_empty())
            .ok_or("'prompt' is a non-empty string")?
            .to_string();
        let seat = Seat::read(&args, &self.workspace)?;
        let config = seat.config(&self.configs)?;
        let Launched {
            handle,
            mut events,
            host,
            session_id,
            attached,
            ..
        } = launch(&config, false).await.map_err(|e| e.message)?;
        let mut report = Report::default();
        let submitted = handle.submit_as(PROMPT_ID, Op::user(prompt));
        let mut changes = None;
        if submitted.is_ok() {
            while let Some(Envelope { op_id, event }) = events.recv().await {
                let ours = op_id.as_deref() == Some(PROMPT_ID);
                if report.event(&event, ours) {
                    break;
                }
            }
            // What changed: everything since the session's first snapshot,
            // taken before its first change.
            changes = match &attached.snapshots {
                Some(snapshots) => {
                    let snapshots = snapshots.clone();
                    let session = session_id.clone();
                    let first = tokio::task::spawn_blocking(move || {
                        snapshots
                            .list(Some(&session))
                            .map(|l| l.last().map(|s| s.id.clone()))
                    })
                    .await;
                    match first {
                        Ok(Ok(Some(snapshot))) => {
                            let op = Op::Restore {
                                snapshot,
                                dry_run: true,
                            };
                            let _ = handle.submit_as(CHANGES_ID, op);
                            Some(changed(&mut events).await)
                        }
                        Ok(Ok(None)) => Some(json!({"modified": [], "created": [], "deleted": []})),
                        Ok(Err(e)) => Some(json!({"unknown": e.to_string()})),
                        Err(_) => None,
                    }
                }
                None => Some(json!({"unknown": "snapshots are off ([snapshots] enabled = false)"})),
            };
        }
        let _ = handle.submit(Op::Shutdown);
        handle.stopped().await;
        attached.mcp.shutdown().await;
        host.close().await;
        submitted.map_err(|_| "the session stopped before the prompt".to_string())?;
        Ok(json!({
            "session_id": session_id,
            "status": report.status,
            "answer": report.answer,
            "error": report.error,
            "decisions": report.decisions,
            "changed": changes,
        }))
    }

    /// `workflow`: the Operate tool's plan, run for the caller.
    async fn run_workflow(&self, mut args: Value) -> Result<Value, String> {
        let seat = Seat::read(&args, &self.workspace)?;
        if let Some(plan) = args.as_object_mut() {
            plan.remove("workspace");
            plan.remove("posture");
        }
        let config = seat.config(&self.configs)?;
        let host = crate::launch::host(&config).await.map_err(|e| e.message)?;
        let (tx, mut events) = cadre_actors::events::channel();
        let mut options = session_options(&config, false);
        options.posture = Some(config.posture);
        let caller = host
            .sessions()
            .workflow_caller(&options, EventSink::new(tx))
            .map_err(|e| e.to_string());
        // The run's events are read (and dropped) as they come.
        let drain = tokio::spawn(async move { while events.recv().await.is_some() {} });
        let report = match caller {
            Ok(caller) => host.engine().run(caller, args).await.map_err(|e| e.message),
            Err(e) => Err(e),
        };
        host.close().await;
        drain.abort();
        report.map(|text| json!({"report": text}))
    }
}

/// How the prompt's turn ended, as the `run` tool answers it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum PromptStatus {
    /// No end was seen: the events stopped before one (answered as the
    /// empty string).
    #[default]
    #[serde(rename = "")]
    Unended,
    /// The turn completed.
    Completed,
    /// The agent failed, or the prompt was refused.
    Failed,
    /// The turn was cancelled.
    Cancelled,
    /// The infrastructure failed (the model endpoint, the store), or the
    /// session stopped first.
    Error,
    /// Too many denials paused it.
    PausedByDenials,
}

/// What a run's events said.
#[derive(Debug, Default)]
struct Report {
    /// How the turn ended.
    status: PromptStatus,
    /// The last text the model answered.
    answer: String,
    /// Why the turn failed, when it did.
    error: Option<String>,
    /// Every decision made without a person, as its transcript line.
    decisions: Vec<String>,
}

impl Report {
    /// Takes one event; true once the prompt's turn is over.
    fn event(&mut self, event: &Event, ours: bool) -> bool {
        match event {
            Event::AssistantMessage { text, .. } if ours && !text.is_empty() => {
                self.answer.clone_from(text);
            }
            Event::PermissionDecision { line, .. } => self.decisions.push(line.clone()),
            Event::TurnCompleted { .. } if ours => {
                self.status = PromptStatus::Completed;
                return true;
            }
            Event::TurnFailed {
                category, message, ..
            } if ours => {
                self.status = match category {
                    FailureCategory::Infrastructure => PromptStatus::Error,
                    FailureCategory::Agent => PromptStatus::Failed,
                    FailureCategory::Cancelled => PromptStatus::Cancelled,
                    FailureCategory::PausedByDenials => PromptStatus::PausedByDenials,
                };
                self.error = Some(message.clone());
                return true;
            }
            Event::OpRejected { message, .. } if ours => {
                self.status = PromptStatus::Failed;
                self.error = Some(message.clone());
                return true;
            }
            Event::SessionStopped { .. } => {
                if self.status == PromptStatus::Unended {
                    self.status = PromptStatus::Error;
                    self.error = Some("the session stopped".into());
                }
                return true;
            }
            _ => {}
        }
        false
    }
}

/// The files a dry-run restore says changed since the first snapshot.
async fn changed(events: &mut cadre_actors::events::Events) -> Value {
    while let Some(Envelope { op_id, event }) = events.recv().await {
        if op_id.as_deref() != Some(CHANGES_ID) {
            continue;
        }
        match event {
            // Put back = changed; recreated = deleted since; removed = created since.
            Event::WorkspaceRestored {
                restored,
                recreated,
                removed,
                ..
            } => return json!({"modified": restored, "created": removed, "deleted": recreated}),
            Event::OpRejected { message, .. } => return json!({"unknown": message}),
            _ => {}
        }
    }
    json!({"unknown": "the session stopped"})
}

/// The two tools.
fn tools() -> Vec<Tool> {
    let seat = json!({
        "workspace": {"type": "string", "description": "Absolute path of the workspace (default: where cadre mcp serve runs)"},
        "posture": {"type": "string", "enum": ["never", "suggest", "auto", "bypass"], "description": "The most this call may do without a person; narrowed to cadre's configured posture, never wider. Nobody is asked: what suggest would ask about is denied."},
    });
    let mut run = json!({
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "The task"},
            "mode": {"type": "string", "enum": ["plan", "work", "operate"], "description": "plan changes nothing but its plan; default: cadre's configured mode"},
        },
        "required": ["prompt"],
        "additionalProperties": false,
    });
    extend(&mut run, &seat);
    let mut workflow = workflow_schema();
    extend(&mut workflow, &seat);
    let side_effect = ToolAnnotations::new().read_only(false);
    vec![
        Tool::new(
            "run",
            "Run a coding task with cadre in a workspace: a new session takes the prompt and \
             answers when its turn ends, with the session's id, its final answer, how it ended, \
             the permission decisions made, and the files it changed.",
            object(run),
        )
        .annotate(side_effect.clone()),
        Tool::new(
            "workflow",
            "Run a cadre workflow: named steps, each by its own sub-agent, with dependencies, \
             fan-out, write scopes and checks; answers with the run's report.",
            object(workflow),
        )
        .annotate(side_effect),
    ]
}

/// The Operate `workflow` tool's parameters: one schema for both.
fn workflow_schema() -> Value {
    cadre_runtime::tool::builtin_tools()
        .iter()
        .find(|t| t.definition().name == cadre_runtime::tool::WORKFLOW_TOOL)
        .map(|t| t.definition().input_schema.clone())
        .unwrap_or_else(|| json!({"type": "object"}))
}

fn extend(schema: &mut Value, properties: &Value) {
    if let (Some(into), Some(from)) = (
        schema.get_mut("properties").and_then(Value::as_object_mut),
        properties.as_object(),
    ) {
        for (key, value) in from {
            into.insert(key.clone(), value.clone());
        }
    }
}

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}
