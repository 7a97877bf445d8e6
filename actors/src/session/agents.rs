//! Sub-agents (S1–S6): an agent spawns, follows up with and supervises its
//! children through the kernel.
//!
//! A sub-agent is an agent actor of its own ([`spawn_agent`]), linked to
//! its parent (a crash is the parent's supervision event), with an
//! authority computed by `Authority::narrow` from the parent's *current*
//! authority and the role, at spawn and again at every follow-up, and a
//! live link to the parent's, so the parent's later narrowing reaches it
//! before its next call. It keeps its conversation, queue and transcript in
//! the store under its own row; its state and last report are stored under
//! its parent, so a resumed session lists it, reads its report, and can
//! follow up with it. A pump task per child builds its report from what
//! actually happened and forwards what the host must see (approval
//! prompts, permission decisions, status) to the parent's stream. The child
//! table (`ChildTable`) decides; this module performs.
//!
//! `pump`: the task that reads a child's events for its whole life.

mod pump;

use std::collections::BTreeMap;
use std::sync::Arc;

use cadre_runtime::agent::{
    AgentPath, AgentReport, Authority, ChildRefusal, ChildState, ChildTable, ModelSource,
    SpawnRefusal, Wait,
};
use cadre_runtime::config::RoleConfig;
use cadre_runtime::context::known_window;
use cadre_runtime::protocol::{Event, Op};
use cadre_runtime::tool::{AgentHost, AgentRequest, ErrorCode, ToolError, ToolFuture, ToolOutcome};
use ractor::{ActorRef, RpcReplyPort};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::remote::{ChildPlacement, RemoteMsg};
use super::{SessionMsg, SessionState};
use crate::kernel::{AgentServices, AgentSpec, Child, SpawnedAgent, spawn_agent};
use crate::store::StoreRequest;

/// What a tree of agents shares for its sub-agents.
pub struct Subagents {
    /// Configured roles.
    pub roles: BTreeMap<String, RoleConfig>,
    /// Model clients for roles.
    pub models: Arc<dyn ModelSource>,
    /// Running sub-agents at once, across the whole tree.
    slots: Arc<Semaphore>,
    limit: usize,
    /// The workflow engine the Operate `workflow` tool delegates to;
    /// `None` leaves the tool out.
    workflows: Option<Arc<dyn crate::delegation::Delegation>>,
    /// Where a session's children may run besides here; `None` runs every
    /// child here.
    placement: Option<Arc<dyn ChildPlacement>>,
}

impl Subagents {
    /// Sub-agents with these roles and models, at most `max_running` at
    /// once (clamped to 1..=128).
    pub fn new(
        roles: BTreeMap<String, RoleConfig>,
        models: Arc<dyn ModelSource>,
        max_running: u32,
    ) -> Self {
        let limit = max_running.clamp(1, 128) as usize;
        Self {
            roles,
            models,
            slots: Arc::new(Semaphore::new(limit)),
            limit,
            workflows: None,
            placement: None,
        }
    }

    /// The same, placing a session's children on cluster nodes too.
    pub fn with_placement(mut self, placement: Arc<dyn ChildPlacement>) -> Self {
        self.placement = Some(placement);
        self
    }

    /// The same, delegating the Operate `workflow` tool to `engine`.
    pub fn with_workflows(mut self, engine: Arc<dyn crate::delegation::Delegation>) -> Self {
        self.workflows = Some(engine);
        self
    }

    /// The same roles, limit (one pool of slots) and engine, with role
    /// clients from `models` (a workflow step meters what its subtree
    /// spends this way), its children placed here.
    pub fn with_models(&self, models: Arc<dyn ModelSource>) -> Self {
        Self {
            roles: self.roles.clone(),
            models,
            slots: self.slots.clone(),
            limit: self.limit,
            workflows: self.workflows.clone(),
            // A step's subtree stays with its step.
            placement: None,
        }
    }

    /// The workflow engine, when the host has one.
    pub fn workflows(&self) -> Option<&Arc<dyn crate::delegation::Delegation>> {
        self.workflows.as_ref()
    }

    /// The concurrency limit in force.
    pub fn limit(&self) -> usize {
        self.limit
    }

