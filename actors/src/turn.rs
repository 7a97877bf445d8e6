//! The turn actor: one per turn, supervised by whoever started it.
//!
//! It owns a [`TurnMachine`] and performs its effects. It reports to its
//! supervisor only through [`TurnReport`] on a derived actor ref, so any
//! actor that converts the two report kinds into its own messages can run
//! a turn (a session, a goal verifier, a workflow step). A model stream or a
//! tool call runs in a task that reports back by message; the actor keeps
//! the task's abort handle so a cancel stops it at once: an aborted stream
//! closes its connection, an aborted `bash` call kills its process group.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use cadre_runtime::model::{ModelClient, ModelError, ModelEvent, ModelResponse};
use cadre_runtime::protocol::Event;
use cadre_runtime::tool::{ToolContext, ToolOutcome, ToolRunner};
use cadre_runtime::turn::{TurnEffect, TurnInput, TurnMachine};
use futures::{FutureExt, StreamExt};
use ractor::{Actor, ActorProcessingErr, ActorRef, DerivedActorRef};
use tokio::task::AbortHandle;
use tracing::Instrument;

use crate::events::EventSink;

/// What a turn tells its supervisor.
#[derive(Debug)]
pub enum TurnReport {
    /// The turn recorded a message in the conversation.
    Record {
        /// The reporting turn.
        turn_id: u64,
        /// The message.
        message: Arc<cadre_runtime::Message>,
    },
    /// The turn ended.
    Finished {
        /// The turn.
        turn_id: u64,
        /// Its final answer, or why it stopped without one.
        outcome: cadre_runtime::turn::TurnOutcome,
        /// Its closing event (`turn.completed` or `turn.failed`), emitted by
        /// the supervisor once the turn is settled.
        ending: Option<Box<Event>>,
    },
}

/// Messages to a turn.
#[derive(Debug)]
pub enum TurnMsg {
    /// The model request finished (from the model task).
    ModelDone(Result<ModelResponse, ModelError>),
    /// A tool call finished (from its task).
    ToolDone {
        /// The call.
        call_id: String,
        /// The tool's text, or its error: the call's answer either way.
        outcome: ToolOutcome,
    },
    /// Compact before the next model request (`Op::Compact`).
    Compact,
    /// Stop now: abort what runs and end the turn as cancelled.
    Cancel,
    /// End the turn once the current calls are answered (a plan went to
    /// the user).
    EndAfterTools,
    /// The stop hooks answered a final answer.
    StopAnswered(Option<String>),
    /// Stop now for another reason (the denial ledger, in a headless host).
    Halt {
        /// Why, for machines.
        category: cadre_runtime::protocol::FailureCategory,
        /// Why, for people.
        message: String,
    },
}

impl ractor::Message for TurnMsg {}

/// What a turn is started with.
pub struct TurnArgs {
    /// The loop to run.
    pub machine: TurnMachine,
    /// The supervisor, told of every recorded message and the end.
    pub supervisor: DerivedActorRef<TurnReport>,
    /// The model its requests go to.
    pub model: Arc<dyn ModelClient>,
    /// Who writes compaction summaries, when not `model`.
    pub summarizer: Option<crate::kernel::Summarizer>,
    /// The tool entry point.
    pub tools: ToolRunner,
    /// What tool calls see: the workspace, the agent's authority, its
    /// hooks.
    pub tool_context: Arc<ToolContext>,
    /// The agent's events, which the turn's deltas, calls and results join.
    pub events: EventSink,
    /// The session's span, parent of the turn's.
    pub span: tracing::Span,
}

/// The turn actor. Stateless itself; everything lives in [`TurnState`].
pub struct TurnActor;

