use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use sha2::{Digest, Sha256};

use super::*;

/// A workspace, a data directory and the snapshots between them.
struct Bed {
    _dir: tempfile::TempDir,
    ws: PathBuf,
    data: PathBuf,
    snapshots: Snapshots,
}

impl Bed {
    fn new(cap: u64) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws").canonicalize().unwrap_or_else(|_| {
            std::fs::create_dir(dir.path().join("ws")).unwrap();
            dir.path().join("ws").canonicalize().unwrap()
        });
        let data = dir.path().join("data");
        let snapshots = Snapshots::new(&data, &ws, cap);
        Self {
            _dir: dir,
            ws,
            data,
            snapshots,
        }
    }

    fn write(&self, path: &str, text: &str) {
        let path = self.ws.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn take(&self, turn: u64) -> Taken {
        self.snapshots.take(&mark("s1", Some(turn))).unwrap()
    }
}

fn mark(session: &str, turn: Option<u64>) -> Mark {
    Mark {
        session: session.into(),
        agent: "main".into(),
        turn,
        label: format!("before turn {turn:?}"),
    }
}

/// Every file under `root` (`.git` included when `with_git`), by path:
/// its kind, mode and content hash.
fn digest(root: &Path, with_git: bool) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            if !with_git && rel.split('/').any(|p| p == ".git") {
                continue;
            }
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(rel, format!("link {}", target.display()));
            } else if meta.is_dir() {
                out.insert(rel, "dir".into());
                stack.push(path);
            } else {
                let hash = Sha256::digest(std::fs::read(&path).unwrap());
                let mode = meta.permissions().mode() & 0o111;
                out.insert(rel, format!("file {mode:o} {hash:x}"));
            }
        }
    }
    out
}