    fn slot(&self) -> Result<OwnedSemaphorePermit, ToolError> {
        self.slots.clone().try_acquire_owned().map_err(|_| {
            ToolError::failed(format!(
                "the sub-agent limit is reached: {} already running (--max-subagents); \
                 wait for one with action=wait, or do the work yourself",
                self.limit
            ))
        })
    }
}

impl std::fmt::Debug for Subagents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subagents")
            .field("roles", &self.roles.keys().collect::<Vec<_>>())
            .field("limit", &self.limit)
            .finish()
    }
}

/// A live child's actor: its agent here, or its stand-in for an agent on
/// a node.
#[derive(Clone)]
pub(super) enum ChildActor {
    Local(ActorRef<SessionMsg>),
    Remote(ActorRef<RemoteMsg>),
}

impl ChildActor {
    /// Sends the child an op; false when it is gone.
    pub(super) fn op(&self, op: Op) -> bool {
        match self {
            ChildActor::Local(actor) => actor.cast(SessionMsg::Op(op)).is_ok(),
            ChildActor::Remote(actor) => actor.cast(RemoteMsg::Op(op)).is_ok(),
        }
    }

    fn id(&self) -> ractor::ActorId {
        match self {
            ChildActor::Local(actor) => actor.get_id(),
            ChildActor::Remote(actor) => actor.get_id(),
        }
    }
}

/// How an agent reaches a live child.
pub(super) struct ChildHandle {
    pub(super) actor: ChildActor,
    /// Held while the child works; released when its run ends.
    slot: Option<OwnedSemaphorePermit>,
}

impl ChildHandle {
    /// The stand-in of a child on a node.
    pub(super) fn remote(actor: ActorRef<RemoteMsg>) -> Self {
        Self {
            actor: ChildActor::Remote(actor),
            slot: None,
        }
    }
}

/// An agent's children.
pub(super) struct Children {
    pub(super) table: ChildTable<ChildHandle, RpcReplyPort<ToolOutcome>>,
}

impl Children {
    pub(super) fn new(me: AgentPath) -> Self {
        Self {
            table: ChildTable::new(me),
        }
    }
}

/// Sends a turn's `workflow` plans to its agent.
pub(crate) struct SessionWorkflowHost {
    pub(crate) session: ActorRef<SessionMsg>,
}

impl cadre_runtime::tool::WorkflowHost for SessionWorkflowHost {
    fn run(&self, plan: serde_json::Value) -> ToolFuture<'static> {
        let session = self.session.clone();
        Box::pin(async move {
            let (reply, answer) = tokio::sync::oneshot::channel();
            session
                .cast(SessionMsg::Workflow {
                    plan,
                    reply: reply.into(),
                })
                .map_err(|_| ToolError::failed("the session has stopped"))?;
            answer
                .await
                .unwrap_or_else(|_| Err(ToolError::failed("the workflow request was dropped")))
        })
    }
}

/// Sends a turn's `agent` requests to its agent.
pub(crate) struct SessionAgentHost {
    pub(crate) session: ActorRef<SessionMsg>,
}

impl AgentHost for SessionAgentHost {
    fn call(&self, request: AgentRequest) -> ToolFuture<'static> {
        let session = self.session.clone();
        Box::pin(async move {
            let (reply, answer) = tokio::sync::oneshot::channel();
            session
                .cast(SessionMsg::Agent {
                    request,
                    reply: reply.into(),
                })
                .map_err(|_| ToolError::failed("the session has stopped"))?;
            answer
                .await
                .unwrap_or_else(|_| Err(ToolError::failed("the sub-agent request was dropped")))
        })
    }
}

fn refusal(refusal: SpawnRefusal) -> ToolError {
    ToolError::new(ErrorCode::ToolNotAllowed, refusal.to_string())
}

fn child_refusal(refusal: ChildRefusal) -> ToolError {
    let code = match refusal {
        ChildRefusal::NotFound(_) => ErrorCode::NotFound,
        ChildRefusal::Busy(_) | ChildRefusal::Crashed(_) => ErrorCode::Failed,
    };
    ToolError::new(code, refusal.to_string())
}

