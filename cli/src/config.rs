//! From arguments to a validated run configuration, and from that to the
//! model client. Every failure here is a usage or configuration error
//! (exit code 2) that names what is wrong and where.

use std::path::PathBuf;
use std::time::Duration;

use std::collections::BTreeMap;

use cadre_runtime::Mode;
use cadre_runtime::config::{Config, RoleConfig};
use cadre_runtime::model::providers::{Providers, ServerOptions};
use cadre_runtime::model::{ModelParams, ResponseLimits, RetryPolicy};
use cadre_runtime::permission::guardian::GuardianConfig;
use cadre_runtime::permission::rules::{PermissionRules, RuleSet, Scope};
use cadre_runtime::permission::{Posture, ProtectedPaths};
use cadre_runtime::protocol::{ModeSource, ModelSource};
use cadre_runtime::sandbox::{
    DEFAULT_MAX_OUTPUT, Limits, SandboxConfig, default_writable_roots, inherited,
};
use cadre_runtime::tool::FileLimits;

use crate::args::{ExecArgs, OutputFormat, SessionArgs};
use crate::exit::CliError;
use crate::followup::Followup;

pub use cadre_actors::host::ModelChoice;

/// A validated run: `exec`'s, or the shell's (text output; its prompt,
/// if any, is the first line, as if typed).
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The prompt, if any.
    pub prompt: Option<String>,
    /// The nodes its sub-agents may run on (`--nodes`, `[cluster]`); `None`
    /// runs every one here.
    pub cluster: Option<cadre_workflows::cluster::Cluster>,
    /// A goal to set before the prompt (`exec --goal`).
    pub goal: Option<cadre_runtime::goal::GoalAction>,
    /// A new session, or which stored one to resume.
    pub resume: Resume,
    /// Approve a submitted plan automatically.
    pub approve_plan: bool,
    /// Stop once a plan waits for approval.
    pub plan_only: bool,
    /// The starting mode.
    pub mode: Mode,
    /// `--mode` (or `CADRE_MODE`) was given: a resumed session switches to
    /// it; otherwise it keeps its stored mode.
    pub mode_given: bool,
    /// Where `mode` came from, for `session.started` and the text header.
    pub mode_source: ModeSource,
    /// The workspace root.
    pub workspace: PathBuf,
    /// The data directory.
    pub data_dir: PathBuf,
    /// The model.
    pub model: ModelChoice,
    /// Where `model` came from, for `session.started` and the demo's
    /// notices.
    pub model_source: ModelSource,
    /// `--base-url`, `--model` or `--script` (or their environment
    /// variables) chose the model: a resumed session switches to it;
    /// otherwise it keeps the model it was started with.
    pub model_given: bool,
    /// The key from `OPENAI_API_KEY`, kept so that a resumed session's
    /// recorded server gets it.
    pub api_key: Option<ApiKey>,
    /// The named model servers (`[providers.NAME]` and the built-in
    /// `openai`), each with the key its `env_key` variable holds.
    pub providers: Providers,
    /// Prices per model (`[prices."MODEL"]`), for the cost beside usage.
    pub prices: cadre_runtime::model::Prices,
    /// This run's own rules (`--allow`, `--ask`, `--deny`), recorded with
    /// the session so that a resume keeps them.
    pub session_rules: PermissionRules,
    /// Output format.
    pub output: OutputFormat,
    /// Where `exec` also writes its answer (`--output-last-message`).
    pub output_last_message: Option<PathBuf>,
    /// Model requests per turn.
    pub max_iterations: u32,
    /// The retry policy for model requests.
    pub retry: RetryPolicy,
    /// The default tool timeout.
    pub tool_timeout: Duration,
    /// The starting posture.
    pub posture: Posture,
    /// `--posture` (or `CADRE_POSTURE`) was given: a resumed session
    /// switches to it; otherwise it keeps its stored posture.
    pub posture_given: bool,
    /// Every rule: the files' and this run's.
    pub rules: RuleSet,
    /// The guardian's model and deadline.
    pub guardian: GuardianConfig,
    /// Configured roles.
    pub roles: BTreeMap<String, RoleConfig>,
    /// Sub-agents at once.
    pub max_subagents: u32,
    /// Offer `enter_plan_mode` (config `plan.agent_entry`).
    pub plan_agent_entry: bool,
    /// How `bash` commands are sandboxed (`[sandbox]`, `[limits]`).
    pub sandbox: SandboxConfig,
    /// `[[hooks.EVENT]]`: the user's, and a trusted project's.
    pub hooks: cadre_runtime::hooks::HookSet,
    /// How large and how long one model response may be (`[limits]`).
    pub response_limits: ResponseLimits,
    /// cadre's data and configuration, which no tool call writes.
    pub protected: ProtectedPaths,
    /// The file and search tools' bounds (`[limits]`).
    pub limits: FileLimits,
    /// The MCP servers (`[mcp_servers.NAME]`, `.mcp.json`).
    pub mcp_servers: Vec<cadre_runtime::mcp::McpServerConfig>,
    /// Files larger than this are not recorded in snapshots; `None` when
    /// snapshots are off (`[snapshots]`).
    pub snapshot_max_file_bytes: Option<u64>,
    /// Model requests in flight at once per endpoint (`[limits]
    /// model_requests`); `None` for no limit.
    pub model_requests: Option<u32>,
    /// The model's context window and compaction threshold (`[context]`).
    pub context: cadre_runtime::config::ContextSettings,
    /// The flags the commands this run prints need to find its store,
    /// configuration and model.
    pub followup: Followup,
    /// Lines of a tool's output that text shows (more with `-v`).
    pub tool_output_lines: usize,
    /// Whether text shows a spinner while it waits for the model: stderr
    /// is a terminal and carries no log lines.
    pub spinner: bool,
}

