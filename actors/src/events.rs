//! Where an agent's events go: the host's stream (or the supervisor's pump,
//! for a sub-agent), and the stored transcript.

use std::sync::Arc;

use cadre_runtime::protocol::Event;
use tokio::sync::mpsc;

use crate::store::StoreHandle;

/// An agent's event output. Streamed text deltas are not stored; the
/// complete message is.
#[derive(Debug, Clone)]
pub struct EventSink {
    host: mpsc::UnboundedSender<Event>,
    transcript: Option<(StoreHandle, Arc<str>)>,
}

impl EventSink {
    /// A sink to the host only.
    pub fn new(host: mpsc::UnboundedSender<Event>) -> Self {
        Self {
            host,
            transcript: None,
        }
    }

    /// Also stores every event but the deltas as `session_id`'s transcript.
    pub fn with_transcript(mut self, store: StoreHandle, session_id: Arc<str>) -> Self {
        self.transcript = Some((store, session_id));
        self
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
        self.host.send(event).is_ok()
    }
}
