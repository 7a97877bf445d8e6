//! The agent as the permission authority for its own calls (P3–P8).
//!
//! A tool task evaluates its call itself, off the mailbox; the core does
//! the bookkeeping the evaluation cannot: it refuses calls of a turn that
//! has ended or while the denial ledger has paused autonomy, opens prompts
//! and guardian reviews (kept by the [`ApprovalBook`](crate::permission::approvals::ApprovalBook)
//! under typed ids), routes a person's answer one hop down to the child
//! below which the asking agent sits, and settles every automatic decision
//! once: audit, `permission.decision`, ledger.

use super::{AgentCore, AgentEffect, CallAsked, Reply, Ticket, reject};
use crate::agent::{ApprovalId, Route};
use crate::permission::approvals::{Asked, Held};
use crate::permission::{Decision, Evaluation, Layer, Posture, Verdict, guardian};
use crate::protocol::{ApprovalDecision, ApprovalOutcome, Event, FailureCategory, Op};

impl AgentCore {
    /// The posture this agent puts in force: Ask while the ledger has
    /// paused autonomy in an interactive host.
    pub fn effective_posture(&self) -> Posture {
        if self.ledger.is_paused() && self.config.interactive && self.posture == Posture::Auto {
            Posture::Suggest
        } else {
            self.posture
        }
    }

    /// Makes the effective posture the one this agent's calls and its
    /// descendants' are decided with, at once.
    pub(super) fn publish_posture(&self) {
        self.live.set_posture(self.effective_posture());
    }

    /// Decides one call, now or once a person or the guardian answers.
    pub(super) fn authorize(
        &mut self,
        ticket: Ticket,
        turn_id: u64,
        call: CallAsked,
        evaluation: Option<Evaluation>,
        posture: Posture,
        out: &mut Vec<AgentEffect>,
    ) {
        let CallAsked {
            call_id,
            tool,
            args,
            refused,
            preview,
        } = call;
        let held = Held {
            turn_id,
            call_id,
            tool,
            args,
            reply: ticket,
        };
        let evaluation = match (refused, evaluation) {
            (Some((gate, refused)), _) => {
                let refused = Decision::new(Verdict::Deny, gate, refused.message);
                return self.settle(held, refused, out);
            }
            (None, Some(evaluation)) => evaluation,
            (None, None) => {
                let unknown =
                    Decision::new(Verdict::Deny, Layer::Posture, "the call was not evaluated");
                return self.settle(held, unknown, out);
            }
        };
        if !self.is_current(turn_id) {
            let ended = Decision::new(Verdict::Deny, Layer::Posture, "the turn has ended");
            return self.settle(held, ended, out);
        }
        if self.ledger.is_paused() && posture == Posture::Auto {
            let paused = Decision::new(
                Verdict::Deny,
                Layer::Ledger,
                "autonomy is paused after too many denials; a person must choose the posture again",
            );
            return self.settle(held, paused, out);
        }
        match evaluation {
            Evaluation::Decided(decision) => self.settle(held, decision, out),
            Evaluation::AskPerson { reason, .. } => self.ask_person(held, reason, preview, out),
            Evaluation::Review { observations } => {
                let (tool, args) = (held.tool.clone(), held.args.clone());
                let review_id = self.approvals.open_review(held);
                out.push(AgentEffect::Review {
                    review_id,
                    turn_id,
                    tool,
                    args,
                    observations,
                });
            }
        }
    }

    fn ask_person(
        &mut self,
        held: Held<Ticket>,
        reason: String,
        preview: Option<String>,
        out: &mut Vec<AgentEffect>,
    ) {
        let (call_id, tool, arguments) =
            (held.call_id.clone(), held.tool.clone(), held.args.clone());
        match self.approvals.ask(held) {
            Asked::Earlier(held, decision) => out.push(AgentEffect::Reply {
                ticket: held.reply,
                reply: Reply::Decision(decision),
            }),
            Asked::Prompt(id) => out.push(AgentEffect::EmitAs {
                cause: self.turn_cause.clone(),
                event: Event::ApprovalRequested {
                    id: id.to_string(),
                    agent_id: self.config.path.to_string(),
                    call_id,
                    tool,
                    arguments,
                    reason,
                    preview,
                },
            }),
        }
    }

