//! A hook's command, run under the sandbox of the mode and posture it
//! serves (a Plan session's hook cannot write either), with the
//! environment allow-list, bounded output and its timeout.

use std::path::Path;

use serde_json::Value;

use super::answer::{HookOutcome, read_answer};
use super::config::HookSpec;
use crate::mode::Mode;
use crate::permission::Posture;
use crate::sandbox::{CommandSpec, OutputLimits, Policy, SandboxConfig, run, session_tmp};

/// Bytes of a hook's stdout and stderr kept (head and tail each); past
/// [`KILL_AFTER`] in all it is killed, and counts as failed.
const KEPT: usize = 32 * 1024;
const KILL_AFTER: u64 = 1024 * 1024;

/// Where and how a hook runs: those of the agent it serves.
#[derive(Debug, Clone, Copy)]
pub struct HookEnv<'a> {
    /// The agent's mode in force.
    pub mode: Mode,
    /// Its posture in force.
    pub posture: Posture,
    /// The workspace, the hook's working directory.
    pub root: &'a Path,
    /// The agent's directory (its private temp dir is under it).
    pub dir: &'a Path,
    /// The sandbox configuration.
    pub sandbox: &'a SandboxConfig,
}

/// Runs one hook with `event` on its stdin and reads its answer.
pub async fn run_hook(hook: &HookSpec, event: &Value, env: HookEnv<'_>) -> HookOutcome {
    let tmp = session_tmp(env.dir);
    let policy = Policy::resolve(env.mode, env.posture, env.root, &tmp, env.sandbox);
    let input = format!("{event}\n");
    let spec = CommandSpec {
        script: &hook.command,
        cwd: env.root,
        policy: &policy,
        env: &env.sandbox.env,
        tmp: &tmp,
        limits: OutputLimits {
            head: KEPT,
            tail: KEPT,
            kill_after: KILL_AFTER,
        },
        stdin: Some(input.as_bytes()),
    };
    let timeout = hook.timeout();
    match tokio::time::timeout(timeout, run(spec)).await {
        Err(_) => HookOutcome::Failed(format!(
            "it did not answer within {} s and was killed",
            timeout.as_secs()
        )),
        Ok(Err(err)) => HookOutcome::Failed(err.to_string()),
        Ok(Ok(finished)) if finished.killed_for_output => HookOutcome::Failed(format!(
            "it printed more than {KILL_AFTER} bytes and was killed"
        )),
        Ok(Ok(finished)) => read_answer(
            finished.status.code(),
            &finished.stdout.render(),
            &finished.stderr.render(),
        ),
    }
}

/// Runs `hooks` one after another with the same event; each outcome with
/// its command.
pub async fn run_hooks(
    hooks: &[&HookSpec],
    event: &Value,
    env: HookEnv<'_>,
) -> Vec<(String, HookOutcome)> {
    let mut outcomes = Vec::with_capacity(hooks.len());
    for hook in hooks {
        outcomes.push((hook.command.clone(), run_hook(hook, event, env).await));
    }
    outcomes
}
