//! One process runs a session at a time (ST1, ST2).
//!
//! A process that starts a session takes its lease in one transaction; a
//! second process asking for the same session is refused with
//! [`StoreError::Leased`], naming the holder, so an interrupted turn is never
//! run twice by two resumes at once. A holder on this machine whose process
//! is gone (a crash, a kill) no longer holds: its lease is taken over at
//! once. A holder elsewhere (the data directory on a shared disk) holds
//! until it stops renewing for [`LEASE_EXPIRY_SECS`].

use rusqlite::{OptionalExtension, params};

use super::{Store, StoreError, now};

/// A lease not renewed for this long is free, whoever held it.
pub const LEASE_EXPIRY_SECS: f64 = 30.0;

/// Who holds a lease: this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseOwner {
    /// Unique per process run.
    pub token: String,
    /// The machine's host name.
    pub host: String,
    /// The process id.
    pub pid: u32,
    /// The process's start time (clock ticks since boot, from
    /// `/proc/<pid>/stat`), so a reused pid is not taken for the holder.
    pub started: i64,
}

impl LeaseOwner {
    /// This process, with a fresh token.
    pub fn this_process() -> Self {
        let pid = std::process::id();
        Self {
            token: uuid::Uuid::new_v4().to_string(),
            host: host_name(),
            pid,
            started: process_start(pid).unwrap_or_default(),
        }
    }

    /// Whether the process that took this lease is still running here.
    fn alive_here(&self) -> bool {
        self.host == host_name() && process_start(self.pid) == Some(self.started)
    }
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

/// Field 22 of `/proc/<pid>/stat`: when the process started.
fn process_start(pid: u32) -> Option<i64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; count from its ')'.
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(19)?.parse().ok()
}

impl Store {
    /// Whether a live process holds `id`'s lease: one on this machine that
    /// is still running, or one elsewhere that renewed it lately. A run or
    /// session marked running with no live holder was interrupted (killed,
    /// crashed) and can be resumed.
    pub fn lease_is_held(&self, id: &str) -> Result<bool, StoreError> {
        let held: Option<(String, String, u32, i64, f64)> = self
            .conn
            .prepare_cached(
                "SELECT owner, host, pid, started, renewed_at FROM leases WHERE session_id = ?1",
            )?
            .query_row([id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .optional()?;
        Ok(held.is_some_and(|(token, host, pid, started, renewed_at)| {
            let holder = LeaseOwner {
                token,
                host,
                pid,
                started,
            };
            match holder.host == host_name() {
                true => holder.alive_here(),
                false => now() - renewed_at < LEASE_EXPIRY_SECS,
            }
        }))
    }

    /// Takes `session_id`'s lease for `owner`, or says who holds it.
    pub fn acquire_lease(
        &mut self,
        session_id: &str,
        owner: &LeaseOwner,
    ) -> Result<(), StoreError> {
        let tx = self.begin()?;
        let held: Option<(String, String, u32, i64, f64)> = tx
            .prepare_cached(
                "SELECT owner, host, pid, started, renewed_at FROM leases WHERE session_id = ?1",
            )?
            .query_row([session_id], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .optional()?;
        if let Some((token, host, pid, started, renewed_at)) = held
            && token != owner.token
        {
            let holder = LeaseOwner {
                token,
                host: host.clone(),
                pid,
                started,
            };
            let fresh = now() - renewed_at < LEASE_EXPIRY_SECS;
            let same_host = host == owner.host;
            if (same_host && holder.alive_here()) || (!same_host && fresh) {
                return Err(StoreError::Leased {
                    session_id: session_id.to_string(),
                    holder: format!("process {pid} on {host}"),
                });
            }
        }
        let at = now();
        tx
            .prepare_cached("INSERT OR REPLACE INTO leases (session_id, owner, host, pid, started, acquired_at, renewed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)")?
            .execute(
            params![session_id, owner.token, owner.host, owner.pid, owner.started, at],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Takes the lease of a session created in the same transaction, which
    /// nobody can hold yet: [`Store::acquire_lease`] without its lookup.
    pub fn lease_new(&mut self, session_id: &str, owner: &LeaseOwner) -> Result<(), StoreError> {
        self.conn
            .prepare_cached(
                "INSERT INTO leases (session_id, owner, host, pid, started, acquired_at, renewed_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
            )?
            .execute(params![
                session_id,
                owner.token,
                owner.host,
                owner.pid,
                owner.started,
                now()
            ])?;
        Ok(())
    }

    /// Renews every lease `owner` holds.
    pub fn renew_leases(&mut self, owner: &LeaseOwner) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("UPDATE leases SET renewed_at = ?2 WHERE owner = ?1")?
            .execute(params![owner.token, now()])?;
        Ok(())
    }

    /// Gives up `session_id`'s lease, if `owner` holds it.
    pub fn release_lease(
        &mut self,
        session_id: &str,
        owner: &LeaseOwner,
    ) -> Result<(), StoreError> {
        self.conn
            .prepare_cached("DELETE FROM leases WHERE session_id = ?1 AND owner = ?2")?
            .execute(params![session_id, owner.token])?;
        Ok(())
    }
}
