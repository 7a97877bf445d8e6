//! The coordinator's side: one actor that knows the nodes, starts agents
//! on them, pulls what the agents did and hands it to their steps.
//!
//! Nodes are found through the process group every node service joins; a
//! node is used once it answered `Hello` with this protocol. Each node is
//! pulled in a loop, one pull in flight, each with the heartbeat timeout:
//! a pull that fails or is not answered in time, or the node's connection
//! closing, loses the node. A lost node's attempts each get
//! [`Remote::Lost`]; whatever it sends later about them is dropped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cadre_runtime::agent::LiveAuthority;
use cadre_runtime::protocol::Envelope;
use ractor::pg::GroupChangeMessage;
use ractor::rpc::CallResult;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use tokio::sync::{mpsc, watch};

use super::places::Places;
use super::server::PeerEvent;
use super::wire::{
    Addressed, AgentEnd, Batch, NODES_GROUP, NodeInfo, NodeMsg, Order, Outbound, PROTOCOL, Pull,
};

/// Why a node did not start an agent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartFailure {
    /// The node answered no (full, the order refused): the attempt fails.
    /// Not retryable as this attempt.
    #[error("{0}")]
    Refused(String),
    /// The node could not be reached (gone, not answering): it is lost.
    /// Retryable: the attempt can go elsewhere without counting.
    #[error("{0}")]
    Unreachable(String),
}

/// What a step hears about its agent on a node.
#[derive(Debug, Clone, PartialEq)]
pub enum Remote {
    /// One of the agent's events.
    Event(Box<Envelope>),
    /// The check ran there.
    Checked(bool, String),
    /// The agent is gone: stopped, or crashed.
    Ended(AgentEnd),
    /// The node is lost; the reason says how.
    Lost(String),
}

/// How many nodes have joined and how many peers were refused, for a
/// coordinator waiting for the nodes it dialed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Joined {
    /// Nodes in use.
    pub nodes: usize,
    /// Peers that went away without authenticating.
    pub refused: usize,
}

/// What the link tells the person running the coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LinkNotice {
    /// A node joined.
    Joined(NodeInfo),
    /// A node is lost.
    Lost {
        /// Its name.
        node: String,
        /// How.
        reason: String,
    },
    /// A peer at this address did not authenticate.
    Refused(String),
    /// A node claimed the name of a node in use; it is not used.
    NameTaken(String),
}

/// Why a node did not answer `Hello`: it is not used. Not retried: it is
/// asked again when it next joins the nodes' group.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HelloFailure {
    /// No answer within the link's timeout. Not retried.
    #[error("no answer in time")]
    Timeout,
    /// The request or its answer was dropped (the connection went). Not
    /// retried.
    #[error("the request was dropped")]
    Dropped,
}

/// Why a pull failed: the node is lost, and its attempts with it (each
/// attempt's step decides whether to run it again elsewhere).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullFailure {
    /// No answer within the heartbeat timeout. Not retryable: the node is
    /// lost.
    #[error("no heartbeat within {} ms", .0.as_millis())]
    Timeout(Duration),
    /// The connection closed. Not retryable: the node is lost.
    #[error("its connection closed")]
    Closed,
}

/// Messages to the link.
#[derive(Debug)]
pub enum LinkMsg {
    /// From the node server.
    Peer(PeerEvent),
    /// A node answered `Hello` (or did not).
    Hello(ActorRef<NodeMsg>, Result<NodeInfo, HelloFailure>),
    /// A pull came back.
    Pulled(String, Result<Batch, PullFailure>),
    /// Start an agent on a node.
    Start {
        /// The node.
        node: String,
        /// The order.
        order: Box<Order>,
        /// The caller's live authority, sent with every pull.
        live: Arc<LiveAuthority>,
        /// Where its news goes.
        news: mpsc::UnboundedSender<Remote>,
        /// Whether the node took it.
        reply: RpcReplyPort<Result<(), StartFailure>>,
    },
    /// A node could not be reached: it is lost.
    Unreachable(String, String),
    /// A cast for an attempt's agent (an op, a check).
    Send(u64, NodeMsg),
    /// The attempt is over: stop its agent on the node, drop its news.
    Forget(u64),
}

impl ractor::Message for LinkMsg {}

/// What the link starts with.
pub struct LinkArgs {
    /// The coordinator's name.
    pub coordinator: String,
    /// The placement table it keeps up to date.
    pub places: Arc<Mutex<Places>>,
    /// A pull not answered within this loses the node.
    pub timeout: Duration,
    /// Nodes joined and peers refused.
    pub joined: watch::Sender<Joined>,
    /// What it tells the person.
    pub notices: mpsc::UnboundedSender<LinkNotice>,
}

/// The link actor.
pub struct LinkActor;

struct Node {
    remote: ActorRef<NodeMsg>,
    /// The last item received.
    acked: u64,
}

struct Attempt {
    node: String,
    live: Arc<LiveAuthority>,
    news: mpsc::UnboundedSender<Remote>,
}

