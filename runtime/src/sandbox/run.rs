//! One command, start to end: spawned confined, its output bounded, it
//! and everything it started killed when it ends.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

use std::ffi::OsString;

use super::bwrap;
use super::groups::GroupGuard;
use super::helper::{HelperSpec, helper_args, helper_path};
use super::landlock::{confine, sandbox_status};
use super::output::Capture;
use super::policy::{Policy, Reach};
use super::walls::{Isolation, isolation};

/// How long output is still read once the shell has exited and its group
/// is killed. Only a process that left the group (`setsid`) can still hold
/// the pipes then; cadre stops reading rather than wait for it.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// One command to run.
#[derive(Debug, Clone)]
pub struct CommandSpec<'a> {
    /// The command line, run as `bash --noprofile --norc -c <script>`.
    pub script: &'a str,
    /// The working directory.
    pub cwd: &'a Path,
    /// What it may write.
    pub policy: &'a Policy,
    /// Its whole environment (see `env::inherited`); `TMPDIR` is added.
    pub env: &'a [(String, String)],
    /// The private temp dir (`TMPDIR`), created if missing.
    pub tmp: &'a Path,
    /// Bounds on what is kept of the output.
    pub limits: OutputLimits,
    /// What the command reads on stdin (a hook's event); `/dev/null` when
    /// `None`.
    pub stdin: Option<&'a [u8]>,
}

/// Bounds on a command's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// Bytes kept from the start of each stream.
    pub head: usize,
    /// Bytes kept from the end of each stream.
    pub tail: usize,
    /// Total bytes (stdout and stderr) after which the command's process
    /// group is killed.
    pub kill_after: u64,
}

/// How a command ended.
#[derive(Debug)]
pub struct Finished {
    /// The shell's exit status.
    pub status: ExitStatus,
    /// Its standard output.
    pub stdout: Capture,
    /// Its standard error.
    pub stderr: Capture,
    /// It printed more than [`OutputLimits::kill_after`] and was killed.
    pub killed_for_output: bool,
    /// A process outside the group still held the output open after the
    /// shell exited; reading stopped.
    pub output_abandoned: bool,
    /// The command ran under a kernel wall (namespaces or Landlock).
    pub confined: bool,
}

/// Why a command did not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The sandbox is available but could not be applied; the command was
    /// not started. Not retryable as is.
    #[error("{0}; the command was not run")]
    Sandbox(String),
    /// bash could not be started (or its thread could not be). Not
    /// retryable as is: the system lacks bash or resources.
    #[error("could not start bash: {0}")]
    Spawn(String),
    /// Waiting for the command failed. Not retryable: whether the
    /// command ran is unknown.
    #[error("bash failed: {0}")]
    Wait(String),
}

/// A command started and still running, with everything that must live
/// as long as it does: what [`run`] reads to its end, and what a managed
/// process (`crate::process`) keeps until it is stopped.
///
/// Dropping it kills the command and its group, ends the spawning thread
/// (bubblewrap's `--die-with-parent`) and removes its temp dir, in that
/// order (fields drop in declaration order).
#[derive(Debug)]
pub struct Started {
    /// The shell (or bubblewrap), its pipes not yet taken.
    pub child: Child,
    /// Its process group, registered until dropped.
    pub group: GroupGuard,
    /// The command runs under a kernel wall (namespaces or Landlock).
    pub confined: bool,
    _spawner: Spawner,
    _tmp: Option<CommandTmp>,
}

