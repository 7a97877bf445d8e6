//! A library host: everything a program needs to run cadre sessions.
//!
//! A [`Host`] owns what sessions share: the data directory (sessions'
//! files, and the store in it unless it is kept in memory), the model client and the clients of roles that
//! name their own server, the tool registry (the built-ins plus the host's
//! own tools), the sub-agent roles and limit, the sandbox. It is built once
//! with a [`HostBuilder`] (from the configuration layers, or by hand), then
//! starts or resumes any number of sessions with [`Host::start`].
//!
//! A session host alone runs no workflow and places nothing on nodes:
//! `cadre_workflows::Host` builds one joined to the workflow engine and
//! the cluster (the `cadre` command line uses that one).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use cadre_runtime::Mode;
use cadre_runtime::agent::ModelSource;
use cadre_runtime::config::{Config, ConfigPaths, ContextSettings, RoleConfig};
use cadre_runtime::hooks::HookSet;
use cadre_runtime::model::providers::{Providers, ServerChoice, ServerOptions};
use cadre_runtime::model::{
    ModelClient, Priced, Prices, ResponseLimits, RetryPolicy, Script, ScriptedModel,
};
use cadre_runtime::paths::DataDir;
use cadre_runtime::permission::guardian::GuardianConfig;
use cadre_runtime::permission::rules::RuleSet;
use cadre_runtime::permission::{Posture, ProtectedPaths};
use cadre_runtime::sandbox::SandboxConfig;
use cadre_runtime::snapshot::Snapshots;
use cadre_runtime::store::{Store, StoreError, store_path};
use cadre_runtime::tool::{FileLimits, Tool, ToolRegistry, ToolRunner, Workspace};

use cadre_runtime::agent::{Authority, DEFAULT_MAX_DEPTH, LiveAuthority};

use crate::delegation::{Caller, Delegate};
use crate::events::EventSink;
use crate::kernel::{AgentSpec, Summarizer};
use crate::session::remote::Placement;
use crate::session::{
    PermissionConfig, SessionConfig, SessionHandle, SessionServices, Subagents, spawn_session,
};
use crate::store::StoreHandle;

mod error;
mod models;

pub use error::HostError;
use models::{Endpoints, RoleModels, server_client};

/// Which model a host talks to.
#[derive(Clone)]
pub enum ModelChoice {
    /// An OpenAI-compatible server.
    Server {
        /// Its base URL, including `/v1`.
        base_url: String,
        /// The model name.
        model: String,
        /// The bearer token, if any.
        api_key: Option<String>,
        /// Stream responses (else ask for whole ones).
        stream: bool,
        /// Its provider, headers and model parameters (LLM6, LLM7); boxed,
        /// as most choices carry few.
        options: Box<ServerOptions>,
    },
    /// A model script file (TOML, or JSON by extension).
    Script(PathBuf),
    /// A model script's text, named for error messages.
    ScriptText {
        /// The TOML text.
        text: String,
        /// Its name in messages.
        name: String,
    },
    /// The built-in demo script (no network, no key).
    Demo,
    /// A client the host built itself.
    Client(Arc<dyn ModelClient>),
}

impl ModelChoice {
    /// The server this choice talks to, when it is one.
    pub fn server(&self) -> Option<ServerChoice> {
        match self {
            ModelChoice::Server {
                base_url,
                model,
                api_key,
                stream,
                options,
            } => Some(ServerChoice {
                base_url: base_url.clone(),
                model: model.clone(),
                api_key: api_key.clone(),
                stream: *stream,
                options: (**options).clone(),
            }),
            ModelChoice::Script(_)
            | ModelChoice::ScriptText { .. }
            | ModelChoice::Demo
            | ModelChoice::Client(_) => None,
        }
    }
}

impl std::fmt::Debug for ModelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModelChoice::Server {
                base_url, model, ..
            } => write!(f, "Server({base_url}, {model})"),
            ModelChoice::Script(path) => write!(f, "Script({})", path.display()),
            ModelChoice::ScriptText { name, .. } => write!(f, "ScriptText({name})"),
            ModelChoice::Demo => f.write_str("Demo"),
            ModelChoice::Client(client) => write!(f, "Client({})", client.model()),
        }
    }
}

