//! The store's schema and its versioned, forward-only migrations.
//!
//! `PRAGMA user_version` holds the schema version. Opening a store runs the
//! migrations it lacks, each in its own transaction; a store written by a
//! newer cadre (a higher version) is refused, never downgraded.

use rusqlite::Connection;

use super::StoreError;

/// The migrations, in order: migration `n` (1-based) brings version `n - 1`
/// to version `n`.
const MIGRATIONS: &[&str] = &[
    // 1: sessions, the admission queue, the conversation, transcript
    // events, plan questionnaires, the permission audit.
    r#"
    CREATE TABLE sessions (
        id          TEXT PRIMARY KEY,
        parent_id   TEXT REFERENCES sessions(id),
        workspace   TEXT NOT NULL,
        mode        TEXT NOT NULL,
        posture     TEXT NOT NULL,
        title       TEXT NOT NULL DEFAULT '',
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL
    );
    CREATE INDEX sessions_by_workspace ON sessions(workspace, updated_at);

    CREATE TABLE queue (
        id          INTEGER PRIMARY KEY,
        session_id  TEXT NOT NULL REFERENCES sessions(id),
        position    INTEGER NOT NULL,
        source      TEXT NOT NULL CHECK (source IN ('user', 'questionnaire', 'continuation')),
        content     TEXT NOT NULL,
        intent      TEXT CHECK (intent IN ('plan_entry', 'plan_exit')),
        idem_key    TEXT NOT NULL UNIQUE,
        plan_sha256 TEXT,
        state       TEXT NOT NULL DEFAULT 'queued' CHECK (state IN ('queued', 'running', 'done')),
        admitted_at REAL NOT NULL
    );
    CREATE INDEX queue_by_session ON queue(session_id, state, position);

    CREATE TABLE conversation (
        session_id  TEXT NOT NULL REFERENCES sessions(id),
        seq         INTEGER NOT NULL,
        message     TEXT NOT NULL,
        PRIMARY KEY (session_id, seq)
    );

    -- A row is a batch of transcript events, one JSON object per line.
    CREATE TABLE events (
        id          INTEGER PRIMARY KEY,
        session_id  TEXT NOT NULL REFERENCES sessions(id),
        event       TEXT NOT NULL
    );
    CREATE INDEX events_by_session ON events(session_id, id);

    CREATE TABLE questionnaires (
        id          TEXT PRIMARY KEY,
        session_id  TEXT NOT NULL REFERENCES sessions(id),
        kind        TEXT NOT NULL CHECK (kind IN ('plan_approval', 'plan_entry')),
        plan_path   TEXT NOT NULL,
        snapshot    TEXT NOT NULL,
        sha256      TEXT NOT NULL,
        truncated   INTEGER NOT NULL,
        state       TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'approved', 'deferred', 'revised', 'withdrawn')),
        feedback    TEXT,
        opened_at   REAL NOT NULL,
        answered_at REAL
    );
    CREATE INDEX questionnaires_by_session ON questionnaires(session_id, state);

    CREATE TABLE audit (
        id          INTEGER PRIMARY KEY,
        session_id  TEXT NOT NULL REFERENCES sessions(id),
        agent_id    TEXT NOT NULL,
        call_id     TEXT NOT NULL,
        record      TEXT NOT NULL
    );
    CREATE INDEX audit_by_session ON audit(session_id, id);
    "#,
    // 2: sub-agents keep their own conversation, queue and transcript under
    // a session row of kind 'agent', listed in `agents` under their parent;
    // a session is run by one process at a time (`leases`).
    r#"
    ALTER TABLE sessions ADD COLUMN kind TEXT NOT NULL DEFAULT 'session'
        CHECK (kind IN ('session', 'agent'));

    CREATE TABLE agents (
        id          TEXT PRIMARY KEY REFERENCES sessions(id),
        parent_id   TEXT NOT NULL REFERENCES sessions(id),
        path        TEXT NOT NULL,
        role        TEXT NOT NULL,
        state       TEXT NOT NULL CHECK (state IN ('running', 'idle', 'interrupted', 'crashed')),
        report      TEXT,
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL
    );
    CREATE INDEX agents_by_parent ON agents(parent_id, path);

    CREATE TABLE leases (
        session_id  TEXT PRIMARY KEY REFERENCES sessions(id),
        owner       TEXT NOT NULL,
        host        TEXT NOT NULL,
        pid         INTEGER NOT NULL,
        started     INTEGER NOT NULL,
        acquired_at REAL NOT NULL,
        renewed_at  REAL NOT NULL
    );
    "#,
    // 3: workflow runs. A run has a `sessions` row of kind 'agent' (its
    // steps are agents under it, and it is leased like a session); its
    // step instances are keyed for exact resume; other processes ask a
    // running run to cancel through `workflow_cancels`.
    r#"
    CREATE TABLE workflow_runs (
        id          TEXT PRIMARY KEY REFERENCES sessions(id),
        caller_id   TEXT,
        name        TEXT NOT NULL,
        file        TEXT,
        source      TEXT NOT NULL,
        settings    TEXT NOT NULL,
        status      TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'cancelled')),
        created_at  REAL NOT NULL,
        updated_at  REAL NOT NULL
    );
    CREATE INDEX workflow_runs_by_time ON workflow_runs(updated_at);

    CREATE TABLE workflow_instances (
        run_id      TEXT NOT NULL REFERENCES workflow_runs(id),
        step        TEXT NOT NULL,
        idx         INTEGER NOT NULL,
        seq         INTEGER NOT NULL,
        item        TEXT,
        key         TEXT,
        state       TEXT NOT NULL CHECK (state IN
                    ('pending', 'dispatched', 'finalized', 'verified', 'failed', 'blocked', 'cancelled')),
        agent_id    TEXT,
        output      TEXT,
        reason      TEXT,
        attempts    INTEGER NOT NULL DEFAULT 0,
        tokens      INTEGER NOT NULL DEFAULT 0,
        updated_at  REAL NOT NULL,
        PRIMARY KEY (run_id, step, idx)
    );

    CREATE TABLE workflow_cancels (
        id           INTEGER PRIMARY KEY,
        run_id       TEXT NOT NULL REFERENCES workflow_runs(id),
        target       TEXT NOT NULL,
        requested_at REAL NOT NULL
    );
    "#,
    // 4: a session's goal, its record stored whole (`goal::Goal`);
    // continuations are queue rows of source 'continuation'.
    r#"
    CREATE TABLE goals (
        session_id  TEXT PRIMARY KEY REFERENCES sessions(id),
        status      TEXT NOT NULL CHECK (status IN
                    ('active', 'paused', 'blocked', 'budget_limited', 'usage_limited', 'complete')),
        record      TEXT NOT NULL,
        updated_at  REAL NOT NULL
    );
    "#,
    // 5: only sessions are looked up by workspace; sub-agents and workflow
    // steps (kind 'agent', most rows of a fan-out) leave the index, whose
    // entry every write of theirs moved (it is keyed by `updated_at`).
    r#"
    DROP INDEX sessions_by_workspace;
    CREATE INDEX sessions_by_workspace ON sessions(workspace, updated_at)
        WHERE kind = 'session';
    "#,
    // 6: how a session or a workflow run chose its model and its session
    // rules (`launch::LaunchRecord`), so a resume keeps them. Keyed by the
    // session's id or the run's; never holds a key.
    r#"
    CREATE TABLE launches (
        owner       TEXT PRIMARY KEY,
        record      TEXT NOT NULL,
        updated_at  REAL NOT NULL
    );
    "#,
    // 7: managed background processes while they run
    // (`process::ProcessRecord`), so the next cadre kills what a cadre
    // killed with SIGKILL left running.
    r#"
    CREATE TABLE processes (
        key          TEXT PRIMARY KEY,
        session_id   TEXT NOT NULL,
        owner        TEXT NOT NULL,
        command      TEXT NOT NULL,
        pid          INTEGER NOT NULL,
        started      INTEGER NOT NULL,
        host_pid     INTEGER NOT NULL,
        host_started INTEGER NOT NULL,
        created_at   REAL NOT NULL
    );
    "#,
];

/// The schema version this cadre writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the store up to [`SCHEMA_VERSION`], or refuses a newer one.
pub(super) fn migrate(conn: &mut Connection, path: &str) -> Result<(), StoreError> {
    let found: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(|e| StoreError::unreadable(path, &e))?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let version = index as i64 + 1;
        let tx = conn
            .transaction()
            .map_err(|e| StoreError::unreadable(path, &e))?;
        tx.execute_batch(sql).map_err(|e| StoreError::Migration {
            path: path.to_string(),
            version,
            message: e.to_string(),
        })?;
        tx.pragma_update(None, "user_version", version)
            .map_err(|e| StoreError::unreadable(path, &e))?;
        tx.commit().map_err(|e| StoreError::unreadable(path, &e))?;
    }
    Ok(())
}
