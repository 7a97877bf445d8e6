//! A session's MCP servers: started together, their tools registered like
//! any other, their state reported, killed together.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::config::McpServerConfig;
use super::server::{McpServer, ServerState, StartFailure};
use super::tools::{MAX_TOOLS, MAX_TOOLS_BYTES, definition};
use crate::tool::{Safety, Tool, ToolContext, ToolDefinition, ToolFuture, ToolRegistry};

/// One server's tool, registered as `mcp_<server>_<tool>`.
pub struct McpTool {
    definition: ToolDefinition,
    /// The tool's name on the server.
    remote: String,
    server: Arc<McpServer>,
}

impl Tool for McpTool {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn run<'a>(&'a self, args: Value, _ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(self.server.call(&self.remote, args))
    }
}

/// What became of one configured server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// It started; these tools are registered.
    Started,
    /// It did not start; the session goes on without it.
    Failed(StartFailure),
    /// The configuration says not to start it.
    Disabled(String),
}

/// One server as reported by `cadre mcp list` and `/mcp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerReport {
    /// Its name.
    pub name: String,
    /// Its command line (`url …` for a remote server).
    pub command: String,
    /// The file that declares it.
    pub declared_in: String,
    /// Whether its `readOnlyHint`s are believed.
    pub trusted: bool,
    /// `running`, or why not.
    pub state: String,
    /// Its name and version, as it announced them.
    pub announced: Option<String>,
    /// Its registered tools and their safety.
    pub tools: Vec<(String, Safety)>,
    /// Its tools that were not registered, and why.
    pub skipped: Vec<(String, String)>,
}

struct Entry {
    server: Arc<McpServer>,
    outcome: Outcome,
    tools: Vec<(String, Safety)>,
    skipped: Vec<(String, String)>,
}

/// The MCP servers of a session.
#[derive(Default)]
pub struct McpHub {
    entries: Vec<Entry>,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.entries.iter().map(|e| &e.server))
            .finish()
    }
}

impl McpHub {
    /// Starts every enabled server at once (each within its startup
    /// timeout) and registers the tools of those that started. A server
    /// that fails is reported by [`McpHub::reports`] and left out.
    pub async fn start(
        servers: Vec<McpServerConfig>,
        workspace: &Path,
        registry: &mut ToolRegistry,
    ) -> Self {
        let started = futures::future::join_all(servers.into_iter().map(|config| async move {
            let disabled = config.disabled.clone();
            let server = McpServer::new(config, workspace);
            let started = match disabled {
                Some(why) => Err(Outcome::Disabled(why)),
                None => server.start().await.map_err(Outcome::Failed),
            };
            (server, started)
        }))
        .await;
        let mut entries = Vec::new();
        for (server, started) in started {
            let mut entry = Entry {
                server: server.clone(),
                outcome: Outcome::Started,
                tools: Vec::new(),
                skipped: Vec::new(),
            };
            match started {
                Err(outcome) => {
                    // The host reports failures (`McpHub::failures`).
                    if let Outcome::Failed(failure) = &outcome {
                        tracing::debug!(server = %server.config().name, %failure, "MCP server did not start");
                    }
                    entry.outcome = outcome;
                }
                Ok(tools) => {
                    // A server cannot flood every model request: tools past
                    // the count or the size are not offered, and said so.
                    let mut bytes = 0;
                    for tool in &tools {
                        let remote = tool
                            .get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string();
                        if !server.config().offers(&remote) {
                            continue;
                        }
                        let registered = definition(server.config(), tool)
                            .map_err(|e| e.to_string())
                            .and_then(|def| {
                                bytes += def.input_schema.to_string().len() + def.description.len();
                                if entry.tools.len() >= MAX_TOOLS {
                                    return Err(format!(
                                        "the server offers more than {MAX_TOOLS} tools"
                                    ));
                                }
                                if bytes > MAX_TOOLS_BYTES {
                                    return Err(format!(
                                        "the server's tools take more than {} KiB of every request",
                                        MAX_TOOLS_BYTES / 1024
                                    ));
                                }
                                let shown = (def.name.clone(), def.safety);
                                let tool = Arc::new(McpTool {
                                    definition: def,
                                    remote: remote.clone(),
                                    server: server.clone(),
                                });
                                registry
                                    .register(tool)
                                    .map(|()| shown)
                                    .map_err(|e| e.to_string())
                            });
                        match registered {
                            Ok(shown) => entry.tools.push(shown),
                            Err(why) => entry.skipped.push((remote, why)),
                        }
                    }
                }
            }
            entries.push(entry);
        }
        Self { entries }
    }

    /// The servers that did not start, with why.
    pub fn failures(&self) -> Vec<(String, StartFailure)> {
        self.entries
            .iter()
            .filter_map(|e| match &e.outcome {
                Outcome::Failed(failure) => Some((e.server.config().name.clone(), failure.clone())),
                Outcome::Started | Outcome::Disabled(_) => None,
            })
            .collect()
    }

    /// Every configured server, as it is now.
    pub async fn reports(&self) -> Vec<ServerReport> {
        let mut reports = Vec::new();
        for entry in &self.entries {
            let config = entry.server.config();
            let state = match &entry.outcome {
                Outcome::Disabled(why) => format!("disabled: {why}"),
                Outcome::Failed(failure) => format!("failed to start: {failure}"),
                Outcome::Started => match entry.server.state().await {
                    ServerState::Running => "running".into(),
                    ServerState::Down(why) => format!("stopped: {why}"),
                },
            };
            let mut command = match &config.remote {
                Some(remote) => format!("url {}", remote.url),
                None => config.command.clone(),
            };
            for arg in &config.args {
                command.push(' ');
                command.push_str(arg);
            }
            reports.push(ServerReport {
                name: config.name.clone(),
                command,
                declared_in: config.declared_in.display().to_string(),
                trusted: config.trusted,
                state,
                announced: entry.server.announced().await,
                tools: entry.tools.clone(),
                skipped: entry.skipped.clone(),
            });
        }
        reports
    }

    /// Kills every server.
    pub async fn shutdown(&self) {
        for entry in &self.entries {
            entry.server.shutdown().await;
        }
    }
}

/// The reports as text: one block per server, its tools indented.
pub fn render_reports(reports: &[ServerReport]) -> String {
    if reports.is_empty() {
        return "no MCP servers are configured ([mcp_servers.NAME] in config.toml, or .mcp.json)"
            .into();
    }
    let mut out = String::new();
    for r in reports {
        out.push_str(&format!(
            "{}  {}  {}\n  command: {}\n  declared in: {}\n",
            r.name,
            r.state,
            if r.trusted { "trusted" } else { "untrusted" },
            r.command,
            r.declared_in
        ));
        if let Some(announced) = &r.announced {
            out.push_str(&format!("  server: {announced}\n"));
        }
        for (tool, safety) in &r.tools {
            let safety = match safety {
                Safety::ReadOnly => "read_only",
                Safety::SideEffect => "side_effect",
            };
            out.push_str(&format!("  {tool}  {safety}\n"));
        }
        for (tool, why) in &r.skipped {
            out.push_str(&format!("  {tool}  not offered: {why}\n"));
        }
    }
    out.trim_end().to_string()
}
