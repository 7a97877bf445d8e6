//! Sub-agents (S1): each keeps its conversation, queue and transcript under
//! a session row of its own (kind `agent`), and is listed under its parent
//! with its role, its state and its last report, so a resumed session knows
//! its children and can follow up with them.

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError, now};
use crate::agent::{AgentPath, AgentReport, ChildState};
use crate::mode::Mode;
use crate::permission::Posture;

/// A sub-agent as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRecord {
    /// Its own session row.
    pub id: String,
    /// Its place in the tree.
    pub path: AgentPath,
    /// Its role.
    pub role: String,
    /// Where it was in its life when last recorded.
    pub state: ChildState,
    /// Its last run's report.
    pub report: Option<AgentReport>,
}

/// A sub-agent to record.
#[derive(Debug, Clone)]
pub struct NewAgent<'a> {
    /// Its own session row's id.
    pub id: &'a str,
    /// Its parent's session row.
    pub parent_id: &'a str,
    /// Its place in the tree.
    pub path: &'a AgentPath,
    /// Its role.
    pub role: &'a str,
    /// Its mode and posture at spawn.
    pub mode: Mode,
    /// See `mode`.
    pub posture: Posture,
}

fn state_text(state: ChildState) -> &'static str {
    match state {
        ChildState::Running => "running",
        ChildState::Idle => "idle",
        ChildState::Interrupted => "interrupted",
        ChildState::Crashed => "crashed",
    }
}

fn parse_state(text: &str) -> ChildState {
    match text {
        "running" => ChildState::Running,
        "interrupted" => ChildState::Interrupted,
        "crashed" => ChildState::Crashed,
        _ => ChildState::Idle,
    }
}

impl Store {
    /// Records a new sub-agent (its session row and its place under its
    /// parent), running. Recording the same id again changes nothing.
    pub fn create_agent(&mut self, new: &NewAgent<'_>) -> Result<(), StoreError> {
        let tx = self.begin()?;
        let at = now();
        tx
            .prepare_cached("INSERT OR IGNORE INTO sessions (id, parent_id, workspace, mode, posture, kind, created_at, updated_at)
             SELECT ?1, id, workspace, ?3, ?4, 'agent', ?5, ?5 FROM sessions WHERE id = ?2")?
            .execute(
            params![new.id, new.parent_id, new.mode.as_str(), new.posture.as_str(), at],
        )?;
        tx
            .prepare_cached("INSERT OR IGNORE INTO agents (id, parent_id, path, role, state, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, 'running', ?5, ?5)")?
            .execute(
            params![new.id, new.parent_id, new.path.to_string(), new.role, at],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Records a sub-agent's state, and its report when a run ended.
    pub fn set_agent_state(
        &mut self,
        id: &str,
        state: ChildState,
        report: Option<&AgentReport>,
    ) -> Result<(), StoreError> {
        let report = report.map(serde_json::to_string).transpose()?;
        self.conn
            .prepare_cached("UPDATE agents SET state = ?2, report = coalesce(?3, report), updated_at = ?4 WHERE id = ?1")?
            .execute(
            params![id, state_text(state), report, now()],
        )?;
        Ok(())
    }

    /// The sub-agents directly under `parent_id`, in tree order.
    pub fn agents(&self, parent_id: &str) -> Result<Vec<AgentRecord>, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT id, path, role, state, report FROM agents WHERE parent_id = ?1 ORDER BY created_at, path",
        )?;
        let rows: Vec<(String, String, String, String, Option<String>)> = statement
            .query_map([parent_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })?
            .collect::<Result<_, _>>()?;
        rows.into_iter()
            .map(|(id, path, role, state, report)| {
                Ok(AgentRecord {
                    path: path
                        .parse()
                        .map_err(|e| StoreError::Sql(format!("agent {id}: {e}")))?,
                    id,
                    role,
                    state: parse_state(&state),
                    report: report.map(|r| serde_json::from_str(&r)).transpose()?,
                })
            })
            .collect()
    }

    /// After a crash: every sub-agent under `parent_id` still marked
    /// running is marked interrupted, and the turn it was in is closed
    /// (its queue row done), so nothing re-runs by itself; a follow-up
    /// starts a new run on the stored conversation. Returns their ids.
    pub fn interrupt_agents(&mut self, parent_id: &str) -> Result<Vec<String>, StoreError> {
        let tx = self.begin()?;
        let ids: Vec<String> = {
            let mut statement = tx.prepare_cached(
                "SELECT id FROM agents WHERE parent_id = ?1 AND state = 'running'",
            )?;
            statement
                .query_map([parent_id], |r| r.get(0))?
                .collect::<Result<_, _>>()?
        };
        for id in &ids {
            tx.prepare_cached(
                "UPDATE agents SET state = 'interrupted', updated_at = ?2 WHERE id = ?1",
            )?
            .execute(params![id, now()])?;
            tx.prepare_cached(
                "UPDATE queue SET state = 'done' WHERE session_id = ?1 AND state != 'done'",
            )?
            .execute([id])?;
        }
        tx.commit()?;
        Ok(ids)
    }

    /// A sub-agent's record by its own id.
    pub fn agent(&self, id: &str) -> Result<Option<AgentRecord>, StoreError> {
        let parent: Option<String> = self
            .conn
            .query_row("SELECT parent_id FROM agents WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?;
        match parent {
            Some(parent) => Ok(self.agents(&parent)?.into_iter().find(|a| a.id == id)),
            None => Ok(None),
        }
    }
}
