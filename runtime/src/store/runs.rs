//! Workflow runs (W6, W10): a run, its step instances with their states,
//! keys and outputs, and cancel requests from other processes.
//!
//! A run has a row of its own in `sessions` (kind `agent`: its steps are
//! agents under it, each keeping its conversation under its own row), so a
//! run is leased like a session: one process runs it at a time. Its
//! instances are stored as they change; on resume, the instances whose
//! results were accepted are read back by key and never run again.

use std::fmt;
use std::str::FromStr;

use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ToSql, ToSqlOutput, ValueRef};
use rusqlite::{OptionalExtension, params};
use serde::{Deserialize, Serialize};

use super::{LeaseOwner, Store, StoreError, now};
use crate::mode::Mode;
use crate::permission::Posture;

/// Where a workflow run is: the `status` column of `workflow_runs` (whose
/// `CHECK` allows exactly these four), a report's verdict and the
/// `workflow.completed` event's. Stored, serialized and displayed as the
/// lowercase word, so rows and JSON written before the type existed read
/// back unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// A process runs it, or one did and died holding it (its lease tells
    /// which); a resume picks it up.
    Running,
    /// Every step has a result.
    Completed,
    /// A step failed or was blocked, so some step has no result.
    Failed,
    /// Cancelled as a whole, by a person or a caller.
    Cancelled,
}

impl RunStatus {
    /// Every status, in the order a run may pass through them.
    pub const ALL: [RunStatus; 4] = [
        RunStatus::Running,
        RunStatus::Completed,
        RunStatus::Failed,
        RunStatus::Cancelled,
    ];

    /// The word stored, serialized and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so a width (`{:<9}` in `cadre workflow list`) applies.
        f.pad(self.as_str())
    }
}

/// A word that is no [`RunStatus`]: a store written by another program,
/// or a typo in a caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown workflow run status {0:?} (expected running, completed, failed or cancelled)")]
pub struct UnknownRunStatus(pub String);

impl FromStr for RunStatus {
    type Err = UnknownRunStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunStatus::ALL
            .into_iter()
            .find(|status| status.as_str() == s)
            .ok_or_else(|| UnknownRunStatus(s.to_string()))
    }
}

impl ToSql for RunStatus {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for RunStatus {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value
            .as_str()?
            .parse()
            .map_err(|err: UnknownRunStatus| FromSqlError::Other(Box::new(err)))
    }
}

/// Where a step instance is in its life (W4): the `state` column of
/// `workflow_instances` (whose `CHECK` allows exactly these seven) and a
/// `step.state` event's. Stored, serialized and displayed as the lowercase
/// word, so rows and JSON written before the type existed read back
/// unchanged. Ordered as [`InstanceState::ALL`] lists them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceState {
    /// Waiting for a slot or for the steps it needs.
    Pending,
    /// Its agent is working.
    Dispatched,
    /// Its agent answered; its check (if any) has not passed yet.
    Finalized,
    /// Its check passed.
    Verified,
    /// It failed (after its retries).
    Failed,
    /// A step it needs has no result.
    Blocked,
    /// Someone cancelled it, or the run's budget ran out.
    Cancelled,
}

impl InstanceState {
    /// Every state, in lifecycle order (the order of the declaration, which
    /// `Ord` follows).
    pub const ALL: [InstanceState; 7] = [
        InstanceState::Pending,
        InstanceState::Dispatched,
        InstanceState::Finalized,
        InstanceState::Verified,
        InstanceState::Failed,
        InstanceState::Blocked,
        InstanceState::Cancelled,
    ];

    /// The word stored, serialized and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceState::Pending => "pending",
            InstanceState::Dispatched => "dispatched",
            InstanceState::Finalized => "finalized",
            InstanceState::Verified => "verified",
            InstanceState::Failed => "failed",
            InstanceState::Blocked => "blocked",
            InstanceState::Cancelled => "cancelled",
        }
    }

    /// Parses [`InstanceState::as_str`].
    pub fn parse(text: &str) -> Option<InstanceState> {
        InstanceState::ALL.into_iter().find(|s| s.as_str() == text)
    }

    /// Whether nothing more happens to it.
    pub fn is_terminal(self) -> bool {
        match self {
            InstanceState::Verified
            | InstanceState::Failed
            | InstanceState::Blocked
            | InstanceState::Cancelled => true,
            InstanceState::Pending | InstanceState::Dispatched | InstanceState::Finalized => false,
        }
    }
}

