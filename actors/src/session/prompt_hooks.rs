//! The hooks around a person's message (`docs/hooks.md`): a session's
//! `session_start` hooks when it opens, and its `user_prompt_submit` hooks
//! before each message (or goal objective) is admitted.
//!
//! They run in a task, off the mailbox (a hook may take its whole
//! timeout, and a cancel or an approval must not wait for it). Each task
//! waits for the one before it, so their answers come back as
//! [`PromptHooks`] in the order the messages came; only then is a message
//! handed to the core (which admits it) or refused. A message never overtakes one still being checked,
//! and the first message after the start reads what the `session_start`
//! hooks added. Nor does an op that changes what a message runs under (its
//! mode, posture, model, plan, goal, files or context): sent while a
//! message is being checked, it waits behind it, so a message written for
//! Plan never runs in the Work the person switched to after sending it.
//! Cancel, status, approvals, answers and shutdown never wait.

use cadre_runtime::agent::core::AgentInput;
use cadre_runtime::goal::GoalAction;
use cadre_runtime::hooks::{HookEvent, PromptVerdict, prompt_verdict, with_context};
use cadre_runtime::protocol::{Event, Op};
use cadre_runtime::store::ModeIntent;
use ractor::ActorRef;
use serde_json::json;
use tokio::task::JoinHandle;

use super::{SessionMsg, SessionState};
use crate::hooks::AgentHooks;

/// The hooks' answers in flight, and what the start's hooks added.
#[derive(Debug, Default)]
pub(super) struct PromptGate {
    /// The last task running hooks: the next one waits for it.
    last: Option<JoinHandle<()>>,
    /// Answers sent (or to be sent) and not yet handled: while any is, a
    /// new message queues behind them.
    pending: usize,
    /// What the `session_start` hooks added, for the next message admitted.
    start_context: Option<String>,
}

/// What a session's prompt hooks answered (a message to the session).
#[derive(Debug)]
pub enum PromptHooks {
    /// The session's `session_start` hooks ran.
    Started {
        /// Their `additional_context`, joined.
        context: Option<String>,
    },
    /// A message's `user_prompt_submit` hooks ran.
    Checked {
        /// What the person sent.
        submitted: Submitted,
        /// The submission it came in, for the events it causes.
        cause: Option<String>,
        /// What the hooks concluded.
        verdict: PromptVerdict,
    },
}

/// What a person sent that `user_prompt_submit` hooks read.
#[derive(Debug)]
pub enum Submitted {
    /// A message, with its mode intent.
    Message(String, Option<ModeIntent>),
    /// A new goal (`GoalAction::Set`): its objective is the prompt.
    Goal(Box<GoalAction>),
    /// An op that must not overtake the messages before it; no hook reads it.
    Ordered(Box<Op>),
}

impl Submitted {
    /// The text the hooks read as `prompt`.
    fn prompt(&self) -> &str {
        match self {
            Submitted::Message(text, _) => text,
            Submitted::Goal(action) => match action.as_ref() {
                GoalAction::Set { objective, .. } => objective,
                GoalAction::Show | GoalAction::Command { .. } | GoalAction::Clear => "",
            },
            Submitted::Ordered(_) => "",
        }
    }

    /// The op it came as, for a refusal.
    fn op(&self) -> &'static str {
        match self {
            Submitted::Message(..) => "user_input",
            Submitted::Goal(_) => "goal",
            // Never refused: no hook reads it.
            Submitted::Ordered(_) => "op",
        }
    }
}

impl SessionState {
    /// A session's `session_start` hooks, run as it opens (new or resumed).
    pub(super) fn session_start_hooks(&mut self, myself: &ActorRef<SessionMsg>) {
        let hooks = AgentHooks::of(&self.spec);
        if !self.spec.is_session() || !hooks.has(HookEvent::SessionStart) {
            return;
        }
        let (mode, posture) = (self.live.mode(), self.live.posture());
        let fields = json!({ "resumed": !self.core.conversation().is_empty() });
        self.gated(myself, async move {
            let outcomes = hooks
                .run(HookEvent::SessionStart, mode, posture, fields)
                .await;
            PromptHooks::Started {
                context: cadre_runtime::hooks::additional_context(&outcomes),
            }
        });
    }