impl SessionState {
    /// This agent's authority now: its mode and posture as in force (after
    /// the ledger and its ancestors), its tools, scopes, rules and depth.
    pub(super) fn current_authority(&self) -> Authority {
        Authority {
            mode: self.mode(),
            posture: self.live.posture(),
            ..self.spec.authority.clone()
        }
    }

    /// Runs a `workflow` plan through the host's engine, as this agent
    /// now is: its steps narrow its current authority, live. The engine
    /// runs in a task; the mailbox does not wait for it.
    pub(super) fn delegate(&self, plan: serde_json::Value, reply: RpcReplyPort<ToolOutcome>) {
        let Some(engine) = self
            .spec
            .subagents
            .as_ref()
            .and_then(|s| s.workflows().cloned())
        else {
            let _ = reply.send(Err(ToolError::failed(
                "workflows are not available in this host",
            )));
            return;
        };
        let mut spec = self.spec.clone();
        spec.authority = self.current_authority();
        let caller = crate::delegation::Caller {
            runs_dir: self.spec.paths.dir.join("runs"),
            session_id: Some(self.row.to_string()),
            spec,
            live: self.live.clone(),
            services: self.services.clone(),
            events: self.events.clone(),
        };
        tokio::spawn(async move {
            let _ = reply.send(engine.run(caller, plan).await);
        });
    }

    /// Carries out an `agent` tool request.
    pub(super) async fn agent_request(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        request: AgentRequest,
        reply: RpcReplyPort<ToolOutcome>,
    ) {
        let mut reply = Some(reply);
        let answered = match request {
            AgentRequest::Roster => Ok(Answer::Now(self.roster())),
            AgentRequest::Spawn {
                prompt,
                role,
                background,
            } => {
                self.spawn_child(myself, prompt, role, background, &mut reply)
                    .await
            }
            AgentRequest::Followup {
                agent_id,
                prompt,
                background,
            } => self.followup(myself, &agent_id, prompt, background).await,
            AgentRequest::Wait { agent_id } => {
                if let Some(reply) = reply.take() {
                    self.wait_for(&agent_id, reply);
                }
                return;
            }
        };
        self.answer_agent(answered, reply);
    }

    /// Sends an `agent` request its answer; nothing when the reply went
    /// elsewhere (a placement under way carries it).
    pub(super) fn answer_agent(
        &mut self,
        answered: Result<Answer, ToolError>,
        reply: Option<RpcReplyPort<ToolOutcome>>,
    ) {
        let Some(reply) = reply else {
            return;
        };
        match answered {
            Ok(Answer::Now(text)) => {
                let _ = reply.send(Ok(text));
            }
            // A foreground run: the caller waits for the report.
            Ok(Answer::Later(path)) => self.wait_for(&path.to_string(), reply),
            // The placement took the reply it answers on; one left here
            // (never, by construction) is dropped, which the tool reads as
            // a failure.
            Ok(Answer::Placing) => {}
            Err(error) => {
                let _ = reply.send(Err(error));
            }
        }
    }

    fn roster(&self) -> String {
        let Some(env) = &self.spec.subagents else {
            return "sub-agents are not available in this host".into();
        };
        let mut out = format!(
            "model: {} · mode: {} · posture: {} · up to {} sub-agents at once · depth {} of {}\n",
            self.services.model.model(),
            self.mode(),
            self.live.posture(),
            env.limit(),
            self.spec.authority.depth,
            self.spec.authority.max_depth
        );
        if env.roles.is_empty() {
            out.push_str("roles: none configured; spawn without a role to get a general worker\n");
        }
        for (name, role) in &env.roles {
            let params = role.params();
            let served = match (&role.provider, &role.base_url) {
                (Some(provider), _) => format!(" (provider {provider})"),
                (None, Some(url)) => format!(" (at {url})"),
                (None, None) => String::new(),
            };
            let params = match params.describe() {
                described if described.is_empty() => String::new(),
                described => format!(", {described}"),
            };
            out.push_str(&format!(
                "- {name}: model {}{served}{params}, posture ≤ {}, mode ≤ {}, tools {}{}\n",
                role.model.as_deref().unwrap_or(self.services.model.model()),
                role.posture
                    .map_or_else(|| "inherited".to_string(), |p| p.to_string()),
                role.mode
                    .map_or_else(|| "inherited".to_string(), |m| m.to_string()),
                role.allowed_tools
                    .as_ref()
                    .map_or_else(|| "all".to_string(), |t| t.join(", ")),
                role.description
                    .as_deref()
                    .map(|d| format!(" — {d}"))
                    .unwrap_or_default()
            ));
        }
        let mut children = self.children.table.iter().peekable();
        if children.peek().is_some() {
            out.push_str("agents under this one:\n");
        }
        for (path, child) in children {
            let state = match child.state {
                ChildState::Running => "running",
                ChildState::Idle => "idle",
                ChildState::Interrupted => "interrupted (the process stopped during its run)",
                ChildState::Crashed => "crashed",
            };
            out.push_str(&format!(
                "- {path} (role {}): {state}{}\n",
                child.role,
                child
                    .last_report
                    .as_ref()
                    .map(|r| format!(", last report: {}", r.status))
                    .unwrap_or_default()
            ));
        }
        out
    }

