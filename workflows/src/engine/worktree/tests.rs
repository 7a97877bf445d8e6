use std::path::Path;

use git2::{BranchType, Repository, Signature};
use pretty_assertions::assert_eq;

use super::{MergeError, Worktree};

/// A repository with `a.txt` and `sub/b.txt` committed.
fn repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init(dir.path()).unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/b.txt"), "b\n").unwrap();
    let mut index = repo.index().unwrap();
    index
        .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
        .unwrap();
    index.write().unwrap();
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = Signature::now("t", "t@example.com").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
        .unwrap();
    dir
}

fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

#[test]
fn a_clean_merge_brings_changes_back_and_removes_the_worktree() {
    let dir = repo();
    let ws = dir.path();
    let wt = Worktree::create(ws, "r-x-0").unwrap();
    assert_eq!(read(&wt.workspace.join("a.txt")).as_deref(), Some("a\n"));
    std::fs::write(wt.workspace.join("a.txt"), "A\n").unwrap();
    std::fs::write(wt.workspace.join("new.txt"), "new\n").unwrap();
    std::fs::remove_file(wt.workspace.join("sub/b.txt")).unwrap();
    // A change in the workspace the step did not touch is no conflict.
    std::fs::write(ws.join("mine.txt"), "mine\n").unwrap();
    assert_eq!(
        wt.merge(),
        Ok(vec!["a.txt".into(), "new.txt".into(), "sub/b.txt".into()])
    );
    assert_eq!(read(&ws.join("a.txt")).as_deref(), Some("A\n"));
    assert_eq!(read(&ws.join("new.txt")).as_deref(), Some("new\n"));
    assert!(!ws.join("sub/b.txt").exists());
    assert_eq!(read(&ws.join("mine.txt")).as_deref(), Some("mine\n"));
    wt.remove().unwrap();
    assert!(!wt.path.exists());
    let repo = Repository::open(ws).unwrap();
    assert!(repo.find_worktree("r-x-0").is_err());
    assert!(repo.find_branch(&wt.branch(), BranchType::Local).is_err());
    // The worktrees stay out of the repository's status.
    assert!(
        repo.status_should_ignore(Path::new(".cadre/worktrees/r-x-1/a.txt"))
            .unwrap()
    );
}

#[test]
fn a_conflicting_merge_brings_nothing_back_and_names_the_files() {
    let dir = repo();
    let ws = dir.path();
    let wt = Worktree::create(ws, "r-y-0").unwrap();
    std::fs::write(wt.workspace.join("a.txt"), "step\n").unwrap();
    std::fs::write(wt.workspace.join("sub/b.txt"), "step\n").unwrap();
    std::fs::write(ws.join("sub/b.txt"), "someone else\n").unwrap();
    assert_eq!(
        wt.merge(),
        Err(MergeError::Conflict(vec!["sub/b.txt".into()]))
    );
    assert_eq!(
        read(&ws.join("a.txt")).as_deref(),
        Some("a\n"),
        "nothing came back"
    );
    assert_eq!(
        read(&wt.workspace.join("a.txt")).as_deref(),
        Some("step\n"),
        "kept"
    );
}

#[test]
fn a_workspace_below_the_repository_gets_the_same_place_in_the_worktree() {
    let dir = repo();
    let wt = Worktree::create(&dir.path().join("sub"), "r-z-0").unwrap();
    assert_eq!(wt.workspace, wt.path.join("sub"));
    assert!(
        wt.path.starts_with(
            dir.path()
                .canonicalize()
                .unwrap()
                .join("sub/.cadre/worktrees")
        )
    );
    std::fs::write(wt.workspace.join("b.txt"), "B\n").unwrap();
    assert_eq!(wt.merge(), Ok(vec!["sub/b.txt".into()]));
    assert_eq!(read(&dir.path().join("sub/b.txt")).as_deref(), Some("B\n"));
}

#[test]
fn a_workspace_outside_git_cannot_have_a_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let why = Worktree::create(dir.path(), "r-0").unwrap_err();
    assert!(why.contains("needs a git repository"), "{why}");
}
