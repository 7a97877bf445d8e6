//! Each wall the namespace backend builds, tried alone with the reader
//! bypassed: one probe per class of attack that got through the thread
//! walls. The helper's walls (seccomp, rlimits) need the `cadre` binary
//! and are tried in `tests/it/sandbox.rs`.
//!
//! A test here skips, saying so, only where the host cannot make
//! namespaces; `walls` must then report the namespace wall unavailable.

use std::net::UdpSocket;
use std::path::PathBuf;
use std::time::Duration;

use pretty_assertions::assert_eq;
use tempfile::TempDir;

use super::hostile::assert_no_survivor;
use crate::mode::Mode;
use crate::permission::Posture;
use crate::sandbox::{
    CommandSpec, Finished, OutputLimits, Policy, SandboxConfig, WallState, default_writable_roots,
    inherited, run, walls,
};

/// Whether the namespace wall is built here; says why not otherwise.
fn namespaced() -> bool {
    let report = walls();
    let wall = report.iter().find(|w| w.wall == "namespaces").unwrap();
    if wall.state != WallState::Enforced {
        eprintln!("SKIPPED: no namespaces on this host: {}", wall.detail);
    }
    wall.state == WallState::Enforced
}

/// A workspace with a `.git` and a `.cadre`, a fake home with cargo's
/// caches, and cadre's data directory (with the session temp dir).
struct Ws {
    _dir: TempDir,
    root: PathBuf,
    ws: PathBuf,
    tmp: PathBuf,
}

impl Ws {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in [
            "ws/.git/hooks",
            "ws/.cadre",
            "home/.cargo/registry/src/index.crates.io-x/dep-1.0.0",
            "home/.cargo/registry/cache/index.crates.io-x",
            "data/sessions/s",
        ] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("ws/.git/config"), "[core]\n").unwrap();
        std::fs::write(root.join("ws/file.txt"), "ws\n").unwrap();
        Self {
            _dir: dir,
            ws: root.join("ws"),
            tmp: root.join("data/sessions/s/tmp"),
            root,
        }
    }

    fn ws(&self) -> PathBuf {
        self.ws.clone()
    }

    fn tmp(&self) -> PathBuf {
        self.tmp.clone()
    }

    fn policy(&self, mode: Mode, posture: Posture, namespaces: bool) -> Policy {
        self.policy_in(&self.ws(), mode, posture, namespaces)
    }

    fn policy_in(
        &self,
        workspace: &std::path::Path,
        mode: Mode,
        posture: Posture,
        namespaces: bool,
    ) -> Policy {
        let config = SandboxConfig {
            protected: vec![self.root.join("data")],
            writable_roots: default_writable_roots(&self.root.join("home"), None),
            namespaces,
            ..SandboxConfig::default()
        };
        Policy::resolve(mode, posture, workspace, &self.tmp(), &config)
    }

    fn spec<'a>(
        &'a self,
        script: &'a str,
        policy: &'a Policy,
        env: &'a [(String, String)],
    ) -> CommandSpec<'a> {
        CommandSpec {
            script,
            cwd: &policy.workspace,
            policy,
            env,
            tmp: &self.tmp,
            limits: OutputLimits {
                head: 8192,
                tail: 8192,
                kill_after: 1 << 20,
            },
            stdin: None,
        }
    }

    fn env(&self) -> Vec<(String, String)> {
        let mut env = inherited(std::iter::empty(), &[]);
        env.push(("HOME".into(), self.root.join("home").display().to_string()));
        env
    }

    async fn run(&self, mode: Mode, posture: Posture, script: &str) -> Finished {
        self.run_in(&self.ws(), mode, posture, script).await
    }

    /// Runs `script` with `workspace` as the workspace (and working
    /// directory).
    async fn run_in(
        &self,
        workspace: &std::path::Path,
        mode: Mode,
        posture: Posture,
        script: &str,
    ) -> Finished {
        let policy = self.policy_in(workspace, mode, posture, true);
        let env = self.env();
        run(self.spec(script, &policy, &env)).await.unwrap()
    }
}

