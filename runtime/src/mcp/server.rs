//! One MCP server: over stdio, started in its own process group, restarted
//! (a bounded number of times) at the next call after it died, killed with
//! the session; or remote, over streamable HTTP, connected again (with
//! backoff, as many times) at the next call after the connection was lost.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{Peer, RoleClient, RunningService};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::process::{Child, Command};

use super::config::McpServerConfig;
use super::tools::render;
use crate::sandbox::GroupGuard;
use crate::tool::ToolError;

/// How often a server that died is started again in one session.
pub const MAX_RESTARTS: u32 = 3;
/// The wait before a remote server's first reconnection; doubled at each.
const RECONNECT_BACKOFF: Duration = Duration::from_millis(250);
/// How much of a server's stderr is kept for reports.
const STDERR_TAIL: usize = 2048;

/// Why a server did not start: what failed, and the end of its stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartFailure {
    /// What failed.
    pub message: String,
    /// The last lines it wrote to stderr.
    pub stderr: String,
}

impl std::fmt::Display for StartFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)?;
        if !self.stderr.trim().is_empty() {
            write!(f, "; its stderr ends with: {}", self.stderr.trim())?;
        }
        Ok(())
    }
}

/// The end of a server's stderr, kept as it is read.
#[derive(Debug, Clone, Default)]
struct Tail(Arc<Mutex<String>>);

impl Tail {
    fn push(&self, bytes: &[u8]) {
        let mut tail = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        tail.push_str(&String::from_utf8_lossy(bytes));
        if tail.len() > STDERR_TAIL {
            let mut cut = tail.len() - STDERR_TAIL;
            while !tail.is_char_boundary(cut) {
                cut += 1;
            }
            tail.replace_range(..cut, "");
        }
    }

    fn text(&self) -> String {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// A live connection: the client, the child and its group, which die
/// together when it is dropped.
struct Connection {
    service: RunningService<RoleClient, ()>,
    stderr: Tail,
    /// Reads its stderr into `stderr` until the pipe closes.
    reader: Option<tokio::task::JoinHandle<()>>,
    // Dropped after the service: the group is killed, then the child reaped.
    _group: Option<GroupGuard>,
    /// `None` for a remote server.
    _child: Option<Child>,
}

impl Connection {
    /// Kills what is left of the server and says how it ended, with the
    /// end of its stderr read to the end of the pipe (bounded).
    async fn last_words(mut self) -> String {
        if let Some(group) = &self._group {
            group.kill();
        }
        let Some(child) = &mut self._child else {
            return "the connection was lost".into();
        };
        let _ = child.start_kill();
        if let Some(reader) = self.reader.take() {
            let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
        }
        exited(&self.stderr)
    }
}

/// How a server ended, with the end of its stderr.
fn exited(stderr: &Tail) -> String {
    let tail = stderr.text();
    match tail.trim() {
        "" => "it exited".to_string(),
        tail => format!("it exited; its stderr ends with: {tail}"),
    }
}

/// What the server is now.
#[derive(Default)]
struct Link {
    connection: Option<Connection>,
    /// Bumped at every start, so a call that saw the server die marks only
    /// the connection it used as lost.
    generation: u64,
    restarts: u32,
    /// Why it is down, when it is.
    down: Option<String>,
}

/// The server's state, for `cadre mcp list` and `/mcp`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerState {
    /// Running.
    Running,
    /// Not running now; the next call starts it again (while restarts remain).
    Down(String),
}

/// One configured server.
pub struct McpServer {
    config: McpServerConfig,
    workspace: PathBuf,
    link: tokio::sync::Mutex<Link>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer")
            .field("name", &self.config.name)
            .finish()
    }
}

