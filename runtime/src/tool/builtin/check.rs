//! `run_check`: the goal verifier's way to run the project's own build and
//! tests (`cargo test`, `npm test`, `python -m pytest`) and see them pass or
//! fail, without the authority to change anything.
//!
//! It is offered only where a host registers it (the goal verifier), never
//! among the built-ins: the command runs as a check (`sandbox::run_check`),
//! read-only but for the workspace's build cache and a temp dir, with the
//! tree compared before and after. That is what makes it read-only for the
//! gates, whatever the command says.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::required_str;
use crate::sandbox::{CheckRun, SandboxConfig, WallState, run_check, session_tmp, walls};
use crate::tool::definition::{Safety, Tool, ToolContext, ToolDefinition, ToolError, ToolFuture};

/// The tool's name.
pub const RUN_CHECK: &str = "run_check";

/// Runs one check command.
pub struct RunCheck {
    definition: ToolDefinition,
    timeout: Duration,
}

impl RunCheck {
    /// A `run_check` whose checks stop after `timeout`.
    pub fn new(timeout: Duration) -> Self {
        let definition = ToolDefinition::new(
            RUN_CHECK,
            "Run one of the project's own checks (its build, tests or linters as written, \
             e.g. `cargo test`, `npm test`, `python -m pytest`, `make test`) in the workspace \
             and return whether it passed, with its output. The command cannot change the \
             project: only build outputs are written, outside the workspace.",
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The check's command line"}
                },
                "required": ["command"],
                "additionalProperties": false
            }),
            Safety::ReadOnly,
        )
        .running_checks()
        // The runner's own limit must not cut a build short: the check's
        // timeout (and a margin to report it) is the call's.
        .with_timeout(timeout + Duration::from_secs(5));
        Self {
            definition,
            timeout,
        }
    }
}

impl Tool for RunCheck {
    fn definition(&self) -> &ToolDefinition {
        &self.definition
    }

    fn run<'a>(&'a self, args: serde_json::Value, ctx: &'a ToolContext) -> ToolFuture<'a> {
        Box::pin(async move {
            let command = required_str(&args, "command")?;
            // The model chose this command and no reader judged it: it runs
            // only where a kernel wall keeps it from writing.
            let walled = walls().iter().any(|w| {
                (w.wall == "namespaces" || w.wall == "landlock") && w.state == WallState::Enforced
            });
            if !walled {
                return Err(ToolError::failed(
                    "run_check needs the sandbox's namespaces or Landlock, and this host has \
                     neither: the check did not run"
                        .to_string(),
                ));
            }
            let tmp = session_tmp(&ctx.session_dir).join("check");
            let sandbox = model_chosen(&ctx.sandbox, &tmp);
            let ran = run_check(
                command,
                &[],
                ctx.workspace.root(),
                &tmp,
                &sandbox,
                self.timeout,
            )
            .await;
            let _ = std::fs::remove_dir_all(&tmp);
            match ran {
                CheckRun::Passed(detail) => Ok(format!("check passed: {detail}")),
                CheckRun::Failed(detail) => {
                    Err(ToolError::failed(format!("check failed: {detail}")))
                }
                CheckRun::TimedOut(detail) => {
                    Err(ToolError::failed(format!("check timed out: {detail}")))
                }
                CheckRun::Unrunnable(detail) => {
                    Err(ToolError::failed(format!("check could not run: {detail}")))
                }
            }
        })
    }
}

/// The sandbox of a check the model chose: its build cache is not the one
/// the configured checks (a goal's `command`, a workflow step's `check`)
/// use. A model-chosen command writes its cache as it likes (a test binary
/// that always passes, a fingerprint that says it is fresh); in a cache of
/// its own, that can only mislead later model-chosen checks, never a
/// verdict the user configured.
fn model_chosen(sandbox: &SandboxConfig, tmp: &Path) -> SandboxConfig {
    let root = sandbox
        .check_cache
        .clone()
        .unwrap_or_else(|| tmp.parent().unwrap_or(tmp).join("check-cache"));
    SandboxConfig {
        check_cache: Some(root.join(MODEL_CHOSEN)),
        ..sandbox.clone()
    }
}

/// The directory under the check cache root holding model-chosen checks'
/// caches.
pub const MODEL_CHOSEN: &str = "model-chosen";
