//! The workspace's tree now, as a snapshot records it: what `git add -A`
//! sees (`.gitignore` honoured, `.git` never entered), less files over the
//! per-file cap.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use git2::{Index, IndexAddOption, Oid, Repository};

/// A session id as a file or ref name: anything but ASCII letters, digits,
/// `-` and `.` becomes `_`.
pub(super) fn file_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The tree of the workspace now, through the session's own index, which
/// is kept between snapshots: files whose size and times did not change
/// are not read again.
pub(super) fn session_tree(
    repo: &Repository,
    git_dir: &Path,
    session: &str,
    max_file_bytes: u64,
) -> Result<Oid, git2::Error> {
    let dir = git_dir.join("cadre");
    std::fs::create_dir_all(&dir)
        .map_err(|e| git2::Error::from_str(&format!("{}: {e}", dir.display())))?;
    let mut index = Index::open(&dir.join(format!("index-{}", file_safe(session))))?;
    repo.set_index(&mut index)?;
    let mut index = repo.index()?;
    let tree = fill(repo, &mut index, max_file_bytes)?;
    index.write()?;
    Ok(tree)
}

/// The tree of the workspace now, through an index in memory (every file
/// is read): for listing and dry runs, which record nothing.
pub(super) fn scratch_tree(repo: &Repository, max_file_bytes: u64) -> Result<Oid, git2::Error> {
    let mut index = Index::new()?;
    repo.set_index(&mut index)?;
    let mut index = repo.index()?;
    fill(repo, &mut index, max_file_bytes)
}

fn fill(repo: &Repository, index: &mut Index, max_file_bytes: u64) -> Result<Oid, git2::Error> {
    let root = repo
        .workdir()
        .ok_or_else(|| git2::Error::from_str("the side repository has no work tree"))?
        .to_path_buf();
    let too_big = |path: &Path| {
        std::fs::symlink_metadata(root.join(path))
            .is_ok_and(|meta| meta.is_file() && meta.len() > max_file_bytes)
    };
    let mut skip_big = |path: &Path, _: &[u8]| i32::from(too_big(path));
    index.add_all(["*"], IndexAddOption::DEFAULT, Some(&mut skip_big))?;
    // Files recorded before that are now over the cap are dropped, not
    // refreshed; deleted files leave the index here.
    let mut grown = Vec::new();
    let mut refresh = |path: &Path, _: &[u8]| {
        if too_big(path) {
            grown.push(path.to_path_buf());
            1
        } else {
            0
        }
    };
    index.update_all(["*"], Some(&mut refresh))?;
    // Files recorded before that an edited `.gitignore` now ignores are
    // dropped too: what is ignored now is never restored over or removed.
    let ignored: Vec<PathBuf> = index
        .iter()
        .map(|entry| PathBuf::from(OsStr::from_bytes(&entry.path)))
        .filter(|path| repo.is_path_ignored(path).unwrap_or(false))
        .collect();
    for path in grown.iter().chain(&ignored) {
        index.remove_path(path)?;
    }
    index.write_tree()
}