impl McpServer {
    /// A server that is not started yet; it runs in `workspace` unless its
    /// config names a directory.
    pub fn new(config: McpServerConfig, workspace: &Path) -> Arc<Self> {
        Arc::new(Self {
            config,
            workspace: workspace.to_path_buf(),
            link: tokio::sync::Mutex::new(Link::default()),
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &McpServerConfig {
        &self.config
    }

    /// Starts it and lists its tools (their JSON form), within its startup
    /// timeout.
    pub async fn start(&self) -> Result<Vec<Value>, StartFailure> {
        let mut link = self.link.lock().await;
        let (connection, tools) = self.connect().await?;
        link.connection = Some(connection);
        link.generation += 1;
        link.down = None;
        Ok(tools)
    }

    /// Whether it runs, or why not.
    pub async fn state(&self) -> ServerState {
        let link = self.link.lock().await;
        match (&link.connection, &link.down) {
            (Some(c), _) if !c.service.is_closed() => ServerState::Running,
            (Some(c), _) if c._child.is_none() => {
                ServerState::Down("the connection was lost".into())
            }
            (Some(c), _) => ServerState::Down(exited(&c.stderr)),
            (None, Some(why)) => ServerState::Down(why.clone()),
            (None, None) => ServerState::Down("not started".into()),
        }
    }

    /// The server's name and version, as it announced them.
    pub async fn announced(&self) -> Option<String> {
        let link = self.link.lock().await;
        let info = link.connection.as_ref()?.service.peer_info()?;
        let info = serde_json::to_value(info.as_ref()).ok()?;
        let name = info.pointer("/serverInfo/name")?.as_str()?.to_string();
        let version = info
            .pointer("/serverInfo/version")
            .and_then(Value::as_str)
            .unwrap_or_default();
        Some(format!("{name} {version}").trim().to_string())
    }

    /// Calls one of its tools. A server that died is started again first
    /// (at most [`MAX_RESTARTS`] times); a server that dies during the call
    /// fails the call.
    pub async fn call(&self, tool: &str, args: Value) -> Result<String, ToolError> {
        let (peer, generation) = self.peer().await?;
        let arguments = match args {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        match peer.call_tool(params).await {
            Ok(result) => {
                let result = serde_json::to_value(&result)
                    .map_err(|e| ToolError::failed(format!("unreadable result: {e}")))?;
                render(&result)
            }
            Err(err) if peer.is_transport_closed() => {
                let why = self.lost(generation).await;
                Err(ToolError::failed(format!(
                    "the MCP server '{}' stopped during this call ({err}): {why}; \
                     it is started again at the next call",
                    self.config.name
                )))
            }
            Err(err) => Err(ToolError::failed(match &self.config.remote {
                Some(remote) => format!(
                    "the remote MCP server '{}' ({}) failed this call: {err}; it is asked \
                     again (and connected again when it comes back) at the next call",
                    self.config.name, remote.url
                ),
                None => format!("MCP server '{}': {err}", self.config.name),
            })),
        }
    }

    /// Kills it now (the session ends).
    pub async fn shutdown(&self) {
        let mut link = self.link.lock().await;
        if link.connection.take().is_some() {
            link.down = Some("shut down".into());
        }
    }

    /// A client for the running server, starting it again when it died.
    async fn peer(&self) -> Result<(Peer<RoleClient>, u64), ToolError> {
        let mut link = self.link.lock().await;
        if let Some(connection) = &link.connection
            && !connection.service.is_closed()
        {
            return Ok((connection.service.peer().clone(), link.generation));
        }
        if let Some(connection) = link.connection.take() {
            link.down = Some(connection.last_words().await);
        }
        let name = &self.config.name;
        if link.restarts >= MAX_RESTARTS {
            let why = link.down.clone().unwrap_or_default();
            return Err(ToolError::failed(format!(
                "the MCP server '{name}' stopped {MAX_RESTARTS} times and is not started \
                 again in this session (last: {why})"
            )));
        }
        link.restarts += 1;
        if self.config.remote.is_some() {
            // A remote server that went away may be back in a moment: wait
            // a little longer before each reconnection.
            tokio::time::sleep(RECONNECT_BACKOFF * 2u32.pow(link.restarts - 1)).await;
        }
        match self.connect().await {
            Ok((connection, _)) => {
                let peer = connection.service.peer().clone();
                link.connection = Some(connection);
                link.generation += 1;
                link.down = None;
                Ok((peer, link.generation))
            }
            Err(failure) => {
                link.down = Some(failure.to_string());
                Err(ToolError::failed(format!(
                    "the MCP server '{name}' could not be started again: {failure}"
                )))
            }
        }
    }

    /// Marks the connection of `generation` lost (killing what is left of
    /// it); says why.
    async fn lost(&self, generation: u64) -> String {
        let mut link = self.link.lock().await;
        if link.generation != generation {
            return "it was started again since".into();
        }
        let why = match link.connection.take() {
            Some(connection) => connection.last_words().await,
            None => link.down.clone().unwrap_or_default(),
        };
        link.down = Some(why.clone());
        why
    }

    /// Spawns the server in its own process group and runs the MCP
    /// handshake and the tool listing, within the startup timeout.
    async fn connect(&self) -> Result<(Connection, Vec<Value>), StartFailure> {
        if let Some(remote) = &self.config.remote {
            return self.connect_remote(remote).await;
        }
        let config = &self.config;
        let mut command = Command::new(&config.command);
        command
            .args(&config.args)
            .envs(&config.env)
            .current_dir(config.cwd.as_deref().unwrap_or(&self.workspace))
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().map_err(|e| StartFailure {
            message: format!("'{}' could not be run: {e}", config.command),
            stderr: String::new(),
        })?;
        let group = child.id().and_then(GroupGuard::register);
        let stderr = Tail::default();
        let mut reader = None;
        if let Some(mut pipe) = child.stderr.take() {
            let tail = stderr.clone();
            reader = Some(tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                while let Ok(n) = pipe.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    tail.push(&buf[..n]);
                }
            }));
        }
        // A server that did not start is killed, and its stderr read to the
        // end (bounded), so the report quotes its last words.
        let mut failed = async |message: String, child: &mut Child| {
            if let Some(group) = &group {
                group.kill();
            }
            let _ = child.start_kill();
            if let Some(reader) = reader.take() {
                let _ = tokio::time::timeout(Duration::from_secs(2), reader).await;
            }
            StartFailure {
                message,
                stderr: stderr.text(),
            }
        };
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(failed("its stdio could not be opened".into(), &mut child).await);
        };
        let limit = config.startup_timeout;
        let handshake = listed(().serve((stdout, stdin)));
        let (service, tools) = match tokio::time::timeout(limit, handshake).await {
            Ok(Ok(done)) => done,
            Ok(Err(err)) => {
                let message = format!("the MCP handshake failed: {err}");
                return Err(failed(message, &mut child).await);
            }
            Err(_) => {
                let message = format!(
                    "it did not answer `initialize` and list its tools within {} s",
                    limit.as_secs_f64()
                );
                return Err(failed(message, &mut child).await);
            }
        };
        let tools = tools
            .iter()
            .filter_map(|tool| serde_json::to_value(tool).ok())
            .collect();
        Ok((
            Connection {
                service,
                stderr,
                reader,
                _group: group,
                _child: Some(child),
            },
            tools,
        ))
    }

