//! The sandbox's parts on their own; `hostile` runs attacks through the
//! real runner with the reader bypassed.

mod hostile;
mod walls;

use std::path::{Path, PathBuf};

use ::landlock::{ABI, LandlockStatus, RulesetStatus};
use pretty_assertions::assert_eq;

use super::landlock::status_of;
use super::*;
use crate::mode::Mode;
use crate::permission::Posture;

#[test]
fn reach_follows_mode_then_posture() {
    fn check(mode: Mode, posture: Posture, expected: Reach) {
        assert_eq!(Reach::of(mode, posture), expected, "{mode} {posture}");
    }
    use Posture::*;
    for posture in [Never, Suggest, Auto, Bypass] {
        check(Mode::Plan, posture, Reach::ReadOnly);
    }
    for mode in [Mode::Work, Mode::Operate] {
        check(mode, Never, Reach::ReadOnly);
        check(mode, Suggest, Reach::Workspace);
        check(mode, Auto, Reach::Workspace);
        check(mode, Bypass, Reach::Everywhere);
    }
}

#[test]
fn environment_keeps_only_the_allow_list_and_never_what_runs_code() {
    fn check(vars: &[(&str, &str)], extra: &[&str], expected: &[&str]) {
        let vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        let extra: Vec<String> = extra.iter().map(|e| e.to_string()).collect();
        let kept: Vec<String> = inherited(vars, &extra)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(kept, expected);
    }
    check(
        &[
            ("PATH", "/bin"),
            ("HOME", "/h"),
            ("LC_ALL", "C"),
            ("OPENAI_API_KEY", "sk"),
            ("BASH_ENV", "/evil"),
            ("BASH_FUNC_ls%%", "() { rm -rf .; }"),
            ("PS4", "$(id)"),
            ("TMPDIR", "/tmp"),
        ],
        &[],
        &["PATH", "HOME", "LC_ALL"],
    );
    // Configured names pass; the dangerous ones never do.
    check(
        &[("MY_TOOL", "1"), ("BASH_ENV", "/evil"), ("CDPATH", "/")],
        &["MY_TOOL", "BASH_ENV", "CDPATH"],
        &["MY_TOOL", "PATH"],
    );
    // Nor does the cluster secret, configured or not.
    check(
        &[("CADRE_CLUSTER_SECRET", "s")],
        &["CADRE_CLUSTER_SECRET"],
        &["PATH"],
    );
    assert_eq!(
        inherited(std::iter::empty(), &[]),
        vec![("PATH".to_string(), DEFAULT_PATH.to_string())]
    );
}

#[test]
fn capture_keeps_head_and_tail_and_counts_the_rest() {
    fn check(pushes: &[&str], expected: &str, dropped: u64) {
        let mut capture = Capture::new(4, 3);
        for push in pushes {
            capture.push(push.as_bytes());
        }
        assert_eq!(
            (capture.render(), capture.dropped()),
            (expected.to_string(), dropped),
            "{pushes:?}"
        );
    }
    check(&[], "", 0);
    check(&["abc"], "abc", 0);
    check(&["abcdefg"], "abcdefg", 0);
    check(&["abcdefgh"], "abcd\n[... 1 bytes omitted ...]\nfgh", 1);
    check(
        &["ab", "cd", "ef", "gh", "ij"],
        "abcd\n[... 3 bytes omitted ...]\nhij",
        3,
    );
    check(
        &["abcd", "0123456789"],
        "abcd\n[... 7 bytes omitted ...]\n789",
        7,
    );
    check(
        &["a\n", "bcdefghijk"],
        "a\nbc\n[... 5 bytes omitted ...]\nijk",
        5,
    );
}

#[test]
fn capture_memory_stays_bounded_whatever_is_pushed() {
    let mut capture = Capture::new(1024, 1024);
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..1024 {
        capture.push(&chunk);
    }
    assert_eq!(capture.total(), 64 * 1024 * 1024);
    assert_eq!(capture.dropped(), 64 * 1024 * 1024 - 2048);
    assert!(capture.render().len() < 2200);
}

#[test]
fn cover_grants_everything_around_protected_paths_but_no_symlink() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path().canonicalize().unwrap();
    for dir in ["a/b/protected/inner", "a/b/sibling", "a/c", "d"] {
        std::fs::create_dir_all(r.join(dir)).unwrap();
    }
    std::fs::write(r.join("a/file"), "x").unwrap();
    std::os::unix::fs::symlink(r.join("a/b/protected"), r.join("a/link")).unwrap();
    let check = |protected: &[&str], expected: &[&str]| {
        let protected: Vec<PathBuf> = protected.iter().map(|p| r.join(p)).collect();
        let mut got: Vec<String> = cover(&r, &protected)
            .iter()
            .map(|p| p.strip_prefix(&r).unwrap().display().to_string())
            .collect();
        got.sort();
        assert_eq!(got, expected, "{protected:?}");
    };
    check(&[], &[""]);
    check(&["a/b/protected"], &["a/b/sibling", "a/c", "a/file", "d"]);
    check(&["a/b/protected", "d"], &["a/b/sibling", "a/c", "a/file"]);
    // A protected path that does not exist yet still splits its ancestors.
    check(&["a/new/x"], &["a/b", "a/c", "a/file", "d"]);
    check(&[""], &[]);
}

