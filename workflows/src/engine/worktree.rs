//! `isolation = "worktree"` and `merge = true`: a step in a git worktree of
//! its own, and its changes brought back.
//!
//! The worktree is made with git2 from the workspace repository's `HEAD`
//! commit, on a branch `cadre-wt/<name>`, at `<workspace>/.cadre/worktrees/
//! <name>` (a `.gitignore` there keeps it out of the repository's status).
//! It lies under the workspace's `.cadre`, which the caller's agents may not
//! write, and outside cadre's data directory, which no agent may write: the
//! step's own workspace is the worktree (the same subdirectory of it as the
//! workspace is of its repository), so it writes there and nowhere else.
//!
//! Merging compares the worktree's files (tracked and new, `.gitignore`d
//! ones left out) with the commit it started from. A changed file is
//! brought back when the workspace still holds that commit's version of it
//! (or already holds the step's); otherwise someone else changed it too and
//! that is a conflict. The merge is held to the rules of a tool write
//! ([`MergeRules`], [`refusal`]): nothing under a `.git` or `.cadre` of any
//! depth and case (a step could plant `.cadre/config.local.toml` for the
//! next session, or a hook), nothing in cadre's protected roots, nothing
//! outside the step's workspace or its file scopes, and no symlink on
//! either side. The merge is all or nothing: every file is judged first,
//! and any refusal or conflict brings nothing back, fails the step naming
//! the files, and keeps the worktree and its branch for a person. A clean
//! merge removes both.

use std::path::{Component, Path, PathBuf};

use cadre_runtime::permission::ProtectedPaths;
use git2::{BranchType, Delta, DiffOptions, Oid, Repository, WorktreeAddOptions};

/// A step's worktree.
#[derive(Debug, Clone)]
pub struct Worktree {
    /// Its name (`.git/worktrees/<name>`, the branch `cadre-wt/<name>`).
    pub name: String,
    /// Its root, under the workspace's `.cadre/worktrees`; a conflict
    /// leaves it there for a person.
    pub path: PathBuf,
    /// The step's workspace in it: the same subdirectory of it as the
    /// workspace is of its repository.
    pub workspace: PathBuf,
    /// The repository's working directory, where a merge writes.
    repo: PathBuf,
    /// The workspace's place in the repository (empty at its root).
    inner: PathBuf,
    /// The commit it started from: a merge brings back a file only where
    /// the workspace still holds this commit's version.
    base: Oid,
}

/// Why a merge brought nothing back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeError {
    /// These files (relative to the repository) changed in the workspace
    /// too.
    Conflict(Vec<String>),
    /// These files may not be written by the step, each with why: a
    /// protected path, outside its workspace or scope, a symlink.
    Refused(Vec<String>),
    /// git or the file system failed.
    Failed(String),
}

/// Why a step's worktree could not be made or removed.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    /// The workspace is in no git repository (the path). Not retryable:
    /// the step needs another isolation, or the workspace a repository.
    #[error("isolation = \"worktree\" needs a git repository, and {} is not in one", .0.display())]
    NotARepository(PathBuf),
    /// The workspace's repository has no working directory to start a
    /// worktree in. Not retryable.
    #[error("the workspace's repository is bare")]
    Bare,
    /// git refused a step (`what` names it: the starting commit, the
    /// branch, the worktree, its administration). Retrying helps only once
    /// what stood in the way is gone, such as a branch `cadre-wt/<name>`
    /// an earlier run left for a person, or a repository with no commit.
    #[error("{what}: {}", .source.message())]
    Git {
        /// What was being done.
        what: &'static str,
        /// What git said.
        source: git2::Error,
    },
    /// The file system refused (`what` names the directory or file).
    /// Retrying helps only once the cause (permissions, space) is fixed.
    #[error("{what}: {source}")]
    Io {
        /// What was being read, made or removed.
        what: &'static str,
        /// What the system said.
        source: std::io::Error,
    },
}

fn git(what: &'static str) -> impl Fn(git2::Error) -> WorktreeError {
    move |source| WorktreeError::Git { what, source }
}

fn fs(what: &'static str) -> impl Fn(std::io::Error) -> WorktreeError {
    move |source| WorktreeError::Io { what, source }
}

fn err(what: &str) -> impl Fn(git2::Error) -> String + '_ {
    move |e| format!("{what}: {}", e.message())
}

fn io(what: &str) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

