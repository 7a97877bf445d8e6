//! The session's goal (G1–G8): the session performs what the pure goal
//! machines of `cadre_runtime::goal` decide.
//!
//! A goal turn is any turn of a session with a goal. When it ends, the
//! settlement runs before the queue moves on; a completion claim holds the
//! queue (the session stays `running`) while the verifier works, so no
//! other turn starts between a claim and its verdict. What comes next (a
//! continuation, the summary turn after a budget stop) is admitted to the
//! store's queue in the goal's own transaction, before the queue moves on:
//! a crash leaves it stored, and a resume runs it once. A continuation is
//! rechecked just before it runs.
//!
//! The decisions are `cadre_runtime::goal::GoalSession`'s; this file steps
//! it at each hook and performs its effects (the store trips, the
//! continuation's admission, the verifier, the turn's end).
//!
//! # Layout
//! - this file: the hooks at a turn's start and end, `/goal` ops, the goal
//!   tools' requests, and performing the machine's effects.
//! - `verifier`: the verifier agent and the check command.

mod verifier;

use std::time::Instant;

use cadre_runtime::agent::ChildState;
use cadre_runtime::goal::{
    Dependencies, GoalAction, GoalEffect, GoalSession, Surroundings, VerifierOutcome,
};
use cadre_runtime::lifecycle::{QueueEffect, QueueInput, Queued};
use cadre_runtime::protocol::Event;
use cadre_runtime::tool::{GoalHost, GoalToolRequest, ToolError, ToolFuture, ToolOutcome};
use ractor::{ActorRef, RpcReplyPort};

use super::{SessionMsg, SessionState};
use crate::store::{GoalRequest, StoreRequest};
use crate::turn::TurnMsg;

/// The session's goal machine and the one thing it cannot hold: the way
/// to stop a verifier that is running.
pub(super) struct GoalState {
    /// The pure machine: the goal, the running turn's place in it, the
    /// claim under verification.
    pub(super) machine: GoalSession,
    /// Stops the running verifier (a cancel, a shutdown); it then answers
    /// [`VerifierOutcome::Cancelled`].
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl GoalState {
    /// The goal state of a session (`enabled`) or of a sub-agent.
    pub(super) fn new(enabled: bool) -> Self {
        Self {
            machine: GoalSession::new(enabled),
            stop: None,
        }
    }
}

/// Whether a queued message runs.
pub(super) enum Gate {
    /// Run it.
    Run,
    /// Do not: it was marked done; perform these effects instead (a
    /// summary turn admitted, the queue moved on).
    Skip(Vec<QueueEffect>),
}

/// Sends a turn's goal tool requests to its session.
pub(crate) struct SessionGoalHost {
    pub(crate) session: ActorRef<SessionMsg>,
}

impl GoalHost for SessionGoalHost {
    fn request(&self, request: GoalToolRequest) -> ToolFuture<'static> {
        let session = self.session.clone();
        Box::pin(async move {
            let (reply, answer) = tokio::sync::oneshot::channel();
            session
                .cast(SessionMsg::GoalTool {
                    request,
                    reply: reply.into(),
                })
                .map_err(|_| ToolError::failed("the session has stopped"))?;
            answer
                .await
                .unwrap_or_else(|_| Err(ToolError::failed("the goal request was dropped")))
        })
    }
}

impl SessionState {
    /// What the goal machine needs to know of the session now.
    fn surroundings(&self) -> Surroundings {
        Surroundings {
            queue_empty: self.queue.is_empty(),
            would_start_now: self.queue.would_start_now(),
            dependencies: self.goal_dependencies(),
        }
    }

    /// What the goal would wait for now.
    fn goal_dependencies(&self) -> Dependencies {
        Dependencies {
            questionnaire: self.questionnaire.is_some(),
            approval: false,
            background: self
                .children
                .table
                .iter()
                .filter(|(_, c)| c.state == ChildState::Running)
                .count(),
        }
    }

