//! Workspace snapshots in a side repository (ST4), and restoring them.
//!
//! Each workspace gets its own bare git repository under the data
//! directory (`<data dir>/snapshots/<hash of the workspace path>`), whose
//! work tree is the workspace. Nothing is ever written into the
//! workspace's own `.git`: the side repository has its own objects, its own
//! refs (`refs/cadre/sessions/<session>`, one chain of snapshots per
//! session) and its own index per session (`cadre/index-<session>`, which
//! is also the stat cache that makes an unchanged workspace cheap to
//! record).
//!
//! What a snapshot holds is what `git add -A` would see: the `.gitignore`
//! files are honoured, `.git` directories are never entered, and files
//! larger than the per-file cap are left out. A restore puts back every
//! file the snapshot holds, and removes only files it would have recorded:
//! ignored files and files over the cap that the snapshot does not hold are
//! left alone.
//!
//! # Layout
//! - `capture`: the workspace's tree now, under those rules.
//! - `restore`: the difference between now and a snapshot, and applying it
//!   without following a symlink out of the workspace.
//! - `hook`: [`TurnSnapshotter`], the tool layer's hook: one snapshot
//!   before the first call of a turn that may change files.

mod capture;
mod hook;
mod restore;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use git2::{Commit, ErrorCode, Oid, Repository, RepositoryInitOptions, Signature};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

pub use hook::TurnSnapshotter;
pub use restore::RestoreReport;

/// Files larger than this are not recorded, and a restore does not remove them.
pub const DEFAULT_MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// Where each session's chain of snapshots is kept.
const REF_PREFIX: &str = "refs/cadre/sessions/";

/// Why a snapshot could not be taken, listed or restored.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The side repository failed (a corrupt object, a full disk). Retrying
    /// helps only if the cause went away.
    #[error("the snapshot repository failed: {0}")]
    Git(#[from] git2::Error),
    /// No snapshot has this id. Not retryable.
    #[error("no snapshot '{0}' in this workspace")]
    NotFound(String),
    /// The id is a prefix of more than one snapshot. Not retryable: give
    /// more characters.
    #[error("'{0}' names more than one snapshot; give more characters")]
    Ambiguous(String),
    /// A blocking task running the snapshot died. Not retryable.
    #[error("the snapshot task failed: {0}")]
    Task(String),
}

/// What a snapshot is recorded as: whose, and when in the session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    /// The session the snapshot belongs to.
    pub session: String,
    /// The agent whose call it preceded (`main` for the session itself).
    pub agent: String,
    /// The turn it preceded; `None` for a snapshot taken before a restore.
    pub turn: Option<u64>,
    /// One line saying why it was taken.
    pub label: String,
}

/// A snapshot taken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Taken {
    /// The snapshot's id (a commit id in the side repository).
    pub id: String,
    /// False when nothing changed since the session's last snapshot, which
    /// is then the one returned: no commit was made.
    pub new: bool,
}

/// One snapshot, as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SnapshotInfo {
    /// The full id; any unique prefix of four or more characters names it.
    pub id: String,
    /// Whose and when.
    #[serde(flatten)]
    pub mark: Mark,
    /// Seconds since the Unix epoch.
    pub time: i64,
    /// Files that differ between the snapshot and the workspace now
    /// (filled by [`Snapshots::list`]).
    pub changed_since: usize,
}

/// The snapshots of one workspace.
#[derive(Debug)]
pub struct Snapshots {
    git_dir: PathBuf,
    workspace: PathBuf,
    max_file_bytes: u64,
    /// Operations of one process run one at a time: they share the side
    /// repository's refs and a session's index.
    lock: Mutex<()>,
}

impl Snapshots {
    /// The snapshots of `workspace` (an absolute, canonical path), kept
    /// under `data_dir`. Nothing is created until the first snapshot.
    pub fn new(data_dir: &Path, workspace: &Path, max_file_bytes: u64) -> Self {
        Self {
            git_dir: Self::side_dir(data_dir, workspace),
            workspace: workspace.to_path_buf(),
            max_file_bytes,
            lock: Mutex::new(()),
        }
    }

