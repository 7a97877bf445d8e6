//! A step's completion check: a command run in the workspace under a
//! read-only sandbox (it can read everything the step wrote and write only
//! its own temp dir), with a timeout. Exit 0 verifies.
//!
//! A check that must build (`cargo check`) writes its outputs under
//! `$TMPDIR` (`CARGO_TARGET_DIR=$TMPDIR/target cargo check`), never into
//! the workspace it verifies.

use std::path::Path;
use std::time::Duration;

use cadre_runtime::Mode;
use cadre_runtime::permission::Posture;
use cadre_runtime::sandbox::{CommandSpec, OutputLimits, Policy, SandboxConfig, run};

/// How long a check may run when its step sets no timeout.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// What a check printed, kept for the reason of a failure.
const KEPT: usize = 2048;

/// How a check ended: passed, and what it printed (or why it did not run).
pub async fn run_check(
    command: &str,
    workspace: &Path,
    tmp: &Path,
    sandbox: &SandboxConfig,
    timeout: Duration,
) -> (bool, String) {
    // Read-only whatever the caller's posture: a check verifies, it does
    // not change what it verifies.
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
        Err(_) => (
            false,
            format!("`{command}` did not finish within {} s", timeout.as_secs()),
        ),
        Ok(Err(err)) => (false, format!("`{command}` could not run: {err}")),
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
            (
                finished.status.success() && !finished.killed_for_output,
                detail,
            )
        }
    }
}
