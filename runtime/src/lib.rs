//! cadre's domain, with no actors: the tool contract and registry, the
//! built-in tools, modes and their gates, the model clients, and the turn
//! loop as a pure state machine.
//!
//! # Layout
//! - [`protocol`]: `Op` in, `Event` out; the session's wire vocabulary.
//! - [`message`]: the conversation's messages and tool calls.
//! - [`mode`]: Plan, Work, Operate.
//! - [`tool`]: definitions, registry, gates, workspace confinement, the one
//!   execution entry point, the built-in tools.
//! - [`model`]: the streaming client trait, the OpenAI-compatible client, the
//!   retry policy, the scripted model.
//! - [`instructions`]: the project's `AGENTS.md` files, read for an agent.
//! - [`prompt`]: the system prompt (with its environment block) and the
//!   Plan reminders.
//! - [`turn`]: the turn loop, `step(input) -> effects`.
//! - [`lifecycle`]: a session's queue, one turn at a time, `step(input) -> effects`.
//! - [`paths`]: the data directory and the files of a session.
//! - [`permission`]: postures, rules, protected paths, the floor, the guardian's protocol, the ledger.
//! - [`agent`]: sub-agents' authority (it only narrows, also live), typed
//!   agent and approval ids, the child table, reports.
//! - [`context`]: context windows, the token estimate, compaction (pure).
//! - [`config`]: configuration files and their precedence.
//! - [`trust`]: workspace trust: what an untrusted project's config may
//!   still do, the user's record of trusted workspaces.
//! - [`goal`]: a session's goal: statuses, settlement, breaker, budgets, verdicts, continuations.
//! - [`settings`]: user defaults in `settings.toml`, replaced whole under a cross-process lock.
//! - [`mcp`]: MCP servers over stdio, their tools behind the same gates.
//! - [`snapshot`]: workspace snapshots in a side git repository, and restore.
//! - [`sandbox`]: commands under Landlock, with a clean environment, bounded
//!   output and process groups that die with the call.
//! - [`hooks`]: commands run at points of every agent's life; the
//!   `pre_tool_use` layer of the permission order.
//! - [`process`]: managed background processes: their output ring, bounds,
//!   ownership, and what a killed cadre left running.
//!
//! **Invariant:** this crate knows nothing about ractor, and writes nothing to
//! stdout or stderr.

#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod agent;
pub mod config;
pub mod context;
pub mod goal;
pub mod hooks;
pub mod instructions;
pub mod lifecycle;
pub mod mcp;
pub mod message;
pub mod mode;
pub mod model;
pub mod paths;
pub mod permission;
pub mod plan;
pub mod process;
pub mod prompt;
pub mod protocol;
pub mod sandbox;
pub mod settings;
pub mod snapshot;
pub mod store;
pub mod tool;
pub mod trust;
pub mod turn;

pub use message::{Message, ToolCall};
pub use mode::Mode;
pub use protocol::{Event, Op};