    fn role(&self, name: &str) -> Result<RoleConfig, ToolError> {
        let Some(env) = &self.spec.subagents else {
            return Err(ToolError::failed(
                "sub-agents are not available in this host",
            ));
        };
        match env.roles.get(name) {
            Some(role) => Ok(role.clone()),
            None if name == "worker" => Ok(RoleConfig::default()),
            None => {
                let known: Vec<&str> = env.roles.keys().map(String::as_str).collect();
                Err(ToolError::invalid(format!(
                    "there is no role '{name}'; configured roles: {}",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )))
            }
        }
    }

    async fn spawn_child(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        prompt: String,
        role_name: Option<String>,
        background: bool,
        reply: &mut Option<RpcReplyPort<ToolOutcome>>,
    ) -> Result<Answer, ToolError> {
        let role_name = role_name.unwrap_or_else(|| "worker".to_string());
        let role = self.role(&role_name)?;
        let authority = self
            .current_authority()
            .narrow(&role_name, &role)
            .map_err(refusal)?;
        let Some(env) = self.spec.subagents.clone() else {
            return Err(ToolError::failed(
                "sub-agents are not available in this host",
            ));
        };
        let slot = env.slot()?;
        let path = self.children.table.next_path();
        let model = env
            .models
            .client(&role)
            .map_err(|e| ToolError::failed(format!("role '{role_name}': {e}")))?;
        let spec = self.child_spec(&path, &role_name, &role, authority);
        let model_name = spec
            .model
            .clone()
            .unwrap_or_else(|| model.model().to_string());
        let child = NewChild {
            path,
            role_name,
            spec,
            model,
            model_name,
            slot,
            prompt,
            background,
        };
        // A session's new child may run on a node: the placement answers
        // later, as a message, and the spawn goes on from there.
        if let Some(placement) = env.placement.clone().filter(|_| self.spec.is_session())
            && let Some(reply) = reply.take()
        {
            self.place_child(myself, placement, child, reply);
            return Ok(Answer::Placing);
        }
        let handle = self.start_local(myself, &child).await?;
        Ok(self.spawned(child, handle, false))
    }

    /// Records a child that started (here, or on a node that sent it its
    /// prompt: `prompted`) and says what the `agent` request answers.
    pub(super) fn spawned(
        &mut self,
        child: NewChild,
        handle: ChildHandle,
        prompted: bool,
    ) -> Answer {
        let NewChild {
            path,
            role_name,
            spec,
            model_name,
            slot: child_slot,
            prompt,
            background,
            ..
        } = child;
        self.emit(Event::AgentSpawned {
            agent_id: path.to_string(),
            role: role_name.clone(),
            model: model_name,
            posture: spec.authority.posture,
            depth: spec.authority.depth,
        });
        if !prompted {
            handle.actor.op(Op::user(prompt));
        }
        let handle = ChildHandle {
            slot: Some(child_slot),
            ..handle
        };
        self.children
            .table
            .started(&path, handle, role_name.clone());
        if background {
            Answer::Now(format!(
                "started agent {path} (role {role_name}) in the background; \
                 collect its report with action=wait, agent_id={path}"
            ))
        } else {
            Answer::Later(path)
        }
    }

