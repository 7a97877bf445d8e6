//! The plan tools' way to their session (PL1–PL6).
//!
//! What entering Plan, `exit_plan_mode`, `enter_plan_mode` and a person's
//! answer do is the core's (`cadre_runtime::agent::core`'s `plan`); the
//! store carries out an answer's transition in one transaction, and the
//! actor freezes the plan file on the blocking pool (`perform.rs`). A turn's
//! plan tools reach the session through [`SessionPlanHost`].

use cadre_runtime::tool::{PlanHost, PlanRequest, ToolError, ToolFuture};
use ractor::ActorRef;

use super::SessionMsg;

/// Sends a turn's plan tool requests to its session.
pub(crate) struct SessionPlanHost {
    pub(crate) session: ActorRef<SessionMsg>,
}

impl PlanHost for SessionPlanHost {
    fn request(&self, request: PlanRequest) -> ToolFuture<'static> {
        let session = self.session.clone();
        Box::pin(async move {
            let (reply, answer) = tokio::sync::oneshot::channel();
            session
                .cast(SessionMsg::Plan {
                    request,
                    reply: reply.into(),
                })
                .map_err(|_| ToolError::failed("the session has stopped"))?;
            answer
                .await
                .unwrap_or_else(|_| Err(ToolError::failed("the plan request was dropped")))
        })
    }
}
