//! The engine's mailbox: the actor sessions send their `workflow` plans
//! and their answers to a step's prompt to ([`DelegationMsg`], declared by
//! `cadre-actors`, which cannot name the engine). It waits on nothing: a
//! run goes on in a task of its own, which answers the tool's reply port,
//! and cancels the run if that port closes first (the call was cancelled).

use std::sync::Arc;

use cadre_actors::delegation::{Delegate, DelegationMsg};
use cadre_runtime::protocol::Event;
use ractor::{Actor, ActorProcessingErr, ActorRef, SpawnErr};

use super::Engine;

/// Serves `engine` to sessions: the mailbox a session host is built with.
pub async fn serve(engine: Arc<Engine>) -> Result<Delegate, SpawnErr> {
    let (actor, _) = Actor::spawn(None, EngineActor, engine).await?;
    Ok(actor)
}

/// The actor behind [`serve`].
struct EngineActor;

impl Actor for EngineActor {
    type Msg = DelegationMsg;
    type State = Arc<Engine>;
    type Arguments = Arc<Engine>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        engine: Arc<Engine>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(engine)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        message: DelegationMsg,
        engine: &mut Arc<Engine>,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            DelegationMsg::Run {
                caller,
                plan,
                reply,
            } => {
                let engine = engine.clone();
                let mut reply = reply;
                tokio::spawn(async move {
                    // A `workflow` call cancelled with its turn closes its
                    // port: the run is dropped, which cancels it.
                    tokio::select! {
                        outcome = engine.run(*caller, plan) => {
                            let _ = reply.send(outcome);
                        }
                        () = reply.closed() => {}
                    }
                });
            }
            DelegationMsg::Approve {
                session,
                id,
                decision,
                reason,
                events,
            } => {
                if !engine.approve(&session, &id, decision, reason) {
                    events.send(Event::OpRejected {
                        op: "approve".into(),
                        message: format!("no approval prompt has the id '{id}'"),
                        retryable: false,
                    });
                }
            }
        }
        Ok(())
    }
}
