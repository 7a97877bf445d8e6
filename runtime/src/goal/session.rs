//! A session's goal as one machine (G1–G8): what the session does with its
//! goal when a person runs `/goal`, when a queued message is about to run,
//! when a turn ends, when a goal tool asks and when the verifier answers.
//!
//! It never waits and does no I/O. Each step takes what the session knows
//! now ([`Surroundings`], the clock) and returns the effects to perform, in
//! order: store the goal, admit the next continuation, start the verifier,
//! end the running turn, say something. The session actor performs them
//! (`actors/src/session/goal.rs`); the verifier's answer comes back as
//! [`GoalSession::verdict`].
//!
//! A completion claim *holds the queue*: [`GoalSession::settle`] says so
//! ([`Step::holds_queue`]), and no other turn starts until its verdict.

use std::time::Instant;

use super::{
    ContinuationHeader, ContinuationKind, Dependencies, Goal, GoalAction, GoalCommand,
    GoalSettings, GoalStatus, Proposal, Recheck, RecheckInput, Settled, Settlement, StatusReason,
    Tracing, TurnEnd, TurnFacts, TurnKind, Verdict, after_verdict, recheck, settle,
};
use crate::lifecycle::Queued;
use crate::message::Message;
use crate::protocol::{Event, FailureCategory, Usage};
use crate::tool::{ErrorCode, GoalToolRequest, ToolError, ToolOutcome};

/// The goal of one agent, and what its turns are doing with it.
#[derive(Debug, Default)]
pub struct GoalSession {
    /// Only a session has a goal; a sub-agent's machine refuses `/goal`
    /// and lets every turn run as it is.
    enabled: bool,
    /// The stored goal; `None` when the session has none.
    goal: Option<Goal>,
    /// The running turn, as the goal sees it: set when a message starts,
    /// taken by its settlement.
    turn: Option<GoalTurn>,
    /// A claim under verification; while it is set the queue is held.
    claim: Option<Claim>,
}

/// A running turn, from the goal's side.
#[derive(Debug, Clone)]
struct GoalTurn {
    kind: TurnKind,
    /// The goal's revision when the turn started; `None` when there was no
    /// goal to settle (a goal created during the turn starts after it), or
    /// the goal was already complete when a person's turn began.
    revision: Option<u64>,
    started: Instant,
    /// Where the turn's messages begin in the conversation: the verifier's
    /// evidence reads from a little before.
    seq: usize,
    /// The breaker's trace of the turn, message by message.
    trace: Tracing,
    /// The worker's `update_goal` with a status, read at settlement.
    proposal: Option<Proposal>,
}

/// A claim being verified.
#[derive(Debug, Clone, Copy)]
struct Claim {
    turn_id: u64,
    /// The revision the claim was made against: a person's edit during the
    /// verification makes its verdict stale.
    revision: u64,
    started: Instant,
}

/// What the session knows that a step needs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Surroundings {
    /// No message waits in the queue (a person's message goes before a
    /// continuation).
    pub queue_empty: bool,
    /// A message admitted now would start at once (nothing runs, nothing
    /// waits, the session is not stopping).
    pub would_start_now: bool,
    /// What the goal would have to wait for.
    pub dependencies: Dependencies,
}

/// What the verifier came back with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VerifierOutcome {
    /// Its verdict.
    Verdict(Verdict),
    /// It was stopped before it answered (a cancel, a shutdown).
    Cancelled,
}