/// The OpenAI endpoint: where a model name or a key with no base URL goes,
/// as the OpenAI SDKs do.
pub const OPENAI_BASE_URL: &str = "https://api.openai.com/v1";

/// The environment variable the key is read from.
pub const API_KEY_VAR: &str = "OPENAI_API_KEY";

/// A bearer token: never shown, never stored.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(pub String);

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ApiKey(…)")
    }
}

/// A new session, or a stored one to carry on (ST3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// A new session.
    New,
    /// A stored session by id, unique prefix, or `latest`.
    Spec(String),
    /// The most recent session in this workspace (`--continue`).
    LatestHere,
}

/// What the environment contributes besides clap's `env` fallbacks.
#[derive(Debug, Clone, Default)]
pub struct Environment {
    /// `OPENAI_API_KEY`.
    pub api_key: Option<String>,
    /// The current directory.
    pub current_dir: Option<PathBuf>,
    /// The platform data directory.
    pub platform_data_dir: Option<PathBuf>,
    /// The platform configuration directory.
    pub platform_config_dir: Option<PathBuf>,
    /// The process environment, from which commands get an allow-listed
    /// part (and the sandbox its `HOME` and `CARGO_HOME`).
    pub vars: Vec<(String, String)>,
    /// The user's home directory.
    pub home: Option<PathBuf>,
}

/// The user's defaults from `settings.toml` (M6): the lowest layer, below
/// the configuration files, the environment and the flags. Read by the
/// caller, so `from_args` stays free of I/O.
#[derive(Debug, Clone, Default)]
pub struct UserDefaults {
    /// `default_mode`.
    pub mode: Option<Mode>,
    /// `default_posture`.
    pub posture: Option<Posture>,
    /// `model`.
    pub model: Option<String>,
    /// `plan.agent_entry`.
    pub plan_agent_entry: Option<bool>,
}

