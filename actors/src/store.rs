//! The store actor: the one owner of a SQLite connection (ST1).
//!
//! A `rusqlite::Connection` is not `Sync`, so one actor owns the [`Store`]
//! and everything else asks it by message: typed requests
//! ([`StoreRequest`]), each answered on its own `RpcReplyPort`.
//!
//! **Group commit.** The actor's handlers never wait: a request is queued,
//! and one job at a time runs on the store's own thread (the connection's
//! one home: no hop through the blocking pool, one allocator arena for
//! SQLite's memory) with everything queued
//! since the last: the buffered appends first, then the requests in
//! arrival order, each in a savepoint of one transaction — one commit to
//! the write-ahead log for the lot, however many sessions they come from.
//! Replies are sent only once that commit succeeded, so nothing is
//! acknowledged that was not stored. A request that moves files around its
//! commit (entering Plan backs up the old plan) runs in a transaction of its
//! own. Appends that may be lost in a crash without losing an admitted
//! message (recorded messages, transcript events, audit records) are
//! buffered and written within 20 ms, and always before the next request.
//!
//! **A failed write is never silent.** When a commit fails (a full disk),
//! the requests it carried get the error, and the actor keeps the failure
//! and answers every later request with it ([`StoreError::WriteFailed`]), so
//! the session fails the turn as infrastructure instead of reporting as
//! done what was not stored.

mod goal;
mod request;

pub use goal::GoalRequest;
pub use request::{FirstMessage, Opened, QuestionnaireDraft, RunDraft, SessionOpen, StoreRequest};

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cadre_runtime::message::Message;
use cadre_runtime::store::{LeaseOwner, Store, StoreError};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};

/// How long appends may wait to be written together.
const FLUSH_AFTER: Duration = Duration::from_millis(20);

/// How often held leases are renewed.
const RENEW_EVERY: Duration = Duration::from_secs(5);

/// Messages to the store actor.
#[derive(Debug)]
pub enum StoreMsg {
    /// Run a request (after writing buffered appends).
    Request(StoreRequest),
    /// Write the buffered appends (sent once the buffer's first append is
    /// [`FLUSH_AFTER`] old).
    Flush,
    /// Renew this process's leases.
    Renew,
    /// The job in flight ended (node-local: from the actor's own job),
    /// with the write failure it met, if any.
    JobDone(Option<StoreError>),
}

impl ractor::Message for StoreMsg {}

#[derive(Default)]
struct Batch {
    messages: Vec<(i64, Arc<Message>)>,
    events: Vec<String>,
    audit: Vec<(String, String, String)>,
    /// Give up the session's lease once these are written.
    release: bool,
}

/// Appends not yet written, shared by every handle: appending takes the
/// lock for a moment and sends no message, but the first append after a
/// flush, which asks for the next one.
type Appends = Arc<Mutex<BTreeMap<Arc<str>, Batch>>>;

/// What one job carries to the store's thread.
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

/// The store actor.
pub struct StoreActor;

/// What the store actor starts with: the store, and the append buffer its
/// handles share.
pub struct StoreArgs {
    store: Store,
    appends: Appends,
}

/// What the store's thread is handed.
enum Job {
    /// Run it, then tell the actor (`JobDone`).
    Run(Work, ActorRef<StoreMsg>),
    /// The last job, on the actor's way out.
    Last(Work, tokio::sync::oneshot::Sender<()>),
}

/// Its state: the way to the store's thread, and what waits for the next
/// job.
pub struct StoreState {
    jobs: std::sync::mpsc::Sender<Job>,
    appends: Appends,
    next: Work,
    in_flight: bool,
    failed: Option<StoreError>,
    /// A flush was asked for and not yet started.
    flush_due: bool,
}

