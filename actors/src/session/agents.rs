//! Sub-agents (S1–S6): a session spawns, resumes and supervises its workers.
//!
//! A sub-agent is a [`SessionActor`] of its own, spawned linked to its
//! parent session (so a crash is the parent's supervision event), with an
//! authority computed by `Authority::narrow` from the parent's *current*
//! authority and the role, at spawn and again at every follow-up. Its events
//! go to a pump task that builds its report from what actually happened and
//! forwards what the host must see (approval prompts, permission decisions,
//! status) to the parent's stream; prompts bubble up to the root session's
//! host, and answers are routed back down by id (`agent:<id>:approval:<n>`),
//! whether the parent is idle or itself waiting.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cadre_runtime::agent::{AgentReport, Authority, ModelSource, ReportBuilder, SpawnRefusal};
use cadre_runtime::config::RoleConfig;
use cadre_runtime::protocol::{AgentStatus, Event, Op};
use cadre_runtime::tool::{AgentHost, AgentRequest, ToolError, ToolFuture, ToolOutcome};
use ractor::{Actor, ActorRef};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};

use super::{SessionActor, SessionArgs, SessionConfig, SessionMsg, SessionServices, SessionState};

/// What a tree of sessions shares for its sub-agents.
pub struct Subagents {
    /// Configured roles.
    pub roles: BTreeMap<String, RoleConfig>,
    /// Model clients for roles.
    pub models: Arc<dyn ModelSource>,
    /// Running sub-agents at once, across the whole tree.
    slots: Arc<Semaphore>,
    limit: usize,
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
        }
    }

    /// The concurrency limit in force.
    pub fn limit(&self) -> usize {
        self.limit
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

/// A session's children.
#[derive(Default)]
pub(super) struct Children {
    by_id: HashMap<String, Child>,
    spawned: u64,
}

struct Child {
    actor: ActorRef<SessionMsg>,
    role: String,
    /// Held while the child works; released when its run ends.
    slot: Option<OwnedSemaphorePermit>,
    last_report: Option<AgentReport>,
    waiters: Vec<oneshot::Sender<ToolOutcome>>,
}

impl Child {
    fn running(&self) -> bool {
        self.slot.is_some()
    }
}

/// Sends a turn's `agent` requests to its session.
pub(crate) struct SessionAgentHost {
    pub(crate) session: ActorRef<SessionMsg>,
}

impl AgentHost for SessionAgentHost {
    fn call(&self, request: AgentRequest) -> ToolFuture<'static> {
        let session = self.session.clone();
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            session
                .cast(SessionMsg::Agent { request, reply })
                .map_err(|_| ToolError::failed("the session has stopped"))?;
            answer
                .await
                .unwrap_or_else(|_| Err(ToolError::failed("the sub-agent request was dropped")))
        })
    }
}

impl SessionState {
    /// This session's authority now (posture after the ledger, current mode).
    pub(super) fn current_authority(&self) -> Authority {
        Authority {
            mode: self.mode,
            posture: self.authority.effective_posture(),
            allowed_tools: self
                .config
                .allowed_tools
                .as_ref()
                .map(|tools| tools.iter().cloned().collect()),
            file_scopes: self.config.file_scopes.clone(),
            rules: self.authority.config.rules.clone(),
            depth: self.config.depth,
            max_depth: self.config.max_depth,
        }
    }

    /// Carries out an `agent` tool request.
    pub(super) async fn agent_request(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        request: AgentRequest,
        reply: oneshot::Sender<ToolOutcome>,
    ) {
        let outcome = match request {
            AgentRequest::Roster => Ok(Answer::Now(self.roster())),
            AgentRequest::Spawn {
                prompt,
                role,
                background,
            } => self.spawn_agent(myself, prompt, role, background).await,
            AgentRequest::Followup {
                agent_id,
                prompt,
                background,
            } => self.followup(&agent_id, prompt, background),
            AgentRequest::Wait { agent_id } => self.wait_for(&agent_id),
        };
        match outcome {
            Ok(Answer::Now(text)) => {
                let _ = reply.send(Ok(text));
            }
            Ok(Answer::Later(agent_id)) => {
                if let Some(child) = self.children.by_id.get_mut(&agent_id) {
                    child.waiters.push(reply);
                }
            }
            Err(error) => {
                let _ = reply.send(Err(error));
            }
        }
    }

