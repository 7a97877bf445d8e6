//! Where an agent's events go: the host's stream (or the supervisor's pump,
//! for a sub-agent), and the stored transcript.

use std::sync::Arc;

use cadre_runtime::protocol::{Envelope, Event};
use tokio::sync::mpsc;

use crate::store::StoreHandle;

/// An agent's event output. Streamed text deltas are not stored; the
/// complete message is. Every event goes out in an [`Envelope`] carrying
/// the id of the submission that caused it, when the sink has one.
#[derive(Debug, Clone)]
pub struct EventSink {
    host: mpsc::UnboundedSender<Envelope>,
    transcript: Option<(StoreHandle, Arc<str>)>,
    cause: Option<String>,
}

impl EventSink {
    /// A sink to the host only.
    pub fn new(host: mpsc::UnboundedSender<Envelope>) -> Self {
        Self {
            host,
            transcript: None,
            cause: None,
        }
    }

    /// Also stores every event but the deltas as `session_id`'s transcript.
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

    /// Sends an event to the host and the transcript; false when the host
    /// has stopped listening.
    pub fn send(&self, event: Event) -> bool {
        if let Some((store, session_id)) = &self.transcript
            && !matches!(event, Event::AssistantDelta { .. })
            && let Ok(json) = serde_json::to_string(&event)
        {
            store.append(session_id, Vec::new(), vec![json], Vec::new());
        }
        self.host
            .send(Envelope {
                op_id: self.cause.clone(),
                event,
            })
            .is_ok()
    }
}
