//! cadre's actors: thin ractor shells around the pure machines of
//! `cadre-runtime`, talking only through mailboxes.
//!
//! # Layout
//! - [`kernel`]: [`AgentSpec`] and [`spawn_agent`], the one way every
//!   supervisor (a session for its sub-agents, goal and workflow
//!   supervisors) starts an agent.
//! - [`session`]: [`SessionActor`], the agent actor: it owns the
//!   conversation, the mode and the queue, runs one turn at a time, and
//!   supervises it and its sub-agents; [`spawn_session`] starts a user's
//!   session and hands back its event stream.
//! - [`turn`]: [`TurnActor`] steps a `TurnMachine`, running model streams and
//!   tool calls in tasks whose results come back as messages, and reports
//!   to its supervisor as [`turn::TurnReport`]s.
//! - [`guardian`]: [`guardian::GuardianActor`], one Auto-Review per held
//!   call, answering with a [`guardian::GuardianVerdict`].
//! - [`delegation`]: [`delegation::DelegationMsg`], the mailbox by which
//!   an agent hands a workflow to the engine above this crate (the Operate
//!   `workflow` tool), and the [`delegation::Caller`] it hands over.
//! - [`host`]: [`Host`], what a program embedding cadre builds once: the
//!   store, the model, the tools, the roles; it starts and resumes sessions.
//! - [`events`]: [`EventSink`], an agent's event output and stored transcript.
//! - [`audit`]: the audit log, in the store.
//! - [`store`]: [`store::StoreHandle`], the way to the store's thread, the
//!   one owner of the SQLite store, answering typed requests.
//!
//! The guarantees (message priority, what cancel does, what a supervisor
//! does on a child's failure) are in `docs/runtime-semantics.md`.

pub mod audit;
pub mod delegation;
pub mod events;
pub mod guardian;
pub mod hooks;
pub mod host;
pub mod kernel;
pub mod session;
pub mod store;
pub mod turn;
pub mod verifier;

pub use events::EventSink;
pub use host::{Host, HostBuilder, HostError, ModelChoice, Resume, SessionOptions, Started};
pub use kernel::{AgentServices, AgentSpec, SpawnedAgent, StartError, spawn_agent};
pub use session::{
    PermissionConfig, SessionActor, SessionConfig, SessionHandle, SessionMsg, SessionServices,
    SessionSnapshot, Subagents, spawn_session,
};
pub use turn::{TurnActor, TurnMsg};
