//! `cadre exec`: one prompt, one session, no terminal UI.

use std::sync::Arc;

use std::path::PathBuf;

use cadre_actors::store::StoreHandle;
use cadre_actors::{PermissionConfig, SessionConfig, SessionServices, Subagents, spawn_session};
use cadre_runtime::paths::DataDir;
use cadre_runtime::protocol::{Activity, Event, FailureCategory, Op};
use cadre_runtime::store::{QuestionnaireAnswer, Store, store_path};
use cadre_runtime::tool::{ToolRegistry, ToolRunner, Workspace};

use crate::config::{Resume, RunConfig};
use crate::exit::{self, CliError};
use crate::render::Renderer;

/// How the run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Success,
    AgentFailed,
    Infrastructure { retryable: bool },
    Cancelled,
    PausedByDenials,
}

impl Ending {
    fn status_and_code(self) -> (&'static str, u8) {
        match self {
            Ending::Success => ("success", exit::SUCCESS),
            Ending::AgentFailed => ("failed", exit::AGENT_FAILED),
            Ending::Infrastructure { retryable: true } => ("error", exit::TEMPFAIL),
            Ending::Infrastructure { retryable: false } => ("error", exit::AGENT_FAILED),
            Ending::Cancelled => ("cancelled", exit::INTERRUPTED),
            Ending::PausedByDenials => ("paused_by_denials", exit::AGENT_FAILED),
        }
    }
}

/// Runs the prompt (or carries on a stored session) and returns the exit code.
pub async fn run(config: RunConfig) -> Result<u8, CliError> {
    let model = config.model_client()?;
    let store =
        Store::open(&store_path(&config.data_dir)).map_err(|e| CliError::config(e.to_string()))?;
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
    let registry = Arc::new(ToolRegistry::with_builtins());
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
    let mut session = SessionConfig::new(session_id, workspace, paths);
    session.mode = config.mode;
    session.max_iterations = config.max_iterations;
    session.permissions = PermissionConfig {
        posture: config.posture,
        rules: Arc::new(config.rules.clone()),
        // exec has no one to ask: Ask becomes a denial that says why (P7).
        interactive: false,
        guardian: config.guardian.clone(),
    };
    session.subagents = Some(Arc::new(subagents));
    session.plan_agent_entry = config.plan_agent_entry;
    let (handle, mut events) = spawn_session(session, services)
        .await
        .map_err(|e| CliError::internal(format!("the session could not start: {e}")))?;
    let mut driver = Driver::new(&config);
    match &config.prompt {
        Some(prompt) => {
            handle
                .submit(Op::user(prompt.clone()))
                .map_err(|e| CliError::internal(format!("the session stopped early: {e}")))?;
        }
        // Resuming with no prompt: whatever was queued runs (the session
        // starts it on its own); a session with nothing to do is idle now.
        None => {
            let _ = handle.submit(Op::Status);
        }
    }

    let mut renderer = Renderer::new(config.output);
    let mut interrupts = 0u32;
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break };
                renderer.event(&event);
                if matches!(event, Event::SessionStopped { .. }) {
                    break;
                }
                for op in driver.next(&event) {
                    let _ = handle.submit(op);
                }
            }
            _ = tokio::signal::ctrl_c() => {
                interrupts += 1;
                if interrupts > 1 {
                    return Ok(exit::INTERRUPTED);
                }
                eprintln!("cadre: cancelling the turn (Ctrl-C again to quit at once)");
                let _ = handle.submit(Op::Cancel);
            }
        }
    }
    handle.stopped().await;
    store.close(store_task).await;
    let (status, code) = driver.ending().status_and_code();
    renderer.event(&Event::SessionCompleted {
        status: status.to_string(),
        exit_code: i32::from(code),
    });
    Ok(code)
}

/// What exec does in answer to events: stop at the first failed turn, answer
/// or report a waiting plan, stop when the session has nothing left to do.
struct Driver {
    approve_plan: bool,
    plan_only: bool,
    ending: Option<Ending>,
    /// A plan questionnaire waiting for an answer: (id, plan path).
    pending: Option<(String, String)>,
    session_id: String,
    stopping: bool,
}

impl Driver {
    fn new(config: &RunConfig) -> Self {
        Self {
            approve_plan: config.approve_plan,
            plan_only: config.plan_only,
            ending: None,
            pending: None,
            session_id: String::new(),
            stopping: false,
        }
    }

    fn ending(&self) -> Ending {
        // A resumed session with nothing to do ended well.
        self.ending.unwrap_or(Ending::Success)
    }

    fn stop(&mut self) -> Vec<Op> {
        if std::mem::replace(&mut self.stopping, true) {
            return Vec::new();
        }
        vec![Op::Shutdown]
    }

    fn next(&mut self, event: &Event) -> Vec<Op> {
        match event {
            Event::SessionStarted { session_id, .. } => self.session_id.clone_from(session_id),
            Event::TurnCompleted { .. } => self.ending = Some(Ending::Success),
            Event::TurnFailed {
                category,
                retryable,
                ..
            } => {
                self.ending = Some(match category {
                    FailureCategory::Infrastructure => Ending::Infrastructure {
                        retryable: *retryable,
                    },
                    FailureCategory::Agent => Ending::AgentFailed,
                    FailureCategory::Cancelled => Ending::Cancelled,
                    FailureCategory::PausedByDenials => Ending::PausedByDenials,
                });
                return self.stop();
            }
            Event::QuestionnaireOpened { id, plan_path, .. } => {
                self.pending = Some((id.clone(), plan_path.clone()));
            }
            Event::QuestionnaireAnswered { id, .. }
                if self.pending.as_ref().is_some_and(|(p, _)| p == id) =>
            {
                self.pending = None;
            }
            Event::SessionIdle { .. }
            | Event::SessionStatus {
                activity: Activity::Idle,
                ..
            } => match self.pending.clone() {
                Some((id, _)) if self.approve_plan => {
                    return vec![Op::Answer {
                        id,
                        answer: QuestionnaireAnswer::Approve,
                    }];
                }
                Some((id, plan_path)) => {
                    if self.plan_only {
                        println!("plan: {plan_path}\napproval: {id}");
                    } else {
                        eprintln!(
                            "cadre: the plan at {plan_path} waits for approval ({id}); answer with\n  \
                                 cadre plan approve|revise|withdraw {}",
                            self.session_id
                        );
                    }
                    return self.stop();
                }
                None => return self.stop(),
            },
            _ => {}
        }
        Vec::new()
    }
}
