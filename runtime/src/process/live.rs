//! One session tree's running processes and the tasks that watch them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use regex::Regex;
use rustix::process::{Pid, Signal, kill_process_group};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{oneshot, watch};

use super::reap::{ProcessRecord, proc_info};
use super::ring::{Chunk, Ring};
use super::table::{Entry, LimitError, ProcessLimits, State, Table, name};
use crate::sandbox::{CommandSpec, OutputLimits, Policy, RunError, start};

/// How long a stopped process has to end after SIGTERM before its group
/// gets SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

/// How long output is still read once the process ended and its group is
/// killed (only a process that left the group can hold the pipes then).
const DRAIN: Duration = Duration::from_millis(300);

/// Where processes are recorded while they run, so a cadre killed with
/// SIGKILL leaves a trace the next one cleans up. The store's thread
/// implements it; records are written in the order given.
pub trait ProcessLedger: Send + Sync + 'static {
    /// A process started; resolves once its record is durable, and `start`
    /// answers only then.
    fn started(&self, record: ProcessRecord) -> LedgerFuture;
    /// The process recorded under `key` for `session_id` ended and its
    /// group was killed.
    fn ended(&self, session_id: &str, key: &str);
}

/// What [`ProcessLedger::started`] returns.
pub type LedgerFuture = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// Why a process could not be started or found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProcessError {
    /// A bound on processes (per agent, per session). Retryable once one ends.
    #[error(transparent)]
    Limit(#[from] LimitError),
    /// The sandbox could not start it. Not retryable as is.
    #[error(transparent)]
    Start(#[from] RunError),
    /// No process of this session has that name. Not retryable.
    #[error("no process '{0}' in this session (see `list`)")]
    Unknown(String),
}

/// One process to start.
#[derive(Debug, Clone)]
pub struct StartRequest<'a> {
    /// The agent that starts it (its store row).
    pub owner: &'a str,
    /// The session (or workflow run) of that agent, for the record.
    pub session_id: &'a str,
    /// The command line, run as `bash -c`.
    pub command: &'a str,
    /// The working directory.
    pub cwd: &'a Path,
    /// Its confinement: the policy of the call's mode and posture.
    pub policy: &'a Policy,
    /// Its environment.
    pub env: &'a [(String, String)],
    /// The session's private temp dir.
    pub tmp: &'a Path,
    /// The bounds in force.
    pub limits: ProcessLimits,
}

/// A process just started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Started {
    /// Its number in the session (`p<id>`).
    pub id: u64,
    /// Its pid (and process group).
    pub pid: u32,
}

/// How a wait ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The pattern matched: the matching line, and the cursor just after it.
    Matched {
        /// The whole line the match is on.
        line: String,
        /// Where output after the match starts.
        next: u64,
    },
    /// The process is no longer running.
    Ended(State),
    /// Neither within the timeout; it still runs.
    TimedOut,
}

/// One process as `list` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSummary {
    /// Its number.
    pub id: u64,
    /// What the table knows.
    pub entry: Entry,
    /// Bytes it printed so far.
    pub printed: u64,
}

/// A running (or ended) process's shared state.
#[derive(Debug)]
struct Live {
    ring: Mutex<Ring>,
    /// Bumped on every new output and at the end, so waiters wake.
    changed: watch::Sender<u64>,
    /// Asks the watching task for a graceful stop.
    stop: Mutex<Option<oneshot::Sender<()>>>,
    /// Set once the watching task has reaped the process and killed its
    /// group.
    done: watch::Sender<bool>,
    pid: u32,
}

impl Live {
    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }

    /// SIGKILL to the whole group, now.
    fn kill_now(&self) {
        if let Some(pgid) = i32::try_from(self.pid).ok().and_then(Pid::from_raw) {
            let _ = kill_process_group(pgid, Signal::KILL);
        }
        self.request_stop();
    }

    fn request_stop(&self) {
        if let Some(stop) = self
            .stop
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
        {
            let _ = stop.send(());
        }
    }
}

#[derive(Debug, Default)]
struct Inner {
    table: Table,
    live: BTreeMap<u64, Arc<Live>>,
}

/// The processes of one session's tree of agents (shared by the session,
/// its sub-agents, its verifier and its workflow steps).
#[derive(Clone, Default)]
pub struct Processes {
    inner: Arc<Mutex<Inner>>,
    ledger: Arc<OnceLock<Arc<dyn ProcessLedger>>>,
}

impl std::fmt::Debug for Processes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Processes")
    }
}