impl RunConfig {
    /// Validates `exec` arguments against the merged configuration files
    /// and the user's defaults. Does no I/O.
    pub fn from_args(
        args: ExecArgs,
        env: Environment,
        files: Config,
        defaults: UserDefaults,
    ) -> Result<Self, CliError> {
        let resuming = args.session.resume.is_some() || args.session.continue_latest;
        let goal = args.goal.action()?;
        match &args.prompt {
            Some(p) if p.trim().is_empty() => {
                return Err(CliError::usage("the prompt is empty"));
            }
            None if !resuming && goal.is_none() => {
                return Err(CliError::usage(
                    "a PROMPT is required: as an argument, on stdin (`-` or a pipe), or with \
                     --prompt-file FILE (or --resume ID / --continue to carry on a stored session)",
                ));
            }
            _ => {}
        }
        let mut config = Self::from_session(args.session, env, files, defaults)?;
        config.prompt = args.prompt;
        config.goal = goal;
        config.approve_plan = args.approve_plan;
        config.plan_only = args.plan_only;
        config.output = args.output_format;
        config.output_last_message = args.output_last_message;
        Ok(config)
    }

    /// Validates the session flags (the shell's, and `exec`'s but for the
    /// prompt and the output) against the merged configuration files and the
    /// user's defaults. Does no I/O.
    pub fn from_session(
        args: SessionArgs,
        env: Environment,
        files: Config,
        defaults: UserDefaults,
    ) -> Result<Self, CliError> {
        let settings = &files.settings;
        let (mode, mode_source) =
            starting_mode(args.mode.as_deref(), &env.vars, &files, &defaults)?;
        let mode_given = matches!(mode_source, ModeSource::Flag | ModeSource::Env);
        let posture_given = args.posture.is_some();
        let posture: Posture = match &args.posture {
            Some(p) => p
                .parse()
                .map_err(|e| CliError::usage(format!("--posture: {e}")))?,
            None => files.posture(settings.posture.or(defaults.posture).unwrap_or_default()),
        };
        let mut rules = files.rules.clone();
        let session = PermissionRules {
            allow: args.allow.clone(),
            ask: args.ask.clone(),
            deny: args.deny.clone(),
        };
        rules
            .extend_from(Scope::Session, &session)
            .map_err(|e| CliError::usage(format!("--allow/--ask/--deny: {e}")))?;
        let providers = Providers::resolve(&settings.providers, |var| {
            env.vars
                .iter()
                .find(|(k, _)| k == var)
                .map(|(_, v)| v.clone())
        });
        let g = &settings.guardian;
        // A guardian with a provider or parameters of its own gets a client
        // of its own, chosen like a role's.
        let guardian_choice = RoleConfig {
            model: g.model.clone(),
            provider: g.provider.clone(),
            reasoning_effort: g.reasoning_effort,
            max_output_tokens: g.max_output_tokens,
            temperature: g.temperature,
            top_p: g.top_p,
            extra: g.extra.clone(),
            ..RoleConfig::default()
        };
        let guardian = GuardianConfig {
            model: settings.guardian.model.clone(),
            choice: guardian_choice
                .own_client()
                .then(|| Box::new(guardian_choice)),
            timeout: settings
                .guardian
                .timeout_secs
                .map_or(GuardianConfig::default().timeout, Duration::from_secs),
            ..GuardianConfig::default()
        };
        let resume = match (&args.resume, args.continue_latest) {
            (Some(spec), _) => Resume::Spec(spec.clone()),
            (None, true) => Resume::LatestHere,
            (None, false) => Resume::New,
        };
        if args.max_iterations == 0 {
            return Err(CliError::usage("--max-iterations must be at least 1"));
        }
        let current_dir = env.current_dir.clone();
        let default_data_dir = env.platform_data_dir.as_ref().map(|d| d.join("cadre"));
        let workspace = match args.workspace.or(env.current_dir) {
            Some(dir) => dir,
            None => {
                return Err(CliError::usage(
                    "cannot tell the current directory; pass --workspace",
                ));
            }
        };
        let data_dir = match args
            .data_dir
            .or(env.platform_data_dir.map(|d| d.join("cadre")))
        {
            Some(dir) => dir,
            None => {
                return Err(CliError::usage(
                    "no data directory: pass --data-dir or set CADRE_HOME",
                ));
            }
        };
        // The user's limits, tightened by the project's.
        let limits = files.limits();
        let sandbox = sandbox_config(settings, &limits, &env.vars, &data_dir);
        let response_limits = response_limits(&limits);
        let mut protected = ProtectedPaths::new().data_dir(&data_dir);
        if let Some(dir) = &env.platform_config_dir {
            protected = protected.config_dir(dir.join("cadre"));
        }
        if let Some(home) = &env.home {
            protected = protected.home(home);
        }
        let model_given = args.script.is_some() || args.base_url.is_some() || args.model.is_some();
        let resuming_session = args.resume.is_some() || args.continue_latest;
        let api_key = env.api_key.filter(|k| !k.is_empty()).map(ApiKey);
        let (model, model_source) = choose_model(
            ModelFlags {
                script: args.script,
                base_url: args.base_url,
                model: args.model,
                stream: !args.no_stream,
            },
            Configured {
                base_url: settings.base_url.clone(),
                model: settings.model.clone().or(defaults.model),
                provider: settings.provider.clone(),
                params: settings.params(),
                providers: &providers,
            },
            // A resume keeps its session's model (`launch::keep_recorded`):
            // a key alone names none there.
            api_key.clone().filter(|_| model_given || !resuming_session),
        )?;
        // A provider's window is its models' default (`[context] window`
        // still wins).
        let mut context = settings.context.clone();
        if context.window.is_none()
            && let ModelChoice::Server { options, .. } = &model
            && let Some(provider) = options.provider.as_deref()
            && let Ok(provider) = providers.get(provider)
        {
            context.window = provider.config.context_window;
        }
        let followup = Followup::new(&data_dir, default_data_dir.as_deref())
            .model(&model)
            .workspace(&workspace, current_dir.as_deref());
        Ok(Self {
            prompt: None,
            cluster: None,
            goal: None,
            resume,
            approve_plan: false,
            plan_only: false,
            mode,
            mode_given,
            mode_source,
            workspace,
            data_dir,
            model,
            model_source,
            model_given,
            api_key,
            providers,
            prices: settings.prices.clone(),
            session_rules: session,
            output: OutputFormat::Text,
            output_last_message: None,
            max_iterations: args.max_iterations,
            retry: RetryPolicy {
                max_attempts: args.max_retries.saturating_add(1),
                ..RetryPolicy::default()
            },
            tool_timeout: Duration::from_secs(args.tool_timeout.max(1)),
            posture,
            posture_given,
            rules,
            guardian,
            roles: files.roles,
            hooks: files.hooks,
            plan_agent_entry: settings
                .plan
                .agent_entry
                .or(defaults.plan_agent_entry)
                .unwrap_or(false),
            max_subagents: args
                .max_subagents
                .or(settings.max_subagents)
                .unwrap_or(8)
                .clamp(1, 128),
            sandbox,
            response_limits,
            protected,
            limits: limits.apply(FileLimits::default()),
            mcp_servers: crate::attach::with_credentials(files.mcp_servers, |var| {
                env.vars
                    .iter()
                    .find(|(k, _)| k == var)
                    .map(|(_, v)| v.clone())
            }),
            snapshot_max_file_bytes: settings
                .snapshots
                .enabled
                .unwrap_or(true)
                .then(|| snapshot_cap(&settings.snapshots)),
            model_requests: limits.model_requests,
            context,
            followup,
            tool_output_lines: crate::render::TOOL_OUTPUT_LINES,
            spinner: false,
        })
    }

