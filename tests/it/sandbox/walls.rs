//! The walls the in-sandbox helper sets (seccomp, rlimits, no_new_privs),
//! with the built `cadre` binary as the helper, and every probe class of
//! the issue through the binary itself, as root and as an unprivileged
//! user.
//!
//! In-process tests call the runner directly (the reader bypassed) after
//! registering the binary as the helper; the binary tests run
//! `cadre exec` on a scripted model, under Full Access (no reader) or in
//! Plan with a command the reader accepts.

use std::net::UdpSocket;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::hermetic::Hermetic;
use cadre::runtime::Mode;
use cadre::runtime::permission::Posture;
use cadre::runtime::sandbox::{
    CommandSpec, Finished, Limits, OutputLimits, Policy, SandboxConfig, WallState, inherited,
    register_helper, run, walls,
};
use tempfile::TempDir;

/// Registers the built binary as this process's helper; true when the
/// namespace wall is built here too (the tests say why they skip).
fn helper_and_namespaces() -> bool {
    register_helper(PathBuf::from(env!("CARGO_BIN_EXE_cadre")));
    let report = walls();
    let state = |name: &str| report.iter().find(|w| w.wall == name).map(|w| w.state);
    assert_eq!(state("seccomp"), Some(WallState::Enforced), "{report:?}");
    let namespaced = state("namespaces") == Some(WallState::Enforced);
    if !namespaced {
        eprintln!("SKIPPED: no namespaces on this host: {report:?}");
    }
    namespaced
}

/// A workspace, a sibling outside it and cadre's data directory.
struct Scene {
    _dir: TempDir,
    root: PathBuf,
    ws: PathBuf,
    tmp: PathBuf,
}

impl Scene {
    fn new() -> Self {
        let dir = TempDir::new().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["ws/.git", "outside", "data/sessions/s", "home"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("ws/file.txt"), "ws\n").unwrap();
        Self {
            _dir: dir,
            ws: root.join("ws"),
            tmp: root.join("data/sessions/s/tmp"),
            root,
        }
    }

    async fn run(&self, mode: Mode, posture: Posture, limits: Limits, script: &str) -> Finished {
        let config = SandboxConfig {
            protected: vec![self.root.join("data")],
            limits,
            ..SandboxConfig::default()
        };
        let policy = Policy::resolve(mode, posture, &self.ws, &self.tmp, &config);
        let env = inherited(std::iter::empty(), &[]);
        run(CommandSpec {
            script,
            cwd: &self.ws,
            policy: &policy,
            env: &env,
            tmp: &self.tmp,
            limits: OutputLimits {
                head: 16 * 1024,
                tail: 16 * 1024,
                kill_after: 1 << 20,
            },
            stdin: None,
        })
        .await
        .unwrap()
    }
}

fn said(finished: &Finished) -> String {
    format!("{}{}", finished.stdout.render(), finished.stderr.render())
}

/// Issue class 3 from Plan: a unix socket to a server outside, SysV IPC,
/// new namespaces and tracing are refused by the filter; the command still
/// runs subprocesses (clone3 answers ENOSYS, so libc falls back).
#[tokio::test]
async fn plan_gets_no_unix_socket_no_sysv_ipc_no_namespace_no_ptrace() {
    if !helper_and_namespaces() {
        return;
    }
    let scene = Scene::new();
    let socket = scene.root.join("outside/server.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let script = format!(
        r#"/usr/bin/python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect("{}")' 2>&1 | tail -n1
           ipcmk -M 4096 2>&1; unshare -U true 2>&1; strace -o /dev/null true 2>&1 | head -n1
           grep -E '^(Seccomp|NoNewPrivs):' /proc/self/status
           echo sub | cat; /usr/bin/python3 -c 'import subprocess; subprocess.run(["true"], check=True); print("spawned")'"#,
        socket.display()
    );
    let finished = scene
        .run(Mode::Plan, Posture::Never, Limits::default(), &script)
        .await;
    let out = said(&finished);
    assert!(
        listener.accept().is_err(),
        "the unix socket was reached: {out}"
    );
    assert!(out.contains("PermissionError"), "{out}");
    assert!(!out.contains("Shared memory id"), "{out}");
    assert!(out.contains("unshare failed"), "{out}");
    assert!(out.contains("Operation not permitted"), "{out}");
    assert!(
        out.contains("Seccomp:\t2") && out.contains("NoNewPrivs:\t1"),
        "{out}"
    );
    assert!(out.contains("sub\n") && out.contains("spawned"), "{out}");
}