impl Processes {
    /// Records processes in `ledger` from now on (the first ledger given stays).
    pub fn attach_ledger(&self, ledger: Arc<dyn ProcessLedger>) {
        let _ = self.ledger.set(ledger);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Starts one process, confined, and a task that keeps its output and
    /// notes its end.
    pub async fn start(&self, request: StartRequest<'_>) -> Result<Started, ProcessError> {
        let id = self
            .lock()
            .table
            .admit(request.owner, request.command, request.limits)?;
        let spec = CommandSpec {
            script: request.command,
            cwd: request.cwd,
            policy: request.policy,
            env: request.env,
            tmp: request.tmp,
            limits: OutputLimits {
                head: 0,
                tail: 0,
                kill_after: u64::MAX,
            },
            stdin: None,
        };
        let mut started = match start(&spec).await {
            Ok(started) => started,
            Err(err) => {
                self.lock().table.withdraw(id);
                return Err(err.into());
            }
        };
        let (Some(stdout), Some(stderr), Some(pid)) = (
            started.child.stdout.take(),
            started.child.stderr.take(),
            started.child.id(),
        ) else {
            self.lock().table.withdraw(id);
            return Err(RunError::Spawn("the process's pipes or pid are missing".into()).into());
        };
        let (stop_tx, stop_rx) = oneshot::channel();
        let live = Arc::new(Live {
            ring: Mutex::new(Ring::new(request.limits.output_bytes)),
            changed: watch::channel(0).0,
            stop: Mutex::new(Some(stop_tx)),
            done: watch::channel(false).0,
            pid,
        });
        {
            let mut inner = self.lock();
            inner.table.started(id, pid);
            inner.live.insert(id, live.clone());
        }
        let key = uuid::Uuid::new_v4().to_string();
        let recorded = self.ledger.get().map(|ledger| {
            let host = std::process::id();
            ledger.started(ProcessRecord {
                key: key.clone(),
                session_id: request.session_id.to_string(),
                owner: request.owner.to_string(),
                command: request.command.to_string(),
                pid,
                started: proc_info(pid).map_or(0, |p| p.started),
                host_pid: host,
                host_started: proc_info(host).map_or(0, |p| p.started),
            })
        });
        let watcher = Watcher {
            id,
            key,
            session_id: request.session_id.to_string(),
            live,
            processes: self.clone(),
        };
        tokio::spawn(watcher.watch(started, stdout, stderr, stop_rx));
        if let Some(recorded) = recorded {
            recorded.await;
        }
        Ok(Started { id, pid })
    }

    fn live(&self, id: u64) -> Result<(Arc<Live>, Entry), ProcessError> {
        let inner = self.lock();
        match (inner.live.get(&id), inner.table.get(id)) {
            (Some(live), Some(entry)) => Ok((live.clone(), entry.clone())),
            _ => Err(ProcessError::Unknown(name(id))),
        }
    }

    /// The process's state now.
    pub fn state(&self, id: u64) -> Result<State, ProcessError> {
        self.live(id).map(|(_, entry)| entry.state)
    }

    /// Up to `max` bytes of output from `cursor` on, or its last `max`
    /// bytes without one; and the process as it stands.
    pub fn output(
        &self,
        id: u64,
        cursor: Option<u64>,
        max: usize,
    ) -> Result<(Chunk, Entry), ProcessError> {
        let (live, entry) = self.live(id)?;
        let ring = live.ring.lock().unwrap_or_else(PoisonError::into_inner);
        let chunk = match cursor {
            Some(cursor) => ring.read(cursor, max),
            None => ring.tail(max),
        };
        Ok((chunk, entry))
    }

    /// Every process of the tree, oldest first.
    pub fn list(&self) -> Vec<ProcessSummary> {
        let inner = self.lock();
        inner
            .table
            .all()
            .map(|(id, entry)| ProcessSummary {
                id,
                entry: entry.clone(),
                printed: inner.live.get(&id).map_or(0, |l| {
                    l.ring.lock().unwrap_or_else(PoisonError::into_inner).end()
                }),
            })
            .collect()
    }

    /// Waits until `until` matches the output from `cursor` on (when
    /// given), the process ends, or `timeout` passes.
    pub async fn wait(
        &self,
        id: u64,
        until: Option<&Regex>,
        cursor: u64,
        timeout: Duration,
    ) -> Result<WaitOutcome, ProcessError> {
        let (live, _) = self.live(id)?;
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            // Subscribed before looking, so a change after the look wakes us.
            let mut changed = live.changed.subscribe();
            if let Some(pattern) = until {
                let ring = live.ring.lock().unwrap_or_else(PoisonError::into_inner);
                let (text, from) = ring.text_from(cursor);
                if let Some(found) = pattern.find(&text) {
                    let start = text[..found.start()].rfind('\n').map_or(0, |i| i + 1);
                    let end = text[found.end()..]
                        .find('\n')
                        .map_or(text.len(), |i| found.end() + i);
                    return Ok(WaitOutcome::Matched {
                        line: text[start..end].to_string(),
                        next: from + text[..end].len() as u64,
                    });
                }
            }
            let state = self.state(id)?;
            if state != State::Running {
                return Ok(WaitOutcome::Ended(state));
            }
            if tokio::time::timeout_at(deadline, changed.changed())
                .await
                .is_err()
            {
                return Ok(WaitOutcome::TimedOut);
            }
        }
    }

