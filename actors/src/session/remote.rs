//! Sub-agents on other machines (D1): the `agent` tool's children placed on
//! cluster nodes.
//!
//! The cluster lives above this crate (`cadre-workflows`), so a session
//! knows it only as a mailbox ([`Placement`]) whose message
//! ([`PlacementMsg`]) is declared here: given a new child (its spec with
//! the authority narrowed here, the parent's authority now, the prompt), it
//! starts the child on a node with a free slot and hands back how to reach
//! it ([`RemoteStart`]), or says to run it here. A placed child is a
//! [`RemoteChildActor`] in the parent's tree: linked to the parent like a
//! local child (a lost node is its failure, which the parent's waiters
//! read as the tool's result), forwarding the parent's ops (a follow-up,
//! an approval answer, cancel, shutdown) to the node and the node's events
//! to the parent's pump. The child's row, conversation and report are
//! stored here, by the coordinator's store: the node keeps nothing that
//! must survive.

use std::sync::Arc;

use cadre_runtime::agent::Authority;
use cadre_runtime::message::{Message, ToolCall};
use cadre_runtime::protocol::{Envelope, Event, Op};
use cadre_runtime::tool::{ToolError, ToolOutcome};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::mpsc;

use crate::events::EventSender;
use crate::kernel::AgentSpec;
use crate::store::{SessionOpen, StoreHandle, StoreRequest};

/// A new child a placement may send to a node.
pub struct RemoteChild {
    /// The child as it would run here: its authority narrowed from the
    /// parent's, its path, role, model, prompt and workspace.
    pub spec: AgentSpec,
    /// The parent's authority now, which the node checks the child's
    /// against.
    pub caller: Authority,
    /// The first message.
    pub prompt: String,
}

/// What the news from a remote child is.
#[derive(Debug)]
pub enum ChildNews {
    /// One of its events.
    Event(Box<Envelope>),
    /// It is gone (its node lost, or its agent ended there): why.
    Lost(String),
}

/// A child started on a node.
pub struct RemoteStart {
    /// The node's name.
    pub node: String,
    /// Sends the child an op. Dropped once the child is over here
    /// (however it ended): the node then stops its agent and its slot is
    /// given back.
    pub ops: mpsc::UnboundedSender<Op>,
    /// Its news.
    pub news: mpsc::UnboundedReceiver<ChildNews>,
}

/// What a placement answers for a new child: the child on a node,
/// `None` to run it here, or why it was refused.
pub type Placed = Result<Option<RemoteStart>, PlacementError>;

/// Why a placement refused a child (a node that could not be reached is no
/// refusal: the child runs here instead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlacementError {
    /// The node chosen for it would not start it (its ceiling, a workspace
    /// it does not serve, its store). Not retryable as is: the `agent` call
    /// fails, and the model may ask again.
    Refused {
        /// The node.
        node: String,
        /// What it said.
        why: String,
    },
}

impl std::fmt::Display for PlacementError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlacementError::Refused { node, why } => {
                write!(f, "node {node} did not start it: {why}")
            }
        }
    }
}

impl std::error::Error for PlacementError {}

/// What a session asks of the placement on nodes: the mailbox the
/// cluster serves (`cadre-workflows` spawns the actor behind it; a host
/// without one runs every child here).
pub enum PlacementMsg {
    /// Start `child` on a node with a free slot (which sends it the
    /// prompt); `reply` takes where it runs. A task of the session's reads
    /// the answer and hands it back as [`super::SessionMsg::Placed`].
    Start {
        /// The new child.
        child: RemoteChild,
        /// Where it runs, or why it was refused.
        reply: RpcReplyPort<Placed>,
    },
}

impl ractor::Message for PlacementMsg {}

/// The placement's mailbox, as a session holds it.
pub type Placement = ActorRef<PlacementMsg>;

/// Messages to a remote child's actor.
#[derive(Debug)]
pub enum RemoteMsg {
    /// An op from the parent.
    Op(Op),
    /// News from the node.
    News(ChildNews),
}

impl ractor::Message for RemoteMsg {}

/// A child on a node, as its parent holds it.
pub struct RemoteChildActor;

/// What it starts with.
pub struct RemoteArgs {
    /// The child's row in the coordinator's store.
    pub row: String,
    /// The child's spec (row, parent, role, mode, posture).
    pub spec: AgentSpec,
    /// The coordinator's store.
    pub store: StoreHandle,
    /// Where its events go (the parent's pump).
    pub events: EventSender,
    /// The first message, stored with its conversation.
    pub prompt: String,
    /// The child on its node.
    pub start: RemoteStart,
}