    /// Connects to a remote server over streamable HTTP and lists its
    /// tools, within the startup timeout.
    async fn connect_remote(
        &self,
        remote: &super::config::Remote,
    ) -> Result<(Connection, Vec<Value>), StartFailure> {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let failure = |message: String| StartFailure {
            message,
            stderr: String::new(),
        };
        let url = &remote.url;
        let mut headers = std::collections::HashMap::new();
        for (name, value) in &remote.secrets.headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| failure(format!("header {name}: {e}")))?;
            let mut value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| failure(format!("header {name}: its value is not a header value")))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let mut transport =
            StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers);
        if let Some(token) = &remote.secrets.bearer {
            transport = transport.auth_header(token.clone());
        }
        let limit = self.config.startup_timeout;
        let http = reqwest::Client::builder()
            .connect_timeout(limit)
            .build()
            .map_err(|e| failure(format!("the HTTP client could not be built: {e}")))?;
        let transport = StreamableHttpClientTransport::with_client(http, transport);
        let handshake = listed(().serve(transport));
        let (service, tools) = match tokio::time::timeout(limit, handshake).await {
            Ok(Ok(done)) => done,
            Ok(Err(err)) => return Err(failure(unreachable(url, &err))),
            Err(_) => {
                return Err(failure(format!(
                    "{url} did not answer `initialize` and list its tools within {} s",
                    limit.as_secs_f64()
                )));
            }
        };
        let tools = tools
            .iter()
            .filter_map(|tool| serde_json::to_value(tool).ok())
            .collect();
        Ok((
            Connection {
                service,
                stderr: Tail::default(),
                reader: None,
                _group: None,
                _child: None,
            },
            tools,
        ))
    }
}

/// The MCP handshake (`serving`), then the server's whole tool list.
async fn listed<E: std::fmt::Display>(
    serving: impl Future<Output = Result<RunningService<RoleClient, ()>, E>>,
) -> Result<(RunningService<RoleClient, ()>, Vec<rmcp::model::Tool>), String> {
    let service = serving.await.map_err(|e| e.to_string())?;
    let tools = service
        .peer()
        .list_all_tools()
        .await
        .map_err(|e| e.to_string())?;
    Ok((service, tools))
}

/// Why a remote server did not start, said plainly: rmcp's message names
/// its transport's types before the cause.
fn unreachable(url: &str, err: &str) -> String {
    let cause = err.rsplit_once("] error: ").map_or(err, |(_, cause)| cause);
    let cause = cause
        .trim_end_matches(", when send initialize request")
        .trim_end_matches(": ");
    if cause.contains("401") || cause.contains("403") {
        format!("{url} refused the credentials ({cause}): check the token in its variable")
    } else if cause.contains("error sending request") || cause.contains("Connect") {
        format!("{url} could not be reached ({cause}): is the server up?")
    } else {
        format!("{url} refused the MCP handshake: {cause}")
    }
}
