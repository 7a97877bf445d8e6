//! What an agent decides, as one machine with no I/O (S1–S6, P3–P8,
//! PL1–PL6, G1–G8).
//!
//! [`AgentCore::step`] takes what happened to an agent — a submission, a
//! report of its turn, a tool task's request, a child's end, the answer of
//! a store trip — and returns what the agent actor does, in order
//! ([`AgentEffect`]). It composes the pure machines an agent runs: the turn
//! queue and its one-turn rule ([`TurnQueue`]), the approval book
//! ([`ApprovalBook`]), the child table ([`ChildTable`]), the plan
//! lifecycle (its questionnaire and [`crate::plan::lifecycle`]'s rules) and
//! the goal ([`GoalSession`]).
//!
//! The core never waits. When a decision needs the store's answer (an
//! admitted message's row, whether a turn's end was recorded) it returns
//! [`AgentEffect::Ask`] as its last effect and keeps what it was doing; the
//! actor performs the trip and hands the answer back as
//! [`AgentInput::Store`] before anything else, and the core carries on
//! where it stopped. Reply ports stay with the actor: a [`Ticket`] stands
//! for each, answered by [`AgentEffect::Reply`].
//!
//! # Layout
//! - `io`: [`AgentInput`], [`AgentEffect`], the store's [`Ask`]s, [`Write`]s
//!   and [`Answer`]s.
//! - this file: the core, its agenda, its ops.
//! - `turns`: admission, a turn's start and its end.
//! - `permissions`: decisions, prompts, reviews, the ledger, the posture.
//! - `plan`: modes, questionnaires, the plan tools.
//! - `children`: sub-agents' starts, follow-ups, waits, ends, crashes.
//! - `goal`: the goal's hooks and its effects.

mod children;
mod goal;
mod io;
mod permissions;
mod plan;
mod turns;

#[cfg(test)]
mod tests;

pub use children::child_refusal;
pub use io::{
    AgentEffect, AgentInput, Answer, Ask, CallAsked, ChildStart, First, Opened, PlanRead, Reply,
    RestoredChild, Ticket, TurnStart, Write,
};

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use crate::agent::{AgentPath, ChildTable, LiveAuthority};
use crate::context::Conversation;
use crate::goal::{GoalEffect, GoalSession};
use crate::lifecycle::{QueueEffect, QueueInput, Queued, TurnQueue};
use crate::message::Message;
use crate::permission::Posture;
use crate::permission::approvals::ApprovalBook;
use crate::permission::ledger::DenialLedger;
use crate::plan::lifecycle::ModeIntent;
use crate::protocol::{Activity, Event, FailureCategory, Op};

/// The answer a resume gives a call the stopped process left unanswered.
pub const INTERRUPTED: &str = "interrupted: this call may have run before cadre stopped (a \
     crash or a kill), and cadre did not run it again; check its effects before repeating it";

/// What an agent is, fixed at its start.
#[derive(Debug, Clone)]
pub struct CoreConfig {
    /// Where it sits in its tree: its prompts' ids and its children's
    /// paths start here.
    pub path: AgentPath,
    /// A session has the plan lifecycle and a goal; a sub-agent neither.
    pub session: bool,
    /// Whether a person can answer prompts: a paused ledger falls back to
    /// asking one, else it halts the turn.
    pub interactive: bool,
    /// Whether the model may ask to enter Plan (`enter_plan_mode`).
    pub plan_agent_entry: bool,
    /// The canonical plan file, as events show it.
    pub plan_path: String,
    /// The posture the agent starts with.
    pub posture: Posture,
}

/// An agent's decisions: its queue, prompts, children, plan and goal.
#[derive(Debug)]
pub struct AgentCore {
    config: CoreConfig,
    /// The mode and posture in force, shared with its descendants (who read
    /// them at every call) and its tool tasks: the core writes its own.
    live: Arc<LiveAuthority>,
    /// The posture a person chose; the ledger may put a narrower one in
    /// force.
    posture: Posture,
    /// Denials that pause autonomy (P8).
    ledger: DenialLedger,
    /// Calls waiting for a person or the guardian.
    approvals: ApprovalBook<Ticket>,
    /// Children, each reached by its own path.
    children: ChildTable<AgentPath, Ticket>,
    queue: TurnQueue,
    goal: GoalSession,
    /// The plan questionnaire waiting for a person, which holds entry.
    questionnaire: Option<String>,
    /// What the next request of a turn is built from: the view of the
    /// stored conversation, never the whole of it.
    conversation: Conversation,
    /// The running turn has an actor: it can be cancelled, compacted or
    /// ended (a turn whose claim is being verified has none).
    turn_live: bool,
    /// The submission the running turn answers, for the events it causes
    /// outside its own stream.
    turn_cause: Option<String>,
    /// `Op::Compact` came while idle: the next turn compacts first.
    compact_next: bool,
    /// The admission's trip already recorded the next start.
    start_recorded: bool,
    /// What the core does next, in order; stopped while it waits.
    agenda: VecDeque<Work>,
    /// The store trip the core waits for, and what it does with the answer.
    waiting: Option<Waiting>,
    /// Inputs that came while a store answer was awaited.
    deferred: VecDeque<AgentInput>,
    /// The clock of the step being taken (the goal's budgets read it).
    now: Instant,
}

