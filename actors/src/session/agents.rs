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

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cadre_runtime::agent::core::{AgentInput, ChildStart, Ticket, child_refusal};
use cadre_runtime::agent::{
    AgentPath, Authority, ChildRefusal, ChildState, ModelSource, SpawnRefusal,
};
use cadre_runtime::config::RoleConfig;
use cadre_runtime::context::known_window;
use cadre_runtime::protocol::Op;
use cadre_runtime::tool::{AgentHost, AgentRequest, ErrorCode, ToolError, ToolFuture, ToolOutcome};
use ractor::{ActorRef, RpcReplyPort};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::remote::{Placement, RemoteMsg};
use super::{SessionMsg, SessionState};
use crate::delegation::{Caller, Delegate, DelegationMsg};
use crate::kernel::{AgentServices, AgentSpec, Child, SpawnedAgent, spawn_agent};

/// What a tree of agents shares for its sub-agents.
pub struct Subagents {
    /// The configured roles (`[roles.*]`). They travel with the clients
    /// that serve them: an agent given no means to start agents (a
    /// verifier, a step on a node) has no roles to choose from either.
    pub roles: BTreeMap<String, RoleConfig>,
    /// Model clients for roles.
    pub models: Arc<dyn ModelSource>,
    /// Running sub-agents at once, across the whole tree.
    slots: Arc<Semaphore>,
    limit: usize,
    /// The workflow engine's mailbox, which the Operate `workflow` tool
    /// delegates to; `None` leaves the tool out.
    workflows: Option<Delegate>,
    /// The mailbox of the placement on nodes, where a session's children
    /// may run besides here; `None` runs every child here.
    placement: Option<Placement>,
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
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = Some(placement);
        self
    }

    /// The same, delegating the Operate `workflow` tool to `engine`.
    pub fn with_workflows(mut self, engine: Delegate) -> Self {
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
    pub fn workflows(&self) -> Option<&Delegate> {
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

/// An agent's live children, by path (the core's table decides; this is
/// how the actor reaches them).
#[derive(Default)]
pub(super) struct Children {
    live: HashMap<AgentPath, ChildHandle>,
}

impl Children {
    /// Sends the child an op; false when it is gone.
    pub(super) fn send(&self, path: &AgentPath, op: Op) -> bool {
        self.live.get(path).is_some_and(|child| child.actor.op(op))
    }

    /// Its run ended: its place among the tree's running sub-agents is
    /// free.
    pub(super) fn free_slot(&mut self, path: &AgentPath) {
        if let Some(child) = self.live.get_mut(path) {
            child.slot = None;
        }
    }

    /// The child whose actor is `id` failed: it is gone; its path.
    pub(super) fn crashed(&mut self, id: ractor::ActorId) -> Option<AgentPath> {
        let path = self
            .live
            .iter()
            .find(|(_, child)| child.actor.id() == id)
            .map(|(path, _)| path.clone())?;
        self.live.remove(&path);
        Some(path)
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
                .cast(SessionMsg::Workflow { plan, reply })
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
    /// now is: its steps narrow its current authority, live. The request
    /// carries the tool's reply port: the mailbox does not wait for the
    /// run.
    pub(super) fn delegate(
        &self,
        plan: serde_json::Value,
        reply: tokio::sync::oneshot::Sender<ToolOutcome>,
    ) {
        let Some(engine) = self.services.subagents.as_ref().and_then(|s| s.workflows()) else {
            let _ = reply.send(Err(ToolError::failed(
                "workflows are not available in this host",
            )));
            return;
        };
        let mut spec = self.spec.clone();
        spec.authority = self.current_authority();
        let caller = Caller {
            runs_dir: self.spec.paths.dir.join("runs"),
            session_id: Some(self.row.to_string()),
            spec,
            live: self.live.clone(),
            services: self.services.clone(),
            events: self.events.clone(),
        };
        let run = DelegationMsg::Run {
            caller: Box::new(caller),
            plan,
            reply,
        };
        if let Err(ractor::MessagingErr::SendErr(DelegationMsg::Run { reply, .. })) =
            engine.cast(run)
        {
            let _ = reply.send(Err(ToolError::failed(
                "the workflow engine has stopped; nothing ran",
            )));
        }
    }

    /// An `agent` tool request: what the core takes of it, once its
    /// mechanics (the role, the authority, the slot, the start) are done.
    pub(super) async fn agent_request(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        request: AgentRequest,
        reply: RpcReplyPort<ToolOutcome>,
    ) -> Option<AgentInput> {
        match request {
            AgentRequest::Roster => {
                let _ = reply.send(Ok(self.roster()));
                None
            }
            AgentRequest::Spawn {
                prompt,
                role,
                background,
            } => {
                self.spawn_child(myself, prompt, role, background, reply)
                    .await
            }
            AgentRequest::Followup {
                agent_id,
                prompt,
                background,
            } => match self.followup_check(&agent_id) {
                Ok(path) => Some(AgentInput::FollowUp {
                    ticket: self.replies.tool(reply),
                    path,
                    prompt,
                    background,
                }),
                Err(error) => {
                    let _ = reply.send(Err(error));
                    None
                }
            },
            AgentRequest::Wait { agent_id } => Some(AgentInput::Wait {
                ticket: self.replies.tool(reply),
                agent_id,
            }),
        }
    }

    fn roster(&self) -> String {
        let Some(env) = &self.services.subagents else {
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
        let mut children = self.core.children().iter().peekable();
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
        let Some(env) = &self.services.subagents else {
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
        reply: RpcReplyPort<ToolOutcome>,
    ) -> Option<AgentInput> {
        let child = match self.new_child(prompt, role_name, background) {
            Ok(child) => child,
            Err(error) => {
                let _ = reply.send(Err(error));
                return None;
            }
        };
        // A session's new child may run on a node: the placement answers
        // later, as a message, and the spawn goes on from there.
        let placement = self
            .services
            .subagents
            .as_ref()
            .and_then(|s| s.placement.clone());
        if let Some(placement) = placement.filter(|_| self.spec.is_session()) {
            self.place_child(myself, &placement, child, reply);
            return None;
        }
        match self.start_local(myself, &child).await {
            Ok(handle) => Some(self.spawned(child, handle, false, reply)),
            Err(error) => {
                let _ = reply.send(Err(error));
                None
            }
        }
    }

    /// Everything a new child's start needs: its role, its authority
    /// narrowed from this agent's now, its slot, its model, its spec.
    fn new_child(
        &mut self,
        prompt: String,
        role_name: Option<String>,
        background: bool,
    ) -> Result<NewChild, ToolError> {
        let role_name = role_name.unwrap_or_else(|| "worker".to_string());
        let role = self.role(&role_name)?;
        let authority = self
            .current_authority()
            .narrow(&role_name, &role)
            .map_err(refusal)?;
        let Some(env) = self.services.subagents.clone() else {
            return Err(ToolError::failed(
                "sub-agents are not available in this host",
            ));
        };
        let slot = env.slot()?;
        let path = self.core.next_child_path();
        let model = env
            .models
            .client(&role)
            .map_err(|e| ToolError::failed(format!("role '{role_name}': {e}")))?;
        let spec = self.child_spec(&path, &role_name, &role, authority);
        let model_name = spec
            .model
            .clone()
            .unwrap_or_else(|| model.model().to_string());
        Ok(NewChild {
            path,
            role_name,
            spec,
            model,
            model_name,
            slot,
            prompt,
            background,
        })
    }

    /// Keeps a child that started (here, or on a node that sent it its
    /// prompt: `prompted`) and says so to the core, which answers `reply`.
    pub(super) fn spawned(
        &mut self,
        child: NewChild,
        handle: ChildHandle,
        prompted: bool,
        reply: RpcReplyPort<ToolOutcome>,
    ) -> AgentInput {
        let NewChild {
            path,
            role_name,
            spec,
            model_name,
            slot,
            prompt,
            background,
            ..
        } = child;
        let handle = ChildHandle {
            slot: Some(slot),
            ..handle
        };
        self.children.live.insert(path.clone(), handle);
        AgentInput::ChildStarted(Box::new(ChildStart {
            ticket: self.replies.tool(reply),
            path,
            role: role_name,
            model: model_name,
            posture: spec.authority.posture,
            depth: spec.authority.depth,
            prompt: (!prompted).then_some(prompt),
            background,
        }))
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
            summarizer: self.services.summarizer.clone(),
            subagents: self.services.subagents.clone(),
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

    /// A follow-up's mechanics before the core sees it: the child's id,
    /// and its role narrowed from this agent as it is now.
    fn followup_check(&self, agent_id: &str) -> Result<AgentPath, ToolError> {
        let path: AgentPath =
            agent_id
                .parse()
                .map_err(|e: cadre_runtime::agent::path::BadAgentId| {
                    ToolError::new(ErrorCode::NotFound, e.to_string())
                })?;
        let Some(child) = self.core.children().get(&path) else {
            return Err(child_refusal(ChildRefusal::NotFound(agent_id.to_string())));
        };
        // Authority is re-derived from this agent as it is now.
        let role_name = child.role.clone();
        let role = self.role(&role_name).unwrap_or_default();
        self.current_authority()
            .narrow(&role_name, &role)
            .map_err(refusal)?;
        if self.services.subagents.is_none() {
            return Err(ToolError::failed(
                "sub-agents are not available in this host",
            ));
        }
        Ok(path)
    }

    /// Starts a follow-up the core allowed: the child's slot, and a new
    /// actor on its stored conversation for a child read back from the
    /// store.
    pub(super) async fn resume_child(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        ticket: Ticket,
        path: AgentPath,
        live: bool,
        prompt: String,
        background: bool,
    ) -> AgentInput {
        match self.resume_mechanics(myself, &path, live, background).await {
            Ok(()) => AgentInput::ChildResumed {
                ticket,
                path,
                prompt,
                background,
            },
            Err(error) => AgentInput::ChildNotResumed {
                ticket,
                path,
                error,
            },
        }
    }

    async fn resume_mechanics(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        path: &AgentPath,
        live: bool,
        background: bool,
    ) -> Result<(), ToolError> {
        let Some(env) = self.services.subagents.clone() else {
            return Err(ToolError::failed(
                "sub-agents are not available in this host",
            ));
        };
        let slot = env.slot()?;
        if live {
            return match self.children.live.get_mut(path) {
                Some(handle) => {
                    handle.slot = Some(slot);
                    Ok(())
                }
                None => Err(child_refusal(ChildRefusal::NotFound(path.to_string()))),
            };
        }
        let role_name = self
            .core
            .children()
            .get(path)
            .map(|c| c.role.clone())
            .unwrap_or_default();
        let role = self.role(&role_name).unwrap_or_default();
        let authority = self
            .current_authority()
            .narrow(&role_name, &role)
            .map_err(refusal)?;
        let model = env
            .models
            .client(&role)
            .map_err(|e| ToolError::failed(format!("role '{role_name}': {e}")))?;
        let spec = self.child_spec(path, &role_name, &role, authority);
        let child = NewChild {
            path: path.clone(),
            role_name,
            model_name: String::new(),
            spec,
            model,
            slot,
            prompt: String::new(),
            background,
        };
        let handle = self.start_local(myself, &child).await?;
        self.children.live.insert(
            path.clone(),
            ChildHandle {
                slot: Some(child.slot),
                ..handle
            },
        );
        Ok(())
    }
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