impl fmt::Display for InstanceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, so a width (`{:<10}` in `cadre workflow show`) applies.
        f.pad(self.as_str())
    }
}

/// A word that is no [`InstanceState`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown step instance state {0:?} (expected pending, dispatched, finalized, verified, failed, blocked or cancelled)"
)]
pub struct UnknownInstanceState(pub String);

impl FromStr for InstanceState {
    type Err = UnknownInstanceState;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        InstanceState::parse(s).ok_or_else(|| UnknownInstanceState(s.to_string()))
    }
}

impl ToSql for InstanceState {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::from(self.as_str()))
    }
}

impl FromSql for InstanceState {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        value
            .as_str()?
            .parse()
            .map_err(|err: UnknownInstanceState| FromSqlError::Other(Box::new(err)))
    }
}

/// A run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    /// Its id (also its row in `sessions`).
    pub id: String,
    /// The session that started it (Operate), if any.
    pub caller_id: Option<String>,
    /// The workflow's name.
    pub name: String,
    /// The workflow file it was read from, if any.
    pub file: Option<String>,
    /// The workflow's text (TOML) as it was run.
    pub source: String,
    /// The run's settings (JSON): variables, flags.
    pub settings: String,
    /// Where it is; `running` also while nobody runs it after a crash.
    pub status: RunStatus,
    /// The workspace its steps run in (from its `sessions` row).
    pub workspace: String,
    /// When it was created (seconds since the epoch).
    pub created_at: f64,
    /// When it last changed.
    pub updated_at: f64,
}

/// A run opened to resume.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenedRun {
    /// Its row, now marked running.
    pub run: RunRecord,
    /// Its instances as last stored.
    pub instances: Vec<InstanceRecord>,
    /// Agents started under it (the next one is numbered after them).
    pub agents: u32,
}

/// A new run.
#[derive(Debug, Clone)]
pub struct NewRun<'a> {
    /// Its id, also its row in `sessions`.
    pub id: &'a str,
    /// The calling session, if any.
    pub caller_id: Option<&'a str>,
    /// The workflow's name.
    pub name: &'a str,
    /// The file it was read from; `None` for a workflow an Operate
    /// session wrote.
    pub file: Option<&'a str>,
    /// The workflow's TOML as it runs, which a resume runs again.
    pub source: &'a str,
    /// Its variables and flags (JSON), read back on resume.
    pub settings: &'a str,
    /// The workspace its steps run in, stored on its `sessions` row.
    pub workspace: &'a std::path::Path,
    /// The widest mode of its steps.
    pub mode: Mode,
    /// The posture it runs under.
    pub posture: Posture,
}

/// One step instance as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceRecord {
    /// The step's name, which with `index` (or `key`) finds it on resume.
    pub step: String,
    /// The item's index (0 without `for_each`).
    pub index: i64,
    /// The item (JSON), for a fan-out.
    pub item: Option<String>,
    /// Its key (W10), once rendered.
    pub key: Option<String>,
    /// Where it is in its life.
    pub state: InstanceState,
    /// The agent that ran its last attempt (its row id).
    pub agent_id: Option<String>,
    /// Its accepted output.
    pub output: Option<String>,
    /// Why it failed, was blocked or cancelled.
    pub reason: Option<String>,
    /// Attempts started.
    pub attempts: i64,
    /// Tokens spent.
    pub tokens: i64,
}

const RUN_COLUMNS: &str = "r.id, r.caller_id, r.name, r.file, r.source, r.settings, r.status, s.workspace, r.created_at, r.updated_at";