/// The link's state: the nodes in use and the attempts running on them.
pub struct LinkState {
    args: LinkArgs,
    nodes: HashMap<String, Node>,
    /// Node names by their session's node id.
    by_id: HashMap<u64, String>,
    /// Node ids asked `Hello` and not yet answered.
    asking: std::collections::HashSet<u64>,
    attempts: HashMap<u64, Attempt>,
}

impl Actor for LinkActor {
    type Msg = LinkMsg;
    type State = LinkState;
    type Arguments = LinkArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: LinkArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        ractor::pg::monitor(NODES_GROUP.to_string(), myself.get_cell());
        let mut state = LinkState {
            args,
            nodes: HashMap::new(),
            by_id: HashMap::new(),
            asking: std::collections::HashSet::new(),
            attempts: HashMap::new(),
        };
        state.greet(&myself, ractor::pg::get_members(&NODES_GROUP.to_string()));
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            LinkMsg::Peer(PeerEvent::Ready { .. }) => {
                state.greet(&myself, ractor::pg::get_members(&NODES_GROUP.to_string()));
            }
            LinkMsg::Peer(PeerEvent::Gone {
                node_id,
                addr,
                authenticated,
            }) => {
                if !authenticated {
                    state.args.joined.send_modify(|j| j.refused += 1);
                    let _ = state.args.notices.send(LinkNotice::Refused(addr));
                } else if let Some(name) = state.by_id.get(&node_id).cloned() {
                    state.lose(&name, "its connection closed");
                }
            }
            LinkMsg::Hello(remote, answer) => {
                let node_id = remote.get_id().node();
                state.asking.remove(&node_id);
                match answer {
                    Ok(info) if info.protocol == PROTOCOL => state.join(&myself, remote, info),
                    Ok(info) => tracing::warn!(
                        node = %info.name,
                        protocol = info.protocol,
                        "a node speaks another protocol; not used"
                    ),
                    Err(err) => tracing::warn!(%err, "a node did not answer hello"),
                }
            }
            LinkMsg::Pulled(name, result) => match result {
                Ok(batch) => {
                    state.deliver(&name, batch);
                    state.pull(&myself, &name);
                }
                Err(reason) => state.lose(&name, &reason.to_string()),
            },
            LinkMsg::Start {
                node,
                order,
                live,
                news,
                reply,
            } => {
                let Some(remote) = state.nodes.get(&node).map(|n| n.remote.clone()) else {
                    let _ = reply.send(Err(StartFailure::Unreachable(format!(
                        "node {node} is not connected"
                    ))));
                    return Ok(());
                };
                let attempt = order.attempt;
                state.attempts.insert(
                    attempt,
                    Attempt {
                        node: node.clone(),
                        live,
                        news,
                    },
                );
                let me = myself.clone();
                let timeout = state.args.timeout;
                tokio::spawn(async move {
                    let answer = match remote
                        .call(|r| NodeMsg::Start(order, r), Some(timeout))
                        .await
                    {
                        Ok(CallResult::Success(answer)) => {
                            answer.map_err(|refusal| StartFailure::Refused(refusal.to_string()))
                        }
                        Ok(CallResult::Timeout) => Err(StartFailure::Unreachable(format!(
                            "node {node} did not answer in time"
                        ))),
                        Ok(CallResult::SenderError) | Err(_) => Err(StartFailure::Unreachable(
                            format!("node {node} dropped the request"),
                        )),
                    };
                    match &answer {
                        Ok(()) => {}
                        Err(StartFailure::Refused(_)) => {
                            let _ = me.cast(LinkMsg::Forget(attempt));
                        }
                        Err(StartFailure::Unreachable(why)) => {
                            let _ = me.cast(LinkMsg::Forget(attempt));
                            let _ = me.cast(LinkMsg::Unreachable(node, why.clone()));
                        }
                    }
                    let _ = reply.send(answer);
                });
            }
            LinkMsg::Unreachable(node, why) => state.lose(&node, &why),
            LinkMsg::Send(attempt, message) => {
                if let Some(node) = state
                    .attempts
                    .get(&attempt)
                    .and_then(|a| state.nodes.get(&a.node))
                {
                    let _ = node.remote.cast(message);
                }
            }
            LinkMsg::Forget(attempt) => {
                if let Some(gone) = state.attempts.remove(&attempt)
                    && let Some(node) = state.nodes.get(&gone.node)
                {
                    let _ = node.remote.cast(NodeMsg::Stop(Addressed {
                        coordinator: state.args.coordinator.clone(),
                        attempt,
                        body: (),
                    }));
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let SupervisionEvent::ProcessGroupChanged(GroupChangeMessage::Join(_, group, cells)) =
            event
            && group == NODES_GROUP
        {
            state.greet(&myself, cells);
        }
        Ok(())
    }
}

impl LinkState {
    fn places(&self) -> std::sync::MutexGuard<'_, Places> {
        self.args
            .places
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks every remote node service not yet known who it is.
    fn greet(&mut self, myself: &ActorRef<LinkMsg>, cells: Vec<ActorCell>) {
        for cell in cells {
            let id = cell.get_id();
            if id.is_local()
                || self.by_id.contains_key(&id.node())
                || !self.asking.insert(id.node())
            {
                continue;
            }
            let remote: ActorRef<NodeMsg> = cell.into();
            let me = myself.clone();
            let timeout = self.args.timeout;
            tokio::spawn(async move {
                let answer = match remote.call(NodeMsg::Hello, Some(timeout)).await {
                    Ok(CallResult::Success(info)) => Ok(info),
                    Ok(CallResult::Timeout) => Err(HelloFailure::Timeout),
                    Ok(CallResult::SenderError) | Err(_) => Err(HelloFailure::Dropped),
                };
                let _ = me.cast(LinkMsg::Hello(remote, answer));
            });
        }
    }