/// One thing the session does for its goal, in the order given.
#[derive(Debug, Clone, PartialEq)]
pub enum GoalEffect {
    /// Store the goal as it is now.
    Store(Box<Goal>),
    /// Remove the stored goal.
    Forget,
    /// Send this event (`goal.updated`, `goal.cleared`, `goal.verification`).
    Emit(Event),
    /// Refuse the person's `/goal` op, saying why (`op.rejected`).
    Reject(String),
    /// Admit the next continuation (or the summary turn) to the store's
    /// queue in one transaction with `goal`, keyed by its revision and `n`,
    /// then to the turn queue, and say `goal.continuation`.
    Admit {
        /// The goal as it is with this continuation taken.
        goal: Box<Goal>,
        /// The message the turn runs.
        text: String,
        /// Which continuation this is.
        n: u64,
    },
    /// Mark the queued message done without running it.
    MarkDone {
        /// Its row in the store's queue, when it has one.
        queue_id: Option<i64>,
    },
    /// Start the verifier on a claim of turn `turn_id`; its answer comes
    /// back through [`GoalSession::verdict`].
    Verify {
        /// The turn that claims, holding the queue.
        turn_id: u64,
        /// The objective the claim is judged against.
        objective: String,
        /// The worker's claim.
        claim: String,
        /// How to verify (the mode, its command and timeout).
        settings: GoalSettings,
        /// Where the claiming turn's messages begin, for the evidence.
        seq: usize,
    },
    /// End the running turn once its tool calls are answered: a proposal
    /// ends the worker's turn.
    EndTurn,
    /// Why nothing was scheduled, for the log.
    Note(String),
}

/// A step's effects, and whether the queue must wait for a verdict.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Step {
    /// What to do, in order.
    pub effects: Vec<GoalEffect>,
    /// A claim is under verification: the queue does not move on until
    /// [`GoalSession::verdict`].
    pub holds_queue: bool,
}

/// Whether a queued message runs.
#[derive(Debug, Clone, PartialEq)]
pub enum Gate {
    /// Run it.
    Run,
    /// Do not: perform these effects (it is marked done, perhaps a summary
    /// turn admitted), then move the queue on.
    Skip(Vec<GoalEffect>),
}