/// Runs one command to its end.
///
/// Where the host can (see `walls`), the command runs in its own
/// namespaces under bubblewrap, through the in-sandbox helper when one is
/// registered; otherwise under the walls of its spawning thread alone.
/// Dropping the future (a timeout, a cancelled call) kills the command
/// and, with a PID namespace, everything it started, whatever it did to
/// detach; its per-command temp dir goes with it.
pub async fn run(spec: CommandSpec<'_>) -> Result<Finished, RunError> {
    let mut started = start(&spec).await?;
    let (Some(stdout), Some(stderr)) = (started.child.stdout.take(), started.child.stderr.take())
    else {
        return Err(RunError::Spawn("bash's output pipes are missing".into()));
    };
    if let (Some(input), Some(mut pipe)) = (spec.stdin, started.child.stdin.take()) {
        let input = input.to_vec();
        // Written beside the reading; a command that does not read it
        // closes the pipe, which ends the write.
        tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            let _ = pipe.write_all(&input).await;
        });
    }
    let mut reading = Reading {
        stdout: Stream::new(stdout, spec.limits),
        stderr: Stream::new(stderr, spec.limits),
        limits: spec.limits,
        killed_for_output: false,
    };
    let status = reading
        .until_exit(&mut started.child, &started.group)
        .await?;
    // Whatever the shell left running in its group ends with it.
    started.group.kill();
    let output_abandoned = tokio::time::timeout(DRAIN_AFTER_EXIT, reading.drain(&started.group))
        .await
        .is_err();
    Ok(Finished {
        status,
        stdout: reading.stdout.capture,
        stderr: reading.stderr.capture,
        killed_for_output: reading.killed_for_output,
        output_abandoned,
        confined: started.confined,
    })
}

