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
//! # Layout
//! - this file: `/goal` ops, the goal tools' requests, the hooks at a
//!   turn's start and end, scheduling.
//! - `verifier`: the verifier agent and the check command.

mod verifier;

use std::time::Instant;

use cadre_runtime::agent::ChildState;
use cadre_runtime::goal::{
    ContinuationHeader, ContinuationKind, Dependencies, Goal, GoalAction, GoalCommand, GoalStatus,
    Proposal, Recheck, RecheckInput, Settled, Settlement, StatusReason, TurnEnd, TurnFacts,
    TurnKind, TurnTrace, Verdict, after_verdict, recheck, settle,
};
use cadre_runtime::lifecycle::{QueueEffect, QueueInput, Queued};
use cadre_runtime::protocol::{Event, FailureCategory};
use cadre_runtime::tool::{GoalHost, GoalToolRequest, ToolError, ToolFuture, ToolOutcome};
use ractor::{ActorRef, RpcReplyPort};

pub use verifier::VerifierOutcome;

use super::{SessionMsg, SessionState};
use crate::store::{GoalRequest, StoreRequest};
use crate::turn::TurnMsg;

/// The session's goal and what its turns are doing with it.
#[derive(Default)]
pub(super) struct GoalState {
    /// The stored goal; `None` when the session has none.
    pub(super) goal: Option<Goal>,
    /// The running turn, as the goal sees it.
    turn: Option<GoalTurn>,
    /// A claim under verification, holding the queue.
    verifying: Option<Verifying>,
}

/// A session turn, from the goal's side.
struct GoalTurn {
    kind: TurnKind,
    /// The goal's revision when the turn started; `None` when there was no
    /// goal to settle (a goal created during the turn starts after it).
    revision: Option<u64>,
    started: Instant,
    /// Where the turn's messages begin in the conversation.
    seq: usize,
    /// The worker's proposal (`update_goal` with `status`).
    proposal: Option<Proposal>,
}

/// A claim being verified.
struct Verifying {
    turn_id: u64,
    revision: u64,
    started: Instant,
    /// Stops the verifier (a cancel, a shutdown); it then answers
    /// [`VerifierOutcome::Cancelled`].
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

/// Whether a queued message runs.
pub(super) enum Gate {
    /// Run it (as this kind of goal turn).
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

/// How a turn ended, for the exception classification, from its closing event.
fn turn_end(ending: Option<&Event>) -> (TurnEnd, u64) {
    match ending {
        Some(Event::TurnCompleted { usage, .. }) => (
            TurnEnd::Completed,
            usage.prompt_tokens + usage.completion_tokens,
        ),
        Some(Event::TurnFailed {
            category, usage, ..
        }) => (
            match category {
                FailureCategory::Agent => TurnEnd::Failed,
                FailureCategory::Cancelled => TurnEnd::Cancelled,
                FailureCategory::PausedByDenials => TurnEnd::Withdrawn,
                FailureCategory::Infrastructure => TurnEnd::Provider,
            },
            usage.prompt_tokens + usage.completion_tokens,
        ),
        _ => (TurnEnd::Failed, 0),
    }
}

fn render(goal: &Goal) -> String {
    let mut text = format!(
        "objective: {}\nstatus: {}\n{}\nverification: {}",
        goal.objective,
        goal.label(),
        goal.progress_line(),
        goal.settings.verify.as_str()
    );
    if !goal.gaps.gaps.is_empty() {
        text.push_str("\nthe verifier's last gaps:");
        for gap in &goal.gaps.gaps {
            text.push_str(&format!("\n- {gap}"));
        }
    }
    text
}

impl SessionState {
    fn goal_event(&self) -> Option<Event> {
        let goal = self.goal.goal.as_ref()?;
        Some(Event::GoalUpdated {
            objective: goal.objective.clone(),
            status: goal.status,
            reason: goal.reason,
            revision: goal.revision,
            usage: goal.usage,
            budgets: goal.budgets,
        })
    }

    fn emit_goal(&self) {
        if let Some(event) = self.goal_event() {
            self.emit(event);
        }
    }

