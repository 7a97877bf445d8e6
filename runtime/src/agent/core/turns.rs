//! Admission, a turn's start and its end, as the core decides them.
//!
//! A person's message is admitted (one store trip with its mode intent and
//! position) before it is acknowledged; when it runs at once, the same
//! trip records its turn's start. A turn's start is recorded before its
//! actor spawns, and its end is stored before it is announced: a failed
//! write is announced as an infrastructure failure instead. A turn's end
//! withdraws what it left waiting, closes its open calls, and lets the goal
//! settle before the queue moves on.

use std::sync::Arc;

use super::{AgentCore, AgentEffect, Ask, TurnStart, Waiting, Work, Write, reject};
use crate::context::goal_state;
use crate::lifecycle::{QueueEffect, QueueInput, Queued};
use crate::message::{Message, unanswered_calls};
use crate::mode::Mode;
use crate::plan::lifecycle::ModeIntent;
use crate::protocol::{Event, FailureCategory, Op, Usage};
use crate::store::StoreError;
use crate::tool::ErrorCode;

impl AgentCore {
    /// Admits a message (with its mode intent); its turn starts, or it
    /// waits, once the store has it.
    pub(super) fn admit(
        &mut self,
        text: String,
        intent: Option<ModeIntent>,
        cause: Option<String>,
        out: &mut Vec<AgentEffect>,
    ) {
        if intent.is_some() && self.queue.running().is_some() {
            return reject(
                out,
                "user_input",
                "a turn is running: a mode change cannot ride on this message; cancel first, or send it without one",
            );
        }
        if intent == Some(ModeIntent::PlanEntry)
            && let Some(refusal) = crate::plan::lifecycle::entry_refusal(
                self.live.mode(),
                self.questionnaire.as_deref(),
            )
        {
            return reject(out, "user_input", refusal);
        }
        // When the message runs at once, its admission and its turn's start
        // share one trip to the store (two transactions, in that order).
        let starts_now = self.queue.would_start_now();
        let ask = Ask::Admit {
            text: text.clone(),
            intent,
            start_seq: starts_now.then_some(self.conversation.stored() as i64),
        };
        let waiting = Waiting::Admit {
            text,
            intent,
            cause,
            starts_now,
        };
        self.ask(ask, waiting, out);
    }

    pub(super) fn admitted(
        &mut self,
        text: String,
        intent: Option<ModeIntent>,
        cause: Option<String>,
        starts_now: bool,
        admitted: Result<(i64, Option<std::path::PathBuf>), StoreError>,
        out: &mut Vec<AgentEffect>,
    ) {
        let (id, backup) = match admitted {
            Ok(done) => done,
            Err(err) => {
                return out.push(AgentEffect::Emit(Event::OpRejected {
                    op: "user_input".into(),
                    message: format!("the message was not admitted: {err}"),
                    retryable: err.is_retryable(),
                }));
            }
        };
        match intent {
            Some(ModeIntent::PlanEntry) => {
                self.live.set_mode(Mode::Plan);
                out.push(AgentEffect::Emit(Event::PlanEntered {
                    plan_path: self.config.plan_path.clone(),
                    backup: backup.map(|b| b.display().to_string()),
                }));
                out.push(AgentEffect::Emit(Event::ModeChanged { mode: Mode::Plan }));
            }
            Some(ModeIntent::PlanExit) => {
                self.live.set_mode(Mode::Work);
                self.withdraw_questionnaire(out);
                out.push(AgentEffect::Emit(Event::ModeChanged { mode: Mode::Work }));
            }
            None => {}
        }
        let message = Queued {
            id: Some(id),
            text,
            interrupted: false,
            cause,
            internal: false,
        };
        self.start_recorded = starts_now;
        self.agenda
            .push_front(Work::Queue(QueueInput::Admitted(message)));
    }

    /// Does what the queue decided.
    pub(super) fn queued(&mut self, effect: QueueEffect, out: &mut Vec<AgentEffect>) {
        match effect {
            QueueEffect::Acknowledge { queue_length } => {
                out.push(AgentEffect::Emit(Event::InputAdmitted { queue_length }))
            }
            QueueEffect::Start { turn_id, message } => self.start(turn_id, message, out),
            QueueEffect::Cancel { turn_id } => self.cancel(turn_id, out),
            QueueEffect::Idle { turns } => {
                out.push(AgentEffect::Emit(Event::SessionIdle { turns }))
            }
            QueueEffect::Stop { turns } => {
                for (path, child) in self.children.iter() {
                    if child.handle.is_some() {
                        out.push(AgentEffect::SendChild {
                            path,
                            op: Op::Shutdown,
                        });
                    }
                }
                out.push(AgentEffect::Emit(Event::SessionStopped { turns }));
                out.push(AgentEffect::Stop);
            }
        }
    }

    /// A message's turn is due: the goal may skip it (G6); else its start
    /// is recorded (unless the admission did) and its actor spawned.
    pub(super) fn start(&mut self, turn_id: u64, message: Queued, out: &mut Vec<AgentEffect>) {
        let at = self.surroundings();
        let seq = self.conversation.stored();
        if let crate::goal::Gate::Skip(effects) = self.goal.gate(&message, &at, seq, self.now) {
            let mut work: Vec<Work> = effects.into_iter().map(Work::Goal).collect();
            work.push(Work::Queue(QueueInput::Finished { turn_id }));
            return self.first(work);
        }
        let recorded = std::mem::take(&mut self.start_recorded);
        match (recorded, message.id) {
            (false, Some(queue_id)) => {
                let user = (!message.interrupted)
                    .then(|| (seq as i64, Message::user(message.text.clone())));
                self.ask(
                    Ask::StartTurn { queue_id, user },
                    Waiting::StartTurn { turn_id, message },
                    out,
                );
            }
            (true, _) | (false, None) => self.begin_turn(turn_id, message, out),
        }
    }

