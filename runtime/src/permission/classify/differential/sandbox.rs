//! A throwaway workspace with a few files and a small git repository,
//! where accepted lines run under real bash, and a fingerprint of every
//! byte, name, mode and link in it.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

/// Each path under the sandbox root, with what it is (kind, mode, size,
/// modification time of a file, link target) and a file's bytes, kept
/// whole: the sandbox is small, and comparing bytes is cheaper than
/// hashing them.
pub(super) type Fingerprint = BTreeMap<PathBuf, (String, Vec<u8>)>;

/// What one run of a line left behind.
pub(super) enum Outcome {
    /// It ended and left no process.
    Finished,
    /// It was still running at the deadline; its group was killed.
    TimedOut,
    /// Processes of its group were still running after it ended.
    LeftRunning,
}

pub(super) struct Sandbox {
    /// Kept so the directory is removed when the sandbox is dropped.
    _dir: tempfile::TempDir,
    pub(super) root: PathBuf,
}

/// The files of the workspace, with their contents.
const FILES: &[(&str, &str)] = &[
    ("README.md", "# demo\nA line with a and b.\n"),
    ("src/lib.rs", "pub fn f() -> u32 {\n    1\n}\n"),
    ("src/main.rs", "fn main() {}\n"),
    ("sub/a.txt", "alpha\nbeta\nalpha\n"),
    ("sub/b.txt", "b\n"),
    ("data.json", "{\"name\": \"demo\", \"ids\": [1, 2]}\n"),
    ("run.sh", "#!/bin/sh\ntouch RAN\n"),
];

/// Every file is dated here, well in the past, so git's index is never
/// racy and `git status` has nothing to refresh.
const PAST: Duration = Duration::from_secs(1_500_000_000);

impl Sandbox {
    pub(super) fn new() -> io::Result<Self> {
        let dir = tempfile::tempdir()?;
        let root = dir.path().to_path_buf();
        let sandbox = Sandbox { _dir: dir, root };
        sandbox.populate()?;
        Ok(sandbox)
    }

    pub(super) fn workspace(&self) -> PathBuf {
        self.root.join("ws")
    }

    /// A scratch directory with the same plain files, for the argv oracle.
    pub(super) fn scratch(&self) -> PathBuf {
        self.root.join("scratch")
    }

    /// Puts back the sandbox's initial contents.
    pub(super) fn restore(&self) -> io::Result<()> {
        for entry in fs::read_dir(&self.root)? {
            let path = entry?.path();
            if path.is_dir() && !path.is_symlink() {
                fs::remove_dir_all(&path)?;
            } else {
                fs::remove_file(&path)?;
            }
        }
        self.populate()
    }

    fn populate(&self) -> io::Result<()> {
        let ws = self.workspace();
        for dir in ["ws", "home", "tmp", "d", "scratch"] {
            fs::create_dir_all(self.root.join(dir))?;
        }
        fs::write(self.root.join("d/keep"), "kept\n")?;
        for base in [&ws, &self.scratch()] {
            for (path, text) in FILES {
                let path = base.join(path);
                if let Some(parent) = path.parent() {
                    fs::create_dir_all(parent)?;
                }
                fs::write(&path, text)?;
            }
            fs::set_permissions(base.join("run.sh"), fs::Permissions::from_mode(0o755))?;
        }
        symlink("README.md", ws.join("link"))?;
        // The link too: an entry dated in the index's own second is racily
        // clean, and every later `git status` would rewrite the index.
        let dated = Command::new("touch")
            .args(["-h", "-d", "@1500000000", "link"])
            .current_dir(&ws)
            .status()?;
        if !dated.success() {
            return Err(io::Error::other("could not date the link"));
        }
        set_times(&ws)?;
        self.git(&["init", "-q", "-b", "main"])?;
        self.git(&["add", "-A"])?;
        self.git(&["commit", "-q", "-m", "first"])?;
        // Only the file that changes is touched again, right before it is
        // added, so every entry's stat data in the index stays true.
        let changed = ws.join("sub/b.txt");
        fs::write(&changed, "b\nchanged\n")?;
        date(&changed)?;
        self.git(&["add", "sub/b.txt"])?;
        self.git(&["commit", "-q", "-m", "second"])?;
        self.git(&["branch", "feature", "HEAD~1"])?;
        self.git(&["tag", "v1", "HEAD~1"])?;
        // One refresh now, so no read-only command has one left to write.
        self.git(&["status", "-s"])?;
        Ok(())
    }

