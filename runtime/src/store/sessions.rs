//! Sessions: create, find, list, fork.

use std::path::Path;

use rusqlite::{OptionalExtension, Row, params};
use serde::Serialize;

use super::{Store, StoreError, mode_text, now};
use crate::mode::Mode;
use crate::permission::Posture;

/// A session as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SessionRecord {
    /// The id.
    pub id: String,
    /// The session it was forked from.
    pub parent_id: Option<String>,
    /// The workspace root.
    pub workspace: String,
    /// The mode it is in.
    pub mode: Mode,
    /// Its posture.
    pub posture: Posture,
    /// The first user message, shortened.
    pub title: String,
    /// When it was created (seconds since the epoch).
    pub created_at: f64,
    /// When it last changed.
    pub updated_at: f64,
}

/// What a new session starts with.
#[derive(Debug, Clone)]
pub struct NewSession<'a> {
    /// The id.
    pub id: &'a str,
    /// The workspace root.
    pub workspace: &'a Path,
    /// The starting mode.
    pub mode: Mode,
    /// The starting posture.
    pub posture: Posture,
}

const COLUMNS: &str = "id, parent_id, workspace, mode, posture, title, created_at, updated_at";

fn record(row: &Row<'_>) -> rusqlite::Result<SessionRecord> {
    let mode: String = row.get(3)?;
    let posture: String = row.get(4)?;
    Ok(SessionRecord {
        id: row.get(0)?,
        parent_id: row.get(1)?,
        workspace: row.get(2)?,
        mode: mode.parse().unwrap_or_default(),
        posture: posture.parse().unwrap_or_default(),
        title: row.get(5)?,
        created_at: row.get(6)?,
        updated_at: row.get(7)?,
    })
}

impl Store {
    /// Records a new session.
    pub fn create_session(&mut self, new: &NewSession<'_>) -> Result<SessionRecord, StoreError> {
        let at = now();
        self.conn
            .prepare_cached(
                "INSERT INTO sessions (id, workspace, mode, posture, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
            )?
            .execute(params![
                new.id,
                new.workspace.display().to_string(),
                mode_text(new.mode),
                new.posture.as_str(),
                at
            ])?;
        Ok(SessionRecord {
            id: new.id.to_string(),
            parent_id: None,
            workspace: new.workspace.display().to_string(),
            mode: new.mode,
            posture: new.posture,
            title: String::new(),
            created_at: at,
            updated_at: at,
        })
    }

    /// The session with exactly this id.
    pub fn session(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        Ok(self
            .conn
            .prepare_cached(&format!("SELECT {COLUMNS} FROM sessions WHERE id = ?1"))?
            .query_row([id], record)
            .optional()?)
    }