    /// The turn's start is recorded: its actor starts.
    pub(super) fn begin_turn(&mut self, turn_id: u64, message: Queued, out: &mut Vec<AgentEffect>) {
        if !message.interrupted {
            // Its row was stored with the turn's start.
            self.hold(Arc::new(Message::user(message.text.clone())));
        }
        self.turn_cause = message.cause.clone();
        self.turn_live = true;
        out.push(AgentEffect::SpawnTurn(TurnStart {
            turn_id,
            cause: message.cause,
            compact_first: std::mem::take(&mut self.compact_next),
            tools: !self.goal.summary_turn(),
            budget: self.goal.budget_guard(),
            goal: self.goal.goal().map(goal_state),
            conversation: self.conversation.clone(),
        }));
    }

    /// The turn is told to stop, then its held calls are settled: their
    /// denials still come before the turn's end in the event stream (the
    /// turn's end comes back as a message, after these effects). A turn
    /// held by its claim's verifier: stopping the verifier moves the queue
    /// on.
    pub(super) fn cancel(&mut self, turn_id: u64, out: &mut Vec<AgentEffect>) {
        if self.goal.verifying().is_some() {
            out.push(AgentEffect::StopVerifier);
        }
        // The turn is told first: a withdrawn prompt lets its held call
        // go on (refused), and the turn must read the cancel before that
        // result, or it asks the model again.
        if self.turn_live {
            out.push(AgentEffect::CancelTurn);
        }
        self.withdraw(turn_id, out);
    }

    /// A turn ended (normally, failed, or crashed): its held calls are
    /// withdrawn, its open calls closed, its end stored; only then is
    /// `ending` announced.
    pub(super) fn turn_ended(
        &mut self,
        turn_id: u64,
        ending: Option<Event>,
        out: &mut Vec<AgentEffect>,
    ) {
        if !self.is_current(turn_id) {
            return;
        }
        if std::mem::take(&mut self.turn_live) {
            out.push(AgentEffect::StopTurn);
        }
        self.withdraw(turn_id, out);
        self.answer_unanswered(
            &format!(
                "error ({}): the turn ended before this call was answered",
                ErrorCode::Cancelled
            ),
            out,
        );
        match self.queue.running().and_then(|r| r.queue_id) {
            Some(queue_id) => self.ask(
                Ask::FinishTurn(queue_id),
                Waiting::FinishTurn { turn_id, ending },
                out,
            ),
            None => self.turn_stored(turn_id, ending, Ok(()), out),
        }
    }

    /// The turn's end is stored (or not): announce it, or an
    /// infrastructure failure; then settle the goal, and move the queue on
    /// unless a claim's verifier holds it.
    pub(super) fn turn_stored(
        &mut self,
        turn_id: u64,
        ending: Option<Event>,
        stored: Result<(), StoreError>,
        out: &mut Vec<AgentEffect>,
    ) {
        let closing = ending.clone();
        let cause = self.turn_cause.take();
        match (stored, ending) {
            (Ok(()), Some(event)) => out.push(AgentEffect::EmitAs { cause, event }),
            (Ok(()), None) => {}
            (Err(err), ending) => {
                // Only a turn's two endings carry what it spent.
                let (usage, iterations) = if let Some(
                    Event::TurnCompleted {
                        usage, iterations, ..
                    }
                    | Event::TurnFailed {
                        usage, iterations, ..
                    },
                ) = ending
                {
                    (usage, iterations)
                } else {
                    (Usage::default(), 0)
                };
                out.push(AgentEffect::EmitAs {
                    cause,
                    event: Event::TurnFailed {
                        turn_id,
                        category: FailureCategory::Infrastructure,
                        message: format!("the turn's work could not be stored: {err}"),
                        retryable: true,
                        usage,
                        iterations,
                    },
                });
            }
        }
        let at = self.surroundings();
        let step = self.goal.settle(turn_id, closing.as_ref(), &at, self.now);
        let mut work: Vec<Work> = step.effects.into_iter().map(Work::Goal).collect();
        if !step.holds_queue {
            work.push(Work::Queue(QueueInput::Finished { turn_id }));
        }
        self.first(work);
    }

    /// Appends a message to the conversation and the store.
    pub(super) fn record(&mut self, message: Arc<Message>, out: &mut Vec<AgentEffect>) {
        out.push(AgentEffect::Persist(Write::Append {
            seq: self.conversation.stored() as i64,
            message: message.clone(),
        }));
        self.hold(message);
    }

    /// Takes a stored message into the conversation (and the goal's trace
    /// of the running turn).
    fn hold(&mut self, message: Arc<Message>) {
        self.goal.recorded(&message);
        self.conversation.push(message);
    }

    /// Answers every call the conversation left open with `content` (the
    /// view holds every open call: none is ever replaced by a record).
    pub(super) fn answer_unanswered(&mut self, content: &str, out: &mut Vec<AgentEffect>) {
        for call in unanswered_calls(self.conversation.view()) {
            let answer = Arc::new(Message::Tool {
                call_id: call.id,
                content: content.to_string(),
            });
            self.record(answer, out);
        }
    }
}

/// `turn.failed` for a turn that never ran.
pub(super) fn unstarted(turn_id: u64, message: String, category: FailureCategory) -> Event {
    Event::TurnFailed {
        turn_id,
        category,
        message,
        retryable: category == FailureCategory::Infrastructure,
        usage: Usage::default(),
        iterations: 0,
    }
}