    /// Performs what the goal machine decided, in order; returns what the
    /// queue does with an admitted continuation.
    async fn perform_goal(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        effects: Vec<GoalEffect>,
    ) -> Vec<QueueEffect> {
        let mut queue = Vec::new();
        for effect in effects {
            match effect {
                GoalEffect::Store(goal) => {
                    if goal.status == cadre_runtime::goal::GoalStatus::Complete {
                        // A met goal's processes are done: the verifier
                        // has read them (`docs/processes.md`).
                        self.spec.processes.end(None);
                    }
                    let session_id = self.row.to_string();
                    let stored = self
                        .store
                        .ask(|reply| {
                            StoreRequest::Goal(GoalRequest::Put {
                                session_id,
                                goal,
                                reply,
                            })
                        })
                        .await;
                    if let Err(err) = stored {
                        tracing::error!(parent: &self.span, %err, "the goal could not be stored");
                    }
                }
                GoalEffect::Forget => {
                    let session_id = self.row.to_string();
                    let cleared = self
                        .store
                        .ask(|reply| StoreRequest::Goal(GoalRequest::Clear { session_id, reply }))
                        .await;
                    if let Err(err) = cleared {
                        tracing::error!(parent: &self.span, %err, "the goal could not be cleared");
                    }
                }
                GoalEffect::Emit(event) => self.emit(event),
                GoalEffect::Reject(why) => self.reject("goal", why),
                GoalEffect::Admit { goal, text, n } => {
                    queue.extend(self.admit_continuation(goal, text, n).await);
                }
                GoalEffect::MarkDone { queue_id } => {
                    if let Err(err) = self.finish_turn(queue_id).await {
                        tracing::error!(parent: &self.span, %err, "a dropped continuation could not be marked done");
                    }
                }
                GoalEffect::Verify {
                    turn_id,
                    objective,
                    claim,
                    settings,
                    seq,
                } => {
                    let claim = verifier::Claim {
                        turn_id,
                        objective,
                        claim,
                        settings,
                        seq,
                    };
                    self.verify(myself, claim).await;
                }
                GoalEffect::EndTurn => {
                    if let Some(turn) = &self.turn {
                        let _ = turn.cast(TurnMsg::EndAfterTools);
                    }
                }
                GoalEffect::Note(why) => tracing::info!(parent: &self.span, %why, "goal"),
            }
        }
        queue
    }

    /// Admits a continuation (or the summary turn) with the goal, in one
    /// transaction, and returns what the queue does with it.
    async fn admit_continuation(
        &mut self,
        goal: Box<cadre_runtime::goal::Goal>,
        text: String,
        n: u64,
    ) -> Vec<QueueEffect> {
        let key = format!("goal:{}:{}:{n}", self.row, goal.revision);
        let session_id = self.row.to_string();
        let content = text.clone();
        let admitted = self
            .store
            .ask(|reply| {
                StoreRequest::Goal(GoalRequest::Continue {
                    session_id,
                    goal,
                    text: content,
                    key,
                    reply,
                })
            })
            .await;
        let admitted = match admitted {
            Ok(admitted) => admitted,
            Err(err) => {
                tracing::error!(parent: &self.span, %err, "the continuation could not be admitted");
                return Vec::new();
            }
        };
        self.emit(Event::GoalContinuation { n });
        let message = Queued {
            id: Some(admitted.id),
            text,
            interrupted: false,
            cause: None,
            internal: true,
        };
        // A continuation is not a person's input: no `input.admitted`.
        self.queue
            .step(QueueInput::Admitted(message))
            .into_iter()
            .filter(|e| !matches!(e, QueueEffect::Acknowledge { .. }))
            .collect()
    }

    /// Steps the goal machine with `step` and performs the result, queue
    /// effects included.
    async fn goal_step(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        step: impl FnOnce(&mut GoalSession, &Surroundings) -> Vec<GoalEffect>,
    ) {
        let at = self.surroundings();
        let effects = step(&mut self.goal.machine, &at);
        let queue = self.perform_goal(myself, effects).await;
        self.perform(myself, queue, false).await;
    }

