//! Scale-out (D1): step agents on other machines through ractor_cluster
//! nodes. `docs/cluster.md` states the protocol, the failure handling and
//! the security model.
//!
//! A node (`cadre node`, [`serve`]) runs a [`node::NodeService`] in a
//! ractor_cluster node server that only lets in peers proving the shared
//! secret. A coordinator (a process running workflows with `--nodes`)
//! [`Cluster::join`]s: its own node server, the [`link::LinkActor`] that
//! finds the nodes and pulls from them, and the placement table
//! ([`places::Places`]) the run's supervisor takes slots from. A remote
//! step is a whole agent on its node, driven by `Op`s and answered by its
//! events; the store stays with the coordinator. Nothing here starts
//! unless asked: a run without nodes has no node server and no link.
//!
//! # Layout
//! - `wire`: the messages and data that cross, and how they become bytes.
//! - `admit`: the node's check of an order (authority, workspace,
//!   ceiling), pure.
//! - `places`: placement by free slots, pure.
//! - `guard`: the limits on a peer before it authenticates (handshake
//!   deadline, frame cap, connection cap), in front of ractor_cluster.
//! - `server`: the node server both sides run, peers' events.
//! - `node`: the node's service actor.
//! - `link`: the coordinator's actor.
//! - `child`: a session's sub-agents placed on nodes.

pub mod admit;
pub mod child;
pub mod guard;
pub mod link;
pub mod node;
pub mod places;
pub mod server;
pub mod wire;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cadre_actors::delegation::Caller;
use cadre_runtime::agent::LiveAuthority;
use cadre_runtime::protocol::Op;
use ractor::{Actor, ActorRef};
use tokio::sync::{mpsc, watch};

use link::{Joined, LinkActor, LinkArgs, LinkMsg, LinkNotice, Remote, StartFailure};
use node::{NodeArgs, NodeConfig, NodeService, Notice};
use places::{Place, Places};
use server::ServerConfig;
use wire::{Addressed, CheckOrder, NodeMsg, Order};

/// How often a node answers a waiting pull when nothing happened.
pub const HEARTBEAT: Duration = Duration::from_secs(1);

/// A pull unanswered this long loses the node; a coordinator that has not
/// pulled this long is gone for the node.
pub const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why a cluster could not start. None is retryable as it is.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClusterError {
    /// No secret: a cluster without one would let anybody in. Not
    /// retryable.
    #[error(
        "no cluster secret: set CADRE_CLUSTER_SECRET or pass --secret-file (every node and coordinator must share it)"
    )]
    NoSecret,
    /// The node server could not listen. Not retryable as is (the
    /// address is taken or not this host's).
    #[error("cannot listen on {0}: {1}")]
    Listen(SocketAddr, String),
    /// A peer could not be reached. Not retryable as it is: it may
    /// succeed once the peer is up.
    #[error("cannot connect to {0}: {1}")]
    Connect(String, String),
    /// An actor could not start. Not retryable.
    #[error("the cluster could not start: {0}")]
    Actor(String),
}

/// How a coordinator joins its nodes.
#[derive(Debug, Clone)]
pub struct CoordinatorConfig {
    /// Its node server.
    pub server: ServerConfig,
    /// The nodes to connect to (`HOST:PORT`).
    pub nodes: Vec<String>,
    /// Steps it runs itself at once besides the nodes.
    pub local_slots: u32,
    /// How long to wait for the dialed nodes to join.
    pub join_timeout: Duration,
    /// A pull unanswered this long loses the node.
    pub timeout: Duration,
}

/// A coordinator's cluster: shared by every run of the process.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    name: String,
    places: Arc<Mutex<Places>>,
    link: ActorRef<LinkMsg>,
    server: ActorRef<ractor_cluster::NodeServerMessage>,
    next: AtomicU64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.link.stop(None);
        self.server.stop(None);
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("name", &self.inner.name)
            .finish()
    }
}

/// A started coordinator: the cluster, what went wrong joining, and what
/// happens to nodes from now on.
pub struct Coordinator {
    /// The cluster.
    pub cluster: Cluster,
    /// Nodes that could not be dialed.
    pub unreachable: Vec<ClusterError>,
    /// Nodes joining, lost, peers refused.
    pub notices: mpsc::UnboundedReceiver<LinkNotice>,
}

impl Cluster {
    /// Starts the coordinator's node server and link, dials the nodes and
    /// waits (up to the join timeout) until each dialed node joined or was
    /// refused.
    pub async fn join(config: CoordinatorConfig) -> Result<Coordinator, ClusterError> {
        let mut server = server::start(&config.server).await?;
        let places = Arc::new(Mutex::new(Places::new(config.local_slots)));
        let (joined_tx, mut joined) = watch::channel(Joined::default());
        let (notices_tx, notices) = mpsc::unbounded_channel();
        let args = LinkArgs {
            coordinator: format!("{}-{}", config.server.name, uuid::Uuid::new_v4()),
            places: places.clone(),
            timeout: config.timeout,
            joined: joined_tx,
            notices: notices_tx,
        };
        let name = args.coordinator.clone();
        let (link, _) = Actor::spawn(None, LinkActor, args)
            .await
            .map_err(|e| ClusterError::Actor(e.to_string()))?;
        let peers = link.clone();
        tokio::spawn(async move {
            while let Some(event) = server.events.recv().await {
                if peers.cast(LinkMsg::Peer(event)).is_err() {
                    return;
                }
            }
        });
        let mut unreachable = Vec::new();
        for addr in &config.nodes {
            if let Err(err) = server::connect(&server.actor, addr).await {
                unreachable.push(err);
            }
        }
        let dialed = config.nodes.len() - unreachable.len();
        let settled = joined.wait_for(|j| j.nodes + j.refused >= dialed);
        let _ = tokio::time::timeout(config.join_timeout, settled).await;
        Ok(Coordinator {
            cluster: Cluster {
                inner: Arc::new(Inner {
                    name,
                    places,
                    link,
                    server: server.actor,
                    next: AtomicU64::new(0),
                }),
            },
            unreachable,
            notices,
        })
    }

