//! The node's side (`cadre node`): a service actor that runs the step
//! agents coordinators send it.
//!
//! Each order is checked ([`admit`]) before anything starts: the step's
//! authority within its caller's, the workspace one the node serves, the
//! node's ceiling applied. The agent is started through the kernel like
//! any step agent, linked to the service, on the node's own model, tools,
//! sandbox and protected paths, with a store in memory: what must survive
//! (the step's state, output, evidence, tokens) goes back to the
//! coordinator, whose store keeps it. Everything an agent does waits in
//! its coordinator's outbox until the coordinator pulls it; a pull is
//! answered at once when something waits, else within a heartbeat, so the
//! pulls are the heartbeat both sides watch. A coordinator that stops
//! pulling for the timeout is taken as gone: its agents are stopped.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cadre_actors::delegation::Caller;
use cadre_actors::kernel::{AgentServices, Child, SpawnedAgent, spawn_agent};
use cadre_actors::session::SessionMsg;
use cadre_actors::store::{RunDraft, StoreRequest};
use cadre_runtime::agent::LiveAuthority;
use cadre_runtime::protocol::{Envelope, Op};
use cadre_runtime::tool::Workspace;
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::time::Instant;

use super::admit::{Ceiling, Mapping, admit};
use super::wire::{
    Addressed, AgentEnd, Batch, CheckOrder, Item, NODES_GROUP, NodeInfo, NodeMsg, Order, Outbound,
    PROTOCOL, Pull, StartRefusal,
};
use cadre_runtime::sandbox::run_check;

/// What a node is.
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Its name in the cluster.
    pub name: String,
    /// Agents it runs at once.
    pub slots: u32,
    /// The workspaces it serves.
    pub served: Vec<Mapping>,
    /// The most it lets an agent do.
    pub ceiling: Ceiling,
    /// Where agents' files go (plan files, temp dirs): scratch.
    pub files: PathBuf,
    /// The longest a waiting pull is held before it is answered empty.
    pub heartbeat: Duration,
    /// A coordinator that has not pulled for this long is gone.
    pub timeout: Duration,
}

/// The node's messages to itself.
#[derive(Debug)]
pub enum Local {
    /// An event of a running agent.
    Agent(Key, Box<Envelope>),
    /// A running agent's event stream ended.
    Gone(Key),
    /// A check ended.
    Checked(Key, bool, String),
    /// Answer held pulls, look for coordinators gone quiet.
    Tick,
}

/// An attempt: its coordinator and the coordinator's number for it.
pub type Key = (String, u64);

/// What the service starts with.
pub struct NodeArgs {
    /// Its name, slots, served workspaces and ceiling.
    pub config: NodeConfig,
    /// The node's own agent settings and services (model, tools, store in
    /// memory, sandbox, protected paths, guardian); each order fills in
    /// the rest.
    pub template: Caller,
    /// Where the service tells what it did.
    pub notices: tokio::sync::mpsc::UnboundedSender<Notice>,
}

/// What a node tells the person running it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notice {
    /// An agent started.
    Started {
        /// The name of the coordinator whose order it runs.
        coordinator: String,
        /// `<run>/<path>`.
        agent: String,
    },
    /// An order was refused.
    Refused {
        /// The name of the coordinator that sent it.
        coordinator: String,
        /// What the coordinator was answered.
        reason: StartRefusal,
    },
    /// A coordinator stopped pulling; its agents were stopped.
    CoordinatorGone {
        /// Its name.
        coordinator: String,
        /// How many of its agents were still running here.
        stopped: usize,
    },
}

/// The service actor.
pub struct NodeService;

struct Running {
    agent: ActorRef<SessionMsg>,
    /// The caller's live authority as the node holds it.
    parent: Arc<LiveAuthority>,
    workspace: PathBuf,
    tmp: PathBuf,
}

#[derive(Default)]
struct Outbox {
    next: u64,
    items: VecDeque<Item>,
    waiting: Option<RpcReplyPort<Batch>>,
    last_pull: Option<Instant>,
}

