//! The plan lifecycle in the core (PL1–PL6).
//!
//! Entering Plan (by `/plan on`, a mode change, an intent on a message, or
//! a confirmed `enter_plan_mode`) backs up an earlier plan in the store's
//! trip; it is refused while a questionnaire waits. `exit_plan_mode` has
//! the actor freeze the plan, then opens a questionnaire and ends the turn.
//! What an answer does is decided by
//! [`transition`](crate::plan::lifecycle::transition) and carried out by the
//! store in one transaction; the core then reads the queue again, since
//! approving puts the implementation message at its front.

use std::path::PathBuf;

use super::{AgentCore, AgentEffect, Ask, PlanRead, Reply, Ticket, Waiting, Write, reject};
use crate::mode::Mode;
use crate::plan::Snapshot;
use crate::plan::lifecycle::{
    QuestionnaireAnswer, QuestionnaireKind, entry_refusal, submit_refusal,
};
use crate::protocol::{Event, PlanAction, QUESTION_HEAD_LINES};
use crate::store::{AnswerOutcome, StoreError};
use crate::tool::{PlanRequest, ToolError};

/// A questionnaire being opened, for when the store has it.
#[derive(Debug)]
pub(super) struct Opening {
    ticket: Ticket,
    id: String,
    kind: QuestionnaireKind,
    sha256: String,
    truncated: bool,
    bytes: usize,
    head: String,
    /// What the tool answers once it is open.
    text: String,
}

impl AgentCore {
    /// `/plan on|off|status|view`.
    pub(super) fn plan_op(&mut self, action: PlanAction, out: &mut Vec<AgentEffect>) {
        match action {
            PlanAction::On | PlanAction::Off if self.busy("plan", "mode", out) => {}
            PlanAction::On => self.set_mode(Mode::Plan, out),
            PlanAction::Off if self.live.mode() != Mode::Plan => {
                reject(out, "plan", "the session is not in Plan mode")
            }
            PlanAction::Off => self.set_mode(Mode::Work, out),
            PlanAction::Status => out.push(AgentEffect::ReadPlan(PlanRead::Status(
                self.questionnaire.clone(),
            ))),
            PlanAction::View => out.push(AgentEffect::ReadPlan(PlanRead::View)),
        }
    }

    /// Changes the mode (the caller refused it while a turn runs).
    /// Entering Plan backs the old plan up; leaving it withdraws a waiting
    /// plan questionnaire. Choosing the active mode again records it
    /// again. The agent's descendants see the new mode at their next call.
    pub(super) fn set_mode(&mut self, mode: Mode, out: &mut Vec<AgentEffect>) {
        let current = self.live.own_mode();
        if mode == Mode::Plan && current != Mode::Plan {
            if let Some(refusal) = entry_refusal(current, self.questionnaire.as_deref()) {
                return reject(out, "set_mode", refusal);
            }
            return self.ask(Ask::EnterPlan, Waiting::EnterPlan, out);
        }
        if current == Mode::Plan && mode != Mode::Plan {
            self.withdraw_questionnaire(out);
        }
        self.live.set_mode(mode);
        out.push(AgentEffect::Persist(Write::Mode(mode)));
        out.push(AgentEffect::Emit(Event::ModeChanged { mode }));
    }

    pub(super) fn plan_entered(
        &mut self,
        entered: Result<Option<PathBuf>, StoreError>,
        out: &mut Vec<AgentEffect>,
    ) {
        match entered {
            Ok(backup) => {
                self.live.set_mode(Mode::Plan);
                out.push(AgentEffect::Emit(Event::PlanEntered {
                    plan_path: self.config.plan_path.clone(),
                    backup: backup.map(|b| b.display().to_string()),
                }));
                out.push(AgentEffect::Emit(Event::ModeChanged { mode: Mode::Plan }));
            }
            Err(err) => reject(
                out,
                "set_mode",
                format!("Plan mode could not be entered: {err}"),
            ),
        }
    }

    /// A plan questionnaire left behind by leaving Plan is withdrawn.
    pub(super) fn withdraw_questionnaire(&mut self, out: &mut Vec<AgentEffect>) {
        let Some(id) = self.questionnaire.take() else {
            return;
        };
        out.push(AgentEffect::Persist(Write::Withdraw(id.clone())));
        out.push(AgentEffect::Emit(Event::QuestionnaireAnswered {
            id,
            answer: QuestionnaireAnswer::Withdraw,
            mode: Mode::Work,
        }));
    }

    /// `exit_plan_mode` / `enter_plan_mode` from a running turn.
    pub(super) fn plan_tool(
        &mut self,
        ticket: Ticket,
        request: PlanRequest,
        nonce: &str,
        out: &mut Vec<AgentEffect>,
    ) {
        let refused = |why: String| AgentEffect::Reply {
            ticket,
            reply: Reply::Tool(Err(ToolError::failed(why))),
        };
        match request {
            PlanRequest::Exit => {
                if let Some(refusal) = submit_refusal(
                    self.live.mode(),
                    self.queue.len(),
                    self.questionnaire.as_deref(),
                ) {
                    return out.push(refused(refusal));
                }
                out.push(AgentEffect::Freeze {
                    ticket,
                    id: format!("plan-{nonce}"),
                });
            }
            PlanRequest::Enter { reason } => {
                if !self.config.plan_agent_entry {
                    return out.push(refused("entering Plan mode is up to the user here".into()));
                }
                if self.live.mode() == Mode::Plan {
                    return out.push(refused("the session is already in Plan mode".into()));
                }
                if let Some(id) = &self.questionnaire {
                    return out.push(refused(format!(
                        "questionnaire {id} already waits for an answer"
                    )));
                }
                let id = format!("entry-{nonce}");
                let opening = Opening {
                    ticket,
                    id: id.clone(),
                    kind: QuestionnaireKind::PlanEntry,
                    sha256: String::new(),
                    truncated: false,
                    bytes: 0,
                    head: reason.trim().to_string(),
                    text: format!(
                        "Asked the user to confirm entering Plan mode (questionnaire {id}). Stop here and wait."
                    ),
                };
                let ask = Ask::OpenQuestionnaire {
                    id,
                    kind: QuestionnaireKind::PlanEntry,
                    snapshot: reason,
                    sha256: String::new(),
                    truncated: false,
                };
                self.ask(ask, Waiting::Questionnaire(Box::new(opening)), out);
            }
        }
    }

