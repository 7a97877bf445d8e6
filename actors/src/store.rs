//! The store actor: the one owner of a SQLite connection (ST1).
//!
//! A `rusqlite::Connection` is not `Sync`, so one actor owns the [`Store`]
//! and everything else asks it by message. Each request runs on the
//! blocking pool (the connection moves there and back), so the actor's
//! tokio worker is never blocked; requests are still handled one at a time,
//! in order. Appends that may be lost in a crash without losing an admitted
//! message (recorded messages, transcript events, audit records) are
//! buffered and written in one transaction every few milliseconds, and
//! always before the next request, so a later read sees them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cadre_runtime::message::Message;
use cadre_runtime::store::{Store, StoreError};
use ractor::{Actor, ActorProcessingErr, ActorRef};
use tokio::sync::oneshot;

/// How long appends may wait to be written together.
const FLUSH_AFTER: Duration = Duration::from_millis(20);

type Job = Box<dyn FnOnce(&mut Store) + Send>;

/// Messages to the store actor.
pub enum StoreMsg {
    /// Run a request against the store (after writing buffered appends).
    Run(Job),
    /// Buffer appends for a session.
    Append {
        /// The session.
        session_id: String,
        /// Recorded conversation messages with their sequence numbers.
        messages: Vec<(i64, Arc<Message>)>,
        /// Transcript events (JSON).
        events: Vec<String>,
        /// Audit records: (agent id, call id, record JSON).
        audit: Vec<(String, String, String)>,
    },
    /// Write the buffered appends now.
    Flush,
}

impl std::fmt::Debug for StoreMsg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreMsg::Run(_) => f.write_str("Run"),
            StoreMsg::Append { session_id, .. } => write!(f, "Append({session_id})"),
            StoreMsg::Flush => f.write_str("Flush"),
        }
    }
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

/// Its state: the store (absent while a request runs on the blocking pool)
/// and the appends not yet written.
pub struct StoreState {
    store: Option<Store>,
    buffered: BTreeMap<String, Batch>,
    flush_scheduled: bool,
}

impl Actor for StoreActor {
    type Msg = StoreMsg;
    type State = StoreState;
    type Arguments = Store;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        store: Store,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(StoreState {
            store: Some(store),
            buffered: BTreeMap::new(),
            flush_scheduled: false,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            StoreMsg::Run(job) => {
                // The buffered appends and the request share one trip to
                // the blocking pool, appends first.
                let batches = state.take_buffered();
                state
                    .with_store(Box::new(move |store: &mut Store| {
                        write(store, batches);
                        job(store);
                    }))
                    .await;
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
    /// Runs a job with the store on the blocking pool.
    async fn with_store(&mut self, job: Job) {
        let Some(mut store) = self.store.take() else {
            return;
        };
        match tokio::task::spawn_blocking(move || {
            job(&mut store);
            store
        })
        .await
        {
            Ok(store) => self.store = Some(store),
            Err(panic) => tracing::error!(%panic, "a store request panicked; the store is closed"),
        }
    }

    fn take_buffered(&mut self) -> BTreeMap<String, Batch> {
        self.flush_scheduled = false;
        std::mem::take(&mut self.buffered)
    }

    async fn flush(&mut self) {
        let batches = self.take_buffered();
        if batches.is_empty() {
            return;
        }
        self.with_store(Box::new(move |store: &mut Store| write(store, batches)))
            .await;
    }
}

/// Writes buffered appends, one transaction per session.
fn write(store: &mut Store, batches: BTreeMap<String, Batch>) {
    for (session_id, batch) in batches {
        if let Err(err) = store.append(&session_id, &batch.messages, &batch.events, &batch.audit) {
            tracing::error!(%err, session_id, "buffered appends could not be written");
        }
    }
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

    /// Runs `request` against the store, after every buffered append.
    pub async fn call<T: Send + 'static>(
        &self,
        request: impl FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let (reply, answer) = oneshot::channel();
        let job: Job = Box::new(move |store: &mut Store| {
            let _ = reply.send(request(store));
        });
        self.actor
            .cast(StoreMsg::Run(job))
            .map_err(|_| StoreError::Sql("the store is closed".into()))?;
        answer
            .await
            .unwrap_or_else(|_| Err(StoreError::Sql("the store request was dropped".into())))
    }

    /// Buffers appends; they are written within a few milliseconds.
    pub fn append(
        &self,
        session_id: &str,
        messages: Vec<(i64, Arc<Message>)>,
        events: Vec<String>,
        audit: Vec<(String, String, String)>,
    ) {
        let _ = self.actor.cast(StoreMsg::Append {
            session_id: session_id.to_string(),
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