    fn git(&self, args: &[&str]) -> io::Result<()> {
        let status = Command::new("git")
            .args(args)
            .current_dir(self.workspace())
            .env_clear()
            .envs(self.environment())
            .env("GIT_AUTHOR_NAME", "A")
            .env("GIT_AUTHOR_EMAIL", "a@example.invalid")
            .env("GIT_COMMITTER_NAME", "A")
            .env("GIT_COMMITTER_EMAIL", "a@example.invalid")
            .env("GIT_AUTHOR_DATE", "1500000000 +0000")
            .env("GIT_COMMITTER_DATE", "1500000000 +0000")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()?;
        if status.success() {
            Ok(())
        } else {
            Err(io::Error::other(format!("git {args:?} failed: {status}")))
        }
    }

    /// The only variables a line runs with: no `BASH_ENV`, no exported
    /// functions, HOME and TMPDIR inside the sandbox.
    pub(super) fn environment(&self) -> Vec<(&'static str, String)> {
        vec![
            ("PATH", "/usr/local/bin:/usr/bin:/bin".into()),
            ("HOME", self.root.join("home").display().to_string()),
            ("TMPDIR", self.root.join("tmp").display().to_string()),
            ("LANG", "C.UTF-8".into()),
            ("GIT_CONFIG_NOSYSTEM", "1".into()),
        ]
    }

    /// Runs `line` with `bash --noprofile --norc -c` in the workspace, in
    /// its own process group, killing the group at `deadline`.
    pub(super) async fn run(&self, line: &str, deadline: Duration) -> io::Result<Outcome> {
        let mut child = tokio::process::Command::new("bash")
            .arg("--noprofile")
            .arg("--norc")
            .arg("-c")
            .arg(line)
            .current_dir(self.workspace())
            .env_clear()
            .envs(self.environment())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()?;
        let group = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw)
            .ok_or_else(|| io::Error::other("bash has no pid"))?;
        if tokio::time::timeout(deadline, child.wait()).await.is_err() {
            kill(group);
            child.wait().await?;
            return Ok(Outcome::TimedOut);
        }
        // bash has waited for every process it started in the foreground,
        // so the group is empty unless something was left behind. A zombie
        // is not running: bash does not always reap the subshell of a
        // pipeline member that is only a failed redirection.
        if rustix::process::test_kill_process_group(group).is_ok() {
            // One may still be on its way out: give each a moment to end.
            for pid in running(group)? {
                if !ends_soon(pid).await? {
                    kill(group);
                    return Ok(Outcome::LeftRunning);
                }
            }
        }
        Ok(Outcome::Finished)
    }

    /// Every entry under the sandbox root. Directory times are left out:
    /// a file created and removed again (a temporary file) changes them.
    /// Access times are left out: reading moves them.
    pub(super) fn fingerprint(&self) -> io::Result<Fingerprint> {
        let mut out = Fingerprint::new();
        let mut pending = vec![self.root.clone()];
        while let Some(dir) = pending.pop() {
            for entry in fs::read_dir(&dir)? {
                let path = entry?.path();
                let meta = fs::symlink_metadata(&path)?;
                let name = path.strip_prefix(&self.root).unwrap_or(&path).to_path_buf();
                let mode = meta.mode();
                let what = if meta.file_type().is_symlink() {
                    (
                        format!("link {mode:o} -> {}", fs::read_link(&path)?.display()),
                        Vec::new(),
                    )
                } else if meta.is_dir() {
                    pending.push(path.clone());
                    (format!("dir {mode:o}"), Vec::new())
                } else if meta.is_file() {
                    // The change time too: only a write, `chmod`, `touch` or a
                    // link moves it, even to the same values.
                    let what = format!(
                        "file {mode:o} {} bytes, modified {}.{:09}, changed {}.{:09}",
                        meta.len(),
                        meta.mtime(),
                        meta.mtime_nsec(),
                        meta.ctime(),
                        meta.ctime_nsec()
                    );
                    (what, fs::read(&path)?)
                } else {
                    (format!("special {mode:o}"), Vec::new())
                };
                out.insert(name, what);
            }
        }
        Ok(out)
    }
}