/// A node service's state: the agents it runs for coordinators, and what
/// each coordinator has not pulled yet.
pub struct NodeState {
    config: NodeConfig,
    template: Caller,
    notices: tokio::sync::mpsc::UnboundedSender<Notice>,
    running: HashMap<Key, Running>,
    /// Attempts whose agent ended (it answered) and whose step may still
    /// ask for its check: their workspace and temp dir, until `Stop`.
    ended: HashMap<Key, (PathBuf, PathBuf)>,
    outboxes: HashMap<String, Outbox>,
    /// Runs with a row in the node's store (its agents' rows hang under it).
    runs: std::collections::HashSet<String>,
}

impl Actor for NodeService {
    type Msg = NodeMsg;
    type State = NodeState;
    type Arguments = NodeArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: NodeArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        ractor::pg::join(NODES_GROUP.to_string(), vec![myself.get_cell()]);
        myself.send_interval(args.config.heartbeat / 2, || NodeMsg::Local(Local::Tick));
        Ok(NodeState {
            config: args.config,
            template: args.template,
            notices: args.notices,
            running: HashMap::new(),
            ended: HashMap::new(),
            outboxes: HashMap::new(),
            runs: std::collections::HashSet::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            NodeMsg::Hello(reply) => {
                let _ = reply.send(state.info());
            }
            NodeMsg::Start(order, reply) => {
                let coordinator = order.coordinator.clone();
                let started = Box::pin(state.start(&myself, *order)).await;
                if let Err(reason) = &started {
                    let _ = state.notices.send(Notice::Refused {
                        coordinator,
                        reason: reason.clone(),
                    });
                }
                let _ = reply.send(started);
            }
            NodeMsg::Pull(pull, reply) => state.pull(pull, reply),
            NodeMsg::Op(Addressed {
                coordinator,
                attempt,
                body,
            }) => {
                if let Some(running) = state.running.get(&(coordinator, attempt)) {
                    let _ = running.agent.cast(SessionMsg::Op(body));
                }
            }
            NodeMsg::Check(Addressed {
                coordinator,
                attempt,
                body,
            }) => state.check(&myself, (coordinator, attempt), body),
            NodeMsg::Stop(Addressed {
                coordinator,
                attempt,
                ..
            }) => {
                let key = (coordinator, attempt);
                state.ended.remove(&key);
                if let Some(running) = state.running.remove(&key) {
                    stop(&running.agent);
                }
            }
            NodeMsg::Local(local) => match local {
                Local::Agent((coordinator, attempt), envelope) => {
                    state.push(&coordinator, attempt, Outbound::Event(*envelope));
                }
                Local::Gone(key) => {
                    if let Some(running) = state.running.remove(&key) {
                        state
                            .ended
                            .insert(key.clone(), (running.workspace, running.tmp));
                        let (coordinator, attempt) = key;
                        state.push(&coordinator, attempt, Outbound::Ended(AgentEnd::Stopped));
                    }
                }
                Local::Checked((coordinator, attempt), passed, detail) => {
                    state.push(&coordinator, attempt, Outbound::Checked { passed, detail });
                }
                Local::Tick => state.tick(),
            },
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // An agent ends when told to; only its crash is news.
        if let SupervisionEvent::ActorFailed(cell, error) = event {
            let crashed = state
                .running
                .iter()
                .find(|(_, r)| r.agent.get_id() == cell.get_id())
                .map(|(key, _)| key.clone());
            if let Some(key) = crashed {
                state.running.remove(&key);
                let (coordinator, attempt) = key;
                state.push(
                    &coordinator,
                    attempt,
                    Outbound::Ended(AgentEnd::Failed(format!("the agent crashed: {error}"))),
                );
            }
        }
        Ok(())
    }
}

fn stop(agent: &ActorRef<SessionMsg>) {
    let _ = agent.cast(SessionMsg::Op(Op::Cancel));
    let _ = agent.cast(SessionMsg::Op(Op::Shutdown));
}

impl NodeState {
    fn info(&self) -> NodeInfo {
        NodeInfo {
            name: self.config.name.clone(),
            protocol: PROTOCOL,
            slots: self.config.slots,
            workspaces: self
                .config
                .served
                .iter()
                .map(|m| m.coordinator.clone())
                .collect(),
        }
    }