impl Actor for StoreActor {
    type Msg = StoreMsg;
    type State = StoreState;
    type Arguments = StoreArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        StoreArgs { store, appends }: StoreArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let (jobs, queue) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name("cadre-store".into())
            .spawn(move || writer(store, LeaseOwner::this_process(), queue))?;
        myself.send_interval(RENEW_EVERY, || StoreMsg::Renew);
        Ok(StoreState {
            jobs,
            appends,
            next: Work::default(),
            in_flight: false,
            failed: None,
            flush_due: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            StoreMsg::Request(request) => match &state.failed {
                Some(failed) => request.refuse(failed.clone()),
                None => {
                    state.next.requests.push(request);
                    state.start_job(&myself);
                }
            },
            StoreMsg::Flush => {
                state.flush_due = true;
                state.start_job(&myself);
            }
            StoreMsg::Renew => {
                state.next.renew = true;
                state.start_job(&myself);
            }
            StoreMsg::JobDone(failed) => {
                state.in_flight = false;
                if let Some(err) = failed {
                    tracing::error!(%err, "the store could not write");
                    state.failed.get_or_insert(err);
                }
                if let Some(failed) = state.failed.clone() {
                    for request in std::mem::take(&mut state.next.requests) {
                        request.refuse(failed.clone());
                    }
                }
                state.start_job(&myself);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Whatever is left is written before the actor is gone, after a
        // job still in flight (the thread takes jobs in order): the last
        // job is sent even empty, so closing waits for the one in flight.
        let mut work = std::mem::take(&mut state.next);
        work.appends = take_appends(&state.appends);
        if state.failed.is_some() {
            work = Work::default();
        }
        let (done, written) = tokio::sync::oneshot::channel();
        if state.jobs.send(Job::Last(work, done)).is_ok() {
            let _ = written.await;
        }
        Ok(())
    }
}

/// Takes every buffered append, leaving the buffer empty (so the next
/// append asks for a flush again).
fn take_appends(appends: &Appends) -> BTreeMap<Arc<str>, Batch> {
    std::mem::take(&mut *appends.lock().unwrap_or_else(PoisonError::into_inner))
}

impl StoreState {
    /// Starts a job with everything waiting, unless one runs or nothing
    /// waits. Appends alone wait for their flush.
    fn start_job(&mut self, myself: &ActorRef<StoreMsg>) {
        let due = !self.next.requests.is_empty() || self.next.renew || self.flush_due;
        if self.in_flight || !due || self.failed.is_some() {
            return;
        }
        self.flush_due = false;
        let mut work = std::mem::take(&mut self.next);
        // Appends made before the requests are written before them.
        work.appends = take_appends(&self.appends);
        // A flush whose appends went out with an earlier request's job
        // has nothing left to commit.
        if work.is_empty() {
            return;
        }
        self.in_flight = true;
        if let Err(std::sync::mpsc::SendError(job)) = self.jobs.send(Job::Run(work, myself.clone()))
        {
            // The thread is gone (it crashed): nothing can be written.
            let gone = StoreError::WriteFailed {
                what: "the store's writes".into(),
                message: "the store's thread has stopped".into(),
            };
            if let Job::Run(work, _) = job {
                for request in work.requests {
                    request.refuse(gone.clone());
                }
            }
            self.in_flight = false;
            self.failed.get_or_insert(gone);
        }
    }
}

/// The store's thread: runs jobs in order until the actor is gone. A job
/// that panics ends it, and the actor hears of a failed write.
fn writer(mut store: Store, owner: LeaseOwner, jobs: std::sync::mpsc::Receiver<Job>) {
    while let Ok(job) = jobs.recv() {
        let (work, reply) = match job {
            Job::Run(work, actor) => (work, Ok(actor)),
            Job::Last(work, done) => (work, Err(done)),
        };
        // An empty job (the last one, sent so that closing waits for the
        // ones before it) writes nothing.
        let ran = match work.is_empty() {
            true => Ok(None),
            false => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run(&mut store, work, &owner)
            })),
        };
        let crashed = ran.is_err();
        let failed = ran.unwrap_or_else(|_| {
            Some(StoreError::WriteFailed {
                what: "a batch of the session's records".into(),
                message: "the store's thread crashed".into(),
            })
        });
        match reply {
            Ok(actor) => {
                let _ = actor.cast(StoreMsg::JobDone(failed));
            }
            Err(done) => {
                let _ = done.send(());
            }
        }
        if crashed {
            return;
        }
    }
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
        if batch.release {
            // A lease left behind is only a stale lease: taken over, not lost.
            if let Err(err) = store.release_lease(&session_id, owner) {
                tracing::warn!(%err, %session_id, "the session's lease could not be released");
            }
        }
    }
    Ok(())
}

/// A handle to a store actor.
#[derive(Clone)]
pub struct StoreHandle {
    actor: ActorRef<StoreMsg>,
    appends: Appends,
}

impl std::fmt::Debug for StoreHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreHandle")
            .field("actor", &self.actor)
            .finish()
    }
}

impl StoreHandle {
    /// Starts a store actor owning `store`.
    pub async fn start(
        store: Store,
    ) -> Result<(Self, tokio::task::JoinHandle<()>), ractor::SpawnErr> {
        let appends = Appends::default();
        let args = StoreArgs {
            store,
            appends: appends.clone(),
        };
        let (actor, join) = Actor::spawn(None, StoreActor, args).await?;
        Ok((Self { actor, appends }, join))
    }

    /// A store in memory, for sessions nobody will resume (tests, hosts
    /// without a data directory).
    pub async fn in_memory() -> Result<Self, StoreError> {
        let store = Store::open_in_memory()?;
        let (handle, _) = Self::start(store)
            .await
            .map_err(|e| StoreError::Sql(format!("the store actor could not start: {e}")))?;
        Ok(handle)
    }

    /// Sends a request built around its reply port and waits for the answer.
    pub async fn ask<T: Send + 'static>(
        &self,
        request: impl FnOnce(RpcReplyPort<Result<T, StoreError>>) -> StoreRequest,
    ) -> Result<T, StoreError> {
        let (reply, answer) = tokio::sync::oneshot::channel();
        self.actor
            .cast(StoreMsg::Request(request(reply.into())))
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

    /// Gives up this process's lease on a session once its buffered
    /// appends are written, with them (no commit of its own). Until then
    /// the lease stays this process's, and a later request of this store
    /// finds it released.
    pub fn release_lease(&self, session_id: &Arc<str>) {
        self.buffer(session_id, |batch| batch.release = true);
    }

    /// Adds to a session's buffered appends; the first addition after a
    /// flush asks for the next one.
    fn buffer(&self, session_id: &Arc<str>, add: impl FnOnce(&mut Batch)) {
        let first = {
            let mut appends = self.appends.lock().unwrap_or_else(PoisonError::into_inner);
            let first = appends.is_empty();
            add(appends.entry(session_id.clone()).or_default());
            first
        };
        if first {
            drop(self.actor.send_after(FLUSH_AFTER, || StoreMsg::Flush));
        }
    }

    /// Handles every queued request, writes everything buffered, and stops
    /// the actor; `join` is the handle [`StoreHandle::start`] returned.
    pub async fn close(self, join: tokio::task::JoinHandle<()>) {
        let _ = self.actor.drain();
        let _ = join.await;
    }
}

#[cfg(test)]
mod tests;