/// One thing the core still has to do.
#[derive(Debug)]
enum Work {
    /// Step the queue and do what it says, before anything else.
    Queue(QueueInput),
    /// Do what the queue said.
    Queued(QueueEffect),
    /// Do what the goal said.
    Goal(GoalEffect),
    /// Run the agent's first message, once what it resumed has started.
    First(First),
    /// After a resume: an active goal with nothing queued continues.
    GoalResumed,
    /// Hand this effect out when it is reached.
    Effect(AgentEffect),
}

/// What a store answer is for.
#[derive(Debug)]
enum Waiting {
    Admit {
        text: String,
        intent: Option<ModeIntent>,
        cause: Option<String>,
        starts_now: bool,
    },
    StartTurn {
        turn_id: u64,
        message: Queued,
    },
    FinishTurn {
        turn_id: u64,
        ending: Option<Event>,
    },
    Continue {
        text: String,
        n: u64,
    },
    EnterPlan,
    Answer {
        id: String,
        answer: crate::plan::lifecycle::QuestionnaireAnswer,
    },
    Pending,
    Questionnaire(Box<plan::Opening>),
}

impl AgentCore {
    /// The core of an agent whose mode and posture in force live in `live`.
    pub fn new(config: CoreConfig, live: Arc<LiveAuthority>) -> Self {
        Self {
            approvals: ApprovalBook::new(config.path.clone()),
            children: ChildTable::new(config.path.clone()),
            goal: GoalSession::new(config.session),
            posture: config.posture,
            ledger: DenialLedger::default(),
            live,
            queue: TurnQueue::default(),
            questionnaire: None,
            conversation: Conversation::default(),
            turn_live: false,
            turn_cause: None,
            compact_next: false,
            start_recorded: false,
            agenda: VecDeque::new(),
            waiting: None,
            deferred: VecDeque::new(),
            now: Instant::now(),
            config,
        }
    }

    /// Takes one input at `now`, and says what to do.
    pub fn step(&mut self, input: AgentInput, now: Instant) -> Vec<AgentEffect> {
        self.now = now;
        let mut out = Vec::new();
        match (self.waiting.take(), input) {
            (Some(waiting), AgentInput::Store(answer)) => self.answered(waiting, answer, &mut out),
            (Some(waiting), other) => {
                // The actor answers an ask before anything else; an input
                // in between is a fault of the caller, taken once the
                // answer came.
                self.waiting = Some(waiting);
                out.push(AgentEffect::Log(format!(
                    "an input came while the store's answer was awaited: {}",
                    input_name(&other)
                )));
                self.deferred.push_back(other);
                return out;
            }
            (None, input) => self.take(input, &mut out),
        }
        self.drain(&mut out);
        while self.waiting.is_none()
            && let Some(input) = self.deferred.pop_front()
        {
            self.take(input, &mut out);
            self.drain(&mut out);
        }
        out
    }

    /// The conversation as the agent holds it: what its next request
    /// sends, and how many messages are stored.
    pub fn conversation(&self) -> &Conversation {
        &self.conversation
    }

    /// The queue and the running turn.
    pub fn queue(&self) -> &TurnQueue {
        &self.queue
    }

    /// The goal machine (the goal, the claim under verification).
    pub fn goal(&self) -> &GoalSession {
        &self.goal
    }

    /// The children (for the roster).
    pub fn children(&self) -> &ChildTable<AgentPath, Ticket> {
        &self.children
    }

    /// Takes the next child's path (a sub-agent's, or a verifier's seat):
    /// each call numbers a new one.
    pub fn next_child_path(&mut self) -> AgentPath {
        self.children.next_path()
    }

    /// The questionnaire waiting for a person.
    pub fn questionnaire(&self) -> Option<&str> {
        self.questionnaire.as_deref()
    }

    /// The posture a person chose (before the ledger).
    pub fn chosen_posture(&self) -> Posture {
        self.posture
    }