    /// Protects cadre's configuration directory (`--config-dir`, else the
    /// platform's) and the settings file in it from tool calls.
    pub fn protect_config_dir(&mut self, dir: Option<&std::path::Path>) {
        if let Some(dir) = dir {
            self.protected = std::mem::take(&mut self.protected)
                .config_dir(dir)
                .settings_file(dir.join(cadre_runtime::settings::FILE_NAME));
        }
    }
}

/// The starting mode and where it came from: `--mode`, else `CADRE_MODE`,
/// else the user's configuration files' `mode`, else the settings'
/// `default_mode`, else Work; a project's `mode` narrows the last three.
/// What the command line (and its environment fallbacks) says of the model.
struct ModelFlags {
    script: Option<PathBuf>,
    base_url: Option<String>,
    model: Option<String>,
    stream: bool,
}

/// What the configuration files say of the session's model.
struct Configured<'a> {
    base_url: Option<String>,
    model: Option<String>,
    provider: Option<String>,
    params: ModelParams,
    providers: &'a Providers,
}

/// The model a run talks to, and where that came from (LLM4, LLM6, LLM9).
///
/// The demo script answers only when nothing names a model: no flag, no
/// configured `base_url`, `provider` or `model`, no key. A model name or a
/// key with no base URL means the OpenAI endpoint, so `--model gpt-4.1`
/// never runs the demo and exits 0. A configured `provider` gives the URL
/// and the key (its `env_key` variable's); `--base-url` overrides it.
fn choose_model(
    flags: ModelFlags,
    configured: Configured<'_>,
    api_key: Option<ApiKey>,
) -> Result<(ModelChoice, ModelSource), CliError> {
    if let Some(path) = flags.script {
        return Ok((ModelChoice::Script(path), ModelSource::Flags));
    }
    let source = if flags.base_url.is_some() || flags.model.is_some() || api_key.is_some() {
        ModelSource::Flags
    } else if configured.base_url.is_some()
        || configured.model.is_some()
        || configured.provider.is_some()
    {
        ModelSource::Config
    } else {
        return Ok((ModelChoice::Demo, ModelSource::Demo));
    };
    let provider = match (&flags.base_url, &configured.provider) {
        (None, Some(name)) => Some(
            configured
                .providers
                .get(name)
                .map_err(|e| CliError::config(format!("provider: {e}")))?,
        ),
        _ => None,
    };
    let base_url = match provider {
        Some(provider) => provider.config.base_url.clone(),
        None => flags
            .base_url
            .or(configured.base_url)
            .unwrap_or_else(|| OPENAI_BASE_URL.to_string()),
    };
    if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
        return Err(CliError::usage(format!(
            "--base-url '{base_url}' must start with http:// or https://"
        )));
    }
    let Some(model) = flags
        .model
        .or(configured.model)
        .filter(|m| !m.trim().is_empty())
    else {
        return Err(CliError::usage(format!(
            "no model named for {base_url}: pass --model NAME (or set OPENAI_MODEL, or \
             `model` in config.toml)"
        )));
    };
    let (api_key, options) = match provider {
        Some(provider) => (
            provider.key.clone(),
            ServerOptions::of(provider, configured.params),
        ),
        None => (
            api_key.map(|k| k.0),
            ServerOptions {
                key_env: Some(API_KEY_VAR.to_string()),
                params: configured.params,
                ..ServerOptions::default()
            },
        ),
    };
    Ok((
        ModelChoice::Server {
            base_url,
            model,
            api_key,
            stream: flags.stream,
            options: Box::new(options),
        },
        source,
    ))
}

