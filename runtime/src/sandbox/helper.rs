//! The in-sandbox helper: the host's own binary, run in a hidden mode as
//! the first program inside the sandbox, sets the walls that belong to a
//! process (rlimits, no_new_privs, Landlock's filesystem rules, seccomp)
//! and then `exec`s bash.
//!
//! Those walls cannot be set by cadre before bubblewrap runs: a Landlock
//! filesystem ruleset makes bubblewrap fail, a seccomp filter refusing
//! `mount` or `unshare` stops it, and an rlimit set in cadre's thread binds
//! all of cadre. The host registers the helper by calling
//! [`dispatch_helper`] first thing in `main`; where none is registered,
//! those walls are reported unavailable (see `walls`), never skipped
//! quietly.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::limits::Limits;
use super::{landlock, seccomp};

/// The hidden first argument that runs the helper.
pub const HELPER_MODE: &str = "__sandbox-exec";

/// The exit status when the helper cannot set a wall: the command does
/// not run.
const REFUSED: i32 = 126;

static HELPER: OnceLock<PathBuf> = OnceLock::new();

/// What the helper sets before it `exec`s the command; passed as one JSON
/// argument (no secrets: the command line is visible inside).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct HelperSpec {
    /// Landlock's filesystem rules to apply here (writes granted only to
    /// these paths); `None` when the spawning thread applied them already.
    pub writable: Option<Vec<PathBuf>>,
    /// With `writable`: TCP stays allowed (else the same layer denies it).
    pub network: bool,
    /// With `writable`: signals and abstract sockets are scoped to the
    /// command's own processes.
    pub scoped: bool,
    /// The command is read-only (Plan, `never`): the seccomp filter also
    /// refuses unix and IP sockets and SysV IPC.
    pub read_only: bool,
    /// The rlimits.
    pub limits: Limits,
}

/// Runs the helper when this process was started as one (the first
/// argument is [`HELPER_MODE`]), and never returns then. Otherwise
/// registers the running binary as the helper for the commands this
/// process will run, makes the process not dumpable (a same-user process
/// cannot read its memory or `/proc/<pid>/environ`), and returns.
///
/// A host calls it first thing in `main`, before any thread or runtime
/// starts: the `cadre` binary does.
pub fn dispatch_helper() {
    // The process's own entry point: reading its arguments is its job.
    let mut args = std::env::args_os();
    let _program = args.next();
    if args.next().is_some_and(|mode| mode == HELPER_MODE) {
        let why = exec(args.collect());
        let _ = writeln!(
            std::io::stderr(),
            "cadre sandbox: {why}; the command was not run"
        );
        std::process::exit(REFUSED);
    }
    // Best effort: on a kernel that refuses, the PID namespace still
    // hides cadre from commands.
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
    if let Ok(exe) = std::env::current_exe() {
        register_helper(exe);
    }
}

/// Registers `binary` as the helper: a program that runs
/// [`dispatch_helper`] first thing. For hosts whose own binary cannot be
/// the helper, and for tests. The first registration wins.
pub fn register_helper(binary: PathBuf) {
    let _ = HELPER.set(binary);
}

/// The registered helper, if any.
pub fn helper_path() -> Option<&'static Path> {
    HELPER.get().map(PathBuf::as_path)
}

/// The helper's arguments after the binary: the mode, the spec, `--`.
pub(crate) fn helper_args(spec: &HelperSpec) -> Result<Vec<OsString>, String> {
    let json =
        serde_json::to_string(spec).map_err(|e| format!("cannot encode the helper spec: {e}"))?;
    Ok(vec![HELPER_MODE.into(), json.into(), "--".into()])
}

/// Sets the walls and `exec`s the command; returns only why it could not.
fn exec(args: Vec<OsString>) -> String {
    let [spec, separator, program, rest @ ..] = args.as_slice() else {
        return "the helper was started without a spec and a command".into();
    };
    if separator != "--" {
        return "the helper's spec is not followed by --".into();
    }
    let spec: HelperSpec = match spec.to_str().map(serde_json::from_str) {
        Some(Ok(spec)) => spec,
        Some(Err(e)) => return format!("the helper's spec is not valid: {e}"),
        None => return "the helper's spec is not UTF-8".into(),
    };
    if let Err(why) = spec.limits.apply() {
        return why;
    }
    if let Err(e) = rustix::thread::set_no_new_privs(true) {
        return format!("cannot set no_new_privs: {e}");
    }
    if let Some(writable) = &spec.writable
        && let Err(why) = landlock::confine_files(writable, spec.network, spec.scoped)
    {
        return why;
    }
    match seccomp::filters(spec.read_only) {
        Ok(filters) => {
            if let Err(why) = seccomp::install(&filters) {
                return why;
            }
        }
        Err(why) => return why,
    }
    let error = std::process::Command::new(program).args(rest).exec();
    format!("cannot run {}: {error}", Path::new(program).display())
}