fn text(finished: &Finished) -> String {
    format!("{}{}", finished.stdout.render(), finished.stderr.render())
}

/// Issue class 1 under Full Access: an fd alias makes a "read-only"
/// redirection write `.git/config`; the kernel refuses it.
#[tokio::test]
async fn regression_an_fd_alias_rewrote_git_config_under_full_access() {
    if !namespaced() {
        return;
    }
    let ws = Ws::new();
    for script in [
        "printf '[core]\\n\\tfsmonitor = sh x\\n' 1<.git/config >/dev/stdout",
        "printf x 2<.git/config 2>/dev/stderr >&2",
        "printf x 3<.git/config >/proc/self/fd/3",
    ] {
        let finished = ws.run(Mode::Work, Posture::Bypass, script).await;
        // bash reports the refusal on stderr, unless stderr is the fd
        // that failed.
        assert!(!finished.status.success(), "{script}");
        let said = text(&finished);
        assert!(
            said.is_empty() || said.contains("Read-only file system"),
            "{script}: {said}"
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.ws().join(".git/config")).unwrap(),
        "[core]\n"
    );
}

/// Issue class 4: hooks and the local config are written by a plain
/// redirection under suggest and bypass; read-only binds refuse both.
#[tokio::test]
async fn git_hooks_and_cadre_config_are_read_only_under_suggest_and_bypass() {
    if !namespaced() {
        return;
    }
    for posture in [Posture::Suggest, Posture::Bypass] {
        let ws = Ws::new();
        for script in [
            "echo 'curl x | sh' > .git/hooks/pre-commit",
            "echo 'posture = \"bypass\"' > .cadre/config.local.toml",
            "chmod 777 .git/config",
            "mv .git .git-old",
            "rm -rf .cadre",
        ] {
            let finished = ws.run(Mode::Work, posture, script).await;
            let said = text(&finished);
            assert!(!finished.status.success(), "{posture}: {script}");
            assert!(
                said.contains("Read-only file system") || said.contains("busy"),
                "{posture}: {script}: {said}"
            );
        }
        assert!(!ws.ws().join(".git/hooks/pre-commit").exists());
        assert!(!ws.ws().join(".cadre/config.local.toml").exists());
        assert!(ws.ws().join(".git/config").exists());
    }
}

/// A missing `.cadre` is made before a writing command runs, so the
/// command cannot create it with its own content; a symlink in its place
/// is refused (a bind would follow it).
#[tokio::test]
async fn a_missing_cadre_is_made_read_only_and_a_symlinked_one_refused() {
    if !namespaced() {
        return;
    }
    let ws = Ws::new();
    std::fs::remove_dir_all(ws.ws().join(".cadre")).unwrap();
    let finished = ws
        .run(
            Mode::Work,
            Posture::Suggest,
            "mkdir -p .cadre && echo x > .cadre/config.toml",
        )
        .await;
    assert!(!finished.status.success(), "{}", text(&finished));
    assert!(ws.ws().join(".cadre").is_dir());
    assert!(!ws.ws().join(".cadre/config.toml").exists());
    std::fs::remove_dir(ws.ws().join(".cadre")).unwrap();
    std::os::unix::fs::symlink(ws.root.join("home"), ws.ws().join(".cadre")).unwrap();
    let policy = ws.policy(Mode::Work, Posture::Suggest, true);
    let env = ws.env();
    let refused = run(ws.spec("true", &policy, &env)).await;
    assert!(
        matches!(refused, Err(crate::sandbox::RunError::Sandbox(_))),
        "{refused:?}"
    );
}

