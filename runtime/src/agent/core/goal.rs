//! The goal in the core (G1–G8): what [`GoalSession`] decides becomes the
//! agent's effects.
//!
//! A completion claim holds the queue (the session stays `running`) while
//! the verifier works, so no other turn starts between a claim and its
//! verdict. A continuation (or the summary turn after a budget stop) is
//! admitted to the store's queue in the goal's own transaction before the
//! queue moves on: a crash leaves it stored, and a resume runs it once.
//!
//! [`GoalSession`]: crate::goal::GoalSession

use super::{AgentCore, AgentEffect, Ask, Waiting, Work, Write, reject};
use crate::agent::ChildState;
use crate::goal::{Dependencies, GoalEffect, GoalSession, Surroundings};
use crate::lifecycle::{QueueEffect, QueueInput, Queued};
use crate::protocol::Event;
use crate::store::StoreError;

impl AgentCore {
    /// What the goal machine needs to know of the agent now.
    pub(super) fn surroundings(&self) -> Surroundings {
        Surroundings {
            queue_empty: self.queue.is_empty(),
            would_start_now: self.queue.would_start_now(),
            dependencies: Dependencies {
                questionnaire: self.questionnaire.is_some(),
                approval: false,
                background: self
                    .children
                    .iter()
                    .filter(|(_, c)| c.state == ChildState::Running)
                    .count(),
            },
        }
    }

    /// Steps the goal at a hook and puts its effects first on the agenda.
    pub(super) fn goal_hook(
        &mut self,
        hook: impl FnOnce(&mut GoalSession, &Surroundings) -> Vec<GoalEffect>,
    ) {
        let at = self.surroundings();
        let effects = hook(&mut self.goal, &at);
        self.first(effects.into_iter().map(Work::Goal).collect());
    }

    /// Does one thing the goal decided.
    pub(super) fn goal_effect(&mut self, effect: GoalEffect, out: &mut Vec<AgentEffect>) {
        match effect {
            GoalEffect::Store(goal) => out.push(AgentEffect::Persist(Write::Goal(goal))),
            GoalEffect::Forget => out.push(AgentEffect::Persist(Write::ForgetGoal)),
            GoalEffect::Emit(event) => out.push(AgentEffect::Emit(event)),
            GoalEffect::Reject(why) => reject(out, "goal", why),
            GoalEffect::Admit { goal, text, n } => {
                let ask = Ask::Continue {
                    goal,
                    text: text.clone(),
                    n,
                };
                self.ask(ask, Waiting::Continue { text, n }, out);
            }
            GoalEffect::MarkDone { queue_id } => {
                if let Some(queue_id) = queue_id {
                    out.push(AgentEffect::Persist(Write::Done(queue_id)));
                }
            }
            GoalEffect::Verify {
                turn_id,
                objective,
                claim,
                settings,
                seq,
            } => out.push(AgentEffect::Verify {
                turn_id,
                objective,
                claim,
                settings,
                seq,
            }),
            GoalEffect::EndTurn => {
                if self.turn_live {
                    out.push(AgentEffect::EndTurnAfterTools);
                }
            }
            GoalEffect::Note(why) => out.push(AgentEffect::Log(format!("goal: {why}"))),
        }
    }

    /// A continuation was admitted (or not): it joins the queue, with no
    /// `input.admitted` (it is not a person's input).
    pub(super) fn continued(
        &mut self,
        text: String,
        n: u64,
        continued: Result<i64, StoreError>,
        out: &mut Vec<AgentEffect>,
    ) {
        let id = match continued {
            Ok(id) => id,
            Err(err) => {
                return out.push(AgentEffect::Log(format!(
                    "the continuation could not be admitted: {err}"
                )));
            }
        };
        out.push(AgentEffect::Emit(Event::GoalContinuation { n }));
        let message = Queued {
            id: Some(id),
            text,
            interrupted: false,
            cause: None,
            internal: true,
        };
        let effects = self.queue.step(QueueInput::Admitted(message));
        self.agenda.extend(
            effects
                .into_iter()
                .filter(|e| !matches!(e, QueueEffect::Acknowledge { .. }))
                .map(Work::Queued),
        );
    }
}
