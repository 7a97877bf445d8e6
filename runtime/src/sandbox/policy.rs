//! What one command may write, from the call's mode and posture (P9).

use std::path::{Path, PathBuf};

use crate::mode::Mode;
use crate::permission::Posture;

use super::SandboxConfig;
use super::limits::Limits;

/// How far a command's writes reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Plan, and the `never` posture: nothing but `/dev/null` and the
    /// private temp dir; no TCP.
    ReadOnly,
    /// Work and Operate under `suggest` or `auto`: the workspace, the temp
    /// dir and the configured writable roots.
    Workspace,
    /// Full Access (`bypass`): everything but the protected paths.
    Everywhere,
}

impl Reach {
    /// The reach of a call made in `mode` under `posture`.
    pub fn of(mode: Mode, posture: Posture) -> Self {
        match (mode, posture) {
            (Mode::Plan, _) | (_, Posture::Never) => Reach::ReadOnly,
            (Mode::Work | Mode::Operate, Posture::Suggest | Posture::Auto) => Reach::Workspace,
            (Mode::Work | Mode::Operate, Posture::Bypass) => Reach::Everywhere,
        }
    }

    /// The name used in results and documentation.
    pub fn as_str(self) -> &'static str {
        match self {
            Reach::ReadOnly => "read-only",
            Reach::Workspace => "workspace-write",
            Reach::Everywhere => "full-access",
        }
    }
}

/// One command's confinement, resolved to paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// How far writes reach.
    pub reach: Reach,
    /// Directories (and files) granted every right: `/dev/null`, the temp
    /// dir, and for the wider reaches the workspace and the writable roots,
    /// or under [`Reach::Everywhere`] the entries that cover the file
    /// system around the protected paths (see [`cover`]).
    pub writable: Vec<PathBuf>,
    /// Paths that stay read-only whatever the reach (cadre's configuration
    /// and data directories), symlinks resolved.
    pub protected: Vec<PathBuf>,
    /// TCP connect and bind are allowed.
    pub network: bool,
    /// Signals and abstract unix sockets are confined to the command's own
    /// processes.
    pub scoped: bool,
    /// Paths read-only at the kernel level whatever the reach, Full Access
    /// included: the workspace's `.git` and `.cadre`, those of the
    /// repository around it, and for a worktree the git directories its
    /// `.git` file names (see [`git_and_cadre`]). Bound read-only over the
    /// writable set by the namespace wall, a deeper path winning over a
    /// shallower one; those inside the workspace are created (as
    /// directories) before a writing command runs, so a command cannot
    /// create them itself.
    pub read_only: Vec<PathBuf>,
    /// The workspace the call works in: the only place a missing
    /// read-only path is created.
    pub workspace: PathBuf,
    /// Resource bounds of the command.
    pub limits: Limits,
    /// Run the command in its own namespaces when the host can; off only
    /// to try the other walls alone.
    pub namespaces: bool,
}

impl Policy {
    /// The policy of a call made in `mode` under `posture` in `workspace`,
    /// with `tmp` as its private temp dir.
    ///
    /// A protected path is never granted, whatever the reach: a grant that
    /// contains one is split around it (see [`cover`]), which reads the
    /// directories on the way to it. Under [`Reach::Everywhere`] the grant
    /// is `/`.
    pub fn resolve(
        mode: Mode,
        posture: Posture,
        workspace: &Path,
        tmp: &Path,
        config: &SandboxConfig,
    ) -> Self {
        let reach = Reach::of(mode, posture);
        let protected: Vec<PathBuf> = config.protected.iter().map(|p| real(p)).collect();
        let grants: Vec<PathBuf> = match reach {
            Reach::ReadOnly => Vec::new(),
            Reach::Workspace => std::iter::once(workspace.to_path_buf())
                .chain(config.writable_roots.iter().map(|root| real(root)))
                .collect(),
            // The workspace too: under a read-only path (a worktree under
            // the main `.cadre`) it is writable only as itself.
            Reach::Everywhere => vec![PathBuf::from("/"), workspace.to_path_buf()],
        };
        let read_only = git_and_cadre(workspace, &protected);
        let mut writable = vec![PathBuf::from("/dev/null"), tmp.to_path_buf()];
        for grant in &grants {
            writable.extend(cover(grant, &protected));
        }
        // Nothing under a read-only path is writable but the workspace
        // itself (a workflow step's worktree under the main `.cadre`).
        writable
            .retain(|path| path == workspace || !read_only.iter().any(|ro| path.starts_with(ro)));
        Policy {
            reach,
            writable,
            protected,
            network: reach != Reach::ReadOnly,
            scoped: reach != Reach::Everywhere,
            read_only,
            workspace: workspace.to_path_buf(),
            limits: config.limits,
            namespaces: config.namespaces,
        }
    }
}

