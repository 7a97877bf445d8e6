//! The plan lifecycle in the session (PL1–PL6).
//!
//! Entering Plan (by `/plan on`, a mode change, an intent on a message, or a
//! confirmed `enter_plan_mode`) backs up an earlier plan and restores it if
//! entry fails; it is refused while a questionnaire waits. `exit_plan_mode`
//! freezes the plan, opens a questionnaire in the store and ends the turn.
//! What an answer does is decided by `plan::lifecycle::transition` and
//! carried out by the store in one transaction: approving puts the
//! implementation message (the fixed instruction, then the frozen snapshot)
//! at the front of the queue, keyed by the questionnaire, and returns the
//! session to Work. `/plan status|view` read the plan file (a small read,
//! on the mailbox).

use cadre_runtime::Mode;
use cadre_runtime::plan::{self, lifecycle};
use cadre_runtime::protocol::{Event, PlanAction};
use cadre_runtime::store::{QuestionnaireAnswer, QuestionnaireKind};
use cadre_runtime::tool::{PlanHost, PlanRequest, ToolError, ToolFuture, ToolOutcome};
use ractor::{ActorRef, RpcReplyPort};

use super::{SessionMsg, SessionState};
use crate::store::{QuestionnaireDraft, StoreRequest};
use crate::turn::TurnMsg;

/// Sends a turn's plan tool requests to its session.
pub(crate) struct SessionPlanHost {
    pub(crate) session: ActorRef<SessionMsg>,
}

impl PlanHost for SessionPlanHost {
    fn request(&self, request: PlanRequest) -> ToolFuture<'static> {
        let session = self.session.clone();
        Box::pin(async move {
            let (reply, answer) = tokio::sync::oneshot::channel();
            session
                .cast(SessionMsg::Plan {
                    request,
                    reply: reply.into(),
                })
                .map_err(|_| ToolError::failed("the session has stopped"))?;
            answer
                .await
                .unwrap_or_else(|_| Err(ToolError::failed("the plan request was dropped")))
        })
    }
}

impl SessionState {
    /// `/plan on|off|status|view`.
    pub(super) async fn plan_op(&mut self, action: PlanAction) {
        match action {
            PlanAction::On | PlanAction::Off if self.busy("plan", "mode") => {}
            PlanAction::On => self.set_mode(Mode::Plan).await,
            PlanAction::Off if self.mode() != Mode::Plan => {
                self.reject("plan", "the session is not in Plan mode")
            }
            PlanAction::Off => self.set_mode(Mode::Work).await,
            PlanAction::Status => {
                let plan_path = self.spec.paths.plan_file();
                let exists = tokio::fs::try_exists(&plan_path).await.unwrap_or(false);
                self.emit(Event::PlanStatus {
                    mode: self.mode(),
                    plan_path: plan_path.display().to_string(),
                    exists,
                    pending: self.questionnaire.clone(),
                });
            }
            PlanAction::View => {
                let plan_path = self.spec.paths.plan_file();
                let text = tokio::fs::read_to_string(&plan_path).await.ok();
                self.emit(Event::PlanView {
                    plan_path: plan_path.display().to_string(),
                    text,
                });
            }
        }
    }

