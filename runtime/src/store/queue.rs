//! Admission, the queue, the conversation, events and the audit.
//!
//! A message is *admitted* once, in one transaction with its mode intent and
//! its queue position; its idempotency key makes a repeated admission (a
//! retried request, an answer given twice) a no-op. A message then runs as
//! a turn: starting the turn marks it `running` and stores it in the
//! conversation in one transaction; finishing marks it `done`. A process
//! killed in between finds it `running` on resume and continues that turn
//! instead of running the message again.

use std::sync::Arc;

use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{ModeIntent, Store, StoreError, mode_text, now};
use crate::context::Conversation;
use crate::message::Message;
use crate::mode::Mode;

/// Who put a message in the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The user typed it.
    User,
    /// An answer to a questionnaire (an approved plan, revision feedback).
    Questionnaire,
    /// The host continues work on its own.
    Continuation,
}

impl Source {
    fn as_str(self) -> &'static str {
        match self {
            Source::User => "user",
            Source::Questionnaire => "questionnaire",
            Source::Continuation => "continuation",
        }
    }

    fn parse(text: &str) -> Source {
        match text {
            "questionnaire" => Source::Questionnaire,
            "continuation" => Source::Continuation,
            _ => Source::User,
        }
    }
}

/// A message to admit.
#[derive(Debug, Clone)]
pub struct Admission<'a> {
    /// The session.
    pub session_id: &'a str,
    /// The text.
    pub content: &'a str,
    /// Who sent it.
    pub source: Source,
    /// A mode change that takes effect with it.
    pub intent: Option<ModeIntent>,
    /// Unique per message; admitting the same key again does nothing.
    pub idempotency_key: &'a str,
    /// Put it at the front of the queue (an approved plan's implementation).
    pub front: bool,
    /// The SHA-256 of the plan snapshot it carries, if any.
    pub plan_sha256: Option<&'a str>,
}

/// The result of an admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Admitted {
    /// The queue row.
    pub id: i64,
    /// Its position.
    pub position: i64,
    /// False when the key had been admitted before (nothing changed).
    pub new: bool,
}

/// A message waiting for (or in) its turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedMessage {
    /// The queue row.
    pub id: i64,
    /// The text.
    pub content: String,
    /// Who sent it.
    pub source: Source,
    /// True when its turn started and never finished (a crash): resume
    /// continues that turn rather than running the message again.
    pub interrupted: bool,
    /// The plan snapshot's SHA-256, for an implementation message.
    pub plan_sha256: Option<String>,
}

impl Store {
    /// Admits a message: the message, its mode intent and its position
    /// commit together or not at all.
    pub fn admit(&mut self, admission: &Admission<'_>) -> Result<Admitted, StoreError> {
        let tx = self.begin()?;
        let admitted = admit_in(&tx, admission)?;
        tx.commit()?;
        Ok(admitted)
    }

