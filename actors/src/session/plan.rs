//! The plan lifecycle in the session (PL1–PL6).
//!
//! Entering Plan (by `/plan on`, a mode change, an intent on a message, or a
//! confirmed `enter_plan_mode`) backs up an earlier plan and restores it if
//! entry fails; it is refused while a questionnaire waits. `exit_plan_mode`
//! freezes the plan, opens a questionnaire in the store and ends the turn.
//! The answer is one store transaction: approving puts the implementation
//! message (the fixed instruction, then the frozen snapshot) at the front of
//! the queue, keyed by the questionnaire, and returns the session to Work.

use cadre_runtime::Mode;
use cadre_runtime::plan::{self, EntryError};
use cadre_runtime::protocol::{Event, PlanAction};
use cadre_runtime::store::{NewQuestionnaire, QuestionnaireAnswer, QuestionnaireKind, StoreError};
use cadre_runtime::tool::{PlanHost, PlanRequest, ToolError, ToolFuture, ToolOutcome};
use ractor::ActorRef;
use tokio::sync::oneshot;

use super::{SessionMsg, SessionState};
use crate::turn::TurnMsg;

/// Sends a turn's plan tool requests to its session.
pub(crate) struct SessionPlanHost {
    pub(crate) session: ActorRef<SessionMsg>,
}

