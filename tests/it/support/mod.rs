//! Shared test support: the mock server and a session harness.

pub mod cli;
pub mod hermetic;
pub mod mock;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use std::collections::BTreeMap;

use cadre::actors::events::Events;
use cadre::actors::store::{StoreHandle, StoreRequest};
use cadre::actors::{
    PermissionConfig, SessionConfig, SessionHandle, SessionServices, Subagents, spawn_session,
};
use cadre::runtime::Mode;
use cadre::runtime::agent::SameModel;
use cadre::runtime::config::RoleConfig;
use cadre::runtime::context::ContextBudget;
use cadre::runtime::mcp::{McpHub, McpServerConfig};
use cadre::runtime::model::{ModelClient, OpenAiClient, OpenAiConfig, RetryPolicy, Retrying};
use cadre::runtime::paths::DataDir;
use cadre::runtime::permission::Posture;
use cadre::runtime::permission::guardian::GuardianConfig;
use cadre::runtime::permission::rules::RuleSet;
use cadre::runtime::protocol::{Envelope, Event, Op};
use cadre::runtime::snapshot::{DEFAULT_MAX_FILE_BYTES, Snapshots};
use cadre::runtime::store::{Store, store_path};
use cadre::runtime::tool::{Tool, ToolRegistry, ToolRunner, Workspace};
use serde_json::Value;
use tempfile::TempDir;

/// How long any test waits for an event before it fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A retry policy fast enough for tests.
pub fn quick_retries(max_attempts: u32) -> RetryPolicy {
    RetryPolicy {
        max_attempts,
        base_delay: Duration::from_millis(2),
        max_delay: Duration::from_millis(20),
    }
}

/// Builds a session against a model, in fresh temporary directories.
///
/// Sessions default to Full Access and an interactive host, so tests that
/// are not about permissions see their tools run; permission tests choose.
pub struct SessionBuilder {
    model: Arc<dyn ModelClient>,
    mode: Mode,
    tools: Vec<Arc<dyn Tool>>,
    tool_timeout: Duration,
    max_iterations: u32,
    permissions: PermissionConfig,
    subagents: Option<(BTreeMap<String, RoleConfig>, u32)>,
    plan_agent_entry: bool,
    store_limit: Option<u64>,
    mcp: Vec<McpServerConfig>,
    snapshots: bool,
    context: ContextBudget,
    hooks: cadre::runtime::hooks::HookSet,
}

impl SessionBuilder {
    /// A session talking to the mock server at `url`, streaming, quick retries.
    pub fn openai(url: &str) -> Self {
        Self::openai_with(url, true, quick_retries(3))
    }

    /// A session talking to `url` with the given streaming and retry choices.
    pub fn openai_with(url: &str, stream: bool, retry: RetryPolicy) -> Self {
        let mut config = OpenAiConfig::new(url, "mock-model");
        config.stream = stream;
        let client = OpenAiClient::new(config).expect("client");
        Self::model(Arc::new(Retrying::new(Arc::new(client), retry)))
    }

    /// A session talking to any model.
    pub fn model(model: Arc<dyn ModelClient>) -> Self {
        Self {
            model,
            mode: Mode::Work,
            tools: Vec::new(),
            tool_timeout: Duration::from_secs(30),
            max_iterations: 20,
            permissions: PermissionConfig {
                posture: Posture::Bypass,
                ..PermissionConfig::default()
            },
            subagents: None,
            plan_agent_entry: false,
            store_limit: None,
            mcp: Vec::new(),
            snapshots: false,
            context: ContextBudget::default(),
            hooks: Default::default(),
        }
    }

    /// The model requests a turn may make.
    pub fn max_iterations(mut self, requests: u32) -> Self {
        self.max_iterations = requests;
        self
    }

    /// The model's context window (tokens) and compaction threshold.
    pub fn context_window(mut self, window: u64) -> Self {
        self.context = self.context.with_window(window);
        self
    }

    /// Starts these MCP servers with the session and registers their tools.
    pub fn mcp(mut self, servers: Vec<McpServerConfig>) -> Self {
        self.mcp = servers;
        self
    }

    /// Records workspace snapshots before turns that may change files.
    pub fn snapshots(mut self) -> Self {
        self.snapshots = true;
        self
    }

