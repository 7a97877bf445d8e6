//! What a tool is: its definition, its per-call safety, and how it fails.

use std::fmt;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::workspace::Workspace;
use crate::agent::LiveAuthority;
use crate::mode::Mode;
use crate::permission::RealPaths;
use crate::permission::rules::RuleSet;
use crate::sandbox::SandboxConfig;

/// Whether a tool (or one concrete call of it) can change anything (T1, T5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Safety {
    /// Reads only: safe in every mode and posture.
    ReadOnly,
    /// May change files, processes or the world outside.
    SideEffect,
}

/// Everything the gates and the model need to know about a tool (T1).
#[derive(Debug, Clone)]
pub struct ToolDefinition {
    /// Stable routing name; the model calls the tool by it.
    pub name: String,
    /// What the model reads about the tool.
    pub description: String,
    /// JSON Schema of the arguments object; every call is validated against it.
    pub input_schema: Value,
    /// Declared safety; a tool may classify a concrete call more narrowly.
    pub safety: Safety,
    /// A control-plane tool: exempt from name allow-lists, never from safety.
    pub system: bool,
    /// Overrides the runner's default timeout.
    pub timeout: Option<Duration>,
    /// The tool's only effect is writing the file named by its path
    /// argument ([`ToolDefinition::path_arg`]). Plan mode offers such tools
    /// limited to the canonical plan file, and the execution gate holds them
    /// to exactly that file.
    pub writes_path_only: bool,
    /// The tool classifies each call (T5): a call it proves read-only runs
    /// in Plan mode although the tool is declared side-effect, and Plan
    /// offers the tool described as limited to such calls.
    pub classifies_calls: bool,
    /// The tool's only effect is on the agent's own session state (its
    /// task list), never the workspace: the floor proves it safe.
    pub session_state_only: bool,
    /// When set, the tool exists only in this mode: it is not offered in
    /// another, and a call made in another is refused (`exit_plan_mode`
    /// only in Plan, `enter_plan_mode` only in Work).
    pub only_in: Option<Mode>,
    /// The argument naming the file or directory the call works on
    /// (`path` for the built-in file tools). Path rules (`read_file(.env)`)
    /// match it, the tool layer resolves it before the decision, and the
    /// protected paths are checked against it, whatever the tool is called.
    pub path_arg: Option<String>,
    /// The tool runs its `command` argument as a shell command line: rules
    /// read it as command patterns, and the floor and the path checks read
    /// its words.
    pub shell: bool,
    /// The tool runs its `command` argument as a check (`run_check`): not a
    /// shell tool the floor judges (the check sandbox keeps it from
    /// writing), but deny and ask rules on the shell tool (`bash(curl:*)`,
    /// `read_file(.env)` reached through a command) hold on its command line
    /// as they would on the same line in `bash`.
    pub runs_checks: bool,
    /// The tool drives the plan lifecycle (`exit_plan_mode`,
    /// `enter_plan_mode`): it needs the host's plan lifecycle to run.
    pub plan_control: bool,
    /// The tool reads or proposes changes to the session's goal
    /// (`create_goal`, `get_goal`, `update_goal`): it needs the host's
    /// goal (a session, never a sub-agent, verifier or workflow step).
    pub goal_control: bool,
    /// What Plan's offer says of a tool that classifies its calls, instead
    /// of the note on read-only command lines.
    pub plan_note: Option<String>,
}