/// Builds a [`Host`].
pub struct HostBuilder {
    data_dir: PathBuf,
    memory_store: bool,
    model: ModelChoice,
    retry: RetryPolicy,
    response_limits: ResponseLimits,
    roles: BTreeMap<String, RoleConfig>,
    tools: Vec<Arc<dyn Tool>>,
    builtins: Option<Vec<String>>,
    tool_timeout: Duration,
    file_limits: FileLimits,
    max_subagents: u32,
    sandbox: SandboxConfig,
    hooks: HookSet,
    workflows: Option<Delegate>,
    placement: Option<Placement>,
    model_requests: Option<u32>,
    context: ContextSettings,
    /// Named model servers and their keys, for roles, the guardian and
    /// steps that choose one.
    providers: Providers,
    /// Prices per model: every client's responses carry their cost.
    prices: Arc<Prices>,
}

impl HostBuilder {
    /// A host keeping sessions under `data_dir` (the store is
    /// `data_dir/cadre.db`, each session's files `data_dir/sessions/<id>`),
    /// on the built-in demo model, with the built-in tools, a 120 s tool
    /// timeout and up to 8 sub-agents at once.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            memory_store: false,
            model: ModelChoice::Demo,
            retry: RetryPolicy::default(),
            response_limits: ResponseLimits::default(),
            roles: BTreeMap::new(),
            tools: Vec::new(),
            builtins: None,
            tool_timeout: Duration::from_secs(120),
            file_limits: FileLimits::default(),
            max_subagents: 8,
            sandbox: SandboxConfig::default(),
            hooks: HookSet::default(),
            workflows: None,
            placement: None,
            model_requests: None,
            context: ContextSettings::default(),
            providers: Providers::default(),
            prices: Arc::default(),
        }
    }

    /// Prices per model (`[prices."MODEL"]`): each response of a priced
    /// model carries its cost in its usage, and so every summary of it.
    pub fn prices(mut self, prices: Prices) -> Self {
        self.prices = Arc::new(prices);
        self
    }

    /// The named model servers (`[providers.NAME]`) and their keys, which
    /// the host's caller read from the environment.
    pub fn providers(mut self, providers: Providers) -> Self {
        self.providers = providers;
        self
    }

    /// The model's context window and compaction threshold (`[context]`;
    /// by default the built-in table's window for the model's name, else
    /// 128000 tokens, compacting at 80%).
    pub fn context(mut self, settings: ContextSettings) -> Self {
        self.context = settings;
        self
    }

    /// Model requests in flight at once per endpoint (base URL and model),
    /// across every session, sub-agent and workflow step of this host; the
    /// others wait for a slot (W9). `[limits] model_requests`.
    pub fn model_requests(mut self, max: u32) -> Self {
        self.model_requests = Some(max.max(1));
        self
    }

    /// The mailbox of the workflow engine sessions in Operate delegate to
    /// (the `workflow` tool); without one the tool is not offered.
    pub fn workflows(mut self, engine: Delegate) -> Self {
        self.workflows = Some(engine);
        self
    }

    /// The mailbox of the placement on cluster nodes, where sessions'
    /// sub-agents may run besides this process; without it every
    /// sub-agent runs here.
    pub fn placement(mut self, placement: Placement) -> Self {
        self.placement = Some(placement);
        self
    }

    /// Takes roles, the sub-agent limit and the model (when a file names a
    /// `base_url` and `model`) from configuration already loaded.
    pub fn config(mut self, config: &Config) -> Self {
        let settings = &config.settings;
        self.roles = config.roles.clone();
        if let Some(max) = settings.max_subagents {
            self.max_subagents = max;
        }
        self.context = settings.context.clone();
        self.prices = Arc::new(settings.prices.clone());
        if let (Some(base_url), Some(model)) = (&settings.base_url, &settings.model) {
            self.model = ModelChoice::Server {
                base_url: base_url.clone(),
                model: model.clone(),
                api_key: None,
                stream: true,
                options: Box::new(ServerOptions {
                    params: settings.params(),
                    ..ServerOptions::default()
                }),
            };
        }
        self
    }

    /// Loads the configuration layers (user, project, local, explicit) and
    /// takes what [`HostBuilder::config`] takes; a file that does not parse
    /// is an error naming the file and the line.
    pub fn load_config(self, paths: &ConfigPaths) -> Result<(Self, Config), HostError> {
        let config = Config::load(paths)?;
        Ok((self.config(&config), config))
    }

    /// Keeps the store in memory: nothing is resumable after the host
    /// stops (tests, throwaway hosts).
    pub fn memory_store(mut self) -> Self {
        self.memory_store = true;
        self
    }

    /// The model to talk to.
    pub fn model(mut self, model: ModelChoice) -> Self {
        self.model = model;
        self
    }

    /// How failed model requests are retried.
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// How large and how long one model response may be.
    pub fn response_limits(mut self, limits: ResponseLimits) -> Self {
        self.response_limits = limits;
        self
    }

    /// Adds a tool of the host's own, offered and gated like the built-ins.
    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// The default timeout of a tool call.
    pub fn tool_timeout(mut self, timeout: Duration) -> Self {
        self.tool_timeout = timeout;
        self
    }

    /// Only these built-in tools (by name), in their usual order; the
    /// default is every one. A harness whose agents need two tools sends
    /// two schemas per request, not a dozen. Leaving out `exit_plan_mode`
    /// leaves Plan mode with no way out but the user's; leaving out `agent`
    /// or `workflow`, no delegation. An unknown name is refused by `build`.
    pub fn builtins<S: AsRef<str>>(mut self, names: &[S]) -> Self {
        self.builtins = Some(names.iter().map(|n| n.as_ref().to_string()).collect());
        self
    }

    /// How much the file and search tools read and return.
    pub fn file_limits(mut self, limits: FileLimits) -> Self {
        self.file_limits = limits;
        self
    }

    /// Sub-agent roles.
    pub fn roles(mut self, roles: BTreeMap<String, RoleConfig>) -> Self {
        self.roles = roles;
        self
    }

    /// How many sub-agents may run at once across a session's tree.
    pub fn max_subagents(mut self, max: u32) -> Self {
        self.max_subagents = max;
        self
    }

    /// The hooks every agent runs (`[[hooks.EVENT]]`, `docs/hooks.md`).
    pub fn hooks(mut self, hooks: HookSet) -> Self {
        self.hooks = hooks;
        self
    }

    /// How `bash` commands are sandboxed.
    pub fn sandbox(mut self, sandbox: SandboxConfig) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// Builds the model client and the registry and opens the store.
    pub async fn build(self) -> Result<Host, HostError> {
        let endpoints = Endpoints::new(self.model_requests);
        let model = Priced::wrap(self.client(&endpoints)?, &self.prices);
        let mut registry = ToolRegistry::new();
        let builtins = cadre_runtime::tool::builtin_tools_with(self.file_limits);
        if let Some(names) = &self.builtins
            && let Some(unknown) = names
                .iter()
                .find(|n| !builtins.iter().any(|t| t.definition().name == n.as_str()))
        {
            return Err(HostError::UnknownBuiltin(unknown.clone()));
        }
        let wanted = |tool: &Arc<dyn Tool>| {
            self.builtins
                .as_ref()
                .is_none_or(|names| names.iter().any(|n| *n == tool.definition().name))
        };
        for tool in builtins.into_iter().filter(wanted).chain(self.tools) {
            registry.register(tool)?;
        }
        let (store, store_task) = if self.memory_store {
            (StoreHandle::in_memory().await?, None)
        } else {
            let store = Store::open(&store_path(&self.data_dir))?;
            let (handle, task) = StoreHandle::start(store)
                .await
                .map_err(HostError::StoreThread)?;
            (handle, Some(task))
        };
        let models = Arc::new(RoleModels {
            default: model.clone(),
            session: self.model.server(),
            providers: self.providers,
            retry: self.retry,
            limits: self.response_limits,
            endpoints,
            prices: self.prices,
            built: std::sync::Mutex::default(),
        });
        // `[context] model`: the summaries' own model, checked here so a
        // wrong provider stops the start rather than the first compaction.
        let summarizer = match self.context.summarizer() {
            Some(choice) => Some(Summarizer {
                client: models.client(&choice).map_err(HostError::Summarizer)?,
                model: choice.model,
            }),
            None => None,
        };
        Ok(Host {
            data: DataDir::new(self.data_dir),
            store,
            store_task,
            model,
            models,
            tools: ToolRunner::new(Arc::new(registry), self.tool_timeout),
            tool_timeout: self.tool_timeout,
            roles: self.roles,
            max_subagents: self.max_subagents,
            sandbox: Arc::new(self.sandbox),
            hooks: Arc::new(self.hooks),
            workflows: self.workflows,
            placement: self.placement,
            context: self.context,
            summarizer,
        })
    }

    fn client(&self, endpoints: &Endpoints) -> Result<Arc<dyn ModelClient>, HostError> {
        Ok(match &self.model {
            ModelChoice::Server {
                base_url,
                model,
                api_key,
                stream,
                options,
            } => {
                let server = ServerChoice {
                    base_url: base_url.clone(),
                    model: model.clone(),
                    api_key: api_key.clone(),
                    stream: *stream,
                    options: (**options).clone(),
                };
                server_client(&server, self.response_limits, self.retry, endpoints)?
            }
            ModelChoice::Script(path) => {
                let script = Script::load(path)?;
                Arc::new(ScriptedModel::new(
                    script,
                    format!("script:{}", path.display()),
                ))
            }
            ModelChoice::ScriptText { text, name } => {
                let script = Script::from_toml(text, name)?;
                Arc::new(ScriptedModel::new(script, name.clone()))
            }
            ModelChoice::Demo => {
                let script = Script::demo()?;
                Arc::new(ScriptedModel::new(script, "built-in demo script"))
            }
            ModelChoice::Client(client) => client.clone(),
        })
    }
}

