//! Carrying out what the core decided: one [`AgentEffect`] at a time.
//!
//! Only a store trip is waited for (one trip to its thread, a few hundred
//! microseconds), where durability orders it; its answer goes back to the
//! core as the next input. Everything else is sent (a turn's, a child's,
//! a guardian's message), spawned (a turn, a guardian, the verifier, a
//! frozen plan's read on the blocking pool), or answered at once.

use cadre_runtime::agent::core::{AgentEffect, AgentInput, Answer, Ask, PlanRead, Write};
use cadre_runtime::lifecycle::Queued;
use cadre_runtime::plan;
use cadre_runtime::protocol::{Event, Op};
use cadre_runtime::store::{QuestionnaireAnswer, QueuedMessage, Source, StoreError};
use cadre_runtime::tool::ToolError;
use ractor::ActorRef;

use super::{SessionMsg, SessionState};
use crate::store::{GoalRequest, QuestionnaireDraft, StoreRequest};
use crate::turn::TurnMsg;

/// A stored queue row as the core's queue holds it.
pub(super) fn queued(m: QueuedMessage) -> Queued {
    Queued {
        id: Some(m.id),
        text: m.content,
        interrupted: m.interrupted,
        cause: None,
        internal: m.source == Source::Continuation,
    }
}

impl SessionState {
    /// Performs one effect; what it answers goes back to the core.
    pub(super) async fn perform(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        effect: AgentEffect,
    ) -> Option<AgentInput> {
        match effect {
            AgentEffect::Emit(event) => self.emit(event),
            AgentEffect::EmitAs { cause, event } => {
                let previous = self.events.set_cause(cause);
                let _ = self.events.send(event);
                self.events.set_cause(previous);
            }
            AgentEffect::Persist(write) => self.write(write).await,
            AgentEffect::Ask(ask) => return Some(AgentInput::Store(self.ask(ask).await)),
            AgentEffect::Audit {
                call_id,
                tool,
                args,
                posture,
                decision,
                line,
            } => self.audit(call_id, tool, args, posture, decision, line),
            AgentEffect::Reply { ticket, reply } => self.replies.send(ticket, reply),
            AgentEffect::Drop(ticket) => self.replies.drop_port(ticket),
            // The arms that start actors or read files box their futures:
            // inline, every effect (most are a send or a write) would carry
            // their size.
            AgentEffect::SpawnTurn(start) => return Box::pin(self.spawn_turn(myself, start)).await,
            AgentEffect::StopTurn => {
                if let Some(turn) = self.turn.take() {
                    turn.stop(None);
                }
            }
            AgentEffect::CancelTurn => self.tell_turn(TurnMsg::Cancel),
            AgentEffect::EndTurnAfterTools => self.tell_turn(TurnMsg::EndAfterTools),
            AgentEffect::HaltTurn { category, message } => {
                self.tell_turn(TurnMsg::Halt { category, message })
            }
            AgentEffect::CompactTurn => self.tell_turn(TurnMsg::Compact),
            AgentEffect::Review {
                review_id,
                turn_id,
                tool,
                args,
                observations,
            } => {
                return Box::pin(self.review(myself, review_id, turn_id, tool, args, observations))
                    .await;
            }
            AgentEffect::StopReview(review_id) => {
                if let Some(guardian) = self.authority.guardians.remove(&review_id) {
                    guardian.stop(None);
                }
            }
            AgentEffect::Verify {
                turn_id,
                objective,
                claim,
                settings,
                seq,
            } => {
                let claim = super::goal::Claim {
                    turn_id,
                    objective,
                    claim,
                    settings,
                    seq,
                };
                Box::pin(self.verify(myself, claim)).await;
            }
            AgentEffect::StopVerifier => {
                if let Some(stop) = self.verifier.take() {
                    let _ = stop.send(());
                }
            }
            AgentEffect::Freeze { ticket, id } => {
                let path = self.spec.paths.plan_file();
                let snapshot = tokio::task::spawn_blocking(move || plan::freeze(&path))
                    .await
                    .map_err(|_| ToolError::failed("reading the plan was interrupted"))
                    .and_then(|frozen| frozen.map_err(|e| ToolError::failed(e.to_string())));
                return Some(AgentInput::Frozen {
                    ticket,
                    id,
                    snapshot,
                });
            }
            AgentEffect::ReadPlan(read) => Box::pin(self.read_plan(read)).await,
            AgentEffect::Restore { snapshot, dry_run } => {
                return Box::pin(self.restore(snapshot, dry_run)).await;
            }
            AgentEffect::SetModel(model) => {
                self.spec.context = self.spec.context.for_model(&model);
                self.spec.model = Some(model);
            }
            AgentEffect::SendChild { path, op } => {
                let approve = if let Op::Approve { id, .. } = &op {
                    Some(id.clone())
                } else {
                    None
                };
                if !self.children.send(&path, op)
                    && let Some(id) = approve
                {
                    self.reject("approve", format!("no approval prompt has the id '{id}'"));
                }
            }
            AgentEffect::ResumeChild {
                ticket,
                path,
                live,
                prompt,
                background,
            } => {
                return Some(
                    Box::pin(self.resume_child(myself, ticket, path, live, prompt, background))
                        .await,
                );
            }
            AgentEffect::FreeSlot(path) => self.children.free_slot(&path),
            AgentEffect::Log(what) => tracing::info!(parent: &self.span, %what, "agent"),
            AgentEffect::Stop => myself.stop(None),
        }
        None
    }

