//! Starting a session from a validated [`RunConfig`] through the library's
//! [`Host`]: the CLI only says which model, data directory, limits and
//! session options the flags chose. `exec` and the shell share it; they
//! differ only in whether a person can be asked.

use std::sync::Arc;

use cadre_actors::SessionHandle;
use cadre_actors::host::{HostError, Resume as HostResume, SessionOptions, Started};
use cadre_runtime::model::providers::ServerOptions;
use cadre_runtime::protocol::{Event, ModeSource, ModelSource};
use cadre_runtime::store::{LaunchRecord, ModelRecord, Store, store_path};
use cadre_workflows::Host;

use crate::config::{API_KEY_VAR, ModelChoice, Resume, RunConfig};
use crate::exit::CliError;

/// A running session and the host to close once it has stopped.
pub struct Launched {
    /// Submits `Op`s; [`SessionHandle::stopped`] waits for the actor.
    pub handle: SessionHandle,
    /// The session's events, `session.started` first.
    pub events: cadre_actors::events::Events,
    /// The host: closed after the session stopped, so every buffered
    /// append is written.
    pub host: Host,
    /// The session's id (new, or the resumed one).
    pub session_id: String,
    /// Its MCP servers and snapshots.
    pub attached: crate::attach::Attached,
    /// Where its mode came from; [`stamp`] puts it on `session.started`.
    pub mode_source: ModeSource,
    /// Where its model came from, likewise.
    pub model_source: ModelSource,
}

/// Fills in `session.started`'s `mode_source` and `model_source`, which
/// only the host knows.
pub fn stamp(event: &mut Event, mode: ModeSource, model: ModelSource) {
    if let Event::SessionStarted {
        mode_source,
        model_source,
        ..
    } = event
    {
        *mode_source = Some(mode);
        *model_source = Some(model);
    }
}

/// Builds the host (store, model client, tools, roles, sandbox) and starts
/// or resumes the session.
///
/// `interactive` says whether a person can answer approval prompts: the
/// shell can (Ask becomes `approval.requested`), `exec` cannot (Ask becomes
/// a denial that says why, P7).
pub async fn launch(config: &RunConfig, interactive: bool) -> Result<Launched, CliError> {
    launch_with(config, interactive, Vec::new()).await
}

/// [`launch`], with `instead` taking the place of the built-in tools of
/// the same names (an editor's file access: same definitions, so the same
/// gates).
pub async fn launch_with(
    config: &RunConfig,
    interactive: bool,
    instead: Vec<Arc<dyn cadre_runtime::tool::Tool>>,
) -> Result<Launched, CliError> {
    // A resumed session talks to the model it was started with, under the
    // rules it was started with, unless a flag says otherwise.
    let mut config = config.clone();
    let resumed = match &config.resume {
        Resume::New => None,
        Resume::Spec(spec) => resolve_session(&config, spec, None)?,
        Resume::LatestHere => {
            let here = config
                .workspace
                .canonicalize()
                .unwrap_or_else(|_| config.workspace.clone());
            resolve_session(&config, "latest", Some(&here))?
        }
    };
    if let Some(id) = &resumed {
        let record = recorded(&config.data_dir, id)?;
        keep_recorded(&mut config, record.as_ref())?;
    }
    let config = &config;
    let host = host_with(config, instead).await?;
    let resume = match &config.resume {
        Resume::New => HostResume::New,
        Resume::Spec(spec) => HostResume::Session(spec.clone()),
        Resume::LatestHere => HostResume::LatestInWorkspace,
    };
    let flag = match &config.resume {
        Resume::New => "--workspace",
        Resume::Spec(_) => "--resume",
        Resume::LatestHere => "--continue",
    };
    // The session's MCP servers start in its workspace, which a resumed
    // session keeps from the store.
    let (resume, workspace) = match resume {
        HostResume::New => (HostResume::New, config.workspace.clone()),
        other @ (HostResume::Session(_) | HostResume::LatestInWorkspace) => {
            let (id, workspace) = host
                .sessions()
                .find(&other, &config.workspace)
                .await
                .map_err(|e| match e {
                    e @ (HostError::NoSession(_) | HostError::Workspace { .. }) => {
                        CliError::usage(format!("{flag}: {e}"))
                    }
                    other => host_error(other),
                })?;
            (HostResume::Session(id), workspace)
        }
    };
    let attached = crate::attach::attach(config, &workspace).await;
    let mut options = session_options(config, interactive);
    options.workspace = workspace;
    options.resume = resume;
    options.tools = attached.tools.clone();
    options.snapshots = attached.snapshots.clone();
    options.mode = options
        .mode
        .filter(|_| config.mode_given || config.resume == Resume::New);
    options.posture = options
        .posture
        .filter(|_| config.posture_given || config.resume == Resume::New);
    let Started {
        session_id,
        handle,
        events,
    } = host.start(options).await.map_err(|e| match e {
        e @ (HostError::NoSession(_) | HostError::Workspace { .. }) => {
            CliError::usage(format!("{flag}: {e}"))
        }
        other => host_error(other),
    })?;
    let mode_source = match config.resume {
        Resume::Spec(_) | Resume::LatestHere if !config.mode_given => ModeSource::Resumed,
        Resume::New | Resume::Spec(_) | Resume::LatestHere => config.mode_source,
    };
    record(&config.data_dir, &session_id, config)?;
    Ok(Launched {
        handle,
        events,
        host,
        session_id,
        attached,
        mode_source,
        model_source: config.model_source,
    })
}