impl PlanHost for SessionPlanHost {
    fn request(&self, request: PlanRequest) -> ToolFuture<'static> {
        let session = self.session.clone();
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            session
                .cast(SessionMsg::Plan { request, reply })
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
            PlanAction::On | PlanAction::Off if self.running.is_some() => self.reject(
                "plan",
                "a turn is running: cancel it first (Ctrl-C, or the `cancel` op), then change the mode",
            ),
            PlanAction::On => self.set_mode(Mode::Plan).await,
            PlanAction::Off if self.mode != Mode::Plan => {
                self.reject("plan", "the session is not in Plan mode")
            }
            PlanAction::Off => self.set_mode(Mode::Work).await,
            PlanAction::Status => {
                let plan_path = self.config.paths.plan_file();
                let exists = tokio::fs::try_exists(&plan_path).await.unwrap_or(false);
                self.emit(Event::PlanStatus {
                    mode: self.mode,
                    plan_path: plan_path.display().to_string(),
                    exists,
                    pending: self.questionnaire.clone(),
                });
            }
            PlanAction::View => {
                let plan_path = self.config.paths.plan_file();
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
    /// questionnaire. Choosing the active mode again records it again.
    pub(super) async fn set_mode(&mut self, mode: Mode) {
        if mode == Mode::Plan && self.mode != Mode::Plan {
            if let Some(id) = &self.questionnaire {
                return self.reject(
                    "set_mode",
                    format!("questionnaire {id} waits for an answer: answer it before entering Plan mode"),
                );
            }
            let plan_file = self.config.paths.plan_file();
            let entered = match &self.store {
                Some(store) => {
                    let id = self.config.session_id.clone();
                    store
                        .call(move |s| entry(&plan_file, || s.set_mode(&id, Mode::Plan)))
                        .await
                }
                None => entry(&plan_file, || Ok(())),
            };
            match entered {
                Ok(backup) => {
                    self.mode = Mode::Plan;
                    self.emit(Event::PlanEntered {
                        plan_path: self.config.paths.plan_file().display().to_string(),
                        backup: backup.map(|b| b.display().to_string()),
                    });
                }
                Err(err) => {
                    return self
                        .reject("set_mode", format!("Plan mode could not be entered: {err}"));
                }
            }
        } else {
            if self.mode == Mode::Plan && mode != Mode::Plan {
                self.withdraw_plan_questionnaire().await;
            }
            self.mode = mode;
            self.persist(move |s, id| s.set_mode(id, mode)).await;
        }
        self.emit(Event::ModeChanged { mode });
    }

    /// A plan questionnaire left behind by leaving Plan is withdrawn.
    pub(super) async fn withdraw_plan_questionnaire(&mut self) {
        let Some(id) = self.questionnaire.take() else {
            return;
        };
        let qid = id.clone();
        self.persist(move |s, session| {
            s.answer(session, &qid, &QuestionnaireAnswer::Withdraw)
                .map(|_| ())
        })
        .await;
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
        reply: oneshot::Sender<ToolOutcome>,
    ) {
        let outcome = match request {
            PlanRequest::Exit => self.submit_plan().await,
            PlanRequest::Enter { reason } => self.ask_to_enter(reason).await,
        };
        if outcome.is_ok()
            && let Some(running) = &self.running
        {
            // The user answers next: the turn ends after this call.
            let _ = running.actor.cast(TurnMsg::EndAfterTools);
        }
        let _ = reply.send(outcome);
    }

    async fn submit_plan(&mut self) -> ToolOutcome {
        if self.mode != Mode::Plan {
            return Err(ToolError::failed("exit_plan_mode works only in Plan mode"));
        }
        if !self.queue.is_empty() {
            return Err(ToolError::failed(format!(
                "{} message(s) wait in the queue; the plan can be submitted only when it is empty",
                self.queue.len()
            )));
        }
        if let Some(id) = &self.questionnaire {
            return Err(ToolError::failed(format!(
                "questionnaire {id} already waits for an answer"
            )));
        }
        let Some(store) = self.store.clone() else {
            return Err(ToolError::failed("there is no plan lifecycle in this host"));
        };
        let plan_file = self.config.paths.plan_file();
        let path = plan_file.clone();
        let snapshot = tokio::task::spawn_blocking(move || plan::freeze(&path))
            .await
            .map_err(|_| ToolError::failed("reading the plan was interrupted"))?
            .map_err(|e| ToolError::failed(e.to_string()))?;
        let id = format!("plan-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let (qid, session) = (id.clone(), self.config.session_id.clone());
        let (text, sha, truncated) = (
            snapshot.text.clone(),
            snapshot.sha256.clone(),
            snapshot.truncated,
        );
        let plan_path = plan_file.display().to_string();
        let stored_path = plan_path.clone();
        store
            .call(move |s| {
                s.open_questionnaire(&NewQuestionnaire {
                    id: &qid,
                    session_id: &session,
                    kind: QuestionnaireKind::PlanApproval,
                    plan_path: &stored_path,
                    snapshot: &text,
                    sha256: &sha,
                    truncated,
                })
            })
            .await
            .map_err(|e| ToolError::failed(e.to_string()))?;
        self.questionnaire = Some(id.clone());
        self.emit(Event::QuestionnaireOpened {
            id: id.clone(),
            kind: QuestionnaireKind::PlanApproval,
            plan_path,
            sha256: snapshot.sha256.clone(),
            truncated: snapshot.truncated,
            bytes: snapshot.text.len(),
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
        if !self.config.plan_agent_entry {
            return Err(ToolError::failed(
                "entering Plan mode is up to the user here",
            ));
        }
        if self.mode == Mode::Plan {
            return Err(ToolError::failed("the session is already in Plan mode"));
        }
        if let Some(id) = &self.questionnaire {
            return Err(ToolError::failed(format!(
                "questionnaire {id} already waits for an answer"
            )));
        }
        let Some(store) = self.store.clone() else {
            return Err(ToolError::failed("there is no plan lifecycle in this host"));
        };
        let id = format!("entry-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
        let (qid, session) = (id.clone(), self.config.session_id.clone());
        let plan_path = self.config.paths.plan_file().display().to_string();
        let stored_path = plan_path.clone();
        store
            .call(move |s| {
                s.open_questionnaire(&NewQuestionnaire {
                    id: &qid,
                    session_id: &session,
                    kind: QuestionnaireKind::PlanEntry,
                    plan_path: &stored_path,
                    snapshot: &reason,
                    sha256: "",
                    truncated: false,
                })
            })
            .await
            .map_err(|e| ToolError::failed(e.to_string()))?;
        self.questionnaire = Some(id.clone());
        self.emit(Event::QuestionnaireOpened {
            id: id.clone(),
            kind: QuestionnaireKind::PlanEntry,
            plan_path,
            sha256: String::new(),
            truncated: false,
            bytes: 0,
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
        if self.running.is_some() {
            return self.reject("answer", "a turn is running: answer when it has ended");
        }
        let Some(store) = self.store.clone() else {
            return self.reject("answer", "there is no plan lifecycle in this host");
        };
        let (qid, session, given) = (id.clone(), self.config.session_id.clone(), answer.clone());
        let plan_file = self.config.paths.plan_file();
        let answered = store
            .call(move |s| {
                let kind = s.questionnaire(&qid)?.map(|q| q.kind);
                if kind == Some(QuestionnaireKind::PlanEntry)
                    && given == QuestionnaireAnswer::Approve
                {
                    // A confirmed entry backs up the old plan like any entry.
                    let mut outcome = None;
                    entry(&plan_file, || {
                        outcome = Some(s.answer(&session, &qid, &given)?);
                        Ok(())
                    })?;
                    outcome.ok_or_else(|| StoreError::Sql("the answer vanished".into()))
                } else {
                    s.answer(&session, &qid, &given)
                }
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
        let changed = outcome.mode != self.mode;
        self.mode = outcome.mode;
        self.emit(Event::QuestionnaireAnswered {
            id,
            answer,
            mode: outcome.mode,
        });
        if changed {
            if outcome.mode == Mode::Plan {
                self.emit(Event::PlanEntered {
                    plan_path: self.config.paths.plan_file().display().to_string(),
                    backup: None,
                });
            }
            self.emit(Event::ModeChanged { mode: outcome.mode });
        }
        self.reload_queue().await;
        self.start_next(myself).await;
        if self.running.is_none() {
            self.emit(Event::SessionIdle { turns: self.turns });
        }
    }
}

/// Enters Plan around `commit`, backing up (and on failure restoring) the
/// old plan; store errors pass through.
fn entry(
    plan_file: &std::path::Path,
    commit: impl FnOnce() -> Result<(), StoreError>,
) -> Result<Option<std::path::PathBuf>, StoreError> {
    plan::enter(plan_file, commit)
        .map(|(backup, ())| backup)
        .map_err(|e| match e {
            EntryError::Backup(why) => {
                StoreError::Conflict(format!("the earlier plan could not be backed up: {why}"))
            }
            EntryError::Commit(err) => err,
        })
}