impl ToolDefinition {
    /// A definition with the given name, description, schema and safety;
    /// not a system tool, default timeout, not a path writer.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        safety: Safety,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            safety,
            system: false,
            timeout: None,
            writes_path_only: false,
            classifies_calls: false,
            session_state_only: false,
            only_in: None,
            path_arg: None,
            shell: false,
            runs_checks: false,
            plan_control: false,
            goal_control: false,
            plan_note: None,
        }
    }

    /// Marks the tool as working on the path its `arg` argument names.
    pub fn taking_path(mut self, arg: impl Into<String>) -> Self {
        self.path_arg = Some(arg.into());
        self
    }

    /// Marks the tool as running its `command` argument as a shell command line.
    pub fn as_shell(mut self) -> Self {
        self.shell = true;
        self
    }

    /// Marks the tool as running its `command` argument as a check.
    pub fn running_checks(mut self) -> Self {
        self.runs_checks = true;
        self
    }

    /// Whether rules read the tool's `command` argument as a command line.
    pub fn takes_command_line(&self) -> bool {
        self.shell || self.runs_checks
    }

    /// Marks the tool as driving the plan lifecycle.
    pub fn controlling_plan(mut self) -> Self {
        self.plan_control = true;
        self
    }

    /// Marks the tool as working on the session's goal.
    pub fn controlling_goal(mut self) -> Self {
        self.goal_control = true;
        self
    }

    /// The string value of the call's path argument, when the tool takes
    /// a path and the argument is a string.
    pub fn path_in<'a>(&self, args: &'a Value) -> Option<&'a str> {
        args.get(self.path_arg.as_deref()?).and_then(Value::as_str)
    }

    /// Sets a timeout that overrides the runner's default.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Marks the tool as writing only the file its path argument names
    /// (`path`, unless [`ToolDefinition::taking_path`] named another).
    pub fn writing_path_only(mut self) -> Self {
        self.writes_path_only = true;
        self.path_arg.get_or_insert_with(|| "path".to_string());
        self
    }

    /// Marks the tool as changing only the agent's own session state.
    pub fn touching_session_state_only(mut self) -> Self {
        self.session_state_only = true;
        self
    }

    /// Marks the tool as classifying each call, narrowing its declared
    /// safety to read-only for the calls it proves read-only.
    pub fn classifying_calls(mut self) -> Self {
        self.classifies_calls = true;
        self
    }

    /// Sets what Plan's offer says of the calls it lets through.
    pub fn with_plan_note(mut self, note: impl Into<String>) -> Self {
        self.plan_note = Some(note.into());
        self
    }

    /// Makes the tool exist only in `mode`.
    pub fn only_in(mut self, mode: Mode) -> Self {
        self.only_in = Some(mode);
        self
    }

    /// Marks the tool as a control-plane tool.
    pub fn as_system(mut self) -> Self {
        self.system = true;
        self
    }
}

/// The built-in tools' definitions, built once: what rules and reports
/// know of a tool they meet by name before any registry exists.
pub fn builtin_definitions() -> &'static [ToolDefinition] {
    static DEFINITIONS: OnceLock<Vec<ToolDefinition>> = OnceLock::new();
    DEFINITIONS.get_or_init(|| {
        super::builtin_tools()
            .iter()
            .map(|tool| tool.definition().clone())
            .collect()
    })
}

/// The stable error codes of a tool result (T3). They are part of the
/// stream-json contract and of what the model reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The mode, an allow-list or a rule does not let this call run.
    ToolNotAllowed,
    /// The arguments are not JSON or do not match the tool's schema.
    InvalidArguments,
    /// No such tool, or the file or directory the call names does not exist.
    NotFound,
    /// The call did not finish within its timeout.
    Timeout,
    /// The path leaves the workspace (`..`, absolute, or through a symlink).
    OutsideWorkspace,
    /// A permission decision denied the call.
    PermissionDenied,
    /// The turn ended before the call finished.
    Cancelled,
    /// The tool ran and failed (including a panic or a non-zero exit).
    Failed,
}

impl ErrorCode {
    /// The code as written on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::ToolNotAllowed => "tool_not_allowed",
            ErrorCode::InvalidArguments => "invalid_arguments",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Timeout => "timeout",
            ErrorCode::OutsideWorkspace => "outside_workspace",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::Failed => "failed",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed tool call: a code for machines and a message for the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    /// The stable code.
    pub code: ErrorCode,
    /// What went wrong, phrased so the model can correct itself.
    pub message: String,
}

impl ToolError {
    /// An error with the given code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// `failed`, the tool ran and could not do what was asked.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Failed, message)
    }

    /// `invalid_arguments`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArguments, message)
    }

    /// Maps an I/O error on `path` to `not_found` or `failed`.
    pub fn io(path: &str, err: &std::io::Error) -> Self {
        match err.kind() {
            std::io::ErrorKind::NotFound => Self::new(
                ErrorCode::NotFound,
                format!("{path}: no such file or directory"),
            ),
            _ => Self::failed(format!("{path}: {err}")),
        }
    }
}

/// The future a tool returns.
pub type ToolFuture<'a> = Pin<Box<dyn Future<Output = Result<String, ToolError>> + Send + 'a>>;

