//! A child's pump: the task that reads its events for its whole life,
//! builds its reports from what actually happened, tells the parent when a
//! run ends, and forwards what the host must see.

use cadre_runtime::agent::{AgentPath, ReportBuilder};
use cadre_runtime::protocol::Event;
use ractor::ActorRef;

use crate::events::EventSink;
use crate::session::{SessionMsg, SessionState};

impl SessionState {
    /// Reads a child's events for its whole life (see [`pump`]).
    pub(in crate::session) fn pump_child(
        &self,
        myself: &ActorRef<SessionMsg>,
        path: &AgentPath,
        role_name: &str,
        events: crate::events::Events,
    ) {
        // The child's tools decide which calls are evidence and changes.
        let report = ReportBuilder::for_tools(
            &path.to_string(),
            role_name,
            self.services.tools.registry().definitions(),
        );
        tokio::spawn(pump(
            path.clone(),
            report,
            events,
            self.events.clone(),
            myself.clone(),
        ));
    }
}

/// Reads a child's events for its whole life: builds its reports, tells the
/// parent when a run ends, and forwards what the host must see.
async fn pump(
    path: AgentPath,
    mut builder: ReportBuilder,
    mut stream: crate::events::Events,
    parent_events: EventSink,
    parent: ActorRef<SessionMsg>,
) {
    let agent_id = path.to_string();
    while let Some(cadre_runtime::protocol::Envelope { event, .. }) = stream.recv().await {
        if let Some(status) = event.child_status(&agent_id) {
            let _ = parent_events.send(Event::AgentStatusChanged {
                agent_id: agent_id.clone(),
                status,
            });
        }
        let forward = event.passes_to_parent();
        // The child's own calls, so a person sees what it does.
        if let Some(call) = event.forwarded_call(&agent_id) {
            let _ = parent_events.send(call);
        }
        if let Some(report) = builder.push(&event) {
            let _ = parent.cast(SessionMsg::AgentRunDone {
                agent: path.clone(),
                report: Box::new(report),
            });
        }
        if forward {
            let _ = parent_events.send(event);
        }
    }
}