    /// Offers `enter_plan_mode` in Work (config `plan.agent_entry`).
    pub fn plan_agent_entry(mut self) -> Self {
        self.plan_agent_entry = true;
        self
    }

    pub fn posture(mut self, posture: Posture) -> Self {
        self.permissions.posture = posture;
        self
    }

    /// Whether a person can answer prompts (exec cannot).
    pub fn interactive(mut self, interactive: bool) -> Self {
        self.permissions.interactive = interactive;
        self
    }

    pub fn rules(mut self, rules: RuleSet) -> Self {
        self.permissions.rules = Arc::new(rules);
        self
    }

    pub fn guardian(mut self, guardian: GuardianConfig) -> Self {
        self.permissions.guardian = guardian;
        self
    }

    /// Enables the `agent` tool with these roles and concurrency limit.
    pub fn subagents(mut self, roles: BTreeMap<String, RoleConfig>, max_running: u32) -> Self {
        self.subagents = Some((roles, max_running));
        self
    }

    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Registers an extra tool after the built-ins.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Caps the store file's size, as a full disk would.
    pub fn store_limit(mut self, bytes: u64) -> Self {
        self.store_limit = Some(bytes);
        self
    }

    pub fn hooks(mut self, hooks: cadre::runtime::hooks::HookSet) -> Self {
        self.hooks = hooks;
        self
    }

    pub fn tool_timeout(mut self, timeout: Duration) -> Self {
        self.tool_timeout = timeout;
        self
    }

    pub async fn start(self) -> TestSession {
        let workspace = TempDir::new().expect("workspace");
        let data = TempDir::new().expect("data dir");
        let mut registry = ToolRegistry::with_builtins();
        for tool in self.tools {
            registry.register(tool).expect("register tool");
        }
        let mcp = McpHub::start(self.mcp, workspace.path(), &mut registry).await;
        let session_id = uuid::Uuid::new_v4().to_string();
        let paths = DataDir::new(data.path()).session(&session_id);
        let session_id_copy = session_id.clone();
        let mut config = SessionConfig::new(
            session_id,
            Workspace::new(workspace.path()).expect("workspace"),
            paths.clone(),
        );
        config.mode = self.mode;
        config.max_iterations = self.max_iterations;
        config.permissions = self.permissions;
        config.plan_agent_entry = self.plan_agent_entry;
        config.context = self.context;
        config.hooks = Arc::new(self.hooks);
        if self.snapshots {
            let root = workspace.path().canonicalize().expect("workspace");
            config.snapshots = Some(Arc::new(Snapshots::new(
                data.path(),
                &root,
                DEFAULT_MAX_FILE_BYTES,
            )));
        }
        let snapshots = config.snapshots.clone();
        let subagents = self.subagents.map(|(roles, max)| {
            Arc::new(Subagents::new(
                roles,
                Arc::new(SameModel(self.model.clone())),
                max,
            ))
        });
        let mut store = Store::open(&store_path(data.path())).expect("store");
        if let Some(bytes) = self.store_limit {
            store.limit_size(bytes).expect("limit");
        }
        let (store, _) = StoreHandle::start(store).await.expect("store");
        let services = SessionServices {
            model: self.model,
            tools: ToolRunner::new(Arc::new(registry), self.tool_timeout),
            store: Some(store.clone()),
            summarizer: None,
            subagents,
        };
        let (handle, events) = spawn_session(config, services)
            .await
            .expect("spawn session");
        TestSession {
            handle: Some(handle),
            events,
            plan_file: paths.plan_file(),
            session_dir: paths.dir,
            session_id: session_id_copy,
            workspace,
            store,
            mcp,
            snapshots,
            _data: data,
        }
    }
}

/// A running session and its directories.
pub struct TestSession {
    handle: Option<SessionHandle>,
    pub events: Events,
    pub plan_file: PathBuf,
    pub session_dir: PathBuf,
    pub session_id: String,
    pub workspace: TempDir,
    /// The session's store (a file in the data directory).
    pub store: StoreHandle,
    /// The session's MCP servers.
    pub mcp: McpHub,
    /// The workspace's snapshots, when the session records them.
    pub snapshots: Option<Arc<Snapshots>>,
    /// Kept so the directory lives as long as the session.
    _data: TempDir,
}