/// Which session to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// A new session.
    New,
    /// A stored session: its id, a unique prefix, or `latest`.
    Session(String),
    /// The most recent session in the workspace.
    LatestInWorkspace,
}

/// One session's settings.
#[derive(Clone)]
pub struct SessionOptions {
    /// The workspace root (a resumed session keeps its own).
    pub workspace: PathBuf,
    /// A new session, or which stored one.
    pub resume: Resume,
    /// The mode; `None` starts a new session in Work and keeps a resumed
    /// session's stored mode.
    pub mode: Option<Mode>,
    /// The posture; `None` starts a new session with Ask and keeps a
    /// resumed session's stored posture.
    pub posture: Option<Posture>,
    /// Every rule in force.
    pub rules: Arc<RuleSet>,
    /// Whether a person can answer approval prompts (else Ask denies, with
    /// the reason).
    pub interactive: bool,
    /// The guardian's model and deadline.
    pub guardian: GuardianConfig,
    /// Model requests one turn may make.
    pub max_iterations: u32,
    /// Offer `enter_plan_mode` in Work.
    pub plan_agent_entry: bool,
    /// cadre's configuration and data, beyond the workspace's `.cadre` and
    /// `.git`: never written by a tool call (P10).
    pub protected: Arc<ProtectedPaths>,
    /// Tools of this session only (an MCP server's, started in its
    /// workspace), offered and gated like the built-ins.
    pub tools: Vec<Arc<dyn Tool>>,
    /// The workspace's snapshots, taken before each turn that may change
    /// files; `None` takes none.
    pub snapshots: Option<Arc<Snapshots>>,
    /// A user message the session starts with, admitted in the same store
    /// trip as its opening, so a short-lived agent pays one trip less; its
    /// events carry no submission id as their cause. A resumed session
    /// admits it after what it had queued.
    pub first_message: Option<String>,
}

