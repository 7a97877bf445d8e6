//! Running commands under the kernel's sandbox (P9): the reader decides
//! what runs, several independent walls bound what it can do.
//!
//! Every `bash` call runs confined by a [`Policy`] derived from its mode and
//! posture: in fresh namespaces under bubblewrap (`/` read-only but the
//! policy's writable set, `.git` and `.cadre` read-only in every posture,
//! cadre's directories hidden, a private `/tmp`, `/proc` and `/dev`), under
//! Landlock, and through the in-sandbox helper that sets seccomp, rlimits
//! and no_new_privs before it `exec`s bash; with an allow-listed
//! environment and bounded output, killed with everything it started when
//! the call ends. Each wall is probed on its own ([`walls`]); one the host
//! lacks is reported and the rest still hold. `docs/security/sandbox.md`
//! states each wall, what it stops and what it cannot.
//!
//! # Layout
//! - `policy`: [`Reach`] and [`Policy`] from a mode and a posture; [`cover`],
//!   the grants around protected paths.
//! - `landlock`: the policy as a Landlock ruleset; [`sandbox_status`].
//! - `bwrap`: the policy as a bubblewrap command line.
//! - `helper`: the in-sandbox helper; [`dispatch_helper`].
//! - `seccomp`: the helper's syscall filter.
//! - `limits`: [`Limits`], the helper's rlimits.
//! - `walls`: which walls this host builds; [`walls`].
//! - `env`: the environment a command gets.
//! - `output`: [`Capture`], a head, a tail and a count.
//! - `groups`: the registry of live process groups; [`kill_live_groups`].
//! - `run`: [`run`], one command from spawn to end.
//! - `check`: [`run_check`], a verification command under the read-only policy.

mod bwrap;
mod check;
mod env;
mod groups;
mod helper;
mod landlock;
mod limits;
mod output;
mod policy;
mod run;
mod seccomp;
mod walls;

#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};

pub use check::{CheckRun, DEFAULT_CHECK_TIMEOUT, build_outputs, cache_dir, run_check};
pub use env::{ALLOWED, DEFAULT_PATH, NEVER, inherited};
pub use groups::{GroupGuard, kill_live_groups, live_groups};
pub use helper::{HELPER_MODE, dispatch_helper, helper_path, register_helper};
pub use landlock::{PINNED, SandboxStatus, sandbox_status};
pub use limits::Limits;
pub use output::Capture;
pub use policy::{Policy, Reach, cover};
pub use run::{CommandSpec, Finished, OutputLimits, RunError, Started, run, session_tmp, start};
pub use walls::{WallReport, WallState, walls};

/// The default hard limit on one command's output: past it the command's
/// process group is killed.
pub const DEFAULT_MAX_OUTPUT: u64 = 32 * 1024 * 1024;

/// How commands are sandboxed, fixed for a session; the host fills it from
/// the environment and the configuration (`[sandbox]`, `[limits]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SandboxConfig {
    /// Directories writable besides the workspace and the temp dir under
    /// `suggest` and `auto` (caches builds need; see
    /// [`default_writable_roots`]).
    pub writable_roots: Vec<PathBuf>,
    /// Paths no command may write under any posture: cadre's configuration
    /// and data directories.
    pub protected: Vec<PathBuf>,
    /// The whole environment a command starts with (see [`inherited`]);
    /// `TMPDIR` is set on top of it.
    pub env: Vec<(String, String)>,
    /// Total output bytes after which a command is killed.
    pub max_output: u64,
    /// Where checks keep their build outputs between runs (`<data
    /// dir>/checks`); `None` keeps them in a `check-cache` directory beside
    /// each check's temp dir.
    pub check_cache: Option<PathBuf>,
    /// Memory, processes, CPU time, file size and `/tmp` of each command
    /// (`[sandbox]`).
    pub limits: Limits,
    /// Commands get their own namespaces where the host can make them;
    /// off only to try the other walls alone.
    pub namespaces: bool,
    /// Bounds on managed processes (the `process` tool), per agent and per
    /// session, and the output each keeps.
    pub processes: crate::process::ProcessLimits,
}

impl Default for SandboxConfig {
    /// No writable roots, nothing protected, only `PATH`, a 32 MiB output
    /// limit: what a library host gets until it says more.
    fn default() -> Self {
        Self {
            writable_roots: Vec::new(),
            protected: Vec::new(),
            env: inherited(std::iter::empty(), &[]),
            max_output: DEFAULT_MAX_OUTPUT,
            check_cache: None,
            limits: Limits::default(),
            namespaces: true,
            processes: crate::process::ProcessLimits::default(),
        }
    }
}

/// The writable roots that keep ordinary builds working under `suggest`
/// and `auto`: caches of downloads and outputs, never a place whose files
/// run later outside the sandbox. So not `~/.cargo/bin`,
/// `~/.cargo/config.toml` or the rustup toolchains, and not the unpacked
/// sources builds compile and run (`~/.cargo/registry/src` with its
/// `build.rs` files, `~/.cargo/git/checkouts`, Go's extracted modules):
/// those stay read-only, so a dependency a build has not fetched yet must
/// be fetched outside the sandbox (or under Full Access).
/// `docs/security/sandbox.md` gives each root and what it can still hold.
///
/// `home` is `$HOME`; `cargo_home` is `$CARGO_HOME` when set.
pub fn default_writable_roots(home: &Path, cargo_home: Option<&Path>) -> Vec<PathBuf> {
    let cargo = cargo_home.map_or_else(|| home.join(".cargo"), Path::to_path_buf);
    vec![
        cargo.join("registry").join("index"),
        cargo.join("registry").join("cache"),
        cargo.join("git").join("db"),
        home.join(".cache"),
        home.join(".npm"),
        home.join(".m2").join("repository"),
        home.join(".gradle").join("caches"),
        home.join("go")
            .join("pkg")
            .join("mod")
            .join("cache")
            .join("download"),
    ]
}