/// A workspace with tracked, ignored, executable and nested files; with a
/// `.git` of the user's own when `user_git`.
fn seeded(user_git: bool) -> Bed {
    let bed = Bed::new(DEFAULT_MAX_FILE_BYTES);
    bed.write(".gitignore", "*.log\ntarget/\n");
    bed.write("src/lib.rs", "pub fn a() {}\n");
    bed.write("src/deep/mod.rs", "mod x;\n");
    bed.write("README.md", "hello\n");
    bed.write("build.log", "ignored at first\n");
    bed.write("target/out.bin", "ignored build output\n");
    bed.write("run.sh", "#!/bin/sh\necho hi\n");
    std::fs::set_permissions(
        bed.ws.join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    std::os::unix::fs::symlink("src/lib.rs", bed.ws.join("lib-link")).unwrap();
    if user_git {
        let repo = git2::Repository::init(&bed.ws).unwrap();
        let mut index = repo.index().unwrap();
        index
            .add_all(["*"], git2::IndexAddOption::DEFAULT, None)
            .unwrap();
        index.write().unwrap();
        let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
        let sig = git2::Signature::now("u", "u@example.com").unwrap();
        repo.commit(Some("HEAD"), &sig, &sig, "init", &tree, &[])
            .unwrap();
    }
    bed
}

/// What a turn does: edits, creates, deletes, and touches ignored files.
fn wreck(bed: &Bed) {
    bed.write("src/lib.rs", "pub fn a() { broken }\n");
    bed.write("src/new.rs", "created after\n");
    bed.write("notes/todo.md", "created in a new directory\n");
    std::fs::remove_file(bed.ws.join("README.md")).unwrap();
    std::fs::remove_dir_all(bed.ws.join("src/deep")).unwrap();
    std::fs::set_permissions(
        bed.ws.join("run.sh"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    bed.write("build.log", "ignored, changed after\n");
    bed.write("fresh.log", "ignored, created after\n");
}

/// The scenario for one kind of workspace: snapshot, wreck, restore; the
/// tracked files come back exactly, ignored files and the user's `.git`
/// stay as they were.
fn check_restore_brings_back_the_tree(user_git: bool) {
    let bed = seeded(user_git);
    let git_before = user_git.then(|| digest(&bed.ws.join(".git"), true));
    let first = bed.take(1);
    assert!(first.new);
    let before = digest(&bed.ws, false);

    wreck(&bed);
    let ignored_after = [
        ("build.log", digest(&bed.ws, false)["build.log"].clone()),
        ("fresh.log", digest(&bed.ws, false)["fresh.log"].clone()),
    ];
    let report = bed
        .snapshots
        .restore(&first.id[..8], Some(&mark("s1", None)))
        .unwrap();
    assert_eq!(
        (
            report.restored,
            report.recreated,
            report.removed,
            report.skipped
        ),
        (
            vec!["run.sh".to_string(), "src/lib.rs".to_string()],
            vec!["README.md".to_string(), "src/deep/mod.rs".to_string()],
            vec!["notes/todo.md".to_string(), "src/new.rs".to_string()],
            vec![],
        ),
        "user_git = {user_git}"
    );
    let mut expected = before;
    for (path, hash) in ignored_after {
        expected.insert(path.to_string(), hash);
    }
    assert_eq!(digest(&bed.ws, false), expected, "user_git = {user_git}");
    // The same tree, by the side repository's own hash.
    let again = bed.take(2);
    let repo = git2::Repository::open_bare(bed.snapshots.git_dir()).unwrap();
    let tree = |id: &str| {
        repo.find_commit(git2::Oid::from_str(id).unwrap())
            .unwrap()
            .tree_id()
    };
    assert_eq!(tree(&again.id), tree(&first.id));
    if let Some(git_before) = git_before {
        assert_eq!(digest(&bed.ws.join(".git"), true), git_before);
    }
}

#[test]
fn restore_brings_back_the_exact_tree_in_a_git_repository() {
    check_restore_brings_back_the_tree(true);
}

#[test]
fn restore_brings_back_the_exact_tree_in_a_plain_directory() {
    check_restore_brings_back_the_tree(false);
}

#[test]
fn the_before_snapshot_undoes_a_restore() {
    let bed = seeded(false);
    let first = bed.take(1);
    wreck(&bed);
    let wrecked = digest(&bed.ws, false);
    let report = bed
        .snapshots
        .restore(&first.id, Some(&mark("s1", None)))
        .unwrap();
    let before = report.before.expect("a snapshot before the restore");
    bed.snapshots
        .restore(&before, Some(&mark("s1", None)))
        .unwrap();
    assert_eq!(digest(&bed.ws, false), wrecked);
}

#[test]
fn nothing_changed_makes_no_new_snapshot() {
    let bed = seeded(false);
    let first = bed.take(1);
    let second = bed.take(2);
    assert_eq!((second.id.as_str(), second.new), (first.id.as_str(), false));
    // Ignored files do not count as a change.
    bed.write("target/other.bin", "x");
    assert!(!bed.take(3).new);
    bed.write("src/lib.rs", "changed");
    let third = bed.take(4);
    assert!(third.new);
    let listed: Vec<(Option<u64>, usize)> = bed
        .snapshots
        .list(Some("s1"))
        .unwrap()
        .into_iter()
        .map(|s| (s.mark.turn, s.changed_since))
        .collect();
    assert_eq!(listed.len(), 2);
    assert!(listed.contains(&(Some(1), 1)), "{listed:?}");
    assert!(listed.contains(&(Some(4), 0)), "{listed:?}");
}

#[test]
fn a_dry_run_changes_nothing_and_reports_what_a_restore_would_do() {
    let bed = seeded(false);
    let first = bed.take(1);
    wreck(&bed);
    let wrecked = digest(&bed.ws, false);
    let dry = bed.snapshots.restore(&first.id, None).unwrap();
    assert_eq!(dry.before, None);
    assert_eq!(digest(&bed.ws, false), wrecked);
    let real = bed
        .snapshots
        .restore(&first.id, Some(&mark("s1", None)))
        .unwrap();
    assert_eq!(
        (dry.restored, dry.recreated, dry.removed),
        (real.restored, real.recreated, real.removed)
    );
}

#[test]
fn files_over_the_cap_are_not_recorded_and_not_removed() {
    let bed = Bed::new(16);
    bed.write("small.txt", "tiny");
    bed.write("big.bin", "more than sixteen bytes here");
    let first = bed.take(1);
    bed.write("small.txt", "tiny, but changed");
    bed.write("later-big.bin", "also more than sixteen bytes");
    let report = bed
        .snapshots
        .restore(&first.id, Some(&mark("s1", None)))
        .unwrap();
    // `small.txt` was recorded, so it comes back although it is over the
    // cap now; the files over the cap the snapshot never held stay.
    assert_eq!(
        (report.restored, report.recreated, report.removed),
        (vec!["small.txt".to_string()], vec![], vec![])
    );
    assert_eq!(
        std::fs::read_to_string(bed.ws.join("small.txt")).unwrap(),
        "tiny"
    );
    for name in ["big.bin", "later-big.bin"] {
        assert!(bed.ws.join(name).exists(), "{name}");
    }
}

#[test]
fn restore_does_not_write_through_a_symlinked_directory() {
    let bed = seeded(false);
    let first = bed.take(1);
    let outside = bed.data.parent().unwrap().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::remove_dir_all(bed.ws.join("src")).unwrap();
    std::os::unix::fs::symlink(&outside, bed.ws.join("src")).unwrap();
    bed.snapshots
        .restore(&first.id, Some(&mark("s1", None)))
        .unwrap();
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
    assert!(
        !std::fs::symlink_metadata(bed.ws.join("src"))
            .unwrap()
            .is_symlink()
    );
    assert_eq!(
        std::fs::read_to_string(bed.ws.join("src/lib.rs")).unwrap(),
        "pub fn a() {}\n"
    );
}

#[test]
fn snapshots_are_listed_per_session_and_found_by_prefix() {
    let bed = seeded(false);
    let a = bed.snapshots.take(&mark("alpha", Some(1))).unwrap();
    bed.write("src/lib.rs", "changed");
    let b = bed.snapshots.take(&mark("beta", Some(1))).unwrap();
    let sessions = |listed: Vec<SnapshotInfo>| -> Vec<String> {
        listed.into_iter().map(|s| s.mark.session).collect()
    };
    assert_eq!(
        sessions(bed.snapshots.list(Some("alpha")).unwrap()),
        ["alpha"]
    );
    let mut all = sessions(bed.snapshots.list(None).unwrap());
    all.sort();
    assert_eq!(all, ["alpha", "beta"]);
    assert_eq!(bed.snapshots.find(&b.id[..6]).unwrap().id, b.id);
    assert_eq!(bed.snapshots.find(&a.id).unwrap().mark.turn, Some(1));
    for bad in ["zz", "abc", "0000000000"] {
        assert!(
            matches!(bed.snapshots.find(bad), Err(SnapshotError::NotFound(_))),
            "{bad}"
        );
    }
}

#[test]
fn a_workspace_never_snapshotted_lists_nothing() {
    let bed = Bed::new(DEFAULT_MAX_FILE_BYTES);
    assert_eq!(bed.snapshots.list(None).unwrap(), Vec::new());
    assert!(matches!(
        bed.snapshots.restore("abcd", None),
        Err(SnapshotError::NotFound(_))
    ));
    assert!(!bed.snapshots.git_dir().exists());
}