    /// Stores the goal as it is now.
    async fn persist_goal(&self) {
        let Some(goal) = self.goal.goal.clone() else {
            return;
        };
        let session_id = self.row.to_string();
        let stored = self
            .store
            .ask(|reply| {
                StoreRequest::Goal(GoalRequest::Put {
                    session_id,
                    goal: Box::new(goal),
                    reply,
                })
            })
            .await;
        if let Err(err) = stored {
            tracing::error!(parent: &self.span, %err, "the goal could not be stored");
        }
    }

    /// After a resume: an active goal with nothing queued continues (a
    /// crash between a settlement and its continuation, or a goal resumed
    /// offline).
    pub(super) async fn resume_goal(&mut self, myself: &ActorRef<SessionMsg>) {
        let active = self
            .goal
            .goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Active);
        if active && self.queue.would_start_now() {
            if let Some(goal) = self.goal.goal.as_mut() {
                goal.resumed = true;
            }
            let effects = self.schedule(ContinuationKind::Continue).await;
            self.perform(myself, effects, false).await;
        }
    }

    /// A person's message: the breaker starts counting afresh (G8).
    pub(super) fn goal_user_message(&mut self) {
        if let Some(goal) = self.goal.goal.as_mut() {
            goal.breaker.reset();
        }
    }

    /// `Op::Goal`.
    pub(super) async fn goal_op(&mut self, myself: &ActorRef<SessionMsg>, action: GoalAction) {
        if !self.spec.is_session() {
            return self.reject("goal", "only a session has a goal");
        }
        match action {
            GoalAction::Show => match self.goal_event() {
                Some(event) => self.emit(event),
                None => self.reject("goal", "this session has no goal"),
            },
            GoalAction::Clear => {
                if self.goal.goal.take().is_none() {
                    return self.reject("goal", "this session has no goal");
                }
                let session_id = self.row.to_string();
                let cleared = self
                    .store
                    .ask(|reply| StoreRequest::Goal(GoalRequest::Clear { session_id, reply }))
                    .await;
                if let Err(err) = cleared {
                    tracing::error!(parent: &self.span, %err, "the goal could not be cleared");
                }
                self.emit(Event::GoalCleared {});
            }
            GoalAction::Set {
                objective,
                budgets,
                settings,
            } => {
                if let Some(goal) = &self.goal.goal
                    && goal.status != GoalStatus::Complete
                {
                    return self.reject(
                        "goal",
                        format!(
                            "this session already has a goal ({}): edit it, or clear it first",
                            goal.label()
                        ),
                    );
                }
                let objective = objective.trim();
                if objective.is_empty() {
                    return self.reject("goal", "the objective is empty");
                }
                self.goal.goal = Some(Goal::new(objective, budgets, settings));
                self.goal_changed(myself).await;
            }
            GoalAction::Command { command } => {
                let Some(goal) = self.goal.goal.as_mut() else {
                    return self.reject("goal", "this session has no goal");
                };
                if let Err(refused) = goal.command(command) {
                    return self.reject("goal", refused.to_string());
                }
                self.goal_changed(myself).await;
            }
        }
    }