    /// `op` for the core now, or (a person's message, a new goal) once its
    /// `user_prompt_submit` hooks and those of anything before it answered.
    pub(super) fn prompted(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        op: Op,
        cause: Option<String>,
    ) -> Option<AgentInput> {
        let submitted = match op {
            Op::UserInput { text, intent } => Submitted::Message(text, intent),
            Op::Goal { action } if matches!(*action, GoalAction::Set { .. }) => {
                Submitted::Goal(action)
            }
            op if self.prompt_gate.pending > 0 && ordered(&op) => Submitted::Ordered(Box::new(op)),
            op => return Some(AgentInput::Op { op, cause }),
        };
        let hooks = AgentHooks::of(&self.spec);
        let checked = self.spec.is_session()
            && hooks.has(HookEvent::UserPromptSubmit)
            && !matches!(submitted, Submitted::Ordered(_));
        if !checked && self.prompt_gate.pending == 0 {
            return Some(self.take(submitted, None, cause));
        }
        let (mode, posture) = (self.live.mode(), self.live.posture());
        self.gated(myself, async move {
            let outcomes = match checked {
                true => {
                    let fields = json!({ "prompt": submitted.prompt() });
                    hooks
                        .run(HookEvent::UserPromptSubmit, mode, posture, fields)
                        .await
                }
                false => Vec::new(),
            };
            PromptHooks::Checked {
                submitted,
                cause,
                verdict: prompt_verdict(&outcomes),
            }
        });
        None
    }

    /// Runs `work` after the hooks already in flight; its answer comes
    /// back to the session as a message.
    fn gated(
        &mut self,
        myself: &ActorRef<SessionMsg>,
        work: impl Future<Output = PromptHooks> + Send + 'static,
    ) {
        let before = self.prompt_gate.last.take();
        let session = myself.clone();
        self.prompt_gate.pending += 1;
        self.prompt_gate.last = Some(tokio::spawn(async move {
            if let Some(before) = before {
                let _ = before.await;
            }
            let answer = work.await;
            let _ = session.cast(SessionMsg::PromptHooks(Box::new(answer)));
        }));
    }

    /// What the hooks answered: the start's context kept, or the message
    /// handed to the core (with what they added), or refused.
    pub(super) fn prompt_hooks_answered(&mut self, answer: PromptHooks) -> Option<AgentInput> {
        self.prompt_gate.pending = self.prompt_gate.pending.saturating_sub(1);
        match answer {
            PromptHooks::Started { context } => {
                self.prompt_gate.start_context = context;
                None
            }
            PromptHooks::Checked {
                submitted,
                cause,
                verdict,
            } => match verdict {
                PromptVerdict::Admit { context } => Some(self.take(submitted, context, cause)),
                refused @ PromptVerdict::Refuse { .. } => {
                    let refusal = refused.refusal().unwrap_or_default();
                    tracing::info!(parent: &self.span, %refusal, "a prompt was refused");
                    let previous = self.events.set_cause(cause);
                    self.emit(Event::OpRejected {
                        op: submitted.op().to_string(),
                        message: refusal,
                        retryable: false,
                    });
                    self.events.set_cause(previous);
                    None
                }
            },
        }
    }

    /// A person's message or goal as the op the core takes, with what the
    /// start's hooks and its own hooks added.
    fn take(
        &mut self,
        submitted: Submitted,
        context: Option<String>,
        cause: Option<String>,
    ) -> AgentInput {
        if let Submitted::Ordered(op) = submitted {
            return AgentInput::Op { op: *op, cause };
        }
        let start = self.prompt_gate.start_context.take();
        let added = |text: &str| {
            let text = with_context(text, HookEvent::SessionStart.as_str(), start.as_deref());
            with_context(
                &text,
                HookEvent::UserPromptSubmit.as_str(),
                context.as_deref(),
            )
        };
        let op = match submitted {
            Submitted::Message(text, intent) => Op::UserInput {
                text: added(&text),
                intent,
            },
            Submitted::Goal(action) => {
                let action = match *action {
                    GoalAction::Set {
                        objective,
                        budgets,
                        settings,
                    } => GoalAction::Set {
                        objective: added(&objective),
                        budgets,
                        settings,
                    },
                    other @ (GoalAction::Show | GoalAction::Command { .. } | GoalAction::Clear) => {
                        other
                    }
                };
                Op::Goal {
                    action: Box::new(action),
                }
            }
            Submitted::Ordered(op) => *op,
        };
        AgentInput::Op { op, cause }
    }
}

/// Whether `op` changes what a message admitted before it runs under, so
/// it must not overtake one whose hooks are still running.
fn ordered(op: &Op) -> bool {
    match op {
        Op::SetMode { .. }
        | Op::SetPosture { .. }
        | Op::SetModel { .. }
        | Op::Plan { .. }
        | Op::Restore { .. }
        | Op::Goal { .. }
        | Op::Compact => true,
        Op::UserInput { .. }
        | Op::Cancel
        | Op::Status
        | Op::Approve { .. }
        | Op::Answer { .. }
        | Op::Shutdown => false,
    }
}
