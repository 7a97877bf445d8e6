//! The permission audit log (P6): one record per decision not made by a
//! person, in the `audit` table of the agent's store (a sub-agent's under
//! its own row), batched by the store, so no I/O happens on the
//! agent's mailbox.

use cadre_runtime::permission::{Decision, Posture};
use serde::Serialize;
use serde_json::Value;

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

/// A handle to an agent's audit log: the `audit` table of its store, under
/// its own row, batched with its other appends.
#[derive(Debug, Clone)]
pub struct AuditLog {
    store: StoreHandle,
    row: std::sync::Arc<str>,
}

impl AuditLog {
    /// The audit log of the agent whose store row is `row`.
    pub fn new(store: StoreHandle, row: std::sync::Arc<str>) -> Self {
        Self { store, row }
    }

    /// Records one decision.
    pub fn record(&self, record: AuditRecord) {
        match serde_json::to_string(&record) {
            Ok(json) => self.store.append(
                &self.row,
                Vec::new(),
                Vec::new(),
                vec![(record.agent_id.clone(), record.call_id.clone(), json)],
            ),
            Err(err) => tracing::error!(%err, "an audit record could not be encoded"),
        }
    }
}

/// Seconds since the Unix epoch, now.
pub fn now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}
