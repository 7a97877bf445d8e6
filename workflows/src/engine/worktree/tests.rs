use std::path::Path;

use git2::{BranchType, Repository, Signature};
use pretty_assertions::assert_eq;

use super::{MergeError, MergeRules, Worktree, WorktreeError, refusal};

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
        wt.merge(&MergeRules::default()),
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
        wt.merge(&MergeRules::default()),
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
    assert_eq!(
        wt.merge(&MergeRules::default()),
        Ok(vec!["sub/b.txt".into()])
    );
    assert_eq!(read(&dir.path().join("sub/b.txt")).as_deref(), Some("B\n"));
}

#[test]
fn a_workspace_outside_git_cannot_have_a_worktree() {
    let dir = tempfile::tempdir().unwrap();
    let why = Worktree::create(dir.path(), "r-0").unwrap_err();
    assert!(
        matches!(&why, WorktreeError::NotARepository(path) if path == dir.path()),
        "{why:?}"
    );
    assert!(why.to_string().contains("needs a git repository"), "{why}");
}

/// The names a generated path is made of: plain ones, the protected
/// control directories in the case spellings the tool layer treats as
/// protected, and the components that leave a plain path.
const NAMES: &[&str] = &[
    "a", "src", "x.txt", "git", "cadre", ".gitx", "y.git", ".git", ".GIT", ".Git", ".cadre",
    ".CADRE", ".Cadre", "..", ".",
];