/// Issue class 7: `tail -n1 /dev/zero` grew to 3.9 GB in 8 s; the memory
/// limit stops it at its bound.
#[tokio::test]
async fn tail_of_dev_zero_dies_at_the_memory_limit() {
    if !helper_and_namespaces() {
        return;
    }
    let limits = Limits {
        memory: 256 << 20,
        ..Limits::default()
    };
    let started = Instant::now();
    let finished = Scene::new()
        .run(
            Mode::Plan,
            Posture::Never,
            limits,
            "tail -n1 /dev/zero; echo status $?",
        )
        .await;
    let out = said(&finished);
    assert!(!out.contains("status 0"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(30), "{out}");
}

/// Issue class 7: `sort -S 1M /dev/urandom` spilled 1.3 GB into cadre's
/// data directory; the private `/tmp` caps it and leaves nothing behind.
#[tokio::test]
async fn sort_spills_stop_at_the_private_tmp_and_leave_nothing() {
    if !helper_and_namespaces() {
        return;
    }
    let limits = Limits {
        tmp_size: 8 << 20,
        ..Limits::default()
    };
    let scene = Scene::new();
    let finished = scene
        .run(
            Mode::Plan,
            Posture::Never,
            limits,
            "sort -S 1M /dev/urandom > /dev/null",
        )
        .await;
    let out = said(&finished);
    assert!(out.contains("No space left on device"), "{out}");
    let left: Vec<_> = std::fs::read_dir(&scene.tmp).unwrap().flatten().collect();
    assert!(left.is_empty(), "{left:?}");
}

/// The host side of one `cadre exec` run: a workspace, a data directory,
/// a home, and a script that makes one `bash` call; owned by `nobody`
/// when the binary runs as that user.
struct Exec {
    _dir: TempDir,
    root: PathBuf,
    as_nobody: bool,
}

/// `nobody`'s ids.
const NOBODY: u32 = 65534;

impl Exec {
    fn new(as_nobody: bool) -> Self {
        let dir = TempDir::new().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["ws/.git/hooks", "data", "home", "outside"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("ws/.git/config"), "[core]\n").unwrap();
        std::fs::write(root.join("ws/file.txt"), "ws\n").unwrap();
        let exec = Self {
            _dir: dir,
            root,
            as_nobody,
        };
        if as_nobody {
            exec.chown_all(&exec.root);
        }
        exec
    }

    fn chown_all(&self, path: &Path) {
        std::os::unix::fs::lchown(path, Some(NOBODY), Some(NOBODY)).unwrap();
        if path.is_dir() && !path.is_symlink() {
            for entry in std::fs::read_dir(path).unwrap().flatten() {
                self.chown_all(&entry.path());
            }
        }
    }

    fn ws(&self) -> PathBuf {
        self.root.join("ws")
    }

    /// Runs `command` as the model's one `bash` call; returns the tool's
    /// output.
    async fn bash(&self, mode: &str, posture: &str, command: &str) -> String {
        let script = self.root.join("script.toml");
        // A JSON string is a TOML basic string for this ASCII text.
        let call = serde_json::to_string(command).unwrap();
        std::fs::write(
            &script,
            format!(
                "[[response]]\niteration = 1\n[[response.tool_calls]]\nname = \"bash\"\n\
                 arguments = {{ command = {call} }}\n\n[[response]]\niteration = 2\ntext = \"done\"\n"
            ),
        )
        .unwrap();
        if self.as_nobody {
            self.chown_all(&self.root);
        }
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_cadre"));
        cmd.hermetic();
        cmd.args(["exec", "--script"])
            .arg(&script)
            .arg("--workspace")
            .arg(self.ws())
            .arg("--data-dir")
            .arg(self.root.join("data"))
            .args(["--mode", mode, "--posture", posture])
            .args(["--output-format", "stream-json", "go"])
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.root.join("home"))
            .env("OPENAI_API_KEY", "sk-walls-secret-marker")
            .current_dir(self.ws());
        if self.as_nobody {
            cmd.uid(NOBODY).gid(NOBODY);
        }
        let output = tokio::task::spawn_blocking(move || cmd.output())
            .await
            .unwrap()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let result: serde_json::Value = stdout
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .find(|event: &serde_json::Value| event["type"] == "tool.result")
            .unwrap_or_else(|| {
                panic!(
                    "no tool.result in {stdout}\nstderr: {}",
                    String::from_utf8_lossy(&output.stderr)
                )
            });
        result["output"].as_str().unwrap_or_default().to_string()
    }
}

/// Whether a live host process's command line holds `marker`.
fn survivor(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains(marker) && !stat.contains(") Z ")
    })
}

