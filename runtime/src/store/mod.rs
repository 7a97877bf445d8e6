//! The embedded session store (ST1–ST3): SQLite in WAL mode under the data
//! directory.
//!
//! [`Store`] is a plain type over one `rusqlite::Connection`; in a running
//! session it is owned by one thread (a connection is not `Sync`), and
//! the CLI's offline commands (`sessions`, `plan approve`) open it directly.
//! Every change that must survive a crash is one transaction: admitting a
//! message together with its mode intent and queue position, starting a
//! turn, finishing one, answering a questionnaire.
//!
//! # Layout
//! - `schema`: versioned migrations (`PRAGMA user_version`); newer stores are refused.
//! - `sessions`: create, find (`id`, prefix, `latest`), list, fork, mode and posture.
//! - `queue`: admission (idempotent by key), turn start and finish, the conversation.
//! - `plans`: plan questionnaires and their answers.
//! - `agents`: sub-agents under their parent, with state and last report.
//! - `leases`: one process runs a session at a time.
//! - `runs`: workflow runs, their step instances, cancel requests.
//! - `goals`: a session's goal, and continuations admitted with it.
//! - `processes`: managed processes while they run; what a killed cadre left.

mod agents;
mod goals;
mod launch;
mod leases;
mod plans;
mod processes;
mod queue;
mod runs;
mod schema;
mod sessions;

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::Connection;

pub use crate::plan::lifecycle::{
    IMPLEMENT_INSTRUCTION, ModeIntent, QuestionnaireAnswer, QuestionnaireKind,
};
pub use agents::{AgentRecord, NewAgent};
pub use launch::{LaunchRecord, ModelRecord};
pub use leases::{LEASE_EXPIRY_SECS, LeaseOwner};
pub use plans::{AnswerOutcome, NewQuestionnaire, Questionnaire};
pub use queue::{Admission, Admitted, QueuedMessage, Source};
pub use runs::{
    InstanceRecord, InstanceState, NewRun, OpenedRun, RunRecord, RunStatus, UnknownInstanceState,
    UnknownRunStatus,
};
pub use schema::SCHEMA_VERSION;
pub use sessions::{NewSession, SHORT_ID, SessionRecord, distinguishing_prefix};

use crate::mode::Mode;

/// Why the store could not do something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The file is not a readable cadre store (corrupt, not SQLite, no
    /// permission). Not retryable.
    #[error("{path} cannot be used as a cadre store: {message}")]
    Unreadable {
        /// The store file.
        path: String,
        /// What SQLite said.
        message: String,
    },
    /// A newer cadre wrote it. Not retryable.
    #[error(
        "{path} was written by a newer cadre (store version {found}; this cadre understands up to {supported}); upgrade cadre to use it"
    )]
    TooNew {
        /// The store file.
        path: String,
        /// Its version.
        found: i64,
        /// Ours.
        supported: i64,
    },
    /// A migration failed; the store is left at the previous version. Not retryable.
    #[error("{path}: migrating to store version {version} failed: {message}")]
    Migration {
        /// The store file.
        path: String,
        /// The version it was migrating to.
        version: i64,
        /// What SQLite said.
        message: String,
    },
    /// No session matches. Not retryable.
    #[error("{0}")]
    NotFound(String),
    /// The request conflicts with the session's state (a questionnaire is
    /// pending, say). Not retryable as is.
    #[error("{0}")]
    Conflict(String),
    /// Another process runs the session (it holds the session's lease).
    /// Retryable once that process ends.
    #[error(
        "session {session_id} is being run by {holder}; wait for it to finish (or stop it), then resume"
    )]
    Leased {
        /// The session.
        session_id: String,
        /// Who holds it.
        holder: String,
    },
    /// The store stayed locked by another process past the busy timeout.
    /// Retryable.
    #[error("{path} is locked by another process (waited {waited_secs} s); try again later")]
    Busy {
        /// The store file.
        path: String,
        /// How long this process waited.
        waited_secs: u64,
    },
    /// A write failed (disk full, I/O error); what was not written is not
    /// reported as done. Retryable once the cause is fixed.
    #[error("the store could not record {what}: {message}")]
    WriteFailed {
        /// What was lost.
        what: String,
        /// What SQLite said.
        message: String,
    },
    /// A query failed. Retryable.
    #[error("store error: {0}")]
    Sql(String),
}

