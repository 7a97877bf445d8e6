//! Delegation to a workflow engine (M5, W8): what an agent hands an engine
//! when its model calls the Operate `workflow` tool, or when a host runs a
//! workflow file for it.
//!
//! The engine lives above this crate (`cadre-workflows` depends on it), so
//! the agent knows it only as a [`Delegation`]: it gives the engine a
//! [`Caller`] (its spec with its authority as it is now, its live
//! authority, its services and its event sink) and the plan, and waits for
//! the report. Steps run as agents under the caller's live authority, so
//! they never exceed it, and its later narrowing reaches them.

use std::path::PathBuf;
use std::sync::Arc;

use cadre_runtime::agent::LiveAuthority;
use cadre_runtime::protocol::ApprovalDecision;
use cadre_runtime::tool::ToolFuture;

use crate::events::EventSink;
use crate::kernel::{AgentServices, AgentSpec};

/// Who runs a workflow, and with what.
#[derive(Clone)]
pub struct Caller {
    /// The caller as an agent: its authority is the one in force now
    /// (steps narrow it), its workspace, files, sandbox and sub-agent
    /// roles are the steps'.
    pub spec: AgentSpec,
    /// The caller's live authority: each step's parent.
    pub live: Arc<LiveAuthority>,
    /// Its model, tools and store.
    pub services: AgentServices,
    /// Where the run's events go (the caller's stream).
    pub events: EventSink,
    /// The calling session's id, recorded with the run (none for a run a
    /// host started on its own).
    pub session_id: Option<String>,
    /// The directory each run's files go under (`<runs dir>/<run id>`).
    pub runs_dir: PathBuf,
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("session_id", &self.session_id)
            .field("path", &self.spec.path)
            .field("runs_dir", &self.runs_dir)
            .finish()
    }
}

/// A workflow engine an agent can delegate to.
pub trait Delegation: Send + Sync + 'static {
    /// Validates and runs `plan` (the workflow as JSON) for `caller`;
    /// resolves, once the run is done, blocked or out of budget, to the
    /// report the model reads. An invalid plan is an error naming each
    /// problem.
    fn run(&self, caller: Caller, plan: serde_json::Value) -> ToolFuture<'static>;

    /// Routes a person's answer to a step's approval prompt
    /// (`step:<name>[<i>]:approval:<n>`); false when no running workflow
    /// asked it.
    fn approve(&self, id: &str, decision: ApprovalDecision, reason: Option<String>) -> bool;
}

impl std::fmt::Debug for dyn Delegation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Delegation")
    }
}
