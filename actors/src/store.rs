//! The store's thread: the one owner of a SQLite connection (ST1).
//!
//! A `rusqlite::Connection` is not `Sync`, so one thread owns the [`Store`]
//! and everything else asks it through a [`StoreHandle`]: typed requests
//! ([`StoreRequest`]), each answered on its own reply port. A request goes
//! straight onto the thread's channel (no actor in between: one wake-up per
//! request at most, none while the thread is busy).
//!
//! **Group commit.** The thread takes everything queued since its last
//! job: the buffered appends first, then the requests in arrival order,
//! each in a savepoint of one transaction — one commit to the write-ahead
//! log for the lot, however many sessions they come from. Replies are sent
//! only once that commit succeeded, so nothing is acknowledged that was not
//! stored. While many agents commit at once, a turn's end or an agent's
//! opening with its first message waits a moment for others to share its
//! commit (`gather.rs`). A request that moves files around its commit
//! (entering Plan backs up the old plan) runs in a transaction of its own.
//! Appends that may be lost in a crash without losing an admitted message
//! (recorded messages, transcript events, audit records) are buffered and
//! written within 20 ms, and always before the next request. A
//! side-effecting tool call does not wait for that: it asks for a commit
//! ([`StoreHandle::commit`]) and starts only once its call and decision are
//! stored (the exactly-once rule, `docs/runtime-semantics.md`).
//!
//! **A failed write is never silent.** When a commit fails (a full disk),
//! the requests it carried get the error, and the store keeps the failure
//! and answers every later request with it ([`StoreError::WriteFailed`]), so
//! the session fails the turn as infrastructure instead of reporting as
//! done what was not stored.

mod gather;
mod goal;
mod request;

pub use goal::GoalRequest;
pub use request::{FirstMessage, Opened, QuestionnaireDraft, RunDraft, SessionOpen, StoreRequest};

use std::collections::BTreeMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, TryRecvError};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use cadre_runtime::message::Message;
use cadre_runtime::process::{LedgerFuture, ProcessLedger, ProcessRecord};
use cadre_runtime::store::{LeaseOwner, Store, StoreError};
use gather::Gathering;
use ractor::RpcReplyPort;

/// How long appends may wait to be written together.
const FLUSH_AFTER: Duration = Duration::from_millis(20);

/// How often held leases are renewed.
const RENEW_EVERY: Duration = Duration::from_secs(5);

/// What the store's thread is sent.
enum Job {
    /// Run a request (after writing buffered appends).
    Request(StoreRequest),
    /// The append buffer was empty and no longer is: write it within
    /// [`FLUSH_AFTER`].
    Appended,
    /// Write everything sent before, then stop.
    Close(tokio::sync::oneshot::Sender<()>),
}

#[derive(Default)]
struct Batch {
    messages: Vec<(i64, Arc<Message>)>,
    events: Vec<String>,
    audit: Vec<(String, String, String)>,
    /// Give up the session's lease once these are written.
    release: bool,
    /// Managed processes started and ended, in order.
    processes: Vec<ProcessChange>,
}

/// A managed process's row to write or remove.
enum ProcessChange {
    Started(ProcessRecord),
    Ended(String),
}

/// Appends not yet written, shared by every handle: appending takes the
/// lock for a moment and sends nothing but the first append after a
/// write, which asks for the next one.
type Appends = Arc<Mutex<BTreeMap<Arc<str>, Batch>>>;

/// What one job carries.
#[derive(Default)]
struct Work {
    appends: BTreeMap<Arc<str>, Batch>,
    requests: Vec<StoreRequest>,
    renew: bool,
}

impl Work {
    fn is_empty(&self) -> bool {
        self.appends.is_empty() && self.requests.is_empty() && !self.renew
    }
}

/// The first write failure, kept: every later request is answered with it.
type Failed = Arc<OnceLock<StoreError>>;

/// The store's thread, for [`StoreHandle::close`].
pub struct StoreThread(std::thread::JoinHandle<()>);

