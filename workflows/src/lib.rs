//! Workflows (W1–W12): a declarative DAG of steps, each run by an agent of
//! its own under a supervisor, with fan-out, checks, durable and exact
//! resume, and live progress; Operate delegation runs through the same
//! engine.
//!
//! A workflow file (TOML, `docs/workflows.md`) is parsed with spans and
//! validated before anything starts, every finding printed
//! `FILE:LINE:COL: message`. The schedule is a pure machine
//! ([`scheduler::Scheduler`]: `step(input) -> effects`); the actors only
//! perform its effects.
//!
//! # Layout
//! - [`cluster`]: step agents on other machines (`cadre node`): the wire,
//!   the node's service, the coordinator's link, placement by free slots.
//! - [`diagnostic`]: findings and how they print.
//! - [`engine`]: the actors that run a workflow (a supervisor per run, a
//!   step actor per running instance), the run in the store, and the
//!   [`engine::Engine`] behind the Operate `workflow` tool.
//! - [`format`]: the file as written, with spans; a JSON plan as TOML.
//! - [`host`]: the library's whole [`Host`]: sessions, workflow runs and
//!   nodes, the engine and the placement joined to the session host.
//! - [`template`]: `{{…}}` references in prompts and scopes.
//! - [`model`]: the validated workflow.
//! - [`validate`]: from text to a [`model::Workflow`], or every finding.
//! - [`scheduler`]: the pure machine that runs a workflow: lifecycle,
//!   fan-out, failure policy, budgets, exact resume, capped hand-forward.

pub mod cluster;
pub mod diagnostic;
pub mod engine;
pub mod format;
pub mod host;
pub mod model;
pub mod scheduler;
pub mod template;
pub mod validate;

pub use host::{Host, RunError};

#[cfg(test)]
mod hooks_tests;