    /// Whether a store answer is awaited.
    pub fn is_waiting(&self) -> bool {
        self.waiting.is_some()
    }

    /// Idle or running.
    pub fn activity(&self) -> Activity {
        if self.queue.running().is_some() {
            Activity::Running
        } else {
            Activity::Idle
        }
    }

    fn is_current(&self, turn_id: u64) -> bool {
        self.queue.running().is_some_and(|r| r.turn_id == turn_id)
    }

    fn take(&mut self, input: AgentInput, out: &mut Vec<AgentEffect>) {
        match input {
            AgentInput::Opened(opened) => self.opened(*opened, out),
            AgentInput::Running { pending, first } => {
                self.agenda
                    .push_back(Work::Queue(QueueInput::Resumed(pending)));
                self.agenda.push_back(Work::GoalResumed);
                if let Some(first) = first {
                    self.agenda.push_back(Work::First(first));
                }
            }
            AgentInput::Op { op, cause } => self.op(op, cause, out),
            AgentInput::Store(_) => out.push(AgentEffect::Log(
                "a store answer came that nothing waited for".into(),
            )),
            AgentInput::Recorded { turn_id, message } => {
                if self.is_current(turn_id) {
                    self.record(message, out);
                }
            }
            AgentInput::TurnEnded { turn_id, ending } => self.turn_ended(turn_id, ending, out),
            AgentInput::TurnUnstarted { turn_id, error } => {
                self.turn_live = false;
                self.turn_cause = None;
                if let Some(queue_id) = self.queue.running().and_then(|r| r.queue_id) {
                    out.push(AgentEffect::Persist(Write::Done(queue_id)));
                }
                out.push(AgentEffect::Emit(turns::unstarted(
                    turn_id,
                    format!("the turn could not start: {error}"),
                    FailureCategory::Agent,
                )));
                self.agenda
                    .push_front(Work::Queue(QueueInput::Finished { turn_id }));
            }
            AgentInput::Note(text) => self.record(Arc::new(Message::user(text)), out),
            AgentInput::Authorize {
                ticket,
                turn_id,
                call,
                evaluation,
                posture,
            } => self.authorize(ticket, turn_id, call, evaluation, posture, out),
            AgentInput::Reviewed {
                review_id,
                decision,
            } => {
                if let Some(held) = self.approvals.review_done(review_id) {
                    self.settle(held, decision, out);
                }
            }
            AgentInput::PlanTool {
                ticket,
                request,
                nonce,
            } => self.plan_tool(ticket, request, &nonce, out),
            AgentInput::Frozen {
                ticket,
                id,
                snapshot,
            } => self.frozen(ticket, id, snapshot, out),
            AgentInput::GoalTool { ticket, request } => {
                let (outcome, effects) = self.goal.tool(request);
                let mut work: Vec<Work> = effects.into_iter().map(Work::Goal).collect();
                work.push(Work::Effect(AgentEffect::Reply {
                    ticket,
                    reply: Reply::Tool(outcome),
                }));
                self.first(work);
            }
            AgentInput::Verdict {
                turn_id,
                outcome,
                usage,
            } => {
                let (at, now) = (self.surroundings(), self.now);
                if let Some(effects) = self.goal.verdict(turn_id, &outcome, usage, &at, now) {
                    let mut work: Vec<Work> = effects.into_iter().map(Work::Goal).collect();
                    work.push(Work::Queue(QueueInput::Finished { turn_id }));
                    self.first(work);
                }
            }
            AgentInput::ChildStarted(start) => self.child_started(*start, out),
            AgentInput::FollowUp {
                ticket,
                path,
                prompt,
                background,
            } => self.follow_up(ticket, path, prompt, background, out),
            AgentInput::ChildResumed {
                ticket,
                path,
                prompt,
                background,
            } => self.child_resumed(ticket, path, prompt, background, out),
            AgentInput::ChildNotResumed {
                ticket,
                path,
                error,
            } => self.child_not_resumed(ticket, &path, error, out),
            AgentInput::Wait { ticket, agent_id } => self.wait(ticket, &agent_id, out),
            AgentInput::ChildDone { path, report } => {
                self.child_done(&path, *report, out);
                self.goal_hook(|goal, at| goal.kick(at));
            }
            AgentInput::ChildCrashed { path, error } => self.child_crashed(&path, &error, out),
        }
    }