#[test]
fn policy_never_grants_a_protected_path() {
    let root = tempfile::tempdir().unwrap();
    let r = root.path().canonicalize().unwrap();
    for dir in ["ws/sub", "data/sessions/s/tmp", "cache"] {
        std::fs::create_dir_all(r.join(dir)).unwrap();
    }
    let config = SandboxConfig {
        writable_roots: vec![r.join("cache"), r.clone()],
        protected: vec![r.join("data")],
        ..SandboxConfig::default()
    };
    let tmp = r.join("data/sessions/s/tmp");
    let check = |mode: Mode, posture: Posture, expected: &[&str]| {
        let policy = Policy::resolve(mode, posture, &r.join("ws"), &tmp, &config);
        let mut got: Vec<String> = policy.writable.iter().map(|p| shown(&r, p)).collect();
        got.sort();
        assert_eq!(got, expected, "{mode} {posture}");
        assert_eq!(policy.protected, vec![r.join("data")]);
    };
    let tmp_and_null = ["/dev/null", "data/sessions/s/tmp"];
    check(Mode::Plan, Posture::Bypass, &tmp_and_null);
    check(Mode::Work, Posture::Never, &tmp_and_null);
    // A writable root that contains the data directory is split around it.
    check(
        Mode::Work,
        Posture::Suggest,
        &[
            "/dev/null",
            "cache",
            "cache",
            "data/sessions/s/tmp",
            "ws",
            "ws",
        ],
    );
}

fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .map_or_else(|_| path.display().to_string(), |p| p.display().to_string())
}

#[test]
fn status_says_unavailable_whenever_nothing_was_enforced() {
    fn check(ruleset: RulesetStatus, landlock: LandlockStatus, expected: &str) {
        assert_eq!(status_of(&ruleset, landlock).to_string(), expected);
    }
    let available = |abi| LandlockStatus::Available {
        effective_abi: abi,
        kernel_abi: None,
    };
    check(
        RulesetStatus::FullyEnforced,
        available(ABI::V7),
        "landlock-abi-7",
    );
    check(
        RulesetStatus::PartiallyEnforced,
        available(ABI::V3),
        "landlock-abi-3 (partial)",
    );
    check(
        RulesetStatus::NotEnforced,
        available(ABI::V7),
        "unavailable: the kernel enforced none of the requested rights",
    );
    assert!(
        status_of(&RulesetStatus::NotEnforced, LandlockStatus::NotImplemented)
            .to_string()
            .starts_with("unavailable: this kernel has no Landlock")
    );
    assert!(
        status_of(&RulesetStatus::NotEnforced, LandlockStatus::NotEnabled)
            .to_string()
            .starts_with("unavailable: Landlock is built into this kernel but not enabled")
    );
}

#[test]
fn default_writable_roots_are_caches_not_binaries() {
    let roots = default_writable_roots(Path::new("/h"), None);
    let writable = |path: &str| roots.iter().any(|r| Path::new(path).starts_with(r));
    assert!(writable(
        "/h/.cargo/registry/cache/index.crates.io-x/serde-1.0.0.crate"
    ));
    assert!(writable(
        "/h/.cargo/registry/index/index.crates.io-x/config.json"
    ));
    assert!(writable("/h/.cache/pip"));
    // Code that runs later outside the sandbox: binaries, toolchains, and
    // the unpacked sources whose `build.rs` a later build runs.
    for code in [
        "/h/.cargo/bin/cargo-x",
        "/h/.cargo/config.toml",
        "/h/.rustup/toolchains",
        "/h/.cargo/registry/src/index.crates.io-x/serde-1.0.0/build.rs",
        "/h/.cargo/git/checkouts/x/abc/build.rs",
        "/h/go/pkg/mod/github.com/x/y@v1/main.go",
    ] {
        assert!(!writable(code), "{code} is writable");
    }
    let custom = default_writable_roots(Path::new("/h"), Some(Path::new("/c")));
    assert!(custom.contains(&PathBuf::from("/c/git/db")));
}

/// A workspace's `.git` (or an ancestor's) that is a FIFO, as an unpacked
/// archive can carry: resolving the policy reads no such file, so it never
/// blocks.
#[test]
fn a_fifo_in_place_of_a_git_file_never_blocks_the_policy() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("repo/ws");
    std::fs::create_dir_all(&ws).unwrap();
    for fifo in [ws.join(".git"), dir.path().join("repo/.git")] {
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
    }
    let (done, finished) = std::sync::mpsc::channel();
    let workspace = ws.clone();
    std::thread::spawn(move || {
        let config = SandboxConfig::default();
        let policy = Policy::resolve(
            Mode::Work,
            Posture::Bypass,
            &workspace,
            &workspace.join("tmp"),
            &config,
        );
        let _ = done.send(policy.read_only);
    });
    let read_only = finished
        .recv_timeout(std::time::Duration::from_secs(5))
        .expect("the policy was resolved without reading the FIFOs");
    assert_eq!(read_only, [ws.join(".git"), ws.join(".cadre")]);
}