/// The id of the stored session `spec` names, if the store has it (a
/// resume of a session that is not there fails later, with the host's
/// message).
fn resolve_session(
    config: &RunConfig,
    spec: &str,
    workspace: Option<&std::path::Path>,
) -> Result<Option<String>, CliError> {
    let path = store_path(&config.data_dir);
    if !path.exists() {
        return Ok(None);
    }
    let store = Store::open(&path).map_err(|e| host_error(HostError::Store(e)))?;
    Ok(store.resolve(spec, workspace).ok().map(|found| found.id))
}

/// How `owner` (a session or a workflow run) was launched, if recorded.
pub fn recorded(data_dir: &std::path::Path, owner: &str) -> Result<Option<LaunchRecord>, CliError> {
    let path = store_path(data_dir);
    if !path.exists() {
        return Ok(None);
    }
    let store = Store::open(&path).map_err(|e| host_error(HostError::Store(e)))?;
    store
        .launch(owner)
        .map_err(|e| host_error(HostError::Store(e)))
}

/// Records how `owner` was launched: its model (never a key) and this
/// run's rules.
pub fn record(data_dir: &std::path::Path, owner: &str, config: &RunConfig) -> Result<(), CliError> {
    let Some(model) = model_record(config) else {
        return Ok(());
    };
    let mut store =
        Store::open(&store_path(data_dir)).map_err(|e| host_error(HostError::Store(e)))?;
    store
        .record_launch(
            owner,
            &LaunchRecord {
                model,
                rules: config.session_rules.clone(),
            },
        )
        .map_err(|e| host_error(HostError::Store(e)))
}

/// What of `config`'s model a resume can rebuild; a library's own client
/// or script text cannot be recorded.
fn model_record(config: &RunConfig) -> Option<ModelRecord> {
    match &config.model {
        ModelChoice::Server {
            base_url,
            model,
            api_key,
            stream,
            options,
        } => Some(ModelRecord::Server {
            base_url: base_url.clone(),
            model: model.clone(),
            stream: *stream,
            key_env: api_key.as_ref().and(options.key_env.clone()),
            provider: options.provider.clone(),
            params: options.params.clone(),
        }),
        ModelChoice::Script(path) => Some(ModelRecord::Script {
            path: std::path::absolute(path).unwrap_or_else(|_| path.clone()),
        }),
        ModelChoice::Demo => Some(ModelRecord::Demo),
        ModelChoice::ScriptText { .. } | ModelChoice::Client(_) => None,
    }
}

/// Makes a resumed run keep what its session (or run) was started with:
/// the model, unless `--base-url`, `--model` or `--script` changed it (then
/// it says so), and the session's rules, to which this run's are added.
///
/// A model that cannot be built again fails the resume (exit 2) naming
/// what is missing: a session started against a server never falls back
/// to the demo.
pub fn keep_recorded(
    config: &mut RunConfig,
    record: Option<&LaunchRecord>,
) -> Result<(), CliError> {
    let Some(record) = record else {
        return Ok(());
    };
    let rules = cadre_runtime::permission::rules::PermissionRules {
        allow: union(&record.rules.allow, &config.session_rules.allow),
        ask: union(&record.rules.ask, &config.session_rules.ask),
        deny: union(&record.rules.deny, &config.session_rules.deny),
    };
    config
        .rules
        .extend_from(
            cadre_runtime::permission::rules::Scope::Session,
            &record.rules,
        )
        .map_err(|e| CliError::config(format!("the session's recorded rules: {e}")))?;
    config.session_rules = rules;
    if config.model_given {
        if model_record(config).as_ref() != Some(&record.model) {
            crate::errln!(
                "cadre: this session was started with {}; this run uses {} (a flag changed it)",
                record.model.describe(),
                model_record(config).map_or_else(|| "another model".to_string(), |m| m.describe()),
            );
        }
        return Ok(());
    }
    config.model = match &record.model {
        ModelRecord::Server {
            base_url,
            model,
            stream,
            key_env,
            provider,
            params,
        } => {
            // A provider's URL, headers and key come from the configuration
            // again; one that is gone fails the resume.
            let provider = match provider {
                Some(name) => Some(config.providers.get(name).map_err(|e| {
                    CliError::usage(format!(
                        "this session was started with {}: {e}",
                        record.model.describe()
                    ))
                })?),
                None => None,
            };
            // A server that was started without a key never gets one now.
            let api_key = match provider {
                Some(provider) => key_env.as_ref().and(provider.key.clone()),
                None => key_env
                    .as_ref()
                    .and(config.api_key.as_ref())
                    .map(|k| k.0.clone()),
            };
            if let Some(var) = key_env
                && api_key.is_none()
            {
                return Err(CliError::usage(format!(
                    "this session was started with {} and a key from {var}, which is unset now: \
                     set {var}, or pass --base-url/--model/--script to change the model",
                    record.model.describe()
                )));
            }
            let options = match provider {
                Some(provider) => ServerOptions::of(provider, params.clone()),
                None => ServerOptions {
                    key_env: Some(API_KEY_VAR.to_string()),
                    params: params.clone(),
                    ..ServerOptions::default()
                },
            };
            ModelChoice::Server {
                base_url: provider.map_or_else(|| base_url.clone(), |p| p.config.base_url.clone()),
                model: model.clone(),
                api_key,
                stream: *stream,
                options: Box::new(options),
            }
        }
        ModelRecord::Script { path } => {
            if !path.exists() {
                return Err(CliError::usage(format!(
                    "this session was started with {}, which no longer exists: pass \
                     --script FILE (or --base-url/--model) to change the model",
                    record.model.describe()
                )));
            }
            ModelChoice::Script(path.clone())
        }
        ModelRecord::Demo => ModelChoice::Demo,
    };
    config.model_source = ModelSource::Recorded;
    config.followup = config.followup.clone().model(&config.model);
    Ok(())
}