impl Worktree {
    /// The branch the worktree is on.
    pub fn branch(&self) -> String {
        format!("cadre-wt/{}", self.name)
    }

    /// Makes worktree `name` of the repository `workspace` is in, from its
    /// `HEAD` commit.
    pub fn create(workspace: &Path, name: &str) -> Result<Worktree, WorktreeError> {
        let repo = Repository::discover(workspace)
            .map_err(|_| WorktreeError::NotARepository(workspace.to_path_buf()))?;
        let root = repo
            .workdir()
            .ok_or(WorktreeError::Bare)?
            .canonicalize()
            .map_err(fs("the repository's directory"))?;
        let real = workspace
            .canonicalize()
            .map_err(fs("the workspace's directory"))?;
        let inner = real
            .strip_prefix(&root)
            .unwrap_or(Path::new(""))
            .to_path_buf();
        let head = repo
            .head()
            .and_then(|h| h.peel_to_commit())
            .map_err(git("the repository has no commit to start a worktree from"))?;
        let dir = real.join(".cadre").join("worktrees");
        std::fs::create_dir_all(&dir).map_err(fs("the worktrees' directory"))?;
        let ignore = dir.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(&ignore, "*\n").map_err(fs("the worktrees' .gitignore"))?;
        }
        let path = dir.join(name);
        let branch = repo
            .branch(&format!("cadre-wt/{name}"), &head, false)
            .map_err(git("the worktree's branch"))?;
        let mut options = WorktreeAddOptions::new();
        options.reference(Some(branch.get()));
        repo.worktree(name, &path, Some(&options))
            .map_err(git("the worktree"))?;
        let workspace = path.join(&inner);
        std::fs::create_dir_all(&workspace).map_err(fs("the step's workspace in the worktree"))?;
        Ok(Worktree {
            name: name.to_string(),
            path,
            workspace,
            repo: root,
            inner,
            base: head.id(),
        })
    }

    /// Brings the worktree's changes back into the repository's working
    /// directory: every changed file (relative to the repository), or
    /// nothing.
    pub fn merge(&self, rules: &MergeRules) -> Result<Vec<String>, MergeError> {
        let failed = MergeError::Failed;
        let tree = Repository::open(&self.path).map_err(|e| failed(err("the worktree")(e)))?;
        let base = tree
            .find_commit(self.base)
            .and_then(|c| c.tree())
            .map_err(|e| failed(err("the worktree's starting commit")(e)))?;
        let mut options = DiffOptions::new();
        options
            .include_untracked(true)
            .recurse_untracked_dirs(true)
            .include_typechange(true);
        let diff = tree
            .diff_tree_to_workdir(Some(&base), Some(&mut options))
            .map_err(|e| failed(err("the worktree's changes")(e)))?;
        let mut changes: Vec<(String, Option<Vec<u8>>)> = Vec::new();
        let mut conflicts = Vec::new();
        let mut refused = Vec::new();
        for delta in diff.deltas() {
            let deleted = delta.status() == Delta::Deleted;
            let file = if deleted {
                delta.old_file()
            } else {
                delta.new_file()
            };
            let Some(rel) = file.path() else {
                continue;
            };
            let name = rel.to_string_lossy().into_owned();
            if let Some(why) = refusal(rel, &self.inner, &self.repo, rules) {
                refused.push(format!("{name} ({why})"));
                continue;
            }
            let theirs = self.path.join(rel);
            if behind_symlink(&self.path, rel.parent().unwrap_or(Path::new(""))) {
                refused.push(format!("{name} (behind a symlink in the worktree)"));
                continue;
            }
            let new = if deleted {
                None
            } else {
                match std::fs::symlink_metadata(&theirs) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        refused.push(format!("{name} (a symlink, never followed)"));
                        continue;
                    }
                    Ok(meta) if meta.is_dir() => {
                        refused.push(format!(
                            "{name} (a directory git does not look into, such as a nested repository)"
                        ));
                        continue;
                    }
                    Ok(_) => Some(std::fs::read(&theirs).map_err(|e| failed(io(&name)(e)))?),
                    Err(e) => return Err(failed(io(&name)(e))),
                }
            };
            let old = base
                .get_path(rel)
                .ok()
                .and_then(|entry| entry.to_object(&tree).ok()?.into_blob().ok())
                .map(|blob| blob.content().to_vec());
            let ours = self.repo.join(rel);
            if behind_symlink(&self.repo, rel) {
                refused.push(format!("{name} (behind a symlink in the workspace)"));
                continue;
            }
            let now = match std::fs::read(&ours) {
                Ok(bytes) => Some(bytes),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
                Err(e) => return Err(failed(io(&name)(e))),
            };
            if now == new {
                continue;
            }
            if now != old {
                conflicts.push(name);
                continue;
            }
            changes.push((name, new));
        }
        if !refused.is_empty() {
            refused.sort();
            return Err(MergeError::Refused(refused));
        }
        if !conflicts.is_empty() {
            conflicts.sort();
            return Err(MergeError::Conflict(conflicts));
        }
        let mut merged = Vec::new();
        for (name, new) in changes {
            let ours = self.repo.join(&name);
            match new {
                Some(bytes) => {
                    if let Some(dir) = ours.parent() {
                        std::fs::create_dir_all(dir).map_err(|e| failed(io(&name)(e)))?;
                    }
                    std::fs::write(&ours, bytes).map_err(|e| failed(io(&name)(e)))?;
                    if let Ok(meta) = std::fs::metadata(self.path.join(&name)) {
                        let _ = std::fs::set_permissions(&ours, meta.permissions());
                    }
                }
                None => match std::fs::remove_file(&ours) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(failed(io(&name)(e))),
                },
            }
            merged.push(name);
        }
        merged.sort();
        Ok(merged)
    }

    /// Removes the worktree, its git administration and its branch.
    pub fn remove(&self) -> Result<(), WorktreeError> {
        std::fs::remove_dir_all(&self.path).map_err(fs("the worktree"))?;
        let repo = Repository::open(&self.repo).map_err(git("the repository"))?;
        if let Ok(worktree) = repo.find_worktree(&self.name) {
            let mut options = git2::WorktreePruneOptions::new();
            options.valid(true).working_tree(true);
            worktree
                .prune(Some(&mut options))
                .map_err(git("the worktree's administration"))?;
        }
        if let Ok(mut branch) = repo.find_branch(&self.branch(), BranchType::Local) {
            branch.delete().map_err(git("the worktree's branch"))?;
        }
        Ok(())
    }
}