impl GoalSession {
    /// The goal machine of a session (`enabled`) or of a sub-agent.
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            ..Self::default()
        }
    }

    /// Takes the goal a resumed session had stored.
    pub fn restore(&mut self, goal: Option<Goal>) {
        self.goal = goal;
    }

    /// The goal, if the session has one.
    pub fn goal(&self) -> Option<&Goal> {
        self.goal.as_ref()
    }

    /// The turn whose claim is being verified, if any.
    pub fn verifying(&self) -> Option<u64> {
        self.claim.map(|c| c.turn_id)
    }

    fn active(&self) -> bool {
        self.goal
            .as_ref()
            .is_some_and(|g| g.status == GoalStatus::Active)
    }

    /// `goal.updated` for the goal as it is now.
    pub fn updated(&self) -> Option<Event> {
        let goal = self.goal.as_ref()?;
        Some(Event::GoalUpdated {
            objective: goal.objective.clone(),
            status: goal.status,
            reason: goal.reason,
            revision: goal.revision,
            usage: goal.usage,
            budgets: goal.budgets,
        })
    }

    /// Store the goal and say so.
    fn changed(&self) -> Vec<GoalEffect> {
        let Some(goal) = &self.goal else {
            return Vec::new();
        };
        let mut out = vec![GoalEffect::Store(Box::new(goal.clone()))];
        out.extend(self.updated().map(GoalEffect::Emit));
        out
    }

    /// A person's message: the breaker starts counting afresh (G8).
    pub fn user_message(&mut self) {
        if let Some(goal) = self.goal.as_mut() {
            goal.breaker.reset();
        }
    }

    /// A person's `/goal`.
    pub fn op(&mut self, action: GoalAction, at: &Surroundings) -> Vec<GoalEffect> {
        let reject = |why: &str| vec![GoalEffect::Reject(why.to_string())];
        if !self.enabled {
            return reject("only a session has a goal");
        }
        match action {
            GoalAction::Show => match self.updated() {
                Some(event) => vec![GoalEffect::Emit(event)],
                None => reject("this session has no goal"),
            },
            GoalAction::Clear => match self.goal.take() {
                Some(_) => vec![GoalEffect::Forget, GoalEffect::Emit(Event::GoalCleared {})],
                None => reject("this session has no goal"),
            },
            GoalAction::Set {
                objective,
                budgets,
                settings,
            } => {
                if let Some(goal) = &self.goal
                    && goal.status != GoalStatus::Complete
                {
                    return vec![GoalEffect::Reject(format!(
                        "this session already has a goal ({}): edit it, or clear it first",
                        goal.label()
                    ))];
                }
                let objective = objective.trim();
                if objective.is_empty() {
                    return reject("the objective is empty");
                }
                self.goal = Some(Goal::new(objective, budgets, settings));
                self.start_work(at)
            }
            GoalAction::Command { command } => {
                let Some(goal) = self.goal.as_mut() else {
                    return reject("this session has no goal");
                };
                if let Err(refused) = goal.command(command) {
                    return vec![GoalEffect::Reject(refused.to_string())];
                }
                self.start_work(at)
            }
        }
    }

    /// A person changed the goal: store it, say so, and start work when it
    /// is active and nothing else runs.
    fn start_work(&mut self, at: &Surroundings) -> Vec<GoalEffect> {
        let mut out = self.changed();
        if self.active() && at.would_start_now {
            out.extend(self.schedule(ContinuationKind::Continue, at));
        }
        out
    }

    /// After a resume: an active goal with nothing queued continues (a
    /// crash between a settlement and its continuation, or a goal resumed
    /// offline).
    pub fn resumed(&mut self, at: &Surroundings) -> Vec<GoalEffect> {
        if !(self.active() && at.would_start_now) {
            return Vec::new();
        }
        if let Some(goal) = self.goal.as_mut() {
            goal.resumed = true;
        }
        self.schedule(ContinuationKind::Continue, at)
    }

    /// A background sub-agent finished: a goal that waited for it goes on.
    pub fn kick(&mut self, at: &Surroundings) -> Vec<GoalEffect> {
        let free = self.claim.is_none() && at.would_start_now && at.dependencies.first().is_none();
        if self.active() && free {
            return self.schedule(ContinuationKind::Continue, at);
        }
        Vec::new()
    }

    /// The next continuation (or the summary turn), to admit with the goal
    /// in one transaction. A continuation is not admitted while a message
    /// waits: that message goes first, and its settlement schedules the
    /// next one.
    fn schedule(&mut self, kind: ContinuationKind, at: &Surroundings) -> Vec<GoalEffect> {
        if kind == ContinuationKind::Continue && !at.queue_empty {
            return Vec::new();
        }
        let Some(goal) = self.goal.as_mut() else {
            return Vec::new();
        };
        let text = match kind {
            ContinuationKind::Continue => goal.take_continuation(),
            ContinuationKind::Summary => goal.take_summary(),
        };
        vec![GoalEffect::Admit {
            goal: Box::new(goal.clone()),
            text,
            n: goal.continuations,
        }]
    }

    /// Decides whether a message about to run does (G6), and notes the
    /// turn's place in the goal. `seq` is how many messages are stored now.
    pub fn gate(&mut self, message: &Queued, at: &Surroundings, seq: usize, now: Instant) -> Gate {
        if !self.enabled {
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
                goal: self.goal.as_ref(),
                header,
                user_waiting: !at.queue_empty,
                dependency: at.dependencies.first().as_deref(),
            });
            let done = GoalEffect::MarkDone {
                queue_id: message.id,
            };
            match decision {
                Recheck::Run => kind = TurnKind::Continuation,
                Recheck::RunSummary => kind = TurnKind::Summary,
                Recheck::Drop(why) => {
                    let note = GoalEffect::Note(format!("continuation dropped: {why}"));
                    return Gate::Skip(vec![note, done]);
                }
                Recheck::Wait(why) => {
                    let note = GoalEffect::Note(format!("continuation waits: {why}"));
                    return Gate::Skip(vec![note, done]);
                }
                Recheck::BudgetLimited(spent) => {
                    if let Some(goal) = self.goal.as_mut() {
                        goal.set(GoalStatus::BudgetLimited, StatusReason::for_budget(spent));
                        goal.summary_due = true;
                    }
                    let mut out: Vec<GoalEffect> =
                        self.updated().map(GoalEffect::Emit).into_iter().collect();
                    out.push(done);
                    out.extend(self.schedule(ContinuationKind::Summary, at));
                    return Gate::Skip(out);
                }
            }
        }
        let revision = self
            .goal
            .as_ref()
            .filter(|g| g.status != GoalStatus::Complete || kind != TurnKind::User)
            .map(|g| g.revision);
        self.turn = Some(GoalTurn {
            kind,
            revision,
            started: now,
            seq,
            trace: Tracing::default(),
            proposal: None,
        });
        Gate::Run
    }

    /// Whether the running turn is the summary turn (it gets no tools).
    pub fn summary_turn(&self) -> bool {
        self.turn
            .as_ref()
            .is_some_and(|t| t.kind == TurnKind::Summary)
    }

    /// The budget guard of the turn about to start (G7).
    pub fn budget_guard(&self) -> Option<super::BudgetGuard> {
        let goal = self.goal.as_ref()?;
        let turn = self.turn.as_ref()?;
        (turn.revision.is_some() && goal.status == GoalStatus::Active)
            .then(|| super::BudgetGuard::new(&goal.budgets, &goal.usage, goal.settings.grace_steps))
    }

    /// The running turn recorded `message` (its user message included).
    pub fn recorded(&mut self, message: &Message) {
        if let Some(turn) = self.turn.as_mut() {
            turn.trace.push(message);
        }
    }

    /// Settles the goal turn `turn_id` that ended with `ending` (G4), by
    /// the messages it recorded ([`GoalSession::recorded`]).
    pub fn settle(
        &mut self,
        turn_id: u64,
        ending: Option<&Event>,
        at: &Surroundings,
        now: Instant,
    ) -> Step {
        let Some(turn) = self.turn.take() else {
            return Step::default();
        };
        let Some(revision) = turn.revision else {
            // A goal created during the turn starts now.
            let effects = match self.active() {
                true => self.schedule(ContinuationKind::Continue, at),
                false => Vec::new(),
            };
            return Step {
                effects,
                holds_queue: false,
            };
        };
        let (end, usage) = turn_end(ending);
        let facts = TurnFacts {
            kind: turn.kind,
            revision,
            end,
            usage,
            seconds: now.saturating_duration_since(turn.started).as_secs(),
            trace: turn.trace.finish(),
            proposal: turn.proposal,
            dependencies: at.dependencies,
        };
        let Some(goal) = self.goal.as_mut() else {
            return Step::default();
        };
        match settle(goal, &facts) {
            Settlement::Done(next) => Step {
                effects: self.commit(next, at),
                holds_queue: false,
            },
            Settlement::Verify { claim } => {
                let revision = goal.revision;
                let verify = GoalEffect::Verify {
                    turn_id,
                    objective: goal.objective.clone(),
                    claim,
                    settings: goal.settings.clone(),
                    seq: turn.seq,
                };
                self.claim = Some(Claim {
                    turn_id,
                    revision,
                    started: now,
                });
                let mut effects = self.changed();
                effects.push(verify);
                Step {
                    effects,
                    holds_queue: true,
                }
            }
        }
    }

    /// Stores a settled goal, says so, and schedules what it asks for.
    fn commit(&mut self, next: Settled, at: &Surroundings) -> Vec<GoalEffect> {
        let mut out = self.changed();
        match next {
            Settled::Continue => out.extend(self.schedule(ContinuationKind::Continue, at)),
            Settled::Summary => out.extend(self.schedule(ContinuationKind::Summary, at)),
            Settled::Wait(why) => out.push(GoalEffect::Note(format!("the goal waits: {why}"))),
            Settled::Stop => {}
        }
        out
    }

    /// The verifier of the claim of turn `turn_id` answered (or was
    /// stopped): the settlement finishes, and then the queue moves on.
    /// `None` when no such claim waits (a stale answer): nothing to do.
    pub fn verdict(
        &mut self,
        turn_id: u64,
        outcome: &VerifierOutcome,
        usage: crate::protocol::Usage,
        at: &Surroundings,
        now: Instant,
    ) -> Option<Vec<GoalEffect>> {
        let claim = self.claim.filter(|c| c.turn_id == turn_id)?;
        self.claim = None;
        let seconds = now.saturating_duration_since(claim.started).as_secs();
        let Some(goal) = self.goal.as_mut() else {
            return Some(Vec::new());
        };
        let next = match outcome {
            VerifierOutcome::Verdict(verdict) => {
                after_verdict(goal, claim.revision, verdict, usage, seconds)
            }
            VerifierOutcome::Cancelled => {
                let stopped = Verdict::Unavailable("stopped".into());
                after_verdict(goal, u64::MAX, &stopped, usage, seconds);
                if goal.status == GoalStatus::Active {
                    goal.set(GoalStatus::Paused, StatusReason::UserRequested);
                }
                Settled::Stop
            }
        };
        let (verdict, gaps) = match outcome {
            VerifierOutcome::Verdict(Verdict::Unavailable(why)) => {
                ("unavailable", vec![why.clone()])
            }
            VerifierOutcome::Verdict(verdict) => (verdict.as_str(), verdict.gaps().to_vec()),
            VerifierOutcome::Cancelled => ("unavailable", vec!["cancelled".to_string()]),
        };
        let mut out = vec![GoalEffect::Emit(Event::GoalVerification {
            verdict: verdict.to_string(),
            gaps,
            verifier_tokens: usage.total(),
        })];
        out.extend(self.commit(next, at));
        Some(out)
    }

    /// A goal tool's request (G3): its answer, and what to do.
    pub fn tool(&mut self, request: GoalToolRequest) -> (ToolOutcome, Vec<GoalEffect>) {
        let kind = self.turn.as_ref().map(|t| t.kind);
        match request {
            GoalToolRequest::Get => {
                let text = self
                    .goal
                    .as_ref()
                    .map_or_else(|| "this session has no goal".to_string(), render);
                (Ok(text), Vec::new())
            }
            GoalToolRequest::Create {
                objective,
                token_budget,
            } => {
                if kind != Some(TurnKind::User) {
                    let refused = ToolError::failed(
                        "create_goal works only in a turn the user started, when they asked for a goal",
                    );
                    return (Err(refused), Vec::new());
                }
                if let Some(goal) = &self.goal
                    && goal.status != GoalStatus::Complete
                {
                    let refused = ToolError::failed(format!(
                        "this session already has a goal ({}); the user can clear it",
                        goal.label()
                    ));
                    return (Err(refused), Vec::new());
                }
                let budgets = super::Budgets {
                    tokens: token_budget,
                    ..Default::default()
                };
                let goal = Goal::new(objective, budgets, Default::default());
                let text = format!(
                    "goal set: {}. The host continues you after this turn until it is verified.",
                    goal.objective
                );
                self.goal = Some(goal);
                (Ok(text), self.changed())
            }
            GoalToolRequest::Propose(proposal) => {
                let active = self.active();
                let Some(turn) = self.turn.as_mut().filter(|t| t.revision.is_some()) else {
                    let refused = ToolError::failed("there is no goal to update in this turn");
                    return (Err(refused), Vec::new());
                };
                if !active || turn.kind == TurnKind::Summary {
                    let refused = ToolError::failed("the goal is not active: nothing to propose");
                    return (Err(refused), Vec::new());
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
                (Ok(text.to_string()), vec![GoalEffect::EndTurn])
            }
            GoalToolRequest::TokenBudget(tokens) => {
                if kind != Some(TurnKind::User) {
                    let refused = ToolError::new(
                        ErrorCode::ToolNotAllowed,
                        "token_budget can change only in a turn the user started (not in a \
                         continuation, a sub-agent or a workflow step)",
                    );
                    return (Err(refused), Vec::new());
                }
                let Some(goal) = self.goal.as_mut() else {
                    let refused = ToolError::failed("this session has no goal");
                    return (Err(refused), Vec::new());
                };
                let budgets = super::Budgets {
                    tokens,
                    ..goal.budgets
                };
                if let Err(refused) = goal.command(GoalCommand::Budget(budgets)) {
                    return (Err(ToolError::failed(refused.to_string())), Vec::new());
                }
                // The model's own change does not make its turn stale.
                let revision = goal.revision;
                if let Some(turn) = self.turn.as_mut() {
                    turn.revision = Some(revision);
                }
                let text = format!(
                    "token budget {}",
                    tokens.map_or("cleared".into(), |t| format!("set to {t}"))
                );
                (Ok(text), self.changed())
            }
        }
    }
}