/// What the tool layer would say of writing `parts` (under the workspace
/// at `inner`, with `scope`): refused or not, by its own rules written
/// out again.
fn expected(parts: &[&str], inner: &str, scope: Option<&str>) -> bool {
    // A `.` inside a path is no step at all (`a/./b` is `a/b`); leading,
    // or a `..` anywhere, it is not a plain path.
    if parts.contains(&"..") || parts[0] == "." {
        return true;
    }
    let parts: Vec<&str> = parts.iter().copied().filter(|p| *p != ".").collect();
    if parts
        .iter()
        .any(|p| p.eq_ignore_ascii_case(".git") || p.eq_ignore_ascii_case(".cadre"))
    {
        return true;
    }
    let path = parts.join("/");
    let Some(rest) = (if inner.is_empty() {
        Some(path.as_str())
    } else if path == inner {
        Some("")
    } else {
        path.strip_prefix(&format!("{inner}/"))
    }) else {
        return true;
    };
    match scope {
        None => false,
        Some("src/**") => !rest.starts_with("src/"),
        Some(other) => unreachable!("{other}"),
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

    /// A merge refuses exactly what a tool write would be refused:
    /// `.git` and `.cadre` at any depth and case, `..`, outside the
    /// workspace or the scope.
    #[test]
    fn a_merge_refuses_what_a_tool_write_may_not_reach(
        picks in proptest::collection::vec(0..NAMES.len(), 1..6),
        inner_sub in proptest::bool::ANY,
        scoped in proptest::bool::ANY,
    ) {
        let parts: Vec<&str> = picks.iter().map(|&i| NAMES[i]).collect();
        let inner = if inner_sub { "a" } else { "" };
        let scope = scoped.then_some("src/**");
        let rules = MergeRules {
            scopes: scope.map(|s| vec![vec![s.to_string()]]).unwrap_or_default(),
            ..MergeRules::default()
        };
        // Joined by hand: `Path::join` would read `..` and `.` as they are.
        let rel = std::path::PathBuf::from(parts.join("/"));
        let repo = Path::new("/r");
        let got = refusal(&rel, Path::new(inner), repo, &rules);
        proptest::prop_assert_eq!(got.is_some(), expected(&parts, inner, scope), "{:?}: {:?}", parts, got);
    }
}

#[test]
fn cadres_protected_roots_are_refused_too() {
    let repo = Path::new("/r");
    let rules = MergeRules {
        protected: cadre_runtime::permission::ProtectedPaths::new().data_dir("/r/data"),
        ..MergeRules::default()
    };
    let why = refusal(Path::new("data/s.db"), Path::new(""), repo, &rules).unwrap();
    assert!(why.contains("data directory"), "{why}");
    assert_eq!(
        refusal(Path::new("datax"), Path::new(""), repo, &rules),
        None
    );
}

/// Makes `dir` in the worktree a symlink to `to`.
fn link(to: &Path, at: &Path) {
    std::os::unix::fs::symlink(to, at).unwrap();
}

#[test]
fn a_merge_refuses_protected_out_of_scope_and_symlinked_files_and_brings_nothing_back() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret"), "s\n").unwrap();
    type Plant = fn(&Worktree, &Path);
    let cases: &[(&str, Plant, Option<&str>, &str)] = &[
        (
            "the next session's config",
            |wt, _| {
                std::fs::create_dir_all(wt.workspace.join(".cadre")).unwrap();
                std::fs::write(
                    wt.workspace.join(".cadre/config.local.toml"),
                    "posture = \"bypass\"\n",
                )
                .unwrap();
            },
            None,
            ".cadre/config.local.toml (protected: cadre's project configuration (.cadre))",
        ),
        (
            "a nested project's config (and a nested repository's, which git does not list)",
            |wt, _| {
                std::fs::create_dir_all(wt.workspace.join("x/.git")).unwrap();
                std::fs::write(
                    wt.workspace.join("x/.git/config"),
                    "[core]\nfsmonitor = sh x\n",
                )
                .unwrap();
                std::fs::create_dir_all(wt.workspace.join("y/z/.Cadre")).unwrap();
                std::fs::write(
                    wt.workspace.join("y/z/.Cadre/config.local.toml"),
                    "posture = \"bypass\"\n",
                )
                .unwrap();
            },
            None,
            "y/z/.Cadre/config.local.toml (protected: cadre's project configuration",
        ),
        (
            "project config spelled in capitals (and a hook, which git does not list)",
            |wt, _| {
                std::fs::create_dir_all(wt.workspace.join("sub/.GIT/hooks")).unwrap();
                std::fs::write(wt.workspace.join("sub/.GIT/hooks/pre-commit"), "sh\n").unwrap();
                std::fs::create_dir_all(wt.workspace.join("sub/.CADRE")).unwrap();
                std::fs::write(wt.workspace.join("sub/.CADRE/config.toml"), "x = 1\n").unwrap();
            },
            None,
            "sub/.CADRE/config.toml (protected: cadre's project configuration",
        ),
        (
            "a symlink pointing outside",
            |wt, outside| link(&outside.join("secret"), &wt.workspace.join("leak")),
            None,
            "leak (a symlink, never followed)",
        ),
        (
            "a directory replaced by a symlink",
            |wt, outside| {
                std::fs::remove_dir_all(wt.workspace.join("sub")).unwrap();
                link(outside, &wt.workspace.join("sub"));
            },
            None,
            "sub (a symlink, never followed)",
        ),
        (
            "a file outside the step's scope",
            |wt, _| std::fs::write(wt.workspace.join("sub/b.txt"), "B\n").unwrap(),
            Some("new/**"),
            "sub/b.txt (outside the step's file scope [new/**, a.txt])",
        ),
    ];
    for (i, (what, plant, scope, named)) in cases.iter().enumerate() {
        let dir = repo();
        let ws = dir.path();
        let wt = Worktree::create(ws, &format!("r-p-{i}")).unwrap();
        // A change that alone would come back, to show nothing does.
        std::fs::write(wt.workspace.join("a.txt"), "A\n").unwrap();
        std::fs::create_dir_all(wt.workspace.join("new")).unwrap();
        std::fs::write(wt.workspace.join("new/n.txt"), "n\n").unwrap();
        plant(&wt, outside.path());
        let rules = MergeRules {
            scopes: scope
                .map(|s| vec![vec![s.to_string(), "a.txt".to_string()]])
                .unwrap_or_default(),
            ..MergeRules::default()
        };
        let refused = match wt.merge(&rules) {
            Err(MergeError::Refused(files)) => files,
            other => panic!("{what}: {other:?}"),
        };
        assert!(
            refused.iter().any(|f| f.starts_with(named)),
            "{what}: {refused:?}"
        );
        assert_eq!(
            read(&ws.join("a.txt")).as_deref(),
            Some("a\n"),
            "{what}: nothing came back"
        );
        assert!(!ws.join("new").exists(), "{what}");
        assert!(!ws.join(".cadre/config.local.toml").exists(), "{what}");
        assert!(!ws.join("x").exists() && !ws.join("y").exists(), "{what}");
        assert!(!ws.join("leak").exists(), "{what}");
        assert!(
            !ws.join("sub/.GIT").exists() && !ws.join("sub/.CADRE").exists(),
            "{what}"
        );
        assert!(
            !ws.join("sub").is_symlink() && ws.join("sub/b.txt").exists(),
            "{what}"
        );
        assert_eq!(
            read(&ws.join("sub/b.txt")).as_deref(),
            Some("b\n"),
            "{what}"
        );
    }
}