    fn roster(&self) -> String {
        let Some(env) = &self.config.subagents else {
            return "sub-agents are not available in this host".into();
        };
        let mut out = format!(
            "model: {} · posture: {} · up to {} sub-agents at once · depth {} of {}\n",
            self.services.model.model(),
            self.authority.effective_posture(),
            env.limit(),
            self.config.depth,
            self.config.max_depth
        );
        if env.roles.is_empty() {
            out.push_str("roles: none configured; spawn without a role to get a general worker\n");
        }
        for (name, role) in &env.roles {
            out.push_str(&format!(
                "- {name}: model {}, posture ≤ {}, tools {}{}\n",
                role.model.as_deref().unwrap_or(self.services.model.model()),
                role.posture
                    .map_or_else(|| "inherited".to_string(), |p| p.to_string()),
                role.allowed_tools
                    .as_ref()
                    .map_or_else(|| "all".to_string(), |t| t.join(", ")),
                role.description
                    .as_deref()
                    .map(|d| format!(" — {d}"))
                    .unwrap_or_default()
            ));
        }
        out
    }

    async fn spawn_agent(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        prompt: String,
        role_name: Option<String>,
        background: bool,
    ) -> Result<Answer, ToolError> {
        let Some(env) = self.config.subagents.clone() else {
            return Err(ToolError::failed(
                "sub-agents are not available in this host",
            ));
        };
        let role_name = role_name.unwrap_or_else(|| "worker".to_string());
        let role = match env.roles.get(&role_name) {
            Some(role) => role.clone(),
            None if role_name == "worker" => RoleConfig::default(),
            None => {
                let known: Vec<&str> = env.roles.keys().map(String::as_str).collect();
                return Err(ToolError::invalid(format!(
                    "there is no role '{role_name}'; configured roles: {}",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known.join(", ")
                    }
                )));
            }
        };
        let authority = self
            .current_authority()
            .narrow(&role_name, &role)
            .map_err(refusal)?;
        let slot = env.slots.clone().try_acquire_owned().map_err(|_| {
            ToolError::failed(format!(
                "the sub-agent limit is reached: {} already running (--max-subagents); \
                 wait for one with action=wait, or do the work yourself",
                env.limit()
            ))
        })?;
        let model = env
            .models
            .client(&role)
            .map_err(|e| ToolError::failed(format!("role '{role_name}': {e}")))?;