/// The store's thread: takes what was sent, writes it in jobs, until it is
/// closed or every handle is gone. A job that panics fails it and every
/// later request; nothing after it is written.
fn writer(mut store: Store, jobs: Receiver<Job>, appends: Appends, failed: Failed) {
    let owner = LeaseOwner::this_process();
    // What a cadre killed with SIGKILL left running ends before this one
    // starts anything (`docs/processes.md`).
    match store.reap_orphan_processes() {
        Ok(reaped) if !reaped.is_empty() => {
            tracing::warn!(
                count = reaped.len(),
                "killed processes a killed cadre left running"
            );
        }
        Ok(_) => {}
        Err(err) => tracing::warn!(%err, "the process table could not be read"),
    }
    let mut renew_at = Instant::now() + RENEW_EVERY;
    let mut flush_by: Option<Instant> = None;
    let mut gathering = Gathering::default();
    loop {
        // Wait for a request, a due flush or renewal, or the end.
        let mut work = Work::default();
        let mut closed = None;
        let mut gone = false;
        let first = match flush_by.map_or(renew_at, |at| at.min(renew_at)) {
            due if due <= Instant::now() => None,
            due => match jobs.recv_timeout(due - Instant::now()) {
                Ok(job) => Some(job),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => {
                    gone = true;
                    None
                }
            },
        };
        // Everything else already sent comes in the same job; while other
        // sessions are committing too, so does what comes within a moment.
        let mut next = first;
        let mut taken_at = None;
        loop {
            match next.take() {
                Some(Job::Request(request)) => work.requests.push(request),
                Some(Job::Appended) => {
                    flush_by.get_or_insert_with(|| Instant::now() + FLUSH_AFTER);
                }
                Some(Job::Close(done)) => {
                    closed = Some(done);
                    break;
                }
                None => {}
            }
            match jobs.try_recv() {
                Ok(job) => next = Some(job),
                Err(TryRecvError::Empty) => {
                    let now = Instant::now();
                    if work.requests.is_empty() || failed.get().is_some() {
                        break;
                    }
                    let taken = *taken_at.get_or_insert(now);
                    let patient = work.requests.iter().all(StoreRequest::patient);
                    let Some(until) = gathering.until(taken, work.requests.len(), patient) else {
                        break;
                    };
                    if until <= now {
                        break;
                    }
                    match jobs.recv_timeout(until - now) {
                        Ok(job) => next = Some(job),
                        Err(RecvTimeoutError::Timeout) => break,
                        Err(RecvTimeoutError::Disconnected) => {
                            gone = true;
                            break;
                        }
                    }
                }
                Err(TryRecvError::Disconnected) => {
                    gone = true;
                    break;
                }
            }
        }
        let now = Instant::now();
        gathering.took(now, work.requests.len());
        let ending = closed.is_some() || gone;
        if now >= renew_at {
            work.renew = true;
            renew_at = now + RENEW_EVERY;
        }
        let flushing = ending || flush_by.is_some_and(|at| now >= at);
        if flushing || !work.requests.is_empty() {
            // Appends made before the requests are written before them.
            work.appends = take_appends(&appends);
            flush_by = None;
        }
        if let Some(err) = failed.get() {
            // After a lost write nothing more is written.
            for request in std::mem::take(&mut work).requests {
                request.refuse(err.clone());
            }
        }
        if !work.is_empty() {
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(&mut store, work, &owner)
            }))
            .unwrap_or_else(|_| {
                Some(StoreError::WriteFailed {
                    what: "a batch of the session's records".into(),
                    message: "the store's thread crashed".into(),
                })
            });
            if let Some(err) = ran {
                tracing::error!(%err, "the store could not write");
                let _ = failed.set(err);
            }
        }
        if ending {
            if let Some(done) = closed {
                let _ = done.send(());
            }
            return;
        }
    }
}

/// Takes every buffered append, leaving the buffer empty (so the next
/// append asks for a write again).
fn take_appends(appends: &Appends) -> BTreeMap<Arc<str>, Batch> {
    std::mem::take(&mut *appends.lock().unwrap_or_else(PoisonError::into_inner))
}

