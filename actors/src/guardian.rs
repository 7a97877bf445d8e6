//! The Auto-Review guardian actor (P5): one per held call.
//!
//! It sends exactly one review request (no retries), with no tools, using
//! the requesting agent's own model client, and reports one decision to
//! whoever asked, as a [`GuardianVerdict`] on a derived actor ref. A malformed answer, a provider failure or the
//! deadline deny. If the session stops it (the turn was cancelled), the
//! request is dropped and the session records the denial.

use std::sync::Arc;
use std::time::Duration;

use cadre_runtime::model::{ModelClient, ModelRequest, complete};
use cadre_runtime::permission::Decision;
use cadre_runtime::permission::guardian::{failed, read_answer};
use ractor::{Actor, ActorProcessingErr, ActorRef, DerivedActorRef};
use tokio::task::AbortHandle;

/// A guardian's one decision, for the agent that asked.
#[derive(Debug)]
pub struct GuardianVerdict {
    /// The asker's id for this review, which tells its held calls apart.
    pub review_id: u64,
    /// Allow or deny, with the guardian's reason (every failure denies).
    pub decision: Decision,
}

/// Messages to a guardian.
#[derive(Debug)]
pub enum GuardianMsg {
    /// The review finished (from its task).
    Done(Decision),
}

impl ractor::Message for GuardianMsg {}

/// What a guardian is started with.
pub struct GuardianArgs {
    /// The model client the review is sent to: the agent's own, unless
    /// a guardian model is configured.
    pub model: Arc<dyn ModelClient>,
    /// The one review request: the held call and the observations, no
    /// tools.
    pub request: ModelRequest,
    /// How long the review may take before it denies.
    pub timeout: Duration,
    /// The agent that holds the call, told the decision.
    pub asker: DerivedActorRef<GuardianVerdict>,
    /// The asker's id for this review, echoed in the verdict.
    pub review_id: u64,
}

/// The guardian actor.
pub struct GuardianActor;

/// A guardian's state.
pub struct GuardianState {
    asker: DerivedActorRef<GuardianVerdict>,
    review_id: u64,
    /// The review's task, aborted if the guardian is stopped first (the
    /// turn was cancelled), so its request is dropped.
    task: AbortHandle,
}

impl Actor for GuardianActor {
    type Msg = GuardianMsg;
    type State = GuardianState;
    type Arguments = GuardianArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: GuardianArgs,
    ) -> Result<Self::State, ActorProcessingErr> {
        let GuardianArgs {
            model,
            request,
            timeout,
            asker,
            review_id,
        } = args;
        let stream = model.stream(request);
        let task = tokio::spawn(async move {
            let decision = match tokio::time::timeout(timeout, complete(stream)).await {
                Err(_) => failed(&format!(
                    "the guardian did not answer within {} s",
                    timeout.as_secs_f64()
                )),
                Ok(Err(error)) => failed(&format!("the guardian's model failed ({error})")),
                Ok(Ok(response)) if !response.tool_calls.is_empty() => {
                    failed("the guardian tried to call a tool")
                }
                Ok(Ok(response)) => read_answer(&response.text),
            };
            let _ = myself.cast(GuardianMsg::Done(decision));
        });
        Ok(GuardianState {
            asker,
            review_id,
            task: task.abort_handle(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        let GuardianMsg::Done(decision) = message;
        let _ = state.asker.send_message(GuardianVerdict {
            review_id: state.review_id,
            decision,
        });
        myself.stop(None);
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.task.abort();
        Ok(())
    }
}