/// The probes of Full Access through the binary: an fd alias and a hook
/// write into `.git` refused, no device node, no secret in any
/// `/proc/*/environ`, the filter in force, nothing left running after a
/// detach.
async fn full_access_probes(as_nobody: bool) {
    let exec = Exec::new(as_nobody);
    let tag = format!("{}{}", std::process::id(), u32::from(as_nobody));
    // In a file, so the floor (which reads the command line, not what a
    // script holds) lets it run: the kernel is what is tried here.
    let probe = format!(
        "printf 'fsmonitor' 1<.git/config >/dev/stdout\n\
         echo 'x' > .git/hooks/pre-commit\n\
         mknod \"$TMPDIR/disk\" b 7 0 && echo made-a-device\n\
         grep -a -l -z sk-walls-secret-marker /proc/[0-9]*/environ && echo secret-seen\n\
         grep -E '^Seccomp:' /proc/self/status\n\
         setsid sleep 5{tag} &\n\
         (sleep 6{tag} &) &\n\
         /usr/bin/python3 -c 'import subprocess; subprocess.Popen([\"sleep\", \"7{tag}\"], \
         start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)'\n\
         echo probes-done\n"
    );
    std::fs::write(exec.ws().join("probe.sh"), probe).unwrap();
    let command = "bash probe.sh";
    let out = exec.bash("work", "bypass", command).await;
    assert!(out.contains("probes-done"), "{out}");
    assert_eq!(
        std::fs::read_to_string(exec.ws().join(".git/config")).unwrap(),
        "[core]\n",
        "{out}"
    );
    assert!(!exec.ws().join(".git/hooks/pre-commit").exists(), "{out}");
    assert!(!out.contains("made-a-device"), "{out}");
    assert!(!out.contains("secret-seen"), "{out}");
    assert!(out.contains("Seccomp:\t2"), "{out}");
    for sleep in ["5", "6", "7"] {
        let marker = format!("sleep {sleep}{tag}");
        let deadline = Instant::now() + Duration::from_secs(5);
        while survivor(&marker) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!survivor(&marker), "`{marker}` outlived its call: {out}");
    }
}

/// Issue class 3 through the binary in Plan: a committed embedded git
/// directory whose `core.fsmonitor` runs a script when the reader lets
/// `git -C vendor/lib status` run. Whatever git runs, its probes fail:
/// no unix socket to a server outside, no UDP to a loopback listener, no
/// chmod or utime of workspace files, no device node, no SysV IPC.
async fn plan_embedded_git_dir_probes(as_nobody: bool) {
    let exec = Exec::new(as_nobody);
    let ws = exec.ws();
    let lib = ws.join("vendor/lib");
    for sub in ["objects", "refs/heads"] {
        std::fs::create_dir_all(lib.join(sub)).unwrap();
    }
    std::fs::write(lib.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(
        lib.join("config"),
        "[core]\n\trepositoryformatversion = 0\n\tbare = false\n\tworktree = ../..\n\
         \tfsmonitor = sh vendor/attack.sh\n",
    )
    .unwrap();
    let socket = exec.root.join("outside/server.sock");
    let unix = UnixListener::bind(&socket).unwrap();
    unix.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let port = udp.local_addr().unwrap().port();
    std::fs::write(
        ws.join("vendor/attack.sh"),
        format!(
            "echo attack-ran >&2\n\
             /usr/bin/python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"{}\")' \
             2>/dev/null && echo attack-unix-ok >&2\n\
             echo hi > /dev/udp/127.0.0.1/{port} 2>/dev/null\n\
             chmod 777 file.txt 2>/dev/null && echo attack-chmod-ok >&2\n\
             touch -d 2001-01-01 file.txt 2>/dev/null && echo attack-utime-ok >&2\n\
             mknod \"${{TMPDIR:-/tmp}}/disk\" b 7 0 2>/dev/null && echo attack-mknod-ok >&2\n\
             ipcmk -M 4096 >/dev/null 2>&1 && echo attack-shm-ok >&2\n\
             exit 1\n",
            socket.display()
        ),
    )
    .unwrap();
    if as_nobody {
        exec.chown_all(&exec.root);
    }
    let before = std::fs::metadata(ws.join("file.txt")).unwrap();
    let out = exec
        .bash("plan", "suggest", "git -C vendor/lib status")
        .await;
    let after = std::fs::metadata(ws.join("file.txt")).unwrap();
    if !out.contains("attack-ran") {
        eprintln!("the attack script did not run (the reader or git refused it): {out}");
    }
    assert!(!out.contains("-ok"), "{out}");
    assert!(unix.accept().is_err(), "the unix socket was reached: {out}");
    let mut buf = [0u8; 8];
    assert!(
        udp.recv(&mut buf).is_err(),
        "a datagram reached the host: {out}"
    );
    assert_eq!(
        (before.mode(), before.mtime()),
        (after.mode(), after.mtime()),
        "{out}"
    );
}

/// Runs `probe` as root, and as `nobody` when the tests run as root.
macro_rules! as_root_and_nobody {
    ($root:ident, $nobody:ident, $probe:ident) => {
        #[tokio::test]
        async fn $root() {
            if !helper_and_namespaces() {
                return;
            }
            $probe(false).await;
        }

        #[tokio::test]
        async fn $nobody() {
            if !helper_and_namespaces() {
                return;
            }
            if !rustix::process::geteuid().is_root() {
                eprintln!("SKIPPED: not root, so the tests cannot run the binary as nobody");
                return;
            }
            $probe(true).await;
        }
    };
}

as_root_and_nobody!(
    full_access_probes_fail_as_root,
    full_access_probes_fail_as_nobody,
    full_access_probes
);
as_root_and_nobody!(
    plan_embedded_git_dir_probes_fail_as_root,
    plan_embedded_git_dir_probes_fail_as_nobody,
    plan_embedded_git_dir_probes
);