    /// A person answered a prompt: this agent's own, or one a descendant
    /// raised, routed one hop down by its typed id.
    pub(super) fn approve(
        &mut self,
        id: &str,
        answer: ApprovalDecision,
        reason: Option<String>,
        out: &mut Vec<AgentEffect>,
    ) {
        let Ok(parsed) = id.parse::<ApprovalId>() else {
            return reject(
                out,
                "approve",
                format!("no approval prompt has the id '{id}'"),
            );
        };
        match self.children.route(&parsed) {
            Route::Child(path) => {
                let op = Op::Approve {
                    id: id.to_string(),
                    decision: answer,
                    reason,
                };
                return out.push(AgentEffect::SendChild {
                    path: path.clone(),
                    op,
                });
            }
            Route::Here | Route::Nowhere => {}
        }
        let Some(mut answered) = self.approvals.answer(&parsed, answer) else {
            return reject(
                out,
                "approve",
                format!("no approval prompt has the id '{id}'"),
            );
        };
        // What the person said goes to the model with the decision.
        if let Some(said) = reason.as_deref().map(str::trim).filter(|r| !r.is_empty()) {
            answered.decision.reason =
                format!("{}; the user says: {said}", answered.decision.reason);
        }
        out.push(AgentEffect::Emit(Event::ApprovalResolved {
            id: id.to_string(),
            outcome: answered.outcome,
        }));
        // The answer is announced before the call runs on it.
        out.push(AgentEffect::Reply {
            ticket: answered.held.reply,
            reply: Reply::Decision(answered.decision),
        });
    }

    /// A turn ended: its open prompts are withdrawn and its reviews
    /// cancelled (a cancelled review denies).
    pub(super) fn withdraw(&mut self, turn_id: u64, out: &mut Vec<AgentEffect>) {
        let withdrawn = self.approvals.withdraw(turn_id);
        for (id, held) in withdrawn.prompts {
            out.push(AgentEffect::Emit(Event::ApprovalResolved {
                id: id.to_string(),
                outcome: ApprovalOutcome::Withdrawn,
            }));
            out.push(AgentEffect::Drop(held.reply));
        }
        for (review_id, held) in withdrawn.reviews {
            out.push(AgentEffect::StopReview(review_id));
            self.settle(held, guardian::failed("the review was cancelled"), out);
        }
    }

    /// Delivers a decision not made by a person: audit, event, ledger.
    pub(super) fn settle(
        &mut self,
        held: Held<Ticket>,
        decision: Decision,
        out: &mut Vec<AgentEffect>,
    ) {
        let posture = self.live.posture();
        let line = decision.line(posture, &held.tool);
        out.push(AgentEffect::Audit {
            call_id: held.call_id.clone(),
            tool: held.tool.clone(),
            args: held.args,
            posture,
            decision: decision.clone(),
            line: line.clone(),
        });
        out.push(AgentEffect::EmitAs {
            cause: self.turn_cause.clone(),
            event: Event::PermissionDecision {
                agent_id: self.config.path.to_string(),
                call_id: held.call_id,
                tool: held.tool,
                decision: decision.clone(),
                line,
            },
        });
        let trip = self.ledger.record(posture, &decision);
        out.push(AgentEffect::Reply {
            ticket: held.reply,
            reply: Reply::Decision(decision),
        });
        if let Some(trip) = trip {
            self.pause_autonomy(trip.reason(), out);
        }
    }

    fn pause_autonomy(&mut self, reason: String, out: &mut Vec<AgentEffect>) {
        if self.config.interactive {
            self.publish_posture();
            out.push(AgentEffect::Emit(Event::AutonomyPaused {
                reason,
                fallback: Some(Posture::Suggest),
            }));
            out.push(AgentEffect::Emit(Event::PostureChanged {
                posture: Posture::Suggest,
            }));
        } else {
            out.push(AgentEffect::Emit(Event::AutonomyPaused {
                reason: reason.clone(),
                fallback: None,
            }));
            if self.turn_live {
                out.push(AgentEffect::HaltTurn {
                    category: FailureCategory::PausedByDenials,
                    message: format!("paused_by_denials: {reason}"),
                });
            }
        }
    }
}