    /// Stops a process: SIGTERM to its group, SIGKILL after a grace period;
    /// returns once it has ended and its group is killed, with how it ended.
    pub async fn stop(&self, id: u64) -> Result<State, ProcessError> {
        let (live, _) = self.live(id)?;
        live.request_stop();
        if tokio::time::timeout(GRACE * 3, self.settled(id))
            .await
            .is_err()
        {
            live.kill_now();
            self.settled(id).await?;
        }
        self.state(id)
    }

    /// Returns once the process has been reaped and its group killed.
    pub async fn settled(&self, id: u64) -> Result<(), ProcessError> {
        let (live, _) = self.live(id)?;
        let mut done = live.done.subscribe();
        // The sender lives in `live`, which this holds: it never closes.
        let _ = done.wait_for(|done| *done).await;
        Ok(())
    }

    /// Kills at once every process `owner` started (every process of the
    /// tree for `None`): its agent (or its session) ended. Returns their ids.
    pub fn end(&self, owner: Option<&str>) -> Vec<u64> {
        let mut inner = self.lock();
        let ids = inner.table.running(owner);
        for id in &ids {
            inner.table.ended(*id, State::Stopped);
            if let Some(live) = inner.live.get(id) {
                live.kill_now();
                live.bump();
            }
        }
        ids
    }

    /// The running processes `owner` started (all for `None`).
    pub fn running(&self, owner: Option<&str>) -> Vec<u64> {
        self.lock().table.running(owner)
    }
}

/// The task that keeps one process's output and notes its end.
struct Watcher {
    id: u64,
    key: String,
    session_id: String,
    live: Arc<Live>,
    processes: Processes,
}

impl Watcher {
    async fn watch(
        self,
        mut started: crate::sandbox::Started,
        stdout: impl AsyncRead + Unpin,
        stderr: impl AsyncRead + Unpin,
        mut stop: oneshot::Receiver<()>,
    ) {
        let mut out = Pipe::new(stdout);
        let mut err = Pipe::new(stderr);
        // Set once a stop was asked: SIGKILL for the group then.
        let mut kill_at: Option<tokio::time::Instant> = None;
        let mut stop_open = true;
        let mut killed = false;
        let state = loop {
            tokio::select! {
                status = started.child.wait() => {
                    break match status {
                        Ok(status) if kill_at.is_none() => State::Exited(status.code()),
                        Ok(_) | Err(_) => State::Stopped,
                    };
                }
                asked = &mut stop, if stop_open => {
                    stop_open = false;
                    if asked.is_ok() {
                        kill_at = Some(tokio::time::Instant::now() + GRACE);
                        if let Some(pgid) = i32::try_from(self.live.pid).ok().and_then(Pid::from_raw) {
                            let _ = kill_process_group(pgid, Signal::TERM);
                        }
                    }
                }
                () = sleep_until(kill_at), if !killed => {
                    killed = true;
                    started.group.kill();
                }
                bytes = out.read(), if out.open => self.keep(bytes),
                bytes = err.read(), if err.open => self.keep(bytes),
            }
        };
        // Whatever it left running in its group ends with it.
        started.group.kill();
        let _ = tokio::time::timeout(DRAIN, async {
            while out.open || err.open {
                tokio::select! {
                    bytes = out.read(), if out.open => self.keep(bytes),
                    bytes = err.read(), if err.open => self.keep(bytes),
                }
            }
        })
        .await;
        // The row goes first: whoever sees the end sees it gone too.
        if let Some(ledger) = self.processes.ledger.get() {
            ledger.ended(&self.session_id, &self.key);
        }
        self.processes.lock().table.ended(self.id, state);
        drop(started);
        self.live.done.send_replace(true);
        self.live.bump();
    }

    fn keep(&self, bytes: Option<&[u8]>) {
        if let Some(bytes) = bytes {
            self.live
                .ring
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(bytes);
            self.live.bump();
        }
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

struct Pipe<R> {
    reader: R,
    open: bool,
    buf: Box<[u8]>,
    len: usize,
}

impl<R: AsyncRead + Unpin> Pipe<R> {
    fn new(reader: R) -> Self {
        Self {
            reader,
            open: true,
            buf: vec![0; 16 * 1024].into_boxed_slice(),
            len: 0,
        }
    }

    /// Reads once: the bytes read, or `None` at the end (then closed).
    async fn read(&mut self) -> Option<&[u8]> {
        match self.reader.read(&mut self.buf).await {
            Ok(0) | Err(_) => {
                self.open = false;
                None
            }
            Ok(n) => {
                self.len = n;
                Some(&self.buf[..self.len])
            }
        }
    }
}

#[cfg(test)]
mod tests;
