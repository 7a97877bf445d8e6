use std::path::PathBuf;

use pretty_assertions::assert_eq;

use super::*;

/// A repository with instructions at its root, in `src/` and in
/// `src/net/`, a workspace at `src/`, and the user's own file.
fn tree() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::TempDir::new().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir_all(root.join(".git")).unwrap();
    std::fs::create_dir_all(root.join("src/net")).unwrap();
    std::fs::write(root.join("AGENTS.md"), "root: run `make check`\n").unwrap();
    std::fs::write(root.join("src/AGENTS.md"), "src: no unwrap\n").unwrap();
    std::fs::write(root.join("src/net/AGENTS.md"), "net: mock the network\n").unwrap();
    let global = dir.path().join("config/AGENTS.md");
    std::fs::create_dir_all(global.parent().unwrap()).unwrap();
    std::fs::write(&global, "user: be brief\n").unwrap();
    (dir, root, global)
}

fn names(found: &Instructions, root: &Path) -> Vec<String> {
    found
        .files
        .iter()
        .map(|f| match f.strip_prefix(root) {
            Ok(rel) => rel.display().to_string(),
            Err(_) => "global".to_string(),
        })
        .collect()
}

#[test]
fn instructions_come_root_first_after_the_users_down_to_the_agents_directory() {
    let (_dir, root, global) = tree();
    let check = |global: Option<&Path>, workspace: &Path, dir: &Path, expected: &[&str]| {
        let found = Instructions::read(global, workspace, dir);
        assert_eq!(names(&found, &root), expected, "{}", dir.display());
        // In that order in the text too.
        let mut at = 0;
        for file in &found.files {
            let header = format!("--- {} ---", file.display());
            let here = found.text[at..].find(&header).expect("in order") + at;
            at = here + header.len();
        }
    };
    let src = root.join("src");
    check(
        Some(&global),
        &src,
        &src,
        &["global", "AGENTS.md", "src/AGENTS.md"],
    );
    // A sub-agent scoped to src/net gets that directory's too.
    check(
        None,
        &src,
        &src.join("net"),
        &["AGENTS.md", "src/AGENTS.md", "src/net/AGENTS.md"],
    );
    // A directory outside the workspace counts as the workspace.
    check(None, &src, &root, &["AGENTS.md", "src/AGENTS.md"]);
    // No repository: the workspace alone.
    std::fs::remove_dir_all(root.join(".git")).unwrap();
    check(None, &src, &src, &["src/AGENTS.md"]);
}

#[test]
fn the_text_is_capped_hashed_and_never_read_through_a_symlink() {
    let (dir, root, _global) = tree();
    let big = "x".repeat(MAX_BYTES + 100);
    std::fs::write(root.join("src/AGENTS.md"), &big).unwrap();
    let found = Instructions::read(None, &root.join("src"), &root.join("src/net"));
    assert!(found.truncated);
    assert!(found.text.len() <= MAX_BYTES + 200, "{}", found.text.len());
    assert!(
        found.text.ends_with("cut at 32 KiB]\n"),
        "{}",
        &found.text[found.text.len() - 60..]
    );
    assert_eq!(names(&found, &root), ["AGENTS.md", "src/AGENTS.md"]);
    // A symlink named AGENTS.md is not followed.
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "the secret").unwrap();
    std::fs::remove_file(root.join("src/AGENTS.md")).unwrap();
    std::os::unix::fs::symlink(&secret, root.join("src/AGENTS.md")).unwrap();
    let found = Instructions::read(None, &root.join("src"), &root.join("src"));
    assert!(!found.text.contains("the secret"));
    // The same text, the same hash; another text, another.
    let again = Instructions::read(None, &root.join("src"), &root.join("src"));
    assert_eq!(found.sha256, again.sha256);
    assert_eq!(found.sha256.len(), 64);
    std::fs::write(root.join("AGENTS.md"), "changed\n").unwrap();
    let changed = Instructions::read(None, &root.join("src"), &root.join("src"));
    assert_ne!(found.sha256, changed.sha256);
}

#[test]
fn a_scope_covers_the_deepest_directory_all_its_globs_share() {
    let ws = Path::new("/ws");
    let check = |globs: &[&str], expected: Option<&str>| {
        let globs: Vec<String> = globs.iter().map(|g| g.to_string()).collect();
        assert_eq!(
            scope_dir(ws, &globs),
            expected.map(PathBuf::from),
            "{globs:?}"
        );
    };
    check(&["src/net/**"], Some("/ws/src/net"));
    check(&["src/net/*.rs", "src/net/tls/**"], Some("/ws/src/net"));
    check(&["src/net/**", "src/db/**"], Some("/ws/src"));
    check(&["**/*.rs"], Some("/ws"));
    check(&["README.md"], Some("/ws"));
    check(&["../x/**"], Some("/ws"));
    check(&[], None);
}
