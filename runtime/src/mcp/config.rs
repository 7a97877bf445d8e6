//! `[mcp_servers.NAME]` in the config layers and a project's `.mcp.json`,
//! merged into the servers a session starts.
//!
//! A project is not trusted to run code on its own say-so: a server whose
//! command comes from the project (its `.cadre/config.toml` or its
//! `.mcp.json`) starts only when the user's own configuration (the user,
//! local or `--config` file) sets `enabled = true` for it, and only the
//! user's configuration can mark a server `trusted`. A project's entry never
//! replaces the command of a server the user declared. Until the user
//! trusts the workspace (`trust.rs`), a project's server does not start even
//! when enabled: a pull may have changed its command.
//!
//! A remote server (`url`, MCP over streamable HTTP) is declared only in
//! the user's own files: a project's `url` is listed and never started.
//! Its credentials are never in a file: `bearer_token_env_var` and
//! `env_http_headers` name environment variables, which the host reads
//! ([`Remote::resolve`]; the runtime reads no environment).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::config::ConfigError;
use crate::permission::rules::Scope;
use crate::trust::Trust;

/// How long a server may take to start and list its tools, by default.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long one tool call may take, by default.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// `[mcp_servers.NAME]` as written in one file.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    /// The program to run (looked up on `PATH`); it speaks MCP on stdio.
    pub command: Option<String>,
    /// Its arguments.
    pub args: Option<Vec<String>>,
    /// Environment variables added to cadre's own for it.
    pub env: Option<BTreeMap<String, String>>,
    /// Its working directory (default: the workspace).
    pub cwd: Option<PathBuf>,
    /// Seconds it may take to start and list its tools (default 10).
    pub startup_timeout: Option<f64>,
    /// Seconds one tool call may take (default 60).
    pub tool_timeout: Option<f64>,
    /// Only these of its tools are offered (default: all).
    pub enabled_tools: Option<Vec<String>>,
    /// These of its tools are never offered.
    pub disabled_tools: Option<Vec<String>>,
    /// Believe its tools' `readOnlyHint` (default false). Ignored in a
    /// project's files.
    pub trusted: Option<bool>,
    /// Start it (default: yes for the user's servers, no for a project's).
    /// A project's file may only turn a server off.
    pub enabled: Option<bool>,
    /// A remote server's endpoint (`https://…/mcp`), spoken to over MCP's
    /// streamable HTTP instead of a child's stdio. Only in the user's own
    /// files.
    pub url: Option<String>,
    /// The environment variable holding the bearer token sent as
    /// `Authorization: Bearer …` (the token itself is never in a file).
    pub bearer_token_env_var: Option<String>,
    /// Further headers, each read from the environment variable named:
    /// `{ "X-Api-Key" = "SEARCH_KEY" }`.
    pub env_http_headers: Option<BTreeMap<String, String>>,
}

/// A remote server: where it is and which variables hold its credentials.
#[derive(Debug, Clone, PartialEq)]
pub struct Remote {
    /// Its endpoint.
    pub url: String,
    /// The variable holding the bearer token, if it takes one.
    pub bearer_token_env_var: Option<String>,
    /// Header name → the variable holding its value.
    pub env_http_headers: BTreeMap<String, String>,
    /// The values, read by the host with [`Remote::resolve`]; empty until
    /// then.
    pub secrets: Secrets,
}

/// Credentials read from the environment. Never printed.
#[derive(Clone, Default, PartialEq)]
pub struct Secrets {
    /// The bearer token.
    pub bearer: Option<String>,
    /// Header name → value.
    pub headers: BTreeMap<String, String>,
}

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets(..)")
    }
}

impl Remote {
    /// Reads the credentials with `lookup` (the host's environment); says
    /// which variable is missing when one is.
    pub fn resolve(
        &mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<(), MissingCredential> {
        let read = |var: &str| {
            lookup(var)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| MissingCredential(var.to_string()))
        };
        if let Some(var) = &self.bearer_token_env_var {
            self.secrets.bearer = Some(read(var)?);
        }
        for (header, var) in &self.env_http_headers {
            self.secrets.headers.insert(header.clone(), read(var)?);
        }
        Ok(())
    }
}

/// A remote server's credential variable is unset or empty: the server
/// does not start until it is set (not retryable as it is).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the environment variable {0} is not set")]
pub struct MissingCredential(pub String);

/// A server as a session starts it.
#[derive(Debug, Clone, PartialEq)]
pub struct McpServerConfig {
    /// Its name, the `<server>` of `mcp_<server>_<tool>`.
    pub name: String,
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables added for it.
    pub env: BTreeMap<String, String>,
    /// Its working directory; `None` is the workspace.
    pub cwd: Option<PathBuf>,
    /// How long it may take to start and list its tools.
    pub startup_timeout: Duration,
    /// How long one tool call may take.
    pub tool_timeout: Duration,
    /// Only these tools, when set.
    pub enabled_tools: Option<Vec<String>>,
    /// Never these tools.
    pub disabled_tools: Vec<String>,
    /// Its `readOnlyHint`s are believed.
    pub trusted: bool,
    /// The file its command comes from.
    pub declared_in: PathBuf,
    /// Why it does not start, when it does not.
    pub disabled: Option<String>,
    /// A remote server's endpoint and credentials; `None` for a stdio
    /// server (`command`).
    pub remote: Option<Remote>,
}