    fn tell_turn(&self, message: TurnMsg) {
        if let Some(turn) = &self.turn {
            let _ = turn.cast(message);
        }
    }

    /// Runs a write against the store; a failure is logged (the agent
    /// keeps its state in memory; the turn's end reports a lost write).
    async fn write(&mut self, write: Write) {
        if let Write::Goal(goal) = &write
            && goal.status == cadre_runtime::goal::GoalStatus::Complete
        {
            // A met goal's processes are done: the verifier has read them
            // (`docs/processes.md`).
            self.spec.processes.end(None);
        }
        let session_id = self.row.to_string();
        let (written, what) = match write {
            Write::Append { seq, message } => {
                self.store
                    .append(&self.row, vec![(seq, message)], Vec::new(), Vec::new());
                return;
            }
            Write::Posture(posture) => (
                self.store
                    .ask(|reply| StoreRequest::SetPosture {
                        session_id,
                        posture,
                        reply,
                    })
                    .await,
                "the posture",
            ),
            Write::Mode(mode) => (
                self.store
                    .ask(|reply| StoreRequest::SetMode {
                        session_id,
                        mode,
                        enter_plan: None,
                        reply,
                    })
                    .await
                    .map(drop),
                "the mode",
            ),
            Write::Withdraw(id) => {
                let plan_file = self.spec.paths.plan_file();
                (
                    self.store
                        .ask(|reply| StoreRequest::Answer {
                            session_id,
                            id,
                            answer: QuestionnaireAnswer::Withdraw,
                            plan_file,
                            reply,
                        })
                        .await
                        .map(drop),
                    "the questionnaire's withdrawal",
                )
            }
            Write::Done(queue_id) => (
                self.store
                    .ask(|reply| StoreRequest::FinishTurn {
                        session_id,
                        queue_id,
                        reply,
                    })
                    .await,
                "a message as done",
            ),
            Write::Child {
                path,
                state,
                report,
            } => {
                let id = format!("{}/{path}", self.spec.session_id);
                (
                    self.store
                        .ask(|reply| StoreRequest::AgentState {
                            id,
                            state,
                            report,
                            reply,
                        })
                        .await,
                    "a sub-agent's state",
                )
            }
            Write::Goal(goal) => (
                self.store
                    .ask(|reply| {
                        StoreRequest::Goal(GoalRequest::Put {
                            session_id,
                            goal,
                            reply,
                        })
                    })
                    .await,
                "the goal",
            ),
            Write::ForgetGoal => (
                self.store
                    .ask(|reply| StoreRequest::Goal(GoalRequest::Clear { session_id, reply }))
                    .await
                    .map(drop),
                "the goal's removal",
            ),
        };
        if let Err(err) = written {
            tracing::error!(parent: &self.span, %err, what, "the store could not record a change");
        }
    }

