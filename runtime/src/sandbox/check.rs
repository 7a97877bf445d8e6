//! A check command: run in the workspace under a read-only sandbox (it can
//! read everything and write only its own temp dir), with a timeout. Exit 0
//! passes. Goals' `command` verification and workflow steps' `check` both
//! run theirs here.
//!
//! A check that must build (`cargo check`) writes its outputs under
//! `$TMPDIR` (`CARGO_TARGET_DIR=$TMPDIR/target cargo check`), never into
//! the workspace it verifies.

use std::path::Path;
use std::time::Duration;

use super::{CommandSpec, OutputLimits, Policy, SandboxConfig, run};
use crate::Mode;
use crate::permission::Posture;

/// What a check printed, head and tail, kept for its report.
const KEPT: usize = 2048;

/// How a check ended; each carries what to tell about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckRun {
    /// Exit 0: the command and what it printed.
    Passed(String),
    /// Another exit, a signal, or output past the bound: the command, how
    /// it ended and what it printed.
    Failed(String),
    /// It ran past its timeout and was stopped.
    TimedOut(String),
    /// It could not run at all.
    Unrunnable(String),
}

impl CheckRun {
    /// Whether it passed.
    pub fn passed(&self) -> bool {
        matches!(self, CheckRun::Passed(_))
    }

    /// What to tell about it.
    pub fn detail(&self) -> &str {
        match self {
            CheckRun::Passed(d) | CheckRun::Failed(d) | CheckRun::TimedOut(d) => d,
            CheckRun::Unrunnable(d) => d,
        }
    }
}

/// Runs `command` in `workspace` as a check: Plan and `never` whatever the
/// caller's authority (a check verifies, it does not change what it
/// verifies), writing only `tmp`, stopped after `timeout`.
pub async fn run_check(
    command: &str,
    workspace: &Path,
    tmp: &Path,
    sandbox: &SandboxConfig,
    timeout: Duration,
) -> CheckRun {
    let policy = Policy::resolve(Mode::Plan, Posture::Never, workspace, tmp, sandbox);
    let spec = CommandSpec {
        script: command,
        cwd: workspace,
        policy: &policy,
        env: &sandbox.env,
        tmp,
        limits: OutputLimits {
            head: KEPT,
            tail: KEPT,
            kill_after: sandbox.max_output,
        },
    };
    match tokio::time::timeout(timeout, run(spec)).await {
        Err(_) => CheckRun::TimedOut(format!(
            "`{command}` did not finish within {} s",
            timeout.as_secs()
        )),
        Ok(Err(err)) => CheckRun::Unrunnable(format!("`{command}` could not run: {err}")),
        Ok(Ok(finished)) => {
            let code = finished
                .status
                .code()
                .map_or_else(|| "killed by a signal".to_string(), |c| format!("exit {c}"));
            let mut detail = format!("`{command}` → {code}");
            for (name, capture) in [("stdout", &finished.stdout), ("stderr", &finished.stderr)] {
                if !capture.is_empty() {
                    detail.push_str(&format!("\n[{name}]\n{}", capture.render().trim_end()));
                }
            }
            if finished.status.success() && !finished.killed_for_output {
                CheckRun::Passed(detail)
            } else {
                CheckRun::Failed(detail)
            }
        }
    }
}