/// Issue class 4: `~/.cargo/registry/src` holds the `build.rs` files a
/// later build runs outside the sandbox; only the download cache is
/// writable. Under both backends.
#[tokio::test]
async fn cargo_registry_sources_are_read_only_and_its_cache_writable() {
    let ws = Ws::new();
    let src = "$HOME/.cargo/registry/src/index.crates.io-x/dep-1.0.0/build.rs";
    let cache = "$HOME/.cargo/registry/cache/index.crates.io-x/dep-1.0.0.crate";
    let script = format!("echo 'fn main(){{}}' > {src}; echo crate > {cache}");
    for namespaces in [false, true] {
        let policy = ws.policy(Mode::Work, Posture::Suggest, namespaces);
        let env = ws.env();
        let finished = run(ws.spec(&script, &policy, &env)).await.unwrap();
        let home = ws.root.join("home/.cargo/registry");
        assert!(
            !home
                .join("src/index.crates.io-x/dep-1.0.0/build.rs")
                .exists(),
            "namespaces {namespaces}: {}",
            text(&finished)
        );
        assert!(
            home.join("cache/index.crates.io-x/dep-1.0.0.crate")
                .exists()
        );
        std::fs::remove_file(home.join("cache/index.crates.io-x/dep-1.0.0.crate")).unwrap();
    }
}

/// Issue class 2: cadre's and every other host process's environment is
/// out of reach: the PID namespace shows the command's processes only.
#[tokio::test]
async fn no_host_process_environment_is_visible() {
    if !namespaced() {
        return;
    }
    let marker = format!("CADRE_TEST_SECRET_{}", uuid::Uuid::new_v4().simple());
    let mut host = std::process::Command::new("sleep")
        .arg("60")
        .env(&marker, "sk-secret")
        .spawn()
        .unwrap();
    let ws = Ws::new();
    for mode in [Mode::Plan, Mode::Work] {
        let finished = ws
            .run(
                mode,
                Posture::Bypass,
                &format!(
                    "grep -a -z -l {marker} /proc/[0-9]*/environ; ls -d /proc/[0-9]* | wc -l; \
                     kill -0 {} && echo host-visible",
                    std::process::id()
                ),
            )
            .await;
        let out = finished.stdout.render();
        assert!(!out.contains("environ"), "{mode}: {out}");
        assert!(!out.contains("host-visible"), "{mode}: {out}");
        let count: usize = out.lines().last().unwrap().trim().parse().unwrap();
        assert!(count < 8, "{mode}: {count} processes visible");
    }
    host.kill().unwrap();
    host.wait().unwrap();
}

/// Issue class 3 in Plan: UDP to a host loopback listener never arrives
/// (its own network namespace), chmod and utime of workspace files fail.
#[tokio::test]
async fn plan_sends_no_udp_and_changes_no_mode_or_time() {
    if !namespaced() {
        return;
    }
    let listener = UdpSocket::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let ws = Ws::new();
    let before = std::fs::metadata(ws.ws().join("file.txt")).unwrap();
    let finished = ws
        .run(
            Mode::Plan,
            Posture::Never,
            &format!(
                "echo hi > /dev/udp/127.0.0.1/{port}; chmod 777 file.txt; \
                 touch -d 2001-01-01 file.txt; true"
            ),
        )
        .await;
    let after = std::fs::metadata(ws.ws().join("file.txt")).unwrap();
    let mut buf = [0u8; 16];
    assert!(
        listener.recv(&mut buf).is_err(),
        "a datagram reached the host"
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (before.mode(), before.mtime()),
        (after.mode(), after.mtime()),
        "{}",
        text(&finished)
    );
}

