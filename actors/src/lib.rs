//! cadre's actors: thin ractor shells around the pure machines of
//! `cadre-runtime`, talking only through mailboxes.
//!
//! # Layout
//! - [`session`]: [`SessionActor`] owns the conversation, the mode and the
//!   queue, runs one turn at a time, and supervises it; [`spawn_session`]
//!   starts one and hands back its event stream.
//! - [`turn`]: [`TurnActor`] steps a `TurnMachine`, running model streams and
//!   tool calls in tasks whose results come back as messages, so it (and the
//!   session above it) always answers cancel and status.
//! - [`guardian`]: [`guardian::GuardianActor`], one Auto-Review per held call.
//! - [`audit`]: the audit log, in the store or (for sub-agents) a file.
//! - [`store`]: [`store::StoreActor`], the one owner of the SQLite store.
//!
//! The guarantees (message priority, what cancel does, what a supervisor
//! does on a child's failure) are in `docs/runtime-semantics.md`.

pub mod audit;
pub mod guardian;
pub mod session;
pub mod store;
pub mod turn;

pub use session::{
    EventSink, PermissionConfig, SessionActor, SessionConfig, SessionHandle, SessionMsg,
    SessionServices, SessionSnapshot, Subagents, spawn_session,
};
pub use turn::{TurnActor, TurnMsg};