fn run_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<RunRecord> {
    Ok(RunRecord {
        id: row.get(0)?,
        caller_id: row.get(1)?,
        name: row.get(2)?,
        file: row.get(3)?,
        source: row.get(4)?,
        settings: row.get(5)?,
        status: row.get(6)?,
        workspace: row.get(7)?,
        created_at: row.get(8)?,
        updated_at: row.get(9)?,
    })
}

impl Store {
    /// Records a new run (its `sessions` row and its `workflow_runs` row)
    /// and takes its lease, in one transaction.
    pub fn create_run(
        &mut self,
        new: &NewRun<'_>,
        owner: &LeaseOwner,
    ) -> Result<RunRecord, StoreError> {
        let at = now();
        let tx = self.begin()?;
        tx.prepare_cached("INSERT INTO sessions (id, parent_id, workspace, mode, posture, kind, title, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, 'agent', ?6, ?7, ?7)")?.execute(params![
                new.id,
                new.caller_id,
                new.workspace.display().to_string(),
                new.mode.as_str(),
                new.posture.as_str(),
                format!("workflow {}", new.name),
                at
            ],
        )?;
        tx.prepare_cached("INSERT INTO workflow_runs (id, caller_id, name, file, source, settings, status, created_at, updated_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7, ?7)")?.execute(params![new.id, new.caller_id, new.name, new.file, new.source, new.settings, at],
        )?;
        tx.commit()?;
        self.acquire_lease(new.id, owner)?;
        self.find_run(new.id)?
            .ok_or_else(|| StoreError::NotFound(format!("run {} vanished", new.id)))
    }

    /// Opens a stored run to resume it: takes its lease, marks it running,
    /// and returns it with its instances and how many agents it started.
    pub fn open_run(&mut self, id: &str, owner: &LeaseOwner) -> Result<OpenedRun, StoreError> {
        self.acquire_lease(id, owner)?;
        self.conn
            .prepare_cached(
                "UPDATE workflow_runs SET status = 'running', updated_at = ?2 WHERE id = ?1",
            )?
            .execute(params![id, now()])?;
        let run = self
            .find_run(id)?
            .ok_or_else(|| StoreError::NotFound(format!("there is no workflow run {id}")))?;
        let agents: i64 = self
            .conn
            .prepare_cached("SELECT count(*) FROM agents WHERE parent_id = ?1")?
            .query_row([id], |row| row.get(0))?;
        Ok(OpenedRun {
            run,
            instances: self.instances(id)?,
            agents: u32::try_from(agents).unwrap_or(u32::MAX),
        })
    }

    /// A run by its exact id.
    pub fn find_run(&self, id: &str) -> Result<Option<RunRecord>, StoreError> {
        Ok(self
            .conn
            .query_row(
                &format!(
                    "SELECT {RUN_COLUMNS} FROM workflow_runs r JOIN sessions s ON s.id = r.id WHERE r.id = ?1"
                ),
                [id],
                run_record,
            )
            .optional()?)
    }