/// How many prepared statements a connection keeps: more than the store has.
const STATEMENT_CACHE: usize = 96;

/// How long a request waits for another process's lock on the store.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

impl StoreError {
    fn unreadable(path: &str, err: &rusqlite::Error) -> Self {
        if is_busy(err) {
            return StoreError::Busy {
                path: path.to_string(),
                waited_secs: BUSY_TIMEOUT.as_secs(),
            };
        }
        StoreError::Unreadable {
            path: path.to_string(),
            message: err.to_string(),
        }
    }

    /// Whether trying again later may succeed: the store was busy, full or
    /// failed to write, or another process runs the session (exit 75).
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Leased { .. }
            | StoreError::Busy { .. }
            | StoreError::WriteFailed { .. }
            | StoreError::Sql(_) => true,
            StoreError::Unreadable { .. }
            | StoreError::TooNew { .. }
            | StoreError::Migration { .. }
            | StoreError::NotFound(_)
            | StoreError::Conflict(_) => false,
        }
    }
}

fn is_busy(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
}

impl From<rusqlite::Error> for StoreError {
    fn from(err: rusqlite::Error) -> Self {
        if is_busy(&err) {
            return StoreError::Busy {
                path: "the store".into(),
                waited_secs: BUSY_TIMEOUT.as_secs(),
            };
        }
        StoreError::Sql(err.to_string())
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(err: serde_json::Error) -> Self {
        StoreError::Sql(format!("a stored value is not valid JSON: {err}"))
    }
}

/// The store.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// Inside [`Store::isolated`]: the request's savepoint covers every
    /// transaction begun in it, which then opens none of its own.
    covered: Cell<bool>,
    /// A covered transaction was dropped uncommitted: its request's writes
    /// are undone even if the request went on.
    abandoned: Cell<bool>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// The store file inside a data directory.
pub fn store_path(data_dir: &Path) -> PathBuf {
    data_dir.join("cadre.db")
}

impl Store {
    /// Opens (creating if needed) the store at `path`, in WAL mode, and
    /// brings its schema up to date.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        let shown = path.display().to_string();
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Unreadable {
                path: shown.clone(),
                message: format!("cannot create its directory: {e}"),
            })?;
        }
        let mut conn = Connection::open(path).map_err(|e| StoreError::unreadable(&shown, &e))?;
        // Every statement the store runs stays prepared.
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(|e| StoreError::unreadable(&shown, &e))?;
        // The first real read is where a corrupt file shows itself.
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
            .map_err(|e| StoreError::unreadable(&shown, &e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Unreadable {
                path: shown,
                message: format!("it cannot use write-ahead logging (journal mode {mode})"),
            });
        }
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| StoreError::unreadable(&shown, &e))?;
        // Savepoints (one per request in a shared commit) journal in memory,
        // not in a temporary file.
        conn.pragma_update(None, "temp_store", "MEMORY")
            .map_err(|e| StoreError::unreadable(&shown, &e))?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(|e| StoreError::unreadable(&shown, &e))?;
        schema::migrate(&mut conn, &shown)?;
        Ok(Self::over(conn, path.to_path_buf()))
    }

    /// A store that lives in memory only, for sessions nobody will resume.
    pub fn open_in_memory() -> Result<Self, StoreError> {
        let shown = ":memory:";
        let mut conn =
            Connection::open_in_memory().map_err(|e| StoreError::unreadable(shown, &e))?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        conn.pragma_update(None, "foreign_keys", "ON")
            .map_err(|e| StoreError::unreadable(shown, &e))?;
        schema::migrate(&mut conn, shown)?;
        Ok(Self::over(conn, PathBuf::from(shown)))
    }

    fn over(conn: Connection, path: PathBuf) -> Self {
        Self {
            conn,
            path,
            covered: Cell::new(false),
            abandoned: Cell::new(false),
        }
    }

    /// The store file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Caps the store's size (a quota): a write that would grow it further
    /// fails as on a full disk, and what it carried is reported lost.
    pub fn limit_size(&mut self, bytes: u64) -> Result<(), StoreError> {
        let page: i64 = self
            .conn
            .prepare_cached("PRAGMA page_size")?
            .query_row([], |r| r.get(0))?;
        let pages = (bytes / page.max(1) as u64).max(1);
        self.conn
            .query_row(&format!("PRAGMA max_page_count = {pages}"), [], |_| Ok(()))?;
        Ok(())
    }
}

