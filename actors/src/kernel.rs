//! The agent kernel: one way to run an agent under any supervisor.
//!
//! An [`AgentSpec`] says what an agent is (its place in the tree, role,
//! authority, model, prompt, workspace, files, parent) and holds no
//! service; its [`AgentServices`] are what it works with (model client,
//! tools, store, summarizer, and the sub-agents' roles, clients, slots,
//! workflow engine and placement). [`spawn_agent`] starts it as an agent
//! actor linked to whoever supervises it: nobody for a user's session, the
//! session for its sub-agents, and the goal verifier and workflow step
//! supervisors. Whatever the supervisor, the agent keeps its conversation,
//! queue and transcript in the store under its own row, narrows live with
//! its parent ([`LiveAuthority`]), and reports through its event stream.

use std::sync::Arc;

use cadre_runtime::Mode;
use cadre_runtime::agent::{AgentPath, Authority, LiveAuthority};
use cadre_runtime::context::{ContextBudget, known_window};
use cadre_runtime::hooks::HookSet;
use cadre_runtime::model::ModelClient;
use cadre_runtime::paths::SessionPaths;
use cadre_runtime::permission::guardian::GuardianConfig;
use cadre_runtime::process::{ProcessScope, Processes};
use cadre_runtime::prompt::Grounding;
use cadre_runtime::sandbox::SandboxConfig;
use cadre_runtime::snapshot::Snapshots;
use cadre_runtime::store::StoreError;
use cadre_runtime::tool::{ToolRunner, Workspace};
use ractor::{Actor, ActorCell, ActorRef};

use crate::events::EventSink;
use crate::session::{SessionActor, SessionArgs, SessionMsg, Subagents};
use crate::store::StoreHandle;

/// What an agent is.
#[derive(Debug, Clone)]
pub struct AgentSpec {
    /// The session the agent belongs to (for a sub-agent, its root's).
    pub session_id: String,
    /// Its place in the session's tree: the root for the session itself.
    pub path: AgentPath,
    /// Its role (`main` for a user's session).
    pub role: String,
    /// What it may do: mode, posture, tools, file scopes, rules, depth.
    pub authority: Authority,
    /// Its parent's live authority, which narrows this agent's at every
    /// call; `None` for a session.
    pub parent: Option<Arc<LiveAuthority>>,
    /// A model name sent instead of the client's (a role's model).
    pub model: Option<String>,
    /// The role's system prompt, added to cadre's.
    pub prompt: Option<String>,
    /// The user message the agent starts with, admitted (and its turn
    /// started) in the same store trip as its opening; `None` when its
    /// host sends the first message itself.
    pub first_message: Option<String>,
    /// Model requests one turn may make.
    pub max_iterations: u32,
    /// The workspace and its confinement.
    pub workspace: Workspace,
    /// The agent's files (a sub-agent's live under its session's).
    pub paths: SessionPaths,
    /// Whether a person can answer prompts.
    pub interactive: bool,
    /// The guardian's model and deadline.
    pub guardian: GuardianConfig,
    /// Offer `enter_plan_mode` in Work (a session only).
    pub plan_agent_entry: bool,
    /// The host chose the mode: a resumed session switches to it. Otherwise
    /// a resumed session keeps its stored mode.
    pub mode_given: bool,
    /// The host chose the posture: see `mode_given`.
    pub posture_given: bool,
    /// How `bash` commands are sandboxed.
    pub sandbox: Arc<SandboxConfig>,
    /// cadre's configuration and data, never written by a tool call (P10).
    pub protected: Arc<cadre_runtime::permission::ProtectedPaths>,
    /// The workspace's snapshots, taken before each turn that may change
    /// files (a sub-agent's under its session's); `None` takes none.
    pub snapshots: Option<Arc<Snapshots>>,
    /// Its model's context window and compaction threshold (CX1); a
    /// sub-agent's is its parent's unless its role's model is one the
    /// built-in table knows.
    pub context: ContextBudget,
    /// The managed processes of its tree (the `process` tool): a root's
    /// own, shared with every agent below it.
    pub processes: Processes,
    /// The hooks every agent of its tree runs (`docs/hooks.md`): the
    /// host's, inherited by every child, shipped to a step on a node.
    pub hooks: Arc<HookSet>,
    /// The workflow step it runs, if it is one (for its hooks' events).
    pub step: Option<String>,
    /// Its environment block and project instructions (CX5): read by
    /// [`spawn_agent`] at every start, a sub-agent's kept from its parent
    /// where its workspace and directory are the same.
    pub grounding: Grounding,
}

