//! Hostile commands through the real runner, with the reader bypassed: for
//! each policy, exactly the allowed paths change, with the namespace wall
//! and with the thread walls alone.
//!
//! Each test first checks that the sandbox is enforced where the kernel has
//! Landlock, and skips (saying so) only where it has not: a sandbox that
//! enforces nothing must not pass for one that holds.

use std::collections::BTreeMap;
use std::net::TcpListener;
use std::path::PathBuf;

use pretty_assertions::assert_eq;
use tempfile::TempDir;

use crate::mode::Mode;
use crate::permission::Posture;
use crate::sandbox::{
    CommandSpec, Finished, OutputLimits, Policy, SandboxConfig, WallState, inherited, run,
    sandbox_status, walls,
};

/// Whether the kernel has Landlock, read from its symbol table independently
/// of the crate; `None` when the table cannot be read.
fn kernel_has_landlock() -> Option<bool> {
    let symbols = std::fs::read_to_string("/proc/kallsyms").ok()?;
    Some(symbols.contains("sys_landlock_create_ruleset"))
}

/// True when the sandbox is enforced; false (after saying why) when the
/// kernel has no Landlock. Panics when the kernel has it but it is not
/// enforced.
fn enforced() -> bool {
    let status = sandbox_status();
    if status.is_enforced() {
        return true;
    }
    assert_ne!(
        kernel_has_landlock(),
        Some(true),
        "the kernel has Landlock but the sandbox status is '{status}'"
    );
    eprintln!("SKIPPED: no Landlock on this kernel ({status}); the sandbox cannot be tested");
    false
}

/// A temporary root with a workspace, a sibling outside it, a fake home,
/// cadre's data and configuration directories (protected) and a session
/// temp dir inside the data directory.
struct Scene {
    _root: TempDir,
    root: PathBuf,
    /// A file in the shared temp directory, outside the scene.
    tmp_mark: PathBuf,
}

impl Scene {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["ws/.git", "outside", "home", "data/sessions/s", "config"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        for (file, text) in [
            ("ws/file.txt", "ws\n"),
            ("ws/.git/config", "git\n"),
            ("outside/victim.txt", "victim\n"),
            ("home/.bashrc", "rc\n"),
            ("data/store.db", "db\n"),
            ("config/config.toml", "posture = 'never'\n"),
        ] {
            std::fs::write(root.join(file), text).unwrap();
        }
        std::os::unix::fs::symlink(root.join("outside"), root.join("ws/link_out")).unwrap();
        let tmp_mark = std::env::temp_dir().join(format!("cadre-hostile-{}", uuid::Uuid::new_v4()));
        Self {
            _root: dir,
            root,
            tmp_mark,
        }
    }

    /// Every path under the scene with its content, and the temp mark.
    fn tree(&self) -> BTreeMap<String, String> {
        let mut out = BTreeMap::new();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let rel = path.strip_prefix(&self.root).unwrap().display().to_string();
                let meta = std::fs::symlink_metadata(&path).unwrap();
                if meta.is_symlink() {
                    out.insert(
                        rel,
                        format!("-> {}", std::fs::read_link(&path).unwrap().display()),
                    );
                } else if meta.is_dir() {
                    out.insert(format!("{rel}/"), String::new());
                    stack.push(path);
                } else {
                    out.insert(rel, std::fs::read_to_string(&path).unwrap_or_default());
                }
            }
        }
        if let Ok(text) = std::fs::read_to_string(&self.tmp_mark) {
            out.insert("$TMP_MARK".into(), text);
        }
        out
    }

    async fn run(&self, mode: Mode, posture: Posture, script: &str) -> Finished {
        self.run_with(mode, posture, script, true).await
    }

    /// Runs `script`; with the namespace wall when `namespaces` (and the
    /// host has it), with the thread walls alone otherwise.
    async fn run_with(
        &self,
        mode: Mode,
        posture: Posture,
        script: &str,
        namespaces: bool,
    ) -> Finished {
        let config = SandboxConfig {
            protected: vec![self.root.join("data"), self.root.join("config")],
            namespaces,
            ..SandboxConfig::default()
        };
        let tmp = self.root.join("data/sessions/s/tmp");
        let ws = self.root.join("ws");
        let policy = Policy::resolve(mode, posture, &ws, &tmp, &config);
        let mut env = inherited(std::iter::empty(), &[]);
        for (name, path) in [
            ("HOME", self.root.join("home")),
            ("OUTSIDE", self.root.join("outside")),
            ("DATA", self.root.join("data")),
            ("CONFIG", self.root.join("config")),
            ("ROOT", self.root.clone()),
            ("TMP_MARK", self.tmp_mark.clone()),
        ] {
            env.push((name.into(), path.display().to_string()));
        }
        run(CommandSpec {
            script,
            cwd: &ws,
            policy: &policy,
            env: &env,
            tmp: &tmp,
            limits: OutputLimits {
                head: 4096,
                tail: 4096,
                kill_after: 1 << 20,
            },
            stdin: None,
        })
        .await
        .unwrap()
    }
}

