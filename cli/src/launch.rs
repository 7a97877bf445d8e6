//! Starting a session from a validated [`RunConfig`]: the store, the model
//! client, the tools, the sub-agents and the session actor. `exec` and the
//! shell share it; they differ only in whether a person can be asked.

use std::path::PathBuf;
use std::sync::Arc;

use cadre_actors::store::StoreHandle;
use cadre_actors::{
    PermissionConfig, SessionConfig, SessionHandle, SessionServices, StartError, Subagents,
    spawn_session,
};
use cadre_runtime::paths::DataDir;
use cadre_runtime::protocol::Event;
use cadre_runtime::store::{Store, StoreError, store_path};
use cadre_runtime::tool::{ToolRegistry, ToolRunner, Workspace};
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::task::JoinHandle;

use crate::config::{Resume, RunConfig};
use crate::exit::CliError;

/// A running session and what the host needs to close it.
pub struct Launched {
    /// Submits `Op`s; [`SessionHandle::stopped`] waits for the actor.
    pub handle: SessionHandle,
    /// The session's events, `session.started` first.
    pub events: UnboundedReceiver<Event>,
    /// The store actor, closed after the session stopped so every buffered
    /// append is written.
    pub store: StoreHandle,
    /// The store actor's task, for [`StoreHandle::close`].
    pub store_task: JoinHandle<()>,
    /// The session's id (new, or the resumed one).
    pub session_id: String,
    /// Its MCP servers and snapshots.
    pub attached: crate::attach::Attached,
}

/// Opens the store, resolves `--resume`/`--continue`, builds the model
/// client and the tools, and spawns the session.
///
/// `interactive` says whether a person can answer approval prompts: the
/// shell can (Ask becomes `approval.requested`), `exec` cannot (Ask becomes
/// a denial that says why, P7).
pub async fn launch(config: &RunConfig, interactive: bool) -> Result<Launched, CliError> {
    let model = config.model_client()?;
    let store = Store::open(&store_path(&config.data_dir)).map_err(store_error)?;
    let (session_id, workspace) = match &config.resume {
        Resume::New => (uuid::Uuid::new_v4().to_string(), config.workspace.clone()),
        Resume::Spec(spec) => {
            let found = store
                .resolve(spec, None)
                .map_err(|e| CliError::usage(format!("--resume: {e}")))?;
            (found.id, PathBuf::from(found.workspace))
        }
        Resume::LatestHere => {
            let here = config
                .workspace
                .canonicalize()
                .unwrap_or_else(|_| config.workspace.clone());
            let found = store
                .resolve("latest", Some(&here))
                .map_err(|e| CliError::usage(format!("--continue: {e}")))?;
            (found.id, PathBuf::from(found.workspace))
        }
    };
    let workspace = Workspace::new(&workspace)
        .map_err(|e| CliError::usage(format!("--workspace {}: {e}", workspace.display())))?;
    let paths = DataDir::new(&config.data_dir).session(&session_id);
    paths.create().map_err(|e| {
        CliError::config(format!("data directory {}: {e}", config.data_dir.display()))
    })?;
    let (store, store_task) = StoreHandle::start(store)
        .await
        .map_err(|e| CliError::internal(format!("the store could not start: {e}")))?;
    let mut registry = ToolRegistry::with_builtins();
    let attached = crate::attach::attach(config, &workspace, &mut registry).await;
    let registry = Arc::new(registry);
    let services = SessionServices {
        model,
        tools: ToolRunner::new(registry, config.tool_timeout),
        store: Some(store.clone()),
    };
    let subagents = Subagents::new(
        config.roles.clone(),
        config.model_source(services.model.clone()),
        config.max_subagents,
    );
    let mut session = SessionConfig::new(session_id.clone(), workspace, paths);
    session.mode = config.mode;
    session.mode_given = config.mode_given || matches!(config.resume, Resume::New);
    session.posture_given = config.posture_given || matches!(config.resume, Resume::New);
    session.max_iterations = config.max_iterations;
    session.permissions = PermissionConfig {
        posture: config.posture,
        rules: Arc::new(config.rules.clone()),
        interactive,
        guardian: config.guardian.clone(),
    };
    session.subagents = Some(Arc::new(subagents));
    session.plan_agent_entry = config.plan_agent_entry;
    session.sandbox = Arc::new(config.sandbox.clone());
    session.snapshots = attached.snapshots.clone();
    let (handle, events) = spawn_session(session, services)
        .await
        .map_err(|e| match e {
            StartError::Store(err) => store_error(err),
            other => CliError::internal(format!("the session could not start: {other}")),
        })?;
    Ok(Launched {
        handle,
        events,
        store,
        store_task,
        session_id,
        attached,
    })
}

/// A store that is busy, leased to another process or failing to write is
/// worth trying again (exit 75); one that is unreadable or too new is not
/// (exit 2).
fn store_error(err: StoreError) -> CliError {
    if err.is_retryable() {
        CliError::tempfail(err.to_string())
    } else {
        CliError::config(err.to_string())
    }
}