    /// A person changed the goal: store it, say so, and start work when it
    /// is active and nothing else runs.
    async fn goal_changed(&mut self, myself: &ActorRef<SessionMsg>) {
        self.persist_goal().await;
        self.emit_goal();
        let active = self
            .goal
            .goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Active);
        if active && self.queue.would_start_now() {
            let effects = self.schedule(ContinuationKind::Continue).await;
            self.perform(myself, effects, false).await;
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

    /// Admits the next continuation (or the summary turn) with the goal, in
    /// one transaction, and returns what the queue does with it. A
    /// continuation is not admitted while a person's message waits: that
    /// message goes first, and its settlement schedules the next one.
    async fn schedule(&mut self, kind: ContinuationKind) -> Vec<QueueEffect> {
        if kind == ContinuationKind::Continue && !self.queue.is_empty() {
            return Vec::new();
        }
        let Some(goal) = self.goal.goal.as_mut() else {
            return Vec::new();
        };
        let text = match kind {
            ContinuationKind::Continue => goal.take_continuation(),
            ContinuationKind::Summary => goal.take_summary(),
        };
        let n = goal.continuations;
        let key = format!("goal:{}:{}:{n}", self.row, goal.revision);
        let session_id = self.row.to_string();
        let stored = goal.clone();
        let content = text.clone();
        let admitted = self
            .store
            .ask(|reply| {
                StoreRequest::Goal(GoalRequest::Continue {
                    session_id,
                    goal: Box::new(stored),
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

    /// Decides whether a message about to run does (G6), and notes the
    /// turn's place in the goal.
    pub(super) async fn goal_gate(&mut self, turn_id: u64, message: &Queued) -> Gate {
        if !self.spec.is_session() {
            return Gate::Run;
        }
        let mut kind = TurnKind::User;
        // Other host messages (the plan lifecycle's confirmations) run as
        // the user's turn that caused them.
        let header = message
            .internal
            .then(|| ContinuationHeader::parse(&message.text))
            .flatten();
        if let Some(header) = header {
            let decision = recheck(RecheckInput {
                goal: self.goal.goal.as_ref(),
                header,
                user_waiting: !self.queue.is_empty(),
                dependency: self.goal_dependencies().first().as_deref(),
            });
            match decision {
                Recheck::Run => kind = TurnKind::Continuation,
                Recheck::RunSummary => kind = TurnKind::Summary,
                Recheck::Drop(why) => {
                    tracing::info!(parent: &self.span, turn_id, why, "continuation dropped");
                    return Gate::Skip(self.skip(turn_id, message.id, None).await);
                }
                Recheck::Wait(why) => {
                    tracing::info!(parent: &self.span, turn_id, %why, "continuation waits");
                    return Gate::Skip(self.skip(turn_id, message.id, None).await);
                }
                Recheck::BudgetLimited(spent) => {
                    if let Some(goal) = self.goal.goal.as_mut() {
                        goal.set(GoalStatus::BudgetLimited, StatusReason::for_budget(spent));
                        goal.summary_due = true;
                    }
                    self.emit_goal();
                    let kind = ContinuationKind::Summary;
                    return Gate::Skip(self.skip(turn_id, message.id, Some(kind)).await);
                }
            }
        }
        let revision = self
            .goal
            .goal
            .as_ref()
            .filter(|g| g.status != GoalStatus::Complete || kind != TurnKind::User)
            .map(|g| g.revision);
        self.goal.turn = Some(GoalTurn {
            kind,
            revision,
            started: Instant::now(),
            seq: self.conversation.len(),
            proposal: None,
        });
        Gate::Run
    }

    /// Marks a message done without running it, schedules `then`, and
    /// moves the queue on.
    async fn skip(
        &mut self,
        turn_id: u64,
        queue_id: Option<i64>,
        then: Option<ContinuationKind>,
    ) -> Vec<QueueEffect> {
        if let Err(err) = self.finish_turn(queue_id).await {
            tracing::error!(parent: &self.span, %err, "a dropped continuation could not be marked done");
        }
        let mut effects = match then {
            Some(kind) => self.schedule(kind).await,
            None => Vec::new(),
        };
        effects.extend(self.queue.step(QueueInput::Finished { turn_id }));
        effects
    }

    /// Whether the running turn is the summary turn (no tools).
    pub(super) fn summary_turn(&self) -> bool {
        self.goal
            .turn
            .as_ref()
            .is_some_and(|t| t.kind == TurnKind::Summary)
    }

    /// The budget guard of the turn about to start (G7).
    pub(super) fn budget_guard(&self) -> Option<cadre_runtime::goal::BudgetGuard> {
        let goal = self.goal.goal.as_ref()?;
        let turn = self.goal.turn.as_ref()?;
        (turn.revision.is_some() && goal.status == GoalStatus::Active).then(|| {
            cadre_runtime::goal::BudgetGuard::new(
                &goal.budgets,
                &goal.usage,
                goal.settings.grace_steps,
            )
        })
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
        let Some(turn) = self.goal.turn.take() else {
            return false;
        };
        let Some(revision) = turn.revision else {
            // A goal created during the turn starts now.
            if self
                .goal
                .goal
                .as_ref()
                .is_some_and(|g| g.status == GoalStatus::Active)
            {
                effects.extend(self.schedule(ContinuationKind::Continue).await);
            }
            return false;
        };
        let (end, tokens) = turn_end(ending);
        let facts = TurnFacts {
            kind: turn.kind,
            revision,
            end,
            tokens,
            seconds: turn.started.elapsed().as_secs(),
            trace: TurnTrace::of(self.conversation.get(turn.seq..).unwrap_or_default()),
            proposal: turn.proposal,
            dependencies: self.goal_dependencies(),
        };
        let Some(goal) = self.goal.goal.as_mut() else {
            return false;
        };
        match settle(goal, &facts) {
            Settlement::Done(next) => {
                effects.extend(self.commit_goal(next).await);
                false
            }
            Settlement::Verify { claim } => {
                let revision = goal.revision;
                self.persist_goal().await;
                self.emit_goal();
                self.verify(myself, turn_id, revision, claim, turn.seq)
                    .await;
                true
            }
        }
    }

    /// Stores a settled goal, says so, and schedules what it asks for.
    async fn commit_goal(&mut self, next: Settled) -> Vec<QueueEffect> {
        self.persist_goal().await;
        self.emit_goal();
        match next {
            Settled::Continue => self.schedule(ContinuationKind::Continue).await,
            Settled::Summary => self.schedule(ContinuationKind::Summary).await,
            Settled::Wait(why) => {
                tracing::info!(parent: &self.span, %why, "the goal waits");
                Vec::new()
            }
            Settled::Stop => Vec::new(),
        }
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
        if self.goal.verifying.as_ref().map(|v| v.turn_id) != Some(turn_id) {
            return;
        }
        let Some(verifying) = self.goal.verifying.take() else {
            return;
        };
        let seconds = verifying.started.elapsed().as_secs();
        let mut effects = Vec::new();
        if let Some(goal) = self.goal.goal.as_mut() {
            let next = match &outcome {
                VerifierOutcome::Verdict(verdict) => {
                    after_verdict(goal, verifying.revision, verdict, tokens, seconds)
                }
                VerifierOutcome::Cancelled => {
                    let stopped = Verdict::Unavailable("stopped".into());
                    after_verdict(goal, u64::MAX, &stopped, tokens, seconds);
                    if goal.status == GoalStatus::Active {
                        goal.set(GoalStatus::Paused, StatusReason::UserRequested);
                    }
                    Settled::Stop
                }
            };
            let (verdict, gaps) = match &outcome {
                VerifierOutcome::Verdict(Verdict::Unavailable(why)) => {
                    ("unavailable", vec![why.clone()])
                }
                VerifierOutcome::Verdict(verdict) => (verdict.as_str(), verdict.gaps().to_vec()),
                VerifierOutcome::Cancelled => ("unavailable", vec!["cancelled".to_string()]),
            };
            self.emit(Event::GoalVerification {
                verdict: verdict.to_string(),
                gaps,
                verifier_tokens: tokens,
            });
            effects = self.commit_goal(next).await;
        }
        effects.extend(self.queue.step(QueueInput::Finished { turn_id }));
        self.perform(myself, effects, false).await;
    }

    /// Stops a verification in progress (a cancel or a shutdown); true when
    /// there was one. Its answer, `Cancelled`, moves the queue on.
    pub(super) fn stop_verification(&mut self) -> bool {
        match self.goal.verifying.as_mut() {
            Some(verifying) => {
                if let Some(stop) = verifying.stop.take() {
                    let _ = stop.send(());
                }
                true
            }
            None => false,
        }
    }

    /// A background sub-agent finished: a goal that waited for it goes on.
    pub(super) async fn goal_kick(&mut self, myself: &ActorRef<SessionMsg>) {
        let active = self
            .goal
            .goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Active);
        if active
            && self.goal.verifying.is_none()
            && self.queue.would_start_now()
            && self.goal_dependencies().first().is_none()
        {
            let effects = self.schedule(ContinuationKind::Continue).await;
            self.perform(myself, effects, false).await;
        }
    }

    /// Carries out a goal tool's request (G3).
    pub(super) async fn goal_tool(
        &mut self,
        request: GoalToolRequest,
        reply: RpcReplyPort<ToolOutcome>,
    ) {
        let outcome = self.goal_tool_outcome(request).await;
        let _ = reply.send(outcome);
    }

    async fn goal_tool_outcome(&mut self, request: GoalToolRequest) -> ToolOutcome {
        let kind = self.goal.turn.as_ref().map(|t| t.kind);
        match request {
            GoalToolRequest::Get => Ok(self
                .goal
                .goal
                .as_ref()
                .map_or_else(|| "this session has no goal".to_string(), render)),
            GoalToolRequest::Create {
                objective,
                token_budget,
            } => {
                if kind != Some(TurnKind::User) {
                    return Err(ToolError::failed(
                        "create_goal works only in a turn the user started, when they asked for a goal",
                    ));
                }
                if let Some(goal) = &self.goal.goal
                    && goal.status != GoalStatus::Complete
                {
                    return Err(ToolError::failed(format!(
                        "this session already has a goal ({}); the user can clear it",
                        goal.label()
                    )));
                }
                let budgets = cadre_runtime::goal::Budgets {
                    tokens: token_budget,
                    ..Default::default()
                };
                let goal = Goal::new(objective, budgets, Default::default());
                let text = format!(
                    "goal set: {}. The host continues you after this turn until it is verified.",
                    goal.objective
                );
                self.goal.goal = Some(goal);
                self.persist_goal().await;
                self.emit_goal();
                Ok(text)
            }
            GoalToolRequest::Propose(proposal) => {
                let active = self
                    .goal
                    .goal
                    .as_ref()
                    .is_some_and(|g| g.status == GoalStatus::Active);
                let Some(turn) = self.goal.turn.as_mut().filter(|t| t.revision.is_some()) else {
                    return Err(ToolError::failed("there is no goal to update in this turn"));
                };
                if !active || turn.kind == TurnKind::Summary {
                    return Err(ToolError::failed(
                        "the goal is not active: nothing to propose",
                    ));
                }
                let text = match &proposal {
                    Proposal::Complete { .. } => {
                        "completion proposed. This turn ends here; a separate read-only verifier \
                         checks the claim, and its gaps come back to you if it is not met."
                    }
                    Proposal::Blocked { .. } => {
                        "blocked reported. This turn ends here; the user decides what comes next."
                    }
                };
                turn.proposal = Some(proposal);
                if let Some(turn) = &self.turn {
                    let _ = turn.cast(TurnMsg::EndAfterTools);
                }
                Ok(text.to_string())
            }
            GoalToolRequest::TokenBudget(tokens) => {
                if kind != Some(TurnKind::User) {
                    return Err(ToolError::new(
                        cadre_runtime::tool::ErrorCode::ToolNotAllowed,
                        "token_budget can change only in a turn the user started (not in a \
                         continuation, a sub-agent or a workflow step)",
                    ));
                }
                let Some(goal) = self.goal.goal.as_mut() else {
                    return Err(ToolError::failed("this session has no goal"));
                };
                let budgets = cadre_runtime::goal::Budgets {
                    tokens,
                    ..goal.budgets
                };
                goal.command(GoalCommand::Budget(budgets))
                    .map_err(|e| ToolError::failed(e.to_string()))?;
                // The model's own change does not make its turn stale.
                let revision = goal.revision;
                if let Some(turn) = self.goal.turn.as_mut() {
                    turn.revision = Some(revision);
                }
                self.persist_goal().await;
                self.emit_goal();
                Ok(format!(
                    "token budget {}",
                    tokens.map_or("cleared".into(), |t| format!("set to {t}"))
                ))
            }
        }
    }
}
