//! The schedule as a pure machine (W3, W4, W9–W11): `step(input) ->
//! effects`, no I/O, no clock.
//!
//! Each step becomes instances (one, or one per `for_each` item, expanded
//! when the steps it needs have results). An instance goes
//! `pending → dispatched → finalized → verified | failed | blocked |
//! cancelled`: *finalized* when its agent answered (and the answer parsed
//! and matched its schema), *verified* when its check passed. A step
//! without a check ends finalized. Only verified results are handed forward
//! from a step with a check; only finalized or verified ones at all.
//!
//! At most `max_parallel` instances are dispatched at once; the rest wait
//! in order. A step starts only when every step it needs has a result; a
//! failed, blocked or cancelled step blocks its dependents, with the cause,
//! and independent branches go on. A fan-out has a result when
//! `min_success` items (default: all) succeeded; `fail_fast` stops as soon
//! as that cannot happen. Failed attempts are retried `retries` times.
//!
//! Resume is exact: every instance is keyed by its step, item, rendered
//! prompt, settings and the outputs it builds on ([`key`]); an instance
//! whose key has a stored result takes it instead of running again.

mod cancel;
mod dispatch;
mod key;
pub mod outputs;
mod report;
mod types;

pub use key::instance_key;
pub use report::{Counts, InstanceReport, Report, StepOutcome, StepReport};
pub use types::{
    Effect, Input, Instance, MergeFailure, Settings, StepRun, StepStatus, Stored, Target,
};

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::Value;

use crate::model::{Check, ForEach, OnFailure, OutputKind, StepId, Workflow};
use crate::template::{INDEX_VAR, ITEM_VAR, Ref, Template, var_env_names};

use outputs::{FILE_THRESHOLD, output_file};

/// One instance of a step: the step and the item's index (0 for a step
/// without `for_each`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceId {
    /// The step.
    pub step: StepId,
    /// The item's index.
    pub index: usize,
}

/// Where an instance is in its life (W4): the store's and the
/// `step.state` event's type, under the name the machine uses.
pub use cadre_runtime::store::InstanceState as State;

/// How many times an instance goes back to the queue after transient
/// model failures before such a failure counts as a failed attempt.
pub const MAX_REQUEUES: u32 = 3;

/// The scheduler of one run.
#[derive(Debug, Clone)]
pub struct Scheduler {
    workflow: Workflow,
    settings: Settings,
    steps: Vec<StepRun>,
    running: usize,
    cancelled: bool,
    /// Why nothing more is dispatched (a budget ran out).
    halted: Option<String>,
    tokens: u64,
    agents: u64,
    done: bool,
}

impl Scheduler {
    /// A run of `workflow`; nothing happens until [`Input::Start`].
    pub fn new(workflow: Workflow, mut settings: Settings) -> Self {
        settings.max_parallel = settings.max_parallel.max(1);
        let steps = workflow
            .steps
            .iter()
            .map(|s| StepRun {
                status: StepStatus::Waiting,
                instances: if s.for_each.is_none() {
                    vec![Instance::new(None)]
                } else {
                    Vec::new()
                },
            })
            .collect();
        Self {
            workflow,
            settings,
            steps,
            running: 0,
            cancelled: false,
            halted: None,
            tokens: 0,
            agents: 0,
            done: false,
        }
    }

    /// The workflow.
    pub fn workflow(&self) -> &Workflow {
        &self.workflow
    }

    /// Every step as it stands.
    pub fn steps(&self) -> &[StepRun] {
        &self.steps
    }

    /// One instance.
    pub fn instance(&self, id: InstanceId) -> Option<&Instance> {
        self.steps.get(id.step)?.instances.get(id.index)
    }

    /// An instance's name: `review[3]`, or `summary` for a step without
    /// `for_each`.
    pub fn name(&self, id: InstanceId) -> String {
        instance_name(&self.workflow, id)
    }

    /// Instances dispatched and not yet answered or checked.
    pub fn running(&self) -> usize {
        self.running
    }