impl SessionOptions {
    /// A new session in `workspace`: Work, Ask, a person at the prompt, no
    /// rules, 50 model requests per turn.
    pub fn new(workspace: impl Into<PathBuf>) -> Self {
        Self {
            workspace: workspace.into(),
            resume: Resume::New,
            mode: None,
            posture: None,
            rules: Arc::new(RuleSet::default()),
            interactive: true,
            guardian: GuardianConfig::default(),
            max_iterations: 50,
            plan_agent_entry: false,
            protected: Arc::new(ProtectedPaths::new()),
            tools: Vec::new(),
            snapshots: None,
            first_message: None,
        }
    }
}

/// A started session.
pub struct Started {
    /// Its id (new, or the resumed one).
    pub session_id: String,
    /// Submits `Op`s.
    pub handle: SessionHandle,
    /// Its events, `session.started` first, each with the id of the
    /// submission that caused it when there is one.
    pub events: crate::events::Events,
}

/// What sessions share; see the module documentation.
pub struct Host {
    data: DataDir,
    store: StoreHandle,
    store_task: Option<crate::store::StoreThread>,
    model: Arc<dyn ModelClient>,
    models: Arc<dyn ModelSource>,
    tools: ToolRunner,
    tool_timeout: Duration,
    roles: BTreeMap<String, RoleConfig>,
    max_subagents: u32,
    sandbox: Arc<SandboxConfig>,
    workflows: Option<Delegate>,
    placement: Option<Placement>,
    /// `[context]`, resolved per session against the model's name.
    context: ContextSettings,
    /// Who writes compaction summaries when `[context]` names a model.
    summarizer: Option<Summarizer>,
    /// The hooks every agent of every session runs.
    hooks: Arc<HookSet>,
}

