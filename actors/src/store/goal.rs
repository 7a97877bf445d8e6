//! The store's goal requests (G1, G6): typed data with a reply port
//! each, run like every request in a savepoint of the group transaction.

use cadre_runtime::goal::Goal;
use cadre_runtime::store::{Admitted, Store, StoreError};
use ractor::RpcReplyPort;

use super::request::Deferred;

type Reply<T> = RpcReplyPort<Result<T, StoreError>>;

/// A goal request.
#[derive(Debug)]
pub enum GoalRequest {
    /// Stores the session's goal.
    Put {
        /// The session whose goal a resume reads back.
        session_id: String,
        /// The goal as it is now.
        goal: Box<Goal>,
        /// `Ok` once it is stored.
        reply: Reply<()>,
    },
    /// Removes the session's goal.
    Clear {
        /// The session.
        session_id: String,
        /// Whether there was one.
        reply: Reply<bool>,
    },
    /// Stores the goal and admits its continuation, together.
    Continue {
        /// The session.
        session_id: String,
        /// The goal, counting the continuation.
        goal: Box<Goal>,
        /// The continuation's text.
        text: String,
        /// Its idempotency key: a continuation retried is admitted once.
        key: String,
        /// The continuation's admission in the session's queue.
        reply: Reply<Admitted>,
    },
}

fn defer<T: Send + 'static>(reply: Reply<T>, result: Result<T, StoreError>) -> Deferred {
    Box::new(move |failed| {
        let _ = reply.send(match failed {
            Some(err) => Err(err.clone()),
            None => result,
        });
    })
}

impl GoalRequest {
    pub(super) fn refuse(self, error: StoreError) {
        match self {
            GoalRequest::Put { reply, .. } => {
                let _ = reply.send(Err(error));
            }
            GoalRequest::Clear { reply, .. } => {
                let _ = reply.send(Err(error));
            }
            GoalRequest::Continue { reply, .. } => {
                let _ = reply.send(Err(error));
            }
        }
    }

    pub(super) fn run(self, s: &mut Store) -> Deferred {
        match self {
            GoalRequest::Put {
                session_id,
                goal,
                reply,
            } => defer(reply, s.isolated(|s| s.put_goal(&session_id, &goal))),
            GoalRequest::Clear { session_id, reply } => {
                defer(reply, s.isolated(|s| s.clear_goal(&session_id)))
            }
            GoalRequest::Continue {
                session_id,
                goal,
                text,
                key,
                reply,
            } => defer(
                reply,
                s.isolated(|s| s.admit_continuation(&session_id, &goal, &text, &key)),
            ),
        }
    }
}