        self.children.spawned += 1;
        let agent_id = if self.config.agent_id == "main" {
            self.children.spawned.to_string()
        } else {
            format!("{}.{}", self.config.agent_id, self.children.spawned)
        };
        let child_config = self.child_config(&agent_id, &role_name, &role, authority);
        let posture = child_config.permissions.posture;
        let depth = child_config.depth;
        let model_name = child_config
            .model_override
            .clone()
            .unwrap_or_else(|| model.model().to_string());
        let (events, stream) = mpsc::unbounded_channel();
        let args = SessionArgs {
            config: child_config,
            services: SessionServices {
                model: model.clone(),
                tools: self.services.tools.clone(),
                // A sub-agent's work lives in its parent's conversation
                // (its report); it keeps no store of its own.
                store: None,
            },
            events: super::EventSink::new(events),
        };
        let (actor, _) = Actor::spawn_linked(None, SessionActor, args, myself.get_cell())
            .await
            .map_err(|e| ToolError::failed(format!("the sub-agent could not start: {e}")))?;
        // The child's tools decide which calls are evidence and changes.
        let report = ReportBuilder::for_tools(
            &agent_id,
            &role_name,
            self.services.tools.registry().definitions(),
        );
        tokio::spawn(pump(
            agent_id.clone(),
            report,
            stream,
            self.events.clone(),
            myself.clone(),
        ));
        self.emit(Event::AgentSpawned {
            agent_id: agent_id.clone(),
            role: role_name.clone(),
            model: model_name,
            posture,
            depth,
        });
        let _ = actor.cast(SessionMsg::Op(Op::user(prompt)));
        self.children.by_id.insert(
            agent_id.clone(),
            Child {
                actor,
                role: role_name.clone(),
                slot: Some(slot),
                last_report: None,
                waiters: Vec::new(),
            },
        );
        Ok(if background {
            Answer::Now(format!(
                "started agent {agent_id} (role {role_name}) in the background; \
                 collect its report with action=wait, agent_id={agent_id}"
            ))
        } else {
            Answer::Later(agent_id)
        })
    }

    fn child_config(
        &self,
        agent_id: &str,
        role_name: &str,
        role: &RoleConfig,
        authority: Authority,
    ) -> SessionConfig {
        let mut permissions = self.authority.config.clone();
        permissions.posture = authority.posture;
        permissions.rules = authority.rules.clone();
        SessionConfig {
            session_id: self.config.session_id.clone(),
            agent_id: agent_id.to_string(),
            role: role_name.to_string(),
            mode: authority.mode,
            workspace: self.config.workspace.clone(),
            paths: cadre_runtime::paths::SessionPaths {
                dir: self.config.paths.dir.join("agents").join(agent_id),
            },
            max_iterations: self.config.max_iterations,
            allowed_tools: authority.allowed_tools.map(|t| t.into_iter().collect()),
            permissions,
            depth: authority.depth,
            max_depth: authority.max_depth,
            file_scopes: authority.file_scopes,
            role_prompt: role.system_prompt.clone(),
            // On the parent's client, the role's model, else the parent's.
            model_override: role
                .base_url
                .is_none()
                .then(|| {
                    role.model
                        .clone()
                        .or_else(|| self.config.model_override.clone())
                })
                .flatten(),
            subagents: self.config.subagents.clone(),
            plan_agent_entry: false,
        }
    }

    fn followup(
        &mut self,
        agent_id: &str,
        prompt: String,
        background: bool,
    ) -> Result<Answer, ToolError> {
        let parent = self.current_authority();
        let Some(env) = self.config.subagents.clone() else {
            return Err(ToolError::failed(
                "sub-agents are not available in this host",
            ));
        };
        let Some(child) = self.children.by_id.get_mut(agent_id) else {
            return Err(ToolError::new(
                cadre_runtime::tool::ErrorCode::NotFound,
                format!("there is no agent '{agent_id}' under this session"),
            ));
        };
        if child.running() {
            return Err(ToolError::failed(format!(
                "agent {agent_id} is still working; use action=wait first"
            )));
        }
        // Authority is re-derived from the parent as it is now.
        let role = env.roles.get(&child.role).cloned().unwrap_or_default();
        let authority = parent.narrow(&child.role, &role).map_err(refusal)?;
        let slot = env.slots.clone().try_acquire_owned().map_err(|_| {
            ToolError::failed(format!(
                "the sub-agent limit is reached: {} already running (--max-subagents)",
                env.limit()
            ))
        })?;
        let _ = child.actor.cast(SessionMsg::Narrow {
            posture: authority.posture,
            mode: authority.mode,
        });
        let _ = child.actor.cast(SessionMsg::Op(Op::user(prompt)));
        child.slot = Some(slot);
        child.last_report = None;
        Ok(if background {
            Answer::Now(format!(
                "agent {agent_id} is working on the follow-up in the background"
            ))
        } else {
            Answer::Later(agent_id.to_string())
        })
    }

    fn wait_for(&mut self, agent_id: &str) -> Result<Answer, ToolError> {
        let Some(child) = self.children.by_id.get(agent_id) else {
            return Err(ToolError::new(
                cadre_runtime::tool::ErrorCode::NotFound,
                format!("there is no agent '{agent_id}' under this session"),
            ));
        };
        match (&child.last_report, child.running()) {
            (_, true) => Ok(Answer::Later(agent_id.to_string())),
            (Some(report), false) => Ok(Answer::Now(report.render())),
            (None, false) => Err(ToolError::failed(format!(
                "agent {agent_id} has no report yet"
            ))),
        }
    }

    /// A child's run ended (from its pump).
    pub(super) fn agent_run_done(&mut self, agent_id: &str, report: AgentReport) {
        let Some(child) = self.children.by_id.get_mut(agent_id) else {
            return;
        };
        child.slot = None;
        let text = report.render();
        for waiter in child.waiters.drain(..) {
            let _ = waiter.send(Ok(text.clone()));
        }
        self.emit(Event::AgentCompleted {
            agent_id: agent_id.to_string(),
            status: report.status.clone(),
            summary: report.summary.clone(),
            verified: report.verified,
        });
        if let Some(child) = self.children.by_id.get_mut(agent_id) {
            child.last_report = Some(report);
        }
    }

    /// A child session crashed: its waiters get the failure.
    pub(super) fn agent_crashed(&mut self, cell: ractor::ActorId, error: &str) -> bool {
        let Some(agent_id) = self
            .children
            .by_id
            .iter()
            .find(|(_, c)| c.actor.get_id() == cell)
            .map(|(id, _)| id.clone())
        else {
            return false;
        };
        let mut report = AgentReport {
            agent_id: agent_id.clone(),
            status: "failed".into(),
            blockers: vec![format!("the sub-agent crashed: {error}")],
            verified: true,
            ..AgentReport::default()
        };
        if let Some(child) = self.children.by_id.remove(&agent_id) {
            report.role = child.role;
            for waiter in child.waiters {
                let _ = waiter.send(Err(ToolError::failed(format!(
                    "agent {agent_id} crashed: {error}"
                ))));
            }
        }
        self.emit(Event::AgentCompleted {
            agent_id,
            status: report.status,
            summary: String::new(),
            verified: false,
        });
        true
    }

    /// Routes an approval answer meant for a descendant; false when no
    /// child is on the way to it.
    pub(super) fn route_approval(&self, op: &Op, id: &str) -> bool {
        let Some(path) = id
            .strip_prefix("agent:")
            .and_then(|rest| rest.split(':').next())
        else {
            return false;
        };
        let segments: Vec<&str> = path.split('.').collect();
        let depth = self.config.depth as usize;
        if segments.len() <= depth {
            return false;
        }
        let child_id = segments[..=depth].join(".");
        match self.children.by_id.get(&child_id) {
            Some(child) => child.actor.cast(SessionMsg::Op(op.clone())).is_ok(),
            None => false,
        }
    }

    /// Asks every child to stop.
    pub(super) fn stop_children(&self) {
        for child in self.children.by_id.values() {
            let _ = child.actor.cast(SessionMsg::Op(Op::Shutdown));
        }
    }
}