impl Drop for Scene {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.tmp_mark);
    }
}

/// Whether this host gives commands their own namespaces.
fn namespaced() -> bool {
    walls()
        .iter()
        .any(|w| w.wall == "namespaces" && w.state == WallState::Enforced)
}

/// Runs `script` in a fresh scene, under the namespace wall (where the
/// host has it) and under the thread walls alone, and checks which paths
/// changed: `expected_changes` under both, plus `namespaced_too` under the
/// namespace wall (the workspace's `.cadre`, created before a writing
/// command so it can be bound read-only), and `threads_too` under the
/// thread walls alone (which cannot keep `.git` read-only in a writable
/// workspace: the gap `walls` reports).
async fn check(
    mode: Mode,
    posture: Posture,
    script: &str,
    expected_changes: &[&str],
    (namespaced_too, threads_too): (&[&str], &[&str]),
) {
    let mut variants = vec![false];
    if namespaced() {
        variants.push(true);
    }
    for namespaces in variants {
        let scene = Scene::new();
        let before = scene.tree();
        let finished = scene.run_with(mode, posture, script, namespaces).await;
        let after = scene.tree();
        let mut changed: Vec<&str> = before
            .keys()
            .chain(after.keys())
            .filter(|k| before.get(*k) != after.get(*k))
            .map(String::as_str)
            .collect();
        changed.sort();
        changed.dedup();
        let mut expected: Vec<&str> = expected_changes.to_vec();
        expected.extend(if namespaces {
            namespaced_too
        } else {
            threads_too
        });
        expected.sort();
        assert!(finished.confined, "{script}: not confined");
        assert_eq!(
            changed,
            expected,
            "{mode} {posture} (namespaces {namespaces}): {script}\nstderr: {}",
            finished.stderr.render()
        );
        if script.contains("TMPDIR") {
            assert!(
                finished.stdout.render().contains("tmp-ok"),
                "the temp dir is writable (namespaces {namespaces}): {}",
                finished.stderr.render()
            );
        }
    }
}

/// Attacks on everything outside the workspace; each is tried, whatever
/// the one before did.
const ESCAPES: &str = r#"
    echo pwned > "$OUTSIDE/new.txt"
    echo pwned >> "$OUTSIDE/victim.txt"
    echo pwned > "$HOME/.bashrc"
    echo pwned > "$TMP_MARK"
    echo pwned > link_out/victim.txt
    echo pwned > link_out/through-link.txt
    ln "$OUTSIDE/victim.txt" hard-link
    mv "$OUTSIDE/victim.txt" moved.txt
    truncate -s 0 "$OUTSIDE/victim.txt"
    rm -f "$OUTSIDE/victim.txt"
    mkdir "$ROOT/new-dir"
    true
"#;

#[tokio::test]
async fn read_only_policy_writes_nothing_but_the_temp_dir() {
    if !enforced() {
        return;
    }
    // The session's temp dir is made; a command's own temp dir inside it
    // (or its private /tmp) is gone when it ends.
    let tmp = "data/sessions/s/tmp/";
    for posture in [Posture::Never, Posture::Suggest, Posture::Bypass] {
        check(Mode::Plan, posture, ESCAPES, &[tmp], (&[], &[])).await;
    }
    check(Mode::Work, Posture::Never, ESCAPES, &[tmp], (&[], &[])).await;
    check(
        Mode::Plan,
        Posture::Bypass,
        r#"echo x > file.txt; echo x > .git/config; touch new; rm -f file.txt;
           chmod 000 file.txt; echo x > /dev/null && echo ok > "$TMPDIR/ok" && echo tmp-ok"#,
        &[tmp],
        (&[], &[]),
    )
    .await;
}

#[tokio::test]
async fn workspace_policy_writes_only_the_workspace_and_the_temp_dir() {
    if !enforced() {
        return;
    }
    let tmp = "data/sessions/s/tmp/";
    for posture in [Posture::Suggest, Posture::Auto] {
        check(Mode::Work, posture, ESCAPES, &[tmp], (&["ws/.cadre/"], &[])).await;
    }
    check(
        Mode::Operate,
        Posture::Auto,
        r#"echo changed > file.txt; mkdir -p src && echo x > src/new.rs;
           echo ok > "$TMPDIR/ok" && echo tmp-ok; echo x > "$DATA/store.db";
           echo x > "$CONFIG/config.toml"; echo x > .git/config; mkdir .cadre/x"#,
        &[tmp, "ws/file.txt", "ws/src/", "ws/src/new.rs"],
        (&["ws/.cadre/"], &["ws/.git/config"]),
    )
    .await;
}