    /// Does what is on the agenda until it is empty or a store answer is
    /// awaited.
    fn drain(&mut self, out: &mut Vec<AgentEffect>) {
        while self.waiting.is_none() {
            let Some(work) = self.agenda.pop_front() else {
                break;
            };
            match work {
                Work::Queue(input) => {
                    let effects = self.queue.step(input);
                    self.first(effects.into_iter().map(Work::Queued).collect());
                }
                Work::Queued(effect) => self.queued(effect, out),
                Work::Goal(effect) => self.goal_effect(effect, out),
                Work::First(First::Admitted { text, id }) => {
                    // Its opening recorded its turn's start too.
                    if !self.queue.would_start_now() {
                        out.push(AgentEffect::Log(
                            "a new agent's first message found its queue busy".into(),
                        ));
                    }
                    self.start_recorded = self.queue.would_start_now();
                    let message = Queued {
                        id: Some(id),
                        text,
                        interrupted: false,
                        cause: None,
                        internal: false,
                    };
                    self.agenda
                        .push_front(Work::Queue(QueueInput::Admitted(message)));
                }
                Work::First(First::Queue(text)) => self.admit(text, None, None, out),
                Work::GoalResumed => self.goal_hook(|goal, at| goal.resumed(at)),
                Work::Effect(effect) => out.push(effect),
            }
        }
        if self.waiting.is_none() {
            // A recorded start is for the start the admission decided;
            // none came.
            self.start_recorded = false;
        }
    }

    /// Puts `work` at the front of the agenda, in order.
    fn first(&mut self, work: Vec<Work>) {
        for item in work.into_iter().rev() {
            self.agenda.push_front(item);
        }
    }

    fn ask(&mut self, ask: Ask, waiting: Waiting, out: &mut Vec<AgentEffect>) {
        out.push(AgentEffect::Ask(ask));
        self.waiting = Some(waiting);
    }

    fn answered(&mut self, waiting: Waiting, answer: Answer, out: &mut Vec<AgentEffect>) {
        match (waiting, answer) {
            (
                Waiting::Admit {
                    text,
                    intent,
                    cause,
                    starts_now,
                },
                Answer::Admitted(admitted),
            ) => self.admitted(text, intent, cause, starts_now, admitted, out),
            (Waiting::StartTurn { turn_id, message }, Answer::Started(started)) => match started {
                Ok(()) => self.begin_turn(turn_id, message, out),
                Err(err) => {
                    out.push(AgentEffect::Emit(turns::unstarted(
                        turn_id,
                        format!("the turn could not be recorded as started: {err}"),
                        FailureCategory::Infrastructure,
                    )));
                    self.agenda
                        .push_front(Work::Queue(QueueInput::Finished { turn_id }));
                }
            },
            (Waiting::FinishTurn { turn_id, ending }, Answer::Finished(stored)) => {
                self.turn_stored(turn_id, ending, stored, out)
            }
            (Waiting::Continue { text, n }, Answer::Continued(continued)) => {
                self.continued(text, n, continued, out)
            }
            (Waiting::EnterPlan, Answer::Entered(entered)) => self.plan_entered(entered, out),
            (Waiting::Answer { id, answer }, Answer::Answered(outcome)) => {
                self.questionnaire_answered(id, answer, outcome, out)
            }
            (Waiting::Pending, Answer::Pending(pending)) => match pending {
                Ok(stored) => self
                    .agenda
                    .push_front(Work::Queue(QueueInput::Reloaded(stored))),
                Err(err) => out.push(AgentEffect::Log(format!(
                    "the queue could not be read: {err}"
                ))),
            },
            (Waiting::Questionnaire(opening), Answer::Opened(opened)) => {
                self.questionnaire_opened(*opening, opened, out)
            }
            (waiting, answer) => out.push(AgentEffect::Log(format!(
                "the store answered {answer:?} while {waiting:?} was awaited"
            ))),
        }
    }

    fn opened(&mut self, opened: Opened, out: &mut Vec<AgentEffect>) {
        // A sub-agent's mode and posture come from its parent, at spawn; a
        // session's from the store (the host's flags already applied).
        if let (true, Some((mode, posture))) = (self.config.session, opened.stored) {
            self.live.set_mode(mode);
            self.posture = posture;
            self.publish_posture();
        }
        self.conversation = opened.conversation;
        self.queue = TurnQueue::after(opened.turns);
        self.questionnaire = opened.questionnaire;
        for child in opened.children {
            self.children
                .restored(&child.path, child.role, child.state, child.report);
        }
        // A crash can leave calls without answers; the next request must
        // answer every one. A side-effecting call was stored before it
        // started, so it may have run: the model is told so, and cadre
        // never runs it again itself (the exactly-once rule).
        self.answer_unanswered(INTERRUPTED, out);
        self.goal.restore(opened.goal);
    }