/// A transaction: the store's own (`BEGIN IMMEDIATE`); inside one a caller
/// opened to commit many requests together, a savepoint of it; inside a
/// request's savepoint ([`Store::isolated`]), nothing of its own (the
/// request is undone whole if it is dropped uncommitted). Rolled back when
/// dropped uncommitted. Its statements stay prepared.
pub(crate) struct Tx<'a> {
    store: &'a Store,
    scope: Scope,
    done: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scope {
    Own,
    Savepoint,
    Covered,
}

impl std::ops::Deref for Tx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        &self.store.conn
    }
}

impl Tx<'_> {
    /// Commits (or, nested, releases into the caller's transaction).
    pub(crate) fn commit(mut self) -> rusqlite::Result<()> {
        self.done = true;
        match self.scope {
            Scope::Own => control(&self.store.conn, "COMMIT"),
            Scope::Savepoint => control(&self.store.conn, "RELEASE tx"),
            Scope::Covered => Ok(()),
        }
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let conn = &self.store.conn;
        match self.scope {
            Scope::Own => drop(control(conn, "ROLLBACK")),
            Scope::Savepoint => {
                let _ = control(conn, "ROLLBACK TO tx");
                let _ = control(conn, "RELEASE tx");
            }
            Scope::Covered => self.store.abandoned.set(true),
        }
    }
}

/// Runs a transaction-control statement, kept prepared.
fn control(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(|_| ())
}

impl Store {
    /// Starts a transaction, a savepoint inside the caller's, or, inside a
    /// request's savepoint, nothing.
    pub(crate) fn begin(&mut self) -> rusqlite::Result<Tx<'_>> {
        let scope = if self.covered.get() {
            Scope::Covered
        } else if self.conn.is_autocommit() {
            control(&self.conn, "BEGIN IMMEDIATE")?;
            Scope::Own
        } else {
            control(&self.conn, "SAVEPOINT tx")?;
            Scope::Savepoint
        };
        Ok(Tx {
            store: self,
            scope,
            done: false,
        })
    }

    /// Runs `work` with many requests' writes in one transaction (one
    /// commit to the write-ahead log): each request's own transactions
    /// become savepoints of it. Returns what `work` returned with the
    /// commit's outcome (what it wrote is stored only if that is `Ok`); an
    /// error when the transaction could not even begin (`work` did not run).
    #[allow(clippy::type_complexity)]
    pub fn together<T>(
        &mut self,
        work: impl FnOnce(&mut Store) -> T,
    ) -> Result<(T, Result<(), StoreError>), StoreError> {
        control(&self.conn, "BEGIN IMMEDIATE")?;
        let out = work(self);
        let committed = control(&self.conn, "COMMIT").map_err(|err| {
            let _ = control(&self.conn, "ROLLBACK");
            StoreError::from(err)
        });
        Ok((out, committed))
    }

    /// Runs `work` inside a savepoint of the current transaction, rolled
    /// back if it fails, so one request's failure undoes only its writes.
    /// The transactions `work` begins open no savepoints of their own: one
    /// dropped uncommitted undoes the whole of `work`, which then fails
    /// even if it went on.
    pub fn isolated<T>(
        &mut self,
        work: impl FnOnce(&mut Store) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        control(&self.conn, "SAVEPOINT request")?;
        let covered = self.covered.replace(true);
        let abandoned = self.abandoned.replace(false);
        let mut out = work(self);
        if self.abandoned.replace(abandoned) && out.is_ok() {
            out = Err(StoreError::Sql(
                "a write of this request failed part way and was undone".into(),
            ));
        }
        self.covered.set(covered);
        if out.is_err() {
            control(&self.conn, "ROLLBACK TO request")?;
        }
        control(&self.conn, "RELEASE request")?;
        out
    }
}

/// Seconds since the Unix epoch.
fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}

/// A mode as stored.
fn mode_text(mode: Mode) -> &'static str {
    mode.as_str()
}

#[cfg(test)]
mod tests;
