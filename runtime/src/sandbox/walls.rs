//! Which walls this host can build, probed once per process, and the
//! per-wall report `session.started` carries.
//!
//! The namespace wall needs bubblewrap and unprivileged user namespaces;
//! the seccomp and rlimit walls need the in-sandbox helper (see
//! `helper`); Landlock needs the LSM. Each is probed on its own, so a
//! missing one is reported and the others still hold.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::helper::helper_path;
use super::landlock::sandbox_status;

/// Where bubblewrap is looked for: system locations only, never a
/// directory a workspace or a user's `PATH` could put first.
const BWRAP: &[&str] = &["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

/// How far one wall holds on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WallState {
    /// In force for every command.
    Enforced,
    /// In force, with a gap the reason names.
    Partial,
    /// Not in force; the reason says why. The other walls still hold.
    Unavailable,
}

/// One wall of the sandbox as this process builds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WallReport {
    /// The wall: `namespaces`, `protected-paths`, `landlock`, `seccomp`,
    /// `capabilities`, `limits`, `lifetime`, `tmp`, `secrets`.
    pub wall: String,
    /// How far it holds.
    pub state: WallState,
    /// What builds it, or why it is missing.
    pub detail: String,
}

/// Whether commands get their own namespaces, and through what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Isolation {
    /// bubblewrap at this path works with every flag cadre passes.
    Bwrap(PathBuf),
    /// No namespaces: the walls of the spawning thread only.
    Threads(String),
}

/// The namespace backend, probed once: a full-flag `bwrap … true`
/// catches a missing binary, user namespaces refused by the kernel, an
/// AppArmor policy or a container's seccomp filter alike.
pub(crate) fn isolation() -> &'static Isolation {
    static ISOLATION: OnceLock<Isolation> = OnceLock::new();
    ISOLATION.get_or_init(|| {
        let Some(bwrap) = BWRAP.iter().map(Path::new).find(|p| p.is_file()) else {
            return Isolation::Threads(
                "bubblewrap (bwrap) is not installed in /usr/bin or /usr/local/bin".into(),
            );
        };
        let probe = Command::new(bwrap)
            .args(super::bwrap::FIXED)
            .args(["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"])
            .args(["--size", "1048576", "--tmpfs", "/tmp", "--", "true"])
            .env_clear()
            .env("PATH", super::DEFAULT_PATH)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output();
        match probe {
            Ok(out) if out.status.success() => Isolation::Bwrap(bwrap.to_path_buf()),
            Ok(out) => Isolation::Threads(format!(
                "bubblewrap cannot make namespaces here ({}): unprivileged user namespaces \
                 are off, or an AppArmor profile or a container's filter refuses them",
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => Isolation::Threads(format!("bubblewrap could not start: {e}")),
        }
    })
}

/// Every wall as it stands in this process, in a fixed order.
pub fn walls() -> Vec<WallReport> {
    use WallState::{Enforced, Partial, Unavailable};
    let report = |wall: &str, state, detail: String| WallReport {
        wall: wall.into(),
        state,
        detail,
    };
    let landlock = sandbox_status();
    let helper = helper_path().is_some();
    let no_helper = || {
        "no in-sandbox helper is registered (the host calls \
         cadre_runtime::sandbox::dispatch_helper first thing in main)"
            .to_string()
    };
    let mut out = Vec::new();
    match isolation() {
        Isolation::Bwrap(path) => {
            out.push(report(
                "namespaces",
                Enforced,
                format!(
                    "bubblewrap ({}): user, mount, PID, IPC, UTS, cgroup; network too in \
                     Plan and never",
                    path.display()
                ),
            ));
            out.push(report(
                "protected-paths",
                Enforced,
                "read-only binds of the workspace's .git and .cadre in every posture".into(),
            ));
        }
        Isolation::Threads(why) => {
            out.push(report("namespaces", Unavailable, why.clone()));
            out.push(report(
                "protected-paths",
                Unavailable,
                "needs the namespace wall: Landlock cannot keep .git and .cadre read-only \
                 inside a writable workspace"
                    .into(),
            ));
        }
    }
    let namespaced = matches!(isolation(), Isolation::Bwrap(_));
    out.push(match (landlock.is_enforced(), namespaced && !helper) {
        (true, false) => report("landlock", Enforced, landlock.to_string()),
        // Under bubblewrap the file rules are the helper's layer (one
        // layer, see `run`); the spawning thread keeps the rest.
        (true, true) => report(
            "landlock",
            Partial,
            format!(
                "{landlock}; network and signal rules only: under bubblewrap the file rules \
                 are applied by the in-sandbox helper, and {}",
                no_helper()
            ),
        ),
        (false, _) => report("landlock", Unavailable, landlock.to_string()),
    });
    out.push(match helper {
        true => report(
            "seccomp",
            Enforced,
            "in-sandbox helper: device nodes, ptrace, namespaces, mounts, bpf, perf, \
             keyrings, io_uring, modules refused; no unix or IP sockets and no SysV IPC \
             in Plan and never"
                .into(),
        ),
        false => report("seccomp", Unavailable, no_helper()),
    });
    out.push(match namespaced {
        true => report(
            "capabilities",
            Enforced,
            "bubblewrap --cap-drop ALL (bounding set included), no_new_privs".into(),
        ),
        false => report(
            "capabilities",
            Partial,
            "dropped in the spawning thread (bounding set only where cadre holds \
             CAP_SETPCAP); no_new_privs"
                .into(),
        ),
    });
    out.push(match helper {
        true => report(
            "limits",
            Partial,
            "rlimits per process in the helper (memory, processes, CPU, file size); no \
             cgroup, and the kernel does not count processes for root"
                .into(),
        ),
        false => report("limits", Unavailable, no_helper()),
    });
    out.push(match namespaced {
        true => report(
            "lifetime",
            Enforced,
            "a PID namespace per command, killed with it (--die-with-parent)".into(),
        ),
        false => report(
            "lifetime",
            Partial,
            "the command's process group is killed; a process that calls setsid escapes it".into(),
        ),
    });
    out.push(match namespaced {
        true => report(
            "tmp",
            Enforced,
            "a private size-capped tmpfs /tmp per command".into(),
        ),
        false => report(
            "tmp",
            Partial,
            "a per-command directory removed after the command; its total size is not capped"
                .into(),
        ),
    });
    out.push(match namespaced {
        true => report(
            "secrets",
            Enforced,
            "allow-listed environment; cadre's /proc invisible in the PID namespace".into(),
        ),
        false => report(
            "secrets",
            Partial,
            "allow-listed environment; cadre is not dumpable, but /proc/*/cmdline stays \
             readable"
                .into(),
        ),
    });
    out
}
