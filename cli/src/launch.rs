//! Starting a session from a validated [`RunConfig`] through the library's
//! [`Host`]: the CLI only says which model, data directory, limits and
//! session options the flags chose. `exec` and the shell share it; they
//! differ only in whether a person can be asked.

use std::sync::Arc;

use cadre_actors::SessionHandle;
use cadre_actors::host::{Host, HostError, Resume as HostResume, SessionOptions, Started};
use cadre_runtime::protocol::{Event, ModeSource};
use cadre_workflows::cluster::child::ClusterPlacement;
use cadre_workflows::engine::Engine;

use crate::config::{Resume, RunConfig};
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
}

/// Fills in `session.started`'s `mode_source`, which only the host knows.
pub fn stamp(event: &mut Event, source: ModeSource) {
    if let Event::SessionStarted { mode_source, .. } = event {
        *mode_source = Some(source);
    }
}

/// Builds the host (store, model client, tools, roles, sandbox) and starts
/// or resumes the session.
///
/// `interactive` says whether a person can answer approval prompts: the
/// shell can (Ask becomes `approval.requested`), `exec` cannot (Ask becomes
/// a denial that says why, P7).
pub async fn launch(config: &RunConfig, interactive: bool) -> Result<Launched, CliError> {
    let host = host(config).await?;
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
        other => {
            let (id, workspace) =
                host.find(&other, &config.workspace)
                    .await
                    .map_err(|e| match e {
                        HostError::Usage(why) => CliError::usage(format!("{flag}: {why}")),
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
        HostError::Usage(why) => CliError::usage(format!("{flag}: {why}")),
        other => host_error(other),
    })?;
    let mode_source = match config.resume {
        Resume::Spec(_) | Resume::LatestHere if !config.mode_given => ModeSource::Resumed,
        Resume::New | Resume::Spec(_) | Resume::LatestHere => config.mode_source,
    };
    Ok(Launched {
        handle,
        events,
        host,
        session_id,
        attached,
        mode_source,
    })
}

/// Builds the host a `RunConfig` asks for: the store, the model client,
/// the tools, the roles, the sandbox, and the workflow engine sessions in
/// Operate delegate to.
pub async fn host(config: &RunConfig) -> Result<Host, CliError> {
    let builder = Host::builder(&config.data_dir);
    let builder = match config.model_requests {
        Some(max) => builder.model_requests(max),
        None => builder,
    };
    // With nodes, sessions' sub-agents and delegated workflows' steps may
    // run on them; without, nothing of the cluster is built.
    let (builder, engine) = match &config.cluster {
        Some(cluster) => (
            builder.placement(Arc::new(ClusterPlacement::new(cluster.clone()))),
            Engine::new().with_cluster(cluster.clone()),
        ),
        None => (builder, Engine::new()),
    };
    builder
        .model(config.model.clone())
        .retry(config.retry)
        .response_limits(config.response_limits)
        .tool_timeout(config.tool_timeout)
        .file_limits(config.limits)
        .roles(config.roles.clone())
        .max_subagents(config.max_subagents)
        .sandbox(config.sandbox.clone())
        .workflows(Arc::new(engine))
        .build()
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
        HostError::Config(why) => CliError::config(why),
        HostError::Usage(why) => CliError::usage(why),
        other => CliError::internal(other.to_string()),
    }
}