/// Runs one job: appends and requests in as few commits as their side
/// effects allow. Returns the first write failure.
fn run(store: &mut Store, work: Work, owner: &LeaseOwner) -> Option<StoreError> {
    let Work {
        appends,
        requests,
        renew,
    } = work;
    let mut pending = requests.into_iter().peekable();
    let mut appends = Some(appends);
    let mut first = true;
    while first || pending.peek().is_some() {
        // A group: the appends and the renewal (first group only), then
        // requests up to one that must commit alone.
        let mut group = Vec::new();
        match pending.peek() {
            Some(next) if next.commits_alone() => group.extend(pending.next()),
            _ => {
                while let Some(next) = pending.peek() {
                    if next.commits_alone() {
                        break;
                    }
                    group.extend(pending.next());
                }
            }
        }
        let mut unwritten = appends.take().unwrap_or_default();
        let renewing = renew && first;
        first = false;
        let mut unrun = Some(group);
        let ran = store.together(|s| {
            let group = unrun.take().unwrap_or_default();
            let batches = std::mem::take(&mut unwritten);
            if let Err(err) = s.isolated(|s| write(s, batches, owner)) {
                return Err((err, group));
            }
            if renewing && let Err(err) = s.renew_leases(owner) {
                tracing::warn!(%err, "the session leases could not be renewed");
            }
            Ok(group
                .into_iter()
                .map(|request| request.run(s, owner))
                .collect::<Vec<_>>())
        });
        let lost = match ran {
            Ok((Ok(replies), Ok(()))) => {
                for reply in replies {
                    reply(None);
                }
                continue;
            }
            // The commit failed: the answers held for it get the failure.
            Ok((Ok(replies), Err(err))) => {
                let lost = lost_write(err);
                for reply in replies {
                    reply(Some(&lost));
                }
                lost
            }
            // The appends failed: the group's requests did not run.
            Ok((Err((err, group)), _)) => {
                let lost = lost_write(err);
                for request in group {
                    request.refuse(lost.clone());
                }
                lost
            }
            // The transaction could not begin (the store stayed locked by
            // another process): nothing ran. The requests get the reason;
            // the store is broken only if buffered records were lost with it.
            Err(err) => {
                for request in unrun.take().unwrap_or_default().into_iter().chain(pending) {
                    request.refuse(err.clone());
                }
                return (!unwritten.is_empty()).then(|| lost_write(err));
            }
        };
        // Nothing after a lost write runs.
        for request in pending {
            request.refuse(lost.clone());
        }
        return Some(lost);
    }
    None
}

/// A failed commit, as what it lost.
fn lost_write(err: StoreError) -> StoreError {
    match err {
        StoreError::WriteFailed { .. } => err,
        other => StoreError::WriteFailed {
            what: "a batch of the session's records".into(),
            message: other.to_string(),
        },
    }
}

/// Writes buffered appends, one savepoint per session, and gives up the
/// leases asked for; the first failure stops the writing and is returned.
fn write(
    store: &mut Store,
    batches: BTreeMap<Arc<str>, Batch>,
    owner: &LeaseOwner,
) -> Result<(), StoreError> {
    for (session_id, batch) in batches {
        store
            .append(&session_id, &batch.messages, &batch.events, &batch.audit)
            .map_err(|err| StoreError::WriteFailed {
                what: format!("the transcript of session {session_id}"),
                message: err.to_string(),
            })?;
        for change in batch.processes {
            // A row left behind is reaped harmlessly later: the process is
            // checked by its start time first.
            let written = match change {
                ProcessChange::Started(record) => store.record_process(&record),
                ProcessChange::Ended(key) => store.forget_process(&key),
            };
            if let Err(err) = written {
                tracing::warn!(%err, "a managed process's row could not be written");
            }
        }
        if batch.release {
            // A lease left behind is only a stale lease: taken over, not lost.
            if let Err(err) = store.release_lease(&session_id, owner) {
                tracing::warn!(%err, %session_id, "the session's lease could not be released");
            }
        }
    }
    Ok(())
}

/// The process table of the store: rows written with the session's appends.
impl ProcessLedger for StoreHandle {
    fn started(&self, record: ProcessRecord) -> LedgerFuture {
        self.process_started(record);
        let store = self.clone();
        Box::pin(async move {
            // A failed write fails the session's next request anyway.
            let _ = store.commit().await;
        })
    }

    fn ended(&self, session_id: &str, key: &str) {
        self.process_ended(session_id, key);
    }
}

/// A handle to the store's thread.
#[derive(Clone)]
pub struct StoreHandle {
    jobs: Sender<Job>,
    appends: Appends,
    failed: Failed,
}

impl std::fmt::Debug for StoreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreHandle")
            .field("failed", &self.failed.get())
            .finish_non_exhaustive()
    }
}