    fn free(&self) -> u32 {
        self.config
            .slots
            .saturating_sub(self.running.len().try_into().unwrap_or(u32::MAX))
    }

    /// Checks the order and starts its agent.
    async fn start(
        &mut self,
        myself: &ActorRef<NodeMsg>,
        order: Order,
    ) -> Result<(), StartRefusal> {
        if self.free() == 0 {
            return Err(StartRefusal::Full {
                node: self.config.name.clone(),
            });
        }
        let key = (order.coordinator.clone(), order.attempt);
        if self.running.contains_key(&key) {
            return Err(StartRefusal::AlreadyRunning {
                attempt: order.attempt,
            });
        }
        let admitted = admit(&order, &self.config.ceiling, &self.config.served).map_err(|e| {
            StartRefusal::Admission {
                reason: e.to_string(),
            }
        })?;
        let workspace =
            Workspace::new(&admitted.workspace).map_err(|e| StartRefusal::Workspace {
                path: admitted.workspace.clone(),
                message: e.to_string(),
            })?;
        self.open_run(&order, &admitted.workspace).await?;
        let parent = LiveAuthority::root(admitted.live.0, admitted.live.1);
        let dir = self
            .config
            .files
            .join(&order.run_id)
            .join(format!("{}-{}", order.path, order.attempt));
        let template = &self.template;
        let mut spec = template.spec.step(
            Child {
                path: order.path.clone(),
                role: order.role.clone(),
                authority: admitted.authority,
                live: parent.clone(),
                model: order.model.clone(),
                prompt: order.system_prompt.clone(),
                dir: dir.clone(),
            },
            order.run_id.clone(),
            order.step.clone(),
        );
        // The order's, not the template's: the coordinator's limits,
        // workspace and interactivity.
        spec.max_iterations = order.max_iterations;
        spec.workspace = workspace;
        spec.interactive = order.interactive;
        // The coordinator's hooks, run here: a step on a node skips none.
        spec.hooks = std::sync::Arc::new(order.hooks.clone());
        // A remote step starts no sub-agents of its own.
        let services = AgentServices {
            subagents: None,
            ..self.template.services.clone()
        };
        let agent_id = spec.row_id();
        let SpawnedAgent {
            actor, mut events, ..
        } = spawn_agent(spec, services, Some(myself.get_cell()))
            .await
            .map_err(|e| StartRefusal::Agent {
                message: e.to_string(),
            })?;
        let me = myself.clone();
        let forward = key.clone();
        tokio::spawn(async move {
            while let Some(envelope) = events.recv().await {
                let local = Local::Agent(forward.clone(), Box::new(envelope));
                if me.cast(NodeMsg::Local(local)).is_err() {
                    return;
                }
            }
            let _ = me.cast(NodeMsg::Local(Local::Gone(forward)));
        });
        actor
            .cast(SessionMsg::Op(Op::user(order.prompt)))
            .map_err(|e| StartRefusal::Stopped {
                message: e.to_string(),
            })?;
        self.outboxes
            .entry(order.coordinator.clone())
            .or_default()
            .last_pull
            .get_or_insert_with(Instant::now);
        self.running.insert(
            key,
            Running {
                agent: actor,
                parent,
                workspace: admitted.workspace,
                tmp: dir.join("tmp"),
            },
        );
        let _ = self.notices.send(Notice::Started {
            coordinator: order.coordinator,
            agent: agent_id,
        });
        Ok(())
    }

    /// Gives the order's run a row in the node's store, once.
    async fn open_run(
        &mut self,
        order: &Order,
        workspace: &std::path::Path,
    ) -> Result<(), StartRefusal> {
        if self.runs.contains(&order.run_id) {
            return Ok(());
        }
        let Some(store) = self.template.services.store.clone() else {
            return Ok(());
        };
        let draft = RunDraft {
            id: order.run_id.clone(),
            caller_id: None,
            name: format!("remote steps of run {}", order.run_id),
            file: None,
            source: String::new(),
            settings: "{}".into(),
            workspace: workspace.to_path_buf(),
            mode: order.authority.mode,
            posture: order.authority.posture,
        };
        store
            .ask(|reply| StoreRequest::CreateRun(Box::new(draft), reply))
            .await
            .map_err(|e| StartRefusal::Store {
                message: e.to_string(),
            })?;
        self.runs.insert(order.run_id.clone());
        Ok(())
    }