/// What a merge may bring back into the workspace: what the step's own
/// writes may reach.
#[derive(Debug, Clone, Default)]
pub struct MergeRules {
    /// The step's file scopes, globs relative to the workspace: a file
    /// comes back only if it matches one glob of every scope (none: the
    /// whole workspace).
    pub scopes: Vec<Vec<String>>,
    /// cadre's protected roots (its data and configuration), besides
    /// every `.git` and `.cadre`.
    pub protected: ProtectedPaths,
}

/// Why a changed file at `rel` (relative to the repository at `repo`, the
/// workspace at `inner` in it) may not come back, if it may not: judged as
/// the tool layer judges a write (`permission::protected`, the file-scope
/// gate), lexically; symlinks are the merge's to look at.
pub fn refusal(rel: &Path, inner: &Path, repo: &Path, rules: &MergeRules) -> Option<String> {
    if rel.as_os_str().is_empty() || rel.components().any(|c| !matches!(c, Component::Normal(_))) {
        return Some("not a plain path inside the repository".into());
    }
    if let Some(why) = rules.protected.area(&repo.join(rel), repo) {
        return Some(format!("protected: {why}"));
    }
    let Ok(in_workspace) = rel.strip_prefix(inner) else {
        return Some("outside the step's workspace".into());
    };
    let inside = rules.scopes.iter().all(|scope| {
        scope.iter().any(|glob| {
            globset::GlobBuilder::new(glob)
                .literal_separator(true)
                .build()
                .is_ok_and(|g| g.compile_matcher().is_match(in_workspace))
        })
    });
    if !inside {
        let shown: Vec<String> = rules.scopes.iter().map(|s| s.join(", ")).collect();
        return Some(format!(
            "outside the step's file scope [{}]",
            shown.join("] and [")
        ));
    }
    None
}

/// Whether a directory on the way from `root` to `rel`, or `rel` itself,
/// is a symlink (a merge never writes through one).
fn behind_symlink(root: &Path, rel: &Path) -> bool {
    let mut here = root.to_path_buf();
    rel.components().any(|c| {
        here.push(c);
        std::fs::symlink_metadata(&here).is_ok_and(|m| m.file_type().is_symlink())
    })
}

#[cfg(test)]
mod tests;