impl McpServerConfig {
    /// A server running `command` with the defaults (for hosts and tests).
    pub fn new(name: impl Into<String>, command: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            trusted: false,
            declared_in: PathBuf::new(),
            disabled: None,
            remote: None,
        }
    }

    /// A remote server at `url` with the defaults (for hosts and tests).
    pub fn remote(name: impl Into<String>, url: impl Into<String>) -> Self {
        let mut config = Self::new(name, "");
        config.remote = Some(Remote {
            url: url.into(),
            bearer_token_env_var: None,
            env_http_headers: BTreeMap::new(),
            secrets: Secrets::default(),
        });
        config
    }

    /// Whether a remote tool of this server is offered.
    pub fn offers(&self, tool: &str) -> bool {
        self.enabled_tools
            .as_ref()
            .is_none_or(|only| only.iter().any(|t| t == tool))
            && !self.disabled_tools.iter().any(|t| t == tool)
    }
}

/// A project's `.mcp.json`: `{"mcpServers": {NAME: {command, args, env}}}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct McpJson {
    #[serde(default)]
    mcp_servers: BTreeMap<String, McpJsonServer>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpJsonServer {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    /// Remote servers' fields, read only to refuse them clearly.
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
}

/// Reads a project's `.mcp.json` as config entries; a missing file is none.
pub fn read_mcp_json(path: &Path) -> Result<BTreeMap<String, McpServerEntry>, ConfigError> {
    let error = |message: String| ConfigError {
        path: path.display().to_string(),
        message,
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(error(format!("cannot read it: {e}"))),
    };
    let parsed: McpJson = serde_json::from_str(&text).map_err(|e| error(e.to_string()))?;
    let mut entries = BTreeMap::new();
    for (name, server) in parsed.mcp_servers {
        let kind = server
            .kind
            .as_deref()
            .or(server.url.as_ref().map(|_| "url"));
        if let Some(kind) = kind.filter(|k| *k != "stdio") {
            return Err(error(format!(
                "mcpServers.{name}.type: '{kind}' servers are not supported here: a project \
                 cannot add a remote server; declare it (url) in your own config"
            )));
        }
        if server.command.is_none() || !server.headers.is_empty() {
            return Err(error(format!("mcpServers.{name}: 'command' is missing")));
        }
        entries.insert(
            name,
            McpServerEntry {
                command: server.command,
                args: Some(server.args),
                env: Some(server.env),
                cwd: server.cwd,
                ..McpServerEntry::default()
            },
        );
    }
    Ok(entries)
}