    /// Tokens spent so far.
    pub fn tokens(&self) -> u64 {
        self.tokens
    }

    /// Whether the run has ended.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Takes one input; returns what to do, in order.
    pub fn step(&mut self, input: Input) -> Vec<Effect> {
        let mut fx = Vec::new();
        if self.done {
            return fx;
        }
        match input {
            Input::Start => {
                for (s, run) in self.steps.iter().enumerate() {
                    for index in 0..run.instances.len() {
                        fx.push(Effect::State {
                            step: s,
                            index: Some(index),
                            state: State::Pending,
                            reason: None,
                        });
                    }
                }
            }
            Input::Answered { id, output, calls } => self.answered(id, output, calls, &mut fx),
            Input::AttemptFailed { id, reason } => {
                // Its agent, its check or its merge may end it: a crash or
                // a lost node while a check runs ends the attempt as surely
                // as a failed turn does.
                if self.attempt_live(id) {
                    self.running -= 1;
                    self.attempt_failed(id, reason, &mut fx);
                }
            }
            Input::Requeue { id, reason } => {
                if self.is(id, State::Dispatched) {
                    self.running -= 1;
                    self.requeue(id, reason, &mut fx);
                }
            }
            Input::Checked { id, passed, detail } => {
                let merging = self.instance(id).is_some_and(|i| i.merging);
                if self.is(id, State::Finalized) && self.checking(id) && !merging {
                    if passed && self.workflow.steps[id.step].merge {
                        self.merge(id, &mut fx);
                    } else if passed {
                        self.running -= 1;
                        self.set(id, State::Verified, None, &mut fx);
                    } else {
                        self.running -= 1;
                        self.attempt_failed(id, format!("check failed: {detail}"), &mut fx);
                    }
                }
            }
            Input::Merged { id, result } => self.merged(id, result, &mut fx),
            Input::Cancel(target) => self.cancel(target, &mut fx),
            Input::Tokens(n) => {
                self.tokens = self.tokens.saturating_add(n);
                if let Some(limit) = self.workflow.budget.tokens
                    && self.tokens >= limit
                    && self.halted.is_none()
                {
                    let why = format!("the run's token budget ({limit}) is spent");
                    self.halted = Some(why.clone());
                    self.cancel_all(&why, &mut fx);
                }
            }
            Input::AgentsStarted(n) => {
                self.agents += n;
                self.agent_budget(&mut fx);
            }
            Input::Halt(why) => {
                if self.halted.is_none() {
                    self.halt(why, &mut fx);
                }
            }
        }
        self.pump(&mut fx);
        fx
    }

    /// Whether an attempt of `id` holds a slot: its agent works, its check
    /// runs, or its worktree merges. Exactly these count in
    /// [`Scheduler::running`], and only these have a step actor.
    pub fn attempt_live(&self, id: InstanceId) -> bool {
        let Some(inst) = self.instance(id) else {
            return false;
        };
        match inst.state {
            State::Dispatched => true,
            State::Finalized => self.checking(id) || inst.merging,
            State::Pending
            | State::Verified
            | State::Failed
            | State::Blocked
            | State::Cancelled => false,
        }
    }

    fn is(&self, id: InstanceId, state: State) -> bool {
        self.instance(id).is_some_and(|i| i.state == state)
    }

    /// Whether a finalized instance's check is running (it has one and
    /// its answer was accepted).
    fn checking(&self, id: InstanceId) -> bool {
        self.workflow.steps[id.step].check.is_some()
    }

    fn inst(&mut self, id: InstanceId) -> &mut Instance {
        &mut self.steps[id.step].instances[id.index]
    }

    fn set(&mut self, id: InstanceId, state: State, reason: Option<String>, fx: &mut Vec<Effect>) {
        let inst = self.inst(id);
        inst.state = state;
        inst.reason.clone_from(&reason);
        fx.push(Effect::State {
            step: id.step,
            index: Some(id.index),
            state,
            reason,
        });
        if state.is_terminal() {
            self.settle_step(id.step, fx);
        }
    }