/// How a turn ended, for the exception classification, from its closing
/// event; and the tokens it spent.
fn turn_end(ending: Option<&Event>) -> (TurnEnd, Usage) {
    match ending {
        Some(Event::TurnCompleted { usage, .. }) => (TurnEnd::Completed, *usage),
        Some(Event::TurnFailed {
            category, usage, ..
        }) => (
            match category {
                FailureCategory::Agent => TurnEnd::Failed,
                FailureCategory::Cancelled => TurnEnd::Cancelled,
                FailureCategory::PausedByDenials => TurnEnd::Withdrawn,
                FailureCategory::Infrastructure => TurnEnd::Provider,
            },
            *usage,
        ),
        // No closing event (a crash reported without one), or another.
        None
        | Some(
            Event::SessionStarted { .. }
            | Event::InputAdmitted { .. }
            | Event::TurnStarted { .. }
            | Event::AssistantDelta { .. }
            | Event::AssistantMessage { .. }
            | Event::AssistantReasoning { .. }
            | Event::ToolCall { .. }
            | Event::ToolResult { .. }
            | Event::AgentToolCall { .. }
            | Event::AgentToolResult { .. }
            | Event::ModelRetry { .. }
            | Event::ModelParamDropped { .. }
            | Event::ContextCompacted { .. }
            | Event::PermissionDecision { .. }
            | Event::ApprovalRequested { .. }
            | Event::ApprovalResolved { .. }
            | Event::PostureChanged { .. }
            | Event::ModelChanged { .. }
            | Event::AutonomyPaused { .. }
            | Event::AgentSpawned { .. }
            | Event::AgentStatusChanged { .. }
            | Event::AgentCompleted { .. }
            | Event::PlanEntered { .. }
            | Event::QuestionnaireOpened { .. }
            | Event::QuestionnaireAnswered { .. }
            | Event::PlanStatus { .. }
            | Event::PlanView { .. }
            | Event::WorkspaceRestored { .. }
            | Event::SessionIdle { .. }
            | Event::ModeChanged { .. }
            | Event::OpRejected { .. }
            | Event::SessionStatus { .. }
            | Event::SessionStopped { .. }
            | Event::WorkflowStarted { .. }
            | Event::StepState { .. }
            | Event::StepOutput { .. }
            | Event::WorkflowCompleted { .. }
            | Event::GoalUpdated { .. }
            | Event::GoalVerification { .. }
            | Event::GoalContinuation { .. }
            | Event::GoalCleared { .. }
            | Event::SessionCompleted { .. },
        ) => (TurnEnd::Failed, Usage::default()),
    }
}

/// `get_goal`'s answer.
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