/// A running turn's state.
pub struct TurnState {
    machine: TurnMachine,
    supervisor: DerivedActorRef<TurnReport>,
    model: Arc<dyn ModelClient>,
    summarizer: Option<crate::kernel::Summarizer>,
    tools: ToolRunner,
    tool_context: Arc<ToolContext>,
    events: EventSink,
    /// The turn's span, under its session's: every task it starts runs in
    /// it.
    span: tracing::Span,
    /// The model or tool task in flight, aborted on cancel.
    inflight: Option<AbortHandle>,
    /// The turn's closing event, handed to the session with its end.
    ending: Option<Box<Event>>,
    /// When the turn started: the goal's budget guard reads the time.
    started: std::time::Instant,
}

impl Actor for TurnActor {
    type Msg = TurnMsg;
    type State = TurnState;
    type Arguments = TurnArgs;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        args: TurnArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let span =
            tracing::info_span!(parent: &args.span, "turn", turn_id = args.machine.turn_id());
        Ok(TurnState {
            machine: args.machine,
            supervisor: args.supervisor,
            model: args.model,
            summarizer: args.summarizer,
            tools: args.tools,
            tool_context: args.tool_context,
            events: args.events,
            span,
            inflight: None,
            ending: None,
            started: std::time::Instant::now(),
        })
    }

    async fn post_start(
        &self,
        myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let effects = state.machine.step(TurnInput::Start);
        state.perform(&myself, effects)
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Boxed: the actor loop holds its handler's future for the
        // actor's whole life; boxed, it lives only while a message is
        // handled.
        Box::pin(handle_message(myself, message, state)).await
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(task) = state.inflight.take() {
            task.abort();
        }
        Ok(())
    }
}

/// [`Actor::handle`]'s work, boxed by it.
async fn handle_message(
    myself: ActorRef<TurnMsg>,
    message: TurnMsg,
    state: &mut TurnState,
) -> Result<(), ActorProcessingErr> {
    let input = match message {
        TurnMsg::ModelDone(Ok(response)) => TurnInput::ModelResponded(response),
        TurnMsg::ModelDone(Err(error)) => TurnInput::ModelFailed(error),
        TurnMsg::ToolDone { call_id, outcome } => TurnInput::ToolFinished { call_id, outcome },
        TurnMsg::Cancel => {
            if let Some(task) = state.inflight.take() {
                task.abort();
            }
            TurnInput::Cancel
        }
        TurnMsg::EndAfterTools => TurnInput::EndAfterTools,
        TurnMsg::StopAnswered(message) => TurnInput::StopAnswered(message),
        TurnMsg::Compact => TurnInput::Compact,
        TurnMsg::Halt { category, message } => {
            if let Some(task) = state.inflight.take() {
                task.abort();
            }
            TurnInput::Halt { category, message }
        }
    };
    state.machine.set_elapsed(state.started.elapsed());
    let effects = state.machine.step(input);
    state.perform(&myself, effects)
}