/// `first`, then what `second` adds.
fn union(first: &[String], second: &[String]) -> Vec<String> {
    let mut out = first.to_vec();
    out.extend(second.iter().filter(|r| !first.contains(r)).cloned());
    out
}

/// Builds the host a `RunConfig` asks for: the store, the model client,
/// the tools, the roles, the sandbox, and (through [`Host::build`]) the
/// workflow engine and the config's cluster.
pub async fn host(config: &RunConfig) -> Result<Host, CliError> {
    host_with(config, Vec::new()).await
}

/// [`host`], with `instead` in the place of the built-ins of their names.
async fn host_with(
    config: &RunConfig,
    instead: Vec<Arc<dyn cadre_runtime::tool::Tool>>,
) -> Result<Host, CliError> {
    let mut builder = cadre_actors::Host::builder(&config.data_dir);
    if !instead.is_empty() {
        let replaced = |name: &str| instead.iter().any(|t| t.definition().name == name);
        let kept: Vec<String> = cadre_runtime::tool::builtin_tools_with(config.limits)
            .iter()
            .map(|t| t.definition().name.clone())
            .filter(|name| !replaced(name))
            .collect();
        builder = builder.builtins(&kept);
        for tool in instead {
            builder = builder.tool(tool);
        }
    }
    let builder = match config.model_requests {
        Some(max) => builder.model_requests(max),
        None => builder,
    };
    let builder = builder
        .model(config.model.clone())
        .retry(config.retry)
        .response_limits(config.response_limits)
        .tool_timeout(config.tool_timeout)
        .file_limits(config.limits)
        .roles(config.roles.clone())
        .providers(config.providers.clone())
        .prices(config.prices.clone())
        .max_subagents(config.max_subagents)
        .context(config.context.clone())
        .sandbox(config.sandbox.clone())
        .hooks(config.hooks.clone());
    // With nodes, sessions' sub-agents and workflows' steps may run on
    // them; without, nothing of the cluster is built.
    Host::build(builder, config.cluster.clone())
        .await
        .map_err(host_error)
}

/// The session options of a `RunConfig`: a new session in its workspace,
/// with its mode, posture, rules and limits.
pub fn session_options(config: &RunConfig, interactive: bool) -> SessionOptions {
    SessionOptions {
        workspace: config.workspace.clone(),
        resume: HostResume::New,
        mode: Some(config.mode),
        posture: Some(config.posture),
        rules: Arc::new(config.rules.clone()),
        interactive,
        guardian: config.guardian.clone(),
        max_iterations: config.max_iterations,
        plan_agent_entry: config.plan_agent_entry,
        protected: Arc::new(config.protected.clone().with_real_spellings()),
        tools: Vec::new(),
        snapshots: None,
        first_message: None,
    }
}

/// A store that is busy, leased to another process or failing to write is
/// worth trying again (exit 75); bad configuration, scripts or stores that
/// are unreadable or too new are not (exit 2).
pub fn host_error(err: HostError) -> CliError {
    match err {
        HostError::Store(store) if store.is_retryable() => CliError::tempfail(store.to_string()),
        HostError::Store(store) => CliError::config(store.to_string()),
        e @ (HostError::Config(_)
        | HostError::Script(_)
        | HostError::Model(_)
        | HostError::Summarizer(_)
        | HostError::UnknownBuiltin(_)
        | HostError::Tool(_)) => CliError::config(e.to_string()),
        e @ (HostError::NoSession(_) | HostError::Workspace { .. }) => {
            CliError::usage(e.to_string())
        }
        e @ (HostError::StoreThread(_) | HostError::Start(_)) => CliError::internal(e.to_string()),
    }
}