/// Whether the process ends within a second, watched through a pidfd
/// (readable once it has ended).
async fn ends_soon(pid: rustix::process::Pid) -> io::Result<bool> {
    let Ok(fd) = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()) else {
        // Gone already.
        return Ok(true);
    };
    tokio::task::spawn_blocking(move || {
        let mut fds = [rustix::event::PollFd::new(
            &fd,
            rustix::event::PollFlags::IN,
        )];
        let second = rustix::event::Timespec {
            tv_sec: 1,
            tv_nsec: 0,
        };
        Ok(rustix::event::poll(&mut fds, Some(&second))? > 0)
    })
    .await?
}

/// The processes of `group` that are not zombies, from `/proc`.
fn running(group: rustix::process::Pid) -> io::Result<Vec<rustix::process::Pid>> {
    let mut out = Vec::new();
    for entry in fs::read_dir("/proc")? {
        let path = entry?.path().join("stat");
        // Processes come and go while this reads.
        let Ok(stat) = fs::read_to_string(&path) else {
            continue;
        };
        // `pid (comm) state ppid pgrp …`; comm may hold anything but `)`.
        let Some((name, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let (Some(state), Some(_), Some(pgrp)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let pid = name
            .split_once(' ')
            .and_then(|(pid, _)| pid.parse().ok())
            .and_then(rustix::process::Pid::from_raw);
        if pgrp == group.as_raw_nonzero().to_string()
            && state != "Z"
            && let Some(pid) = pid
        {
            out.push(pid);
        }
    }
    Ok(out)
}

fn kill(group: rustix::process::Pid) {
    // The group may be gone already; nothing to do then.
    let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
}

/// Dates the file at [`PAST`].
fn date(path: &Path) -> io::Result<()> {
    fs::File::options()
        .write(true)
        .open(path)?
        .set_modified(SystemTime::UNIX_EPOCH + PAST)
}

/// Dates every file under `dir` (links and `.git` aside) at [`PAST`].
fn set_times(dir: &Path) -> io::Result<()> {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in fs::read_dir(&dir)? {
            let path = entry?.path();
            let meta = fs::symlink_metadata(&path)?;
            if meta.is_dir() && path.file_name().is_some_and(|n| n != ".git") {
                pending.push(path);
            } else if meta.is_file() {
                date(&path)?;
            }
        }
    }
    Ok(())
}

/// What differs between two fingerprints, one line per path.
pub(super) fn differences(before: &Fingerprint, after: &Fingerprint) -> Vec<String> {
    let mut out = Vec::new();
    for (path, (was, was_bytes)) in before {
        match after.get(path) {
            None => out.push(format!("removed {}", path.display())),
            Some((now, now_bytes)) if now != was || now_bytes != was_bytes => {
                let contents = if now_bytes == was_bytes {
                    "same contents"
                } else {
                    "other contents"
                };
                out.push(format!(
                    "changed {}: {was} -> {now}, {contents}",
                    path.display()
                ));
            }
            Some(_) => {}
        }
    }
    for path in after.keys().filter(|p| !before.contains_key(*p)) {
        out.push(format!("created {}", path.display()));
    }
    out
}
