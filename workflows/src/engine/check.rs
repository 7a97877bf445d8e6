//! A step's completion check: a command run in the workspace under a
//! read-only sandbox (it can read everything the step wrote and write only
//! its own temp dir), with a timeout. Exit 0 verifies.
//!
//! A check that must build (`cargo check`) writes its outputs under
//! `$TMPDIR` (`CARGO_TARGET_DIR=$TMPDIR/target cargo check`), never into
//! the workspace it verifies.

use std::path::Path;
use std::time::Duration;

use cadre_runtime::sandbox::SandboxConfig;

/// How long a check may run when its step sets no timeout.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// How a check ended: passed, and what it printed (or why it did not run).
/// It runs with `env` (its references' values) beside the sandbox's.
pub async fn run_check(
    command: &str,
    env: &[(String, String)],
    workspace: &Path,
    tmp: &Path,
    sandbox: &SandboxConfig,
    timeout: Duration,
) -> (bool, String) {
    let ran =
        cadre_runtime::sandbox::run_check(command, env, workspace, tmp, sandbox, timeout).await;
    (ran.passed(), ran.detail().to_string())
}