    /// The side repository of `workspace`.
    pub fn side_dir(data_dir: &Path, workspace: &Path) -> PathBuf {
        let digest = Sha256::digest(workspace.as_os_str().as_encoded_bytes());
        let name: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
        data_dir.join("snapshots").join(name)
    }

    /// The side repository's git directory.
    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    /// The workspace.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// Records the workspace for `mark.session`; when nothing changed since
    /// that session's last snapshot, no commit is made and the last one is
    /// returned.
    pub fn take(&self, mark: &Mark) -> Result<Taken, SnapshotError> {
        let _one = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let repo = self.open(true)?;
        let tree = capture::session_tree(&repo, &self.git_dir, &mark.session, self.max_file_bytes)?;
        commit(&repo, mark, tree)
    }

    /// The snapshots of one session, or of every session in this
    /// workspace, newest first, each with how many files differ now.
    pub fn list(&self, session: Option<&str>) -> Result<Vec<SnapshotInfo>, SnapshotError> {
        let _one = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.exists() {
            return Ok(Vec::new());
        }
        let repo = self.open(false)?;
        let refs: Vec<String> = match session {
            Some(session) => vec![session_ref(session)],
            None => repo
                .references_glob(&format!("{REF_PREFIX}*"))?
                .names()
                .filter_map(|name| name.ok().map(str::to_string))
                .collect(),
        };
        let mut found = Vec::new();
        for name in refs {
            let Ok(tip) = repo.refname_to_id(&name) else {
                continue;
            };
            let mut next = Some(repo.find_commit(tip)?);
            while let Some(commit) = next {
                if let Some(info) = info(&commit) {
                    found.push((info, commit.tree_id()));
                }
                next = commit.parent(0).ok();
            }
        }
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let now = repo.find_tree(capture::scratch_tree(&repo, self.max_file_bytes)?)?;
        let mut listed = Vec::with_capacity(found.len());
        for (mut info, tree) in found {
            let tree = repo.find_tree(tree)?;
            info.changed_since = repo
                .diff_tree_to_tree(Some(&tree), Some(&now), None)?
                .deltas()
                .len();
            listed.push(info);
        }
        listed.sort_by(|a, b| b.time.cmp(&a.time).then_with(|| b.id.cmp(&a.id)));
        Ok(listed)
    }

    /// The snapshot an id (or a unique prefix of one) names.
    pub fn find(&self, id: &str) -> Result<SnapshotInfo, SnapshotError> {
        let _one = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.exists() {
            return Err(SnapshotError::NotFound(id.to_string()));
        }
        let repo = self.open(false)?;
        let commit = resolve(&repo, id)?;
        info(&commit).ok_or_else(|| SnapshotError::NotFound(id.to_string()))
    }

    /// Puts the workspace back as snapshot `id` recorded it: files changed
    /// since are restored, deleted ones recreated, ones created since
    /// removed; ignored files and files over the cap that the snapshot does
    /// not hold are left alone.
    ///
    /// `before` records the workspace first (so the restore itself can be
    /// undone); `None` is a dry run that changes nothing and reports what
    /// a restore would do.
    pub fn restore(&self, id: &str, before: Option<&Mark>) -> Result<RestoreReport, SnapshotError> {
        let _one = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        if !self.exists() {
            return Err(SnapshotError::NotFound(id.to_string()));
        }
        let repo = self.open(false)?;
        let target = resolve(&repo, id)?;
        let (now, before_id) = match before {
            Some(mark) => {
                let tree = capture::session_tree(
                    &repo,
                    &self.git_dir,
                    &mark.session,
                    self.max_file_bytes,
                )?;
                (tree, Some(commit(&repo, mark, tree)?.id))
            }
            None => (capture::scratch_tree(&repo, self.max_file_bytes)?, None),
        };
        let mut report = restore::plan(&repo, &self.workspace, now, target.tree_id())?;
        report.snapshot = target.id().to_string();
        report.before = before_id;
        if before.is_some() {
            restore::apply(&repo, &self.workspace, &mut report)?;
        }
        Ok(report)
    }

    fn exists(&self) -> bool {
        self.git_dir.join("HEAD").exists()
    }