    /// A run by id, unique id prefix, or `latest`.
    pub fn resolve_run(&self, spec: &str) -> Result<RunRecord, StoreError> {
        if spec == "latest" {
            return self
                .runs(1)?
                .into_iter()
                .next()
                .ok_or_else(|| StoreError::NotFound("there are no workflow runs yet".into()));
        }
        if let Some(run) = self.find_run(spec)? {
            return Ok(run);
        }
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {RUN_COLUMNS} FROM workflow_runs r JOIN sessions s ON s.id = r.id
             WHERE substr(r.id, 1, length(?1)) = ?1 ORDER BY r.updated_at DESC LIMIT 3"
        ))?;
        let found: Vec<RunRecord> = stmt
            .query_map([spec], run_record)?
            .collect::<Result<_, _>>()?;
        match found.len() {
            1 => Ok(found
                .into_iter()
                .next()
                .ok_or_else(|| StoreError::NotFound(spec.into()))?),
            0 => Err(StoreError::NotFound(format!(
                "no workflow run matches '{spec}'"
            ))),
            _ => Err(StoreError::NotFound(format!(
                "'{spec}' matches more than one workflow run; give more of the id"
            ))),
        }
    }

    /// The most recently changed runs, newest first.
    pub fn runs(&self, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT {RUN_COLUMNS} FROM workflow_runs r JOIN sessions s ON s.id = r.id
             ORDER BY r.updated_at DESC, r.rowid DESC LIMIT ?1"
        ))?;
        let runs = stmt
            .query_map([limit as i64], run_record)?
            .collect::<Result<_, _>>()?;
        Ok(runs)
    }

    /// A run's instances, in step and item order.
    pub fn instances(&self, run_id: &str) -> Result<Vec<InstanceRecord>, StoreError> {
        let mut stmt = self.conn.prepare(
            "SELECT step, idx, item, key, state, agent_id, output, reason, attempts, tokens
             FROM workflow_instances WHERE run_id = ?1 ORDER BY seq, idx",
        )?;
        let rows = stmt
            .query_map([run_id], |row| {
                Ok(InstanceRecord {
                    step: row.get(0)?,
                    index: row.get(1)?,
                    item: row.get(2)?,
                    key: row.get(3)?,
                    state: row.get(4)?,
                    agent_id: row.get(5)?,
                    output: row.get(6)?,
                    reason: row.get(7)?,
                    attempts: row.get(8)?,
                    tokens: row.get(9)?,
                })
            })?
            .collect::<Result<_, _>>()?;
        Ok(rows)
    }

    /// Records instances as they are now, in one transaction. `seq` orders
    /// steps as in the workflow.
    pub fn record_instances(
        &mut self,
        run_id: &str,
        instances: &[(i64, InstanceRecord)],
    ) -> Result<(), StoreError> {
        let at = now();
        let tx = self.begin()?;
        for (seq, i) in instances {
            tx.prepare_cached("INSERT INTO workflow_instances (run_id, step, idx, seq, item, key, state, agent_id, output, reason, attempts, tokens, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
                 ON CONFLICT(run_id, step, idx) DO UPDATE SET seq = ?4, item = ?5, key = ?6, state = ?7,
                   agent_id = ?8, output = ?9, reason = ?10, attempts = ?11, tokens = ?12, updated_at = ?13")?.execute(params![
                    run_id, i.step, i.index, seq, i.item, i.key, i.state, i.agent_id, i.output, i.reason,
                    i.attempts, i.tokens, at
                ],
            )?;
        }
        tx.prepare_cached("UPDATE workflow_runs SET updated_at = ?2 WHERE id = ?1")?
            .execute(params![run_id, at])?;
        tx.commit()?;
        Ok(())
    }

    /// Records how a run ended.
    pub fn finish_run(&mut self, run_id: &str, status: RunStatus) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("UPDATE workflow_runs SET status = ?2, updated_at = ?3 WHERE id = ?1")?
            .execute(params![run_id, status, now()])?;
        Ok(())
    }

    /// Asks the process running a run to cancel `target` (`*` for the
    /// whole run, a step, or `step[i]`).
    pub fn request_cancel(&mut self, run_id: &str, target: &str) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO workflow_cancels (run_id, target, requested_at) VALUES (?1, ?2, ?3)",
            )?
            .execute(params![run_id, target, now()])?;
        Ok(())
    }

    /// Takes the cancel requests for a run, oldest first.
    pub fn take_cancels(&mut self, run_id: &str) -> Result<Vec<String>, StoreError> {
        let tx = self.begin()?;
        let targets = {
            let mut stmt =
                tx.prepare("SELECT target FROM workflow_cancels WHERE run_id = ?1 ORDER BY id")?;
            stmt.query_map([run_id], |row| row.get(0))?
                .collect::<Result<Vec<String>, _>>()?
        };
        tx.prepare_cached("DELETE FROM workflow_cancels WHERE run_id = ?1")?
            .execute([run_id])?;
        tx.commit()?;
        Ok(targets)
    }
}

#[cfg(test)]
mod tests;
