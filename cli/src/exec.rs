//! `cadre exec`: one prompt, one session, no terminal UI.

use std::sync::Arc;

use cadre_actors::{PermissionConfig, SessionConfig, SessionServices, Subagents, spawn_session};
use cadre_runtime::paths::DataDir;
use cadre_runtime::protocol::{Event, FailureCategory, Op};
use cadre_runtime::tool::{ToolRegistry, ToolRunner, Workspace};

use crate::config::RunConfig;
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

/// Runs the prompt and returns the exit code.
pub async fn run(config: RunConfig) -> Result<u8, CliError> {
    let model = config.model_client()?;
    let workspace = Workspace::new(&config.workspace)
        .map_err(|e| CliError::usage(format!("--workspace {}: {e}", config.workspace.display())))?;
    let session_id = uuid::Uuid::new_v4().to_string();
    let paths = DataDir::new(&config.data_dir).session(&session_id);
    paths.create().map_err(|e| {
        CliError::config(format!("data directory {}: {e}", config.data_dir.display()))
    })?;
    let registry = Arc::new(ToolRegistry::with_builtins());
    let services = SessionServices {
        model,
        tools: ToolRunner::new(registry, config.tool_timeout),
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
    let (handle, mut events) = spawn_session(session, services)
        .await
        .map_err(|e| CliError::internal(format!("the session could not start: {e}")))?;
    handle
        .submit(Op::UserInput {
            text: config.prompt.clone(),
        })
        .map_err(|e| CliError::internal(format!("the session stopped early: {e}")))?;

    let mut renderer = Renderer::new(config.output);
    let mut ending = None;
    let mut interrupts = 0u32;
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break };
                renderer.event(&event);
                match &event {
                    Event::TurnCompleted { .. } => {
                        ending = Some(Ending::Success);
                        let _ = handle.submit(Op::Shutdown);
                    }
                    Event::TurnFailed { category, retryable, .. } => {
                        ending = Some(match category {
                            FailureCategory::Infrastructure => Ending::Infrastructure { retryable: *retryable },
                            FailureCategory::Agent => Ending::AgentFailed,
                            FailureCategory::Cancelled => Ending::Cancelled,
                            FailureCategory::PausedByDenials => Ending::PausedByDenials,
                        });
                        let _ = handle.submit(Op::Shutdown);
                    }
                    Event::SessionStopped { .. } => break,
                    _ => {}
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
    let ending = ending.unwrap_or(Ending::AgentFailed);
    let (status, code) = ending.status_and_code();
    renderer.event(&Event::SessionCompleted {
        status: status.to_string(),
        exit_code: i32::from(code),
    });
    Ok(code)
}
