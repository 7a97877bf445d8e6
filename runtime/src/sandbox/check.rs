//! A check command: the project's own build and tests (`cargo test`, `npm
//! test`, `python -m pytest`, `go test ./...`, `make test`), run in the
//! workspace with a timeout, and unable to change the project. Exit 0
//! passes. Goals' `command` verification, workflow steps' `check` and the
//! goal verifier's `run_check` tool all run theirs here.
//!
//! A check runs under the read-only policy (Plan and `never`) with two
//! more writable places: its private temp dir, and the workspace's build
//! cache under the data directory (`<data>/checks/<workspace hash>`), where
//! the environment sends the outputs build tools would otherwise write into
//! the tree (`CARGO_TARGET_DIR`, `PYTHONPYCACHEPREFIX`, `GOCACHE`, npm's
//! cache, `XDG_CACHE_HOME`; pytest's cache is off). The cache persists
//! between checks, so the second `cargo test` is incremental. Tracked and
//! unignored files stay read-only; a check that changes one anyway (where
//! the kernel cannot stop it) is caught by comparing the tree before and
//! after, and fails naming what changed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use sha2::{Digest, Sha256};

use super::{CommandSpec, OutputLimits, Policy, SandboxConfig, run};
use crate::Mode;
use crate::permission::Posture;

/// How long a check may run when nothing sets its timeout (a workflow
/// step without `timeout`, a verifier's answer): a project's build and
/// tests, not a quick read.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// Files a tree comparison looks at, at most: past it the comparison is
/// skipped (and the kernel alone keeps the tree read-only).
const MAX_COMPARED: usize = 50_000;

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
/// verifies), writing only `tmp`, stopped after `timeout`. It runs with
/// `vars` (a workflow check's values: `CADRE_ITEM`, …) beside the
/// sandbox's environment; a value holding a NUL, which no environment
/// variable can carry, leaves it unrunnable.
pub async fn run_check(
    command: &str,
    vars: &[(String, String)],
    workspace: &Path,
    tmp: &Path,
    sandbox: &SandboxConfig,
    timeout: Duration,
) -> CheckRun {
    if let Some((name, _)) = vars.iter().find(|(_, v)| v.contains('\0')) {
        return CheckRun::Unrunnable(format!(
            "`{command}` could not run: ${name} holds a NUL byte, which no environment \
             variable can carry"
        ));
    }
    let mut policy = Policy::resolve(Mode::Plan, Posture::Never, workspace, tmp, sandbox);
    let mut env = sandbox.env.clone();
    set_all(&mut env, vars.to_vec());
    // Beside the temp dir, not in it: the sandbox replaces the temp dir
    // with a private one the host never sees again.
    let root = sandbox
        .check_cache
        .clone()
        .unwrap_or_else(|| tmp.parent().unwrap_or(tmp).join("check-cache"));
    // Absolute: the command runs in the workspace, and a relative data
    // directory would put the cache inside the tree.
    let root = std::path::absolute(&root).unwrap_or(root);
    let cache = cache_dir(&root, workspace);
    if let Err(err) = std::fs::create_dir_all(&cache) {
        return CheckRun::Unrunnable(format!(
            "`{command}` could not run: its build cache {}: {err}",
            cache.display()
        ));
    }
    set_all(&mut env, build_outputs(&cache));
    policy.writable.push(cache);
    let before = fingerprint(workspace);
    let spec = CommandSpec {
        script: command,
        cwd: workspace,
        policy: &policy,
        env: &env,
        tmp,
        limits: OutputLimits {
            head: KEPT,
            tail: KEPT,
            kill_after: sandbox.max_output,
        },
        stdin: None,
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
            if let Some(changed) = before.and_then(|b| changed(&b, workspace)) {
                return CheckRun::Failed(format!(
                    "`{command}` changed the workspace it checks ({changed}); a check may \
                     write only its build cache and temp dir\n{detail}"
                ));
            }
            if finished.status.success() && !finished.killed_for_output {
                CheckRun::Passed(detail)
            } else {
                CheckRun::Failed(detail)
            }
        }
    }
}

/// The build cache of `workspace` under `root`: one directory per
/// workspace, named by a hash of its real path.
pub fn cache_dir(root: &Path, workspace: &Path) -> PathBuf {
    let real = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    let digest = Sha256::digest(real.as_os_str().as_encoded_bytes());
    let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    root.join(name)
}

/// Where build tools put what they would write into the tree, under
/// `cache`.
pub fn build_outputs(cache: &Path) -> Vec<(String, String)> {
    let at = |sub: &str| cache.join(sub).display().to_string();
    vec![
        ("CARGO_TARGET_DIR".into(), at("cargo-target")),
        ("PYTHONPYCACHEPREFIX".into(), at("pycache")),
        ("PYTEST_ADDOPTS".into(), "-p no:cacheprovider".into()),
        ("MYPY_CACHE_DIR".into(), at("mypy")),
        ("RUFF_CACHE_DIR".into(), at("ruff")),
        ("GOCACHE".into(), at("go-build")),
        ("npm_config_cache".into(), at("npm")),
        ("XDG_CACHE_HOME".into(), at("xdg")),
    ]
}

/// Sets each variable in `env`, replacing an inherited value.
fn set_all(env: &mut Vec<(String, String)>, vars: Vec<(String, String)>) {
    for (name, value) in vars {
        env.retain(|(k, _)| *k != name);
        env.push((name, value));
    }
}

/// Size, modification time and mode of one file.
type Stamp = (u64, Option<SystemTime>, u32);

/// The workspace's tracked and unignored files (`.gitignore` and `.git`
/// left out), with what changes when a file is written; `None` when it
/// holds more than [`MAX_COMPARED`].
fn fingerprint(workspace: &Path) -> Option<BTreeMap<PathBuf, Stamp>> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = BTreeMap::new();
    let walk = ignore::WalkBuilder::new(workspace)
        .hidden(false)
        .git_global(false)
        .filter_entry(|e| e.file_name() != ".git")
        .build();
    for entry in walk.flatten() {
        if entry.depth() == 0 {
            continue;
        }
        let Ok(meta) = entry.path().symlink_metadata() else {
            continue;
        };
        files.insert(
            entry.path().to_path_buf(),
            (meta.len(), meta.modified().ok(), meta.permissions().mode()),
        );
        if files.len() > MAX_COMPARED {
            return None;
        }
    }
    Some(files)
}

/// What changed between `before` and now: the first few paths, and how
/// many in all.
fn changed(before: &BTreeMap<PathBuf, Stamp>, workspace: &Path) -> Option<String> {
    let after = fingerprint(workspace)?;
    let mut paths: Vec<&Path> = before
        .iter()
        .filter(|(path, stamp)| after.get(*path) != Some(stamp))
        .map(|(path, _)| path.as_path())
        .chain(
            after
                .keys()
                .filter(|path| !before.contains_key(*path))
                .map(PathBuf::as_path),
        )
        .collect();
    if paths.is_empty() {
        return None;
    }
    paths.sort();
    let total = paths.len();
    let shown: Vec<String> = paths
        .iter()
        .take(5)
        .map(|p| p.strip_prefix(workspace).unwrap_or(p).display().to_string())
        .collect();
    Some(match total {
        1..=5 => shown.join(", "),
        _ => format!("{} and {} more", shown.join(", "), total - 5),
    })
}