/// What a tool call may see of its session.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The workspace, and how far file tools may reach.
    pub workspace: Workspace,
    /// The agent's mode and posture as they are now: read at every call, so
    /// a parent that narrows narrows this agent's next call (S2).
    pub authority: Arc<LiveAuthority>,
    /// How commands are sandboxed.
    pub sandbox: Arc<SandboxConfig>,
    /// The session directory (`<data dir>/sessions/<id>`), for session-owned state.
    pub session_dir: PathBuf,
    /// The canonical plan file of this session; `None` for an agent that has
    /// none (a sub-agent: in Plan mode it writes nothing at all).
    pub plan_file: Option<PathBuf>,
    /// When set, only these tools (and system tools) may run.
    pub allowed_tools: Option<Arc<[String]>>,
    /// Decides whether calls that passed the gate and the schema may run;
    /// `None` lets them all run (a host with no permission layer).
    pub authorizer: Option<Arc<dyn Authorizer>>,
    /// Path globs a write must match, one list per ancestor that set a
    /// scope (a sub-agent's file scope); empty means no limit.
    pub file_scopes: Vec<Vec<String>>,
    /// Runs the `agent` tool's requests; `None` where sub-agents are not available.
    pub agents: Option<Arc<dyn AgentHost>>,
    /// Runs the plan lifecycle tools; `None` where there is no plan lifecycle
    /// (sub-agents).
    pub plans: Option<Arc<dyn PlanHost>>,
    /// Runs the Operate `workflow` tool's plans; `None` where there is no
    /// workflow engine.
    pub workflows: Option<Arc<dyn WorkflowHost>>,
    /// Runs the goal tools; `None` where there is no goal (sub-agents,
    /// verifiers, workflow steps).
    pub goals: Option<Arc<dyn GoalHost>>,
    /// The rules in force, so `grep`, `glob` and `list_dir` leave out the
    /// files a read deny (or ask) rule covers; `None` leaves out nothing.
    pub rules: Option<Arc<RuleSet>>,
    /// Records the workspace before the turn's first call that may change
    /// files (ST4); `None` where nothing is recorded.
    pub snapshots: Option<Arc<dyn Snapshotter>>,
    /// The managed processes of the agent's tree (the `process` tool);
    /// `None` where there are none.
    pub processes: Option<crate::process::ProcessScope>,
    /// The agent's stop and `post_tool_use` hooks; `None` where none run.
    pub hooks: Option<Arc<dyn crate::hooks::TurnHooks>>,
}

/// The future a [`Snapshotter`] returns.
pub type SnapshotFuture<'a> =
    Pin<Box<dyn Future<Output = Result<(), crate::snapshot::SnapshotError>> + Send + 'a>>;

/// Records the workspace before a call that may change it. The runner
/// calls it before every such call; an implementation records once per
/// turn. A call whose snapshot fails does not run.
pub trait Snapshotter: Send + Sync + 'static {
    /// Records the workspace, unless this turn already did.
    fn before_change(&self) -> SnapshotFuture<'_>;
}

impl std::fmt::Debug for dyn Snapshotter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Snapshotter")
    }
}

/// What the plan lifecycle tools ask their host (PL1, PL4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanRequest {
    /// `exit_plan_mode`: freeze the plan and ask the user to approve it.
    Exit,
    /// `enter_plan_mode`: ask the user to confirm entering Plan mode.
    Enter {
        /// Why the model wants to plan first.
        reason: String,
    },
}

/// Runs the plan lifecycle tools. Both end the turn: the user answers next.
pub trait PlanHost: Send + Sync + 'static {
    /// Carries out one request; the text is what the model reads.
    fn request(&self, request: PlanRequest) -> ToolFuture<'static>;
}

impl std::fmt::Debug for dyn PlanHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PlanHost")
    }
}

/// What the goal tools ask their host (G3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoalToolRequest {
    /// `create_goal`: set a goal the user asked for.
    Create {
        /// The objective.
        objective: String,
        /// A token budget.
        token_budget: Option<u64>,
    },
    /// `get_goal`: the goal as it stands.
    Get,
    /// `update_goal` with `status`: a proposal recorded for the turn's
    /// settlement; it changes nothing stored and ends the turn.
    Propose(crate::goal::Proposal),
    /// `update_goal` with `token_budget` (only in a user's turn); `None`
    /// clears the budget.
    TokenBudget(Option<u64>),
}