#[tokio::test]
async fn full_access_writes_everywhere_but_the_protected_paths() {
    if !enforced() {
        return;
    }
    check(
        Mode::Work,
        Posture::Bypass,
        r#"
        echo ok > "$TMPDIR/ok" && echo tmp-ok
        echo x > "$DATA/store.db"; touch "$DATA/new"; rm -f "$DATA/store.db"
        touch "$CONFIG/new"; echo 'posture = "bypass"' > "$CONFIG/config.toml"
        mv "$CONFIG" "$OUTSIDE/stolen"; mv "$DATA" "$ROOT/data2"; rm -rf "$DATA"
        ln -s "$DATA" "$OUTSIDE/data-link" && echo x > "$OUTSIDE/data-link/store.db"
        echo ok >> "$OUTSIDE/victim.txt"; echo ok > "$HOME/new"; echo ok > file.txt
        echo x > "$ROOT/new-beside-data"
        echo x > .git/config; touch .git/hooks-new; true
        "#,
        &[
            "data/sessions/s/tmp/",
            "home/new",
            "outside/data-link",
            "outside/victim.txt",
            "ws/file.txt",
        ],
        // cadre's directories are hidden (an empty read-only tmpfs): `mv`
        // across file systems copies that empty directory and fails to
        // remove the mount.
        (
            &["ws/.cadre/", "outside/stolen/"],
            &["ws/.git/config", "ws/.git/hooks-new"],
        ),
    )
    .await;
}

#[tokio::test]
async fn read_only_policy_refuses_tcp_to_a_loopback_listener() {
    if !enforced() {
        return;
    }
    let connects = |mode: Mode| async move {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let scene = Scene::new();
        let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo hello >&3");
        let finished = scene.run(mode, Posture::Suggest, &script).await;
        // connect() returned before bash went on, so a connection that was
        // made is in the accept queue by now.
        (listener.accept().is_ok(), finished.status.success())
    };
    assert_eq!(connects(Mode::Plan).await, (false, false));
    assert_eq!(connects(Mode::Work).await, (true, true));
}

#[tokio::test]
async fn commands_start_from_a_clean_environment() {
    let scene = Scene::new();
    let finished = scene
        .run(
            Mode::Plan,
            Posture::Suggest,
            "env -0 | cut -z -d= -f1 | tr '\\0' ' '",
        )
        .await;
    let mut names: Vec<String> = finished
        .stdout
        .render()
        .split_whitespace()
        .map(str::to_string)
        .collect();
    names.sort();
    // bash adds PWD, SHLVL and _; nothing of the test process's own
    // environment (CARGO_*, RUST_*) reaches it.
    assert_eq!(
        names,
        [
            "CONFIG", "DATA", "HOME", "OUTSIDE", "PATH", "PWD", "ROOT", "SHLVL", "TMPDIR",
            "TMP_MARK", "_"
        ]
    );
}

/// `cat /dev/zero` grew the process past 4 GB: the capture keeps a head and
/// a tail, and past the limit the group is killed.
#[tokio::test]
async fn regression_cat_dev_zero_is_killed_at_the_output_limit() {
    let scene = Scene::new();
    let finished = scene
        .run(
            Mode::Plan,
            Posture::Never,
            "cat /dev/zero | tr '\\0' x; echo never",
        )
        .await;
    assert!(finished.killed_for_output);
    assert!(!finished.status.success());
    let seen = finished.stdout.total();
    assert!((1 << 20) < seen && seen < 64 << 20, "{seen} bytes");
    let kept = finished.stdout.render();
    assert!(kept.len() < 2 * 4096 + 100, "{} bytes kept", kept.len());
    assert!(kept.contains(&format!("[... {} bytes omitted ...]", seen - 2 * 4096)));
}

/// Processes on the host whose command line holds `marker`.
pub(super) fn survivors(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let zombie = stat.contains(") Z ");
        if !zombie && String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(name);
        }
    }
    found
}

/// Waits (bounded) until no host process holds `marker`: SIGKILL is
/// delivered at once, but tearing a process down may take a moment on a
/// loaded machine.
pub(super) fn assert_no_survivor(marker: &str, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !survivors(marker).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(
        survivors(marker),
        Vec::<String>::new(),
        "{what} outlived its command"
    );
}

/// Whatever a command leaves running in its group dies when it exits.
#[tokio::test]
async fn background_jobs_die_with_the_command() {
    for namespaces in [false, true] {
        let scene = Scene::new();
        let marker = format!("3{}", std::process::id());
        let finished = scene
            .run_with(
                Mode::Work,
                Posture::Bypass,
                // The job keeps the output open: the call returns once it died.
                &format!("(sleep {marker}; touch late) & echo started"),
                namespaces,
            )
            .await;
        assert!(
            finished.status.success(),
            "namespaces {namespaces}: {:?} {}",
            finished.status,
            finished.stderr.render()
        );
        assert_no_survivor(&format!("sleep {marker}"), "the background job");
    }
}
