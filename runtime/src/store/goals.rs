//! A session's goal (G1): one row per session, the record stored whole.
//!
//! A continuation is admitted in the same transaction as the goal that
//! scheduled it ([`Store::admit_continuation`]): a crash leaves either
//! both (the continuation runs once on resume) or neither (the resumed
//! session schedules it again).

use rusqlite::{OptionalExtension, params};

use super::queue::admit_in;
use super::{Admission, Admitted, Source, Store, StoreError, now};
use crate::goal::Goal;

impl Store {
    /// The session's goal, if it has one.
    pub fn goal(&self, session_id: &str) -> Result<Option<Goal>, StoreError> {
        let text: Option<String> = self
            .conn
            .prepare_cached("SELECT record FROM goals WHERE session_id = ?1")?
            .query_row([session_id], |r| r.get(0))
            .optional()?;
        text.map(|t| serde_json::from_str(&t).map_err(StoreError::from))
            .transpose()
    }

    /// Stores the session's goal, replacing the one it had.
    pub fn put_goal(&mut self, session_id: &str, goal: &Goal) -> Result<(), StoreError> {
        let tx = self.begin()?;
        put_in(&tx, session_id, goal)?;
        tx.commit()?;
        Ok(())
    }

    /// Removes the session's goal; true when it had one.
    pub fn clear_goal(&mut self, session_id: &str) -> Result<bool, StoreError> {
        let removed = self
            .conn
            .prepare_cached("DELETE FROM goals WHERE session_id = ?1")?
            .execute([session_id])?;
        Ok(removed > 0)
    }

    /// Stores the goal and admits its continuation `text` at the back of
    /// the queue, in one transaction; `key` makes it idempotent.
    pub fn admit_continuation(
        &mut self,
        session_id: &str,
        goal: &Goal,
        text: &str,
        key: &str,
    ) -> Result<Admitted, StoreError> {
        let tx = self.begin()?;
        put_in(&tx, session_id, goal)?;
        let admitted = admit_in(
            &tx,
            &Admission {
                session_id,
                content: text,
                source: Source::Continuation,
                intent: None,
                idempotency_key: key,
                front: false,
                plan_sha256: None,
            },
        )?;
        tx.commit()?;
        Ok(admitted)
    }
}

fn put_in(tx: &rusqlite::Connection, session_id: &str, goal: &Goal) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO goals (session_id, status, record, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (session_id) DO UPDATE SET status = ?2, record = ?3, updated_at = ?4",
    )?
    .execute(params![
        session_id,
        goal.status.as_str(),
        serde_json::to_string(goal)?,
        now()
    ])?;
    Ok(())
}