    /// The plan file is frozen (or could not be): open its questionnaire.
    pub(super) fn frozen(
        &mut self,
        ticket: Ticket,
        id: String,
        snapshot: Result<Snapshot, ToolError>,
        out: &mut Vec<AgentEffect>,
    ) {
        let snapshot = match snapshot {
            Ok(snapshot) => snapshot,
            Err(error) => {
                return out.push(AgentEffect::Reply {
                    ticket,
                    reply: Reply::Tool(Err(error)),
                });
            }
        };
        let opening = Opening {
            ticket,
            id: id.clone(),
            kind: QuestionnaireKind::PlanApproval,
            sha256: snapshot.sha256.clone(),
            truncated: snapshot.truncated,
            bytes: snapshot.text.len(),
            head: head_lines(&snapshot.text),
            text: format!(
                "The plan is frozen (sha256 {}{}) and waits for the user's approval as questionnaire {id}. \
                 Stop here: do not call more tools; the user will approve, revise or withdraw it.",
                snapshot.sha256,
                if snapshot.truncated {
                    ", truncated at 512 KiB"
                } else {
                    ""
                }
            ),
        };
        let ask = Ask::OpenQuestionnaire {
            id,
            kind: QuestionnaireKind::PlanApproval,
            snapshot: snapshot.text,
            sha256: snapshot.sha256,
            truncated: snapshot.truncated,
        };
        self.ask(ask, Waiting::Questionnaire(Box::new(opening)), out);
    }

    pub(super) fn questionnaire_opened(
        &mut self,
        opening: Opening,
        opened: Result<(), StoreError>,
        out: &mut Vec<AgentEffect>,
    ) {
        let Opening {
            ticket,
            id,
            kind,
            sha256,
            truncated,
            bytes,
            head,
            text,
        } = opening;
        if let Err(err) = opened {
            return out.push(AgentEffect::Reply {
                ticket,
                reply: Reply::Tool(Err(ToolError::failed(err.to_string()))),
            });
        }
        self.questionnaire = Some(id.clone());
        out.push(AgentEffect::Emit(Event::QuestionnaireOpened {
            id,
            kind,
            plan_path: self.config.plan_path.clone(),
            sha256,
            truncated,
            bytes,
            head,
        }));
        if self.turn_live {
            // The user answers next: the turn ends after this call.
            out.push(AgentEffect::EndTurnAfterTools);
        }
        out.push(AgentEffect::Reply {
            ticket,
            reply: Reply::Tool(Ok(text)),
        });
    }

    /// A person answers a questionnaire.
    pub(super) fn answer(
        &mut self,
        id: String,
        answer: QuestionnaireAnswer,
        out: &mut Vec<AgentEffect>,
    ) {
        if self.queue.running().is_some() {
            return reject(out, "answer", "a turn is running: answer when it has ended");
        }
        if !self.config.session {
            return reject(out, "answer", "there is no plan lifecycle in this host");
        }
        let ask = Ask::Answer {
            id: id.clone(),
            answer: answer.clone(),
        };
        self.ask(ask, Waiting::Answer { id, answer }, out);
    }

    pub(super) fn questionnaire_answered(
        &mut self,
        id: String,
        answer: QuestionnaireAnswer,
        outcome: Result<AnswerOutcome, StoreError>,
        out: &mut Vec<AgentEffect>,
    ) {
        let outcome = match outcome {
            Ok(outcome) if outcome.new => outcome,
            Ok(_) => {
                return reject(
                    out,
                    "answer",
                    format!("questionnaire {id} was already answered that way"),
                );
            }
            Err(err) => return reject(out, "answer", err.to_string()),
        };
        if self.questionnaire.as_deref() == Some(id.as_str()) {
            self.questionnaire = None;
        }
        let changed = outcome.mode != self.live.own_mode();
        self.live.set_mode(outcome.mode);
        out.push(AgentEffect::Emit(Event::QuestionnaireAnswered {
            id,
            answer,
            mode: outcome.mode,
        }));
        if changed {
            if outcome.mode == Mode::Plan {
                out.push(AgentEffect::Emit(Event::PlanEntered {
                    plan_path: self.config.plan_path.clone(),
                    backup: None,
                }));
            }
            out.push(AgentEffect::Emit(Event::ModeChanged { mode: outcome.mode }));
        }
        // The store may have put a message at the queue's front.
        self.ask(Ask::Pending, Waiting::Pending, out);
    }
}

/// A plan's first lines, for the person asked to approve it.
pub(super) fn head_lines(plan: &str) -> String {
    let lines: Vec<&str> = plan.lines().collect();
    let mut head = lines
        .iter()
        .take(QUESTION_HEAD_LINES)
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    if lines.len() > QUESTION_HEAD_LINES {
        head.push_str(&format!(
            "\n… {} more lines",
            lines.len() - QUESTION_HEAD_LINES
        ));
    }
    head
}
