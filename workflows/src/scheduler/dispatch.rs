//! Opening steps (blocked, or expanded into instances) and dispatching
//! instances: rendering, keys, stored results, hand-forward.

use serde_json::Value;

use super::outputs::{Element, capped, capped_array};
use super::{
    Effect, ForEach, Instance, InstanceId, OutputKind, Scheduler, State, StepId, StepStatus,
    Stored, instance_key, json_kind, outputs,
};
use crate::template::Ref;

impl Scheduler {
    /// A waiting step whose needs are settled is blocked or opened (its
    /// fan-out expanded). True when it changed.
    pub(super) fn open_step(&mut self, s: StepId, fx: &mut Vec<Effect>) -> bool {
        let step = &self.workflow.steps[s];
        let mut cause = None;
        for &n in &step.needs {
            let other = &self.workflow.steps[n].name;
            match &self.steps[n].status {
                StepStatus::Waiting | StepStatus::Running => return false,
                StepStatus::Succeeded => {}
                StepStatus::Failed(why) => {
                    cause.get_or_insert(format!("needs '{other}', which failed: {why}"));
                }
                StepStatus::Blocked(why) => {
                    cause.get_or_insert(format!("needs '{other}', which is blocked: {why}"));
                }
                StepStatus::Cancelled(why) => {
                    cause.get_or_insert(format!("needs '{other}', which was cancelled: {why}"));
                }
            }
        }
        if self.cancelled || self.halted.is_some() {
            let why = self
                .halted
                .clone()
                .unwrap_or_else(|| "the run was cancelled".into());
            self.cancel_step(s, &why, fx);
            return true;
        }
        if let Some(cause) = cause {
            self.block(s, cause, fx);
            return true;
        }
        if let Some(for_each) = step.for_each.clone() {
            let items = match for_each {
                ForEach::Literal(items) => Ok(items),
                ForEach::Output(source) => self.list_of(source),
            };
            match items {
                Ok(items) => {
                    self.steps[s].instances = items
                        .iter()
                        .cloned()
                        .map(|i| Instance::new(Some(i)))
                        .collect();
                    fx.push(Effect::Expanded { step: s, items });
                    for index in 0..self.steps[s].instances.len() {
                        fx.push(Effect::State {
                            step: s,
                            index: Some(index),
                            state: State::Pending,
                            reason: None,
                        });
                    }
                }
                Err(why) => {
                    self.steps[s].status = StepStatus::Failed(why.clone());
                    fx.push(Effect::State {
                        step: s,
                        index: None,
                        state: State::Failed,
                        reason: Some(why),
                    });
                    return true;
                }
            }
        }
        self.steps[s].status = StepStatus::Running;
        // An empty fan-out has its (empty) result at once.
        self.settle_step(s, fx);
        true
    }

    pub(super) fn block(&mut self, s: StepId, cause: String, fx: &mut Vec<Effect>) {
        if self.steps[s].instances.is_empty() {
            fx.push(Effect::State {
                step: s,
                index: None,
                state: State::Blocked,
                reason: Some(cause.clone()),
            });
        }
        for index in 0..self.steps[s].instances.len() {
            let inst = &mut self.steps[s].instances[index];
            inst.state = State::Blocked;
            inst.reason = Some(cause.clone());
            fx.push(Effect::State {
                step: s,
                index: Some(index),
                state: State::Blocked,
                reason: Some(cause.clone()),
            });
        }
        self.steps[s].status = StepStatus::Blocked(cause);
    }

    /// The JSON list a step answered.
    pub(super) fn list_of(&self, source: StepId) -> Result<Vec<Value>, String> {
        let name = &self.workflow.steps[source].name;
        match self.steps[source]
            .instances
            .first()
            .and_then(|i| i.json.clone())
        {
            Some(Value::Array(items)) => Ok(items),
            Some(other) => Err(format!(
                "for_each: step '{name}' answered {}, not a JSON list",
                json_kind(&other)
            )),
            None => Err(format!("for_each: step '{name}' has no JSON answer")),
        }
    }