/// Where git and cadre find what runs later outside any sandbox (hooks,
/// configuration, `fsmonitor`, MCP commands), read-only whatever the reach:
///
/// - the workspace's `.git` and `.cadre`;
/// - when the workspace is inside a repository, every `.cadre` on the way
///   up to the repository's top and the top's `.git`;
/// - when a `.git` is a worktree's file (`gitdir: <dir>`), that git
///   directory, the common one it names (`commondir`), and the main
///   worktree's `.cadre` beside the common directory (a workflow step's
///   worktree lives under it).
///
/// A `.git` file's text is the repository's, so what it names is kept only
/// when it is a git directory (it holds `HEAD`) that neither holds nor lies
/// within a `protected` path: a bind there would uncover what the sandbox
/// hides. One that holds the workspace only narrows: the workspace itself
/// stays writable (see the mount order in `bwrap`).
fn git_and_cadre(workspace: &Path, protected: &[PathBuf]) -> Vec<PathBuf> {
    let own = [workspace.join(".git"), workspace.join(".cadre")];
    let mut around = Vec::new();
    // As git finds it: a `.git` directory holding `HEAD`, or a `.git` file
    // naming one. An empty `.git` (the one made for a workspace that had
    // none, to bind it read-only) is no repository.
    let is_repo = |git: &Path| {
        git.join("HEAD").is_file() || git_file(git).is_some_and(|t| t.starts_with("gitdir:"))
    };
    let top = workspace.ancestors().find(|dir| is_repo(&dir.join(".git")));
    if let Some(top) = top.filter(|top| *top != workspace) {
        for dir in workspace.ancestors().skip(1) {
            around.push(dir.join(".cadre"));
            if dir == top {
                around.push(dir.join(".git"));
                break;
            }
        }
    }
    let gits: Vec<PathBuf> = own.iter().chain(&around).cloned().collect();
    for dir in gits.iter().flat_map(|git| worktree_dirs(git)) {
        if !dir.join("HEAD").is_file() {
            continue;
        }
        // The main worktree's `.cadre`, beside its `.git`.
        if dir.file_name() == Some(".git".as_ref())
            && let Some(main) = dir.parent()
        {
            around.push(main.join(".cadre"));
        }
        around.push(dir);
    }
    // A symlink among them is left out (a bind would follow it anywhere);
    // the workspace's own are refused instead (see `run`).
    let safe = |path: &PathBuf| {
        !path.symlink_metadata().is_ok_and(|m| m.is_symlink())
            && !protected
                .iter()
                .any(|p| path.starts_with(p) || p.starts_with(path))
    };
    let mut out = own.to_vec();
    for path in around.into_iter().filter(safe) {
        if !out.contains(&path) {
            out.push(path);
        }
    }
    out
}

/// The git directory a worktree's `.git` file names and the common one
/// that names in turn, symlinks resolved; nothing for a `.git` directory.
fn worktree_dirs(git: &Path) -> Vec<PathBuf> {
    let pointed =
        git_file(git).and_then(|text| text.strip_prefix("gitdir:").map(|d| d.trim().to_string()));
    let Some(dir) = pointed else {
        return Vec::new();
    };
    let base = git.parent().unwrap_or(git);
    let dir = real(&base.join(dir));
    let common = git_file(&dir.join("commondir")).map(|c| real(&dir.join(c.trim())));
    std::iter::once(dir).chain(common).collect()
}

/// The text of a `.git` file or a `commondir`: a regular file (never a
/// FIFO, which would block, nor a symlink) of at most a few KiB, as git
/// writes them.
fn git_file(git: &Path) -> Option<String> {
    let meta = git.symlink_metadata().ok()?;
    (meta.is_file() && meta.len() <= 4096)
        .then(|| std::fs::read_to_string(git).ok())
        .flatten()
}

/// Paths beneath `root` that, granted write access, make everything under
/// `root` writable except the `protected` paths and the directories that
/// lead to them.
///
/// Landlock only adds rights: a read-only rule under a writable directory
/// changes nothing. So instead of granting `root`, each directory on the
/// way to a protected path is split into its entries, every one granted but
/// the one that leads on. Those directories themselves get no write rights:
/// nothing can be created, removed or renamed directly in them (`/`, `/home`,
/// `$HOME`, `~/.config`, … when those lead to a protected path).
///
/// Symlinks are left out: a rule on one would follow it, possibly into a
/// protected path; writes through a symlink are judged at its target
/// anyway. Protected paths must be given with their symlinks resolved.
pub fn cover(root: &Path, protected: &[PathBuf]) -> Vec<PathBuf> {
    if protected.iter().any(|p| root.starts_with(p)) {
        return Vec::new();
    }
    if !protected.iter().any(|p| p.starts_with(root)) {
        return vec![root.to_path_buf()];
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let is_link = entry.file_type().is_ok_and(|t| t.is_symlink());
        if !is_link {
            out.extend(cover(&entry.path(), protected));
        }
    }
    out
}

/// `path` with its symlinks resolved, as far as it exists: a protected
/// directory that does not exist yet is still protected where it would be.
fn real(path: &Path) -> PathBuf {
    let mut missing = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(found) = existing.canonicalize() {
            return missing.iter().rev().fold(found, |acc, part| acc.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_os_string());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}