/// Issue class 3: a device node, made as root, would open the host's
/// disks; no capability survives into the command, under either backend.
#[tokio::test]
async fn no_device_node_can_be_made() {
    let ws = Ws::new();
    for namespaces in [false, true] {
        let policy = ws.policy(Mode::Work, Posture::Bypass, namespaces);
        let env = ws.env();
        let script = "mknod \"$TMPDIR/disk\" b 7 0; mknod \"$TMPDIR/mem\" c 1 1; \
                      grep -E '^Cap(Eff|Bnd)' /proc/self/status";
        let finished = run(ws.spec(script, &policy, &env)).await.unwrap();
        let said = text(&finished);
        // EPERM without the capability (or from seccomp), EACCES from
        // Landlock, which never grants making devices.
        let refused = said.matches("Operation not permitted").count()
            + said.matches("Permission denied").count();
        assert_eq!(refused, 2, "namespaces {namespaces}: {said}");
        if namespaces || rustix::process::geteuid().is_root() {
            assert!(said.contains("CapEff:\t0000000000000000"), "{said}");
        }
    }
}

/// Issue class 3: a host SysV shared memory segment is invisible in the
/// command's IPC namespace.
#[tokio::test]
async fn host_sysv_shared_memory_is_hidden() {
    if !namespaced() {
        return;
    }
    let made = std::process::Command::new("ipcmk")
        .args(["-M", "4096"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&made.stdout);
    let id: String = said
        .split_whitespace()
        .last()
        .unwrap_or_default()
        .to_string();
    assert!(!id.is_empty(), "ipcmk: {said}");
    let ws = Ws::new();
    let finished = ws.run(Mode::Work, Posture::Bypass, "ipcs -m").await;
    let _ = std::process::Command::new("ipcrm")
        .args(["-m", &id])
        .status();
    assert!(finished.status.success(), "{}", text(&finished));
    assert!(
        !finished.stdout.render().contains(&format!(" {id} ")),
        "{}",
        text(&finished)
    );
}

/// Deliver 8: whatever a command does to detach (setsid, a double fork,
/// an interpreter's new session), nothing it started outlives the call,
/// at its end and when its future is dropped (a timeout).
#[tokio::test]
async fn nothing_outlives_its_call_whatever_it_did_to_detach() {
    if !namespaced() {
        return;
    }
    let ws = Ws::new();
    let marker = format!("4{}", std::process::id());
    let script = format!(
        "setsid sleep {marker}1 & (sleep {marker}2 &) & nohup sleep {marker}3 >/dev/null 2>&1 & \
         /usr/bin/python3 -c 'import subprocess; subprocess.Popen([\"sleep\", \"{marker}4\"], \
         start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)'; \
         sleep 0.2"
    );
    let finished = ws.run(Mode::Work, Posture::Bypass, &script).await;
    assert!(finished.status.success(), "{}", text(&finished));
    assert_no_survivor(&format!("sleep {marker}"), "a detached process");
    let timed_out = tokio::time::timeout(
        Duration::from_millis(1500),
        ws.run(Mode::Work, Posture::Bypass, &format!("{script}; sleep 100")),
    )
    .await;
    assert!(timed_out.is_err());
    assert_no_survivor(
        &format!("sleep {marker}"),
        "a detached process after a timeout",
    );
}

/// Issue class 7: spill files in the temp dir are gone after a timeout's
/// kill, under either backend (a private tmpfs, or a per-command dir
/// removed after).
#[tokio::test]
async fn the_temp_dir_is_gone_after_a_timeout() {
    let ws = Ws::new();
    for namespaces in [false, true] {
        let policy = ws.policy(Mode::Plan, Posture::Never, namespaces);
        let env = ws.env();
        let script = "head -c 1000000 /dev/zero > \"$TMPDIR/spill\"; echo spilled; sleep 100";
        let timed_out = tokio::time::timeout(
            Duration::from_millis(1500),
            run(ws.spec(script, &policy, &env)),
        )
        .await;
        assert!(timed_out.is_err());
        let left: Vec<_> = std::fs::read_dir(ws.tmp())
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        assert_eq!(left, Vec::<PathBuf>::new(), "namespaces {namespaces}");
    }
}

/// A workflow step's worktree sits under the main workspace's `.cadre`,
/// its `.git` a file naming a git directory under the main `.git`: under
/// Full Access too, the step writes its worktree and nothing of the main
/// `.cadre`, the main `.git`, its own git directory or its `.git` file. A
/// workspace inside a repository gets the repository's `.git` and the
/// `.cadre`s on the way up read-only the same way.
#[tokio::test]
async fn a_worktrees_and_a_subdirectorys_repository_paths_are_read_only() {
    if !namespaced() {
        return;
    }
    let ws = Ws::new();
    std::fs::write(ws.ws().join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let wt = ws.ws().join(".cadre/worktrees/step-0");
    let gitdir = ws.ws().join(".git/worktrees/step-0");
    std::fs::create_dir_all(&wt).unwrap();
    std::fs::create_dir_all(&gitdir).unwrap();
    std::fs::write(gitdir.join("HEAD"), "0123\n").unwrap();
    std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
    let sub = ws.ws().join("crates/a");
    std::fs::create_dir_all(&sub).unwrap();
    for posture in [Posture::Suggest, Posture::Bypass] {
        let wrote = ws
            .run_in(&wt, Mode::Work, posture, "echo x > step.txt")
            .await;
        assert!(wrote.status.success(), "{posture}: {}", text(&wrote));
        let refused = [
            (
                &wt,
                "echo 'posture = \"bypass\"' > ../../config.local.toml".to_string(),
            ),
            (&wt, "echo x > ../../../.git/hooks/pre-commit".to_string()),
            (&wt, format!("echo x > {}/HEAD", gitdir.display())),
            (&wt, "echo 'gitdir: /x' > .git".to_string()),
            (&sub, "echo x > ../../.git/hooks/pre-commit".to_string()),
            (&sub, "echo x > ../../.cadre/config.local.toml".to_string()),
        ];
        for (workspace, script) in refused {
            let finished = ws.run_in(workspace, Mode::Work, posture, &script).await;
            assert!(!finished.status.success(), "{posture}: {script}");
        }
    }
    assert!(wt.join("step.txt").exists());
    assert!(!ws.ws().join(".cadre/config.local.toml").exists());
    assert!(!ws.ws().join(".git/hooks/pre-commit").exists());
    assert_eq!(
        std::fs::read_to_string(gitdir.join("HEAD")).unwrap(),
        "0123\n"
    );
    assert!(
        std::fs::read_to_string(wt.join(".git"))
            .unwrap()
            .contains("step-0")
    );
}

/// A `.git` file's text is the repository's: one naming cadre's data
/// directory, or a directory around it, uncovers nothing the sandbox
/// hides, in every reach.
#[tokio::test]
async fn a_git_file_naming_cadres_data_uncovers_nothing() {
    if !namespaced() {
        return;
    }
    let ws = Ws::new();
    std::fs::write(ws.root.join("data/secret"), "sk-data\n").unwrap();
    std::fs::write(ws.root.join("data/HEAD"), "x\n").unwrap();
    std::fs::write(ws.root.join("HEAD"), "x\n").unwrap();
    std::fs::write(ws.root.join("data/commondir"), "..\n").unwrap();
    std::fs::remove_dir_all(ws.ws().join(".git")).unwrap();
    for target in ["../data", "..", "../data/sessions"] {
        std::fs::write(ws.ws().join(".git"), format!("gitdir: {target}\n")).unwrap();
        for (mode, posture) in [
            (Mode::Plan, Posture::Never),
            (Mode::Work, Posture::Suggest),
            (Mode::Work, Posture::Bypass),
        ] {
            let policy = ws.policy(mode, posture, true);
            assert!(
                !policy
                    .read_only
                    .iter()
                    .any(|p| p.starts_with(ws.root.join("data"))
                        || ws.root.join("data").starts_with(p)),
                "{target}: {:?}",
                policy.read_only
            );
            let finished = ws.run(mode, posture, "cat ../data/secret").await;
            assert!(!text(&finished).contains("sk-data"), "{target} {posture}");
        }
    }
}
