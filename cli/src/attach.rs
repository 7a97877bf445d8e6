//! What a session gets besides the built-in tools: the MCP servers' tools
//! and the workspace's snapshots. The host calls [`attach`] once, before
//! it spawns the session.

use std::sync::Arc;

use cadre_runtime::mcp::{McpHub, McpServerConfig};
use cadre_runtime::snapshot::Snapshots;
use cadre_runtime::tool::ToolRegistry;

use crate::config::RunConfig;

/// The session's MCP servers and snapshots.
#[derive(Clone)]
pub struct Attached {
    /// The MCP servers, for `/mcp`; they die with the session's tools.
    pub mcp: Arc<McpHub>,
    /// Their tools, for the session's registry.
    pub tools: Vec<Arc<dyn cadre_runtime::tool::Tool>>,
    /// The workspace's snapshots; `None` when `[snapshots] enabled = false`.
    pub snapshots: Option<Arc<Snapshots>>,
}

/// Starts the configured MCP servers (at once, each within its startup
/// timeout), registers their tools, and opens the workspace's snapshots.
/// A server that does not start is reported on stderr, with the end of its
/// own stderr, and the session goes on without it.
pub async fn attach(config: &RunConfig, workspace: &std::path::Path) -> Attached {
    let mut registry = ToolRegistry::new();
    let mcp = McpHub::start(config.mcp_servers.clone(), workspace, &mut registry).await;
    for (name, failure) in mcp.failures() {
        let failure = failure.to_string();
        let failure = crate::printable::printable(&failure);
        crate::errln!("cadre: MCP server '{name}' did not start: {failure}; going on without it");
    }
    let snapshots = config
        .snapshot_max_file_bytes
        .map(|cap| Arc::new(Snapshots::new(&config.data_dir, workspace, cap)));
    Attached {
        mcp: Arc::new(mcp),
        tools: registry.tools().cloned().collect(),
        snapshots,
    }
}

/// Reads the remote servers' credentials with `lookup` (the process
/// environment): a server whose variable is unset does not start, and
/// says which variable it needs.
pub fn with_credentials(
    mut servers: Vec<McpServerConfig>,
    lookup: impl Fn(&str) -> Option<String>,
) -> Vec<McpServerConfig> {
    for server in &mut servers {
        if let Some(remote) = &mut server.remote
            && server.disabled.is_none()
            && let Err(missing) = remote.resolve(&lookup)
        {
            server.disabled = Some(missing.to_string());
        }
    }
    servers
}