    fn answered(
        &mut self,
        id: InstanceId,
        output: String,
        calls: Vec<String>,
        fx: &mut Vec<Effect>,
    ) {
        if !self.is(id, State::Dispatched) {
            return;
        }
        let step = &self.workflow.steps[id.step];
        let json = match step.output {
            OutputKind::Text => None,
            OutputKind::Json => match outputs::parse_json(&output) {
                Ok(v) => Some(v),
                Err(why) => {
                    self.running -= 1;
                    return self.attempt_failed(id, why.to_string(), fx);
                }
            },
        };
        if let (Some(schema), Some(value)) = (&step.output_schema, &json)
            && let Err(why) = outputs::check_schema(schema, value)
        {
            self.running -= 1;
            return self.attempt_failed(id, why.to_string(), fx);
        }
        let check = step.check.clone();
        let step_merges = step.merge;
        let output = match &json {
            Some(v) if step.output == OutputKind::Json => v.to_string(),
            _ => output,
        };
        let file = (output.len() > FILE_THRESHOLD).then(|| self.file(id));
        let inst = self.inst(id);
        inst.output = Some(output.clone());
        inst.json = json;
        let no_calls = calls.is_empty();
        inst.calls = calls;
        fx.push(Effect::Output { id, output, file });
        match check {
            // The slot stays taken, the state dispatched, while it merges.
            None if step_merges => self.merge(id, fx),
            None => {
                self.running -= 1;
                self.set(id, State::Finalized, None, fx);
                self.settle_step(id.step, fx);
            }
            Some(_) if no_calls => {
                self.running -= 1;
                self.set(id, State::Finalized, None, fx);
                self.attempt_failed(
                    id,
                    "check failed: the step claims a result with no tool call behind it".into(),
                    fx,
                );
            }
            Some(check) => {
                // The slot stays taken while the check runs.
                self.set(id, State::Finalized, None, fx);
                let (check, env) = self.render_check(id, check);
                fx.push(Effect::RunCheck { id, check, env });
            }
        }
    }

    /// A check command with this instance's `{{item}}`, `{{index}}` and
    /// `{{vars.NAME}}` written as expansions of the variables it runs with
    /// (validation refuses any other reference in a check), and those
    /// variables: [`ITEM_VAR`] (a fan-out's item), [`INDEX_VAR`], and one
    /// per workflow variable ([`var_env_names`]). No value is ever text of
    /// the command.
    fn render_check(&self, id: InstanceId, check: Check) -> (Check, Vec<(String, String)>) {
        let Check::Command(text) = check else {
            return (check, Vec::new());
        };
        let item = self.instance(id).and_then(|i| i.item.clone());
        let template = Template::parse(&text).ok();
        let referenced = template
            .iter()
            .flat_map(|t| t.refs())
            .filter_map(|(r, _)| match r {
                Ref::Var(name) => Some(name.as_str()),
                Ref::Item | Ref::Index | Ref::Output(_) | Ref::Outputs(_) => None,
            });
        let vars = var_env_names(
            self.workflow
                .vars
                .keys()
                .map(String::as_str)
                .chain(referenced),
        );
        let env = self.check_env(id, item.as_ref(), &vars);
        let command = match template {
            Some(template) => template.render_shell(|r| match r {
                Ref::Item => ITEM_VAR.to_string(),
                Ref::Var(name) => vars.get(name).cloned().unwrap_or_default(),
                Ref::Index => INDEX_VAR.to_string(),
                // Refused in a check by validation: a step's output is the
                // model's text. Were it there, it would read as empty.
                Ref::Output(_) | Ref::Outputs(_) => "CADRE_UNSET".to_string(),
            }),
            // Validated: it parses. Unparsed, it runs as written.
            None => text,
        };
        (Check::Command(command), env)
    }