    fn op(&mut self, op: Op, cause: Option<String>, out: &mut Vec<AgentEffect>) {
        match op {
            Op::UserInput { text, intent } => {
                if self.queue.stopping() {
                    return reject(out, "user_input", "the session is shutting down");
                }
                self.ledger.user_message();
                self.goal.user_message();
                self.publish_posture();
                self.admit(text, intent, cause, out);
            }
            Op::SetMode { mode } => {
                if !self.busy("set_mode", "mode", out) {
                    self.set_mode(mode, out);
                }
            }
            Op::Plan { action } => self.plan_op(action, out),
            Op::Answer { id, answer } => self.answer(id, answer, out),
            Op::SetPosture { posture } => {
                if self.busy("set_posture", "posture", out) {
                    return;
                }
                self.posture = posture;
                self.ledger.resume();
                self.publish_posture();
                out.push(AgentEffect::Persist(Write::Posture(posture)));
                out.push(AgentEffect::Emit(Event::PostureChanged { posture }));
            }
            Op::SetModel { model } => {
                if self.busy("set_model", "model", out) {
                    return;
                }
                let model = model.trim();
                if model.is_empty() {
                    return reject(out, "set_model", "the model name is empty");
                }
                out.push(AgentEffect::SetModel(model.to_string()));
                out.push(AgentEffect::Emit(Event::ModelChanged {
                    model: model.to_string(),
                }));
            }
            Op::Approve {
                id,
                decision,
                reason,
            } => self.approve(&id, decision, reason, out),
            Op::Cancel => match self.queue.running() {
                Some(running) => self.cancel(running.turn_id, out),
                None => reject(out, "cancel", "no turn is running"),
            },
            Op::Status => out.push(AgentEffect::Emit(Event::SessionStatus {
                activity: self.activity(),
                mode: self.live.mode(),
                posture: self.effective_posture(),
                queue_length: self.queue.len(),
                turns: self.queue.turns(),
            })),
            Op::Restore { snapshot, dry_run } => {
                if !self.busy("restore", "workspace", out) {
                    out.push(AgentEffect::Restore { snapshot, dry_run });
                }
            }
            Op::Goal { action } => {
                let at = self.surroundings();
                let effects = self.goal.op(*action, &at);
                self.first(effects.into_iter().map(Work::Goal).collect());
            }
            Op::Compact => {
                if self.turn_live {
                    out.push(AgentEffect::CompactTurn);
                } else {
                    self.compact_next = true;
                }
            }
            Op::Shutdown => self.agenda.push_back(Work::Queue(QueueInput::Shutdown)),
        }
    }

    /// Refuses a change while a turn runs (M6).
    fn busy(&self, op: &str, what: &str, out: &mut Vec<AgentEffect>) -> bool {
        if self.queue.running().is_some() {
            reject(
                out,
                op,
                format!(
                    "a turn is running: cancel it first (Ctrl-C, or the `cancel` op), then change the {what}"
                ),
            );
            return true;
        }
        false
    }
}

/// `op.rejected`, not retryable.
fn reject(out: &mut Vec<AgentEffect>, op: &str, message: impl Into<String>) {
    out.push(AgentEffect::Emit(Event::OpRejected {
        op: op.to_string(),
        message: message.into(),
        retryable: false,
    }));
}

fn input_name(input: &AgentInput) -> &'static str {
    match input {
        AgentInput::Opened(_) => "opened",
        AgentInput::Running { .. } => "running",
        AgentInput::Op { .. } => "op",
        AgentInput::Store(_) => "store",
        AgentInput::Recorded { .. } => "recorded",
        AgentInput::TurnEnded { .. } => "turn ended",
        AgentInput::TurnUnstarted { .. } => "turn unstarted",
        AgentInput::Note(_) => "note",
        AgentInput::Authorize { .. } => "authorize",
        AgentInput::Reviewed { .. } => "reviewed",
        AgentInput::PlanTool { .. } => "plan tool",
        AgentInput::Frozen { .. } => "frozen",
        AgentInput::GoalTool { .. } => "goal tool",
        AgentInput::Verdict { .. } => "verdict",
        AgentInput::ChildStarted(_) => "child started",
        AgentInput::FollowUp { .. } => "follow-up",
        AgentInput::ChildResumed { .. } => "child resumed",
        AgentInput::ChildNotResumed { .. } => "child not resumed",
        AgentInput::Wait { .. } => "wait",
        AgentInput::ChildDone { .. } => "child done",
        AgentInput::ChildCrashed { .. } => "child crashed",
    }
}