    /// One store trip the core waits for.
    async fn ask(&mut self, ask: Ask) -> Answer {
        let session_id = self.row.to_string();
        match ask {
            Ask::Admit {
                text,
                intent,
                start_seq,
            } => {
                let plan_file = self.spec.paths.plan_file();
                let admitted = self
                    .store
                    .ask(|reply| StoreRequest::Admit {
                        session_id,
                        content: text,
                        intent,
                        key: uuid::Uuid::now_v7().to_string(),
                        plan_file,
                        start_seq,
                        reply,
                    })
                    .await;
                Answer::Admitted(admitted.map(|(backup, admitted)| (admitted.id, backup)))
            }
            Ask::StartTurn { queue_id, user } => Answer::Started(
                self.store
                    .ask(|reply| StoreRequest::StartTurn {
                        session_id,
                        queue_id,
                        user,
                        reply,
                    })
                    .await,
            ),
            Ask::FinishTurn(queue_id) => Answer::Finished(
                self.store
                    .ask(|reply| StoreRequest::FinishTurn {
                        session_id,
                        queue_id,
                        reply,
                    })
                    .await,
            ),
            Ask::Continue { goal, text, n } => {
                let key = format!("goal:{}:{}:{n}", self.row, goal.revision);
                let admitted = self
                    .store
                    .ask(|reply| {
                        StoreRequest::Goal(GoalRequest::Continue {
                            session_id,
                            goal,
                            text,
                            key,
                            reply,
                        })
                    })
                    .await;
                Answer::Continued(admitted.map(|admitted| admitted.id))
            }
            Ask::EnterPlan => {
                let plan_file = self.spec.paths.plan_file();
                Answer::Entered(
                    self.store
                        .ask(|reply| StoreRequest::SetMode {
                            session_id,
                            mode: cadre_runtime::Mode::Plan,
                            enter_plan: Some(plan_file),
                            reply,
                        })
                        .await,
                )
            }
            Ask::Answer { id, answer } => {
                let plan_file = self.spec.paths.plan_file();
                Answer::Answered(
                    self.store
                        .ask(|reply| StoreRequest::Answer {
                            session_id,
                            id,
                            answer,
                            plan_file,
                            reply,
                        })
                        .await,
                )
            }
            Ask::Pending => {
                let pending: Result<Vec<QueuedMessage>, StoreError> = self
                    .store
                    .ask(|reply| StoreRequest::Pending { session_id, reply })
                    .await;
                Answer::Pending(pending.map(|rows| rows.into_iter().map(queued).collect()))
            }
            Ask::OpenQuestionnaire {
                id,
                kind,
                snapshot,
                sha256,
                truncated,
            } => {
                let draft = QuestionnaireDraft {
                    id,
                    session_id,
                    kind,
                    plan_path: self.spec.paths.plan_file().display().to_string(),
                    snapshot,
                    sha256,
                    truncated,
                };
                Answer::Opened(
                    self.store
                        .ask(|reply| StoreRequest::OpenQuestionnaire(draft, reply))
                        .await,
                )
            }
        }
    }

    /// `/plan status|view` read the plan file (a small read, on the
    /// mailbox).
    async fn read_plan(&mut self, read: PlanRead) {
        let plan_path = self.spec.paths.plan_file();
        match read {
            PlanRead::Status(pending) => {
                let exists = tokio::fs::try_exists(&plan_path).await.unwrap_or(false);
                self.emit(Event::PlanStatus {
                    mode: self.mode(),
                    plan_path: plan_path.display().to_string(),
                    exists,
                    pending,
                });
            }
            PlanRead::View => {
                let text = tokio::fs::read_to_string(&plan_path).await.ok();
                self.emit(Event::PlanView {
                    plan_path: plan_path.display().to_string(),
                    text,
                });
            }
        }
    }
}
