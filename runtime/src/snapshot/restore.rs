//! The difference between the workspace now and a snapshot, and applying
//! it. Writes never follow a symlink: a directory on the way that is now a
//! link or a file is replaced by a real directory, and a link where a file
//! goes is removed first, so a restore cannot be led out of the workspace.

use std::io::ErrorKind;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};

use git2::{Delta, DiffOptions, Oid, Repository};
use serde::Serialize;

use super::SnapshotError;

/// What a restore did (or, in a dry run, would do). Paths are relative to
/// the workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RestoreReport {
    /// The snapshot restored.
    pub snapshot: String,
    /// The snapshot of the workspace taken just before, which undoes this
    /// restore; `None` in a dry run.
    pub before: Option<String>,
    /// Files changed since the snapshot, put back.
    pub restored: Vec<String>,
    /// Files deleted since the snapshot, recreated.
    pub recreated: Vec<String>,
    /// Files created since the snapshot, removed.
    pub removed: Vec<String>,
    /// Paths that could not be put back, and why.
    pub skipped: Vec<(String, String)>,
    /// The blobs to write, by path; not reported.
    #[serde(skip)]
    writes: Vec<(String, Oid, u32)>,
}

impl RestoreReport {
    /// The `workspace.restored` event that reports it.
    pub fn into_event(self, dry_run: bool) -> crate::protocol::Event {
        crate::protocol::Event::WorkspaceRestored {
            snapshot: self.snapshot,
            before: self.before,
            dry_run,
            restored: self.restored,
            recreated: self.recreated,
            removed: self.removed,
            skipped: self
                .skipped
                .into_iter()
                .map(|(path, why)| format!("{path}: {why}"))
                .collect(),
        }
    }

    /// The note a restore leaves in the conversation, so the model knows
    /// the files it read or edited before may have changed back. The
    /// conversation is never rewritten: the note is added after it. `None`
    /// when the workspace already matched the snapshot.
    pub fn note(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let short = |id: &str| id.chars().take(12).collect::<String>();
        let mut note = format!(
            "[cadre] The workspace was restored to snapshot {}",
            short(&self.snapshot)
        );
        if let Some(before) = &self.before {
            note.push_str(&format!(
                " (the state before it is snapshot {})",
                short(before)
            ));
        }
        note.push_str(". Files read or edited earlier in this conversation may differ now; read them again before relying on them.");
        for (what, paths) in [
            ("Put back", &self.restored),
            ("Recreated", &self.recreated),
            ("Removed", &self.removed),
        ] {
            if paths.is_empty() {
                continue;
            }
            let shown: Vec<&str> = paths.iter().take(NOTE_PATHS).map(String::as_str).collect();
            note.push_str(&format!("\n{what}: {}", shown.join(", ")));
            if paths.len() > NOTE_PATHS {
                note.push_str(&format!(" and {} more", paths.len() - NOTE_PATHS));
            }
        }
        Some(note)
    }

    /// Whether the workspace already matched the snapshot.
    pub fn is_empty(&self) -> bool {
        self.restored.is_empty()
            && self.recreated.is_empty()
            && self.removed.is_empty()
            && self.skipped.is_empty()
    }
}

/// How many paths of each kind a restore's note names.
const NOTE_PATHS: usize = 20;

/// What turns tree `now` into tree `target`.
/// A file the snapshot holds that is missing from `now` but on disk (it
/// grew over the cap, or is ignored now) counts as restored, not recreated.
pub(super) fn plan(
    repo: &Repository,
    root: &Path,
    now: Oid,
    target: Oid,
) -> Result<RestoreReport, SnapshotError> {
    let (now, target) = (repo.find_tree(now)?, repo.find_tree(target)?);
    let mut options = DiffOptions::new();
    options.include_typechange(true);
    let diff = repo.diff_tree_to_tree(Some(&now), Some(&target), Some(&mut options))?;
    let mut report = RestoreReport::default();
    let shown = |path: Option<&Path>| path.map(|p| p.display().to_string()).unwrap_or_default();
    for delta in diff.deltas() {
        let (old, new) = (delta.old_file(), delta.new_file());
        match delta.status() {
            Delta::Added => {
                let path = shown(new.path());
                report
                    .writes
                    .push((path.clone(), new.id(), new.mode().into()));
                match std::fs::symlink_metadata(root.join(&path)) {
                    Ok(_) => report.restored.push(path),
                    Err(_) => report.recreated.push(path),
                }
            }
            Delta::Deleted => report.removed.push(shown(old.path())),
            Delta::Modified | Delta::Typechange => {
                let path = shown(new.path());
                report
                    .writes
                    .push((path.clone(), new.id(), new.mode().into()));
                report.restored.push(path);
            }
            // Without rename detection and with two trees, git reports
            // nothing else; anything else is left alone and said so.
            other => report
                .skipped
                .push((shown(new.path()), format!("{other:?}"))),
        }
    }
    Ok(report)
}