/// Where a sub-agent sits and what it is, beside what it inherits from
/// its parent (see [`AgentSpec::child`]).
#[derive(Debug, Clone)]
pub struct Child {
    /// Its place in the tree.
    pub path: AgentPath,
    /// Its role.
    pub role: String,
    /// Its authority, narrowed from the parent's (`Authority::narrow`).
    pub authority: Authority,
    /// The live authority it answers to: a change there narrows it too.
    pub live: Arc<LiveAuthority>,
    /// A model name sent instead of the client's.
    pub model: Option<String>,
    /// Its role's system prompt, added to cadre's.
    pub prompt: Option<String>,
    /// Its files.
    pub dir: std::path::PathBuf,
}

impl AgentSpec {
    /// A user's session, or another root of a tree (a workflow run's
    /// caller): the root path, role `main`, no parent, nobody to prompt,
    /// the default guardian, sandbox and protected paths, 50 model
    /// requests per turn; the host sets what it configures.
    pub fn session(
        session_id: impl Into<String>,
        workspace: Workspace,
        paths: SessionPaths,
        authority: Authority,
    ) -> Self {
        Self {
            session_id: session_id.into(),
            path: AgentPath::root(),
            role: "main".into(),
            authority,
            parent: None,
            model: None,
            prompt: None,
            first_message: None,
            max_iterations: 50,
            workspace,
            paths,
            interactive: false,
            guardian: GuardianConfig::default(),
            plan_agent_entry: false,
            mode_given: true,
            posture_given: true,
            sandbox: Arc::default(),
            protected: Arc::default(),
            snapshots: None,
            context: ContextBudget::default(),
            processes: Processes::default(),
            hooks: Arc::default(),
            step: None,
            grounding: Grounding::default(),
        }
    }

    /// A sub-agent of this agent: `child`'s place, role, authority and
    /// model, and this agent's session, workspace, limits, interactivity,
    /// guardian, sandbox, protected paths and snapshots (its sub-agents
    /// come with its services). It starts with no message of its own, and
    /// never offers `enter_plan_mode`.
    pub fn child(&self, child: Child) -> Self {
        let context = match child.model.as_deref().and_then(known_window) {
            Some(window) => self.context.with_window(window),
            None => self.context,
        };
        Self {
            session_id: self.session_id.clone(),
            path: child.path,
            role: child.role,
            authority: child.authority,
            parent: Some(child.live),
            model: child.model,
            prompt: child.prompt,
            first_message: None,
            max_iterations: self.max_iterations,
            workspace: self.workspace.clone(),
            paths: SessionPaths { dir: child.dir },
            interactive: self.interactive,
            guardian: self.guardian.clone(),
            plan_agent_entry: false,
            mode_given: true,
            posture_given: true,
            sandbox: self.sandbox.clone(),
            protected: self.protected.clone(),
            snapshots: self.snapshots.clone(),
            context,
            processes: self.processes.clone(),
            hooks: self.hooks.clone(),
            step: None,
            grounding: self.grounding.clone(),
        }
    }

    /// The verifier of this agent's work (goals, workflow checks): a
    /// child that no person answers (what would ask is denied) and,
    /// changing nothing, takes no snapshots. (It starts nothing either:
    /// its services carry no sub-agents, see [`crate::verifier`].)
    pub fn verifier(&self, child: Child) -> Self {
        let mut spec = self.child(child);
        spec.interactive = false;
        spec.snapshots = None;
        spec
    }

    /// A workflow step under this caller: a child whose rows are the
    /// run's (`run_id`), named `step` in its hooks' events. Steps take no
    /// snapshots of their own: the calling turn took one before it could
    /// change the workspace, and concurrent snapshots of one repository
    /// would race.
    pub fn step(&self, child: Child, run_id: String, step: Option<String>) -> Self {
        let mut spec = self.child(child);
        spec.session_id = run_id;
        spec.step = step;
        spec.snapshots = None;
        spec
    }

    /// The agent's own row in the store: the session id, or
    /// `<session id>/<path>` for a sub-agent.
    pub fn row_id(&self) -> String {
        if self.path.is_root() {
            self.session_id.clone()
        } else {
            format!("{}/{}", self.session_id, self.path)
        }
    }

    /// What its tool calls see of the tree's processes.
    pub fn process_scope(&self) -> ProcessScope {
        ProcessScope {
            processes: self.processes.clone(),
            owner: self.row_id(),
            session_id: self.session_id.clone(),
        }
    }

    /// Ends the processes this agent started, and for a session every
    /// process of its tree: the agent is gone.
    pub fn end_processes(&self) {
        let owner = self.row_id();
        self.processes
            .end((!self.is_session()).then_some(owner.as_str()));
    }

    /// Whether this is a user's session (the root of its tree).
    pub fn is_session(&self) -> bool {
        self.path.is_root()
    }

    /// The mode it starts in.
    pub fn mode(&self) -> Mode {
        self.authority.mode
    }
}

