//! MCP servers (MCP1): started over stdio with rmcp, their tools exposed
//! as `mcp_<server>_<tool>` and passing the same gates as the built-ins.
//!
//! Safety comes from a tool's `readOnlyHint` only when the server is
//! marked `trusted` (in the user's own configuration); every other tool
//! may change things (`side_effect`): Plan refuses it, and the rules, the
//! floor and the posture decide it as they decide any other call. A tool's
//! `path` argument, when its schema has one, is what path rules
//! (`mcp_fs_write_file(src/**)`) and the floor's `.git` check read.
//! `docs/mcp.md` states the rules.
//!
//! # Layout
//! - `config`: `[mcp_servers.NAME]` and `.mcp.json`, merged; a project
//!   cannot start or trust a server on its own.
//! - `tools`: names, definitions, safety and results, with no server.
//! - `server`: one server's process, handshake, calls and restarts.
//! - `hub`: a session's servers, started together, their tools registered.

pub mod config;
mod hub;
mod server;
#[cfg(test)]
mod tests;
pub mod tools;

pub use config::McpServerConfig;
pub use hub::{McpHub, McpTool, Outcome, ServerReport, render_reports};
pub use server::{MAX_RESTARTS, McpServer, ServerState, StartFailure};