/// Its state.
pub struct RemoteState {
    row: Arc<str>,
    store: StoreHandle,
    events: EventSender,
    node: String,
    /// The child's agent id (its path).
    agent: String,
    /// The way to the child on its node; dropped once it is over here
    /// (however it ended), which stops it there and frees its slot.
    ops: Option<mpsc::UnboundedSender<Op>>,
    recorder: Recorder,
    next_seq: i64,
}

impl Actor for RemoteChildActor {
    type Msg = RemoteMsg;
    type State = RemoteState;
    type Arguments = RemoteArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: RemoteArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let RemoteArgs {
            row,
            spec,
            store,
            events,
            prompt,
            start,
        } = args;
        let RemoteStart {
            node,
            ops,
            mut news,
        } = start;
        let me = myself.clone();
        tokio::spawn(async move {
            while let Some(item) = news.recv().await {
                if me.cast(RemoteMsg::News(item)).is_err() {
                    return;
                }
            }
        });
        let parent = match spec.path.parent() {
            Some(p) if !p.is_root() => format!("{}/{p}", spec.session_id),
            _ => spec.session_id.clone(),
        };
        let open = SessionOpen {
            id: row.clone(),
            workspace: spec.workspace.root().to_path_buf(),
            mode: spec.authority.mode,
            mode_given: true,
            posture: spec.authority.posture,
            posture_given: true,
            lease: false,
            agent: Some((parent, spec.path.clone(), spec.role.clone())),
            first: None,
        };
        let opened = match store.ask(|reply| StoreRequest::Open(open, reply)).await {
            Ok(opened) => opened,
            Err(err) => {
                // `ops` is dropped with this start: the node lets it go.
                return Err(format!("the sub-agent's row could not be stored: {err}").into());
            }
        };
        let mut state = RemoteState {
            row: row.into(),
            store,
            events,
            node,
            agent: spec.path.to_string(),
            ops: Some(ops),
            recorder: Recorder::default(),
            next_seq: opened.conversation.stored() as i64,
        };
        state.store_message(Message::user(prompt));
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            RemoteMsg::Op(op) => {
                if let Op::UserInput { text, .. } = &op {
                    state.store_message(Message::user(text.clone()));
                }
                let shutdown = matches!(op, Op::Shutdown);
                if let Some(ops) = &state.ops {
                    let _ = ops.send(op);
                }
                if shutdown {
                    myself.stop(None);
                }
            }
            RemoteMsg::News(ChildNews::Event(envelope)) => {
                if !envelope.event.is_own(&state.agent) {
                    tracing::warn!(node = %state.node, "a remote sub-agent's event names another agent; dropped");
                    return Ok(());
                }
                for message in state.recorder.push(&envelope.event) {
                    state.store_message(message);
                }
                let _ = state.events.send(envelope);
            }
            RemoteMsg::News(ChildNews::Lost(reason)) => {
                tracing::warn!(node = %state.node, %reason, "a remote sub-agent is lost");
                return Err(reason.into());
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Over here: the node stops it and frees its slot.
        state.ops = None;
        Ok(())
    }
}

/// A child placement under way: the child about to start, the `agent`
/// request's reply, and, once the placement answers, where it runs. Only
/// the session makes and reads one ([`super::SessionMsg::Placed`]).
pub struct Placing {
    child: super::agents::NewChild,
    reply: RpcReplyPort<ToolOutcome>,
    /// The placement's answer: on a node, here (`None`), or refused.
    placed: Result<Option<RemoteStart>, PlacementError>,
}

impl std::fmt::Debug for Placing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Placing")
            .field("child", &self.child.path.to_string())
            .finish_non_exhaustive()
    }
}

impl Placing {
    /// Gives a child placed on a node back (its agent stopped, its slot
    /// freed) when no session is left to take it.
    fn abandon(self) {
        if let Ok(Some(start)) = self.placed {
            start.abandon();
        }
    }
}

impl RemoteStart {
    /// Stops the child on its node and frees its slot there: nobody here
    /// will hold it.
    pub fn abandon(self) {
        let _ = self.ops.send(Op::Shutdown);
    }
}