/// Starts one command confined as [`run`] does, and returns it running,
/// its output pipes open (stdin is `/dev/null`). `spec.limits` is not
/// applied: whoever reads the pipes bounds what it keeps.
pub async fn start(spec: &CommandSpec<'_>) -> Result<Started, RunError> {
    ensure_private_dir(spec.tmp).map_err(|e| {
        RunError::Spawn(format!(
            "cannot create the temp dir {}: {e}",
            spec.tmp.display()
        ))
    })?;
    let policy = spec.policy;
    let bwrap = match (policy.namespaces, isolation()) {
        (true, Isolation::Bwrap(path)) => Some(path.as_path()),
        (true | false, Isolation::Threads(_)) | (false, Isolation::Bwrap(_)) => None,
    };
    if bwrap.is_some() {
        prepare_read_only(policy)?;
    }
    let cmd_tmp = match bwrap {
        Some(_) => None,
        None => Some(CommandTmp::create(spec.tmp)?),
    };
    let landlock = sandbox_status().is_enforced();
    let helper = helper_path();
    let line = bwrap::Line {
        policy,
        cwd: spec.cwd,
        host_tmp: spec.tmp,
        helper,
    };
    let mut argv: Vec<OsString> = Vec::new();
    // Every Landlock layer forbids moving a file to another directory
    // unless it grants that itself, even a layer of the network alone: so
    // under bubblewrap the helper applies one layer with everything (files,
    // network, scopes), and the spawning thread none. Otherwise `rustc`'s
    // rename of its metadata into `deps/` fails with EXDEV.
    let helper_landlock = landlock && bwrap.is_some() && helper.is_some();
    if let Some(helper) = helper {
        let helper_spec = HelperSpec {
            writable: helper_landlock.then(|| line.writable_inside()),
            network: policy.network,
            scoped: policy.scoped,
            read_only: policy.reach == Reach::ReadOnly,
            limits: policy.limits,
        };
        argv.push(helper.into());
        argv.extend(helper_args(&helper_spec).map_err(RunError::Sandbox)?);
    }
    argv.extend(["bash", "--noprofile", "--norc", "-c"].map(OsString::from));
    argv.push(spec.script.into());
    let mut command = match bwrap {
        Some(bwrap) => {
            let mut command = Command::new(bwrap);
            command.args(line.args()).args(&argv);
            command
        }
        None => {
            let mut command = Command::new(&argv[0]);
            command.args(&argv[1..]);
            command
        }
    };
    let tmpdir = cmd_tmp
        .as_ref()
        .map_or_else(|| PathBuf::from(bwrap::INNER_TMP), |t| t.path.clone());
    command
        .current_dir(spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .env("TMPDIR", &tmpdir)
        .stdin(match spec.stdin {
            Some(_) => Stdio::piped(),
            None => Stdio::null(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let walls = ThreadWalls {
        policy: (landlock && !helper_landlock).then(|| policy.clone()),
        files: bwrap.is_none(),
        drop_capabilities: bwrap.is_none(),
    };
    let (child, group, spawner) = spawn(command, walls).await?;
    Ok(Started {
        child,
        group,
        confined: landlock || bwrap.is_some(),
        _spawner: spawner,
        _tmp: cmd_tmp,
    })
}

/// What the spawning thread sets on itself before it spawns.
struct ThreadWalls {
    /// Landlock for this policy, when the kernel has it.
    policy: Option<Policy>,
    /// Landlock's filesystem rules too (not before bubblewrap).
    files: bool,
    /// Drop every capability, the bounding set first (bubblewrap drops
    /// them itself).
    drop_capabilities: bool,
}

/// Keeps the spawning thread alive until dropped: bubblewrap's
/// `--die-with-parent` fires when that *thread* ends, so it must outlive
/// the command, and end (killing the sandbox) when the call does.
#[derive(Debug)]
struct Spawner {
    _alive: std::sync::mpsc::Sender<()>,
}

/// Spawns `command` from a fresh thread that first sets `walls` on itself,
/// so only the command is restricted. The group is registered before the
/// child is handed back: if the caller went away meanwhile, dropping the
/// guard kills it.
async fn spawn(
    mut command: Command,
    walls: ThreadWalls,
) -> Result<(Child, GroupGuard, Spawner), RunError> {
    let runtime = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (alive, until_dropped) = std::sync::mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("cadre-sandbox".into())
        .spawn(move || {
            // The child is registered with this runtime's process driver.
            let _runtime = runtime.enter();
            if walls.drop_capabilities {
                drop_capabilities();
            }
            let confined = walls
                .policy
                .as_ref()
                .map_or(Ok(()), |policy| confine(policy, walls.files));
            let spawned = match confined {
                Err(why) => Err(RunError::Sandbox(why)),
                Ok(()) => command
                    .spawn()
                    .map_err(|e| RunError::Spawn(e.to_string()))
                    .and_then(|child| {
                        let group = child
                            .id()
                            .and_then(GroupGuard::register)
                            .ok_or_else(|| RunError::Spawn("bash has no process id".to_string()))?;
                        Ok((child, group))
                    }),
            };
            let started = spawned.is_ok();
            if tx.send(spawned).is_ok() && started {
                // Returns once the `Spawner` is dropped.
                let _ = until_dropped.recv();
            }
        })
        .map_err(|e| RunError::Spawn(format!("cannot start the sandbox thread: {e}")))?;
    let (child, group) = rx
        .await
        .map_err(|_| RunError::Spawn("the sandbox thread ended without an answer".into()))??;
    Ok((child, group, Spawner { _alive: alive }))
}

/// Drops every capability of the calling thread: the bounding set first
/// (so bash cannot regain them at `exec`; this needs CAP_SETPCAP, which
/// only a privileged cadre has), then the effective, permitted and
/// inheritable sets. Without privileges there is nothing to drop.
fn drop_capabilities() {
    use rustix::thread::{CapabilitySet, CapabilitySets};
    for capability in CapabilitySet::all().iter() {
        // EINVAL for a capability this kernel does not know; EPERM without
        // CAP_SETPCAP.
        let _ = rustix::thread::remove_capability_from_bounding_set(capability);
    }
    let none = CapabilitySets {
        effective: CapabilitySet::empty(),
        permitted: CapabilitySet::empty(),
        inheritable: CapabilitySet::empty(),
    };
    let _ = rustix::thread::set_capabilities(None, none);
}

/// Creates the workspace's protected paths a writing command could
/// otherwise create itself (so they can be bound read-only), and refuses a
/// symlink in place of any, which a bind would follow. Nothing is created
/// outside the workspace: a missing `.cadre` above it is not one cadre
/// reads for this workspace.
fn prepare_read_only(policy: &Policy) -> Result<(), RunError> {
    for path in &policy.read_only {
        match path.symlink_metadata() {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(RunError::Sandbox(format!(
                    "{} is a symlink; it must be a directory or a file",
                    path.display()
                )));
            }
            Ok(_) => {}
            Err(_)
                if policy.reach != Reach::ReadOnly && path.parent() == Some(&policy.workspace) =>
            {
                std::fs::create_dir_all(path).map_err(|e| {
                    RunError::Sandbox(format!("cannot create {}: {e}", path.display()))
                })?;
            }
            Err(_) => {}
        }
    }
    Ok(())
}

/// A command's own temp dir under the session's, when it has no private
/// `/tmp`: removed when dropped, however the command ended.
#[derive(Debug)]
struct CommandTmp {
    path: PathBuf,
}

impl CommandTmp {
    fn create(session_tmp: &Path) -> Result<Self, RunError> {
        let path = session_tmp.join(format!("cmd-{}", uuid::Uuid::new_v4().simple()));
        ensure_private_dir(&path).map_err(|e| {
            RunError::Spawn(format!(
                "cannot create the temp dir {}: {e}",
                path.display()
            ))
        })?;
        Ok(Self { path })
    }
}

impl Drop for CommandTmp {
    fn drop(&mut self) {
        // A command may leave directories it cannot be removed from
        // (mode 0500): open them up first.
        let _ = open_up(&self.path);
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Gives the owner every right on `dir` and what is beneath it, without
/// following symlinks.
fn open_up(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    for entry in std::fs::read_dir(dir)?.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = open_up(&entry.path());
        }
    }
    Ok(())
}

/// Creates `dir` (and its parents) if missing, readable by its owner only.
fn ensure_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
}

/// The private temp dir of a session: `<session dir>/tmp`.
pub fn session_tmp(session_dir: &Path) -> PathBuf {
    session_dir.join("tmp")
}

struct Stream<R> {
    pipe: R,
    open: bool,
    capture: Capture,
    buf: Box<[u8]>,
}

impl<R: AsyncRead + Unpin> Stream<R> {
    fn new(pipe: R, limits: OutputLimits) -> Self {
        Self {
            pipe,
            open: true,
            capture: Capture::new(limits.head, limits.tail),
            buf: vec![0; 16 * 1024].into_boxed_slice(),
        }
    }

    /// Reads once; end of file or an error closes the stream.
    async fn read(&mut self) {
        match self.pipe.read(&mut self.buf).await {
            Ok(0) | Err(_) => self.open = false,
            Ok(n) => self.capture.push(&self.buf[..n]),
        }
    }
}

struct Reading<O, E> {
    stdout: Stream<O>,
    stderr: Stream<E>,
    limits: OutputLimits,
    killed_for_output: bool,
}

impl<O: AsyncRead + Unpin, E: AsyncRead + Unpin> Reading<O, E> {
    /// Reads both streams until the shell exits.
    async fn until_exit(
        &mut self,
        child: &mut Child,
        group: &GroupGuard,
    ) -> Result<ExitStatus, RunError> {
        loop {
            tokio::select! {
                status = child.wait() => {
                    return status.map_err(|e| RunError::Wait(e.to_string()));
                }
                () = self.stdout.read(), if self.stdout.open => self.check(group),
                () = self.stderr.read(), if self.stderr.open => self.check(group),
            }
        }
    }

    /// Reads what is left once the group is dead.
    async fn drain(&mut self, group: &GroupGuard) {
        while self.stdout.open || self.stderr.open {
            tokio::select! {
                () = self.stdout.read(), if self.stdout.open => self.check(group),
                () = self.stderr.read(), if self.stderr.open => self.check(group),
            }
        }
    }

    /// Past the hard limit, kills the group; its pipes then close.
    fn check(&mut self, group: &GroupGuard) {
        let total = self.stdout.capture.total() + self.stderr.capture.total();
        if total > self.limits.kill_after && !self.killed_for_output {
            self.killed_for_output = true;
            group.kill();
        }
    }
}
