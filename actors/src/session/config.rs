//! [`SessionConfig`]: how a host describes a user's session, turned into
//! the root agent's spec.

use std::sync::Arc;

use cadre_runtime::Mode;
use cadre_runtime::agent::Authority;
use cadre_runtime::context::ContextBudget;
use cadre_runtime::paths::SessionPaths;
use cadre_runtime::sandbox::SandboxConfig;
use cadre_runtime::snapshot::Snapshots;
use cadre_runtime::tool::Workspace;

use super::PermissionConfig;
use crate::kernel::AgentSpec;

/// What a user's session is, fixed at its start: the ergonomic form of an
/// [`AgentSpec`] for the root of a tree.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// The session id.
    pub session_id: String,
    /// The starting mode.
    pub mode: Mode,
    /// The workspace and its confinement.
    pub workspace: Workspace,
    /// The session's files.
    pub paths: SessionPaths,
    /// Model requests one turn may make.
    pub max_iterations: u32,
    /// When set, only these tools (and system tools) are offered and run.
    pub allowed_tools: Option<Arc<[String]>>,
    /// Posture, rules, interactivity, guardian.
    pub permissions: PermissionConfig,
    /// The deepest level sub-agents may reach.
    pub max_depth: u32,
    /// A model name sent instead of the client's.
    pub model_override: Option<String>,
    /// Offer `enter_plan_mode` in Work (config `plan.agent_entry`).
    pub plan_agent_entry: bool,
    /// The host chose `mode` (a flag): a resumed session switches to it.
    /// When false, a resumed session keeps its stored mode.
    pub mode_given: bool,
    /// The host chose the posture: see `mode_given`.
    pub posture_given: bool,
    /// How `bash` commands are sandboxed; sub-agents share it.
    pub sandbox: Arc<SandboxConfig>,
    /// The hooks every agent of the session runs.
    pub hooks: Arc<cadre_runtime::hooks::HookSet>,
    /// The workspace's snapshots, one before each turn that may change
    /// files; sub-agents record under the session. `None` takes none.
    pub snapshots: Option<Arc<Snapshots>>,
    /// The user message the session starts with, admitted in the same
    /// store trip as its opening (see `AgentSpec::first_message`).
    pub first_message: Option<String>,
    /// The model's context window and compaction threshold (CX1).
    pub context: ContextBudget,
}

impl SessionConfig {
    /// A user's session in Work mode with the defaults: Ask, interactive,
    /// 50 model requests per turn (its sub-agents are a service:
    /// `SessionServices::subagents`).
    pub fn new(session_id: impl Into<String>, workspace: Workspace, paths: SessionPaths) -> Self {
        Self {
            session_id: session_id.into(),
            mode: Mode::Work,
            workspace,
            paths,
            max_iterations: 50,
            allowed_tools: None,
            permissions: PermissionConfig::default(),
            max_depth: cadre_runtime::agent::DEFAULT_MAX_DEPTH,
            model_override: None,
            plan_agent_entry: false,
            mode_given: true,
            posture_given: true,
            sandbox: Arc::default(),
            hooks: Arc::default(),
            snapshots: None,
            first_message: None,
            context: ContextBudget::default(),
        }
    }

    /// The session as an agent spec: the root of its tree.
    pub fn into_spec(self) -> AgentSpec {
        let permissions = self.permissions;
        let mut authority = Authority::root(
            self.mode,
            permissions.posture,
            permissions.rules.clone(),
            self.max_depth,
        );
        authority.allowed_tools = self
            .allowed_tools
            .as_ref()
            .map(|tools| tools.iter().cloned().collect());
        let mut spec = AgentSpec::session(self.session_id, self.workspace, self.paths, authority);
        spec.model = self.model_override;
        spec.first_message = self.first_message;
        spec.max_iterations = self.max_iterations;
        spec.interactive = permissions.interactive;
        spec.guardian = permissions.guardian;
        spec.plan_agent_entry = self.plan_agent_entry;
        spec.mode_given = self.mode_given;
        spec.posture_given = self.posture_given;
        spec.sandbox = self.sandbox;
        spec.hooks = self.hooks;
        spec.protected = Arc::new(permissions.protected);
        spec.snapshots = self.snapshots;
        spec.context = self.context;
        spec
    }
}