    /// Finds a session by id, unique id prefix, or `latest` (the most
    /// recently active, in `workspace` when given).
    pub fn resolve(
        &self,
        spec: &str,
        workspace: Option<&Path>,
    ) -> Result<SessionRecord, StoreError> {
        if spec == "latest" {
            return self.latest(workspace)?.ok_or_else(|| {
                StoreError::NotFound(match workspace {
                    Some(ws) => format!("no session has run in {} yet", ws.display()),
                    None => "there are no sessions yet".into(),
                })
            });
        }
        let exact = self
            .conn
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM sessions WHERE id = ?1 AND kind = 'session'"
            ))?
            .query_row([spec], record)
            .optional()?;
        if let Some(exact) = exact {
            return Ok(exact);
        }
        let mut statement = self.conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM sessions WHERE substr(id, 1, length(?1)) = ?1 AND kind = 'session' ORDER BY updated_at DESC LIMIT 3"
        ))?;
        let found: Vec<SessionRecord> = statement
            .query_map([spec], record)?
            .collect::<Result<_, _>>()?;
        match found.as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(StoreError::NotFound(format!(
                "no session id starts with '{spec}'"
            ))),
            _ => {
                let ids: Vec<&str> = found.iter().map(|s| s.id.as_str()).collect();
                let short = self.short_ids(&ids)?;
                Err(StoreError::NotFound(format!(
                    "'{spec}' matches several sessions; give one of {}{}",
                    short.join(", "),
                    if found.len() == 3 { ", …" } else { "" }
                )))
            }
        }
    }

    /// The most recently active session, in `workspace` when given.
    pub fn latest(&self, workspace: Option<&Path>) -> Result<Option<SessionRecord>, StoreError> {
        let found = match workspace {
            Some(ws) => self
                .conn
                .prepare_cached(&format!(
                        "SELECT {COLUMNS} FROM sessions WHERE workspace = ?1 AND kind = 'session' ORDER BY updated_at DESC, rowid DESC LIMIT 1"
                    ))?
                .query_row(
                    [ws.display().to_string()],
                    record,
                )
                .optional()?,
            None => self
                .conn
                .prepare_cached(&format!("SELECT {COLUMNS} FROM sessions WHERE kind = 'session' ORDER BY updated_at DESC, rowid DESC LIMIT 1"))?
                .query_row(
                    [],
                    record,
                )
                .optional()?,
        };
        Ok(found)
    }

    /// Sessions, most recently active first.
    pub fn list(&self, limit: usize) -> Result<Vec<SessionRecord>, StoreError> {
        let mut statement = self.conn.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM sessions WHERE kind = 'session' ORDER BY updated_at DESC, rowid DESC LIMIT ?1"
        ))?;
        let rows = statement
            .query_map([limit as i64], record)?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// The shortest prefix of each of `ids` that names it alone among all
    /// stored sessions (at least [`SHORT_ID`] characters): what
    /// `sessions list` shows and `--resume` takes. Session ids are
    /// time-ordered, so ids made within a minute share their first eight.
    pub fn short_ids(&self, ids: &[&str]) -> Result<Vec<String>, StoreError> {
        let mut statement = self
            .conn
            .prepare_cached("SELECT id FROM sessions WHERE kind = 'session' ORDER BY id")?;
        let all: Vec<String> = statement
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(ids
            .iter()
            .map(|id| distinguishing_prefix(&all, id, SHORT_ID).to_string())
            .collect())
    }

    /// Records the session's mode.
    pub fn set_mode(&mut self, id: &str, mode: Mode) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("UPDATE sessions SET mode = ?2, updated_at = ?3 WHERE id = ?1")?
            .execute(params![id, mode_text(mode), now()])?;
        Ok(())
    }

    /// Records the session's posture.
    pub fn set_posture(&mut self, id: &str, posture: Posture) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("UPDATE sessions SET posture = ?2, updated_at = ?3 WHERE id = ?1")?
            .execute(params![id, posture.as_str(), now()])?;
        Ok(())
    }

    /// A new session `new_id` with a copy of `id`'s conversation, its mode,
    /// posture and workspace, and `id` recorded as its parent. Nothing queued
    /// and no questionnaire is copied.
    pub fn fork(&mut self, id: &str, new_id: &str) -> Result<SessionRecord, StoreError> {
        let source = self.resolve(id, None)?;
        let tx = self.begin()?;
        let at = now();
        tx
            .prepare_cached("INSERT INTO sessions (id, parent_id, workspace, mode, posture, title, created_at, updated_at)
             SELECT ?2, id, workspace, mode, posture, title, ?3, ?3 FROM sessions WHERE id = ?1")?
            .execute(
            params![source.id, new_id, at],
        )?;
        tx.prepare_cached(
            "INSERT INTO conversation (session_id, seq, message)
             SELECT ?2, seq, message FROM conversation WHERE session_id = ?1",
        )?
        .execute(params![source.id, new_id])?;
        tx.commit()?;
        self.session(new_id)?
            .ok_or_else(|| StoreError::Sql("the fork vanished".into()))
    }

    /// Removes session `id` if nothing was ever asked of it: no message
    /// admitted, no conversation, no goal, questionnaire, sub-agent, fork
    /// or workflow run under it (a shell opened and left). Its start's
    /// events, audit, lease and launch record go with it. True when it was
    /// removed; a session with anything else stored is kept whole (a row
    /// this does not know of keeps it too: the foreign keys refuse).
    pub fn forget_if_unused(&mut self, id: &str) -> Result<bool, StoreError> {
        let used: bool = self
            .conn
            .prepare_cached(
                "SELECT EXISTS (SELECT 1 FROM queue WHERE session_id = ?1)
                 OR EXISTS (SELECT 1 FROM conversation WHERE session_id = ?1)
                 OR EXISTS (SELECT 1 FROM goals WHERE session_id = ?1)
                 OR EXISTS (SELECT 1 FROM questionnaires WHERE session_id = ?1)
                 OR EXISTS (SELECT 1 FROM agents WHERE parent_id = ?1)
                 OR EXISTS (SELECT 1 FROM sessions WHERE parent_id = ?1)
                 OR EXISTS (SELECT 1 FROM workflow_runs WHERE id = ?1)
                 OR NOT EXISTS (SELECT 1 FROM sessions WHERE id = ?1 AND kind = 'session')",
            )?
            .query_row([id], |r| r.get(0))?;
        if used {
            return Ok(false);
        }
        let tx = self.begin()?;
        for sql in [
            "DELETE FROM events WHERE session_id = ?1",
            "DELETE FROM audit WHERE session_id = ?1",
            "DELETE FROM leases WHERE session_id = ?1",
            "DELETE FROM launches WHERE owner = ?1",
            "DELETE FROM sessions WHERE id = ?1",
        ] {
            if let Err(err) = tx.prepare_cached(sql)?.execute([id]) {
                // Dropped uncommitted: nothing was removed.
                return match err {
                    rusqlite::Error::SqliteFailure(e, _)
                        if e.code == rusqlite::ErrorCode::ConstraintViolation =>
                    {
                        Ok(false)
                    }
                    other => Err(other.into()),
                };
            }
        }
        tx.commit()?;
        Ok(true)
    }
}

/// The fewest characters a shown session id has: a prefix that is unique
/// today stays so while a few more sessions arrive.
pub const SHORT_ID: usize = 8;

/// The shortest prefix of `id` (at least `min` characters) that no other
/// id of `sorted` (sorted, holding `id` or not) starts with.
pub fn distinguishing_prefix<'a>(sorted: &[String], id: &'a str, min: usize) -> &'a str {
    let at = sorted.partition_point(|other| other.as_str() < id);
    let shared = |other: Option<&String>| {
        other
            .filter(|o| o.as_str() != id)
            .map_or(0, |o| common_prefix(o, id))
    };
    // Only the neighbours in sorted order can share more with `id` than
    // any other id does.
    let longest = shared(sorted.get(at))
        .max(shared(at.checked_sub(1).and_then(|i| sorted.get(i))))
        .max(shared(sorted.get(at + 1)));
    let len = (longest + 1).max(min).min(id.len());
    let mut end = len;
    while !id.is_char_boundary(end) {
        end += 1;
    }
    &id[..end]
}

/// The bytes two strings share at their start.
fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}