impl Host {
    /// A builder for a host keeping sessions under `data_dir`, with the
    /// defaults of [`HostBuilder::new`].
    pub fn builder(data_dir: impl Into<PathBuf>) -> HostBuilder {
        HostBuilder::new(data_dir)
    }

    /// The model sessions talk to.
    pub fn model(&self) -> &Arc<dyn ModelClient> {
        &self.model
    }

    /// The store sessions keep their state in.
    pub fn store(&self) -> &StoreHandle {
        &self.store
    }

    /// Starts a new session or resumes a stored one.
    pub async fn start(&self, options: SessionOptions) -> Result<Started, HostError> {
        // Boxed: the start is a large future, and a caller awaiting it in a
        // task that lives as long as the session would carry its size.
        Box::pin(self.open(options)).await
    }

    async fn open(&self, options: SessionOptions) -> Result<Started, HostError> {
        let (session_id, workspace) = self.find(&options.resume, &options.workspace).await?;
        let workspace =
            Workspace::new(&workspace).map_err(|e| HostError::workspace(&workspace, e))?;
        // The session's directory is made by whoever first writes in it (the
        // plan file, the task list, the sandbox's temp dir): most sessions
        // never need one.
        let paths = self.data.session(&session_id);
        let new = options.resume == Resume::New;
        let mut config = SessionConfig::new(session_id.clone(), workspace, paths);
        config.mode = options.mode.unwrap_or_default();
        config.mode_given = new || options.mode.is_some();
        config.posture_given = new || options.posture.is_some();
        config.max_iterations = options.max_iterations;
        config.permissions = PermissionConfig {
            posture: options.posture.unwrap_or_default(),
            rules: options.rules,
            interactive: options.interactive,
            guardian: options.guardian,
            protected: (*options.protected).clone(),
        };
        config.plan_agent_entry = options.plan_agent_entry;
        config.sandbox = self.sandbox.clone();
        config.hooks = self.hooks.clone();
        config.snapshots = options.snapshots;
        // A message admitted with the opening would pass no
        // `user_prompt_submit` hook: with one, it is submitted instead.
        let (first, submitted) = match self.hooks.user_prompt_submit.is_empty() {
            true => (options.first_message, None),
            false => (None, options.first_message),
        };
        config.first_message = first;
        config.context = self.context.budget(Some(self.model.model()));
        let tools = if options.tools.is_empty() {
            self.tools.clone()
        } else {
            // This session's own tools join the host's in a registry of its own.
            let mut registry = ToolRegistry::new();
            for tool in self.tools.registry().tools().chain(&options.tools) {
                registry.register(tool.clone())?;
            }
            ToolRunner::new(Arc::new(registry), self.tool_timeout)
        };
        let services = SessionServices {
            model: self.model.clone(),
            tools,
            store: Some(self.store.clone()),
            summarizer: self.summarizer.clone(),
            subagents: Some(self.subagents()),
        };
        let (handle, events) = spawn_session(config, services).await?;
        if let Some(text) = submitted {
            // A session that stopped at once has nothing to admit it.
            let _ = handle.submit(cadre_runtime::protocol::Op::UserInput { text, intent: None });
        }
        Ok(Started {
            session_id,
            handle,
            events,
        })
    }

