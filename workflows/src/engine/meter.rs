//! What a step's nested sub-agents spend, counted toward the run's budget.
//!
//! A step's own turns (and its verifier's) report their tokens in their
//! events; its sub-agents' turns do not reach the step. So the step's agent
//! is given, in its services, the caller's [`Subagents`] with every role's
//! model client wrapped in a [`Metered`] one, which reports each response's
//! usage to the run's supervisor as the step's tokens. The wrapping travels
//! down the tree with the `Subagents`, so sub-agents of sub-agents are
//! counted too.

use std::sync::Arc;

use cadre_actors::session::Subagents;
use cadre_runtime::agent::{ModelSource, ModelSourceError};
use cadre_runtime::config::RoleConfig;
use cadre_runtime::model::{ModelClient, ModelEvent, ModelRequest, ModelStream};
use cadre_runtime::protocol::Usage;
use futures::StreamExt;
use ractor::ActorRef;

use super::supervisor::{StepReport, SupervisorMsg};
use crate::scheduler::InstanceId;

/// Where a metered client reports: the supervisor, as `id`'s tokens.
#[derive(Clone)]
struct Meter {
    supervisor: ActorRef<SupervisorMsg>,
    id: InstanceId,
}

impl Meter {
    fn spent(&self, usage: Usage) {
        let tokens = usage.total();
        if tokens > 0 {
            let _ = self
                .supervisor
                .cast(SupervisorMsg::Step(self.id, StepReport::Tokens(tokens)));
            let _ = self
                .supervisor
                .cast(SupervisorMsg::Step(self.id, StepReport::Spent(usage)));
        }
    }
}

/// `subagents` with every role's client metered for instance `id`.
pub(super) fn metered(
    subagents: &Subagents,
    supervisor: ActorRef<SupervisorMsg>,
    id: InstanceId,
) -> Subagents {
    subagents.with_models(Arc::new(MeteredSource {
        inner: subagents.models.clone(),
        meter: Meter { supervisor, id },
    }))
}

struct MeteredSource {
    inner: Arc<dyn ModelSource>,
    meter: Meter,
}

impl ModelSource for MeteredSource {
    fn client(&self, role: &RoleConfig) -> Result<Arc<dyn ModelClient>, ModelSourceError> {
        Ok(Arc::new(Metered {
            inner: self.inner.client(role)?,
            meter: self.meter.clone(),
        }))
    }
}

/// A model client that reports the usage of every response it completes.
struct Metered {
    inner: Arc<dyn ModelClient>,
    meter: Meter,
}

impl ModelClient for Metered {
    fn model(&self) -> &str {
        self.inner.model()
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let meter = self.meter.clone();
        Box::pin(self.inner.stream(request).inspect(move |event| {
            if let Ok(ModelEvent::Completed(response)) = event
                && let Some(usage) = response.usage
            {
                meter.spent(Usage::from(usage));
            }
        }))
    }
}
