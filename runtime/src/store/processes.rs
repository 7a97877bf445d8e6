//! Managed processes while they run (PR1), and what a cadre killed with
//! SIGKILL left behind (`process::reap`).

use rusqlite::params;

use super::{Store, StoreError, now};
use crate::process::ProcessRecord;
use crate::process::reap::{host_alive, kill_left, scan};

impl Store {
    /// Records a process that started.
    pub fn record_process(&mut self, record: &ProcessRecord) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT OR REPLACE INTO processes (key, session_id, owner, command, pid, \
                 started, host_pid, host_started, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                record.key,
                record.session_id,
                record.owner,
                record.command,
                record.pid,
                record.started,
                record.host_pid,
                record.host_started,
                now(),
            ])?;
        Ok(())
    }

    /// Forgets a process that ended.
    pub fn forget_process(&mut self, key: &str) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("DELETE FROM processes WHERE key = ?1")?
            .execute([key])?;
        Ok(())
    }

    /// Every process recorded, oldest first.
    pub fn processes(&self) -> Result<Vec<ProcessRecord>, StoreError> {
        let mut statement = self.conn.prepare_cached(
            "SELECT key, session_id, owner, command, pid, started, host_pid, host_started \
             FROM processes ORDER BY created_at",
        )?;
        let rows = statement.query_map([], |r| {
            Ok(ProcessRecord {
                key: r.get(0)?,
                session_id: r.get(1)?,
                owner: r.get(2)?,
                command: r.get(3)?,
                pid: r.get(4)?,
                started: r.get(5)?,
                host_pid: r.get(6)?,
                host_started: r.get(7)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Kills what is left of every process whose cadre is gone (killed
    /// with SIGKILL, so it could not end them) and forgets them; the
    /// processes of a cadre still running stay. Returns the records reaped.
    pub fn reap_orphan_processes(&mut self) -> Result<Vec<ProcessRecord>, StoreError> {
        let records = self.processes()?;
        if records.is_empty() {
            return Ok(records);
        }
        let running = scan();
        let orphans: Vec<ProcessRecord> = records
            .into_iter()
            .filter(|r| !host_alive(r, &running))
            .collect();
        for record in &orphans {
            kill_left(record, &running);
            self.forget_process(&record.key)?;
        }
        Ok(orphans)
    }
}

#[cfg(test)]
mod tests;
