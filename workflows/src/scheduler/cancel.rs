//! Cancelling (a run, a step, one item) and stopping early (budgets, a
//! terminal model refusal).

use super::{Effect, InstanceId, Scheduler, State, StepId, StepStatus, Target};

impl Scheduler {
    pub(super) fn cancel_instance(&mut self, id: InstanceId, why: &str, fx: &mut Vec<Effect>) {
        let Some(state) = self.instance(id).map(|i| i.state) else {
            return;
        };
        let has_check = self.workflow.steps[id.step].check.is_some();
        match state {
            State::Pending => {}
            State::Dispatched => {
                self.running -= 1;
                fx.push(Effect::Stop { id });
            }
            State::Finalized if has_check => {
                self.running -= 1;
                fx.push(Effect::Stop { id });
            }
            State::Finalized
            | State::Verified
            | State::Failed
            | State::Blocked
            | State::Cancelled => return,
        }
        let inst = self.inst(id);
        inst.state = State::Cancelled;
        inst.reason = Some(why.to_string());
        fx.push(Effect::State {
            step: id.step,
            index: Some(id.index),
            state: State::Cancelled,
            reason: Some(why.to_string()),
        });
    }

    pub(super) fn cancel(&mut self, target: Target, fx: &mut Vec<Effect>) {
        match target {
            Target::Run => {
                self.cancelled = true;
                self.cancel_all("the run was cancelled", fx);
            }
            Target::Step(s) => {
                let name = self.workflow.steps[s].name.clone();
                self.cancel_step(s, &format!("step '{name}' was cancelled"), fx);
            }
            Target::Instance(id) => {
                let why = format!("{} was cancelled", self.name(id));
                self.cancel_instance(id, &why, fx);
                self.settle_step(id.step, fx);
            }
        }
    }

    pub(super) fn cancel_step(&mut self, s: StepId, why: &str, fx: &mut Vec<Effect>) {
        match self.steps[s].status {
            StepStatus::Waiting => {
                for index in 0..self.steps[s].instances.len() {
                    self.cancel_instance(InstanceId { step: s, index }, why, fx);
                }
                if self.steps[s].instances.is_empty() {
                    fx.push(Effect::State {
                        step: s,
                        index: None,
                        state: State::Cancelled,
                        reason: Some(why.to_string()),
                    });
                }
                self.steps[s].status = StepStatus::Cancelled(why.to_string());
            }
            StepStatus::Running => {
                for index in 0..self.steps[s].instances.len() {
                    self.cancel_instance(InstanceId { step: s, index }, why, fx);
                }
                self.settle_step(s, fx);
            }
            StepStatus::Succeeded
            | StepStatus::Failed(_)
            | StepStatus::Blocked(_)
            | StepStatus::Cancelled(_) => {}
        }
    }

    /// Cancels every step not done, stopping what runs.
    pub(super) fn cancel_all(&mut self, why: &str, fx: &mut Vec<Effect>) {
        for s in 0..self.steps.len() {
            self.cancel_step(s, why, fx);
        }
    }

    /// The agent budget: once spent, nothing more starts; what runs goes on.
    pub(super) fn agent_budget(&mut self, fx: &mut Vec<Effect>) {
        let Some(limit) = self.workflow.budget.agents else {
            return;
        };
        if self.agents < limit || self.halted.is_some() {
            return;
        }
        self.halt(format!("the run's agent budget ({limit}) is spent"), fx);
    }

    /// Nothing more starts; what waits is cancelled with `why`; what runs
    /// goes on.
    pub(super) fn halt(&mut self, why: String, fx: &mut Vec<Effect>) {
        self.halted = Some(why.clone());
        for s in 0..self.steps.len() {
            for index in 0..self.steps[s].instances.len() {
                let id = InstanceId { step: s, index };
                if self.is(id, State::Pending) {
                    self.cancel_instance(id, &why, fx);
                }
            }
            match self.steps[s].status {
                StepStatus::Waiting => self.cancel_step(s, &why, fx),
                StepStatus::Running => self.settle_step(s, fx),
                // It has its result already.
                StepStatus::Succeeded
                | StepStatus::Failed(_)
                | StepStatus::Blocked(_)
                | StepStatus::Cancelled(_) => {}
            }
        }
    }
}