    fn check(&self, myself: &ActorRef<NodeMsg>, key: Key, order: CheckOrder) {
        let found = match self.running.get(&key) {
            Some(running) => Some((running.workspace.clone(), running.tmp.clone())),
            None => self.ended.get(&key).cloned(),
        };
        let Some((workspace, tmp)) = found else {
            let _ = myself.cast(NodeMsg::Local(Local::Checked(
                key,
                false,
                "the step's agent is no longer on this node".into(),
            )));
            return;
        };
        let sandbox = self.template.spec.sandbox.clone();
        let me = myself.clone();
        tokio::spawn(async move {
            let timeout = Duration::from_millis(order.timeout_ms);
            let ran = run_check(
                &order.command,
                &order.env,
                &workspace,
                &tmp,
                &sandbox,
                timeout,
            )
            .await;
            let (passed, detail) = (ran.passed(), ran.detail().to_string());
            let _ = me.cast(NodeMsg::Local(Local::Checked(key, passed, detail)));
        });
    }

    /// Queues an item for a coordinator and hands it over if it waits.
    fn push(&mut self, coordinator: &str, attempt: u64, what: Outbound) {
        let free = self.free();
        let Some(outbox) = self.outboxes.get_mut(coordinator) else {
            return;
        };
        outbox.next += 1;
        let seq = outbox.next;
        outbox.items.push_back(Item { seq, attempt, what });
        if let Some(reply) = outbox.waiting.take() {
            let _ = reply.send(Batch {
                items: outbox.items.iter().cloned().collect(),
                free,
            });
        }
    }

    fn pull(&mut self, pull: Pull, reply: RpcReplyPort<Batch>) {
        let ceiling = &self.config.ceiling;
        for (attempt, mode, posture) in &pull.live {
            if let Some(running) = self.running.get(&(pull.coordinator.clone(), *attempt)) {
                running.parent.set_mode(mode.narrower(ceiling.mode));
                running
                    .parent
                    .set_posture(posture.narrower(ceiling.posture));
            }
        }
        let free = self.free();
        let outbox = self.outboxes.entry(pull.coordinator).or_default();
        outbox.last_pull = Some(Instant::now());
        while outbox.items.front().is_some_and(|i| i.seq <= pull.after) {
            outbox.items.pop_front();
        }
        if let Some(old) = outbox.waiting.take() {
            let _ = old.send(Batch {
                items: Vec::new(),
                free,
            });
        }
        if outbox.items.is_empty() {
            outbox.waiting = Some(reply);
        } else {
            let _ = reply.send(Batch {
                items: outbox.items.iter().cloned().collect(),
                free,
            });
        }
    }

    /// Answers held pulls empty; stops the agents of coordinators that
    /// stopped pulling.
    fn tick(&mut self) {
        let free = self.free();
        let timeout = self.config.timeout;
        let mut gone = Vec::new();
        for (coordinator, outbox) in &mut self.outboxes {
            if let Some(reply) = outbox.waiting.take() {
                let _ = reply.send(Batch {
                    items: Vec::new(),
                    free,
                });
            }
            if outbox.last_pull.is_some_and(|at| at.elapsed() > timeout) {
                gone.push(coordinator.clone());
            }
        }
        for coordinator in gone {
            self.outboxes.remove(&coordinator);
            self.ended.retain(|(c, _), _| *c != coordinator);
            let keys: Vec<Key> = self
                .running
                .keys()
                .filter(|(c, _)| *c == coordinator)
                .cloned()
                .collect();
            for key in &keys {
                if let Some(running) = self.running.remove(key) {
                    stop(&running.agent);
                }
            }
            let _ = self.notices.send(Notice::CoordinatorGone {
                coordinator,
                stopped: keys.len(),
            });
        }
    }
}
