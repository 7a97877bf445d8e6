//! End-to-end tests of cadre through its public APIs and its binary, against
//! a local mock OpenAI-compatible server.

// This whole crate is test code: a failed expectation is a failed test.
#![allow(clippy::expect_used, clippy::unwrap_used)]

mod acp;
mod agents;
mod cancel;
mod cli;
mod cluster;
mod cluster_agents;
mod command_line;
mod context;
mod crash;
mod durability;
mod goals;
mod hermetic;
mod hooks;
mod kernel;
mod mcp;
mod mcp_cli;
mod mcp_hostile;
mod mcp_http;
mod mcp_serve;
mod models;
mod permissions;
mod plan_lifecycle;
mod plan_mode;
mod processes;
mod protected_paths;
mod restore;
mod retries;
mod samples;
mod sandbox;
mod settings;
mod shell;
mod streaming;
mod support;
mod tools;
mod trust;
mod workflows;
mod write_ahead;
