//! The library's host, whole: sessions, the workflow runs they (or the
//! host itself) start, and the nodes both place work on, over one store.
//!
//! [`cadre_actors::host::Host`] runs sessions and reaches a workflow engine
//! and a node placement only through the two mailboxes the actors declare
//! ([`cadre_actors::delegation::DelegationMsg`],
//! [`cadre_actors::session::remote::PlacementMsg`]). This host sits above
//! both layers and is the one place they are joined: it serves the
//! [`Engine`] (and, given a [`Cluster`], the placement on its nodes) as
//! those mailboxes and builds them into the session host, so a library
//! host, the `cadre` binary and a node all compose the same way.

use std::sync::Arc;

use cadre_actors::EventSink;
use cadre_actors::host::{HostBuilder, HostError, SessionOptions, Started};
use ractor::{ActorCell, SpawnErr};

use crate::cluster::child;
use crate::cluster::node::NodeConfig;
use crate::cluster::server::ServerConfig;
use crate::cluster::{Cluster, ClusterError, NodeHandle, serve};
use crate::engine::{Engine, Launch, RunHandle, StartError, delegate, start_on};

/// Sessions, workflow runs and nodes on one store; see the module
/// documentation.
pub struct Host {
    /// Runs the sessions; built with the engine's mailbox as their
    /// delegation.
    sessions: cadre_actors::host::Host,
    /// The engine every session's Operate `workflow` tool delegates to,
    /// and which routes approvals to the runs in progress.
    engine: Arc<Engine>,
    /// The actors serving the engine and the placement to sessions.
    served: Served,
    /// The nodes steps and sub-agents are placed on, when there are any.
    cluster: Option<Cluster>,
}

impl Host {
    /// Builds the host `sessions` describes, joined to a workflow engine
    /// and, with `cluster`, to its nodes: sessions' sub-agents and every
    /// run's steps (delegated or started here) may then run on them.
    pub async fn build(sessions: HostBuilder, cluster: Option<Cluster>) -> Result<Self, HostError> {
        let started = |e: SpawnErr| HostError::Start(e.into());
        // Whatever fails from here, what was served stops with `served`.
        let mut served = Served(Vec::new());
        let (sessions, engine) = match &cluster {
            Some(cluster) => {
                let placement = child::serve(cluster.clone()).await.map_err(started)?;
                served.0.push(placement.get_cell());
                (
                    sessions.placement(placement),
                    Engine::new().with_cluster(cluster.clone()),
                )
            }
            None => (sessions, Engine::new()),
        };
        let engine = Arc::new(engine);
        let delegate = delegate::serve(engine.clone()).await.map_err(started)?;
        served.0.push(delegate.get_cell());
        let sessions = sessions.workflows(delegate).build().await?;
        Ok(Self {
            sessions,
            engine,
            served,
            cluster,
        })
    }

    /// The session host: its store, its model, finding stored sessions.
    pub fn sessions(&self) -> &cadre_actors::host::Host {
        &self.sessions
    }

    /// The workflow engine sessions delegate to.
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Starts a new session or resumes a stored one.
    pub async fn start(&self, options: SessionOptions) -> Result<Started, HostError> {
        self.sessions.start(options).await
    }

    /// Starts (or resumes) a workflow run as a caller with `options`'
    /// workspace, mode, posture and rules, its steps here and on the
    /// host's nodes; the run's events go to `events`.
    pub async fn run(
        &self,
        launch: Launch,
        options: &SessionOptions,
        events: EventSink,
    ) -> Result<RunHandle, RunError> {
        let caller = self.sessions.workflow_caller(options, events)?;
        Ok(start_on(caller, launch, self.cluster.clone()).await?)
    }

    /// Serves agents to coordinators as a node: each runs as a caller
    /// with `options` (its ceiling is `config`'s), with this host's model,
    /// tools and sandbox.
    pub async fn serve_node(
        &self,
        server: &ServerConfig,
        config: NodeConfig,
        options: &SessionOptions,
        connect: &[String],
    ) -> Result<NodeHandle, RunError> {
        let (sink, _) = cadre_actors::events::channel();
        let template = self
            .sessions
            .workflow_caller(options, EventSink::new(sink))?;
        Ok(serve(server, config, template, connect).await?)
    }

    /// Writes everything the store buffered and stops it. Call it once
    /// every session and run has stopped.
    pub async fn close(self) {
        drop(self.served);
        self.sessions.close().await;
    }
}

/// The actors a host serves to its sessions, stopped when it is closed or
/// dropped: a session still running then has its `workflow` calls refused
/// and runs its new children here.
struct Served(Vec<ActorCell>);

impl Drop for Served {
    fn drop(&mut self) {
        for actor in &self.0 {
            actor.stop(None);
        }
    }
}

/// Why a run or a node did not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The caller could not be built (its workspace cannot be resolved).
    /// Not retryable: the options must change.
    #[error(transparent)]
    Host(#[from] HostError),
    /// The run could not start; [`StartError`] says whether its store may
    /// take it later.
    #[error(transparent)]
    Start(#[from] StartError),
    /// The node could not listen or reach its coordinators; see
    /// [`ClusterError`].
    #[error(transparent)]
    Cluster(#[from] ClusterError),
}