    fn places(&self) -> std::sync::MutexGuard<'_, Places> {
        self.inner
            .places
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// This coordinator's name in its orders.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Takes a slot for an attempt in `workspace`, or `None` to wait.
    pub fn take(&self, workspace: &Path) -> Option<Place> {
        self.places().take(workspace)
    }

    /// Takes a slot on the coordinator, or `None` to wait.
    pub fn take_local(&self) -> Option<Place> {
        self.places().take_local()
    }

    /// Gives a slot back.
    pub fn release(&self, place: &Place) {
        self.places().release(place);
    }

    /// The live nodes: name, slots, running.
    pub fn nodes(&self) -> Vec<(String, u32, u32)> {
        self.places().nodes()
    }

    /// Attempts placed on each node so far.
    pub fn placed(&self) -> BTreeMap<String, u64> {
        self.places().placed().clone()
    }

    /// Starts `order` on `node` (the coordinator and attempt are filled
    /// in): the agent's handle and its news, or why not. A node that
    /// cannot be reached is out of placement at once.
    pub async fn start(
        &self,
        node: &str,
        mut order: Order,
        live: Arc<LiveAuthority>,
    ) -> Result<(RemoteAgent, mpsc::UnboundedReceiver<Remote>), StartFailure> {
        order.coordinator = self.inner.name.clone();
        order.attempt = self.inner.next.fetch_add(1, Ordering::Relaxed) + 1;
        let attempt = order.attempt;
        let (news, receiver) = mpsc::unbounded_channel();
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.inner
            .link
            .cast(LinkMsg::Start {
                node: node.to_string(),
                order: Box::new(order),
                live,
                news,
                reply: tx.into(),
            })
            .map_err(|e| StartFailure::Refused(format!("the cluster link stopped: {e}")))?;
        let started = rx
            .await
            .map_err(|_| StartFailure::Refused("the cluster link stopped".into()))?;
        if let Err(StartFailure::Unreachable(_)) = &started {
            self.places().lose(node);
        }
        started?;
        Ok((
            RemoteAgent {
                node: node.to_string(),
                attempt,
                coordinator: self.inner.name.clone(),
                link: self.inner.link.clone(),
            },
            receiver,
        ))
    }
}

/// A step's agent on a node.
#[derive(Debug, Clone)]
pub struct RemoteAgent {
    /// The node.
    pub node: String,
    attempt: u64,
    coordinator: String,
    link: ActorRef<LinkMsg>,
}

impl RemoteAgent {
    fn send(&self, message: NodeMsg) {
        let _ = self.link.cast(LinkMsg::Send(self.attempt, message));
    }

    fn addressed<T>(&self, body: T) -> Addressed<T> {
        Addressed {
            coordinator: self.coordinator.clone(),
            attempt: self.attempt,
            body,
        }
    }

    /// Sends the agent an op.
    pub fn op(&self, op: Op) {
        self.send(NodeMsg::Op(self.addressed(op)));
    }

    /// Runs a check in the agent's workspace on its node, with `env`.
    pub fn check(&self, command: String, env: Vec<(String, String)>, timeout: Duration) {
        let timeout_ms = timeout.as_millis().try_into().unwrap_or(u64::MAX);
        self.send(NodeMsg::Check(self.addressed(CheckOrder {
            command,
            env,
            timeout_ms,
        })));
    }

    /// The attempt is over: the node stops the agent and forgets it.
    pub fn forget(&self) {
        let _ = self.link.cast(LinkMsg::Forget(self.attempt));
    }
}

/// A running node.
pub struct NodeHandle {
    /// What the node does, for the person running it.
    pub notices: mpsc::UnboundedReceiver<Notice>,
    /// Peers connecting and going away (refused ones among them).
    pub peers: mpsc::UnboundedReceiver<server::PeerEvent>,
    /// Ends when the node server stops.
    pub join: tokio::task::JoinHandle<()>,
    service: ActorRef<NodeMsg>,
    server: ActorRef<ractor_cluster::NodeServerMessage>,
}

impl NodeHandle {
    /// Stops the node: its agents with it.
    pub fn stop(&self) {
        self.service.stop(None);
        self.server.stop(None);
    }
}

/// Starts a node: its node server (listening for coordinators, and
/// dialing `connect` when given), its service with `template`'s services.
pub async fn serve(
    server_config: &ServerConfig,
    config: NodeConfig,
    template: Caller,
    connect: &[String],
) -> Result<NodeHandle, ClusterError> {
    let server = server::start(server_config).await?;
    let (notices_tx, notices) = mpsc::unbounded_channel();
    let args = NodeArgs {
        config,
        template,
        notices: notices_tx,
    };
    let (service, _) = Actor::spawn(None, NodeService, args)
        .await
        .map_err(|e| ClusterError::Actor(e.to_string()))?;
    for addr in connect {
        server::connect(&server.actor, addr).await?;
    }
    Ok(NodeHandle {
        notices,
        peers: server.events,
        join: server.join,
        service,
        server: server.actor,
    })
}