impl super::SessionState {
    /// Asks the placement for a node for a new child of this session. The
    /// mailbox does not wait: the answer comes back as
    /// [`super::SessionMsg::Placed`], carrying the request's reply, and
    /// [`Self::placed`] goes on with the spawn.
    pub(super) fn place_child(
        &self,
        myself: &ActorRef<super::SessionMsg>,
        placement: &Placement,
        child: super::agents::NewChild,
        reply: RpcReplyPort<ToolOutcome>,
    ) {
        let remote = RemoteChild {
            spec: child.spec.clone(),
            caller: self.current_authority(),
            prompt: child.prompt.clone(),
        };
        let (tx, rx) = ractor::concurrency::oneshot();
        // A placement that is gone (its host closing) places nothing: the
        // child runs here, as when its node cannot be reached.
        let asked = placement
            .cast(PlacementMsg::Start {
                child: remote,
                reply: tx.into(),
            })
            .is_ok();
        let me = myself.clone();
        tokio::spawn(async move {
            let placed = match asked {
                true => rx.await.unwrap_or(Ok(None)),
                false => Ok(None),
            };
            let placing = Placing {
                child,
                reply,
                placed,
            };
            if let Err(ractor::MessagingErr::SendErr(super::SessionMsg::Placed(placing))) =
                me.cast(super::SessionMsg::Placed(Box::new(placing)))
            {
                placing.abandon();
            }
        });
    }

    /// The placement answered: the child starts on its node (its stand-in
    /// linked to this agent), or here, or the request fails.
    pub(super) async fn placed(
        &mut self,
        myself: &ActorRef<super::SessionMsg>,
        placing: Placing,
    ) -> Option<super::AgentInput> {
        let Placing {
            child,
            reply,
            placed,
        } = placing;
        if self.core.queue().stopping() {
            let _ = reply.send(Err(ToolError::failed("the session is shutting down")));
            if let Ok(Some(start)) = placed {
                start.abandon();
            }
            return None;
        }
        let failed =
            |why: String| ToolError::failed(format!("the sub-agent could not start: {why}"));
        let started = match placed {
            Err(why) => Err(failed(why.to_string())),
            Ok(None) => match self.start_local(myself, &child).await {
                Ok(handle) => Ok((handle, false)),
                Err(error) => Err(error),
            },
            Ok(Some(start)) => {
                let (events, stream) = crate::events::channel();
                let args = RemoteArgs {
                    row: child.spec.row_id(),
                    spec: child.spec.clone(),
                    store: self.store.clone(),
                    events,
                    prompt: child.prompt.clone(),
                    start,
                };
                match Actor::spawn_linked(None, RemoteChildActor, args, myself.get_cell()).await {
                    Ok((actor, _)) => {
                        self.pump_child(myself, &child.path, &child.role_name, stream);
                        Ok((super::agents::ChildHandle::remote(actor), true))
                    }
                    Err(e) => Err(failed(e.to_string())),
                }
            }
        };
        match started {
            Ok((handle, prompted)) => Some(self.spawned(child, handle, prompted, reply)),
            Err(error) => {
                let _ = reply.send(Err(error));
                None
            }
        }
    }
}

impl RemoteState {
    fn store_message(&mut self, message: Message) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.store.append(
            &self.row,
            vec![(seq, Arc::new(message))],
            Vec::new(),
            Vec::new(),
        );
    }
}

/// Builds a remote child's conversation from its events: each model
/// response (its text and calls) and each call's result, as the events
/// carry them (a result as shown, which may be cut for display).
#[derive(Debug, Default)]
pub struct Recorder {
    /// The response being read: its text and calls.
    response: Option<(String, Vec<ToolCall>)>,
}

impl Recorder {
    /// The messages `event` completes.
    pub fn push(&mut self, event: &Event) -> Vec<Message> {
        use cadre_runtime::protocol::TurnEvent;
        let mut out = Vec::new();
        match event.turn_event() {
            Some(TurnEvent::Answer(text)) => {
                out.extend(self.flush());
                self.response = Some((text.to_string(), Vec::new()));
            }
            Some(TurnEvent::Call {
                call_id,
                name,
                arguments,
            }) => {
                let arguments = match arguments {
                    serde_json::Value::String(raw) => raw.clone(),
                    other => other.to_string(),
                };
                self.response
                    .get_or_insert_with(Default::default)
                    .1
                    .push(ToolCall {
                        id: call_id.to_string(),
                        name: name.to_string(),
                        arguments,
                    });
            }
            Some(TurnEvent::Result {
                call_id, output, ..
            }) => {
                out.extend(self.flush());
                out.push(Message::Tool {
                    call_id: call_id.to_string(),
                    content: output.to_string(),
                });
            }
            Some(TurnEvent::Completed { .. } | TurnEvent::Failed { .. }) => {
                out.extend(self.flush())
            }
            // Nothing else is a message of its conversation.
            None => {}
        }
        out
    }

    fn flush(&mut self) -> Option<Message> {
        let (content, tool_calls) = self.response.take()?;
        Some(Message::Assistant {
            content,
            tool_calls,
        })
    }
}

#[cfg(test)]
mod tests;