    fn join(&mut self, myself: &ActorRef<LinkMsg>, remote: ActorRef<NodeMsg>, info: NodeInfo) {
        let name = info.name.clone();
        if self.nodes.contains_key(&name) {
            // The node in use keeps its name, its attempts and its pulls: a
            // newcomer cannot take them over by claiming it.
            self.args.joined.send_modify(|j| j.refused += 1);
            let _ = self.args.notices.send(LinkNotice::NameTaken(name));
            return;
        }
        self.by_id.insert(remote.get_id().node(), name.clone());
        self.nodes.insert(name.clone(), Node { remote, acked: 0 });
        self.places()
            .join(&name, info.slots, info.workspaces.clone());
        self.args.joined.send_modify(|j| j.nodes += 1);
        let _ = self.args.notices.send(LinkNotice::Joined(info));
        self.pull(myself, &name);
    }

    /// Sends the next pull to a node.
    fn pull(&self, myself: &ActorRef<LinkMsg>, name: &str) {
        let Some(node) = self.nodes.get(name) else {
            return;
        };
        let pull = Pull {
            coordinator: self.args.coordinator.clone(),
            after: node.acked,
            live: self
                .attempts
                .iter()
                .filter(|(_, a)| a.node == name)
                .map(|(id, a)| (*id, a.live.mode(), a.live.posture()))
                .collect(),
        };
        let (remote, me, name) = (node.remote.clone(), myself.clone(), name.to_string());
        let timeout = self.args.timeout;
        tokio::spawn(async move {
            let result = match remote.call(|r| NodeMsg::Pull(pull, r), Some(timeout)).await {
                Ok(CallResult::Success(batch)) => Ok(batch),
                Ok(CallResult::Timeout) => Err(PullFailure::Timeout(timeout)),
                Ok(CallResult::SenderError) | Err(_) => Err(PullFailure::Closed),
            };
            let _ = me.cast(LinkMsg::Pulled(name, result));
        });
    }

    /// Hands a batch's new items to their attempts. An attempt whose step
    /// is gone (it crashed) is forgotten: the node stops its agent.
    fn deliver(&mut self, name: &str, batch: Batch) {
        let Some(node) = self.nodes.get_mut(name) else {
            return;
        };
        let mut orphans = Vec::new();
        for item in batch.items {
            if item.seq <= node.acked {
                continue;
            }
            node.acked = item.seq;
            // Only the attempts this node was given: a node cannot speak
            // for another's.
            let Some(attempt) = self.attempts.get(&item.attempt).filter(|a| a.node == name) else {
                continue;
            };
            // An ended agent's attempt is kept until its step forgets it:
            // its check may still run on the node.
            let news = match item.what {
                Outbound::Event(envelope) => Remote::Event(Box::new(envelope)),
                Outbound::Checked { passed, detail } => Remote::Checked(passed, detail),
                Outbound::Ended(reason) => Remote::Ended(reason),
            };
            if attempt.news.send(news).is_err() {
                orphans.push(item.attempt);
            }
        }
        for attempt in orphans {
            if self.attempts.remove(&attempt).is_some() {
                let _ = node.remote.cast(NodeMsg::Stop(Addressed {
                    coordinator: self.args.coordinator.clone(),
                    attempt,
                    body: (),
                }));
            }
        }
    }

    /// A node is gone: out of placement, its attempts lost.
    fn lose(&mut self, name: &str, reason: &str) {
        if self.nodes.remove(name).is_none() {
            return;
        }
        self.by_id.retain(|_, n| n != name);
        self.places().lose(name);
        let why = format!("node {name} was lost: {reason}");
        let lost: Vec<u64> = self
            .attempts
            .iter()
            .filter(|(_, a)| a.node == name)
            .map(|(id, _)| *id)
            .collect();
        for id in lost {
            if let Some(attempt) = self.attempts.remove(&id) {
                let _ = attempt.news.send(Remote::Lost(why.clone()));
            }
        }
        let _ = self.args.notices.send(LinkNotice::Lost {
            node: name.to_string(),
            reason: reason.to_string(),
        });
    }
}

#[cfg(test)]
mod tests;