    /// Starts `child` here through the kernel, with its pump.
    pub(super) async fn start_local(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        child: &NewChild,
    ) -> Result<ChildHandle, ToolError> {
        let services = AgentServices {
            model: child.model.clone(),
            tools: self.services.tools.clone(),
            store: Some(self.store.clone()),
        };
        let SpawnedAgent { actor, events, .. } =
            spawn_agent(child.spec.clone(), services, Some(myself.get_cell()))
                .await
                .map_err(|e| ToolError::failed(format!("the sub-agent could not start: {e}")))?;
        self.pump_child(myself, &child.path, &child.role_name, events);
        Ok(ChildHandle {
            actor: ChildActor::Local(actor),
            slot: None,
        })
    }

    fn child_spec(
        &self,
        path: &AgentPath,
        role_name: &str,
        role: &RoleConfig,
        authority: Authority,
    ) -> AgentSpec {
        let mut spec = self.spec.child(Child {
            path: path.clone(),
            role: role_name.to_string(),
            authority,
            live: self.live.clone(),
            // On the parent's client, the role's model, else the parent's.
            model: role
                .base_url
                .is_none()
                .then(|| role.model.clone().or_else(|| self.spec.model.clone()))
                .flatten(),
            prompt: role.system_prompt.clone(),
            dir: self.spec.paths.dir.join("agents").join(path.to_string()),
        });
        // The role's window, else its model's (on another server too).
        let known = role.model.as_deref().and_then(known_window);
        if let Some(window) = role.context_window.filter(|w| *w > 0).or(known) {
            spec.context = spec.context.with_window(window);
        }
        spec
    }

    async fn followup(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        agent_id: &str,
        prompt: String,
        background: bool,
    ) -> Result<Answer, ToolError> {
        let path: AgentPath =
            agent_id
                .parse()
                .map_err(|e: cadre_runtime::agent::path::BadAgentId| {
                    ToolError::new(ErrorCode::NotFound, e.to_string())
                })?;
        let Some(child) = self.children.table.get(&path) else {
            return Err(child_refusal(ChildRefusal::NotFound(agent_id.to_string())));
        };
        // Authority is re-derived from this agent as it is now.
        let role_name = child.role.clone();
        let role = self.role(&role_name).unwrap_or_default();
        let authority = self
            .current_authority()
            .narrow(&role_name, &role)
            .map_err(refusal)?;
        let Some(env) = self.spec.subagents.clone() else {
            return Err(ToolError::failed(
                "sub-agents are not available in this host",
            ));
        };
        let live = child.handle.is_some();
        self.children
            .table
            .follow_up(&path)
            .map_err(child_refusal)?;
        let slot = match env.slot() {
            Ok(slot) => slot,
            Err(full) => {
                // Nothing started: the child goes back to how it was.
                if let Some(child) = self.children.table.get_mut(&path) {
                    child.state = ChildState::Idle;
                }
                return Err(full);
            }
        };
        let handle = if live {
            let child = self.children.table.get_mut(&path);
            match child.and_then(|c| c.handle.as_mut()) {
                Some(handle) => {
                    handle.slot = Some(slot);
                    handle.actor.clone()
                }
                None => return Err(child_refusal(ChildRefusal::NotFound(agent_id.to_string()))),
            }
        } else {
            // A child read back from the store: a new actor on its stored
            // conversation, here.
            let model = env
                .models
                .client(&role)
                .map_err(|e| ToolError::failed(format!("role '{role_name}': {e}")))?;
            let spec = self.child_spec(&path, &role_name, &role, authority);
            let child = NewChild {
                path: path.clone(),
                role_name: role_name.clone(),
                model_name: String::new(),
                spec,
                model,
                slot,
                prompt: String::new(),
                background,
            };
            let handle = self.start_local(myself, &child).await?;
            let actor = handle.actor.clone();
            if let Some(stored) = self.children.table.get_mut(&path) {
                stored.handle = Some(ChildHandle {
                    slot: Some(child.slot),
                    ..handle
                });
            }
            actor
        };
        self.record_child(&path, ChildState::Running, None).await;
        handle.op(Op::user(prompt));
        Ok(if background {
            Answer::Now(format!(
                "agent {path} is working on the follow-up in the background"
            ))
        } else {
            Answer::Later(path)
        })
    }