impl StoreHandle {
    /// Starts the thread that owns `store`. It runs until
    /// [`StoreHandle::close`], or until every handle is dropped (writing
    /// what was buffered first).
    pub async fn start(store: Store) -> std::io::Result<(Self, StoreThread)> {
        let (jobs, queue) = std::sync::mpsc::channel();
        let appends = Appends::default();
        let failed = Failed::default();
        let thread = std::thread::Builder::new()
            .name("cadre-store".into())
            .spawn({
                let (appends, failed) = (appends.clone(), failed.clone());
                move || writer(store, queue, appends, failed)
            })?;
        let handle = Self {
            jobs,
            appends,
            failed,
        };
        Ok((handle, StoreThread(thread)))
    }

    /// A store in memory, for sessions nobody will resume (tests, hosts
    /// without a data directory).
    pub async fn in_memory() -> Result<Self, StoreError> {
        let store = Store::open_in_memory()?;
        let (handle, _) = Self::start(store)
            .await
            .map_err(|e| StoreError::Sql(format!("the store's thread could not start: {e}")))?;
        Ok(handle)
    }

    /// Sends a request built around its reply port and waits for the answer.
    pub async fn ask<T: Send + 'static>(
        &self,
        request: impl FnOnce(RpcReplyPort<Result<T, StoreError>>) -> StoreRequest,
    ) -> Result<T, StoreError> {
        if let Some(failed) = self.failed.get() {
            return Err(failed.clone());
        }
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Job::Request(request(reply.into())))
            .map_err(|_| StoreError::Sql("the store is closed".into()))?;
        answer
            .await
            .unwrap_or_else(|_| Err(StoreError::Sql("the store request was dropped".into())))
    }

    /// Buffers appends; they are written within a few milliseconds.
    pub fn append(
        &self,
        session_id: &Arc<str>,
        messages: Vec<(i64, Arc<Message>)>,
        events: Vec<String>,
        audit: Vec<(String, String, String)>,
    ) {
        self.buffer(session_id, |batch| {
            batch.messages.extend(messages);
            batch.events.extend(events);
            batch.audit.extend(audit);
        });
    }

    /// Waits until everything buffered before this call (by any handle) is
    /// committed: a side-effecting call's write-ahead, so its call and its
    /// decision are stored before it starts.
    pub async fn commit(&self) -> Result<(), StoreError> {
        self.ask(StoreRequest::Commit).await
    }

    /// Gives up this process's lease on a session once its buffered
    /// appends are written, with them (no commit of its own). Until then
    /// the lease stays this process's, and a later request of this store
    /// finds it released.
    pub fn release_lease(&self, session_id: &Arc<str>) {
        self.buffer(session_id, |batch| batch.release = true);
    }

    /// Records a managed process's start, with the session's appends.
    pub fn process_started(&self, record: ProcessRecord) {
        let session: Arc<str> = record.session_id.as_str().into();
        self.buffer(&session, |batch| {
            batch.processes.push(ProcessChange::Started(record));
        });
    }

    /// Removes a managed process's row once it ended.
    pub fn process_ended(&self, session_id: &str, key: &str) {
        let key = key.to_string();
        self.buffer(&session_id.into(), |batch| {
            batch.processes.push(ProcessChange::Ended(key));
        });
    }

    /// Adds to a session's buffered appends; the first addition after a
    /// write asks for the next one.
    fn buffer(&self, session_id: &Arc<str>, add: impl FnOnce(&mut Batch)) {
        let first = {
            let mut appends = self.appends.lock().unwrap_or_else(PoisonError::into_inner);
            let first = appends.is_empty();
            add(appends.entry(session_id.clone()).or_default());
            first
        };
        if first {
            let _ = self.jobs.send(Job::Appended);
        }
    }

    /// Handles every request sent before, writes everything buffered, and
    /// stops the thread; `thread` is what [`StoreHandle::start`] returned.
    /// Requests sent later find the store closed.
    pub async fn close(self, thread: StoreThread) {
        let (done, written) = tokio::sync::oneshot::channel();
        if self.jobs.send(Job::Close(done)).is_ok() {
            let _ = written.await;
        }
        // The thread has ended (or is ending): joining does not wait.
        drop(tokio::task::spawn_blocking(move || thread.0.join()).await);
    }
}

#[cfg(test)]
mod tests;
