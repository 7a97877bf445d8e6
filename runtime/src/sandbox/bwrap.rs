//! The bubblewrap command line of one command: fresh namespaces, `/`
//! read-only, the policy's writable set bound back, the protected paths
//! read-only or hidden, a private `/tmp`, `/proc` and `/dev`.
//!
//! The order of the mounts is the point (later ones cover earlier ones):
//! the read-only root, the private `/tmp`, `/run` hidden, cadre's own
//! directories hidden, the working directory, the writable set, then the
//! workspace's `.git` and `.cadre` read-only over it, and last the helper
//! binary wherever it lives.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::policy::Policy;

/// Flags every command (and the startup probe) gets: every namespace,
/// no nested user namespace, killed with the spawning thread, its own
/// session (no TIOCSTI into cadre's terminal), no capabilities.
pub(crate) const FIXED: &[&str] = &[
    "--unshare-all",
    "--unshare-user",
    "--disable-userns",
    "--die-with-parent",
    "--new-session",
    "--cap-drop",
    "ALL",
];

/// Where the command's temp dir is inside: the private tmpfs.
pub(crate) const INNER_TMP: &str = "/tmp";

/// Host trees never bound writable: the sandbox has its own `/proc` and
/// `/dev`, and `/sys` stays read-only.
const NEVER_WRITABLE: &[&str] = &["/proc", "/dev", "/sys"];

/// What bubblewrap runs, and how.
pub(crate) struct Line<'a> {
    /// The confinement.
    pub policy: &'a Policy,
    /// The working directory (visible read-only at least).
    pub cwd: &'a Path,
    /// The caller's temp dir: replaced by the private tmpfs, so not bound.
    pub host_tmp: &'a Path,
    /// The helper binary, bound read-only where it is so it runs inside.
    pub helper: Option<&'a Path>,
}

impl Line<'_> {
    /// The writable paths as the command sees them: the policy's, less
    /// what the private mounts replace, plus the private `/tmp`.
    pub(crate) fn writable_inside(&self) -> Vec<PathBuf> {
        let mut inside: Vec<PathBuf> = self.bound().cloned().collect();
        inside.push(PathBuf::from(INNER_TMP));
        inside.push(PathBuf::from("/dev/null"));
        inside
    }

    /// The policy's writable paths that are bound from the host.
    fn bound(&self) -> impl Iterator<Item = &PathBuf> {
        self.policy.writable.iter().filter(|path| {
            let replaced = NEVER_WRITABLE.iter().any(|root| path.starts_with(root))
                || path.as_path() == Path::new(INNER_TMP)
                || path.starts_with(self.host_tmp);
            !replaced && path.exists()
        })
    }

    /// bubblewrap's arguments up to and including `--`.
    pub(crate) fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = FIXED.iter().map(OsString::from).collect();
        let mut push = |parts: &[&std::ffi::OsStr]| args.extend(parts.iter().map(OsString::from));
        if self.policy.network {
            push(&["--share-net".as_ref()]);
        }
        push(&["--ro-bind".as_ref(), "/".as_ref(), "/".as_ref()]);
        push(&["--dev".as_ref(), "/dev".as_ref()]);
        push(&["--proc".as_ref(), "/proc".as_ref()]);
        // The fresh proc still shows the host's sysctls; writable to a
        // root caller unless bound read-only.
        push(&[
            "--ro-bind".as_ref(),
            "/proc/sys".as_ref(),
            "/proc/sys".as_ref(),
        ]);
        let size = self.policy.limits.tmp_size.to_string();
        push(&[
            "--size".as_ref(),
            size.as_ref(),
            "--tmpfs".as_ref(),
            INNER_TMP.as_ref(),
        ]);
        // Host unix sockets (systemd, D-Bus, docker, user sessions) are
        // connectable from any network namespace, and a program a daemon
        // starts runs outside every wall: hidden in every reach. The
        // resolver's directory comes back read-only, for DNS where
        // `/etc/resolv.conf` points into it.
        for dir in ["/run", "/var/run"] {
            let real_dir = Path::new(dir).symlink_metadata().is_ok_and(|m| m.is_dir());
            if real_dir {
                push(&["--tmpfs".as_ref(), dir.as_ref()]);
            }
        }
        if self.policy.network {
            push(&[
                "--ro-bind-try".as_ref(),
                "/run/systemd/resolve".as_ref(),
                "/run/systemd/resolve".as_ref(),
            ]);
        }
        let cwd = [
            "--ro-bind".as_ref(),
            self.cwd.as_os_str(),
            self.cwd.as_os_str(),
        ];
        push(&cwd);
        // `-try`: an entry may vanish between the policy and the spawn
        // (Full Access lists every entry beside a protected path).
        for path in self.bound() {
            push(&["--bind-try".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
        // After the writable set, so no wider bind uncovers them.
        let hidden: Vec<&PathBuf> = self
            .policy
            .protected
            .iter()
            .filter(|p| p.is_dir())
            .collect();
        let bound: Vec<&PathBuf> = self.bound().collect();
        for dir in &hidden {
            push(&["--tmpfs".as_ref(), dir.as_os_str()]);
            // A working directory inside one (a worktree under the data
            // directory) stays visible, read-only; a writable path inside
            // one (a check's build cache) stays writable. Both are mounted
            // before the tmpfs turns read-only, which makes their mount
            // points.
            if self.cwd.starts_with(dir) {
                push(&cwd);
            }
            for path in bound.iter().filter(|path| path.starts_with(dir)) {
                push(&["--bind-try".as_ref(), path.as_os_str(), path.as_os_str()]);
            }
            push(&["--remount-ro".as_ref(), dir.as_os_str()]);
        }
        for path in self.policy.read_only.iter().filter(|p| p.exists()) {
            push(&["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
        }
        if let Some(helper) = self.helper {
            push(&["--ro-bind".as_ref(), helper.as_os_str(), helper.as_os_str()]);
        }
        push(&["--setenv".as_ref(), "TMPDIR".as_ref(), INNER_TMP.as_ref()]);
        push(&["--chdir".as_ref(), self.cwd.as_os_str(), "--".as_ref()]);
        args
    }
}
