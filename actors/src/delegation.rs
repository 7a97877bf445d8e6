//! Delegation to a workflow engine (M5, W8): what an agent hands an engine
//! when its model calls the Operate `workflow` tool, or when a host runs a
//! workflow file for it.
//!
//! The engine lives above this crate (`cadre-workflows` depends on it), so
//! the agent knows it only as a mailbox ([`Delegate`]), whose messages
//! ([`DelegationMsg`]) are declared here: it sends the engine a [`Caller`]
//! (its spec with its authority as it is now, its live authority, its
//! services and its event sink), the plan and the `workflow` call's reply
//! port, which the call's own task awaits. Steps run as agents under the caller's live authority,
//! so they never exceed it, and its later narrowing reaches them.

use std::path::PathBuf;
use std::sync::Arc;

use cadre_runtime::agent::LiveAuthority;
use cadre_runtime::protocol::ApprovalDecision;
use cadre_runtime::tool::ToolOutcome;
use ractor::ActorRef;

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

/// What an agent asks of the workflow engine: the mailbox the engine
/// serves (`cadre-workflows` spawns the actor behind it; a host without
/// one offers no `workflow` tool). Nothing here waits for the engine: a
/// run's report comes back on the `workflow` call's reply port, and a
/// prompt's answer needs no reply.
pub enum DelegationMsg {
    /// Validate and run `plan` (the workflow as JSON) for `caller`.
    /// `reply` takes the report the model reads once the run is done,
    /// blocked or out of budget, or, for an invalid plan, the error
    /// naming each problem (nothing ran).
    Run {
        /// Who runs it (boxed: it is large, and the mailbox holds the
        /// messages of every agent of the host).
        caller: Box<Caller>,
        /// The workflow, as the model wrote it.
        plan: serde_json::Value,
        /// Where the report goes: the `workflow` call's own port, closed
        /// if the call is cancelled (with its turn), which cancels the
        /// run.
        reply: tokio::sync::oneshot::Sender<ToolOutcome>,
    },
    /// A person's answer to a step's prompt
    /// (`step:<name>[<i>]:approval:<n>`), given to the session whose tree
    /// delegated the run. It reaches only the one run of that tree in
    /// progress that has the step (the runs a tree has at once have
    /// distinct step names): another session's run with the same step
    /// names never sees it. When none has it the answer is refused on
    /// `events`, as the agent refuses an id it does not know.
    Approve {
        /// The session (the tree's root) the answer was given to.
        session: String,
        /// The prompt's id.
        id: String,
        /// The answer.
        decision: ApprovalDecision,
        /// What the person said with it.
        reason: Option<String>,
        /// The session's event stream, for the refusal.
        events: EventSink,
    },
}

impl ractor::Message for DelegationMsg {}

impl std::fmt::Debug for DelegationMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DelegationMsg::Run { caller, .. } => f
                .debug_struct("Run")
                .field("caller", caller)
                .finish_non_exhaustive(),
            DelegationMsg::Approve {
                session,
                id,
                decision,
                ..
            } => f
                .debug_struct("Approve")
                .field("session", session)
                .field("id", id)
                .field("decision", decision)
                .finish_non_exhaustive(),
        }
    }
}

/// The workflow engine's mailbox, as an agent holds it.
pub type Delegate = ActorRef<DelegationMsg>;