    pub(super) fn dispatch(&mut self, id: InstanceId, fx: &mut Vec<Effect>) {
        let step = &self.workflow.steps[id.step];
        let item = self.steps[id.step].instances[id.index].item.clone();
        let prompt = step
            .prompt
            .render(|r| self.lookup(r, item.as_ref(), id.index));
        let scope: Vec<String> = step
            .scope
            .iter()
            .map(|t| t.render(|r| self.lookup(r, item.as_ref(), id.index)))
            .collect();
        let upstream: Vec<String> = step
            .needs
            .iter()
            .flat_map(|&n| self.steps[n].instances.iter())
            .filter_map(|i| i.output.clone())
            .collect();
        let key = instance_key(step, item.as_ref(), &prompt, &scope, &upstream);
        let stored = self.settings.stored.get(&key).cloned();
        self.inst(id).key = Some(key.clone());
        if let Some(stored) = stored {
            let taken = match stored.state {
                State::Verified | State::Finalized => true,
                State::Failed => !self.settings.retry_failed,
                // Unfinished, or ended with nothing to keep: run it again.
                State::Pending | State::Dispatched | State::Blocked | State::Cancelled => false,
            };
            if taken {
                return self.restore(id, stored, fx);
            }
        }
        let inst = self.inst(id);
        inst.attempts += 1;
        let attempt = inst.attempts;
        self.running += 1;
        self.agents += 1;
        fx.push(Effect::State {
            step: id.step,
            index: Some(id.index),
            state: State::Dispatched,
            reason: None,
        });
        self.inst(id).state = State::Dispatched;
        fx.push(Effect::Dispatch {
            id,
            prompt,
            scope,
            key,
            attempt,
        });
    }

    pub(super) fn restore(&mut self, id: InstanceId, stored: Stored, fx: &mut Vec<Effect>) {
        let step = &self.workflow.steps[id.step];
        let json = match (step.output, &stored.output) {
            (OutputKind::Json, Some(text)) => outputs::parse_json(text).ok(),
            (OutputKind::Json, None) | (OutputKind::Text, _) => None,
        };
        let inst = self.inst(id);
        inst.output = stored.output;
        inst.json = json;
        inst.restored = true;
        let reason = match stored.state {
            State::Failed => stored
                .reason
                .map(|r| format!("failed in an earlier run: {r}")),
            State::Pending
            | State::Dispatched
            | State::Finalized
            | State::Verified
            | State::Blocked
            | State::Cancelled => Some("restored from an earlier run".into()),
        };
        self.set(id, stored.state, reason, fx);
        self.settle_step(id.step, fx);
    }

    /// A reference's text for an instance with `item` at `index`.
    pub(super) fn lookup(&self, r: &Ref, item: Option<&Value>, index: usize) -> String {
        match r {
            Ref::Var(name) => self.workflow.vars.get(name).cloned().unwrap_or_default(),
            Ref::Item => match item {
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            },
            Ref::Index => index.to_string(),
            Ref::Output(name) => {
                let Some(s) = self.workflow.step_id(name) else {
                    return String::new();
                };
                let cap = self.workflow.steps[s].max_output_bytes;
                let id = InstanceId { step: s, index: 0 };
                match self.instance(id).and_then(|i| i.output.as_deref()) {
                    Some(out) => capped(out, cap, &self.file(id), &self.name(id)),
                    None => String::new(),
                }
            }
            Ref::Outputs(name) => {
                let Some(s) = self.workflow.step_id(name) else {
                    return "[]".into();
                };
                let has_check = self.workflow.steps[s].check.is_some();
                let elements: Vec<Element<'_>> = self.steps[s]
                    .instances
                    .iter()
                    .enumerate()
                    .filter(|(_, i)| i.succeeded(has_check))
                    .filter_map(|(index, i)| {
                        let id = InstanceId { step: s, index };
                        Some(Element {
                            name: self.name(id),
                            text: i.output.as_deref()?,
                            json: i.json.as_ref(),
                            file: self.file(id),
                        })
                    })
                    .collect();
                capped_array(&elements, self.workflow.steps[s].max_output_bytes)
            }
        }
    }
}
