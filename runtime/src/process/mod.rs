//! Managed background processes (PR1): long-running commands an agent
//! starts with the `process` tool, which cadre supervises.
//!
//! A process runs confined like a `bash` call (the same sandbox of the
//! mode and posture, the same environment allow-list), in its own process
//! group, with its output kept in a ring of its last bytes. It belongs to
//! the agent that started it: when that agent ends, its session ends or
//! cadre exits, its group is killed. What a SIGKILL of cadre leaves behind
//! is found in the store's process table and killed at the next start
//! ([`reap`]). `docs/processes.md`.
//!
//! # Layout
//! - `ring`: [`Ring`], the output kept, read by cursor.
//! - `table`: [`Table`], who runs what, and [`ProcessLimits`]; pure.
//! - `reap`: [`ProcessRecord`], the store's row, and what a killed cadre
//!   left running.
//! - `live`: [`Processes`], one session tree's processes: start, read,
//!   wait, stop, and the end of an agent.

mod live;
pub mod reap;
mod ring;
mod table;

pub use live::{
    LedgerFuture, ProcessError, ProcessLedger, ProcessSummary, Processes, StartRequest, Started,
    WaitOutcome,
};
pub use reap::{ProcInfo, ProcessRecord};

/// What a tool call sees of its tree's processes: the tree's [`Processes`]
/// and who is calling.
#[derive(Debug, Clone)]
pub struct ProcessScope {
    /// The processes of the session's tree.
    pub processes: Processes,
    /// The calling agent (its store row), which owns what it starts.
    pub owner: String,
    /// Its session (or workflow run).
    pub session_id: String,
}
pub use ring::{Chunk, Ring};
pub use table::{Entry, LimitError, ProcessLimits, State, Table, name, parse_name};