fn starting_mode(
    flag: Option<&str>,
    vars: &[(String, String)],
    files: &Config,
    defaults: &UserDefaults,
) -> Result<(Mode, ModeSource), CliError> {
    if let Some(mode) = flag {
        let mode = mode
            .parse()
            .map_err(|e| CliError::usage(format!("--mode: {e}")))?;
        return Ok((mode, ModeSource::Flag));
    }
    let env = vars
        .iter()
        .find(|(k, v)| k == "CADRE_MODE" && !v.trim().is_empty());
    if let Some((_, mode)) = env {
        let mode = mode
            .parse()
            .map_err(|e| CliError::usage(format!("CADRE_MODE: {e}")))?;
        return Ok((mode, ModeSource::Env));
    }
    let (user, source) = match (files.settings.mode, defaults.mode) {
        (Some(mode), _) => (mode, ModeSource::Config),
        (None, Some(mode)) => (mode, ModeSource::Settings),
        (None, None) => (Mode::default(), ModeSource::Default),
    };
    let mode = files.mode(user);
    Ok(if mode == user {
        (mode, source)
    } else {
        (mode, ModeSource::Config)
    })
}

/// The sandbox from `[sandbox]`, `[limits]` and the environment: the
/// configured writable roots (`~/` is `$HOME`) or the default caches,
/// cadre's data directory protected (the host adds its configuration
/// directory), and the allow-listed variables.
fn sandbox_config(
    settings: &cadre_runtime::config::ConfigFile,
    limits: &cadre_runtime::config::LimitSettings,
    vars: &[(String, String)],
    data_dir: &std::path::Path,
) -> SandboxConfig {
    let var = |name: &str| {
        vars.iter()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| PathBuf::from(v))
    };
    let home = var("HOME");
    let writable_roots = match (&settings.sandbox.writable_roots, &home) {
        (Some(roots), _) => roots
            .iter()
            .filter_map(|root| match (root.strip_prefix("~/"), &home) {
                (Some(rest), Some(home)) => Some(home.join(rest)),
                (Some(_), None) => None,
                (None, _) => Some(PathBuf::from(root)),
            })
            .collect(),
        (None, Some(home)) => default_writable_roots(home, var("CARGO_HOME").as_deref()),
        (None, None) => Vec::new(),
    };
    let extra = settings.sandbox.env.clone().unwrap_or_default();
    let configured = &settings.sandbox;
    let defaults = Limits::default();
    let mib = |value: Option<u64>, default: u64| {
        value.map_or(default, |mib| mib.max(1).saturating_mul(1024 * 1024))
    };
    let sandbox_limits = Limits {
        memory: mib(configured.memory_mib, defaults.memory),
        processes: configured
            .processes
            .map_or(defaults.processes, |n| n.max(1)),
        cpu_secs: configured.cpu_secs.map_or(defaults.cpu_secs, |s| s.max(1)),
        file_size: mib(configured.file_mib, defaults.file_size),
        tmp_size: mib(configured.tmp_mib, defaults.tmp_size),
    };
    SandboxConfig {
        writable_roots,
        protected: vec![data_dir.to_path_buf()],
        env: inherited(vars.iter().cloned(), &extra),
        max_output: limits.bash_output_mib.map_or(DEFAULT_MAX_OUTPUT, |mib| {
            mib.max(1).saturating_mul(1024 * 1024)
        }),
        check_cache: Some(data_dir.join("checks")),
        limits: sandbox_limits,
        namespaces: true,
        processes: limits.processes(cadre_runtime::process::ProcessLimits::default()),
    }
}

/// The model response limits from `[limits]`, the defaults for what is unset.
fn response_limits(limits: &cadre_runtime::config::LimitSettings) -> ResponseLimits {
    let default = ResponseLimits::default();
    ResponseLimits {
        max_bytes: limits.response_mib.map_or(default.max_bytes, |mib| {
            usize::try_from(mib.max(1).saturating_mul(1024 * 1024)).unwrap_or(usize::MAX)
        }),
        max_duration: limits.response_secs.map_or(default.max_duration, |secs| {
            Duration::from_secs(secs.max(1))
        }),
    }
}

/// `[snapshots]`: the per-file cap in bytes (whether or not they are on).
pub fn snapshot_cap(settings: &cadre_runtime::config::SnapshotSettings) -> u64 {
    settings
        .max_file_mib
        .map_or(cadre_runtime::snapshot::DEFAULT_MAX_FILE_BYTES, |mib| {
            mib.saturating_mul(1024 * 1024)
        })
}

#[cfg(test)]
mod tests;