    /// The variables a check of instance `id` (with `item`) runs with:
    /// [`INDEX_VAR`], [`ITEM_VAR`] in a fan-out, and each of `vars`
    /// (workflow variable → its check variable) with its value.
    fn check_env(
        &self,
        id: InstanceId,
        item: Option<&Value>,
        vars: &BTreeMap<String, String>,
    ) -> Vec<(String, String)> {
        let mut env = vec![(INDEX_VAR.to_string(), id.index.to_string())];
        if item.is_some() {
            env.push((
                ITEM_VAR.to_string(),
                self.lookup(&Ref::Item, item, id.index),
            ));
        }
        for (name, var) in vars {
            let value = self.lookup(&Ref::Var(name.clone()), item, id.index);
            env.push((var.clone(), value));
        }
        env
    }

    fn file(&self, id: InstanceId) -> PathBuf {
        output_file(
            &self.settings.outputs_dir,
            &self.workflow.steps[id.step].name,
            id.index,
        )
    }

    /// Asks for the instance's worktree to be merged back.
    fn merge(&mut self, id: InstanceId, fx: &mut Vec<Effect>) {
        self.inst(id).merging = true;
        fx.push(Effect::Merge { id });
    }

    /// The merge ended: the instance is verified (with a check) or
    /// finalized, or failed at once when its changes could not come back
    /// (a conflict is not retried: the workspace moved under it).
    fn merged(
        &mut self,
        id: InstanceId,
        result: Result<Vec<String>, MergeFailure>,
        fx: &mut Vec<Effect>,
    ) {
        let Some(inst) = self.instance(id) else {
            return;
        };
        if !inst.merging || inst.state.is_terminal() {
            return;
        }
        self.inst(id).merging = false;
        self.running -= 1;
        match result {
            Ok(_) if self.checking(id) => self.set(id, State::Verified, None, fx),
            Ok(_) => {
                self.set(id, State::Finalized, None, fx);
                self.settle_step(id.step, fx);
            }
            Err(why) => self.set(id, State::Failed, Some(why.to_string()), fx),
        }
    }

    /// An attempt hit a transient model failure: back to the queue, its
    /// attempt not spent, while re-queues are left.
    /// Once nothing more is dispatched (a halt, a cancelled run), it would
    /// wait in the queue forever: it fails like any attempt then.
    fn requeue(&mut self, id: InstanceId, reason: String, fx: &mut Vec<Effect>) {
        let stopped = self.cancelled || self.halted.is_some();
        let inst = self.inst(id);
        if inst.requeues >= MAX_REQUEUES || stopped {
            return self.attempt_failed(id, reason, fx);
        }
        inst.requeues += 1;
        inst.attempts -= 1;
        let n = inst.requeues;
        self.set(
            id,
            State::Pending,
            Some(format!(
                "re-queued ({n} of {MAX_REQUEUES}) after a transient model failure: {reason}"
            )),
            fx,
        );
    }

    /// An attempt failed: retried while attempts are left, else failed.
    fn attempt_failed(&mut self, id: InstanceId, reason: String, fx: &mut Vec<Effect>) {
        let retries = self.workflow.steps[id.step].retries;
        let attempts = self.instance(id).map_or(0, |i| i.attempts);
        self.inst(id).merging = false;
        if attempts <= retries && !self.cancelled && self.halted.is_none() {
            let inst = self.inst(id);
            inst.output = None;
            inst.json = None;
            self.set(
                id,
                State::Pending,
                Some(format!(
                    "retrying (attempt {} of {}): {reason}",
                    attempts + 1,
                    retries + 1
                )),
                fx,
            );
        } else {
            self.set(id, State::Failed, Some(reason), fx);
        }
    }