    /// Changes the mode (the caller refused it while a turn runs). Entering
    /// Plan backs the old plan up; leaving it withdraws a waiting plan
    /// questionnaire. Choosing the active mode again records it again. The
    /// agent's descendants see the new mode at their next call.
    pub(super) async fn set_mode(&mut self, mode: Mode) {
        let session_id = self.row.to_string();
        let current = self.live.own_mode();
        if mode == Mode::Plan && current != Mode::Plan {
            if let Some(refusal) = lifecycle::entry_refusal(current, self.questionnaire.as_deref())
            {
                return self.reject("set_mode", refusal);
            }
            let plan_file = self.spec.paths.plan_file();
            let entered = self
                .store
                .ask(|reply| StoreRequest::SetMode {
                    session_id,
                    mode,
                    enter_plan: Some(plan_file),
                    reply,
                })
                .await;
            match entered {
                Ok(backup) => {
                    self.live.set_mode(Mode::Plan);
                    self.emit(Event::PlanEntered {
                        plan_path: self.spec.paths.plan_file().display().to_string(),
                        backup: backup.map(|b| b.display().to_string()),
                    });
                }
                Err(err) => {
                    return self
                        .reject("set_mode", format!("Plan mode could not be entered: {err}"));
                }
            }
        } else {
            if current == Mode::Plan && mode != Mode::Plan {
                self.withdraw_plan_questionnaire().await;
            }
            self.live.set_mode(mode);
            let recorded = self
                .store
                .ask(|reply| StoreRequest::SetMode {
                    session_id,
                    mode,
                    enter_plan: None,
                    reply,
                })
                .await;
            if let Err(err) = recorded {
                tracing::error!(parent: &self.span, %err, "the mode could not be recorded");
            }
        }
        self.emit(Event::ModeChanged { mode });
    }

    /// A plan questionnaire left behind by leaving Plan is withdrawn.
    pub(super) async fn withdraw_plan_questionnaire(&mut self) {
        let Some(id) = self.questionnaire.take() else {
            return;
        };
        let (session_id, qid) = (self.row.to_string(), id.clone());
        let plan_file = self.spec.paths.plan_file();
        let withdrawn = self
            .store
            .ask(|reply| StoreRequest::Answer {
                session_id,
                id: qid,
                answer: QuestionnaireAnswer::Withdraw,
                plan_file,
                reply,
            })
            .await;
        if let Err(err) = withdrawn {
            tracing::error!(parent: &self.span, %err, "the questionnaire could not be withdrawn");
        }
        self.emit(Event::QuestionnaireAnswered {
            id,
            answer: QuestionnaireAnswer::Withdraw,
            mode: Mode::Work,
        });
    }

    /// `exit_plan_mode` / `enter_plan_mode` from a running turn.
    pub(super) async fn plan_request(
        &mut self,
        request: PlanRequest,
        reply: RpcReplyPort<ToolOutcome>,
    ) {
        let outcome = match request {
            PlanRequest::Exit => self.submit_plan().await,
            PlanRequest::Enter { reason } => self.ask_to_enter(reason).await,
        };
        if outcome.is_ok()
            && let Some(turn) = &self.turn
        {
            // The user answers next: the turn ends after this call.
            let _ = turn.cast(TurnMsg::EndAfterTools);
        }
        let _ = reply.send(outcome);
    }

    async fn open_questionnaire(&mut self, draft: QuestionnaireDraft) -> Result<(), ToolError> {
        self.store
            .ask(|reply| StoreRequest::OpenQuestionnaire(draft, reply))
            .await
            .map_err(|e| ToolError::failed(e.to_string()))
    }

