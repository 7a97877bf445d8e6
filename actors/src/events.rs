//! Where an agent's events go: the host's stream (or the supervisor's pump,
//! for a sub-agent), and the stored transcript.

use std::sync::Arc;
use std::task::{Context, Poll};

use cadre_runtime::protocol::{Envelope, Event};
use tokio::sync::mpsc;

use crate::store::StoreHandle;

/// The sending end of an agent's event stream.
pub type EventSender = mpsc::UnboundedSender<Box<Envelope>>;

/// A new event stream: the sender an [`EventSink`] is made from, and the
/// receiving end.
pub fn channel() -> (EventSender, Events) {
    let (sender, receiver) = mpsc::unbounded_channel();
    (sender, Events(receiver))
}

/// The receiving end of an agent's events, in order, until the agent is
/// gone. Each event crosses the channel boxed: a channel reserves room for
/// 32 items at a time, and an idle agent's stream should cost 32 pointers,
/// not 32 envelopes.
#[derive(Debug)]
pub struct Events(mpsc::UnboundedReceiver<Box<Envelope>>);

impl Events {
    /// The next event; `None` once every sender is gone and nothing is left.
    pub async fn recv(&mut self) -> Option<Envelope> {
        self.0.recv().await.map(|envelope| *envelope)
    }

    /// The next event if one is waiting.
    pub fn try_recv(&mut self) -> Result<Envelope, mpsc::error::TryRecvError> {
        self.0.try_recv().map(|envelope| *envelope)
    }

    /// Polls for the next event (for hand-written futures and streams).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Envelope>> {
        self.0
            .poll_recv(cx)
            .map(|next| next.map(|envelope| *envelope))
    }

    /// Stops the stream: the agent's later events are dropped; those
    /// already sent can still be received.
    pub fn close(&mut self) {
        self.0.close();
    }
}

/// An agent's event output. Streamed text deltas are not stored; the
/// complete message is. Every event goes out in an [`Envelope`] carrying
/// the id of the submission that caused it, when the sink has one.
#[derive(Debug, Clone)]
pub struct EventSink {
    host: EventSender,
    transcript: Option<(StoreHandle, Arc<str>)>,
    cause: Option<String>,
}

impl EventSink {
    /// A sink to the host only.
    pub fn new(host: EventSender) -> Self {
        Self {
            host,
            transcript: None,
            cause: None,
        }
    }

    /// Also stores the events a transcript keeps ([`Event::transcribed`])
    /// as `session_id`'s transcript.
    pub fn with_transcript(mut self, store: StoreHandle, session_id: Arc<str>) -> Self {
        self.transcript = Some((store, session_id));
        self
    }

    /// The same sink, marking what it sends as caused by submission `id`.
    pub fn caused_by(&self, id: Option<String>) -> Self {
        Self {
            cause: id,
            ..self.clone()
        }
    }

    /// The submission the events are caused by now.
    pub fn cause(&self) -> Option<&str> {
        self.cause.as_deref()
    }

    /// Sets the submission the next events are caused by; returns the one
    /// before, to put back.
    pub fn set_cause(&mut self, id: Option<String>) -> Option<String> {
        std::mem::replace(&mut self.cause, id)
    }

    /// Sends an event to the host, and to the transcript when it keeps it
    /// ([`Event::transcribed`]: not a delta, nor another agent's forwarded
    /// call, which its own transcript holds whole); false when the host
    /// has stopped listening.
    pub fn send(&self, event: Event) -> bool {
        if let Some((store, session_id)) = &self.transcript
            && event.transcribed()
            && let Ok(json) = serde_json::to_string(&event)
        {
            store.append(session_id, Vec::new(), vec![json], Vec::new());
        }
        self.host
            .send(Box::new(Envelope {
                op_id: self.cause.clone(),
                event,
            }))
            .is_ok()
    }
}