/// What an agent uses to do its work: the clients, engines and shared
/// limits it is handed, beside what it is (its [`AgentSpec`]).
#[derive(Clone)]
pub struct AgentServices {
    /// The model.
    pub model: Arc<dyn ModelClient>,
    /// The tool entry point.
    pub tools: ToolRunner,
    /// The store the agent keeps its queue, conversation, transcript,
    /// questionnaires and audit in; `None` gives it a store in memory.
    pub store: Option<StoreHandle>,
    /// Who writes the agent's compaction summaries when it is not its own
    /// model (`[context] model`); its sub-agents inherit it.
    pub summarizer: Option<Summarizer>,
    /// What the `agent` tool starts sub-agents with: the roles, their
    /// model clients, the tree's running slots, the workflow engine and
    /// the node placement. Its sub-agents inherit it; `None` means the
    /// agent starts none (no `agent` or `workflow` tool).
    pub subagents: Option<Arc<Subagents>>,
}

/// The model that writes compaction summaries in place of the agent's own.
#[derive(Clone)]
pub struct Summarizer {
    /// The client that serves it: the host's, or one of its own for a
    /// provider or parameters of its own.
    pub client: Arc<dyn ModelClient>,
    /// The model named in its requests (`None`: the client's own).
    pub model: Option<String>,
}

/// A started agent.
pub struct SpawnedAgent {
    /// The agent actor.
    pub actor: ActorRef<SessionMsg>,
    /// Ends when the actor has stopped.
    pub join: tokio::task::JoinHandle<()>,
    /// Its events, `session.started` first.
    pub events: crate::events::Events,
}

/// Why an agent did not start.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The store could not open the agent (busy, leased to another
    /// process, unreadable); [`StoreError::is_retryable`] says whether to
    /// try again later.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The actor could not start. Not retryable.
    #[error("the agent could not start: {0}")]
    Actor(String),
}

impl From<ractor::SpawnErr> for StartError {
    fn from(err: ractor::SpawnErr) -> Self {
        match err {
            ractor::SpawnErr::StartupFailed(inner) => match inner.downcast_ref::<StoreError>() {
                Some(store) => StartError::Store(store.clone()),
                None => StartError::Actor(inner.to_string()),
            },
            other => StartError::Actor(other.to_string()),
        }
    }
}

/// Starts an agent, linked to `supervisor` when given (its failure is then
/// the supervisor's supervision event).
pub async fn spawn_agent(
    spec: AgentSpec,
    services: AgentServices,
    supervisor: Option<ActorCell>,
) -> Result<SpawnedAgent, StartError> {
    if let Some(store) = &services.store {
        // The first store of the tree records its processes.
        spec.processes.attach_ledger(Arc::new(store.clone()));
    }
    let spec = grounded(spec).await;
    let (events, receiver) = crate::events::channel();
    let args = SessionArgs {
        spec,
        services,
        events: EventSink::new(events),
    };
    let (actor, join) = match supervisor {
        Some(cell) => Actor::spawn_linked(None, SessionActor, args, cell).await?,
        None => Actor::spawn(None, SessionActor, args).await?,
    };
    Ok(SpawnedAgent {
        actor,
        join,
        events: receiver,
    })
}

/// `spec` with its grounding read for where it works (CX5): the
/// environment of its workspace, and the `AGENTS.md` files down to its
/// file scope's directory (else its workspace), after the user's own in
/// cadre's configuration directory. What its parent read for the same
/// place is kept; the rest is read on the blocking pool.
async fn grounded(mut spec: AgentSpec) -> AgentSpec {
    let workspace = spec.workspace.root().to_path_buf();
    let dir = spec
        .authority
        .file_scopes
        .last()
        .and_then(|globs| cadre_runtime::instructions::scope_dir(&workspace, globs))
        .unwrap_or_else(|| workspace.clone());
    let global = spec
        .protected
        .config_dir_path()
        .map(|d| d.join(cadre_runtime::instructions::FILE_NAME));
    if spec.grounding.fits(&workspace, &dir, global.as_deref()) {
        return spec;
    }
    let grounding = std::mem::take(&mut spec.grounding);
    let sandbox = sandbox_line();
    let read = tokio::task::spawn_blocking(move || {
        grounding.refreshed(&workspace, &dir, global.as_deref(), || sandbox)
    })
    .await;
    // A read that panicked leaves the agent without them, never unstarted.
    spec.grounding = read.unwrap_or_default();
    spec
}

/// The sandbox as the environment block names it: the Landlock status and
/// each wall, as `session.started` reports them.
fn sandbox_line() -> String {
    use cadre_runtime::sandbox::WallState;
    let walls: Vec<String> = cadre_runtime::sandbox::walls()
        .into_iter()
        .map(|w| match w.state {
            WallState::Enforced => w.wall,
            WallState::Partial => format!("{} (partial)", w.wall),
            WallState::Unavailable => format!("no {}", w.wall),
        })
        .collect();
    format!(
        "{}; {}",
        cadre_runtime::sandbox::sandbox_status(),
        walls.join(", ")
    )
}