    async fn submit_plan(&mut self) -> ToolOutcome {
        if let Some(refusal) =
            lifecycle::submit_refusal(self.mode(), self.queue.len(), self.questionnaire.as_deref())
        {
            return Err(ToolError::failed(refusal));
        }
        let plan_file = self.spec.paths.plan_file();
        let path = plan_file.clone();
        let snapshot = tokio::task::spawn_blocking(move || plan::freeze(&path))
            .await
            .map_err(|_| ToolError::failed("reading the plan was interrupted"))?
            .map_err(|e| ToolError::failed(e.to_string()))?;
        let id = format!("plan-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let plan_path = plan_file.display().to_string();
        self.open_questionnaire(QuestionnaireDraft {
            id: id.clone(),
            session_id: self.row.to_string(),
            kind: QuestionnaireKind::PlanApproval,
            plan_path: plan_path.clone(),
            snapshot: snapshot.text.clone(),
            sha256: snapshot.sha256.clone(),
            truncated: snapshot.truncated,
        })
        .await?;
        self.questionnaire = Some(id.clone());
        self.emit(Event::QuestionnaireOpened {
            id: id.clone(),
            kind: QuestionnaireKind::PlanApproval,
            plan_path,
            sha256: snapshot.sha256.clone(),
            truncated: snapshot.truncated,
            bytes: snapshot.text.len(),
            head: head_lines(&snapshot.text),
        });
        Ok(format!(
            "The plan is frozen (sha256 {}{}) and waits for the user's approval as questionnaire {id}. \
             Stop here: do not call more tools; the user will approve, revise or withdraw it.",
            snapshot.sha256,
            if snapshot.truncated {
                ", truncated at 512 KiB"
            } else {
                ""
            }
        ))
    }

    async fn ask_to_enter(&mut self, reason: String) -> ToolOutcome {
        if !self.spec.plan_agent_entry {
            return Err(ToolError::failed(
                "entering Plan mode is up to the user here",
            ));
        }
        if self.mode() == Mode::Plan {
            return Err(ToolError::failed("the session is already in Plan mode"));
        }
        if let Some(id) = &self.questionnaire {
            return Err(ToolError::failed(format!(
                "questionnaire {id} already waits for an answer"
            )));
        }
        let id = format!("entry-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let plan_path = self.spec.paths.plan_file().display().to_string();
        let head = reason.trim().to_string();
        self.open_questionnaire(QuestionnaireDraft {
            id: id.clone(),
            session_id: self.row.to_string(),
            kind: QuestionnaireKind::PlanEntry,
            plan_path: plan_path.clone(),
            snapshot: reason,
            sha256: String::new(),
            truncated: false,
        })
        .await?;
        self.questionnaire = Some(id.clone());
        self.emit(Event::QuestionnaireOpened {
            id: id.clone(),
            kind: QuestionnaireKind::PlanEntry,
            plan_path,
            sha256: String::new(),
            truncated: false,
            bytes: 0,
            head,
        });
        Ok(format!(
            "Asked the user to confirm entering Plan mode (questionnaire {id}). Stop here and wait."
        ))
    }

    /// A person answers a questionnaire.
    pub(super) async fn answer(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        id: String,
        answer: QuestionnaireAnswer,
    ) {
        if self.queue.running().is_some() {
            return self.reject("answer", "a turn is running: answer when it has ended");
        }
        if !self.spec.is_session() {
            return self.reject("answer", "there is no plan lifecycle in this host");
        }
        let (session_id, qid, given) = (self.row.to_string(), id.clone(), answer.clone());
        let plan_file = self.spec.paths.plan_file();
        let answered = self
            .store
            .ask(|reply| StoreRequest::Answer {
                session_id,
                id: qid,
                answer: given,
                plan_file,
                reply,
            })
            .await;
        let outcome = match answered {
            Ok(outcome) if outcome.new => outcome,
            Ok(_) => {
                return self.reject(
                    "answer",
                    format!("questionnaire {id} was already answered that way"),
                );
            }
            Err(err) => return self.reject("answer", err.to_string()),
        };
        if self.questionnaire.as_deref() == Some(id.as_str()) {
            self.questionnaire = None;
        }
        let changed = outcome.mode != self.live.own_mode();
        self.live.set_mode(outcome.mode);
        self.emit(Event::QuestionnaireAnswered {
            id,
            answer,
            mode: outcome.mode,
        });
        if changed {
            if outcome.mode == Mode::Plan {
                self.emit(Event::PlanEntered {
                    plan_path: self.spec.paths.plan_file().display().to_string(),
                    backup: None,
                });
            }
            self.emit(Event::ModeChanged { mode: outcome.mode });
        }
        self.reload_queue(myself).await;
    }
}

/// A plan's first lines, for the person asked to approve it.
fn head_lines(plan: &str) -> String {
    let lines: Vec<&str> = plan.lines().collect();
    let mut head = lines
        .iter()
        .take(cadre_runtime::protocol::QUESTION_HEAD_LINES)
        .copied()
        .collect::<Vec<_>>()
        .join("\n");
    if lines.len() > cadre_runtime::protocol::QUESTION_HEAD_LINES {
        head.push_str(&format!(
            "\n… {} more lines",
            lines.len() - cadre_runtime::protocol::QUESTION_HEAD_LINES
        ));
    }
    head
}
