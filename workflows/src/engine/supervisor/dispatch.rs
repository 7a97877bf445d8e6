//! Where and when a step attempt starts: a slot in the cluster (or here),
//! a queue of attempts waiting for one, and the attempt's actor; and how a
//! slot is given back when the attempt ends.

use std::sync::Arc;

use cadre_runtime::agent::AgentPath;
use ractor::{Actor, ActorRef};

use super::{Live, SupervisorMsg, SupervisorState, Waiting};
use crate::cluster::places::Place;
use crate::engine::ids::step_prefix;
use crate::engine::meter::metered;
use crate::engine::step::{Placement, StepActor, StepArgs, StepMsg};
use crate::model::{Check, Isolation};
use crate::scheduler::{Input, InstanceId};

impl SupervisorState {
    /// Ends the attempt `id` runs, if any: its actor is told to stop and
    /// is waited for (its slot given back) apart from the instance, whose
    /// next attempt may start at once.
    pub(super) fn retire(&mut self, id: InstanceId) {
        if let Some(live) = self.live.remove(&id) {
            let _ = live.actor.cast(StepMsg::Stop);
            self.ending.insert(live.actor.get_id(), live);
        }
    }

    /// Gives back the slot an ended attempt held.
    pub(super) fn release(&self, live: &Live) {
        if let (Some(cluster), Some(place)) = (&self.cluster, &live.place) {
            cluster.release(place);
        }
    }

    /// Starts the waiting attempts that now find a slot, first first.
    pub(super) async fn place_waiting(&mut self, myself: &ActorRef<SupervisorMsg>) {
        while let Some(next) = self.waiting.pop_front() {
            let Some(place) = self.take_place(next.id) else {
                self.waiting.push_front(next);
                return;
            };
            self.dispatch_at(myself, next.id, next.prompt, next.scope, Some(place))
                .await;
        }
    }

    /// A slot for the next attempt of `id`; `None` without a cluster, or
    /// when every place it may use is full. A step in a worktree of its own
    /// or judged by a verifier runs on the coordinator, where both are.
    pub(super) fn take_place(&self, id: InstanceId) -> Option<Place> {
        let cluster = self.cluster.as_ref()?;
        let step = &self.scheduler.workflow().steps[id.step];
        if step.isolation == Isolation::Worktree || step.check == Some(Check::Verifier) {
            return cluster.take_local();
        }
        cluster.take(self.caller.spec.workspace.root())
    }

    /// Starts an attempt when a slot is free, else queues it.
    pub(super) async fn dispatch(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        id: InstanceId,
        prompt: String,
        scope: Vec<String>,
    ) {
        if self.cluster.is_none() {
            return self.dispatch_at(myself, id, prompt, scope, None).await;
        }
        match self.take_place(id) {
            Some(place) if self.waiting.is_empty() => {
                self.dispatch_at(myself, id, prompt, scope, Some(place))
                    .await;
            }
            taken => {
                if let Some(place) = taken {
                    self.release_place(&place);
                }
                self.waiting.push_back(Waiting { id, prompt, scope });
                Box::pin(self.place_waiting(myself)).await;
            }
        }
    }

    pub(super) fn release_place(&self, place: &Place) {
        if let Some(cluster) = &self.cluster {
            cluster.release(place);
        }
    }

    /// Starts an attempt at `place`: the step's agent spec, then its actor.
    pub(super) async fn dispatch_at(
        &mut self,
        myself: &ActorRef<SupervisorMsg>,
        id: InstanceId,
        prompt: String,
        scope: Vec<String>,
        place: Option<Place>,
    ) {
        self.next_agent += 1;
        let path = AgentPath::root().child(self.next_agent);
        // Kept to place the attempt again if its node turns out to be gone.
        let again = matches!(place, Some(Place::Node(_))).then(|| Waiting {
            id,
            prompt: prompt.clone(),
            scope: scope.clone(),
        });
        let spec = match self.spec_for(id, &path, scope) {
            Ok(spec) => spec,
            Err(reason) => {
                if let Some(place) = &place {
                    self.release_place(place);
                }
                let effects = self.scheduler.step(Input::AttemptFailed { id, reason });
                return Box::pin(self.perform(myself, effects)).await;
            }
        };
        let step = &self.scheduler.workflow().steps[id.step];
        self.agents.insert(id, spec.row_id());
        let mut services = match self.services_for(step.role.as_deref()) {
            Ok(services) => services,
            Err(err) => {
                if let Some(place) = &place {
                    self.release_place(place);
                }
                let reason = err.to_string();
                let effects = self.scheduler.step(Input::AttemptFailed { id, reason });
                return Box::pin(self.perform(myself, effects)).await;
            }
        };
        // What its sub-agents spend is the step's.
        let plain = services.subagents.clone();
        services.subagents = plain
            .as_deref()
            .map(|s| Arc::new(metered(s, myself.clone(), id)));
        let placement = match (&self.cluster, &place) {
            (Some(cluster), Some(Place::Node(node))) => {
                self.nodes.insert(id, node.clone());
                Placement::Remote {
                    cluster: cluster.clone(),
                    node: node.clone(),
                    order: Box::new(self.order(&spec, &prompt)),
                }
            }
            (None, _) | (_, None | Some(Place::Local)) => {
                self.nodes.remove(&id);
                Placement::Local
            }
        };
        let args = StepArgs {
            id,
            prefix: step_prefix(&step.name, id.index),
            place: placement,
            supervisor: myself.clone(),
            sandbox: spec.sandbox.clone(),
            tmp: spec.paths.dir.join("tmp"),
            spec,
            subagents: plain,
            worktree: (step.isolation == Isolation::Worktree).then(|| {
                let run: String = self.run_id.chars().take(8).collect();
                format!("{run}-{}-{}-{}", step.name, id.index, self.next_agent)
            }),
            services,
            prompt,
            timeout: step.timeout,
            idle_timeout: step.idle_timeout,
        };
        match Actor::spawn_linked(None, StepActor, args, myself.get_cell()).await {
            Ok((actor, _)) => {
                if let Some(again) = again {
                    self.unstarted.insert(id, again);
                }
                // An earlier attempt still held is ended, never orphaned.
                self.retire(id);
                self.live.insert(id, Live { actor, path, place });
            }
            // Its start (worktree, agent, node) fails later, as a report.
            Err(err) => {
                if let Some(place) = &place {
                    self.release_place(place);
                }
                let effects = self.scheduler.step(Input::AttemptFailed {
                    id,
                    reason: format!("the step could not start: {err}"),
                });
                Box::pin(self.perform(myself, effects)).await;
            }
        }
    }
}