/// Removes what the snapshot did not have, then writes what it had.
pub(super) fn apply(
    repo: &Repository,
    root: &Path,
    report: &mut RestoreReport,
) -> Result<(), SnapshotError> {
    let mut removed = std::mem::take(&mut report.removed);
    // Deepest first, so emptied directories can go too.
    removed.sort_by_key(|p| std::cmp::Reverse(p.matches('/').count()));
    for path in &removed {
        match remove(root, Path::new(path)) {
            Ok(()) => report.removed.push(path.clone()),
            Err(why) => report.skipped.push((path.clone(), why)),
        }
    }
    report.removed.sort();
    for (path, id, mode) in std::mem::take(&mut report.writes) {
        let blob = repo.find_blob(id)?;
        if let Err(why) = write(root, Path::new(&path), blob.content(), mode) {
            report.restored.retain(|p| p != &path);
            report.recreated.retain(|p| p != &path);
            report.skipped.push((path, why));
        }
    }
    Ok(())
}

/// Only plain relative paths: a tree never holds anything else, but a
/// restore must not be led out of the workspace if one did.
fn parts(path: &Path) -> Result<Vec<&std::ffi::OsStr>, String> {
    path.components()
        .map(|c| match c {
            Component::Normal(part) => Ok(part),
            _ => Err(format!("'{}' is not a plain relative path", path.display())),
        })
        .collect()
}

fn remove(root: &Path, path: &Path) -> Result<(), String> {
    let parts = parts(path)?;
    let target = real_parent(root, &parts)?.map(|dir| dir.join(parts[parts.len() - 1]));
    let Some(target) = target else {
        // A directory on the way is gone or is not a directory: the file
        // is not there.
        return Ok(());
    };
    match std::fs::remove_file(&target) {
        Ok(()) => {}
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e.to_string()),
    }
    // Directories the removal emptied go too, up to the workspace root.
    let mut dir = target.parent().map(Path::to_path_buf);
    while let Some(d) = dir.filter(|d| d.starts_with(root) && d != root) {
        if std::fs::remove_dir(&d).is_err() {
            break;
        }
        dir = d.parent().map(Path::to_path_buf);
    }
    Ok(())
}

/// The real directory `parts` (less its last) leads to under `root`,
/// following no symlink; `None` when a part is missing or not a directory.
fn real_parent(root: &Path, parts: &[&std::ffi::OsStr]) -> Result<Option<PathBuf>, String> {
    let mut dir = root.to_path_buf();
    for part in &parts[..parts.len().saturating_sub(1)] {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Ok(None),
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(Some(dir))
}

fn write(root: &Path, path: &Path, content: &[u8], mode: u32) -> Result<(), String> {
    let parts = parts(path)?;
    let Some((name, dirs)) = parts.split_last() else {
        return Err("an empty path".into());
    };
    let mut dir = root.to_path_buf();
    for part in dirs {
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => continue,
            // A link or a file where the snapshot had a directory: it came
            // after the snapshot, and writing through it could leave the
            // workspace.
            Ok(_) => std::fs::remove_file(&dir).map_err(|e| format!("{}: {e}", dir.display()))?,
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e.to_string()),
        }
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let target = dir.join(name);
    match std::fs::symlink_metadata(&target) {
        Ok(meta) if meta.is_dir() => {
            return Err(
                "a directory is in the way (it holds files the snapshot does not track)".into(),
            );
        }
        Ok(_) => std::fs::remove_file(&target).map_err(|e| e.to_string())?,
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) => return Err(e.to_string()),
    }
    match mode {
        0o120000 => {
            let link = std::ffi::OsStr::from_bytes(content);
            std::os::unix::fs::symlink(link, &target).map_err(|e| e.to_string())
        }
        0o100644 | 0o100755 => {
            std::fs::write(&target, content).map_err(|e| e.to_string())?;
            let bits = if mode == 0o100755 { 0o755 } else { 0o644 };
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(bits))
                .map_err(|e| e.to_string())
        }
        _ => Err(format!(
            "a nested repository (mode {mode:o}) is not restored"
        )),
    }
}