    fn wait_for(&mut self, agent_id: &str, reply: RpcReplyPort<ToolOutcome>) {
        let Ok(path) = agent_id.parse::<AgentPath>() else {
            let _ = reply.send(Err(child_refusal(ChildRefusal::NotFound(
                agent_id.to_string(),
            ))));
            return;
        };
        match self.children.table.wait(&path, reply) {
            Wait::Later => {}
            Wait::Report(report, reply) => {
                let _ = reply.send(Ok(report.render()));
            }
            Wait::NoReport(reply) => {
                let _ = reply.send(Err(ToolError::failed(format!(
                    "agent {agent_id} has no report: its run was interrupted; follow up with it"
                ))));
            }
            Wait::Refused(why, reply) => {
                let _ = reply.send(Err(child_refusal(why)));
            }
        }
    }

    /// A child's run ended (from its pump).
    pub(super) async fn agent_run_done(&mut self, path: &AgentPath, report: AgentReport) {
        let text = report.render();
        self.emit(Event::AgentCompleted {
            agent_id: path.to_string(),
            status: report.status.clone(),
            summary: report.summary.clone(),
            verified: report.verified,
        });
        self.record_child(path, ChildState::Idle, Some(report.clone()))
            .await;
        if let Some(handle) = self
            .children
            .table
            .get_mut(path)
            .and_then(|c| c.handle.as_mut())
        {
            handle.slot = None;
        }
        for waiter in self.children.table.run_done(path, report) {
            let _ = waiter.send(Ok(text.clone()));
        }
    }

    /// A child agent crashed: its waiters get the failure. False when the
    /// failed actor was not a child.
    pub(super) async fn agent_crashed(&mut self, cell: ractor::ActorId, error: &str) -> bool {
        let Some((path, _role, waiters)) = self.children.table.crashed(|h| h.actor.id() == cell)
        else {
            return false;
        };
        for waiter in waiters {
            let _ = waiter.send(Err(ToolError::failed(format!(
                "agent {path} crashed: {error}"
            ))));
        }
        self.record_child(&path, ChildState::Crashed, None).await;
        self.emit(Event::AgentCompleted {
            agent_id: path.to_string(),
            status: "failed".into(),
            summary: String::new(),
            verified: false,
        });
        true
    }

    /// Stores a child's state (and report), so a resumed session knows it.
    async fn record_child(&self, path: &AgentPath, state: ChildState, report: Option<AgentReport>) {
        let id = format!("{}/{path}", self.spec.session_id);
        self.persist(|reply| StoreRequest::AgentState {
            id,
            state,
            report: report.map(Box::new),
            reply,
        })
        .await;
    }

    /// Asks every live child to stop.
    pub(super) fn stop_children(&self) {
        for (_, child) in self.children.table.iter() {
            if let Some(handle) = &child.handle {
                handle.actor.op(Op::Shutdown);
            }
        }
    }
}

/// What an `agent` request answers with.
pub(super) enum Answer {
    /// Text for the model now.
    Now(String),
    /// The agent's report, when its run ends.
    Later(AgentPath),
    /// The answer comes once a node placement answers (the reply travels
    /// with it).
    Placing,
}

/// A child about to start: everything its start needs, here or on a node.
pub(super) struct NewChild {
    pub(super) path: AgentPath,
    pub(super) role_name: String,
    /// Its authority narrowed here, its model, prompt and workspace.
    pub(super) spec: AgentSpec,
    /// Its role's client, for a start here.
    model: Arc<dyn cadre_runtime::model::ModelClient>,
    /// The model it asks, as `agent.spawned` names it.
    model_name: String,
    /// Its place among the tree's running sub-agents, held while it works.
    slot: OwnedSemaphorePermit,
    /// Its first message.
    pub(super) prompt: String,
    /// The caller does not wait for its report.
    background: bool,
}