    /// Messages not yet done, in order: an interrupted one first, then the
    /// queue by position.
    pub fn pending(&self, session_id: &str) -> Result<Vec<QueuedMessage>, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT id, content, source, state, plan_sha256 FROM queue
             WHERE session_id = ?1 AND state != 'done'
             ORDER BY state = 'running' DESC, position, id",
        )?;
        let rows = statement
            .query_map([session_id], |r| {
                let source: String = r.get(2)?;
                let state: String = r.get(3)?;
                Ok(QueuedMessage {
                    id: r.get(0)?,
                    content: r.get(1)?,
                    source: Source::parse(&source),
                    interrupted: state == "running",
                    plan_sha256: r.get(4)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Starts a message's turn: it is marked running and, unless it is a
    /// continuation of an interrupted turn, stored in the conversation at
    /// `seq`, in one transaction.
    pub fn start_turn(
        &mut self,
        session_id: &str,
        queue_id: i64,
        user_message: Option<(i64, &Message)>,
    ) -> Result<(), StoreError> {
        let tx = self.begin()?;
        mark_running(&tx, session_id, queue_id, user_message)?;
        tx.prepare_cached("UPDATE sessions SET updated_at = ?2 WHERE id = ?1")?
            .execute(params![session_id, now()])?;
        tx.commit()?;
        Ok(())
    }

    /// Admits a message and starts its turn at `seq` in one transaction:
    /// [`Store::admit`] then [`Store::start_turn`], with the session's row
    /// written once. An admission already made (its key seen before) starts
    /// that message's turn.
    pub fn admit_and_start(
        &mut self,
        admission: &Admission<'_>,
        seq: i64,
        message: &Message,
    ) -> Result<Admitted, StoreError> {
        let tx = self.begin()?;
        let admitted = admit_in(&tx, admission)?;
        mark_running(&tx, admission.session_id, admitted.id, Some((seq, message)))?;
        tx.commit()?;
        Ok(admitted)
    }

    /// Admits the first message of a session created in the same
    /// transaction, its turn started (the conversation's first entry), as
    /// [`Store::admit_and_start`] at `seq` 0 would, without its lookups:
    /// the session has no queue yet, so the message goes in at position 0,
    /// running. A key already used elsewhere fails (a new session's key is
    /// new).
    pub fn start_first(
        &mut self,
        admission: &Admission<'_>,
        message: &Message,
    ) -> Result<Admitted, StoreError> {
        if admission.intent.is_some() {
            return self.admit_and_start(admission, 0, message);
        }
        let tx = self.begin()?;
        tx.prepare_cached(
            "INSERT INTO queue (session_id, position, source, content, idem_key, plan_sha256, state, admitted_at)
             VALUES (?1, 0, ?2, ?3, ?4, ?5, 'running', ?6)",
        )?
        .execute(params![
            admission.session_id,
            admission.source.as_str(),
            admission.content,
            admission.idempotency_key,
            admission.plan_sha256,
            now()
        ])?;
        let id = tx.last_insert_rowid();
        put_message(&tx, admission.session_id, 0, message)?;
        touch_session(&tx, admission)?;
        tx.commit()?;
        Ok(Admitted {
            id,
            position: 0,
            new: true,
        })
    }

    /// Appends recorded messages, events and audit records in one
    /// transaction (the session batches them).
    pub fn append(
        &mut self,
        session_id: &str,
        messages: &[(i64, Arc<Message>)],
        events: &[String],
        audit: &[(String, String, String)],
    ) -> Result<(), StoreError> {
        let tx = self.begin()?;
        {
            let mut put = tx.prepare_cached(
                "INSERT OR REPLACE INTO conversation (session_id, seq, message) VALUES (?1, ?2, ?3)",
            )?;
            for (seq, message) in messages {
                put.execute(params![
                    session_id,
                    seq,
                    serde_json::to_string(message.as_ref())?
                ])?;
            }
            // A batch of events is one row, one JSON object per line (JSON
            // escapes every newline inside a string).
            if !events.is_empty() {
                tx.prepare_cached("INSERT INTO events (session_id, event) VALUES (?1, ?2)")?
                    .execute(params![session_id, events.join("\n")])?;
            }
            let mut record = tx.prepare_cached(
                "INSERT INTO audit (session_id, agent_id, call_id, record) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for (agent, call, r) in audit {
                record.execute(params![session_id, agent, call, r])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// How many of the session's turns have ended: the next turn's id is
    /// one more (an interrupted turn, which continues, gets its own id
    /// back), so turn ids go on across resumes.
    pub fn turns_done(&self, session_id: &str) -> Result<u64, StoreError> {
        let done: i64 = self
            .conn
            .prepare_cached("SELECT count(*) FROM queue WHERE session_id = ?1 AND state = 'done'")?
            .query_row([session_id], |r| r.get(0))?;
        Ok(u64::try_from(done).unwrap_or_default())
    }

    /// Marks a message's turn done.
    pub fn finish_turn(&mut self, session_id: &str, queue_id: i64) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("UPDATE queue SET state = 'done' WHERE id = ?1 AND session_id = ?2")?
            .execute(params![queue_id, session_id])?;
        Ok(())
    }

    /// The stored conversation, in order.
    pub fn conversation(&self, session_id: &str) -> Result<Vec<Message>, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT message FROM conversation WHERE session_id = ?1 ORDER BY seq",
        )?;
        let texts: Vec<String> = statement
            .query_map([session_id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        texts
            .iter()
            .map(|t| serde_json::from_str(t).map_err(StoreError::from))
            .collect()
    }

    /// The conversation as an agent holds it ([`Conversation`]: what its
    /// next request sends), read row by row: the stored history is never
    /// in memory whole.
    pub fn held_conversation(&self, session_id: &str) -> Result<Conversation, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT message FROM conversation WHERE session_id = ?1 ORDER BY seq",
        )?;
        let mut rows = statement.query([session_id])?;
        let mut conversation = Conversation::default();
        while let Some(row) = rows.next()? {
            let text: String = row.get(0)?;
            conversation.push(Arc::new(serde_json::from_str(&text)?));
        }
        Ok(conversation)
    }

    /// The audit records (JSON), oldest first.
    pub fn audit(&self, session_id: &str) -> Result<Vec<String>, StoreError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT record FROM audit WHERE session_id = ?1 ORDER BY id")?;
        let rows = statement
            .query_map([session_id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// The audit records (JSON) of a session and of every sub-agent under
    /// it (rows `<session>/<path>`), in the order they were written.
    pub fn audit_with_agents(&self, session_id: &str) -> Result<Vec<String>, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT record FROM audit WHERE session_id = ?1 OR substr(session_id, 1, length(?1) + 1) = ?1 || '/' ORDER BY id",
        )?;
        let rows = statement
            .query_map([session_id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// The transcript events (JSON), oldest first.
    pub fn events(&self, session_id: &str) -> Result<Vec<String>, StoreError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT event FROM events WHERE session_id = ?1 ORDER BY id")?;
        let rows: Vec<String> = statement
            .query_map([session_id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(rows
            .iter()
            .flat_map(|batch| batch.lines())
            .map(str::to_string)
            .collect())
    }

    /// Every message ever admitted to the session, in queue order, with its
    /// state: what `sessions show` lists.
    pub fn admitted(&self, session_id: &str) -> Result<Vec<(String, String, String)>, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT source, state, content FROM queue WHERE session_id = ?1 ORDER BY position, id",
        )?;
        let rows = statement
            .query_map([session_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }
}

/// Marks a message running and stores it in the conversation at `seq`
/// (unless it continues an interrupted turn).
fn mark_running(
    tx: &rusqlite::Connection,
    session_id: &str,
    queue_id: i64,
    user_message: Option<(i64, &Message)>,
) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE queue SET state = 'running' WHERE id = ?1 AND session_id = ?2")?
        .execute(params![queue_id, session_id])?;
    if let Some((seq, message)) = user_message {
        put_message(tx, session_id, seq, message)?;
    }
    Ok(())
}

/// Stores a turn's user message at its index in the conversation.
fn put_message(
    tx: &rusqlite::Connection,
    session_id: &str,
    seq: i64,
    message: &Message,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT OR REPLACE INTO conversation (session_id, seq, message) VALUES (?1, ?2, ?3)",
    )?
    .execute(params![session_id, seq, serde_json::to_string(message)?])?;
    Ok(())
}

/// Admits a message inside an open transaction (shared by [`Store::admit`]
/// and the questionnaire answers, which admit in their own transaction).
pub(super) fn admit_in(
    tx: &rusqlite::Connection,
    admission: &Admission<'_>,
) -> Result<Admitted, StoreError> {
    if let Some((id, position)) = tx
        .prepare_cached("SELECT id, position FROM queue WHERE idem_key = ?1")?
        .query_row([admission.idempotency_key], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?))
        })
        .optional()?
    {
        return Ok(Admitted {
            id,
            position,
            new: false,
        });
    }
    let (low, high): (Option<i64>, Option<i64>) = tx
        .prepare_cached("SELECT min(position), max(position) FROM queue WHERE session_id = ?1")?
        .query_row([admission.session_id], |r| Ok((r.get(0)?, r.get(1)?)))?;
    let position = if admission.front {
        low.map_or(0, |p| p - 1)
    } else {
        high.map_or(0, |p| p + 1)
    };
    tx
            .prepare_cached("INSERT INTO queue (session_id, position, source, content, intent, idem_key, plan_sha256, admitted_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")?
            .execute(
            params![
                admission.session_id,
                position,
                admission.source.as_str(),
                admission.content,
                admission.intent.map(ModeIntent::as_str),
                admission.idempotency_key,
                admission.plan_sha256,
                now()
            ],
        )?;
    let id = tx.last_insert_rowid();
    if let Some(intent) = admission.intent {
        let mode = match intent {
            ModeIntent::PlanEntry => Mode::Plan,
            ModeIntent::PlanExit => Mode::Work,
        };
        tx.prepare_cached("UPDATE sessions SET mode = ?2 WHERE id = ?1")?
            .execute(params![admission.session_id, mode_text(mode)])?;
    }
    touch_session(tx, admission)?;
    Ok(Admitted {
        id,
        position,
        new: true,
    })
}

/// An admission's mark on its session: active now, and titled by its first
/// user message.
fn touch_session(tx: &rusqlite::Connection, admission: &Admission<'_>) -> Result<(), StoreError> {
    tx.prepare_cached(
        "UPDATE sessions SET updated_at = ?2,
                 title = CASE WHEN title = '' AND ?3 = 'user' THEN substr(?4, 1, 80) ELSE title END
             WHERE id = ?1",
    )?
    .execute(params![
        admission.session_id,
        now(),
        admission.source.as_str(),
        admission.content
    ])?;
    Ok(())
}