/// What an agent request answers with.
enum Answer {
    /// Text for the model now.
    Now(String),
    /// The agent's report, when its run ends.
    Later(String),
}

fn refusal(refusal: SpawnRefusal) -> ToolError {
    ToolError::new(
        cadre_runtime::tool::ErrorCode::ToolNotAllowed,
        refusal.to_string(),
    )
}

/// Reads a child's events for its whole life: builds its reports, tells the
/// parent when a run ends, and forwards what the host must see.
async fn pump(
    agent_id: String,
    mut builder: ReportBuilder,
    mut stream: mpsc::UnboundedReceiver<Event>,
    parent_events: super::EventSink,
    parent: ActorRef<SessionMsg>,
) {
    let status = |status: AgentStatus| Event::AgentStatusChanged {
        agent_id: agent_id.clone(),
        status,
    };
    while let Some(event) = stream.recv().await {
        match &event {
            Event::TurnStarted { .. } => {
                let _ = parent_events.send(status(AgentStatus::Running));
            }
            Event::ApprovalRequested {
                agent_id: asker, ..
            } if asker == &agent_id => {
                let _ = parent_events.send(status(AgentStatus::WaitingForUser));
            }
            Event::ApprovalResolved { .. } => {}
            _ => {}
        }
        let forward = matches!(
            event,
            Event::ApprovalRequested { .. }
                | Event::ApprovalResolved { .. }
                | Event::PermissionDecision { .. }
                | Event::AutonomyPaused { .. }
                | Event::AgentSpawned { .. }
                | Event::AgentStatusChanged { .. }
                | Event::AgentCompleted { .. }
        );
        if let Event::ApprovalResolved { id, .. } = &event
            && id.starts_with(&format!("agent:{agent_id}:"))
        {
            let _ = parent_events.send(status(AgentStatus::Running));
        }
        if let Some(report) = builder.push(&event) {
            let _ = parent.cast(SessionMsg::AgentRunDone {
                agent_id: agent_id.clone(),
                report: Box::new(report),
            });
        }
        if forward {
            let _ = parent_events.send(event);
        }
    }
}
