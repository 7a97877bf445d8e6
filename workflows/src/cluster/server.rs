//! The node server both sides run: ractor_cluster's `NodeServer`,
//! authenticating every peer with the shared secret (its magic cookie),
//! reached through cadre's own listener on the TCP address, which holds
//! peers to [`PreAuthLimits`] until they authenticate (`guard`), and what
//! happens to peers as [`PeerEvent`]s.

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use ractor::{Actor, ActorRef};
use ractor_cluster::node::NodeServerSessionInformation;
use ractor_cluster::{NodeEventSubscription, NodeServer, NodeServerMessage};
use tokio::sync::mpsc;

use super::ClusterError;
use super::guard::{self, Gates, PreAuthLimits};

/// How a node server starts.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// This process's name in the cluster.
    pub name: String,
    /// The shared secret; a peer that does not prove it knows it is
    /// refused.
    pub secret: String,
    /// The address to listen on (port 0: any free port, for a process that
    /// only connects out).
    pub listen: SocketAddr,
    /// What a peer may cost before it authenticates.
    pub limits: PreAuthLimits,
}

/// What happened to a peer connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerEvent {
    /// It proved the secret and exchanged its state; its actors are known.
    Ready {
        /// The session's node id (remote actors carry it).
        node_id: u64,
        /// The peer's address.
        addr: String,
    },
    /// It is gone.
    Gone {
        /// The session's node id.
        node_id: u64,
        /// The peer's address.
        addr: String,
        /// Whether it had authenticated: a peer that never did was refused
        /// (a wrong or missing secret).
        authenticated: bool,
    },
}

/// Reports peer events into a channel.
struct Watch {
    events: mpsc::UnboundedSender<PeerEvent>,
    authenticated: Mutex<HashSet<u64>>,
    /// The guarded connections, opened as their peers authenticate.
    gates: Arc<Gates>,
}

impl Watch {
    fn seen(&self) -> std::sync::MutexGuard<'_, HashSet<u64>> {
        self.authenticated
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl NodeEventSubscription for Watch {
    fn node_session_opened(&self, _: NodeServerSessionInformation) {}

    fn node_session_authenticated(&self, session: NodeServerSessionInformation) {
        self.gates.opened(&session.peer_addr);
        self.seen().insert(session.node_id);
    }

    fn node_session_ready(&self, session: NodeServerSessionInformation) {
        let _ = self.events.send(PeerEvent::Ready {
            node_id: session.node_id,
            addr: session.peer_addr,
        });
    }

    fn node_session_disconnected(&self, session: NodeServerSessionInformation) {
        self.gates.closed(&session.peer_addr);
        let authenticated = self.seen().remove(&session.node_id);
        let _ = self.events.send(PeerEvent::Gone {
            node_id: session.node_id,
            addr: session.peer_addr,
            authenticated,
        });
    }
}

/// A started node server and its peer events.
pub struct Server {
    /// The server actor (connect out through it).
    pub actor: ActorRef<NodeServerMessage>,
    /// Ends when the server stops (its listener closed with it).
    pub join: tokio::task::JoinHandle<()>,
    /// Peers becoming ready and going away.
    pub events: mpsc::UnboundedReceiver<PeerEvent>,
    /// The address it listens on (the port chosen, for port 0).
    pub addr: SocketAddr,
}

/// Starts a node server; an empty secret is refused.
pub async fn start(config: &ServerConfig) -> Result<Server, ClusterError> {
    if config.secret.trim().is_empty() {
        return Err(ClusterError::NoSecret);
    }
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| ClusterError::Listen(config.listen, e.to_string()))?;
    let addr = listener
        .local_addr()
        .map_err(|e| ClusterError::Listen(config.listen, e.to_string()))?;
    // ractor_cluster always opens a listener of its own: on loopback, on a
    // port nobody is told, while peers come through `listener`.
    let server = NodeServer::new(
        0,
        config.secret.clone(),
        config.name.clone(),
        config.listen.ip().to_string(),
        None,
        Some(ractor_cluster::node::NodeConnectionMode::Isolated),
    )
    .with_listen_addr(Ipv4Addr::LOCALHOST.into());
    let (actor, node_join) = Actor::spawn(None, server, ())
        .await
        .map_err(|e| ClusterError::Listen(config.listen, e.to_string()))?;
    let gates = Arc::new(Gates::default());
    let (tx, events) = mpsc::unbounded_channel();
    actor
        .cast(NodeServerMessage::SubscribeToEvents {
            id: "cadre".into(),
            subscription: Box::new(Watch {
                events: tx,
                authenticated: Mutex::new(HashSet::new()),
                gates: gates.clone(),
            }),
        })
        .map_err(|e| ClusterError::Listen(config.listen, e.to_string()))?;
    let accept = tokio::spawn(guard::serve(listener, actor.clone(), gates, config.limits));
    let join = tokio::spawn(async move {
        let _ = node_join.await;
        accept.abort();
    });
    Ok(Server {
        actor,
        join,
        events,
        addr,
    })
}

/// Connects out to a peer at `addr`.
pub async fn connect(server: &ActorRef<NodeServerMessage>, addr: &str) -> Result<(), ClusterError> {
    ractor_cluster::client_connect(server, addr)
        .await
        .map_err(|e| ClusterError::Connect(addr.to_string(), e.to_string()))
}
