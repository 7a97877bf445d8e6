//! The session's goal (G1–G8): the session performs what the pure goal
//! machines of `cadre_runtime::goal` decide.
//!
//! A goal turn is any turn of a session with a goal. When it ends, the
//! settlement runs before the queue moves on; a completion claim holds the
//! queue (the session stays `running`) while the verifier works, so no
//! other turn starts between a claim and its verdict. What comes next (a
//! continuation, the summary turn after a budget stop) is admitted to the
//! store's queue in the goal's own transaction, before the queue moves on:
//! a crash leaves it stored, and a resume runs it once. A continuation is
//! rechecked just before it runs.
//!
//! The decisions are `cadre_runtime::goal::GoalSession`'s, stepped by the
//! agent's core at each hook (`cadre_runtime::agent::core`'s `goal`); the
//! actor performs them (`perform.rs`) and runs the verifier.
//!
//! # Layout
//! - this file: the goal tools' way to their session.
//! - `verifier`: the verifier agent and the check command.

mod verifier;

pub(super) use verifier::Claim;

use cadre_runtime::tool::{GoalHost, GoalToolRequest, ToolError, ToolFuture};
use ractor::ActorRef;

use super::SessionMsg;

/// Sends a turn's goal tool requests to its session.
pub(crate) struct SessionGoalHost {
    pub(crate) session: ActorRef<SessionMsg>,
}

impl GoalHost for SessionGoalHost {
    fn request(&self, request: GoalToolRequest) -> ToolFuture<'static> {
        let session = self.session.clone();
        Box::pin(async move {
            let (reply, answer) = tokio::sync::oneshot::channel();
            session
                .cast(SessionMsg::GoalTool {
                    request,
                    reply: reply.into(),
                })
                .map_err(|_| ToolError::failed("the session has stopped"))?;
            answer
                .await
                .unwrap_or_else(|_| Err(ToolError::failed("the goal request was dropped")))
        })
    }
}