    /// Sub-agent roles, models and limits, and the workflow engine.
    fn subagents(&self) -> Arc<Subagents> {
        let subagents = Subagents::new(self.roles.clone(), self.models.clone(), self.max_subagents);
        let subagents = match &self.workflows {
            Some(engine) => subagents.with_workflows(engine.clone()),
            None => subagents,
        };
        Arc::new(match &self.placement {
            Some(placement) => subagents.with_placement(placement.clone()),
            None => subagents,
        })
    }

    /// What a workflow run this host starts on its own (`cadre workflow
    /// run`) runs as: a caller with `options`' workspace, mode (Work when
    /// unset), posture (Ask when unset), rules and interactivity, this
    /// host's model, tools, store, roles and sandbox; its events go to
    /// `events`, its runs' files under `<data dir>/runs`.
    pub fn workflow_caller(
        &self,
        options: &SessionOptions,
        events: EventSink,
    ) -> Result<Caller, HostError> {
        let workspace = Workspace::new(&options.workspace)
            .map_err(|e| HostError::workspace(&options.workspace, e))?;
        let mode = options.mode.unwrap_or_default();
        let posture = options.posture.unwrap_or_default();
        let authority = Authority::root(mode, posture, options.rules.clone(), DEFAULT_MAX_DEPTH);
        let mut spec = AgentSpec::session(
            String::new(),
            workspace,
            self.data.session("workflows"),
            authority,
        );
        spec.max_iterations = options.max_iterations;
        spec.interactive = options.interactive;
        spec.guardian = options.guardian.clone();
        spec.sandbox = self.sandbox.clone();
        spec.hooks = self.hooks.clone();
        spec.protected = options.protected.clone();
        spec.snapshots = options.snapshots.clone();
        spec.context = self.context.budget(Some(self.model.model()));
        Ok(Caller {
            spec,
            live: LiveAuthority::root(mode, posture),
            services: SessionServices {
                model: self.model.clone(),
                tools: self.tools.clone(),
                store: Some(self.store.clone()),
                summarizer: self.summarizer.clone(),
                subagents: Some(self.subagents()),
            },
            events,
            session_id: None,
            runs_dir: self.data.path().join("runs"),
        })
    }

    /// The session id and workspace `resume` asks for (a new id and
    /// `workspace` for a new session; the stored ones for a resume).
    pub async fn find(
        &self,
        resume: &Resume,
        workspace: &std::path::Path,
    ) -> Result<(String, PathBuf), HostError> {
        let (spec, here) = match resume {
            Resume::New => {
                // Time-ordered ids: the store's keys for sessions started
                // together sit side by side, so one commit writes few pages.
                return Ok((uuid::Uuid::now_v7().to_string(), workspace.to_path_buf()));
            }
            Resume::Session(spec) => (spec.clone(), None),
            Resume::LatestInWorkspace => (
                "latest".to_string(),
                Some(
                    workspace
                        .canonicalize()
                        .unwrap_or_else(|_| workspace.to_path_buf()),
                ),
            ),
        };
        let found = self
            .store
            .ask(|reply| crate::store::StoreRequest::Resolve {
                spec,
                workspace: here,
                reply,
            })
            .await
            .map_err(|e| match e {
                StoreError::NotFound(why) => HostError::NoSession(why),
                other => HostError::Store(other),
            })?;
        Ok((found.id, PathBuf::from(found.workspace)))
    }

    /// Writes everything the store buffered and stops it. Call it once
    /// every session has stopped.
    pub async fn close(self) {
        if let Some(task) = self.store_task {
            self.store.close(task).await;
        }
    }
}

#[cfg(test)]
mod tests;
