//! The permission audit log (P6): one record per decision not made by a
//! person.
//!
//! A session with a store writes the records to its `audit` table (batched
//! with its other appends by the store actor); a sub-agent, which has no
//! store of its own, appends JSON lines to `<its session dir>/audit.jsonl`
//! through a writer task, which writes whatever has queued up in one append.
//! Either way no I/O happens on the session's mailbox.

use std::io::Write;
use std::path::PathBuf;

use cadre_runtime::permission::{Decision, Posture};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::store::StoreHandle;

/// One audit record.
#[derive(Debug, Clone, Serialize)]
pub struct AuditRecord {
    /// Seconds since the Unix epoch.
    pub time: f64,
    /// The session.
    pub session_id: String,
    /// The agent whose call it was.
    pub agent_id: String,
    /// The call.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The exact arguments.
    pub arguments: Value,
    /// The posture in force.
    pub posture: Posture,
    /// The decision and who made it.
    #[serde(flatten)]
    pub decision: Decision,
    /// The transcript line.
    pub line: String,
}

/// A handle to a session's audit log.
#[derive(Debug, Clone)]
pub enum AuditLog {
    /// The session's store.
    Store(StoreHandle),
    /// A JSON-lines file, through a writer task.
    File(mpsc::UnboundedSender<AuditRecord>),
}

impl AuditLog {
    /// Starts a writer appending to `path` (created, with its directory, on
    /// the first record).
    pub fn file(path: PathBuf) -> Self {
        let (records, mut queue) = mpsc::unbounded_channel::<AuditRecord>();
        tokio::spawn(async move {
            while let Some(first) = queue.recv().await {
                let mut batch = vec![first];
                while let Ok(next) = queue.try_recv() {
                    batch.push(next);
                }
                let path = path.clone();
                let written = tokio::task::spawn_blocking(move || append(&path, &batch)).await;
                if let Ok(Err(err)) = written {
                    tracing::error!(%err, "the audit log could not be written");
                }
            }
        });
        AuditLog::File(records)
    }

    /// Records one decision.
    pub fn record(&self, record: AuditRecord) {
        match self {
            AuditLog::Store(store) => match serde_json::to_string(&record) {
                Ok(json) => store.append(
                    &record.session_id,
                    Vec::new(),
                    Vec::new(),
                    vec![(record.agent_id.clone(), record.call_id.clone(), json)],
                ),
                Err(err) => tracing::error!(%err, "an audit record could not be encoded"),
            },
            // The writer only stops when every handle is gone.
            AuditLog::File(records) => {
                let _ = records.send(record);
            }
        }
    }
}

fn append(path: &std::path::Path, batch: &[AuditRecord]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut text = String::new();
    for record in batch {
        text.push_str(&serde_json::to_string(record).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    file.write_all(text.as_bytes())?;
    file.flush()
}

/// Seconds since the Unix epoch, now.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}
