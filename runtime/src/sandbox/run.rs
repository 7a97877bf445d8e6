//! One command, start to end: spawned confined, its output bounded, its
//! process group killed when it ends.

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, Command};

use super::groups::GroupGuard;
use super::landlock::{confine, sandbox_status};
use super::output::Capture;
use super::policy::Policy;

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
    /// The command ran under Landlock.
    pub confined: bool,
}

/// Why a command did not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunError {
    /// The sandbox is available but could not be applied; the command was
    /// not started. Not retryable as is.
    #[error("{0}; the command was not run")]
    Sandbox(String),
    /// bash could not be started (or its thread could not be).
    #[error("could not start bash: {0}")]
    Spawn(String),
    /// Waiting for the command failed.
    #[error("bash failed: {0}")]
    Wait(String),
}

/// Runs one command to its end.
///
/// Dropping the future (a timeout, a cancelled call) kills the command's
/// process group; so does the command's end, so nothing it started in the
/// background outlives the call.
pub async fn run(spec: CommandSpec<'_>) -> Result<Finished, RunError> {
    ensure_private_dir(spec.tmp).map_err(|e| {
        RunError::Spawn(format!(
            "cannot create the temp dir {}: {e}",
            spec.tmp.display()
        ))
    })?;
    let mut command = Command::new("bash");
    command
        .args(["--noprofile", "--norc", "-c", spec.script])
        .current_dir(spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .env("TMPDIR", spec.tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let confined = sandbox_status().is_enforced();
    let (mut child, group) = spawn(command, confined.then(|| spec.policy.clone())).await?;
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err(RunError::Spawn("bash's output pipes are missing".into()));
    };
    let mut reading = Reading {
        stdout: Stream::new(stdout, spec.limits),
        stderr: Stream::new(stderr, spec.limits),
        limits: spec.limits,
        killed_for_output: false,
    };
    let status = reading.until_exit(&mut child, &group).await?;
    // Whatever the shell left running in its group ends with it.
    group.kill();
    let output_abandoned = tokio::time::timeout(DRAIN_AFTER_EXIT, reading.drain(&group))
        .await
        .is_err();
    Ok(Finished {
        status,
        stdout: reading.stdout.capture,
        stderr: reading.stderr.capture,
        killed_for_output: reading.killed_for_output,
        output_abandoned,
        confined,
    })
}

/// Spawns `command` from a fresh thread that first confines itself to
/// `policy` (when given), so only the command is restricted. The group is
/// registered before the child is handed back: if the caller went away
/// meanwhile, dropping the guard kills it.
async fn spawn(
    mut command: Command,
    policy: Option<Policy>,
) -> Result<(Child, GroupGuard), RunError> {
    let runtime = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("cadre-sandbox".into())
        .spawn(move || {
            // The child is registered with this runtime's process driver.
            let _runtime = runtime.enter();
            let spawned = match policy.as_ref().map(confine) {
                Some(Err(why)) => Err(RunError::Sandbox(why)),
                Some(Ok(())) | None => command
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
            let _ = tx.send(spawned);
        })
        .map_err(|e| RunError::Spawn(format!("cannot start the sandbox thread: {e}")))?;
    rx.await
        .map_err(|_| RunError::Spawn("the sandbox thread ended without an answer".into()))?
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
