//! Plan questionnaires (PL4, PL5): opened by `exit_plan_mode` (or
//! `enter_plan_mode`), answered once, each answer one transaction.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::queue::{Admission, admit_in};
use super::{Store, StoreError, mode_text, now};
use crate::mode::Mode;
use crate::plan::lifecycle::{
    Asked, QuestionnaireAnswer, QuestionnaireKind, Transition, transition,
};

/// A questionnaire to open.
#[derive(Debug, Clone)]
pub struct NewQuestionnaire<'a> {
    /// Its id (stable; the implementation message's key derives from it).
    pub id: &'a str,
    /// The session.
    pub session_id: &'a str,
    /// What it asks.
    pub kind: QuestionnaireKind,
    /// The canonical plan file.
    pub plan_path: &'a str,
    /// The frozen snapshot.
    pub snapshot: &'a str,
    /// Its SHA-256.
    pub sha256: &'a str,
    /// Whether the snapshot was cut at 512 KiB.
    pub truncated: bool,
}

/// A stored questionnaire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Questionnaire {
    /// Its id.
    pub id: String,
    /// The session.
    pub session_id: String,
    /// What it asks.
    pub kind: QuestionnaireKind,
    /// The canonical plan file.
    pub plan_path: String,
    /// The frozen snapshot.
    pub snapshot: String,
    /// Its SHA-256.
    pub sha256: String,
    /// Whether the snapshot was cut.
    pub truncated: bool,
    /// `pending`, `approved`, `deferred`, `revised`, `withdrawn`.
    pub state: String,
}

/// What answering changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnswerOutcome {
    /// The session's mode now.
    pub mode: Mode,
    /// The message admitted to carry the answer on (implementation,
    /// feedback, continuation), if any.
    pub admitted: Option<i64>,
    /// False when this exact answer had been given before (nothing changed).
    pub new: bool,
}

impl Store {
    /// Opens a questionnaire; refused while another is pending.
    pub fn open_questionnaire(&mut self, new: &NewQuestionnaire<'_>) -> Result<(), StoreError> {
        let tx = self.begin()?;
        let pending: Option<String> = tx
            .prepare_cached(
                "SELECT id FROM questionnaires WHERE session_id = ?1 AND state = 'pending'",
            )?
            .query_row([new.session_id], |r| r.get(0))
            .optional()?;
        if let Some(id) = pending {
            return Err(StoreError::Conflict(format!(
                "questionnaire {id} is still waiting for an answer"
            )));
        }
        tx
            .prepare_cached("INSERT INTO questionnaires (id, session_id, kind, plan_path, snapshot, sha256, truncated, opened_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?
            .execute(
            params![
                new.id,
                new.session_id,
                new.kind.as_str(),
                new.plan_path,
                new.snapshot,
                new.sha256,
                new.truncated,
                now()
            ],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The session's unanswered questionnaire, if any.
    pub fn pending_questionnaire(
        &self,
        session_id: &str,
    ) -> Result<Option<Questionnaire>, StoreError> {
        self.questionnaire_where("session_id = ?1 AND state = 'pending'", session_id)
    }

    /// A questionnaire by id.
    pub fn questionnaire(&self, id: &str) -> Result<Option<Questionnaire>, StoreError> {
        self.questionnaire_where("id = ?1", id)
    }

    fn questionnaire_where(
        &self,
        filter: &str,
        key: &str,
    ) -> Result<Option<Questionnaire>, StoreError> {
        Ok(self
            .conn
            .prepare_cached(&format!(
                "SELECT id, session_id, kind, plan_path, snapshot, sha256, truncated, state
                     FROM questionnaires WHERE {filter} ORDER BY opened_at DESC LIMIT 1"
            ))?
            .query_row([key], |r| {
                let kind: String = r.get(2)?;
                Ok(Questionnaire {
                    id: r.get(0)?,
                    session_id: r.get(1)?,
                    kind: if kind == "plan_entry" {
                        QuestionnaireKind::PlanEntry
                    } else {
                        QuestionnaireKind::PlanApproval
                    },
                    plan_path: r.get(3)?,
                    snapshot: r.get(4)?,
                    sha256: r.get(5)?,
                    truncated: r.get(6)?,
                    state: r.get(7)?,
                })
            })
            .optional()?)
    }

    /// Answers a questionnaire in one transaction. Approving a plan admits
    /// the implementation message at the front of the queue, keyed by the
    /// questionnaire's id, and returns the session to Work; the same answer
    /// given again changes nothing; a different answer to an answered
    /// questionnaire is refused.
    pub fn answer(
        &mut self,
        session_id: &str,
        id: &str,
        answer: &QuestionnaireAnswer,
    ) -> Result<AnswerOutcome, StoreError> {
        let Some(q) = self
            .questionnaire(id)?
            .filter(|q| q.session_id == session_id)
        else {
            return Err(StoreError::NotFound(format!(
                "session {session_id} has no questionnaire '{id}'"
            )));
        };
        let current_mode = |store: &Store| -> Result<Mode, StoreError> {
            Ok(store
                .session(session_id)?
                .map(|s| s.mode)
                .unwrap_or_default())
        };
        let asked = Asked {
            id,
            kind: q.kind,
            snapshot: &q.snapshot,
            sha256: &q.sha256,
            state: &q.state,
        };
        let (mode, carry) = match transition(asked, answer) {
            Transition::Apply { mode, carry } => (mode, carry),
            Transition::Repeated => {
                return Ok(AnswerOutcome {
                    mode: current_mode(self)?,
                    admitted: None,
                    new: false,
                });
            }
            Transition::Conflict(why) => return Err(StoreError::Conflict(why)),
        };
        // The answer, the mode and the message it admits: one transaction.
        let tx = self.begin()?;
        tx.prepare_cached(
            "UPDATE questionnaires SET state = ?2, feedback = ?3, answered_at = ?4 WHERE id = ?1",
        )?
        .execute(params![id, answer.state(), answer.feedback(), now()])?;
        if let Some(mode) = mode {
            tx.prepare_cached("UPDATE sessions SET mode = ?2, updated_at = ?3 WHERE id = ?1")?
                .execute(params![session_id, mode_text(mode), now()])?;
        }
        let admitted = match carry {
            Some(carry) => Some(
                admit_in(
                    &tx,
                    &Admission {
                        session_id,
                        content: &carry.content,
                        source: carry.source,
                        intent: None,
                        idempotency_key: &carry.key,
                        front: true,
                        plan_sha256: carry.plan_sha256.as_deref(),
                    },
                )?
                .id,
            ),
            None => None,
        };
        tx.commit()?;
        Ok(AnswerOutcome {
            mode: current_mode(self)?,
            admitted,
            new: true,
        })
    }
}
