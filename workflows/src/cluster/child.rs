//! A session's sub-agents on nodes: the placement a coordinator's host
//! gives its sessions, served as a mailbox ([`serve`]).
//!
//! A child goes through the step machinery: a slot from the same
//! placement table (by free slots, among the nodes serving its workspace),
//! the same [`Order`] (the child's authority, narrowed here from the
//! parent's, and the parent's, both checked again on the node, which
//! narrows them by its ceiling), the same pulls bringing its events back
//! and the same loss handling. A child that finds no node slot (the
//! coordinator's own slots win, or every serving node is full, or none
//! serves the workspace) runs here; one whose node turns out to be gone
//! before it started runs here too.

use cadre_actors::session::remote::{
    ChildNews, Placed, Placement, PlacementError, PlacementMsg, RemoteChild, RemoteStart,
};
use cadre_runtime::protocol::Op;
use ractor::{Actor, ActorProcessingErr, ActorRef, SpawnErr};

use super::Cluster;
use super::link::{Remote, StartFailure};
use super::places::Place;
use super::wire::Order;

/// Serves the placement of a session's children on `cluster`'s nodes: the
/// mailbox a session host is built with.
pub async fn serve(cluster: Cluster) -> Result<Placement, SpawnErr> {
    let (actor, _) = Actor::spawn(None, PlacementActor, cluster).await?;
    Ok(actor)
}

/// The actor behind [`serve`]: each request is answered by a task of its
/// own (reaching a node takes a round trip), so the mailbox never waits.
struct PlacementActor;

impl Actor for PlacementActor {
    type Msg = PlacementMsg;
    type State = Cluster;
    type Arguments = Cluster;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        cluster: Cluster,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(cluster)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: PlacementMsg,
        cluster: &mut Cluster,
    ) -> Result<(), ActorProcessingErr> {
        let PlacementMsg::Start { child, reply } = message;
        let cluster = cluster.clone();
        tokio::spawn(async move {
            let placed = place(cluster, child).await;
            if let Err(ractor::MessagingErr::SendErr(Ok(Some(start)))) = reply.send(placed) {
                // The session is gone: nobody holds the child.
                start.abandon();
            }
        });
        Ok(())
    }
}

/// Starts `child` on a node with a free slot, or answers `None` to run it
/// here.
async fn place(cluster: Cluster, child: RemoteChild) -> Placed {
    let workspace = child.spec.workspace.root().to_path_buf();
    let node = match cluster.take(&workspace) {
        Some(Place::Node(node)) => node,
        Some(Place::Local) => {
            cluster.release(&Place::Local);
            return Ok(None);
        }
        None => return Ok(None),
    };
    let place = Place::Node(node.clone());
    let Some(live) = child.spec.parent.clone() else {
        cluster.release(&place);
        return Ok(None);
    };
    let order = order(&child, &live);
    let (remote, mut news) = match cluster.start(&node, order, live).await {
        Ok(started) => started,
        Err(StartFailure::Unreachable(why)) => {
            tracing::info!(%node, %why, "a sub-agent runs here: its node is gone");
            cluster.release(&place);
            return Ok(None);
        }
        Err(StartFailure::Refused(why)) => {
            cluster.release(&place);
            return Err(PlacementError::Refused {
                node: node.clone(),
                why,
            });
        }
    };
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let from = node.clone();
    tokio::spawn(async move {
        while let Some(item) = news.recv().await {
            let item = match item {
                Remote::Event(envelope) => ChildNews::Event(envelope),
                // A child has no check.
                Remote::Checked(..) => continue,
                Remote::Ended(reason) => {
                    ChildNews::Lost(format!("its agent on node {from} ended: {reason}"))
                }
                Remote::Lost(reason) => ChildNews::Lost(reason),
            };
            if tx.send(item).is_err() {
                return;
            }
        }
    });
    let (ops, mut orders) = tokio::sync::mpsc::unbounded_channel::<Op>();
    tokio::spawn(async move {
        while let Some(op) = orders.recv().await {
            remote.op(op);
        }
        // The child is over on the coordinator: its agent stops on the
        // node and its slot is free.
        remote.forget();
        cluster.release(&place);
    });
    Ok(Some(RemoteStart {
        node,
        ops,
        news: rx,
    }))
}

/// What a node is sent for a child: as for a step, the child's authority
/// and its parent's, the parent's live mode and posture, and the prompt.
fn order(child: &RemoteChild, live: &cadre_runtime::agent::LiveAuthority) -> Order {
    let spec = &child.spec;
    Order {
        coordinator: String::new(),
        attempt: 0,
        run_id: spec.session_id.clone(),
        path: spec.path.clone(),
        role: spec.role.clone(),
        caller: (&child.caller).into(),
        authority: (&spec.authority).into(),
        live: (live.mode(), live.posture()),
        model: spec.model.clone(),
        system_prompt: spec.prompt.clone(),
        max_iterations: spec.max_iterations,
        workspace: spec.workspace.root().to_path_buf(),
        interactive: spec.interactive,
        prompt: child.prompt.clone(),
        hooks: (*spec.hooks).clone(),
        step: spec.step.clone(),
    }
}