/// Runs the goal tools.
pub trait GoalHost: Send + Sync + 'static {
    /// Carries out one request; the text is what the model reads.
    fn request(&self, request: GoalToolRequest) -> ToolFuture<'static>;
}

impl std::fmt::Debug for dyn GoalHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GoalHost")
    }
}

/// What the `agent` tool asks its host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentRequest {
    /// Start a sub-agent.
    Spawn {
        /// Its task.
        prompt: String,
        /// A configured role.
        role: Option<String>,
        /// Return at once instead of waiting for its report.
        background: bool,
    },
    /// Give an existing sub-agent another task.
    Followup {
        /// The agent.
        agent_id: String,
        /// The task.
        prompt: String,
        /// Return at once.
        background: bool,
    },
    /// Wait for a background sub-agent's report.
    Wait {
        /// The agent.
        agent_id: String,
    },
    /// List the configured roles and models.
    Roster,
}

/// Runs sub-agents for the `agent` tool.
pub trait AgentHost: Send + Sync + 'static {
    /// Carries out one request; the text is what the model reads.
    fn call(&self, request: AgentRequest) -> ToolFuture<'static>;
}

impl std::fmt::Debug for dyn AgentHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AgentHost")
    }
}

/// Runs the `workflow` tool's plans (M5, W8).
pub trait WorkflowHost: Send + Sync + 'static {
    /// Validates and runs one plan (the tool's arguments); resolves, once
    /// the run is over, to the report the model reads.
    fn run(&self, plan: Value) -> ToolFuture<'static>;
}

impl std::fmt::Debug for dyn WorkflowHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkflowHost")
    }
}

/// One call waiting for a permission decision.
pub struct Authorization {
    /// The call id.
    pub call_id: String,
    /// The tool, as registered.
    pub tool: Arc<dyn Tool>,
    /// The schema-valid arguments (or the parsed ones, when the gate refused).
    pub args: Value,
    /// The tool's classification of this call.
    pub safety: Safety,
    /// The gate that refused the call (the mode's execution gate, or the
    /// file-scope gate) and its refusal: the authorizer only records it.
    pub refused: Option<(crate::permission::Layer, ToolError)>,
    /// What a person asked about the call is shown of its effect
    /// ([`Tool::preview`]), filled in by the authorizer when it asks one.
    pub preview: Option<String>,
    /// Where the paths the call names really lead (symlinks followed),
    /// resolved by the tool layer so the decision, which reads no disk,
    /// sees both spellings.
    pub paths: RealPaths,
}

/// The future an [`Authorizer`] returns.
pub type DecisionFuture = Pin<Box<dyn Future<Output = crate::permission::Decision> + Send>>;

/// Decides permission for calls (rules → floor → posture), asking a person
/// or the guardian when it must, and records every decision.
pub trait Authorizer: Send + Sync + 'static {
    /// Decides one call.
    fn authorize(&self, request: Authorization) -> DecisionFuture;
}

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authorization")
            .field("call_id", &self.call_id)
            .field("tool", &self.tool.definition().name)
            .field("safety", &self.safety)
            .field("refused", &self.refused)
            .finish()
    }
}

impl std::fmt::Debug for dyn Authorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Authorizer")
    }
}

/// A tool the runner can execute.
///
/// The trait is object-safe so hosts can register their own tools next to
/// the built-ins.
pub trait Tool: Send + Sync + 'static {
    /// The definition; the gates and the model see only this.
    fn definition(&self) -> &ToolDefinition;

    /// The safety of one concrete, schema-valid call (T5). Defaults to the
    /// declared safety; a tool may only narrow it, never widen it.
    fn classify(&self, _args: &Value) -> Safety {
        self.definition().safety
    }

    /// Why [`Tool::classify`] found this call not read-only, when the tool
    /// can tell ("`rm` is not a known read-only program"). Asked only when
    /// a gate refuses the call, so it may redo the classification's work.
    fn unproven_because(&self, _args: &Value) -> Option<String> {
        None
    }

    /// What a person asked to approve this call should see of its effect
    /// (a file tool's diff), for the workspace at `root`. Asked only when a
    /// person is asked, in the tool's task; `None` shows the arguments.
    fn preview(&self, _args: &Value, _root: &std::path::Path) -> Option<String> {
        None
    }

    /// Runs one call whose arguments already passed the schema and the gates.
    fn run<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> ToolFuture<'a>;
}