impl TurnState {
    fn perform(
        &mut self,
        myself: &ActorRef<TurnMsg>,
        effects: Vec<TurnEffect>,
    ) -> Result<(), ActorProcessingErr> {
        let turn_id = self.machine.turn_id();
        for effect in effects {
            match effect {
                // The turn's end is announced by the session, once it has
                // settled the turn: a host that acts on `turn.completed` finds
                // the session ready.
                TurnEffect::Emit(
                    event @ (Event::TurnCompleted { .. } | Event::TurnFailed { .. }),
                ) => {
                    self.ending = Some(Box::new(event));
                }
                TurnEffect::Emit(event) => {
                    // A consumer that went away cannot be told anything more.
                    let _ = self.events.send(event);
                }
                TurnEffect::Record(message) => {
                    self.supervisor
                        .send_message(TurnReport::Record { turn_id, message })?;
                }
                TurnEffect::CallModel(request) => {
                    let stream = self.model.stream(request);
                    self.call_model(myself, stream, true, None)
                }
                TurnEffect::Summarize(mut request) => {
                    // The agent's `pre_compact` hooks run first; they are
                    // reported and cannot stop the compaction.
                    let before = match (&self.tool_context.hooks, self.machine.compacting()) {
                        (Some(hooks), Some((tokens, window))) => {
                            Some(hooks.pre_compact(tokens, window))
                        }
                        (Some(_) | None, _) => None,
                    };
                    // `[context] model`: another model writes the summary.
                    let stream = match &self.summarizer {
                        Some(summarizer) => {
                            request.model = summarizer.model.as_deref().map(Arc::from);
                            summarizer.client.stream(request)
                        }
                        None => self.model.stream(request),
                    };
                    self.call_model(myself, stream, false, before)
                }
                TurnEffect::RunTool(call) => {
                    let tools = self.tools.clone();
                    let context = self.tool_context.clone();
                    let reply = myself.clone();
                    let work = async move {
                        let outcome = tools.execute(&call, &context).await;
                        let _ = reply.cast(TurnMsg::ToolDone {
                            call_id: call.id,
                            outcome,
                        });
                    };
                    self.spawn(work);
                }
                TurnEffect::AskStop { text } => {
                    let hooks = self.tool_context.hooks.clone();
                    let reply = myself.clone();
                    self.spawn(async move {
                        let message = match hooks {
                            Some(hooks) => hooks.stop(text).await,
                            None => None,
                        };
                        let _ = reply.cast(TurnMsg::StopAnswered(message));
                    });
                }
                TurnEffect::Finish(outcome) => {
                    self.inflight = None;
                    self.supervisor.send_message(TurnReport::Finished {
                        turn_id,
                        outcome,
                        ending: self.ending.take(),
                    })?;
                }
            }
        }
        Ok(())
    }

    /// Reads a model request's `stream` in a task that reports its
    /// answer; `shown` forwards its text as it arrives (a compaction's
    /// summary is not); `before` runs first in the same task (a
    /// compaction's hooks). (`stream` only builds the request; a client
    /// that panics there fails this turn through the supervisor.)
    fn call_model(
        &mut self,
        myself: &ActorRef<TurnMsg>,
        stream: cadre_runtime::model::ModelStream,
        shown: bool,
        before: Option<cadre_runtime::hooks::HookFuture>,
    ) {
        let turn_id = self.machine.turn_id();
        let events = self.events.clone();
        let reply = myself.clone();
        let work = async move {
            if let Some(before) = before {
                before.await;
            }
            let result = AssertUnwindSafe(drive(stream, turn_id, &events, shown))
                .catch_unwind()
                .await
                .unwrap_or_else(|_| Err(ModelError::Malformed("the model client crashed".into())));
            let _ = reply.cast(TurnMsg::ModelDone(result));
        };
        self.spawn(work);
    }

    fn spawn(&mut self, work: impl Future<Output = ()> + Send + 'static) {
        let task = tokio::spawn(work.instrument(self.span.clone()));
        self.inflight = Some(task.abort_handle());
    }
}

/// Reads a model stream to its end, forwarding retries and, when `shown`,
/// text deltas as events.
async fn drive(
    mut stream: cadre_runtime::model::ModelStream,
    turn_id: u64,
    events: &EventSink,
    shown: bool,
) -> Result<ModelResponse, ModelError> {
    while let Some(event) = stream.next().await {
        match event? {
            ModelEvent::TextDelta(_) if !shown => {}
            ModelEvent::TextDelta(text) => {
                let _ = events.send(Event::AssistantDelta { turn_id, text });
            }
            ModelEvent::ReasoningDelta(_) => {}
            ModelEvent::Retrying {
                attempt,
                delay,
                reason,
            } => {
                let _ = events.send(Event::ModelRetry {
                    turn_id,
                    attempt,
                    delay_ms: delay.as_millis() as u64,
                    reason,
                });
            }
            ModelEvent::ParamDropped { param, reason } => {
                let _ = events.send(Event::ModelParamDropped {
                    turn_id,
                    param,
                    reason,
                });
            }
            ModelEvent::Completed(response) => return Ok(response),
        }
    }
    Err(ModelError::Malformed(
        "the model stream ended without a response".into(),
    ))
}