/// Merges the layers' entries, lowest precedence first, into the servers
/// to start (see the module's rules). Errors name the file and the entry.
pub fn merge(
    layers: &[(&BTreeMap<String, McpServerEntry>, Scope, &Path)],
    trust: Trust,
) -> Result<Vec<McpServerConfig>, ConfigError> {
    let mut names: Vec<&String> = layers.iter().flat_map(|(e, _, _)| e.keys()).collect();
    names.sort();
    names.dedup();
    let mut servers = Vec::new();
    for name in names {
        let mut merged: Option<(McpServerConfig, bool)> = None;
        let (mut trusted, mut enabled, mut project_off) = (None, None, false);
        let (mut startup, mut tool) = (None, None);
        let (mut only, mut never) = (None, None);
        for (entries, scope, path) in layers {
            let Some(entry) = entries.get(name) else {
                continue;
            };
            let at = |field: &str, message: &str| ConfigError {
                path: path.display().to_string(),
                message: format!("mcp_servers.{name}.{field}: {message}"),
            };
            let project = *scope == Scope::Project;
            if entry.command.is_none()
                && (entry.args.is_some() || entry.env.is_some() || entry.cwd.is_some())
            {
                return Err(at(
                    "command",
                    "args, env and cwd need the command in the same file",
                ));
            }
            if entry.url.is_none()
                && (entry.bearer_token_env_var.is_some() || entry.env_http_headers.is_some())
            {
                return Err(at(
                    "url",
                    "bearer_token_env_var and env_http_headers need the url in the same file",
                ));
            }
            if entry.url.is_some() && entry.command.is_some() {
                return Err(at("url", "a server has a command or a url, not both"));
            }
            if let Some(url) = &entry.url {
                let remote = remote(entry).map_err(|message| at("url", &message))?;
                let user_declared = merged
                    .as_ref()
                    .is_some_and(|(_, from_project)| !from_project);
                if !(project && user_declared) {
                    let mut config = McpServerConfig::remote(name.as_str(), url.as_str());
                    config.remote = Some(remote);
                    config.declared_in = path.to_path_buf();
                    merged = Some((config, project));
                }
            }
            if let Some(command) = &entry.command {
                if command.trim().is_empty() {
                    return Err(at("command", "empty"));
                }
                // A project never replaces the command of a server the user declared.
                let user_declared = merged
                    .as_ref()
                    .is_some_and(|(_, from_project)| !from_project);
                if !(project && user_declared) {
                    let mut config = McpServerConfig::new(name.as_str(), command.as_str());
                    config.args = entry.args.clone().unwrap_or_default();
                    config.env = entry.env.clone().unwrap_or_default();
                    config.cwd = entry.cwd.clone();
                    config.declared_in = path.to_path_buf();
                    merged = Some((config, project));
                }
            }
            for (field, value) in [
                ("startup_timeout", entry.startup_timeout),
                ("tool_timeout", entry.tool_timeout),
            ] {
                if let Some(secs) = value
                    && !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0)
                {
                    return Err(at(field, "must be a number of seconds above 0"));
                }
            }
            startup = entry.startup_timeout.or(startup);
            tool = entry.tool_timeout.or(tool);
            only = entry.enabled_tools.clone().or(only);
            never = entry.disabled_tools.clone().or(never);
            if project {
                project_off |= entry.enabled == Some(false);
            } else {
                trusted = entry.trusted.or(trusted);
                enabled = entry.enabled.or(enabled);
            }
        }
        let Some((mut config, from_project)) = merged else {
            let (_, _, path) = layers
                .iter()
                .rev()
                .find(|(e, _, _)| e.contains_key(name))
                .copied()
                .unwrap_or((&BTreeMap::new(), Scope::User, Path::new("")));
            return Err(ConfigError {
                path: path.display().to_string(),
                message: format!("mcp_servers.{name}: no file gives its 'command' (or 'url')"),
            });
        };
        if let Some(bad) = name
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_'))
            .map(String::from)
            .or_else(|| (name.is_empty() || name.len() > 32).then(|| "its length".into()))
        {
            return Err(ConfigError {
                path: config.declared_in.display().to_string(),
                message: format!(
                    "mcp_servers.{name}: a server name is 1 to 32 letters, digits, '-' or '_' (not {bad})"
                ),
            });
        }
        config.startup_timeout = startup.map_or(DEFAULT_STARTUP_TIMEOUT, Duration::from_secs_f64);
        config.tool_timeout = tool.map_or(DEFAULT_TOOL_TIMEOUT, Duration::from_secs_f64);
        config.enabled_tools = only;
        config.disabled_tools = never.unwrap_or_default();
        config.trusted = trusted.unwrap_or(false);
        config.disabled = match (enabled, project_off, from_project) {
            (Some(false), _, _) => Some("enabled = false".into()),
            // Whatever the user's config says: it would send the user's
            // requests, and maybe credentials, where the project chose.
            (_, _, true) if config.remote.is_some() => Some(format!(
                "declared by the project ({}): a project cannot add a remote server; \
                 declare it in your own config",
                config.declared_in.display()
            )),
            (None, true, _) => Some("enabled = false in the project's config".into()),
            // Even one the user enabled: the command may have changed since.
            (Some(true) | None, _, true) if !trust.is_trusted() => Some(format!(
                "declared by the project ({}), whose config is not trusted; \
                 `cadre trust` shows it",
                config.declared_in.display()
            )),
            (None, false, true) => Some(format!(
                "declared by the project ({}); start it by setting \
                 [mcp_servers.{name}] enabled = true in your own config",
                config.declared_in.display()
            )),
            (Some(true), _, _) | (None, false, false) => None,
        };
        servers.push(config);
    }
    Ok(servers)
}

/// An entry's remote server, its url and variable names checked.
fn remote(entry: &McpServerEntry) -> Result<Remote, String> {
    let url = entry.url.clone().unwrap_or_default();
    let scheme_ok = url.starts_with("https://") || url.starts_with("http://");
    if !scheme_ok || url.len() <= "https://".len() {
        return Err(format!("'{url}' is not an http:// or https:// URL"));
    }
    let headers = entry.env_http_headers.clone().unwrap_or_default();
    let names = entry.bearer_token_env_var.iter().chain(headers.values());
    if let Some(bad) = names
        .into_iter()
        .find(|v| v.is_empty() || !v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
    {
        return Err(format!(
            "'{bad}' is not an environment variable's name (credentials are named by their \
             variable, never written here)"
        ));
    }
    if let Some(bad) = headers.keys().find(|h| {
        h.is_empty()
            || !h
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    }) {
        return Err(format!("'{bad}' is not a header name"));
    }
    Ok(Remote {
        url,
        bearer_token_env_var: entry.bearer_token_env_var.clone(),
        env_http_headers: headers,
        secrets: Secrets::default(),
    })
}