impl TestSession {
    /// The session's audit records, as stored (every buffered append first).
    pub async fn audit(&self) -> Vec<serde_json::Value> {
        let session_id = self.session_id.clone();
        self.store
            .ask(|reply| StoreRequest::Audit { session_id, reply })
            .await
            .expect("audit")
            .iter()
            .map(|r| serde_json::from_str(r).expect("an audit record is JSON"))
            .collect()
    }

    pub fn handle(&self) -> &SessionHandle {
        self.handle.as_ref().expect("session still running")
    }

    pub fn submit(&self, op: Op) {
        self.handle().submit(op).expect("submit");
    }

    /// The next event, failing the test after [`PATIENCE`].
    pub async fn next_event(&mut self) -> Event {
        self.next_envelope().await.event
    }

    /// The next event with the id of the submission that caused it.
    pub async fn next_envelope(&mut self) -> Envelope {
        tokio::time::timeout(PATIENCE, self.events.recv())
            .await
            .expect("timed out waiting for an event")
            .expect("event stream closed")
    }

    /// Events up to and including the first one `stop` accepts.
    pub async fn events_until(&mut self, stop: impl Fn(&Event) -> bool) -> Vec<Event> {
        let mut seen = Vec::new();
        loop {
            let event = self.next_event().await;
            let done = stop(&event);
            seen.push(event);
            if done {
                return seen;
            }
        }
    }

    /// Sends a prompt and collects events until its turn completes or fails.
    pub async fn turn(&mut self, prompt: &str) -> Vec<Event> {
        self.submit(Op::user(prompt));
        self.events_until(is_turn_end).await
    }

    pub fn workspace_path(&self) -> PathBuf {
        self.workspace.path().to_path_buf()
    }

    /// Shuts the session down and waits for it to stop.
    pub async fn shutdown(mut self) {
        if let Some(handle) = self.handle.take() {
            let _ = handle.submit(Op::Shutdown);
            tokio::time::timeout(PATIENCE, handle.stopped())
                .await
                .expect("session did not stop");
        }
    }

    /// Shuts the session down and hands back its workspace and data
    /// directory, for what reads them afterwards (the command line).
    pub async fn shutdown_keeping_dirs(mut self) -> (TempDir, TempDir) {
        if let Some(handle) = self.handle.take() {
            let _ = handle.submit(Op::Shutdown);
            tokio::time::timeout(PATIENCE, handle.stopped())
                .await
                .expect("session did not stop");
        }
        (self.workspace, self._data)
    }
}

/// The text of a recorded request's messages with `role` (`user`, `tool`,
/// …), in order; the Plan reminder, which rides as a user message, is left
/// out.
pub fn contents(request: &Value, role: &str) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == role)
        .filter_map(|m| m["content"].as_str())
        .filter(|t| !t.starts_with("<plan-mode-reminder>"))
        .map(str::to_string)
        .collect()
}

pub fn is_turn_end(event: &Event) -> bool {
    matches!(
        event,
        Event::TurnCompleted { .. } | Event::TurnFailed { .. }
    )
}

/// The last event, which a finished turn makes its end.
pub fn turn_end(events: &[Event]) -> &Event {
    events.last().expect("no events")
}

/// The `tool.result` events, as (name, error code or "ok").
pub fn tool_results(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolResult {
                name, error_code, ..
            } => Some((
                name.clone(),
                error_code.map_or_else(|| "ok".to_string(), |c| c.as_str().to_string()),
            )),
            _ => None,
        })
        .collect()
}

/// Every file under `dir` with its bytes, for byte-identical comparisons.
pub fn tree(dir: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir") {
            let entry = entry.expect("entry");
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).expect("meta");
            if meta.is_dir() {
                stack.push(path);
            } else if meta.file_type().is_symlink() {
                out.push((
                    path.clone(),
                    std::fs::read_link(&path)
                        .expect("link")
                        .into_os_string()
                        .into_encoded_bytes(),
                ));
            } else {
                out.push((path.clone(), std::fs::read(&path).expect("read")));
            }
        }
    }
    out.sort();
    out
}
