//! The tool contract (T1–T3): definitions, the registry, and the one entry
//! point every call goes through.
//!
//! # Layout
//! - `definition`: [`ToolDefinition`], [`Safety`], [`Tool`], [`ToolError`].
//! - `registry`: [`ToolRegistry`], stable order, duplicate names refused.
//! - `gate`: the definition gate and the execution gate, both derived from the
//!   definitions (M2, M3).
//! - `workspace`: path confinement for file tools (T6), and where a call's
//!   paths really lead before it is decided.
//! - `runner`: [`ToolRunner::execute`], validation, gate, timeout, panics.
//! - `builtin`: the built-in tools (T4).

mod builtin;
mod definition;
mod gate;
pub mod preview;
mod registry;
mod runner;
mod workspace;

pub use builtin::{
    AGENT_TOOL, ENTER_PLAN_TOOL, FileLimits, PROCESS_TOOL, RUN_CHECK, RunCheck, TodoItem,
    WORKFLOW_TOOL, builtin_tools, builtin_tools_with, check_edit, replace_exact, truncate_middle,
};
pub use definition::{
    AgentHost, AgentRequest, Authorization, Authorizer, DecisionFuture, ErrorCode, GoalHost,
    GoalToolRequest, PlanHost, PlanRequest, Safety, SnapshotFuture, Snapshotter, Tool, ToolContext,
    ToolDefinition, ToolError, ToolFuture, WorkflowHost, builtin_definitions,
};
pub use gate::{Offer, ToolSpec, definition_gate, execution_gate, offered_tools};
pub use registry::{RegistryError, ToolRegistry};
pub use runner::{ToolOutcome, ToolRunner};
pub use workspace::Workspace;

#[cfg(test)]
mod tests;
