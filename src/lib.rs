//! cadre: an actor-based multi-agent orchestration runtime for LLM coding
//! agents. This facade re-exports the layers:
//!
//! - [`runtime`]: the domain (tools, gates, model clients, the turn machine);
//! - [`actors`]: the ractor actors (session, turn);
//! - [`workflows`]: workflow files, their scheduler and the actors that run them;
//! - [`cli`]: the `cadre` command line.

pub use cadre_actors as actors;
pub use cadre_cli as cli;
pub use cadre_runtime as runtime;
pub use cadre_workflows as workflows;
