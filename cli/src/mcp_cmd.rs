//! `cadre mcp list`: starts the configured MCP servers as a session would,
//! reports each one's state, tools and their safety, and stops them.
//! (`cadre mcp serve` is [`crate::mcp_serve`].)

use std::path::PathBuf;

use cadre_runtime::config::{Config, ConfigPaths};
use cadre_runtime::mcp::{McpHub, render_reports};
use cadre_runtime::tool::{ToolRegistry, Workspace};

use crate::args::McpListArgs;
use crate::exit::{self, CliError};

/// `cadre mcp list`; exits 0 when the list was printed, whatever the
/// servers did.
pub async fn run(
    args: McpListArgs,
    current_dir: Option<PathBuf>,
    config_dir: Option<PathBuf>,
) -> Result<u8, CliError> {
    let Some(workspace) = args.workspace.or(current_dir) else {
        return Err(CliError::usage(
            "cannot tell the current directory; pass --workspace",
        ));
    };
    let paths = ConfigPaths {
        user: config_dir.as_ref().map(|d| d.join("config.toml")),
        workspace: Some(workspace.clone()),
        explicit: args.config,
        trust_book: config_dir
            .as_ref()
            .map(|d| d.join(cadre_runtime::trust::TRUST_FILE)),
    };
    let config = Config::load(&paths).map_err(|e| CliError::config(e.to_string()))?;
    let workspace = Workspace::new(&workspace)
        .map_err(|e| CliError::usage(format!("--workspace {}: {e}", workspace.display())))?;
    let mut registry = ToolRegistry::new();
    let servers =
        crate::attach::with_credentials(config.mcp_servers, |var| std::env::var(var).ok());
    let hub = McpHub::start(servers, workspace.root(), &mut registry).await;
    let report = render_reports(&hub.reports().await);
    crate::outln!("{}", crate::printable::printable(&report));
    hub.shutdown().await;
    Ok(exit::SUCCESS)
}