    /// A step whose instances are all terminal gets its status; a fan-out
    /// that can no longer reach `min_success` under `fail_fast` stops.
    fn settle_step(&mut self, s: StepId, fx: &mut Vec<Effect>) {
        if !matches!(self.steps[s].status, StepStatus::Running) {
            return;
        }
        let step = &self.workflow.steps[s];
        let has_check = step.check.is_some();
        let total = self.steps[s].instances.len();
        let need = step.min_success.map_or(total, |n| n as usize);
        let instances = &self.steps[s].instances;
        let succeeded = instances.iter().filter(|i| i.succeeded(has_check)).count();
        let open = instances.iter().filter(|i| !i.state.is_terminal()).count()
            - instances
                .iter()
                .filter(|i| i.state == State::Finalized && !has_check)
                .count();
        let hopeless = succeeded + open < need;
        if open > 0 && !(hopeless && step.on_failure == OnFailure::FailFast) {
            return;
        }
        let single = step.for_each.is_none();
        if open > 0 {
            let why = format!(
                "fail_fast: step '{}' can no longer reach {need} successful items",
                step.name
            );
            for index in 0..total {
                let id = InstanceId { step: s, index };
                self.cancel_instance(id, &why, fx);
            }
        }
        let status = if succeeded >= need {
            StepStatus::Succeeded
        } else if total == 1 && single {
            let inst = &self.steps[s].instances[0];
            match inst.state {
                State::Cancelled => StepStatus::Cancelled(inst.reason.clone().unwrap_or_default()),
                State::Pending
                | State::Dispatched
                | State::Finalized
                | State::Verified
                | State::Failed
                | State::Blocked => {
                    StepStatus::Failed(inst.reason.clone().unwrap_or_else(|| "failed".into()))
                }
            }
        } else {
            StepStatus::Failed(format!(
                "{} of {total} items succeeded; it needs {need}",
                succeeded
            ))
        };
        self.steps[s].status = status;
    }

    /// Expands, blocks and dispatches what it can; ends the run when
    /// nothing is left.
    fn pump(&mut self, fx: &mut Vec<Effect>) {
        loop {
            let mut changed = false;
            for s in 0..self.steps.len() {
                if self.steps[s].status == StepStatus::Waiting {
                    changed |= self.open_step(s, fx);
                }
            }
            if !changed {
                break;
            }
        }
        if self.halted.is_none() && !self.cancelled {
            // What was re-queued waits behind what has not run yet.
            let steps = self.steps.len();
            'dispatch: for (s, requeued) in [false, true]
                .into_iter()
                .flat_map(|r| (0..steps).map(move |s| (s, r)))
            {
                if self.steps[s].status != StepStatus::Running {
                    continue;
                }
                for index in 0..self.steps[s].instances.len() {
                    let id = InstanceId { step: s, index };
                    if !self
                        .instance(id)
                        .is_some_and(|i| i.state == State::Pending && (i.requeues > 0) == requeued)
                    {
                        continue;
                    }
                    if self.running >= self.settings.max_parallel {
                        break 'dispatch;
                    }
                    if let Some(limit) = self.workflow.budget.agents
                        && self.agents >= limit
                    {
                        self.agent_budget(fx);
                        break 'dispatch;
                    }
                    self.dispatch(id, fx);
                }
            }
            // Restored results may have settled steps whose dependents can
            // now open.
            if self.steps.iter().any(|s| s.status == StepStatus::Waiting) && self.ready_any() {
                return self.pump(fx);
            }
        }
        let open = self
            .steps
            .iter()
            .any(|s| matches!(s.status, StepStatus::Waiting | StepStatus::Running));
        if !open && self.running == 0 {
            self.done = true;
            fx.push(Effect::Done(self.report()));
        }
    }

    fn ready_any(&self) -> bool {
        (0..self.steps.len()).any(|s| {
            self.steps[s].status == StepStatus::Waiting
                && self.workflow.steps[s].needs.iter().all(|&n| {
                    !matches!(
                        self.steps[n].status,
                        StepStatus::Waiting | StepStatus::Running
                    )
                })
        })
    }
}

/// An instance's name: `review[3]`, or `summary` without `for_each`.
pub fn instance_name(workflow: &Workflow, id: InstanceId) -> String {
    let step = &workflow.steps[id.step];
    if step.for_each.is_some() {
        format!("{}[{}]", step.name, id.index)
    } else {
        step.name.clone()
    }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod endings;
#[cfg(test)]
mod tests;
