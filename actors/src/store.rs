//! The store actor: the one owner of a SQLite connection (ST1).
//!
//! A `rusqlite::Connection` is not `Sync`, so one actor owns the [`Store`]
//! and everything else asks it by message: typed requests
//! ([`StoreRequest`]), each answered on its own `RpcReplyPort`. Each request
//! runs on the blocking pool (the connection moves there and back), so the
//! actor's tokio worker is never blocked; requests are still handled one at
//! a time, in order. Appends that may be lost in a crash without losing an
//! admitted message (recorded messages, transcript events, audit records)
//! are buffered and written in one transaction every few milliseconds, and
//! always before the next request, in the same trip, so a later read sees
//! them.
//!
//! **A failed write is never silent.** When buffered appends cannot be
//! written (a full disk), the store actor keeps the failure and answers
//! every later request with it ([`StoreError::WriteFailed`]), so the session
//! fails the turn as infrastructure instead of reporting as done what was
//! not stored.

mod request;

pub use request::{Opened, QuestionnaireDraft, RunDraft, SessionOpen, StoreRequest};

use std::collections::BTreeMap;
use std::sync::Arc;
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
    /// Buffer appends for a session.
    Append {
        /// The session.
        session_id: Arc<str>,
        /// Recorded conversation messages with their sequence numbers.
        messages: Vec<(i64, Arc<Message>)>,
        /// Transcript events (JSON).
        events: Vec<String>,
        /// Audit records: (agent id, call id, record JSON).
        audit: Vec<(String, String, String)>,
    },
    /// Write the buffered appends now.
    Flush,
    /// Renew this process's leases.
    Renew,
}

impl ractor::Message for StoreMsg {}

#[derive(Default)]
struct Batch {
    messages: Vec<(i64, Arc<Message>)>,
    events: Vec<String>,
    audit: Vec<(String, String, String)>,
}

/// The store actor.
pub struct StoreActor;

/// Its state: the store (absent while a request runs on the blocking pool),
/// the appends not yet written, and the first write that failed.
pub struct StoreState {
    store: Option<Store>,
    buffered: BTreeMap<Arc<str>, Batch>,
    flush_scheduled: bool,
    owner: Arc<LeaseOwner>,
    failed: Option<StoreError>,
}

impl Actor for StoreActor {
    type Msg = StoreMsg;
    type State = StoreState;
    type Arguments = Store;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        store: Store,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_interval(RENEW_EVERY, || StoreMsg::Renew);
        Ok(StoreState {
            store: Some(store),
            buffered: BTreeMap::new(),
            flush_scheduled: false,
            owner: Arc::new(LeaseOwner::this_process()),
            failed: None,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            StoreMsg::Request(request) => {
                if let Some(failed) = &state.failed {
                    request.refuse(failed.clone());
                    return Ok(());
                }
                // The buffered appends and the request share one trip to
                // the blocking pool, appends first; if they fail, so does
                // the request.
                let batches = state.take_buffered();
                let owner = state.owner.clone();
                let failed = state
                    .with_store(move |store| match write(store, batches) {
                        Ok(()) => {
                            request.run(store, &owner);
                            None
                        }
                        Err(err) => {
                            request.refuse(err.clone());
                            Some(err)
                        }
                    })
                    .await;
                state.failed = state.failed.take().or(failed.flatten());
            }
            StoreMsg::Append {
                session_id,
                messages,
                events,
                audit,
            } => {
                let batch = state.buffered.entry(session_id).or_default();
                batch.messages.extend(messages);
                batch.events.extend(events);
                batch.audit.extend(audit);
                if !state.flush_scheduled {
                    state.flush_scheduled = true;
                    myself.send_after(FLUSH_AFTER, || StoreMsg::Flush);
                }
            }
            StoreMsg::Flush => state.flush().await,
            StoreMsg::Renew => {
                let owner = state.owner.clone();
                state
                    .with_store(move |store| {
                        if let Err(err) = store.renew_leases(&owner) {
                            tracing::warn!(%err, "the session leases could not be renewed");
                        }
                    })
                    .await;
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.flush().await;
        Ok(())
    }
}

impl StoreState {
    /// Runs a job with the store on the blocking pool; `None` when the
    /// store is gone (an earlier job panicked).
    async fn with_store<T: Send + 'static>(
        &mut self,
        job: impl FnOnce(&mut Store) -> T + Send + 'static,
    ) -> Option<T> {
        let mut store = self.store.take()?;
        match tokio::task::spawn_blocking(move || {
            let out = job(&mut store);
            (store, out)
        })
        .await
        {
            Ok((store, out)) => {
                self.store = Some(store);
                Some(out)
            }
            Err(panic) => {
                tracing::error!(%panic, "a store request panicked; the store is closed");
                self.failed = Some(StoreError::WriteFailed {
                    what: "a request".into(),
                    message: "the store request panicked".into(),
                });
                None
            }
        }
    }

    fn take_buffered(&mut self) -> BTreeMap<Arc<str>, Batch> {
        self.flush_scheduled = false;
        std::mem::take(&mut self.buffered)
    }

    async fn flush(&mut self) {
        let batches = self.take_buffered();
        if batches.is_empty() || self.failed.is_some() {
            return;
        }
        if let Some(Err(err)) = self.with_store(move |store| write(store, batches)).await {
            tracing::error!(%err, "buffered appends could not be written");
            self.failed = Some(err);
        }
    }
}

/// Writes buffered appends, one transaction per session; the first failure
/// stops the writing and is returned.
fn write(store: &mut Store, batches: BTreeMap<Arc<str>, Batch>) -> Result<(), StoreError> {
    for (session_id, batch) in batches {
        store
            .append(&session_id, &batch.messages, &batch.events, &batch.audit)
            .map_err(|err| StoreError::WriteFailed {
                what: format!("the transcript of session {session_id}"),
                message: err.to_string(),
            })?;
    }
    Ok(())
}

/// A handle to a store actor.
#[derive(Debug, Clone)]
pub struct StoreHandle {
    actor: ActorRef<StoreMsg>,
}

impl StoreHandle {
    /// Starts a store actor owning `store`.
    pub async fn start(
        store: Store,
    ) -> Result<(Self, tokio::task::JoinHandle<()>), ractor::SpawnErr> {
        let (actor, join) = Actor::spawn(None, StoreActor, store).await?;
        Ok((Self { actor }, join))
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
        let _ = self.actor.cast(StoreMsg::Append {
            session_id: session_id.clone(),
            messages,
            events,
            audit,
        });
    }

    /// Handles every queued request, writes everything buffered, and stops
    /// the actor; `join` is the handle [`StoreHandle::start`] returned.
    pub async fn close(self, join: tokio::task::JoinHandle<()>) {
        let _ = self.actor.drain();
        let _ = join.await;
    }
}