    /// Opens the side repository with the workspace as its work tree,
    /// creating it when `create` says so.
    fn open(&self, create: bool) -> Result<Repository, SnapshotError> {
        let repo = if self.exists() || !create {
            Repository::open_bare(&self.git_dir)?
        } else {
            let mut options = RepositoryInitOptions::new();
            options.bare(true).initial_head("cadre-snapshots");
            let repo = Repository::init_opts(&self.git_dir, &options)?;
            // For whoever finds the directory: which workspace it records.
            let note = self.git_dir.join("description");
            let _ = std::fs::write(&note, format!("{}\n", self.workspace.display()));
            repo
        };
        // `false`: no `.git` file is written into the workspace.
        repo.set_workdir(&self.workspace, false)?;
        let mut rules = String::from(".git/\n");
        if let Ok(inside) = self.git_dir.strip_prefix(&self.workspace) {
            // A data directory inside the workspace is not recorded in itself.
            rules.push_str(&format!("/{}/\n", inside.display()));
        }
        repo.add_ignore_rule(&rules)?;
        Ok(repo)
    }
}

fn session_ref(session: &str) -> String {
    format!("{REF_PREFIX}{}", capture::file_safe(session))
}

/// Commits `tree` on the session's chain, unless it is its tip's tree.
fn commit(repo: &Repository, mark: &Mark, tree: Oid) -> Result<Taken, SnapshotError> {
    let name = session_ref(&mark.session);
    let parent = repo
        .refname_to_id(&name)
        .ok()
        .and_then(|id| repo.find_commit(id).ok());
    if let Some(parent) = &parent
        && parent.tree_id() == tree
    {
        return Ok(Taken {
            id: parent.id().to_string(),
            new: false,
        });
    }
    let tree = repo.find_tree(tree)?;
    let signature = Signature::now("cadre", "cadre@localhost")?;
    let mut message = format!(
        "{}\n\nSession: {}\nAgent: {}\n",
        mark.label.lines().next().unwrap_or_default(),
        mark.session,
        mark.agent
    );
    if let Some(turn) = mark.turn {
        message.push_str(&format!("Turn: {turn}\n"));
    }
    let parents: Vec<&Commit<'_>> = parent.iter().collect();
    let id = repo.commit(
        Some(&name),
        &signature,
        &signature,
        &message,
        &tree,
        &parents,
    )?;
    Ok(Taken {
        id: id.to_string(),
        new: true,
    })
}

/// Reads a snapshot commit's mark back; `None` for a commit that is not one.
fn info(commit: &Commit<'_>) -> Option<SnapshotInfo> {
    let message = commit.message().ok()?;
    let mut lines = message.lines();
    let label = lines.next()?.to_string();
    let (mut session, mut agent, mut turn) = (None, None, None);
    for line in lines {
        if let Some(v) = line.strip_prefix("Session: ") {
            session = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("Agent: ") {
            agent = Some(v.to_string());
        } else if let Some(v) = line.strip_prefix("Turn: ") {
            turn = v.parse().ok();
        }
    }
    Some(SnapshotInfo {
        id: commit.id().to_string(),
        mark: Mark {
            session: session?,
            agent: agent.unwrap_or_else(|| "main".into()),
            turn,
            label,
        },
        time: commit.time().seconds(),
        changed_since: 0,
    })
}

/// The snapshot commit an id or a unique prefix (four or more hex digits) names.
fn resolve<'r>(repo: &'r Repository, id: &str) -> Result<Commit<'r>, SnapshotError> {
    let not_found = || SnapshotError::NotFound(id.to_string());
    if id.len() < 4 || !id.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(not_found());
    }
    let object = match repo.revparse_single(id) {
        Ok(object) => object,
        Err(err) if err.code() == ErrorCode::Ambiguous => {
            return Err(SnapshotError::Ambiguous(id.to_string()));
        }
        Err(_) => return Err(not_found()),
    };
    let commit = object.into_commit().map_err(|_| not_found())?;
    match info(&commit) {
        Some(_) => Ok(commit),
        None => Err(not_found()),
    }
}
