//! The bubblewrap command line of one command: fresh namespaces, `/`
//! read-only, the policy's writable set bound back, the protected paths
//! read-only or hidden, a private `/tmp`, `/proc` and `/dev`.
//!
//! The order of the mounts is the point (later ones cover earlier ones):
//! the read-only root, the private `/tmp`, `/run` hidden; then the working
//! directory, the writable set, the protected paths (`.git`, `.cadre`)
//! read-only and cadre's own directories hidden, shallowest first, so the
//! deeper path decides; and last the helper binary wherever it lives.

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
/// `/dev`, `/sys` stays read-only, and `/run` stays hidden (Full Access
/// lists it among the entries of `/`).
const NEVER_WRITABLE: &[&str] = &["/proc", "/dev", "/sys", "/run", "/var/run"];

/// How one path is mounted; at one depth, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Mount {
    /// An empty tmpfs, read-only once the mounts inside it are made.
    Hidden,
    /// The host's path, read-only.
    ReadOnly,
    /// The host's path, writable.
    Writable,
}

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
                || path.starts_with(self.host_tmp)
                // `/` itself is the root bind (see `args`): bound again, it
                // would cover the private `/tmp`, `/proc` and `/dev`.
                || path.as_path() == Path::new("/");
            !replaced && path.exists()
        })
    }

    /// Whether `/` is writable (Full Access with nothing of cadre's to
    /// split it around): then the root bind itself is writable.
    fn root_writable(&self) -> bool {
        self.policy
            .writable
            .iter()
            .any(|p| p.as_path() == Path::new("/"))
    }

    /// bubblewrap's arguments up to and including `--`.
    pub(crate) fn args(&self) -> Vec<OsString> {
        let mut args: Vec<OsString> = FIXED.iter().map(OsString::from).collect();
        let mut push = |parts: &[&std::ffi::OsStr]| args.extend(parts.iter().map(OsString::from));
        if self.policy.network {
            push(&["--share-net".as_ref()]);
        }
        let root = if self.root_writable() {
            "--bind"
        } else {
            "--ro-bind"
        };
        push(&[root.as_ref(), "/".as_ref(), "/".as_ref()]);
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
        // The working directory, the writable set, the read-only paths and
        // the hidden ones, shallowest first, so a deeper path's mount wins
        // over a shallower one's (a workspace's `.git` over the workspace, a
        // check cache over the hidden data directory). At one depth a
        // writable bind wins: the policy keeps only the workspace there.
        let bound: Vec<&PathBuf> = self.bound().collect();
        // The working directory is bound read-only only to be visible: never
        // over a writable path that holds it.
        let cwd_writable =
            self.root_writable() || bound.iter().any(|path| self.cwd.starts_with(path));
        let mut mounts: Vec<(&Path, Mount)> = Vec::new();
        if !cwd_writable {
            mounts.push((self.cwd, Mount::ReadOnly));
        }
        mounts.extend(bound.iter().map(|path| (path.as_path(), Mount::Writable)));
        mounts.extend(
            self.policy
                .read_only
                .iter()
                .filter(|p| p.exists())
                .map(|path| (path.as_path(), Mount::ReadOnly)),
        );
        let hidden: Vec<&Path> = self
            .policy
            .protected
            .iter()
            .filter(|p| p.is_dir())
            .map(PathBuf::as_path)
            .collect();
        mounts.extend(hidden.iter().map(|dir| (*dir, Mount::Hidden)));
        mounts.sort_by_key(|(path, mount)| (path.components().count(), *mount));
        for (path, mount) in mounts {
            let flag = match mount {
                Mount::Hidden => "--tmpfs",
                Mount::ReadOnly => "--ro-bind",
                // `-try`: an entry may vanish between the policy and the
                // spawn (Full Access lists every entry beside a protected
                // path).
                Mount::Writable => "--bind-try",
            };
            match mount {
                Mount::Hidden => push(&[flag.as_ref(), path.as_os_str()]),
                Mount::ReadOnly | Mount::Writable => {
                    push(&[flag.as_ref(), path.as_os_str(), path.as_os_str()]);
                }
            }
        }
        // Last: a hidden tmpfs turns read-only once the mounts inside it
        // have made their mount points.
        for dir in &hidden {
            push(&["--remount-ro".as_ref(), dir.as_os_str()]);
        }
        if let Some(helper) = self.helper {
            push(&["--ro-bind".as_ref(), helper.as_os_str(), helper.as_os_str()]);
        }
        push(&["--setenv".as_ref(), "TMPDIR".as_ref(), INNER_TMP.as_ref()]);
        push(&["--chdir".as_ref(), self.cwd.as_os_str(), "--".as_ref()]);
        args
    }
}