    /// After a resume: an active goal with nothing queued continues.
    pub(super) async fn resume_goal(&mut self, myself: &ActorRef<SessionMsg>) {
        self.goal_step(myself, |goal, at| goal.resumed(at)).await;
    }

    /// A person's message: the breaker starts counting afresh (G8).
    pub(super) fn goal_user_message(&mut self) {
        self.goal.machine.user_message();
    }

    /// `Op::Goal`.
    pub(super) async fn goal_op(&mut self, myself: &ActorRef<SessionMsg>, action: GoalAction) {
        self.goal_step(myself, |goal, at| goal.op(action, at)).await;
    }

    /// A background sub-agent finished: a goal that waited for it goes on.
    pub(super) async fn goal_kick(&mut self, myself: &ActorRef<SessionMsg>) {
        self.goal_step(myself, |goal, at| goal.kick(at)).await;
    }

    /// Decides whether a message about to run does (G6).
    pub(super) async fn goal_gate(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        turn_id: u64,
        message: &Queued,
    ) -> Gate {
        let at = self.surroundings();
        let seq = self.conversation.len();
        match self.goal.machine.gate(message, &at, seq, Instant::now()) {
            cadre_runtime::goal::Gate::Run => Gate::Run,
            cadre_runtime::goal::Gate::Skip(effects) => {
                let mut queue = self.perform_goal(myself, effects).await;
                queue.extend(self.queue.step(QueueInput::Finished { turn_id }));
                Gate::Skip(queue)
            }
        }
    }

    /// Whether the running turn is the summary turn (no tools).
    pub(super) fn summary_turn(&self) -> bool {
        self.goal.machine.summary_turn()
    }

    /// The budget guard of the turn about to start (G7).
    pub(super) fn budget_guard(&self) -> Option<cadre_runtime::goal::BudgetGuard> {
        self.goal.machine.budget_guard()
    }

    /// Settles a goal turn that ended (G4). True when a verifier now holds
    /// the queue: [`SessionState::goal_verdict`] moves it on.
    pub(super) async fn settle_goal(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        turn_id: u64,
        ending: Option<&Event>,
        effects: &mut Vec<QueueEffect>,
    ) -> bool {
        let at = self.surroundings();
        let step =
            self.goal
                .machine
                .settle(turn_id, ending, &self.conversation, &at, Instant::now());
        effects.extend(self.perform_goal(myself, step.effects).await);
        step.holds_queue
    }

    /// The verifier answered (or was stopped): finish the settlement of
    /// the turn it held, then let the queue move on.
    pub(super) async fn goal_verdict(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        turn_id: u64,
        outcome: VerifierOutcome,
        tokens: u64,
    ) {
        let at = self.surroundings();
        let Some(effects) =
            self.goal
                .machine
                .verdict(turn_id, &outcome, tokens, &at, Instant::now())
        else {
            return;
        };
        self.goal.stop = None;
        let mut queue = self.perform_goal(myself, effects).await;
        queue.extend(self.queue.step(QueueInput::Finished { turn_id }));
        self.perform(myself, queue, false).await;
    }

    /// Stops a verification in progress (a cancel or a shutdown); true when
    /// there was one. Its answer, `Cancelled`, moves the queue on.
    pub(super) fn stop_verification(&mut self) -> bool {
        if let Some(stop) = self.goal.stop.take() {
            let _ = stop.send(());
        }
        self.goal.machine.verifying().is_some()
    }

    /// Carries out a goal tool's request (G3).
    pub(super) async fn goal_tool(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        request: GoalToolRequest,
        reply: RpcReplyPort<ToolOutcome>,
    ) {
        let (outcome, effects) = self.goal.machine.tool(request);
        let queue = self.perform_goal(myself, effects).await;
        self.perform(myself, queue, false).await;
        let _ = reply.send(outcome);
    }
}
